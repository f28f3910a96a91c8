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

import ipaddress
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

__all__ = [
    "VERSION_PARAMETERS",
    "cut_short_reason",
    "masked",
    "reads_as_version",
    "shown_url",
    "split_url",
    "url_secrets",
    "user_part_cut_short",
]

_HIDDEN: Final = "***"
_PARTS: Final = re.compile(
    r"(?P<scheme>[^:/?#]+:)?(?://(?P<netloc>[^/?#]*))?(?P<path>[^?#]*)"
    r"(?P<query>\?[^#]*)?(?P<fragment>#.*)?",
    re.DOTALL,
)
"""A URL's parts, for one ``urlsplit`` refuses (RFC 3986, appendix B: it always matches)."""
_QUOTED: Final = re.compile(r"'.*'|\".*\"", re.DOTALL)
_EMBEDDED: Final = re.compile(r"(?<=/)[A-Za-z][A-Za-z0-9+.-]*:/")
"""A URL's scheme at the start of a path segment: the path holds another URL."""
_UNTIL_PATH: Final = re.compile(r"[/?#]")
"""Where a host and port end."""
_PORT: Final = re.compile(r":\d*")
"""What may follow a host and still be shown: a numeric port (``urlsplit`` allows it empty)."""
_IPV6_GROUP: Final = re.compile(r"[0-9A-Fa-f]{0,4}|\d{1,3}(?:\.\d{1,3}){3}")
VERSION_PARAMETERS: Final = frozenset({"api-version", "api_version"})
"""Query parameters whose value is shown (in any case of the name): it changes what the
server answers (Azure OpenAI's API version) and is no credential, so records of two
versions must not look alike. Only while it reads as a version (:data:`_VERSION`)."""
_VERSION: Final = re.compile(
    r"(?:\d{4}-\d{2}-\d{2}|v?\d{1,4}(?:\.\d{1,4}){0,2})(?:-[a-z0-9]{1,12})?|preview|latest",
    re.ASCII,  # "\d" of ASCII only: a date of full-width digits looks like one, and is not
)
"""A value an ``api-version`` may take: a date (``2024-10-01-preview``), a number
(``1``, ``v1``, ``2.0``), ``preview`` or ``latest``. Anything else (a key put there by
mistake) is hidden as any query value is."""


def shown_url(url: str) -> str:
    """``url`` with its user part, port if no number, query values and fragment as ``***``.

    The scheme, host, a numeric port, the path and the query's parameter names
    stay: enough to tell which server and which parameter, not enough to use it.
    Which query value is a key cannot be told, so each is hidden but an
    ``api-version``'s (or ``api_version``'s) that reads as a version: it is no key, and
    it changes what the server answers; an item without ``=`` is a value (a key given
    as the whole query), hidden whole. A user name
    alone is hidden too (some servers take a token as the user). A "port" that
    is no number is most often a password whose ``@host`` was forgotten: it is
    hidden, and so is the "host" before it (the user name) unless it names a
    server. Without ``//``, a user part reads as a scheme and a path: all before
    the last ``@`` is hidden, "scheme" included. A
    ``;param`` of the path is hidden as a query item is; a URL the path holds (a
    proxy's) is shown as a URL is. A ``/``, ``?`` or ``#`` in a user part ends the
    host early (:func:`_past_userinfo`): behind a "host" that names no server, or
    a "port" that is no number, an ``@`` hides all before it.

    >>> shown_url("https://me:s3cret@llm.example/v1/chat/completions")
    'https://***@llm.example/v1/chat/completions'
    >>> shown_url("https://llm.example/v1/chat/completions?api-version=2024-06-01&key=s3cret")
    'https://llm.example/v1/chat/completions?api-version=2024-06-01&key=***'
    >>> shown_url("https://llm.example/v1?s3cret")  # a key as the whole query
    'https://llm.example/v1?***'
    >>> shown_url("http://localhost:8080/v1")
    'http://localhost:8080/v1'
    >>> shown_url("http://me:s3cret/v1")  # the @host forgotten: the password is the "port"
    'http://***:***/v1'
    >>> shown_url("me:s3cret@llm.example/v1")  # no "//": the user name reads as a scheme
    '***@llm.example/v1'
    >>> shown_url("http://me:s3cret@[::1/v1?key=s3cret")  # not a URL: hidden all the same
    'http://***@[::1/v1?***'
    >>> shown_url("https://tok/s3cret@llm.example/v1")  # a base64 token, its '/' not %2F
    'https://***@llm.example/v1'
    >>> shown_url("https://llm.example/v1;jsessionid=s3cret")
    'https://llm.example/v1;jsessionid=***'
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL one can take apart (a lost bracket, a fullwidth '@')
        return _shown_unsplit(unicodedata.normalize("NFKC", url))
    rest = _after_netloc(url, parts)
    prefix = f"{parts.scheme}://" if parts.scheme else "//"
    if parts.netloc and (beyond := _past_userinfo(prefix, parts.netloc, rest)) is not None:
        return beyond
    netloc = _shown_netloc(parts.netloc, port_is_number=_port_is_number(parts))
    if parts.netloc and (inner := _embedded(parts.path, rest[len(parts.path) :])) is not None:
        return urlunsplit((parts.scheme, netloc, "", "", "")) + inner
    if not parts.netloc and "@" in rest:  # no "//": "user:key@host/..." read as scheme and path
        return _hidden_to_last_at("", rest)  # the "scheme" is the user name: hidden with it
    query = _shown_items(parts.query, "&")
    fragment = _HIDDEN if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, _shown_path(parts.path), query, fragment))


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
        told = _QUOTED.sub("'***'", str(error))
    else:
        return parts
    # Raised here, outside the except clause: ``from None`` only hides the original
    # from a traceback, and its ``__context__``, quoting the port, is walked by reporters.
    raise ValueError(told)


def user_part_cut_short(url: str) -> bool:
    """Whether a ``/``, ``?`` or ``#`` in ``url``'s user part ends its host early.

    ``https://tok/en@llm.example/v1`` (a base64 token, its ``/`` not written ``%2F``)
    reads as host ``tok`` and path ``/en@llm.example/v1``: a request would look up a
    server named by the token's head and send it the rest. :func:`shown_url` hides
    such a user part (:func:`_past_userinfo`); a URL asked something is refused.

    >>> user_part_cut_short("https://tok/en@llm.example/v1")
    True
    >>> user_part_cut_short("https://llm.example/v1/me@mail.example")  # the path's '@'
    False
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL one can take apart: no request is made to it
        return False
    return bool(parts.netloc) and _reads_as_user_part(parts.netloc, _after_netloc(url, parts))


def cut_short_reason(url: str) -> str:
    """Why ``url``, whose user part ends its host early (:func:`user_part_cut_short`), is
    refused, and what to write instead; ``url`` quoted as :func:`shown_url` shows it.

    One wording for every part that refuses such a URL (a model endpoint, an MCP
    server), each putting what it was given in front.

    >>> print(cut_short_reason("https://tok/en@llm.example/v1"))  # doctest: +ELLIPSIS
    'https://***@llm.example/v1' has a '/', '?' or '#' in its user name or password, ...
    """
    return (
        f"{shown_url(url)!r} has a '/', '?' or '#' in its user name or password, where it "
        "ends the host (the request would go to a server named by what comes before it): "
        "write each '/', '?' and '#' there as %2F, %3F and %23, and an '@' of the path as %40"
    )


def _after_netloc(url: str, parts: SplitResult) -> str:
    """The path, query and fragment of ``url`` (split into ``parts``) as written after
    its netloc: an empty query or fragment keeps its ``?`` or ``#``, which ``urlsplit``
    drops (a password cut short may hold ``?#``). Neither the scheme, netloc nor path
    holds a ``?`` or ``#``: one before the first ``#`` starts the query."""
    before_fragment, hash_mark, _ = url.partition("#")
    rest = parts.path + (f"?{parts.query}" if "?" in before_fragment else "")
    return rest + (f"#{parts.fragment}" if hash_mark else "")


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
        rest = url[found.end("netloc") :]
        if (beyond := _past_userinfo(f"{shown}//", netloc, rest)) is not None:
            return beyond
        shown += "//" + _shown_netloc(netloc, port_is_number=False)
        if (inner := _embedded(path, url[found.end("path") :])) is not None:
            return shown + inner
    elif "@" in url:  # no "//": the "scheme" is the user name, hidden with the rest of it
        return _hidden_to_last_at("", url)
    shown += _shown_path(path)
    if query is not None:
        shown += f"?{_HIDDEN}"
    if fragment is not None:
        shown += f"#{_HIDDEN}"
    return shown


def _past_userinfo(prefix: str, netloc: str, rest: str) -> str | None:
    """The URL shown from the last ``@`` of ``rest`` on, when ``netloc`` reads as a user part.

    A ``/``, ``?`` or ``#`` in a password or token (a base64 key, written without its
    ``%2F``) ends the authority there: ``https://tok/en@host/v1`` reads as host
    ``tok`` and path ``/en@host/v1``. An authority that names no server (no dot,
    not ``localhost`` nor an IPv6 literal), or whose "port" is no number (a dotted
    user name: ``first.last:pa/ss@host``), followed by an ``@`` is taken for such a
    user part: everything up to the last ``@`` is hidden, the host after it shown.
    ``http://ollama:11434/pkg@1`` is hidden as much: a path holding an ``@`` behind a
    host without a dot is rare, a key with a ``/`` is not. ``None``: ``netloc`` names
    a server, and an ``@`` after it is its path's (``/@scope/pkg``, ``/me@mail.example``).
    """
    if not _reads_as_user_part(netloc, rest):
        return None
    return _hidden_to_last_at(prefix, rest)


def _reads_as_user_part(netloc: str, rest: str) -> bool:
    """Whether ``netloc``, followed by ``rest``, is the head of a user part that a
    ``/``, ``?`` or ``#`` ended (:func:`_past_userinfo`): an ``@`` follows, and the
    "host" names no server or its "port" is no number (``first.last:pa/ss@host``: a
    user name may hold a dot, a port never holds a letter)."""
    host_and_port = netloc.rpartition("@")[2]
    port = _host(host_and_port)[1]
    names_server = _names_server(host_and_port) and (not port or _PORT.fullmatch(port))
    return "@" in rest and not names_server


def _hidden_to_last_at(prefix: str, rest: str) -> str:
    """``prefix``, then ``***@`` for ``rest`` up to its last ``@``, then what follows shown
    as a URL from its host on: a user part may hold any of ``/?#`` (and the ``@``).

    What follows is shown only if it starts with a server's name (:func:`_names_server`):
    the ``@`` may as well be a query value's own (``?key=ab@cd``), and then what follows
    it is the rest of the secret.
    """
    after = rest.rpartition("@")[2]
    if not _names_server(_UNTIL_PATH.split(after, maxsplit=1)[0]):
        return f"{prefix}{_HIDDEN}@{_HIDDEN}"
    return f"{prefix}{_HIDDEN}@{shown_url('//' + after).removeprefix('//')}"


def _embedded(path: str, after: str) -> str | None:
    """``path`` and what follows it (``after``: ``?query#fragment``) shown, when the path
    holds a URL of its own (a proxy's ``/fetch/https://user:key@origin/v1``).

    That URL runs to the end (its query and fragment are its own), and is shown as a
    URL is, whatever its credentials' spelling; ``None``: the path holds none.
    """
    found = _EMBEDDED.search(path)
    if found is None:
        return None
    return _shown_path(path[: found.start()]) + shown_url(path[found.start() :] + after)


def _names_server(host_and_port: str) -> bool:
    """Whether ``host_and_port`` reads as a server: a dotted or bracketed host, or
    ``localhost``. A port does not tell: ``user:1234/5@host`` has one."""
    host, _ = _host(host_and_port)
    return "." in host or host.startswith("[") or host.lower() == "localhost"


def _shown_path(path: str) -> str:
    """``path`` with the value of each ``;param`` hidden (a session id, a token), names kept."""
    return "/".join(
        head + semicolon + _shown_items(params, ";")
        for head, semicolon, params in (segment.partition(";") for segment in path.split("/"))
    )


def _shown_items(items: str, separator: str) -> str:
    """``name=value`` items as ``name=***``, one without ``=`` (a key given alone) as ``***``,
    but for a value :func:`_shown_value` shows."""
    return separator.join(
        f"{name}={value if _shown_value(name, value) else _HIDDEN}" if equals else _HIDDEN
        for name, equals, value in (item.partition("=") for item in items.split(separator))
        if name or equals
    )


def _shown_value(name: str, value: str) -> bool:
    """Whether the query item ``name=value`` (as written) is shown whole: ``name`` is one
    of :data:`VERSION_PARAMETERS` and ``value`` reads as a version (:data:`_VERSION`)."""
    return name.lower() in VERSION_PARAMETERS and reads_as_version(value)


def reads_as_version(value: str) -> bool:
    """Whether ``value`` has the shape of an ``api-version`` (:data:`_VERSION`): a date with
    an optional tag, a short number, ``preview`` or ``latest``; 23 characters at most, of
    ASCII digits, lower-case letters, dots and dashes, too few to be a key.

    >>> reads_as_version("2024-10-01-preview"), reads_as_version("sk-abc123DEF456")
    (True, False)
    """
    return _VERSION.fullmatch(value) is not None


def _port_is_number(parts: SplitResult) -> bool:
    """Whether the port of ``parts`` is absent or a number (``urlsplit`` checks it lazily)."""
    try:
        parts.port  # noqa: B018  # read for its check: a port that is no number raises
    except ValueError:
        return False
    return True


def _shown_netloc(netloc: str, *, port_is_number: bool) -> str:
    """``netloc`` with its user part hidden, and its port unless it is a number.

    A "port" that is no number is most often a password whose ``@host`` was forgotten
    (``http://user:key/v1``): then the "host" before it is the user name, hidden as
    well unless it names a server (:func:`_names_server`), since a user name may be a
    token.
    """
    _, at, host_and_port = netloc.rpartition("@")
    shown = f"{_HIDDEN}@" if at else ""
    host, after = _host(host_and_port)
    if not after or (port_is_number and _PORT.fullmatch(after)):
        return shown + host + after
    if not at and not _names_server(host_and_port):
        host = _HIDDEN
    return shown + host + (":" if after.startswith(":") else "") + _HIDDEN


def _host(host_and_port: str) -> tuple[str, str]:
    """The host of ``host_and_port`` and what follows it.

    A bracketed host is kept only while it reads as an IPv6 address (a zone after
    ``%`` aside), one whose ``]`` is lost while it reads as the start of one (groups
    of at most four hex digits): anything else in brackets cannot be told from a
    secret, and ``urlsplit`` refuses it quoting it whole.
    """
    if not host_and_port.startswith("["):
        host, colon, port = host_and_port.partition(":")
        return host, colon + port
    inside, bracket, after = host_and_port[1:].partition("]")
    if bracket:
        return (
            f"[{inside}]" if _is_ip_address(inside.partition("%")[0]) else f"[{_HIDDEN}]"
        ), after
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
    for user_part in _user_parts(url, parts):
        user, _, password = user_part.partition(":")
        written |= {user_part, user, password}
    # A query's values as written (an error page quotes the request target so), and as
    # a server reads them; but those shown (an ``api-version``'s): what the shown URL
    # holds, an error quoting it keeps.
    written |= {
        value if equals else name
        for name, equals, value in (item.partition("=") for item in parts.query.split("&"))
        if not _shown_value(name, value)
    }
    written |= {
        value
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if not _shown_value(name, value)
    }
    written |= _path_parameters(parts.path)
    plain = {form for value in written for form in (value, value.strip(), unquote(value))}
    found = {spelled for value in plain for spelled in _spellings(value)}
    return tuple(sorted((v for v in found if len(v) >= _SECRET_MIN), key=len, reverse=True))


def _path_parameters(path: str) -> set[str]:
    """The values of ``path``'s ``;params`` (a session id, a token), as :func:`_shown_path`
    hides them: each item's value, or the item whole when it has no ``=``."""
    return {
        value if equals else name
        for segment in path.split("/")
        for item in segment.partition(";")[2].split(";")
        for name, equals, value in [item.partition("=")]
        if not _shown_value(name, value)
    }


def _user_parts(url: str, parts: SplitResult) -> set[str]:
    """What of ``url`` (split into ``parts``) may be its user part where ``urlsplit``
    finds none, as :func:`shown_url` hides it (none if nothing does).

    A ``/``, ``?`` or ``#`` in a token ends the host early (``https://tok/en@host/v1``,
    :func:`_past_userinfo`), a URL without ``//`` reads as a scheme and a path
    (``user:key@host/v1``), and one whose ``@host`` was forgotten as a host and a port
    that is no number (``http://user:key/v1``). An ``@`` counts only before a server's
    name (a query value may hold one: ``?key=ab@cd``, already a secret as a value), and
    each such ``@`` gives one reading: the path may hold one too (``/@scope/pkg``,
    ``/me@mail.example``), and which one ends the user part cannot be told.
    """
    rest = _after_netloc(url, parts)
    if not parts.netloc:
        # as written: ``urlsplit`` lowercases a "scheme", the user name here
        return _before_an_at_of_a_server(url)
    if _reads_as_user_part(parts.netloc, rest):
        return _before_an_at_of_a_server(parts.netloc + rest)
    if "@" not in parts.netloc and not _port_is_number(parts):
        return set() if _names_server(parts.netloc) else {parts.netloc}
    return set()


def _before_an_at_of_a_server(text: str) -> set[str]:
    """Each start of ``text`` that ends before an ``@`` followed by a server's name."""
    return {
        text[: at.start()]
        for at in re.finditer("@", text)
        if _names_server(_UNTIL_PATH.split(text[at.end() :], maxsplit=1)[0])
    }


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


def _is_ip_address(text: str) -> bool:
    """Whether ``text`` is an IP address (``ipaddress`` says so)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
