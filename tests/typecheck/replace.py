"""dataclasses.replace() builds the object again: its changes are checked as the constructor's.

A Deny reason, a tool hint's title or an MCP server's name is checked where the
object is made; replace() calls __init__ again with the changes, and the run time
cannot tell a plain str from a literal.
"""

import dataclasses
from typing import Final

from veridic import Deny, ToolHints, instruction
from veridic.integrations.mcp import McpServer

REASON: Final = "read-only session"


def changes(subject: str) -> None:
    deny = Deny({"refund"}, reason="denied", tombstone=True)
    # E: [veridic-literal] replace() of Deny() takes trusted text for "reason"
    dataclasses.replace(deny, reason=subject)
    dataclasses.replace(deny, reason=REASON)
    dataclasses.replace(deny, reason=instruction("Refunds are closed today."))
    dataclasses.replace(deny, tombstone=False)
    # E: [veridic-literal] replace() of ToolHints()
    dataclasses.replace(ToolHints(title="Create"), title=subject)
    # E: [veridic-literal] replace() of McpServer()
    dataclasses.replace(McpServer("files"), name=subject)
    dataclasses.replace(McpServer("files"), name="docs")
