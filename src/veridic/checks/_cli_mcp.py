"""``veridic mcp pin``: an MCP server's tools, recorded on first use and compared after.

Its target is a server declared in code, not a registry, so it is looked up
here with its own messages; importing the module still goes through the guard
every target's import does (``_cli_target._import``), and a target without
``:ATTR`` is told the module's servers as a registry command's is told its
registries (``_cli_target._what_to_name``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Final

from veridic._counted import counted
from veridic.checks._cli_config import _Config
from veridic.checks._cli_report import _Item, _Report, _UsageError
from veridic.checks._cli_target import _import, _Targets, _what_to_name
from veridic.checks._cli_write import _write_output
from veridic.errors import VeridicError
from veridic.integrations.mcp import McpServer, Pins, render_changes
from veridic.integrations.mcp import list_tools as list_mcp_tools
from veridic.integrations.mcp._pins import _unseen


def _run_mcp_pin(args: argparse.Namespace, config: _Config) -> _Report:
    """``veridic mcp pin``: trust on first use, reviewed like the manifest.

    ``-o`` records every tool the server lists now; review the file and commit
    it, then pass it to ``connect(pins=...)``. ``--check`` lists every
    difference (a changed description, schema or annotations, a new or
    vanished tool) as a finding with the Markdown table of old and new: the
    rug pull of a server that rewrites a tool after it was approved.
    """
    report = _Report("mcp pin", args.target)
    server = _load_server(args.target)
    try:
        listed = asyncio.run(list_mcp_tools(server))
    except VeridicError as error:
        raise _UsageError(f"{error}; fix the server or its command, then run again") from error
    now = Pins.of(server.name, listed)
    if args.output is not None:
        _write_pins(now, args.output)
        tools = counted(len(now.tools), "tool")
        report.notes.append(f"recorded {tools} of {server!r} in {args.output}")
        report.items.extend(_hidden_text(now, str(args.output)))
        return report
    try:
        recorded = Pins.load(args.check)
    except VeridicError as error:
        raise _UsageError(str(error)) from error
    changes = recorded.compare(listed)
    for change in changes:
        report.items.append(
            _Item(
                "error",
                f"mcp-{change.kind}",
                str(change.reason),
                file=str(args.check),
                subject=change.tool,
                data=(("parts", list(change.parts)),),
            )
        )
    diff = render_changes(server.name, changes)
    report.extra["diff"] = diff
    if changes:
        report.notes.extend(diff.rstrip().split("\n"))
    return report


def _hidden_text(pins: Pins, file: str) -> list[_Item]:
    """A warning for each recorded tool holding characters a reader cannot see.

    The file writes them as ``\\u`` escapes, which a reviewer may take for noise; a
    pinned description reaches the capability section as instruction, hidden words
    (Unicode tag characters, which models read) included. The warning shows the
    description with each such character as ``⟦U+XXXX⟧``.
    """
    return [
        _Item(
            "warning",
            "mcp-hidden-text",
            f"tool {name!r} holds {counted(hidden, 'character')} a reader cannot see in its "
            "description, input schema or annotations "
            "(written in the file as \\u escapes, shown here as codes): a pinned description "
            "reaches the capability section as instruction, hidden words included; read "
            "them before committing the pins, or do not pin the tool",
            file=file,
            subject=name,
            text=tool.description,
        )
        for name, tool in pins.tools.items()
        if (hidden := _unseen(tool))
    ]


_SERVER: Final = "an McpServer (veridic.integrations.mcp.stdio(...) or http(...))"
_SERVERS: Final = _Targets(
    (McpServer,), "the McpServer to pin", "veridic mcp pin myapp.servers:server"
)
"""The targets of ``veridic mcp pin``: a target without ``:ATTR`` is told the module's servers."""


def _write_pins(pins: Pins, path: Path) -> None:
    """Write the pins file as ``manifest -o`` writes its file: its folder made, a new file
    renamed into place (never through a link), a path that cannot be written a usage error
    (not a traceback)."""
    _write_output(path, pins.dumps())


def _load_server(spec: str) -> McpServer:
    """``MODULE:ATTR`` naming an MCP server declared in code."""
    module_name, sep, attr_path = spec.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if not sep or not module_name or not attr_path:
        raise _UsageError(
            f"target {spec!r} is not MODULE:ATTR: {_what_to_name(module_name, _SERVERS)}"
        )
    obj: object = _import(module_name)
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise _UsageError(f"{spec}: {module_name} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, McpServer):
        raise _UsageError(f"{spec} is a {type(obj).__name__}, not {_SERVER}")
    return obj
