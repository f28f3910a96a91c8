"""Follow-ups to the sixth review of the provider adapters, last round: a usage total the
counts do not explain, and a ``tool_choice`` that forces a tool the view never sends.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``); each
failed on the code before its fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from hypothesis import given
from hypothesis import strategies as st
from test_providers import CHAT_TOOL_CALL, RESPONSE, VIEW, chat_chunk, first_prompt, gateway

from veridic import OpenAIChat, OpenAIResponses, Usage, VeridicError

openai = pytest.importorskip("openai")


def _server(*replies: tuple[str, object]) -> FakeServer:
    return FakeServer(http_module("openai"), list(replies) or [("json", RESPONSE)])


def _client(server: FakeServer) -> Any:
    return server.client(openai, "OpenAI")


def _sent(adapter: OpenAIChat | OpenAIResponses) -> Usage | None:
    gw, _, _ = gateway(adapter)
    return gw.send(first_prompt(), VIEW, request_id="req-1").usage


# --- usage: a total larger than its counts, or smaller --------------------------------------

GEMINI_CHAT_USAGE = {
    "prompt_tokens": 20,
    "completion_tokens": 198,
    "total_tokens": 623,  # Gemini thinking: 405 thought tokens in the total, counted nowhere else
}
GEMINI_RESPONSES_USAGE = {"input_tokens": 20, "output_tokens": 198, "total_tokens": 623}


def test_a_total_larger_than_its_counts_is_read_as_tokens_written() -> None:
    """Gemini's OpenAI-compatible endpoint counts a thinking model's thought tokens in
    ``total_tokens`` but neither in ``completion_tokens`` nor as ``reasoning_tokens``: read
    as sent, a run's ``Limits(tokens=...)`` counted 218 of the 623 tokens the answer cost."""
    chat = OpenAIChat(
        _client(_server(("json", {**CHAT_TOOL_CALL, "usage": GEMINI_CHAT_USAGE}))),
        model="gemini-2.5-flash",
    )
    responses = OpenAIResponses(
        _client(_server(("json", {**RESPONSE, "usage": GEMINI_RESPONSES_USAGE}))),
        model="gemini-2.5-flash",
    )
    for usage in (_sent(chat), _sent(responses)):
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens) == (20, 603)
        assert usage.total_tokens == 623
        assert usage.reasoning_output_tokens == 0  # the server did not say what they were


def test_a_streamed_answer_counts_the_total_its_counts_leave_out() -> None:
    last = {**chat_chunk({}), "choices": [], "usage": GEMINI_CHAT_USAGE}
    stream = sse([chat_chunk({"content": "Sunny."}), chat_chunk({}, "stop"), last], done=True)
    gw, _, _ = gateway(OpenAIChat(_client(_server(("sse", stream))), model="gemini"))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as events:
        list(events)
    assert events.reply.usage is not None
    assert events.reply.usage.total_tokens == 623


@pytest.mark.parametrize("reasoning", [None, 30])
def test_a_total_smaller_than_its_counts_is_refused_once_recorded(reasoning: int | None) -> None:
    """A ``total_tokens`` of 90 for 100 tokens read and 50 written cannot be true of one
    answer: read as sent, the run counted 150 and the records kept a usage its own server
    contradicted."""
    usage: dict[str, object] = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 90}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    server = FakeServer(http_module("openai"), [("json", {**CHAT_TOOL_CALL, "usage": usage})])
    gw, calls, _ = gateway(OpenAIChat(_client(server), model="gpt-test"))
    with pytest.raises(VeridicError, match=r"total_tokens=90.*less than.*150"):
        gw.send(first_prompt(), VIEW, request_id="req-1")
    (answer,) = calls.replies()  # the call happened: on record, its counts left out
    assert answer.usage is None


@given(
    read=st.integers(0, 10**9),
    wrote=st.integers(0, 10**9),
    unexplained=st.integers(0, 10**9),
    reasoning=st.none() | st.integers(0, 10**9),
)
def test_a_total_at_least_its_counts_is_the_usage_read(
    read: int, wrote: int, unexplained: int, reasoning: int | None
) -> None:
    """Whatever the breakdown, the tokens counted are the server's own total when it gives
    one its counts fit in (a limit never counts less than the server billed)."""
    usage: dict[str, object] = {
        "prompt_tokens": read,
        "completion_tokens": wrote,
        "total_tokens": read + wrote + unexplained,
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    adapter = OpenAIChat(openai.OpenAI(api_key="sk-test", max_retries=0), model="gpt-test")
    found = adapter.parse({**CHAT_TOOL_CALL, "usage": usage}).usage
    assert found is not None
    assert found.input_tokens == read
    assert found.total_tokens == read + wrote + unexplained


# --- tool_choice: a hosted tool the view never sends ---------------------------------------

HOSTED = [
    {"type": "web_search_preview"},
    {"type": "web_search_preview_2025_03_11"},
    {"type": "file_search"},
    {"type": "code_interpreter"},
    {"type": "image_generation"},
    {"type": "computer_use_preview"},
    {"type": "mcp", "server_label": "deepwiki"},
    # an MCP tool of the same name as one of the view's is still not the view's tool
    {"type": "mcp", "server_label": "deepwiki", "name": "get_weather"},
]


@pytest.mark.parametrize("choice", HOSTED, ids=lambda choice: str(choice["type"]))
def test_a_forced_hosted_tool_is_refused_before_sending(choice: dict[str, object]) -> None:
    """The gateway sends the view's function tools only: a ``tool_choice`` forcing a hosted
    tool went to the provider, which alone stood between the run and a tool the model-call
    record does not name."""
    server = _server()
    gw, _, _ = gateway(OpenAIResponses(_client(server), model="gpt-test"))
    with pytest.raises(VeridicError, match=rf"tool_choice.*{choice['type']}.*view"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.sent == []


@pytest.mark.parametrize("choice", HOSTED[:2], ids=lambda choice: str(choice["type"]))
def test_a_forced_hosted_tool_is_refused_as_an_adapter_option(choice: dict[str, object]) -> None:
    """Refused when the adapter is built: the view plays no part in it."""
    server = _server()
    with pytest.raises(VeridicError, match=rf"tool_choice.*{choice['type']}.*view"):
        OpenAIResponses(_client(server), model="gpt-test", options={"tool_choice": choice})
    assert server.sent == []


def test_a_forced_hosted_tool_in_extra_body_is_refused() -> None:
    server = _server()
    gw, _, _ = gateway(OpenAIResponses(_client(server), model="gpt-test"))
    body = {"extra_body": {"tool_choice": {"type": "web_search_preview"}}}
    with pytest.raises(VeridicError, match=r"extra_body\['tool_choice'\]"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options=body)
    assert server.sent == []


@pytest.mark.parametrize(
    "choice",
    ["auto", "none", "required", {"type": "function", "name": "get_weather"}],
)
def test_choices_of_the_views_tools_still_go(choice: object) -> None:
    server = _server()
    gw, _, _ = gateway(OpenAIResponses(_client(server), model="gpt-test"))
    gw.send(first_prompt(), VIEW, request_id="req-1", options={"tool_choice": choice})
    assert server.body["tool_choice"] == choice
