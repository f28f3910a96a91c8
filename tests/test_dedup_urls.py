"""One URL masker for every message that quotes a URL: ``veridic probe``, the evaluation, MCP.

Three copies hid a URL's secrets three ways, and each missed a spelling another
caught: the evaluation's and ``veridic probe``'s showed a secret standing where a
port stands (``http://user:key/v1``, the ``@host`` forgotten), the evaluation's a
fragment of a URL it could not take apart. Each test failed on the code before
the copies became one (``veridic._urls.shown_url``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic._urls import shown_url
from veridic.cli import main as veridic_main
from veridic.errors import VeridicError
from veridic.evaluation.cli import main as evaluation_main

LEAKS = [
    "http://probe:s3cret-pw/v1",  # user:key with the @host forgotten: the key is the "port"
    "http://[::1]:s3cret-pw/v1",
    "http://[::1/v1#s3cret-pw",  # not a URL (the bracket): its fragment was shown
    "http://[no-ip]:s3cret-pw/v1",  # not a URL (no IPv6 address in the brackets)
    "http://probe\uff1as3cret-pw\uff20localhost/v1",  # fullwidth ':' and '@': not a URL
]


@pytest.mark.parametrize("endpoint", LEAKS)
def test_a_probe_endpoint_that_is_no_url_never_shows_the_key_in_its_port(
    capsys: pytest.CaptureFixture[str], endpoint: str
) -> None:
    argv = ["probe", "not_imported_at_all:registry", "--endpoint", endpoint, "--model", "m"]
    assert veridic_main([*argv, "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert "veridic probe: --endpoint " in err
    assert "s3cret-pw" not in out + err


@pytest.mark.parametrize("endpoint", LEAKS)
def test_an_evaluation_endpoint_that_is_no_url_never_shows_its_key(
    capsys: pytest.CaptureFixture[str], endpoint: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        evaluation_main(["--endpoint", endpoint, "--model", "m", "--limit", "1"])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert "--endpoint " in err
    assert "s3cret-pw" not in out + err


def test_a_shown_url_keeps_what_tells_the_server_apart() -> None:
    shown = shown_url("https://ops:pw@MCP.example.com:8443/v1/mcp?api_key=k&v=2#frag")
    assert shown == "https://***@MCP.example.com:8443/v1/mcp?api_key=***&v=***#***"
    assert shown_url("http://probe:s3cret/v1") == "http://probe:***/v1"
    assert shown_url("http://[::1/v1#s3cret") == "http://[::1/v1#***"


_SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789-_~", min_size=10, max_size=24)
_PLACES = [
    "{scheme}://ops:{secret}@{host}/v1",  # userinfo password
    "{scheme}://{secret}@{host}/v1",  # a token as the user name
    "{scheme}://ops:{secret}/v1",  # user:password with the host forgotten
    "{scheme}://{host}/v1?password={secret}",
    "{scheme}://{host}/v1?v=2&api_key={secret}",
    "{scheme}://{host}/v1?token={secret}&v=2",
    "{scheme}://{host}/v1?key={secret}",
    "{scheme}://{host}/v1?sig={secret}#top",
    "{scheme}://{host}/v1?{secret}",  # a key as the whole query
    "{scheme}://{host}/v1#{secret}",
    "{scheme}://{host}/v1?a=1#access_token={secret}",
    "{scheme}://{host}:{secret}/v1",
]


@settings(max_examples=300, deadline=None)
@given(
    secret=_SECRET,
    place=st.sampled_from(_PLACES),
    scheme=st.sampled_from(["http", "https", "ws", "postgresql"]),
    host=st.sampled_from(
        ["llm.example", "127.0.0.1:8080", "[::1]:9", "[::1", "[no-ip]", "h\uff20x"]
    ),
)
def test_no_secret_survives_the_url_masker(secret: str, place: str, scheme: str, host: str) -> None:
    """Wherever a URL may carry a credential, for a URL one can take apart or not."""
    url = place.format(scheme=scheme, secret=secret, host=host)
    shown = shown_url(url)
    assert secret not in shown, (url, shown)
    assert shown.startswith(f"{scheme}://")


def test_an_mcp_url_written_without_its_scheme_never_shows_its_password() -> None:
    # ``ops:pw@host`` reads as scheme "ops" and path "pw@host": the masker kept the path.
    mcp = pytest.importorskip("veridic.integrations.mcp")
    with pytest.raises(VeridicError) as refused:
        mcp.http("remote", "ops:s3cret-pw@mcp.example.com/mcp")
    assert "s3cret-pw" not in str(refused.value)
    assert "mcp.example.com/mcp" in str(refused.value)


# --- one check of an --endpoint for both command lines ----------------------------------------

BAD_ENDPOINTS = [
    ("http://me:my s3cret-pw@localhost/v1", "has a space in its user name or password"),
    ("http://my s3cret-pw:x@localhost/v1", "has a space in its user name or password"),
    ("http://me:s3cret-pw@local host/v1", "has a space in its host"),
    ("http://me:s3cret-pw@[::1/v1", "is not a URL (Invalid IPv6 URL)"),
    ("ftp://me:s3cret-pw@localhost/v1", "is not an http or https URL with a host"),
    ("HTTP:///v1?key=s3cret-pw", "is not an http or https URL with a host"),
]


def _probe_refusal(endpoint: str, capsys: pytest.CaptureFixture[str]) -> str:
    argv = ["probe", "not_imported_at_all:registry", "--endpoint", endpoint, "--model", "m"]
    assert veridic_main([*argv, "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert "s3cret-pw" not in out + err
    return err


def _evaluation_refusal(endpoint: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        evaluation_main(["--endpoint", endpoint, "--model", "m", "--limit", "1"])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert "s3cret-pw" not in out + err
    return err


@pytest.mark.parametrize(("endpoint", "said"), BAD_ENDPOINTS)
def test_both_command_lines_refuse_a_bad_endpoint_for_the_same_reason(
    capsys: pytest.CaptureFixture[str], endpoint: str, said: str
) -> None:
    # Two copies of the check: `veridic probe` let a space in the user part or the host
    # through (to fail at the request), the evaluation said it before asking anything.
    for refusal in (_probe_refusal, _evaluation_refusal):
        err = refusal(endpoint, capsys)
        assert f"--endpoint {shown_url(endpoint)!r} {said}" in err, (refusal.__name__, err)
        fix = "%20" if "user name" in said else "http://localhost:8080/v1"
        assert fix in err  # what to pass instead
