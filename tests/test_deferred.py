"""Deferred approvals: a run stops for the user's answers and goes on later, checked again."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import Mapping, Sequence

import pytest

from veridic import (
    AlwaysAllowRefusedError,
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    Composer,
    Limits,
    ModelGateway,
    PausedRun,
    Registry,
    Risk,
    RunLimitError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    Usage,
    VeridicError,
    instruction,
)

SYSTEM = instruction("You are the support agent of Acme.")


def make_registry(*, refund_risk: Risk = Risk.MID, ran: list[str] | None = None) -> Registry:
    registry = Registry()
    done = ran if ran is not None else []

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        done.append(f"get_order {order_id}")
        return f"order {order_id}: lost"

    @registry.tool(kind="write", risk=refund_risk)
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        done.append(f"refund {order_id}")
        return f"refunded {order_id}"

    @registry.tool(kind="write")
    def add_note(text: str) -> str:
        """Add a note to the customer's file.

        Args:
            text: The note.
        """
        done.append(f"note {text}")
        return "noted"

    return registry


def gateway(
    script: Sequence[Mapping[str, object]], audit: SQLiteAuditSink, *, asynchronous: bool = False
) -> ModelGateway:
    provider = ScriptedProvider(script, asynchronous=asynchronous)
    return ModelGateway(provider, audit=audit)


def system_part(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section())


CALLS = {
    "tool_calls": [
        ("c1", "get_order", '{"order_id": 42}'),
        ("c2", "refund", '{"order_id": 42}'),
        ("c3", "get_order", '{"order_id": 43}'),
        ("c4", "add_note", '{"text": "refunded"}'),
    ],
    "usage": {"input_tokens": 100, "output_tokens": 20},
}


def paused_run(ran: list[str], audit: SQLiteAuditSink) -> PausedRun:
    registry = make_registry(ran=ran)
    view = registry.view()
    composer = system_part(view).user("My parcel 42 is lost, refund it.")
    result = gateway([CALLS], audit).run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
    )
    assert result.paused is not None
    return result.paused


def test_a_deferred_run_stops_before_the_first_call_that_needs_an_answer() -> None:
    ran: list[str] = []
    audit = SQLiteAuditSink()
    registry = make_registry(ran=ran)
    view = registry.view()
    composer = system_part(view).user("My parcel 42 is lost, refund it.")
    result = gateway([CALLS], audit).run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
    )
    assert ran == ["get_order 42"]  # c3 waits too: it comes after c2 in the model's order
    assert [o.call.id for o in result.outcomes] == ["c1"]
    assert result.output is None
    assert [(a.call_id, a.tool, dict(a.arguments), a.risk) for a in result.pending] == [
        ("c2", "refund", {"order_id": 42}, Risk.MID),
        ("c4", "add_note", {"text": "refunded"}, Risk.MID),
    ]
    assert "write without an always rule" in result.pending[0].why
    paused = result.paused
    assert paused is not None
    assert (paused.turns, paused.tool_calls, paused.usage) == (1, 4, Usage(100, 20))
    waiting = composer.build().pending_tool_calls
    assert [call.id for call in waiting] == ["c2", "c3", "c4"]
    assert [r.tool for r in audit.records("req-1")] == ["get_order"]


def test_a_paused_run_survives_json_and_is_resumed_with_the_answers() -> None:
    audit = SQLiteAuditSink()
    saved = paused_run([], audit).to_json()
    ran: list[str] = []
    registry = make_registry(ran=ran)  # a new process: a new registry, view and composer
    view = registry.view()
    gw = gateway([{"text": "Refunded; noted."}], audit)
    result = gw.resume(
        PausedRun.from_json(saved),
        system_part(view),
        view,
        policy=ApprovalPolicy(view),
        answers={"c2": True, "c4": False},
    )
    assert result.paused is None
    assert result.text == "Refunded; noted."
    assert ran == ["refund 42", "get_order 43"]
    assert [(o.call.id, o.result.outcome) for o in result.outcomes] == [
        ("c2", CallOutcome.OK),
        ("c3", CallOutcome.OK),
        ("c4", CallOutcome.DENIED),
    ]
    records = audit.records("req-1")
    assert [(r.tool, r.approval) for r in records] == [
        ("get_order", ApprovalMode.NOT_REQUIRED),
        ("refund", ApprovalMode.USER_CONFIRMED),
        ("get_order", ApprovalMode.NOT_REQUIRED),
        ("add_note", ApprovalMode.DENIED),
    ]
    assert "the user refused" in records[3].detail
    # The resumed calls answer the model call that asked for them.
    assert len({r.prompt_sha256 for r in records}) == 1
    assert result.turns == 2


def test_an_approval_for_a_tool_that_became_riskier_is_asked_again() -> None:
    audit = SQLiteAuditSink()
    paused = PausedRun.from_json(paused_run([], audit).to_json())
    ran: list[str] = []
    registry = make_registry(refund_risk=Risk.HIGH, ran=ran)
    view = registry.view()
    result = gateway([], audit).resume(
        paused, system_part(view), view, policy=ApprovalPolicy(view), answers={"c2": True}
    )
    assert ran == []
    again = result.pending[0]
    assert (again.call_id, again.risk) == ("c2", Risk.HIGH)
    assert "asked again" in again.why
    assert "mid risk became high" in again.why
    assert [a.call_id for a in result.pending] == ["c2", "c4"]
    assert result.paused is not None
    # Answered anew, it runs.
    view2 = registry.view()
    final = gateway([{"text": "done"}], audit).resume(
        PausedRun.from_json(result.paused.to_json()),
        system_part(view2),
        view2,
        policy=ApprovalPolicy(view2),
        answers={"c2": True, "c4": True},
    )
    assert ran == ["refund 42", "get_order 43", "note refunded"]
    assert final.text == "done"


def test_a_tool_that_became_unavailable_is_refused_on_resume_and_the_model_told() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run([], audit)
    registry = make_registry()
    view = registry.view(deny=["refund"])
    result = gateway([{"text": "I cannot refund."}], audit).resume(
        paused,
        system_part(view),
        view,
        policy=ApprovalPolicy(view),
        answers={"c2": True, "c4": True},
    )
    refused = result.outcomes[0]
    assert (refused.call.id, refused.result.outcome) == ("c2", CallOutcome.REFUSED)
    # Hidden from this view (not tombstoned): the model reads an unknown name, the record why.
    assert "no tool is named 'refund'" in refused.text
    assert refused.result.record.detail.startswith("denied: named in the view's deny list")


def test_rules_set_meanwhile_decide_first_and_a_no_always_holds() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run([], audit)
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    policy = ApprovalPolicy(view)
    policy.deny("refund")  # set by an admin while the user was deciding
    policy.allow_always("add_note")  # and the user said no to this call
    gateway([{"text": "ok"}], audit).resume(
        paused, system_part(view), view, policy=policy, answers={"c2": True, "c4": False}
    )
    assert ran == ["get_order 43"]
    modes = [r.approval for r in audit.records("req-1")[-3:]]
    assert modes == [ApprovalMode.DENIED, ApprovalMode.NOT_REQUIRED, ApprovalMode.DENIED]
    assert "deny rule" in audit.records("req-1")[-3].detail


def test_an_unanswered_approval_pauses_the_run_again_there() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run([], audit)
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    result = gateway([], audit).resume(
        paused, system_part(view), view, policy=ApprovalPolicy(view), answers={"c2": True}
    )
    assert ran == ["refund 42", "get_order 43"]
    assert [a.call_id for a in result.pending] == ["c4"]
    assert result.paused is not None
    assert result.paused.tool_calls == 4


def test_answers_that_answer_nothing_are_refused_before_anything_runs() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run([], audit)
    view = make_registry().view()
    gw = gateway([], audit)
    with pytest.raises(VeridicError, match="no approval of the paused run names"):
        gw.resume(
            paused, system_part(view), view, policy=ApprovalPolicy(view), answers={"c9": True}
        )
    with pytest.raises(VeridicError, match="pass True"):
        gw.resume(
            paused,
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers={"c2": "yes"},  # type: ignore[dict-item]  # the mistake under test
        )
    with pytest.raises(VeridicError, match="another view"):
        gw.resume(
            paused,
            system_part(view),
            view,
            policy=ApprovalPolicy(make_registry().view()),
            answers={},
        )
    with pytest.raises(VeridicError, match="already holds"):
        gw.resume(
            paused, system_part(view).user("hi"), view, policy=ApprovalPolicy(view), answers={}
        )
    assert len(audit.records("req-1")) == 1


def test_a_changed_paused_run_is_refused_naming_what_is_wrong() -> None:
    document = json.loads(paused_run([], SQLiteAuditSink()).to_json())
    approvals_elsewhere = dict(document, approvals=[dict(document["approvals"][0], call_id="zz")])
    for changed, complaint in [
        (dict(document, format="x"), "format"),
        (dict(document, extra=1), "unknown keys"),
        (dict(document, turns=-1), "not a count"),
        (dict(document, prompt_sha256=""), "empty"),
        (dict(document, usage=[1]), "'usage' is a list"),
        (dict(document, usage={"input_tokens": 1}), "not an object of input_tokens"),
        (dict(document, approvals=[dict(document["approvals"][0], risk="huge")]), "risk"),
        (
            dict(
                document,
                conversation={"format": "veridic-conversation/1", "turns": [{"system": "x"}]},
            ),
            "system turn",
        ),
    ]:
        with pytest.raises(VeridicError, match=complaint):
            PausedRun.from_json(json.dumps(changed))
    moved = PausedRun.from_json(json.dumps(approvals_elsewhere))
    view = make_registry().view()
    with pytest.raises(VeridicError, match="does not end with the calls"):
        gateway([], SQLiteAuditSink()).resume(
            moved, system_part(view), view, policy=ApprovalPolicy(view), answers={}
        )
    with pytest.raises(VeridicError, match="not a sha256"):
        gateway([], SQLiteAuditSink()).resume(
            PausedRun.from_json(json.dumps(dict(document, tools_sha256="f" * 63))),
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers={},
        )


def test_arguments_changed_in_storage_make_the_approval_stale() -> None:
    audit = SQLiteAuditSink()
    document = json.loads(paused_run([], audit).to_json())
    turns = document["conversation"]["turns"]
    for turn in turns:
        if turn.get("tool_call") == "c2":
            turn["arguments"] = {"order_id": 999}
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    result = gateway([], audit).resume(
        PausedRun.from_json(json.dumps(document)),
        system_part(view),
        view,
        policy=ApprovalPolicy(view),
        answers={"c2": True, "c4": True},
    )
    assert "refund 999" not in ran
    assert "not the ones the user was shown" in result.pending[0].why


def _tampered(saved: str, arguments: dict[str, object]) -> str:
    """``saved`` with call c2's arguments changed in the conversation and its approval alike,
    as whoever can write where it is kept would change them."""
    document = json.loads(saved)
    for turn in document["conversation"]["turns"]:
        if turn.get("tool_call") == "c2":
            turn["arguments"] = arguments
    for approval in document["approvals"]:
        if approval["call_id"] == "c2":
            approval["arguments"] = arguments
    return json.dumps(document)


def test_an_answer_keyed_by_digest_refuses_a_run_changed_in_storage() -> None:
    audit = SQLiteAuditSink()
    shown = paused_run([], audit)
    answers = {approval.digest: True for approval in shown.approvals}  # what the dialog showed
    saved = _tampered(shown.to_json(), {"order_id": 999})
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    with pytest.raises(VeridicError, match="is not the one the user was shown"):
        gateway([], audit).resume(
            PausedRun.from_json(saved),
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
        )
    assert ran == []
    assert [r.tool for r in audit.records("req-1")] == ["get_order"]  # nothing more ran


def test_keyed_by_call_id_the_answer_trusts_what_is_stored() -> None:
    """The documented limit: without the digest, the stored approval is what was shown."""
    audit = SQLiteAuditSink()
    saved = _tampered(paused_run([], audit).to_json(), {"order_id": 999})
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    gateway([{"text": "Done."}], audit).resume(
        PausedRun.from_json(saved),
        system_part(view),
        view,
        policy=ApprovalPolicy(view),
        answers={"c2": True, "c4": True},
    )
    assert "refund 999" in ran


def test_answers_keyed_by_digest_run_as_by_call_id_and_survive_json() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run([], audit)
    restored = PausedRun.from_json(paused.to_json())
    assert [a.digest for a in restored.approvals] == [a.digest for a in paused.approvals]
    c2 = paused.approvals[0]
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    result = gateway([{"text": "Refunded."}], audit).resume(
        restored,
        system_part(view),
        view,
        policy=ApprovalPolicy(view),
        answers={c2.digest: True, "c4": False},  # the two keys mix
    )
    assert ran == ["refund 42", "get_order 43"]
    assert [o.result.outcome for o in result.outcomes][-1] is CallOutcome.DENIED
    with pytest.raises(VeridicError, match="two different answers"):
        gateway([], SQLiteAuditSink()).resume(
            PausedRun.from_json(paused.to_json()),
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers={c2.digest: True, "c2": False},
        )


def test_a_digest_covers_every_part_the_user_is_shown() -> None:
    approval = paused_run([], SQLiteAuditSink()).approvals[0]
    assert re.fullmatch("[0-9a-f]{64}", approval.digest)
    changed = [
        dataclasses.replace(approval, call_id="c9"),
        dataclasses.replace(approval, tool="add_note"),
        dataclasses.replace(approval, arguments={"order_id": 43}),
        dataclasses.replace(approval, kind="query"),
        dataclasses.replace(approval, risk=Risk.HIGH),
        dataclasses.replace(approval, irreversible=True),
        dataclasses.replace(approval, writes_instruction_fields=True),
        dataclasses.replace(approval, why="another reason"),
    ]
    digests = {approval.digest, *(other.digest for other in changed)}
    assert len(digests) == len(changed) + 1


def test_limits_count_on_across_the_pause() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run([], audit)
    view = make_registry().view()
    more = {"tool_calls": [(f"d{n}", "get_order", '{"order_id": 1}') for n in range(4)]}
    with pytest.raises(RunLimitError) as caught:
        gateway([more], audit).resume(
            paused,
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers={"c2": True, "c4": True},
            limits=Limits(tool_calls=6),
        )
    assert (caught.value.limit, caught.value.reached) == ("tool_calls", 8)


def test_defer_and_confirm_exclude_each_other() -> None:
    view = make_registry().view()
    with pytest.raises(VeridicError, match="both confirm= and defer=True"):
        gateway([], SQLiteAuditSink()).run(
            system_part(view).user("hi"),
            view,
            policy=ApprovalPolicy(view),
            request_id="r",
            defer=True,
            confirm=lambda request: True,
        )


def test_the_async_run_pauses_and_resumes_the_same_way() -> None:
    async def main() -> tuple[list[str], list[str]]:
        audit = SQLiteAuditSink()
        ran: list[str] = []
        view = make_registry(ran=ran).view()
        composer = system_part(view).user("Refund 42")
        first = await gateway([CALLS], audit, asynchronous=True).arun(
            composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
        )
        assert first.paused is not None
        saved = first.paused.to_json()
        view2 = make_registry(ran=ran).view()
        second = await gateway([{"text": "done"}], audit, asynchronous=True).aresume(
            PausedRun.from_json(saved),
            system_part(view2),
            view2,
            policy=ApprovalPolicy(view2),
            answers={"c2": True, "c4": True},
        )
        assert second.text == "done"
        return ran, [r.approval.value for r in audit.records("req-1")]

    ran, modes = asyncio.run(main())
    assert ran == ["get_order 42", "refund 42", "get_order 43", "note refunded"]
    assert modes == ["not_required", "user_confirmed", "not_required", "user_confirmed"]


# --- saved rules that went stale ------------------------------------------------------


def test_saved_rules_that_went_stale_are_reported_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saved = {
        "add_note": "always",
        "refund": "always",
        "old_refund": "always",
        "get_order": "sometimes",
    }
    view = make_registry(refund_risk=Risk.HIGH).view()
    with pytest.raises(AlwaysAllowRefusedError):
        ApprovalPolicy(view, rules=saved)  # type: ignore[arg-type]  # the stale rules under test
    with caplog.at_level(logging.WARNING, logger="veridic.approval"):
        policy = ApprovalPolicy.restore(view, saved)
    assert dict(policy.rules) == {"add_note": "always"}
    assert [(s.tool, s.rule) for s in policy.skipped] == [
        ("refund", "always"),
        ("old_refund", "always"),
        ("get_order", "sometimes"),
    ]
    assert "high risk" in policy.skipped[0].reason
    assert "never registered" in policy.skipped[1].reason or "no tool" in policy.skipped[1].reason
    assert len(caplog.records) == 3
    assert policy.decide("refund", {"order_id": 1}) is ApprovalMode.DENIED  # asked, nobody to ask
    assert ApprovalPolicy(view).skipped == ()
