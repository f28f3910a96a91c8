"""Second read of deferred approvals that expire, and of what a resume checks before any
waiting call runs.

A resume ran the approved calls first and only then sent, so a composer or view the send
path refuses (a capability section of another view, a client of the other kind) was refused
after a write had run and the paused run was spent. The time is the gateway's fixed
``clock``: no test sleeps or measures time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from test_deferred_expiry import (
    HOUR,
    PAUSED_AT,
    SYSTEM,
    at,
    gateway,
    make_view,
    paused,
    resume,
)

from veridic import (
    ApprovalExpiredError,
    ApprovalPolicy,
    Composer,
    PausedRun,
    Registry,
    SQLiteAuditSink,
    ToolCouplingError,
    VeridicError,
)


def _other_section() -> Composer:
    """A composer whose system part holds the capability section of another view."""
    other = Registry()

    @other.tool(kind="query")
    def weather(city: str) -> str:
        """Tell the weather.

        Args:
            city: The city.
        """
        return "sunny"

    return Composer().system(SYSTEM, other.view().capability_section())


def _aresume(run: PausedRun, audit: SQLiteAuditSink, composer: Composer, ran: list[str]) -> None:
    view = make_view(ran)
    asyncio.run(
        gateway([{"text": "Refunded."}], audit, at(PAUSED_AT + HOUR), asynchronous=True).aresume(
            run,
            composer,
            view,
            policy=ApprovalPolicy(view),
            answers={approval.digest: True for approval in run.approvals},
        )
    )


def test_resume_refuses_another_views_section_before_any_waiting_call_runs() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    composer = _other_section()
    with pytest.raises(ToolCouplingError, match="another view"):
        resume(run, audit, PAUSED_AT + HOUR, ran=ran, composer=composer)
    assert ran == []
    assert composer.conversation().turns == ()  # left as given, to resume with again
    # Nothing was recorded of the waiting calls: the paused run resumes with a right composer.
    resume(run, audit, PAUSED_AT + HOUR, ran=ran)
    assert ran == ["refund 42", "get_order 43"]


def test_aresume_refuses_another_views_section_before_any_waiting_call_runs() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    with pytest.raises(ToolCouplingError, match="another view"):
        _aresume(run, audit, _other_section(), ran)
    assert ran == []
    _aresume(run, audit, Composer().system(SYSTEM), ran)
    assert ran == ["refund 42", "get_order 43"]


def test_an_expired_resume_with_a_refused_composer_says_first_that_it_expired() -> None:
    # The fourteenth round's order: the answers' age is told first (nothing would run
    # anyway), the waiting calls are recorded denied as expired, and the refusal the next
    # send would meet is a note on the expiry, to mend before asking the user anew.
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    with pytest.raises(ApprovalExpiredError) as caught:
        resume(run, audit, PAUSED_AT + 30 * HOUR, ran=ran, composer=_other_section())
    assert ran == []
    assert any("ToolCouplingError" in note for note in caught.value.__notes__)
    waiting = [r for r in audit.records("req-1") if r.call_id in {"c2", "c3"}]
    assert waiting
    assert all(r.outcome != "ok" for r in waiting)


def test_resume_with_a_client_of_the_other_kind_runs_nothing() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    with pytest.raises(VeridicError, match="async client"):
        gateway([{"text": "Refunded."}], audit, at(PAUSED_AT + HOUR), asynchronous=True).resume(
            run,
            Composer().system(SYSTEM),
            view,
            policy=ApprovalPolicy(view),
            answers={approval.digest: True for approval in run.approvals},
        )
    assert ran == []


@pytest.mark.parametrize("reading", [1e12, 1e300])
def test_a_clock_past_the_years_a_time_can_hold_is_refused_in_words(reading: float) -> None:
    # Seconds a record keeps (finite, not negative) that no datetime holds: a raw ValueError
    # ("year 33658 is out of range") said nothing of the clock.
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    with pytest.raises(VeridicError, match=r"clock") as raised:
        resume(run, audit, reading, ran=ran)
    assert not isinstance(raised.value, ApprovalExpiredError)
    assert "ModelGateway(clock=" in str(raised.value)
    assert ran == []


def test_a_run_paused_again_by_a_resume_is_dated_by_that_resume() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    later = PAUSED_AT + 20 * HOUR
    again = gateway([], audit, at(later)).resume(
        run,
        Composer().system(SYSTEM),
        view,
        policy=ApprovalPolicy(view),
        answers={},  # nobody answered yet: asked anew, in a paused run dated now
    )
    assert again.paused is not None
    assert again.paused.paused_at == datetime.fromtimestamp(later, UTC)
    # Its answers hold from the new pause: 10 hours later is within a day of it.
    resume(again.paused, audit, later + 10 * HOUR, ran=ran)
    assert ran == ["refund 42", "get_order 43"]


def test_a_paused_run_claimed_from_the_store_keeps_its_time() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    audit.save_paused(run)
    claimed = audit.claim_paused("req-1")
    assert claimed is not None
    assert claimed.paused_at == run.paused_at
    with pytest.raises(ApprovalExpiredError):
        resume(claimed, audit, PAUSED_AT + 25 * HOUR, ran=[])


def test_a_paused_at_in_any_zone_is_the_same_moment_and_digest() -> None:
    # A time built in code in a zone with summer time (2025-06-15 17:06:40 in Oslo is
    # 15:06:40 UTC) is the moment it names, kept and digested in UTC.
    audit = SQLiteAuditSink()
    run = paused(audit)
    assert run.paused_at is not None
    oslo = run.paused_at.astimezone(ZoneInfo("Europe/Oslo"))
    assert oslo.utcoffset() == timedelta(hours=2)
    zoned = dataclasses.replace(run, paused_at=oslo)
    assert zoned.to_json() == run.to_json()  # kept in UTC: the same digests, the same answers
    ran: list[str] = []
    resume(zoned, audit, PAUSED_AT + 23 * HOUR, ran=ran)
    assert ran == ["refund 42", "get_order 43"]
