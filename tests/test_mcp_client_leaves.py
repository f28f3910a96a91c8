"""An MCP client that leaves while veridic's server waits for its answer to an approval.

The call that waited did not run, and its ``DENIED`` record must be in the audit store:
the client closing stdin ended the server's session, which cancelled the call; its record
was handed to a write left running, and the event loop stopped under it, so the record
was logged as not written ("CancelledError: the event loop stopped first") and, with a
store that answers after a moment (one over the network), was lost from the store.

Real parts: the example application, and a server script using :func:`serve`, each as a
subprocess spoken to in raw JSON-RPC over its stdio.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Final

import pytest

from veridic import ApprovalMode, CallOutcome, SQLiteAuditSink

ROOT: Final = Path(__file__).resolve().parents[1]
LOST: Final = "could not be written"

# A server over stdio with one high-risk tool, whose store answers after a moment, as one
# over the network does: the write is still under way when the session ends.
_SLOW_SERVER: Final = """
import asyncio, sys
from veridic import Registry, SQLiteAuditSink
from veridic.integrations.mcp.server import serve

registry = Registry("notes")

@registry.tool(kind="write", irreversible=True)
def delete_note(number: int) -> str:
    '''Delete a note for good; this cannot be undone.

    Args:
        number: The note's number.
    '''
    return "deleted"

class SlowStore:
    def __init__(self, path):
        self.inner = SQLiteAuditSink(path)

    async def awrite(self, record, /):
        for _ in range(20):
            await asyncio.sleep(0.01)
        await self.inner.awrite(record)

store = SlowStore(sys.argv[1])
asyncio.run(serve(lambda request: registry.view(), audit=store, name="notes"))
"""


# The same server, whose store never answers (a network store behind a partition); the wait
# for its writes shortened from the default, so the test does not sit through it.
_HUNG_SERVER: Final = _SLOW_SERVER.replace(
    """        for _ in range(20):
            await asyncio.sleep(0.01)
""",
    """        await asyncio.Event().wait()
""",
).replace(
    "store = SlowStore",
    "import veridic.integrations.mcp.server as served\n"
    "served._SETTLE_WAIT = 0.2\n"
    "store = SlowStore",
)


class _Client:
    """A client of MCP 2025-06-18 (which asks with ``elicitation/create``), in raw JSON-RPC."""

    def __init__(self, command: list[str]) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "leaves", "version": "1"},
                },
            }
        )
        assert self.receive()["result"]["protocolVersion"] == "2025-06-18"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, object]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write((json.dumps(message) + "\n").encode())
        stdin.flush()

    def receive(self) -> dict[str, Any]:
        stdout: IO[bytes] | None = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], 60)  # a guard against a hang, not a time
        assert ready, "the server sent nothing"
        message: dict[str, Any] = json.loads(stdout.readline())
        return message

    def asked_then_left(self) -> str:
        """Call the high-risk tool, see the question, close stdin: the server's stderr."""
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "delete_note", "arguments": {"number": 1}},
            }
        )
        assert self.receive().get("method") == "elicitation/create"
        try:
            _, stderr = self.process.communicate(timeout=60)  # closes stdin, reads to the end
        except subprocess.TimeoutExpired:
            self.process.kill()  # a server that never ends would outlive the test
            self.process.communicate()
            raise
        return stderr.decode(errors="replace")


def _records(path: Path) -> list[tuple[str, ApprovalMode, CallOutcome]]:
    with SQLiteAuditSink(path) as sink:
        return [(r.tool, r.approval, r.outcome) for r in sink.records()]


def test_the_examples_denied_record_is_written_when_the_client_leaves_mid_question(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.sqlite3"
    app = ROOT / "examples" / "mcp_server_app.py"
    said = _Client([sys.executable, str(app), "--audit", str(audit)]).asked_then_left()
    assert LOST not in said
    assert _records(audit) == [("delete_note", ApprovalMode.DENIED, CallOutcome.DENIED)]


@pytest.mark.parametrize("calls", [1, 3])
def test_a_slow_stores_denied_records_are_written_before_serve_returns(
    tmp_path: Path, calls: int
) -> None:
    audit = tmp_path / "audit.sqlite3"
    script = tmp_path / "slow_server.py"
    script.write_text(_SLOW_SERVER)
    client = _Client([sys.executable, str(script), str(audit)])
    for number in range(2, calls + 1):  # questions that wait beside the last one
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 100 + number,
                "method": "tools/call",
                "params": {"name": "delete_note", "arguments": {"number": number}},
            }
        )
        assert client.receive().get("method") == "elicitation/create"
    said = client.asked_then_left()
    assert LOST not in said
    denied = ("delete_note", ApprovalMode.DENIED, CallOutcome.DENIED)
    assert _records(audit) == [denied] * calls


def test_serve_returns_when_a_denied_records_write_hangs_and_the_record_is_logged(
    tmp_path: Path,
) -> None:
    """``serve`` waited for the writes of the records left on their way without a bound: a
    store that never answered kept the server running, without a word, after its client
    had gone. It now waits a bounded time, says how many records are still on their way,
    and returns: the loop stops under them, and each is logged with its record."""
    script = tmp_path / "hung_server.py"
    script.write_text(_HUNG_SERVER)
    said = _Client([sys.executable, str(script), str(tmp_path / "audit.sqlite3")]).asked_then_left()
    assert "1 audit record still being written" in said
    assert LOST in said
    assert "delete_note" in said
