"""Traces, a third look: an interrupted call's span says what its record says, an answer's span
holds a bounded list, and a model call's span names the server it went to.

Reproducers of a third review of :mod:`veridic.run.telemetry`, each through the public API
with the SDK's in-memory exporter (real SDKs over a mock transport where a client is read),
as ``tests/test_telemetry.py`` reads them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from _sdk_server import FakeServer, http_module
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from veridic import (
    AnthropicMessages,
    ApprovalPolicy,
    Composer,
    ModelGateway,
    OpenAIChat,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    aexecute,
    execute,
    instruction,
)
from veridic.run.telemetry import instrumented

SYSTEM = instruction("You report the weather.")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with instrumented(provider):
        yield exporter


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def weather_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        return f"Sunny in {city}"

    return registry.view()


def prompt_of(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section()).user("Weather in Oslo?")


# --- a call an interrupt stops ------------------------------------------------------------------


def test_an_interrupted_calls_span_carries_its_failed_record(spans: InMemorySpanExporter) -> None:
    """A handler stopped by ``KeyboardInterrupt`` was recorded ``failed``, but the record was
    written inside ``Call.ended``, which raised before the span saw it: the span had only
    ``error.type``, no outcome, approval, risk or hashes, so it matched no audit record."""
    registry = Registry()

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        raise KeyboardInterrupt

    view = registry.view()
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(KeyboardInterrupt):
        execute(
            view,
            "set_units",
            {"unit": "celsius"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=prompt_of(view).build(),
            confirm=lambda request: True,
            call_id="c1",
        )
    (record,) = audit.records("req-1")
    (span,) = spans.get_finished_spans()
    shown = attributes(span)
    assert record.outcome.value == "failed"
    assert shown["veridic.outcome"] == "failed"
    assert shown["veridic.approval"] == record.approval.value == "user_confirmed"
    assert shown["veridic.risk"] == "mid"
    assert shown["veridic.prompt_sha256"] == record.prompt_sha256
    assert shown["error.type"] == "KeyboardInterrupt"
    assert span.status.status_code is StatusCode.ERROR


def test_a_cancelled_async_calls_span_carries_its_failed_record(
    spans: InMemorySpanExporter,
) -> None:
    """The same for ``aexecute`` when the task awaiting it is cancelled mid-handler."""
    registry = Registry()
    started = asyncio.Event()

    @registry.tool(kind="query")
    async def slow_lookup(key: str) -> str:
        """Look a key up in a slow store.

        Args:
            key: The key.
        """
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return key

    view = registry.view()
    audit = SQLiteAuditSink(":memory:")

    async def main() -> None:
        task = asyncio.create_task(
            aexecute(
                view,
                "slow_lookup",
                {"key": "k"},
                policy=ApprovalPolicy(view),
                audit=audit,
                request_id="req-1",
                prompt=prompt_of(view).build(),
            )
        )
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (record,) = audit.records("req-1")
    (span,) = spans.get_finished_spans()
    shown = attributes(span)
    assert record.outcome.value == "failed"
    assert shown["veridic.outcome"] == "failed"
    assert shown["veridic.kind"] == "query"
    assert shown["veridic.tools_sha256"] == record.tools_sha256
    assert shown["error.type"] == "asyncio.exceptions.CancelledError"
    assert span.status.status_code is StatusCode.ERROR


# --- an answer with thousands of calls ---------------------------------------------------------


def test_an_answer_with_thousands_of_calls_gives_a_bounded_span(
    spans: InMemorySpanExporter,
) -> None:
    """``veridic.tool_calls`` held one name per call the model made: an answer of 5000 calls
    (a model looping, or told to by an injection) put 5000 names, each up to 80 characters,
    on one span, past what collectors accept. The list is bounded; the count says how many."""
    view = weather_view()
    calls = [(f"c{i}", "get_weather" if i % 2 else f"tool_{i}", "{}") for i in range(5000)]
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}]), audit=SQLiteAuditSink(":memory:")
    )
    reply = gateway.send(prompt_of(view).build(), view, request_id="req-1")
    assert len(reply.tool_calls) == 5000
    (span,) = spans.get_finished_spans()
    shown = attributes(span)
    names = shown["veridic.tool_calls"]
    assert isinstance(names, tuple)
    # The first, in order; the names the registry does not hold, the model's own, as _OTHER.
    assert list(names) == [
        name if name == "get_weather" else "_OTHER" for _, name, _ in calls[: len(names)]
    ]
    assert len(names) == 64
    assert shown["veridic.tool_call_count"] == 5000


def test_an_answer_with_a_few_calls_lists_them_all(spans: InMemorySpanExporter) -> None:
    view = weather_view()
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": [("c1", "get_weather", "{}")]}, {"text": "Hi."}]),
        audit=SQLiteAuditSink(":memory:"),
    )
    gateway.send(prompt_of(view).build(), view, request_id="req-1")
    gateway.send(prompt_of(view).build(), view, request_id="req-2")
    called, answered = spans.get_finished_spans()
    assert attributes(called)["veridic.tool_calls"] == ("get_weather",)
    assert attributes(called)["veridic.tool_call_count"] == 1
    assert attributes(answered)["veridic.tool_calls"] == ()
    assert attributes(answered)["veridic.tool_call_count"] == 0


# --- the server a model call went to -----------------------------------------------------------

CHAT_COMPLETION = {
    "id": "chatcmpl-7",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Sunny."},
        }
    ],
    "usage": {"prompt_tokens": 31, "completion_tokens": 2, "total_tokens": 33},
}

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "Sunny."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 2},
}


def openai_client(server: FakeServer, base_url: str | None) -> Any:
    http = server.http
    client = http.Client(transport=http.MockTransport(server.handle))
    return openai.OpenAI(api_key="test-key", base_url=base_url, http_client=client)


@pytest.mark.parametrize(
    ("base_url", "address", "port"),
    [
        (None, "api.openai.com", 443),
        ("https://llm.internal.example:8443/v1", "llm.internal.example", 8443),
        ("http://localhost/v1", "localhost", 80),
        ("http://[::1]:8000/v1", "::1", 8000),
    ],
)
def test_a_chat_span_names_the_server_it_called(
    spans: InMemorySpanExporter, base_url: str | None, address: str, port: int
) -> None:
    """The chat span (kind ``CLIENT``) had no ``server.address``/``server.port``, which the
    conventions recommend: a trace could not tell a call to the provider from one to a
    self-hosted endpoint or a proxy."""
    server = FakeServer(http_module("openai"), [("json", CHAT_COMPLETION)])
    adapter = OpenAIChat(openai_client(server, base_url), model="gpt-test")
    view = weather_view()
    ModelGateway(adapter, audit=SQLiteAuditSink(":memory:")).send(
        prompt_of(view).build(), view, request_id="req-1"
    )
    (span,) = spans.get_finished_spans()
    assert attributes(span)["server.address"] == address
    assert attributes(span)["server.port"] == port


def test_a_chat_span_never_shows_credentials_of_the_base_url(
    spans: InMemorySpanExporter,
) -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_COMPLETION)])
    base_url = "https://svc:hunter2@gateway.example/v1?key=k-secret"
    adapter = OpenAIChat(openai_client(server, base_url), model="gpt-test")
    view = weather_view()
    ModelGateway(adapter, audit=SQLiteAuditSink(":memory:")).send(
        prompt_of(view).build(), view, request_id="req-1"
    )
    (span,) = spans.get_finished_spans()
    assert attributes(span)["server.address"] == "gateway.example"
    assert attributes(span)["server.port"] == 443
    shown = repr(attributes(span))
    assert "hunter2" not in shown
    assert "k-secret" not in shown
    assert "svc" not in shown


def test_an_anthropic_chat_span_names_the_server(spans: InMemorySpanExporter) -> None:
    server = FakeServer(http_module("anthropic"), [("json", MESSAGE)])
    client = server.client(anthropic, "Anthropic")
    adapter = AnthropicMessages(client, model="claude-test", max_tokens=256)
    view = weather_view()
    ModelGateway(adapter, audit=SQLiteAuditSink(":memory:")).send(
        prompt_of(view).build(), view, request_id="req-1"
    )
    (span,) = spans.get_finished_spans()
    assert attributes(span)["server.address"] == "api.anthropic.com"
    assert attributes(span)["server.port"] == 443


def test_a_client_without_a_base_url_names_no_server(spans: InMemorySpanExporter) -> None:
    """``ScriptedProvider`` (and an application's own adapter) has no HTTP client: no
    ``server.address``, and nothing fails."""
    view = weather_view()
    ModelGateway(ScriptedProvider([{"text": "Hi."}]), audit=SQLiteAuditSink(":memory:")).send(
        prompt_of(view).build(), view, request_id="req-1"
    )
    (span,) = spans.get_finished_spans()
    assert "server.address" not in attributes(span)
    assert "server.port" not in attributes(span)


def test_a_client_whose_base_url_raises_names_no_server_and_the_call_goes_on(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    class Odd:
        @property
        def base_url(self) -> str:
            raise RuntimeError("not configured")

    provider = ScriptedProvider([{"text": "Hi."}])
    provider.client = Odd()  # an application's client, read only for its base URL
    view = weather_view()
    with caplog.at_level(logging.WARNING, logger="veridic.telemetry"):
        reply = ModelGateway(provider, audit=SQLiteAuditSink(":memory:")).send(
            prompt_of(view).build(), view, request_id="req-1"
        )
    assert reply.text == "Hi."
    (span,) = spans.get_finished_spans()
    assert "server.address" not in attributes(span)
    (logged,) = [r for r in caplog.records if r.name == "veridic.telemetry"]
    assert "RuntimeError" in logged.getMessage()
    assert "not configured" not in logged.getMessage()  # a message may quote a secret
