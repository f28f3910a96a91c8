"""A confirmed call's authority ends with the call, and a guard that fires later is still audited.

A task or worker the handler starts inherits the dispatch's context; once
the call has returned, a guarded operation it attempts is refused, and the
refusal reaches the audit store as a follow-up record of the same request
and tool, never vanishing.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AuditRecord,
    AuditSink,
    AuditWriteError,
    CallOutcome,
    CallResult,
    Composer,
    GuardDeniedError,
    Registry,
    Risk,
    RiskFloorError,
    SQLiteAuditSink,
    ToolView,
    aexecute,
    execute,
    guard_irreversible,
    instruction,
)
from veridic.effects import check_declared_risk, observe
from veridic.guards import current_dispatch, dispatching

PROMPT = Composer().system(instruction("You maintain golden fixtures.")).build()
OPERATION = "irreversible:hard delete golden fixture"


@dataclass
class Store:
    fixtures: set[str] = field(default_factory=lambda: {"golden-1", "golden-2", "golden-3"})

    def forget(self, name: str) -> None:
        guard_irreversible("hard delete golden fixture")
        self.fixtures.discard(name)


@dataclass
class Later:
    """Work a handler leaves behind: it waits for ``go``, then attempts a hard delete."""

    store: Store
    go: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    outcome: list[BaseException | str] = field(default_factory=list)

    def run(self) -> None:
        self.go.wait(5)
        try:
            self.store.forget("golden-2")
            self.outcome.append("deleted")
        except GuardDeniedError as error:
            self.outcome.append(error)
        finally:
            self.done.set()

    def release(self) -> BaseException | str:
        self.go.set()
        self.done.wait(5)
        (outcome,) = self.outcome
        return outcome


def fixtures_view(store: Store, spawn: Callable[[], None]) -> ToolView:
    registry = Registry("fixtures")

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; a hard delete that cannot be undone.

        Args:
            name: The fixture.
        """
        store.forget(name)  # inside the confirmed call: allowed
        spawn()
        return "deleted"

    return registry.view()


def confirmed(view: ToolView, audit: AuditSink) -> CallResult:
    return execute(
        view,
        "delete_golden",
        {"name": "golden-1"},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="req-1",
        prompt=PROMPT,
        confirm=lambda request: True,
    )


def assert_follow_up(record: AuditRecord) -> None:
    assert record.follow_up
    assert (record.request_id, record.tool, record.outcome) == (
        "req-1",
        "delete_golden",
        CallOutcome.BLOCKED,
    )
    assert record.operations == (OPERATION,)
    assert record.approval is ApprovalMode.USER_CONFIRMED
    assert not record.irreversible
    assert record.detail.startswith(f"after the call ended: a guard refused {OPERATION} (at ")
    assert "attempted by a task or thread the call started" in record.detail


def test_a_thread_in_a_copied_context_loses_the_confirmed_calls_authority() -> None:
    store, audit = Store(), SQLiteAuditSink()
    later = Later(store)

    def spawn() -> None:
        threading.Thread(target=contextvars.copy_context().run, args=(later.run,)).start()

    result = confirmed(fixtures_view(store, spawn), audit)
    assert result.ok
    assert result.record.irreversible
    outcome = later.release()
    assert isinstance(outcome, GuardDeniedError)
    message = str(outcome)
    assert "after the call of 'delete_golden' (request 'req-1') had ended" in message
    assert "a call's authority ends with the call" in message
    assert "await the task, join the thread" in message
    assert store.fixtures == {"golden-2", "golden-3"}
    first, follow_up = audit.records("req-1")
    assert first == result.record
    assert not first.follow_up
    assert_follow_up(follow_up)


def test_an_executor_job_with_a_copied_context_loses_the_authority_too() -> None:
    store, audit = Store(), SQLiteAuditSink()
    later = Later(store)
    jobs: list[asyncio.Future[None]] = []

    def spawn() -> None:
        loop = asyncio.get_running_loop()
        jobs.append(loop.run_in_executor(None, contextvars.copy_context().run, later.run))

    async def main() -> CallResult:
        view = fixtures_view(store, spawn)
        result = await aexecute(
            view,
            "delete_golden",
            {"name": "golden-1"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=PROMPT,
            confirm=lambda request: True,
        )
        later.go.set()
        await jobs[0]
        return result

    result = asyncio.run(main())
    assert result.ok
    assert isinstance(later.outcome[0], GuardDeniedError)
    assert "golden-2" in store.fixtures
    assert_follow_up(audit.records("req-1")[1])


def test_a_task_the_handler_does_not_await_is_refused_after_aexecute_returns() -> None:
    store, audit = Store(), SQLiteAuditSink()
    tasks: list[asyncio.Task[str]] = []
    registry = Registry("fixtures")

    async def purge_later(name: str) -> str:
        await asyncio.sleep(0.01)
        store.forget(name)
        return "deleted"

    @registry.tool(kind="write", irreversible=True)
    async def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; a hard delete that cannot be undone.

        Args:
            name: The fixture.
        """
        await asyncio.create_task(purge_later(name))  # awaited inside the call: allowed
        tasks.append(asyncio.create_task(purge_later("golden-2")))  # left running
        return "deleted"

    async def main() -> CallResult:
        view = registry.view()
        result = await aexecute(
            view,
            "delete_golden",
            {"name": "golden-1"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=PROMPT,
            confirm=lambda request: True,
        )
        with pytest.raises(GuardDeniedError, match="had ended"):
            await tasks[0]
        return result

    result = asyncio.run(main())
    assert result.ok
    assert store.fixtures == {"golden-2", "golden-3"}
    first, follow_up = audit.records("req-1")
    assert first.outcome is CallOutcome.OK
    assert first.irreversible
    assert_follow_up(follow_up)


def test_a_closed_scope_allows_nothing_not_even_a_new_dispatch_inside_it() -> None:
    with dispatching("delete_golden", Risk.HIGH, ApprovalMode.USER_CONFIRMED) as scope:
        context = contextvars.copy_context()
        guard_irreversible("hard delete golden fixture")
    assert scope.closed

    def later() -> None:
        assert current_dispatch() == scope.call  # still known as the agent's work
        with (
            dispatching("edit_prompt", Risk.HIGH, ApprovalMode.USER_CONFIRMED) as inner,
            pytest.raises(GuardDeniedError, match="after the call of 'delete_golden'"),
        ):
            guard_irreversible("hard delete golden fixture")
        assert [(e.allowed, e.late) for e in inner.events] == [(False, True)]

    context.run(later)
    assert [(e.allowed, e.late) for e in scope.events] == [(True, False)]
    assert [(e.allowed, e.late) for e in scope.late_events] == [(False, True)]


def test_a_late_guard_without_a_reporter_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = Store()
    with dispatching("delete_golden", Risk.HIGH, ApprovalMode.USER_CONFIRMED) as scope:
        context = contextvars.copy_context()
    with (
        caplog.at_level(logging.WARNING, logger="veridic.guards"),
        pytest.raises(GuardDeniedError, match="had ended"),
    ):
        context.run(store.forget, "golden-3")
    assert "golden-3" in store.fixtures
    assert [e.operations for e in scope.late_events] == [(OPERATION,)]
    (logged,) = [r for r in caplog.records if r.name == "veridic.guards"]
    assert logged.levelno == logging.WARNING
    assert OPERATION in logged.getMessage()
    assert "no reporter records it" in logged.getMessage()


def test_observing_does_not_extend_authority_and_still_counts_the_late_attempt() -> None:
    with observe("purge", Risk.MID) as seen:
        context = contextvars.copy_context()
    with pytest.raises(GuardDeniedError, match="had ended"):
        context.run(guard_irreversible, "hard delete golden fixture")
    observation = seen.observation
    assert [(e.allowed, e.late) for e in observation.events] == [(False, True)]
    assert observation.required is Risk.HIGH
    with pytest.raises(RiskFloorError, match="'purge' declares risk mid"):
        check_declared_risk([observation])


# --- a follow-up that cannot be written is not swallowed ---------------------------------


@dataclass
class FullAfter:
    """Stores the first ``room`` records, then fails the way a full disk does."""

    room: int
    stored: list[AuditRecord] = field(default_factory=list)
    before_write: Callable[[], None] = lambda: None

    def write(self, record: AuditRecord, /) -> None:
        self.before_write()
        if len(self.stored) >= self.room:
            raise sqlite3.OperationalError("database or disk is full")
        self.stored.append(record)


def test_an_unwritable_follow_up_is_logged_and_chained_onto_the_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, sink = Store(), FullAfter(room=1)
    later = Later(store)

    def spawn() -> None:
        threading.Thread(target=contextvars.copy_context().run, args=(later.run,)).start()

    with caplog.at_level(logging.ERROR, logger="veridic.guards"):
        result = confirmed(fixtures_view(store, spawn), sink)
        outcome = later.release()
    assert result.ok
    assert isinstance(outcome, GuardDeniedError)
    assert isinstance(outcome.__cause__, sqlite3.OperationalError)
    assert "its follow-up audit record could not be written (OperationalError" in str(outcome)
    (logged,) = [r for r in caplog.records if r.name == "veridic.guards"]
    assert logged.levelno == logging.ERROR
    assert logged.exc_info is not None
    assert "golden-2" in store.fixtures


def test_a_guard_racing_the_end_of_the_call_is_recorded_after_the_calls_record() -> None:
    """A thread that fires while the call's record is being written waits for it, in order."""
    store = Store()
    later = Later(store)
    sink = FullAfter(room=10)
    writing = threading.Event()

    def before_write() -> None:
        if not writing.is_set():  # the call's own record: let the thread fire first
            writing.set()
            later.go.set()
            later.done.wait(5)

    sink.before_write = before_write

    def spawn() -> None:
        threading.Thread(target=contextvars.copy_context().run, args=(later.run,)).start()

    result = confirmed(fixtures_view(store, spawn), sink)
    assert isinstance(later.outcome[0], GuardDeniedError)
    first, follow_up = sink.stored
    assert first == result.record
    assert_follow_up(follow_up)


def test_a_racing_follow_up_that_cannot_be_written_fails_the_call_with_its_result() -> None:
    store = Store()
    later = Later(store)
    sink = FullAfter(room=1)
    writing = threading.Event()

    def before_write() -> None:
        if not writing.is_set():
            writing.set()
            later.go.set()
            later.done.wait(5)

    sink.before_write = before_write

    def spawn() -> None:
        threading.Thread(target=contextvars.copy_context().run, args=(later.run,)).start()

    with pytest.raises(AuditWriteError, match="follow-up record of a guard refused") as caught:
        confirmed(fixtures_view(store, spawn), sink)
    assert caught.value.result.ok
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    assert len(sink.stored) == 1


# --- follow-ups are not calls ------------------------------------------------------------


def test_follow_ups_are_not_counted_as_calls_or_substitutions() -> None:
    store, audit = Store(), SQLiteAuditSink()
    later = Later(store)

    def spawn() -> None:
        threading.Thread(target=contextvars.copy_context().run, args=(later.run,)).start()

    view = fixtures_view(store, spawn)
    confirmed(view, audit)
    later.release()
    refused = execute(
        view,
        "delete_golden",
        {"name": "golden-3"},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="req-1",
        prompt=PROMPT,
    )
    assert refused.outcome is CallOutcome.DENIED
    assert [r.follow_up for r in audit.records()] == [False, True, False]
    assert audit.writes_by_approval()[ApprovalMode.USER_CONFIRMED] == 1
    assert audit.writes_by_approval()[ApprovalMode.DENIED] == 1
    (substitution,) = audit.substitutions()
    assert substitution.denied == refused.record
    assert substitution.next is None


def test_a_late_guard_without_a_reporter_names_its_request_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One log line among many requests' is found by its request id, as records are.
    store = Store()
    with dispatching("delete_golden", Risk.HIGH, ApprovalMode.USER_CONFIRMED, request_id="req-77"):
        context = contextvars.copy_context()
    with (
        caplog.at_level(logging.WARNING, logger="veridic.guards"),
        pytest.raises(GuardDeniedError, match="had ended"),
    ):
        context.run(store.forget, "golden-3")
    (logged,) = [r for r in caplog.records if r.name == "veridic.guards"]
    assert "'req-77'" in logged.getMessage()
