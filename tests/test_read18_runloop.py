"""The second read of the run loop's round 18: what the checked prompt is built from, and
whether each road names itself, attacked.

The time is the gateway's fixed ``clock``: no test sleeps or measures time.
"""

from __future__ import annotations

import threading

import pytest
from test_deferred_expiry import HOUR, PAUSED_AT, SYSTEM, at, gateway, make_view, paused
from test_review17_runloop import _resume_approved

from veridic import Composer, SQLiteAuditSink


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
