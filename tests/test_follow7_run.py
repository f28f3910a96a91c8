"""Last follow-ups to the sixth review of the executor, gateway and guards, through the public API.

Each test failed on the merged code before its fix.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import logging
import sqlite3
import threading
from pathlib import Path

import pytest
from test_review_runloop import make_registry, paused_refunds, system_part
from test_store_schema8 import _sqlite_at_7

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    Composer,
    Limits,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    aexecute,
    execute,
    instruction,
)
from veridic.checks.cli import main
from veridic.errors import AuditRecordError, AuditWriteError
from veridic.run.audit import AuditRecord

SYSTEM = instruction("You are the support agent of Acme.")

# --- a delegated tool that finishes after the call ended is on record ---------------------


class _Shredder:
    """A confirmed ``close_account`` that starts the shred of the account in a thread and
    returns before the shred finishes: the delegation was allowed (the call was open), the
    irreversible effect happens after the call's record was written."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.done: list[str] = []
        self.threads: list[threading.Thread] = []
        registry = Registry("vault")
        shredder = self

        @registry.tool(kind="write", irreversible=True)
        def shred(account: str) -> str:
            """Shred an account's records; a shredded record cannot be restored.

            Args:
                account: The account.
            """
            shredder.started.set()
            shredder.go.wait(5)
            shredder.done.append(f"shred {account}")
            return "shredded"

        @registry.tool(kind="write", risk="high")
        def close_account(account: str) -> str:
            """Close an account; each call is confirmed by the user.

            Args:
                account: The account.
            """
            run = contextvars.copy_context().run
            thread = threading.Thread(
                target=run, args=(shredder.view.dispatch, "shred", {"account": account})
            )
            shredder.threads.append(thread)
            thread.start()
            shredder.started.wait(5)
            return "closing"

        self.view: ToolView = registry.view()


def test_a_delegated_irreversible_tool_finishing_after_the_call_gets_a_follow_up_record() -> None:
    shredder = _Shredder()
    audit = SQLiteAuditSink()
    result = execute(
        shredder.view,
        "close_account",
        {"account": "acme"},
        policy=ApprovalPolicy(shredder.view),
        audit=audit,
        request_id="req-1",
        prompt_sha256="0" * 64,
        confirm=lambda request: True,
    )
    assert result.ok
    assert result.record.irreversible is False  # the shred had not finished then
    shredder.go.set()
    shredder.threads[0].join(5)
    assert shredder.done == ["shred acme"]
    first, follow_up = audit.records("req-1")
    assert first == result.record
    assert follow_up.follow_up
    assert follow_up.tool == "close_account"
    assert follow_up.irreversible is True
    assert follow_up.outcome is CallOutcome.BLOCKED  # a follow-up, not a second call
    assert follow_up.operations == ("delegation:shred",)
    assert follow_up.detail.startswith(
        "after the call ended: delegation:shred happened: a delegated tool finished it in a "
        "task or thread the call started"
    )


# --- a cancellation while the call's record is written still answers the call ------------


class _HeldSQLite(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record waits on the network."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.writing = asyncio.Event()

    async def awrite(self, record: AuditRecord, /) -> None:
        if record.call_id and not self.writing.is_set():
            self.writing.set()
            await asyncio.sleep(0.05)
        await super().awrite(record)


def test_a_call_cancelled_while_its_record_is_written_is_answered_on_the_composer() -> None:
    registry = Registry("orders")
    ran: list[int] = []

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(order_id)
        return "refunded"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("refund")
    calls = [("c1", "refund", '{"order_id": 1}')]
    audit = _HeldSQLite()
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}], asynchronous=True), audit=audit
    )
    composer = Composer().system(SYSTEM, view.capability_section()).user("Refund 1.")

    async def cancelled() -> BaseException:
        task = asyncio.create_task(gateway.arun(composer, view, policy=policy, request_id="req-2"))
        await audit.writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        await asyncio.sleep(0.1)  # the write left running ends
        return caught.value

    error = asyncio.run(cancelled())
    assert ran == [1]
    (record,) = [r for r in audit.records("req-2") if r.call_id == "c1"]
    assert record.outcome is CallOutcome.OK  # it ran to its end; only the write was cut
    notes = "\n".join(error.__notes__)
    assert "the results of the 1 call of it that ran" in notes
    assert (
        f"the call of tool 'refund' (request 'req-2', call id 'c1') ran to its end (outcome ok), "
        f"and the CancelledError landed while its audit record {record.record_id} was being "
        "written: the write goes on to its end"
    ) in notes
    turns = composer.conversation().turns
    (answer,) = [turn for turn in turns if turn.kind == "tool_result"]
    # The refund happened: the model is told its result, not that it is unknown.
    assert (answer.call_id, answer.error, answer.text) == ("c1", False, "refunded")


# --- an application's request id is capped --------------------------------------------------


def _orders() -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        return f"order {order_id}: shipped"

    return registry.view()


HUGE = "x" * 4097


def _says_what_to_do(error: VeridicError) -> None:
    message = str(error)
    assert "4097 characters" in message
    assert "4096" in message
    assert "sha256" in message
    assert HUGE not in message


def test_execute_refuses_a_request_id_longer_than_4096_characters_before_running() -> None:
    view = _orders()
    audit = SQLiteAuditSink()
    with pytest.raises(VeridicError) as caught:
        execute(
            view,
            "get_order",
            {"order_id": 1},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id=HUGE,
            prompt_sha256="0" * 64,
        )
    _says_what_to_do(caught.value)
    assert "execute()" in str(caught.value)
    assert audit.records(HUGE) == ()
    digest = hashlib.sha256(HUGE.encode()).hexdigest()
    kept = execute(
        view,
        "get_order",
        {"order_id": 1},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="y" * 4096,
        prompt_sha256="0" * 64,
    )
    assert kept.ok
    assert execute(
        view,
        "get_order",
        {"order_id": 1},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id=digest,
        prompt_sha256="0" * 64,
    ).ok


def test_send_and_run_refuse_a_request_id_longer_than_4096_characters_before_sending() -> None:
    view = _orders()
    audit = SQLiteAuditSink()
    provider = ScriptedProvider([{"text": "hi"}, {"text": "hi"}])
    gateway = ModelGateway(provider, audit=audit)
    composer = Composer().system(SYSTEM, view.capability_section()).user("Where is 1?")
    with pytest.raises(VeridicError) as sent:
        gateway.send(composer.build(), view, request_id=HUGE)
    _says_what_to_do(sent.value)
    with pytest.raises(VeridicError) as ran:
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id=HUGE)
    _says_what_to_do(ran.value)
    assert audit.model_calls(HUGE) == ()
    # Nothing was sent: both scripted answers are still there.
    assert gateway.send(composer.build(), view, request_id="req-3").text == "hi"
    assert gateway.send(composer.build(), view, request_id="req-3").text == "hi"


def test_arun_and_asend_refuse_a_request_id_longer_than_4096_characters() -> None:
    view = _orders()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "hi"}], asynchronous=True), audit=SQLiteAuditSink()
    )
    composer = Composer().system(SYSTEM, view.capability_section()).user("Where is 1?")
    with pytest.raises(VeridicError) as sent:
        asyncio.run(gateway.asend(composer.build(), view, request_id=HUGE))
    _says_what_to_do(sent.value)
    with pytest.raises(VeridicError) as ran:
        asyncio.run(gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id=HUGE))
    _says_what_to_do(ran.value)


class _InterruptedSQLite(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record is cut by Ctrl-C."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.cut = False

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id and not self.cut:
            self.cut = True
            raise KeyboardInterrupt
        super().write(record)


def test_ctrl_c_while_a_calls_record_is_written_in_run_answers_the_call() -> None:
    registry = Registry("units")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        return f"units: {unit}"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=_InterruptedSQLite())
    composer = Composer().system(SYSTEM, view.capability_section()).user("Use celsius.")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="req-4")
    notes = "\n".join(caught.value.__notes__)
    assert "the results of the 1 call of it that ran" in notes
    assert "ran to its end (outcome ok), and the KeyboardInterrupt landed" in notes
    assert "the write was cut short, so the store may lack it" in notes
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert (answer.call_id, answer.error, answer.text) == ("c1", False, "units: celsius")


# --- seventh review, follow-ups: what a record, a log, an error and a store say -----------


def _refunds() -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="write")
    async def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        await asyncio.sleep(5)
        return "refunded"

    return registry.view()


def test_a_call_the_application_cancels_mid_way_is_recorded_as_one_that_may_have_run() -> None:
    view = _refunds()
    policy = ApprovalPolicy(view)
    policy.allow_always("refund")
    audit = SQLiteAuditSink()

    async def main() -> None:
        call = aexecute(
            view,
            "refund",
            {"order_id": 1},
            policy=policy,
            audit=audit,
            request_id="req-1",
            prompt_sha256="0" * 64,
            call_id="c1",
        )
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(call, 0.05)

    asyncio.run(main())
    (record,) = audit.records("req-1")
    assert record.outcome is CallOutcome.FAILED  # the outcome enum is kept
    # What matters first, where a clipped detail keeps it: the handler had started.
    assert record.detail.startswith("CancelledError: the call may have run: it was interrupted")
    assert "check what it did before calling it again" in record.detail


class _FollowUpsFail(SQLiteAuditSink):
    """The real SQLite store; the shred finishes while the call's own record is written (so
    its follow-up waits for that record), and the store then refuses the follow-up."""

    def __init__(self, shredder: _Shredder) -> None:
        super().__init__(":memory:")
        self.shredder = shredder

    def write(self, record: AuditRecord, /) -> None:
        if record.follow_up:
            raise sqlite3.OperationalError("database is locked")
        super().write(record)
        if not self.shredder.go.is_set():  # the call's own record: the shred ends now
            self.shredder.go.set()
            self.shredder.threads[0].join(5)


def test_an_unwritten_follow_up_of_an_effect_that_happened_is_not_logged_as_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shredder = _Shredder()
    audit = _FollowUpsFail(shredder)
    with caplog.at_level(logging.ERROR, logger="veridic.executor"), pytest.raises(AuditWriteError):
        execute(
            shredder.view,
            "close_account",
            {"account": "acme"},
            policy=ApprovalPolicy(shredder.view),
            audit=audit,
            request_id="req-shred-7",
            prompt_sha256="0" * 64,
            confirm=lambda request: True,
        )
    assert shredder.done == ["shred acme"]
    (logged,) = [r.getMessage() for r in caplog.records if "follow-up" in r.getMessage()]
    assert "refused" not in logged  # the shred happened
    assert "delegation:shred (happened: a delegated tool finished it" in logged
    assert "'req-shred-7'" in logged


def test_veridic_audit_of_a_schema_7_sqlite_file_says_its_answers_usage_is_not_broken_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at_7(path)
    assert main(["audit", str(path)]) == 0
    out = capsys.readouterr().out
    assert "the file holds audit schema version 7; its copy was migrated to version 10" in out
    assert "their answers' usage is not broken down" in out
    assert main(["audit", str(path), "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("usage is not broken down" in note for note in notes)
    with SQLiteAuditSink(path):  # the file itself migrated: no note any more
        pass
    assert main(["audit", str(path)]) == 0
    assert "migrated" not in capsys.readouterr().out


def test_an_answer_for_no_approval_lists_the_digests_the_user_should_answer_by() -> None:
    audit = SQLiteAuditSink()
    paused = paused_refunds(audit, Limits())
    view = make_registry([]).view()
    gateway = ModelGateway(ScriptedProvider([{"text": "Refunded."}]), audit=audit)
    with pytest.raises(VeridicError) as refused:
        gateway.resume(
            paused,
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers={"refund-2": True},
        )
    message = str(refused.value)
    for approval in paused.approvals:
        assert approval.digest in message
    assert "by their digest" in message


def test_save_rules_refuses_a_word_no_policy_applies_and_keeps_rules_and_grants() -> None:
    view = make_registry([]).view()
    policy = ApprovalPolicy(view)
    policy.allow_always("refund")
    audit = SQLiteAuditSink()
    with pytest.raises(AuditRecordError) as refused:
        audit.save_rules("user:ada", {"get_order": "ask", "refund": "allow"})
    assert "'allow' for tool 'refund'" in str(refused.value)
    assert audit.rules("user:ada") == {}  # nothing saved, not half
    # The rules and grants a policy gives are saved, as dicts or as policy.rules.
    audit.save_rules("user:ada", dict(policy.rules))
    audit.save_rules("user:ada/grants", dict(policy.grants))
    audit.save_rules("user:bob", policy.rules)
    restored = ApprovalPolicy.restore(
        view, audit.rules("user:ada"), grants=audit.rules("user:ada/grants")
    )
    assert restored.skipped == ()
    assert restored.request("refund").mode is ApprovalMode.ALWAYS_RULE
    assert ApprovalPolicy.restore(view, audit.rules("user:bob")).skipped == ()


@pytest.mark.parametrize("turns", [0, -1])
def test_limits_of_no_model_call_are_refused(turns: int) -> None:
    with pytest.raises(VeridicError, match=rf"Limits\(turns={turns}\): a run of no model call"):
        Limits(turns=turns)
    # No model call is meaningless; no tool call and no retry are bounds a run can hold.
    assert Limits(turns=1, tool_calls=0, output_retries=0).tool_calls == 0
