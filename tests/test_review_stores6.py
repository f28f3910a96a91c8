"""Sixth attacker review of the audit stores (SQLite and Postgres): each test failed before
its fix. Postgres tests run on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import multiprocessing
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_postgres_store import SHA, _paused, make

from veridic import (
    AsyncPostgresAuditSink,
    AuditRecordError,
    Composer,
    PostgresAuditSink,
    SQLiteAuditSink,
    TrustPolicy,
    __version__,
    instruction,
)
from veridic.checks.audit_report import Selection, build_report
from veridic.checks.cli import main
from veridic.providers import Usage
from veridic.run import _postgres_schema, _sqlite_schema, _store
from veridic.run.postgres import _placeholders
from veridic.run.records import (
    AuditRecord,
    CallOutcome,
    ModelCallRecord,
    ModelReplyRecord,
    _recorded_tool,
    _storable,
)
from veridic.testing import adversarial_text
from veridic.text.prompt import PromptSpan

Store = SQLiteAuditSink | PostgresAuditSink

_TIMED = ("veridic_audit", "veridic_model_calls", "veridic_model_replies", "veridic_vouches")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


# --- 1. reads of a time range use an index ---------------------------------------------------


def _sqlite_at(path: Path, version: int) -> None:
    """A file as the veridic of schema ``version`` left it (0: an empty SQLite file).

    The migration steps are that history: each takes a file of one version to the next,
    as each release shipped it. Version 1 (veridic 0.1) did not set ``user_version``.
    """
    db = sqlite3.connect(path, isolation_level=None)
    for step in _sqlite_schema._STEPS[:version]:
        step(db)
    db.execute(f"PRAGMA user_version = {version if version > 1 else 0}")
    db.close()


def _plan(path: Path, sql: str, params: tuple[object, ...]) -> str:
    with sqlite3.connect(path) as db:
        plan = " | ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    db.close()
    return plan


@pytest.mark.parametrize("version", range(8))
def test_every_older_sqlite_schema_migrates_to_time_indexes_and_records_the_release(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at(path, version)
    for _ in range(2):  # the second open finds nothing left to do
        with SQLiteAuditSink(path) as opened:
            opened.write(make(time=50.0))
            assert [r.time for r in opened.records(since=10.0, until=60.0)] == [50.0] * (_ + 1)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (10,)
        assert db.execute("SELECT release FROM veridic_release").fetchall() == [
            (f"veridic {__version__} (schema 10)",)
        ]
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    assert {f"{table}_time" for table in _TIMED} <= indexes
    # veridic audit --since: the records, model calls and answers of a range, not every row.
    for statement in (
        _store.records(None, 10.0, 60.0),
        _store.model_calls(None, 10.0, 60.0),
        _store.model_replies(None, 10.0, None),
        _store.vouches(None, None, 60.0),
    ):
        assert "_time (time" in _plan(path, statement.sql, statement.params), statement.sql


def test_a_schema_6_file_whose_index_a_dba_added_already_migrates(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at(path, 6)
    with sqlite3.connect(path) as db:
        db.execute("CREATE INDEX veridic_audit_time ON veridic_audit (time)")
    db.close()
    with SQLiteAuditSink(path) as store:
        store.write(make())
        assert len(store.records(since=0.0)) == 1


def test_veridic_audit_reads_a_schema_6_file_and_leaves_it_at_6(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at(path, 6)
    assert main(["audit", str(path), "--since", "0", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["writes"] == []
    with sqlite3.connect(path) as db:  # the evidence is never migrated: the copy is
        assert db.execute("PRAGMA user_version").fetchone() == (6,)
    db.close()


def _postgres_at_6(dsn: str) -> None:
    """Make the database behind ``dsn`` what veridic's schema 6 left: one time index, and
    B-tree indexes of the lookup keys (as schema 5 made them)."""
    with psycopg.connect(dsn, autocommit=True) as db:
        for table in _TIMED[1:]:
            db.execute(f"DROP INDEX {table}_time")
        for index, table, column in _postgres_schema._KEYS:
            db.execute(f"DROP INDEX {index}")
            db.execute(f"CREATE INDEX {index} ON {table} ({column}, id)")
        db.execute(
            "ALTER TABLE veridic_model_replies DROP COLUMN cache_read_input_tokens, "
            "DROP COLUMN cache_creation_input_tokens, DROP COLUMN reasoning_output_tokens"
        )  # added in 8
        db.execute("ALTER TABLE veridic_model_calls DROP COLUMN options_sha256")  # added in 9
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")  # added in 10
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")  # added in 10
        db.execute("UPDATE veridic_schema SET version = 6")


def _postgres_indexes(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as db:
        rows = db.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%_time'")
        return {row[0] for row in rows}


def test_postgres_gets_a_time_index_on_every_table_read_by_time(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make())
    assert _postgres_indexes(postgres_dsn) == {f"{table}_time" for table in _TIMED}
    _postgres_at_6(postgres_dsn)
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:  # read as it is
        assert review.schema_version == 6
        assert len(review.records(since=0.0)) == 1
    assert main(["audit", postgres_dsn]) == 0
    out = capsys.readouterr().out
    assert "schema version 6, and was read as it is, not migrated to version 10" in out
    assert "have no index on time" in out
    assert "no call id" not in out  # version 6 has them
    assert _postgres_indexes(postgres_dsn) == {"veridic_audit_time"}
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.schema_version == 10
        assert len(store.records(since=0.0)) == 1
    assert _postgres_indexes(postgres_dsn) == {f"{table}_time" for table in _TIMED}
    with psycopg.connect(postgres_dsn) as db:
        comment = "SELECT obj_description('veridic_schema'::regclass, 'pg_class')"
        assert db.execute(comment).fetchone() == (f"veridic {__version__} (schema 10)",)


# --- 2. an SQLite file says which release wrote it -----------------------------------------


def test_a_later_sqlite_schema_is_refused_naming_the_release_that_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "later.db"
    SQLiteAuditSink(path).close()
    with sqlite3.connect(path) as db:  # what a later release's migration leaves
        db.execute("PRAGMA user_version = 11")
        db.execute("UPDATE veridic_release SET release = 'veridic 0.9.1 (schema 11)'")
    db.close()
    with pytest.raises(AuditRecordError) as refused:
        SQLiteAuditSink(path)
    message = str(refused.value)
    assert "schema version 11, written by a later veridic ('veridic 0.9.1')" in message
    assert f"this process runs veridic {__version__}, which knows versions up to 10" in message
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}: cannot be opened as an audit store: the file holds audit schema version 11, "
        "written by a later veridic ('veridic 0.9.1')"
    ) in err
    assert "veridic-audit-" not in err  # was: named the snapshot, a file already removed
    with sqlite3.connect(path) as db:  # left as it was
        assert db.execute("PRAGMA user_version").fetchone() == (11,)
    db.close()


def test_a_release_row_that_names_another_schema_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    SQLiteAuditSink(path).close()
    with sqlite3.connect(path) as db:  # set by hand, or by a release that did not update it
        db.execute("PRAGMA user_version = 11")
        db.execute("UPDATE veridic_release SET release = 'veridic 0.9.1 (schema 9)'")
    db.close()
    with pytest.raises(AuditRecordError, match=r"later veridic \(it did not record which\)"):
        SQLiteAuditSink(path)


# --- 3. a paused run is handed out once, however often it was saved -------------------------


def test_a_paused_run_saved_twice_is_claimed_once(store: Store) -> None:
    paused = _paused(store)
    store.save_paused(paused)
    store.save_paused(paused)  # sent again (a retry), or saved by two hosts
    assert store.pending_runs() == ("req-9",)
    assert store.claim_paused("req-9") == paused
    assert store.claim_paused("req-9") is None  # was: the earlier save, a second resume
    assert store.pending_runs() == ()
    store.save_paused(paused)  # saved anew to retry, as claim_paused says: claimed once more
    assert store.claim_paused("req-9") == paused
    assert store.claim_paused("req-9") is None


def test_threads_claiming_a_run_saved_three_times_get_it_once(store: Store) -> None:
    paused = _paused(store)
    for _ in range(3):
        store.save_paused(paused)
    start = threading.Barrier(6)
    got: list[bool] = []

    def claim() -> None:
        start.wait()
        got.append(store.claim_paused("req-9") is not None)

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == [False] * 5 + [True]


def _claim(path: str) -> bool:
    with SQLiteAuditSink(path) as store:
        return store.claim_paused("req-9") is not None


def test_processes_claiming_a_run_saved_twice_on_one_file_get_it_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        paused = _paused(store)
        store.save_paused(paused)
        store.save_paused(paused)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        claimed = pool.map(_claim, [str(path)] * 4)
    assert claimed.count(True) == 1


def test_two_postgres_stores_claiming_a_run_saved_twice_get_it_once(postgres_dsn: str) -> None:
    with (
        PostgresAuditSink(postgres_dsn) as one,
        PostgresAuditSink(postgres_dsn) as other,
    ):
        paused = _paused(one)
        one.save_paused(paused)
        other.save_paused(paused)
        assert [one.claim_paused("req-9"), other.claim_paused("req-9")].count(None) == 1


# --- 4. a model call's record is checked again before it is written -------------------------


def _call() -> ModelCallRecord:
    span = PromptSpan(0, "system", 0, 5, "code", "tests:1")
    return ModelCallRecord(1.0, "req-1", "openai.responses", "m", SHA, SHA, ("a",), (span,))


def test_a_model_call_altered_after_it_was_made_is_refused_and_the_store_stays_readable(
    store: Store,
) -> None:
    for field, value in (
        ("request_id", ""),
        ("time", float("nan")),
        ("prompt_sha256", "not a digest"),
        ("instruction_spans", ("not a span",)),
    ):
        altered = _call()
        object.__setattr__(altered, field, value)
        with pytest.raises(AuditRecordError, match=rf"model-call record .*{field}"):
            store.write_model_call(altered)
    store.write_model_call(_call())
    assert len(store.model_calls()) == 1  # was: one altered row, and no review read any


def test_a_span_no_store_reads_back_is_refused_when_the_record_is_made() -> None:
    odd = PromptSpan(0, "system", 0, 5, "forged", "tests:1")  # type: ignore[arg-type]  # the point
    with pytest.raises(AuditRecordError, match="instruction_spans must be a tuple of PromptSpan"):
        ModelCallRecord(1.0, "req-1", "openai.responses", "m", SHA, SHA, (), (odd,))


def test_a_model_reply_altered_after_it_was_made_is_refused(store: Store) -> None:
    reply = ModelReplyRecord(1.0, "req-1", SHA, "r1", "m", "stop", (), Usage(1, 2), 0.5)
    object.__setattr__(reply, "latency", float("nan"))  # SQLite: IntegrityError; Postgres: NaN
    with pytest.raises(AuditRecordError, match="latency must be seconds"):
        store.write_model_reply(reply)
    assert store.model_replies() == ()


# --- 5. a record's detail is capped, visibly ------------------------------------------------

DETAIL_LIMIT = 4096  # documented: docs/audit.md, AuditRecord.detail


def test_a_detail_of_megabytes_is_cut_and_says_how_much(store: Store) -> None:
    huge = "tool result " + "x" * 3_000_000
    record = make(outcome=CallOutcome.FAILED, detail=huge)
    store.write(record)
    (stored,) = store.records()
    note = f"… [the audit store cut {len(huge) - 4043} of {len(huge)} characters]"
    assert stored.detail == huge[:4043] + note  # the start and the note, 4096 in all
    assert len(stored.detail) == DETAIL_LIMIT
    assert stored == dataclasses.replace(record, detail=stored.detail)
    assert stored.record_id == record.record_id


def test_a_follow_up_with_a_huge_detail_stays_a_follow_up(store: Store) -> None:
    follow_up = make(outcome=CallOutcome.BLOCKED, detail="after the call ended: " + "y" * 100_000)
    store.write(follow_up)
    (stored,) = store.records()
    assert stored.follow_up
    assert len(stored.detail) <= DETAIL_LIMIT
    assert store.writes_by_approval()[follow_up.approval] == 0  # still no call


def test_the_documented_limit_is_the_stores() -> None:
    assert _store.DETAIL_LIMIT == DETAIL_LIMIT


def test_a_detail_at_the_limit_is_kept_whole(store: Store) -> None:
    whole = make(outcome=CallOutcome.FAILED, detail="z" * DETAIL_LIMIT)
    store.write(whole)
    assert store.records() == (whole,)


# --- attacks: rows veridic did not write, names a model wrote -------------------------------


def _with_a_model_call(path: Path) -> None:
    with SQLiteAuditSink(path) as store:
        call = _call()
        store.write_model_call(call)
        store.write_model_reply(
            ModelReplyRecord(1.0, "req-1", SHA, "r1", "m", "stop", ("a",), None, 0.5, call.call_id)
        )


@pytest.mark.parametrize("spans", ["{", "5", '"text"', "null"])
def test_stored_spans_that_are_not_a_json_list_are_refused_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spans: str
) -> None:
    path = tmp_path / "audit.db"
    _with_a_model_call(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE veridic_model_calls SET instruction_spans = ?", (spans,))
    db.close()
    with SQLiteAuditSink(path) as store, pytest.raises(AuditRecordError, match="not a JSON list"):
        store.model_calls()
    assert main(["audit", str(path)]) == 2  # was: JSONDecodeError or TypeError, uncaught
    assert "instruction_spans" in capsys.readouterr().err


def test_a_row_whose_text_is_not_utf8_is_refused_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.write(make())
    with sqlite3.connect(path) as db:  # another program's bytes, or a damaged page
        db.execute("UPDATE veridic_audit SET detail = CAST(X'FF80' AS TEXT)")
    db.close()
    with SQLiteAuditSink(path) as store:
        with pytest.raises(AuditRecordError, match="holds a row whose text is not UTF-8"):
            store.records()
        assert store.count() == 1  # the store still opens and answers what it can
    assert main(["audit", str(path)]) == 2  # was: sqlite3.OperationalError, uncaught
    assert "not UTF-8" in capsys.readouterr().err


def test_a_megabyte_tool_name_in_an_answer_is_kept_as_a_call_record_keeps_it(
    store: Store,
) -> None:
    huge = "purge" * 200_000
    reply = ModelReplyRecord(1.0, "req-1", SHA, "r1", "m", "tool_use", (huge, "ok"), None, 0.5)
    store.write_model_reply(reply)
    ((name, plain),) = (stored.tool_calls for stored in store.model_replies())
    assert plain == "ok"
    assert name == _recorded_tool(huge)[0]  # as a tool call's record keeps the same name
    assert name.endswith("…' (1000000 chars)")
    assert len(name) < 250


def test_a_megabyte_model_name_response_id_or_stop_reason_is_cut_as_a_tool_name_is(
    store: Store,
) -> None:
    # The provider (or a proxy in front of it) names the model, the answer's id and why it
    # stopped: a megabyte of each went whole into the answer's record, read by every review.
    huge = "gpt" * 400_000
    reply = ModelReplyRecord(1.0, "req-1", SHA, huge, huge, huge, (), None, 0.5)
    store.write_model_reply(reply)
    (stored,) = store.model_replies()
    for kept in (stored.response_id, stored.model, stored.stop_reason):
        assert kept == _recorded_tool(huge)[0]
        assert kept.endswith("…' (1200000 chars)")
    plain = ModelReplyRecord(2.0, "req-2", SHA, "resp_1", "gpt-4o", "stop", (), None, 0.5)
    store.write_model_reply(plain)
    assert store.model_replies("req-2") == (plain,)


def _hashed(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as db:
        rows = db.execute("SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%USING hash%'")
        return {row[0] for row in rows}


def test_a_request_id_of_thousands_of_characters_is_kept_by_both_stores(
    store: Store, tmp_path: Path
) -> None:
    # An application may take its request id from a client's header: 4000 characters that
    # do not compress were refused by Postgres's B-tree index (2704 bytes at most), after
    # the call had run, and SQLite kept them.
    long = secrets.token_hex(2000)
    store.write(make(request_id=long))
    assert [r.request_id for r in store.records(long)] == [long]
    store.save_rules(long, {"refund": "always"})
    assert store.rules(long) == {"refund": "always"}
    conversation = Composer().system(instruction("You help.")).user("hi").conversation()
    store.save_conversation(long, conversation)
    assert store.conversation(long) is not None


def test_postgres_migrates_its_lookup_indexes_to_hashes_and_keeps_finding_rows(
    postgres_dsn: str,
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make(request_id="req-1"))
    assert _hashed(postgres_dsn) == {index for index, _, _ in _postgres_schema._KEYS}
    _postgres_at_6(postgres_dsn)
    assert _hashed(postgres_dsn) == set()
    long = secrets.token_hex(2000)
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make(request_id=long))
        assert len(store.records("req-1")) == 1
        assert len(store.records(long)) == 1
    assert _hashed(postgres_dsn) == {index for index, _, _ in _postgres_schema._KEYS}


_REFUSE = """
CREATE SEQUENCE refusals;
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('refusals');
    RAISE EXCEPTION 'no room for this row' USING ERRCODE = '54000';
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON veridic_audit FOR EACH ROW EXECUTE FUNCTION refuse();
"""


def test_a_statement_the_server_refuses_is_not_sent_again_nor_called_a_lost_server(
    postgres_dsn: str,
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute(_REFUSE)
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
            store.write(make())
        notes = " ".join(getattr(refused.value, "__notes__", []))
        assert "the server refused the statement (SQLSTATE 54000" in notes
        assert "could not reach the server" not in notes  # was: and sent it twice
        assert store.count() == 0  # the store goes on answering
    with psycopg.connect(postgres_dsn) as db:
        assert db.execute("SELECT last_value FROM refusals").fetchone() == (1,)


def test_the_async_store_does_not_send_a_refused_statement_again(postgres_dsn: str) -> None:
    async def main_() -> None:
        async with AsyncPostgresAuditSink(postgres_dsn) as store:
            with psycopg.connect(postgres_dsn, autocommit=True) as db:
                db.execute(_REFUSE)
            with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
                await store.awrite(make())
            notes = " ".join(getattr(refused.value, "__notes__", []))
            assert "the server refused the statement" in notes

    asyncio.run(main_())
    with psycopg.connect(postgres_dsn) as db:
        assert db.execute("SELECT last_value FROM refusals").fetchone() == (1,)


@pytest.mark.parametrize("user_version", [0, 3])
def test_a_refused_file_keeps_its_journal_mode(tmp_path: Path, user_version: int) -> None:
    # "nothing was changed", said the refusal, and the application's database had been
    # switched to WAL (kept in the file's header), which every program using it then met.
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        if user_version:
            db.execute(f"PRAGMA user_version = {user_version}")
        else:  # veridic's tables of a later schema
            db.execute("CREATE TABLE veridic_audit (id INTEGER PRIMARY KEY)")
            db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(AuditRecordError):
        SQLiteAuditSink(path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    db.close()


def test_a_new_file_is_still_opened_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.write(make())
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


def _open_and_write(path: str) -> int:
    with SQLiteAuditSink(path) as store:
        store.write(make())
        return store.count()


def test_processes_opening_a_schema_6_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at(path, 6)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        counts = pool.map(_open_and_write, [str(path)] * 4)
    assert max(counts) == 4
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (10,)
        assert db.execute("SELECT COUNT(*) FROM veridic_release").fetchone() == (1,)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [("time", "'abc'"), ("time", "-1"), ("record_id", "'x'"), ("record_id", "NULL")],
)
def test_a_vouch_row_edited_by_hand_is_refused_not_read_back_as_it_is(
    tmp_path: Path, column: str, value: str
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        previous = TrustPolicy.record_to(store)
        try:
            TrustPolicy("admin-prompts").vouch("hello", reason="reviewed by ops")
        finally:
            TrustPolicy.record_to(previous)
        assert len(store.vouches()) == 1
    with sqlite3.connect(path) as db:
        if value == "NULL":  # a column veridic declared NOT NULL: rebuilt without it
            db.execute("ALTER TABLE veridic_vouches RENAME TO old")
            db.execute(
                "CREATE TABLE veridic_vouches (id INTEGER PRIMARY KEY, time REAL, policy TEXT, "
                "reason TEXT, caller TEXT, sample TEXT, record_id TEXT)"
            )
            db.execute("INSERT INTO veridic_vouches SELECT * FROM old")
        db.execute(f"UPDATE veridic_vouches SET {column} = {value}")
    db.close()
    with (
        SQLiteAuditSink(path) as store,
        pytest.raises(AuditRecordError, match=r"vouch row .* cannot be read back"),
    ):
        store.vouches()  # was: time 'abc' (a str typed as seconds), -1, an id 'x'


def test_a_kept_connection_the_server_ended_is_still_replaced_and_the_write_lands(
    postgres_dsn: str,
) -> None:
    # What the store sends again is a lost connection, not the server's refusal: a session
    # ended by the server (idle_session_timeout, FATAL 57P05; pg_terminate_backend, 57P01).
    with PostgresAuditSink(f"{postgres_dsn} options=-cidle_session_timeout=100ms") as store:
        store.write(make())
        time.sleep(0.2)  # the kept connection is ended by the server meanwhile
        store.write(make())
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        store.write(make())
        assert store.count() == 3


def test_the_async_store_replaces_connections_the_server_ended(postgres_dsn: str) -> None:
    async def main_() -> int:
        async with AsyncPostgresAuditSink(postgres_dsn, min_size=2) as store:
            await store.awrite(make())
            with psycopg.connect(postgres_dsn, autocommit=True) as db:
                db.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            await store.awrite(make())
            return await store.acount()

    assert asyncio.run(main_()) == 2


@settings(max_examples=60, deadline=None)
@given(head=adversarial_text().map(_storable), length=st.integers(0, 3 * DETAIL_LIMIT))
def test_every_detail_is_kept_whole_up_to_the_limit_and_cut_visibly_past_it(
    head: str, length: int
) -> None:
    detail = head + "d" * length
    with SQLiteAuditSink(":memory:") as store:
        store.write(make(outcome=CallOutcome.FAILED, detail=detail))
        (stored,) = store.records()
    if len(detail) <= DETAIL_LIMIT:
        assert stored.detail == detail
    else:
        note = stored.detail[stored.detail.rindex("… [the audit store cut ") :]
        start = len(stored.detail) - len(note)
        assert stored.detail == detail[:start] + note
        assert DETAIL_LIMIT - 8 <= len(stored.detail) <= DETAIL_LIMIT  # the note's digits vary
        assert note == f"… [the audit store cut {len(detail) - start} of {len(detail)} characters]"


class _Counted(str):
    """A request id that counts how often it is compared (a report's work per row)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class _CountingStore(SQLiteAuditSink):
    """A real store whose rows come back with request ids that count their comparisons."""

    def records(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        rows = super().records(request_id, since=since, until=until)
        return tuple(dataclasses.replace(r, request_id=_Counted(r.request_id)) for r in rows)

    def model_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]:
        rows = super().model_calls(request_id, since=since, until=until)
        return tuple(dataclasses.replace(c, request_id=_Counted(c.request_id)) for c in rows)


def test_a_report_does_work_in_proportion_to_its_rows_not_rows_times_requests() -> None:
    requests = 300
    with _CountingStore(":memory:") as store:
        for n in range(requests):
            for _ in range(2):
                store.write(make(request_id=f"req-{n}", time=float(n)))
            store.write_model_call(
                dataclasses.replace(_call(), request_id=f"req-{n}", time=float(n))
            )
        _Counted.compared = 0
        report = build_report(store, Selection(), database="audit.db")
    assert [len(r.tool_calls) for r in report.requests] == [2] * requests
    assert [len(r.model_calls) for r in report.requests] == [1] * requests
    # Was: each request filtered every row (300 x 900 comparisons and more).
    assert _Counted.compared <= 10 * 3 * requests


def test_postgres_finds_a_days_records_through_the_time_index(postgres_dsn: str) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make())
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(  # 70 days of records, one a minute
            "INSERT INTO veridic_audit (time, request_id, tool, kind, risk, approval, "
            "wrote_instruction_fields, irreversible, prompt_sha256, tools_sha256, outcome, "
            "detail, operations, duration, arguments_sha256, record_id) SELECT n * 60.0, "
            "'req-' || n, 'get', 'query', 'low', 'not_required', false, false, '', '', 'ok', "
            "'', '[]', 0, '', md5(n::text) FROM generate_series(1, 100800) AS n"
        )
        db.execute("ANALYZE veridic_audit")
        statement = _store.records(None, 86400.0 * 50, 86400.0 * 51)
        sql = _placeholders(statement.sql)
        plan = " ".join(row[0] for row in db.execute(f"EXPLAIN {sql}", statement.params).fetchall())
    assert "veridic_audit_time" in plan


def test_hosts_opening_a_schema_6_postgres_database_at_once_migrate_it_once(
    postgres_dsn: str,
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make())
    _postgres_at_6(postgres_dsn)
    start = threading.Barrier(4)
    opened: list[int] = []
    errors: list[BaseException] = []

    def open_and_write() -> None:
        start.wait()
        try:
            with PostgresAuditSink(postgres_dsn, min_size=0, max_size=1) as store:
                store.write(make())
                opened.append(store.schema_version)
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=open_and_write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert opened == [10] * 4
    assert _hashed(postgres_dsn) == {index for index, _, _ in _postgres_schema._KEYS}
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:
        assert review.count() == 5
