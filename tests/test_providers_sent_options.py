"""What the options digest covers and which request options are refused, against the real SDKs.

Each test goes through the public API (the gateway over the real SDKs and a fake
transport) and failed on the code before its fix: the digest (``Reply.options_sha256``)
must follow what the SDK sends, and an option or header with which the server changes
what the model reads, or runs tools outside the view, is refused before anything is sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from pydantic import BaseModel, ConfigDict, Field
from test_providers import VIEW, first_prompt, gateway
from test_review9_prov import _chat_answer

from veridic import OpenAIChat, VeridicError

openai = pytest.importorskip("openai")


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
