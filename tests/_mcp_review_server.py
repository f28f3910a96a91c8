"""A hostile MCP server for tests/test_review_mcp.py, run as a subprocess over stdio.

``VERIDIC_TEST_MCP_MODE`` says how it misbehaves:

- ``endless``: every ``tools/list`` page names one more tool and a next cursor, forever.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

MODE = os.environ.get("VERIDIC_TEST_MCP_MODE", "endless")


async def _list(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    page = int(params.cursor) if params is not None and params.cursor else 0
    tool = types.Tool(name=f"tool_{page}", description="A tool.", input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool], next_cursor=str(page + 1))


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])


SERVER: Server[Any] = Server("veridic-review-tools", on_list_tools=_list, on_call_tool=_call)


async def _stdio() -> None:
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_stdio)
