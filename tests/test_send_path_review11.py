"""The send path read as an attacker, round 11: what a subclass, a caller's options and
the provider's answer control on the way to and from the model.

- A subclass of :class:`Message` or :class:`Prompt` cannot replace what veridic reads of
  it (its spans, its hash, its provider formats): the audit document, the provenance map,
  the terminal view and the adapters read what veridic recorded.
- Options that are not a mapping are refused by name, never read as "no options".
- A key given twice in the answer objects veridic reads (a call's id, name, type, a
  message's role, a content block) is refused: the parser and the SDK could disagree on
  which tool runs.
- An instance-level patch of the SDK's ``create`` (an observability library, a user's
  wrapper) sees every request veridic sends, whenever it was made.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from test_providers import CHAT_TOOL_CALL, MESSAGE, RESPONSE, VIEW, first_prompt, gateway

from veridic import (
    AnthropicMessages,
    Composer,
    OpenAIChat,
    OpenAIResponses,
    Prompt,
    ScriptedProvider,
    VeridicError,
    instruction,
    untrusted,
)
from veridic.text.message import Message
from veridic.text.provenance import Span

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


# --- options that are not a mapping ---------------------------------------------------------

_NOT_OPTIONS: list[object] = [[], 0, "", False, (), 0.0, [("temperature", 0)], "temperature=0"]


@pytest.mark.parametrize("given", _NOT_OPTIONS, ids=repr)
def test_call_options_that_are_not_a_mapping_are_refused_by_what_was_given(given: object) -> None:
    # Was: options or {} read [], 0, "" and False as no options, and sent the request.
    server = FakeServer(http_module("openai"), [("json", CHAT_TOOL_CALL)])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    with pytest.raises(VeridicError, match="must be a mapping of request parameters") as caught:
        gw.send(first_prompt(), VIEW, request_id="req-1", options=given)  # type: ignore[arg-type]  # the wrong type is the test
    assert type(given).__name__ in str(caught.value)
    assert repr(given)[:10] in str(caught.value)
    assert server.sent == []
    assert calls.records() == ()


@pytest.mark.parametrize("given", _NOT_OPTIONS, ids=repr)
def test_adapter_options_that_are_not_a_mapping_are_refused_by_what_was_given(
    given: object,
) -> None:
    server = FakeServer(http_module("openai"), [])
    with pytest.raises(VeridicError, match="must be a mapping of request parameters") as caught:
        OpenAIChat(server.client(openai, "OpenAI"), model="m", options=given)  # type: ignore[arg-type]  # the wrong type is the test
    assert type(given).__name__ in str(caught.value)


@pytest.mark.parametrize("given", [[], 0, "", False], ids=repr)
def test_anthropic_adapter_options_that_are_not_a_mapping_are_refused(given: object) -> None:
    server = FakeServer(http_module("anthropic"), [])
    with pytest.raises(VeridicError, match="must be a mapping of request parameters"):
        AnthropicMessages(
            server.client(anthropic, "Anthropic"),
            model="claude-t",
            max_tokens=9,
            options=given,  # type: ignore[arg-type]  # the wrong type is the test
        )


def test_no_options_and_empty_options_still_send() -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_TOOL_CALL)] * 2)
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    gw.send(first_prompt(), VIEW, request_id="req-1", options=None)
    gw.send(first_prompt(), VIEW, request_id="req-2", options={})
    assert len(server.sent) == 2
