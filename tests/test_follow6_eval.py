"""Follow-ups of the sixth review of the evaluation: each test failed on the code before its fix.

The command-line tests run end to end against a real HTTP server started in the test
(``tests/_chat_server.py``).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _chat_server import ChatServer, serving

from veridic.evaluation.cli import main

needs_http = pytest.mark.skipif(
    all(importlib.util.find_spec(name) is None for name in ("httpx", "httpx2")),
    reason="neither httpx nor httpx2 is installed (the eval-model extra)",
)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with serving() as state:
        yield state


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VERIDIC_EVAL_CACHE", str(tmp_path / "cache"))


def _argv(url: str, out: Path, *more: str) -> list[str]:
    model = ["--endpoint", url, "--model", "tiny"]
    return [*model, "--schemes", "verbatim", "--quiet", "--out", str(out), *more]


def _record(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


# --- the endpoint's URL -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        ("http://me:my s3cret@localhost/v1", "user name or password"),
        ("http://my name:s3cret@localhost/v1", "user name or password"),
        ("http://me:s3cret@local host/v1", "host"),
    ],
    ids=["space-in-password", "space-in-user", "space-in-host"],
)
def test_a_space_in_an_endpoint_url_is_placed_where_it_is(
    endpoint: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A space in the password was reported as "a space in its host", which sent the
    # user looking at a host name that was right.
    with pytest.raises(SystemExit) as stopped:
        main(["--endpoint", endpoint, "--model", "m", "--limit", "1"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"a space in its {said}" in err
    assert "s3cret" not in err
    if said != "host":
        assert "%20" in err  # what to type instead
