"""A real chat-completions server in a thread, for the evaluation's command-line tests.

It speaks the OpenAI chat-completions shape over HTTP (the standard library's server), so
``--endpoint`` runs go through the real HTTP client, the real URL handling and the real
JSON reading; each answer is decided by the test, by request number.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

Reply = tuple[int, dict[str, str], bytes]
"""Status, headers and body of one answer of the fake server."""


def chat(content: object = "A summary of the document.", **message: object) -> Reply:
    """An answer whose message holds ``content`` (and ``message``'s other fields)."""
    body = {
        "model": "tiny-served",
        "choices": [
            {
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5},
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


@dataclass
class ChatServer:
    """A chat-completions server whose ``answer`` decides each reply (by request number);
    ``requests`` holds each request's JSON body, its path under ``"(path)"``."""

    url: str
    answer: Callable[[int], Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def serving() -> Iterator[ChatServer]:
    """A server on a free local port, answering :func:`chat` until told otherwise."""
    state = ChatServer(url="", answer=lambda n: chat())
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body["(path)"] = self.path
            with lock:
                state.requests.append(body)
                number = len(state.requests)
            status, headers, payload = state.answer(number)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


NEEDS_HTTP = pytest.mark.skipif(
    all(importlib.util.find_spec(name) is None for name in ("httpx", "httpx2")),
    reason="neither httpx nor httpx2 is installed (the eval-model extra)",
)
"""Marks a test that asks the server: the endpoint backend needs an HTTP client."""


def endpoint_argv(url: str, out: Path, *more: str) -> list[str]:
    """The command line of a quiet ``verbatim`` run against the server at ``url``."""
    model = ["--endpoint", url, "--model", "tiny"]
    return [*model, "--schemes", "verbatim", "--quiet", "--out", str(out), *more]


def read_record(path: Path) -> dict[str, Any]:
    """The JSON record a run wrote at ``path``."""
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document
