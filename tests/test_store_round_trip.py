"""What a store reads back, a caller can write again unchanged: to the same store (a retry,
kept once) and to another one (a migration, an export and import), byte for byte.

A store cuts what would put megabytes in every review: a record's ``detail``, its
operations, and the names an answer's record keeps (tool names, model, answer id, stop
reason). Each cut kept more than its limit (the start, then a note of what went), so a
record read back was over the limit again: written again to the same store it was refused
("another record ... differs in detail"), and to another store it was cut a second time.
Each store here is SQLite or the Postgres server the session starts (tests/_postgres.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import (
    AuditRecordError,
    ModelCallRecord,
    ModelReplyRecord,
    PostgresAuditSink,
    SQLiteAuditSink,
    Usage,
    VouchRecord,
)
from veridic.run.records import AuditRecord, CallOutcome, _storable, new_id
from veridic.testing import adversarial_text

from test_postgres_store import SHA, make  # isort: skip

Store = SQLiteAuditSink | PostgresAuditSink

DETAIL_LIMIT = 4096  # documented: docs/audit.md, AuditRecord.detail
OPERATION_LIMIT = 200  # documented: docs/audit.md, AuditRecord.operations
OPERATIONS_LIMIT = 64
NAME_LIMIT = 200  # documented: docs/audit.md, as a tool call's record keeps a tool name


def _open(kind: str, tmp_path: Path, request: pytest.FixtureRequest, name: str) -> Store:
    if kind == "sqlite":
        return SQLiteAuditSink(tmp_path / f"{name}.db")
    return PostgresAuditSink(request.getfixturevalue("postgres_dsn"))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with _open(request.param, tmp_path, request, "audit") as opened:
        yield opened


def _exactly(record: object) -> str:
    """Every stored field of ``record``, its id too, as text: equal only when byte-identical
    (``==`` takes ``0.0`` for ``-0.0`` and leaves out the ids)."""
    assert dataclasses.is_dataclass(record)
    return repr([getattr(record, f.name) for f in dataclasses.fields(record)])


# --- what gets cut: long text, text near the limit, text holding the cut's own note ------------


def _near(limit: int) -> st.SearchStrategy[str]:
    """Text of about ``limit`` characters: whole below it, cut just past it."""
    return st.builds(
        lambda head, length: head + "d" * length,
        adversarial_text().map(_storable),
        st.integers(max(0, limit - 60), limit + 60),
    )


def _long() -> st.SearchStrategy[str]:
    return st.builds(lambda head, times: head * times, st.text(min_size=1), st.integers(1, 20_000))


def _noted(limit: int, *notes: str) -> st.SearchStrategy[str]:
    """Text that holds a cut's own note (as a store writes it, or forged), at or near the end."""
    return st.builds(
        lambda length, note, tail: "n" * length + note + tail,
        st.integers(0, limit + 60),
        st.sampled_from(notes),
        st.sampled_from(["", "x", "]"]),
    )


_DETAIL_NOTES = (
    "… [the audit store cut 1 of 4097 characters]",
    "… [the audit store cut 100 of 4196 characters]",
    "… [the audit store cut 55 of 4096 characters]",
    "… [the audit store cut",
)
_NAME_NOTES = ("…' (1000000 chars)", "… [300 chars, sha256 0123456789abcdef]", "…")

details = st.one_of(
    _near(DETAIL_LIMIT), _long(), _noted(DETAIL_LIMIT, *_DETAIL_NOTES), adversarial_text()
).map(_storable)
operation = st.one_of(
    _near(OPERATION_LIMIT),
    _long(),
    _noted(OPERATION_LIMIT, *_NAME_NOTES, "… [the audit store cut 3 of 66 operations, sha256 x]"),
).map(_storable)
operations = st.lists(
    operation.filter(bool),
    min_size=0,
    max_size=OPERATIONS_LIMIT + 3,
    unique=True,
).map(lambda found: tuple(sorted(found)))
names = st.one_of(
    _near(NAME_LIMIT),
    _long(),
    _noted(NAME_LIMIT, *_NAME_NOTES),
    st.text(alphabet=st.sampled_from("ab\x00\ud800\n'\""), max_size=NAME_LIMIT + 5),
)


def _record(detail: str, ops: tuple[str, ...]) -> AuditRecord:
    return make(outcome=CallOutcome.FAILED, detail=detail, operations=ops)


def _answer(tool_calls: list[str], model: str, response_id: str, stop: str) -> ModelReplyRecord:
    """An answer's record with its call's id, as the gateway writes it (one without an id, as
    an earlier release wrote, is :func:`_unlinked`)."""
    return ModelReplyRecord(
        6.0, "req-1", SHA, response_id, model, stop, tuple(tool_calls), Usage(10, 5), 0.5, new_id()
    )


def _again(store: Store, kept: AuditRecord) -> AuditRecord:
    store.write(kept)
    (again,) = store.records()
    return again


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(detail=details, ops=operations)
def test_a_record_read_back_is_written_again_unchanged(detail: str, ops: tuple[str, ...]) -> None:
    with SQLiteAuditSink(":memory:") as first, SQLiteAuditSink(":memory:") as second:
        first.write(_record(detail, ops))
        (kept,) = first.records()
        assert _exactly(_again(first, kept)) == _exactly(kept)  # a retry, kept once
        assert first.count() == 1
        assert _exactly(_again(second, kept)) == _exactly(kept)  # another store: not cut again
    assert len(kept.detail) <= DETAIL_LIMIT
    assert (kept.detail == detail) is (len(detail) <= DETAIL_LIMIT)
    assert len(kept.operations) <= OPERATIONS_LIMIT
    assert all(len(o) <= OPERATION_LIMIT for o in kept.operations)
    whole = len(ops) <= OPERATIONS_LIMIT and all(len(o) <= OPERATION_LIMIT for o in ops)
    assert (kept.operations == ops) is whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool_calls=st.lists(names, max_size=3), model=names, response_id=names, stop=names)
def test_an_answer_read_back_is_written_again_unchanged(
    tool_calls: list[str], model: str, response_id: str, stop: str
) -> None:
    with SQLiteAuditSink(":memory:") as first, SQLiteAuditSink(":memory:") as second:
        first.write_model_reply(_answer(tool_calls, model, response_id, stop))
        (kept,) = first.model_replies()
        first.write_model_reply(kept)  # a retry, kept once
        assert first.model_replies() == (kept,)
        second.write_model_reply(kept)
        (copied,) = second.model_replies()
    assert _exactly(copied) == _exactly(kept)
    for name in (kept.model, kept.response_id, kept.stop_reason, *kept.tool_calls):
        assert len(name) <= NAME_LIMIT
        assert _storable(name) == name


# --- each store, and from one to the other ------------------------------------------------------


def _cut_records() -> tuple[AuditRecord, ModelReplyRecord]:
    long_ops = tuple(sorted(f"irreversible:delete {i:03} " + "x" * 300 for i in range(100)))
    call = make(
        outcome=CallOutcome.FAILED, detail="tool result " + "r" * 50_000, operations=long_ops
    )
    huge = "purge\x00" * 10_000
    answer = _answer([huge, "ok", "n" * 199 + "\x00"], "gpt" * 1000, "\ud800" * 300, "s" * 201)
    return call, answer


def test_records_read_back_are_kept_once_when_written_again(store: Store) -> None:
    call, answer = _cut_records()
    store.write(call)
    store.write_model_reply(answer)
    store.write_vouch(VouchRecord("docs", "reviewed " * 1000, "app.py:3", "\x00sample", 7.0))
    (kept,), (kept_answer,), (kept_vouch,) = store.records(), store.model_replies(), store.vouches()
    store.write(kept)  # was: "another record ... differs in detail, operations"
    store.write_model_reply(kept_answer)  # was: "... differs in response_id, model, ..."
    store.write_vouch(kept_vouch)
    assert [_exactly(r) for r in store.records()] == [_exactly(kept)]
    assert [_exactly(r) for r in store.model_replies()] == [_exactly(kept_answer)]
    assert [_exactly(r) for r in store.vouches()] == [_exactly(kept_vouch)]


@pytest.mark.parametrize(
    ("source", "target"), [("sqlite", "sqlite"), ("sqlite", "postgres"), ("postgres", "sqlite")]
)
def test_records_read_back_are_copied_to_another_store_byte_for_byte(
    source: str, target: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with (
        _open(source, tmp_path, request, "audit") as store,
        _open(target, tmp_path, request, "other") as other,
    ):
        _copy(store, other)


def _copy(store: Store, other: Store) -> None:
    call, answer = _cut_records()
    model_call = ModelCallRecord(5.0, "req-1", "openai.chat", "gpt-test", SHA, SHA, ("a",), ())
    store.write(call)
    store.write_model_call(model_call)
    store.write_model_reply(dataclasses.replace(answer, call_id=model_call.call_id))
    store.write_vouch(VouchRecord("docs", "reviewed", "app.py:3", "sample", -0.0))
    read: list[tuple[Any, ...]] = [
        store.records(),
        store.model_calls(),
        store.model_replies(),
        store.vouches(),
    ]
    for kept in read[0]:
        other.write(kept)
    for kept_call in read[1]:
        other.write_model_call(kept_call)
    for kept_answer in read[2]:
        other.write_model_reply(kept_answer)
    for kept_vouch in read[3]:
        other.write_vouch(kept_vouch)
    copied = [other.records(), other.model_calls(), other.model_replies(), other.vouches()]
    assert [[_exactly(r) for r in rows] for rows in copied] == [
        [_exactly(r) for r in rows] for rows in read
    ]


# --- a vouch's id is checked as the other records' ids are -------------------------------------


@pytest.mark.parametrize("record_id", ["not-an-id", "\x1b[2J" + "a" * 100, "A" * 32, 42])
def test_a_vouch_whose_id_was_changed_is_refused(store: Store, record_id: object) -> None:
    vouch = VouchRecord("docs", "reviewed", "app.py:3", "sample", 7.0)
    object.__setattr__(vouch, "record_id", record_id)
    with pytest.raises(AuditRecordError, match="record_id must be 32 lowercase hex digits"):
        store.write_vouch(vouch)
    assert store.vouches() == ()  # was: the row kept, and every vouches() after it refused


def test_a_vouch_altered_after_it_was_made_is_refused(store: Store) -> None:
    vouch = VouchRecord("docs", "reviewed", "app.py:3", "sample", 7.0)
    object.__setattr__(vouch, "policy", "")
    with pytest.raises(AuditRecordError, match="policy must be non-empty text"):
        store.write_vouch(vouch)
    object.__setattr__(vouch, "policy", b"docs")
    with pytest.raises(AuditRecordError, match="policy must be non-empty text"):
        store.write_vouch(vouch)
    assert store.vouches() == ()


# --- an answer recorded without its call's id (an earlier release's) -----------------------------


def _unlinked(latency: float = 0.5) -> ModelReplyRecord:
    """An answer as a store of an earlier release reads it back: no ``call_id``."""
    return ModelReplyRecord(6.0, "req-1", SHA, "resp-1", "gpt", "stop", ("a",), None, latency)


def test_an_answer_without_its_calls_id_written_again_is_kept_once(store: Store) -> None:
    answer = _unlinked()
    store.write_model_reply(answer)
    store.write_model_reply(answer)  # a retry, or a copy run twice: was a second row
    assert store.model_replies() == (answer,)
    other = _unlinked(latency=0.25)  # another answer, though it names no call either
    store.write_model_reply(other)
    store.write_model_reply(dataclasses.replace(answer, usage=Usage(10, 5)))
    assert sorted(store.model_replies(), key=repr) == sorted(
        [answer, other, dataclasses.replace(answer, usage=Usage(10, 5))], key=repr
    )
