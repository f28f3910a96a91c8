"""Follow-ups to the sixth review of the executor, gateway and tools, through the public API.

Each test failed on the merged code before its fix.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    InstructionField,
    Registry,
    Risk,
    RiskFloorError,
    SQLiteAuditSink,
    ToolView,
    execute,
)
from veridic.run.effects import Observation, check_declared_risk, run_observed

# --- a delegated irreversible tool makes the call's record say so --------------------------


class _StoredPrompt(BaseModel):
    feature: str
    content: InstructionField


class _Vault:
    """A confirmed high-risk ``close_account`` that runs, through the view, a hard delete and
    a write of a stored prompt: tools whose store code has no guards of its own."""

    def __init__(self, *, fail_after: bool = False) -> None:
        self.done: list[str] = []
        registry = Registry("vault")
        vault = self

        @registry.tool(kind="write", irreversible=True)
        def shred(account: str) -> str:
            """Shred an account's records; a shredded record cannot be restored.

            Args:
                account: The account.
            """
            if account == "locked":
                raise RuntimeError("the account is locked; nothing was shredded")
            vault.done.append(f"shred {account}")
            return "shredded"

        @registry.tool(kind="write", writes=(_StoredPrompt,))
        def retune(account: str) -> str:
            """Save the system prompt the account's assistant uses from now on.

            Args:
                account: The account.
            """
            vault.done.append(f"retune {account}")
            return "retuned"

        @registry.tool(kind="write", risk="high")
        def close_account(account: str, then: str) -> str:
            """Close an account; each call is confirmed by the user.

            Args:
                account: The account.
                then: The tool to run on it afterwards.
            """
            out = str(vault.view.dispatch(then, {"account": account}))
            if fail_after:
                raise RuntimeError("the ledger was locked after the delegated call ran")
            return out

        self.view: ToolView = registry.view()

    def close(self, then: str, account: str = "acme") -> CallResult:
        return execute(
            self.view,
            "close_account",
            {"account": account, "then": then},
            policy=ApprovalPolicy(self.view),
            audit=SQLiteAuditSink(),
            request_id="req-1",
            prompt_sha256="0" * 64,
            confirm=lambda request: True,
        )


def test_a_delegated_irreversible_tool_marks_the_calls_record_irreversible() -> None:
    vault = _Vault()
    result = vault.close("shred")
    assert result.ok
    assert vault.done == ["shred acme"]
    assert result.record.irreversible is True
    assert result.record.wrote_instruction_fields is False
    assert result.record.operations == ("delegation:shred",)


def test_a_delegated_instruction_write_marks_the_calls_record_as_a_write_of_instructions() -> None:
    vault = _Vault()
    result = vault.close("retune")
    assert result.ok
    assert result.record.wrote_instruction_fields is True
    assert result.record.irreversible is False
    assert result.record.operations == (
        "delegation:retune",
        "instruction_write:_StoredPrompt.content",
    )


def test_a_delegated_irreversible_tool_counts_even_when_the_caller_fails_afterwards() -> None:
    vault = _Vault(fail_after=True)
    result = vault.close("shred")
    assert result.record.outcome is CallOutcome.FAILED
    assert vault.done == ["shred acme"]  # it happened: the record must not say otherwise
    assert result.record.irreversible is True


def test_a_delegated_irreversible_tool_that_failed_did_nothing_irreversible() -> None:
    vault = _Vault()
    result = vault.close("shred", account="locked")
    assert result.record.outcome is CallOutcome.FAILED
    assert vault.done == []
    assert result.record.irreversible is False


@pytest.mark.parametrize("then", ["shred", "retune"])
def test_a_refused_delegation_marks_nothing(then: str) -> None:
    vault = _Vault()
    policy = ApprovalPolicy(vault.view)
    result = execute(
        vault.view,
        "close_account",
        {"account": "acme", "then": then},
        policy=policy,
        audit=SQLiteAuditSink(),
        request_id="req-1",
        prompt_sha256="0" * 64,
        confirm=lambda request: False,
    )
    assert vault.done == []
    assert result.record.irreversible is False
    assert result.record.wrote_instruction_fields is False


def test_an_observed_delegation_names_the_dispatch_once() -> None:
    vault = _Vault()
    observation = run_observed(vault.view, "close_account", {"account": "acme", "then": "shred"})
    assert observation.operations == ("delegation:shred",)
    assert [event.kind for event in observation.events] == ["delegation", "irreversible"]
    understated = Observation("tidy", Risk.MID, observation.events, "write")
    with pytest.raises(RiskFloorError) as caught:
        check_declared_risk([understated])
    assert str(caught.value).count("a dispatch of tool 'shred'") == 1
