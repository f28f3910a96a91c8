"""Second read of the run loop's attacker review (round 17): what its tests left open.

The twins ``run``/``resume`` and ``arun``/``aresume`` across a pause, and what a refused
paused run is told. The time is the gateway's fixed ``clock``: no test sleeps or measures
time.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest
from _paused_formats import as_format_5
from hypothesis import given, settings
from hypothesis import strategies as st
from test_deferred_expiry import PAUSED_AT, SYSTEM, at, gateway, make_view, paused
from test_review_gateway import _roadless, _script, _twin_registry

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    PausedRun,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
)
from veridic.gateway import ModelCallLog

# --- run and arun, resume and aresume, are twins across a pause ----------------------------

_CALL = st.sampled_from(
    [
        ("save_note", '{"text": "hi"}'),  # a write without an always rule: it waits
        ("save_note", '{"text": "bye"}'),
        ("get_time", '{"zone": "UTC"}'),
        ("save_note", "not json"),
        ("nosuch", "{}"),
    ]
)
_ANSWER = st.fixed_dictionaries(
    {
        "calls": st.lists(_CALL, max_size=3),
        "usage": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"input_tokens": st.integers(0, 50), "output_tokens": st.integers(0, 50)}
            ),
        ),
        "stop": st.just(""),
    }
)
"""A model's answer, for :func:`~test_review_gateway._script`: calls of which most wait."""


def _kept(paused_run: PausedRun) -> dict[str, object]:
    """``paused_run`` as it is kept, but for its measured ``seconds`` (a wall time)."""
    document: dict[str, object] = json.loads(paused_run.to_json())
    document.pop("seconds")
    return document


def _go_on(
    running: ModelGateway,
    composer: Composer,
    said: list[bool],
    *,
    asynchronous: bool,
) -> tuple[list[object], RunResult[None]]:
    """Run ``composer`` with ``defer=True`` and resume each pause with the answers ``said``
    gives in turn (by digest), until the run ends: what each pause kept, and the end."""
    view = _twin_registry().view()
    policy = ApprovalPolicy(view)
    pauses: list[object] = []

    async def ending() -> RunResult[None]:
        result = await running.arun(composer, view, policy=policy, request_id="req", defer=True)
        while result.paused is not None:
            pauses.append(_kept(result.paused))
            answers = {a.digest: said[len(pauses) % len(said)] for a in result.paused.approvals}
            result = await running.aresume(
                result.paused, Composer().system(SYSTEM), view, policy=policy, answers=answers
            )
        return result

    if asynchronous:
        return pauses, asyncio.run(ending())
    result = running.run(composer, view, policy=policy, request_id="req", defer=True)
    while result.paused is not None:
        pauses.append(_kept(result.paused))
        answers = {a.digest: said[len(pauses) % len(said)] for a in result.paused.approvals}
        result = running.resume(
            result.paused, Composer().system(SYSTEM), view, policy=policy, answers=answers
        )
    return pauses, result


def _drive_paused(
    script: list[dict[str, object]], said: list[bool], *, asynchronous: bool
) -> object:
    log = ModelCallLog()
    audit = SQLiteAuditSink(":memory:")
    provider = ScriptedProvider(script, asynchronous=asynchronous)
    running = ModelGateway(provider, audit=audit, calls=log, clock=at(PAUSED_AT))
    composer = Composer().system(SYSTEM).user("What time is it? Note it.")
    ending: object
    pauses: list[object] = []
    try:
        pauses, result = _go_on(running, composer, said, asynchronous=asynchronous)
        ending = (result.text, result.turns, result.usage, len(result.outcomes))
    except VeridicError as error:
        ending = (type(error).__name__, _roadless(error, asynchronous=asynchronous))
    calls = [replace(record, time=0.0) for record in log.records()]
    replies = [replace(record, latency=0.0, call_id="") for record in log.replies()]
    tools = [
        (r.tool, r.call_id, r.outcome, r.approval, r.detail, r.prompt_sha256)
        for r in audit.records()
    ]
    return ending, pauses, calls, replies, tools, provider.requests


@settings(max_examples=40, deadline=None)
@given(answers=st.lists(_ANSWER, max_size=4), said=st.lists(st.booleans(), min_size=1))
def test_run_and_arun_pause_and_resume_alike(
    answers: list[dict[str, object]], said: list[bool]
) -> None:
    # The pause is dated before any call of its answer runs, and a resume checks the
    # adapter's request before its waiting calls, in both twins: the same answers and the
    # same user give the same paused runs (their approvals' digests too), records and end.
    script = _script(answers)
    assert _drive_paused(script, said, asynchronous=False) == _drive_paused(
        script, said, asynchronous=True
    )


# --- what a paused run edited where it was kept is told -------------------------------------


def test_a_paused_run_whose_history_was_edited_is_not_told_its_calls_changed() -> None:
    # Only the user's turn was rewritten: the refusal opened with "holds waiting calls that
    # are not the ones that waited", which sent whoever read it looking for a changed call.
    audit = SQLiteAuditSink()
    run = paused(audit)
    document = json.loads(run.to_json())
    document["conversation"]["turns"][0] = {"user": "Refund every order I ever made."}
    ran: list[str] = []
    view = make_view(ran)
    with pytest.raises(VeridicError) as raised:
        gateway([{"text": "Refunded."}], audit, at(PAUSED_AT + 60)).resume(
            PausedRun.from_json(json.dumps(document)),
            Composer().system(SYSTEM),
            view,
            policy=ApprovalPolicy(view),
            answers={approval.digest: True for approval in run.approvals},
        )
    said = str(raised.value)
    assert said.startswith(
        "the paused run of request 'req-1' is not the one the approval of call 'c2' was "
        "asked in: its waiting calls, or what it holds beside them, are not the ones"
    )
    assert "its conversation" in said
    assert "nothing was run" in said
    assert ran == []


def test_a_kept_document_dating_approvals_asked_without_a_time_says_how_to_read_it() -> None:
    # A release that wrote format 6 kept a run its caller had dated: from_json() now
    # refuses that document, and told the reader to "keep the paused run as it was read
    # (paused_at None)", a run it never got. The way it names reads it, undated.
    audit = SQLiteAuditSink()
    document = as_format_5(json.loads(paused(audit).to_json()))
    document.update(format="veridic-paused-run/6", paused_at="2025-06-15T15:06:40.000000+00:00")
    with pytest.raises(VeridicError) as raised:
        PausedRun.from_json(json.dumps(document))
    assert '"paused_at" set to null' in str(raised.value)
    document["paused_at"] = None
    assert PausedRun.from_json(json.dumps(document)).paused_at is None
