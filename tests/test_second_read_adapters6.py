"""A second read of the sixth attacker review of the framework adapters and MCP settings.

Each test drives the real framework (a pydantic-ai ``Agent`` on its function model, an
Agents SDK ``Runner`` on a scripted model, a LangChain agent on a scripted chat model)
or veridic's public MCP declarations, as an application following each framework's
documented usage would, and failed on the code before its fix.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

import pytest

from veridic import ProvenanceError, VeridicError, untrusted
from veridic.integrations.mcp import McpServer, http, stdio

TICKET = untrusted("files", source="ticket:7")
_STDIO = stdio("files", sys.executable)


# --- MCP: a server's name is written in code, and the server is one place ---------------------


@pytest.mark.parametrize(
    "made",
    [
        # The run-time refusal is under test: the plugin refuses each statically too.
        lambda: stdio(TICKET, sys.executable),  # type: ignore[veridic-literal]  # see above
        lambda: http(TICKET, "http://127.0.0.1:9/mcp"),  # type: ignore[veridic-literal]  # see above
        lambda: McpServer(TICKET, (sys.executable,)),  # type: ignore[veridic-literal]  # see above
        lambda: dataclasses.replace(_STDIO, name=TICKET),  # type: ignore[veridic-literal]  # see above
    ],
    ids=["stdio", "http", "direct", "replace"],
)
def test_an_mcp_server_name_of_outside_text_is_refused_where_it_is_declared(
    made: Callable[[], McpServer],
) -> None:
    """The name is printed in the capability section ("the MCP server 'files' did not
    start"), and ``McpServer.name`` is typed trusted text: text branded untrusted was kept
    as the name, and refused (if at all) only when a registry was connected."""
    with pytest.raises(ProvenanceError, match=r"MCP server name got untrusted text"):
        made()


@pytest.mark.parametrize(
    "made",
    [
        lambda: McpServer("files"),
        lambda: McpServer("files", (sys.executable,), url="http://127.0.0.1:9/mcp"),
        lambda: dataclasses.replace(http("files", "http://127.0.0.1:9/mcp"), command=("srv",)),
        lambda: dataclasses.replace(stdio("files", sys.executable), command=()),
    ],
    ids=["neither", "both", "replace-both", "replace-neither"],
)
def test_an_mcp_server_is_a_command_or_a_url_never_both_nor_neither(
    made: Callable[[], McpServer],
) -> None:
    """A server with a command and a url ran the url and dropped the command unsaid; one
    with neither failed only when connected, with an ``IndexError``."""
    with pytest.raises(VeridicError, match=r"MCP server 'files' .*a command or a url"):
        made()
