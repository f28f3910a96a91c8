"""MCP in both directions, with the ``mcp`` SDK (extra ``veridic[mcp]``).

A server's tools as pinned external tools of a registry component
(:func:`connect`, :class:`Pins`, ``veridic mcp pin``; ``client``), and a view
served over MCP with approvals through elicitation (:func:`mcp_server`,
:func:`serve`; ``server``).

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
from veridic.integrations.mcp.server import McpRequest, mcp_server, serve

__all__ = [
    "Declared",
    "McpConnection",
    "McpRequest",
    "McpServer",
    "PinChange",
    "PinnedTool",
    "Pins",
    "connect",
    "http",
    "list_tools",
    "mcp_server",
    "render_changes",
    "serve",
    "stdio",
]
