"""The seventh attacker review of the executor, the run loop and the provider adapters,
through the public API.

Each test reproduces a finding of the review: it failed on the code before its fix.
"""

from __future__ import annotations

import asyncio

import pytest

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    instruction,
)
from veridic.run.audit import AuditRecord

SYSTEM = instruction("You are the support agent of Acme.")


# --- a second interrupt while an interrupted call's record is written ------------------------


class _CancelledTwice(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record waits on the network."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.writing = asyncio.Event()

    async def awrite(self, record: AuditRecord, /) -> None:
        if record.call_id and not self.writing.is_set():
            self.writing.set()
            await asyncio.sleep(0.05)
        await super().awrite(record)


def _slow_refunds(started: asyncio.Event) -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="write")
    async def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        started.set()
        await asyncio.sleep(5)
        return "refunded"

    return registry.view()


def test_a_second_cancellation_while_a_cancelled_calls_record_is_written_answers_it() -> None:
    # The first cancel cuts the handler; the second lands while its record is written. The
    # call was left unanswered: the next request of the conversation would be refused.
    audit = _CancelledTwice()

    async def cancelled() -> Composer:
        started = asyncio.Event()
        view = _slow_refunds(started)
        policy = ApprovalPolicy(view)
        policy.allow_always("refund")
        calls = [("c1", "refund", '{"order_id": 1}')]
        gateway = ModelGateway(
            ScriptedProvider([{"tool_calls": calls}], asynchronous=True), audit=audit
        )
        composer = Composer().system(SYSTEM, view.capability_section()).user("Refund 1.")
        task = asyncio.create_task(gateway.arun(composer, view, policy=policy, request_id="r"))
        await started.wait()
        task.cancel()
        await audit.writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)  # the write left running ends
        return composer

    composer = asyncio.run(cancelled())
    (record,) = [r for r in audit.records("r") if r.call_id == "c1"]
    assert record.outcome is CallOutcome.FAILED
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert answer.call_id == "c1"
    assert answer.error
    assert "was interrupted (CancelledError) while it ran" in answer.text


class _InterruptedAgain(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record is cut by Ctrl-C."""

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id:
            raise KeyboardInterrupt
        super().write(record)


def test_a_second_ctrl_c_while_an_interrupted_calls_record_is_written_answers_it() -> None:
    registry = Registry("units")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        raise KeyboardInterrupt

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=_InterruptedAgain())
    composer = Composer().system(SYSTEM, view.capability_section()).user("Use celsius.")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="r")
    notes = "\n".join(caught.value.__notes__)
    assert "the write was cut short, so the store may lack it" in notes
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert answer.call_id == "c1"
    assert answer.error
    assert "was interrupted (KeyboardInterrupt) while it ran" in answer.text
