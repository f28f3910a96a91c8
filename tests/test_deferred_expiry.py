"""Deferred approvals that expire: a paused run records when it paused, and an answer that
comes later than the policy's bound (or from a paused run dated in the future) runs nothing.

The time comes from the gateway's ``clock``, fixed here: no test sleeps or measures time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from _paused_formats import as_format_5
from _support_agent import registry as support_registry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalDeniedError,
    ApprovalExpiredError,
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    Composer,
    ModelGateway,
    PausedRun,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)

SYSTEM = instruction("You are the support agent of Acme.")
PAUSED_AT = 1_750_000_000.0  # 2025-06-15T15:06:40Z, a whole second
HOUR = 3600.0

CALLS = {
    "tool_calls": [
        ("c1", "get_order", '{"order_id": 42}'),
        ("c2", "refund", '{"order_id": 42}'),
        ("c3", "get_order", '{"order_id": 43}'),
    ],
    "usage": {"input_tokens": 100, "output_tokens": 20},
}
_requests = itertools.count()


def make_view(ran: list[str]) -> ToolView:
    """The support agent's tools (a lookup and a refund), each call noted in ``ran``."""
    return support_registry(ran).view()


def at(seconds: float) -> Callable[[], float]:
    """A clock that always says ``seconds`` since the epoch."""
    return lambda: seconds


def gateway(
    script: Sequence[Mapping[str, object]],
    audit: SQLiteAuditSink,
    clock: Callable[[], float],
    *,
    asynchronous: bool = False,
) -> ModelGateway:
    return ModelGateway(
        ScriptedProvider(script, asynchronous=asynchronous), audit=audit, clock=clock
    )


def paused(audit: SQLiteAuditSink, when: float = PAUSED_AT, request_id: str = "req-1") -> PausedRun:
    ran: list[str] = []
    view = make_view(ran)
    composer = Composer().system(SYSTEM).user("My parcel 42 is lost, refund it.")
    result = gateway([CALLS], audit, at(when)).run(
        composer, view, policy=ApprovalPolicy(view), request_id=request_id, defer=True
    )
    assert result.paused is not None
    assert ran == ["get_order 42"]
    return result.paused


def resume(
    run: PausedRun,
    audit: SQLiteAuditSink,
    when: float,
    *,
    ran: list[str],
    policy: Callable[[ToolView], ApprovalPolicy] = ApprovalPolicy,
    composer: Composer | None = None,
) -> object:
    view = make_view(ran)
    answers = {approval.digest: True for approval in run.approvals}
    return gateway([{"text": "Refunded."}], audit, at(when)).resume(
        run,
        composer if composer is not None else Composer().system(SYSTEM),
        view,
        policy=policy(view),
        answers=answers,
    )


def test_a_paused_run_records_when_it_paused_in_utc_and_keeps_it_in_its_json() -> None:
    run = paused(SQLiteAuditSink(), PAUSED_AT + 0.25)
    assert run.paused_at == datetime(2025, 6, 15, 15, 6, 40, 250000, tzinfo=UTC)
    document = json.loads(run.to_json())
    assert document["format"] == "veridic-paused-run/7"
    assert document["paused_at"] == "2025-06-15T15:06:40.250000+00:00"
    assert PausedRun.from_json(run.to_json()) == run


def test_an_answer_within_the_bound_runs_the_approved_call() -> None:
    audit = SQLiteAuditSink()
    ran: list[str] = []
    resume(paused(audit), audit, PAUSED_AT + 24 * HOUR, ran=ran)  # the bound itself holds
    assert ran == ["refund 42", "get_order 43"]


def test_an_answer_after_the_bound_runs_nothing_and_is_recorded_denied() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    composer = Composer().system(SYSTEM)
    with pytest.raises(ApprovalExpiredError) as raised:
        resume(run, audit, PAUSED_AT + 21 * 24 * HOUR, ran=ran, composer=composer)
    assert ran == []
    error = raised.value
    assert isinstance(error, ApprovalDeniedError)
    assert (error.request_id, error.age, error.bound) == (
        "req-1",
        timedelta(days=21),
        timedelta(hours=24),
    )
    assert error.paused_at == run.paused_at
    message = str(error)
    for said in ("21 days", "2025-06-15T15:06:40", "approvals_expire_after", "ask the user anew"):
        assert said in message
    waiting = [r for r in audit.records("req-1") if r.call_id in {"c2", "c3"}]
    assert [(r.call_id, r.approval, r.outcome) for r in waiting] == [
        ("c2", ApprovalMode.DENIED, CallOutcome.DENIED),
        ("c3", ApprovalMode.DENIED, CallOutcome.DENIED),
    ]
    assert all("expired" in r.detail for r in waiting)
    # The composer holds the conversation, the expired calls answered as not run.
    assert composer.build().pending_tool_calls == ()


def test_a_paused_run_dated_in_the_future_runs_nothing() -> None:
    audit = SQLiteAuditSink()
    ran: list[str] = []
    with pytest.raises(ApprovalExpiredError, match="in the future") as raised:
        resume(paused(audit), audit, PAUSED_AT - 1, ran=ran)
    assert ran == []
    assert raised.value.age == timedelta(seconds=-1)
    assert {r.outcome for r in audit.records("req-1") if r.call_id == "c2"} == {CallOutcome.DENIED}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pause_ms=st.integers(min_value=3 * 3_600_000, max_value=4_000_000_000_000),  # clock >= 0
    age_ms=st.integers(min_value=-3 * 3_600_000, max_value=3 * 3_600_000),
    bound_ms=st.integers(min_value=1, max_value=2 * 3_600_000),
)
def test_calls_run_exactly_when_the_answer_comes_within_the_bound(
    pause_ms: int, age_ms: int, bound_ms: int
) -> None:
    audit = SQLiteAuditSink()
    request_id = f"req-{next(_requests)}"
    run = paused(audit, pause_ms / 1000, request_id)
    ran: list[str] = []
    bound = timedelta(milliseconds=bound_ms)

    def policy(view: ToolView) -> ApprovalPolicy:
        return ApprovalPolicy(view, approvals_expire_after=bound)

    in_time = 0 <= age_ms <= bound_ms
    try:
        resume(run, audit, (pause_ms + age_ms) / 1000, ran=ran, policy=policy)
    except ApprovalExpiredError:
        assert not in_time
    else:
        assert in_time
    assert ran == (["refund 42", "get_order 43"] if in_time else [])


def test_the_bound_is_the_approval_policys_and_is_checked() -> None:
    view = make_view([])
    assert ApprovalPolicy(view).approvals_expire_after == timedelta(hours=24)
    audit = SQLiteAuditSink()
    ran: list[str] = []
    with pytest.raises(ApprovalExpiredError, match="1:00:00"):
        resume(
            paused(audit),
            audit,
            PAUSED_AT + 2 * HOUR,
            ran=ran,
            policy=lambda v: ApprovalPolicy(v, approvals_expire_after=timedelta(hours=1)),
        )
    for wrong in (timedelta(0), timedelta(seconds=-5), 3600, None):
        with pytest.raises(VeridicError, match="approvals_expire_after"):
            ApprovalPolicy(view, approvals_expire_after=wrong)  # type: ignore[arg-type]  # checked at run time
    restored = ApprovalPolicy.restore(view, {}, approvals_expire_after=timedelta(minutes=5))
    assert restored.approvals_expire_after == timedelta(minutes=5)


def test_aresume_refuses_an_expired_answer_too() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    ran: list[str] = []
    view = make_view(ran)
    late = gateway([{"text": "Refunded."}], audit, at(PAUSED_AT + 25 * HOUR), asynchronous=True)
    resumed = late.aresume(
        run,
        Composer().system(SYSTEM),
        view,
        policy=ApprovalPolicy(view),
        answers={run.approvals[0].digest: True},
    )
    with pytest.raises(ApprovalExpiredError, match="1 day, 1:00:00"):
        asyncio.run(resumed)
    assert ran == []
    assert {r.outcome for r in audit.records("req-1") if r.call_id == "c2"} == {CallOutcome.DENIED}


def test_an_expired_paused_run_resumed_again_is_refused_as_resumed_already() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    with pytest.raises(ApprovalExpiredError):
        resume(run, audit, PAUSED_AT + 30 * HOUR, ran=[])
    ran: list[str] = []
    with pytest.raises(VeridicError, match="resumed already"):
        resume(run, audit, PAUSED_AT + 30 * HOUR, ran=ran)
    assert ran == []


def test_after_an_expired_answer_the_composer_goes_on_and_the_model_asks_anew() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    composer = Composer().system(SYSTEM)
    with pytest.raises(ApprovalExpiredError):
        resume(run, audit, PAUSED_AT + 48 * HOUR, ran=[], composer=composer)
    ran: list[str] = []
    view = make_view(ran)
    asked_again = {"tool_calls": [("c5", "refund", '{"order_id": 42}')]}
    result = gateway([asked_again], audit, at(PAUSED_AT + 48 * HOUR)).run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
    )
    assert result.paused is not None
    assert result.paused.paused_at == datetime.fromtimestamp(PAUSED_AT + 48 * HOUR, UTC)
    assert [a.call_id for a in result.pending] == ["c5"]
    assert ran == []


def test_a_paused_run_re_dated_where_it_was_kept_matches_no_answer_by_digest() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    document = json.loads(run.to_json())
    document["paused_at"] = "2025-07-06T15:06:40.000000+00:00"  # three weeks on: "fresh"
    forged = PausedRun.from_json(json.dumps(document))
    ran: list[str] = []
    view = make_view(ran)
    with pytest.raises(VeridicError, match="not the ones that waited"):
        gateway([{"text": "Refunded."}], audit, at(PAUSED_AT + 21 * 24 * HOUR)).resume(
            forged,
            Composer().system(SYSTEM),
            view,
            policy=ApprovalPolicy(view),
            answers={run.approvals[0].digest: True},  # the answer the dialog got then
        )
    assert ran == []


def test_a_paused_run_of_format_5_has_no_time_and_resumes_only_once_dated() -> None:
    audit = SQLiteAuditSink()
    run = paused(audit)
    older = PausedRun.from_json(json.dumps(as_format_5(json.loads(run.to_json()))))
    assert older.paused_at is None
    ran: list[str] = []
    with pytest.raises(ApprovalExpiredError, match="does not say when it paused") as raised:
        resume(older, audit, PAUSED_AT + HOUR, ran=ran)
    assert (raised.value.paused_at, raised.value.age) == (None, None)
    assert ran == []
    assert not [r for r in audit.records("req-1") if r.call_id == "c2"]  # nothing recorded
    # The caller who knows when it paused (when its store saved it) says so, and it resumes.
    dated = dataclasses.replace(older, paused_at=datetime.fromtimestamp(PAUSED_AT, UTC))
    resume(dated, audit, PAUSED_AT + HOUR, ran=ran)
    assert ran == ["refund 42", "get_order 43"]


@pytest.mark.parametrize(
    "written",
    [
        "2025-06-15T15:06:40",  # no offset
        "2025-06-15T17:06:40.000000+02:00",  # not UTC
        "2025-06-15T15:06:40Z",  # not as to_json() writes it
        "yesterday",
        1750000000,
    ],
)
def test_a_paused_at_other_than_to_json_writes_is_refused(written: object) -> None:
    document = json.loads(paused(SQLiteAuditSink()).to_json())
    document["paused_at"] = written
    with pytest.raises(VeridicError, match="paused_at"):
        PausedRun.from_json(json.dumps(document))


def test_an_undated_paused_run_is_kept_undated_in_the_current_format() -> None:
    run = dataclasses.replace(paused(SQLiteAuditSink()), paused_at=None)
    document = json.loads(run.to_json())
    assert (document["format"], document["paused_at"]) == ("veridic-paused-run/7", None)
    assert PausedRun.from_json(run.to_json()).paused_at is None


def test_a_paused_run_built_with_a_naive_time_is_refused() -> None:
    run = paused(SQLiteAuditSink())
    with pytest.raises(VeridicError, match="paused_at"):
        dataclasses.replace(run, paused_at=datetime(2025, 6, 15, 15, 6, 40))
