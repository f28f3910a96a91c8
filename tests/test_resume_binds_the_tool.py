"""A user's answer to a paused call holds for the tool they were asked about, not its name.

The seed's second failure: a "revert" tool of one feature and a "revert" of
another. A run paused for the user's approval of fixtures' ``revert``; by the
time it resumed, the name belonged to the prompts feature's ``revert``, of the
same shape (a write of one string, mid risk). The paused approval compared only
the name, the arguments, kind, risk and the like, so the user's "yes" to
reverting a fixture ran the rewrite of a system prompt. An "always" rule has
long been bound to its tool's grant (description, schema, where it is defined,
its registry); a paused approval now is too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime

import pytest
from _paused_formats import as_format_4

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    PausedRun,
    Registry,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)

SYSTEM = instruction("You are the maintenance agent.")


def fixtures(ran: list[str]) -> Registry:
    registry = Registry("fixtures")

    @registry.tool(kind="write")
    def revert(target: str) -> str:
        """Revert a golden test fixture to its last committed version.

        Args:
            target: The fixture's path.
        """
        ran.append(f"fixture {target}")
        return f"reverted fixture {target}"

    return registry


def prompts(ran: list[str]) -> Registry:
    registry = Registry("prompts")

    @registry.tool(kind="write")
    def revert(target: str) -> str:
        """Revert a feature's system prompt to its last saved version.

        Args:
            target: The feature.
        """
        ran.append(f"prompt {target}")
        return f"reverted prompt {target}"

    return registry


def paused(audit: SQLiteAuditSink) -> PausedRun:
    view = fixtures([]).view()
    result = ModelGateway(
        ScriptedProvider([{"tool_calls": [("c1", "revert", '{"target": "checkout"}')]}]),
        audit=audit,
    ).run(
        Composer().system(SYSTEM, view.capability_section()).user("Revert checkout."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert result.paused is not None
    # Stored and read back, as a paused run waits for its user.
    return PausedRun.from_json(result.paused.to_json())


def resumed(
    audit: SQLiteAuditSink, stored: PausedRun, view: ToolView, *, asynchronous: bool
) -> RunResult[None]:
    provider = ScriptedProvider([{"content": "Done."}], asynchronous=asynchronous)
    gateway = ModelGateway(provider, audit=audit)
    composer = Composer().system(SYSTEM, view.capability_section())
    policy = ApprovalPolicy(view)
    answers = {approval.digest: True for approval in stored.approvals}
    if asynchronous:
        return asyncio.run(gateway.aresume(stored, composer, view, policy=policy, answers=answers))
    return gateway.resume(stored, composer, view, policy=policy, answers=answers)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_yes_to_one_revert_does_not_run_another_tool_of_the_same_name(
    asynchronous: bool,
) -> None:
    audit = SQLiteAuditSink()
    stored = paused(audit)
    ran: list[str] = []
    result = resumed(audit, stored, prompts(ran).view(), asynchronous=asynchronous)
    assert ran == []  # the prompt was not rewritten
    (again,) = result.pending  # the user is asked about the tool that holds the name now
    assert again.tool == "revert"
    assert "asked again" in again.why
    assert "description" in again.why
    assert "registry" in again.why


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_yes_to_the_same_tool_still_runs_it(asynchronous: bool) -> None:
    audit = SQLiteAuditSink()
    stored = paused(audit)
    ran: list[str] = []
    result = resumed(audit, stored, fixtures(ran).view(), asynchronous=asynchronous)
    assert ran == ["fixture checkout"]
    assert result.pending == ()


def test_a_grant_changed_in_storage_asks_the_user_again() -> None:
    audit = SQLiteAuditSink()
    document = json.loads(paused(audit).to_json())
    document["approvals"][0]["grant"] = "grant-v2 forged=1"
    stored = PausedRun.from_json(json.dumps(document))
    ran: list[str] = []
    result = resumed(audit, stored, fixtures(ran).view(), asynchronous=False)
    assert ran == []
    (again,) = result.pending
    assert "is not a grant veridic wrote" in again.why


def test_a_paused_run_of_format_3_reads_with_no_grant_and_binds_by_name_as_it_did() -> None:
    audit = SQLiteAuditSink()
    document = as_format_4(json.loads(paused(audit).to_json()))
    document["format"] = "veridic-paused-run/3"
    for approval in document["approvals"]:
        del approval["grant"]
    stored = PausedRun.from_json(json.dumps(document))
    assert [approval.grant for approval in stored.approvals] == [""]
    # No time either: the caller who knows when it paused dates it (or it is refused).
    stored = dataclasses.replace(stored, paused_at=datetime.now(UTC))
    ran: list[str] = []
    resumed(audit, stored, fixtures(ran).view(), asynchronous=False)
    assert ran == ["fixture checkout"]


def test_format_4_needs_each_approvals_grant() -> None:
    audit = SQLiteAuditSink()
    document = json.loads(paused(audit).to_json())
    del document["approvals"][0]["grant"]
    with pytest.raises(VeridicError, match="exactly the keys"):
        PausedRun.from_json(json.dumps(document))


def _stripped(document: dict[str, object], how: str) -> dict[str, object]:
    approvals = document["approvals"]
    assert isinstance(approvals, list)
    if how == "downgraded":  # read as a paused run of the format before grants
        kept = [approval["waiting_sha256"] for approval in approvals]
        as_format_4(document)
        document["format"] = "veridic-paused-run/3"
        for approval, waiting in zip(approvals, kept, strict=True):
            approval["waiting_sha256"] = waiting  # the digests the dialog showed, kept
    for approval in approvals:
        if how == "emptied":
            approval["grant"] = ""
        else:
            del approval["grant"]
    return document


@pytest.mark.parametrize("how", ["emptied", "downgraded"])
def test_a_grant_stripped_in_storage_after_the_dialog_matches_no_answer(how: str) -> None:
    # The digest the dialog showed did not cover the grant, so a paused run whose grant
    # was emptied (or which was rewritten as format 3) in storage kept its digests, and
    # the user's yes to the fixtures' revert ran the prompts' revert of the same shape.
    audit = SQLiteAuditSink()
    stored = paused(audit)
    shown = [approval.digest for approval in stored.approvals]  # what the dialog showed
    changed = PausedRun.from_json(json.dumps(_stripped(json.loads(stored.to_json()), how)))
    ran: list[str] = []
    view = prompts(ran).view()
    with pytest.raises(VeridicError, match="no approval of the paused run has"):
        ModelGateway(ScriptedProvider([{"content": "Done."}]), audit=audit).resume(
            changed,
            Composer().system(SYSTEM, view.capability_section()),
            view,
            policy=ApprovalPolicy(view),
            answers=dict.fromkeys(shown, True),
        )
    assert ran == []
