"""Follow-ups to the sixth review of the provider adapters: what reached the model, or the
run's token count, past the checks.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``); each
failed on the code before its fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from test_providers import CHAT_TOOL_CALL, RESPONSE, VIEW, chat_chunk, first_prompt, gateway

from veridic import (
    OpenAIChat,
    OpenAIResponses,
    ScriptedProvider,
    UnknownToolError,
    Usage,
    VeridicError,
)

openai = pytest.importorskip("openai")

OPENROUTER = "https://openrouter.ai/api/v1"


def _server(*replies: tuple[str, object]) -> FakeServer:
    return FakeServer(http_module("openai"), list(replies) or [("json", CHAT_TOOL_CALL)])


def _client(server: FakeServer, base_url: str | None = None) -> Any:
    client = server.client(openai, "OpenAI")
    return client if base_url is None else client.with_options(base_url=base_url)


# --- tool_choice: every tool an allowed_tools list names ------------------------------------

CHAT_ALLOWED = {
    "type": "allowed_tools",
    "allowed_tools": {
        "mode": "required",
        "tools": [
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "function", "function": {"name": "delete_everything"}},
        ],
    },
}
RESPONSES_ALLOWED = {
    "type": "allowed_tools",
    "mode": "required",
    "tools": [
        {"type": "function", "name": "get_weather"},
        {"type": "function", "name": "delete_everything"},
    ],
}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_allowed_tools_choice_naming_a_tool_the_view_lacks_is_refused(api: str) -> None:
    """``tool_choice={"type": "allowed_tools", ...}`` names tools in a list: the gateway
    read a forced tool's ``name`` (or ``function.name``) only, so a name the view does
    not expose went to the provider unchecked, where a single forced one is refused."""
    server = _server()
    adapter: OpenAIChat | OpenAIResponses = (
        OpenAIChat(_client(server), model="gpt-test")
        if api == "chat"
        else OpenAIResponses(_client(server), model="gpt-test")
    )
    gw, _, _ = gateway(adapter)
    choice = CHAT_ALLOWED if api == "chat" else RESPONSES_ALLOWED
    with pytest.raises(UnknownToolError, match="delete_everything"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.sent == []


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "mcp", "server_label": "deepwiki"},
        {"type": "image_generation"},
        {"type": "custom", "custom": {"name": "get_weather"}},
        "get_weather",
    ],
)
def test_an_allowed_tools_entry_that_is_no_function_of_the_view_is_refused(entry: object) -> None:
    """A hosted or server tool in the allowed list is a tool the view never sent."""
    server = _server()
    gw, _, _ = gateway(OpenAIResponses(_client(server), model="gpt-test"))
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [entry]}
    with pytest.raises(VeridicError, match="allowed_tools"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.sent == []


def test_an_allowed_tools_choice_of_exposed_tools_goes_as_given() -> None:
    server = _server()
    gw, _, _ = gateway(OpenAIChat(_client(server), model="gpt-test"))
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "auto",
            "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        },
    }
    gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.body["tool_choice"] == choice


def test_a_forced_custom_tool_the_view_lacks_is_refused() -> None:
    """Chat completions force a custom tool as ``{"type": "custom", "custom": {"name"}}``."""
    server = _server()
    gw, _, _ = gateway(OpenAIChat(_client(server), model="gpt-test"))
    choice = {"type": "custom", "custom": {"name": "run_shell"}}
    with pytest.raises(UnknownToolError, match="run_shell"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.sent == []


# --- OpenRouter's :online models ------------------------------------------------------------


@pytest.mark.parametrize("model", ["openai/gpt-4o:online", "openai/gpt-4o:ONLINE "])
def test_a_model_that_searches_the_web_on_openrouter_is_refused(model: str) -> None:
    """OpenRouter reads the ``:online`` suffix as its ``web`` plugin: search results are
    added to what the model reads, outside the Prompt and under no hash, as the refused
    ``plugins=[{"id": "web"}]`` does."""
    server = _server()
    with pytest.raises(VeridicError, match=r":online.*web"):
        OpenAIChat(_client(server, OPENROUTER), model=model)
    with pytest.raises(VeridicError, match=r":online"):
        OpenAIResponses(_client(server, OPENROUTER), model=model)


@pytest.mark.parametrize("where", ["options", "call"])
def test_an_online_fallback_model_is_refused(where: str) -> None:
    """``models=[...]`` in ``extra_body`` are OpenRouter's fallbacks, any of which may
    answer the request."""
    server = _server()
    body = {"extra_body": {"models": ["openai/gpt-4o", "anthropic/claude-sonnet-4:online"]}}
    if where == "options":
        with pytest.raises(VeridicError, match=r"extra_body\['models'\].*:online"):
            OpenAIChat(_client(server, OPENROUTER), model="openai/gpt-4o", options=body)
        return
    gw, _, _ = gateway(OpenAIChat(_client(server, OPENROUTER), model="openai/gpt-4o"))
    with pytest.raises(VeridicError, match=r"extra_body\['models'\].*:online"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options=body)
    assert server.sent == []


def test_models_that_do_not_search_still_go() -> None:
    """Other suffixes (``:nitro``, ``:free``, ``:thinking``) pick a route or a variant; a
    local server's tags (``llama3:8b``) are not OpenRouter's."""
    server = _server()
    body = {"extra_body": {"models": ["openai/gpt-4o:nitro", "meta/llama:free"]}}
    chat = OpenAIChat(_client(server), model="llama3:8b", options=body)
    gw, _, _ = gateway(chat)
    gw.send(first_prompt(), VIEW, request_id="req-1")
    assert server.body["models"] == body["extra_body"]["models"]


# --- usage: parts within their totals, reasoning counted where the provider left it out -----

XAI_CHAT_USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 50,
    "total_tokens": 350,  # xAI: reasoning is in the total, not in completion_tokens
    "completion_tokens_details": {"reasoning_tokens": 200},
}
XAI_RESPONSES_USAGE = {
    "input_tokens": 100,
    "output_tokens": 50,
    "total_tokens": 350,
    "output_tokens_details": {"reasoning_tokens": 200},
}


def _sent(adapter: OpenAIChat | OpenAIResponses) -> Usage | None:
    gw, _, _ = gateway(adapter)
    return gw.send(first_prompt(), VIEW, request_id="req-1").usage


def test_reasoning_counted_outside_the_output_is_folded_into_it() -> None:
    """xAI counts a reasoning model's reasoning tokens in ``total_tokens`` but not in
    ``completion_tokens``: read as sent, a run's ``Limits(tokens=...)`` counted 150 of the
    350 tokens the answer cost."""
    chat = OpenAIChat(
        _client(_server(("json", {**CHAT_TOOL_CALL, "usage": XAI_CHAT_USAGE}))), model="grok"
    )
    responses = OpenAIResponses(
        _client(_server(("json", {**RESPONSE, "usage": XAI_RESPONSES_USAGE}))), model="grok"
    )
    for usage in (_sent(chat), _sent(responses)):
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens) == (100, 250)
        assert usage.reasoning_output_tokens == 200
        assert usage.total_tokens == 350


def test_a_streamed_answer_folds_reasoning_counted_outside_the_output() -> None:
    last = {**chat_chunk({}), "choices": [], "usage": XAI_CHAT_USAGE}
    stream = sse([chat_chunk({"content": "Sunny."}), chat_chunk({}, "stop"), last], done=True)
    gw, _, _ = gateway(OpenAIChat(_client(_server(("sse", stream))), model="grok"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as events:
        list(events)
    assert events.reply.usage is not None
    assert events.reply.usage.output_tokens == 250


def test_reasoning_within_the_output_is_not_counted_twice() -> None:
    """OpenAI counts reasoning inside ``completion_tokens``, and its total says so."""
    usage = {**XAI_CHAT_USAGE, "completion_tokens": 250}
    chat = OpenAIChat(_client(_server(("json", {**CHAT_TOOL_CALL, "usage": usage}))), model="o")
    found = _sent(chat)
    assert found is not None
    assert (found.output_tokens, found.reasoning_output_tokens) == (250, 200)


IMPOSSIBLE = {
    "cached": {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 900},
    },
    "reasoning": {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "total_tokens": 105,
        "completion_tokens_details": {"reasoning_tokens": 40},
    },
    "reasoning-no-total": {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "completion_tokens_details": {"reasoning_tokens": 40},
    },
}


@pytest.mark.parametrize("case", sorted(IMPOSSIBLE))
def test_a_part_larger_than_its_total_is_refused(case: str) -> None:
    """A proxy's ``cached_tokens`` of 900 out of 100 tokens read (or 40 reasoning tokens
    out of 5 written, with a total that leaves no room for them) cannot be true of one
    answer; read as sent, the spans and the records showed it, and a run's count took
    the smaller figure."""
    usage = IMPOSSIBLE[case]
    server = _server(("json", {**CHAT_TOOL_CALL, "usage": usage}))
    gw, calls, _ = gateway(OpenAIChat(_client(server), model="gpt-test"))
    part = "cache_read_input_tokens=900" if case == "cached" else "reasoning_output_tokens=40"
    with pytest.raises(VeridicError, match=rf"{part}.*more than"):
        gw.send(first_prompt(), VIEW, request_id="req-1")
    (answer,) = calls.replies()  # the call happened: on record, its counts left out
    assert answer.usage is None


def test_an_adapters_own_usage_with_a_part_past_its_total_is_refused() -> None:
    """An application's adapter builds its ``Usage`` itself (here the scripted one)."""
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 20}
    gw, _, _ = gateway(ScriptedProvider([{"text": "ok", "usage": usage}]))
    with pytest.raises(VeridicError, match=r"cache_read_input_tokens=20.*more than"):
        gw.send(first_prompt(), VIEW, request_id="req-1")


# --- OpenRouter's default middle-out -------------------------------------------------------


@pytest.mark.parametrize("given", [None, {"seed": 7}, {"transforms": []}])
def test_a_request_to_openrouter_turns_its_default_middle_out_off(
    given: dict[str, object] | None,
) -> None:
    """OpenRouter drops turns from the middle of a prompt too long for a model of 8k
    tokens or less unless the request says ``transforms: []``: left to its default, a
    long conversation reached the model without the turns in its middle, while the
    model-call record named the whole prompt."""
    server = _server()
    options = None if given is None else {"extra_body": given}
    gw, _, _ = gateway(OpenAIChat(_client(server, OPENROUTER), model="m", options=options))
    gw.send(first_prompt(), VIEW, request_id="req-1")
    assert server.body["transforms"] == []
    assert server.body.get("seed") == (given or {}).get("seed")
    assert server.body["messages"][0]["role"] == "system"


def test_a_request_to_another_server_carries_no_transforms() -> None:
    """The OpenAI API refuses a key it does not know."""
    server = _server()
    gw, _, _ = gateway(OpenAIChat(_client(server, "https://api.openai.com/v1"), model="m"))
    gw.send(first_prompt(), VIEW, request_id="req-1")
    assert "transforms" not in server.body
