"""A sink that fails after the handler ran: the call's result and its record are not lost."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, field

import pytest

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    AuditWriteError,
    CallOutcome,
    Composer,
    ModelGateway,
    Registry,
    Risk,
    ScriptedProvider,
    ToolView,
    aexecute,
    execute,
    instruction,
)
from veridic.gateway import ModelCallLog

PROMPT = Composer().system(instruction("You send invoices.")).build()


@dataclass
class FailingSink:
    """Stores the first ``room`` records, then fails every write the way a full disk does."""

    room: int = 0
    attempts: list[AuditRecord] = field(default_factory=list)

    def write(self, record: AuditRecord, /) -> None:
        self.attempts.append(record)
        if len(self.attempts) > self.room:
            raise sqlite3.OperationalError("database or disk is full")


def _view(sent: list[str]) -> ToolView:
    registry = Registry()

    @registry.tool(
        kind="write", risk=Risk.LOW, description="Send the invoice of an order to its customer."
    )
    def send_invoice(order: str) -> str:
        """Args:
        order: The order whose invoice goes out.
        """
        sent.append(order)
        return f"invoice of {order} sent"

    @registry.tool(
        kind="write", risk=Risk.LOW, description="Send the invoice of an order, from async code."
    )
    async def send_invoice_async(order: str) -> str:
        """Args:
        order: The order whose invoice goes out.
        """
        sent.append(order)
        return f"invoice of {order} sent"

    @registry.tool(
        kind="write", risk=Risk.LOW, description="Send a reminder that always fails to send."
    )
    def send_reminder(order: str) -> str:
        """Args:
        order: The order to remind the customer of.
        """
        raise ConnectionError("mail server down")

    @registry.tool(
        kind="write", risk=Risk.LOW, description="Wait for the operator, who presses Ctrl-C."
    )
    def wait_for_operator(order: str) -> str:
        """Args:
        order: The order the operator looks at.
        """
        raise KeyboardInterrupt

    return registry.view()


def _policy(view: ToolView) -> ApprovalPolicy:
    policy = ApprovalPolicy(view)
    for name in view.names():
        policy.allow_always(name)
    return policy


def _execute(view: ToolView, sink: FailingSink, name: str) -> object:
    return execute(
        view,
        name,
        {"order": "A-17"},
        policy=_policy(view),
        audit=sink,
        request_id="req-9",
        prompt=PROMPT,
    )


def test_the_result_of_a_call_that_ran_is_on_the_error() -> None:
    sent: list[str] = []
    sink = FailingSink()
    with pytest.raises(AuditWriteError) as caught:
        _execute(_view(sent), sink, "send_invoice")
    error = caught.value
    assert sent == ["A-17"]  # the effect happened once
    assert error.result.value == "invoice of A-17 sent"
    assert error.result.record == sink.attempts[-1]
    assert error.result.record.outcome is CallOutcome.OK
    assert isinstance(error.__cause__, sqlite3.OperationalError)
    message = str(error)
    assert "'send_invoice' ran (outcome ok, request 'req-9')" in message
    assert "disk is full" in message
    assert "do not run the call again" in message


def test_a_handler_error_is_kept_with_the_unwritten_record() -> None:
    sink = FailingSink()
    with pytest.raises(AuditWriteError) as caught:
        _execute(_view([]), sink, "send_reminder")
    result = caught.value.result
    assert isinstance(result.error, ConnectionError)
    assert result.record.outcome is CallOutcome.FAILED
    assert "mail server down" in result.record.detail


def test_a_call_that_did_not_run_lets_the_sinks_error_through() -> None:
    # Nothing happened in the world: the sink's own error says all there is.
    sink = FailingSink()
    with pytest.raises(sqlite3.OperationalError):
        _execute(_view([]), sink, "send_invoices")
    assert [record.outcome for record in sink.attempts] == [CallOutcome.REFUSED]


def test_an_interrupt_goes_on_with_the_audit_failure_as_its_context() -> None:
    sink = FailingSink()
    with pytest.raises(KeyboardInterrupt) as caught:
        _execute(_view([]), sink, "wait_for_operator")
    assert isinstance(caught.value.__context__, AuditWriteError)
    assert [record.outcome for record in sink.attempts] == [CallOutcome.FAILED]


def test_aexecute_keeps_the_result_too() -> None:
    sent: list[str] = []
    view = _view(sent)
    sink = FailingSink()
    call = aexecute(
        view,
        "send_invoice_async",
        {"order": "A-17"},
        policy=_policy(view),
        audit=sink,
        request_id="req-9",
        prompt=PROMPT,
    )
    with pytest.raises(AuditWriteError) as caught:
        asyncio.run(call)
    assert sent == ["A-17"]
    assert caught.value.result.value == "invoice of A-17 sent"


def test_run_tools_keeps_the_outcomes_of_the_calls_that_ran_before_the_failure() -> None:
    sent: list[str] = []
    view = _view(sent)
    calls = [("c1", "send_invoice", {"order": "A-1"}), ("c2", "send_invoice", {"order": "A-2"})]
    calls.append(("c3", "send_invoice", {"order": "A-3"}))
    sink = FailingSink(room=1)  # the first record fits, the second does not
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}]), audit=sink, calls=ModelCallLog()
    )
    reply = gateway.send(Composer().user("Send them.").build(), view, request_id="req-9")
    with pytest.raises(AuditWriteError) as caught:
        gateway.run_tools(reply, policy=_policy(view))
    assert sent == ["A-1", "A-2"]  # the third call did not run
    assert [outcome.call.id for outcome in caught.value.earlier] == ["c1"]
    assert caught.value.earlier[0].result.value == "invoice of A-1 sent"
    assert caught.value.result.value == "invoice of A-2 sent"


def test_arun_tools_keeps_the_outcomes_of_the_calls_that_ran_before_the_failure() -> None:
    sent: list[str] = []
    view = _view(sent)
    calls = [("c1", "send_invoice_async", {"order": "A-1"})]
    calls.append(("c2", "send_invoice_async", {"order": "A-2"}))
    sink = FailingSink(room=1)
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}]), audit=sink, calls=ModelCallLog()
    )
    reply = gateway.send(Composer().user("Send them.").build(), view, request_id="req-9")
    with pytest.raises(AuditWriteError) as caught:
        asyncio.run(gateway.arun_tools(reply, policy=_policy(view)))
    assert sent == ["A-1", "A-2"]
    assert [outcome.call.id for outcome in caught.value.earlier] == ["c1"]


def test_an_unwritten_record_under_an_interrupt_is_logged_escaped_and_clipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The record the store refused while Ctrl-C went on was logged by ``repr``, whole,
    with the call id twice: a call id of a megabyte (execute() takes the caller's, a
    model's) made a log line of two megabytes, and a note of one on the interrupt."""
    call_id = "call-\u202e" + "c" * 1_000_000
    view = _view([])
    with (
        caplog.at_level(logging.ERROR, logger="veridic.executor"),
        pytest.raises(KeyboardInterrupt) as caught,
    ):
        execute(
            view,
            "wait_for_operator",
            {"order": "A-17"},
            policy=_policy(view),
            audit=FailingSink(),
            request_id="req-9",
            prompt=PROMPT,
            call_id=call_id,
        )
    (logged,) = [r.getMessage() for r in caplog.records if "could not be written" in r.getMessage()]
    assert len(logged) < 20_000
    assert "\u202e" not in logged
    assert "call id 'call-\\u202eccc" in logged  # escaped, and said where it is cut
    assert logged.count(f"({len(call_id)} chars)") == 1
    assert "outcome=<CallOutcome.FAILED" in logged  # the record's fields before its call id
    notes = caught.value.__notes__
    assert all(len(note) < 1000 and "\u202e" not in note for note in notes)


def test_a_failed_handler_is_logged_with_its_call_id_escaped_and_clipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler's failure is logged with the request and the call id: the call id was given
    by ``%r``, whole, and execute() takes the caller's (a model's), so a call id of a
    megabyte made a log line of one for every failed call."""
    call_id = "call-\u202e" + "c" * 1_000_000
    view = _view([])
    with caplog.at_level(logging.WARNING, logger="veridic.executor"):
        result = execute(
            view,
            "send_reminder",
            {"order": "A-17"},
            policy=_policy(view),
            audit=FailingSink(room=1),
            request_id="req-9",
            prompt=PROMPT,
            call_id=call_id,
        )
    assert not result.ok
    (logged,) = [r.getMessage() for r in caplog.records if "failed (request" in r.getMessage()]
    assert len(logged) < 5_000
    assert "\u202e" not in logged
    assert "call id 'call-\\u202eccc" in logged
    assert f"({len(call_id)} chars)" in logged  # says it is cut, and how long the id is
    assert "ConnectionError: 'mail server down'" in logged  # the handler's own message whole
