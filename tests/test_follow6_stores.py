"""Follow-ups to the sixth attacker review of the audit stores (SQLite and Postgres): each
test failed before its fix. Postgres tests run on the server the session starts
(tests/_postgres.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_postgres_store import _paused, denied, make

from veridic import (
    ApprovalMode,
    AsyncPostgresAuditSink,
    AuditRecordError,
    PostgresAuditSink,
    SQLiteAuditSink,
    TrustPolicy,
)
from veridic.checks.audit_report import Selection, build_report
from veridic.run import _store
from veridic.run._store import OPERATION_LIMIT, OPERATIONS_LIMIT, Statement, T
from veridic.run.records import CallOutcome, _storable
from veridic.testing import adversarial_text
from veridic.text.trust_policy import VouchRecord

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


# --- a vouch record is checked when it is made ------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (("p", "r", "c", "s", math.nan), "time"),
        (("p", "r", "c", "s", -1.0), "time"),
        (("p", "r", "c", "s", "yesterday"), "time"),
        (("p", "r", "c", "s", True), "time"),
        (("", "r", "c", "s", 1.0), "policy"),
        (("p", "  ", "c", "s", 1.0), "reason"),
        ((b"p", "r", "c", "s", 1.0), "policy"),
        (("p", "r", None, "s", 1.0), "caller"),
        (("p", "r", "c", 42, 1.0), "sample"),
    ],
)
def test_a_malformed_vouch_record_is_refused_when_it_is_made(
    fields: tuple[object, ...], named: str
) -> None:
    # Was: made and kept as it was (TrustPolicy.records() handed it on), refused, if at
    # all, only by the store that wrote it.
    with pytest.raises(AuditRecordError, match=rf"vouch record .*malformed: {named} must"):
        VouchRecord(*fields)  # type: ignore[arg-type]  # the point


def test_a_vouch_record_names_every_malformed_field_at_once() -> None:
    with pytest.raises(AuditRecordError) as raised:
        VouchRecord("", "", 1, 2, math.inf)  # type: ignore[arg-type]  # the point
    for name in ("policy", "reason", "caller", "sample", "time"):
        assert f"{name} must" in str(raised.value)


def test_a_vouch_made_by_a_policy_is_still_written_and_read_back(store: Store) -> None:
    previous = TrustPolicy.record_to(store)
    try:
        TrustPolicy("admin-prompts").vouch("Answer in French.", reason="reviewed by ops")
    finally:
        TrustPolicy.record_to(previous)
    (vouch,) = store.vouches()
    assert (vouch.policy, vouch.reason, vouch.sample) == (
        "admin-prompts",
        "reviewed by ops",
        "'Answer in French.'",
    )
    assert VouchRecord("p", "r", "c", "s", -0.0).time == 0.0
    store.write(make())  # the fixture's other records are unaffected


# --- a paused run's save is sent again after a lost connection, and kept once -----------------


def _saves(dsn: str) -> int:
    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT count(*) FROM veridic_paused_runs").fetchone()
        assert row is not None
        return int(row[0])


def test_a_save_of_a_paused_run_is_sent_again_when_the_connection_was_lost(
    postgres_dsn: str,
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        paused = _paused(store)
        store.write(make())
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        store.save_paused(paused)  # was: OperationalError, the run not saved, nobody asked
        store.save_paused(paused)  # as a retry whose first try was committed sends it again
        assert _saves(postgres_dsn) == 1
        assert store.claim_paused("req-9") == paused
        store.save_paused(paused)  # saved anew after the claim, to retry: claimed once more
        assert store.claim_paused("req-9") == paused
        assert store.claim_paused("req-9") is None


def test_the_same_paused_run_saved_again_before_its_claim_is_kept_once(tmp_path: Path) -> None:
    with SQLiteAuditSink(tmp_path / "audit.db") as store:
        paused = _paused(store)
        for _ in range(3):
            store.save_paused(paused)
    with sqlite3.connect(tmp_path / "audit.db") as db:
        assert db.execute("SELECT count(*) FROM veridic_paused_runs").fetchone() == (1,)
    db.close()


# --- a record's operations are kept within limits, visibly cut past them ----------------------


def test_an_operation_of_a_megabyte_is_cut_and_says_so(store: Store) -> None:
    # A handler that names its operation from the model's arguments
    # (guard_irreversible(f"delete {path}")): the megabyte went whole into the row.
    long = "irreversible:delete " + "x" * 1_000_000
    store.write(make(operations=(long, "irreversible:short")))
    (read,) = store.records()
    cut, short = read.operations
    assert short == "irreversible:short"
    assert cut.startswith(long[:158] + "… [1000020 chars, sha256 ")
    assert len(cut) == OPERATION_LIMIT  # the start, the length and the digest, 200 in all


def test_ten_thousand_operations_are_cut_to_the_limit_and_say_how_many(store: Store) -> None:
    many = tuple(sorted(f"instruction_write:Note.f{i:05}" for i in range(10_000)))
    store.write(make(operations=many))
    (read,) = store.records()
    assert len(read.operations) == OPERATIONS_LIMIT
    assert read.operations[: OPERATIONS_LIMIT - 1] == many[: OPERATIONS_LIMIT - 1]
    assert read.operations[-1].startswith(
        f"… [the audit store cut {10_000 - OPERATIONS_LIMIT + 1} of 10000 operations, sha256 "
    )


def test_two_records_of_the_same_long_operation_still_match(store: Store) -> None:
    base = "irreversible:delete " + "y" * 5000
    store.write(denied(operations=(base + "a",)))
    store.write(make(tool="other_door", operations=(base + "a",)))
    store.write(denied(operations=(base + "b",)))
    store.write(make(tool="other_door", operations=(base + "c",)))
    first, second = store.substitutions()
    assert first.same_operation  # the same operation, cut alike
    assert not second.same_operation  # differs past the cut: the digests differ


@settings(max_examples=40, deadline=None)
@given(
    operations=st.lists(
        st.one_of(adversarial_text(), st.text(min_size=OPERATION_LIMIT - 5, max_size=230))
        .map(_storable)
        .filter(bool),
        max_size=OPERATIONS_LIMIT + 5,
        unique=True,
    )
)
def test_operations_within_the_limits_are_kept_whole_and_any_others_cut(
    tmp_path_factory: pytest.TempPathFactory, operations: list[str]
) -> None:
    kept = tuple(sorted(operations))
    with SQLiteAuditSink(tmp_path_factory.mktemp("ops") / "audit.db") as store:
        store.write(make(operations=kept))
        (read,) = store.records()
    whole = len(kept) <= OPERATIONS_LIMIT and all(len(o) <= OPERATION_LIMIT for o in kept)
    assert (read.operations == kept) is whole
    assert len(read.operations) <= OPERATIONS_LIMIT
    assert all(len(o) <= OPERATION_LIMIT for o in read.operations)


def test_the_documented_operation_limits_are_the_stores() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "audit.md").read_text()
    assert (OPERATIONS_LIMIT, OPERATION_LIMIT) == (64, 200)
    assert "keeps 64 of a record's operations, of 200 characters each" in " ".join(docs.split())


# --- a report of one request or one day reads that selection, not the whole store ----------


class _RowCountingStore(SQLiteAuditSink):
    """A real store that counts the rows each of its statements brings back."""

    rows = 0

    def _run(self, statement: Statement[T]) -> T:
        answer = statement.answer

        def counted(rows: _store.Rows) -> T:
            _RowCountingStore.rows += len(rows)
            return answer(rows)

        return super()._run(dataclasses.replace(statement, answer=counted))


def _stopped_store(requests: int) -> _RowCountingStore:
    store = _RowCountingStore(":memory:")
    for n in range(requests):
        store.write(denied(request_id=f"req-{n}", time=float(n)))
        store.write(make(request_id=f"req-{n}", time=float(n)))
    return store


@pytest.mark.parametrize(
    "selection",
    [Selection(request_ids=("req-7",)), Selection(since=7.0, until=8.0)],
    ids=["one request", "one second"],
)
def test_a_report_reads_rows_in_proportion_to_its_selection_not_the_store(
    selection: Selection,
) -> None:
    with _stopped_store(2000) as store:
        _RowCountingStore.rows = 0
        report = build_report(store, selection, database="audit.db")
        # Was: every stopped call in the store and the call after it (4,000 rows made
        # records, to keep one substitution).
        assert _RowCountingStore.rows <= 10
    (substitution,) = report.substitutions
    assert substitution.denied.request_id == "req-7"
    assert substitution.next is not None
    assert substitution.next.request_id == "req-7"


def test_a_stopped_call_whose_next_call_is_past_the_range_still_shows_it() -> None:
    with SQLiteAuditSink(":memory:") as store:
        store.write(denied(request_id="req-1", time=10.0))
        store.write(make(request_id="req-2", time=11.0, tool="other_door"))
        store.write(make(request_id="req-1", time=20.0, tool="other_door"))
        store.write(denied(request_id="req-2", time=5.0))  # a host whose clock is behind
        store.write(make(request_id="req-2", time=30.0))
        report = build_report(store, Selection(since=9.0, until=12.0), database="audit.db")
        whole = {(s.denied.record_id, s.next and s.next.record_id) for s in store.substitutions()}
    assert [(s.denied.time, s.next and s.next.time) for s in report.substitutions] == [(10.0, 20.0)]
    assert {(s.denied.record_id, s.next and s.next.record_id) for s in report.substitutions} < whole


_ROW = st.tuples(
    st.sampled_from(["req-1", "req-2", "req-3"]),
    st.integers(0, 9).map(float),
    st.booleans(),  # stopped
    st.booleans(),  # a follow-up
)


def _write_rows(store: Store, rows: list[tuple[str, float, bool, bool]]) -> None:
    for request_id, time_, stopped, follow_up in rows:
        if follow_up:
            store.write(
                make(
                    request_id=request_id,
                    time=time_,
                    approval=ApprovalMode.USER_CONFIRMED,
                    outcome=CallOutcome.BLOCKED,
                    detail="after the call ended: a late write",
                )
            )
        else:
            store.write((denied if stopped else make)(request_id=request_id, time=time_))


def _narrowed_alike(store: Store) -> None:
    whole = store.substitutions()
    for request_id in (None, "req-1", "req-3"):
        for since, until in ((None, None), (3.0, None), (None, 6.0), (2.0, 5.0)):
            expected = [
                s
                for s in whole
                if (request_id is None or s.denied.request_id == request_id)
                and (since is None or s.denied.time >= since)
                and (until is None or s.denied.time < until)
            ]
            got = store.substitutions(request_id, since=since, until=until)
            assert [(s.denied.record_id, s.next and s.next.record_id) for s in got] == [
                (s.denied.record_id, s.next and s.next.record_id) for s in expected
            ]


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(_ROW, max_size=25))
def test_substitutions_narrowed_by_the_store_are_the_whole_answers_selected(
    rows: list[tuple[str, float, bool, bool]],
) -> None:
    with SQLiteAuditSink(":memory:") as store:
        _write_rows(store, rows)
        _narrowed_alike(store)


def test_postgres_narrows_substitutions_as_sqlite_does(postgres_dsn: str) -> None:
    rows = [
        ("req-1", 4.0, True, False),
        ("req-2", 1.0, True, False),
        ("req-1", 2.0, False, True),
        ("req-1", 9.0, True, False),
        ("req-3", 3.0, True, False),
        ("req-1", 1.0, False, False),
        ("req-3", 7.0, True, False),
        ("req-2", 8.0, False, False),
    ]
    with PostgresAuditSink(postgres_dsn) as store:
        _write_rows(store, rows)
        assert len(store.substitutions()) == 5
        _narrowed_alike(store)

        async def narrowed() -> int:
            async with AsyncPostgresAuditSink(postgres_dsn) as async_store:
                return len(await async_store.asubstitutions("req-1", since=3.0))

        assert asyncio.run(narrowed()) == 2


def _steps(path: Path, statement: Statement[T]) -> int:
    """The SQLite virtual machine's work for ``statement`` (in steps of 100 instructions)."""
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    with sqlite3.connect(path) as db:
        db.set_progress_handler(step, 100)
        db.execute(statement.sql, statement.params).fetchall()
    db.close()
    return steps


def test_the_substitutions_of_a_time_range_cost_what_the_range_holds_not_the_store(
    tmp_path: Path,
) -> None:
    work = []
    for requests in (1000, 4000):
        path = tmp_path / f"{requests}.db"
        with SQLiteAuditSink(path) as store:
            for n in range(requests):
                store.write(denied(request_id=f"req-{n}", time=float(n)))
                store.write(make(request_id=f"req-{n}", time=float(n), tool="other_door"))
            assert len(store.substitutions(since=10.0, until=20.0)) == 10
        work.append(_steps(path, _store.substitutions(None, 10.0, 20.0)))
    # Was: the window ran over every row of the store (four times the rows, four times
    # the work) to keep the ten stopped calls of the range.
    assert work[1] < 1.5 * work[0]
