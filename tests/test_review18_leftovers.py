"""Small leftovers of the eighteenth round's reviews: each test failed before its fix.

Real parts throughout: SQLite files, the Postgres server the session starts
(tests/_postgres.py), veridic's MCP server on the SDK's in-memory client.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import anyio
import mcp_types as types
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from veridic import (
    ApprovalPolicy,
    AuditRecordError,
    Conversation,
    NormalizedPlan,
    PlanError,
    PostgresAuditSink,
    Registry,
    SQLiteAuditSink,
    Templates,
    ToolContext,
    ToolView,
    VeridicError,
    execute,
    normalize_plan,
)
from veridic.integrations.mcp.server import McpRequest, mcp_server
from veridic.run.records import ModelCallRecord, ModelReplyRecord
from veridic.templates import TemplateError

SHA = hashlib.sha256(b"prompt").hexdigest()
FORGED = "Boom\x1b[2J\n##[error]deploy approved\n::error::forged"


def _inert(text: str, limit: int) -> None:
    """``text`` is bounded and has no line a terminal, a log reader or a CI runner would obey."""
    assert len(text) <= limit
    for line in text.split("\n"):
        assert line.isprintable(), line
        assert "##[" not in line, line
        assert not line.lstrip().startswith("::"), line


def _named(name: str) -> type[Exception]:
    """An exception class named by outside text, as an RPC client makes one."""
    kind = type("RemoteError", (Exception,), {})
    kind.__name__ = name
    return kind


# --- (1) stored ids and a document's format quoted clipped ----------------------------------


def test_a_malformed_model_calls_record_quotes_its_request_id_clipped() -> None:
    # A model call's record refused for an empty model quoted the request id (outside text:
    # an X-Request-Id header) whole, a megabyte of it and its escape sequences.
    with pytest.raises(AuditRecordError) as refused:
        ModelCallRecord(5.0, "r" * 100_000 + FORGED, "openai.chat", "", SHA, SHA, (), ())
    message = str(refused.value)
    assert "model must be a non-empty string" in message
    assert f"({100_000 + len(FORGED)} chars)" in message
    _inert(message, 600)


def test_a_model_call_record_altered_behind_its_back_quotes_its_call_id_clipped() -> None:
    record = ModelCallRecord(5.0, "req-1", "openai.chat", "gpt", SHA, SHA, (), ())
    object.__setattr__(record, "call_id", "x" * 100_000)
    with SQLiteAuditSink() as store, pytest.raises(AuditRecordError) as refused:
        store.write_model_call(record)
    message = str(refused.value)
    assert "call_id must be 32 lowercase hex digits" in message
    _inert(message, 600)


def test_a_malformed_model_reply_record_quotes_its_ids_clipped() -> None:
    with pytest.raises(AuditRecordError) as refused:
        ModelReplyRecord(
            5.0, "r" * 100_000 + FORGED, SHA, "resp", "gpt", "stop", (), None, 0.1,
            call_id="c" * 100_000,
        )  # fmt: skip
    message = str(refused.value)
    assert "call_id must be a ModelCallRecord's call_id" in message
    _inert(message, 800)


@given(found=st.text(min_size=200))
def test_a_conversation_document_of_another_format_quotes_the_format_clipped(found: str) -> None:
    other = json.dumps({"format": found, "turns": []})
    with pytest.raises(VeridicError) as refused:
        Conversation.from_json(other)
    assert f"({len(found)} chars)" in str(refused.value)
    assert str(refused.value).isprintable()
    assert len(str(refused.value)) < 900  # 60 characters, each escaped in up to 10


# --- (2) a new SQLite file another connection reads -----------------------------------------


def test_a_new_sqlite_file_another_connection_reads_is_refused_naming_the_store(
    tmp_path: Path,
) -> None:
    # A reader in rollback mode (the file is new: no store switched it to WAL yet) keeps
    # the first store from committing its tables: it failed after SQLite's 5 seconds with
    # a bare "database is locked", naming no store and no way out.
    path = tmp_path / "audit.db"
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        with pytest.raises(sqlite3.OperationalError) as refused:
            SQLiteAuditSink(path)
    finally:
        reader.close()
    noted = "\n".join(getattr(refused.value, "__notes__", ()))
    assert repr(str(path)) in noted
    assert "another connection" in noted
    assert "open the store again" in noted
    with SQLiteAuditSink(path) as store:  # nothing was left half-made
        assert store.count() == 0


# --- (3) which of SQLite's lock errors a store waits out ------------------------------------


def _error(code: int) -> sqlite3.OperationalError:
    """An error as SQLite gives it for ``code`` (sqlite3 sets these two attributes)."""
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = code
    error.sqlite_errorname = f"code {code}"
    return error


@pytest.mark.parametrize(
    ("code", "waited"),
    [
        (sqlite3.SQLITE_BUSY, True),
        (getattr(sqlite3, "SQLITE_BUSY_RECOVERY", 261), True),
        (getattr(sqlite3, "SQLITE_BUSY_SNAPSHOT", 517), True),
        (getattr(sqlite3, "SQLITE_BUSY_TIMEOUT", 773), True),
        (sqlite3.SQLITE_LOCKED, False),
        (getattr(sqlite3, "SQLITE_LOCKED_SHAREDCACHE", 262), False),
        (sqlite3.SQLITE_READONLY, False),
    ],
)
def test_every_busy_code_of_sqlite_is_waited_out_and_no_other(code: int, waited: bool) -> None:
    from veridic.run._sqlite_schema import busy

    assert busy(_error(code)) is waited


def test_a_busy_snapshot_sqlite_gives_is_read_as_busy(tmp_path: Path) -> None:
    # SQLITE_BUSY_SNAPSHOT, made by SQLite itself: a read transaction in WAL mode that would
    # write after another connection wrote.
    from veridic.run._sqlite_schema import busy

    path = tmp_path / "wal.db"
    first = sqlite3.connect(path, isolation_level=None, timeout=0)
    second = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        first.execute("PRAGMA journal_mode=WAL")
        first.execute("CREATE TABLE t (x)")
        second.execute("BEGIN")
        second.execute("SELECT * FROM t").fetchall()
        first.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(sqlite3.OperationalError) as stale:
            second.execute("INSERT INTO t VALUES (2)")
        assert stale.value.sqlite_errorname == "SQLITE_BUSY_SNAPSHOT"
        assert busy(stale.value)
        second.execute("ROLLBACK")
    finally:
        first.close()
        second.close()


# --- (4) a Postgres version column of another type ------------------------------------------


def test_a_postgres_boolean_version_is_refused_as_not_a_version_number(postgres_dsn: str) -> None:
    # True passed isinstance(int): the message said "holds version True ... no veridic writes".
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("CREATE TABLE veridic_schema (version BOOLEAN NOT NULL)")
        db.execute("INSERT INTO veridic_schema (version) VALUES (TRUE)")
    with pytest.raises(AuditRecordError) as refused:
        PostgresAuditSink(postgres_dsn).close()
    message = str(refused.value)
    assert "version True" not in message
    assert "not one version number" in message
    assert "True" in message


# --- (5) an MCP view factory's error logged escaped -----------------------------------------


def test_a_view_factorys_error_is_logged_without_its_raw_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The log line carried the error as exc_info: its traceback printed the message raw
    # (a licence server's answer), escape sequences and workflow commands included.
    def view(request: McpRequest) -> ToolView:
        raise _named(FORGED)(f"the licence server said: {FORGED}")

    server = mcp_server(view, audit=SQLiteAuditSink())

    async def main() -> types.CallToolResult:
        async with Client(server) as client:
            return await client.call_tool("fetch_report", {"key": "k"})

    with caplog.at_level(logging.ERROR, logger="veridic.integrations.mcp"):
        result = anyio.run(main)
    assert result.is_error
    formatter = logging.Formatter()
    (line,) = [formatter.format(r) for r in caplog.records if r.name == "veridic.integrations.mcp"]
    _inert(line, 8000)
    assert "the licence server said: " in line  # still recognisable
    assert "Traceback" in line


# --- (6) a template's failing expression named by outside text -------------------------------


class _Given(TypedDict):
    value: Any


class _Remote:
    """A value whose attribute asks a remote end, which answers with an error it named."""

    @property
    def field(self) -> str:
        raise _named(FORGED + "X" * 5000)("the remote end refused")


def test_a_template_error_names_an_outside_class_escaped(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("{{ value.field }}")
    template = Templates(tmp_path).data("t.j2", params=_Given)
    with pytest.raises(TemplateError) as failed:
        template.render({"value": _Remote()})
    message = str(failed.value)
    assert "the remote end refused" in message
    _inert(message, 1200)


@dataclasses.dataclass
class _Uncopyable:
    """An instance holding a set, whose copy fails with an error named by outside text."""

    tags: set[str]

    def __copy__(self) -> _Uncopyable:
        raise _named(FORGED + "X" * 5000)("cannot copy")


def test_a_template_param_whose_copy_fails_names_an_outside_class_escaped(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("{{ value.tags|join(',') }}")
    template = Templates(tmp_path).data("t.j2", params=_Given)
    with pytest.raises(TemplateError) as failed:
        template.render({"value": _Uncopyable({"b", "a"})})
    message = str(failed.value)
    assert "cannot be copied" in message
    _inert(message, 1200)


# --- (7) a delegated tool without its context ----------------------------------------------


def test_a_delegated_tool_missing_its_context_is_refused_before_it_is_recorded() -> None:
    # A confirmed high-risk call's handler invoked a high-risk tool that needs a context,
    # without one: the delegation was recorded as allowed, then refused for the context.
    purged: list[str] = []
    registry = Registry("context")

    @registry.tool(kind="write", risk="high")
    def purge(ctx: ToolContext[str], note: str) -> str:
        """Delete a note for good, bin included.

        Args:
            note: The note's id.
        """
        purged.append(note)
        return "purged"

    @registry.tool(kind="write", risk="high")
    def empty_bin(note: str) -> str:
        """Empty the bin of a note's folder.

        Args:
            note: A note of the folder.
        """
        return str(view.tool("purge").invoke({"note": note}))

    view = registry.view()
    result = execute(
        view, "empty_bin", {"note": "n-1"}, policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(":memory:"), request_id="r-1", prompt_sha256=SHA,
        confirm=lambda request: True,
    )  # fmt: skip
    assert purged == []
    assert isinstance(result.error, VeridicError)
    assert "asks for a" in str(result.error)
    assert "delegation:purge" not in result.record.operations


class _RefusingSink:
    """A store whose ``write`` refuses with a driver's error quoting the row."""

    def write(self, record: object, /) -> None:
        raise _named(FORGED)(f"the row was refused: {FORGED}")


def test_a_call_whose_record_the_store_refused_is_logged_without_the_raw_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The log line of a tools/call that ended in an error carried it as exc_info: its
    # traceback printed the store's message raw, escape sequences and workflow commands.
    registry = Registry("mcp-log")

    @registry.tool(kind="query")
    def fetch_report(key: str) -> str:
        """Fetch a report a worker built.

        Args:
            key: The report's key.
        """
        return "report"

    server = mcp_server(lambda request: registry.view(), audit=_RefusingSink())

    async def main() -> types.CallToolResult:
        async with Client(server) as client:
            return await client.call_tool("fetch_report", {"key": "k"})

    with caplog.at_level(logging.ERROR, logger="veridic.integrations.mcp"):
        result = anyio.run(main)
    assert result.is_error
    formatter = logging.Formatter()
    lines = [formatter.format(r) for r in caplog.records if r.name == "veridic.integrations.mcp"]
    assert lines
    for line in lines:
        _inert(line, 8000)
    assert any("the row was refused: " in line for line in lines)


class _Rows(list[Any]):
    """A list whose emptying fails with an error named by outside text."""

    def clear(self) -> None:
        raise _named(FORGED + "X" * 5000)("cannot clear")


class _Made(tuple[Any, ...]):
    """A tuple whose making fails, once made, with an error named by outside text."""

    def __new__(cls, items: Any) -> _Made:
        if _Made.made:
            raise _named(FORGED + "X" * 5000)("cannot make")
        _Made.made = True
        return super().__new__(cls, items)

    made = False


@pytest.mark.parametrize("value", [_Rows([{"b", "a"}]), _Made([{"b", "a"}])], ids=["list", "tuple"])
def test_a_template_param_that_cannot_be_remade_names_an_outside_class_escaped(
    tmp_path: Path, value: object
) -> None:
    (tmp_path / "t.j2").write_text("{{ value[0]|join(',') }}")
    template = Templates(tmp_path).data("t.j2", params=_Given)
    with pytest.raises(TemplateError) as failed:
        template.render({"value": value})
    message = str(failed.value)
    assert "it raised" in message
    _inert(message, 1200)


# --- (8) a JSONPath in a plan's arguments ------------------------------------------------


def test_a_jsonpath_naming_a_step_is_kept_as_the_query_it_is() -> None:
    # docs/plans-and-approvals.md: a JSONPath's "$" is the root of the document the tool
    # queries, not a placeholder; "$step_4.output" (a name right after "$") still is one.
    registry = Registry("jsonpath")

    @registry.tool(kind="query")
    def query_document(path: str) -> str:
        """Query the stored run document by a JSONPath.

        Args:
            path: The JSONPath to read.
        """
        return path

    view = registry.view()

    def plan(path: str) -> NormalizedPlan:
        return normalize_plan(
            [
                {"id": "step_4", "tool": "query_document", "arguments": {"path": "$.a"}},
                {"id": "b", "tool": "query_document", "arguments": {"path": path}},
            ],
            view,
        )

    kept = plan("$.steps.step_4.output")
    assert [step.arguments["path"] for step in kept.steps] == ["$.a", "$.steps.step_4.output"]
    with pytest.raises(PlanError):
        plan("$step_4.output")
