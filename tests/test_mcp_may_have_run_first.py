"""An MCP call that may have run says so within the audit record's clipped detail.

The executor keeps the first 200 characters of a failed call's detail; the
MCP client's errors for a call that timed out, lost its connection or sent an
answer the SDK could not read named the server and the tool first, so with
long names (64-character tool names are common) "may have run" fell past the
clip, and a reviewer read only that the call failed.

Each case calls a real server (tests/_mcp_tools_server.py, in a subprocess)
through ``aexecute`` and reads the record the audit keeps.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from test_review_mcp3 import SCRIPT, call_once

from veridic import CallResult, SQLiteAuditSink
from veridic.errors import IntegrationError
from veridic.integrations.mcp import Declared, stdio

TOOL: Final = "reconcile_inventory_counts_against_the_fulfilment_ledger_nightly"
ANSWER: Final = {"content": [{"type": "text", "text": "reconciled"}]}
CASES: Final[dict[str, dict[str, object]]] = {
    "timed out": {"sleep": 6, "result": ANSWER},
    "connection closed": {"exit": True},
    "unreadable answer": {
        "result": {**ANSWER, "structuredContent": {"counted": "all of them"}},
        "output_schema": {
            "type": "object",
            "properties": {"counted": {"type": "integer"}},
            "required": ["counted"],
        },
    },
}


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


def _call(tmp_path: Path, tool: dict[str, object], audit: SQLiteAuditSink) -> CallResult:
    """Connect to a server with the long name that lists ``tool``; call it once, confirmed."""
    spec = tmp_path / "tools.json"
    spec.write_text(json.dumps([tool]))
    server = stdio(
        "warehouse_inventory_and_fulfilment_server",
        sys.executable,
        str(SCRIPT),
        env={"VERIDIC_TEST_MCP_SPEC": str(spec)},
        timeout=3.0,  # room to start on a loaded machine; the 6 s sleep still runs past it
    )
    return call_once(server, TOOL, audit, {TOOL: Declared("write", "mid")})


@pytest.mark.parametrize("case", list(CASES))
def test_may_have_run_is_inside_the_clipped_detail_whatever_the_names(
    tmp_path: Path, audit: SQLiteAuditSink, case: str
) -> None:
    assert len(TOOL) == 64
    tool: dict[str, object] = {"name": TOOL, "description": "Reconcile."}
    tool.update(input_schema={"type": "object"}, **CASES[case])
    failed = _call(tmp_path, tool, audit)
    assert isinstance(failed.error, IntegrationError)
    (record,) = audit.records()
    assert "may have run" in record.detail  # as the executor clipped it
    assert TOOL in str(failed.error)  # still named, after what matters
