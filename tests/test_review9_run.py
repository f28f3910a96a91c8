"""Ninth attacker review of the run area: boot checks across threads, the executor, the loop."""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Literal

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    AuditWriteError,
    BootError,
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


def _in_thread(work: Callable[[], object], seconds: float = 20.0) -> object:
    """``work()`` run in a daemon thread; fails the test (instead of hanging it) if it
    does not return in ``seconds``. The wait bounds the suite, it is not asserted on."""
    done: list[object] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as error:  # handed to the test below
            failed.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call hung (a boot check waits for a thread that waits)"
    if failed:
        raise failed[0]
    return done[0]


# --- a boot check that hands registry.view() to another thread ------------------------------


def _joined_thread(work: Callable[[], object], got: list[object]) -> None:
    def run() -> None:
        try:
            got.append(work())
        except BaseException as error:  # what the check's helper thread met
            got.append(error)

    helper = threading.Thread(target=run, daemon=True)
    helper.start()
    helper.join(15)  # bounds the suite only; the assertion is on what the helper met


def _pool(work: Callable[[], object], got: list[object]) -> None:
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(work)
        try:
            got.append(future.result(15))
        except BaseException as error:
            got.append(error)


def _pool_wait(work: Callable[[], object], got: list[object]) -> None:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(work)
    done, _ = wait([future], timeout=15)
    if not done:
        got.append("still waiting")
    else:
        failed = future.exception()
        got.append(future.result() if failed is None else failed)
    pool.shutdown(wait=False)


def _to_thread(work: Callable[[], object], got: list[object]) -> None:
    async def main() -> None:
        try:
            got.append(await asyncio.wait_for(asyncio.to_thread(work), 15))
        except BaseException as error:
            got.append(error)

    asyncio.run(main())


_HANDOFFS = {
    "thread": _joined_thread,
    "pool": _pool,
    "pool_wait": _pool_wait,
    "to_thread": _to_thread,
}


def _plugin_registry(
    handoff: Callable[[Callable[[], object], list[object]], None],
    ask: Callable[[Registry], object],
    recheck: Literal["view"] | None,
) -> tuple[Registry, list[object]]:
    registry = Registry("site")
    got: list[object] = []

    @registry.tool(kind="query")
    def create_webhook(url: str) -> str:
        """Create a webhook that posts to a URL.

        Args:
            url: Where to post.
        """
        return "ok"

    def check() -> bool:
        handoff(lambda: ask(registry), got)
        return True

    pro = registry.component("Pro", boot=check, recheck=recheck)

    @pro.tool(kind="query")
    def create_snippet(text: str) -> str:
        """Create a code snippet.

        Args:
            text: The snippet's code.
        """
        return "snippet"

    return registry, got


@pytest.mark.parametrize("handoff", sorted(_HANDOFFS))
@pytest.mark.parametrize("recheck", [None, "view"])
def test_a_boot_check_that_asks_another_thread_for_a_view_fails_closed_instead_of_hanging(
    handoff: str, recheck: Literal["view"] | None
) -> None:
    registry, got = _plugin_registry(_HANDOFFS[handoff], lambda r: r.view().names(), recheck)
    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert "create_webhook" in view.names()
    assert "create_snippet" not in view.names()
    assert got, "the check's helper thread never ran"
    for error in got:  # recheck="view": the check ran at boot and again for the view
        assert isinstance(error, BootError), error
        assert "another thread" in str(error)
    assert "registry.names()" in str(error)  # what to do instead
    (state,) = registry.components()
    assert state.started is False
    assert "asked the registry for a view" in state.reason


@pytest.mark.parametrize("handoff", sorted(_HANDOFFS))
def test_a_boot_check_that_asks_another_thread_for_the_names_gets_them(handoff: str) -> None:
    # registry.names() is what the refusal tells a check to read instead: from any thread.
    registry, got = _plugin_registry(_HANDOFFS[handoff], lambda r: r.names(), None)
    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert got == [frozenset({"create_webhook", "create_snippet"})]
    assert "create_snippet" in view.names()


@pytest.mark.parametrize("handoff", sorted(_HANDOFFS))
def test_a_boot_check_that_asks_another_thread_for_the_components_gets_them(
    handoff: str,
) -> None:
    # So is registry.components(): the states before this check's, from any thread.
    def states(registry: Registry) -> object:
        return [(state.name, state.started) for state in registry.components()]

    registry, got = _plugin_registry(_HANDOFFS[handoff], states, None)
    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert got == [[("Pro", None)]]
    assert "create_snippet" in view.names()


def test_a_recheck_asked_of_another_thread_by_a_check_fails_closed_instead_of_hanging() -> None:
    registry = Registry("site")
    got: list[object] = []
    handing = [False]

    def check() -> bool:
        if handing[0]:
            _joined_thread(lambda: registry.recheck("Pro"), got)
        return True

    registry.component("Pro", boot=check)
    assert [state.started for state in registry.recheck()] == [True]
    handing[0] = True
    states = _in_thread(registry.recheck)
    assert isinstance(states, tuple)
    assert [state.started for state in states] == [False]
    (error,) = got
    assert isinstance(error, BootError), error


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
    with caplog.at_level(logging.ERROR, "veridic.executor"):
        with pytest.raises(KeyboardInterrupt) as caught:
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
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], AuditWriteError)
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

    with caplog.at_level(logging.ERROR, "veridic.executor"):
        with pytest.raises(asyncio.CancelledError):
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

    with caplog.at_level(logging.ERROR, "veridic.executor"):
        with pytest.raises(KeyboardInterrupt) as caught:
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

    with caplog.at_level(logging.ERROR, "veridic.executor"):
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(main())
    assert [record.outcome for record in sink.attempts] == [CallOutcome.DENIED]
    (logged,) = _unwritten_logs(caplog)
    assert "'req-45'" in logged.getMessage()
