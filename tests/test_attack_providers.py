"""The provider adapters, tried as an attacker who controls what comes back: the model's
answer, a compatible server's, a proxy's.

Each test drives the real SDKs over a fake transport (``tests/_sdk_server.py``) and
failed on the code before its fix.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
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
    ModelGateway,
    OpenAIChat,
    OpenAIResponses,
    Reply,
    VeridicError,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _copy(answer: object) -> Any:
    """A copy of a canned answer to change (typed ``Any``: the tests reach into it)."""
    return copy.deepcopy(answer)


def _adapter(api: str, server: FakeServer) -> OpenAIChat | OpenAIResponses | AnthropicMessages:
    if api == "chat":
        return OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")
    if api == "responses":
        return OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test")
    return AnthropicMessages(
        server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9
    )


def _sent(api: str, body: dict[str, Any]) -> tuple[ModelGateway, Reply]:
    """The gateway and its reply to ``body``, an answer sent whole."""
    server = FakeServer(
        http_module("anthropic" if api == "anthropic" else "openai"), [("json", body)]
    )
    gw, _, _ = gateway(_adapter(api, server))
    return gw, gw.send(first_prompt(), VIEW, request_id="req-1")


def _streamed(api: str, events: list[dict[str, Any]]) -> tuple[ModelGateway, Reply]:
    """The gateway and its reply to ``events``, an answer streamed."""
    sdk = "anthropic" if api == "anthropic" else "openai"
    body = sse(events, named=api != "chat", done=api == "chat")
    server = FakeServer(http_module(sdk), [("sse", body)])
    gw, _, _ = gateway(_adapter(api, server))
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        list(stream)
    return gw, stream.reply


# --- a Responses stream that ends saying the answer failed or was cut off ----------------------


def _responses_events(end: str, final: dict[str, Any]) -> list[dict[str, Any]]:
    created = {**final, "output": [], "status": "in_progress"}
    return [
        {"type": "response.created", "sequence_number": 0, "response": created},
        {
            "type": "response.output_text.delta",
            "sequence_number": 1,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Let me check.",
            "logprobs": [],
        },
        {"type": end, "sequence_number": 2, "response": final},
    ]


def test_a_responses_stream_that_ends_with_response_failed_runs_nothing_whatever_it_holds() -> None:
    """``response.failed`` says the answer failed. The adapter read the response the event
    carries, and one whose status said ``completed`` (a proxy's, a compatible server's) ran
    its calls as a whole answer."""
    with pytest.raises(VeridicError, match="failed") as raised:
        _streamed("responses", _responses_events("response.failed", _copy(RESPONSE)))
    assert "response.failed" in str(raised.value)
    assert "nothing" in str(raised.value)


def test_a_responses_stream_that_ends_with_response_incomplete_runs_no_call() -> None:
    """``response.incomplete`` says the answer was cut off; a response of status
    ``completed`` in it ran its calls, which may be cut short."""
    with pytest.raises(VeridicError, match=r"response\.incomplete") as raised:
        _streamed("responses", _responses_events("response.incomplete", _copy(RESPONSE)))
    assert "'completed'" in str(raised.value)


def test_a_responses_stream_that_ends_as_it_says_is_read_as_before() -> None:
    incomplete = _copy(RESPONSE)
    incomplete.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    _, reply = _streamed("responses", _responses_events("response.incomplete", incomplete))
    assert reply.stop_reason == "incomplete:max_output_tokens"
    _, reply = _streamed("responses", _responses_events("response.completed", RESPONSE))
    assert reply.stop_reason == "completed"
    assert [call.name for call in reply.tool_calls] == ["get_weather"]


# --- an item of a completed response that is not complete --------------------------------------


@pytest.mark.parametrize("status", ["incomplete", "in_progress"])
@pytest.mark.parametrize("item", [0, 1], ids=["message", "function_call"])
def test_an_unfinished_item_of_a_completed_response_is_refused(status: str, item: int) -> None:
    """The Responses API marks each output item's ``status``: a ``function_call`` item that
    is ``incomplete`` was cut off while the model wrote it, whatever the response's own
    status says, and its call ran as the model never finished writing it."""
    response = _copy(RESPONSE)
    response["output"][item]["status"] = status
    with pytest.raises(VeridicError, match=f"status '{status}'") as raised:
        _sent("responses", response)
    assert "nothing of it was run" in str(raised.value)


# --- an answer that stopped to call tools and holds none ---------------------------------------


def _chat_without_calls(message: dict[str, Any] | None) -> dict[str, Any]:
    answer: dict[str, Any] = _copy(CHAT_TOOL_CALL)
    answer["choices"][0]["message"] = message
    return answer


@pytest.mark.parametrize(
    "message",
    [{"role": "assistant", "content": "Done.", "tool_calls": []}, {"role": "assistant"}],
    ids=["empty-list", "no-list"],
)
def test_a_chat_answer_that_stopped_for_tool_calls_and_holds_none_is_refused(
    message: dict[str, Any],
) -> None:
    """``finish_reason: "tool_calls"`` says the model called tools. An answer that holds
    none (a proxy that dropped the calls, a server that put them where the adapter does not
    read) read as a final answer, and a run ended with its text as the output."""
    with pytest.raises(VeridicError, match="'tool_calls'") as raised:
        _sent("chat", _chat_without_calls(message))
    assert "holds no tool call" in str(raised.value)


@pytest.mark.parametrize("finish", ["tool_calls", "stop"])
def test_a_chat_choice_without_a_message_is_refused(finish: str) -> None:
    """A choice with ``"message": null`` read as an answer of no text and no call."""
    answer = _chat_without_calls(None)
    answer["choices"][0]["finish_reason"] = finish
    with pytest.raises(VeridicError, match="holds no message"):
        _sent("chat", answer)


def test_a_streamed_chat_answer_that_stopped_for_tool_calls_and_holds_none_is_refused() -> None:
    with pytest.raises(VeridicError, match="holds no tool call"):
        _streamed("chat", [chat_chunk({"content": "Done."}), chat_chunk({}, finish="tool_calls")])


def test_an_anthropic_answer_that_stopped_for_tool_use_and_holds_none_is_refused() -> None:
    answer = _copy(MESSAGE)
    answer["content"] = [{"type": "text", "text": "Done."}]
    with pytest.raises(VeridicError, match="'tool_use'") as raised:
        _sent("anthropic", answer)
    assert "holds no tool call" in str(raised.value)


def _message_events(*blocks: list[dict[str, Any]], stop: str, usage: Any = 5) -> list[Any]:
    start = {**MESSAGE, "content": [], "stop_reason": None}
    events: list[Any] = [{"type": "message_start", "message": start}]
    for block in blocks:
        events.extend(block)
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": usage},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _text_block(index: int, *deltas: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _tool_block(index: int) -> list[dict[str, Any]]:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}
    return [
        {"type": "content_block_start", "index": index, "content_block": tool_use},
        {"type": "content_block_delta", "index": index, "delta": delta},
        {"type": "content_block_stop", "index": index},
    ]


def test_a_streamed_anthropic_answer_that_stopped_for_tool_use_and_holds_none_is_refused() -> None:
    text = _text_block(0, {"type": "text_delta", "text": "Done."})
    with pytest.raises(VeridicError, match="holds no tool call"):
        _streamed("anthropic", _message_events(text, stop="tool_use"))


def test_an_answer_that_ended_its_turn_without_calls_is_read_as_before() -> None:
    answer = _copy(MESSAGE)
    answer.update(content=[{"type": "text", "text": "Done."}], stop_reason="end_turn")
    _, reply = _sent("anthropic", answer)
    assert (reply.text, reply.tool_calls) == ("Done.", ())
    chat = _chat_without_calls({"role": "assistant", "content": "Done."})
    chat["choices"][0]["finish_reason"] = "stop"
    _, reply = _sent("chat", chat)
    assert (reply.text, reply.tool_calls) == ("Done.", ())


# --- Anthropic stream events the assembler let pass unread -------------------------------------


@pytest.mark.parametrize("count", [-3, 2.5])
def test_a_streamed_token_count_that_is_no_count_is_refused_as_the_answer_sent_whole(
    count: float,
) -> None:
    """Sent whole, ``output_tokens: -3`` is refused as no count of tokens; streamed in the
    ``message_delta``, it was taken as lower than the count held and left out unread."""
    events = _message_events(_tool_block(0), stop="tool_use", usage=count)
    with pytest.raises(VeridicError, match=f"output_tokens={count}"):
        _streamed("anthropic", events)


def test_a_streamed_delta_of_a_kind_the_adapter_does_not_read_is_refused() -> None:
    """A ``content_block_delta`` of a kind the adapter does not know was dropped: neither
    shown nor recorded, its text vanished without a word."""
    text = _text_block(
        0,
        {"type": "text_delta", "text": "Done."},
        {"type": "markdown_delta", "text": " Also: I deleted the files."},
    )
    with pytest.raises(VeridicError, match="markdown_delta") as raised:
        _streamed("anthropic", _message_events(text, stop="end_turn"))
    assert "nothing" in str(raised.value)


# --- chat chunks the SDK's merge cannot fit together -------------------------------------------


def _piece(**fields: Any) -> dict[str, Any]:
    return chat_chunk({"tool_calls": [{"index": 0, **fields}]})


_CALL = {"id": "call_A", "type": "function"}


def test_a_chat_chunk_whose_delta_is_null_is_refused_in_veridics_words() -> None:
    """The SDK's merge raised an ``AttributeError`` of its own (``'NoneType' object has no
    attribute 'to_dict'``), which said nothing of the answer or what to do."""
    empty = chat_chunk({})
    empty["choices"][0]["delta"] = None
    with pytest.raises(VeridicError, match="not one answer"):
        _streamed("chat", [empty, chat_chunk({"content": "Done."}, finish="stop")])


@pytest.mark.parametrize(("first", "later"), [("function", "custom"), ("custom", "function")])
def test_a_streamed_call_whose_type_changes_is_refused(first: str, later: str) -> None:
    """The SDK keeps the last ``type`` a call's pieces give. A custom call (free-form
    input, a tool the view never sends) whose later piece said ``function`` ran as a
    function call; the other way round the SDK failed an ``assert`` of its own."""
    events = [
        _piece(id="call_A", type=first, function={"name": "get_weather", "arguments": ""}),
        _piece(type=later, function={"arguments": '{"city": "Oslo"}'}),
        chat_chunk({}, finish="tool_calls"),
    ]
    with pytest.raises(VeridicError, match="type") as raised:
        _streamed("chat", events)
    assert "not one answer" in str(raised.value)


# --- errors that name what was wrong -----------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "answer", "key"),
    [
        ("chat", "id", "id"),
        ("chat", "name", "function.name"),
        ("responses", "call_id", "call_id"),
        ("anthropic", "name", "name"),
    ],
)
def test_a_call_without_its_id_or_name_is_refused_as_the_servers_answer(
    api: str, answer: str, key: str
) -> None:
    """A call the server sent without an id (or a name) was refused with "check that the
    installed SDK version is one the extra allows": the SDK was never the cause, and the
    message sent the reader to the wrong place."""
    body: dict[str, Any]
    if api == "chat":
        body = _copy(CHAT_TOOL_CALL)
        call = body["choices"][0]["message"]["tool_calls"][0]
        (call["function"] if answer == "name" else call).pop(answer)
    elif api == "responses":
        body = _copy(RESPONSE)
        body["output"][1].pop(answer)
    else:
        body = _copy(MESSAGE)
        body["content"][1].pop(answer)
    with pytest.raises(VeridicError, match=f"no text at {key}") as raised:
        _sent(api, body)
    message = str(raised.value)
    assert "what sits between you and the API" in message
    assert "nothing of it was run" in message


def test_a_call_of_an_unknown_type_is_quoted_clipped() -> None:
    """The type of a call the server sent was quoted whole: a megabyte of it went into the
    error and every log line that kept it."""
    body = _copy(CHAT_TOOL_CALL)
    body["choices"][0]["message"]["tool_calls"][0]["type"] = "x" * 100_000
    with pytest.raises(VeridicError, match="custom tools") as raised:
        _sent("chat", body)
    assert len(str(raised.value)) < 1000


def test_the_refused_answers_run_no_call() -> None:
    """What an answer refused above would have run had it been read: the call of the view
    (so a refusal is what keeps it from running, not a name the view lacks)."""
    gw, reply = _sent("chat", _copy(CHAT_TOOL_CALL))
    (outcome,) = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert outcome.result.ok


# --- a list the adapter reads, sent as something else -----------------------------------------


def test_chat_tool_calls_that_are_no_list_are_refused() -> None:
    """``tool_calls`` sent as an object (``{"0": {...}}``) read as no call at all: with
    ``finish_reason: "stop"`` the answer was a final one, the call gone without a word."""
    body = _copy(CHAT_TOOL_CALL)
    message = body["choices"][0]["message"]
    message["tool_calls"] = {"0": message["tool_calls"][0]}
    body["choices"][0]["finish_reason"] = "stop"
    with pytest.raises(VeridicError, match="tool_calls") as raised:
        _sent("chat", body)
    assert "an object" in str(raised.value) or "a dict" in str(raised.value)


@pytest.mark.parametrize(
    "content", ["Let me check.", {"type": "output_text", "text": "Let me check."}]
)
def test_a_responses_message_whose_content_is_no_list_is_refused(content: object) -> None:
    """A message item whose ``content`` is text or one part (a compatible server's) read
    as a message of no text: what the model said vanished from the reply and its record."""
    body = _copy(RESPONSE)
    body["output"][0]["content"] = content
    with pytest.raises(VeridicError, match="content") as raised:
        _sent("responses", body)
    assert "nothing of it was run" in str(raised.value)


def test_a_message_without_calls_or_parts_is_read_as_before() -> None:
    body = _copy(CHAT_TOOL_CALL)
    body["choices"][0].update(
        finish_reason="stop", message={"role": "assistant", "content": "Done.", "tool_calls": None}
    )
    _, reply = _sent("chat", body)
    assert (reply.text, reply.tool_calls) == ("Done.", ())
    response = _copy(RESPONSE)
    response["output"][0]["content"] = []
    _, reply = _sent("responses", response)
    assert reply.text == ""


def test_a_streamed_block_that_starts_before_one_already_started_is_refused() -> None:
    """The API starts blocks in the order of their index. A stream that started block 1
    and then block 0 showed "B" then "A", while the reply, assembled by index, recorded
    and sent back "AB": the user read one answer and another was kept."""
    events = _message_events(
        _text_block(1, {"type": "text_delta", "text": "B"}),
        _text_block(0, {"type": "text_delta", "text": "A"}),
        stop="end_turn",
    )
    with pytest.raises(VeridicError, match="block 0") as raised:
        _streamed("anthropic", events)
    assert "nothing" in str(raised.value)


@pytest.mark.parametrize("key", ["citations", "search_results", "annotations"])
def test_what_a_search_found_is_refused_in_any_shape(key: str) -> None:
    """A list of what a search the server ran found is refused (the model read text outside
    the prompt); the same sent as an object, not a list, was read as none, and the answer
    passed as one the model wrote from the prompt alone."""
    body = _copy(CHAT_TOOL_CALL)
    found = {"0": {"type": "url_citation", "url": "https://example.com"}}
    if key == "annotations":
        body["choices"][0]["message"][key] = found
    else:
        body[key] = found
    said = "cites what the model read outside the prompt" if key == "annotations" else key
    with pytest.raises(VeridicError, match=said):
        _sent("chat", body)


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_a_reasoning_block_the_adapter_cannot_keep_is_refused_as_the_servers_answer(
    api: str,
) -> None:
    """A reasoning block missing what the API always sends (a compatible server's) was
    refused by ``ReasoningItem`` with "pass the block exactly as the provider returned
    it": the adapter had, and the message named neither it nor that nothing ran."""
    if api == "anthropic":
        body = _copy(MESSAGE)
        body["content"].insert(0, {"type": "thinking", "thinking": "Oslo first."})
        named = "AnthropicMessages"
    else:
        body = _copy(RESPONSE)
        body["output"].insert(0, {"type": "reasoning", "id": "rs_1", "content": []})
        named = "OpenAIResponses"
    with pytest.raises(VeridicError, match=named) as raised:
        _sent(api, body)
    message = str(raised.value)
    assert "nothing of it was run" in message
    assert "exactly as the provider returned it" not in message
    assert message.rstrip().endswith(
        "check what sits between you and the API (a proxy, or a compatible server whose "
        "reasoning blocks are not the API's own)"
    )


def test_a_responses_stream_ending_incomplete_with_a_response_of_no_status_is_incomplete() -> None:
    """A compatible server that gives its responses no status: the ``response.incomplete``
    event says what the response does not, so the reply is incomplete and its calls do
    not run, while its text is kept."""
    final = _copy(RESPONSE)
    del final["status"]
    gw, reply = _streamed("responses", _responses_events("response.incomplete", final))
    assert (reply.text, reply.stop_reason) == ("Let me check.", "incomplete")
    with pytest.raises(VeridicError, match="was cut off"):
        gw.run_tools(reply, policy=ApprovalPolicy(VIEW))


# --- the second read: what the first round left, and its own refusals --------------------------


@pytest.mark.parametrize("apart", [False, True], ids=["one-message", "two-messages"])
def test_a_responses_answer_of_text_and_a_refusal_is_refused_as_in_chat(apart: bool) -> None:
    """Chat refuses a message that holds both text and a refusal (the reply could keep only
    one); a Responses message that held both joined them into one text, so the same answer
    passed over one API and was refused over the other."""
    response = _copy(RESPONSE)
    refusal = {"type": "refusal", "refusal": "I cannot help with that."}
    if apart:
        second = {**response["output"][0], "id": "msg_2", "content": [refusal]}
        response["output"].insert(1, second)
    else:
        response["output"][0]["content"].append(refusal)
    with pytest.raises(VeridicError, match="both text") as raised:
        _sent("responses", response)
    assert "nothing of it was run" in str(raised.value)


def test_a_responses_refusal_alone_is_read_as_before() -> None:
    response = _copy(RESPONSE)
    response["output"] = [
        {**response["output"][0], "content": [{"type": "refusal", "refusal": "I cannot."}]}
    ]
    _, reply = _sent("responses", response)
    assert reply.text == "I cannot."


@pytest.mark.parametrize(
    ("key", "count"),
    [("input_tokens", -5), ("output_tokens", 2.5), ("cache_read_input_tokens", -1)],
)
def test_a_count_of_message_start_that_is_no_count_is_refused(key: str, count: object) -> None:
    """A count that is no count in ``message_start`` was replaced by ``message_delta``'s
    without a word, where the same count in ``message_delta``, or sent whole, is refused."""
    events = _message_events(_tool_block(0), stop="tool_use")
    events[0]["message"]["usage"] = {"input_tokens": 10, "output_tokens": 1, key: count}
    events[-2]["usage"] = {"input_tokens": 10, "output_tokens": 5}
    with pytest.raises(VeridicError, match=f"{key}=") as raised:
        _streamed("anthropic", events)
    assert "not a count" in str(raised.value)


def test_a_count_of_message_start_the_delta_raises_is_read_as_before() -> None:
    events = _message_events(_tool_block(0), stop="tool_use")
    events[0]["message"]["usage"] = {"input_tokens": 10, "output_tokens": 1}
    events[-2]["usage"] = {"input_tokens": 0, "output_tokens": 5}
    _, reply = _streamed("anthropic", events)
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (10, 5)


def test_a_stop_for_tool_calls_without_one_says_what_else_it_may_be() -> None:
    """vLLM answers ``finish_reason: "tool_calls"`` with no call when ``tool_choice`` is
    ``"required"`` and its tool parser finds none in the model's text: the refusal said the
    calls "were lost on the way", which sent the reader to a proxy that dropped nothing."""
    with pytest.raises(VeridicError, match="holds no tool call") as raised:
        _sent("chat", _chat_without_calls({"role": "assistant", "content": "Done."}))
    message = str(raised.value)
    assert "tool parser" in message
    assert 'tool_choice="required"' in message
