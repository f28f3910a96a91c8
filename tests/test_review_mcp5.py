"""An attacker review of the MCP client, fifth pass: a server that dies after a change
notice, a re-check that cannot start, and descriptions of megabytes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_review_mcp3 import ANY, tools_server
from test_review_mcp4 import answering, run_call

from veridic import CallOutcome, Registry, SQLiteAuditSink, ToolView
from veridic.integrations.mcp import Declared, McpConnection, connect


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


async def view_without(registry: Registry, name: str, seconds: float = 5.0) -> ToolView:
    """The first view that no longer offers ``name``, or the last one after ``seconds``."""
    view = registry.view()
    for _ in range(int(seconds / 0.05)):
        if name not in view.names():
            break
        await asyncio.sleep(0.05)
        view = registry.view()
    return view


# --- (1) a re-check that finds the connection closed -------------------------------------


def test_a_server_that_dies_after_a_change_notice_takes_its_tools_out_of_the_next_view(
    tmp_path: Path, audit: SQLiteAuditSink, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that sent ``tools/list_changed`` and died before the re-check's listing
    was answered: the re-check only logged "re-check failed", and every view after it
    still offered the server's tools (the prompt promised tools no call could reach)
    until a call found the connection closed. The re-check now marks the connection
    lost as a call does: the log warns and the next view tells the tools unavailable."""
    notify = {
        "name": "notify",
        "description": "A tool.",
        "input_schema": ANY,
        "rewrite": {"list_exit": True},
    }
    server = tools_server(tmp_path, [notify], protocol="legacy")
    registry = Registry()

    async def run() -> tuple[CallOutcome, ToolView]:
        async with connect(registry, server, declare={"notify": Declared("query")}):
            outcome = (await run_call(registry, "notify", audit)).outcome
            return outcome, await view_without(registry, "notify")

    with caplog.at_level(logging.WARNING, logger="veridic"):
        outcome, view = asyncio.run(run())
    assert outcome is CallOutcome.OK  # the server died after the call, at the re-check
    assert "notify" not in view.names()
    status = view.status("notify")
    assert (status.state, status.cause) == ("unavailable", "component")
    assert "the connection to the MCP server is closed" in str(view.capability_section())
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "closed the connection" in logged


# --- (2) a re-check that cannot start ----------------------------------------------------


def test_a_notice_whose_recheck_cannot_start_leaves_later_notices_checked(
    tmp_path: Path,
) -> None:
    # Before: when the connection's task group refused the re-check (the connection was
    # shutting down), the flag "a check is running" stayed set, and every later notice
    # was taken for one to fold into that check, which never ran: no re-check ever again.
    # The flag is reset and the task group's error goes on. Reached through a private
    # method: the SDK delivers no notice to a connection whose tasks have ended.
    server = tools_server(tmp_path, [answering("balance", {"content": []})], protocol="legacy")
    registry = Registry()

    async def run() -> McpConnection:
        async with connect(registry, server, declare={"balance": Declared("query")}) as c:
            return c

    connection = asyncio.run(run())
    with pytest.raises(RuntimeError):
        connection._notice()
    assert connection._checking is False
