"""A second read of the fourth attacker review's fixes: what they broke or left open.

Each test failed on the code before its fix.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from test_deferred import CALLS, make_registry, system_part
from test_providers import CHAT_TOOL_CALL, MESSAGE, VIEW, first_prompt, gateway

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    ModelGateway,
    OpenAIChat,
    ScriptedProvider,
    SQLiteAuditSink,
    Usage,
    VeridicError,
)

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")


def _claude_stream(start_usage: dict[str, int], delta_usage: dict[str, int]) -> Usage | None:
    """The usage of a streamed Anthropic answer whose events carry these counts."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**MESSAGE, "content": [], "stop_reason": None, "usage": start_usage},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": delta_usage,
        },
        {"type": "message_stop"},
    ]
    server = FakeServer(http_module("anthropic"), [("sse", sse(events, named=True))])
    adapter = AnthropicMessages(
        server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9
    )
    gw, _, _ = gateway(adapter)
    with gw.stream(first_prompt(), VIEW, request_id="r") as stream:
        list(stream)
    return stream.reply.usage


def test_a_streamed_anthropic_answer_keeps_its_tokens_read_when_the_start_counts_no_output() -> (
    None
):
    # message_start read as a whole usage dropped its input_tokens when it gave no
    # output_tokens (a compatible server), and the reply counted 0 tokens read.
    assert _claude_stream({"input_tokens": 10}, {"output_tokens": 5}) == Usage(10, 5)


def test_a_streamed_anthropic_answer_that_counts_no_tokens_read_has_no_usage() -> None:
    # Without input_tokens at the start, the reply counted 0 tokens read, which a
    # Limits(tokens=...) let through; a send of the same answer gives no usage.
    assert _claude_stream({"output_tokens": 1}, {"output_tokens": 5}) is None
    assert _claude_stream({"input_tokens": 10, "output_tokens": 1}, {}) == Usage(10, 1)
    assert _claude_stream({"input_tokens": 10, "output_tokens": 1}, {"output_tokens": 5}) == (
        Usage(10, 5)
    )


def test_a_paused_run_retried_after_a_resume_that_failed_part_way_says_what_ran() -> None:
    # The refusal told the user to send the request anew, though the refund had run: a
    # request sent again may refund again. It now points to the request's records.
    ran: list[str] = []
    store = SQLiteAuditSink(":memory:")
    view = make_registry(ran=ran).view()
    first = ModelGateway(ScriptedProvider([CALLS]), audit=store).run(
        system_part(view).user("Refund 42."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert first.paused is not None
    store.save_paused(first.paused)
    for script in ([], [{"text": "Done."}]):  # the first resume's next model call fails
        paused = store.claim_paused("req-1")
        assert paused is not None
        view = make_registry(ran=ran).view()
        with pytest.raises(VeridicError) as raised:
            ModelGateway(ScriptedProvider(script), audit=store).resume(
                paused,
                system_part(view),
                view,
                policy=ApprovalPolicy(view),
                answers={approval.digest: True for approval in paused.approvals},
            )
        store.save_paused(paused)  # to retry, as claim_paused says
    assert ran.count("refund 42") == 1
    message = str(raised.value)
    assert "resumed already" in message
    assert "records(request_id)" in message
    assert "send the request anew" not in message


def _chat_with_legacy_call(legacy: dict[str, str]) -> OpenAIChat:
    body: Any = copy.deepcopy(CHAT_TOOL_CALL)
    body["choices"][0]["message"]["function_call"] = legacy
    server = FakeServer(http_module("openai"), [("json", body)])
    return OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")


def test_a_chat_message_whose_function_call_repeats_its_one_tool_call_is_read() -> None:
    # llama-cpp-python's server (chatml-function-calling, functionary) answers one call
    # both as tool_calls and as the legacy function_call: every such answer was refused,
    # though nothing of it vanishes (the call runs and is recorded from tool_calls).
    adapter = _chat_with_legacy_call({"name": "get_weather", "arguments": '{"city":"Oslo"}'})
    gw, _, _ = gateway(adapter)
    reply = gw.send(first_prompt(), VIEW, request_id="r")
    assert [(call.name, call.arguments) for call in reply.tool_calls] == [
        ("get_weather", '{"city":"Oslo"}')
    ]


@pytest.mark.parametrize(
    "legacy",
    [
        {"name": "get_weather", "arguments": '{"city":"Bergen"}'},
        {"name": "delete_account", "arguments": '{"city":"Oslo"}'},
    ],
    ids=["other-arguments", "other-name"],
)
def test_a_chat_message_whose_function_call_is_another_call_is_refused(
    legacy: dict[str, str],
) -> None:
    gw, _, _ = gateway(_chat_with_legacy_call(legacy))
    with pytest.raises(VeridicError, match="function_call"):
        gw.send(first_prompt(), VIEW, request_id="r")
