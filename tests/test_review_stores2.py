"""Second attacker review of the audit stores (SQLite and Postgres): each test failed before
its fix. Postgres tests run on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import psycopg
import pytest
from test_postgres_store import denied, make

from veridic import AuditRecordError, PostgresAuditSink, SQLiteAuditSink, __version__
from veridic.checks.cli import main
from veridic.run import _postgres_schema, _store
from veridic.run.records import AuditRecord, Substitution

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


# --- migrating a database other hosts write to ---------------------------------------------


_DROP_USAGE_PARTS = (
    "ALTER TABLE veridic_model_replies DROP COLUMN cache_read_input_tokens, "
    "DROP COLUMN cache_creation_input_tokens, DROP COLUMN reasoning_output_tokens"
)
"""What schema 8 added, taken away from a database made by this veridic."""


def _at_schema_5(dsn: str) -> None:
    """Make the database behind ``dsn`` what veridic's schema 5 left: no ``call_id`` column."""
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("ALTER TABLE veridic_audit DROP COLUMN call_id")
        db.execute(_DROP_USAGE_PARTS)
        db.execute("ALTER TABLE veridic_model_calls DROP COLUMN options_sha256")  # added in 9
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")  # added in 10
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")  # added in 10
        db.execute("UPDATE veridic_schema SET version = 5")


def _schema(dsn: str) -> tuple[int, bool]:
    """The version ``veridic_schema`` holds, and whether ``veridic_audit`` has ``call_id``."""
    with psycopg.connect(dsn) as db:
        version = db.execute("SELECT version FROM veridic_schema").fetchall()
        column = db.execute(
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_name = 'veridic_audit' AND column_name = 'call_id'"
        ).fetchall()
    return version[0][0], bool(column)


def test_a_migration_that_cannot_lock_a_busy_table_gives_up_and_says_what_to_do(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make())
    _at_schema_5(postgres_dsn)
    monkeypatch.setattr(_postgres_schema, "LOCK_TIMEOUT", "150ms")
    # Without a bound the migration waits as long as the reader's transaction, and every
    # writer behind it: statement_timeout makes that a failure here, not a hang, and a
    # different one (QueryCanceled, 57014), so what ended the wait is told without a clock.
    opener = f"{postgres_dsn} options=-cstatement_timeout=5s"
    with psycopg.connect(postgres_dsn) as reader:  # a report's transaction, left open
        reader.execute("SELECT COUNT(*) FROM veridic_audit")
        with pytest.raises(AuditRecordError) as refused:
            PostgresAuditSink(opener, min_size=0, max_size=1)
        # The server ended the wait because the migration's lock_timeout expired ...
        assert isinstance(refused.value.__cause__, psycopg.errors.LockNotAvailable)
        # ... and the migration's session is gone: nothing is left waiting for the lock,
        # so no writer queues behind it; the reader's transaction is untouched.
        waiting = reader.execute(
            "SELECT COUNT(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
        assert waiting == (0,)
    message = str(refused.value)
    assert "from version 5 to 10 waited 150ms for a lock" in message
    assert "nothing was changed" in message
    assert "pg_stat_activity" in message
    assert "lock_timeout=60s" in message
    assert _schema(postgres_dsn) == (5, False)
    with PostgresAuditSink(postgres_dsn) as store:  # once the reader is done, it migrates
        assert len(store.records()) == 1
    assert _schema(postgres_dsn) == (10, True)


def test_a_migration_waits_as_long_as_the_conninfo_s_own_lock_timeout(postgres_dsn: str) -> None:
    with PostgresAuditSink(postgres_dsn):
        pass
    _at_schema_5(postgres_dsn)
    opener = f"{postgres_dsn} options='-clock_timeout=120ms -cstatement_timeout=5s'"
    with psycopg.connect(postgres_dsn) as reader:
        reader.execute("SELECT COUNT(*) FROM veridic_audit")
        with pytest.raises(AuditRecordError, match="waited 120ms for a lock"):
            PostgresAuditSink(opener, min_size=0, max_size=1)
    assert _schema(postgres_dsn) == (5, False)


def test_a_review_reads_a_schema_5_database_as_it_is_and_says_it_did_not_migrate(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    written = (
        denied(call_id="c1"),
        make(call_id="c2", tool="other"),
        make(request_id="req-2", wrote_instruction_fields=True),
    )
    with PostgresAuditSink(postgres_dsn) as store:
        for record in written:
            store.write(record)
    _at_schema_5(postgres_dsn)
    as_read = tuple(dataclasses.replace(record, call_id="") for record in written)
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:
        assert review.schema_version == 5
        assert review.records() == as_read
        assert review.records("req-2") == as_read[2:]
        assert review.instruction_writes_under_always_rule() == as_read[2:]
        assert review.substitutions() == (Substitution(*as_read[:2]),)
    assert main(["audit", postgres_dsn, "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [r["call_id"] for r in report["writes"]] == ["", "", ""]
    notes = report["notes"]
    assert any("schema version 5, and was read as it is, not migrated" in n for n in notes)
    assert main(["audit", postgres_dsn]) == 1
    assert "not migrated to version 10" in capsys.readouterr().out
    assert _schema(postgres_dsn) == (5, False)


def test_a_later_schema_is_refused_naming_the_release_that_wrote_it(postgres_dsn: str) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.schema_version == 10
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        comment = "SELECT obj_description('veridic_schema'::regclass, 'pg_class')"
        assert db.execute(comment).fetchone() == (f"veridic {__version__} (schema 10)",)
        db.execute("UPDATE veridic_schema SET version = 11")  # what a later release leaves
        db.execute("COMMENT ON TABLE veridic_schema IS 'veridic 0.9.1 (schema 11)'")
    for read_only in (False, True):
        with pytest.raises(AuditRecordError) as refused:
            PostgresAuditSink(postgres_dsn, read_only=read_only)
        message = str(refused.value)
        assert "schema version 11, written by a later veridic ('veridic 0.9.1')" in message
        assert f"this host runs veridic {__version__}, which knows versions up to 10" in message
        assert "upgrade veridic on this host to the release the other hosts run" in message
    assert _schema(postgres_dsn) == (11, True)


def test_a_later_sqlite_schema_is_refused_naming_this_release(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    SQLiteAuditSink(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 11")
    with pytest.raises(AuditRecordError) as refused:
        SQLiteAuditSink(path)
    assert f"this process runs veridic {__version__}, which knows versions up to 10" in str(
        refused.value
    )


def test_a_review_keeps_the_search_path_its_conninfo_gives(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("CREATE SCHEMA audit")
    dsn = f"{postgres_dsn} options=-csearch_path=audit"
    with PostgresAuditSink(dsn) as store:
        store.write(make())
    with PostgresAuditSink(dsn, read_only=True) as review:
        assert review.count() == 1
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            review.write(make(request_id="req-3"))
    assert main(["audit", dsn, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["records"] == 1


# --- a database that is not veridic's ------------------------------------------------------


def _app_database(path: Path, user_version: int) -> None:
    """An application's own SQLite file, which keeps its schema's version in user_version."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute(f"PRAGMA user_version = {user_version}")
    db.close()


@pytest.mark.parametrize("user_version", [3, 6, 12])
def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(
    tmp_path: Path, user_version: int
) -> None:
    path = tmp_path / "app.db"
    _app_database(path, user_version)
    with pytest.raises(AuditRecordError) as refused:
        SQLiteAuditSink(path)
    message = str(refused.value)
    assert f"another application (user_version {user_version}, tables 'users')" in message
    assert "give the audit store a file of its own" in message
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (user_version,)
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    db.close()
    assert tables == [("users",)]


def test_a_database_shared_with_the_application_s_own_tables_opens_in_either_order(
    tmp_path: Path,
) -> None:
    # Second read: an application's own SQLite file that does not use user_version (an
    # ORM keeps its migrations in a table of its own) was refused when its tables came
    # first, though the same file worked when veridic's came first: adding the audit
    # store to a running application's database failed at start-up.
    before, after = tmp_path / "before.db", tmp_path / "after.db"
    _app_database(before, 0)
    SQLiteAuditSink(after).close()
    with sqlite3.connect(after) as db:  # the application's tables, added later
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.close()
    for path in (before, after):
        with SQLiteAuditSink(path) as store:
            store.write(make())
        with SQLiteAuditSink(path) as store:
            assert store.count() == 1
        with sqlite3.connect(path) as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        db.close()
        assert "users" in tables
        assert "veridic_audit" in tables


@pytest.mark.parametrize("user_version", [0, 2, 5, 6])
def test_a_store_whose_user_version_another_program_changed_is_refused_with_why(
    tmp_path: Path, user_version: int
) -> None:
    # Second read: an application sharing the file that sets user_version for its own
    # migrations made veridic migrate its schema-6 tables again from that version, and
    # the store failed to open with sqlite3's "duplicate column name: record_id".
    path = tmp_path / "shared.db"
    with SQLiteAuditSink(path) as store:
        store.write(make())
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {user_version}")
    db.close()
    with pytest.raises(AuditRecordError) as refused:
        SQLiteAuditSink(path)
    message = str(refused.value)
    assert f"user_version {user_version}" in message
    assert "tables of schema 10" in message
    assert "give the audit store a file of its own" in message
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (user_version,)
        assert db.execute("SELECT COUNT(*) FROM veridic_audit").fetchone() == (1,)
    db.close()


def test_an_empty_file_is_still_opened_as_a_new_store(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    with SQLiteAuditSink(tmp_path / "empty.db") as store:
        store.write(make())
    with SQLiteAuditSink(tmp_path / "empty.db") as store:
        assert store.count() == 1


# --- veridic audit's time range ------------------------------------------------------------


@pytest.mark.parametrize("bound", ["20240501", "2024"])
def test_a_bound_that_reads_as_a_date_and_as_seconds_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bound: str
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.write(make(time=1714564800.0, wrote_instruction_fields=True))  # a finding of 2024
    # Read as seconds, --until 20240501 was a moment of 1970: nothing selected, exit 0.
    assert main(["audit", str(path), "--until", bound]) == 2
    assert "write the date with dashes (2024-05-01)" in capsys.readouterr().err
    assert main(["audit", str(path), "--until", "2024-05-02"]) == 1
    assert main(["audit", str(path), "--until", f"{bound}.0"]) == 0


# --- a large store ------------------------------------------------------------------------


def test_substitutions_read_back_the_stopped_calls_and_their_next_only(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(300):
        store.write(make(request_id=f"req-{i}"))
    stopped, after = denied(request_id="req-x"), make(request_id="req-x", tool="other")
    store.write(stopped)
    store.write(after)
    made: list[Sequence[object]] = []
    real = _store.from_row

    def counted(row: Sequence[object]) -> AuditRecord:  # the real reader, counted
        made.append(row)
        return real(row)

    monkeypatch.setattr(_store, "from_row", counted)
    assert store.substitutions() == (Substitution(stopped, after),)
    assert len(made) == 2  # every call of the store, 302, before
