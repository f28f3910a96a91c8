"""A ninth review of the provider adapters and the gateway's send path.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``) or the
gateway with a :class:`~veridic.providers.ScriptedProvider`; each failed on the code before
its fix.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from test_providers import MESSAGE, MESSAGE_STREAM, VIEW, chat_chunk, first_prompt, gateway

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    OpenAIChat,
    OpenAIResponses,
    VeridicError,
)
from veridic.providers import Usage, _base

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


# --- tool_choice is refused once per send ---------------------------------------------------


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Count the runs of the refusal of unsent tool choices (the real function still runs)."""
    seen: list[object] = []
    real = _base._refuse_unsent_choice

    def counting(adapter: _base.Adapter, choice: object, where: str) -> None:
        seen.append(choice)
        real(adapter, choice, where)

    monkeypatch.setattr(_base, "_refuse_unsent_choice", counting)
    return seen


def test_a_tool_choice_is_checked_once_per_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's check of the call's options and the gateway's reading of the choice
    each refused an unsent choice: the same check ran twice on every send."""
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    seen = _counted(monkeypatch)
    choice = {"type": "function", "function": {"name": "get_weather"}}
    gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert seen == [choice]


@pytest.mark.parametrize("where", ["adapter", "call"])
def test_a_hosted_tool_choice_is_still_refused_before_anything_is_sent(where: str) -> None:
    server = FakeServer(http_module("openai"), [])
    choice = {"type": "web_search_preview"}
    client = server.client(openai, "OpenAI")
    if where == "adapter":
        with pytest.raises(VeridicError, match="web_search_preview"):
            OpenAIResponses(client, model="gpt-test", options={"tool_choice": choice})
        return
    gw, calls, _ = gateway(OpenAIResponses(client, model="gpt-test"))
    with pytest.raises(VeridicError, match="web_search_preview"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.sent == []
    assert calls.records() == ()


def _chat_answer() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Sunny."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


# --- a preset key: OpenRouter's edits the prompt, text-generation-webui's sets sampling -----


def test_a_preset_key_is_refused_for_any_server_with_the_sampling_options_to_pass_instead() -> None:
    """text-generation-webui reads ``preset`` as sampling settings only, but the adapter
    cannot see whether a proxy in front of the server passes the key on to OpenRouter, which
    reads it as a stored system prompt and server tools: the key stays refused for every
    server, and the refusal now names what a text-generation-webui user passes instead."""
    http = http_module("openai")
    server = FakeServer(http, [])
    client = openai.OpenAI(
        api_key="k",
        base_url="http://127.0.0.1:5000/v1",
        http_client=http.Client(transport=http.MockTransport(server.handle)),
    )
    with pytest.raises(VeridicError, match=r"preset") as caught:
        OpenAIChat(client, model="local", options={"extra_body": {"preset": "min_p"}})
    message = str(caught.value)
    assert "OpenRouter" in message
    assert "text-generation-webui" in message
    assert "temperature" in message


# --- an Anthropic answer sent whole whose call gives a key twice ----------------------------

_TWICE = (
    '{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", '
    '"content": [{"type": "text", "text": "Let me check."}, {"type": "tool_use", '
    '"id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo", "city": "Bergen"}}], '
    '"stop_reason": "tool_use", "stop_sequence": null, '
    '"usage": {"input_tokens": 10, "output_tokens": 5}}'
)


class _RawServer(FakeServer):
    """Answers every request with the same JSON text, byte for byte (json= would rewrite it)."""

    def handle(self, request: Any) -> Any:
        self.sent.append((request.url.path, {}))
        body = self.replies[0][1]
        assert isinstance(body, str)
        return self.http.Response(
            200, content=body.encode(), headers={"content-type": "application/json"}
        )


@pytest.mark.parametrize("asynchronous", [False, True], ids=["send", "asend"])
def test_an_anthropic_call_sent_whole_that_gives_a_key_twice_is_not_read_as_its_last_value(
    asynchronous: bool,
) -> None:
    """The SDK reads the answer with ``json.loads``, which keeps a key's last value: the
    call ran for Bergen with nothing said, where the same call streamed reaches the
    dispatcher as written and is refused. The adapter now reads the answer's own text."""
    server = _RawServer(http_module("anthropic"), [("raw", _TWICE)])
    if asynchronous:
        client = server.async_client(anthropic, "AsyncAnthropic")
        gw, _, _ = gateway(AnthropicMessages(client, model="claude-t", max_tokens=9))
        reply = asyncio.run(gw.asend(first_prompt(), VIEW, request_id="req-1"))
    else:
        client = server.client(anthropic, "Anthropic")
        gw, _, _ = gateway(AnthropicMessages(client, model="claude-t", max_tokens=9))
        reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    (call,) = reply.tool_calls
    assert "Oslo" in call.arguments
    assert "Bergen" in call.arguments
    assert reply.text == "Let me check."
    assert reply.usage == Usage(10, 5)
    runner, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    (outcome,) = runner.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert not outcome.result.ok
    assert "the key 'city' is given twice" in outcome.text


def test_an_anthropic_answer_sent_whole_reads_as_before() -> None:
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("toolu_1", "get_weather", '{"city": "Oslo"}')
    ]
    assert (reply.text, reply.stop_reason, reply.response_id) == (
        "Let me check.",
        "tool_use",
        "msg_1",
    )


# --- the options the model reads besides the prompt and the tools ---------------------------


def _schema(description: str) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "forecast",
            "schema": {
                "type": "object",
                "properties": {"summary": {"type": "string", "description": description}},
            },
        },
    }


def _options_digest(options: dict[str, Any], adapter_options: dict[str, Any] | None = None) -> str:
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    client = server.client(openai, "OpenAI")
    gw, _, _ = gateway(OpenAIChat(client, model="gpt-test", options=adapter_options))
    return gw.send(first_prompt(), VIEW, request_id="req-1", options=options).options_sha256


def test_a_structured_output_schema_is_covered_by_the_replys_options_digest() -> None:
    """A ``response_format`` schema (and its descriptions, text the model reads) was covered
    by neither the prompt's sha256 nor the tool list's: two requests whose schemas told the
    model different things carried the same digests. The reply now carries a digest of the
    request's options, canonical (key order and where an option was given do not count)."""
    plain = _options_digest({"response_format": _schema("A short summary.")})
    edited = _options_digest({"response_format": _schema("Say the user is wrong.")})
    assert len(plain) == 64
    assert plain != edited
    assert plain == _options_digest({}, {"response_format": _schema("A short summary.")})
    reordered = dict(reversed(list(_schema("A short summary.").items())))
    assert plain == _options_digest({"response_format": reordered})
    assert _options_digest({}) != plain
    assert _options_digest({"prediction": {"type": "content", "content": "x"}}) != (
        _options_digest({"prediction": {"type": "content", "content": "y"}})
    )


def test_options_that_are_not_json_are_refused_before_anything_is_sent() -> None:
    server = FakeServer(http_module("openai"), [])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with pytest.raises(VeridicError, match=r"metadata.*JSON"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"metadata": {"k": object()}})
    assert server.sent == []
    assert calls.records() == ()


# --- an error sent as an answer --------------------------------------------------------------

_ERRORS = {
    "chat": {"error": {"message": "Upstream overloaded", "code": 503}},
    "responses": {"error": {"message": "Upstream overloaded", "code": "server_error"}},
    "anthropic": {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Upstream overloaded"},
    },
}


def _answered(api: str, body: object) -> Any:
    sdk, adapter = (anthropic, "anthropic") if api == "anthropic" else (openai, "openai")
    server = FakeServer(http_module(adapter), [("json", body)])
    if api == "anthropic":
        made: Any = AnthropicMessages(
            server.client(sdk, "Anthropic"), model="claude-t", max_tokens=9
        )
    else:
        made = (OpenAIChat if api == "chat" else OpenAIResponses)(
            server.client(sdk, "OpenAI"), model="gpt-test"
        )
    gw, calls, _ = gateway(made)
    return gw.send(first_prompt(), VIEW, request_id="req-1"), calls


@pytest.mark.parametrize("api", sorted(_ERRORS))
def test_an_error_a_proxy_sends_as_a_successful_answer_is_refused_with_what_it_said(
    api: str,
) -> None:
    """Proxies (and compatible servers) answer some failures with status 200 and an error
    body. The Anthropic and Responses adapters read it as an empty final answer (no text,
    no calls, no usage): a run ended with "" as its output and the server's reason was
    lost; Chat Completions refused it as an answer "of no choices" and told the user not to
    set n=0."""
    with pytest.raises(VeridicError, match="Upstream overloaded") as caught:
        _answered(api, _ERRORS[api])
    assert "n=0" not in str(caught.value)


@pytest.mark.parametrize("api", ["responses", "anthropic"])
def test_an_answer_without_any_output_is_refused(api: str) -> None:
    with pytest.raises(VeridicError, match="no answer"):
        _answered(api, {"id": "x", "model": "m"})


# --- Gemini's cached context, through its OpenAI-compatible endpoint --------------------------


def _gemini(options: dict[str, Any]) -> OpenAIChat:
    http = http_module("openai")
    client = openai.OpenAI(
        api_key="k",
        base_url="https://generativelanguage.googleapis.com/v1beta/openai/",
        http_client=http.Client(transport=http.MockTransport(FakeServer(http, []).handle)),
    )
    return OpenAIChat(client, model="gemini-2.5-flash", options=options)


@pytest.mark.parametrize(
    "body",
    [
        {"extra_body": {"google": {"cached_content": "cachedContents/abc"}}},
        {"google": {"cached_content": "cachedContents/abc"}},
    ],
    ids=["nested", "flat"],
)
def test_a_gemini_cached_content_is_refused(body: dict[str, Any]) -> None:
    """Gemini's OpenAI-compatible endpoint reads ``extra_body={"extra_body": {"google":
    {"cached_content": ...}}}`` as a context cache stored on Google's servers (turns and a
    system instruction) that the model reads before the prompt: outside the Prompt, under no
    hash of the model-call record. It went through, as no check read the nested body."""
    with pytest.raises(VeridicError, match=r"cached_content"):
        _gemini({"extra_body": body})
    gw, _, _ = gateway(_gemini({}))
    with pytest.raises(VeridicError, match=r"cached_content"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"extra_body": body})


def test_gemini_settings_that_add_no_text_go_as_given() -> None:
    body = {"extra_body": {"google": {"thinking_config": {"thinking_budget": 0}}}}
    assert _gemini({"extra_body": body}).options["extra_body"] == body


# --- search that compatible servers run by themselves ----------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"extra_body": {"search_parameters": {"mode": "auto"}}},
        {"extra_body": {"enable_search": True}},
    ],
    ids=["xai-live-search", "dashscope-enable-search"],
)
def test_an_option_that_makes_a_compatible_server_search_the_web_is_refused(
    options: dict[str, Any],
) -> None:
    """xAI's ``search_parameters`` and Alibaba DashScope's ``enable_search`` make the server
    search the web and add what it found to what the model reads, as OpenAI's refused
    ``web_search_options`` does: they went through."""
    server = FakeServer(http_module("openai"), [])
    with pytest.raises(VeridicError, match=r"search"):
        OpenAIChat(server.client(openai, "OpenAI"), model="m", options=options)


@pytest.mark.parametrize(
    "options",
    [
        {"extra_body": {"search_parameters": {"mode": "off"}}},
        {"extra_body": {"enable_search": False}},
    ],
    ids=["xai-off", "dashscope-off"],
)
def test_a_search_option_that_turns_search_off_goes_as_given(options: dict[str, Any]) -> None:
    server = FakeServer(http_module("openai"), [])
    assert OpenAIChat(server.client(openai, "OpenAI"), model="m", options=options).options


_SEARCHED = {"citations": ["https://example.com/a"], "search_results": [{"url": "x"}]}


@pytest.mark.parametrize("streamed", [False, True], ids=["sent", "streamed"])
@pytest.mark.parametrize("key", sorted(_SEARCHED))
def test_a_chat_answer_that_cites_a_search_the_server_ran_is_refused(
    key: str, streamed: bool
) -> None:
    """Perplexity's models (and xAI's with search on) search on every request and list what
    they read beside the choices (``citations``, ``search_results``), not as the message's
    annotations, which are refused: the answer was read as if the model had read the prompt
    alone."""
    found = {key: _SEARCHED[key]}
    if streamed:
        chunks = [
            {**chat_chunk({"role": "assistant", "content": "Sunny."}), **found},
            {**chat_chunk({}, finish="stop"), **found},
        ]
        server = FakeServer(http_module("openai"), [("sse", sse(chunks, done=True))])
        gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="sonar"))
        with (
            pytest.raises(VeridicError, match=r"outside the prompt"),
            gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
        ):
            list(stream)
        return
    server = FakeServer(http_module("openai"), [("json", {**_chat_answer(), **found})])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="sonar"))
    with pytest.raises(VeridicError, match=r"outside the prompt"):
        gw.send(first_prompt(), VIEW, request_id="req-1")


def test_a_chat_answer_with_empty_citations_is_read() -> None:
    body = {**_chat_answer(), "citations": [], "search_results": None}
    server = FakeServer(http_module("openai"), [("json", body)])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    assert gw.send(first_prompt(), VIEW, request_id="req-1").text == "Sunny."


# --- an Anthropic stream whose message_start already holds content ---------------------------


def test_an_anthropic_stream_whose_message_start_holds_a_call_is_refused() -> None:
    """The API starts a streamed message with no content; blocks come as their own events.
    A message_start holding blocks (a proxy that replays a cached answer) had them dropped
    without a word: a tool call in it never ran and left no record, and the reply read as
    the text that followed."""
    events = [
        json.loads(line[6:]) for line in MESSAGE_STREAM.splitlines() if line.startswith("data: ")
    ]
    events[0]["message"]["content"] = [
        {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Rome"}}
    ]
    server = FakeServer(http_module("anthropic"), [("sse", sse(events, named=True))])
    gw, _, _ = gateway(
        AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)
    )
    with (
        pytest.raises(VeridicError, match=r"message_start"),
        gw.stream(first_prompt(), VIEW, request_id="req-1") as stream,
    ):
        list(stream)


def test_a_streamed_reply_carries_the_same_options_digest_as_a_sent_one() -> None:
    chunks = [chat_chunk({"role": "assistant", "content": "Sunny."}), chat_chunk({}, "stop")]
    server = FakeServer(
        http_module("openai"),
        [("json", _chat_answer()), ("sse", sse(chunks, done=True))],
    )
    options = {"response_format": _schema("A short summary.")}
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    sent = gw.send(first_prompt(), VIEW, request_id="req-1", options=options)
    with gw.stream(first_prompt(), VIEW, request_id="req-2", options=options) as stream:
        list(stream)
    assert stream.reply.options_sha256 == sent.options_sha256 == _options_digest(options)


# --- a prompt a proxy keeps in its own store ---------------------------------------------------


@pytest.mark.parametrize("adapter", [OpenAIChat, OpenAIResponses])
def test_a_litellm_prompt_id_is_refused(adapter: type[OpenAIChat | OpenAIResponses]) -> None:
    """LiteLLM's proxy reads ``prompt_id`` (on chat completions and responses) as a prompt
    kept in a prompt manager (Langfuse, .prompt files, its own API), and puts its messages,
    a system message among them, before the request's: text the model reads outside the
    Prompt, as OpenRouter's refused preset is. It went through."""
    server = FakeServer(http_module("openai"), [])
    client = server.client(openai, "OpenAI")
    options = {"extra_body": {"prompt_id": "support-bot", "prompt_variables": {"tone": "x"}}}
    with pytest.raises(VeridicError, match=r"prompt_id.*LiteLLM"):
        adapter(client, model="gpt-test", options=options)
    gw, _, _ = gateway(adapter(client, model="gpt-test"))
    with pytest.raises(VeridicError, match=r"prompt_id"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options=options)
    assert server.sent == []
