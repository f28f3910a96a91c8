"""An MCP call that may have run says so within the audit record's clipped detail.

The executor keeps the first 200 characters of a failed call's detail; the
MCP client's errors for a call that timed out, lost its connection or sent an
answer the SDK could not read named the server and the tool first, so with
long names (64-character tool names are common) "may have run" fell past the
clip, and a reviewer read only that the call failed.
"""

from __future__ import annotations

import pytest

from veridic.integrations.mcp import McpServer
from veridic.integrations.mcp.client import _cut_off, _unanswered, _unreadable
from veridic.provenance import instruction
from veridic.run.executor import _DETAIL_LIMIT

SERVER = McpServer(instruction("warehouse_inventory_and_fulfilment_server"), command=("srv",))
TOOL = "reconcile_inventory_counts_against_the_fulfilment_ledger_nightly"


@pytest.mark.parametrize(
    "error",
    [
        _unanswered(SERVER, TOOL),
        _cut_off(SERVER, TOOL),
        _unreadable(SERVER, TOOL, RuntimeError("structured content does not match")),
    ],
    ids=["timed out", "connection closed", "unreadable answer"],
)
def test_may_have_run_is_inside_the_clipped_detail_whatever_the_names(error: Exception) -> None:
    assert len(TOOL) == 64
    detail = f"{type(error).__name__}: {error}"  # what the executor records, then clips
    assert "may have run" in detail[:_DETAIL_LIMIT]
    assert TOOL in str(error)  # still named, after what matters
