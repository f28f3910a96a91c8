"""``veridic probe --endpoint`` takes an ``api-version`` only when it reads as a version.

``EndpointChooser.identity`` wrote every ``api-version`` value of the URL into the probe
cache's records as it was: a key put there by mistake, a line break or an escape
sequence, any length. The shown URL hid such a value, the cache did not. Now the chooser
refuses it when it is made, with a message that does not repeat it. Failed on the code
before the fix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.checks.choosers import EndpointChooser
from veridic.checks.cli import EXIT_USAGE

_VERSIONS = ["2024-06-01", "2024-10-01-preview", "v1", "1", "2.0", "preview", "latest"]


@pytest.mark.parametrize("version", _VERSIONS)
def test_an_api_version_that_reads_as_one_enters_the_identity(version: str) -> None:
    chooser = EndpointChooser(f"https://llm.example/v1?api-version={version}", "m")
    assert f" api-version={version} " in chooser.identity()


@pytest.mark.parametrize(
    "value",
    [
        "sk-Secret1234567890abcdef",  # a key put where the version goes
        "2024-06-01\n\x1b[31mforged",  # a line break and an escape sequence
        "2024-06-01" + "x" * 500,  # no version is this long
        "2024-06-01 preview",  # a space
        "",  # nothing
    ],
)
def test_an_api_version_that_reads_as_no_version_is_refused_without_repeating_it(
    value: str,
) -> None:
    url = f"https://llm.example/v1?api-version={quote(value, safe='')}"
    with pytest.raises(ValueError, match="api-version") as refused:
        EndpointChooser(url, "m")
    told = str(refused.value)
    for unshown in ("Secret", "forged", "xxxx"):
        assert unshown not in told
    assert "2024-10-01-preview" in told  # says what a version looks like
    assert "--api-key-env" in told  # and where a key goes instead


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=40))
def test_whatever_the_api_version_the_cache_identity_holds_only_a_versions_characters(
    value: str,
) -> None:
    url = f"https://llm.example/v1?api_version={quote(value, safe='')}"
    try:
        identity = EndpointChooser(url, "m").identity()
    except ValueError:
        return
    told = identity.split(" api_version=", 1)[1].split(" model:", 1)[0]
    assert len(told) <= 23
    assert all(char.isascii() and (char.isalnum() or char in ".-") for char in told)


def test_the_probe_command_refuses_it_as_a_usage_error_before_asking(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/v1?api-version=sk-Secret1234567890abcdef"
    cache = str(tmp_path / "cache")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "veridic",
            "probe",
            "probe_app:registry",
            "--endpoint",
            url,
            "--model",
            "m",
            "--cache",
            cache,
        ],
        cwd=Path(__file__).parent / "cli_fixtures",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Traceback" not in done.stderr
    assert "api-version" in done.stderr
    assert "could not reach" not in done.stderr  # refused before anything is asked
    assert "Secret" not in done.stderr
