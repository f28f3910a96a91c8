"""Pause and resume attacked again: what a run's usage claims, what a refused resume leaves
behind, answers that could not be used, and a resume whose provider fails after its calls ran."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from collections.abc import Mapping, Sequence

import pytest
from _paused_formats import as_format_4
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    AuditWriteError,
    Composer,
    Limits,
    ModelGateway,
    PausedRun,
    Registry,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)
from veridic.providers import Completion, Usage

SYSTEM = instruction("You are the support agent of Acme.")
USAGE = {"input_tokens": 10, "output_tokens": 5}


def make_registry(ran: list[str]) -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(f"get_order {order_id}")
        return f"order {order_id}: lost"

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(f"refund {order_id}")
        return f"refunded {order_id}"

    @registry.tool(kind="write")
    async def notify(order_id: int) -> str:
        """Tell the customer that their order was refunded.

        Args:
            order_id: The order.
        """
        ran.append(f"notify {order_id}")
        return f"notified {order_id}"

    return registry


def system_part(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section())


def paused_run(
    audit: SQLiteAuditSink,
    calls: Sequence[tuple[str, str, str]] = (
        ("c1", "get_order", '{"order_id": 1}'),
        ("c2", "refund", '{"order_id": 2}'),
        ("c3", "refund", '{"order_id": 3}'),
    ),
    *,
    usage: Mapping[str, int] | None = USAGE,
    limits: Limits | None = None,
) -> PausedRun:
    """A run that ran the queries before the first write, and paused there."""
    view = make_registry([]).view()
    answer: dict[str, object] = {"tool_calls": list(calls)}
    if usage is not None:
        answer["usage"] = usage
    result = ModelGateway(ScriptedProvider([answer]), audit=audit).run(
        system_part(view).user("Refund 2 and 3."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
        limits=limits or Limits(),
    )
    assert result.paused is not None
    return result.paused


def resume(
    gateway: ModelGateway,
    paused: PausedRun,
    composer: Composer,
    view: ToolView,
    answers: Mapping[str, bool],
    *,
    asynchronous: bool = False,
    limits: Limits | None = None,
) -> RunResult[None]:
    policy = ApprovalPolicy(view)
    if asynchronous:
        return asyncio.run(
            gateway.aresume(paused, composer, view, policy=policy, answers=answers, limits=limits)
        )
    return gateway.resume(paused, composer, view, policy=policy, answers=answers, limits=limits)


# --- what a run's usage claims --------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_run_whose_answers_did_not_all_say_their_usage_claims_no_total(
    asynchronous: bool,
) -> None:
    # The first answer says its tokens, the second does not: the sum of the first alone was
    # given as the run's usage, a smaller number than the run used, with nothing saying so.
    view = make_registry([]).view()
    script: list[dict[str, object]] = [
        {"tool_calls": [("c1", "get_order", '{"order_id": 1}')], "usage": USAGE},
        {"text": "Order 1 is lost."},
    ]
    gateway = ModelGateway(
        ScriptedProvider(script, asynchronous=asynchronous), audit=SQLiteAuditSink()
    )
    composer = system_part(view).user("Where is order 1?")
    policy = ApprovalPolicy(view)
    if asynchronous:
        result = asyncio.run(gateway.arun(composer, view, policy=policy, request_id="r"))
    else:
        result = gateway.run(composer, view, policy=policy, request_id="r")
    assert result.text == "Order 1 is lost."
    assert result.usage is None


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_resumed_run_whose_first_part_did_not_say_its_usage_claims_no_total(
    asynchronous: bool,
) -> None:
    audit = SQLiteAuditSink()
    paused = PausedRun.from_json(paused_run(audit, usage=None).to_json())
    assert paused.usage is None
    view = make_registry([]).view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Refunded.", "usage": USAGE}], asynchronous=asynchronous),
        audit=audit,
    )
    result = resume(
        gateway,
        paused,
        system_part(view),
        view,
        {"c2": True, "c3": True},
        asynchronous=asynchronous,
    )
    assert result.text == "Refunded."
    assert result.usage is None  # not the 15 tokens of the answer after the pause alone


def test_a_run_whose_answers_all_said_their_usage_sums_them_across_the_pause() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run(audit)
    view = make_registry([]).view()
    gateway = ModelGateway(ScriptedProvider([{"text": "Refunded.", "usage": USAGE}]), audit=audit)
    result = resume(gateway, paused, system_part(view), view, {"c2": True, "c3": True})
    assert result.usage == Usage(20, 10)


def test_a_paused_runs_usage_keeps_its_cached_and_reasoning_parts() -> None:
    # to_json kept the two totals only: a resumed run's usage said no token came from the
    # cache, or was reasoning, before the pause.
    parted = Usage(900, 60, cache_read_input_tokens=512, reasoning_output_tokens=40)
    paused = dataclasses.replace(paused_run(SQLiteAuditSink()), usage=parted)
    read = PausedRun.from_json(paused.to_json())
    assert read.usage is not None
    assert dataclasses.astuple(read.usage) == dataclasses.astuple(parted)
    as_written = as_format_4(json.loads(paused.to_json()))  # as format 4 kept it
    assert as_written["usage"] == [900, 60, 512, 0, 40]
    for edited in (
        [900, 60, -512, 0, 40],
        [900, 60, 512],
        [900, 60, 512, 400, 40],
        [900, 6, 0, 0, 7],
    ):
        with pytest.raises(VeridicError, match="usage"):
            PausedRun.from_json(json.dumps({**as_written, "usage": edited}))


# --- an answer whose usage is refused is on record ------------------------------------------


class MiscountingProvider(ScriptedProvider):
    """An application's own adapter that reads the usage wrong (a sign flipped)."""

    def parse(self, response: object) -> Completion:
        completion = super().parse(response)
        return dataclasses.replace(completion, usage=Usage(-1000, 5))


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_answer_refused_for_its_usage_is_recorded_before_the_refusal(
    asynchronous: bool,
) -> None:
    ran: list[str] = []
    view = make_registry(ran).view()
    audit = SQLiteAuditSink()
    script = [{"tool_calls": [("c1", "get_order", '{"order_id": 1}')], "stop_reason": "x"}]
    gateway = ModelGateway(MiscountingProvider(script, asynchronous=asynchronous), audit=audit)
    composer = system_part(view).user("Where is order 1?")
    policy = ApprovalPolicy(view)

    def run() -> object:
        if asynchronous:
            return asyncio.run(gateway.arun(composer, view, policy=policy, request_id="r"))
        return gateway.run(composer, view, policy=policy, request_id="r")

    with pytest.raises(VeridicError, match="input_tokens=-1000, which is not a count"):
        run()
    assert ran == []
    [call] = audit.model_calls("r")
    # The model call happened and answered: its answer is on record, its calls named, with
    # no usage (the counts given could not be read as any).
    [answer] = audit.model_replies("r")
    assert (answer.call_id, answer.tool_calls, answer.usage) == (call.call_id, ("get_order",), None)
    assert answer.stop_reason == "x"


# --- a refused resume leaves the composer as it was -----------------------------------------


class BusyOnce(SQLiteAuditSink):
    """A store whose first read of a request's records fails (the database was locked)."""

    def __init__(self) -> None:
        super().__init__()
        self.busy = False

    def records(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        if self.busy:
            self.busy = False
            raise sqlite3.OperationalError("database is locked")
        return super().records(request_id, since=since, until=until)

    async def arecords(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        return self.records(request_id, since=since, until=until)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_resume_refused_by_a_store_that_could_not_answer_can_be_tried_again(
    asynchronous: bool,
) -> None:
    audit = BusyOnce()
    paused = paused_run(audit)
    ran: list[str] = []
    view = make_registry(ran).view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Refunded."}], asynchronous=asynchronous), audit=audit
    )
    composer = system_part(view)
    answers = {"c2": True, "c3": True}
    audit.busy = True
    with pytest.raises(sqlite3.OperationalError):
        resume(gateway, paused, composer, view, answers, asynchronous=asynchronous)
    assert ran == []
    assert composer.conversation().turns == ()  # as it was given: the retry may use it
    result = resume(gateway, paused, composer, view, answers, asynchronous=asynchronous)
    assert (result.text, ran) == ("Refunded.", ["refund 2", "refund 3"])


def test_a_blocking_resume_refused_for_an_async_tool_leaves_the_composer_for_aresume() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run(
        audit,
        (("c1", "refund", '{"order_id": 2}'), ("c2", "notify", '{"order_id": 2}')),
    )
    ran: list[str] = []
    view = make_registry(ran).view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Refunded."}], asynchronous=True), audit=audit
    )
    composer = system_part(view)
    # The async client is refused first now, as the send after the calls would refuse it.
    with pytest.raises(VeridicError, match="holds an async client"):
        resume(gateway, paused, composer, view, {"c1": True, "c2": True})
    assert ran == []
    assert composer.conversation().turns == ()
    result = resume(gateway, paused, composer, view, {"c1": True, "c2": True}, asynchronous=True)
    assert (result.text, ran) == ("Refunded.", ["refund 2", "notify 2"])


# --- answers that could not be used -----------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_answer_behind_an_unanswered_approval_is_refused_not_dropped(
    asynchronous: bool,
) -> None:
    # The user answered the second refund and not the first: calls run in the model's order,
    # so the run paused again at the first, and the answer given was dropped without a word
    # (the new paused run asked for it again).
    audit = SQLiteAuditSink()
    paused = paused_run(audit)
    ran: list[str] = []
    view = make_registry(ran).view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Refunded."}], asynchronous=asynchronous), audit=audit
    )
    composer = system_part(view)
    approvals = {approval.call_id: approval for approval in paused.approvals}
    with pytest.raises(
        VeridicError, match="and no answer for 'c2', which the model asked for before it"
    ) as caught:
        resume(
            gateway,
            paused,
            composer,
            view,
            {approvals["c3"].digest: False},
            asynchronous=asynchronous,
        )
    assert "c3" in str(caught.value)
    assert ran == []
    assert [r.call_id for r in audit.records("req-1")] == ["c1"]
    assert composer.conversation().turns == ()
    # Nothing ran and nothing was recorded: the same paused run resumes with every answer.
    result = resume(
        gateway,
        paused,
        composer,
        view,
        {approvals["c2"].digest: True, approvals["c3"].digest: False},
        asynchronous=asynchronous,
    )
    assert (result.text, ran) == ("Refunded.", ["refund 2"])


def test_answers_for_the_first_approvals_only_still_run_them_and_pause_again() -> None:
    audit = SQLiteAuditSink()
    paused = paused_run(audit)
    ran: list[str] = []
    view = make_registry(ran).view()
    result = resume(
        ModelGateway(ScriptedProvider([]), audit=audit),
        paused,
        system_part(view),
        view,
        {"c2": True},
    )
    assert ran == ["refund 2"]
    assert [approval.call_id for approval in result.pending] == ["c3"]


# --- a resume whose provider fails after its calls ran ------------------------------------


class GoesDown(ScriptedProvider):
    """A provider whose API is down from the first request on (a network failure)."""

    def _answer(self, **request: object) -> object:
        raise ConnectionError("the provider's API is unreachable")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_resume_whose_provider_fails_after_its_calls_ran_says_how_to_go_on(
    asynchronous: bool,
) -> None:
    # The approved refunds ran, then the model call after them failed. The paused run is
    # spent (resumed again, it is refused: the refunds are on record), and the error said
    # nothing of what ran or how the request could go on.
    audit = SQLiteAuditSink()
    paused = paused_run(audit)
    ran: list[str] = []
    view = make_registry(ran).view()
    composer = system_part(view)
    down = ModelGateway(GoesDown([], asynchronous=asynchronous), audit=audit)
    with pytest.raises(ConnectionError) as caught:
        resume(down, paused, composer, view, {"c2": True, "c3": False}, asynchronous=asynchronous)
    assert ran == ["refund 2"]
    note = "".join(caught.value.__notes__)
    assert "call 'c2' ('refund'): ok" in note
    assert "call 'c3' ('refund'): denied" in note
    assert "spent 2 model calls and 3 tool calls" in note
    assert f"gateway.{'arun' if asynchronous else 'run'}(composer" in note
    # The paused run cannot be resumed again: that would refund order 2 twice...
    with pytest.raises(VeridicError, match="was resumed already"):
        resume(down, paused, system_part(view), view, {"c2": True, "c3": False})
    # ...and the request goes on as the note says, from the composer (here saved and
    # restored, as another process would), without running any call again.
    saved = composer.conversation()
    gateway = ModelGateway(ScriptedProvider([{"text": "Refunded order 2."}]), audit=audit)
    result = gateway.run(
        system_part(view).restore(saved),
        view,
        policy=ApprovalPolicy(view),
        request_id=paused.request_id,
        defer=True,
    )
    assert (result.text, ran) == ("Refunded order 2.", ["refund 2"])
    assert [r.call_id for r in audit.records("req-1")] == ["c1", "c2", "c3"]


class LosesOneRecord(SQLiteAuditSink):
    """A store whose write of call c2's record fails once (the disk filled up just then)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[AuditRecord] = []

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id == "c2" and not self.lost:
            self.lost.append(record)
            raise OSError("disk full")
        super().write(record)


def test_a_resume_whose_record_was_lost_says_a_copy_would_run_the_call_again() -> None:
    # Refund 2 ran and its record was not written: the store cannot tell that the paused run
    # was resumed, and the note said the store's records tell what became of each call.
    audit = LosesOneRecord()
    paused = paused_run(audit)
    ran: list[str] = []
    view = make_registry(ran).view()
    gateway = ModelGateway(ScriptedProvider([{"text": "Refunded."}]), audit=audit)
    with pytest.raises(AuditWriteError) as caught:
        resume(gateway, paused, system_part(view), view, {"c2": True, "c3": True})
    assert ran == ["refund 2"]
    note = "".join(caught.value.__notes__)
    assert "call 'c2' ('refund') ran, and its record is not in the audit store" in note
    assert "a copy of the paused run resumed again would run it a second time" in note
    # Written as the note says, the record makes a copy resumed again refused.
    record = caught.value.result.record
    assert isinstance(record, AuditRecord)
    audit.write(record)
    with pytest.raises(VeridicError, match="was resumed already"):
        resume(gateway, paused, system_part(view), view, {"c2": True, "c3": True})
    assert ran == ["refund 2"]


# --- for all answers: a resume runs a prefix in order, or refuses and changes nothing ------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    refunds=st.integers(1, 4),
    answers=st.lists(st.sampled_from([None, True, False]), min_size=4, max_size=4),
    by_digest=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_a_resume_uses_every_answer_or_refuses_and_changes_nothing(
    refunds: int, answers: list[bool | None], by_digest: list[bool]
) -> None:
    audit = SQLiteAuditSink()
    calls = [(f"c{n}", "refund", f'{{"order_id": {n}}}') for n in range(refunds)]
    paused = paused_run(audit, calls)
    given_answers: dict[str, bool] = {}
    for approval, answer, digest in zip(paused.approvals, answers, by_digest, strict=False):
        if answer is not None:
            given_answers[approval.digest if digest else approval.call_id] = answer
    answered = {
        call_id
        for (call_id, _, _), answer in zip(calls, answers, strict=False)
        if answer is not None
    }
    ran: list[str] = []
    view = make_registry(ran).view()
    composer = system_part(view)
    gateway = ModelGateway(ScriptedProvider([{"text": "Done."}]), audit=audit)
    prefix = 0
    while prefix < refunds and answers[prefix] is not None:
        prefix += 1
    if any(answers[n] is not None for n in range(prefix, refunds)):
        with pytest.raises(VeridicError, match="which the model asked for before it"):
            resume(gateway, paused, composer, view, given_answers)
        assert (ran, composer.conversation().turns, audit.records("req-1")) == ([], (), ())
        return
    result = resume(gateway, paused, composer, view, given_answers)
    # Every answer given was used: its call is on record, none is asked for again.
    assert answered == {f"c{n}" for n in range(prefix)}
    assert ran == [f"refund {n}" for n in range(prefix) if answers[n]]
    assert [r.call_id for r in audit.records("req-1")] == [f"c{n}" for n in range(prefix)]
    assert [a.call_id for a in result.pending] == [f"c{n}" for n in range(prefix, refunds)]
