"""One URL masker for every message that quotes a URL: ``veridic probe``, the evaluation, MCP.

Three copies hid a URL's secrets three ways, and each missed a spelling another
caught: the evaluation's and ``veridic probe``'s showed a secret standing where a
port stands (``http://user:key/v1``, the ``@host`` forgotten), the evaluation's a
fragment of a URL it could not take apart. Each test failed on the code before
the copies became one (``veridic._urls.shown_url``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic._model_runtime import endpoint_problem
from veridic._urls import masked, shown_url, url_secrets
from veridic.checks.choosers import CachedChooser, ChoiceCache, EndpointChooser
from veridic.cli import main as veridic_main
from veridic.errors import VeridicError
from veridic.evaluation.backends import EndpointBackend
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
    assert shown_url("http://probe:s3cret/v1") == "http://***:***/v1"  # see below
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


# --- the masker's leftovers -----------------------------------------------------------------


def test_a_user_and_password_without_their_host_show_neither() -> None:
    # ``http://probe:s3cret/v1`` (the ``@host`` forgotten) showed ``probe``: the "host" is
    # the user name there, and a user name may be a token. A host that names a server
    # before a port that is no number is kept: it is one, and the "port" is hidden.
    assert shown_url("http://probe:s3cret/v1") == "http://***:***/v1"
    assert shown_url("http://localhost:eighty/v1") == "http://localhost:***/v1"
    assert shown_url("http://llm.example:eighty/v1") == "http://llm.example:***/v1"
    assert shown_url("http://ollama:11434/v1") == "http://ollama:11434/v1"  # a port


def test_a_user_part_written_without_its_slashes_shows_no_scheme() -> None:
    # ``u:pw@host`` reads as scheme ``u`` and path ``pw@host``: the user name was shown
    # as the scheme, ``u:***@host``.
    assert shown_url("opsuser:s3cret@mcp.example.com/mcp") == "***@mcp.example.com/mcp"
    assert shown_url("opsuser:s3cret@[::1/mcp") == "***@[::1/mcp"  # not a URL: the same


def test_url_secrets_hold_a_user_part_cut_short_by_a_slash() -> None:
    # A base64 token's ``/`` ends the host early: ``urlsplit`` finds no user part in
    # ``https://tok/s3cret@llm.example/v1``, and a server repeating it was not masked.
    for url, user, password in (
        ("https://tok3n/s3cret@llm.example/v1", "tok3n/s3cret", "tok3n/s3cret"),  # a token
        ("https://opsuser:pa/ss?w#rd@llm.example/v1", "opsuser", "pa/ss?w#rd"),
        ("opsuser:s3cret@llm.example/v1", "opsuser", "s3cret"),
        ("http://opsuser:s3cret/v1", "opsuser", "s3cret"),
    ):
        secrets = url_secrets(url)
        answer = masked(f"401: bad credentials {password} (user {user})", secrets)
        assert password not in answer, (url, secrets)
        assert user not in answer, (url, secrets)


def _answering_client(asked: list[str]) -> Any:
    class Client:
        def post(self, url: str, **options: Any) -> Any:
            asked.append(url)

            class Response:
                status_code = 200
                text = ""

                def json(self) -> Any:
                    call = '<tool_call>{"name": "get_forecast", "arguments": {}}</tool_call>'
                    return {"choices": [{"message": {"content": call}}]}

            return Response()

    return Client()


def test_cached_answers_are_not_shared_across_api_versions(tmp_path: Path) -> None:
    # The cache keyed on the shown URL, whose query values are all ``***``: an answer of
    # ``api-version=2024-06-01`` was reused for ``api-version=2025-01-01``.
    asked: list[str] = []
    cache = ChoiceCache(tmp_path)
    base = "https://llm.example/openai/v1?api-version="
    for version in ("2024-06-01", "2025-01-01", "2024-06-01"):
        chooser = EndpointChooser(base + version, "m", client=_answering_client(asked))
        CachedChooser(chooser, cache).choose([{"role": "user", "content": "hi"}], [])
    assert [url.rpartition("=")[2] for url in asked] == ["2024-06-01", "2025-01-01"]


def test_an_endpoint_key_in_the_query_stays_out_of_the_cache(tmp_path: Path) -> None:
    asked: list[str] = []
    cache = ChoiceCache(tmp_path)
    for key in ("s3cret-one", "s3cret-two"):
        url = f"https://llm.example/v1?api-version=1&api_key={key}"
        chooser = EndpointChooser(url, "m", client=_answering_client(asked))
        CachedChooser(chooser, cache).choose([{"role": "user", "content": "hi"}], [])
        assert key not in chooser.identity()
    assert len(asked) == 1  # a key changes nothing the model answers
    written = "".join(path.read_text() for path in tmp_path.rglob("*.json"))
    assert "s3cret" not in written


_USER = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789-_~!$&'()*+,;=", min_size=6)
_PASSWORD = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789-_~!$&'()*+,;=:/?#@", min_size=6)
_USER_PARTS = [
    "{scheme}://{user}:{password}@{host}/v1",
    "{scheme}://{user}@{host}/v1",  # a token as the user name
    "{user}:{password}@{host}/v1",  # no scheme: the user name reads as one
    "{scheme}://{user}:{password}/v1",  # the @host forgotten
]


@settings(max_examples=500, deadline=None)
@given(
    user=_USER.filter(lambda user: user.lower() != "localhost"),
    password=_PASSWORD.filter(lambda password: any(c.isalpha() for c in password)),
    place=st.sampled_from(_USER_PARTS),
    scheme=st.sampled_from(["http", "https"]),
    host=st.sampled_from(["llm.example", "127.0.0.1:8080", "[::1]:9", "localhost", "[::1"]),
)
def test_no_user_part_survives_the_url_masker(
    user: str, password: str, place: str, scheme: str, host: str
) -> None:
    """For all URLs of a user part and a host: neither the password nor the user name
    is shown, nor left in a text the URL's secrets were masked in. (A password holding
    a letter: ``user:1234/v1`` is a host and its port. A ``/`` in a password whose
    ``@host`` was forgotten ends it: what follows is a path, and only what precedes is
    known to be the secret; an ``@`` there makes what follows its host.)"""
    if "@" not in place:  # a "/?#" ends the password; an "@" gives it a host after all
        password = re.split(r"[/?#@]", password, maxsplit=1)[0]
        if len(password) < 4 or not any(c.isalpha() for c in password):
            return
    url = place.format(scheme=scheme, user=user, password=password, host=host)
    shown = shown_url(url)
    secrets = () if host == "[::1" else url_secrets(url)  # no request is made to "[::1"
    for secret in (user, password) if "{password}" in place else (user,):
        assert secret not in shown, (url, shown)
        if secrets:
            assert secret not in masked(url, secrets), (url, secrets)


# --- second read: what the one --endpoint check and the masker still let through -------------

CUT_SHORT_ENDPOINTS = [
    "https://tok3n/s3cret-pw@llm.example/v1",  # a base64 token, its '/' not %2F
    "http://opsuser:12/s3cret-pw@llm.example/v1",  # a password whose head reads as a port
    "http://opsuser:s3cret-pw?x@llm.example/v1",
]


@pytest.mark.parametrize("endpoint", CUT_SHORT_ENDPOINTS)
def test_an_endpoint_whose_user_part_ends_its_host_early_is_refused(
    capsys: pytest.CaptureFixture[str], endpoint: str
) -> None:
    # ``urlsplit`` reads ``https://tok3n/s3cret@llm.example/v1`` as host ``tok3n`` and
    # path ``/s3cret@llm.example/v1``: both command lines let the first two through, and
    # the request went to a server named by the token's head (a DNS lookup of it), the
    # rest of the token in its path, while every message named llm.example.
    for refusal in (_probe_refusal, _evaluation_refusal):
        err = refusal(endpoint, capsys)
        assert f"--endpoint {shown_url(endpoint)!r} has a '/', '?' or '#'" in err, err
        assert "%2F" in err  # what to write instead
        assert "opsuser" not in err
        assert "tok3n" not in err


@pytest.mark.parametrize("endpoint", CUT_SHORT_ENDPOINTS)
def test_an_endpoint_made_in_code_whose_user_part_ends_its_host_early_is_refused(
    endpoint: str,
) -> None:
    # The command lines check their --endpoint; an EndpointChooser or EndpointBackend
    # made in code sent its requests to the server the token's head names, the bearer
    # key with them.
    asked: list[str] = []
    for make in (EndpointChooser, EndpointBackend):
        with pytest.raises(ValueError, match="ends the host") as refused:
            make(endpoint, "m", api_key="sk-key", client=_answering_client(asked))
        assert "s3cret-pw" not in str(refused.value)
        assert "%2F" in str(refused.value)
    assert asked == []


def test_an_endpoint_with_an_at_in_the_path_of_a_named_server_is_not_refused() -> None:
    assert endpoint_problem("http://llm.example/v1/me@mail.example") is None
    assert endpoint_problem("http://localhost:8080/@scope/v1") is None


def test_a_dotted_user_name_before_a_password_cut_short_is_hidden(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ``first.last`` names a server by the masker's rule (a dot), so the "port" after it
    # was hidden and the user name and the password's tail, read as a path, were shown:
    # ``http://first.last:***/tail@llm.example/v1``. A "port" that is no number names no
    # server: what precedes the ``@`` is a user part.
    url = "http://first.last:s3cret/tail@llm.example/v1"
    assert shown_url(url) == "http://***@llm.example/v1"
    answer = masked(f"401 for first.last (password s3cret/tail) at {url}", url_secrets(url))
    assert "first.last" not in answer
    assert "s3cret" not in answer
    assert "tail" not in answer
    err = _evaluation_refusal("http://first.last:s3cret-pw/x@llm.example/v1", capsys)
    assert "has a '/', '?' or '#'" in err
    assert "first.last" not in err


def test_url_secrets_hold_a_user_part_cut_short_before_an_at_of_the_path() -> None:
    # The user part was taken up to the last '@' only if a server's name followed it:
    # an '@' of the path (``/@scope/pkg``) made url_secrets find none, and a server
    # repeating the password was not masked.
    url = "http://opsuser:s3cret/tail@llm.example/@scope/pkg"
    secrets = url_secrets(url)
    answer = masked("401: bad credentials opsuser s3cret/tail", secrets)
    assert "opsuser" not in answer, secrets
    assert "s3cret" not in answer, secrets


def test_url_secrets_keep_a_password_whose_question_mark_meets_its_hash() -> None:
    # ``?#`` in a password cut short makes an empty query, which ``urlsplit`` drops: the
    # user part was rebuilt without its ``?`` and the password, as written, was not
    # masked (test_no_user_part_survives_the_url_masker found it now and then).
    url = "http://opsuser:s3cret?#x@llm.example/v1"
    assert shown_url(url) == "http://***@llm.example/v1"
    assert "s3cret?#x" not in masked(f"bad password s3cret?#x in {url}", url_secrets(url))


_NAME = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjk23456789-_~!$&'()*+,;=%"
_DOTTED_USER = st.text(alphabet=_NAME + ".", min_size=6, max_size=14).filter(
    lambda user: any(c.isalpha() for c in user) and user.lower().strip(".") != "localhost"
)
_CUT_PASSWORD = st.text(alphabet=_NAME + ":/?#@[] ", min_size=6, max_size=14).filter(
    lambda password: password[0].isalpha() and sum(c.isalpha() for c in password) >= 3
)


def _percent_encoded(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in ":/?#@[] %" else c for c in text)


@settings(max_examples=300, deadline=None)
@given(
    user=_DOTTED_USER,
    password=_CUT_PASSWORD,
    encoded=st.booleans(),
    scheme=st.sampled_from(["http", "https", "HTTPS"]),
    host=st.sampled_from(
        ["llm.example:8080", "127.0.0.1:8080", "[::1]", "[fe80::1%25eth0]:8080", "localhost:1"]
    ),
    path=st.sampled_from(["/v1", "", "/v1/me@mail.example", "/@scope/pkg", "/v1?api-version=1"]),
    place=st.sampled_from(["{s}://{u}:{p}@{h}{path}", "{s}://{p}@{h}{path}"]),
)
def test_no_password_survives_the_masker_or_the_endpoint_check(
    user: str, password: str, encoded: bool, scheme: str, host: str, path: str, place: str
) -> None:
    """For all user names (a dot in them too) and passwords (holding any of ``:/?#@[]``
    and spaces, or percent-encoded), before any host (IPv6 with a zone, ports) and a
    path holding an ``@``: the password is neither shown, nor in the reason an
    ``--endpoint`` is refused, nor left in a text the URL's secrets were masked in."""
    if encoded:
        password = _percent_encoded(password)
    url = place.format(s=scheme, u=user, p=password, h=host, path=path)
    problem = endpoint_problem(url) or ""
    try:
        secrets: tuple[str, ...] | None = url_secrets(url)
    except ValueError:  # no URL ``urlsplit`` takes apart: nothing is asked of it
        secrets = None
    for secret in (user, password) if "{u}" in place else (password,):
        assert secret not in shown_url(url), url
        assert secret not in problem, (url, problem)
        if secrets is not None and all(len(piece) >= 4 for piece in secret.split(":")):
            assert secret not in masked(url, secrets), url  # shorter ones are not looked for
