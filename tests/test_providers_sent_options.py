"""What the options digest covers and which request options are refused, against the real SDKs.

Each test goes through the public API (the gateway over the real SDKs and a fake
transport) and failed on the code before its fix: the digest (``Reply.options_sha256``)
must follow what the SDK sends, and an option or header with which the server changes
what the model reads, or runs tools outside the view, is refused before anything is sent.
"""

from __future__ import annotations

import json
import re
from typing import Any, SupportsIndex

import pytest
from _sdk_server import FakeServer, http_module
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field
from test_providers import MESSAGE, RESPONSE, VIEW, first_prompt, gateway
from test_review9_prov import _chat_answer

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    ModelGateway,
    OpenAIChat,
    OpenAIResponses,
    Reply,
    VeridicError,
)
from veridic.providers import Adapter

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _adapter(api: str, options: dict[str, object] | None = None) -> tuple[Adapter, FakeServer]:
    """An adapter over a fake server that answers once (a chat answer, or a message)."""
    if api == "anthropic":
        server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
        client = server.client(anthropic, "Anthropic")
        return AnthropicMessages(
            client, model="claude-test", max_tokens=64, options=options
        ), server
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
    [
        ("anthropic", "container", None),
        ("chat", "prompt_mode", None),
        ("chat", "safe_prompt", False),
    ],
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


# --- 1. headers that change what the server does -----------------------------------------------


def _anthropic_digest(
    options: dict[str, Any] | None = None, default_headers: dict[str, str] | None = None
) -> str:
    """The options digest of a request to Anthropic, its client built with ``default_headers``."""
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    http = server.http
    client = anthropic.Anthropic(
        api_key="test-key",
        default_headers=default_headers,
        http_client=http.Client(transport=http.MockTransport(server.handle)),
    )
    gw, _, _ = gateway(AnthropicMessages(client, model="claude-test", max_tokens=64))
    return gw.send(first_prompt(), VIEW, request_id="req-1", options=options).options_sha256


_THINKING = "interleaved-thinking-2025-05-14"
_LONG = "context-1m-2025-08-07"


def test_a_beta_header_is_covered_by_the_options_digest() -> None:
    """``anthropic-beta`` changes what the server does with the request (a longer context,
    thinking between tool calls), but ``extra_headers`` were left out of the digest: the
    two requests had one digest. The header counts now, given as an option or by the
    client (``default_headers``), and so does ``anthropic-version``."""
    bare = _anthropic_digest()
    beta = _anthropic_digest({"extra_headers": {"anthropic-beta": _THINKING}})
    assert beta != bare
    assert _anthropic_digest(default_headers={"anthropic-beta": _THINKING}) == beta
    older = _anthropic_digest({"extra_headers": {"anthropic-version": "2023-06-01"}})
    assert older not in {bare, beta}


def test_transport_headers_do_not_change_the_options_digest() -> None:
    """Authentication, idempotency, the user agent, retries and timeouts reach no model."""
    transport = {
        "Idempotency-Key": "k-1",
        "User-Agent": "my-app/1.0",
        "X-Stainless-Retry-Count": "2",
        "X-Stainless-Timeout": "30",
        "Authorization": "Bearer other",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }
    assert _anthropic_digest({"extra_headers": transport, "timeout": 30}) == _anthropic_digest()


_BETAS = st.lists(
    st.sampled_from(
        [_THINKING, _LONG, "token-efficient-tools-2025-02-19", "output-128k-2025-02-19"]
    ),
    min_size=1,
    max_size=4,
    unique=True,
)


@settings(max_examples=25, deadline=None)
@given(
    _BETAS,
    st.randoms(use_true_random=False),
    st.sampled_from(["anthropic-beta", "Anthropic-Beta", "ANTHROPIC-BETA"]),
)
def test_a_beta_list_has_one_digest_whatever_its_order_spacing_and_header_name_case(
    betas: list[str], shuffle: Any, name: str
) -> None:
    """The API reads ``anthropic-beta`` as a set of comma-separated names, and header
    names are case-insensitive: for any list of betas, in any order and spelling of the
    header's name, the digest is one."""
    shuffled = list(betas)
    shuffle.shuffle(shuffled)
    as_given = _anthropic_digest({"extra_headers": {"anthropic-beta": ",".join(betas)}})
    reordered = _anthropic_digest({"extra_headers": {name: " , ".join(shuffled)}})
    assert as_given == reordered


_REFUSED_BETAS = [
    "context-management-2025-06-27",  # the server clears tool results and thinking
    "compact-2026-01-12",  # the server summarises the conversation itself
    "mcp-client-2025-04-04",  # the server runs MCP servers' tools itself
    "skills-2025-10-02",  # skill descriptions put before the model
    "code-execution-2025-05-22",  # the server runs code in a container of its own
]


@pytest.mark.parametrize("beta", _REFUSED_BETAS)
def test_a_beta_with_which_the_server_edits_the_prompt_or_runs_tools_is_refused(beta: str) -> None:
    """With these betas the server edits what the model reads or runs tools the view never
    sent, as the refused body options do; the header went through unchecked, given as an
    option, as a call's option or by the client. It is refused, naming the header and the
    beta, before anything is sent."""
    listed = f"{_THINKING}, {beta}"
    with pytest.raises(VeridicError, match=rf"anthropic-beta.*{beta}.*remove it"):
        _adapter("anthropic", {"extra_headers": {"Anthropic-Beta": listed}})
    adapter, server = _adapter("anthropic")
    gw, calls, _ = gateway(adapter)
    with pytest.raises(VeridicError, match=rf"anthropic-beta.*{beta}"):
        gw.send(
            first_prompt(),
            VIEW,
            request_id="req-1",
            options={"extra_headers": {"anthropic-beta": listed}},
        )
    assert server.sent == []
    assert calls.records() == ()
    with pytest.raises(VeridicError, match=rf"client.*anthropic-beta.*{beta}"):
        _anthropic_digest(default_headers={"anthropic-beta": beta})


class _SlyName(str):
    """A header name that reads as a transport header in lower case: the SDK sends its own
    characters, ``anthropic-beta``."""

    __slots__ = ()

    def lower(self) -> str:
        return "x-api-key"


class _SlyValue(str):
    """A header value that says it lists no beta: the SDK sends its own characters."""

    __slots__ = ()

    def split(self, sep: str | None = None, maxsplit: SupportsIndex = -1) -> list[str]:
        return []

    def strip(self, chars: str | None = None) -> str:
        return ""


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (_SlyName("anthropic-beta"), "mcp-client-2025-04-04"),
        ("anthropic-beta", _SlyValue("mcp-client-2025-04-04")),
    ],
    ids=["name", "value"],
)
def test_a_header_of_a_str_subclass_is_read_by_the_characters_the_sdk_sends(
    name: str, value: str
) -> None:
    """Was: the header's name was read through its own ``lower()`` (and its value through its
    own ``split()``), so a ``str`` subclass that answered otherwise than its characters sent
    a refused beta, left out of the digest as a transport header; the name so read was
    also kept in the cache of transport names. Both are read as the text they hold now, as
    the SDK sends them."""
    adapter, server = _adapter("anthropic")
    gw, calls, _ = gateway(adapter)
    with pytest.raises(VeridicError, match=r"anthropic-beta.*mcp-client"):
        gw.send(first_prompt(), VIEW, request_id="req-1", options={"extra_headers": {name: value}})
    assert server.sent == []
    assert calls.records() == ()


def test_openai_multi_agent_is_refused_as_a_header_and_as_an_option() -> None:
    """``OpenAI-Beta: responses_multi_agent=v1`` with ``multi_agent={"enabled": True}`` has the
    server run subagents of its own, with tools outside the view."""
    server = FakeServer(http_module("openai"), [("json", RESPONSE)])
    client = server.client(openai, "OpenAI")
    with pytest.raises(VeridicError, match=r"openai-beta.*responses_multi_agent"):
        OpenAIResponses(
            client,
            model="gpt-test",
            options={"extra_headers": {"OpenAI-Beta": "responses_multi_agent=v1"}},
        )
    with pytest.raises(VeridicError, match=r"multi_agent=.*remove it"):
        OpenAIResponses(client, model="gpt-test", options={"multi_agent": {"enabled": True}})
    OpenAIResponses(client, model="gpt-test", options={"multi_agent": {"enabled": False}})


@pytest.mark.parametrize("value", [None, 7, b"x"])
def test_a_header_that_is_not_text_is_refused_before_anything_is_sent(value: object) -> None:
    """The SDK fails on such a header only once the model call is on record."""
    adapter, server = _adapter("chat")
    gw, calls, _ = gateway(adapter)
    with pytest.raises(VeridicError, match=r"extra_headers.*X-Flag.*omit"):
        gw.send(
            first_prompt(), VIEW, request_id="req-1", options={"extra_headers": {"X-Flag": value}}
        )
    assert server.sent == []
    assert calls.records() == ()


def test_a_header_removed_with_the_sdks_omit_is_not_in_the_digest() -> None:
    """``anthropic.omit`` removes a header the client would send: the digest follows."""
    with_client_beta = _anthropic_digest(
        {"extra_headers": {"anthropic-beta": anthropic.omit}},
        default_headers={"anthropic-beta": _THINKING},
    )
    assert with_client_beta == _anthropic_digest()


# --- 4. chat tool arguments sent as an object ---------------------------------------------------


def _chat_call_answer(arguments: str) -> str:
    """A chat answer's JSON text whose one call carries ``arguments`` (JSON text as written)."""
    return (
        '{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test", '
        '"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": '
        '"assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", '
        f'"function": {{"name": "get_weather", "arguments": {arguments}}}}}]}}}}]}}'
    )


def _chat_reply_to(answer: str) -> tuple[ModelGateway, Reply]:
    http = http_module("openai")
    transport = http.MockTransport(
        lambda request: http.Response(
            200, headers={"content-type": "application/json"}, content=answer.encode()
        )
    )
    client = openai.OpenAI(api_key="test-key", http_client=http.Client(transport=transport))
    gw, _, _ = gateway(OpenAIChat(client, model="gpt-test"))
    return gw, gw.send(first_prompt(), VIEW, request_id="req-1")


def test_chat_arguments_sent_as_an_object_keep_a_key_given_twice_for_the_dispatcher() -> None:
    """Some OpenAI-compatible servers send a call's ``arguments`` as a JSON object, not
    as text. The SDK reads the answer with ``json.loads``, which keeps the last value of
    a key given twice: ``{"city": "Oslo", "city": "Bergen"}`` ran for Bergen with nothing
    said, where the same arguments sent as text reach the dispatcher as written and are
    refused there. The answer is now read from its own JSON text, as Anthropic's is."""
    gw, reply = _chat_reply_to(_chat_call_answer('{"city": "Oslo", "city": "Bergen"}'))
    (call,) = reply.tool_calls
    assert call.arguments == '{"city": "Oslo", "city": "Bergen"}'
    (outcome,) = gw.run_tools(reply, policy=ApprovalPolicy(VIEW))
    assert not outcome.result.ok
    assert "the key 'city' is given twice" in outcome.text


def test_chat_arguments_sent_as_an_object_without_a_key_twice_are_read_as_before() -> None:
    _, reply = _chat_reply_to(_chat_call_answer('{"city": "Oslo"}'))
    _, as_text = _chat_reply_to(_chat_call_answer(json.dumps('{"city": "Oslo"}')))
    assert [c.arguments for c in reply.tool_calls] == ['{"city": "Oslo"}']
    assert json.loads(as_text.tool_calls[0].arguments) == {"city": "Oslo"}
