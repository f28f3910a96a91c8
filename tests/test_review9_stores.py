"""The ninth review of the audit stores: Postgres URLs and connections, errors that cross
a process boundary, and the whole-store report."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import pickle
import socket
import sqlite3
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("psycopg")

import psycopg

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AsyncPostgresAuditSink,
    AuditRecord,
    AuditRecordError,
    AuditWriteError,
    CallOutcome,
    Composer,
    IncompletePlanError,
    PostgresAuditSink,
    Registry,
    Risk,
    SQLiteAuditSink,
    execute,
    instruction,
    normalize_plan,
)
from veridic.checks import audit_report
from veridic.checks.audit_report import AuditReport, Selection, build_report, stream_report
from veridic.checks.cli import main
from veridic.providers import Usage
from veridic.run.records import ModelCallRecord, ModelReplyRecord, Substitution

_PASSWORD_PIECES = ("Zx9front", "Qy8back")
"""The two halves of the passwords below: no message of veridic, libpq or Python holds
either, so finding one in the output is a leak."""


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound by this test and never listened on: a connection is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def _everything_shown(error: BaseException) -> str:
    """What a logger shows of ``error``: the traceback with its causes and notes."""
    return "".join(traceback.format_exception(error))


def _pool_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("psycopg")]


def _open(store: type[PostgresAuditSink] | type[AsyncPostgresAuditSink], url: str) -> None:
    """Open ``store`` on ``url`` the way its callers do, and close it if it opened."""
    if store is PostgresAuditSink:
        PostgresAuditSink(url, timeout=5).close()
        return

    async def opened() -> None:
        async with AsyncPostgresAuditSink(url, timeout=5):
            pass

    asyncio.run(opened())


# --- 1. a '/' or '@' left raw in a URL's password -------------------------------------------------

_MISREAD_URLS = [
    "postgresql://audit:Zx9front/Qy8back@127.0.0.1:{port}/app",
    "postgresql://audit:Zx9front@Qy8back@127.0.0.1:{port}/app",
    "postgresql://audit:2024/Qy8back@127.0.0.1:{port}/app",
    "postgres://audit:Zx9front/Qy8back?x@127.0.0.1:{port}/app",
    "postgresql://audit:Zx9front@Qy8back/more@127.0.0.1:{port}/app",
]


@pytest.mark.parametrize("store", [PostgresAuditSink, AsyncPostgresAuditSink])
@pytest.mark.parametrize("url", _MISREAD_URLS)
def test_a_url_whose_password_holds_a_raw_slash_or_at_is_refused_before_connecting(
    store: type[PostgresAuditSink] | type[AsyncPostgresAuditSink],
    url: str,
    refusing_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """libpq ends a URL's password at its first '/' (or '@') and reads the rest as the host,
    port and database name: the pool's warnings and the store's repr showed pieces of it."""
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AuditRecordError, match="percent-encode") as caught:
        _open(store, url.format(port=refusing_port))
    shown = _everything_shown(caught.value) + caplog.text
    assert not any(piece in shown for piece in _PASSWORD_PIECES), shown
    assert "%2F" in str(caught.value)
    assert "%40" in str(caught.value)
    assert _pool_records(caplog) == []  # refused before any connection was tried


def test_veridic_audit_refuses_such_a_url_without_printing_the_password(
    refusing_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _MISREAD_URLS[0].format(port=refusing_port)
    assert main(["audit", url]) == 2
    said = capsys.readouterr()
    assert "percent-encode" in said.err
    assert not any(piece in said.out + said.err for piece in _PASSWORD_PIECES)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://127.0.0.1:{port}/app?user=audit@server",  # Azure's user@server names
        "postgresql://audit:Zx9front%2FQy8back@127.0.0.1:{port}/app",
        "postgresql://audit:Zx9front%40Qy8back@[::1]:{port}/app",
        "postgresql://audit:pa?ss@127.0.0.1:{port}/app",  # libpq reads a '?' there as written
    ],
)
def test_a_url_libpq_reads_as_meant_is_not_refused(url: str, refusing_port: int) -> None:
    with pytest.raises(psycopg.OperationalError):  # it was tried: nothing listens there
        PostgresAuditSink(url.format(port=refusing_port), timeout=5)


_ANY_PASSWORD = st.text(st.characters(codec="ascii", categories=["L", "N", "P", "S"]), min_size=1)


@settings(max_examples=60, deadline=None)
@given(password=_ANY_PASSWORD, tail=st.sampled_from(["/app", "/app?user=me@server", ""]))
def test_a_percent_encoded_password_is_never_refused_as_misread(password: str, tail: str) -> None:
    """Whatever the password, its URL percent-encoded is read as meant: the store tries to
    connect (nothing listens on the port) rather than refuse the URL."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        url = f"postgresql://audit:{quote(password, safe='')}@127.0.0.1:{port}{tail}"
        with pytest.raises(psycopg.OperationalError):
            PostgresAuditSink(url, timeout=5)


# --- 2. a refused connection fails at once, with one error ----------------------------------------


@pytest.mark.parametrize("store", [PostgresAuditSink, AsyncPostgresAuditSink])
def test_a_refused_connection_fails_at_open_with_one_error_naming_host_and_port(
    store: type[PostgresAuditSink] | type[AsyncPostgresAuditSink],
    refusing_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The pool retried a refused connection until ``timeout`` (30 s by default), logging a
    warning each time, and then raised ``PoolTimeout`` naming neither host nor port."""
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://audit:Zx9front@127.0.0.1:{refusing_port}/app"
    with pytest.raises(psycopg.OperationalError) as caught:
        _open(store, url)
    assert type(caught.value).__name__ != "PoolTimeout"
    shown = _everything_shown(caught.value)
    assert "127.0.0.1" in shown
    assert str(refusing_port) in shown
    assert "Zx9front" not in shown + caplog.text
    assert "could not connect" in shown  # the store's note: which store, what to do
    assert _pool_records(caplog) == []


@pytest.mark.parametrize("read_only", [False, True])
def test_a_refused_connection_of_a_sized_store_is_one_error_too(
    read_only: bool, refusing_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """``veridic audit`` opens its store with ``min_size=0``: the first connection was
    asked of the pool, which logged its warnings for the whole ``timeout``."""
    caplog.set_level(logging.DEBUG)
    url = f"host=127.0.0.1 port={refusing_port} dbname=app user=audit"
    with pytest.raises(psycopg.OperationalError, match="Connection refused"):
        PostgresAuditSink(url, min_size=0, max_size=1, timeout=5, read_only=read_only)
    assert _pool_records(caplog) == []


def test_veridic_audit_on_a_refused_server_says_so_once(
    refusing_port: int, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert main(["audit", f"postgresql://audit:Zx9front@127.0.0.1:{refusing_port}/app"]) == 2
    said = capsys.readouterr()
    assert "cannot reach the Postgres audit store" in said.err
    assert f"port {refusing_port}" in said.err
    assert "Zx9front" not in said.err + said.out + caplog.text
    assert _pool_records(caplog) == []


# --- 3. AuditWriteError crosses a process boundary ------------------------------------------------


class _FullDisk:
    """A sink whose every write fails, as a full disk's would."""

    def write(self, record: object, /) -> None:
        raise sqlite3.OperationalError("database or disk is full")


def _audit_write_error() -> AuditWriteError:
    registry = Registry()

    @registry.tool(kind="write", risk=Risk.LOW, description="Save a note for the user.")
    def save_note(text: str) -> str:
        """Args:
        text: The note.
        """
        return f"saved {text}"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("save_note")
    with pytest.raises(AuditWriteError) as raised:
        execute(
            view,
            "save_note",
            {"text": "milk"},
            policy=policy,
            audit=_FullDisk(),
            request_id="req-1",
            prompt=Composer().system(instruction("You save notes.")).build(),
        )
    return raised.value


def test_an_audit_write_error_survives_pickling_with_its_call_and_record() -> None:
    """Its ``__init__`` takes the call's result, which ``pickle`` did not pass back:
    ``TypeError: missing 1 required positional argument: 'result'`` on loading, so a
    process pool or a task queue lost the error and the record it exists to keep."""
    error = _audit_write_error()
    copied = pickle.loads(pickle.dumps(error))
    assert type(copied) is AuditWriteError
    assert str(copied) == str(error)
    assert copied.args == error.args
    assert copied.result.value == "saved milk"
    assert copied.result.record == error.result.record
    assert copied.earlier == error.earlier


def test_an_incomplete_plan_error_survives_pickling_with_its_plan() -> None:
    registry = Registry()

    @registry.tool(kind="query", description="Look an order up by its number.")
    def find_order(number: int) -> str:
        """Args:
        number: The order's number.
        """
        return str(number)

    plan = normalize_plan([{"id": "a", "tool": "drop_table", "arguments": {}}], registry.view())
    error = IncompletePlanError("the plan lost a step", plan)
    copied = pickle.loads(pickle.dumps(error))
    assert (str(copied), copied.args) == (str(error), error.args)
    assert copied.plan == plan


# --- a migration keeps every answer it cannot prove a repeat --------------------------------------


def _database_4(path: Path) -> None:
    """A file as veridic's schema 4 left it (its steps, then its user_version)."""
    from veridic.run import _sqlite_schema

    with sqlite3.connect(path, isolation_level=None) as db:
        for step in _sqlite_schema._STEPS[:4]:
            step(db)
        db.execute("PRAGMA user_version = 4")


_CALL_ID = "c" * 32


def _answer(db: sqlite3.Connection, response_id: str, stop_reason: str, tokens: int) -> None:
    db.execute(
        "INSERT INTO veridic_model_replies (time, request_id, prompt_sha256, response_id, "
        "model, stop_reason, tool_calls, input_tokens, output_tokens, latency, call_id) "
        "VALUES (1.0, 'req-1', ?, ?, 'm', ?, '[]', ?, 5, 0.25, ?)",
        ("a" * 64, response_id, stop_reason, tokens, _CALL_ID),
    )


def test_migrating_schema_4_keeps_two_different_answers_to_one_call(tmp_path: Path) -> None:
    """Schema 5 keeps one answer per call id; its migration deleted every answer but the
    first of each call id, though it was meant to drop exact repeats only (a write sent
    twice): an answer that differs was lost without a word."""
    path = tmp_path / "audit.db"
    _database_4(path)
    with sqlite3.connect(path) as db:
        _answer(db, "resp-1", "end_turn", 100)
        _answer(db, "resp-1", "end_turn", 100)  # a write sent twice: one copy is enough
        _answer(db, "resp-2", "max_tokens", 120)  # another answer: kept, unlinked
    with SQLiteAuditSink(path) as store:
        answers = store.model_replies()
    assert [(a.response_id, a.stop_reason) for a in answers] == [
        ("resp-1", "end_turn"),
        ("resp-2", "max_tokens"),
    ]
    assert [a.call_id for a in answers] == [_CALL_ID, ""]


# --- 4. the report of a whole store is written as it is read -----------------------------------

_SHA = "0" * 64
_DENIED = AuditRecord(
    time=0.0,
    request_id="req-0",
    tool="refund",
    kind="write",
    risk=Risk.MID,
    approval=ApprovalMode.DENIED,
    wrote_instruction_fields=False,
    irreversible=False,
    prompt_sha256=_SHA,
    tools_sha256=_SHA,
    outcome=CallOutcome.DENIED,
)


@st.composite
def _call_records(draw: st.DrawFn) -> AuditRecord:
    outcome = draw(st.sampled_from(list(CallOutcome)))
    fixed = {CallOutcome.DENIED: ApprovalMode.DENIED, CallOutcome.REFUSED: ApprovalMode.NOT_ASKED}
    ran = outcome not in fixed
    return AuditRecord(
        time=draw(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0])),
        request_id=draw(st.sampled_from(["r1", "r2", "r3", "a\x1b[31m"])),
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
        prompt_sha256=_SHA,
        tools_sha256=_SHA,
        outcome=outcome,
        detail=draw(st.sampled_from(["", "after the call ended: late", "why ##[x]"])),
        operations=tuple(sorted(draw(st.sets(st.sampled_from(["op1", "op2"]), max_size=2)))),
    )


@st.composite
def _model_rows(draw: st.DrawFn) -> tuple[ModelCallRecord, ModelReplyRecord | None]:
    request_id = draw(st.sampled_from(["r1", "r2", "r4"]))
    time = draw(st.sampled_from([0.5, 2.0, 4.0, 9.0]))
    call = ModelCallRecord(time, request_id, "openai.chat", "gpt", _SHA, _SHA, ("edit",), (), False)
    if not draw(st.booleans()):
        return call, None
    usage = draw(st.none() | st.builds(Usage, st.integers(0, 99), st.integers(0, 99)))
    reply = ModelReplyRecord(
        time + 0.5,
        request_id,
        _SHA,
        "resp",
        "gpt",
        "stop",
        ("edit",),
        usage,
        0.25,
        draw(st.sampled_from([call.call_id, ""])),
    )
    return call, reply


def _rendered(report: AuditReport) -> tuple[str, str, str]:
    return report.text(), report.markdown(), report.json()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_call_records(), max_size=12),
    model=st.lists(_model_rows(), max_size=4),
    since=st.sampled_from([None, 2.0]),
)
def test_a_streamed_report_reads_as_the_one_built_whole(
    records: list[AuditRecord],
    model: list[tuple[ModelCallRecord, ModelReplyRecord | None]],
    since: float | None,
) -> None:
    """Read a page at a time (pages of 2 here), each section of the report, its column
    widths, counts and JSON, is the text of the report built from every row at once."""
    with SQLiteAuditSink() as store:
        for record in records:
            store.write(record)
        for call, reply in model:
            store.write_model_call(call)
            if reply is not None:
                store.write_model_reply(reply)
        selection = Selection(since=since)
        whole = build_report(store, selection, database="audit.db")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(audit_report, "_PAGE", 2)
            streamed = stream_report(store, selection, database="audit.db")
            assert _rendered(streamed) == _rendered(whole)
            assert "".join(streamed.json_chunks()) == json.dumps(
                whole.to_json(), indent=2, sort_keys=True, ensure_ascii=True
            )
        assert streamed.exit_code() == whole.exit_code()


def test_veridic_audit_of_a_whole_store_reads_no_more_than_a_request_or_a_page_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report of a whole store read every record, model call and answer of it at
    once: memory grew with the store. Now no read returns more than a page of records
    or one request's rows (counted as records made at once, not as memory)."""
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        for n in range(300):
            request_id = f"req-{n}"
            call = ModelCallRecord(n, request_id, "openai.chat", "gpt", _SHA, _SHA, (), (), False)
            store.write_model_call(call)
            store.write_model_reply(
                ModelReplyRecord(
                    n + 0.5, request_id, _SHA, "r", "gpt", "stop", (), None, 0.1, call.call_id
                )
            )
            for at in (n + 0.1, n + 0.2):
                store.write(dataclasses.replace(_DENIED, time=at, request_id=request_id))
        expected = build_report(store, Selection(), database=str(path)).text()
    most = 0
    run = SQLiteAuditSink._run

    def counted(self: SQLiteAuditSink, statement: Any) -> Any:
        nonlocal most
        answer = run(self, statement)
        made = (AuditRecord, ModelCallRecord, ModelReplyRecord, Substitution, tuple)
        if isinstance(answer, tuple) and answer and isinstance(answer[0], made):
            ids = isinstance(answer[0], tuple) and isinstance(answer[0][0], str)
            most = max(most, 0 if ids else len(answer))  # rows made records, not request ids
        return answer

    monkeypatch.setattr(SQLiteAuditSink, "_run", counted)
    monkeypatch.setattr(audit_report, "_PAGE", 50)
    assert main(["audit", str(path)]) == 0
    assert capsys.readouterr().out == expected + "\n"
    assert 0 < most <= 50  # the whole store is 600 records, 300 calls and 300 answers


def test_a_streamed_report_of_a_postgres_store_reads_as_the_one_built_whole(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresAuditSink(postgres_dsn) as store:
        for n, outcome in enumerate([CallOutcome.DENIED, CallOutcome.OK] * 4):
            store.write(
                dataclasses.replace(
                    _DENIED,
                    time=float(n % 3),
                    request_id=f"req-{n % 3}",
                    outcome=outcome,
                    approval=ApprovalMode.DENIED
                    if outcome is CallOutcome.DENIED
                    else ApprovalMode.USER_CONFIRMED,
                )
            )
        call = ModelCallRecord(0.5, "req-9", "openai.chat", "gpt", _SHA, _SHA, (), (), False)
        store.write_model_call(call)
        whole = build_report(store, Selection(), database="pg")
        monkeypatch.setattr(audit_report, "_PAGE", 3)
        streamed = stream_report(store, Selection(), database="pg")
        assert _rendered(streamed) == _rendered(whole)
