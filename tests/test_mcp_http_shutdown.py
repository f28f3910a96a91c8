"""An MCP server over streamable HTTP that shuts down while a call's record is on its way.

A call waiting for the user's answer when the host stops the server is cancelled, and its
``DENIED`` record is handed to a write left running. :func:`~veridic.integrations.mcp.server.serve`
(stdio) waited for such writes before returning; over HTTP nothing did: the server's event
loop stopped under the write, and the record was logged as not written ("could not be
written") and, with a store that answers after a moment, was lost from the store.

Real parts: a server script serving ``mcp_server(...).streamable_http_app()`` with uvicorn,
as a subprocess, stopped with SIGINT as a host stops it; a raw HTTP client (httpx).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

import httpx

from veridic import ApprovalMode, CallOutcome, SQLiteAuditSink

ROOT: Final = Path(__file__).resolve().parents[1]
LOST: Final = "could not be written"

_SLOW_HTTP_SERVER: Final = """
import asyncio, socket, sys
from contextlib import asynccontextmanager
import uvicorn
from veridic import Registry, SQLiteAuditSink
from veridic.integrations.mcp.server import mcp_server

registry = Registry("notes")

@registry.tool(kind="write", irreversible=True)
def delete_note(number: int) -> str:
    '''Delete a note for good; this cannot be undone.

    Args:
        number: The note's number.
    '''
    return "deleted"

ending = asyncio.Event()  # set once the server's lifespan has begun to end

class SlowStore:
    '''Takes a record only after the server has begun to end, and a moment more: a write
    the server's end does not wait for is still running when the event loop stops, however
    long the host took to get there.'''

    def __init__(self, path):
        self.inner = SQLiteAuditSink(path)

    async def awrite(self, record, /):
        await ending.wait()
        await asyncio.sleep(1)
        await self.inner.awrite(record)

server = mcp_server(lambda request: registry.view(), audit=SlowStore(sys.argv[1]), name="notes")
veridics = server.lifespan

@asynccontextmanager
async def lifespan(app):
    async with veridics(app) as state:
        try:
            yield state
        finally:
            ending.set()  # the sessions are gone; veridic's lifespan ends next

server.lifespan = lifespan
listening = socket.socket()
listening.bind(("127.0.0.1", 0))
listening.listen()
print(listening.getsockname()[1], flush=True)  # a port the system chose: no race for it
config = uvicorn.Config(
    server.streamable_http_app(), log_level="warning", timeout_graceful_shutdown=1
)
uvicorn.Server(config).run(sockets=[listening])
"""


def _initialize(client: httpx.Client, url: str) -> dict[str, str]:
    headers = {"Accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "stops", "version": "1"},
        },
    }
    answer = client.post(url, json=hello, headers=headers)
    answer.raise_for_status()
    headers["mcp-session-id"] = answer.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-06-18"
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    client.post(url, json=initialized, headers=headers).raise_for_status()
    return headers


def test_a_denied_record_on_its_way_is_written_when_an_http_server_shuts_down(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.sqlite3"
    script = tmp_path / "slow_http_server.py"
    script.write_text(_SLOW_HTTP_SERVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    process = subprocess.Popen(
        [sys.executable, str(script), str(audit)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())  # listening: a request waits in its backlog
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=60) as client:
            headers = _initialize(client, url)
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "delete_note", "arguments": {"number": 1}},
            }
            with client.stream("POST", url, json=call, headers=headers) as events:
                asked = next(
                    json.loads(line.removeprefix("data:"))
                    for line in events.iter_lines()
                    if line.startswith("data:")
                )
                assert asked.get("method") == "elicitation/create"
                process.send_signal(signal.SIGINT)  # the host stops the server
                _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()  # a server that never ends would outlive the test
            process.communicate()
    said = stderr.decode(errors="replace")
    assert LOST not in said
    with SQLiteAuditSink(audit) as sink:
        kept = [(r.tool, r.approval, r.outcome) for r in sink.records()]
    assert kept == [("delete_note", ApprovalMode.DENIED, CallOutcome.DENIED)], said
