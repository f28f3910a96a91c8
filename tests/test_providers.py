"""The adapters against the real SDK packages, over a local fake transport (no network).

Each SDK gets an HTTP client whose transport is a mock: it records the request
the SDK sent and answers with a canned body (JSON, or server-sent events for a
stream). The request bodies are checked field by field against what the
prompt and the view say; the answers are parsed back into a Reply.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    Composer,
    MissingExtraError,
    ModelGateway,
    OpenAIChat,
    OpenAIResponses,
    Prompt,
    Registry,
    Reply,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
    untrusted,
)
from veridic.gateway import ModelCallLog
from veridic.providers import Adapter, Usage

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

SYSTEM = instruction("You answer questions about the weather.")


def make_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str, unit: str = "celsius") -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
            unit: "celsius" or "fahrenheit".
        """
        return f"Sunny in {city}"

    return registry.view()


VIEW = make_view()


def first_prompt() -> Prompt:
    return (
        Composer()
        .system(SYSTEM, VIEW.capability_section())
        .data("ticket:7", untrusted("Is it sunny in Oslo?", source="ticket:7"))
        .build()
    )


def second_prompt() -> Prompt:
    """After one round of tool use: an assistant turn with a call, and its result."""
    return (
        Composer()
        .system(SYSTEM, VIEW.capability_section())
        .user("Is it sunny in Oslo?")
        .assistant("Let me check.")
        .tool_call("call_1", "get_weather", {"city": "Oslo"})
        .tool_result("call_1", untrusted("Sunny in Oslo", source="tool:get_weather"))
        .build()
    )


def gateway(adapter: Adapter) -> tuple[ModelGateway, ModelCallLog, SQLiteAuditSink]:
    calls = ModelCallLog()
    audit = SQLiteAuditSink(":memory:")
    return ModelGateway(adapter, audit=audit, calls=calls), calls, audit


# --- OpenAI chat completions ---------------------------------------------------------------

CHAT_TOOL_CALL = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
        }
    ],
}


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


CHAT_STREAM = sse(
    [
        chat_chunk({"role": "assistant", "content": "Sunny"}),
        chat_chunk({"content": " in Oslo."}),
        chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"ci'},
                    }
                ]
            }
        ),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Oslo"}'}}]}),
        chat_chunk({}, finish="tool_calls"),
    ],
    done=True,
)


def test_openai_chat_request_body_is_the_prompt_and_the_view_specs() -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_TOOL_CALL)])
    adapter = OpenAIChat(
        server.client(openai, "OpenAI"), model="gpt-test", options={"temperature": 0}
    )
    gw, calls, _ = gateway(adapter)
    prompt = first_prompt()
    reply = gw.send(prompt, VIEW, request_id="req-1")
    path, body = server.sent[0]
    assert path.endswith("/chat/completions")
    assert set(body) == {"model", "messages", "tools", "temperature"}
    assert body["model"] == "gpt-test"
    assert body["temperature"] == 0
    assert body["messages"] == prompt.to_openai()
    assert body["messages"][0] == {"role": "system", "content": prompt.system}
    assert body["messages"][1]["role"] == "user"
    assert body["messages"][1]["content"] == prompt.messages[1].content
    assert body["tools"] == VIEW.tool_specs("openai")
    assert [t["function"]["name"] for t in body["tools"]] == ["get_tool_schema", "get_weather"]
    assert reply.tool_calls[0].name == "get_weather"
    assert json.loads(reply.tool_calls[0].arguments) == {"city": "Oslo"}
    assert (reply.stop_reason, reply.response_id, reply.model) == (
        "tool_calls",
        "chatcmpl-1",
        "gpt-test",
    )
    assert calls.records()[0].api == "openai.chat.completions"


def test_openai_chat_second_turn_sends_the_call_and_its_result() -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_TOOL_CALL)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    prompt = second_prompt()
    gw.send(prompt, VIEW, request_id="req-1")
    messages = server.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        }
    ]
    assert messages[3]["tool_call_id"] == "call_1"
    assert messages[3]["content"] == prompt.messages[3].content


def test_openai_chat_tool_calls_run_through_the_view() -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_TOOL_CALL)])
    gw, _, audit = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    (outcome,) = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert outcome.result.value == "Sunny in Oslo"
    assert audit.records()[0].prompt_sha256 == first_prompt().sha256


def test_openai_chat_stream_assembles_text_and_tool_call_pieces() -> None:
    server = FakeServer(http_module("openai"), [("sse", CHAT_STREAM)])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        pieces = list(stream)
    assert pieces == ["Sunny", " in Oslo."]
    assert server.body["stream"] is True
    reply = stream.reply
    assert reply.text == "Sunny in Oslo."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_2", "get_weather", '{"city":"Oslo"}')
    ]
    assert reply.stop_reason == "tool_calls"
    assert calls.records()[0].streamed is True


def test_openai_chat_stream_is_read_like_a_send_refusal_and_bare_calls_included() -> None:
    refused = sse(
        [
            chat_chunk({"role": "assistant", "refusal": "I can't "}),
            chat_chunk({"refusal": "help with that."}, finish="stop"),
        ],
        done=True,
    )
    bare_call = {"index": 0, "id": "call_3", "type": "function", "function": {"name": "ping"}}
    bare = sse([chat_chunk({"tool_calls": [bare_call]}, finish="tool_calls")], done=True)
    server = FakeServer(http_module("openai"), [("sse", refused), ("sse", bare)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        # The refusal is the reply's text, so it is shown as it arrives, as text is.
        assert list(stream) == ["I can't ", "help with that."]
    assert (stream.reply.text, stream.reply.stop_reason) == ("I can't help with that.", "stop")
    with gw.stream(first_prompt(), VIEW, request_id="req-2") as stream:
        list(stream)
    assert [(c.id, c.name, c.arguments) for c in stream.reply.tool_calls] == [
        ("call_3", "ping", "{}")
    ]


def test_openai_chat_stream_cut_short_is_refused() -> None:
    cut = sse([chat_chunk({"content": "Sunny"})], done=True)
    server = FakeServer(http_module("openai"), [("sse", cut)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    stream = gw.stream(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError) as raised:
        list(stream)
    message = str(raised.value)
    assert "no finish_reason arrived" in message
    assert "OpenAIChat(model='gpt-test')" in message
    assert "send the request again" in message


def _call_piece(index: int, **fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, **fields}]}


WEATHER_CALL = _call_piece(
    0, id="call_A", type="function", function={"name": "get_weather", "arguments": ""}
)


@pytest.mark.parametrize(
    ("chunks", "complaint"),
    [
        (  # a call appended after the choice finished would run under a "stop"
            [
                chat_chunk({"content": "Done."}, finish="stop"),
                chat_chunk(WEATHER_CALL),
                chat_chunk(_call_piece(0, function={"arguments": '{"city":"Late"}'})),
            ],
            "choice 0 went on after its finish_reason",
        ),
        (  # two calls merged into one under an id nobody sent
            [
                chat_chunk(WEATHER_CALL),
                chat_chunk(_call_piece(0, id="call_B", function={"arguments": "{}"})),
                chat_chunk({}, finish="tool_calls"),
            ],
            "tool call 0 of choice 0 got a second id ('call_B' after 'call_A')",
        ),
        (  # an index the SDK cannot place: refused as veridic's error, the stream released
            [
                chat_chunk(_call_piece(2, id="call_C", function={"name": "get_weather"})),
                chat_chunk({}, finish="tool_calls"),
            ],
            "its chunks do not fit together",
        ),
    ],
    ids=["after-finish", "second-id", "skipped-index"],
)
def test_an_openai_chat_stream_that_is_not_one_answer_is_refused_and_released(
    chunks: list[dict[str, Any]], complaint: str
) -> None:
    server = FakeServer(http_module("openai"), [("sse", sse(chunks, done=True))])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    stream = gw.stream(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match=re.escape(complaint)):
        list(stream)
    with pytest.raises(VeridicError):
        stream.reply  # noqa: B018  # no answer to read: nothing of it can be run
    assert len(calls.records()) == 1  # the call was recorded as sent, no answer after it


def test_openai_chat_stream_joins_a_surrogate_pair_split_between_chunks() -> None:
    """The SDK decodes each event alone: the halves of one emoji arrive as two lone
    surrogates. The tool must get, and the audit hash, what a send would give."""
    chunks = [
        chat_chunk(WEATHER_CALL),
        chat_chunk(_call_piece(0, function={"arguments": '{"city":"Oslo\ud83d'})),
        chat_chunk(_call_piece(0, function={"arguments": '\ude00"}'})),
        chat_chunk({}, finish="tool_calls"),
    ]
    server = FakeServer(http_module("openai"), [("sse", sse(chunks, done=True))])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    (call,) = stream.reply.tool_calls
    assert json.loads(call.arguments) == {"city": "Oslo\U0001f600"}


def test_openai_chat_async_send_and_stream() -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_TOOL_CALL), ("sse", CHAT_STREAM)])
    gw, _, _ = gateway(OpenAIChat(server.async_client(openai, "AsyncOpenAI"), model="gpt-test"))

    async def run() -> tuple[Reply, list[str], Reply]:
        reply = await gw.asend(first_prompt(), VIEW, request_id="req-1")
        stream = await gw.astream(first_prompt(), VIEW, request_id="req-1")
        async with stream:
            pieces = [piece async for piece in stream]
        return reply, pieces, stream.reply

    reply, pieces, streamed = asyncio.run(run())
    assert reply.tool_calls[0].id == "call_1"
    assert pieces == ["Sunny", " in Oslo."]
    assert streamed.tool_calls[0].id == "call_2"
    assert server.sent[0][1]["tools"] == VIEW.tool_specs("openai")


def test_openai_sync_gateway_refuses_an_async_client() -> None:
    server = FakeServer(http_module("openai"), [])
    gw, calls, _ = gateway(OpenAIChat(server.async_client(openai, "AsyncOpenAI"), model="m"))
    with pytest.raises(VeridicError, match=r"holds an async client \(AsyncOpenAI\)"):
        gw.send(first_prompt(), VIEW, request_id="req-1")
    assert server.sent == []
    assert calls.records() == ()


def test_openai_adapter_refuses_a_client_of_another_sdk() -> None:
    server = FakeServer(http_module("anthropic"), [])
    with pytest.raises(VeridicError) as raised:
        OpenAIChat(server.client(anthropic, "Anthropic"), model="m")
    message = str(raised.value)
    assert "got an Anthropic, which has no chat.completions.create()" in message
    assert "pass an openai.OpenAI or openai.AsyncOpenAI client" in message


# --- OpenAI responses ------------------------------------------------------------------------

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-test",
    "status": "completed",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
            "status": "completed",
        },
    ],
}


def responses_stream(final: dict[str, Any]) -> str:
    return sse(
        [
            {"type": "response.created", "sequence_number": 0, "response": {**final, "output": []}},
            {
                "type": "response.output_text.delta",
                "sequence_number": 1,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "Let me ",
                "logprobs": [],
            },
            {
                "type": "response.output_text.delta",
                "sequence_number": 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "check.",
                "logprobs": [],
            },
            {"type": "response.completed", "sequence_number": 3, "response": final},
        ],
        named=True,
    )


def test_openai_responses_request_body_puts_the_system_message_in_instructions() -> None:
    server = FakeServer(http_module("openai"), [("json", RESPONSE)])
    gw, calls, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test"))
    prompt = second_prompt()
    reply = gw.send(prompt, VIEW, request_id="req-1")
    path, body = server.sent[0]
    assert path.endswith("/responses")
    assert set(body) == {"model", "instructions", "input", "tools"}
    assert body["instructions"] == prompt.system
    assert body["input"] == [
        {"role": "user", "content": "Is it sunny in Oslo?"},
        {"role": "assistant", "content": "Let me check."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": prompt.messages[3].content,
        },
    ]
    chat_specs = VIEW.tool_specs("openai")
    assert body["tools"] == [
        {
            "type": "function",
            "name": spec["function"]["name"],
            "description": spec["function"]["description"],
            "parameters": spec["function"]["parameters"],
            "strict": False,
        }
        for spec in chat_specs
    ]
    assert reply.text == "Let me check."
    assert [(c.id, c.name) for c in reply.tool_calls] == [("call_1", "get_weather")]
    assert (reply.stop_reason, reply.response_id) == ("completed", "resp_1")
    assert calls.records()[0].api == "openai.responses"


@pytest.mark.parametrize("key", ["previous_response_id", "conversation", "instructions"])
def test_openai_responses_refuses_options_that_add_hidden_context(key: str) -> None:
    server = FakeServer(http_module("openai"), [])
    with pytest.raises(VeridicError, match=f"options set {key}, which the gateway sets"):
        OpenAIResponses(server.client(openai, "OpenAI"), model="m", options={key: "x"})


def test_openai_responses_failed_response_raises_with_the_reason() -> None:
    failed = {**RESPONSE, "status": "failed", "error": {"code": "x", "message": "overloaded"}}
    server = FakeServer(http_module("openai"), [("json", failed)])
    gw, _, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test"))
    with pytest.raises(VeridicError, match=r"the response failed \(the server said 'overloaded'\)"):
        gw.send(first_prompt(), VIEW, request_id="req-1")


def test_openai_responses_stream_and_async() -> None:
    stream_body = responses_stream(RESPONSE)
    server = FakeServer(http_module("openai"), [("sse", stream_body), ("sse", stream_body)])
    sync_gw, _, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test"))
    with sync_gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        assert list(stream) == ["Let me ", "check."]
    assert stream.reply.tool_calls[0].id == "call_1"
    assert server.body["stream"] is True
    async_gw, _, _ = gateway(
        OpenAIResponses(server.async_client(openai, "AsyncOpenAI"), model="gpt-test")
    )

    async def run() -> tuple[list[str], Reply]:
        stream = await async_gw.astream(first_prompt(), VIEW, request_id="req-2")
        async with stream:
            pieces = [piece async for piece in stream]
        return pieces, stream.reply

    pieces, reply = asyncio.run(run())
    assert pieces == ["Let me ", "check."]
    assert reply.text == "Let me check."


# --- Anthropic messages ---------------------------------------------------------------------

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}

MESSAGE_STREAM = sse(
    [
        {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Let me "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "check."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ],
    named=True,
)


def test_anthropic_request_body_is_the_prompt_and_the_view_specs() -> None:
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    adapter = AnthropicMessages(
        server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=256
    )
    gw, calls, _ = gateway(adapter)
    prompt = second_prompt()
    reply = gw.send(prompt, VIEW, request_id="req-1")
    path, body = server.sent[0]
    assert path.endswith("/messages")
    assert set(body) == {"model", "max_tokens", "system", "messages", "tools"}
    assert (body["model"], body["max_tokens"]) == ("claude-test", 256)
    assert body["system"] == prompt.system
    rendered = prompt.to_anthropic()
    assert body["messages"] == rendered["messages"]
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["messages"][2]["content"][0]["tool_use_id"] == "call_1"
    assert body["tools"] == VIEW.tool_specs("anthropic")
    assert reply.text == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_1", "get_weather", '{"city": "Oslo"}')
    ]
    assert (reply.stop_reason, reply.response_id, reply.model) == (
        "tool_use",
        "msg_1",
        "claude-test",
    )
    assert calls.records()[0].api == "anthropic.messages"


def test_anthropic_request_carries_no_text_block_of_only_whitespace() -> None:
    """A model's "\n\n" before its tool call, sent back: the SDK's request holds the call
    alone (the Messages API rejects a text block of only whitespace)."""
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    adapter = AnthropicMessages(server.client(anthropic, "Anthropic"), model="c", max_tokens=8)
    gw, _, _ = gateway(adapter)
    prompt = (
        Composer()
        .system(SYSTEM, VIEW.capability_section())
        .user("Is it sunny in Oslo?")
        .assistant("\n\n")
        .tool_call("call_1", "get_weather", {"city": "Oslo"})
        .tool_result("call_1", untrusted("Sunny in Oslo", source="tool:get_weather"))
        .build()
    )
    gw.send(prompt, VIEW, request_id="req-1")
    assert [m["role"] for m in server.body["messages"]] == ["user", "assistant", "user"]
    assert server.body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}
    ]


def test_anthropic_prompt_without_system_message_sends_no_system() -> None:
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    adapter = AnthropicMessages(server.client(anthropic, "Anthropic"), model="c", max_tokens=8)
    gw, _, _ = gateway(adapter)
    gw.send(Composer().user("Weather in Oslo?").build(), VIEW, request_id="req-1")
    assert "system" not in server.body


def test_an_anthropic_stream_that_starts_a_block_twice_is_refused() -> None:
    """A second start of block 0 would replace the text already streamed to the user
    with a tool call: the reply on record would not be what the user saw."""
    replaced: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "I will not delete anything."},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        },
        {"type": "message_stop"},
    ]
    server = FakeServer(http_module("anthropic"), [("sse", sse(replaced, named=True))])
    gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )
    with (
        pytest.raises(VeridicError, match="started content block 0 twice"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_anthropic_stream_and_async_give_the_same_reply_as_a_send() -> None:
    http = http_module("anthropic")
    server = FakeServer(http, [("json", MESSAGE), ("sse", MESSAGE_STREAM), ("sse", MESSAGE_STREAM)])
    sync_gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )
    sent = sync_gw.send(first_prompt(), VIEW, request_id="req-1")
    with sync_gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        assert list(stream) == ["Let me ", "check."]
    assert server.body["stream"] is True
    async_gw, _, _ = gateway(
        AnthropicMessages(
            server.async_client(anthropic, "AsyncAnthropic"), model="claude-test", max_tokens=9
        )
    )

    async def run() -> Reply:
        reply = await async_gw.astream(first_prompt(), VIEW, request_id="req-2")
        async with reply:
            assert [piece async for piece in reply] == ["Let me ", "check."]
        return reply.reply

    streamed_async = asyncio.run(run())
    for streamed in (stream.reply, streamed_async):
        assert (streamed.text, streamed.tool_calls, streamed.stop_reason) == (
            sent.text,
            sent.tool_calls,
            sent.stop_reason,
        )


def test_anthropic_async_send() -> None:
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    gw, _, _ = gateway(
        AnthropicMessages(server.async_client(anthropic, "AsyncAnthropic"), model="c", max_tokens=9)
    )
    reply = asyncio.run(gw.asend(first_prompt(), VIEW, request_id="req-1"))
    assert reply.tool_calls[0].id == "toolu_1"


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_anthropic_needs_a_positive_max_tokens(max_tokens: int) -> None:
    server = FakeServer(http_module("anthropic"), [])
    with pytest.raises(VeridicError, match=r"pass e\.g\. max_tokens=1024"):
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="c", max_tokens=max_tokens)


# --- missing extras -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "build"),
    [
        ("openai", lambda: OpenAIChat(model="m")),
        ("openai", lambda: OpenAIResponses(model="m")),
        ("anthropic", lambda: AnthropicMessages(model="m", max_tokens=1)),
    ],
)
def test_missing_sdk_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str, build: Callable[[], object]
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as raised:
        build()
    message = str(raised.value)
    assert f"needs the {module!r} package, which is not installed" in message
    assert f"pip install 'veridic[{module}]'" in message


def test_without_a_client_the_adapter_builds_the_sdk_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    assert type(OpenAIChat(model="m").client).__name__ == "OpenAI"
    assert type(AnthropicMessages(model="m", max_tokens=1).client).__name__ == "Anthropic"


def test_every_adapter_reads_the_tokens_the_provider_counted() -> None:
    chat = {
        **CHAT_TOOL_CALL,
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
    }
    responses = {**RESPONSE, "usage": {"input_tokens": 30, "output_tokens": 4, "total_tokens": 34}}
    cached = {
        **MESSAGE,
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 1000,
            "output_tokens": 5,
        },
    }
    server = FakeServer(http_module("openai"), [("json", chat), ("json", responses)])
    chat_gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    responses_gw, _, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test"))
    claude = FakeServer(http_module("anthropic"), [("json", cached), ("sse", MESSAGE_STREAM)])
    claude_gw, _, _ = gateway(
        AnthropicMessages(claude.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )

    assert chat_gw.send(first_prompt(), VIEW, request_id="r").usage == Usage(12, 7)
    assert responses_gw.send(first_prompt(), VIEW, request_id="r").usage == Usage(30, 4)
    sent = claude_gw.send(first_prompt(), VIEW, request_id="r")
    assert sent.usage == Usage(1110, 5)  # cache writes and reads are tokens the model read
    assert sent.latency > 0
    with claude_gw.stream(first_prompt(), VIEW, request_id="r") as stream:
        list(stream)
    assert stream.reply.usage == Usage(10, 5)  # message_start's input, message_delta's output


def test_each_answer_is_recorded_after_its_call_with_usage_and_latency(tmp_path: Path) -> None:
    chat = {
        **CHAT_TOOL_CALL,
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
    }
    server = FakeServer(http_module("openai"), [("json", chat)])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-9")
    (record,) = calls.replies("req-9")
    assert (record.prompt_sha256, record.response_id, record.model) == (
        calls.records("req-9")[0].prompt_sha256,
        "chatcmpl-1",
        "gpt-test",
    )
    assert (record.stop_reason, record.tool_calls, record.usage) == (
        "tool_calls",
        ("get_weather",),
        Usage(12, 7),
    )
    assert record.latency == reply.latency

    # The SQLite store keeps them, a stream's once it has ended, and reads them back.
    claude = FakeServer(http_module("anthropic"), [("sse", MESSAGE_STREAM)])
    with SQLiteAuditSink(tmp_path / "audit.db") as store:
        claude_gw = ModelGateway(
            AnthropicMessages(
                claude.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9
            ),
            audit=store,
        )
        with claude_gw.stream(first_prompt(), VIEW, request_id="req-10") as stream:
            assert store.model_replies("req-10") == ()  # sent and recorded, not yet answered
            list(stream)
    with SQLiteAuditSink(tmp_path / "audit.db") as reopened:
        (stored,) = reopened.model_replies()
        assert len(reopened.model_calls("req-10")) == 1
    assert (stored.request_id, stored.usage, stored.tool_calls) == (
        "req-10",
        Usage(10, 5),
        ("get_weather",),
    )
    assert stored.stop_reason == "tool_use"


def test_an_answer_refused_for_its_call_ids_is_still_recorded() -> None:
    twice = {
        **CHAT_TOOL_CALL,
        "choices": [
            {
                **CHAT_TOOL_CALL["choices"][0],  # type: ignore[index]  # a literal of the test
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "a", "arguments": "{}"},
                        },
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "b", "arguments": "{}"},
                        },
                    ],
                },
            }
        ],
    }
    server = FakeServer(http_module("openai"), [("json", twice)])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with pytest.raises(VeridicError, match="twice"):
        gw.send(first_prompt(), VIEW, request_id="r")
    assert calls.replies("r")[0].tool_calls == ("a", "b")


def test_an_openai_chat_stream_counts_its_tokens_when_asked_to() -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    last = {**chat_chunk({}), "choices": [], "usage": usage}  # the chunk include_usage adds
    body = sse([chat_chunk({"content": "Hi"}), chat_chunk({}, finish="stop"), last], done=True)
    server = FakeServer(http_module("openai"), [("sse", body), ("sse", body)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    asked = {"stream_options": {"include_usage": True}}
    with gw.stream(first_prompt(), VIEW, request_id="r", options=asked) as stream:
        assert list(stream) == ["Hi"]
    assert server.body["stream_options"] == {"include_usage": True}
    assert stream.reply.usage == Usage(9, 3)
