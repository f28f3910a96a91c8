"""Audit schema 8: the stores keep the parts of an answer's usage (cache reads, cache
writes, reasoning) beside its totals. Each test failed before schema 8. Postgres tests run
on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_postgres_store import SHA

from veridic import (
    ApprovalPolicy,
    AuditRecordError,
    Composer,
    ModelGateway,
    PostgresAuditSink,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    __version__,
    instruction,
)
from veridic.checks.audit_report import Selection, build_report
from veridic.checks.cli import main
from veridic.providers import Usage
from veridic.run import _postgres_schema, _sqlite_schema
from veridic.run.records import ModelCallRecord, ModelReplyRecord

Store = SQLiteAuditSink | PostgresAuditSink

_PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")
_COLUMNS_7 = (
    "time, request_id, prompt_sha256, response_id, model, stop_reason, tool_calls, "
    "input_tokens, output_tokens, latency, call_id"
)
"""The columns of an answer's record as schema 7 wrote them (no parts)."""

_CACHED = Usage(
    1200,
    300,
    cache_read_input_tokens=1024,
    cache_creation_input_tokens=100,
    reasoning_output_tokens=200,
)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _call(request_id: str = "req-1") -> ModelCallRecord:
    return ModelCallRecord(5.0, request_id, "openai.chat", "gpt-test", SHA, SHA, (), (), False)


_CALL = _call()


def _reply(usage: Usage | None, call: ModelCallRecord = _CALL) -> ModelReplyRecord:
    return ModelReplyRecord(
        6.0, call.request_id, SHA, "r1", "gpt-test", "stop", (), usage, 0.5, call.call_id
    )


def _parts(usage: Usage | None) -> tuple[int, ...] | None:
    """The usage's totals and parts: ``==`` on a Usage compares its totals only."""
    if usage is None:
        return None
    return (usage.input_tokens, usage.output_tokens, *(getattr(usage, p) for p in _PARTS))


# --- 1. the parts are kept, and NULL where the answer did not break its tokens down ---------


def test_an_answers_usage_parts_come_back_from_the_store(store: Store) -> None:
    store.write_model_call(_CALL)
    store.write_model_reply(_reply(_CACHED))
    (read,) = store.model_replies("req-1")
    assert _parts(read.usage) == (1200, 300, 1024, 100, 200)  # was: (1200, 300, 0, 0, 0)


def _sqlite_parts(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        rows = db.execute(f"SELECT {', '.join(_PARTS)} FROM veridic_model_replies ORDER BY id")
        found = rows.fetchall()
    db.close()
    return found


def test_parts_are_null_not_0_when_the_answer_did_not_break_its_tokens_down(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    calls = [_call(f"req-{n}") for n in range(3)]
    with SQLiteAuditSink(path) as store:
        for call, usage in zip(
            calls, (None, Usage(10, 5), Usage(10, 5, reasoning_output_tokens=2)), strict=True
        ):
            store.write_model_call(call)
            store.write_model_reply(_reply(usage, call))
        assert [_parts(r.usage) for r in store.model_replies()] == [
            None,
            (10, 5, 0, 0, 0),
            (10, 5, 0, 0, 2),
        ]
    # No usage, or none broken down: unknown; broken down, every part as the provider gave it.
    assert _sqlite_parts(path) == [(None, None, None), (None, None, None), (0, 0, 2)]


_COUNTS = (
    st.integers(0, 2**63 - 1)
    .flatmap(lambda read: st.tuples(st.just(read), st.integers(0, 2**63 - 1), st.integers(0, read)))
    .flatmap(
        lambda t: st.tuples(
            st.just(t[0]),
            st.just(t[1]),
            st.just(t[2]),
            st.integers(0, t[0] - t[2]),
            st.integers(0, t[1]),
        )
    )
)
"""Tokens read and written, then cache reads, cache writes (within the tokens read) and
reasoning (within the tokens written): every usage the gateway records."""


def test_every_usage_within_its_totals_comes_back_whole_from_both_stores(
    postgres_dsn: str,
) -> None:
    with SQLiteAuditSink() as sqlite, PostgresAuditSink(postgres_dsn) as postgres:

        @settings(max_examples=30, deadline=None)
        @given(counts=_COUNTS)
        def whole(counts: tuple[int, int, int, int, int]) -> None:
            read, wrote, cache_read, cache_write, reasoning = counts
            usage = Usage(
                read,
                wrote,
                cache_read_input_tokens=cache_read,
                cache_creation_input_tokens=cache_write,
                reasoning_output_tokens=reasoning,
            )
            call = _call()
            for store in (sqlite, postgres):
                store.write_model_call(call)
                store.write_model_reply(_reply(usage, call))
                back = store.model_replies()[-1]
                assert back.call_id == call.call_id
                assert _parts(back.usage) == counts, store

        whole()


# --- 2. a record's parts are checked before a store keeps them -----------------------------


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        (Usage(100, 5, cache_read_input_tokens=900), "cache_read_input_tokens=900"),
        (Usage(100, 5, reasoning_output_tokens=6), "reasoning_output_tokens=6"),
        (Usage(100, 5, cache_creation_input_tokens=-1), "cache_creation_input_tokens=-1"),
        (Usage(100, 5, cache_read_input_tokens="7"), "cache_read_input_tokens='7'"),  # type: ignore[arg-type]  # what an adapter of one's own may build
    ],
)
def test_a_reply_record_whose_parts_are_not_counts_within_their_totals_is_refused(
    usage: Usage, shown: str
) -> None:
    # Was: made, and written with its parts dropped (or, with schema 8 and no check, kept
    # as text or above the total in a row every review reads).
    with pytest.raises(AuditRecordError, match="usage") as refused:
        _reply(usage)
    assert shown in str(refused.value)


def test_an_edited_row_whose_parts_exceed_their_totals_is_refused_on_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.write_model_call(_CALL)
        store.write_model_reply(_reply(Usage(100, 5)))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE veridic_model_replies SET cache_read_input_tokens = 500")
    db.close()
    with SQLiteAuditSink(path) as store, pytest.raises(AuditRecordError) as refused:
        store.model_replies()
    assert "cache_read_input_tokens=500" in str(refused.value)
    assert "input_tokens=100" in str(refused.value)


# --- 3. a schema-7 store migrates in place; its answers read back with the parts unknown ----


def _sqlite_at_7(path: Path) -> None:
    """A file as the veridic of schema 7 left it, with one answer it recorded."""
    db = sqlite3.connect(path, isolation_level=None)
    for step in _sqlite_schema._STEPS[:7]:
        step(db)
    db.execute("INSERT INTO veridic_release (release) VALUES ('veridic 0.7 (schema 7)')")
    db.execute("PRAGMA user_version = 7")
    db.execute(
        f"INSERT INTO veridic_model_replies ({_COLUMNS_7}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (6.0, "req-old", SHA, "r0", "gpt-test", "stop", "[]", 1200, 300, 0.5, None),
    )
    db.close()


def test_a_schema_7_sqlite_file_is_migrated_in_place_keeping_its_answers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at_7(path)
    for _ in range(2):  # the second open finds nothing left to do
        with SQLiteAuditSink(path) as store:
            old = store.model_replies("req-old")
            assert [_parts(r.usage) for r in old] == [(1200, 300, 0, 0, 0)]
    with SQLiteAuditSink(path) as store:
        store.write_model_call(_CALL)
        store.write_model_reply(_reply(_CACHED))
        assert _parts(store.model_replies("req-1")[0].usage) == (1200, 300, 1024, 100, 200)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (10,)
        assert db.execute("SELECT release FROM veridic_release").fetchall() == [
            (f"veridic {__version__} (schema 10)",)
        ]
    db.close()
    # The answer written before the migration: unknown, not "no cache read".
    assert _sqlite_parts(path) == [(None, None, None), (1024, 100, 200)]


def test_veridic_audit_reads_a_schema_7_file_without_writing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at_7(path)
    assert main(["audit", str(path), "--format", "json"]) == 0
    (request,) = json.loads(capsys.readouterr().out)["requests"]
    (answer,) = request["replies_without_call"]
    assert answer["usage"] == {
        "input_tokens": 1200,
        "output_tokens": 300,
        "cache_read_input_tokens": None,
        "cache_creation_input_tokens": None,
        "reasoning_output_tokens": None,
    }
    with sqlite3.connect(path) as db:  # the evidence is never migrated: the copy is
        assert db.execute("PRAGMA user_version").fetchone() == (7,)
    db.close()


def test_a_schema_9_file_whose_user_version_another_program_set_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    SQLiteAuditSink(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 7")  # migrating again: "duplicate column name"
    db.close()
    with pytest.raises(AuditRecordError, match="tables of schema 10, but user_version 7"):
        SQLiteAuditSink(path)


def test_a_later_sqlite_schema_than_9_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    SQLiteAuditSink(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 11")
        db.execute("UPDATE veridic_release SET release = 'veridic 0.9.1 (schema 11)'")
    db.close()
    with pytest.raises(AuditRecordError) as refused:
        SQLiteAuditSink(path)
    assert "schema version 11, written by a later veridic ('veridic 0.9.1')" in str(refused.value)
    assert "which knows versions up to 10" in str(refused.value)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (11,)
    db.close()


def _postgres_at_7(dsn: str) -> None:
    """A database as the veridic of schema 7 made it, with one answer it recorded."""
    with psycopg.connect(dsn, autocommit=True) as db:
        version = 0
        while version < 7:
            step, version = _postgres_schema._STEPS[version]
            step(db)
        db.execute("UPDATE veridic_schema SET version = 7")
        db.execute("COMMENT ON TABLE veridic_schema IS 'veridic 0.7 (schema 7)'")
        db.execute(
            f"INSERT INTO veridic_model_replies ({_COLUMNS_7}) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (6.0, "req-old", SHA, "r0", "gpt-test", "stop", "[]", 1200, 300, 0.5, None),
        )


def _postgres_parts(dsn: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as db:
        rows = db.execute(f"SELECT {', '.join(_PARTS)} FROM veridic_model_replies ORDER BY id")
        return rows.fetchall()


def test_a_schema_7_postgres_database_is_read_as_it_is_then_migrated(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_at_7(postgres_dsn)
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:  # read as it is
        assert review.schema_version == 7
        assert [_parts(r.usage) for r in review.model_replies()] == [(1200, 300, 0, 0, 0)]
    assert main(["audit", postgres_dsn]) == 0
    out = capsys.readouterr().out
    assert "schema version 7, and was read as it is, not migrated to version 10" in out
    assert "its answers' usage is not broken down" in out
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.schema_version == 10
        store.write_model_call(_CALL)
        store.write_model_reply(_reply(_CACHED))
        assert [_parts(r.usage) for r in store.model_replies()] == [
            (1200, 300, 0, 0, 0),
            (1200, 300, 1024, 100, 200),
        ]
    assert _postgres_parts(postgres_dsn) == [(None, None, None), (1024, 100, 200)]
    with psycopg.connect(postgres_dsn) as db:
        comment = "SELECT obj_description('veridic_schema'::regclass, 'pg_class')"
        assert db.execute(comment).fetchone() == (f"veridic {__version__} (schema 10)",)


def test_a_later_postgres_schema_than_9_is_refused(postgres_dsn: str) -> None:
    PostgresAuditSink(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("UPDATE veridic_schema SET version = 11")
        db.execute("COMMENT ON TABLE veridic_schema IS 'veridic 0.9.1 (schema 11)'")
    for read_only in (False, True):
        with pytest.raises(AuditRecordError, match="which knows versions up to 10"):
            PostgresAuditSink(postgres_dsn, read_only=read_only)


# --- 4. the audit report shows the parts where they are known --------------------------------


def test_the_audit_report_shows_the_parts_of_an_answers_usage(store: Store) -> None:
    store.write_model_call(_CALL)
    store.write_model_reply(_reply(_CACHED))
    other = _call("req-2")
    store.write_model_call(other)
    store.write_model_reply(_reply(Usage(10, 5), other))
    report = build_report(store, Selection(), database="audit.db")
    text = report.text()
    assert "1200/300 (cache read 1024, cache write 100, reasoning 200)" in text
    assert "10/5 " in text  # no parts: nothing said of the cache
    assert "cache read 1024" in report.markdown()
    shown = json.loads(json.dumps(report.to_json()))
    requests = {r["request_id"]: r for r in shown["requests"]}
    counts = {k: v for k, v in dataclasses.asdict(_CACHED).items() if k != "stated"}
    assert requests["req-1"]["model_calls"][0]["reply"]["usage"] == counts
    assert requests["req-2"]["model_calls"][0]["reply"]["usage"] == {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": None,
        "cache_creation_input_tokens": None,
        "reasoning_output_tokens": None,
    }


def test_the_parts_the_gateway_reads_reach_the_store_and_veridic_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    answer = {
        "text": "Sunny.",
        "usage": {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 1024},
    }
    view = Registry().view()
    with SQLiteAuditSink(path) as audit:
        gateway = ModelGateway(ScriptedProvider([answer]), audit=audit)
        composer = Composer().system(instruction("Answer briefly.")).user("Weather?")
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id="req-g")
        (reply,) = audit.model_replies("req-g")
    assert _parts(reply.usage) == (1200, 300, 1024, 0, 0)
    assert _sqlite_parts(path) == [(1024, None, None)]  # the parts the answer left out: unknown
    assert main(["audit", str(path), "--request", "req-g"]) == 0
    assert "1200/300 (cache read 1024)" in capsys.readouterr().out
