"""A sixteenth review of the provider adapters: streamed tool names and keys given twice.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``); each
failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    ScriptedProvider,
    VeridicError,
)
from veridic.testing import adversarial_text

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _stream_chat(chunks: list[dict[str, Any]]) -> Reply:
    server = FakeServer(http_module("openai"), [("sse", sse(chunks, done=True))])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    return stream.reply


def _send_chat(name: str, arguments: str) -> Reply:
    whole: Any = copy.deepcopy(CHAT_TOOL_CALL)
    whole["choices"][0]["message"]["tool_calls"][0].update(
        id="call_A", function={"name": name, "arguments": arguments}
    )
    server = FakeServer(http_module("openai"), [("json", whole)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    return gw.send(first_prompt(), VIEW, request_id="req-1")


def _piece(**fields: Any) -> dict[str, Any]:
    return chat_chunk({"tool_calls": [{"index": 0, **fields}]})


_HEAD: dict[str, Any] = {"id": "call_A", "type": "function"}


# --- a streamed tool name in parts -------------------------------------------------------------


def test_a_streamed_tool_name_sent_in_two_equal_halves_keeps_its_whole_name() -> None:
    """A name streamed in parts is joined, as the SDK joins it and as the answer sent whole
    names the call. Two equal parts ("get", "get") were read as a server sending the name
    again, and the call ran as ``get`` where the model called ``getget``."""
    reply = _stream_chat(
        [
            _piece(**_HEAD, function={"name": "get", "arguments": ""}),
            _piece(function={"name": "get"}),
            _piece(function={"arguments": "{}"}),
            chat_chunk({}, finish="tool_calls"),
        ]
    )
    assert [c.name for c in reply.tool_calls] == ["getget"]


_NAME_PART = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_NAME_PART, min_size=1, max_size=4), repeat=st.booleans())
def test_a_streamed_tool_name_reads_as_the_name_sent_whole(parts: list[str], repeat: bool) -> None:
    """For any name, streamed in parts before its arguments (the API's order), or sent
    whole again with the call's id in every piece (as some compatible servers do), the
    streamed call is named as the call sent whole."""
    name = "".join(parts)
    arguments = '{"city": "Oslo"}'
    if repeat:
        pieces = [
            _piece(**_HEAD, function={"name": name, "arguments": text})
            for text in ("", arguments[:5], arguments[5:])
        ]
    else:
        pieces = [
            _piece(**(_HEAD if at == 0 else {}), function={"name": part})
            for at, part in enumerate(parts)
        ]
        pieces.append(_piece(function={"arguments": arguments}))
    streamed = _stream_chat([*pieces, chat_chunk({}, finish="tool_calls")])
    assert streamed.tool_calls == _send_chat(name, arguments).tool_calls


@pytest.mark.parametrize(
    "later",
    [
        {"function": {"name": "delete_all", "arguments": '"}'}},
        {**_HEAD, "function": {"name": "delete_all"}},
    ],
    ids=["after-arguments-began", "with-the-id-again"],
)
def test_a_streamed_call_renamed_after_it_was_announced_is_refused(later: dict[str, Any]) -> None:
    """A name's parts come before its arguments, and a piece that gives the call's id
    again gives its header again, whole: a name in either of those pieces that is not
    the call's name so far renames the call. Joined, ``get_weather`` ran as
    ``get_weatherdelete_all``; now nothing of the answer runs."""
    with pytest.raises(VeridicError, match="renames") as raised:
        _stream_chat(
            [
                _piece(**_HEAD, function={"name": "get_weather", "arguments": '{"city": "Os'}),
                _piece(**later),
                chat_chunk({}, finish="tool_calls"),
            ]
        )
    assert "'get_weather'" in str(raised.value)
    assert "'delete_all'" in str(raised.value)


def test_a_name_sent_again_after_the_arguments_began_is_read_once() -> None:
    """A server that sends the name (not the id) again with each later piece: once the
    arguments began, a name equal to the call's is that name again, not a part of it."""
    reply = _stream_chat(
        [
            _piece(**_HEAD, function={"name": "get_weather", "arguments": '{"city": '}),
            _piece(function={"name": "get_weather", "arguments": '"Oslo"}'}),
            chat_chunk({}, finish="tool_calls"),
        ]
    )
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_A", "get_weather", '{"city": "Oslo"}')
    ]


# --- a key given twice in a streamed event -----------------------------------------------------


def _raw_sse(events: list[tuple[str | None, str]]) -> str:
    """A server-sent event stream of JSON texts as written (a key may be given twice)."""
    lines: list[str] = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data}\n")
    return "\n".join(lines) + "\n"


def _anthropic_events(tool_use: str) -> list[tuple[str | None, str]]:
    start = json.dumps({**MESSAGE, "content": [], "stop_reason": None})
    return [
        ("message_start", f'{{"type": "message_start", "message": {start}}}'),
        (
            "content_block_start",
            f'{{"type": "content_block_start", "index": 0, "content_block": {tool_use}}}',
        ),
        ("content_block_stop", '{"type": "content_block_stop", "index": 0}'),
        (
            "message_delta",
            '{"type": "message_delta", "delta": {"stop_reason": "tool_use", '
            '"stop_sequence": null}, "usage": {"output_tokens": 5}}',
        ),
        ("message_stop", '{"type": "message_stop"}'),
    ]


def _anthropic_raw(body: str, kind: str) -> tuple[Any, Reply]:
    """The gateway and the reply for an Anthropic answer of raw JSON text (``kind``
    ``"json"``: sent whole, ``"sse"``: streamed)."""
    http = http_module("anthropic")
    content_type = "application/json" if kind == "json" else "text/event-stream"
    transport = http.MockTransport(
        lambda request: http.Response(
            200, headers={"content-type": content_type}, content=body.encode()
        )
    )
    client = anthropic.Anthropic(api_key="test-key", http_client=http.Client(transport=transport))
    gw, _, _ = gateway(AnthropicMessages(client, model="claude-test", max_tokens=9))
    if kind == "json":
        return gw, gw.send(first_prompt(), VIEW, request_id="req-1")
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    return gw, stream.reply


_TWICE_INPUT = '{"city": "Oslo", "city": "Bergen"}'


def test_a_streamed_anthropic_input_that_gives_a_key_twice_reaches_the_dispatcher_as_written() -> (
    None
):
    """A ``tool_use`` block that starts with its input whole (a proxy that streams a
    finished message again) was read by the SDK with ``json.loads``: the call ran for
    Bergen where the model wrote Oslo too, while the same answer sent whole reaches the
    dispatcher as written and is refused there. Both now read it alike."""
    tool_use = (
        f'{{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {_TWICE_INPUT}}}'
    )
    gw, streamed = _anthropic_raw(_raw_sse(_anthropic_events(tool_use)), "sse")
    sent_message = json.dumps({**MESSAGE, "content": []}).replace(
        '"content": []',
        f'"content": [{tool_use}]',
    )
    _, sent = _anthropic_raw(sent_message, "json")
    assert streamed.tool_calls == sent.tool_calls
    (call,) = streamed.tool_calls
    assert call.arguments == _TWICE_INPUT
    (outcome,) = gw.run_tools(streamed, policy=ApprovalPolicy(VIEW))
    assert not outcome.result.ok
    assert "the key 'city' is given twice" in outcome.text


@pytest.mark.parametrize(
    "tool_use",
    [
        '{"type": "tool_use", "id": "toolu_1", "name": "delete_all", "name": "get_weather", '
        '"input": {}}',
        '{"type": "tool_use", "id": "toolu_1", "id": "toolu_2", "name": "get_weather", '
        '"input": {}}',
    ],
    ids=["name", "id"],
)
def test_a_streamed_anthropic_event_that_gives_a_key_twice_is_refused(tool_use: str) -> None:
    """Outside a call's arguments, a key given twice refuses the answer sent whole (a
    log or a proxy that keeps the first value reads another call than the adapter,
    which keeps the last). Streamed, the SDK kept the last without a word."""
    with pytest.raises(VeridicError, match="twice") as raised:
        _anthropic_raw(_raw_sse(_anthropic_events(tool_use)), "sse")
    assert "nothing of it was run" in str(raised.value)


def test_a_streamed_chat_chunk_that_gives_a_key_twice_is_refused() -> None:
    chunk = json.dumps(_piece(**_HEAD, function={"name": "get_weather", "arguments": "{}"}))
    twice = chunk.replace('"name": "get_weather"', '"name": "delete_all", "name": "get_weather"')
    body = _raw_sse(
        [(None, twice), (None, json.dumps(chat_chunk({}, finish="tool_calls"))), (None, "[DONE]")]
    )
    server = FakeServer(http_module("openai"), [("sse", body)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with (
        pytest.raises(VeridicError, match="gives the key 'name' twice"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_a_streamed_final_response_that_gives_a_key_twice_is_refused() -> None:
    """The Responses API's ``response.completed`` event holds the whole answer, which the
    adapter reads: a call's ``name`` given twice is refused, as in the answer sent whole."""
    final = json.dumps(RESPONSE).replace(
        '"name": "get_weather"', '"name": "delete_all", "name": "get_weather"'
    )
    events: list[tuple[str | None, str]] = [
        ("response.completed", f'{{"type": "response.completed", "response": {final}}}')
    ]
    server = FakeServer(http_module("openai"), [("sse", _raw_sse(events))])
    gw, _, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test"))
    with (
        pytest.raises(VeridicError, match="gives the key 'name' twice"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_an_async_stream_reads_its_events_as_written_too() -> None:
    tool_use = (
        '{"type": "tool_use", "id": "toolu_1", "name": "delete_all", "name": "get_weather", '
        '"input": {}}'
    )
    body = _raw_sse(_anthropic_events(tool_use))
    http = http_module("anthropic")

    async def answer(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = anthropic.AsyncAnthropic(
        api_key="test-key", http_client=http.AsyncClient(transport=http.MockTransport(answer))
    )
    gw, _, _ = gateway(AnthropicMessages(client, model="claude-test", max_tokens=9))

    async def read() -> None:
        stream = await gw.astream(first_prompt(), VIEW, request_id="req-1")
        async with contextlib.aclosing(stream):
            async for _ in stream:
                pass

    with pytest.raises(VeridicError, match="gives the key 'name' twice"):
        asyncio.run(read())


# --- messages a new user reads -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"extra_headers": {"X-Trace": 12345}}, "to an int, not text"),
        ({"extra_headers": [("X-Trace", "1")]}, "is a list, not a mapping"),
        ({"extra_body": ["seed", 7]}, "extra_body to a list"),
    ],
)
def test_an_option_of_the_wrong_type_is_named_with_its_article(
    options: dict[str, Any], said: str
) -> None:
    """ "sets the header 'X-Trace' to a int" read as a typo; the messages now say the type
    with its article (``veridic._words``), as every other message does."""
    server = FakeServer(http_module("openai"), [])
    with pytest.raises(VeridicError, match=said):
        OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test", options=options)


@pytest.mark.parametrize(
    ("piece", "missing"),
    [
        ({"index": 1, "function": {"arguments": "{}"}}, "no id"),
        (
            {"index": 1, "id": "call_B", "type": "function", "function": {"arguments": "{}"}},
            "no name",
        ),
    ],
    ids=["id", "name"],
)
def test_a_streamed_call_that_never_began_is_refused_for_what_it_lacks(
    piece: dict[str, Any], missing: str
) -> None:
    """A piece for a call index no piece began (no id, or no name) was refused as "the
    SDK's response shape is not one this adapter reads: check the installed SDK
    version", which sent the reader to the wrong place: the stream is at fault."""
    with pytest.raises(VeridicError, match=f"tool call 1 of choice 0 has {missing}") as raised:
        _stream_chat(
            [
                _piece(**_HEAD, function={"name": "get_weather", "arguments": "{}"}),
                chat_chunk({"tool_calls": [piece]}),
                chat_chunk({}, finish="tool_calls"),
            ]
        )
    assert "SDK version" not in str(raised.value)


# --- stop reasons that say the answer was cut off, in other words ------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "MAX_TOKENS",  # Gemini's own API, Cohere
        "Length",
        "SAFETY",  # Gemini: a safety filter stopped the answer
        "MALFORMED_FUNCTION_CALL",  # Gemini: the call the model wrote could not be read
        "UNEXPECTED_TOOL_CALL",  # Gemini: a call the request did not allow
        "TOO_MANY_TOOL_CALLS",  # Gemini: the model was stopped mid-way through its calls
        "LANGUAGE",  # Gemini: an unsupported language stopped the answer
        "IMAGE_SAFETY",  # Gemini
        "guardrail_intervened",  # Bedrock Converse
        "content_filtered",  # Bedrock Converse
    ],
)
def test_a_call_cut_off_in_another_providers_words_does_not_run(reason: str) -> None:
    """An application's own adapter (Gemini's API, Bedrock's Converse) passes on the stop
    reason its provider gives: ``MAX_TOKENS`` in capitals, or a guardrail's. The cut-off
    check matched lower-case OpenAI and Anthropic words only, so a call cut off at the
    output limit ran as a whole one."""
    script = [{"tool_calls": [("c1", "get_weather", '{"city": "Os"}')], "stop_reason": reason}]
    gw, _, audit = gateway(ScriptedProvider(script))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match="cut off"):
        gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert audit.records() == ()


# --- the same answer, streamed or sent whole ---------------------------------------------------


def _no_surrogate(text: str) -> bool:
    # A lone surrogate cannot go over the fake server's UTF-8.
    return not any("\ud800" <= c <= "\udfff" for c in text)


_BLOCKS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), adversarial_text().filter(_no_surrogate)),
        st.tuples(st.just("tool_use"), adversarial_text().filter(_no_surrogate)),
    ),
    min_size=1,
    max_size=4,
)


def _cut(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(min(cut, len(text)) for cut in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=_BLOCKS, cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=3))
def test_an_anthropic_answer_streamed_reads_as_the_answer_sent_whole(
    blocks: list[tuple[str, str]], cuts: list[int]
) -> None:
    """For any answer of text and ``tool_use`` blocks, its text and each call's input
    streamed in pieces cut anywhere, the streamed reply is the reply sent whole: the
    same text, calls, stop reason and usage."""
    content: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for index, (kind, value) in enumerate(blocks):
        if kind == "text":
            content.append({"type": "text", "text": value})
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _cut(value, cuts)]
        else:
            call = {"type": "tool_use", "id": f"toolu_{index}", "name": "get_weather"}
            content.append({**call, "input": {"city": value}})
            start = {**call, "input": {}}
            written = json.dumps({"city": value}, ensure_ascii=False)
            deltas = [
                {"type": "input_json_delta", "partial_json": piece} for piece in _cut(written, cuts)
            ]
        events += [
            {"type": "content_block_start", "index": index, "content_block": start},
            *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
            {"type": "content_block_stop", "index": index},
        ]
    stop = "tool_use" if any(kind == "tool_use" for kind, _ in blocks) else "end_turn"
    whole = {**MESSAGE, "content": content, "stop_reason": stop}
    streamed_events = [
        {"type": "message_start", "message": {**whole, "content": [], "stop_reason": None}},
        *events,
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    _, streamed = _anthropic_raw(sse(streamed_events, named=True), "sse")
    _, sent = _anthropic_raw(json.dumps(whole), "json")
    assert (streamed.text, streamed.tool_calls, streamed.stop_reason, streamed.usage) == (
        sent.text,
        sent.tool_calls,
        sent.stop_reason,
        sent.usage,
    )


# --- second read: the swapped decoder fails loudly, never reads unchecked ----------------------


_TWICE_NAME_CHUNK = json.dumps(
    _piece(**_HEAD, function={"name": "get_weather", "arguments": "{}"})
).replace('"name": "get_weather"', '"name": "delete_all", "name": "get_weather"')


def _twice_chat_gateway() -> tuple[Any, Any]:
    """A gateway on the real OpenAI client whose stream names a call twice, and the client."""
    body = _raw_sse(
        [
            (None, _TWICE_NAME_CHUNK),
            (None, json.dumps(chat_chunk({}, finish="tool_calls"))),
            (None, "[DONE]"),
        ]
    )
    server = FakeServer(http_module("openai"), [("sse", body)])
    client = server.client(openai, "OpenAI")
    gw, _, _ = gateway(OpenAIChat(client, model="gpt-test"))
    return gw, client


def _kept_streams(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The SDK streams made from now on (their ``__init__`` seen)."""
    made: list[Any] = []
    init = openai.Stream.__init__

    def kept(self: Any, **kwargs: Any) -> None:
        init(self, **kwargs)
        made.append(self)

    monkeypatch.setattr(openai.Stream, "__init__", kept)
    return made


def test_an_sdk_stream_that_keeps_its_decoder_elsewhere_is_refused_and_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An SDK version whose stream keeps its decoder under another name was given back
    unchecked, its events read with ``json.loads``, and the call ran as ``get_weather``.
    It is refused before anything is read, and its connection closed."""
    made = _kept_streams(monkeypatch)
    init = openai.Stream.__init__

    def elsewhere(self: Any, **kwargs: Any) -> None:
        init(self, **kwargs)
        self._events = self.__dict__.pop("_decoder")

    def events(self: Any) -> Any:
        yield from self._events.iter_bytes(self.response.iter_bytes())

    monkeypatch.setattr(openai.Stream, "__init__", elsewhere)
    monkeypatch.setattr(openai.Stream, "_iter_events", events)
    gw, _ = _twice_chat_gateway()
    with pytest.raises(VeridicError, match="keeps no event decoder") as raised:
        gw.stream(first_prompt(), VIEW, request_id="req-1")
    assert "extra allows" in str(raised.value)
    (stream,) = made
    assert stream.response.is_closed


def test_an_sdk_stream_that_reads_its_events_past_its_decoder_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An SDK version that keeps ``_decoder`` but reads its events with another decoder
    took the swap without a word and read the stream unchecked: the first event that did
    not come through the swapped decoder now refuses the stream."""

    def fresh(self: Any) -> Any:
        decoder = self._client._make_sse_decoder()
        yield from decoder.iter_bytes(self.response.iter_bytes())

    monkeypatch.setattr(openai.Stream, "_iter_events", fresh)
    gw, _ = _twice_chat_gateway()
    with (
        pytest.raises(VeridicError, match="past the decoder"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_a_stream_of_a_class_made_of_the_sdks_is_read_as_written() -> None:
    """A stream whose class the application made of the SDK's ``Stream`` reads its
    events through the SDK's decoder, but was given back unchecked (its class is not in
    the SDK's module), so a call named twice ran as the last name."""
    gw, client = _twice_chat_gateway()
    create = client.chat.completions.create

    # A stream class of the application's own, made of the SDK's (a logging wrapper).
    logged_stream = type("LoggedStream", (openai.Stream,), {"__module__": __name__})

    def logged(**kwargs: Any) -> Any:
        stream = create(**kwargs)
        stream.__class__ = logged_stream
        return stream

    client.chat.completions.create = logged
    with (
        pytest.raises(VeridicError, match="gives the key 'name' twice"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_an_async_sdk_stream_that_keeps_its_decoder_elsewhere_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    init = openai.AsyncStream.__init__
    made: list[Any] = []

    def elsewhere(self: Any, **kwargs: Any) -> None:
        init(self, **kwargs)
        del self._decoder
        made.append(self)

    monkeypatch.setattr(openai.AsyncStream, "__init__", elsewhere)
    body = _raw_sse([(None, _TWICE_NAME_CHUNK), (None, "[DONE]")])
    server = FakeServer(http_module("openai"), [("sse", body)])
    gw, _, _ = gateway(OpenAIChat(server.async_client(openai, "AsyncOpenAI"), model="gpt-test"))
    with pytest.raises(VeridicError, match="keeps no event decoder"):
        asyncio.run(gw.astream(first_prompt(), VIEW, request_id="req-1"))
    (stream,) = made
    assert stream.response.is_closed


def test_an_async_sdk_stream_that_reads_past_its_decoder_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def fresh(self: Any) -> Any:
        decoder = self._client._make_sse_decoder()
        async for event in decoder.aiter_bytes(self.response.aiter_bytes()):
            yield event

    monkeypatch.setattr(openai.AsyncStream, "_iter_events", fresh)
    body = _raw_sse([(None, _TWICE_NAME_CHUNK), (None, "[DONE]")])
    server = FakeServer(http_module("openai"), [("sse", body)])
    gw, _, _ = gateway(OpenAIChat(server.async_client(openai, "AsyncOpenAI"), model="gpt-test"))

    async def read() -> None:
        stream = await gw.astream(first_prompt(), VIEW, request_id="req-1")
        async with contextlib.aclosing(stream):
            async for _ in stream:
                pass

    with pytest.raises(VeridicError, match="past the decoder"):
        asyncio.run(read())


# --- second read: a stream cut into chunks anywhere --------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    city=adversarial_text().filter(_no_surrogate),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_a_chat_stream_cut_into_chunks_anywhere_reads_as_the_answer_sent_whole(
    city: str, cuts: list[int]
) -> None:
    """For any answer, its stream's bytes cut anywhere (inside an event, a key, a UTF-8
    character, between the two newlines that end an event) read as the answer sent whole:
    the swapped decoder leaves the SDK's own reading of the chunks as it was."""
    arguments = json.dumps({"city": city}, ensure_ascii=False)
    body = sse(
        [
            _piece(**_HEAD, function={"name": "get_weather", "arguments": ""}),
            _piece(function={"arguments": arguments}),
            chat_chunk({}, finish="tool_calls"),
        ],
        done=True,
    ).encode()
    bounds = sorted({0, len(body), *(min(cut, len(body)) for cut in cuts)})
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    http = http_module("openai")
    transport = http.MockTransport(
        lambda request: http.Response(
            200, headers={"content-type": "text/event-stream"}, content=iter(chunks)
        )
    )
    client = openai.OpenAI(api_key="test-key", http_client=http.Client(transport=transport))
    gw, _, _ = gateway(OpenAIChat(client, model="gpt-test"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    assert stream.reply.tool_calls == _send_chat("get_weather", arguments).tool_calls


def test_a_streamed_chat_call_whose_arguments_give_a_key_twice_reaches_the_dispatcher() -> None:
    """A key given twice inside a streamed call's arguments text is the dispatcher's to
    refuse, as in the answer sent whole: the stream is not refused for it."""
    reply = _stream_chat(
        [
            _piece(**_HEAD, function={"name": "get_weather", "arguments": ""}),
            _piece(function={"arguments": _TWICE_INPUT}),
            chat_chunk({}, finish="tool_calls"),
        ]
    )
    assert reply.tool_calls == _send_chat("get_weather", _TWICE_INPUT).tool_calls
    server = FakeServer(http_module("openai"), [])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    (outcome,) = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert not outcome.result.ok
    assert "the key 'city' is given twice" in outcome.text


def test_an_sdk_answer_given_for_a_stream_is_refused_as_not_a_stream() -> None:
    """A create wrapped to answer whole when asked to stream gives the SDK's model, which
    is iterable (its fields): it was refused, but as a stream keeping no decoder, which
    sent the reader to the SDK's version instead of to the wrapper."""
    gw, client = _twice_chat_gateway()
    answer = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hello"},
                }
            ],
        }
    )
    client.chat.completions.create = lambda **kwargs: answer
    with pytest.raises(VeridicError, match="ChatCompletion, an answer sent whole") as raised:
        gw.stream(first_prompt(), VIEW, request_id="req-1")
    assert "decoder" not in str(raised.value)


def test_a_decoder_attribute_the_sdk_reads_unexpectedly_names_the_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def other(self: Any) -> Any:
        yield from self._decoder.iter_events(self.response.iter_bytes())

    monkeypatch.setattr(openai.Stream, "_iter_events", other)
    gw, _ = _twice_chat_gateway()
    with (
        pytest.raises(VeridicError, match=r"^OpenAIChat\(.*decoder's 'iter_events'"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_an_anthropic_message_given_for_a_stream_is_refused_as_not_a_stream() -> None:
    """The refusal of an answer sent whole holds for the other SDK: an Anthropic
    ``Message`` (a pydantic model of the SDK's, iterable over its fields) for a stream."""
    server = FakeServer(http_module("anthropic"), [])
    client = server.client(anthropic, "Anthropic")
    message = anthropic.types.Message.model_validate(MESSAGE)
    client.messages.create = lambda **kwargs: message
    gw, _, _ = gateway(AnthropicMessages(client, model="claude-test", max_tokens=9))
    with pytest.raises(VeridicError, match="with Message, an answer sent whole") as raised:
        gw.stream(first_prompt(), VIEW, request_id="req-1")
    assert "decoder" not in str(raised.value)


def test_an_sdk_answer_given_for_an_async_stream_is_refused_as_sent_whole() -> None:
    """In async code the SDK's model is no async stream either: it was refused before
    the check of an answer sent whole, with the advice to check the SDK's version."""
    server = FakeServer(http_module("openai"), [])
    client = server.async_client(openai, "AsyncOpenAI")
    answer = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hello"},
                }
            ],
        }
    )

    async def create(**kwargs: object) -> object:
        return answer

    client.chat.completions.create = create
    gw, _, _ = gateway(OpenAIChat(client, model="gpt-test"))
    with pytest.raises(VeridicError, match="ChatCompletion, an answer sent whole") as raised:
        asyncio.run(gw.astream(first_prompt(), VIEW, request_id="req-1"))
    assert "SDK version" not in str(raised.value)
