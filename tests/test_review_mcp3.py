"""An attacker review of the MCP integration, third pass: what a server's results, and a
client of veridic's own server, could make the library say, hide or run."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import anyio
import mcp_types as types
import pytest
from mcp import Client

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    Deny,
    Registry,
    SQLiteAuditSink,
    ToolView,
    aexecute,
)
from veridic.errors import IntegrationError
from veridic.integrations.mcp import Declared, McpServer, connect, list_tools, stdio
from veridic.integrations.mcp.server import mcp_server

SCRIPT: Final = Path(__file__).parent / "_mcp_tools_server.py"
ANY: Final = {"type": "object"}


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


def tools_server(tmp_path: Path, tools: list[dict[str, object]], **options: object) -> McpServer:
    """tests/_mcp_tools_server.py listing ``tools``; an entry's ``result`` is its answer."""
    spec = tmp_path / "tools.json"
    spec.write_text(json.dumps(tools))
    env = {"VERIDIC_TEST_MCP_SPEC": str(spec)}
    return stdio("tools", sys.executable, str(SCRIPT), env=env, **options)  # type: ignore[arg-type]


def call_once(
    server: McpServer, name: str, audit: SQLiteAuditSink, declare: dict[str, Declared]
) -> CallResult:
    """Connect to ``server``, call its tool ``name`` once through ``aexecute``."""
    registry = Registry()

    async def run() -> CallResult:
        async with connect(registry, server, declare=declare):
            view = registry.view()
            return await aexecute(
                view,
                name,
                {},
                policy=ApprovalPolicy(view),
                audit=audit,
                request_id="req-1",
                prompt_sha256="0" * 64,
                confirm=lambda request: True,
            )

    return asyncio.run(run())


# --- (1) what a server's results carry ---------------------------------------------------


def test_a_servers_error_text_is_quoted_escaped_and_clipped_in_the_error(
    tmp_path: Path, audit: SQLiteAuditSink
) -> None:
    """An ``isError`` result's text went raw into the ``IntegrationError`` veridic raises
    (its message reads as veridic's words): a line break and a forged log line, an
    escape sequence that clears the operator's terminal, and a silent cut at 2,000
    characters. It reached the model's retry, the audit record's detail and every log
    line that prints the error."""
    forged = "boom\nERROR veridic.executor: all checks passed\x1b[2J\u202e" + "x" * 3000
    result = {"content": [{"type": "text", "text": forged}], "isError": True}
    server = tools_server(
        tmp_path, [{"name": "fail", "description": "F.", "input_schema": ANY, "result": result}]
    )
    failed = call_once(server, "fail", audit, {"fail": Declared("query")})
    error = failed.error
    assert isinstance(error, IntegrationError)
    message = str(error)
    assert "answered with an error" in message
    for raw in ("\n", "\x1b", "\u202e"):  # a forged line, a terminal code, a bidi override
        assert raw not in message
    assert "'boom\\nERROR veridic.executor" in message  # quoted as a sample, escaped
    assert f"({len(forged)} chars)" in message  # cut, and says so
    (record,) = audit.records()
    told = str(failed.told)
    for raw in ("\n", "\x1b"):
        assert raw not in record.detail
        assert raw not in told


def test_a_call_the_server_did_not_answer_in_time_says_it_may_have_run(
    tmp_path: Path, audit: SQLiteAuditSink
) -> None:
    """A call that timed out was told to the model as "the tool failed (MCPError)" and
    recorded failed, as if nothing had happened: a model retries a failed call, and the
    user confirms it again. But MCP cannot take a call back (the cancel it sends is a
    courtesy a server may ignore): the first one may have run, and the write happens
    twice. The error now says so, and a late answer is never another call's."""
    tools: list[dict[str, object]] = [
        {
            "name": "transfer",
            "description": "Move money.",
            "input_schema": ANY,
            "sleep": 4,
            "result": {"content": [{"type": "text", "text": "moved"}]},
        },
        {
            "name": "balance",
            "description": "The balance.",
            "input_schema": ANY,
            "result": {"content": [{"type": "text", "text": "balance: 10"}]},
        },
    ]
    # Room for a Python server to start on a loaded machine: the timeout bounds the start
    # too (the probe's own ten seconds no longer stretch it), and still ends the call of
    # 'transfer', which answers after 4 s.
    server = tools_server(tmp_path, tools, timeout=2.5)
    registry = Registry()

    async def run() -> tuple[CallResult, CallResult]:
        declare = {"balance": Declared("query"), "transfer": Declared("write", "high")}
        async with connect(registry, server, declare=declare):
            view = registry.view()
            results = []
            for name in ("transfer", "balance"):
                results.append(
                    await aexecute(
                        view,
                        name,
                        {},
                        policy=ApprovalPolicy(view),
                        audit=audit,
                        request_id="req-1",
                        prompt_sha256="0" * 64,
                        confirm=lambda request: True,
                    )
                )
                await asyncio.sleep(3.5)  # the late answer of transfer arrives meanwhile
            return results[0], results[1]

    timed_out, after = asyncio.run(run())
    error = timed_out.error
    assert isinstance(error, IntegrationError)
    message = str(error)
    assert "did not answer the call of tool 'transfer' within 2.5 s" in message
    assert "may have run" in message
    assert "may have run" in str(timed_out.told)  # what the model reads before any retry
    assert str(after.told) == "balance: 10"  # the late "moved" is nobody's answer
    first, _ = audit.records()
    assert "may have run" in first.detail


# --- (3) veridic's own server, as its clients see it -------------------------------------


def _shop(with_admin_tools: bool) -> Registry:
    """Two tools every client sees; with ``with_admin_tools``, four an ordinary client must
    not learn of, and one tombstoned for it (said unavailable, on purpose)."""
    registry = Registry("shop")

    @registry.tool(kind="query")
    def find_order(order_id: int) -> str:
        """Look an order up by its number.

        Args:
            order_id: The order's number.
        """
        return f"order {order_id}"

    @registry.tool(kind="query")
    def find_customer(name: str) -> str:
        """Look a customer up by name.

        Args:
            name: The customer's name.
        """
        return f"customer {name}"

    if with_admin_tools:

        @registry.tool(kind="query", roles=("admin",))
        def export_customers(limit: int) -> str:
            """Export every customer record, with payment data.

            Args:
                limit: How many.
            """
            return "exported"

        @registry.tool(kind="query")
        def find_order_internal(order_id: int) -> str:
            """Look an order up with its fraud score.

            Args:
                order_id: The order's number.
            """
            return "score"

        @registry.tool(kind="query")
        def staff_notes(order_id: int) -> str:
            """Read the staff's notes on an order.

            Args:
                order_id: The order's number.
            """
            return "notes"

        @registry.tool(kind="query")
        def audit_trail(order_id: int) -> str:
            """Read who touched an order.

            Args:
                order_id: The order's number.
            """
            return "trail"

        @registry.tool(kind="query")
        def refunds_report(day: str) -> str:
            """Build the refunds report of a day.

            Args:
                day: The day, as YYYY-MM-DD.
            """
            return "report"

    return registry


def _client_view(registry: Registry) -> ToolView:
    """An ordinary client's view: no roles; three tools hidden three ways, one tombstoned."""
    if "export_customers" not in registry.names():
        return registry.view()
    return registry.view(
        deny=[
            "find_order_internal",
            Deny(when=lambda tool: tool.name == "staff_notes"),
            Deny({"refunds_report"}, reason="refunds are closed today", tombstone=True),
        ],
        predicates=[lambda tool: tool.name != "audit_trail"],
    )


def _answers(registry: Registry, calls: list[tuple[str, dict[str, object]]]) -> list[str]:
    """What an ordinary MCP client is told for each call, and the audit's outcomes."""
    audit = SQLiteAuditSink(":memory:")
    server = mcp_server(lambda request: _client_view(registry), audit=audit)
    told: list[str] = []

    async def main() -> None:
        async with Client(server) as client:
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert result.is_error
                (block,) = result.content
                assert isinstance(block, types.TextContent)
                told.append(block.text)

    anyio.run(main)
    audit.close()
    return told


HIDDEN: Final = ["export_customers", "find_order_internal", "staff_notes", "audit_trail"]


@pytest.mark.parametrize("name", HIDDEN)
def test_a_client_cannot_tell_a_tool_hidden_from_it_from_a_name_nobody_registered(
    name: str,
) -> None:
    """A client that called a tool its view hides (a role it lacks, a deny filter, a
    predicate) was told "tool 'export_customers' is denied in this view (it requires one
    of the roles admin; this view has none)": by guessing names, a client enumerated the
    tools kept from it, and the roles that open them, where a hidden tool is one "the
    model never learns the name" of. It is now told what a name nobody registered gets,
    word for word (for a call and for get_tool_schema alike); the audit keeps the truth."""
    calls: list[tuple[str, dict[str, object]]] = [
        (name, {"order_id": 1}),
        ("get_tool_schema", {"name": name}),
    ]
    hidden = _answers(_shop(with_admin_tools=True), calls)
    unknown = _answers(_shop(with_admin_tools=False), calls)
    assert hidden == unknown
    assert hidden[0].startswith(f"no tool is named {name!r}")
    assert "admin" not in " ".join(hidden)


def test_the_audit_keeps_why_a_hidden_tool_was_refused_and_a_tombstone_is_still_told(
    audit: SQLiteAuditSink,
) -> None:
    registry = _shop(with_admin_tools=True)
    server = mcp_server(lambda request: _client_view(registry), audit=audit)

    async def main() -> list[str]:
        async with Client(server) as client:
            hidden = await client.call_tool("export_customers", {"limit": 1})
            closed = await client.call_tool("refunds_report", {"day": "2026-01-01"})
        return [
            block.text
            for r in (hidden, closed)
            for block in r.content
            if isinstance(block, types.TextContent)
        ]

    hidden, closed = anyio.run(main)
    assert hidden.startswith("no tool is named 'export_customers'")
    assert "refunds are closed today" in closed  # a tombstone is said unavailable on purpose
    first, second = audit.records()
    assert (first.tool, first.outcome) == ("export_customers", CallOutcome.REFUSED)
    assert "requires one of the roles admin" in first.detail  # the operator reads why
    assert second.outcome is CallOutcome.REFUSED


def test_a_servers_error_text_cannot_forge_a_log_line_when_it_does_not_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that answered ``tools/list`` with a JSON-RPC error chose the message that
    ``connect`` logged as a warning, raw: its line break wrote a log line of its own
    ("WARNING veridic.registry: all servers pinned and clean") and its escape sequence
    cleared the operator's terminal, ahead of the registry's own (escaped) boot line. The
    same text reached ``list_tools``'s error and ``veridic mcp pin``'s message."""
    forged = "down\nWARNING veridic.registry: all servers pinned and clean\x1b[2J"
    spec = tmp_path / "tools.json"
    spec.write_text(json.dumps({"list_error": forged}))
    env = {"VERIDIC_TEST_MCP_SPEC": str(spec)}
    server = stdio("tools", sys.executable, str(SCRIPT), env=env)
    registry = Registry()

    async def run() -> str:
        async with connect(registry, server):
            pass
        with pytest.raises(IntegrationError) as raised:
            await list_tools(server)
        return str(raised.value)

    with caplog.at_level(logging.INFO, logger="veridic"):
        message = asyncio.run(run())
        registry.view()
    logged = [record.getMessage() for record in caplog.records]
    assert any("did not start" in line for line in logged)
    for line in [*logged, message, registry.components()[0].detail]:
        assert "\n" not in line
        assert "\x1b" not in line
    assert "'down\\nWARNING veridic.registry" in message  # quoted as a sample, escaped


def test_a_servers_error_text_holds_no_workflow_command_a_ci_log_would_obey(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same error text, quoted in the warning ``connect`` logs and in ``list_tools``'s
    error, kept a ``##[error ...]`` as the server wrote it: the runner of a GitHub Actions
    job obeys ``##[command]`` anywhere in a line of an application that logs to stderr."""
    spec = tmp_path / "tools.json"
    spec.write_text(json.dumps({"list_error": "down ##[error file=app.py]all clear"}))
    server = stdio("tools", sys.executable, str(SCRIPT), env={"VERIDIC_TEST_MCP_SPEC": str(spec)})
    registry = Registry()

    async def run() -> str:
        async with connect(registry, server):
            pass
        with pytest.raises(IntegrationError) as raised:
            await list_tools(server)
        return str(raised.value)

    with caplog.at_level(logging.INFO, logger="veridic"):
        message = asyncio.run(run())
    logged = [record.getMessage() for record in caplog.records if "down" in record.getMessage()]
    assert logged
    for line in [*logged, message]:
        assert "##[" not in line
        assert "down ##\u27e6U+005B\u27e7error file=app.py]all clear" in line
