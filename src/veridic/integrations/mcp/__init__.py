"""MCP in both directions, with the ``mcp`` SDK (extra ``veridic[mcp]``).

A server's tools as pinned external tools of a registry component
(:func:`connect`, :class:`Pins`, ``veridic mcp pin``), and a view served over
MCP (``veridic.integrations.mcp.server``).

>>> server = stdio("github", "github-mcp-server", "stdio")
>>> server
McpServer('github', 'github-mcp-server stdio')
"""

from veridic.integrations.mcp._pins import PinChange, PinnedTool, Pins, render_changes
from veridic.integrations.mcp.client import (
    Declared,
    McpConnection,
    McpServer,
    connect,
    http,
    list_tools,
    stdio,
)

__all__ = [
    "Declared",
    "McpConnection",
    "McpServer",
    "PinChange",
    "PinnedTool",
    "Pins",
    "connect",
    "http",
    "list_tools",
    "render_changes",
    "stdio",
]
