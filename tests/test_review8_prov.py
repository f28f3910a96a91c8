"""An eighth review of the provider adapters, the gateway and their telemetry.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``), and reads
spans with the OpenTelemetry SDK's in-memory exporter where spans are the point; each
failed on the code before its fix.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_providers import (
    CHAT_TOOL_CALL,
    MESSAGE,
    MESSAGE_STREAM,
    RESPONSE,
    VIEW,
    chat_chunk,
    first_prompt,
    gateway,
)

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    OpenAIChat,
    OpenAIResponses,
    Reply,
    VeridicError,
)
from veridic.providers import Adapter, Usage
from veridic.testing import adversarial_text

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _stream_chat(chunks: list[dict[str, Any]]) -> Reply:
    server = FakeServer(http_module("openai"), [("sse", sse(chunks, done=True))])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    return stream.reply


def _piece(**fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, **fields}]}


# --- a streamed call that repeats its id and name in every chunk ---------------------------------


def test_a_chat_stream_that_repeats_a_calls_id_and_name_reads_like_the_answer_sent_whole() -> None:
    """Some OpenAI-compatible servers send a call's id, type and name again with each piece
    of its arguments. The SDK's merge joins every string it is given, so the call ran as
    ``get_weatherget_weather`` under the id ``call_Acall_A``, which nobody sent (and which
    the provider refuses when its result goes back): the same answer sent whole is
    ``get_weather`` under ``call_A``."""
    head = {"id": "call_A", "type": "function"}
    reply = _stream_chat(
        [
            chat_chunk(_piece(**head, function={"name": "get_weather", "arguments": '{"city":'})),
            chat_chunk(_piece(**head, function={"name": "get_weather", "arguments": '"Oslo"}'})),
            chat_chunk({}, finish="tool_calls"),
        ]
    )
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_A", "get_weather", {"city": "Oslo"})
    ]


def test_two_pieces_of_one_call_in_one_chunk_that_repeat_its_id_are_read_once() -> None:
    head = {"index": 0, "id": "call_A", "type": "function"}
    both = {
        "tool_calls": [
            {**head, "function": {"name": "get_weather", "arguments": '{"city":'}},
            {**head, "function": {"name": "get_weather", "arguments": '"Oslo"}'}},
        ]
    }
    reply = _stream_chat([chat_chunk(both), chat_chunk({}, finish="tool_calls")])
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_A", "get_weather", '{"city":"Oslo"}')
    ]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # A lone surrogate cannot go over the fake server's UTF-8 (test_providers covers a pair).
    city=adversarial_text().filter(lambda text: not any("\ud800" <= c <= "\udfff" for c in text)),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4),
    repeat=st.booleans(),
)
def test_a_streamed_call_reads_as_the_call_sent_whole_however_it_is_cut(
    city: str, cuts: list[int], repeat: bool
) -> None:
    """For any arguments, cut into pieces anywhere, with or without the id and name sent
    again with each piece, the streamed call is the call sent whole."""
    arguments = json.dumps({"city": city}, ensure_ascii=False)
    bounds = sorted({0, len(arguments), *(min(cut, len(arguments)) for cut in cuts)})
    pieces = [arguments[a:b] for a, b in itertools.pairwise(bounds)] or [""]
    head = {"id": "call_A", "type": "function"}
    chunks = [
        chat_chunk(
            _piece(
                **(head if repeat or at == 0 else {}),
                function={
                    **({"name": "get_weather"} if repeat or at == 0 else {}),
                    "arguments": piece,
                },
            )
        )
        for at, piece in enumerate(pieces)
    ]
    streamed = _stream_chat([*chunks, chat_chunk({}, finish="tool_calls")])
    whole = _copy(CHAT_TOOL_CALL)
    whole["choices"][0]["message"]["tool_calls"][0].update(
        id="call_A", function={"name": "get_weather", "arguments": arguments}
    )
    server = FakeServer(http_module("openai"), [("json", whole)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    sent = gw.send(first_prompt(), VIEW, request_id="req-1")
    assert streamed.tool_calls == sent.tool_calls


# --- an Anthropic thread: the server puts an earlier conversation before the prompt ----------

THREAD = {"type": "continue", "previous_message_id": "msg_earlier"}


@pytest.mark.parametrize(
    "options",
    [
        {"extra_body": {"thread": THREAD}},
        {"thread": THREAD},
        {"extra_body": {"thread": {"type": "create"}}},
    ],
    ids=["extra_body", "option", "create"],
)
def test_an_anthropic_thread_is_refused_when_the_adapter_is_built(options: dict[str, Any]) -> None:
    """The Messages API's ``thread`` (the SDK's beta ``messages.create`` takes it, and
    ``extra_body`` sends it through the plain one) has the server hold the conversation and
    resume it: the model read the turns of an earlier request, which the prompt whose
    sha256 the record names does not hold, as with the Responses API's
    ``previous_response_id``. ``{"type": "create"}`` is no use to a gateway that sends
    each prompt whole, and only starts what a later request would resume."""
    server = FakeServer(http_module("anthropic"), [])
    with pytest.raises(VeridicError, match=r"set (extra_body\['thread'\]|thread)=") as raised:
        AnthropicMessages(
            server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9, options=options
        )
    assert "earlier request" in str(raised.value)


def test_an_anthropic_thread_is_refused_as_a_calls_option_before_anything_is_sent() -> None:
    server = FakeServer(http_module("anthropic"), [])
    gw, calls, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    with pytest.raises(VeridicError, match="thread"):
        gw.send(
            first_prompt(), VIEW, request_id="req-1", options={"extra_body": {"thread": THREAD}}
        )
    assert calls.records() == ()
    assert server.sent == []


# --- two calls in the answer to a request that allowed one ---------------------------------------


def _copy(body: object) -> Any:
    return copy.deepcopy(body)


def _two_chat_calls() -> Any:
    body = _copy(CHAT_TOOL_CALL)
    calls = body["choices"][0]["message"]["tool_calls"]
    calls.append({**calls[0], "id": "call_2", "function": {**calls[0]["function"]}})
    calls[1]["function"]["arguments"] = '{"city":"Bergen"}'
    return body


def _two_responses_calls() -> Any:
    body = _copy(RESPONSE)
    call = body["output"][1]
    body["output"].append({**call, "id": "fc_2", "call_id": "call_2", "arguments": "{}"})
    return body


def _two_anthropic_calls() -> Any:
    body = _copy(MESSAGE)
    block = body["content"][1]
    body["content"].append({**block, "id": "toolu_2", "input": {"city": "Bergen"}})
    return body


def _chat(options: dict[str, Any]) -> Adapter:
    server = FakeServer(http_module("openai"), [("json", _two_chat_calls())])
    return OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test", options=options)


def _responses(options: dict[str, Any]) -> Adapter:
    server = FakeServer(http_module("openai"), [("json", _two_responses_calls())])
    return OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test", options=options)


def _claude(options: dict[str, Any]) -> Adapter:
    server = FakeServer(http_module("anthropic"), [("json", _two_anthropic_calls())])
    client = server.client(anthropic, "Anthropic")
    return AnthropicMessages(client, model="claude-t", max_tokens=9, options=options)


ONE_AT_MOST = [
    (_chat, {"parallel_tool_calls": False}, "parallel_tool_calls=False"),
    (_chat, {"extra_body": {"parallel_tool_calls": False}}, "parallel_tool_calls=False"),
    (_responses, {"parallel_tool_calls": False}, "parallel_tool_calls=False"),
    (
        _claude,
        {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
        "disable_parallel_tool_use",
    ),
]


@pytest.mark.parametrize(
    ("adapter", "options", "named"),
    ONE_AT_MOST,
    ids=["chat", "chat-extra_body", "responses", "anthropic"],
)
def test_two_calls_answering_a_request_for_one_at_most_are_refused_and_recorded(
    adapter: Any, options: dict[str, Any], named: str
) -> None:
    """The application asked for one call at a time (the second often needs the first's
    result); a model that ignores it, or a proxy, answered with two, and both ran, each
    approved on its own, in an order nobody chose. The answer is recorded, then refused
    before anything of it runs, as an answer whose call ids cannot be answered is."""
    gw, calls, _ = gateway(adapter(options))
    with pytest.raises(VeridicError, match=named) as raised:
        gw.send(first_prompt(), VIEW, request_id="req-1")
    assert "2 tool calls" in str(raised.value)
    assert "nothing of it was run" in str(raised.value)
    (answer,) = calls.replies("req-1")
    assert answer.tool_calls == ("get_weather", "get_weather")


@pytest.mark.parametrize(
    ("adapter", "options"),
    [
        (_chat, {}),
        (_chat, {"parallel_tool_calls": True}),
        (_responses, {"parallel_tool_calls": None}),
        (_claude, {"tool_choice": {"type": "auto", "disable_parallel_tool_use": False}}),
    ],
    ids=["chat", "chat-true", "responses-none", "anthropic-false"],
)
def test_two_calls_answering_a_request_that_allows_them_both_run(
    adapter: Any, options: dict[str, Any]
) -> None:
    gw, _, _ = gateway(adapter(options))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    outcomes = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert [outcome.call.id for outcome in outcomes] == [c.id for c in reply.tool_calls]
    assert len(outcomes) == 2


# --- Anthropic usage: read as the SDK reads it, streamed or sent ---------------------------------

CLAUDE_USAGE = {
    "input_tokens": 176,
    "cache_read_input_tokens": 1024,
    "cache_creation_input_tokens": 0,
    "output_tokens": 300,
    "output_tokens_details": {"thinking_tokens": 256},
}


def _claude_stream(start: dict[str, Any], delta: dict[str, Any]) -> str:
    """MESSAGE_STREAM with the usage of its message_start and message_delta replaced."""
    events = [
        json.loads(line[6:]) for line in MESSAGE_STREAM.splitlines() if line.startswith("data: ")
    ]
    events[0]["message"]["usage"] = start
    (at,) = [i for i, event in enumerate(events) if event["type"] == "message_delta"]
    events[at]["usage"] = delta
    return sse(events, named=True)


def _claude_usage(*replies: tuple[str, object]) -> list[Usage | None]:
    server = FakeServer(http_module("anthropic"), list(replies))
    gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    usages = [gw.send(first_prompt(), VIEW, request_id="req-1").usage]
    with gw.stream(first_prompt(), VIEW, request_id="req-2") as stream:
        list(stream)
    return [*usages, stream.reply.usage]


def _parts(usage: Usage | None) -> tuple[int, ...]:
    assert usage is not None
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_input_tokens,
        usage.cache_creation_input_tokens,
        usage.reasoning_output_tokens,
    )


def test_anthropic_usage_counts_thinking_tokens_and_the_stream_reads_the_final_counts() -> None:
    """The Messages API says how many of the tokens written were thinking
    (``output_tokens_details.thinking_tokens``); it was read as 0, where OpenAI's
    ``reasoning_tokens`` are read. And a stream's ``message_delta`` carries the final,
    cumulative counts, which the SDK reads over ``message_start``'s (a proxy that counts
    the prompt only at the end sends 0 at the start): the stream read the start's, so the
    same answer cost other tokens streamed than sent, and ``Limits(tokens=...)`` counted
    short."""
    sent = {**_copy(MESSAGE), "usage": CLAUDE_USAGE}
    start = {"input_tokens": 0, "output_tokens": 1}
    streamed = _claude_stream(start, CLAUDE_USAGE)
    whole, piecewise = _claude_usage(("json", sent), ("sse", streamed))
    assert _parts(whole) == (1200, 300, 1024, 0, 256)
    assert _parts(piecewise) == _parts(whole)


def test_an_anthropic_stream_keeps_the_starts_counts_the_delta_leaves_out() -> None:
    start = {"input_tokens": 176, "cache_read_input_tokens": 1024, "output_tokens": 1}
    delta = {"output_tokens": 300, "output_tokens_details": {"thinking_tokens": 256}}
    (_, piecewise) = _claude_usage(("json", _copy(MESSAGE)), ("sse", _claude_stream(start, delta)))
    assert _parts(piecewise) == (1200, 300, 1024, 0, 256)


# --- an Anthropic stream's call that gives a key twice -------------------------------------------


def test_an_anthropic_streamed_call_that_gives_a_key_twice_is_not_read_as_its_last_value() -> None:
    """The stream's ``input_json_delta`` s spell ``{"city": "Oslo", "city": "Bergen"}``:
    the adapter re-read the text and kept the last value, so the call ran for Bergen with
    nothing said, where the same call over Chat Completions is refused as arguments that
    read two ways. It now reaches the dispatcher as the model wrote it, and is refused."""
    events = [
        json.loads(line[6:]) for line in MESSAGE_STREAM.splitlines() if line.startswith("data: ")
    ]
    for event in events:
        if event.get("delta", {}).get("type") == "input_json_delta":
            event["delta"]["partial_json"] = event["delta"]["partial_json"].replace(
                '"Oslo"}', '"Oslo", "city": "Bergen"}'
            )
    server = FakeServer(http_module("anthropic"), [("sse", sse(events, named=True))])
    gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    (call,) = stream.reply.tool_calls
    assert "Oslo" in call.arguments
    (outcome,) = gw.run_tools(stream.reply, policy=ApprovalPolicy(VIEW))
    assert not outcome.result.ok
    assert "the key 'city' is given twice" in outcome.text


# --- OpenRouter presets: a system prompt and tools stored on the server --------------------------


def _openrouter(model: str = "openai/gpt-4o", **options: object) -> OpenAIChat:
    server = FakeServer(http_module("openai"), [])
    client = openai.OpenAI(
        api_key="k",
        base_url="https://openrouter.ai/api/v1",
        http_client=http_module("openai").Client(
            transport=http_module("openai").MockTransport(server.handle)
        ),
    )
    return OpenAIChat(client, model=model, options=options)


@pytest.mark.parametrize(
    "model", ["@preset/support-bot", "openai/gpt-4o@preset/support-bot", " @PRESET/x "]
)
def test_an_openrouter_preset_named_as_the_model_is_refused(model: str) -> None:
    """OpenRouter applies a preset named in the model: its stored system prompt, and its
    server tools (web search, subagents), reach the model outside the prompt whose sha256
    the record names, and outside the view, as ``:online`` does."""
    with pytest.raises(VeridicError, match=r"preset.*system prompt"):
        _openrouter(model)


@pytest.mark.parametrize(
    "options",
    [
        {"extra_body": {"preset": "support-bot"}},
        {"extra_body": {"models": ["openai/gpt-4o", "x/y@preset/support-bot"]}},
    ],
    ids=["preset-field", "fallback-model"],
)
def test_an_openrouter_preset_given_in_the_options_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(VeridicError, match=r"preset"):
        _openrouter(**options)
    gw, _, _ = gateway(_openrouter())
    with pytest.raises(VeridicError, match=r"preset"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options=options)


def test_a_model_whose_name_only_mentions_a_preset_is_kept() -> None:
    assert _openrouter("acme/preset-tuned-7b").model == "acme/preset-tuned-7b"


# --- an Anthropic stream that goes on after message_stop -----------------------------------------

LATE_CALL = [
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Late"}'},
    },
    {"type": "content_block_stop", "index": 2},
]
LATE_STOP = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}
]


@pytest.mark.parametrize("late", [LATE_CALL, LATE_STOP], ids=["call", "message_delta"])
def test_an_anthropic_stream_that_goes_on_after_message_stop_is_refused(
    late: list[dict[str, Any]],
) -> None:
    """A proxy that appends a second answer's events after ``message_stop`` had the call it
    carried run (and its stop reason and counts replace the first's), as a chat completion
    piece after its finish_reason did before that was refused."""
    events = [
        json.loads(line[6:]) for line in MESSAGE_STREAM.splitlines() if line.startswith("data: ")
    ]
    server = FakeServer(http_module("anthropic"), [("sse", sse(events + late, named=True))])
    gw, calls, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    stream = gw.stream(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match="after message_stop"):
        list(stream)
    with pytest.raises(VeridicError):
        stream.reply  # noqa: B018  # no answer to read: nothing of it can be run
    assert calls.replies("req-1") == ()


# --- a chat stream that finishes twice -----------------------------------------------------------


def test_a_chat_stream_whose_choice_finishes_twice_with_other_reasons_is_refused() -> None:
    """A call cut off at the output limit (``length``) is not run; a second finish chunk
    saying ``tool_calls`` replaced the reason, and the cut-off call ran as a whole one."""
    chunks = [
        chat_chunk(
            _piece(
                id="call_A",
                type="function",
                function={"name": "get_weather", "arguments": '{"city": "Os'},
            )
        ),
        chat_chunk({}, finish="length"),
        chat_chunk({}, finish="tool_calls"),
    ]
    with pytest.raises(VeridicError, match=r"finished twice \('length', then 'tool_calls'\)"):
        _stream_chat(chunks)


def test_a_chat_stream_that_repeats_its_finish_reason_reads_as_one_answer() -> None:
    chunks = [
        chat_chunk({"content": "Sunny."}),
        chat_chunk({}, finish="stop"),
        chat_chunk({}, finish="stop"),
    ]
    reply = _stream_chat(chunks)
    assert (reply.text, reply.stop_reason) == ("Sunny.", "stop")


def test_an_anthropic_stream_that_stops_twice_for_other_reasons_is_refused() -> None:
    """As in a chat stream: a second ``message_delta`` saying ``tool_use`` replaced the
    ``max_tokens`` of an answer cut off at the output limit, and its cut-off call ran."""
    events = [
        json.loads(line[6:]) for line in MESSAGE_STREAM.splitlines() if line.startswith("data: ")
    ]
    (at,) = [i for i, event in enumerate(events) if event["type"] == "message_delta"]
    cut = {**events[at], "delta": {"stop_reason": "max_tokens", "stop_sequence": None}}
    events[at:at] = [cut]
    server = FakeServer(http_module("anthropic"), [("sse", sse(events, named=True))])
    gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    with (
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
        pytest.raises(VeridicError, match=r"stopped twice \('max_tokens', then 'tool_use'\)"),
    ):
        list(stream)


# --- finish reasons of compatible servers that cut the answer off --------------------------------


@pytest.mark.parametrize(
    "reason", ["insufficient_system_resource", "model_length", "error", "abort"]
)
def test_a_call_cut_off_by_a_compatible_server_does_not_run(reason: str) -> None:
    """DeepSeek ends an answer its servers could not finish with
    ``insufficient_system_resource``, Mistral one that filled the context window with
    ``model_length``, OpenRouter and Mistral one whose generation failed mid-way with
    ``error``, vLLM an aborted one with ``abort``: the calls of such an answer may be cut
    short (a path or a filter missing its tail, still valid JSON), and ran as whole ones."""
    body = _copy(CHAT_TOOL_CALL)
    body["choices"][0]["finish_reason"] = reason
    server = FakeServer(http_module("openai"), [("json", body)])
    gw, _, audit = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match="cut off"):
        gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert audit.records() == ()
