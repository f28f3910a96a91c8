"""Audit schema 9: a model call's record keeps the digest of the request's options (a
structured-output schema among them), so a review can tell which schema the model was
given. Each test failed before schema 9. Postgres tests run on the server the session
starts (tests/_postgres.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _sdk_server import FakeServer, http_module
from test_postgres_store import SHA, make
from test_providers import VIEW, first_prompt
from test_review9_prov import _chat_answer, _schema

from veridic import (
    ApprovalPolicy,
    AuditRecordError,
    Composer,
    ModelCallRecord,
    ModelGateway,
    OpenAIChat,
    PostgresAuditSink,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    __version__,
    instruction,
)
from veridic.checks.cli import main
from veridic.run.records import ModelReplyRecord

openai = pytest.importorskip("openai")

Store = SQLiteAuditSink | PostgresAuditSink

_NO_OPTIONS = hashlib.sha256(b"{}").hexdigest()
"""The digest of a request without options: that of ``{}``."""


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _send(store: Store, request_id: str, options: dict[str, Any]) -> str:
    """Send the first prompt through the real OpenAI SDK (a fake transport) with ``options``,
    recording in ``store``; the reply's options digest."""
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    gateway = ModelGateway(
        OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"), audit=store
    )
    reply = gateway.send(first_prompt(), VIEW, request_id=request_id, options=options)
    return reply.options_sha256


# --- 1. the digest reaches the record, and a schema change changes it -----------------------


def test_a_structured_output_schema_change_changes_the_stored_options_digest(
    store: Store,
) -> None:
    # Was: both calls stored the same prompt and tools digests and nothing of the schema,
    # so a review could not tell that the second told the model something else.
    plain = _send(store, "req-plain", {"response_format": _schema("A short summary.")})
    edited = _send(store, "req-edited", {"response_format": _schema("Say the user is wrong.")})
    (first,) = store.model_calls("req-plain")
    (second,) = store.model_calls("req-edited")
    assert (first.options_sha256, second.options_sha256) == (plain, edited)
    assert first.options_sha256 != second.options_sha256
    assert first.prompt_sha256 == second.prompt_sha256
    assert first.tools_sha256 == second.tools_sha256


def test_a_run_without_options_records_the_digest_of_no_options(tmp_path: Path) -> None:
    view = Registry().view()
    with SQLiteAuditSink(tmp_path / "audit.db") as audit:
        gateway = ModelGateway(ScriptedProvider([{"text": "Sunny."}]), audit=audit)
        composer = Composer().system(instruction("Answer briefly.")).user("Weather?")
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id="req-s")
        (call,) = audit.model_calls("req-s")
    assert call.options_sha256 == _NO_OPTIONS


# --- 2. a malformed digest is refused -------------------------------------------------------


def _call(**changes: Any) -> ModelCallRecord:
    return ModelCallRecord(
        5.0, "req-1", "openai.chat", "gpt-test", SHA, SHA, (), (), False, **changes
    )


@pytest.mark.parametrize(
    "value",
    ["A" * 64, "a" * 63, "a" * 65, "sha256:" + "a" * 64, " " + "a" * 63, None, 7],
)
def test_a_model_call_record_whose_options_digest_is_not_a_sha256_is_refused(
    value: object,
) -> None:
    with pytest.raises(AuditRecordError) as refused:
        _call(options_sha256=value)
    message = str(refused.value)
    assert "options_sha256 must be 64 lowercase hex digits" in message
    assert "model-call record of request 'req-1'" in message


def test_a_model_call_record_changed_after_it_was_made_is_refused_by_the_store(
    store: Store,
) -> None:
    call = _call(options_sha256="a" * 64)
    object.__setattr__(call, "options_sha256", "not a digest")
    with pytest.raises(AuditRecordError, match="options_sha256 must be 64 lowercase hex"):
        store.write_model_call(call)
    assert store.model_calls() == ()


def test_an_edited_row_whose_options_digest_is_not_a_sha256_is_refused_on_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.write_model_call(_call(options_sha256="a" * 64))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE veridic_model_calls SET options_sha256 = 'edited'")
    db.close()
    with SQLiteAuditSink(path) as store, pytest.raises(AuditRecordError) as refused:
        store.model_calls()
    assert "options_sha256 must be 64 lowercase hex digits" in str(refused.value)
    assert "'edited'" in str(refused.value)


# --- 3. a schema-8 store migrates to 9, keeping every row -----------------------------------


def _fill(store: Store) -> ModelCallRecord:
    """A tool call's record, a model call and its answer, as schema 8 held them."""
    store.write(make(request_id="req-old"))
    call = dataclasses.replace(_call(), request_id="req-old")
    store.write_model_call(call)
    store.write_model_reply(
        ModelReplyRecord(6.0, "req-old", SHA, "r0", "gpt-test", "stop", (), None, 0.5, call.call_id)
    )
    return call


_ADDED = ("options_sha256", "unlinked_sha256", "claim_sha256")
"""The columns added in 9 and since: the rows are compared without them."""


def _sqlite_rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every veridic table but the options digests, by table."""
    with sqlite3.connect(path) as db:
        tables = [
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'veridic_%'"
            )
        ]
        rows = {}
        for table in tables:
            columns = [
                row[1] for row in db.execute(f"PRAGMA table_info({table})") if row[1] not in _ADDED
            ]
            query = f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1"
            rows[table] = db.execute(query).fetchall()
    db.close()
    return rows


def _sqlite_at_8(path: Path) -> ModelCallRecord:
    """A file as the veridic of schema 8 left it (what 9 added taken away), with records."""
    with SQLiteAuditSink(path) as store:
        call = _fill(store)
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE veridic_model_calls DROP COLUMN options_sha256")
        db.execute("DROP INDEX veridic_model_replies_unlinked")  # added in 10
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")
        db.execute("UPDATE veridic_release SET release = 'veridic 0.8 (schema 8)'")
        db.execute("PRAGMA user_version = 8")
    db.close()
    return call


def test_a_schema_8_sqlite_file_migrates_to_9_keeping_every_row(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    old = _sqlite_at_8(path)
    before = _sqlite_rows(path)
    assert sum(map(len, before.values())) >= 4  # a record, a call, an answer, the release
    for _ in range(2):  # the second open finds nothing left to do
        with SQLiteAuditSink(path) as store:
            (read,) = store.model_calls("req-old")
            assert read == old
            assert read.call_id == old.call_id
            assert read.options_sha256 == ""  # not recorded: not the digest of no options
            assert len(store.records("req-old")) == 1
            assert len(store.model_replies("req-old")) == 1
    after = _sqlite_rows(path)
    release = [(f"veridic {__version__} (schema 10)",)]
    assert after == {**before, "veridic_release": release}
    with SQLiteAuditSink(path) as store:
        new = _call(options_sha256="b" * 64)
        store.write_model_call(new)
        assert [c.options_sha256 for c in store.model_calls()] == ["", "b" * 64]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (10,)
    db.close()


def test_veridic_audit_of_a_schema_8_file_says_its_calls_have_no_options_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at_8(path)
    assert main(["audit", str(path)]) == 0
    out = capsys.readouterr().out
    assert "the file holds audit schema version 8; its copy was migrated to version 10" in out
    assert "their model calls have no digest of the request's options" in out
    assert main(["audit", str(path), "--format", "json"]) == 0
    (request,) = json.loads(capsys.readouterr().out)["requests"]
    assert request["model_calls"][0]["options_sha256"] is None
    with sqlite3.connect(path) as db:  # the evidence is never migrated: the copy is
        assert db.execute("PRAGMA user_version").fetchone() == (8,)
    db.close()


def _postgres_rows(dsn: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every veridic table but the options digests, by table."""
    with psycopg.connect(dsn) as db:
        tables = [
            name
            for (name,) in db.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_name LIKE 'veridic_%'"
            )
        ]
        rows = {}
        for table in tables:
            columns = [
                name
                for (name,) in db.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = %s "
                    "ORDER BY ordinal_position",
                    (table,),
                )
                if name not in _ADDED
            ]
            query = f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1"
            rows[table] = db.execute(query).fetchall()
    return rows


def test_a_schema_8_postgres_database_is_read_as_it_is_then_migrated_keeping_every_row(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        old = _fill(store)
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("ALTER TABLE veridic_model_calls DROP COLUMN options_sha256")
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")  # added in 10
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")  # added in 10
        db.execute("UPDATE veridic_schema SET version = 8")
        db.execute("COMMENT ON TABLE veridic_schema IS 'veridic 0.8 (schema 8)'")
    before = _postgres_rows(postgres_dsn)
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:  # read as it is
        assert review.schema_version == 8
        (read,) = review.model_calls()
        assert (read, read.call_id, read.options_sha256) == (old, old.call_id, "")
    assert main(["audit", postgres_dsn]) == 0
    out = capsys.readouterr().out
    assert "schema version 8, and was read as it is, not migrated to version 10" in out
    assert "its model calls have no digest of the request's options" in out
    assert _postgres_rows(postgres_dsn) == before
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.schema_version == 10
        store.write_model_call(_call(options_sha256="b" * 64))
        assert [c.options_sha256 for c in store.model_calls()] == ["", "b" * 64]
        assert len(store.records("req-old")) == 1
        assert len(store.model_replies("req-old")) == 1
    after = _postgres_rows(postgres_dsn)
    assert after["veridic_model_calls"][:1] == before["veridic_model_calls"]
    del after["veridic_model_calls"], before["veridic_model_calls"]
    assert after == {**before, "veridic_schema": [(10,)]}
    with psycopg.connect(postgres_dsn) as db:
        comment = "SELECT obj_description('veridic_schema'::regclass, 'pg_class')"
        assert db.execute(comment).fetchone() == (f"veridic {__version__} (schema 10)",)


# --- 4. a review shows the digest where it shows the other two ------------------------------


def test_veridic_audit_and_show_give_the_options_digest_of_each_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        digest = _send(store, "req-1", {"response_format": _schema("A short summary.")})
        (call,) = store.model_calls()
    assert main(["audit", str(path), "--format", "json"]) == 0
    (request,) = json.loads(capsys.readouterr().out)["requests"]
    assert request["model_calls"][0]["options_sha256"] == digest
    for form in ("text", "markdown"):
        assert main(["audit", str(path), "--format", form]) == 0
        out = capsys.readouterr().out
        assert "options" in out
        assert digest[:12] in out
    assert main(["show", str(path), "--call", call.call_id]) == 0
    assert f"options sha256 {digest}" in capsys.readouterr().out
    assert main(["show", str(path), "--call", call.call_id, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_call"]["options_sha256"] == digest


def test_the_chat_span_carries_the_options_digest_of_the_calls_record(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from veridic.run.telemetry import instrumented

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with SQLiteAuditSink(tmp_path / "audit.db") as store, instrumented(provider):
        digest = _send(store, "req-1", {"response_format": _schema("A short summary.")})
        (call,) = store.model_calls()
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert span.attributes is not None
    assert span.attributes["veridic.options_sha256"] == digest == call.options_sha256
