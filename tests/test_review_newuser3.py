"""A new user's first day, a third time: the app one writes from the docs, and its slips.

The day-one app is a registry of five tools (a write, an irreversible one), a
view per request, a composer with a system prompt and a retrieved document, the
gateway with a scripted provider, an approval that waits and is resumed later,
and the audit store. Each test is a slip made while writing it, where veridic
did something surprising or said something that did not help.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Registry,
    Risk,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolContext,
    ToolView,
    VeridicError,
    instruction,
)

SYSTEM = instruction("You are Acme's support assistant. Be brief.")


@dataclass(frozen=True)
class Session:
    """What a request knows of its user: handlers read it from their context."""

    user: str


def _registry() -> Registry:
    registry = Registry("support")

    @registry.tool(kind="query")
    def find_order(ctx: ToolContext[Session], order_id: str) -> str:
        """Look up one of the signed-in customer's orders.

        Args:
            order_id: The order's id, e.g. A-1001.
        """
        return f"{order_id} of {ctx.deps.user}: shipped"

    @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
    def refund_order(ctx: ToolContext[Session], order_id: str) -> str:
        """Refund an order in full. The money cannot be taken back.

        Args:
            order_id: The order's id.
        """
        return f"refunded {order_id}"

    return registry


def _request(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section())


# --- a run without the context its tools ask for ------------------------------------


@pytest.mark.parametrize("where", ["run", "arun"])
def test_a_run_without_the_context_its_tools_need_names_the_run_and_its_context_argument(
    where: str,
) -> None:
    # The message said the tool "was called without one" and to pass context= to
    # execute(), aexecute() or view.dispatch(): the app had called none of them, and no
    # tool had been called; gateway.run(..., context=...) is what it needed.
    view = _registry().view()
    provider = ScriptedProvider([{"text": "Hello."}], asynchronous=where == "arun")
    gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
    composer = _request(view).user("Where is my order?")
    policy = ApprovalPolicy(view)

    def start() -> object:
        if where == "run":
            return gateway.run(composer, view, policy=policy, request_id="r1")
        return asyncio.run(gateway.arun(composer, view, policy=policy, request_id="r1"))

    with pytest.raises(VeridicError) as raised:
        start()
    message = str(raised.value)
    assert f"{where}(..., context=...)" in message
    assert "ToolContext[Session]" in message
    assert "find_order" in message
    assert "called without" not in message
    assert provider.requests == []  # refused before anything was sent


def test_a_run_given_the_wrong_context_says_which_type_it_got_and_which_it_needs() -> None:
    view = _registry().view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Hello."}]), audit=SQLiteAuditSink(":memory:")
    )
    composer = _request(view).user("Where is my order?")
    with pytest.raises(VeridicError) as raised:
        gateway.run(
            composer, view, policy=ApprovalPolicy(view), request_id="r1", context={"user": "ada"}
        )
    message = str(raised.value)
    assert "run(..., context=...)" in message
    assert "dict" in message
    assert "ToolContext[Session]" in message


# --- a resume given the composer the paused run was built with -----------------------


def _paused(audit: SQLiteAuditSink) -> tuple[ModelGateway, ToolView, Composer, RunResult[None]]:
    view = _registry().view()
    provider = ScriptedProvider(
        [{"tool_calls": [("c1", "refund_order", {"order_id": "A-1"})]}, {"text": "Refunded."}]
    )
    gateway = ModelGateway(provider, audit=audit)
    composer = _request(view).user("Refund A-1, please.")
    result = gateway.run(
        composer,
        view,
        policy=ApprovalPolicy(view),
        request_id="r1",
        defer=True,
        context=Session("ada"),
    )
    assert result.paused is not None
    return gateway, view, composer, result


def test_resuming_with_the_composer_of_the_paused_run_says_to_pass_a_fresh_one() -> None:
    # In one process (a CLI chat, a test) the composer is at hand, so a newcomer
    # passes it back; the message spoke of restore(), which the app never called.
    audit = SQLiteAuditSink(":memory:")
    gateway, view, composer, result = _paused(audit)
    assert result.paused is not None
    answers = {approval.digest: True for approval in result.pending}
    with pytest.raises(VeridicError) as raised:
        gateway.resume(
            result.paused,
            composer,
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
            context=Session("ada"),
        )
    message = str(raised.value)
    assert message.startswith("resume() got a composer that already holds")
    assert "Composer().system(" in message
    assert "nothing ran" in message
    assert audit.records(request_id="r1") == ()
    # and the paused run still resumes, with a composer built as the docs say
    fresh = _request(view)
    done = gateway.resume(
        result.paused,
        fresh,
        view,
        policy=ApprovalPolicy(view),
        answers=answers,
        context=Session("ada"),
    )
    assert done.text == "Refunded."


# --- a provider for blocking code in async code, and the other way round -----------


def test_a_scripted_provider_in_async_code_says_how_to_script_async_answers() -> None:
    # "ScriptedProvider(model='scripted') holds a sync client (NoneType): use send()":
    # it has no client, the app had called arun(), and asynchronous=True was the fix.
    view = _registry().view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Hello."}]), audit=SQLiteAuditSink(":memory:")
    )
    composer = _request(view).user("Hi")
    with pytest.raises(VeridicError) as raised:
        asyncio.run(
            gateway.arun(
                composer,
                view,
                policy=ApprovalPolicy(view),
                request_id="r1",
                context=Session("ada"),
            )
        )
    message = str(raised.value)
    assert "NoneType" not in message
    assert "asynchronous=True" in message
    assert "run()" in message


def test_a_scripted_provider_for_async_code_in_blocking_code_names_the_async_methods() -> None:
    view = _registry().view()
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Hello."}], asynchronous=True), audit=SQLiteAuditSink(":memory:")
    )
    with pytest.raises(VeridicError) as raised:
        gateway.run(
            _request(view).user("Hi"),
            view,
            policy=ApprovalPolicy(view),
            request_id="r1",
            context=Session("ada"),
        )
    message = str(raised.value)
    assert "NoneType" not in message
    assert "arun()" in message
    assert "asynchronous=False" in message


# --- veridic lint pointed at the system prompt --------------------------------------


def test_the_cli_pointed_at_a_trusted_text_does_not_name_a_private_class(tmp_path: Path) -> None:
    # `veridic lint app:SYSTEM` said "is a _Trusted": a class no user can look up.
    (tmp_path / "dayone.py").write_text(
        "from veridic import Registry, instruction\n"
        "SYSTEM = instruction('You help.')\n"
        "registry = Registry()\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, "-m", "veridic", "lint", "dayone:SYSTEM"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert "_Trusted" not in run.stderr
    assert "is a TrustedInstruction (a str)" in run.stderr
    assert "registry" in run.stderr
