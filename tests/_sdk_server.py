"""A fake provider server behind the real SDKs: the tests of the adapters share it.

The SDKs are driven over ``httpx.MockTransport`` (or ``httpx2``'s, in newer
SDKs), so every request goes through the SDK's own request building and every
answer through its own parsing; nothing leaves the machine.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


def http_module(sdk: str) -> ModuleType:
    """The HTTP library the installed SDK is built on (``httpx``, or ``httpx2`` in newer SDKs)."""
    base = importlib.import_module(f"{sdk}._base_client")
    found = getattr(base, "httpx2", None) or getattr(base, "httpx", None)
    assert isinstance(found, ModuleType), f"{sdk} uses neither httpx nor httpx2"
    return found


@dataclass
class FakeServer:
    """Answers each request with the next canned reply and keeps what was sent.

    ``sent`` holds each request's path and JSON body, ``raw`` its bytes as
    they went over the wire (to check that a value was sent byte for byte),
    ``headers`` its headers (names in lower case).
    """

    http: ModuleType
    replies: list[tuple[str, object]]
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def handle(self, request: Any) -> Any:
        self.raw.append(bytes(request.content))
        self.headers.append({name.lower(): value for name, value in request.headers.items()})
        self.sent.append((request.url.path, json.loads(request.content)))
        kind, body = self.replies.pop(0)
        if kind == "json":
            return self.http.Response(200, json=body)
        assert isinstance(body, str)
        return self.http.Response(
            200, headers={"content-type": "text/event-stream"}, content=body.encode()
        )

    async def ahandle(self, request: Any) -> Any:
        return self.handle(request)

    def client(self, sdk: ModuleType, name: str) -> Any:
        transport = self.http.MockTransport(self.handle)
        return getattr(sdk, name)(
            api_key="test-key", http_client=self.http.Client(transport=transport)
        )

    def async_client(self, sdk: ModuleType, name: str) -> Any:
        transport = self.http.MockTransport(self.ahandle)
        http_client = self.http.AsyncClient(transport=transport)
        return getattr(sdk, name)(api_key="test-key", http_client=http_client)

    @property
    def body(self) -> dict[str, Any]:
        """The JSON body of the last request."""
        return self.sent[-1][1]


def sse(events: list[dict[str, Any]], *, named: bool = False, done: bool = False) -> str:
    """A server-sent event stream of ``events`` (``named``: with ``event:`` lines)."""
    lines = []
    for event in events:
        if named:
            lines.append(f"event: {event['type']}")
        lines.append(f"data: {json.dumps(event)}\n")
    if done:
        lines.append("data: [DONE]\n")
    return "\n".join(lines) + "\n"
