"""A server's tools through veridic: pinned on first use, approved and audited like our own.

The server is veridic's own MCP example (``examples/mcp_server_app.py``), started as a
subprocess over stdio, so this file shows both directions. Run from the repository root::

    python examples/mcp_client_app.py

What it shows:

1. trust on first use: the server's tools are recorded as pins (``veridic mcp pin``
   writes the same file from the command line);
2. the tools registered from those pins: the capability section prints the reviewed
   descriptions, and a query runs through ``aexecute`` with its result as untrusted data;
3. the rug pull: a server whose description differs from its pin (here: pins edited as
   if the server had changed) makes that tool unavailable, with the reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import sys
import tempfile
from pathlib import Path

from veridic import ApprovalPolicy, Registry, SQLiteAuditSink, aexecute, provenance
from veridic.integrations.mcp import Declared, Pins, connect, list_tools, stdio

SERVER = stdio("notes", sys.executable, str(Path(__file__).with_name("mcp_server_app.py")))
"""The server as declared in code: ``veridic mcp pin examples.mcp_client_app:SERVER -o FILE``."""

DECLARED = {"list_notes": Declared("query"), "add_note": Declared("write", risk="mid")}
"""Risk is ours: the server's annotations lower nothing."""

PROMPT_SHA256 = hashlib.sha256(b"the prompt the model answered").hexdigest()


async def run(directory: Path) -> list[str]:
    lines: list[str] = []
    pins = Pins.of("notes", await list_tools(SERVER))
    pins.dump(directory / "pins.json")
    lines.append(f"[1] pinned: {', '.join(sorted(pins.tools))}")

    registry = Registry()
    async with connect(registry, SERVER, pins=directory / "pins.json", declare=DECLARED):
        view = registry.view()
        section = str(view.capability_section())
        lines.append(f"[2] exposed: {', '.join(sorted(view.names()))}")
        pinned = "List every note, by number." in section
        lines.append(f"    the section prints the pinned description: {pinned}")
        audit = SQLiteAuditSink(directory / "audit.sqlite3")
        result = await aexecute(
            view,
            "list_notes",
            {},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt_sha256=PROMPT_SHA256,
        )
        value = result.value
        kind = provenance(value).kind if isinstance(value, str) else "none"
        lines.append(f"    list_notes -> {value!r} (provenance {kind})")

    changed = {
        name: dataclasses.replace(tool, description="List the notes.")
        if name == "list_notes"
        else tool
        for name, tool in pins.tools.items()
    }
    Pins("notes", changed).dump(directory / "pins.json")  # as if the server had changed since
    later = Registry()
    async with connect(later, SERVER, pins=directory / "pins.json", declare=DECLARED):
        status = later.view().status("list_notes")
        lines.append(f"[3] list_notes is {status.state}: {status.reason}")
    return lines


def main() -> list[str]:
    with tempfile.TemporaryDirectory() as directory:
        lines = asyncio.run(run(Path(directory)))
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    main()
