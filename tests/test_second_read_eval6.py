"""A second read of the sixth review's evaluation changes: the siblings they left open.

Each test runs the command line end to end against a real HTTP server started in the
test (``tests/_chat_server.py``), and each failed on the code before its fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _chat_server import NEEDS_HTTP, ChatServer, Reply, chat, endpoint_argv, read_record, serving

from veridic.evaluation.cli import main

pytestmark = NEEDS_HTTP


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with serving() as state:
        yield state


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VERIDIC_EVAL_CACHE", str(tmp_path / "cache"))


def _busy(status: int, **headers: str) -> Reply:
    return status, headers, b'{"error": {"message": "Bad gateway"}}'


# --- what the evaluation's record and messages hold of a server's answer ------------------------


def test_a_served_model_name_cut_inside_an_emoji_keeps_the_record(
    server: ChatServer, tmp_path: Path
) -> None:
    """Half a surrogate pair in an answer's text was made U+FFFD, but the same half in the
    answer's ``model`` went to the record's "served model": the record could not be
    written in UTF-8 and the run ended in a traceback that lost every answer."""
    body = {
        "model": "tiny-\ud83d",
        "choices": [{"message": {"content": "A summary."}, "finish_reason": "stop"}],
    }
    payload = json.dumps(body, ensure_ascii=True).encode()
    server.answer = lambda n: (200, {}, payload)
    out = tmp_path / "r.json"
    assert main(endpoint_argv(server.url, out, "--limit", "2")) == 0
    assert read_record(out)["meta"]["served model"] == "tiny-\ufffd"


def test_a_key_given_as_a_bare_query_is_not_shown(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gateway that takes its key as the whole query (``/v1?sk-...``) had it shown as a
    parameter's name (``?sk-...=***``) in every message and in the record."""
    out = tmp_path / "r.json"
    url = f"{server.url}?s3cret-key"
    assert main(endpoint_argv(url, out, "--limit", "1")) == 0
    assert [r["(path)"] for r in server.requests] == ["/v1/chat/completions?s3cret-key"]
    assert "s3cret" not in out.read_text(encoding="utf-8")
    server.answer = lambda n: (404, {}, b"no such route")
    assert main(endpoint_argv(url, tmp_path / "again.json", "--limit", "1")) == 1
    err = capsys.readouterr().err
    assert "HTTP 404" in err
    assert "s3cret" not in err


# --- a proxy's busy answers --------------------------------------------------------------------


@pytest.mark.parametrize("status", [502, 504])
def test_a_proxy_s_bad_gateway_or_timeout_is_asked_again(
    status: int, server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The proxies in front of a model server (nginx, LiteLLM, a cloud load balancer)
    answer 502 or 504 while the server restarts or is slow for a moment: unlike 429 and
    503, one such answer stopped an hour-long run."""
    out = tmp_path / "r.json"
    server.answer = lambda n: _busy(status) if n == 2 else chat()
    argv = endpoint_argv(server.url, out, "--limit", "2", "--max-wait", "0.05")
    argv.remove("--quiet")
    assert main(argv) == 0
    assert len(server.requests) == 3
    assert f"HTTP {status} (no Retry-After): asking again in 0.05 s" in capsys.readouterr().err
    record = read_record(out)
    assert len(record["cases"]) == 2
    assert record["meta"]["retries"].startswith("1 (")


def test_many_retries_without_a_wait_end_as_a_message_not_a_traceback(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The doubling wait was computed before it was bounded by --max-wait: past 1024
    retries the float overflowed, and the run ended in an OverflowError's traceback."""
    server.answer = lambda n: _busy(503)
    argv = endpoint_argv(server.url, tmp_path / "r.json", "--limit", "1")
    assert main([*argv, "--retries", "1030", "--max-wait", "0"]) == 1
    assert len(server.requests) == 1031
    err = capsys.readouterr().err
    assert "still so after 1030 retries (--retries 1030)" in err
    assert "OverflowError" not in err
