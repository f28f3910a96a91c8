"""The Postgres audit store: the SQLite store's answers, from a real server many hosts share.

Every test here runs against the server the session starts (``postgres_dsn``,
tests/_postgres.py); those marked with the ``store`` fixture run once per store,
so a question has one answer whichever store holds the rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AsyncAuditStore,
    AsyncPostgresAuditSink,
    AuditRecord,
    AuditRecordError,
    AuditStore,
    AuditWriteError,
    CallOutcome,
    Composer,
    ModelGateway,
    PostgresAuditSink,
    Registry,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    TrustPolicy,
    VouchNotRecordedError,
    execute,
    instruction,
    is_trusted,
)
from veridic.checks.cli import main
from veridic.providers import Usage
from veridic.run.deferred import PausedRun
from veridic.run.records import ModelCallRecord, ModelReplyRecord

if TYPE_CHECKING:
    from _postgres import PostgresServer

SHA = hashlib.sha256(b"prompt").hexdigest()
Store = SQLiteAuditSink | PostgresAuditSink

_CALL = AuditRecord(
    time=100.0,
    request_id="req-1",
    tool="set_policy",
    kind="write",
    risk=Risk.MID,
    approval=ApprovalMode.ALWAYS_RULE,
    wrote_instruction_fields=False,
    irreversible=False,
    prompt_sha256=SHA,
    tools_sha256=SHA,
    outcome=CallOutcome.OK,
    duration=0.25,
    arguments_sha256=hashlib.sha256(b'{"x":1}').hexdigest(),
)


def make(**changes: Any) -> AuditRecord:
    return dataclasses.replace(_CALL, **changes)


def denied(**changes: Any) -> AuditRecord:
    return make(approval=ApprovalMode.DENIED, outcome=CallOutcome.DENIED, duration=0.0, **changes)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


# --- one answer, whichever store ------------------------------------------------------------


def test_both_stores_satisfy_the_sync_and_async_protocols(store: Store) -> None:
    assert isinstance(store, AuditStore)
    assert isinstance(store, AsyncAuditStore)


def test_a_record_reads_back_as_written_and_a_retry_is_stored_once(store: Store) -> None:
    record = make(detail="ünïcode ✓", operations=("instruction_write:Prompt.text", "z"))
    store.write(record)
    store.write(record)  # a retry after a lost answer: the same record id
    (back,) = store.records()
    assert back == record
    assert back.record_id == record.record_id
    assert (back.duration, back.arguments_sha256) == (0.25, record.arguments_sha256)
    assert store.count() == 1


def test_the_questions_get_the_same_answers(store: Store) -> None:
    edit = denied(tool="edit_prompt", operations=("instruction_write:StoredPrompt.content",))
    revert = make(
        tool="revert_prompt",
        outcome=CallOutcome.BLOCKED,
        operations=("instruction_write:StoredPrompt.content",),
    )
    follow_up = make(outcome=CallOutcome.BLOCKED, detail="after the call ended: a late write")
    forged = make(request_id="req-2", wrote_instruction_fields=True)
    refused = make(request_id="req-2", approval=ApprovalMode.NOT_ASKED, outcome=CallOutcome.REFUSED)
    query = make(request_id="req-2", kind="query", approval=ApprovalMode.NOT_REQUIRED)
    for record in (edit, follow_up, revert, forged, refused, query):
        store.write(record)
    assert store.writes_by_approval() == {
        ApprovalMode.NOT_REQUIRED: 0,
        ApprovalMode.ALWAYS_RULE: 2,  # revert and forged; the follow-up is not a call
        ApprovalMode.USER_CONFIRMED: 0,
        ApprovalMode.DENIED: 1,
        ApprovalMode.NOT_ASKED: 1,
    }
    assert store.instruction_writes_under_always_rule() == (forged,)
    pairs = [
        (s.denied.tool, s.next and s.next.tool, s.same_operation) for s in store.substitutions()
    ]
    assert pairs == [
        ("edit_prompt", "revert_prompt", True),  # the follow-up between them is skipped
        ("revert_prompt", None, False),
        ("set_policy", "set_policy", True),  # the refused call, then the query
    ]
    assert store.substitution_rate() == 1.0


def test_records_are_narrowed_by_request_and_time_range(store: Store) -> None:
    for second, request in ((10.0, "a"), (20.0, "b"), (30.0, "a"), (40.0, "b")):
        store.write(make(time=second, request_id=request))
    assert [r.time for r in store.records("a")] == [10.0, 30.0]
    assert [r.time for r in store.records(since=20.0, until=40.0)] == [20.0, 30.0]
    assert [r.time for r in store.records("b", since=25.0)] == [40.0]
    assert store.records(until=10.0) == ()


def test_model_calls_and_their_answers_read_back_once_each(store: Store) -> None:
    call = ModelCallRecord(
        time=5.0,
        request_id="req-1",
        api="openai.responses",
        model="gpt-test",
        prompt_sha256=SHA,
        tools_sha256=SHA,
        tools=("refund",),
        instruction_spans=(),
        streamed=True,
    )
    reply = ModelReplyRecord(
        time=6.0,
        request_id="req-1",
        prompt_sha256=SHA,
        response_id="resp_1",
        model="gpt-test-2026",
        stop_reason="tool_calls",
        tool_calls=("refund",),
        usage=Usage(120, 7),
        latency=0.5,
        call_id=call.call_id,
    )
    for _ in range(2):  # retried writes
        store.write_model_call(call)
        store.write_model_reply(reply)
    assert store.model_calls() == (call,)
    assert store.model_calls()[0].call_id == call.call_id
    assert store.model_replies("req-1") == (reply,)
    assert store.model_replies(since=7.0) == ()


def test_text_no_store_can_keep_is_refused_by_both_alike(store: Store) -> None:
    with pytest.raises(AuditRecordError, match="NUL or a lone surrogate"):
        store.write(make(detail="a\x00b"))
    with pytest.raises(AuditRecordError, match="NUL or a lone surrogate"):
        store.write(make(request_id="req-\ud800"))
    assert store.count() == 0


def test_approval_state_moves_between_hosts(store: Store) -> None:
    store.save_rules("user:ada", {"add_note": "always", "purge": "deny"})
    assert store.rules("user:ada") == {"add_note": "always", "purge": "deny"}
    assert store.rules("user:bob") == {}
    paused = _paused(store)
    store.save_paused(paused)
    assert store.pending_runs() == ("req-9",)
    assert store.claim_paused("req-9") == paused
    assert store.claim_paused("req-9") is None
    assert store.pending_runs() == ()
    conversation = Composer().system(instruction("You help.")).user("hi").conversation()
    store.save_conversation("chat-1", conversation)
    restored = store.conversation("chat-1")
    assert restored is not None
    assert len(restored) == len(conversation)


def test_vouches_go_to_the_store_before_the_text_is_trusted(store: Store) -> None:
    policy = TrustPolicy("admin-prompts")
    previous = TrustPolicy.record_to(store)
    try:
        text = policy.vouch("Answer in French.", reason="written by the admin in the back office")
    finally:
        TrustPolicy.record_to(previous)
    assert is_trusted(text)
    (vouch,) = store.vouches("admin-prompts")
    assert (vouch.policy, vouch.sample) == ("admin-prompts", "'Answer in French.'")
    assert vouch.reason == "written by the admin in the back office"
    assert "test_postgres_store.py" in vouch.caller
    assert store.vouches("other") == ()
    store.write_vouch(vouch)  # a retry: stored once
    assert len(store.vouches()) == 1


def test_a_vouch_whose_record_fails_mints_nothing() -> None:
    class Broken:
        def write_vouch(self, record: object, /) -> None:
            raise OSError("disk full")

    previous = TrustPolicy.record_to(Broken())
    try:
        with pytest.raises(VouchNotRecordedError, match=r"was not recorded.*disk full"):
            TrustPolicy("admin-prompts").vouch("Answer in French.", reason="admin")
    finally:
        TrustPolicy.record_to(previous)


def _paused(store: Store) -> PausedRun:
    registry = Registry()

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        return "refunded"

    view = registry.view()
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": [("c1", "refund", '{"order_id": 42}')]}]), audit=store
    )
    result = gateway.run(
        Composer().system(instruction("You refund.")).user("Refund 42"),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-9",
        defer=True,
    )
    assert result.paused is not None
    return result.paused


# --- the same rows, the same answers: a property over both at once ------------------------


_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=12,
).filter(str.strip)


_OPERATIONS = st.sets(st.sampled_from(["op1", "op2"]) | _TEXT, max_size=2)


@st.composite
def records(draw: st.DrawFn) -> AuditRecord:
    outcome = draw(st.sampled_from(list(CallOutcome)))
    fixed = {CallOutcome.DENIED: ApprovalMode.DENIED, CallOutcome.REFUSED: ApprovalMode.NOT_ASKED}
    ran = outcome not in fixed
    return AuditRecord(
        time=draw(st.floats(0, 1e6, allow_nan=False)),
        request_id=draw(st.sampled_from(["r1", "r2", "r3"])),
        tool=draw(st.sampled_from(["edit", "revert", "list"])),
        kind=draw(st.sampled_from(["query", "write"])),
        risk=draw(st.sampled_from(list(Risk))),
        approval=(
            draw(st.sampled_from([m for m in ApprovalMode if m not in fixed.values()]))
            if ran
            else fixed[outcome]
        ),
        wrote_instruction_fields=ran and draw(st.booleans()),
        irreversible=ran and draw(st.booleans()),
        prompt_sha256=SHA,
        tools_sha256=SHA,
        outcome=outcome,
        detail=draw(st.sampled_from(["", "after the call ended: late", "why"]) | _TEXT),
        operations=tuple(
            sorted(draw(st.sets(st.sampled_from(["op1", "op2"]) | _TEXT, max_size=2)))
        ),
        duration=draw(st.floats(0, 100, allow_nan=False)),
        call_id=draw(st.sampled_from(["", "call_1"]) | _TEXT),
    )


def test_sqlite_and_postgres_answer_every_question_alike(postgres_dsn: str) -> None:
    with SQLiteAuditSink() as sqlite, PostgresAuditSink(postgres_dsn) as postgres:

        @given(batch=st.lists(records(), max_size=6))
        @settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
        def same_answers(batch: list[AuditRecord]) -> None:
            for record in batch:
                sqlite.write(record)
                postgres.write(record)
            for question in (
                "records",
                "writes_by_approval",
                "instruction_writes_under_always_rule",
                "substitutions",
                "substitution_rate",
                "count",
            ):
                assert getattr(postgres, question)() == getattr(sqlite, question)(), question
            assert postgres.records("r2", since=10.0) == sqlite.records("r2", since=10.0)

        same_answers()


# --- many hosts, one database ------------------------------------------------------------


_WRITER = """
import hashlib, sys
from veridic import ApprovalMode, AuditRecord, CallOutcome, PostgresAuditSink, Risk
dsn, me, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
sha = hashlib.sha256(b"p").hexdigest()
with PostgresAuditSink(dsn, max_size=2) as store:
    for n in range(total):
        record = AuditRecord(
            time=float(n), request_id=f"{me}-{n // 10}", tool="set_policy", kind="write",
            risk=Risk.MID, approval=ApprovalMode.ALWAYS_RULE, wrote_instruction_fields=False,
            irreversible=False, prompt_sha256=sha, tools_sha256=sha, outcome=CallOutcome.OK,
            detail=f"{me}:{n}")
        store.write(record)
        if n % 100 == 0:
            store.write(record)  # a retry: must not be stored twice
"""


def test_eight_processes_write_two_thousand_records_each_nothing_lost_or_doubled(
    postgres_dsn: str,
) -> None:
    with PostgresAuditSink(postgres_dsn):  # the schema, made once before the writers start
        pass
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, postgres_dsn, f"p{i}", "2000"])
        for i in range(8)
    ]
    assert [writer.wait(timeout=300) for writer in writers] == [0] * 8
    with PostgresAuditSink(postgres_dsn) as store:
        found = store.records()
    assert len(found) == 16_000
    assert len({r.record_id for r in found}) == 16_000
    assert {r.detail for r in found} == {f"p{i}:{n}" for i in range(8) for n in range(2000)}
    for i in range(8):  # each writer's records in the order it wrote them
        mine = [r for r in found if r.detail.startswith(f"p{i}:")]
        assert [r.time for r in mine] == [float(n) for n in range(2000)]


def test_a_restart_mid_run_loses_no_committed_record(
    postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    store = PostgresAuditSink(postgres_dsn, max_size=2, timeout=20)
    committed: list[AuditRecord] = []
    failed: list[tuple[AuditRecord, psycopg.OperationalError]] = []
    done = threading.Event()

    def writer() -> None:
        n = 0
        while not done.is_set() or n < 400:
            record = make(request_id=f"w-{n}", detail=str(n))
            try:
                store.write(record)
            except psycopg.OperationalError as error:
                failed.append((record, error))
            else:
                committed.append(record)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    while len(committed) < 150:
        time.sleep(0.01)
    postgres_server.restart()
    before = len(committed)
    done.set()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert len(committed) > before  # the writer went on after the restart
    for record, error in failed:  # a write the server lost says so, and what to do
        assert "could not reach the server" in " ".join(error.__notes__)
        assert "sending it again is safe" in " ".join(error.__notes__)
        store.write(record)
    stored = store.records()
    assert {r.record_id for r in stored} == {
        r.record_id for r in committed + [f for f, _ in failed]
    }
    assert len(stored) == len(committed) + len(failed)  # nothing twice
    store.close()


def _sessions(dsn: str, name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as db:
        row = db.execute(
            "select count(*) from pg_stat_activity where application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _sessions_after_close(dsn: str, name: str) -> int:
    """The sessions left once the server has seen the store's connections go.

    A closed connection's backend leaves ``pg_stat_activity`` when it has exited, a
    moment after the client hung up: on a busy machine a count taken at once saw one
    (once in four full runs while another suite ran). A connection the store kept
    open stays, so waiting up to 10 s for none left misses no leak.
    """
    deadline = time.monotonic() + 10
    while (left := _sessions(dsn, name)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_more_writers_than_connections_take_turns_and_close_leaves_no_session(
    postgres_dsn: str,
) -> None:
    # The store keeps the connections it used between writes: a writer that
    # waits for the pool while they sit idle would time out here (timeout=5).
    name = "veridic-kept-test"
    conninfo = psycopg.conninfo.make_conninfo(postgres_dsn, application_name=name)
    store = PostgresAuditSink(conninfo, max_size=2, timeout=5)
    errors: list[BaseException] = []

    def writer(me: int) -> None:
        try:
            for n in range(150):
                store.write(make(request_id=f"kept-{me}", detail=f"{me}:{n}"))
        except BaseException as error:  # reported by the assert below
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(me,)) for me in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert 1 <= _sessions(postgres_dsn, name) <= 2
    found = [r for r in store.records() if r.request_id.startswith("kept-")]
    assert len(found) == 8 * 150
    store.close()
    assert _sessions_after_close(postgres_dsn, name) == 0  # the kept connections were closed too


def test_closing_while_threads_write_leaves_no_session_and_loses_no_written_record(
    postgres_dsn: str,
) -> None:
    # Writers keep and take connections without a lock; close() may come at any
    # moment of that, and must still find every kept connection exactly once.
    name = "veridic-close-race"
    conninfo = psycopg.conninfo.make_conninfo(postgres_dsn, application_name=name)
    store = PostgresAuditSink(conninfo, max_size=3, timeout=5)
    written: list[AuditRecord] = []
    stopped: list[BaseException] = []
    start = threading.Barrier(5)

    def writer(me: int) -> None:
        start.wait()
        try:
            for n in itertools.count():
                record = make(request_id=f"race-{me}", detail=f"{me}:{n}")
                store.write(record)
                written.append(record)
        except BaseException as error:  # checked below: every writer stops this way
            stopped.append(error)

    threads = [threading.Thread(target=writer, args=(me,)) for me in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    time.sleep(0.5)
    store.close()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert len(stopped) == 4
    for error in stopped:  # a closed store says so, not that the server is away
        assert isinstance(error, psycopg.OperationalError), error
        assert "was closed: open a new store" in " ".join(error.__notes__)
    assert _sessions_after_close(postgres_dsn, name) == 0
    with PostgresAuditSink(postgres_dsn) as reader:
        stored = {r.record_id for r in reader.records() if r.request_id.startswith("race-")}
    assert len(written) > 4  # they wrote before the close
    assert stored >= {r.record_id for r in written}  # every write that returned is there


def test_a_close_between_a_writers_check_and_its_keep_still_closes_its_connection(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window the race test above rarely hits, opened on purpose: close()
    # runs after the writer found the store open and before it keeps its
    # connection (the hold's clock is read between the two).
    import veridic.run.postgres as module

    name = "veridic-close-window"
    conninfo = psycopg.conninfo.make_conninfo(postgres_dsn, application_name=name)
    store = PostgresAuditSink(conninfo, max_size=2)
    store.write(make(request_id="window-1"))

    class _Clock:
        @staticmethod
        def monotonic() -> float:
            if sys._getframe(1).f_code.co_name == "_keep":
                store.close()
            return time.monotonic()

    monkeypatch.setattr(module, "time", _Clock)
    store.write(make(request_id="window-2"))  # committed, then the store closes under it
    monkeypatch.undo()
    assert _sessions_after_close(postgres_dsn, name) == 0
    with PostgresAuditSink(postgres_dsn) as reader:
        assert {"window-1", "window-2"} <= {r.request_id for r in reader.records()}


def test_a_kept_connection_goes_back_to_the_pool_after_its_hold(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import veridic.run.postgres as module

    with PostgresAuditSink(postgres_dsn, max_size=2) as store:
        store.write(make(request_id="hold-1"))
        pool = store._pool  # where a connection is: no public view of it
        assert pool.get_stats()["pool_available"] == 0  # kept by the store, out of the pool
        monkeypatch.setattr(module, "_HOLD", 0.0)
        store.write(make(request_id="hold-2"))
        assert pool.get_stats()["pool_available"] == 1  # back: the pool's checks apply again


def test_a_server_that_stays_away_fails_the_call_clearly_and_the_record_can_be_written_later(
    postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    registry = Registry()

    @registry.tool(kind="write", risk=Risk.LOW)
    def add_note(text: str) -> str:
        """Add a note to the customer's file.

        Args:
            text: The note.
        """
        return "noted"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("add_note")
    store = PostgresAuditSink(postgres_dsn, timeout=1)
    postgres_server.stop()
    try:
        with pytest.raises(AuditWriteError) as lost:
            execute(
                view,
                "add_note",
                {"text": "hi"},
                policy=policy,
                audit=store,
                request_id="r",
                prompt_sha256=SHA,
            )
        cause = lost.value.__cause__
        assert isinstance(cause, psycopg.OperationalError)
        assert "PostgresAuditSink(" in " ".join(cause.__notes__)
    finally:
        postgres_server.start()
    store.close()
    record = lost.value.result.record
    assert isinstance(record, AuditRecord)
    with PostgresAuditSink(postgres_dsn) as back:  # once the store is back
        back.write(record)  # what the error says to do
        back.write(record)
        assert back.records("r") == (record,)


# --- schema ------------------------------------------------------------------------------


def test_concurrent_openers_make_the_schema_once(postgres_dsn: str) -> None:
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            PostgresAuditSink(postgres_dsn, min_size=0, max_size=1).close()
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=open_store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(postgres_dsn) as db:
        assert db.execute("SELECT version FROM veridic_schema").fetchall() == [(10,)]


def test_a_database_of_a_later_version_is_refused_and_left_alone(postgres_dsn: str) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make())
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("UPDATE veridic_schema SET version = 11")
    with pytest.raises(AuditRecordError, match="schema version 11, written by a later veridic"):
        PostgresAuditSink(postgres_dsn)
    with psycopg.connect(postgres_dsn) as db:
        assert db.execute("SELECT version FROM veridic_schema").fetchall() == [(11,)]
        assert db.execute("SELECT COUNT(*) FROM veridic_audit").fetchall() == [(1,)]


def test_the_repr_names_the_database_but_never_the_password(postgres_dsn: str) -> None:
    with PostgresAuditSink(f"{postgres_dsn} password=hunter2") as store:
        assert "hunter2" not in repr(store)
        assert "dbname=test_" in repr(store)
    with pytest.raises(AuditRecordError, match="conninfo is not valid"):
        PostgresAuditSink("this is = not = a conninfo")


# --- the async store ---------------------------------------------------------------------


def test_the_async_store_answers_as_the_blocking_one(postgres_dsn: str) -> None:
    async def scenario() -> None:
        async with AsyncPostgresAuditSink(postgres_dsn) as store:
            assert isinstance(store, AsyncAuditStore)
            record = make()
            await store.awrite(record)
            await store.awrite(record)
            await store.awrite(denied(tool="edit"))
            assert await store.arecords() == (record, denied(tool="edit"))
            assert (await store.awrites_by_approval())[ApprovalMode.ALWAYS_RULE] == 1
            assert await store.asubstitution_rate() is None
            await store.asave_rules("user:ada", {"add_note": "always"})
            assert await store.arules("user:ada") == {"add_note": "always"}

    asyncio.run(scenario())
    with PostgresAuditSink(postgres_dsn) as blocking:
        assert blocking.count() == 2


def test_an_unopened_async_store_says_how_to_open_it(postgres_dsn: str) -> None:
    store = AsyncPostgresAuditSink(postgres_dsn)
    with pytest.raises(AuditRecordError, match="is not open: use `async with"):
        asyncio.run(store.arecords())


def test_concurrent_claims_from_async_tasks_resume_a_run_once(postgres_dsn: str) -> None:
    with PostgresAuditSink(postgres_dsn) as blocking:
        blocking.save_paused(_paused(blocking))

    async def claims() -> list[PausedRun | None]:
        async with AsyncPostgresAuditSink(postgres_dsn, max_size=8) as store:
            return await asyncio.gather(*(store.aclaim_paused("req-9") for _ in range(8)))

    claimed = asyncio.run(claims())
    assert sum(c is not None for c in claimed) == 1


# --- veridic audit, on the server --------------------------------------------------------


def test_veridic_audit_reads_a_postgres_store_without_writing_it(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make(request_id="req-1"))
        store.write(make(request_id="req-1", wrote_instruction_fields=True))
        store.write(make(request_id="req-2", kind="query", approval=ApprovalMode.NOT_REQUIRED))
    assert main(["audit", postgres_dsn, "--request", "req-1", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["writes_by_approval"]["always_rule"] == 2
    assert len(report["instruction_writes_under_always_rule"]) == 1
    assert "password" not in report["database"]
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:
        assert review.count() == 3
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            review.write(make())


def test_veridic_audit_refuses_a_postgres_database_without_veridic_tables(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", postgres_dsn]) == 2
    assert "holds no veridic audit tables" in capsys.readouterr().err
    with psycopg.connect(postgres_dsn) as db:  # and did not make them
        assert db.execute("SELECT to_regclass('veridic_audit')").fetchone() == (None,)
