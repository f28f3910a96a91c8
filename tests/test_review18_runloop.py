"""What the run loop's last round left (round 18): the order of a resume's refusals, the
prompt a resume checks before its waiting calls, the road an error names, and what an
answer by digest binds.

The time is the gateway's fixed ``clock``: no test sleeps or measures time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import cast

import pytest
from test_deferred_expiry import HOUR, PAUSED_AT, SYSTEM, at, gateway, make_view, paused
from test_review17_runloop import _DropsATool, _resume_approved

from veridic import (
    ApprovalExpiredError,
    ApprovalMode,
    ApprovalPolicy,
    Composer,
    ModelGateway,
    PausedRun,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
)
from veridic.text.fence import preamble
from veridic.text.prompt import Prompt
from veridic.tools.tool import JsonObject

# --- an expired paused run through an adapter the send refuses -----------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_expired_paused_run_through_a_refused_adapter_says_first_that_it_expired(
    asynchronous: bool,
) -> None:
    # The adapter's request was checked before the answers' age: the user was told of the
    # tool list, fixed it, resumed again, and only then learnt that nothing could run.
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    composer = Composer().system(SYSTEM)
    resuming = ModelGateway(
        _DropsATool([{"text": "Refunded."}], asynchronous=asynchronous),
        audit=audit,
        clock=at(PAUSED_AT + 25 * HOUR),
    )
    with pytest.raises(ApprovalExpiredError) as raised:
        _resume_approved(resuming, run, composer, view, asynchronous=asynchronous)
    assert ran == []
    waited = [r for r in audit.records("req-1") if r.call_id in {"c2", "c3"}]
    assert [(r.call_id, r.approval) for r in waited] == [
        ("c2", ApprovalMode.DENIED),
        ("c3", ApprovalMode.DENIED),
    ]
    # The refusal the next send will meet is said too, not left for the next run to find.
    notes = " ".join(getattr(raised.value, "__notes__", ()))
    assert "ToolCouplingError" in notes
    assert "dispatchable but not sent: refund" in notes


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_expired_paused_run_through_a_right_adapter_carries_no_note(
    asynchronous: bool,
) -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    resuming = gateway(
        [{"text": "Refunded."}], audit, at(PAUSED_AT + 25 * HOUR), asynchronous=asynchronous
    )
    with pytest.raises(ApprovalExpiredError) as raised:
        _resume_approved(resuming, run, Composer().system(SYSTEM), view, asynchronous=asynchronous)
    assert ran == []
    assert getattr(raised.value, "__notes__", []) == []


# --- the prompt a resume checks is the one its send builds ---------------------------------


class _Seeing(ScriptedProvider):
    """An adapter that keeps every prompt it is asked to make a request of."""

    def __init__(self, script: Sequence[Mapping[str, object]], *, asynchronous: bool) -> None:
        super().__init__(script, asynchronous=asynchronous)
        self.seen: list[Prompt] = []

    def request(
        self, prompt: Prompt, specs: Sequence[Mapping[str, object]], options: Mapping[str, object]
    ) -> JsonObject:
        self.seen.append(prompt)
        return super().request(prompt, specs, options)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_prompt_a_resume_checks_is_the_prompt_its_send_builds(asynchronous: bool) -> None:
    # The checked prompt's system message had no fence preamble (the send's has one: the
    # conversation holds blocks), and each waiting call's stand-in result said it succeeded.
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    seeing = _Seeing([{"text": "Refunded."}], asynchronous=asynchronous)
    resuming = ModelGateway(seeing, audit=audit, clock=at(PAUSED_AT + HOUR))
    _resume_approved(resuming, run, Composer().system(SYSTEM), view, asynchronous=asynchronous)
    assert ran == ["refund 42", "get_order 43"]
    checked, sent = seeing.seen
    assert checked.messages[0] == sent.messages[0]  # the system message, preamble included
    assert preamble("datamark") in checked.messages[0].content
    assert [m.role for m in checked.messages] == [m.role for m in sent.messages]
    waiting = {"c2", "c3"}
    assert [m for m in checked.messages if m.tool_call_id not in waiting] == [
        m for m in sent.messages if m.tool_call_id not in waiting
    ]
    stand_ins = [m for m in checked.messages if m.tool_call_id in waiting]
    assert [m.tool_call_id for m in stand_ins] == ["c2", "c3"]
    assert all(m.tool_error for m in stand_ins)  # not run yet: no result says it succeeded


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_resume_whose_system_part_holds_another_modes_preamble_runs_no_waiting_call(
    asynchronous: bool,
) -> None:
    # The system part alone passed (no block, no preamble needed); the first send, with the
    # conversation's datamark blocks, refused it after the refund had run.
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    composer = Composer().system(SYSTEM, preamble("verbatim"))
    resuming = gateway(
        [{"text": "Refunded."}], audit, at(PAUSED_AT + HOUR), asynchronous=asynchronous
    )
    with pytest.raises(VeridicError, match="not the one for the data modes"):
        _resume_approved(resuming, run, composer, view, asynchronous=asynchronous)
    assert ran == []
    assert composer.conversation().turns == ()
    assert [r.call_id for r in audit.records("req-1")] == ["c1"]  # only what ran before


# --- an error names the method the caller used ---------------------------------------------

_CUT_OFF = {"tool_calls": [("c9", "get_order", '{"order_id": 7}')], "stop_reason": "max_tokens"}


def test_arun_says_arun_of_an_answer_cut_off() -> None:
    ran: list[str] = []
    view = make_view(ran)
    running = gateway([_CUT_OFF], SQLiteAuditSink(), at(PAUSED_AT), asynchronous=True)
    composer = Composer().system(SYSTEM).user("Where is order 7?")
    with pytest.raises(VeridicError, match="cut off") as raised:
        asyncio.run(running.arun(composer, view, policy=ApprovalPolicy(view), request_id="r"))
    assert str(raised.value).startswith("arun(): ")
    assert ran == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_resume_names_itself_for_an_answer_cut_off_after_the_calls(asynchronous: bool) -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    resuming = gateway([_CUT_OFF], audit, at(PAUSED_AT + HOUR), asynchronous=asynchronous)
    with pytest.raises(VeridicError, match="cut off") as raised:
        _resume_approved(resuming, run, Composer().system(SYSTEM), view, asynchronous=asynchronous)
    assert str(raised.value).startswith("aresume(): " if asynchronous else "resume(): ")
    assert ran == ["refund 42", "get_order 43"]  # the approved calls ran; c9 did not


def _started(running: ModelGateway, composer: object, *, asynchronous: bool) -> object:
    """``run`` (or ``arun``) given ``composer``, whatever it is: the misuse under test."""
    view = make_view([])
    given = cast(Composer, composer)
    policy = ApprovalPolicy(view)
    if asynchronous:
        return asyncio.run(running.arun(given, view, policy=policy, request_id="r"))
    return running.run(given, view, policy=policy, request_id="r")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_run_given_no_composer_names_the_method_called(asynchronous: bool) -> None:
    running = gateway([], SQLiteAuditSink(), at(PAUSED_AT), asynchronous=asynchronous)
    with pytest.raises(VeridicError) as raised:
        _started(running, "hello", asynchronous=asynchronous)
    assert str(raised.value).startswith("arun() needs" if asynchronous else "run() needs")


def _resumed_none(resuming: ModelGateway, *, asynchronous: bool) -> object:
    """``resume`` (or ``aresume``) of ``None``: what ``claim_paused`` gives once it is taken."""
    view = make_view([])
    nothing = cast(PausedRun, None)
    composer = Composer().system(SYSTEM)
    policy = ApprovalPolicy(view)
    if asynchronous:
        return asyncio.run(resuming.aresume(nothing, composer, view, policy=policy, answers={}))
    return resuming.resume(nothing, composer, view, policy=policy, answers={})


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_resume_given_no_paused_run_names_the_method_called(asynchronous: bool) -> None:
    resuming = gateway([], SQLiteAuditSink(), at(PAUSED_AT), asynchronous=asynchronous)
    with pytest.raises(VeridicError) as raised:
        _resumed_none(resuming, asynchronous=asynchronous)
    said = str(raised.value)
    assert said.startswith("aresume() got None" if asynchronous else "resume() got None")


# --- an answer by digest binds the call it approved ----------------------------------------


def _resume_with(
    run: PausedRun, audit: SQLiteAuditSink, answers: Mapping[str, bool], ran: list[str]
) -> RunResult[None]:
    view = make_view(ran)
    return gateway([{"text": "Done."}], audit, at(PAUSED_AT + HOUR)).resume(
        run, Composer().system(SYSTEM), view, policy=ApprovalPolicy(view), answers=answers
    )


def _edited(run: PausedRun, edit: object) -> PausedRun:
    """``run`` as kept, after ``edit`` (a function of its JSON document) changed it there."""
    document = json.loads(run.to_json())
    edit(document)  # type: ignore[operator]  # a function of the document
    return PausedRun.from_json(json.dumps(document))


def test_an_answer_by_digest_is_not_taken_by_a_call_whose_id_is_that_digest() -> None:
    # Whoever writes where the run is kept gave a refund of order 99 the approval's digest as
    # its call id (its approval rewritten to match): the user's yes, keyed by the digest of
    # the refund of order 42 they were shown, was read as a call id and refunded order 99.
    audit = SQLiteAuditSink()
    run = paused(audit)
    shown = run.approvals[0]

    def forge(document: dict[str, object]) -> None:
        turns = document["conversation"]["turns"]  # type: ignore[index]
        refund = next(t for t in turns if t.get("tool_call") == shown.call_id)
        refund.update(tool_call=shown.digest, arguments={"order_id": 99})
        approval = document["approvals"][0]  # type: ignore[index]
        approval.update(call_id=shown.digest, arguments={"order_id": 99})

    forged = _edited(run, forge)
    ran: list[str] = []
    with pytest.raises(VeridicError, match="digest") as raised:
        _resume_with(forged, audit, {shown.digest: True}, ran)
    assert ran == []
    assert "is a call id of the paused run" in str(raised.value)


def test_an_answer_by_digest_still_resumes_a_run_whose_call_ids_look_like_digests() -> None:
    # A provider whose call ids are 64 hex digits: answered by digest, the run goes on.
    audit = SQLiteAuditSink()
    ran: list[str] = []
    view = make_view(ran)
    hexed = {
        "tool_calls": [
            ("a" * 64, "get_order", '{"order_id": 42}'),
            ("b" * 64, "refund", '{"order_id": 42}'),
        ]
    }
    composer = Composer().system(SYSTEM).user("Refund order 42.")
    result = gateway([hexed], audit, at(PAUSED_AT)).run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
    )
    assert result.paused is not None
    _resume_with(result.paused, audit, {a.digest: True for a in result.paused.approvals}, ran)
    assert ran == ["get_order 42", "refund 42"]


def _swap_ids(document: dict[str, object]) -> None:
    """Swap the ids of the refund (c2) and the lookup (c3) in the kept conversation."""
    turns = document["conversation"]["turns"]  # type: ignore[index]
    for turn in turns:
        if turn.get("tool_call") in {"c2", "c3"}:
            turn["tool_call"] = {"c2": "c3", "c3": "c2"}[turn["tool_call"]]


def test_a_swap_of_two_waiting_calls_ids_matches_no_answer_by_digest() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    with pytest.raises(VeridicError, match="is not the one the approval of call 'c2'"):
        _resume_with(_edited(run, _swap_ids), audit, {run.approvals[0].digest: True}, ran)
    assert ran == []


def test_a_swap_of_two_waiting_calls_ids_runs_nothing_on_a_yes_by_call_id() -> None:
    # Keyed by call id, the stored approval is trusted: it asks about the refund under id c2,
    # and the lookup now holds that id. The yes is not taken by the lookup, the refund (now
    # c3, asked about by no approval) does not run: nothing runs, and the refusal names the
    # call the run stops at (it named none: "and no answer for , which the model asked").
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    with pytest.raises(VeridicError) as raised:
        _resume_with(_edited(run, _swap_ids), audit, {"c2": True}, ran)
    assert ran == []
    assert "and no answer for 'c3', which" in str(raised.value)
