"""Every tool-call record says how long its handler ran and which arguments it was given.

``duration`` is measured around the handler alone (``0.0`` for a call that
never ran); ``arguments_sha256`` is the digest of the arguments exactly as
they reached the executor, JSON text or mapping, refused calls included.
Only lower bounds of time are asserted: a loaded machine is slow, never fast.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Mapping

import pytest

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AuditRecord,
    CallOutcome,
    CallResult,
    Composer,
    GuardDeniedError,
    ModelGateway,
    Registry,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    aexecute,
    execute,
    instruction,
)
from veridic.run.approval import Confirm
from veridic.run.records import arguments_sha256
from veridic.tools.guards import guard_irreversible

PROMPT = Composer().system(instruction("You keep the fixtures.")).build()
SLEEP = 0.02
EARLY = time.get_clock_info("monotonic").resolution
"""How early asyncio may fire a timer: one tick of the clock (its docs)."""


Arguments = Mapping[str, object] | str | None


class Later:
    """A thread a call leaves behind, which tries a guarded operation once released."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.refused: list[GuardDeniedError] = []
        self.thread: threading.Thread | None = None

    def spawn(self) -> None:
        self.thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run,))
        self.thread.start()

    def _run(self) -> None:
        self.go.wait(5)
        try:
            guard_irreversible("purge cache")
        except GuardDeniedError as error:
            self.refused.append(error)

    def release(self) -> None:
        self.go.set()
        assert self.thread is not None
        self.thread.join(5)


def make_view(later: Later | None = None) -> ToolView:
    registry = Registry("fixtures")

    @registry.tool(kind="query")
    def slow_lookup(name: str) -> str:
        """Look a fixture up in the slow catalogue.

        Args:
            name: The fixture.
        """
        time.sleep(SLEEP)
        return f"found {name}"

    @registry.tool(kind="query")
    async def slow_lookup_async(name: str) -> str:
        """Look a fixture up in the slow catalogue, from async code.

        Args:
            name: The fixture.
        """
        await asyncio.sleep(SLEEP)
        return f"found {name}"

    @registry.tool(kind="query")
    def broken_lookup(name: str) -> str:
        """Look a fixture up in a catalogue that fails after a while.

        Args:
            name: The fixture.
        """
        time.sleep(SLEEP)
        raise ConnectionError("catalogue down")

    @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
    def purge_fixture(name: str) -> str:
        """Permanently delete a fixture, and leave a cleanup thread behind.

        Args:
            name: The fixture.
        """
        if later is not None:
            later.spawn()
        return "purged"

    return registry.view()


def run(
    view: ToolView, name: str, arguments: Arguments, confirm: Confirm | None = None
) -> CallResult:
    audit = SQLiteAuditSink()
    result = execute(
        view,
        name,
        arguments,
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="req-1",
        prompt=PROMPT,
        confirm=confirm,
    )
    assert audit.records() == (result.record,)  # what was returned is what was stored
    return result


@pytest.mark.parametrize(
    "arguments",
    [{"name": "golden-1"}, '{"name": "golden-1"}', '{ "name" :"golden-1" }'],
    ids=["mapping", "json", "json-spaced"],
)
def test_a_call_that_ran_records_the_digest_of_what_it_got_and_how_long_it_ran(
    arguments: Arguments,
) -> None:
    result = run(make_view(), "slow_lookup", arguments)
    assert result.ok
    assert result.record.arguments_sha256 == arguments_sha256(arguments)
    assert result.record.duration >= SLEEP


def test_the_digest_is_of_the_text_as_written_not_of_what_it_parses_to() -> None:
    written = run(make_view(), "slow_lookup", '{"name": "golden-1"}').record
    canonical = run(make_view(), "slow_lookup", {"name": "golden-1"}).record
    assert written.arguments_sha256 != canonical.arguments_sha256


def test_a_failed_call_ran_too_and_says_for_how_long() -> None:
    result = run(make_view(), "broken_lookup", {"name": "golden-1"})
    assert result.outcome is CallOutcome.FAILED
    assert result.record.duration >= SLEEP
    assert result.record.arguments_sha256 == arguments_sha256({"name": "golden-1"})


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("no_such_tool", '{"name": "golden-1"}'),
        ("slow_lookup", '{"name": 5'),  # not JSON at all
        ("slow_lookup", {"nom": "golden-1"}),
        ("slow_lookup_async", None),
    ],
    ids=["unknown", "broken-json", "invalid", "no-arguments"],
)
def test_a_refused_call_never_ran_and_keeps_the_digest_of_what_it_got(
    name: str, arguments: Arguments
) -> None:
    result = run(make_view(), name, arguments)
    assert result.outcome is CallOutcome.REFUSED
    assert result.record.duration == 0.0
    assert result.record.arguments_sha256 == arguments_sha256(arguments)


def test_a_denied_call_never_ran_and_keeps_the_digest_too() -> None:
    arguments = '{"name": "golden-1"}'
    unconfirmed = run(make_view(), "purge_fixture", arguments)
    refused = run(make_view(), "purge_fixture", arguments, confirm=lambda request: False)
    for result in (unconfirmed, refused):
        assert result.outcome is CallOutcome.DENIED
        assert result.record.duration == 0.0
        assert result.record.arguments_sha256 == arguments_sha256(arguments)


def test_a_call_whose_confirm_raised_keeps_the_digest() -> None:
    view, audit = make_view(), SQLiteAuditSink()

    def confirm(request: object) -> bool:
        raise KeyError("the approval service is down")

    with pytest.raises(KeyError):
        execute(
            view,
            "purge_fixture",
            {"name": "golden-1"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=PROMPT,
            confirm=confirm,
        )
    (record,) = audit.records()
    assert record.outcome is CallOutcome.DENIED
    assert (record.duration, record.arguments_sha256) == (
        0.0,
        arguments_sha256({"name": "golden-1"}),
    )


def test_aexecute_records_the_same_digest_and_the_awaited_time() -> None:
    view, audit = make_view(), SQLiteAuditSink()
    arguments = '{"name": "golden-1"}'

    async def main() -> tuple[CallResult, CallResult]:
        ran = await aexecute(
            view,
            "slow_lookup_async",
            arguments,
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=PROMPT,
        )
        denied = await aexecute(
            view,
            "purge_fixture",
            arguments,
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=PROMPT,
        )
        return ran, denied

    ran, denied = asyncio.run(main())
    assert ran.ok
    assert ran.record.duration >= SLEEP - EARLY
    assert denied.outcome is CallOutcome.DENIED
    assert denied.record.duration == 0.0
    assert audit.records() == (ran.record, denied.record)
    assert {r.arguments_sha256 for r in audit.records()} == {arguments_sha256(arguments)}


def test_the_time_of_approval_is_not_the_time_of_the_run() -> None:
    """A user who takes a while to confirm does not make the handler slow.

    The duration is measured after ``confirm`` returned and before ``execute``
    did, whatever the machine's speed: no upper bound of time is assumed.
    """
    view = make_view()
    answered: list[float] = []

    def slow_user(request: object) -> bool:
        time.sleep(SLEEP)
        answered.append(time.perf_counter())
        return True

    result = run(view, "purge_fixture", {"name": "golden-1"}, confirm=slow_user)
    ended = time.perf_counter()
    assert result.ok
    assert result.record.approval is ApprovalMode.USER_CONFIRMED
    assert 0.0 < result.record.duration <= ended - answered[0]


def test_a_follow_up_carries_the_calls_digest_and_no_run_time() -> None:
    later = Later()
    view, audit = make_view(later), SQLiteAuditSink()
    arguments = '{"name": "golden-1"}'
    result = execute(
        view,
        "purge_fixture",
        arguments,
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="req-1",
        prompt=PROMPT,
        confirm=lambda request: True,
    )
    later.release()
    assert len(later.refused) == 1
    first, follow_up = audit.records("req-1")
    assert first == result.record
    assert follow_up.follow_up
    assert follow_up.arguments_sha256 == first.arguments_sha256 == arguments_sha256(arguments)
    assert follow_up.duration == 0.0


def test_the_gateway_records_the_digest_of_the_json_the_model_wrote() -> None:
    view, audit = make_view(), SQLiteAuditSink()
    written = '{"name":  "golden-1"}'
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": [("call-1", "slow_lookup", written)]}]), audit=audit
    )
    reply = gateway.send(PROMPT, view, request_id="req-1")
    (outcome,) = gateway.run_tools(reply, policy=ApprovalPolicy(view))
    record: AuditRecord = outcome.result.record
    assert record.arguments_sha256 == arguments_sha256(written)
    assert record.duration >= SLEEP
