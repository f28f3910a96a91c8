"""Ninth attacker review of the run area: the executor, guards, approvals and the loop."""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    AuditWriteError,
    CallOutcome,
    Composer,
    Limits,
    ModelGateway,
    Registry,
    Risk,
    RunLimitError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    aexecute,
    execute,
    instruction,
)
from veridic.guards import guard_irreversible

PROMPT = Composer().system(instruction("You help the operator.")).build()


# --- an interrupted handler whose audit record then cannot be written -----------------------


class _FullDisk:
    """A sink that fails every write the way a full disk does (sync and async)."""

    def __init__(self) -> None:
        self.attempts: list[AuditRecord] = []

    def write(self, record: AuditRecord, /) -> None:
        self.attempts.append(record)
        raise sqlite3.OperationalError("database or disk is full")


class _Kept:
    """A sink that keeps every record."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord, /) -> None:
        self.records.append(record)


class _FullDiskAsync(_FullDisk):
    async def awrite(self, record: AuditRecord, /) -> None:
        self.write(record)


def _operator_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="write", risk=Risk.LOW, description="Wait for the operator to answer.")
    def wait_for_operator(order: str) -> str:
        """Args:
        order: The order the operator looks at.
        """
        raise KeyboardInterrupt

    @registry.tool(kind="write", risk=Risk.LOW, description="Wait for the operator, from async.")
    async def await_operator(order: str) -> str:
        """Args:
        order: The order the operator looks at.
        """
        raise asyncio.CancelledError

    return registry.view()


def _allowing(view: ToolView) -> ApprovalPolicy:
    policy = ApprovalPolicy(view)
    for name in view.names():
        policy.allow_always(name)
    return policy


def _unwritten_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name == "veridic.executor" and record.levelno >= logging.ERROR
    ]


def test_an_interrupted_call_whose_record_cannot_be_written_is_logged_and_the_interrupt_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    view = _operator_view()
    sink = _FullDisk()
    with (
        caplog.at_level(logging.ERROR, "veridic.executor"),
        pytest.raises(KeyboardInterrupt) as caught,
    ):
        execute(
            view,
            "wait_for_operator",
            {"order": "A-17"},
            policy=_allowing(view),
            audit=sink,
            request_id="req-41",
            prompt=PROMPT,
        )
    assert isinstance(caught.value.__context__, AuditWriteError)
    (logged,) = _unwritten_logs(caplog)
    message = logged.getMessage()
    assert "'wait_for_operator'" in message
    assert "'req-41'" in message
    assert "could not be written" in message
    # The AuditWriteError and the store's error that caused it, with their frames.
    assert "AuditWriteError: " in message
    assert "OperationalError: database or disk is full\n\nwhich led to:" in message
    assert [record.outcome for record in sink.attempts] == [CallOutcome.FAILED]
    assert any("could not be written" in note for note in caught.value.__notes__)


def test_a_cancelled_async_call_whose_record_cannot_be_written_is_logged_and_cancellation_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    view = _operator_view()
    sink = _FullDiskAsync()

    async def main() -> None:
        await aexecute(
            view,
            "await_operator",
            {"order": "A-17"},
            policy=_allowing(view),
            audit=sink,
            request_id="req-42",
            prompt=PROMPT,
        )

    with caplog.at_level(logging.ERROR, "veridic.executor"), pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    (logged,) = _unwritten_logs(caplog)
    message = logged.getMessage()
    assert "'await_operator'" in message
    assert "'req-42'" in message
    assert [record.outcome for record in sink.attempts] == [CallOutcome.FAILED]


# --- a handler that returns a callback for later -------------------------------------------


def _callback_view(done: list[str]) -> ToolView:
    registry = Registry()

    def purge_now(name: str) -> None:
        guard_irreversible("hard delete golden fixture")
        done.append(name)

    @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
    def purge(name: str) -> object:
        """Delete a golden fixture for good.

        Args:
            name: The fixture.
        """
        return lambda: purge_now(name)

    @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
    def purge_later(name: str) -> object:
        """Delete a golden fixture for good, when the caller says.

        Args:
            name: The fixture.
        """
        return {"undo": None, "run": functools.partial(purge_now, name)}

    return registry.view()


@pytest.mark.parametrize(
    ("tool", "said"), [("purge", "a function"), ("purge_later", "['run'] is a partial")]
)
def test_a_handler_that_returns_a_callback_fails_the_call(tool: str, said: str) -> None:
    # The callback's code (a guarded delete) would run whenever the application calls
    # result.value: after the dispatch, outside the guards and the audit record.
    done: list[str] = []
    view = _callback_view(done)
    sink = _Kept()
    result = execute(
        view,
        tool,
        {"name": "fixture-42"},
        policy=ApprovalPolicy(view),
        audit=sink,
        request_id="req-43",
        prompt=PROMPT,
        confirm=lambda request: True,
    )
    assert result.outcome is CallOutcome.FAILED
    assert isinstance(result.error, VeridicError)
    assert said in str(result.error)
    assert "after its dispatch ended" in str(result.error)
    assert result.value is None
    assert done == []
    assert [record.outcome for record in sink.records] == [CallOutcome.FAILED]


def test_a_handler_may_return_a_class_or_a_model_it_made() -> None:
    registry = Registry()

    class Report(BaseModel):
        title: str

    @registry.tool(kind="query")
    def report(title: str) -> Report:
        """The report of that title.

        Args:
            title: The title.
        """
        return Report(title=title)

    @registry.tool(kind="query")
    def report_type(title: str) -> object:
        """The type the report of that title is.

        Args:
            title: The title.
        """
        return Report

    view = registry.view()
    assert view.dispatch("report", {"title": "Q3"}) == Report(title="Q3")
    assert view.dispatch("report_type", {"title": "Q3"}) is Report


# --- a token limit passed by the model's final answer ---------------------------------------


def test_a_token_limit_passed_by_the_final_answer_says_the_answer_is_on_the_composer() -> None:
    # The message said the run stopped "before the model answered without tool calls",
    # which sent the user looking for an answer that never came: it came, and is kept.
    registry = Registry()

    @registry.tool(kind="query")
    def look(q: str) -> str:
        """Look something up.

        Args:
            q: What to look up.
        """
        return f"found {q}"

    view = registry.view()
    usage = {"input_tokens": 10, "output_tokens": 5}
    script: list[dict[str, object]] = [
        {"tool_calls": [("c1", "look", {"q": "a"})], "usage": usage},
        {"text": "Here it is.", "usage": usage},
    ]
    gateway = ModelGateway(ScriptedProvider(script), audit=SQLiteAuditSink())
    composer = Composer().system(instruction("You look things up.")).user("Look up a.")
    with pytest.raises(RunLimitError) as caught:
        gateway.run(
            composer, view, policy=ApprovalPolicy(view), request_id="r", limits=Limits(tokens=20)
        )
    assert (caught.value.limit, caught.value.allowed, caught.value.reached) == ("tokens", 20, 30)
    message = str(caught.value)
    assert "before the model answered" not in message
    assert "answer without tool calls" in message
    assert "composer" in message
    assert composer.conversation().turns[-1].text == "Here it is."


# --- an interrupt at the approval prompt, and a store that fails ---------------------------


def _asking_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="write")
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: The order to refund.
        """
        return f"refunded {order}"

    return registry.view()


def test_an_interrupt_at_the_approval_prompt_goes_on_when_its_record_cannot_be_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Ctrl-C at "refund A-17? [y/n]" with the store full: the disk's error replaced the
    # interrupt, so the program went on as if an ordinary error had happened.
    view = _asking_view()
    sink = _FullDisk()

    def confirm(request: object) -> bool:
        raise KeyboardInterrupt

    with (
        caplog.at_level(logging.ERROR, "veridic.executor"),
        pytest.raises(KeyboardInterrupt) as caught,
    ):
        execute(
            view,
            "refund",
            {"order": "A-17"},
            policy=ApprovalPolicy(view),
            audit=sink,
            request_id="req-44",
            prompt=PROMPT,
            confirm=confirm,
        )
    assert any("could not be written" in note for note in caught.value.__notes__)
    assert [record.outcome for record in sink.attempts] == [CallOutcome.DENIED]
    (logged,) = _unwritten_logs(caplog)
    assert "'refund'" in logged.getMessage()
    assert "'req-44'" in logged.getMessage()


def test_a_cancellation_at_the_async_approval_prompt_goes_on_when_its_record_cannot_be_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    view = _asking_view()
    sink = _FullDiskAsync()

    async def confirm(request: object) -> bool:
        raise asyncio.CancelledError

    async def main() -> None:
        await aexecute(
            view,
            "refund",
            {"order": "A-17"},
            policy=ApprovalPolicy(view),
            audit=sink,
            request_id="req-45",
            prompt=PROMPT,
            confirm=confirm,
        )

    with caplog.at_level(logging.ERROR, "veridic.executor"), pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert [record.outcome for record in sink.attempts] == [CallOutcome.DENIED]
    (logged,) = _unwritten_logs(caplog)
    assert "'req-45'" in logged.getMessage()
