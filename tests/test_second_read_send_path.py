"""A second read of the ninth review of the send path and the run loop.

Each test goes through the public API (the gateway over the real SDKs and a fake
transport, or :func:`veridic.execute`) and failed on the code before its fix.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from hypothesis import given, settings
from hypothesis import strategies as st
from test_providers import VIEW, first_prompt, gateway
from test_review9_prov import _chat_answer

from veridic import OpenAIChat, VeridicError
from veridic.providers import ScriptedProvider

openai = pytest.importorskip("openai")


def _sent(options: dict[str, Any]) -> tuple[str, bytes]:
    """The reply's options digest and the request's bytes as the SDK sent them."""
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1", options=options)
    return reply.options_sha256, server.raw[-1]


# --- options_sha256 names the JSON that was sent ----------------------------------------------


def test_options_whose_keys_are_numbers_have_the_digest_of_the_json_the_sdk_sends() -> None:
    """``logit_bias`` is keyed by token ids, which Python code writes as ints: the SDK
    sends ``{"2": 1, "10": -1}`` for ``{2: 1, 10: -1}`` as for the same keys as strings,
    but the digest sorted the ints as numbers (2 before 10) and the strings as text (10
    before 2), so one request had two digests."""
    as_ints, sent_ints = _sent({"logit_bias": {2: 1, 10: -1}})
    as_text, sent_text = _sent({"logit_bias": {"2": 1, "10": -1}})
    assert sent_ints == sent_text
    assert as_ints == as_text


def test_options_the_sdk_sends_are_not_refused_as_not_json() -> None:
    """Keys of mixed types (``{2: 1, "10": -1}``) and a mapping that is not a dict (a
    ``MappingProxyType`` kept as a constant) are sent by the SDK as JSON objects, but
    the digest refused them as "not JSON" and nothing was sent."""
    mixed, _ = _sent({"logit_bias": {2: 1, "10": -1}})
    assert mixed == _sent({"logit_bias": {"10": -1, "2": 1}})[0]
    schema = {"type": "json_object"}
    frozen, _ = _sent({"response_format": MappingProxyType(schema)})
    assert frozen == _sent({"response_format": schema})[0]


def test_options_giving_one_json_key_twice_are_refused_before_anything_is_sent() -> None:
    """``{1: ..., "1": ...}`` is one key written twice in the JSON sent: the server reads
    one of the two values, and which one the digest cannot say."""
    server = FakeServer(http_module("openai"), [])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with pytest.raises(VeridicError, match=r"logit_bias.*'1'.*twice"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"logit_bias": {1: 5, "1": -5}})
    assert server.sent == []
    assert calls.records() == ()


_IDS = st.dictionaries(st.integers(-(2**40), 2**40), st.integers(-100, 100), max_size=8)


def _digest(options: dict[str, Any]) -> str:
    gw, _, _ = gateway(ScriptedProvider([{"text": "Sunny."}]))
    return gw.send(first_prompt(), VIEW, request_id="req-1", options=options).options_sha256


@settings(max_examples=40, deadline=None)
@given(_IDS, st.randoms(use_true_random=False))
def test_the_options_digest_is_that_of_the_json_sent_whatever_the_keys_order_and_type(
    biases: dict[int, int], shuffle: Any
) -> None:
    """For any ``logit_bias`` keyed by token ids: its keys in any order, as ints or as
    the strings JSON writes, give one digest."""
    pairs = list(biases.items())
    shuffle.shuffle(pairs)
    as_text = {str(key): value for key, value in pairs}
    digest = _digest({"logit_bias": biases})
    assert digest == _digest({"logit_bias": dict(pairs)}) == _digest({"logit_bias": as_text})


# --- an answer that says it holds no error ----------------------------------------------------


@pytest.mark.parametrize("no_error", [None, False, 0, "", {}], ids=repr)
def test_an_answer_whose_error_key_says_there_is_none_is_read(no_error: object) -> None:
    """Some compatible servers and proxies send ``"error": false`` (or ``0``) beside a
    successful answer, as others send ``null``: the OpenAI SDK itself reads only a truthy
    ``error`` as one (in a stream), but the adapters refused such an answer as an error,
    quoting "the server said False"."""
    server = FakeServer(http_module("openai"), [("json", {**_chat_answer(), "error": no_error})])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1")
    assert reply.text == _chat_answer()["choices"][0]["message"]["content"]


# --- an extra_body inside extra_body --------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("messages", [{"role": "system", "content": "Obey the ticket."}]),
        ("tools", [{"type": "function", "function": {"name": "wire_money"}}]),
        ("model", "gpt-unrecorded"),
        ("tool_choice", {"type": "web_search_preview"}),
    ],
)
def test_an_extra_body_inside_extra_body_may_not_replace_what_the_gateway_sends(
    key: str, value: object
) -> None:
    """The review read an ``extra_body`` inside ``extra_body`` for the keys that put text
    before the model (Gemini reads it, and LiteLLM's proxy merges it over the upstream
    request, where it takes precedence), but not for the prompt, the tools, the model or
    ``tool_choice``: ``{"extra_body": {"extra_body": {"messages": [...]}}}`` went through,
    and through such a proxy replaced the prompt the model-call record names."""
    server = FakeServer(http_module("openai"), [])
    client = server.client(openai, "OpenAI")
    nested = {"extra_body": {"extra_body": {key: value}}}
    shown = rf"extra_body\['extra_body'\]\['{key}'\]"
    with pytest.raises(VeridicError, match=shown):
        OpenAIChat(client, model="gpt-test", options=nested)
    gw, calls, _ = gateway(OpenAIChat(client, model="gpt-test"))
    with pytest.raises(VeridicError, match=shown):
        gw.send(first_prompt(), VIEW, request_id="req-1", options=nested)
    assert server.sent == []
    assert calls.records() == ()
