"""A second read of the URL masker: spellings the first read left showing a secret.

Each test failed on the code before its fix. The masker is reached through the
public parts that quote a URL: an MCP server's ``repr`` (:func:`http`), and the
endpoint backends of the evaluation and of ``veridic probe``.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from typing import NoReturn

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.checks.choosers import EndpointChooser
from veridic.errors import VeridicError
from veridic.evaluation.backends import EndpointBackend
from veridic.integrations.mcp import http


def _shown(url: str) -> str:
    """The URL as an MCP server's ``repr`` (and so its errors and the log) shows it, or
    as the refusal of a URL quotes it (one that is not HTTP, or whose user part a ``/``,
    ``?`` or ``#`` cuts short): the quoted ``url=`` alone, the refusal's fixed wording
    holding short words ("ha", "ret") that the tests look for."""
    try:
        return repr(http("remote", url))
    except VeridicError as refused:
        told = str(refused)
    quoted = re.search(r"url=('[^']*'|\"[^\"]*\")", told)
    assert quoted is not None, told
    return quoted.group(1)


class _NoNetwork:
    """A client that is never asked: the URL is refused before any request."""

    def post(
        self, url: str, *, json: object, headers: Mapping[str, str], timeout: float
    ) -> NoReturn:
        raise AssertionError(f"asked {url!r}, which should have been refused first")


# --- a password or token holding a '/' ---------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://ops:s3cret/half@mcp.example/mcp",  # user:password, the password with a '/'
        "https://tok3n/s3cret@mcp.example/mcp",  # a base64 token as the user, with a '/'
        "https://ops:s3cret/ha/lf@mcp.example/mcp",  # two of them
        "https://ops:s3cret#ha/lf@mcp.example/mcp",  # a '#' and a '/'
        "https://ops:s3c@ret/half@mcp.example/mcp",  # an '@' and a '/'
        "https://tok3n/s3cret@[::1/mcp",  # and a host urlsplit refuses
    ],
)
def test_a_userinfo_holding_a_slash_shows_none_of_itself(url: str) -> None:
    shown = _shown(url)
    for piece in ("tok3n", "s3c", "ret", "half", "ha", "lf"):
        assert piece not in shown.replace("remote", ""), (url, shown)
    assert "***@" in shown


def test_a_userinfo_holding_a_slash_still_shows_the_server_after_it() -> None:
    # The server is refused (test_mcp_url_cut_short.py); its refusal names the server.
    assert _shown("https://ops:s3cret/half@mcp.example:8443/mcp?key=k") == (
        "'https://***@mcp.example:8443/mcp?key=***'"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://ollama:11434/v1?key=s3c@ret",  # an '@' of a query value, behind no server name
        "http://ollama:11434/v1#s3c@ret",
        "http://tok3n/s3c@ret/v1",
    ],
)
def test_what_follows_an_at_sign_is_shown_only_as_a_server_name(url: str) -> None:
    shown = _shown(url)
    assert "s3c" not in shown
    assert "ret" not in shown.replace("remote", "")


@pytest.mark.parametrize(
    "url",
    [
        "https://server.smithery.ai/@upstash/context7-mcp/mcp?api_key=***",
        "https://cdn.example/pkg@1.2/mcp",
        "http://localhost:8000/users/me@example.com/mcp",
        "http://[::1]:8000/a@b/mcp",
    ],
)
def test_an_at_sign_in_the_path_of_a_named_server_is_shown(url: str) -> None:
    assert _shown(url) == f"McpServer('remote', {url!r})"


@pytest.mark.parametrize("spelling", ["https://", "https:/", "HTTP://"])
def test_a_url_held_in_a_proxys_path_shows_no_credential(spelling: str) -> None:
    url = f"https://proxy.example/fetch/{spelling}ops:s3cret@origin.example/v1?key=k"
    shown = _shown(url)
    assert "s3cret" not in shown
    assert "https://proxy.example/fetch/" in shown
    assert "***@origin.example/v1?key=***" in shown


# --- ;params and what follows a bracketed host ---------------------------------------------


def test_path_parameter_values_are_hidden_like_query_values() -> None:
    shown = _shown("https://mcp.example/v1;jsessionid=s3cret/mcp;s3cret2?x=1")
    assert shown == "McpServer('remote', 'https://mcp.example/v1;jsessionid=***/mcp;***?x=***')"


def test_text_after_an_ipv6_literal_that_is_no_port_is_hidden() -> None:
    assert _shown("http://[::1]s3cret/mcp") == "McpServer('remote', 'http://[::1]***/mcp')"
    assert _shown("http://[::1]:8080/mcp") == "McpServer('remote', 'http://[::1]:8080/mcp')"


# --- the endpoint backends: no secret in the error, nor in its chain ------------------------


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://ops:s3cret-pw\uff20llm.example/v1",  # fullwidth '@': urlsplit quotes the netloc
        "http://[s3cret-pw]/v1",  # ipaddress quotes the bracketed host
        "http://ops:s3cret-pw/v1",  # the @host forgotten: httpx quoted the "port"
    ],
)
@pytest.mark.parametrize("backend", [EndpointBackend, EndpointChooser])
def test_an_endpoint_that_is_no_url_is_refused_without_its_secret(
    endpoint: str, backend: type[EndpointBackend] | type[EndpointChooser]
) -> None:
    with pytest.raises(ValueError, match="is not a URL") as refused:
        backend(endpoint, "m", client=_NoNetwork())
    told = "".join(traceback.format_exception(refused.value))
    assert "s3cret-pw" not in told
    assert "***" in str(refused.value)


@pytest.mark.parametrize("backend", [EndpointBackend, EndpointChooser])
def test_a_refused_endpoint_keeps_no_secret_in_its_suppressed_context(
    backend: type[EndpointBackend] | type[EndpointChooser],
) -> None:
    # ``raise ... from None`` hides the context from a traceback, not from
    # ``__context__``, which an error reporter may walk all the same.
    with pytest.raises(ValueError, match="is not a URL") as refused:
        backend("http://ops:s3cret-pw/v1", "m", client=_NoNetwork())
    chain: list[BaseException] = []
    error: BaseException | None = refused.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert all("s3cret-pw" not in str(each) for each in chain), [str(e) for e in chain]


# --- for all credentials: none of it shown --------------------------------------------------

_PLAIN = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
_PIECE = st.text(alphabet=_PLAIN, min_size=6, max_size=12)
_SEPARATOR = st.sampled_from(["/", "@", "#", "?", ":", ";", "\\", "%40", "%3A", "&", "=", "\t"])
_PLACES = [
    "{scheme}://ops:{secret}@{host}/v1",
    "{scheme}://{secret}@{host}/v1",
    "{scheme}://{host}/v1?key={secret}",
    "{scheme}://{host}/v1;token={secret}",
    "{scheme}://{host}/v1#{secret}",
    "{scheme}://{host}/v1?next=https://ops:{secret}@other.example/x",
    "//ops:{secret}@{host}/v1",
    "{scheme}://{host}/fetch/https://ops:{secret}@other.example/v1",  # a proxy's path
    "{scheme}://{host}/fetch/https:/ops:{secret}@other.example/v1",
]


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(_PIECE, min_size=1, max_size=3),
    separators=st.lists(_SEPARATOR, min_size=2, max_size=2),
    place=st.sampled_from(_PLACES),
    scheme=st.sampled_from(["http", "HTTPS", "wss"]),
    host=st.sampled_from(
        ["llm.example", "127.0.0.1:8080", "[::1]:9", "b\u00fccher.example", "xn--bcher-kva.example"]
    ),
)
def test_no_piece_of_a_credential_with_separators_is_shown(
    pieces: list[str], separators: list[str], place: str, scheme: str, host: str
) -> None:
    """A credential cut by any separator a URL parser reads shows no piece of itself.

    But a ``/`` in a ``;param`` value: what follows it is the path's next segment.
    """
    if ";token=" in place:
        separators = [s for s in separators if s != "/"] or [";"]
        separators *= 2
    secret = separators[0].join(pieces) if len(pieces) > 1 else pieces[0] + separators[1]
    url = place.format(scheme=scheme, secret=secret, host=host)
    shown = _shown(url)
    for piece in pieces:
        assert piece not in shown, (url, shown)


@settings(max_examples=200, deadline=None)
@given(
    host=st.sampled_from(["llm.example", "127.0.0.1", "[::1]", "localhost", "b\u00fccher.example"]),
    port=st.one_of(st.none(), st.integers(0, 65535)),
    path=st.lists(st.text(alphabet="abcdefghij-_.~@", min_size=1, max_size=8), max_size=4),
)
def test_a_url_without_credentials_keeps_its_host_port_and_path(
    host: str, port: int | None, path: list[str]
) -> None:
    where = host if port is None else f"{host}:{port}"
    url = f"https://{where}/" + "/".join(path)
    shown = _shown(url)
    assert shown == f"McpServer('remote', {url!r})"
