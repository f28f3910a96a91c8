"""The MCP SDK's own log records of a veridic connection quote nothing a terminal or a CI
runner would obey, against a real server in a subprocess, with the log at ``DEBUG``.

The SDK logs what a server sent on its own loggers: a response to an id nobody asked
(its id quoted with ``repr``, ``##[error]`` and all) at ``DEBUG``, and a line it could not
parse at ``ERROR`` with a traceback whose last line quotes the line's start.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Final

import pytest

from veridic import ApprovalPolicy, Registry, SQLiteAuditSink, aexecute
from veridic.integrations.mcp import Declared, connect, stdio
from veridic.integrations.mcp._sdk_logs import SDK_LOGGERS

SCRIPT: Final = Path(__file__).parent / "_mcp_tools_server.py"
QUERY: Final = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
# Two lines in place of an answer: a response to an id nobody asked, and a line that is
# not JSON, each with a workflow command, an escape sequence and a bidi override in it.
FORGED: Final = (
    '{"jsonrpc":"2.0","id":"##[error]late \\u001b[2J","result":{}}\n'
    "##[error]forged \x1b[2J \u202e not json"
)


def _obeyed(text: str) -> list[str]:
    """The lines of ``text`` a CI runner or a terminal would obey, or that hide text."""
    return [
        line
        for line in text.splitlines()
        if "##[" in line
        or line.lstrip().startswith("::")
        or any(not char.isprintable() for char in line)
    ]


def test_the_sdks_records_of_a_connection_are_inert_lines_at_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = tmp_path / "tools.json"
    wire = {"head": FORGED, "piece": "", "times": 0, "tail": ""}
    tools = [
        {"name": "forged", "description": "The forged tool.", "input_schema": QUERY, "wire": wire}
    ]
    spec.write_text(json.dumps(tools))
    server = stdio(
        "tools",
        sys.executable,
        str(SCRIPT),
        env={"VERIDIC_TEST_MCP_SPEC": str(spec)},
        timeout=5.0,
        result_limit=1000,
        describe_limit=1000,
    )

    async def run() -> None:
        registry = Registry()
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare={"forged": Declared("query")}):
                view = registry.view()
                called = await aexecute(
                    view,
                    "forged",
                    {"q": "x"},
                    policy=ApprovalPolicy(view),
                    audit=sink,
                    request_id="req-1",
                    prompt_sha256="0" * 64,
                )
                assert called.error is not None

    with caplog.at_level(logging.DEBUG):
        asyncio.run(run())
    sdk = [record for record in caplog.records if record.name in SDK_LOGGERS]
    written = [(record.name, logging.Formatter().format(record)) for record in sdk]
    said = "\n".join(text for _, text in written)
    assert "Failed to parse JSONRPC message from server" in said  # the SDK's words are kept
    assert "forged" in said  # and what it quoted, escaped
    assert "dropping response for unknown/late request id" in said
    for name, text in written:
        assert not _obeyed(text), (name, _obeyed(text))
