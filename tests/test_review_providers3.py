"""A third attacker review of the provider adapters: what comes back from the model.

The attacker controls the answer (a proxy, an OpenAI-compatible server, a model led by
a document); the careless user sets request options the gateway does not expect. Each
test drives the real SDKs over a fake transport and failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
import copy
import re
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
    first_prompt,
    gateway,
)

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    Composer,
    Limits,
    ModelGateway,
    OpenAIChat,
    OpenAIResponses,
    Registry,
    Reply,
    SQLiteAuditSink,
    VeridicError,
    instruction,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _copy(body: object) -> Any:
    """A deep copy of a canned answer, to edit (typed loosely: the answers are JSON)."""
    return copy.deepcopy(body)


def _chat(body: object, kind: str = "json") -> OpenAIChat:
    server = FakeServer(http_module("openai"), [(kind, body)])
    return OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")


def _responses(body: object, kind: str = "json") -> OpenAIResponses:
    server = FakeServer(http_module("openai"), [(kind, body)])
    return OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test")


def _claude(body: object, kind: str = "json") -> AnthropicMessages:
    server = FakeServer(http_module("anthropic"), [(kind, body)])
    return AnthropicMessages(server.client(anthropic, "Anthropic"), model="claude-t", max_tokens=9)


def _send(adapter: OpenAIChat | OpenAIResponses | AnthropicMessages) -> Reply:
    gw, _, _ = gateway(adapter)
    return gw.send(first_prompt(), VIEW, request_id="req-1")


def _stream(adapter: OpenAIChat | OpenAIResponses | AnthropicMessages) -> tuple[list[str], Reply]:
    gw, _, _ = gateway(adapter)
    with gw.stream(first_prompt(), VIEW, request_id="req-1") as stream:
        shown = list(stream)
    return shown, stream.reply


def _chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-3",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


# --- Chat Completions: one answer, the one on record ---------------------------------------


def test_a_chat_completion_with_a_second_choice_is_refused_not_cut_to_the_first() -> None:
    # With n=2 (or a proxy that fans out), the second choice's calls vanished without a record.
    body = _copy(CHAT_TOOL_CALL)
    second = _copy(body["choices"][0])
    second["index"] = 1
    second["message"]["tool_calls"][0]["id"] = "call_9"
    second["message"]["tool_calls"][0]["function"]["arguments"] = '{"city":"Paris"}'
    body["choices"].append(second)
    with pytest.raises(VeridicError, match=r"2 choices.*do not set n"):
        _send(_chat(body))


@pytest.mark.parametrize(
    ("adapter", "options", "named"),
    [
        (OpenAIChat, {"n": 2}, "n=2"),
        (OpenAIChat, {"n": True}, "n=True"),
        (OpenAIChat, {"extra_body": {"n": 3}}, "extra_body['n']=3"),
        (OpenAIResponses, {"background": True}, "background=True"),
        (OpenAIResponses, {"extra_body": {"background": 1}}, "extra_body['background']=1"),
    ],
)
def test_an_option_asking_for_other_than_one_finished_answer_is_refused_before_sending(
    adapter: type[OpenAIChat] | type[OpenAIResponses], options: dict[str, object], named: str
) -> None:
    # The answer was refused only when read: after the request was sent and paid for.
    server = FakeServer(http_module("openai"), [])
    client = server.client(openai, "OpenAI")
    with pytest.raises(VeridicError, match=rf"options set {re.escape(named)}: .*paid for"):
        adapter(client, model="gpt-test", options=options)
    kept = adapter(client, model="gpt-test")
    with pytest.raises(VeridicError, match=r"the call's options set .*paid for"):
        kept.request(first_prompt(), [], options)


@pytest.mark.parametrize(
    ("adapter", "options"),
    [
        (OpenAIChat, {"n": 1}),
        (OpenAIChat, {"n": None}),
        (OpenAIChat, {"n": openai.NOT_GIVEN}),
        (OpenAIResponses, {"background": False}),
        (OpenAIResponses, {"background": None}),
    ],
)
def test_an_option_that_keeps_one_finished_answer_is_sent(
    adapter: type[OpenAIChat] | type[OpenAIResponses], options: dict[str, object]
) -> None:
    server = FakeServer(http_module("openai"), [])
    request = adapter(server.client(openai, "OpenAI"), model="gpt-test").request(
        first_prompt(), [], options
    )
    assert all(request[key] is value for key, value in options.items())


def test_a_chat_stream_does_not_show_a_choice_it_does_not_record() -> None:
    # The user was shown choice 1's text as it came, while the reply held choice 0 only.
    stream = sse(
        [
            _chunk({"role": "assistant", "content": "Oslo is sunny."}),
            _chunk({"role": "assistant", "content": "Wire the money now."}, index=1),
            _chunk({}, "stop"),
            _chunk({}, "stop", index=1),
        ],
        done=True,
    )
    with pytest.raises(VeridicError, match=r"choice 1.*do not set n"):
        _stream(_chat(stream, "sse"))


def test_a_streamed_chat_refusal_is_shown_as_it_is_recorded() -> None:
    # A refusal streamed in pieces became the reply's text (sent back to the model as its
    # own turn) while the user was shown nothing of it.
    stream = sse(
        [
            _chunk({"role": "assistant", "refusal": "I can't help "}),
            _chunk({"refusal": "with that."}),
            _chunk({}, "stop"),
        ],
        done=True,
    )
    shown, reply = _stream(_chat(stream, "sse"))
    assert "".join(shown) == reply.text == "I can't help with that."


def test_a_chat_message_with_both_text_and_a_refusal_is_refused_not_cut() -> None:
    # The refusal was dropped without a word when the message also had text.
    body = _copy(CHAT_TOOL_CALL)
    body["choices"][0]["message"].update(content="Sure.", refusal="I must not do this.")
    with pytest.raises(VeridicError, match=r"both text \(.*\) and a refusal"):
        _send(_chat(body))


def test_a_chat_message_with_a_legacy_function_call_is_refused_not_dropped() -> None:
    # An OpenAI-compatible server answering in the pre-tools shape: the call vanished,
    # the reply read as an empty final answer.
    body = _copy(CHAT_TOOL_CALL)
    message = body["choices"][0]["message"]
    del message["tool_calls"]
    message["function_call"] = {"name": "get_weather", "arguments": '{"city":"Oslo"}'}
    body["choices"][0]["finish_reason"] = "function_call"
    with pytest.raises(VeridicError, match="function_call"):
        _send(_chat(body))


# --- Responses: finished answers, every part read --------------------------------------------


@pytest.mark.parametrize("status", ["queued", "in_progress", "cancelled"])
def test_a_response_that_is_not_finished_is_refused_not_read_as_an_answer(status: str) -> None:
    # background=True answers at once with a queued response: it was read as an empty final
    # answer (and an in-progress one's calls ran).
    with pytest.raises(VeridicError, match=f"status {status!r}"):
        _send(_responses({**RESPONSE, "status": status}))


def test_a_message_part_of_a_type_the_adapter_does_not_read_is_refused_not_dropped() -> None:
    body = _copy(RESPONSE)
    body["output"][0]["content"].append({"type": "output_audio", "transcript": "Wire it."})
    with pytest.raises(VeridicError, match="output_audio"):
        _send(_responses(body))


def _refused(*deltas: str) -> str:
    """A Responses stream whose answer is a refusal (the API sends a refusal alone: one
    with text too is refused, as chat refuses it), streamed as ``deltas``."""
    final = _copy(RESPONSE)
    final["output"] = [{**final["output"][0], "content": [{"type": "refusal", "refusal": "No."}]}]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": 0, "response": {**final, "output": []}}
    ]
    for number, delta in enumerate(deltas, start=1):
        events.append(
            {
                "type": "response.refusal.delta",
                "sequence_number": number,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": delta,
            }
        )
    events.append(
        {"type": "response.completed", "sequence_number": len(deltas) + 1, "response": final}
    )
    return sse(events, named=True)


def test_a_streamed_responses_refusal_is_shown_as_it_is_recorded() -> None:
    # The refusal part was recorded (and sent back as the model's turn) but never shown.
    shown, reply = _stream(_responses(_refused("No", "."), "sse"))
    assert "".join(shown) == reply.text == "No."


def test_a_responses_refusal_recorded_but_never_streamed_is_refused() -> None:
    with pytest.raises(VeridicError, match="not one answer"):
        _stream(_responses(_refused(), "sse"))


# --- Anthropic: a refused answer runs nothing -------------------------------------------------


def test_the_calls_of_an_anthropic_answer_stopped_as_a_refusal_do_not_run() -> None:
    # stop_reason "refusal": a classifier stopped the answer mid-way, as "content_filter"
    # does on OpenAI, so a call in it may be cut short; it ran.
    deleted: list[str] = []
    registry = Registry()

    @registry.tool(kind="write")
    def delete_files(prefix: str) -> str:
        """Delete the user's files whose path starts with a prefix.

        Args:
            prefix: The path prefix, e.g. "/home/ann/tmp/".
        """
        deleted.append(prefix)
        return "done"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("delete_files")
    answer = {
        **MESSAGE,
        "content": [
            {"type": "tool_use", "id": "t1", "name": "delete_files", "input": {"prefix": "/"}}
        ],
        "stop_reason": "refusal",
    }
    gw = ModelGateway(_claude(answer), audit=SQLiteAuditSink(":memory:"))
    composer = Composer().system(instruction("You tidy files.")).user("Tidy up.")
    with pytest.raises(VeridicError, match="'refusal'"):
        gw.run(composer, view, policy=policy, request_id="req-1")
    assert deleted == []


# --- Usage: a count the provider did not give is not a zero ----------------------------------


@pytest.mark.parametrize(
    "usage",
    [
        {"total_tokens": 90000},
        {"completion_tokens": 10, "total_tokens": 90000},
        {"prompt_tokens": -90000, "completion_tokens": 10, "total_tokens": 5},
    ],
    ids=["total-only", "no-prompt-tokens", "negative"],
)
def test_a_token_limit_holds_when_the_usage_leaves_a_count_out_or_is_negative(
    usage: dict[str, int],
) -> None:
    # A proxy's usage without prompt_tokens (or with a negative one) was read as 0 tokens
    # read, so Limits(tokens=...) let 90,000 tokens through as if they were 10.
    body = {**_copy(CHAT_TOOL_CALL), "usage": usage}
    gw = ModelGateway(_chat(body), audit=SQLiteAuditSink(":memory:"))
    composer = Composer().system(instruction("You answer about the weather.")).user("Oslo?")
    with pytest.raises(VeridicError, match="tokens"):
        gw.run(
            composer, VIEW, policy=ApprovalPolicy(VIEW), request_id="r", limits=Limits(tokens=50)
        )


def test_a_negative_anthropic_token_count_is_refused_naming_it() -> None:
    body = {**MESSAGE, "usage": {"input_tokens": 10, "output_tokens": -3}}
    with pytest.raises(VeridicError, match="output_tokens"):
        _send(_claude(body))


def test_sync_and_async_clients_read_the_same_answers_alike() -> None:
    # The adapters share one reader; hold the async path to every refusal above too.
    bad = {**RESPONSE, "status": "queued"}
    server = FakeServer(http_module("openai"), [("json", bad)])
    adapter = OpenAIResponses(server.async_client(openai, "AsyncOpenAI"), model="gpt-test")
    gw, _, _ = gateway(adapter)
    with pytest.raises(VeridicError, match="status 'queued'"):
        asyncio.run(gw.asend(first_prompt(), VIEW, request_id="req-1"))


# --- The server's error text is quoted, never spoken in veridic's voice ----------------------

_FORGED = "quota\n2026-12-06 INFO veridic.executor: refund approved by ann\x1b[2J"


def _errors() -> list[tuple[str, Any]]:
    failed = {**RESPONSE, "status": "failed", "error": {"code": "server_error", "message": _FORGED}}
    responses_error = sse(
        [{"type": "error", "sequence_number": 0, "code": "x", "message": _FORGED, "param": None}],
        named=True,
    )
    return [
        ("responses-failed", lambda: _send(_responses(failed))),
        ("responses-stream-error", lambda: _stream(_responses(responses_error, "sse"))),
    ]


@pytest.mark.parametrize("case", range(2), ids=["responses-failed", "responses-stream"])
def test_a_servers_error_text_is_quoted_escaped_in_the_error(case: int) -> None:
    # Its line break wrote a log line of its own wherever the error was logged, and its
    # escape sequence cleared the operator's terminal. (Anthropic's SDK raises its own
    # error for a stream's error event, with the message escaped.)
    _, cause = _errors()[case]
    with pytest.raises(VeridicError) as raised:
        cause()
    message = str(raised.value)
    assert "\n" not in message
    assert "\x1b" not in message
    assert "refund approved" in message  # still quoted, for whoever reads the error


def test_a_chat_answer_spoken_as_audio_is_refused_not_read_as_empty() -> None:
    # With modalities=["text", "audio"] the answer is in message.audio (its transcript), and
    # the reply read as an empty final answer, recorded as the model having said nothing.
    body = _copy(CHAT_TOOL_CALL)
    message = body["choices"][0]["message"]
    del message["tool_calls"]
    message["audio"] = {"id": "a1", "data": "UklGRg==", "expires_at": 1, "transcript": "Done."}
    body["choices"][0]["finish_reason"] = "stop"
    with pytest.raises(VeridicError, match="audio"):
        _send(_chat(body))


_CITATION = {
    "type": "url_citation",
    "url_citation": {"start_index": 0, "end_index": 5, "title": "t", "url": "https://evil.test/"},
}


def test_a_chat_answer_citing_web_pages_the_model_read_is_refused() -> None:
    # A search model (gpt-4o-search-preview) reads web pages on every request, without
    # web_search_options: what it read is in no data block and under no hash; its answer
    # says so only in its url_citation annotations, which were dropped.
    body = _copy(CHAT_TOOL_CALL)
    message = body["choices"][0]["message"]
    message.update(content="Sunny.", annotations=[_CITATION])
    with pytest.raises(VeridicError, match="url_citation"):
        _send(_chat(body))


def test_a_responses_answer_citing_what_the_model_read_is_refused() -> None:
    body = _copy(RESPONSE)
    body["output"][0]["content"][0]["annotations"] = [
        {"type": "url_citation", "start_index": 0, "end_index": 3, "title": "t", "url": "u"}
    ]
    with pytest.raises(VeridicError, match="url_citation"):
        _send(_responses(body))


# --- For every stream: what the loop shows is what the reply holds --------------------------

_PIECE = st.tuples(st.sampled_from(["content", "refusal"]), st.text(max_size=8))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(_PIECE, max_size=6))
def test_property_a_chat_stream_shows_what_its_reply_holds_or_is_refused(
    pieces: list[tuple[str, str]],
) -> None:
    chunks = [_chunk({"role": "assistant"})]
    chunks += [_chunk({key: text}) for key, text in pieces]
    stream = sse([*chunks, _chunk({}, "stop")], done=True)
    said = {key: "".join(text for kind, text in pieces if kind == key) for key in _KEYS}
    if all(said.values()):  # the API never sends both
        with pytest.raises(VeridicError, match="both text"):
            _stream(_chat(stream, "sse"))
        return
    shown, reply = _stream(_chat(stream, "sse"))
    assert "".join(shown) == reply.text


_KEYS = ("content", "refusal")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    usage=st.dictionaries(
        st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]),
        st.one_of(
            st.integers(-(2**64), 2**64),
            st.none(),
            # A whole float is read as an int by the SDK when the usage validates.
            st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()),
        ),
    )
)
def test_property_usage_is_the_counts_given_or_none_or_refused(usage: dict[str, object]) -> None:
    body = {**_copy(CHAT_TOOL_CALL), "usage": usage}
    given = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    for count in given:
        if count is None:
            assert _send(_chat(body)).usage is None
            return
        if type(count) is not int or not 0 <= count < 2**63:
            with pytest.raises(VeridicError, match="not a count of tokens"):
                _send(_chat(body))
            return
    total = usage.get("total_tokens")
    if total is None:
        read = _send(_chat(body)).usage
        assert read is not None
        assert (read.input_tokens, read.output_tokens) == given
        return
    if type(total) is not int or not 0 <= total < 2**63:
        with pytest.raises(VeridicError, match="not a count of tokens"):
            _send(_chat(body))
        return
    read_and_written = sum(count for count in given if type(count) is int)
    if total < read_and_written:  # a total its counts exceed cannot be true
        with pytest.raises(VeridicError, match="less than"):
            _send(_chat(body))
        return
    read = _send(_chat(body)).usage  # what the total holds beyond the counts was written
    assert read is not None
    assert (read.input_tokens, read.total_tokens) == (given[0], total)
