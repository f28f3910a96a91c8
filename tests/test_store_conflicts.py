"""A record written under an id the store already keeps: a retry is kept once, another
record is refused. Each store, blocking and async, SQLite and the Postgres server the
session starts (tests/_postgres.py).

``ON CONFLICT DO NOTHING`` made a write sent again after a lost connection harmless, and
also dropped, without a word, a different record under the same id: the audit kept the
first and nobody was told.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import (
    AsyncPostgresAuditSink,
    AuditRecordError,
    ModelCallRecord,
    ModelReplyRecord,
    PostgresAuditSink,
    SQLiteAuditSink,
    Usage,
    VouchRecord,
)

from test_postgres_store import SHA, make  # isort: skip

Store = SQLiteAuditSink | PostgresAuditSink
_SECRET = "customer card 4111-1111-1111-1111"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _changed(record: Any, **changes: object) -> Any:
    """``record`` with ``changes``, keeping its id (as ``object.__setattr__`` on it would)."""
    copy = dataclasses.replace(record)
    for name, value in {**changes, "record_id": getattr(record, "record_id", None)}.items():
        if value is not None:
            object.__setattr__(copy, name, value)
    return copy


def _call() -> ModelCallRecord:
    return ModelCallRecord(5.0, "req-1", "openai.chat", "gpt-test", SHA, SHA, (), (), False)


def _reply(call: ModelCallRecord, model: str = "gpt-test") -> ModelReplyRecord:
    return ModelReplyRecord(
        6.0, "req-1", SHA, "r1", model, "stop", (), Usage(10, 5), 0.5, call.call_id
    )


def _vouch(reason: str = "reviewed by the team") -> VouchRecord:
    return VouchRecord("docs", reason, "app.py:3", "sample", 7.0)


def _refused(error: pytest.ExceptionInfo[AuditRecordError], table: str, *columns: str) -> str:
    message = str(error.value)
    assert table in message
    assert f"differs in {', '.join(columns)}." in message
    assert _SECRET not in message
    return message


def test_the_same_record_written_again_is_kept_once(store: Store) -> None:
    record, call, vouch = make(), _call(), _vouch()
    for _ in range(2):  # a retry after a lost answer
        store.write(record)
        store.write_model_call(call)
        store.write_model_reply(_reply(call))
        store.write_vouch(vouch)
    assert store.records() == (record,)
    assert len(store.model_calls()) == len(store.model_replies()) == len(store.vouches()) == 1


def test_another_tool_call_record_under_a_stored_id_is_refused_and_kept_on_the_error(
    store: Store,
) -> None:
    first = make()
    store.write(first)
    second = _changed(first, detail=_SECRET, duration=9.0)
    with pytest.raises(AuditRecordError) as refused:
        store.write(second)
    message = _refused(refused, "veridic_audit", "detail", "duration")
    assert first.record_id in message
    assert refused.value.record is second
    assert store.records() == (first,)


def test_another_model_answer_under_a_stored_call_id_is_refused(store: Store) -> None:
    call = _call()
    store.write_model_call(call)
    store.write_model_reply(_reply(call))
    other = _reply(call, model=_SECRET)
    with pytest.raises(AuditRecordError) as refused:
        store.write_model_reply(other)
    _refused(refused, "veridic_model_replies", "model")
    assert refused.value.record is other
    assert [reply.model for reply in store.model_replies()] == ["gpt-test"]


def test_another_model_call_under_a_stored_call_id_is_refused(store: Store) -> None:
    call = _call()
    store.write_model_call(call)
    other = _changed(call, model=_SECRET, call_id=call.call_id)
    with pytest.raises(AuditRecordError) as refused:
        store.write_model_call(other)
    _refused(refused, "veridic_model_calls", "model")
    assert [written.model for written in store.model_calls()] == ["gpt-test"]


def test_another_vouch_under_a_stored_record_id_is_refused(store: Store) -> None:
    vouch = _vouch()
    store.write_vouch(vouch)
    other = _changed(vouch, reason=_SECRET)
    with pytest.raises(AuditRecordError) as refused:
        store.write_vouch(other)
    _refused(refused, "veridic_vouches", "reason")
    assert [written.reason for written in store.vouches()] == ["reviewed by the team"]


def test_the_async_methods_refuse_another_record_too(store: Store) -> None:
    first = make()

    async def write_twice() -> None:
        await store.awrite(first)
        await store.awrite(first)  # a retry: harmless
        await store.awrite(_changed(first, outcome=first.outcome, detail=_SECRET))

    with pytest.raises(AuditRecordError) as refused:
        asyncio.run(write_twice())
    _refused(refused, "veridic_audit", "detail")
    assert store.records() == (first,)


def test_the_async_postgres_store_refuses_another_record_under_a_stored_id(
    postgres_dsn: str,
) -> None:
    first, call = make(), _call()
    other = _changed(first, detail=_SECRET)

    async def run() -> tuple[AuditRecordError, AuditRecordError, int]:
        async with AsyncPostgresAuditSink(postgres_dsn) as store:
            await store.awrite(first)
            await store.awrite(first)
            await store.awrite_model_call(call)
            await store.awrite_model_reply(_reply(call))
            await store.awrite_model_reply(_reply(call))
            with pytest.raises(AuditRecordError) as record:
                await store.awrite(other)
            with pytest.raises(AuditRecordError) as reply:
                await store.awrite_model_reply(_reply(call, model=_SECRET))
            return record.value, reply.value, len(await store.arecords())

    record, reply, kept = asyncio.run(run())
    assert "veridic_audit" in str(record)
    assert "differs in detail." in str(record)
    assert record.record is other
    assert "veridic_model_replies" in str(reply)
    assert _SECRET not in str(reply)
    assert kept == 1


# --- second read: attacks on the check of a row already under the id ---------------------


@pytest.fixture(params=["sqlite", "postgres", "postgres-15-digits"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each store, and a Postgres session that prints a float with 15 digits.

    ``extra_float_digits = 0`` was the default before PostgreSQL 12, and a database,
    a role or a connection may still set it: a float read back as text is then rounded.
    """
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
        return
    dsn = request.getfixturevalue("postgres_dsn")
    if request.param == "postgres-15-digits":
        dsn += " options='-c extra_float_digits=0'"
    with PostgresAuditSink(dsn) as postgres:
        yield postgres


_SECONDS = st.floats(min_value=0.0, max_value=4e9, allow_nan=False, allow_infinity=False)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(time=_SECONDS, duration=_SECONDS, latency=_SECONDS)
def test_a_retry_is_kept_once_whatever_its_seconds_and_the_servers_float_digits(
    any_store: Store, time: float, duration: float, latency: float
) -> None:
    record = make(time=time, duration=duration)
    call = ModelCallRecord(time, "req-1", "openai.chat", "gpt-test", SHA, SHA, (), (), False)
    reply = ModelReplyRecord(
        time, "req-1", SHA, "r1", "gpt-test", "stop", (), Usage(10, 5), latency, call.call_id
    )
    vouch = VouchRecord("docs", "reviewed by the team", "app.py:3", "sample", time)
    for _ in range(2):  # a retry after a lost answer: never refused as another record
        any_store.write(record)
        any_store.write_model_call(call)
        any_store.write_model_reply(reply)
        any_store.write_vouch(vouch)
    kept = [r for r in any_store.records() if r.record_id == record.record_id]
    assert len(kept) == 1


def test_the_async_postgres_store_keeps_a_retry_once_whatever_the_servers_float_digits(
    postgres_dsn: str,
) -> None:
    record = make(time=1733580000.123456789, duration=0.1 + 0.2)
    call = dataclasses.replace(_call(), time=1733580000.987654321)

    async def run() -> int:
        dsn = postgres_dsn + " options='-c extra_float_digits=0'"
        async with AsyncPostgresAuditSink(dsn) as store:
            for _ in range(2):
                await store.awrite(record)
                await store.awrite_model_call(call)
            return len(await store.arecords())

    assert asyncio.run(run()) == 1


class _Agreeable(str):
    """Text that says it equals anything: a stand-in the store must not ask."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


def test_another_record_whose_text_says_it_equals_the_stored_one_is_refused(
    store: Store,
) -> None:
    first = make()
    store.write(first)
    other = _changed(first, detail=_Agreeable(_SECRET))
    with pytest.raises(AuditRecordError) as refused:
        store.write(other)
    _refused(refused, "veridic_audit", "detail")
    assert store.records() == (first,)


def test_an_insert_that_a_trigger_skips_is_refused_not_taken_for_a_retry(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        with sqlite3.connect(path) as db:  # what a DBA's trigger can do to any insert
            db.execute(
                "CREATE TRIGGER skip BEFORE INSERT ON veridic_audit BEGIN SELECT RAISE(IGNORE); END"
            )
        record = make(detail=_SECRET)
        with pytest.raises(AuditRecordError) as refused:
            store.write(record)
        message = str(refused.value)
        assert f"added no row for the record_id '{record.record_id}' to veridic_audit" in message
        assert "nor holds one" in message
        assert _SECRET not in message
        assert refused.value.record is record


def test_the_refused_record_survives_pickling_with_its_error(store: Store) -> None:
    call = _call()
    store.write_model_call(call)
    other = _changed(call, model=_SECRET, call_id=call.call_id)
    with pytest.raises(AuditRecordError) as refused:
        store.write_model_call(other)
    back = pickle.loads(pickle.dumps(refused.value))
    assert type(back) is AuditRecordError
    assert str(back) == str(refused.value)
    assert back.record == other


def _waiting_for_a_lock(dsn: str) -> None:
    """Return once another session waits for a lock (the store's insert, on the key)."""
    with psycopg.connect(dsn, autocommit=True) as watcher:
        for _ in range(6000):
            found = watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
            if found is not None and found[0]:
                return
            watcher.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the store's insert never waited for the other transaction's row")


@pytest.mark.parametrize("detail", ["", _SECRET], ids=["the same record", "another record"])
def test_a_write_racing_another_writer_of_its_id_sees_the_row_that_won(
    postgres_dsn: str, detail: str
) -> None:
    """Two writers of one id at once: the second waits for the first's transaction, does
    nothing, and reads the row that won (READ COMMITTED: a new snapshot per statement),
    never "no row"."""
    with PostgresAuditSink(postgres_dsn) as store:
        won = make()
        store.write(won)
        racing = dataclasses.replace(won, detail=detail)  # a new record_id
        with psycopg.connect(postgres_dsn) as other:  # the other writer, in a transaction
            other.execute(
                "UPDATE veridic_audit SET record_id = %s WHERE record_id = %s",
                (racing.record_id, won.record_id),
            )
            with ThreadPoolExecutor(1) as pool:
                writing = pool.submit(store.write, racing)
                _waiting_for_a_lock(postgres_dsn)
                other.commit()
                failure = writing.exception()
        if detail == "":
            assert failure is None
        else:
            assert isinstance(failure, AuditRecordError)
            assert "differs in detail." in str(failure)
            assert failure.record is racing
        assert [r.record_id for r in store.records()] == [racing.record_id]
