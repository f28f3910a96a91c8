"""Follow-ups to the sixth review of the executor, gateway and tools, through the public API.

Each test failed on the merged code before its fix.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    Composer,
    InstructionField,
    ModelGateway,
    PausedRun,
    Registry,
    Risk,
    RiskFloorError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    execute,
    instruction,
    untrusted,
)
from veridic.run.effects import Observation, check_declared_risk, run_observed

SYSTEM = instruction("You are the support agent of Acme.")

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


# --- a call cancelled while it ran is answered on the composer -----------------------------


class _SlowRefunds:
    """A paused run whose second call, a refund, hangs at the bank until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.ran: list[str] = []
        registry = Registry("refunds")
        refunds = self

        @registry.tool(kind="query")
        def get_order(order_id: int) -> str:
            """Look up an order's status.

            Args:
                order_id: The order.
            """
            return f"order {order_id}: lost"

        @registry.tool(kind="write")
        async def refund(order_id: int) -> str:
            """Refund an order to the card it was paid with.

            Args:
                order_id: The order.
            """
            refunds.ran.append(f"refund {order_id}")
            refunds.started.set()
            await asyncio.Event().wait()  # the bank never answers
            return "refunded"

        self.view: ToolView = registry.view()
        self.audit = SQLiteAuditSink()

    def composer(self) -> Composer:
        return Composer().system(SYSTEM, self.view.capability_section())

    def paused(self) -> PausedRun:
        calls = [
            ("c1", "get_order", '{"order_id": 1}'),
            ("c2", "refund", '{"order_id": 2}'),
            ("c3", "refund", '{"order_id": 3}'),
        ]
        result = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=self.audit).run(
            self.composer().user("Refund 2 and 3."),
            self.view,
            policy=ApprovalPolicy(self.view),
            request_id="req-1",
            defer=True,
        )
        assert result.paused is not None
        return result.paused


def test_a_call_cancelled_in_aresume_is_answered_so_the_run_can_go_on() -> None:
    refunds = _SlowRefunds()
    paused = refunds.paused()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Refund 2 timed out."}], asynchronous=True),
        audit=refunds.audit,
    )
    composer = refunds.composer()
    policy = ApprovalPolicy(refunds.view)

    async def cancelled() -> BaseException:
        task = asyncio.create_task(
            gateway.aresume(
                paused, composer, refunds.view, policy=policy, answers={"c2": True, "c3": True}
            )
        )
        await refunds.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value

    error = asyncio.run(cancelled())
    assert refunds.ran == ["refund 2"]
    (record,) = [r for r in refunds.audit.records("req-1") if r.call_id == "c2"]
    assert record.outcome is CallOutcome.FAILED
    notes = "\n".join(getattr(error, "__notes__", []))
    # c1 ran before the pause, c2 in the resume: the composer holds both results.
    assert (
        "the results of the 2 calls of it that ran (1 before the pause, 1 in this resume)" in notes
    )
    turns = composer.conversation().turns
    answered = {turn.call_id: turn for turn in turns if turn.kind == "tool_result"}
    assert set(answered) == {"c1", "c2"}
    assert answered["c2"].error
    assert "interrupted (CancelledError)" in answered["c2"].text
    # The caller answers the call that did not run, and goes on from the composer.
    composer.tool_result("c3", untrusted("not run: the run was cancelled", source="app"))
    result = asyncio.run(gateway.arun(composer, refunds.view, policy=policy, request_id="req-1"))
    assert result.text == "Refund 2 timed out."


def test_queries_cancelled_together_in_arun_are_all_answered() -> None:
    started: list[int] = []
    registry = Registry("orders")

    @registry.tool(kind="query")
    async def track(order_id: int) -> str:
        """Track an order with the carrier.

        Args:
            order_id: The order.
        """
        started.append(order_id)
        await asyncio.Event().wait()  # the carrier never answers
        return "in transit"

    view = registry.view()
    audit = SQLiteAuditSink()
    calls = [("c1", "track", '{"order_id": 1}'), ("c2", "track", '{"order_id": 2}')]
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}], asynchronous=True), audit=audit
    )
    composer = Composer().system(SYSTEM, view.capability_section()).user("Where are 1 and 2?")

    async def cancelled() -> BaseException:
        task = asyncio.create_task(
            gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id="req-2")
        )
        while len(started) < 2:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value

    error = asyncio.run(cancelled())
    records = [r for r in audit.records("req-2") if r.call_id]
    assert sorted(r.call_id for r in records) == ["c1", "c2"]
    assert {r.outcome for r in records} == {CallOutcome.FAILED}
    assert "the results of the 2 calls of it that ran" in "\n".join(error.__notes__)
    turns = composer.conversation().turns
    assert [t.call_id for t in turns if t.kind == "tool_result"] == ["c1", "c2"]


# --- an always rule is granted for one registry's tool ---------------------------------------


def _notes_for(team: str, deleted: list[str]) -> ToolView:
    """One factory, two teams: the tools share code, description and schema, not data."""
    registry = Registry(f"notes:{team}")

    @registry.tool(kind="write")
    def archive_note(note: str) -> str:
        """Archive one of the team's notes; archived notes can be restored.

        Args:
            note: The note.
        """
        deleted.append(f"{team}:{note}")
        return "archived"

    return registry.view()


def test_an_always_rule_carried_to_another_registrys_tool_of_one_factory_is_asked_again() -> None:
    deleted: list[str] = []
    policy = ApprovalPolicy(_notes_for("a", deleted))
    policy.allow_always("archive_note")
    other = _notes_for("b", deleted)
    carried = ApprovalPolicy(other, rules=policy.rules)
    request = carried.request("archive_note", {"note": "roadmap"})
    assert request.pending
    assert "granted for a different tool" in request.why
    assert "its registry" in request.why
    # The same team's tools, in a view built again, keep the rule.
    again = ApprovalPolicy(_notes_for("a", deleted), rules=policy.rules)
    assert again.request("archive_note").mode is ApprovalMode.ALWAYS_RULE


def test_a_grant_saved_before_grants_named_the_registry_still_applies() -> None:
    view = _notes_for("a", [])
    policy = ApprovalPolicy(view)
    policy.allow_always("archive_note")
    (grant,) = policy.grants.values()
    parts = grant.split(" ")
    legacy = " ".join(
        ["grant-v1", *(part for part in parts[1:] if not part.startswith("registry="))]
    )
    assert legacy != grant
    restored = ApprovalPolicy.restore(
        view, {"archive_note": "always"}, grants={"archive_note": legacy}
    )
    assert restored.request("archive_note").mode is ApprovalMode.ALWAYS_RULE
    changed = legacy.replace("kind=", "kind=0", 1)
    stale = ApprovalPolicy.restore(
        view, {"archive_note": "always"}, grants={"archive_note": changed}
    )
    assert stale.request("archive_note").pending


def test_a_call_stopped_by_ctrl_c_in_run_is_answered_on_the_composer() -> None:
    registry = Registry("units")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        raise KeyboardInterrupt

    view = registry.view()
    calls = [("c1", "set_units", '{"unit": "celsius"}'), ("c2", "set_units", '{"unit": "f"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=SQLiteAuditSink())
    composer = Composer().system(SYSTEM, view.capability_section()).user("Use celsius.")
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="req-3")
    assert "the results of the 1 call of it that ran" in "\n".join(caught.value.__notes__)
    turns = composer.conversation().turns
    (answer,) = [turn for turn in turns if turn.kind == "tool_result"]
    assert (answer.call_id, answer.error) == ("c1", True)
    assert "interrupted (KeyboardInterrupt)" in answer.text
