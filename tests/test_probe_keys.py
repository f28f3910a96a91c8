"""``veridic probe``'s endpoint chooser quoted a server's error page and the HTTP client's
error as they came: a server refusing a key repeats it, often escaped, and a key with a
line break (read from a file) was quoted by the client that refused the header. The
evaluation's backend hid both; the chooser now uses the same masking (``veridic._urls``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _chat_server import NEEDS_HTTP, ChatServer, serving

from veridic.checks.choosers import EndpointChooser, ProbeModelError


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with serving() as state:
        yield state


def _asked(chooser: EndpointChooser) -> ProbeModelError:
    with pytest.raises(ProbeModelError) as raised:
        chooser.choose([{"role": "user", "content": "hi"}], [])
    return raised.value


@NEEDS_HTTP
@pytest.mark.parametrize(
    ("key", "query", "echoed"),
    [
        ("s3cret-bearer-key", "", b'{"error": "invalid key s3cret-bearer-key"}'),
        ("s3cret/bearer-key", "", b'{"error": "invalid key s3cret\\/bearer-key"}'),
        ("a-bearer-key", "?key=s3cret%2Fquery", b"no route for /v1/chat?key=s3cret%2fquery"),
    ],
)
def test_a_key_the_server_repeats_is_not_in_the_probes_error(
    server: ChatServer, key: str, query: str, echoed: bytes
) -> None:
    server.answer = lambda n: (401, {"Content-Type": "text/plain"}, echoed)
    error = _asked(EndpointChooser(server.url + query, "tiny", api_key=key))
    assert "HTTP 401" in str(error)
    assert "s3cret" not in str(error), error
    assert "***" in str(error)


@NEEDS_HTTP
def test_a_key_no_header_can_carry_is_not_in_the_probes_error_nor_its_cause(
    server: ChatServer,
) -> None:
    error = _asked(EndpointChooser(server.url, "tiny", api_key="s3cret-bearer-key\n"))
    assert "s3cret" not in str(error), error
    assert error.__cause__ is None  # the client's own error quoted the header
    assert not server.requests


@NEEDS_HTTP
def test_an_unreachable_endpoint_keeps_its_cause_when_it_quotes_no_secret() -> None:
    error = _asked(EndpointChooser("http://127.0.0.1:9/v1", "tiny", api_key="s3cret", timeout=2))
    assert error.__cause__ is not None
