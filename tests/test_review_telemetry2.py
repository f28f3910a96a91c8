"""Traces, attacked again: spans must never change what a call does, nor take the model's words
for their names, and a paused run's trace must find its resume.

Reproducers of a second attacker review of :mod:`veridic.run.telemetry`, each through the
public API with the SDK's in-memory exporter, as ``tests/test_telemetry.py`` reads them.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from veridic import (
    ApprovalPolicy,
    Composer,
    GuardDeniedError,
    ModelGateway,
    PausedRun,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    aexecute,
    execute,
    guard_irreversible,
    instruction,
)
from veridic.run.telemetry import instrumented

SYSTEM = instruction("You report the weather.")


def make_view() -> tuple[ToolView, list[str]]:
    """A view of three tools (one withheld: only for admins), and the list each handler appends
    to when it runs."""
    registry = Registry()
    ran: list[str] = []

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        ran.append(f"get_weather {city}")
        return f"Sunny in {city}"

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        ran.append(f"set_units {unit}")
        return unit

    @registry.tool(kind="query", roles={"admin"})
    def export_customers(limit: int) -> str:
        """Export the customer table.

        Args:
            limit: How many rows at most.
        """
        ran.append("export_customers")
        return "rows"

    return registry.view(), ran


ANSWER = {"text": "It is sunny in Oslo.", "usage": {"input_tokens": 150, "output_tokens": 9}}
WEATHER = {"tool_calls": [("c1", "get_weather", '{"city": "Oslo"}')]}


def composer(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section()).user("Weather in Oslo?")


def exporting() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider, exporter = exporting()
    with instrumented(provider):
        yield exporter


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def gateway(
    script: Sequence[Mapping[str, object]], audit: SQLiteAuditSink, *, asynchronous: bool = False
) -> ModelGateway:
    return ModelGateway(ScriptedProvider(script, asynchronous=asynchronous), audit=audit)


# --- a tracer that raises -----------------------------------------------------------------------


class Broken(SpanProcessor):
    """A span processor with a bug (an exporter gone, a full queue that raises)."""

    def __init__(self, when: str) -> None:
        self.when = when
        self.calls = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.when == "start":
            self.calls += 1
            raise RuntimeError("span processor failed on start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.when == "end":
            self.calls += 1
            raise RuntimeError("span processor failed on end")


@pytest.fixture(params=["start", "end"])
def broken(request: pytest.FixtureRequest) -> Iterator[Broken]:
    processor = Broken(str(request.param))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with instrumented(provider):
        yield processor


def test_a_span_processor_that_raises_does_not_fail_a_write_that_ran(
    broken: Broken, caplog: pytest.LogCaptureFixture
) -> None:
    """The span's end raised out of ``execute`` after the write ran and was recorded ``ok``:
    the caller saw an exception for a call that happened, and a retry wrote twice (with a
    raising ``on_start``, nothing ran at all: tracing took the application down)."""
    view, ran = make_view()
    audit = SQLiteAuditSink(":memory:")
    with caplog.at_level(logging.WARNING, logger="veridic.telemetry"):
        result = execute(
            view,
            "set_units",
            {"unit": "celsius"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=composer(view).build(),
            confirm=lambda request: True,
        )
    assert result.ok
    assert ran == ["set_units celsius"]
    assert [record.outcome.value for record in audit.records("req-1")] == ["ok"]
    assert broken.calls == 1
    (logged,) = [r for r in caplog.records if r.name == "veridic.telemetry"]
    assert logged.levelno == logging.WARNING
    assert "execute_tool set_units" in logged.getMessage()
    assert "RuntimeError" in logged.getMessage()


def test_a_span_processor_that_raises_does_not_stop_a_run(
    broken: Broken, caplog: pytest.LogCaptureFixture
) -> None:
    view, ran = make_view()
    audit = SQLiteAuditSink(":memory:")
    with caplog.at_level(logging.WARNING, logger="veridic.telemetry"):
        result = gateway([WEATHER, ANSWER], audit).run(
            composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
        )
    assert result.reply.text == "It is sunny in Oslo."
    assert ran == ["get_weather Oslo"]
    assert broken.calls == 4  # invoke_agent, two chats, one tool call: each failed once
    assert len([r for r in caplog.records if r.name == "veridic.telemetry"]) == 4


def test_a_span_processor_that_raises_does_not_break_a_stream(broken: Broken) -> None:
    view, _ = make_view()
    stream = gateway([{"text": "It is sunny"}], SQLiteAuditSink(":memory:")).stream(
        composer(view).build(), view, request_id="req-1"
    )
    with stream:
        assert "".join(stream).strip() == "It is sunny"
    assert stream.reply.text.strip() == "It is sunny"


def test_a_span_processor_that_raises_does_not_fail_an_async_run(broken: Broken) -> None:
    view, ran = make_view()
    audit = SQLiteAuditSink(":memory:")

    async def both() -> None:
        done = await aexecute(
            view,
            "get_weather",
            {"city": "Bergen"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-0",
            prompt=composer(view).build(),
        )
        assert done.ok
        result = await gateway([WEATHER, ANSWER], audit, asynchronous=True).arun(
            composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
        )
        assert result.reply.text == "It is sunny in Oslo."

    asyncio.run(both())
    assert ran == ["get_weather Bergen", "get_weather Oslo"]


def test_a_span_whose_status_cannot_be_set_still_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure to set a status is logged (once), and the span still ends: a span left open
    holds its processor's memory and never reaches the exporter."""

    class RefusesStatus(SpanProcessor):
        def on_start(self, span: Span, parent_context: Context | None = None) -> None:
            def set_status(*args: object, **kwargs: object) -> None:
                raise ValueError("status refused")

            span.set_status = set_status  # a buggy processor

    provider, exporter = exporting()
    provider.add_span_processor(RefusesStatus())
    view, _ = make_view()
    with instrumented(provider), caplog.at_level(logging.WARNING, logger="veridic.telemetry"):
        result = execute(
            view,
            "get_wether",
            {},
            policy=ApprovalPolicy(view),
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-1",
            prompt=composer(view).build(),
        )
    assert result.outcome.value == "refused"
    (span,) = exporter.get_finished_spans()  # ended, though its status could not be set
    assert attributes(span)["error.type"] == "veridic.errors.UnknownToolError"
    assert len([r for r in caplog.records if r.name == "veridic.telemetry"]) == 1


class RefusesLateSpans(SpanProcessor):
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if span.name.startswith("guard_refused"):
            raise RuntimeError("span processor failed on start")


def test_a_span_processor_that_raises_does_not_lose_a_late_guards_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A guard refusing work a call left behind writes a follow-up ``BLOCKED`` record, and
    its span was made while that record was built: the tracer's error replaced the record,
    and the refused attempt was missing from the audit store."""
    provider = TracerProvider()
    provider.add_span_processor(RefusesLateSpans())
    registry = Registry()
    workers: list[threading.Thread] = []
    refused: list[BaseException] = []

    @registry.tool(kind="write", risk="high", irreversible=True)
    def purge(key: str) -> str:
        """Purge a key for good.

        Args:
            key: The key.
        """

        def later() -> None:
            try:
                guard_irreversible("hard delete " + key)
            except Exception as error:  # what the thread sees
                refused.append(error)

        worker = threading.Thread(target=contextvars.copy_context().run, args=(later,))
        workers.append(worker)
        return "queued"  # the thread starts once the call has ended

    view = registry.view()
    audit = SQLiteAuditSink(":memory:")
    with instrumented(provider), caplog.at_level(logging.WARNING, logger="veridic.telemetry"):
        result = execute(
            view,
            "purge",
            {"key": "k"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=Composer().system(SYSTEM).build(),
            confirm=lambda request: True,
        )
        (worker,) = workers
        worker.start()
        worker.join()
    assert result.ok
    assert [type(error) for error in refused] == [GuardDeniedError]
    assert [record.outcome.value for record in audit.records("req-1")] == ["ok", "blocked"]
    (logged,) = [r for r in caplog.records if r.name == "veridic.telemetry"]
    assert "guard_refused purge" in logged.getMessage()


# --- the call id of an adapter's call ------------------------------------------------------------


def test_a_call_id_given_to_execute_reaches_the_tool_span(spans: InMemorySpanExporter) -> None:
    """The framework adapters (pydantic-ai, the Agents SDK, LangChain, the MCP server) give
    the model's call id to ``execute(call_id=...)``, and the audit record kept it, but the
    span took it only from the gateway: their spans had no ``gen_ai.tool.call.id``, and a
    span could not be matched to the model's call."""
    view, _ = make_view()
    odd = "call\x1b[2J" + "X" * 300
    for call_id in ("call-7", odd, ""):
        execute(
            view,
            "get_weather",
            {"city": "Oslo"},
            policy=ApprovalPolicy(view),
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-1",
            prompt=composer(view).build(),
            call_id=call_id,
        )
    plain, escaped, none = spans.get_finished_spans()
    assert attributes(plain)["gen_ai.tool.call.id"] == "call-7"
    shown = attributes(escaped)["gen_ai.tool.call.id"]
    assert isinstance(shown, str)
    assert shown.isprintable()
    assert len(shown) < 100
    assert "gen_ai.tool.call.id" not in attributes(none)  # no model call: no call id


def test_a_pydantic_ai_agents_tool_span_has_the_models_call_id(
    spans: InMemorySpanExporter,
) -> None:
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from veridic.integrations.pydantic_ai import capability

    answers: list[ModelResponse] = [
        ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="c-41")]),
        ModelResponse(parts=[TextPart("Sunny.")]),
    ]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return answers.pop(0)

    view, ran = make_view()
    audit = SQLiteAuditSink(":memory:")
    veridic = capability(
        view, policy=ApprovalPolicy(view), audit=audit, request_id="req-1", instructions=SYSTEM
    )
    result = pydantic_ai.Agent(FunctionModel(model)).run_sync("Weather?", capabilities=[veridic])
    assert result.output == "Sunny."
    assert ran == ["get_weather Oslo"]
    (record,) = audit.records("req-1")
    (span,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool get_weather"]
    assert attributes(span)["gen_ai.tool.call.id"] == record.call_id == "c-41"


# --- the model's words do not name spans ------------------------------------------------------

INVENTED = st.from_regex(r"[A-Za-z][A-Za-z0-9_.:\-]{0,40}", fullmatch=True)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(INVENTED, min_size=1, max_size=4))
def test_tool_names_the_model_invents_never_name_a_span(
    spans: InMemorySpanExporter, names: list[str]
) -> None:
    """A name the model wrote (a prompt injection can make it write any, a key from the
    context included) became the span's name when it looked plain: one span name per
    invented name, which trace backends index and count (a metric series each), and a
    secret in the one field every viewer shows."""
    view, _ = make_view()
    spans.clear()
    calls = [(f"c{i}", name, "{}") for i, name in enumerate(names)]
    audit = SQLiteAuditSink(":memory:")
    gateway([{"tool_calls": calls}, ANSWER], audit).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
    )
    tools = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert len(tools) == len(names) == len(audit.records("req-1"))
    registered = view.names() | {status.name for status in view.withheld()}
    for span, name in zip(tools, names, strict=True):
        assert span.name == (f"execute_tool {name}" if name in registered else "execute_tool")
        # The registry's name, or _OTHER for the model's own (tests/test_review_telemetry4.py).
        assert attributes(span)["gen_ai.tool.name"] == (name if name in registered else "_OTHER")


def test_a_registered_tool_the_view_withholds_keeps_its_span_name(
    spans: InMemorySpanExporter,
) -> None:
    view, ran = make_view()
    execute(
        view,
        "export_customers",
        {"limit": 1},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=composer(view).build(),
    )
    (span,) = spans.get_finished_spans()
    assert span.name == "execute_tool export_customers"  # the registry's name, not the model's
    assert span.status.status_code is StatusCode.ERROR
    assert ran == []


# --- a paused run and its resume, one conversation ----------------------------------------------


def test_a_paused_run_and_its_resume_share_a_conversation_id(spans: InMemorySpanExporter) -> None:
    """The paused run's span and its resume's (often another process, from a stored
    ``PausedRun``) had nothing a trace viewer groups by: two unrelated traces. Both now carry
    ``gen_ai.conversation.id``, the request id under which the audit store keeps the run."""
    view, _ = make_view()
    audit = SQLiteAuditSink(":memory:")
    script: list[Mapping[str, object]] = [
        {"tool_calls": [("c1", "get_weather", '{"city": "Oslo"}')]},
        {"tool_calls": [("c2", "set_units", '{"unit": "celsius"}')]},
        ANSWER,
    ]
    first = gateway(script, audit)
    paused = first.run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
    ).paused
    assert paused is not None
    stored = PausedRun.from_json(paused.to_json())  # as another process reads it
    resumed = Composer().system(SYSTEM, view.capability_section())
    first.resume(stored, resumed, view, policy=ApprovalPolicy(view), answers={"c2": True})
    gateway([ANSWER], audit).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-2"
    )

    finished = spans.get_finished_spans()
    assert [s.name for s in finished if s.name == "invoke_agent"] == ["invoke_agent"] * 3
    by_conversation: dict[object, list[str]] = {}
    for span in finished:
        if span.name in ("invoke_agent", "chat scripted"):
            conversation = attributes(span)["gen_ai.conversation.id"]
            by_conversation.setdefault(conversation, []).append(span.name)
    paused_part = ["chat scripted", "chat scripted", "invoke_agent"]
    assert by_conversation == {
        "req-1": [*paused_part, "chat scripted", "invoke_agent"],  # and its resume
        "req-2": ["chat scripted", "invoke_agent"],
    }


def test_a_conversation_id_from_outside_is_escaped_and_clipped(
    spans: InMemorySpanExporter,
) -> None:
    view, _ = make_view()
    forged = "req-1\x1b[2J\u202e" + "X" * 4000
    gateway([ANSWER], SQLiteAuditSink(":memory:")).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id=forged
    )
    for span in spans.get_finished_spans():
        shown = attributes(span)["gen_ai.conversation.id"]
        assert shown == attributes(span)["veridic.request_id"]
        assert isinstance(shown, str)
        assert shown.isprintable()
        assert len(shown) <= 256
