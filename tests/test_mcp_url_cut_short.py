"""An MCP server URL whose user part a ``/``, ``?`` or ``#`` cuts short is refused.

``https://tok/en@mcp.example/mcp`` (a base64 token, its ``/`` not written ``%2F``) reads
as host ``tok`` and path ``/en@mcp.example/mcp``: the client would look up a server named
by the token's head and send it the rest of the token. The model endpoint check refused
that shape; an MCP server's URL was only masked in messages, and connected to.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.errors import VeridicError
from veridic.integrations.mcp import McpServer, http

_CUT_SHORT = [
    "https://tok/en@mcp.example/mcp",  # a base64 token as the user, with a '/'
    "https://ops:s3cret/half@mcp.example/mcp",  # a password with a '/'
    "https://ops:s3c?ret@mcp.example/mcp",  # a '?'
    "https://ops:s3c#ret@mcp.example/mcp",  # a '#'
    "https://first.last:pa/ss@mcp.example:8443/mcp",  # a dotted user name before it
    "http://tok/en@localhost:8000/mcp",
]


@pytest.mark.parametrize("url", _CUT_SHORT)
def test_an_mcp_url_whose_user_part_ends_its_host_early_is_refused(url: str) -> None:
    with pytest.raises(VeridicError) as refused:
        http("remote", url)
    message = str(refused.value)
    for encoded in ("%2F", "%3F", "%23"):  # what to write instead
        assert encoded in message
    assert "'remote'" in message  # which server
    assert "***@" in message  # the URL, masked


@pytest.mark.parametrize("url", _CUT_SHORT)
def test_an_mcp_server_made_otherwise_with_such_a_url_is_refused_too(url: str) -> None:
    server = http("remote", "https://mcp.example/mcp")
    with pytest.raises(VeridicError, match="%2F"):
        dataclasses.replace(server, url=url)
    with pytest.raises(VeridicError, match="%2F"):
        McpServer("remote", url=url)


_TOKEN_PIECE = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


@settings(max_examples=60, deadline=None)
@given(
    head=_TOKEN_PIECE,
    tail=_TOKEN_PIECE,
    cut=st.sampled_from("/?#"),
    host=st.sampled_from(["mcp.example", "mcp.example:8443", "localhost", "[::1]:9000"]),
)
def test_no_token_holding_a_separator_reaches_a_connection_nor_the_message(
    head: str, tail: str, cut: str, host: str
) -> None:
    """For any token cut by ``/``, ``?`` or ``#``, the server is refused before anything
    connects, and the refusal shows no piece of the token (each marked by ``s3c`` and
    ``r3t``, which no message holds of its own)."""
    with pytest.raises(VeridicError) as refused:
        http("remote", f"https://s3c{head}{cut}r3t{tail}@{host}/mcp")
    shown = str(refused.value)
    assert "s3c" not in shown
    assert "r3t" not in shown


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example/mcp/@scope/pkg",  # an '@' of the path, behind a server's name
        "https://mcp.example/u/me@mail.example",
        "https://tok%2Fen@mcp.example/mcp",  # the token's '/' percent-encoded, as asked
        "https://ops:s3cret@mcp.example/mcp",
    ],
)
def test_an_mcp_url_whose_at_sign_is_the_paths_or_whose_token_is_encoded_is_taken(
    url: str,
) -> None:
    assert http("remote", url).url == url
