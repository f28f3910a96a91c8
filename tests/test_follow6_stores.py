"""Follow-ups to the sixth attacker review of the audit stores (SQLite and Postgres): each
test failed before its fix. Postgres tests run on the server the session starts
(tests/_postgres.py)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from test_postgres_store import _paused, make

from veridic import AuditRecordError, PostgresAuditSink, SQLiteAuditSink, TrustPolicy
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
