"""The seventh attacker review of the executor, the run loop and the provider adapters,
through the public API.

Each test reproduces a finding of the review: it failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable
from typing import Literal

import pytest
from _sdk_server import FakeServer, http_module
from test_providers import RESPONSE, VIEW, first_prompt, gateway

from veridic import (
    ApprovalPolicy,
    AuditWriteError,
    CallOutcome,
    Composer,
    GuardDeniedError,
    ModelGateway,
    OpenAIChat,
    OpenAIResponses,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    UnknownToolError,
    VeridicError,
    execute,
    guard_irreversible,
    instruction,
)
from veridic.run.audit import AuditRecord

SYSTEM = instruction("You are the support agent of Acme.")


# --- a second interrupt while an interrupted call's record is written ------------------------


class _CancelledTwice(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record waits on the network."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.writing = asyncio.Event()

    async def awrite(self, record: AuditRecord, /) -> None:
        if record.call_id and not self.writing.is_set():
            self.writing.set()
            await asyncio.sleep(0.05)
        await super().awrite(record)


def _slow_refunds(started: asyncio.Event) -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="write")
    async def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        started.set()
        await asyncio.sleep(5)
        return "refunded"

    return registry.view()


def test_a_second_cancellation_while_a_cancelled_calls_record_is_written_answers_it() -> None:
    # The first cancel cuts the handler; the second lands while its record is written. The
    # call was left unanswered: the next request of the conversation would be refused.
    audit = _CancelledTwice()

    async def cancelled() -> Composer:
        started = asyncio.Event()
        view = _slow_refunds(started)
        policy = ApprovalPolicy(view)
        policy.allow_always("refund")
        calls = [("c1", "refund", '{"order_id": 1}')]
        gateway = ModelGateway(
            ScriptedProvider([{"tool_calls": calls}], asynchronous=True), audit=audit
        )
        composer = Composer().system(SYSTEM, view.capability_section()).user("Refund 1.")
        task = asyncio.create_task(gateway.arun(composer, view, policy=policy, request_id="r"))
        await started.wait()
        task.cancel()
        await audit.writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)  # the write left running ends
        return composer

    composer = asyncio.run(cancelled())
    (record,) = [r for r in audit.records("r") if r.call_id == "c1"]
    assert record.outcome is CallOutcome.FAILED
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert answer.call_id == "c1"
    assert answer.error
    assert "was interrupted (CancelledError) while it ran" in answer.text


class _InterruptedAgain(SQLiteAuditSink):
    """The real SQLite store, whose write of the first tool record is cut by Ctrl-C."""

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id:
            raise KeyboardInterrupt
        super().write(record)


def test_a_second_ctrl_c_while_an_interrupted_calls_record_is_written_answers_it() -> None:
    registry = Registry("units")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        raise KeyboardInterrupt

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=_InterruptedAgain())
    composer = Composer().system(SYSTEM, view.capability_section()).user("Use celsius.")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="r")
    notes = "\n".join(caught.value.__notes__)
    assert "the write was cut short, so the store may lack it" in notes
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert answer.call_id == "c1"
    assert answer.error
    assert "was interrupted (KeyboardInterrupt) while it ran" in answer.text


# --- where a late delegated effect came from ---------------------------------------------------

Starter = Literal["thread", "pool"]


def _close_account_view(starter: Starter, go: threading.Event, done: list[str]) -> ToolView:
    """A confirmed ``close_account`` that hands ``shred`` to a thread of the standard library
    (the thread runs the view's dispatch itself) and returns before the shred finishes."""
    registry = Registry("vault")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    started = threading.Event()

    @registry.tool(kind="write", irreversible=True)
    def shred(account: str) -> str:
        """Shred an account's records; a shredded record cannot be restored.

        Args:
            account: The account.
        """
        started.set()
        go.wait(5)
        done.append(account)
        return "shredded"

    @registry.tool(kind="write", risk="high")
    def close_account(account: str) -> str:
        """Close an account; each call is confirmed by the user.

        Args:
            account: The account.
        """
        run: Callable[..., object] = contextvars.copy_context().run
        arguments = (view.dispatch, "shred", {"account": account})
        if starter == "thread":
            threading.Thread(target=run, args=arguments).start()
        else:
            pool.submit(run, *arguments)
            pool.shutdown(wait=False)
        started.wait(5)  # the shred was dispatched while the call ran
        return "closing"

    view = registry.view()
    return view


@pytest.mark.parametrize("starter", ["thread", "pool"])
def test_a_late_delegated_effect_names_the_handler_that_left_it_not_threading(
    starter: Starter,
) -> None:
    go = threading.Event()
    done: list[str] = []
    view = _close_account_view(starter, go, done)
    audit = SQLiteAuditSink()
    result = execute(
        view,
        "close_account",
        {"account": "acme"},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="r",
        prompt_sha256="0" * 64,
        confirm=lambda request: True,
    )
    assert result.ok
    go.set()
    for _ in range(100):
        if len(audit.records("r")) == 2:
            break
        threading.Event().wait(0.02)
    _, follow_up = audit.records("r")
    assert done == ["acme"]
    assert follow_up.irreversible
    # The record named threading.py:1045 (or concurrent/futures/thread.py:58) as the code
    # that dispatched the shred; the application's code that caused it is the handler.
    assert "threading.py" not in follow_up.detail
    assert "concurrent" not in follow_up.detail
    origin = view.status("close_account").tool
    assert origin is not None
    assert origin.origin in follow_up.detail
    assert follow_up.detail.startswith(
        "after the call ended: delegation:shred happened: a delegated tool finished it in "
    )


def test_a_late_refused_delegation_names_the_handler_that_left_it() -> None:
    # The pool's one worker is busy until the call ended: the shred it then runs is refused
    # (the call's authority ended with it), and the follow-up named concurrent/futures.
    registry = Registry("vault")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    gate = threading.Event()
    shredded: list[concurrent.futures.Future[object]] = []

    @registry.tool(kind="write")
    def shred(account: str) -> str:
        """Shred an account's drafts.

        Args:
            account: The account.
        """
        return "shredded"

    @registry.tool(kind="write")
    def tidy_account(account: str) -> str:
        """Tidy an account's drafts.

        Args:
            account: The account.
        """
        pool.submit(gate.wait, 5)
        run: Callable[..., object] = contextvars.copy_context().run
        shredded.append(pool.submit(run, view.dispatch, "shred", {"account": account}))
        return "tidying"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("tidy_account")
    audit = SQLiteAuditSink()
    result = execute(
        view,
        "tidy_account",
        {"account": "acme"},
        policy=policy,
        audit=audit,
        request_id="r",
        prompt_sha256="0" * 64,
    )
    assert result.ok
    gate.set()
    (future,) = shredded
    assert future.exception(5) is not None  # refused: it never ran
    pool.shutdown()
    _, follow_up = audit.records("r")
    assert follow_up.follow_up
    assert "concurrent" not in follow_up.detail
    tool = view.status("tidy_account").tool
    assert tool is not None
    assert follow_up.detail == (
        f"after the call ended: a guard refused delegation:shred (started by its handler at "
        f"{tool.origin}), attempted by a task or thread the call started"
    )


# --- what a resume that broke says ran ---------------------------------------------------------


class _LosesC3(SQLiteAuditSink):
    """The real SQLite store, which fails to write the record of call ``c3``."""

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id == "c3":
            raise OSError("disk full")
        super().write(record)


def _orders_view(ran: list[str]) -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(f"get {order_id}")
        return "shipped"

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(f"refund {order_id}")
        return "refunded"

    return registry.view()


def test_a_broken_resume_counts_every_call_of_the_answer_that_ran() -> None:
    # c1 ran before the pause, c2 and c3 in the resume (c3's record was lost): the note said
    # "the results of the 2 calls of it that ran", though the composer holds 3.
    ran: list[str] = []
    view = _orders_view(ran)
    audit = _LosesC3()
    calls = [
        ("c1", "get_order", '{"order_id": 1}'),
        ("c2", "refund", '{"order_id": 2}'),
        ("c3", "refund", '{"order_id": 3}'),
    ]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=audit)

    def system() -> Composer:
        return Composer().system(SYSTEM, view.capability_section())

    paused = gateway.run(
        system().user("Refund 2 and 3."),
        view,
        policy=ApprovalPolicy(view),
        request_id="r",
        defer=True,
    ).paused
    assert paused is not None
    composer = system()
    with pytest.raises(AuditWriteError) as caught:
        gateway.resume(
            paused,
            composer,
            view,
            policy=ApprovalPolicy(view),
            answers={"c2": True, "c3": True},
        )
    assert ran == ["get 1", "refund 2", "refund 3"]
    answered = [t.call_id for t in composer.conversation().turns if t.kind == "tool_result"]
    assert answered == ["c1", "c2", "c3"]
    notes = "\n".join(caught.value.__notes__)
    assert (
        "the results of the 3 calls of it that ran (1 before the pause, 2 in this resume); "
        "every call of it is answered"
    ) in notes


# --- tool_choice: a custom tool, and the one place that reads choices -----------------------

openai = pytest.importorskip("openai")


def _openai_server() -> FakeServer:
    return FakeServer(http_module("openai"), [("json", RESPONSE)])


def _adapter(api: str, server: FakeServer) -> OpenAIChat | OpenAIResponses:
    client = server.client(openai, "OpenAI")
    if api == "chat":
        return OpenAIChat(client, model="gpt-test")
    return OpenAIResponses(client, model="gpt-test")


CUSTOM = {
    "chat": {"type": "custom", "custom": {"name": "get_weather"}},
    "responses": {"type": "custom", "name": "get_weather"},
}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_custom_tool_choice_naming_a_function_tool_of_the_view_is_refused(api: str) -> None:
    # The view sends get_weather as a function tool; forcing a custom (free-form) tool of
    # that name passed the check and went to the provider, which alone stood in the way.
    server = _openai_server()
    gw, _, _ = gateway(_adapter(api, server))
    with pytest.raises(UnknownToolError, match=r"custom tool.*get_weather.*function") as caught:
        gw.send(first_prompt(), VIEW, request_id="r", options={"tool_choice": CUSTOM[api]})
    assert caught.value.name == "get_weather"
    assert server.sent == []


@pytest.mark.parametrize(
    "choice",
    [
        {"type": "web_search_preview"},
        {"type": "mcp", "server_label": "deepwiki", "name": "get_weather"},
        CUSTOM["chat"],
        CUSTOM["responses"],
        {"type": "function", "custom": {"name": "get_weather"}},
    ],
)
def test_the_tool_choice_reader_refuses_every_tool_the_view_never_sends(
    choice: dict[str, object],
) -> None:
    # tool_choice_names is what the gateway checks a choice with; a hosted choice came back
    # as () (or as a view's name) and passed, when a caller skipped check_options.
    adapter = _adapter("responses", _openai_server())
    with pytest.raises(VeridicError, match="tool_choice"):
        adapter.tool_choice_names(choice)


@pytest.mark.parametrize(
    "choice",
    [
        "auto",
        "required",
        {"type": "function", "name": "get_weather"},
        {"type": "function", "function": {"name": "get_weather"}},
        {"type": "tool", "name": "get_weather"},
        {"type": "any"},
    ],
)
def test_the_tool_choice_reader_still_reads_choices_of_the_views_tools(choice: object) -> None:
    adapter = _adapter("chat", _openai_server())
    forced = isinstance(choice, dict) and choice["type"] in ("function", "tool")
    assert adapter.tool_choice_names(choice) == (("get_weather",) if forced else ())


# --- an interrupt while a late guard's follow-up is written ---------------------------------


class _LateGuardStore(SQLiteAuditSink):
    """The real SQLite store. While the call's own record is written, the thread its handler
    left behind attempts an irreversible delete (refused late, waiting for the record to be
    written first); the follow-up record of that refusal is then cut by an interrupt."""

    def __init__(self, interrupt: BaseException) -> None:
        super().__init__(":memory:")
        self.interrupt = interrupt
        self.go = threading.Event()
        self.threads: list[threading.Thread] = []

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id and not record.follow_up:
            super().write(record)
            self.go.set()
            for thread in self.threads:
                thread.join(5)
            return
        if record.follow_up:
            raise self.interrupt
        super().write(record)


def _purge_view(store: _LateGuardStore, refused: list[str]) -> ToolView:
    registry = Registry("files")

    def purge_later() -> None:
        store.go.wait(5)
        try:
            guard_irreversible("purge the trash")
        except GuardDeniedError as error:
            refused.append(str(error))

    @registry.tool(kind="write")
    def empty_trash(folder: str) -> str:
        """Move a folder's trash to the bin, from which it can be restored for 30 days.

        Args:
            folder: The folder.
        """
        thread = threading.Thread(target=contextvars.copy_context().run, args=(purge_later,))
        store.threads.append(thread)
        thread.start()
        return "emptied"

    return registry.view()


def test_ctrl_c_while_a_late_guards_follow_up_is_written_still_answers_the_call() -> None:
    # The call ran and its record is written; Ctrl-C landed on the follow-up write, and the
    # call's result went with it: the run left the call unanswered.
    store = _LateGuardStore(KeyboardInterrupt())
    refused: list[str] = []
    view = _purge_view(store, refused)
    policy = ApprovalPolicy(view)
    policy.allow_always("empty_trash")
    calls = [("c1", "empty_trash", '{"folder": "inbox"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=store)
    composer = Composer().system(SYSTEM, view.capability_section()).user("Empty the trash.")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="r")
    assert len(refused) == 1
    (record,) = [r for r in store.records("r") if r.call_id == "c1"]
    assert record.outcome is CallOutcome.OK
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert (answer.call_id, answer.error, answer.text) == ("c1", False, "emptied")
    notes = "\n".join(caught.value.__notes__)
    assert "the results of the 1 call of it that ran" in notes
    assert "follow-up" in notes


class _HeldLateGuardStore(_LateGuardStore):
    """:class:`_LateGuardStore` from the loop: the follow-up write waits on the network, and
    the task is cancelled meanwhile."""

    def __init__(self) -> None:
        super().__init__(KeyboardInterrupt())
        self.following = asyncio.Event()

    async def awrite(self, record: AuditRecord, /) -> None:
        if record.follow_up:
            self.following.set()
            await asyncio.sleep(0.05)
            SQLiteAuditSink.write(self, record)
            return
        self.write(record)


def test_a_cancellation_while_a_late_guards_follow_up_is_written_still_answers_the_call() -> None:
    store = _HeldLateGuardStore()
    refused: list[str] = []
    view = _purge_view(store, refused)
    policy = ApprovalPolicy(view)
    policy.allow_always("empty_trash")
    calls = [("c1", "empty_trash", '{"folder": "inbox"}')]
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}], asynchronous=True), audit=store
    )
    composer = Composer().system(SYSTEM, view.capability_section()).user("Empty the trash.")

    async def cancelled() -> None:
        task = asyncio.create_task(gateway.arun(composer, view, policy=policy, request_id="r"))
        await store.following.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)  # the follow-up write left running ends

    asyncio.run(cancelled())
    assert len(refused) == 1
    follow_ups = [r for r in store.records("r") if r.follow_up]
    assert len(follow_ups) == 1  # the write went on to its end
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert (answer.call_id, answer.error, answer.text) == ("c1", False, "emptied")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_tool_choice_naming_two_tools_has_both_checked(api: str) -> None:
    # Chat completions read function.name, Responses read name: a choice carrying both was
    # checked by the one read first, and the other went to the provider unchecked.
    server = _openai_server()
    gw, _, _ = gateway(_adapter(api, server))
    for choice in (
        {"type": "function", "name": "get_weather", "function": {"name": "delete_everything"}},
        {"type": "function", "name": "delete_everything", "function": {"name": "get_weather"}},
    ):
        with pytest.raises(UnknownToolError, match="delete_everything"):
            gw.send(first_prompt(), VIEW, request_id="r", options={"tool_choice": choice})
        entry = {"type": "allowed_tools", "mode": "auto", "tools": [choice]}
        with pytest.raises(UnknownToolError, match="delete_everything"):
            gw.send(first_prompt(), VIEW, request_id="r", options={"tool_choice": entry})
    assert server.sent == []


class _LosesToolRecords(SQLiteAuditSink):
    """The real SQLite store, which fails to write any tool call's record."""

    def write(self, record: AuditRecord, /) -> None:
        if record.call_id:
            raise OSError("disk full")
        super().write(record)


def test_an_interrupted_call_whose_record_write_failed_is_still_answered() -> None:
    # Ctrl-C in the handler, and the store failing on its record: the AuditWriteError kept
    # the result, but the interrupt that went on did not, so the call was left unanswered.
    registry = Registry("units")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        raise KeyboardInterrupt

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=_LosesToolRecords())
    composer = Composer().system(SYSTEM, view.capability_section()).user("Use celsius.")
    with pytest.raises(KeyboardInterrupt) as caught:
        gateway.run(composer, view, policy=policy, request_id="r")
    assert isinstance(caught.value.__context__, AuditWriteError)
    (answer,) = [t for t in composer.conversation().turns if t.kind == "tool_result"]
    assert answer.call_id == "c1"
    assert answer.error
    assert "was interrupted (KeyboardInterrupt) while it ran" in answer.text
