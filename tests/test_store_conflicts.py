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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
