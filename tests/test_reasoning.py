"""Reasoning items (Anthropic thinking blocks, OpenAI Responses reasoning items) across turns.

The model's reasoning goes back to the model that wrote it, byte for byte, on
the assistant turn that produced it; it is covered by the prompt's hash, it
is never message text, and it goes to its own provider's API only. The agent
loops run against the real SDKs over a mock HTTP transport (as in
test_providers.py), and against ScriptedProvider.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from hypothesis import given
from hypothesis import strategies as st

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    Composer,
    ModelGateway,
    OpenAIChat,
    OpenAIResponses,
    Prompt,
    ReasoningItem,
    Registry,
    Reply,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
    untrusted,
)
from veridic.gateway import ModelCallLog
from veridic.prompt import Message
from veridic.providers import Adapter

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

SYSTEM = instruction("You answer questions about the weather.")

THINKING = {
    "type": "thinking",
    "thinking": "The user asks about Oslo.\nI should call get_weather with city=Oslo.",
    "signature": "EqQBCkgIARABGAIiQL+7m0Yl2k1dqZ6a1/xP3n+Q==\u00e9",
}
REDACTED = {
    "type": "redacted_thinking",
    "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
}
REASONING = {
    "type": "reasoning",
    "id": "rs_68a1",
    "summary": [{"type": "summary_text", "text": "**Checking Oslo**\n\nI will call get_weather."}],
    "encrypted_content": "gAAAAABoq1N0-encrypted+/reasoning==",
}


def make_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        return f"Sunny in {city}"

    return registry.view()


VIEW = make_view()


def question() -> Composer:
    return Composer().system(SYSTEM, VIEW.capability_section()).user("Is it sunny in Oslo?")


def thinking_turn(*items: ReasoningItem, text: str = "Let me check.") -> Prompt:
    return (
        question()
        .assistant(text, reasoning=items)
        .tool_call("call_1", "get_weather", {"city": "Oslo"})
        .tool_result("call_1", untrusted("Sunny in Oslo", source="tool:get_weather"))
        .build()
    )


def gateway(adapter: Adapter) -> tuple[ModelGateway, ModelCallLog]:
    calls = ModelCallLog()
    return ModelGateway(adapter, audit=SQLiteAuditSink(":memory:"), calls=calls), calls


def canonical(value: object) -> str:
    """Exact JSON text: tells 1 from 1.0 from true, and -0.0 from 0.0."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# --- the value --------------------------------------------------------------------------------


def test_reasoning_item_keeps_every_key_and_gives_a_fresh_copy_each_time() -> None:
    block = {**THINKING, "cache_hint": {"new": [1, 2.5, None, True]}}
    item = ReasoningItem.of("anthropic", block)
    first, second = item.block(), item.block()
    assert canonical(first) == canonical(block)
    assert first["type"] == "thinking"
    assert second["type"] == "thinking"
    first["signature"] = "forged"
    assert second["signature"] == THINKING["signature"]
    assert item.block() == second
    assert item.block() is not item.block()
    assert (item.provider, item.kind) == ("anthropic", "thinking")
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.json_text = "{}"  # type: ignore[misc]  # frozen dataclass under test


def test_reasoning_item_restored_from_its_json_text_is_the_same_item() -> None:
    item = ReasoningItem.of("openai", REASONING)
    assert ReasoningItem("openai", item.json_text) == item
    spaced = json.dumps(dict(reversed(list(REASONING.items()))), indent=2)
    assert ReasoningItem("openai", spaced) == item
    assert ReasoningItem("openai", spaced).json_text == item.json_text


def test_reasoning_item_repr_names_the_block_without_showing_the_reasoning() -> None:
    text = repr(ReasoningItem.of("anthropic", THINKING))
    assert text.startswith("ReasoningItem('anthropic', thinking, ")
    assert "Oslo" not in text


@pytest.mark.parametrize(
    ("build", "what", "todo"),
    [
        (lambda: ReasoningItem("google", "{}"), "'google' is not a provider", "pass 'anthropic'"),  # type: ignore[arg-type]  # a wrong provider under test
        (lambda: ReasoningItem("anthropic", "{nope"), "is not JSON", "pass the json_text"),
        (
            lambda: ReasoningItem.of("anthropic", {"type": "text", "text": "hi"}),
            "a block of type 'text'",
            "pass a reasoning block of the reply",
        ),
        (
            lambda: ReasoningItem.of("openai", THINKING),
            "a block of type 'thinking'",
            "pass a reasoning block of the reply",
        ),
        (
            lambda: ReasoningItem.of("anthropic", {"type": "thinking", "thinking": "x"}),
            "has no str at 'signature'",
            "exactly as the provider returned it",
        ),
        (
            lambda: ReasoningItem.of("anthropic", {**REDACTED, "n": float("nan")}),
            "the block['n'] is nan",
            "JSON values only",
        ),
        (
            lambda: ReasoningItem.of("openai", {**REASONING, "tags": {"a"}}),
            "the block['tags'] is a set",
            "JSON values only",
        ),
        (
            lambda: ReasoningItem.of("openai", {**REASONING, "x": {1: "one"}}),
            "has the key 1, an int",
            "exactly as the provider returned it",
        ),
    ],
)
def test_reasoning_item_refuses_what_is_not_a_reasoning_block(
    build: Any, what: str, todo: str
) -> None:
    with pytest.raises(VeridicError) as raised:
        build()
    message = str(raised.value)
    assert what in message  # what
    assert "ReasoningItem" in message  # where
    assert todo in message  # what to do


@given(kind=st.text(min_size=300, max_size=2000))
def test_reasoning_item_quotes_a_block_type_it_refuses_clipped(kind: str) -> None:
    """The type of a block that is no reasoning block is the server's text: quoted whole, a
    long one filled the message (and the log line that carries it)."""
    with pytest.raises(VeridicError, match="reasoning blocks are of type") as raised:
        ReasoningItem("openai", json.dumps({"type": kind}))
    assert len(str(raised.value)) < 1000
    part = {"type": "reasoning", "id": "rs_1", "summary": [{"type": kind, "text": "x"}]}
    with pytest.raises(VeridicError, match="summary") as raised:
        ReasoningItem("openai", json.dumps(part))
    assert len(str(raised.value)) < 1000


# --- on the assistant turn --------------------------------------------------------------------


def test_assistant_reasoning_stays_on_the_turn_its_tool_calls_join() -> None:
    item = ReasoningItem.of("anthropic", THINKING)
    prompt = thinking_turn(item)
    assistant = prompt.messages[2]
    assert (assistant.role, assistant.content, assistant.reasoning) == (
        "assistant",
        "Let me check.",
        (item,),
    )
    assert [c.id for c in assistant.tool_calls] == ["call_1"]
    assert prompt.reasoning == (item,)


def test_reasoning_is_not_message_text_and_has_no_provenance_span() -> None:
    plain = thinking_turn()
    carried = thinking_turn(ReasoningItem.of("anthropic", THINKING))
    assert carried.spans == plain.spans
    assert [m.content for m in carried.messages] == [m.content for m in plain.messages]
    assert all(THINKING["thinking"] not in m.content for m in carried.messages)


def test_a_turn_with_only_reasoning_renders_as_a_valid_turn() -> None:
    thought = ReasoningItem.of("anthropic", THINKING)
    prompt = question().assistant(reasoning=[thought]).user("And Bergen?").build()
    messages = prompt.to_anthropic()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [THINKING]
    reasoned = ReasoningItem.of("openai", REASONING)
    provider = ScriptedProvider([{"text": "ok"}], responses=True)
    gw, _ = gateway(provider)
    gw.send(
        question().assistant(reasoning=[reasoned]).user("And Bergen?").build(), VIEW, request_id="r"
    )
    assert provider.requests[0]["input"] == [
        {"role": "user", "content": "Is it sunny in Oslo?"},
        REASONING,
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "And Bergen?"},
    ]


@pytest.mark.parametrize(
    ("reasoning", "what"),
    [
        ([THINKING], "got a dict as reasoning item 0"),
        (ReasoningItem.of("anthropic", THINKING), "got one ReasoningItem as reasoning"),
    ],
)
def test_assistant_refuses_reasoning_that_is_not_a_sequence_of_items(
    reasoning: Any, what: str
) -> None:
    with pytest.raises(VeridicError) as raised:
        Composer().user("Hi").assistant("Hello.", reasoning=reasoning)
    message = str(raised.value)
    assert what in message
    assert "assistant()" in message
    assert "reasoning=" in message or "Reply.reasoning" in message


def test_reasoning_on_a_turn_that_is_not_the_assistants_is_refused() -> None:
    item = ReasoningItem.of("anthropic", THINKING)
    with pytest.raises(VeridicError) as raised:
        Message("user", "hi", ("hi",), reasoning=(item,))
    message = str(raised.value)
    assert "a user message got 1 reasoning item" in message
    assert "Composer.assistant(text, reasoning=...)" in message


# --- the hash ---------------------------------------------------------------------------------


def test_prompts_without_reasoning_keep_the_hashes_they_had() -> None:
    """Pinned before reasoning items existed: audit records keyed by them stay valid.

    Re-pinned in this release, when the text itself changed: the version 2 encoding
    of Prompt.sha256 (hashed piece by piece), the tool result written as a
    datamarked block, marked by lines, the fence preamble's sentence on a
    block's last lines, the reminder line after a marked block, and the worked
    example at the end of the datamark preamble (CHANGELOG, Unreleased).
    """
    prompt = (
        Composer()
        .system(SYSTEM)
        .user("Is it sunny in Oslo?")
        .assistant("Let me check.")
        .tool_call("call_1", "get_weather", {"city": "Oslo"})
        .tool_result("call_1", untrusted("Sunny in Oslo", source="tool:get_weather"))
        .assistant("It is sunny.")
        .build()
    )
    assert prompt.sha256 == "1e342c6114496d1f0ee03619718ce3e5e1997e732481f2ae5ae2089a52950984"
    assert (
        Composer().user("hi").build().sha256
        == "052d4f9d6c47cf1f672a345c2596a60dbc75a5fe2b0f4158b979db883c874c12"
    )
    assert prompt.without_reasoning().sha256 == prompt.sha256


def test_reasoning_changes_the_hash_and_without_reasoning_restores_it() -> None:
    plain = thinking_turn()
    thought = ReasoningItem.of("anthropic", THINKING)
    carried = thinking_turn(thought)
    assert carried.sha256 != plain.sha256
    assert carried.without_reasoning().sha256 == plain.sha256
    assert carried.without_reasoning("anthropic") == plain
    assert carried.without_reasoning("openai") == carried


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def extra_keys(*taken: str) -> st.SearchStrategy[dict[str, object]]:
    return st.dictionaries(
        st.text(max_size=10).filter(lambda key: key not in taken), JSON_VALUES, max_size=3
    )


ANTHROPIC_BLOCKS = st.builds(
    lambda extra, thinking, signature: {
        **extra,
        "type": "thinking",
        "thinking": thinking,
        "signature": signature,
    },
    extra_keys("type", "thinking", "signature"),
    st.text(),
    st.text(),
) | st.builds(
    lambda extra, data: {**extra, "type": "redacted_thinking", "data": data},
    extra_keys("type", "data"),
    st.text(),
)
OPENAI_BLOCKS = st.builds(
    lambda extra, rid, summary, encrypted: {
        **extra,
        "type": "reasoning",
        "id": rid,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
        "encrypted_content": encrypted,
    },
    extra_keys("type", "id", "summary", "encrypted_content", "content"),
    st.text(),
    st.lists(st.text(), max_size=3),
    st.none() | st.text(),
)


@given(block=ANTHROPIC_BLOCKS, data=st.data())
def test_property_anthropic_blocks_go_back_exactly_first_and_weigh_in_the_hash(
    block: dict[str, object], data: st.DataObject
) -> None:
    other = data.draw(st.just(copy.deepcopy(block)) | ANTHROPIC_BLOCKS)
    first = thinking_turn(ReasoningItem.of("anthropic", block))
    second = thinking_turn(ReasoningItem.of("anthropic", other))
    content = first.to_anthropic()["messages"][1]["content"]
    assert canonical(content[0]) == canonical(block)
    assert [b["type"] for b in content[1:]] == ["text", "tool_use"]
    assert (first.sha256 == second.sha256) == (canonical(block) == canonical(other))
    assert first.sha256 != thinking_turn().sha256


@given(block=OPENAI_BLOCKS, data=st.data())
def test_property_openai_items_go_back_exactly_in_place_and_weigh_in_the_hash(
    block: dict[str, object], data: st.DataObject
) -> None:
    other = data.draw(st.just(copy.deepcopy(block)) | OPENAI_BLOCKS)
    first = thinking_turn(ReasoningItem.of("openai", block))
    second = thinking_turn(ReasoningItem.of("openai", other))
    provider = ScriptedProvider([{"text": "ok"}], responses=True)
    gateway(provider)[0].send(first, VIEW, request_id="req-p")
    sent = provider.requests[0]["input"]
    assert isinstance(sent, list)
    assert canonical(sent[1]) == canonical(block)
    assert [item.get("type", item.get("role")) for item in sent[2:]] == [
        "assistant",
        "function_call",
        "function_call_output",
    ]
    assert (first.sha256 == second.sha256) == (canonical(block) == canonical(other))


# --- each provider's items go to that provider only -------------------------------------------


def test_anthropic_reasoning_is_refused_by_the_openai_apis() -> None:
    prompt = thinking_turn(ReasoningItem.of("anthropic", THINKING))
    with pytest.raises(VeridicError) as raised:
        prompt.to_openai()
    message = str(raised.value)
    assert f"prompt {prompt.sha256[:12]} holds anthropic reasoning (thinking in message 2)" in (
        message
    )
    assert "the OpenAI Chat Completions API (to_openai) cannot take" in message
    assert "the Anthropic Messages API (AnthropicMessages)" in message
    assert "prompt.without_reasoning('anthropic')" in message
    server = FakeServer(http_module("openai"), [])
    gw, calls = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="o4-mini"))
    with pytest.raises(VeridicError, match=r"the OpenAI Responses API \(OpenAIResponses\) cannot"):
        gw.send(prompt, VIEW, request_id="req-1")
    assert server.sent == []
    assert calls.records() == ()


@pytest.mark.parametrize("api", ["anthropic", "chat"])
def test_openai_reasoning_is_refused_by_the_anthropic_and_chat_apis(api: str) -> None:
    prompt = thinking_turn(ReasoningItem.of("openai", REASONING))
    server = FakeServer(http_module(api if api == "anthropic" else "openai"), [])
    adapter: Adapter = (
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="c", max_tokens=9)
        if api == "anthropic"
        else OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")
    )
    gw, calls = gateway(adapter)
    with pytest.raises(VeridicError) as raised:
        gw.send(prompt, VIEW, request_id="req-1")
    message = str(raised.value)
    assert "holds openai reasoning (reasoning in message 2)" in message
    assert "only to the OpenAI Responses API (OpenAIResponses)" in message
    assert "prompt.without_reasoning('openai')" in message
    assert server.sent == []
    assert calls.records() == ()


def test_reasoning_left_out_knowingly_lets_the_prompt_go_elsewhere() -> None:
    prompt = thinking_turn(ReasoningItem.of("openai", REASONING))
    server = FakeServer(http_module("anthropic"), [("json", ANTHROPIC_ANSWER)])
    gw, calls = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="c", max_tokens=9)
    )
    lighter = prompt.without_reasoning("openai")
    gw.send(lighter, VIEW, request_id="req-1")
    assert "rs_68a1" not in json.dumps(server.body)
    assert calls.records()[0].prompt_sha256 == lighter.sha256 != prompt.sha256


# --- the SDKs over a mock transport -----------------------------------------------------------


ANTHROPIC_TOOL_USE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        THINKING,
        REDACTED,
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
ANTHROPIC_ANSWER = {
    **ANTHROPIC_TOOL_USE,
    "id": "msg_2",
    "content": [{"type": "text", "text": "It is sunny in Oslo."}],
    "stop_reason": "end_turn",
}


def anthropic_stream(
    *, signed_start: bool, after_signature: str = "", second_signature: str = ""
) -> str:
    """A thinking stream; its thinking block starts with an empty signature or none, and
    ``after_signature`` (when given) comes as a thinking_delta after the signature,
    ``second_signature`` as a second signature_delta."""

    def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": body}

    thinking, signature = str(THINKING["thinking"]), str(THINKING["signature"])
    return sse(
        [
            {
                "type": "message_start",
                "message": {**ANTHROPIC_TOOL_USE, "content": [], "stop_reason": None},
            },
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "thinking",
                    "thinking": "",
                    **({"signature": ""} if signed_start else {}),
                },
            },
            delta(0, {"type": "thinking_delta", "thinking": thinking[:20]}),
            delta(0, {"type": "thinking_delta", "thinking": thinking[20:]}),
            delta(0, {"type": "signature_delta", "signature": signature}),
            *(
                [delta(0, {"type": "thinking_delta", "thinking": after_signature})]
                if after_signature
                else []
            ),
            *(
                [delta(0, {"type": "signature_delta", "signature": second_signature})]
                if second_signature
                else []
            ),
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": REDACTED},
            {"type": "content_block_stop", "index": 1},
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "text", "text": ""},
            },
            delta(2, {"type": "text_delta", "text": "Let me check."}),
            {"type": "content_block_stop", "index": 2},
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {},
                },
            },
            delta(3, {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}),
            {"type": "content_block_stop", "index": 3},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ],
        named=True,
    )


def second_turn(gw: ModelGateway, reply: Reply, composer: Composer) -> Prompt:
    outcomes = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    return reply.record(composer, outcomes).build()


def test_anthropic_thinking_tool_loop_sends_the_blocks_back_byte_exact_before_tool_use() -> None:
    server = FakeServer(
        http_module("anthropic"), [("json", ANTHROPIC_TOOL_USE), ("json", ANTHROPIC_ANSWER)]
    )
    thinking = {"type": "enabled", "budget_tokens": 1024}
    adapter = AnthropicMessages(
        server.client(anthropic, "Anthropic"),
        model="claude-test",
        max_tokens=2048,
        options={"thinking": thinking},
    )
    gw, calls = gateway(adapter)
    composer = question()
    reply = gw.send(composer.build(), VIEW, request_id="req-1")
    assert [item.block() for item in reply.reasoning] == [THINKING, REDACTED]
    assert reply.text == "Let me check."
    follow_up = second_turn(gw, reply, composer)
    final = gw.send(follow_up, VIEW, request_id="req-1")
    assert final.text == "It is sunny in Oslo."
    assert final.reasoning == ()
    body = server.body
    assert body["thinking"] == thinking
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [
        THINKING,
        REDACTED,
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    raw = server.raw[-1].decode()
    for value in (THINKING["signature"], THINKING["thinking"], REDACTED["data"]):
        assert json.dumps(value)[1:-1] in raw or json.dumps(value, ensure_ascii=False)[1:-1] in raw
    assert calls.records()[1].prompt_sha256 == follow_up.sha256


def test_anthropic_stream_assembles_thinking_and_signature_deltas_into_the_block() -> None:
    http = http_module("anthropic")
    server = FakeServer(
        http,
        [
            ("json", ANTHROPIC_TOOL_USE),
            ("sse", anthropic_stream(signed_start=True)),
            ("sse", anthropic_stream(signed_start=False)),
        ],
    )
    sync_gw, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )
    sent = sync_gw.send(question().build(), VIEW, request_id="req-1")
    with sync_gw.stream(question().build(), VIEW, request_id="req-1") as stream:
        assert list(stream) == ["Let me check."]  # thinking is not answer text
    async_gw, _ = gateway(
        AnthropicMessages(
            server.async_client(anthropic, "AsyncAnthropic"), model="claude-test", max_tokens=9
        )
    )

    async def run() -> Reply:
        streamed = await async_gw.astream(question().build(), VIEW, request_id="req-2")
        async with streamed:
            assert [piece async for piece in streamed] == ["Let me check."]
        return streamed.reply

    for reply in (stream.reply, asyncio.run(run())):
        assert reply.reasoning == sent.reasoning
        assert [item.block() for item in reply.reasoning] == [THINKING, REDACTED]
        assert reply.tool_calls == sent.tool_calls


def test_anthropic_stream_thinking_after_the_blocks_signature_is_refused() -> None:
    """The signature covers the thinking before it: thinking streamed after it would be
    replayed unsigned, and the API refuse the next turn with an opaque error."""
    server = FakeServer(
        http_module("anthropic"),
        [("sse", anthropic_stream(signed_start=True, after_signature=" and more"))],
    )
    gw, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )
    with (
        pytest.raises(VeridicError, match=r"thinking_delta for content block 0 after its sig"),
        gw.stream(question().build(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


@pytest.mark.parametrize(
    "second", [str(THINKING["signature"]) + "tail", "EqQBother", str(THINKING["signature"])]
)
def test_anthropic_stream_a_second_signature_for_a_signed_block_is_refused(second: str) -> None:
    """A block has one signature, sent whole: a second one silently replaced the first
    (or, were it a piece, left the block signed with the last piece only), and the block
    sent back was refused by the API with an error naming neither the stream nor the block.
    Even the same signature again is not what the API sends, and is refused."""
    server = FakeServer(
        http_module("anthropic"),
        [("sse", anthropic_stream(signed_start=True, second_signature=second))],
    )
    gw, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )
    with (
        pytest.raises(VeridicError, match=r"a second signature_delta for content block 0"),
        gw.stream(question().build(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def _two_thinking_blocks_stream() -> str:
    """Interleaved thinking: a signed thinking block, redacted thinking, a second thinking
    block streamed and signed after the first was signed, then the answer."""

    def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": body}

    def thinking_block(index: int, text: str, signature: str) -> list[dict[str, Any]]:
        start = {"type": "thinking", "thinking": "", "signature": ""}
        return [
            {"type": "content_block_start", "index": index, "content_block": start},
            delta(index, {"type": "thinking_delta", "thinking": text[:5]}),
            delta(index, {"type": "thinking_delta", "thinking": text[5:]}),
            delta(index, {"type": "signature_delta", "signature": signature}),
            {"type": "content_block_stop", "index": index},
        ]

    return sse(
        [
            {
                "type": "message_start",
                "message": {**ANTHROPIC_ANSWER, "content": [], "stop_reason": None},
            },
            *thinking_block(0, "First, the city.", "sig-one"),
            {"type": "content_block_start", "index": 1, "content_block": REDACTED},
            {"type": "content_block_stop", "index": 1},
            *thinking_block(2, "Then, the weather.", "sig-two"),
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {"type": "text", "text": ""},
            },
            delta(3, {"type": "text_delta", "text": "Sunny."}),
            {"type": "content_block_stop", "index": 3},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
            {"type": "message_stop"},
        ],
        named=True,
    )


def test_anthropic_stream_several_signed_thinking_blocks_are_each_kept_whole() -> None:
    """The refusals of thinking after a signature and of a second signature are per block:
    a block streamed after another was signed, and redacted thinking between, are read."""
    server = FakeServer(http_module("anthropic"), [("sse", _two_thinking_blocks_stream())])
    gw, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9)
    )
    with gw.stream(question().build(), VIEW, request_id="req-1") as stream:
        assert list(stream) == ["Sunny."]
    assert [item.block() for item in stream.reply.reasoning] == [
        {"type": "thinking", "thinking": "First, the city.", "signature": "sig-one"},
        REDACTED,
        {"type": "thinking", "thinking": "Then, the weather.", "signature": "sig-two"},
    ]


def openai_response(*output: dict[str, Any], rid: str = "resp_1") -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1,
        "model": "o4-mini",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": list(output),
    }


FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Oslo"}',
    "status": "completed",
}
OPENAI_TOOL_USE = openai_response(REASONING, FUNCTION_CALL)
OPENAI_ANSWER = openai_response(
    {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is sunny in Oslo.", "annotations": []}],
    },
    rid="resp_2",
)


def openai_stream(*, item_events: bool, final: dict[str, Any] = OPENAI_TOOL_USE) -> str:
    partial = {**REASONING, "summary": [], "encrypted_content": "gAAAA"}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**OPENAI_TOOL_USE, "output": []}},
    ]
    if item_events:
        events += [
            {"type": "response.output_item.added", "output_index": 0, "item": partial},
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_68a1",
                "output_index": 0,
                "summary_index": 0,
                "delta": "**Checking Oslo**",
            },
            {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
            {"type": "response.output_item.done", "output_index": 1, "item": FUNCTION_CALL},
        ]
    events.append({"type": "response.completed", "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return sse(events, named=True)


def test_openai_responses_reasoning_stays_on_the_reply_not_on_the_recorded_turn() -> None:
    # Replayed without the ids of the items that followed it, a reasoning item is refused.
    server = FakeServer(http_module("openai"), [("json", OPENAI_TOOL_USE), ("json", OPENAI_ANSWER)])
    gw, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="o4-mini"))
    composer = question()
    reply = gw.send(composer.build(), VIEW, request_id="req-1")
    assert [item.block() for item in reply.reasoning] == [REASONING]
    follow_up = second_turn(gw, reply, composer)
    assert follow_up.reasoning == ()
    gw.send(follow_up, VIEW, request_id="req-1")
    assert [i.get("type", i.get("role")) for i in server.body["input"]] == [
        "user",
        "function_call",
        "function_call_output",
    ]


def test_openai_responses_tool_loop_sends_reasoning_put_on_a_turn_back_in_place() -> None:
    server = FakeServer(http_module("openai"), [("json", OPENAI_TOOL_USE), ("json", OPENAI_ANSWER)])
    options = {"include": ["reasoning.encrypted_content"], "store": False}
    gw, _ = gateway(
        OpenAIResponses(server.client(openai, "OpenAI"), model="o4-mini", options=options)
    )
    composer = question()
    reply = gw.send(composer.build(), VIEW, request_id="req-1")
    assert [item.block() for item in reply.reasoning] == [REASONING]
    assert (reply.text, [c.id for c in reply.tool_calls]) == ("", ["call_1"])
    composer.assistant(reply.text, reasoning=reply.reasoning)
    follow_up = second_turn(gw, reply, composer)
    assert gw.send(follow_up, VIEW, request_id="req-1").text == "It is sunny in Oslo."
    body = server.body
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"] == [
        {"role": "user", "content": "Is it sunny in Oslo?"},
        REASONING,
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": follow_up.messages[-1].content,
        },
    ]
    assert json.dumps(REASONING["encrypted_content"]) in server.raw[-1].decode()


@pytest.mark.parametrize(
    ("item_events", "final"),
    [
        (True, OPENAI_TOOL_USE),
        (False, OPENAI_TOOL_USE),
        (True, openai_response(FUNCTION_CALL)),
    ],
    ids=["item_done_and_final", "final_only", "item_done_only"],
)
def test_openai_responses_stream_reads_the_finished_reasoning_items(
    item_events: bool, final: dict[str, Any]
) -> None:
    stream_body = openai_stream(item_events=item_events, final=final)
    server = FakeServer(http_module("openai"), [("sse", stream_body), ("sse", stream_body)])
    sync_gw, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="o4-mini"))
    with sync_gw.stream(question().build(), VIEW, request_id="req-1") as stream:
        assert list(stream) == []
    async_gw, _ = gateway(
        OpenAIResponses(server.async_client(openai, "AsyncOpenAI"), model="o4-mini")
    )

    async def run() -> Reply:
        streamed = await async_gw.astream(question().build(), VIEW, request_id="req-2")
        async with streamed:
            assert [piece async for piece in streamed] == []
        return streamed.reply

    for reply in (stream.reply, asyncio.run(run())):
        assert [item.block() for item in reply.reasoning] == [REASONING]
        assert [c.id for c in reply.tool_calls] == ["call_1"]


# --- ScriptedProvider -------------------------------------------------------------------------


@pytest.mark.parametrize("provider_name", ["anthropic", "openai"])
def test_scripted_agent_loop_carries_reasoning_to_the_next_request(provider_name: str) -> None:
    block = THINKING if provider_name == "anthropic" else REASONING
    item = ReasoningItem.of("anthropic" if provider_name == "anthropic" else "openai", block)
    script: list[dict[str, object]] = [
        {"reasoning": [item], "tool_calls": [("call_1", "get_weather", {"city": "Oslo"})]},
        {"text": "Sunny."},
    ]
    provider = (
        ScriptedProvider(script, spec_format="anthropic")
        if provider_name == "anthropic"
        else ScriptedProvider(script, responses=True)
    )
    gw, _ = gateway(provider)
    composer = question()
    with gw.stream(composer.build(), VIEW, request_id="req-1") as stream:
        list(stream)
    assert stream.reply.reasoning == (item,)
    if provider_name == "openai":  # record() leaves OpenAI items to the caller
        composer.assistant(reasoning=stream.reply.reasoning)
    gw.send(second_turn(gw, stream.reply, composer), VIEW, request_id="req-1")
    request = provider.requests[1]
    if provider_name == "anthropic":
        messages = request["messages"]
        assert isinstance(messages, list)
        assert [b["type"] for b in messages[1]["content"]] == ["thinking", "tool_use"]
        assert messages[1]["content"][0] == THINKING
    else:
        sent = request["input"]
        assert isinstance(sent, list)
        assert [i.get("type", i.get("role")) for i in sent] == [
            "user",
            "reasoning",
            "function_call",
            "function_call_output",
        ]
        assert sent[1] == REASONING


def test_scripted_chat_shape_refuses_reasoning_as_chat_completions_would() -> None:
    item = ReasoningItem.of("openai", REASONING)
    provider = ScriptedProvider([{"reasoning": [item], "text": "Hmm."}, {"text": "ok"}])
    gw, _ = gateway(provider)
    composer = question()
    reply = gw.send(composer.build(), VIEW, request_id="req-1")
    follow_up = composer.assistant(reply.text, reasoning=reply.reasoning).user("Bergen?").build()
    with pytest.raises(VeridicError, match="Chat Completions API"):
        gw.send(follow_up, VIEW, request_id="req-1")


def test_scripted_reasoning_must_be_reasoning_items() -> None:
    gw, _ = gateway(ScriptedProvider([{"reasoning": [THINKING]}]))
    with pytest.raises(VeridicError) as raised:
        gw.send(question().build(), VIEW, request_id="req-1")
    message = str(raised.value)
    assert "a scripted answer's reasoning must be a list of ReasoningItem" in message
    assert 'ReasoningItem.of("anthropic"' in message


def test_scripted_responses_shape_is_openai_only() -> None:
    with pytest.raises(VeridicError) as raised:
        ScriptedProvider([], spec_format="anthropic", responses=True)
    message = str(raised.value)
    assert "the Responses shape is OpenAI's" in message
    assert "pass spec_format='openai'" in message
