"""A URL as messages, logs and records show it: without the credentials it may carry.

An endpoint (``veridic probe``, ``make eval-model``) or an MCP server reached
over HTTP authenticates with what its URL holds: ``user:key@``, ``?api_key=``,
a key as the whole query, a token in the fragment. An error message, a log
line or a committed evaluation record must not repeat it, and three copies of
this rule each missed a spelling the others caught; this is the one copy, below
every part that quotes a URL.

A Postgres conninfo is another matter (:mod:`veridic.run._conninfo`): there the
message to clean is libpq's, which quotes the password in spellings of its own.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from typing import Final
from urllib.parse import (
    SplitResult,
    parse_qsl,
    quote,
    quote_plus,
    unquote,
    urlsplit,
    urlunsplit,
)

__all__ = ["masked", "shown_url", "split_url", "url_secrets"]

_HIDDEN: Final = "***"
_PARTS: Final = re.compile(
    r"(?P<scheme>[^:/?#]+:)?(?://(?P<netloc>[^/?#]*))?(?P<path>[^?#]*)"
    r"(?P<query>\?[^#]*)?(?P<fragment>#.*)?",
    re.DOTALL,
)
"""A URL's parts, for one ``urlsplit`` refuses (RFC 3986, appendix B: it always matches)."""
_QUOTED: Final = re.compile(r"'.*'|\".*\"", re.DOTALL)
_IPV6_GROUP: Final = re.compile(r"[0-9A-Fa-f]{0,4}|\d{1,3}(?:\.\d{1,3}){3}")


def shown_url(url: str) -> str:
    """``url`` with its user part, port if no number, query values and fragment as ``***``.

    The scheme, host, a numeric port, the path and the query's parameter names
    stay: enough to tell which server and which parameter, not enough to use it.
    Which query value is a key cannot be told, so each is hidden; an item without
    ``=`` is a value (a key given as the whole query), hidden whole. A user name
    alone is hidden too (some servers take a token as the user). A "port" that
    is no number is most often a password whose ``@host`` was forgotten.

    >>> shown_url("https://me:s3cret@llm.example/v1/chat/completions")
    'https://***@llm.example/v1/chat/completions'
    >>> shown_url("https://llm.example/v1/chat/completions?api-version=1&key=s3cret")
    'https://llm.example/v1/chat/completions?api-version=***&key=***'
    >>> shown_url("https://llm.example/v1?s3cret")  # a key as the whole query
    'https://llm.example/v1?***'
    >>> shown_url("http://localhost:8080/v1")
    'http://localhost:8080/v1'
    >>> shown_url("http://me:s3cret/v1")  # the @host forgotten: the password is the "port"
    'http://me:***/v1'
    >>> shown_url("http://me:s3cret@[::1/v1?key=s3cret")  # not a URL: hidden all the same
    'http://***@[::1/v1?***'
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL one can take apart (a lost bracket, a fullwidth '@')
        return _shown_unsplit(unicodedata.normalize("NFKC", url))
    netloc = _shown_netloc(parts.netloc, port_is_number=_port_is_number(parts))
    path = parts.path
    if not parts.netloc and "@" in path:  # no "//": "user:key@host/..." read as scheme and path
        path = f"{_HIDDEN}@{path.rpartition('@')[2]}"
    query = "&".join(
        f"{name}={_HIDDEN}" if equals else _HIDDEN
        for name, equals, _ in (item.partition("=") for item in parts.query.split("&"))
        if name or equals
    )
    fragment = _HIDDEN if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def split_url(url: str) -> SplitResult:
    """``urlsplit(url)`` with its port checked, refusing what no request could use.

    Raises:
        ValueError: ``url`` cannot be taken apart (a lost bracket) or its port is no
            number; the message says why with every quoted part of ``url`` written
            ``'***'`` (Python's own quotes the port, where a forgotten ``@host`` puts
            the password, and the netloc).
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # read for its check: a port that is no number raises
    except ValueError as error:
        raise ValueError(_QUOTED.sub("'***'", str(error))) from None
    return parts


def _shown_unsplit(url: str) -> str:
    """:func:`shown_url` of a URL ``urlsplit`` refuses: its query hidden whole."""
    found = _PARTS.fullmatch(url)
    if found is None:  # cannot happen (each part may be empty), but then show nothing of it
        return _HIDDEN
    scheme, netloc, path, query, fragment = found.group(
        "scheme", "netloc", "path", "query", "fragment"
    )
    shown = scheme or ""
    if netloc is not None:
        shown += "//" + _shown_netloc(netloc, port_is_number=False)
    elif "@" in path:
        path = f"{_HIDDEN}@{path.rpartition('@')[2]}"
    shown += path
    if query is not None:
        shown += f"?{_HIDDEN}"
    if fragment is not None:
        shown += f"#{_HIDDEN}"
    return shown


def _port_is_number(parts: SplitResult) -> bool:
    """Whether the port of ``parts`` is absent or a number (``urlsplit`` checks it lazily)."""
    try:
        parts.port  # noqa: B018  # read for its check: a port that is no number raises
    except ValueError:
        return False
    return True


def _shown_netloc(netloc: str, *, port_is_number: bool) -> str:
    """``netloc`` with its user part hidden, and its port unless it is a number."""
    _, at, host_and_port = netloc.rpartition("@")
    shown = f"{_HIDDEN}@" if at else ""
    if port_is_number:
        return shown + host_and_port
    host, after = _host(host_and_port)
    if not after:
        return shown + host
    return shown + host + (":" if after.startswith(":") else "") + _HIDDEN


def _host(host_and_port: str) -> tuple[str, str]:
    """The host of ``host_and_port`` and what follows it.

    An IPv6 literal whose ``]`` is lost is kept only while it reads as one (groups
    of at most four hex digits): a longer group cannot be told from a secret.
    """
    if not host_and_port.startswith("["):
        host, colon, port = host_and_port.partition(":")
        return host, colon + port
    inside, bracket, after = host_and_port[1:].partition("]")
    if bracket:
        return f"[{inside}]", after
    if all(_IPV6_GROUP.fullmatch(group) for group in inside.split(":")):
        return host_and_port, ""
    return f"[{_HIDDEN}", ""


_SECRET_MIN: Final = 4
"""Shorter values of a URL's user name, password or query are not looked for in a
server's answer: replacing every ``1`` of an ``api-version=1`` would garble it."""


def url_secrets(url: str, api_key: str | None = None) -> tuple[str, ...]:
    """What of ``url`` and ``api_key`` may authenticate, in every spelling an answer or
    an error may give it (:func:`_spellings`), longest first (so a secret holding
    another is replaced whole)."""
    parts = urlsplit(url)
    written = {api_key or "", parts.username or "", parts.password or ""}
    # A query's values as written (an error page quotes the request target so), and as
    # a server reads them.
    written |= {item.partition("=")[2] if "=" in item else item for item in parts.query.split("&")}
    written |= {value for _, value in parse_qsl(parts.query, keep_blank_values=True)}
    plain = {form for value in written for form in (value, value.strip(), unquote(value))}
    found = {spelled for value in plain for spelled in _spellings(value)}
    return tuple(sorted((v for v in found if len(v) >= _SECRET_MIN), key=len, reverse=True))


def _spellings(value: str) -> set[str]:
    """``value`` as a server's answer or the HTTP client's error may spell it: as is,
    percent-encoded (hex in either case, a space as ``+``), escaped in a JSON string
    (``\\/`` and ``\\u00e9`` too) or in a Python ``repr`` of text or bytes."""
    encoded = quote(value, safe="")
    escaped = json.dumps(value)[1:-1]
    return {
        value,
        encoded,
        re.sub(r"%[0-9A-F]{2}", lambda code: code.group().lower(), encoded),
        quote_plus(value, safe=""),
        escaped,
        escaped.replace("/", "\\/"),
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        repr(value.encode("utf-8", "surrogatepass"))[2:-1],
    }


def masked(text: str, secrets: Sequence[str]) -> str:
    """``text`` with each of ``secrets`` (:func:`url_secrets`) replaced by ``***``.

    For what a server answered, or an HTTP client's error said: a server refusing a key
    often repeats it, and an error page the URL it was asked.

    >>> masked('{"error": "bad key sk-12345"}', url_secrets("http://h/v1", "sk-12345"))
    '{"error": "bad key ***"}'
    """
    for secret in secrets:
        text = text.replace(secret, _HIDDEN)
    return text
