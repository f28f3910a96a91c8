"""A tool call id of a megabyte is refused before the call runs.

A call's id comes from the model's answer (or a proxy in front of it) and is
kept whole: in the conversation, in every audit record of the call, in a paused
run. The store cannot cut it (a paused run's calls are found by their ids, and a
cut id would not match), and a record cannot refuse it (the call has run by
then), so the gateway refuses it where it refuses an empty or repeated id.
"""

from __future__ import annotations

import pytest

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
    instruction,
)
from veridic.run._sending import CALL_ID_LIMIT


def _registry(ran: list[int]) -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(order_id)
        return f"order {order_id}: lost"

    return registry


def _run(call_id: str, ran: list[int], audit: SQLiteAuditSink) -> object:
    view = _registry(ran).view()
    script: list[dict[str, object]] = [
        {"tool_calls": [(call_id, "get_order", '{"order_id": 1}')], "stop_reason": "tool_use"},
        {"text": "It is lost."},
    ]
    gateway = ModelGateway(ScriptedProvider(script), audit=audit)
    composer = Composer().system(instruction("You help."), view.capability_section())
    composer.user("Where is order 1?")
    return gateway.run(composer, view, policy=ApprovalPolicy(view), request_id="r1")


def test_a_megabyte_call_id_is_refused_before_the_call_runs() -> None:
    ran: list[int] = []
    audit = SQLiteAuditSink()
    with pytest.raises(VeridicError, match="id of 1000000 characters"):
        _run("c" * 1_000_000, ran, audit)
    assert ran == []
    assert audit.records("r1") == ()
    assert len(audit.model_replies("r1")) == 1  # the answer is on record


def test_a_call_id_up_to_the_limit_runs() -> None:
    ran: list[int] = []
    _run("c" * CALL_ID_LIMIT, ran, SQLiteAuditSink())
    assert ran == [1]
