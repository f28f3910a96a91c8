"""The options digest holds no secret, and covers the query parameters that change the API.

The digest (``Reply.options_sha256``) sits in every model call's audit record. A
gateway's key sent as a header the transport list did not name (``x-goog-api-key``,
``ocp-apim-subscription-key``, ``helicone-auth``, ...) was digested: a SHA-256 of the
key in every record, and a digest that changed when the key was rotated. The query
(``extra_query``, the client's ``default_query``) was left out whole: Azure's
``api-version`` picks the API's behaviour, and two requests of different versions had
one digest. Each test goes through the gateway over the real SDK and a fake transport.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from hypothesis import given, settings
from hypothesis import strategies as st
from test_providers import VIEW, first_prompt, gateway
from test_review9_prov import _chat_answer

from veridic import OpenAIChat

openai = pytest.importorskip("openai")


def _digest(
    options: dict[str, Any] | None = None,
    *,
    default_headers: dict[str, str] | None = None,
    default_query: dict[str, object] | None = None,
    azure_version: str | None = None,
) -> str:
    """The options digest of one chat request, its client built with these defaults (an
    Azure OpenAI client of ``azure_version`` when given)."""
    server = FakeServer(http_module("openai"), [("json", _chat_answer())])
    http_client = server.http.Client(transport=server.http.MockTransport(server.handle))
    if azure_version is None:
        client = openai.OpenAI(
            api_key="test-key",
            default_headers=default_headers,
            default_query=default_query,
            http_client=http_client,
        )
    else:
        client = openai.AzureOpenAI(
            api_key="test-key",
            api_version=azure_version,
            azure_endpoint="https://unit.openai.azure.example",
            default_headers=default_headers,
            default_query=default_query,
            http_client=http_client,
        )
    gw, _, _ = gateway(OpenAIChat(client, model="gpt-test"))
    return gw.send(first_prompt(), VIEW, request_id="req-1", options=options).options_sha256


_BARE = _digest()


# --- 2. a header that holds a secret is not digested ---------------------------------------

_GATEWAY_KEYS = [
    "x-goog-api-key",  # Gemini
    "ocp-apim-subscription-key",  # Azure API Management
    "helicone-auth",  # Helicone
    "cf-aig-authorization",  # Cloudflare AI Gateway
    "x-portkey-api-key",  # Portkey
    "x-litellm-api-key",  # LiteLLM proxy
    "x-functions-key",  # Azure Functions
    "x-amz-security-token",
    "x-auth-token",
]


@pytest.mark.parametrize("name", _GATEWAY_KEYS)
def test_a_gateways_key_header_is_not_in_the_digest_nor_changes_it_when_rotated(name: str) -> None:
    given = _digest({"extra_headers": {name: "s3cret-one"}})
    rotated = _digest({"extra_headers": {name: "s3cret-two"}})
    assert given == rotated == _BARE
    assert _digest(default_headers={name: "s3cret-one"}) == _BARE


_SECRET_WORDS = st.sampled_from(
    ["key", "api-key", "apikey", "token", "secret", "password", "passwd", "auth",
     "authorization", "cookie", "signature", "credential", "bearer"]
)  # fmt: skip
_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
_SEPARATOR = st.sampled_from(["-", "_", "."])


def _name(before: list[str], secret: str, after: list[str], separator: str, upper: bool) -> str:
    name = separator.join([*before, secret, *after])
    return name.upper() if upper else name


@settings(max_examples=30, deadline=None)
@given(
    before=st.lists(_WORD, max_size=3),
    secret=_SECRET_WORDS,
    after=st.lists(_WORD, max_size=2),
    separator=_SEPARATOR,
    upper=st.booleans(),
)
def test_no_secret_like_header_is_ever_digested(
    before: list[str], secret: str, after: list[str], separator: str, upper: bool
) -> None:
    """For any header name holding a word that marks a secret (``key``, ``token``,
    ``auth``, ...), in any case, its value is not digested: the record holds no hash of
    the key, and rotating it keeps the digest."""
    name = _name(before, secret, after, separator, upper)
    assert _digest({"extra_headers": {name: "s3cret-one"}}) == _BARE, name
    assert _digest({"extra_headers": {name: "s3cret-two"}}) == _BARE, name


_BEHAVIOUR_HEADERS = st.sampled_from(
    ["anthropic-beta", "openai-beta", "anthropic-version", "x-api-version",
     "helicone-cache-enabled", "x-portkey-config", "x-portkey-provider", "cf-aig-cache-ttl",
     "x-ms-useragent-version"]
)  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(name=_BEHAVIOUR_HEADERS, value=st.sampled_from(["2024-06-01", "v1", "true", "tools-1"]))
def test_beta_version_and_gateway_order_headers_are_still_digested(name: str, value: str) -> None:
    """A header with which the server (or a gateway) changes what it does counts, whatever
    gateway's name it holds (``portkey`` ends in ``key`` and is no key)."""
    assert _digest({"extra_headers": {name: value}}) != _BARE, name


# --- 3. the query parameters ---------------------------------------------------------------


def test_the_api_version_of_the_query_is_in_the_digest() -> None:
    older = _digest({"extra_query": {"api-version": "2024-06-01"}})
    newer = _digest({"extra_query": {"api-version": "2025-04-01-preview"}})
    assert len({older, newer, _BARE}) == 3
    assert _digest(default_query={"api-version": "2024-06-01"}) == older


def test_an_azure_clients_api_version_is_in_the_digest() -> None:
    """``AzureOpenAI(api_version=...)`` sends it in every request's query (its
    ``default_query``): two versions, two digests."""
    older = _digest(azure_version="2024-06-01")
    newer = _digest(azure_version="2025-04-01-preview")
    assert older != newer


def test_the_requests_query_wins_over_the_clients_as_the_sdk_merges_them() -> None:
    merged = _digest(
        {"extra_query": {"api-version": "2025-04-01-preview"}},
        default_query={"api-version": "2024-06-01"},
    )
    assert merged == _digest({"extra_query": {"api-version": "2025-04-01-preview"}})


@pytest.mark.parametrize("name", ["key", "api_key", "apiKey", "access_token", "sig", "code"])
def test_a_query_parameter_that_holds_a_key_is_not_in_the_digest(name: str) -> None:
    """Gemini takes its key as ``?key=``, others as ``?api_key=``, ``?access_token=``; an
    Azure SAS signs with ``?sig=`` and an Azure Function with ``?code=``."""
    assert _digest({"extra_query": {name: "s3cret-one"}}) == _BARE
    assert _digest({"extra_query": {name: "s3cret-two"}}) == _BARE
    assert _digest(default_query={name: "s3cret-one"}) == _BARE


@settings(max_examples=30, deadline=None)
@given(
    before=st.lists(_WORD, max_size=3),
    secret=_SECRET_WORDS,
    after=st.lists(_WORD, max_size=2),
    separator=_SEPARATOR,
    upper=st.booleans(),
)
def test_no_secret_like_query_parameter_is_ever_digested(
    before: list[str], secret: str, after: list[str], separator: str, upper: bool
) -> None:
    name = _name(before, secret, after, separator, upper)
    assert _digest({"extra_query": {name: "s3cret-one"}}) == _BARE, name


# --- 4. second read: names the word rule missed or took wrongly, the query as sent ----------


@pytest.mark.parametrize(
    "name",
    ["X-AccessToken", "X-AuthToken", "X-SessionToken", "X-ClientSecret", "X-ApiSecret",
     "xapikey", "X-DbPassword", "x-hmacsignature"],
)  # fmt: skip
def test_a_header_whose_joined_words_mark_a_secret_is_not_digested(name: str) -> None:
    """Header names are compared in lower case, which joins a camelCase name's words
    (``X-AccessToken`` is read ``x-accesstoken``): a word that ends in a secret's mark
    (``token``, ``secret``, ``apikey``, ...) marks one too."""
    assert _digest({"extra_headers": {name: "s3cret-one"}}) == _BARE, name
    assert _digest(default_headers={name: "s3cret-two"}) == _BARE, name


@pytest.mark.parametrize("name", ["accesstoken", "authtoken", "clientSecret", "xApiKey"])
def test_a_query_parameter_whose_joined_words_mark_a_secret_is_not_digested(name: str) -> None:
    assert _digest({"extra_query": {name: "s3cret-one"}}) == _BARE, name


@pytest.mark.parametrize(
    ("where", "name"),
    [("extra_query", "max_tokens"), ("extra_query", "maxTokens"),
     ("extra_headers", "x-max-tokens"), ("extra_headers", "x-budget-tokens")],
)  # fmt: skip
def test_a_count_of_tokens_is_digested(where: str, name: str) -> None:
    """``tokens`` names a count (``max_tokens``), not a credential: a proxy reading it
    changes what the model may write, and two counts have two digests."""
    fewer = _digest({where: {name: "100"}})
    more = _digest({where: {name: "200"}})
    assert len({fewer, more, _BARE}) == 3


@pytest.mark.parametrize(
    "name",
    ["x-ms-client-request-id", "x-correlation-id", "request-id", "x-amzn-trace-id",
     "x-cloud-trace-context", "sentry-trace", "b3", "x-b3-traceid", "x-b3-spanid",
     "uber-trace-id", "x-datadog-trace-id", "x-datadog-parent-id", "date", "x-amz-date",
     "x-amz-content-sha256", "traceparent", "x-request-id", "x-stainless-retry-count",
     "Idempotency-Key"],
)  # fmt: skip
def test_a_header_that_differs_on_every_request_leaves_the_digest_alone(name: str) -> None:
    """A tracing or correlation id, or a signing date, is new on each request: digested,
    two identical requests had two digests."""
    first = _digest({"extra_headers": {name: "f81d4fae-7dec-11d0-a765-00a0c91e6bf6"}})
    second = _digest({"extra_headers": {name: "0b9d9f8e-2c2a-4c4e-9a43-3f6bf0a1c2d7"}})
    assert first == second == _BARE, name


@pytest.mark.parametrize("name", ["cf-aig-cache-key", "x-cache-key", "x-portkey-virtual-key"])
def test_a_name_holding_key_for_no_credential_is_left_out_all_the_same(name: str) -> None:
    """Decided: a cache key or a gateway's virtual key names no option the model is given,
    and the word rule cannot tell it from a credential; the digest covers less, never a
    hash of a key."""
    assert _digest({"extra_headers": {name: "one"}}) == _digest({"extra_headers": {name: "two"}})


def test_a_secret_named_parameter_nested_in_the_query_is_not_digested() -> None:
    """The SDK sends ``{"filter": {"api_key": ...}}`` as ``filter[api_key]=...``: a key
    under another name is a key all the same."""
    one = _digest({"extra_query": {"filter": {"api_key": "s3cret-one", "tag": "a"}}})
    two = _digest({"extra_query": {"filter": {"api_key": "s3cret-two", "tag": "a"}}})
    listed = _digest({"extra_query": {"filter": [{"token": "s3cret-one"}]}})
    assert one == two
    assert listed == _digest({"extra_query": {"filter": [{"token": "s3cret-two"}]}})
    assert one != _digest({"extra_query": {"filter": {"api_key": "s3cret-one", "tag": "b"}}})


def test_a_query_parameter_set_to_none_counts_as_absent() -> None:
    """The SDK sends nothing for a ``None`` (the request's removes the client's): the
    request sent is the bare one, and so is its digest."""
    assert _digest({"extra_query": {"tag": None}}) == _BARE
    assert _digest({"extra_query": {"tag": None}}, default_query={"tag": "a"}) == _BARE
    listed = _digest({"extra_query": {"tag": ["a", None]}})
    assert listed == _digest({"extra_query": {"tag": ["a"]}})
