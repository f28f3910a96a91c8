"""The HTTP headers and query parameters of a request that change what the server does with it.

The SDKs send ``extra_headers`` (and the client's ``default_headers``) beside the
body. Most of them carry the request (authentication, the user agent, retries,
timeouts), but some change what the server does: ``anthropic-beta`` turns on
features (a longer context, server-side context editing, MCP servers the server
calls itself), ``anthropic-version`` picks the API's behaviour, ``OpenAI-Beta``
turns on OpenAI's. Those are part of the options digest (``options_sha256``), and a
beta with which the server edits what the model reads, or runs tools outside the
view, is refused like the body options that do the same
(:attr:`~veridic.providers.Adapter.server_edits`).

The query (``extra_query``, the client's ``default_query``) is digested the same way:
``api-version`` picks Azure's API. A header or query parameter whose name marks a
secret (:func:`secret_name`: ``x-goog-api-key``, ``helicone-auth``, ``?key=``) is left
out, so no record holds a hash of a key, and rotating one keeps the digest.

Headers are merged as both SDKs merge them: the client's first, then the request's,
names compared in lower case, the later value winning, an SDK's ``omit`` removing
the header. A mapping that gives a header of the digest twice, in two spellings, is
refused: the SDK versions the extras allow before that case-insensitive merge send both.
A header that only carries the request (:func:`_carries`) may come twice: the client's
own mapping holds the SDK's spelling beside the application's (``User-Agent`` and
``user-agent`` for ``default_headers={"user-agent": ...}``), and the digest names neither.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Final

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import VeridicError

__all__ = [
    "model_headers",
    "model_query",
    "refuse_betas",
    "refuse_client_betas",
    "sdk_sentinel",
    "secret_name",
]

_TRANSPORT: Final = frozenset(
    {
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "connection",
        "host",
        "user-agent",
        "traceparent",
        "tracestate",
        "baggage",
        "x-request-id",
        "x-client-request-id",
        "x-ms-client-request-id",
        "request-id",
        "x-correlation-id",
        "x-amzn-trace-id",
        "x-cloud-trace-context",
        "sentry-trace",
        "b3",
        "uber-trace-id",
        "date",
        "x-amz-date",
        "x-amz-content-sha256",
        "openai-organization",
        "openai-project",
        "anthropic-workspace-id",
    }
)
"""Headers that carry the request and reach no model, and whose names hold no secret
(:func:`secret_name` finds those): content negotiation, the user agent, the account
billed, tracing and correlation ids, a request's signing date and body hash. Those of
tracing and signing are new on each request: digested, two identical requests had two
digests. The SDK's own ``x-stainless-*`` headers (retries, timeouts, the SDK's version)
and the trace headers of Zipkin's B3 and Datadog are left out too
(:data:`_TRANSPORT_PREFIXES`). Any other header counts, so one a proxy reads as an order
(which prompt to load, which guardrail to run) is not lost."""

_TRANSPORT_PREFIXES: Final = ("x-stainless-", "x-b3-", "x-datadog-")

_SECRET_WORDS: Final = frozenset(
    {
        "key",
        "keys",
        "apikey",
        "accesskey",
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pwd",
        "auth",
        "authorization",
        "authentication",
        "cookie",
        "signature",
        "sig",
        "credential",
        "credentials",
        "bearer",
        "jwt",
    }
)
"""Words that mark a header or query parameter holding a secret, wherever they stand in its
name: ``x-goog-api-key``, ``ocp-apim-subscription-key``, ``helicone-auth``,
``cf-aig-authorization``, ``x-amz-security-token``, ``?access_token=``, an Azure SAS's
``?sig=``. Whole words, not parts of one: ``x-portkey-config`` (which config a gateway
applies) holds ``key`` only inside ``portkey``, and counts; but a word of five letters or
more marks a secret at the end of a longer word too (:data:`_SECRET_ENDS`). ``tokens`` is
not one: it names a count (``max_tokens``, ``x-budget-tokens``), which a proxy may read."""

_SECRET_ENDS: Final = tuple(sorted(word for word in _SECRET_WORDS if len(word) >= 5))
"""Words that mark a secret at the end of a word joined from several: ``authtoken``,
``clientsecret``, ``xapikey``, and what a camelCase header name becomes in lower case,
the case headers are compared in (``X-AccessToken`` read ``x-accesstoken``). The shorter
marks end ordinary words (``key`` ends ``portkey``, ``auth`` ``oauth``), and mark a secret
only standing alone."""

_SECRET_NAMES: Final = frozenset({"code"})
"""Names that hold a secret though no word of theirs says so: an Azure Function's key is
its ``?code=``."""

_WORDS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
"""The words of a name: runs of letters or digits, a camelCase name cut where a capital
starts a word (``apiKey``, ``accessToken``, ``APIKey``)."""


def secret_name(name: str) -> bool:
    """Whether the header or query parameter ``name`` holds a secret: one of its words
    marks one (:data:`_SECRET_WORDS`) or ends in a long mark (:data:`_SECRET_ENDS`), or
    the name is one (:data:`_SECRET_NAMES`), in any case.

    Its value stays out of the options digest: a SHA-256 of a key in every audit record
    can be checked against a guess offline, and the digest changed whenever the key was
    rotated though the model was given the same. A name that is no secret but reads as
    one (``x-session-token-budget``) is left out too: the digest then covers less, which
    is the lesser harm.

    >>> [secret_name(name) for name in ("x-goog-api-key", "apiKey", "x-accesstoken")]
    [True, True, True]
    >>> [secret_name(name) for name in ("x-portkey-config", "max_tokens")]
    [False, False]
    """
    words = {word.lower() for word in _WORDS.findall(name)}
    return (
        bool(words & _SECRET_WORDS)
        or any(word.endswith(_SECRET_ENDS) for word in words)
        or name.lower() in _SECRET_NAMES
    )


_BETA_LISTS: Final = frozenset({"anthropic-beta", "openai-beta"})
"""Headers the API reads as a set of comma-separated feature names: written sorted, each
once, so their order and spacing do not change the digest."""

_DATED: Final = re.compile(r"-\d{4}-\d{2}-\d{2}$")
"""The date an Anthropic beta's name ends with (``context-management-2025-06-27``)."""

_REFUSED_BETAS: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {
        ("anthropic-beta", "context-management"): "the server clears earlier tool results "
        "and thinking from what the model reads",
        ("anthropic-beta", "compact"): "the server summarises the conversation in text it "
        "writes itself",
        ("anthropic-beta", "message-threads"): "the server holds the conversation and "
        "resumes it, so the model reads the turns of an earlier request",
        ("anthropic-beta", "skills"): "the server loads skills into a container, and the "
        "model reads their names and descriptions beside the system prompt",
        ("anthropic-beta", "mcp-client"): "the server connects to MCP servers and runs "
        "their tools itself",
        ("anthropic-beta", "code-execution"): "the server runs code the model writes, in a "
        "container of its own",
        ("anthropic-beta", "advisor-tool"): "the server runs an advisor, a tool of its own "
        "whose answers the model reads",
        ("anthropic-beta", "inline-tools"): "tools defined inside the conversation are "
        "offered to the model besides the view's",
        ("anthropic-beta", "mid-conversation-tool-changes"): "the conversation adds and "
        "removes tools, so the model is offered others than the view's",
        ("openai-beta", "responses_multi_agent"): "the server runs subagents of its own, "
        "with tools outside the view",
    }
)
"""(header, beta feature) -> what the server does with it: the betas refused. A beta is
named by its feature, without the date (Anthropic) or the version (OpenAI's ``=v1``), so a
later version of one is refused too."""


@lru_cache(maxsize=1024)
def _carries(name: str) -> bool:
    """Whether the header ``name`` (in lower case) only carries the request: it names a
    secret (:func:`secret_name`: authentication, a gateway's key, idempotency) or is one
    of :data:`_TRANSPORT`.

    Kept per name (it depends on the name alone): every send asks it twice of each header
    of the client (a dozen from the SDKs), and reading a name's words took a third of the
    time the options digest took."""
    return name in _TRANSPORT or name.startswith(_TRANSPORT_PREFIXES) or secret_name(name)


def _feature(header: str, beta: str) -> str:
    """A beta's feature: ``mcp-client`` of ``mcp-client-2025-04-04``,
    ``responses_multi_agent`` of ``responses_multi_agent=v1``, in lower case (a beta is refused
    whatever its case)."""
    if header == "openai-beta":
        return beta.partition("=")[0].strip().lower()
    return _DATED.sub("", beta.strip().lower())


_SDK_ABSENT: Final = frozenset(
    {("openai", "NotGiven"), ("openai", "Omit"), ("anthropic", "NotGiven"), ("anthropic", "Omit")}
)
"""The SDKs' "not given" sentinels (``openai.NOT_GIVEN``, ``anthropic.omit``), by package and
class name: the core never imports an SDK."""


def sdk_sentinel(value: object) -> bool:
    """Whether ``value`` is an SDK's "not given" sentinel: an option left unset, a header
    removed."""
    kind = type(value)
    return (kind.__module__.partition(".")[0], kind.__name__) in _SDK_ABSENT


def _folded(layers: tuple[tuple[str, object], ...], owner: str) -> dict[str, str]:
    """The layers of headers (``(where, mapping)``, first to last) as the SDK merges them:
    lower-case names, the last value winning, an SDK sentinel removing the header.

    A header that only carries the request (:func:`_carries`) may be named twice in one
    layer, in two spellings: the SDK builds the client's ``default_headers`` of its own
    (``User-Agent``, ``Authorization``) and the application's (``user-agent``) without
    merging them, so refusing it would refuse a common client. What goes on the wire
    then depends on the SDK (the versions pinned send the last spelling, earlier ones
    both, which httpx keeps), but no such header is in the digest
    (:func:`model_headers` leaves them out), so the record says nothing either could
    contradict: the request's key and user agent are the SDK's to send, outside what
    the record claims.

    Raises:
        VeridicError: a layer is not a mapping, names a header of the digest twice
            (:func:`_refuse_twice`), or holds a header HTTP cannot carry
            (:func:`_checked_name`, :func:`_checked_value`): the SDK would fail on it
            only once the model call is on record, or send it otherwise than the digest
            says.
    """
    merged: dict[str, str] = {}
    for where, layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise VeridicError(
                f"{owner}: {where} is {a_type(layer)}, not a mapping of header names "
                "to values: pass e.g. {'anthropic-beta': 'interleaved-thinking-2025-05-14'}"
            )
        spelled: dict[str, str] = {}
        for name, value in layer.items():
            lowered = _checked_name(name, where, owner).lower()
            if not _carries(lowered):
                _refuse_twice(spelled.setdefault(lowered, name), name, where, owner)
            if sdk_sentinel(value):
                merged.pop(lowered, None)
            else:
                merged[lowered] = _checked_value(name, value, where, owner)
    return merged


_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP header name (RFC 9110's ``token``)."""

_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""A character no header value may hold: a line break (which would end the header and
start another) or another control character (a tab is allowed)."""


def _checked_name(name: object, where: str, owner: str) -> str:
    """``name`` if it is a header name HTTP can carry, as a plain ``str`` of its characters.

    The characters are what the SDK sends: a ``str`` subclass whose ``lower()`` answered
    otherwise was read as another header (a refused beta as a transport header, left out
    of the digest), and kept so in :func:`_carries`'s cache.

    Raises:
        VeridicError: ``name`` is not text, or not an HTTP token (``"anthropic-beta "``):
            read as another header than the one the server reads, or failing in the
            HTTP library only once the model call is on record.
    """
    if isinstance(name, str) and _TOKEN.fullmatch(name):
        return str.__str__(name)
    shown = clip(name) if isinstance(name, str) else a_type(name)
    raise VeridicError(
        f"{owner}: {where} names the header {shown}, which is not a header name (text of "
        "letters, digits and !#$%&'*+-.^_`|~, no spaces): spell it as the API names it, "
        "e.g. 'anthropic-beta'"
    )


def _refuse_twice(first: str, name: str, where: str, owner: str) -> None:
    """Refuse a mapping that names one header of the digest twice, in two spellings.

    The SDKs the extras allow before their case-insensitive merge send both headers, and
    the server reads both; later ones send the last. The digest could not say which.

    Raises:
        VeridicError: naming both spellings.
    """
    if first == name:
        return
    raise VeridicError(
        f"{owner}: {where} gives the header {name.lower()} twice ({clip(first)} and "
        f"{clip(name)}): some SDK versions send both, others the last, so nothing could "
        "record what was sent: give it once, in one spelling (header names are "
        "case-insensitive, and the SDKs spell theirs in either case: where the SDK sets this "
        "header itself, leave it to the SDK or spell it as the SDK does), with every value "
        "it should carry (a beta list as one comma-separated value)"
    )


def _checked_value(name: str, value: object, where: str, owner: str) -> str:
    """``value`` if it is text a header can carry, as a plain ``str`` of its characters (what
    the SDK sends: a ``str`` subclass's own ``split()`` hid a refused beta).

    Raises:
        VeridicError: ``value`` is not text, or holds a line break or another control
            character (a header smuggled into another's value, or one the HTTP library
            fails on once the model call is on record). The value is not quoted: it
            may be a key.
    """
    if not isinstance(value, str):
        raise VeridicError(
            f"{owner}: {where} sets the header {clip(name)} to "
            f"{a_type(value)}, not text, so nothing could record what was sent: "
            "pass its value as a str, or the SDK's omit (anthropic.omit, openai.omit) "
            "to remove the header"
        )
    if _CONTROL.search(value) is not None:
        raise VeridicError(
            f"{owner}: {where} sets the header {clip(name)} to text holding a line break or "
            "another control character, which HTTP cannot carry (a line break would start "
            "another header): pass the value on one line, without control characters"
        )
    return str.__str__(value)


def _canonical(name: str, value: str) -> str:
    """A header's value as the digest names it: a beta list sorted, each name once."""
    if name not in _BETA_LISTS:
        return value.strip()
    return ",".join(sorted({beta.strip() for beta in value.split(",") if beta.strip()}))


def model_headers(client: object, extra: object, owner: str) -> dict[str, str]:
    """The headers a request is sent with that may change what the server does with it,
    canonical: lower-case names, beta lists sorted; transport headers left out.

    ``client`` is the SDK client (its ``default_headers``, the SDK's own such as
    ``anthropic-version`` among them), ``extra`` the request's ``extra_headers``.

    Raises:
        VeridicError: as :func:`_folded`.
    """
    defaults = getattr(client, "default_headers", None)
    if extra is None and not isinstance(defaults, Mapping):
        return {}  # no header at all (the scripted provider, a client of no SDK)
    layers = (
        ("the client's default_headers", defaults if isinstance(defaults, Mapping) else None),
        ("extra_headers", extra),
    )
    return {
        name: _canonical(name, value)
        for name, value in _folded(layers, owner).items()
        if not _carries(name)
    }


def model_query(client: object, extra: object, owner: str) -> dict[str, object]:
    """The query parameters a request is sent with, but those that hold a secret
    (:func:`secret_name`: Gemini's ``?key=``, ``?access_token=``, an Azure SAS's ``?sig=``),
    as the SDK sends them (:func:`_sent`).

    ``client`` is the SDK client (its ``default_query``: ``AzureOpenAI(api_version=...)``
    puts ``api-version`` there), ``extra`` the request's ``extra_query``; merged as the
    SDKs merge them (the request's value winning, names as given: a server reads them
    case-sensitively, an SDK's ``omit`` removing one). All count, not only the names
    known to change the API (``api-version``): a proxy reads its orders from the query
    as it does from headers, and an unknown name lost from the digest is a change the
    record cannot show, while a secret kept out of it is lost to no review.

    Raises:
        VeridicError: ``extra_query`` (or the client's ``default_query``) is not a
            mapping: the SDK would fail on it only once the model call is on record.
    """
    merged: dict[str, object] = {}
    defaults = getattr(client, "default_query", None)
    for where, layer in (("the client's default_query", defaults), ("extra_query", extra)):
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise VeridicError(
                f"{owner}: {where} is {a_type(layer)}, not a mapping of query "
                "parameter names to values: pass e.g. {'api-version': '2024-10-21'}"
            )
        for name, value in layer.items():
            if sdk_sentinel(value):
                merged.pop(name, None)
            else:
                merged[name] = value
    return _sent(merged)


def _sent(query: Mapping[str, object]) -> dict[str, object]:
    """``query`` (or a parameter's nested mapping) as the digest names it: as the SDK
    sends it, but the parameters whose name marks a secret (:func:`secret_name`).

    A ``None``, at any depth, is left out: the SDK sends nothing for it (a request's
    ``None`` removes the client's parameter), so a request given one is the request
    without it, and has its digest. A nested mapping's parameter whose name marks a secret
    is left out as a top one is: ``{"filter": {"api_key": ...}}`` is sent
    ``filter[api_key]=...``.
    """
    return {
        name: _sent_value(value)
        for name, value in query.items()
        if value is not None and not secret_name(str(name))
    }


def _sent_value(value: object) -> object:
    """A query parameter's ``value`` as :func:`_sent` names it."""
    if isinstance(value, Mapping):
        return _sent(value)
    if isinstance(value, list | tuple):
        return [_sent_value(item) for item in value if item is not None]
    return value


def refuse_betas(owner: str, headers: Mapping[str, str], where: str) -> None:
    """Refuse a beta (in ``anthropic-beta`` or ``OpenAI-Beta``) with which the server edits
    what the model reads or runs tools outside the view.

    Raises:
        VeridicError: naming the header, the beta, what the server does and what to do.
    """
    for header in sorted(_BETA_LISTS & headers.keys()):
        for beta in headers[header].split(","):
            what = _REFUSED_BETAS.get((header, _feature(header, beta)))
            if what is None:
                continue
            raise VeridicError(
                f"{owner}: {where} sends the header {header}: {clip(beta.strip())}: with it "
                f"{what}, outside the prompt and the view whose sha256 the model-call record "
                f"names: remove it from {header} (tools come from the view, instructions go "
                "in Composer.system() and outside text in Composer.data()); other betas go "
                "as given, and count in the options digest"
            )


def refuse_client_betas(owner: str, client: object) -> None:
    """Refuse a client whose own headers (``default_headers``) turn on a refused beta: it
    would go with every request.

    Raises:
        VeridicError: as :func:`refuse_betas`, saying the client sends it.
    """
    refuse_betas(owner, model_headers(client, None, owner), "the client (default_headers)")
