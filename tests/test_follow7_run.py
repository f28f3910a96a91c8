"""Last follow-ups to the sixth review of the executor, gateway and guards, through the public API.

Each test failed on the merged code before its fix.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import threading

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
    VeridicError,
    execute,
    instruction,
)
from veridic.run.audit import AuditRecord

SYSTEM = instruction("You are the support agent of Acme.")

# --- a delegated tool that finishes after the call ended is on record ---------------------


class _Shredder:
    """A confirmed ``close_account`` that starts the shred of the account in a thread and
    returns before the shred finishes: the delegation was allowed (the call was open), the
    irreversible effect happens after the call's record was written."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.done: list[str] = []
        self.threads: list[threading.Thread] = []
        registry = Registry("vault")
        shredder = self

        @registry.tool(kind="write", irreversible=True)
        def shred(account: str) -> str:
            """Shred an account's records; a shredded record cannot be restored.

            Args:
                account: The account.
            """
            shredder.started.set()
            shredder.go.wait(5)
            shredder.done.append(f"shred {account}")
            return "shredded"

        @registry.tool(kind="write", risk="high")
        def close_account(account: str) -> str:
            """Close an account; each call is confirmed by the user.

            Args:
                account: The account.
            """
            run = contextvars.copy_context().run
            thread = threading.Thread(
                target=run, args=(shredder.view.dispatch, "shred", {"account": account})
            )
            shredder.threads.append(thread)
            thread.start()
            shredder.started.wait(5)
            return "closing"

        self.view: ToolView = registry.view()


def test_a_delegated_irreversible_tool_finishing_after_the_call_gets_a_follow_up_record() -> None:
    shredder = _Shredder()
    audit = SQLiteAuditSink()
    result = execute(
        shredder.view,
        "close_account",
        {"account": "acme"},
        policy=ApprovalPolicy(shredder.view),
        audit=audit,
        request_id="req-1",
        prompt_sha256="0" * 64,
        confirm=lambda request: True,
    )
    assert result.ok
    assert result.record.irreversible is False  # the shred had not finished then
    shredder.go.set()
    shredder.threads[0].join(5)
    assert shredder.done == ["shred acme"]
    first, follow_up = audit.records("req-1")
    assert first == result.record
    assert follow_up.follow_up
    assert follow_up.tool == "close_account"
    assert follow_up.irreversible is True
    assert follow_up.outcome is CallOutcome.BLOCKED  # a follow-up, not a second call
    assert follow_up.operations == ("delegation:shred",)
    assert follow_up.detail.startswith(
        "after the call ended: delegation:shred happened: a delegated tool finished it in a "
        "task or thread the call started"
    )


# --- a cancellation while the call's record is written still answers the call ------------


class _HeldSQLite(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record waits on the network."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.writing = asyncio.Event()

    async def awrite(self, record: AuditRecord, /) -> None:
        if record.call_id and not self.writing.is_set():
            self.writing.set()
            await asyncio.sleep(0.05)
        await super().awrite(record)


def test_a_call_cancelled_while_its_record_is_written_is_answered_on_the_composer() -> None:
    registry = Registry("orders")
    ran: list[int] = []

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(order_id)
        return "refunded"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("refund")
    calls = [("c1", "refund", '{"order_id": 1}')]
    audit = _HeldSQLite()
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}], asynchronous=True), audit=audit
    )
    composer = Composer().system(SYSTEM, view.capability_section()).user("Refund 1.")

    async def cancelled() -> BaseException:
        task = asyncio.create_task(gateway.arun(composer, view, policy=policy, request_id="req-2"))
        await audit.writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        await asyncio.sleep(0.1)  # the write left running ends
        return caught.value

    error = asyncio.run(cancelled())
    assert ran == [1]
    (record,) = [r for r in audit.records("req-2") if r.call_id == "c1"]
    assert record.outcome is CallOutcome.OK  # it ran to its end; only the write was cut
    notes = "\n".join(error.__notes__)
    assert "the results of the 1 call(s) of it that ran" in notes
    assert (
        f"the call of tool 'refund' (request 'req-2', call id 'c1') ran to its end (outcome ok), "
        f"and the CancelledError landed while its audit record {record.record_id} was being "
        "written: the write goes on to its end"
    ) in notes
    turns = composer.conversation().turns
    (answer,) = [turn for turn in turns if turn.kind == "tool_result"]
    # The refund happened: the model is told its result, not that it is unknown.
    assert (answer.call_id, answer.error, answer.text) == ("c1", False, "refunded")


# --- an application's request id is capped --------------------------------------------------


def _orders() -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        return f"order {order_id}: shipped"

    return registry.view()


HUGE = "x" * 4097


def _says_what_to_do(error: VeridicError) -> None:
    message = str(error)
    assert "4097 characters" in message
    assert "4096" in message
    assert "sha256" in message
    assert HUGE not in message


def test_execute_refuses_a_request_id_longer_than_4096_characters_before_running() -> None:
    view = _orders()
    audit = SQLiteAuditSink()
    with pytest.raises(VeridicError) as caught:
        execute(
            view,
            "get_order",
            {"order_id": 1},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id=HUGE,
            prompt_sha256="0" * 64,
        )
    _says_what_to_do(caught.value)
    assert "execute()" in str(caught.value)
    assert audit.records(HUGE) == ()
    digest = hashlib.sha256(HUGE.encode()).hexdigest()
    kept = execute(
        view,
        "get_order",
        {"order_id": 1},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="y" * 4096,
        prompt_sha256="0" * 64,
    )
    assert kept.ok
    assert execute(
        view,
        "get_order",
        {"order_id": 1},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id=digest,
        prompt_sha256="0" * 64,
    ).ok


def test_send_and_run_refuse_a_request_id_longer_than_4096_characters_before_sending() -> None:
    view = _orders()
    audit = SQLiteAuditSink()
    provider = ScriptedProvider([{"text": "hi"}, {"text": "hi"}])
    gateway = ModelGateway(provider, audit=audit)
    composer = Composer().system(SYSTEM, view.capability_section()).user("Where is 1?")
    with pytest.raises(VeridicError) as sent:
        gateway.send(composer.build(), view, request_id=HUGE)
    _says_what_to_do(sent.value)
    with pytest.raises(VeridicError) as ran:
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id=HUGE)
    _says_what_to_do(ran.value)
    assert audit.model_calls(HUGE) == ()
    # Nothing was sent: both scripted answers are still there.
    assert gateway.send(composer.build(), view, request_id="req-3").text == "hi"
    assert gateway.send(composer.build(), view, request_id="req-3").text == "hi"


def test_arun_and_asend_refuse_a_request_id_longer_than_4096_characters() -> None:
    view = _orders()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "hi"}], asynchronous=True), audit=SQLiteAuditSink()
    )
    composer = Composer().system(SYSTEM, view.capability_section()).user("Where is 1?")
    with pytest.raises(VeridicError) as sent:
        asyncio.run(gateway.asend(composer.build(), view, request_id=HUGE))
    _says_what_to_do(sent.value)
    with pytest.raises(VeridicError) as ran:
        asyncio.run(gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id=HUGE))
    _says_what_to_do(ran.value)


class _InterruptedSQLite(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record is cut by Ctrl-C."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.cut = False

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id and not self.cut:
            self.cut = True
            raise KeyboardInterrupt
        super().write(record)


def test_ctrl_c_while_a_calls_record_is_written_in_run_answers_the_call() -> None:
    registry = Registry("units")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        return f"units: {unit}"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=_InterruptedSQLite())
    composer = Composer().system(SYSTEM, view.capability_section()).user("Use celsius.")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="req-4")
    notes = "\n".join(caught.value.__notes__)
    assert "the results of the 1 call(s) of it that ran" in notes
    assert "ran to its end (outcome ok), and the KeyboardInterrupt landed" in notes
    assert "the write was cut short, so the store may lack it" in notes
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert (answer.call_id, answer.error, answer.text) == ("c1", False, "units: celsius")
