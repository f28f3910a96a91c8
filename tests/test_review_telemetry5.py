"""Traces, attacked again: what a span says of an effect, an error's class and content.

Reproducers of the fifth attacker review of :mod:`veridic.run.telemetry`, each through
the public API with the SDK's in-memory exporter, as ``tests/test_telemetry.py`` reads
them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    aexecute,
    execute,
    instruction,
)
from veridic.run.telemetry import instrumented
from veridic.testing import adversarial_text

SYSTEM = instruction("You report the weather.")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with instrumented(provider):
        yield exporter


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


# --- an effect that happened after the call ended ---------------------------------------------


def test_a_delegated_effect_that_finished_after_the_call_is_not_traced_as_refused(
    spans: InMemorySpanExporter,
) -> None:
    """The handler of ``close_account`` left a ``shred`` (irreversible) running; it finished
    after the call ended, and the audit store holds a follow-up record saying the shred
    happened. The trace said the opposite: a ``guard_refused close_account`` span, an
    error of type ``GuardDeniedError``, so an operator reading it would not look for the
    records the shred destroyed."""
    registry = Registry("vault")
    left: list[asyncio.Task[object]] = []

    @registry.tool(kind="write", irreversible=True)
    async def shred(account: str) -> str:
        """Shred an account's records; a shredded record cannot be restored.

        Args:
            account: The account.
        """
        await asyncio.sleep(0.01)
        return "shredded"

    @registry.tool(kind="write", risk="high")
    async def close_account(account: str) -> str:
        """Close an account; each call is confirmed by the user.

        Args:
            account: The account.
        """
        left.append(asyncio.create_task(view.adispatch("shred", {"account": account})))
        await asyncio.sleep(0)  # the shred is dispatched while the call runs
        return "closing"

    view = registry.view()
    audit = SQLiteAuditSink()

    async def main() -> None:
        result = await aexecute(
            view,
            "close_account",
            {"account": "acme"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="r",
            prompt_sha256="0" * 64,
            confirm=lambda request: True,
        )
        assert result.ok
        await asyncio.gather(*left)

    asyncio.run(main())
    _, follow_up = audit.records("r")
    assert follow_up.irreversible  # the record says the shred happened

    assert by_name(spans, "guard_refused close_account") == []
    (call,) = by_name(spans, "execute_tool close_account")
    (late,) = by_name(spans, "late_effect close_account")
    assert late.parent is not None
    assert late.parent.span_id == span_id(call)  # under the call that left the work behind
    assert late.status.status_code is StatusCode.UNSET  # it was allowed: not an error
    shown = attributes(late)
    assert "error.type" not in shown
    assert shown["veridic.irreversible"] is True
    assert shown["veridic.follow_up"] is True
    assert shown["veridic.request_id"] == "r"
    assert "gen_ai.operation.name" not in shown  # not a second call of the tool


# --- an error's class named by outside text ---------------------------------------------------


def test_an_exception_class_named_by_outside_text_reaches_error_type_escaped(
    spans: InMemorySpanExporter,
) -> None:
    """A task queue's client (Celery's ``create_exception_cls``) or an RPC library makes the
    class of a remote error from the name the remote end sent. ``error.type`` held that
    name as it was: a terminal escape, a newline and a forged ``##[error]`` line reached
    every log exporter and CI annotation that prints the attribute, and a lone surrogate
    an exporter cannot encode."""
    registry = Registry()
    remote = type("RemoteError", (Exception,), {})
    remote.__qualname__ = "Boom\x1b[2J\n##[error]deploy approved\ud800" + "X" * 5000
    remote.__module__ = "celery.backends.base"

    @registry.tool(kind="query")
    def fetch_report(key: str) -> str:
        """Fetch a report a worker built.

        Args:
            key: The report's key.
        """
        raise remote("the worker's message")

    view = registry.view()
    result = execute(
        view,
        "fetch_report",
        {"key": "k"},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(),
        request_id="r",
        prompt_sha256="0" * 64,
    )
    assert not result.ok
    (span,) = by_name(spans, "execute_tool fetch_report")
    assert span.status.status_code is StatusCode.ERROR
    kind = attributes(span)["error.type"]
    assert isinstance(kind, str)
    assert kind.isprintable()
    assert len(kind) <= 256
    assert "Boom" in kind  # still recognisable
    assert span.status.description is not None
    assert span.status.description.isprintable()


def test_a_plain_exception_class_is_error_type_as_it_is(spans: InMemorySpanExporter) -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def parse(text: str) -> str:
        """Parse a number.

        Args:
            text: The number, as text.
        """
        return str(int(text))

    view = registry.view()
    execute(
        view,
        "parse",
        {"text": "x"},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(),
        request_id="r",
        prompt_sha256="0" * 64,
    )
    (span,) = by_name(spans, "execute_tool parse")
    assert attributes(span)["error.type"] == "ValueError"


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(qualname=adversarial_text(), module=adversarial_text())
def test_error_type_is_printable_and_bounded_for_every_class_name(
    spans: InMemorySpanExporter, qualname: str, module: str
) -> None:
    spans.clear()
    registry = Registry()
    remote = type("RemoteError", (Exception,), {})
    remote.__qualname__ = qualname
    remote.__module__ = module

    @registry.tool(kind="query")
    def fetch_report(key: str) -> str:
        """Fetch a report a worker built.

        Args:
            key: The report's key.
        """
        raise remote

    view = registry.view()
    execute(
        view,
        "fetch_report",
        {"key": "k"},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(),
        request_id="r",
        prompt_sha256="0" * 64,
    )
    (span,) = by_name(spans, "execute_tool fetch_report")
    kind = attributes(span)["error.type"]
    assert isinstance(kind, str)
    assert kind.isprintable()
    assert 0 < len(kind) <= 256
    assert kind == kind.strip()


# --- content capture asked for by the environment ---------------------------------------------


@pytest.mark.parametrize("asked", ["true", "SPAN_ONLY", "span_and_event", "EVENT_ONLY"])
def test_content_capture_asked_by_the_environment_is_not_ignored_silently(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, asked: str
) -> None:
    """An operator who set ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (the
    switch of the OpenTelemetry GenAI instrumentations) expects the prompts in the trace;
    veridic's spans never hold them, and nothing said so: the operator looked for content
    that was never going to come, or believed a trace without it was complete."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", asked)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gateway = ModelGateway(ScriptedProvider([{"text": "Sunny in Oslo."}]), audit=SQLiteAuditSink())
    with caplog.at_level(logging.WARNING, logger="veridic.telemetry"), instrumented(provider):
        gateway.send(
            Composer().system(SYSTEM).user("Weather in Oslo?").build(),
            Registry().view(),
            request_id="r",
        )
    (warning,) = [r for r in caplog.records if r.name == "veridic.telemetry"]
    message = warning.getMessage()
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in message
    assert "audit" in message  # where to look instead
    exported = "\n".join(span.to_json() for span in exporter.get_finished_spans())
    assert "Weather in Oslo" not in exported
    assert "Sunny in Oslo" not in exported


@pytest.mark.parametrize("asked", ["", "false", "NO_CONTENT", "no_content"])
def test_content_capture_left_off_says_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, asked: str
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", asked)
    with (
        caplog.at_level(logging.WARNING, logger="veridic.telemetry"),
        instrumented(TracerProvider()),
    ):
        pass
    assert [r for r in caplog.records if r.name == "veridic.telemetry"] == []


# --- a tracer whose spans are not spans -------------------------------------------------------


class _NotASpanTracer(trace.NoOpTracer):
    """A tracer with a bug: what it starts is not a span (a vendor's wrapper gone wrong)."""

    def start_span(self, *args: object, **kwargs: object) -> trace.Span:
        return cast(trace.Span, object())


class _NotASpanProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args: object, **kwargs: object) -> trace.Tracer:
        return _NotASpanTracer()


def test_a_tracer_whose_span_cannot_end_does_not_fail_a_write_that_ran(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The span could not even be ended: the AttributeError left ``execute`` after the
    write ran and was recorded ``ok``, so its caller saw a failure and might run it
    again."""
    registry = Registry()
    ran: list[str] = []

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        ran.append(unit)
        return unit

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("set_units")
    audit = SQLiteAuditSink()
    logged = caplog.at_level(logging.WARNING, logger="veridic.telemetry")
    with logged, instrumented(_NotASpanProvider()):
        result = execute(
            view,
            "set_units",
            {"unit": "celsius"},
            policy=policy,
            audit=audit,
            request_id="r",
            prompt_sha256="0" * 64,
        )
    assert result.ok
    assert ran == ["celsius"]
    assert [record.outcome.value for record in audit.records("r")] == ["ok"]
    assert any("execute_tool set_units" in r.getMessage() for r in caplog.records)


# --- second read: what the first review's fixes left open -------------------------------------


class _NotText:
    """A class's ``__module__`` that is not text, whose comparison and formatting fail: a
    class made at run time may carry any object there."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("compared")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("formatted")

    __hash__ = object.__hash__


class _Trapped(str):
    """A class name that is text, whose own methods fail when veridic reads it."""

    def isprintable(self) -> bool:
        raise RuntimeError("read")

    def __len__(self) -> int:
        raise RuntimeError("measured")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("formatted")


def _fails_with(kind: type[Exception]) -> tuple[object, Registry]:
    """Run a query whose handler raises ``kind``, and return its result."""
    registry = Registry()

    @registry.tool(kind="query")
    def fetch_report(key: str) -> str:
        """Fetch a report a worker built.

        Args:
            key: The report's key.
        """
        raise kind("the worker's message")

    view = registry.view()
    result = execute(
        view,
        "fetch_report",
        {"key": "k"},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(),
        request_id="r",
        prompt_sha256="0" * 64,
    )
    return result, registry


def test_a_class_whose_module_is_not_text_does_not_fail_the_traced_call(
    spans: InMemorySpanExporter,
) -> None:
    """``error_type`` compared and formatted the class's ``__module__`` as it found it: a
    module that is not text and fails when compared made ``execute`` raise that failure
    once telemetry was on, where the untraced call returned its result."""
    remote = type("RemoteError", (Exception,), {})
    remote.__module__ = cast(str, _NotText())

    result, _ = _fails_with(remote)

    (span,) = by_name(spans, "execute_tool fetch_report")
    assert attributes(span)["error.type"] == "RemoteError"
    assert span.status.status_code is StatusCode.ERROR
    assert result is not None


def test_a_class_name_whose_own_methods_fail_does_not_fail_the_traced_call(
    spans: InMemorySpanExporter,
) -> None:
    """A class's ``__qualname__`` may be a ``str`` subclass; ``error_type`` ran its methods
    (``len``, ``isprintable``) and their failure left ``execute``."""
    remote = type("RemoteError", (Exception,), {})
    remote.__qualname__ = _Trapped("Remote\nError")
    remote.__module__ = "builtins"

    _fails_with(remote)

    (span,) = by_name(spans, "execute_tool fetch_report")
    assert attributes(span)["error.type"] == "'Remote\\nError'"


def test_a_handler_failure_whose_class_is_named_by_outside_text_is_logged_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The executor logs a handler's failure whole, and wrote the class's ``__name__`` as
    it was: a class named by what a remote end sent (a task queue's client, an RPC
    library) forged a ``##[error]`` line and a terminal escape in the application's log,
    around the one line meant to hold the message."""
    remote = type("RemoteError", (Exception,), {})
    remote.__name__ = "Boom\x1b[2J\n##[error]deploy approved"

    with caplog.at_level(logging.WARNING, logger="veridic.executor"):
        _fails_with(remote)

    (logged,) = [r for r in caplog.records if r.name == "veridic.executor"]
    message = logged.getMessage()
    assert "\x1b" not in message
    assert "##[error]" not in message  # a CI runner obeys it anywhere in a line
    assert "'Boom\\x1b[2J\\n##\u27e6U+005B\u27e7error]deploy approved'" in message  # recognisable


def test_a_handler_failure_of_a_plain_class_is_logged_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="veridic.executor"):
        _fails_with(LookupError)

    (logged,) = [r for r in caplog.records if r.name == "veridic.executor"]
    assert "the model was told only LookupError: LookupError: " in logged.getMessage()


@pytest.mark.parametrize("asked", ["0", "off", "no", "disabled", "True-ish"])
def test_content_capture_values_the_instrumentations_read_as_off_say_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, asked: str
) -> None:
    """The GenAI instrumentations capture content for ``true`` and ``SPAN_ONLY``,
    ``EVENT_ONLY``, ``SPAN_AND_EVENT`` alone (any case); every other value leaves it off.
    veridic warned for every value but ``false`` and ``NO_CONTENT``, saying the operator
    asked for content they had turned off."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", asked)
    with (
        caplog.at_level(logging.WARNING, logger="veridic.telemetry"),
        instrumented(TracerProvider()),
    ):
        pass
    assert [r for r in caplog.records if r.name == "veridic.telemetry"] == []
