"""What veridic's MCP server tells a client of its audit store, how long it waits for an
answer, and how many of a server's log messages veridic's MCP client writes to the log.

Real parts throughout: veridic's server in process (``mcp.Client(server)``) or the example
application as a subprocess spoken to in raw JSON-RPC (a client of an old protocol revision,
which the SDK's client no longer speaks), and the test MCP server as a subprocess for the
client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AsyncPostgresAuditSink,
    CallOutcome,
    Registry,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    aexecute,
)
from veridic.integrations.mcp import Declared, connect, stdio
from veridic.integrations.mcp.server import McpRequest, mcp_server

ROOT: Final = Path(__file__).resolve().parents[1]
TOOLS_SERVER: Final = Path(__file__).parent / "_mcp_tools_server.py"
DSN: Final = "host=audit-db.internal.example dbname=ops_audit user=svc_audit"


def _registry(deleted: list[int]) -> Registry:
    registry = Registry("orders")

    @registry.tool(kind="write", irreversible=True)
    def delete_order(order_id: int) -> str:
        """Permanently delete an order; this cannot be undone.

        Args:
            order_id: The order to delete.
        """
        deleted.append(order_id)
        return f"deleted {order_id}"

    return registry


def _text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


# --- (1) an audit store's failure, told to the client ----------------------------------------


def test_a_store_that_refuses_the_record_is_not_named_to_the_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A call that did not run (here: nobody could be asked to approve it) has its record
    refused by the store with an ``AuditRecordError``, whose message names the store: a
    Postgres DSN's host, database and user (a SQLite store's file path). veridic's server
    sent it to the client as it was. The client now reads what failed and that the
    server's log has the details; the log has the whole error."""
    deleted: list[int] = []
    registry = _registry(deleted)
    store = AsyncPostgresAuditSink(DSN)  # never opened: each write is refused
    server = mcp_server(lambda request: registry.view(), audit=store)

    async def main() -> types.CallToolResult:
        async with Client(server) as client:  # declares no elicitation: nobody is asked
            return await client.call_tool("delete_order", {"order_id": 7})

    with caplog.at_level(logging.ERROR, logger="veridic.integrations.mcp"):
        result = anyio.run(main)
    told = _text(result)
    assert result.is_error
    assert deleted == []
    for secret in ("audit-db.internal.example", "ops_audit", "svc_audit", "PostgresAuditSink"):
        assert secret not in told
    assert "'delete_order' did not run" in told
    assert "could not write its audit record" in told
    assert "server's log" in told
    assert "audit-db.internal.example" in caplog.text  # the operator has it all


def test_a_view_factory_failing_on_its_store_is_not_named_to_the_client() -> None:
    """A view factory that reads the store too (the roles' saved rules) met the same
    ``AuditRecordError``, and the client read it verbatim as well."""
    deleted: list[int] = []
    registry = _registry(deleted)
    store = AsyncPostgresAuditSink(DSN)

    async def view(request: McpRequest) -> ToolView:
        rules = await store.arules("roles")  # refused: the store is not open
        return registry.view(deny=[name for name, rule in rules.items() if rule == "deny"])

    server = mcp_server(view, audit=store)

    async def main() -> types.CallToolResult:
        async with Client(server) as client:
            return await client.call_tool("delete_order", {"order_id": 7})

    told = _text(anyio.run(main))
    assert "audit-db.internal.example" not in told
    assert "nothing ran" in told
    assert "server's log" in told
    assert deleted == []


# --- (2) how long a question waits -----------------------------------------------------------


class _OldClient:
    """A client of an old protocol revision, in raw JSON-RPC over the example's stdio."""

    def __init__(self, tmp_path: Path, version: str) -> None:
        app = ROOT / "examples" / "mcp_server_app.py"
        self.process = subprocess.Popen(
            [sys.executable, str(app), "--audit", str(tmp_path / "audit.sqlite3")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    # An old client that claims it anyway (a capability it cannot use).
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "old", "version": "1"},
                },
            }
        )
        assert self.receive()["result"]["protocolVersion"] == version
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, object]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write((json.dumps(message) + "\n").encode())
        stdin.flush()

    def receive(self) -> dict[str, Any]:
        stdout: IO[bytes] | None = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], 60)  # a guard against a hang, not a time
        assert ready, "the server sent nothing"
        message: dict[str, Any] = json.loads(stdout.readline())
        return message

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_a_client_of_a_protocol_without_elicitation_is_told_at_once_nobody_can_approve(
    tmp_path: Path, version: str
) -> None:
    """A client that speaks a revision from before elicitation (2025-06-18) cannot answer
    an ``elicitation/create``; if it claims the capability anyway, veridic's server sent it
    the question and held the call (a task of the server) for ten minutes waiting for an
    answer that could not come. The call is now answered at once: no approval is
    possible on this connection, so it did not run (recorded ``DENIED``)."""
    client = _OldClient(tmp_path, version)
    try:
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "delete_note", "arguments": {"number": 1}},
            }
        )
        answer = client.receive()
    finally:
        client.close()
    assert answer.get("method") != "elicitation/create", "the question was sent"
    assert answer["id"] == 2
    result = answer["result"]
    assert result["isError"] is True
    told = result["content"][0]["text"]
    assert f"MCP {version}" in told
    assert "no elicitation" in told
    assert "did not run" in told
    with SQLiteAuditSink(tmp_path / "audit.sqlite3") as sink:
        (record,) = sink.records()
    assert (record.tool, record.approval, record.outcome) == (
        "delete_note",
        ApprovalMode.DENIED,
        CallOutcome.DENIED,
    )


def test_a_client_of_the_first_protocol_with_elicitation_is_asked(tmp_path: Path) -> None:
    client = _OldClient(tmp_path, "2025-06-18")
    try:
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "delete_note", "arguments": {"number": 1}},
            }
        )
        asked = client.receive()
    finally:
        client.close()
    assert asked.get("method") == "elicitation/create"


async def _never_answers(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def test_the_wait_for_an_answer_is_the_operators_and_leaves_no_task(
    audit: SQLiteAuditSink,
) -> None:
    """On the handshake protocol the question is an ``elicitation/create`` during the call,
    and the call's task waited ten minutes for it, a time nobody could set. The server now
    waits ``approval_timeout`` seconds; past it, the call did not run (``DENIED``) and no
    task of the call is left behind."""
    deleted: list[int] = []
    registry = _registry(deleted)
    server = mcp_server(lambda request: registry.view(), audit=audit, approval_timeout=0.05)

    async def main() -> tuple[types.CallToolResult, set[asyncio.Task[object]]]:
        async with Client(server, mode="legacy", elicitation_callback=_never_answers) as client:
            before = asyncio.all_tasks()
            result = await client.call_tool("delete_order", {"order_id": 7})
            for _ in range(20):  # let the cancelled ones finish unwinding
                await asyncio.sleep(0)
            return result, asyncio.all_tasks() - before

    result, left = asyncio.run(main())
    assert left == set(), [task.get_coro() for task in left]
    assert result.is_error
    assert "within 0.05 seconds" in _text(result)
    assert deleted == []
    (record,) = audit.records()
    assert (record.approval, record.outcome) == (ApprovalMode.DENIED, CallOutcome.DENIED)


@pytest.mark.parametrize("wait", [0, -1.0, float("nan"), float("inf"), True, "600"])
def test_an_approval_timeout_that_is_no_time_is_refused(
    audit: SQLiteAuditSink, wait: object
) -> None:
    registry = _registry([])
    with pytest.raises(VeridicError, match="approval_timeout"):
        mcp_server(lambda request: registry.view(), audit=audit, approval_timeout=wait)  # type: ignore[arg-type]  # the misuse under test


# --- (3) a server's log messages, capped -------------------------------------------------------


def test_a_flood_of_server_log_messages_is_capped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each log message a server sends (``notifications/message``) was written to the
    application's log, without limit: a hostile server filled it (and the disk behind
    it). A connection now logs at most a fixed number a window; the rest are counted,
    and one notice says how many were not logged. None goes unaccounted for."""
    sent = 450
    spec = tmp_path / "tools.json"
    logs = [["warning", f"disk {number} is full", None] for number in range(sent)]
    spec.write_text(
        json.dumps(
            [
                {
                    "name": "search",
                    "description": "Search the issues.",
                    "input_schema": {"type": "object"},
                    "log": logs,
                }
            ]
        )
    )
    server = stdio(
        "tools",
        sys.executable,
        str(TOOLS_SERVER),
        env={"VERIDIC_TEST_MCP_SPEC": str(spec)},
        protocol="legacy",
    )
    registry = Registry()

    async def run() -> CallOutcome:
        async with connect(registry, server, declare={"search": Declared("query")}):
            view = registry.view()
            with SQLiteAuditSink(":memory:") as sink:
                called = await aexecute(
                    view,
                    "search",
                    {},
                    policy=ApprovalPolicy(view),
                    audit=sink,
                    request_id="req-1",
                    prompt_sha256="0" * 64,
                )
            return called.outcome

    with caplog.at_level(logging.DEBUG, logger="veridic.integrations.mcp.server_log"):
        assert asyncio.run(run()) is CallOutcome.OK
    lines = [
        r.getMessage() for r in caplog.records if r.name == "veridic.integrations.mcp.server_log"
    ]
    logged = [line for line in lines if "(log message, level 'warning')" in line]
    notices = [re.search(r"sent (\d+) log messages? more than", line) for line in lines]
    counted = [int(found.group(1)) for found in notices if found is not None]
    capped = [line for line in lines if "the most one connection logs" in line]
    assert len(capped) == len(counted)  # each window over the cap said so at its first
    assert len(logged) + len(counted) + len(capped) == len(lines)  # nothing else was written
    assert counted, "no notice of the messages not logged"
    assert len(logged) < sent
    assert len(logged) + sum(counted) == sent  # each one logged or counted
