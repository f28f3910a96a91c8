"""Calls run only from an answer whose stop reason says the model ended it.

The cut-off list was a deny list: an answer whose stop reason veridic did not know (a new
provider reason, a custom adapter's, ``str(FinishReason.MAX_TOKENS)``) let its calls run,
though it may have been cut off mid-call. Each test failed on the code before the fix.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_providers import CHAT_TOOL_CALL, VIEW, first_prompt, gateway

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    OpenAIChat,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)

SYSTEM = instruction("You look up orders.")

# The documented stop reasons of an answer the model ended (docs/providers.md), in lower
# case: OpenAI Chat and the compatible servers, OpenAI Responses, Anthropic and Bedrock
# Converse, Hugging Face TGI, Gemini, Cohere.
ENDED = frozenset(
    {
        "stop",
        "tool_calls",
        "function_call",
        "completed",
        "end_turn",
        "tool_use",
        "stop_sequence",
        "eos_token",
        "complete",
        "tool_call",
    }
)


def _view(ran: list[str]) -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up the status of one of the user's orders.

        Args:
            order_id: The order's number, e.g. 1042.
        """
        ran.append(f"get_order {order_id}")
        return "shipped"

    return registry.view()


def _answer(stop: str) -> dict[str, object]:
    return {"tool_calls": [("call-1", "get_order", {"order_id": 1042})], "stop_reason": stop}


def _run_tools(stop: str) -> tuple[list[str], SQLiteAuditSink]:
    """Send one request answered with a call and ``stop``, and run the reply's calls."""
    ran: list[str] = []
    view = _view(ran)
    audit = SQLiteAuditSink(":memory:")
    gw = ModelGateway(ScriptedProvider([_answer(stop)]), audit=audit)
    reply = gw.send(Composer().system(SYSTEM).user("Where is 1042?").build(), view, request_id="r")
    gw.run_tools(reply, policy=ApprovalPolicy(view))
    return ran, audit


_UNKNOWN = ["FinishReason.MAX_TOKENS", "max_tokens_reached", "OTHER", "continuation", "eos"]


@pytest.mark.parametrize("stop", _UNKNOWN)
def test_run_tools_refuses_the_calls_of_an_answer_whose_stop_reason_is_unknown(stop: str) -> None:
    with pytest.raises(VeridicError) as caught:
        _run_tools(stop)
    message = str(caught.value)
    assert f"stop reason {stop!r}" in message
    assert "not one veridic knows" in message
    assert "'get_order'" in message
    assert "none of them ran" in message
    assert "parse()" in message  # what an adapter of one's own does instead


def test_the_unknown_stop_reason_is_quoted_clipped() -> None:
    stop = "z" * 5000
    with pytest.raises(VeridicError) as caught:
        _run_tools(stop)
    message = str(caught.value)
    assert "z" * 61 not in message
    assert "(5000 chars)" in message


def test_an_empty_stop_reason_with_calls_is_refused() -> None:
    """No adapter sends an empty stop reason for an answer the model ended: OpenAI's chat
    stream refuses one without a finish_reason, and ScriptedProvider says ``tool_calls``
    unless told otherwise. An empty one says nothing of whether the model ended."""
    with pytest.raises(VeridicError, match="no stop reason"):
        _run_tools("")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_run_and_arun_refuse_an_unknown_stop_reason_before_any_call(asynchronous: bool) -> None:
    ran: list[str] = []
    view = _view(ran)
    audit = SQLiteAuditSink(":memory:")
    provider = ScriptedProvider([_answer("FinishReason.MAX_TOKENS")], asynchronous=asynchronous)
    gw = ModelGateway(provider, audit=audit)
    composer = Composer().system(SYSTEM).user("Where is 1042?")
    policy = ApprovalPolicy(view)

    def run() -> object:
        if asynchronous:
            return asyncio.run(gw.arun(composer, view, policy=policy, request_id="r"))
        return gw.run(composer, view, policy=policy, request_id="r")

    with pytest.raises(VeridicError, match="not one veridic knows"):
        run()
    assert ran == []
    assert audit.records() == ()


def test_arun_tools_refuses_an_unknown_stop_reason() -> None:
    ran: list[str] = []
    view = _view(ran)
    gw = ModelGateway(ScriptedProvider([_answer("weird")]), audit=SQLiteAuditSink(":memory:"))
    reply = gw.send(Composer().system(SYSTEM).user("Where is 1042?").build(), view, request_id="r")
    with pytest.raises(VeridicError, match="not one veridic knows"):
        asyncio.run(gw.arun_tools(reply, policy=ApprovalPolicy(view)))
    assert ran == []


def test_an_answer_without_calls_is_returned_whatever_its_stop_reason() -> None:
    answer = {"text": "Shipped.", "stop_reason": "OTHER"}
    gw = ModelGateway(ScriptedProvider([answer]), audit=SQLiteAuditSink(":memory:"))
    view = _view([])
    composer = Composer().system(SYSTEM).user("Where?")
    result = gw.run(composer, view, policy=ApprovalPolicy(view), request_id="r")
    assert result.text == "Shipped."


_REASONS = st.one_of(
    st.sampled_from(sorted(ENDED)).flatmap(
        lambda word: st.sampled_from([word, word.upper(), word.title()])
    ),
    st.sampled_from(
        ["max_tokens", "length", "incomplete:max_output_tokens", "SAFETY", "error", "paused"]
    ),
    st.text(max_size=30),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_REASONS)
def test_calls_run_exactly_when_the_stop_reason_says_the_model_ended(stop: str) -> None:
    ended = stop.lower() in ENDED
    try:
        ran, audit = _run_tools(stop)
    except VeridicError:
        assert not ended
    else:
        assert ended
        assert ran == ["get_order 1042"]
        assert len(audit.records()) == 1


# "paused" is the stop reason veridic gives the reply that resume() rebuilds from a paused
# run (whose answer was checked when the run paused); it was on the list of reasons whose
# calls run, so a provider, a proxy or an adapter that said "paused" (an answer the server
# paused before the model ended it, as Anthropic's pause_turn is) ran calls cut short.


@pytest.mark.parametrize("stop", ["paused", "PAUSED", "Paused"])
def test_a_provider_that_says_paused_does_not_get_its_calls_run(stop: str) -> None:
    with pytest.raises(VeridicError, match="not one veridic knows") as caught:
        _run_tools(stop)
    assert f"stop reason {stop!r}" in str(caught.value)


@pytest.mark.parametrize("stop", ["eos", "paused"])
def test_a_compatible_servers_unknown_finish_reason_is_refused_by_the_real_sdk(stop: str) -> None:
    body: dict[str, Any] = copy.deepcopy(CHAT_TOOL_CALL)
    body["choices"][0]["finish_reason"] = stop
    openai = pytest.importorskip("openai")
    server = FakeServer(http_module("openai"), [("json", body)])
    gw, _, audit = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match=f"stop reason '{stop}'"):
        gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert audit.records() == ()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_hand_built_reply_that_says_paused_runs_none_of_its_calls(asynchronous: bool) -> None:
    ran: list[str] = []
    view = _view(ran)
    audit = SQLiteAuditSink(":memory:")
    gw = ModelGateway(ScriptedProvider([_answer("tool_calls")]), audit=audit)
    sent = gw.send(Composer().system(SYSTEM).user("Where is 1042?").build(), view, request_id="r")
    reply = dataclasses.replace(sent, stop_reason="paused")
    policy = ApprovalPolicy(view)

    def run() -> object:
        if asynchronous:
            return asyncio.run(gw.arun_tools(reply, policy=policy))
        return gw.run_tools(reply, policy=policy)

    with pytest.raises(VeridicError, match="not one veridic knows"):
        run()
    assert ran == []
    assert audit.records() == ()


@pytest.mark.parametrize("stop", ["FinishReason.MAX_TOKENS", "paused", "length"])
def test_a_deferred_run_refuses_the_answer_before_it_pauses(stop: str) -> None:
    """resume() takes up the waiting calls under veridic's own stop reason (a PausedRun does
    not keep the answer's): the check is made before the run pauses, or never."""
    ran: list[str] = []
    registry = Registry()

    @registry.tool(kind="write")
    def cancel_order(order_id: int) -> str:
        """Cancel one of the user's orders.

        Args:
            order_id: The order's number, e.g. 1042.
        """
        ran.append(f"cancel_order {order_id}")
        return "cancelled"

    view = registry.view()
    answer = {"tool_calls": [("call-1", "cancel_order", {"order_id": 1042})], "stop_reason": stop}
    audit = SQLiteAuditSink(":memory:")
    gw = ModelGateway(ScriptedProvider([answer]), audit=audit)
    composer = Composer().system(SYSTEM).user("Cancel 1042.")
    with pytest.raises(VeridicError, match="none of them ran"):
        gw.run(composer, view, policy=ApprovalPolicy(view), request_id="r", defer=True)
    assert ran == []
    assert audit.records() == ()
