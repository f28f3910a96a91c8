"""Async code awaits the store: ``aexecute`` and the async gateway never block the loop on it.

A store with coroutine writes (``awrite``, ``awrite_model_call``,
``awrite_model_reply``) is awaited from async code; one with only those
(an async-only store, like ``AsyncPostgresAuditSink``) serves async code
alone, and blocking code refuses it before anything runs. Everything the
blocking write guaranteed holds for the awaited one: a call that ran and
could not be recorded raises ``AuditWriteError`` with its result, a guard
that fires after the call gets a follow-up record, and a record is never
dropped in silence. The last test runs the real async-only store,
``AsyncPostgresAuditSink``, on the session's PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

import pytest

from veridic import (
    ApprovalPolicy,
    AsyncPostgresAuditSink,
    AuditRecord,
    AuditSink,
    AuditWriteError,
    CallOutcome,
    CallResult,
    Composer,
    GuardDeniedError,
    ModelCallRecord,
    ModelGateway,
    ModelReplyRecord,
    Registry,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    aexecute,
    execute,
    instruction,
)
from veridic.gateway import AsyncModelCallSink, ModelCallLog
from veridic.run.audit import AsyncAuditSink
from veridic.run.records import arguments_sha256
from veridic.tools.guards import guard_irreversible

PROMPT = Composer().system(instruction("You keep the fixtures.")).build()
ARGUMENTS = '{"name": "golden-1"}'


@dataclass
class AsyncOnlyStore:
    """An async-only store: coroutine writes, no blocking twin; notes where each write ran."""

    records: list[AuditRecord] = field(default_factory=list)
    calls: list[ModelCallRecord] = field(default_factory=list)
    replies: list[ModelReplyRecord] = field(default_factory=list)
    threads: set[int] = field(default_factory=set)
    loops: set[asyncio.AbstractEventLoop] = field(default_factory=set)

    def _ran_here(self) -> None:
        self.threads.add(threading.get_ident())
        self.loops.add(asyncio.get_running_loop())

    async def awrite(self, record: AuditRecord, /) -> None:
        self._ran_here()
        self.records.append(record)

    async def awrite_model_call(self, record: ModelCallRecord, /) -> None:
        self._ran_here()
        self.calls.append(record)

    async def awrite_model_reply(self, record: ModelReplyRecord, /) -> None:
        self._ran_here()
        self.replies.append(record)

    def __repr__(self) -> str:
        return "<async-only store>"


@dataclass
class SlowStore(AsyncOnlyStore):
    """Each write waits on the loop, as a network round trip does, and notes the ticks it saw."""

    ticker: list[int] = field(default_factory=lambda: [0])
    seen: list[tuple[int, int]] = field(default_factory=list)
    writing: asyncio.Event = field(default_factory=asyncio.Event)
    written: asyncio.Event = field(default_factory=asyncio.Event)

    async def awrite(self, record: AuditRecord, /) -> None:
        before = self.ticker[0]
        self.writing.set()
        await asyncio.sleep(0.05)
        self.seen.append((before, self.ticker[0]))
        await super().awrite(record)
        self.written.set()


@dataclass
class FailingStore(AsyncOnlyStore):
    """Refuses every write after the first ``room``, the way a server gone away does."""

    room: int = 0
    attempts: list[AuditRecord] = field(default_factory=list)

    async def awrite(self, record: AuditRecord, /) -> None:
        self.attempts.append(record)
        if len(self.attempts) > self.room:
            raise ConnectionError("the audit server went away")
        await super().awrite(record)


class WatchedSQLite(SQLiteAuditSink):
    """The real SQLite store, noting which of its twins each write went through."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.used: list[str] = []

    def write(self, record: AuditRecord, /) -> None:
        self.used.append("write")
        super().write(record)

    async def awrite(self, record: AuditRecord, /) -> None:
        self.used.append("awrite")
        await super().awrite(record)

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        self.used.append("write_model_call")
        super().write_model_call(record)

    async def awrite_model_call(self, record: ModelCallRecord, /) -> None:
        self.used.append("awrite_model_call")
        await super().awrite_model_call(record)

    def write_model_reply(self, record: ModelReplyRecord, /) -> None:
        self.used.append("write_model_reply")
        super().write_model_reply(record)

    async def awrite_model_reply(self, record: ModelReplyRecord, /) -> None:
        self.used.append("awrite_model_reply")
        await super().awrite_model_reply(record)


class Registered:
    """The fixture tools, and the work a call may leave behind."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.go = threading.Event()
        self.threads: list[threading.Thread] = []
        self.refused: list[GuardDeniedError] = []
        registry = Registry("fixtures")

        @registry.tool(kind="query")
        async def find_fixture(name: str) -> str:
            """Look a fixture up.

            Args:
                name: The fixture.
            """
            self.ran.append(name)
            return f"found {name}"

        @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
        async def purge_fixture(name: str) -> str:
            """Permanently delete a fixture; its cache is purged by a task left running.

            Args:
                name: The fixture.
            """
            self.ran.append(name)
            self.tasks.append(asyncio.create_task(self._purge_cache()))
            return "purged"

        @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
        def purge_in_thread(name: str) -> str:
            """Permanently delete a fixture; its cache is purged by a thread left running.

            Args:
                name: The fixture.
            """
            self.ran.append(name)
            thread = threading.Thread(
                target=contextvars.copy_context().run, args=(self._purge_from_thread,)
            )
            self.threads.append(thread)
            thread.start()
            return "purged"

        self.view = registry.view()

    async def _purge_cache(self) -> None:
        await asyncio.sleep(0.01)
        try:
            guard_irreversible("purge cache")
        except GuardDeniedError as error:
            self.refused.append(error)

    def _purge_from_thread(self) -> None:
        self.go.wait(5)
        try:
            guard_irreversible("purge cache")
        except GuardDeniedError as error:
            self.refused.append(error)


def call(
    tools: Registered, name: str, audit: AuditSink | AsyncAuditSink, *, confirmed: bool = False
) -> Coroutine[object, object, CallResult]:
    return aexecute(
        tools.view,
        name,
        ARGUMENTS,
        policy=ApprovalPolicy(tools.view),
        audit=audit,
        request_id="req-1",
        prompt=PROMPT,
        confirm=(lambda request: True) if confirmed else None,
    )


# --- aexecute awaits the store -------------------------------------------------------------


def test_aexecute_writes_every_record_to_an_async_only_store() -> None:
    tools, store = Registered(), AsyncOnlyStore()

    async def main() -> list[CallResult]:
        return [
            await call(tools, "find_fixture", store),
            await call(tools, "no_such_tool", store),
            await call(tools, "purge_fixture", store),  # not confirmed: denied
        ]

    results = asyncio.run(main())
    assert [r.outcome for r in results] == [
        CallOutcome.OK,
        CallOutcome.REFUSED,
        CallOutcome.DENIED,
    ]
    assert store.records == [r.record for r in results]
    assert {r.arguments_sha256 for r in store.records} == {arguments_sha256(ARGUMENTS)}
    assert store.threads == {threading.get_ident()}  # on the loop, not on a worker thread


def test_the_loop_goes_on_while_the_store_writes() -> None:
    tools, store = Registered(), SlowStore()

    async def tick() -> None:
        while True:
            store.ticker[0] += 1
            await asyncio.sleep(0.001)

    async def main() -> CallResult:
        ticking = asyncio.create_task(tick())
        try:
            return await call(tools, "find_fixture", store)
        finally:
            ticking.cancel()

    result = asyncio.run(main())
    assert result.ok
    assert store.records == [result.record]
    ((before, after),) = store.seen
    assert after > before  # another task ran while the record was on its way


def test_aexecute_awaits_the_sqlite_stores_awrite_and_execute_calls_write() -> None:
    tools, store = Registered(), WatchedSQLite()
    result = asyncio.run(call(tools, "find_fixture", store))
    assert store.used == ["awrite"]
    assert store.records() == (result.record,)
    registry = Registry()

    @registry.tool(kind="query")
    def count_fixtures() -> int:
        """How many fixtures there are."""
        return 3

    view = registry.view()
    execute(
        view,
        "count_fixtures",
        {},
        policy=ApprovalPolicy(view),
        audit=store,
        request_id="req-2",
        prompt=PROMPT,
    )
    assert store.used == ["awrite", "write"]


def test_a_sink_with_only_a_blocking_write_still_serves_aexecute() -> None:
    written: list[AuditRecord] = []

    class Blocking:
        def write(self, record: AuditRecord, /) -> None:
            written.append(record)

    tools = Registered()
    result = asyncio.run(call(tools, "find_fixture", Blocking()))
    assert written == [result.record]


# --- blocking code refuses an async-only store ------------------------------------------------


def test_execute_refuses_an_async_only_store_before_anything_runs() -> None:
    tools, store = Registered(), AsyncOnlyStore()
    with pytest.raises(VeridicError) as raised:
        execute(
            tools.view,
            "purge_in_thread",
            ARGUMENTS,
            policy=ApprovalPolicy(tools.view),
            audit=store,
            request_id="req-1",
            prompt=PROMPT,
            confirm=lambda request: True,
        )
    message = str(raised.value)
    assert "execute() got an async-only audit store (<async-only store>" in message
    assert "this store is async-only" in message
    assert "use await aexecute(...) or the async gateway" in message
    assert "PostgresAuditSink" in message
    assert tools.ran == []
    assert store.records == []


def test_a_sink_that_cannot_take_a_record_is_refused_before_anything_runs() -> None:
    class Misnamed:
        async def write(self, record: AuditRecord, /) -> None:  # would never be awaited
            del record

    tools = Registered()
    with pytest.raises(VeridicError, match=r"write\(\) is a coroutine function"):
        asyncio.run(call(tools, "find_fixture", Misnamed()))  # type: ignore[arg-type]  # on purpose
    with pytest.raises(VeridicError, match=r"has no write\(record\) and no async awrite"):
        asyncio.run(call(tools, "find_fixture", object()))  # type: ignore[arg-type]  # on purpose
    assert tools.ran == []


# --- what the blocking write guaranteed, the awaited one does too ---------------------------


def test_a_failing_awrite_after_the_call_ran_keeps_the_result_and_the_record() -> None:
    tools, store = Registered(), FailingStore()
    with pytest.raises(AuditWriteError) as raised:
        asyncio.run(call(tools, "find_fixture", store))
    result = raised.value.result
    assert tools.ran == ["golden-1"]
    assert result.ok
    assert result.value == "found golden-1"
    assert result.record == store.attempts[0]
    assert result.record.arguments_sha256 == arguments_sha256(ARGUMENTS)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert "do not run the call again" in str(raised.value)


def test_a_failing_awrite_for_a_call_that_did_not_run_lets_the_stores_error_through() -> None:
    tools, store = Registered(), FailingStore()
    with pytest.raises(ConnectionError, match="went away"):
        asyncio.run(call(tools, "no_such_tool", store))


def test_a_cancelled_aexecute_still_writes_the_record_of_the_call_that_ran() -> None:
    tools, store = Registered(), SlowStore()

    async def main() -> None:
        running = asyncio.create_task(call(tools, "find_fixture", store))
        await store.writing.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await asyncio.wait_for(store.written.wait(), 5)

    asyncio.run(main())
    assert tools.ran == ["golden-1"]
    (record,) = store.records
    assert record.outcome is CallOutcome.OK


def test_a_handler_cut_short_by_a_timeout_is_recorded_and_the_timeout_goes_on() -> None:
    registry, store = Registry(), AsyncOnlyStore()

    @registry.tool(kind="query")
    async def wait_for_catalogue(name: str) -> str:
        """Wait for the catalogue, which never answers.

        Args:
            name: The fixture.
        """
        await asyncio.sleep(10)
        return name

    view = registry.view()

    async def main() -> None:
        async with asyncio.timeout(0.05):
            await aexecute(
                view,
                "wait_for_catalogue",
                ARGUMENTS,
                policy=ApprovalPolicy(view),
                audit=store,
                request_id="req-1",
                prompt=PROMPT,
            )

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    (record,) = store.records
    assert record.outcome is CallOutcome.FAILED
    assert record.detail.startswith("CancelledError")
    assert record.duration > 0.0  # it ran, until the timeout (which started before it did)


def test_a_task_left_running_gets_its_follow_up_in_an_async_only_store() -> None:
    tools, store = Registered(), AsyncOnlyStore()

    async def main() -> CallResult:
        result = await call(tools, "purge_fixture", store, confirmed=True)
        await tools.tasks[0]
        await asyncio.sleep(0)  # the follow-up's own write runs as a task of the loop
        return result

    result = asyncio.run(main())
    assert result.ok
    assert len(tools.refused) == 1
    first, follow_up = store.records
    assert first == result.record
    assert follow_up.follow_up
    assert follow_up.arguments_sha256 == first.arguments_sha256
    assert store.threads == {threading.get_ident()}


def test_a_thread_left_running_waits_for_its_follow_up_to_reach_an_async_only_store() -> None:
    tools, store = Registered(), AsyncOnlyStore()

    async def main() -> CallResult:
        result = await call(tools, "purge_in_thread", store, confirmed=True)
        tools.go.set()
        await asyncio.to_thread(tools.threads[0].join, 5)
        return result

    result = asyncio.run(main())
    assert result.ok
    (refused,) = tools.refused
    assert refused.__cause__ is None  # written: nothing to chain
    _, follow_up = store.records
    assert follow_up.follow_up
    assert len(store.loops) == 1  # both records were written on the call's loop


def test_a_follow_up_that_fails_in_a_task_is_logged_with_the_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools, store = Registered(), FailingStore(room=1)

    async def main() -> None:
        await call(tools, "purge_fixture", store, confirmed=True)
        await tools.tasks[0]
        for _ in range(3):
            await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="veridic.executor"):
        asyncio.run(main())
    (logged,) = [r for r in caplog.records if r.name == "veridic.executor"]
    follow_up = store.attempts[1]
    assert follow_up.follow_up
    assert logged.levelno == logging.ERROR
    assert follow_up.record_id in logged.getMessage()
    assert "store it elsewhere" in logged.getMessage()
    # The store's error, with its frames, written as veridic writes outside text.
    assert "ConnectionError: the audit server went away" in logged.getMessage()
    assert "in awrite" in logged.getMessage()


def test_a_follow_up_from_a_thread_after_the_loop_ended_is_not_lost_in_silence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools, store = Registered(), AsyncOnlyStore()
    asyncio.run(call(tools, "purge_in_thread", store, confirmed=True))
    with caplog.at_level(logging.ERROR, logger="veridic.guards"):
        tools.go.set()
        tools.threads[0].join(5)
    (refused,) = tools.refused
    assert isinstance(refused.__cause__, VeridicError)
    assert "event loop the call ran on is not running" in str(refused.__cause__)
    assert "its follow-up audit record could not be written" in str(refused)
    assert [r.levelno for r in caplog.records if r.name == "veridic.guards"] == [logging.ERROR]
    assert len(store.records) == 1


# --- the async gateway awaits the model-call records too --------------------------------------


def weather() -> tuple[ToolView, Composer]:
    registry = Registry()

    @registry.tool(kind="query")
    async def get_weather(city: str) -> str:
        """The current weather in a city.

        Args:
            city: The city.
        """
        return f"sunny in {city}"

    view = registry.view()
    system = instruction("You report the weather.")
    return view, Composer().system(system, view.capability_section()).user("Oslo?")


SCRIPT: list[dict[str, object]] = [
    {"tool_calls": [("call-1", "get_weather", '{"city": "Oslo"}')]},
    {"text": "Sunny in Oslo."},
]


def test_arun_writes_model_calls_replies_and_tool_calls_to_an_async_only_store() -> None:
    view, composer = weather()
    store = AsyncOnlyStore()
    gateway = ModelGateway(ScriptedProvider(SCRIPT, asynchronous=True), audit=store)
    result = asyncio.run(
        gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id="req-1")
    )
    assert result.text == "Sunny in Oslo."
    assert len(store.calls) == len(store.replies) == 2
    assert [r.call_id for r in store.replies] == [c.call_id for c in store.calls]
    assert store.replies[0].tool_calls == ("get_weather",)
    (record,) = store.records
    assert record.outcome is CallOutcome.OK
    assert record.arguments_sha256 == arguments_sha256('{"city": "Oslo"}')
    assert store.threads == {threading.get_ident()}


def test_arun_awaits_the_sqlite_stores_coroutine_writes() -> None:
    view, composer = weather()
    store = WatchedSQLite()
    gateway = ModelGateway(ScriptedProvider(SCRIPT, asynchronous=True), audit=store)
    asyncio.run(gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id="req-1"))
    assert store.used == [
        "awrite_model_call",
        "awrite_model_reply",
        "awrite",
        "awrite_model_call",
        "awrite_model_reply",
    ]
    assert len(store.model_calls("req-1")) == len(store.model_replies("req-1")) == 2


def test_astream_awaits_the_answers_record_when_the_stream_ends() -> None:
    view, composer = weather()
    store = AsyncOnlyStore()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Sunny in Oslo."}], asynchronous=True), audit=store
    )

    async def main() -> str:
        async with await gateway.astream(composer.build(), view, request_id="req-1") as stream:
            assert len(store.calls) == 1  # written before the request left
            assert store.replies == []
            return "".join([piece async for piece in stream])

    assert asyncio.run(main()) == "Sunny in Oslo."
    (reply,) = store.replies
    assert reply.call_id == store.calls[0].call_id


def test_an_async_only_calls_sink_beside_a_blocking_audit_store() -> None:
    view, composer = weather()
    calls, audit = AsyncOnlyStore(), SQLiteAuditSink()
    sink: AsyncModelCallSink = calls
    gateway = ModelGateway(ScriptedProvider(SCRIPT, asynchronous=True), audit=audit, calls=sink)
    asyncio.run(gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id="req-1"))
    assert len(calls.calls) == len(calls.replies) == 2
    assert calls.records == []
    assert [r.outcome for r in audit.records()] == [CallOutcome.OK]


def test_the_blocking_gateway_refuses_an_async_only_store_before_anything_is_sent() -> None:
    view, composer = weather()
    provider = ScriptedProvider(SCRIPT)
    gateway = ModelGateway(provider, audit=AsyncOnlyStore())
    policy = ApprovalPolicy(view)
    attempts: dict[str, Callable[[], object]] = {
        "send": lambda: gateway.send(composer.build(), view, request_id="req-1"),
        "stream": lambda: gateway.stream(composer.build(), view, request_id="req-1"),
        "run": lambda: gateway.run(composer, view, policy=policy, request_id="req-1"),
    }
    for where, attempt in attempts.items():
        with pytest.raises(VeridicError) as raised:
            attempt()
        message = str(raised.value)
        assert f"ModelGateway.{where}()" in message
        assert "async-only" in message
        assert "use the async gateway" in message or "use await aexecute" in message
        assert "PostgresAuditSink" in message
    assert provider.requests == []


def test_run_tools_refuses_an_async_only_audit_store_before_any_call_runs() -> None:
    view, composer = weather()
    calls = ModelCallLog()
    gateway = ModelGateway(ScriptedProvider(SCRIPT), audit=AsyncOnlyStore(), calls=calls)
    reply = gateway.send(composer.build(), view, request_id="req-1")  # model calls: blocking log
    with pytest.raises(VeridicError, match=r"ModelGateway.run_tools\(\) got an async-only"):
        gateway.run_tools(reply, policy=ApprovalPolicy(view))
    assert len(calls.records()) == 1


# --- the real async-only store ------------------------------------------------------------


def test_the_async_postgres_store_serves_arun_and_execute_refuses_it(postgres_dsn: str) -> None:
    view, composer = weather()

    async def main() -> tuple[tuple[AuditRecord, ...], int, int]:
        async with AsyncPostgresAuditSink(postgres_dsn) as store:
            gateway = ModelGateway(ScriptedProvider(SCRIPT, asynchronous=True), audit=store)
            await gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id="req-1")
            with pytest.raises(VeridicError, match="this store is async-only"):
                execute(
                    view,
                    "get_weather",
                    {"city": "Oslo"},
                    policy=ApprovalPolicy(view),
                    audit=store,
                    request_id="req-2",
                    prompt=PROMPT,
                )
            calls = await store.amodel_calls("req-1")
            replies = await store.amodel_replies("req-1")
            return await store.arecords(), len(calls), len(replies)

    records, calls, replies = asyncio.run(main())
    (record,) = records
    assert (record.request_id, record.outcome) == ("req-1", CallOutcome.OK)
    assert record.arguments_sha256 == arguments_sha256('{"city": "Oslo"}')
    assert record.duration > 0.0
    assert calls == replies == 2
