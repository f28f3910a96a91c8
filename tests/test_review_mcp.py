"""An attacker review of the MCP integration, second pass: what a server or a client
the application does not control could make the library do or hide."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext, ElicitationFnT

from veridic import ApprovalMode, CallOutcome, Registry, SQLiteAuditSink, ToolView
from veridic.errors import IntegrationError
from veridic.integrations.mcp import McpServer, connect, list_tools, stdio
from veridic.integrations.mcp.server import McpRequest, mcp_server

MODES = ["auto", "legacy"]


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


def answering(approve: bool, asked: list[types.ElicitRequestFormParams]) -> ElicitationFnT:
    async def callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


class Files:
    """A tool whose default the model can leave out: what runs is not what was sent."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.removed: list[tuple[str, bool]] = []

        @self.registry.tool(kind="write", risk="mid")
        def remove(path: str, recursive: bool = True) -> str:
            """Remove a path.

            Args:
                path: The path to remove.
                recursive: Remove a directory with everything in it.
            """
            self.removed.append((path, recursive))
            return f"removed {path}"

    def view(self, request: McpRequest | None = None) -> ToolView:
        return self.registry.view()


@pytest.mark.parametrize("mode", MODES)
def test_the_approval_form_shows_the_arguments_that_run_defaults_included(
    audit: SQLiteAuditSink, mode: str
) -> None:
    """The form showed the arguments as the client sent them: a call that left out
    ``recursive`` was put to the user as ``{"path": "/srv/data"}`` and ran with
    ``recursive=True``, a default the user never saw."""
    files = Files()
    asked: list[types.ElicitRequestFormParams] = []

    async def main() -> None:
        async with Client(
            mcp_server(files.view, audit=audit),
            mode=mode,
            elicitation_callback=answering(True, asked),
        ) as client:
            result = await client.call_tool("remove", {"path": "/srv/data"})
        assert not result.is_error

    anyio.run(main)
    (question,) = asked
    assert '"recursive": true' in question.message
    assert files.removed == [("/srv/data", True)]
    (record,) = audit.records()
    assert (record.approval, record.outcome) == (ApprovalMode.USER_CONFIRMED, CallOutcome.OK)


# --- the client: a server the application does not control ------------------------------

HOSTILE = Path(__file__).parent / "_mcp_review_server.py"


def hostile(mode: str) -> McpServer:
    return stdio("hostile", sys.executable, str(HOSTILE), env={"VERIDIC_TEST_MCP_MODE": mode})


def test_a_listing_that_never_ends_is_refused_not_cut_short() -> None:
    """``tools/list`` stopped after 100 pages and kept what it had, without a word: a
    server whose cursor never ends had its first 100 tools recorded by ``veridic mcp
    pin`` and registered by ``connect`` as if they were the whole listing."""
    registry = Registry()

    async def run() -> None:
        async with connect(registry, hostile("endless")):
            pass

    with pytest.raises(IntegrationError, match="pages") as raised:
        asyncio.run(list_tools(hostile("endless")))
    assert "'hostile'" in str(raised.value)
    with pytest.raises(IntegrationError, match="pages"):
        asyncio.run(run())
    assert not any(name.startswith("tool_") for name in registry.names())
