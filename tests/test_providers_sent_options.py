"""What the options digest covers and which request options are refused, against the real SDKs.

Each test goes through the public API (the gateway over the real SDKs and a fake
transport) and failed on the code before its fix: the digest (``Reply.options_sha256``)
must follow what the SDK sends, and an option or header with which the server changes
what the model reads, or runs tools outside the view, is refused before anything is sent.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from pydantic import BaseModel, ConfigDict, Field
from test_providers import MESSAGE, VIEW, first_prompt, gateway
from test_review9_prov import _chat_answer

from veridic import AnthropicMessages, OpenAIChat, VeridicError
from veridic.providers import Adapter

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _adapter(api: str, options: dict[str, object] | None = None) -> tuple[Adapter, FakeServer]:
    """An adapter over a fake server that answers once (a chat answer, or a message)."""
    if api == "anthropic":
        server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
        client = server.client(anthropic, "Anthropic")
        return AnthropicMessages(client, model="claude-test", max_tokens=64, options=options), server
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    return OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test", options=options), server


def _sent(options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The reply's options digest and the request's options as the SDK sent them."""
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    gw, _, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    reply = gw.send(first_prompt(), VIEW, request_id="req-1", options=options)
    body = {key: value for key, value in server.body.items() if key not in {"messages", "tools"}}
    return reply.options_sha256, body


# --- 3. a pydantic option is digested as the SDK writes it ------------------------------------


class _Format(BaseModel):
    """A response format whose field has an alias: the SDK writes it by its field name as
    an option of its own, and by its alias inside ``extra_body`` or a list."""

    model_config = ConfigDict(populate_by_name=True)

    kind: str = Field(alias="type")


class _Plain(BaseModel):
    """A model whose JSON is the same whichever way the SDK dumps it."""

    type: str
    strict: bool = False


def test_a_pydantic_option_without_aliases_has_the_digest_of_the_dict_sent() -> None:
    as_model, sent_model = _sent({"response_format": _Plain(type="json_object")})
    as_dict, sent_dict = _sent({"response_format": {"type": "json_object"}})
    assert sent_model == sent_dict
    assert as_model == as_dict


def test_a_pydantic_option_whose_aliases_change_its_json_is_refused_before_it_is_sent() -> None:
    """The SDK writes an option's pydantic model by its field names (``{"kind": ...}``),
    but the digest dumped it by its aliases (``{"type": ...}``): the request that sent
    ``{"kind": ...}`` had the digest of one that sent ``{"type": ...}``, and the same
    ``{"kind": ...}`` sent as a dict had another. Which of the two the SDK writes depends
    on where the model sits (inside ``extra_body`` or a list it is written by alias), so
    such a model is refused, naming the option and the dict to pass instead."""
    server = FakeServer(http_module("openai"), [])
    gw, calls, _ = gateway(OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test"))
    for options in (
        {"response_format": _Format(type="json_object")},
        {"extra_body": {"response_format": _Format(type="json_object")}},
        {"metadata": {"format": [_Format(type="json_object")]}},
    ):
        with pytest.raises(VeridicError, match=r"_Format.*'kind'.*'type'.*dict"):
            gw.send(first_prompt(), VIEW, request_id="req-1", options=options)
    assert server.sent == []
    assert calls.records() == ()


# --- 2. options with which the server adds text or runs tools of its own -----------------------

_SERVER_TEXT = [
    # Skills loaded into a code-execution container: their names and descriptions are put
    # before the model; an id reuses a container that holds files of earlier requests.
    ("anthropic", "container", {"skills": [{"type": "anthropic", "skill_id": "pptx"}]}),
    ("anthropic", "container", "container_011CZ"),
    # The conversation summarised by the server, in text it writes itself.
    ("anthropic", "compaction", {"type": "summarize"}),
    # Mistral puts a system prompt of its own (reasoning) before the request's.
    ("chat", "prompt_mode", "reasoning"),
    # Mistral prepends a safety prompt of its own to the conversation.
    ("chat", "safe_prompt", True),
]


@pytest.mark.parametrize(("api", "key", "value"), _SERVER_TEXT)
def test_an_option_with_which_the_server_adds_text_of_its_own_is_refused(
    api: str, key: str, value: object
) -> None:
    """Anthropic's ``container`` and ``compaction`` and Mistral's ``prompt_mode`` and
    ``safe_prompt`` went through unchecked: the model read text that is in no Prompt, under
    no hash of the model-call record. They are refused like the other server edits, as an
    option, inside ``extra_body`` and as a call's option, before anything is sent."""
    with pytest.raises(VeridicError, match=rf"set {key}=.*remove it"):
        _adapter(api, {key: value})
    with pytest.raises(VeridicError, match=re.escape(f"set extra_body[{key!r}]=")):
        _adapter(api, {"extra_body": {key: value}})
    adapter, server = _adapter(api)
    gw, calls, _ = gateway(adapter)
    with pytest.raises(VeridicError, match=f"{key}="):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={key: value})
    assert server.sent == []
    assert calls.records() == ()


@pytest.mark.parametrize(
    ("api", "key", "value"),
    [("anthropic", "container", None), ("chat", "prompt_mode", None), ("chat", "safe_prompt", False)],
)
def test_the_value_that_adds_no_server_text_is_sent_and_digested(
    api: str, key: str, value: object
) -> None:
    """``prompt_mode: null`` asks Mistral for no system prompt of its own, and
    ``safe_prompt: false`` for no safety prompt: both go as given, and count in the digest
    (``prompt_mode`` left out lets a reasoning model have Mistral's)."""
    adapter, server = _adapter(api)
    gw, _, _ = gateway(adapter)
    reply = gw.send(first_prompt(), VIEW, request_id="req-1", options={"extra_body": {key: value}})
    assert server.body[key] == value
    adapter, _ = _adapter(api)
    bare = gateway(adapter)[0].send(first_prompt(), VIEW, request_id="req-1")
    assert reply.options_sha256 != bare.options_sha256
