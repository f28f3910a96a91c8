"""Second read of the request-headers change: attacks on the header checks and on the
chat adapter's reading of arguments sent as an object, against the real SDKs.

Each test goes through the public API (the gateway over the real SDKs and a fake
transport) and failed on the code before its fix.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from hypothesis import given, settings
from hypothesis import strategies as st
from test_providers import MESSAGE, RESPONSE, VIEW, chat_chunk, first_prompt, gateway

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    OpenAIChat,
    OpenAIResponses,
    VeridicError,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

_MCP = "mcp-client-2025-04-04"
_THINKING = "interleaved-thinking-2025-05-14"


def _refused_before_anything_is_sent(extra_headers: dict[Any, Any], match: str) -> None:
    """Send through Anthropic's SDK with ``extra_headers``: refused, nothing sent or recorded."""
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    adapter = AnthropicMessages(
        server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=64
    )
    gw, calls, _ = gateway(adapter)
    with pytest.raises(VeridicError, match=match):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"extra_headers": extra_headers})
    assert server.sent == []
    assert calls.records() == ()


# --- headers: one name given twice, names that are not header names -------------------------


def _spellings(name: str) -> st.SearchStrategy[tuple[str, str]]:
    """Two spellings of ``name`` that differ in the case of at least one letter."""
    cases = st.lists(st.booleans(), min_size=len(name), max_size=len(name))
    spelled = cases.map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(name, upper, strict=True))
    )
    return st.tuples(spelled, spelled).filter(lambda pair: pair[0] != pair[1])


@settings(max_examples=20, deadline=None)
@given(_spellings("anthropic-beta"))
def test_a_header_given_twice_in_one_mapping_is_refused(spellings: tuple[str, str]) -> None:
    """``{"Anthropic-Beta": "mcp-client-...", "anthropic-beta": "..."}`` was read as its last
    value, so the refused beta went unchecked; the SDKs the extras allow before their
    case-insensitive merge send both headers (the server reads both). For any two spellings
    of one name in one mapping, the request is refused before anything is sent."""
    first, second = spellings
    _refused_before_anything_is_sent(
        {first: _MCP, second: _THINKING}, match=r"anthropic-beta.*twice.*once"
    )


def test_a_client_that_respells_a_header_the_sdk_sends_is_refused_naming_the_spelling() -> None:
    """The client's own headers are one mapping: ``default_headers={"Anthropic-Version":
    ...}`` beside the SDK's ``anthropic-version`` is the same header twice (an SDK before
    the case-insensitive merge sends both). Refused when the adapter is built, naming the
    spelling that goes once."""
    client = anthropic.Anthropic(
        api_key="test-key", default_headers={"Anthropic-Version": "2023-06-01"}
    )
    twice = r"default_headers.*twice \('Anthropic-Version' and 'anthropic-version'\).*one spelling"
    with pytest.raises(VeridicError, match=twice):
        AnthropicMessages(client, model="claude-test", max_tokens=64)
    respelled = anthropic.Anthropic(
        api_key="test-key", default_headers={"anthropic-version": "2023-06-01"}
    )
    adapter = AnthropicMessages(respelled, model="claude-test", max_tokens=64)
    assert adapter.headers({})["anthropic-version"] == "2023-06-01"


def test_a_transport_header_respelled_beside_the_sdks_is_sent_and_left_out_of_the_digest() -> None:
    """``default_headers={"user-agent": ...}`` puts the application's spelling beside the
    SDK's ``User-Agent`` in one mapping: a header the digest leaves out, so given twice it
    is accepted (refusing it would refuse a common client), and the digest is the one of a
    client without it."""
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE), ("json", MESSAGE)])
    plain = server.client(anthropic, "Anthropic")
    respelled = plain.with_options(
        default_headers={"user-agent": "app/1", "authorization": "Bearer other"}
    )
    assert {"User-Agent", "user-agent"} <= set(respelled.default_headers)
    digests = []
    for client in (plain, respelled):
        gw, calls, _ = gateway(AnthropicMessages(client, model="claude-test", max_tokens=64))
        gw.send(first_prompt(), VIEW, request_id="req-1")
        digests.append(calls.records()[0].options_sha256)
    assert digests[0] == digests[1]
    assert len(server.sent) == 2


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (b"anthropic-beta", _MCP),  # the SDK sends a bytes name, or fails once on record
        ("anthropic-beta ", _MCP),  # not a header name: h11 fails on it once on record
        ("anthropic beta", _MCP),
        ("", "x"),
        ("X-Flag", "a\r\nanthropic-beta: " + _MCP),  # a header smuggled into a value
        ("X-Flag", "a\nb"),
        ("X-Flag", "a\x00b"),
    ],
)
def test_a_header_name_or_value_http_cannot_carry_is_refused_before_anything_is_sent(
    name: object, value: str
) -> None:
    """A header name that is not text or not an HTTP token, or a value holding a line break
    or another control character, passed the check: the refused-beta check read
    ``"anthropic-beta "`` as another header, and the SDK or HTTP library failed on it only
    once the model call was on record (or sent it as given)."""
    _refused_before_anything_is_sent({name: value}, match=r"extra_headers.*header")


def test_a_refused_beta_is_refused_in_any_case() -> None:
    """``MCP-Client-2025-04-04`` went through: the beta is refused whatever its case."""
    _refused_before_anything_is_sent(
        {"anthropic-beta": _MCP.upper()}, match=r"anthropic-beta.*MCP-CLIENT"
    )


def test_a_refused_beta_message_names_the_beta_and_no_other_header() -> None:
    """The refusal quotes the beta it refuses, never the value of another header (an API
    key in ``x-api-key`` or ``Authorization``)."""
    server = FakeServer(http_module("anthropic"), [])
    client = server.client(anthropic, "Anthropic")
    with pytest.raises(VeridicError) as caught:
        AnthropicMessages(
            client,
            model="claude-test",
            max_tokens=64,
            options={
                "extra_headers": {
                    "x-api-key": "sk-ant-secret-1",
                    "Authorization": "Bearer sk-ant-secret-2",
                    "anthropic-beta": f"{_THINKING},{_MCP}",
                }
            },
        )
    assert _MCP in str(caught.value)
    assert "secret" not in str(caught.value)


# --- a streamed chat call whose arguments come as an object -----------------------------------


def _piece(arguments: object, *, first: bool) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": arguments}}
    if first:
        call.update(id="call_1", type="function")
        call["function"]["name"] = "get_weather"
    return call


def _duplicate_key_stream() -> str:
    """One chunk whose call's arguments are the object ``{"city": "Oslo", "city": "Bergen"}``."""
    chunk = json.dumps(
        chat_chunk({"tool_calls": [_piece({"city": "@"}, first=True)]}, finish="tool_calls")
    )
    twice = chunk.replace('{"city": "@"}', '{"city": "Oslo", "city": "Bergen"}')
    return f"data: {twice}\n\n"


@pytest.mark.parametrize(
    "stream",
    [
        _duplicate_key_stream(),
        # Two pieces of one object: the SDK joins the values of their one key ("OsloBergen").
        sse(
            [
                chat_chunk({"tool_calls": [_piece({"city": "Oslo"}, first=True)]}),
                chat_chunk(
                    {"tool_calls": [_piece({"city": "Bergen"}, first=False)]}, finish="tool_calls"
                ),
            ]
        ),
        # An object, then text: the SDK keeps the object and drops the text.
        sse(
            [
                chat_chunk({"tool_calls": [_piece({"city": "Oslo"}, first=True)]}),
                chat_chunk({"tool_calls": [_piece('{"x": 1}', first=False)]}, finish="tool_calls"),
            ]
        ),
    ],
)
def test_a_streamed_chat_call_whose_arguments_come_as_an_object_is_refused(stream: str) -> None:
    """A server that streams a call's ``arguments`` as a JSON object: the SDK reads each
    chunk with ``json.loads`` (a key given twice keeps its last value) and merges the
    pieces key by key (joining two pieces' values of one key), so the call ran for
    ``Bergen`` or ``OsloBergen`` with nothing said, where the same answer sent whole is
    refused by the dispatcher. The stream is refused, nothing of it run."""
    server = FakeServer(http_module("openai"), [("sse", stream + "data: [DONE]\n\n")])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    streamed = gw.stream(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match=r"arguments as a JSON object.*send\(\)"):
        list(streamed)
    with pytest.raises(VeridicError):
        streamed.reply  # noqa: B018  # no answer to read: nothing of it can be run
    assert len(calls.records()) == 1  # the call was recorded as sent, no answer after it


# --- Responses: a call's arguments sent as an object --------------------------------------------

_TWICE = '{"city": "Oslo", "city": "Bergen"}'


def _responses_answer(arguments: str) -> str:
    """A Responses answer's JSON text whose one call carries ``arguments`` (JSON as written)."""
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": {"city": "@"},
        "status": "completed",
    }
    answer = {**RESPONSE, "output": [call]}
    return json.dumps(answer).replace('{"city": "@"}', arguments)


def test_responses_arguments_sent_as_an_object_keep_a_key_given_twice_for_the_dispatcher() -> None:
    """As in chat: a Responses-compatible server that sends a call's ``arguments`` as an
    object had them read by the SDK's ``json.loads``, the call run for Bergen with nothing
    said. The answer is read from its own JSON text, and the dispatcher refuses the call."""
    http = http_module("openai")
    answer = _responses_answer(_TWICE)
    transport = http.MockTransport(
        lambda request: http.Response(
            200, headers={"content-type": "application/json"}, content=answer.encode()
        )
    )
    client = openai.OpenAI(api_key="test-key", http_client=http.Client(transport=transport))
    gw, _, _ = gateway(OpenAIResponses(client, model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    (call,) = reply.tool_calls
    assert call.arguments == _TWICE
    (outcome,) = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert not outcome.result.ok
    assert "the key 'city' is given twice" in outcome.text


def test_a_streamed_responses_call_whose_arguments_come_as_an_object_is_refused() -> None:
    """Streamed, the final response is read by the SDK's ``json.loads``: a key given twice
    cannot be read back, so such a call is refused, nothing of it run."""
    final = json.loads(_responses_answer('{"city": "Oslo"}'))
    completed = json.dumps({"type": "response.completed", "sequence_number": 1, "response": final})
    twice = completed.replace('{"city": "Oslo"}', _TWICE)
    stream = f"data: {twice}\n\n"
    server = FakeServer(http_module("openai"), [("sse", stream)])
    gw, calls, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="gpt-test"))
    streamed = gw.stream(first_prompt(), VIEW, request_id="req-1")
    with pytest.raises(VeridicError, match=r"arguments as a JSON object.*send\(\)"):
        list(streamed)
    with pytest.raises(VeridicError):
        streamed.reply  # noqa: B018  # no answer to read: nothing of it can be run
    assert len(calls.records()) == 1
