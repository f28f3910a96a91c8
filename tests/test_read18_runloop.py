"""The second read of the run loop's round 18: what the checked prompt is built from, and
whether each road names itself, attacked.

The time is the gateway's fixed ``clock``: no test sleeps or measures time.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from test_deferred_expiry import CALLS, HOUR, PAUSED_AT, SYSTEM, at, gateway, make_view, paused
from test_review17_runloop import _resume_approved

from veridic import (
    ApprovalExpiredError,
    ApprovalMode,
    ApprovalPolicy,
    Composer,
    Registry,
    SQLiteAuditSink,
    ToolView,
)


class _Locked(Composer):
    """A composer of the application's own, holding what cannot be copied (a lock)."""

    __slots__ = ("lock",)

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_composer_holding_a_lock_resumes(asynchronous: bool) -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    composer = _Locked().system(SYSTEM)
    resuming = gateway(
        [{"text": "Refunded."}], audit, at(PAUSED_AT + HOUR), asynchronous=asynchronous
    )
    result = _resume_approved(resuming, run, composer, view, asynchronous=asynchronous)
    assert ran == ["refund 42", "get_order 43"]
    assert result.text == "Refunded."


def _async_refunds(ran: list[str]) -> ToolView:
    """The support agent's tools, its refund an async handler."""
    agent = Registry("support")

    @agent.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(f"get_order {order_id}")
        return f"order {order_id}: lost in transit"

    @agent.tool(kind="write")
    async def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(f"refund {order_id}")
        return "refunded"

    return agent.view()


def test_an_expired_paused_run_with_an_async_call_resumed_blocking_says_it_expired() -> None:
    # The road's refusal of an async call came before the answers' age: the user was told
    # to run the calls with arun_tools(), and only then learnt that nothing could run. A
    # blocking resume cannot record an async tool's call denied: it records nothing, says
    # so, and aresume() of the same paused run records them.
    audit = SQLiteAuditSink()
    ran: list[str] = []
    view = _async_refunds(ran)
    policy = ApprovalPolicy(view)
    composer = Composer().system(SYSTEM).user("My parcel 42 is lost, refund it.")
    pausing = gateway([CALLS], audit, at(PAUSED_AT), asynchronous=True)
    run = asyncio.run(pausing.arun(composer, view, policy=policy, request_id="req-1", defer=True))
    assert run.paused is not None
    later = at(PAUSED_AT + 25 * HOUR)
    answers = {approval.digest: True for approval in run.paused.approvals}
    again = Composer().system(SYSTEM)
    with pytest.raises(ApprovalExpiredError) as raised:
        gateway([], audit, later).resume(run.paused, again, view, policy=policy, answers=answers)
    assert "await gateway.aresume(...)" in " ".join(raised.value.__notes__)
    assert [r.call_id for r in audit.records("req-1")] == ["c1"]  # nothing recorded
    assert again.conversation().turns == ()
    resuming = gateway([], audit, later, asynchronous=True)
    with pytest.raises(ApprovalExpiredError):
        asyncio.run(resuming.aresume(run.paused, again, view, policy=policy, answers=answers))
    assert ran == ["get_order 42"]
    waited = [r for r in audit.records("req-1") if r.call_id in {"c2", "c3"}]
    assert [(r.call_id, r.approval) for r in waited] == [
        ("c2", ApprovalMode.DENIED),
        ("c3", ApprovalMode.DENIED),
    ]
