"""Attacker review of the stores, records and the run's persistence: each test failed before
its fix (a stored paused run, conversation or record an outsider could bend)."""

from __future__ import annotations

import json

import pytest
from test_deferred import gateway, make_registry, paused_run, system_part

from veridic import ApprovalPolicy, PausedRun, SQLiteAuditSink, VeridicError


def _second_approval(saved: str, arguments: dict[str, object]) -> str:
    """``saved`` with call c2's arguments changed in the conversation, the approval the user
    was shown left as it was, and a copy of it for the new arguments appended after it."""
    document = json.loads(saved)
    for turn in document["conversation"]["turns"]:
        if turn.get("tool_call") == "c2":
            turn["arguments"] = arguments
    shown = next(a for a in document["approvals"] if a["call_id"] == "c2")
    document["approvals"].append({**shown, "arguments": arguments})
    return json.dumps(document)


def test_a_digest_answer_does_not_approve_a_second_approval_of_the_same_call() -> None:
    audit = SQLiteAuditSink()
    shown = paused_run([], audit)
    answers = {approval.digest: True for approval in shown.approvals}  # what the dialog showed
    saved = _second_approval(shown.to_json(), {"order_id": 999})
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    with pytest.raises(VeridicError, match="two approvals for call .c2."):
        gateway([{"text": "Done."}], audit).resume(
            PausedRun.from_json(saved),
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
        )
    assert "refund 999" not in ran
