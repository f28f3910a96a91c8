"""A URL as messages and records show it keeps the value of its ``api-version``.

The masker hid every query value, so an evaluation record's ``endpoint`` read
``...?api-version=***`` whatever the version: records of two API versions (which answer
differently) looked alike. ``api-version`` (and ``api_version``) holds no credential;
its value is shown when it reads as a version, every other query value stays hidden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.checks.choosers import EndpointChooser
from veridic.evaluation.backends import BackendError, EndpointBackend
from veridic.integrations.mcp import http


class _Answer:
    def __init__(self, status: int, text: str) -> None:
        self.status_code, self.text = status, text

    def json(self) -> Any:
        raise ValueError("not JSON")


class _Refusing:
    """An endpoint that refuses each request with ``text`` (as an error page does)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def post(
        self, url: str, *, json: object, headers: Mapping[str, str], timeout: float
    ) -> _Answer:
        return _Answer(400, self.text)


def _record_endpoint(url: str) -> str:
    return EndpointBackend(url, "m", client=_Refusing("")).describe()["endpoint"]


@pytest.mark.parametrize(
    "version", ["2024-06-01", "2024-10-01-preview", "2025-04-01-preview", "preview", "v1", "1"]
)
def test_the_records_endpoint_shows_the_api_version_and_hides_the_key(version: str) -> None:
    shown = _record_endpoint(f"https://llm.example/openai/v1?api-version={version}&key=s3cret")
    assert shown == (
        f"https://llm.example/openai/v1/chat/completions?api-version={version}&key=***"
    )


def test_records_of_two_api_versions_tell_them_apart() -> None:
    older = _record_endpoint("https://llm.example/openai/v1?api-version=2024-06-01")
    newer = _record_endpoint("https://llm.example/openai/v1?api-version=2025-04-01-preview")
    assert older != newer


def test_the_underscore_spelling_and_any_case_of_the_name_show_too() -> None:
    assert _record_endpoint("https://llm.example/v1?api_version=2024-06-01").endswith(
        "?api_version=2024-06-01"
    )
    assert _record_endpoint("https://llm.example/v1?API-Version=2024-06-01").endswith(
        "?API-Version=2024-06-01"
    )


def test_an_mcp_servers_repr_and_the_probes_description_show_it_alike() -> None:
    url = "https://mcp.example/mcp?api-version=2024-06-01&token=s3cret"
    assert repr(http("remote", url)) == (
        "McpServer('remote', 'https://mcp.example/mcp?api-version=2024-06-01&token=***')"
    )
    chooser = EndpointChooser("https://llm.example/v1?api-version=2024-06-01", "m")
    assert chooser.describe()["endpoint"].endswith("?api-version=2024-06-01")


_KEYISH = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz", min_size=8)


@settings(max_examples=100, deadline=None)
@given(value=_KEYISH, name=st.sampled_from(["api-version", "api_version", "key", "v", "version"]))
def test_a_value_that_reads_as_no_version_stays_hidden_whatever_its_name(
    value: str, name: str
) -> None:
    """A key put where a version goes (or any other parameter's value) is not shown: the
    name alone does not vouch for what its value holds."""
    shown = _record_endpoint(f"https://llm.example/v1?{name}=s3c{value}")
    assert "s3c" not in shown
    assert shown.endswith(f"?{name}=***")


def test_a_servers_error_quoting_the_version_keeps_it_and_masks_the_key() -> None:
    """The secrets masked out of a server's answer are what the shown URL hides: the
    version, shown in the URL, is not turned into ``***`` in the error either."""
    page = "api-version 2024-06-01 is not supported for key s3cret-key-value"
    backend = EndpointBackend(
        "https://llm.example/v1?api-version=2024-06-01&key=s3cret-key-value",
        "m",
        client=_Refusing(page),
        retries=0,
    )
    with pytest.raises(BackendError) as refused:
        backend.complete([{"role": "user", "content": "hi"}], 8)
    told = str(refused.value)
    assert "api-version 2024-06-01 is not supported" in told
    assert "s3cret" not in told


# --- second read: what a shown api-version may hold -----------------------------------------

_SHOWN_VERSION = re.compile(r"[0-9a-z.-]{1,23}")
"""All a shown ``api-version`` may hold: digits, lower-case letters, dots and dashes, 23 at
most (``2024-10-01-`` and a tag of 12): too few, of too few kinds, to be a key's."""


def _refusal(url: str, page: str) -> str:
    """What an endpoint at ``url`` that answers ``page`` to every request is refused with."""
    backend = EndpointBackend(url, "m", client=_Refusing(page), retries=0)
    with pytest.raises(BackendError) as refused:
        backend.complete([{"role": "user", "content": "hi"}], 8)
    return str(refused.value)


@settings(max_examples=200, deadline=None)
@given(value=st.text(min_size=1, max_size=40), name=st.sampled_from(["api-version", "API_Version"]))
def test_a_shown_api_version_holds_no_more_than_a_version_can(value: str, name: str) -> None:
    """For any value written after ``api-version=`` (percent-encoded as a URL holds it),
    the record either hides it or shows it as written, and then it has a version's
    shape; and a server's error quoting the key beside it still hides the key."""
    written = quote(value, safe="")
    url = f"https://llm.example/v1?{name}={written}&key=K3y-{written}"
    shown = _record_endpoint(url)
    prefix = f"https://llm.example/v1/chat/completions?{name}="
    assert shown.startswith(prefix)
    assert shown.endswith("&key=***")
    shown_value = shown.removeprefix(prefix).removesuffix("&key=***")
    assert shown_value == "***" or (shown_value == written and _SHOWN_VERSION.fullmatch(written))
    assert "K3y" not in _refusal(url, f"refused key K3y-{written} for {url}")


_KEY = st.from_regex(r"(sk-|AIza|ghp_)?[A-Za-z0-9+/_=-]{16,48}", fullmatch=True).filter(
    lambda key: any(char.isupper() or char in "+/_=" for char in key)
)
"""A key as issued: base64 or URL-safe base64, at least one capital or sign of it."""


@settings(max_examples=200, deadline=None)
@given(key=_KEY)
def test_a_key_put_where_the_api_version_goes_is_never_shown(key: str) -> None:
    url = f"https://llm.example/v1?api-version={quote(key, safe='')}"
    assert _record_endpoint(url).endswith("?api-version=***")
    assert key not in _refusal(url, f"unknown api-version {key}")
