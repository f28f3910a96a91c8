"""Traces, a third look: an interrupted call's span says what its record says, an answer's span
holds a bounded list, and a model call's span names the server it went to.

Reproducers of a third review of :mod:`veridic.run.telemetry`, each through the public API
with the SDK's in-memory exporter (real SDKs over a mock transport where a client is read),
as ``tests/test_telemetry.py`` reads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from veridic import (
    ApprovalPolicy,
    Composer,
    Registry,
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
