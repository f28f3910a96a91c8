"""Traces, attacked: what a span claims must be true of the work under it, and hold no more.

Reproducers of an attacker review of :mod:`veridic.run.telemetry` (the spans
of the gateway, the executor and the streams), each through the public API
with the SDK's in-memory exporter, as ``tests/test_telemetry.py`` reads them.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
from collections.abc import Iterator, Mapping, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from veridic import (
    ApprovalPolicy,
    Composer,
    GuardDeniedError,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    execute,
    guard_irreversible,
    instruction,
)
from veridic.run.telemetry import instrumented, is_instrumented, uninstrument
from veridic.testing import adversarial_text

SYSTEM = instruction("You report the weather.")


def make_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        return f"Sunny in {city}"

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        return unit

    return registry.view()


VIEW = make_view()

ANSWER = {"text": "It is sunny in Oslo.", "usage": {"input_tokens": 150, "output_tokens": 9}}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with instrumented(provider):
        yield exporter


def composer() -> Composer:
    return Composer().system(SYSTEM, VIEW.capability_section()).user("Weather in Oslo?")


def scripted(script: Sequence[Mapping[str, object]], *, asynchronous: bool = False) -> ModelGateway:
    provider = ScriptedProvider(script, asynchronous=asynchronous)
    return ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        span
        for span in exporter.get_finished_spans()
        if span.parent is not None and span.parent.span_id == span_id(parent)
    ]


# --- a resumed run's span counts its own work ----------------------------------------------


def test_a_resumed_runs_span_counts_only_the_model_calls_under_it(
    spans: InMemorySpanExporter,
) -> None:
    """The resumed run's span said 2 turns and 250 input tokens over one chat span of 150:
    summed over a request's agent spans, the paused part counted twice (and a stored
    PausedRun edited to say any usage put it in the resumed span)."""
    paused_turn = {
        "tool_calls": [
            ("c1", "get_weather", '{"city": "Oslo"}'),
            ("c2", "set_units", '{"unit": "celsius"}'),
        ],
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }
    gateway = ModelGateway(ScriptedProvider([paused_turn, ANSWER]), audit=SQLiteAuditSink())
    paused = gateway.run(
        composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1", defer=True
    ).paused
    assert paused is not None
    resumed = Composer().system(SYSTEM, VIEW.capability_section())
    result = gateway.resume(
        paused, resumed, VIEW, policy=ApprovalPolicy(VIEW), answers={"c2": True}
    )
    assert result.turns == 2  # the run's own count goes on from the paused one (its limits)

    first, second = by_name(spans, "invoke_agent")
    for agent in (first, second):
        chats = [span for span in children(spans, agent) if span.name.startswith("chat")]
        shown = attributes(agent)
        assert shown["veridic.turns"] == len(chats)
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
            assert shown[key] == sum(int(str(attributes(chat)[key])) for chat in chats)
    total = sum(int(str(attributes(a)["gen_ai.usage.input_tokens"])) for a in (first, second))
    assert total == 250


def test_a_resume_that_pauses_again_at_once_made_no_model_call(
    spans: InMemorySpanExporter,
) -> None:
    turn = {
        "tool_calls": [("c1", "set_units", '{"unit": "celsius"}')],
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }
    gateway = ModelGateway(ScriptedProvider([turn, ANSWER]), audit=SQLiteAuditSink())
    paused = gateway.run(
        composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1", defer=True
    ).paused
    assert paused is not None
    resumed = Composer().system(SYSTEM, VIEW.capability_section())
    again = gateway.resume(paused, resumed, VIEW, policy=ApprovalPolicy(VIEW), answers={})
    assert again.paused is not None
    second = by_name(spans, "invoke_agent")[1]
    assert attributes(second)["veridic.turns"] == 0
    assert attributes(second).get("gen_ai.usage.input_tokens", 0) == 0


# --- a stream dropped unread ----------------------------------------------------------------


def test_a_stream_dropped_unread_and_unclosed_still_ends_its_span(
    spans: InMemorySpanExporter,
) -> None:
    """A stream left after its first piece (a web client gone, a ``break`` without
    ``with``) never ended its span: the model call was missing from every trace."""
    gateway = scripted([{"text": "It is sunny in Oslo today"}])
    stream = gateway.stream(composer().build(), VIEW, request_id="req-1")
    next(stream)
    del stream
    gc.collect()
    (span,) = by_name(spans, "chat scripted")
    assert attributes(span)["veridic.stream.incomplete"] is True
    assert attributes(span)["veridic.stream.dropped"] is True  # the application's bug to find
    assert span.status.status_code is StatusCode.UNSET


def test_a_stream_closed_early_is_incomplete_not_dropped(spans: InMemorySpanExporter) -> None:
    gateway = scripted([{"text": "It is sunny in Oslo today"}])
    with gateway.stream(composer().build(), VIEW, request_id="req-1") as stream:
        next(stream)
    del stream
    gc.collect()
    (span,) = by_name(spans, "chat scripted")
    assert attributes(span)["veridic.stream.incomplete"] is True
    assert "veridic.stream.dropped" not in attributes(span)


def test_an_async_stream_dropped_unread_still_ends_its_span(
    spans: InMemorySpanExporter,
) -> None:
    gateway = scripted([{"text": "It is sunny in Oslo today"}], asynchronous=True)

    async def read_one() -> None:
        stream = await gateway.astream(composer().build(), VIEW, request_id="req-1")
        await anext(stream)

    asyncio.run(read_one())
    gc.collect()
    (span,) = by_name(spans, "chat scripted")
    assert attributes(span)["veridic.stream.incomplete"] is True


def test_a_stream_read_to_its_end_then_dropped_is_ended_once(
    spans: InMemorySpanExporter,
) -> None:
    gateway = scripted([{"text": "It is sunny"}])
    stream = gateway.stream(composer().build(), VIEW, request_id="req-1")
    assert "".join(stream).strip() == "It is sunny"
    del stream
    gc.collect()
    (span,) = by_name(spans, "chat scripted")
    assert "veridic.stream.incomplete" not in attributes(span)
    assert "veridic.stream.dropped" not in attributes(span)


# --- a guard that refuses after the call ended ----------------------------------------------


def test_a_guard_refused_after_the_call_ended_is_an_error_in_the_trace(
    spans: InMemorySpanExporter,
) -> None:
    """A thread the handler started tried a hard delete after the call returned: the audit
    store holds a follow-up BLOCKED record, while the trace showed one ``ok`` call and no
    error at all."""
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
            except GuardDeniedError as error:
                refused.append(error)

        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(later,))
        workers.append(worker)
        return "queued"  # the thread starts once the call has ended

    view = registry.view()
    audit = SQLiteAuditSink(":memory:")
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
    assert refused
    assert [record.outcome.value for record in audit.records("req-1")] == ["ok", "blocked"]

    (call,) = by_name(spans, "execute_tool purge")
    assert call.status.status_code is StatusCode.UNSET
    (late,) = by_name(spans, "guard_refused purge")
    assert late.parent is not None
    assert late.parent.span_id == span_id(call)  # under the call that left the work behind
    assert late.status.status_code is StatusCode.ERROR
    shown = attributes(late)
    assert shown["error.type"] == "veridic.errors.GuardDeniedError"
    assert shown["veridic.outcome"] == "blocked"
    assert shown["veridic.follow_up"] is True
    assert shown["veridic.request_id"] == "req-1"
    assert "gen_ai.operation.name" not in shown  # not a second call of the tool
    assert "hard delete" not in "\n".join(span.to_json() for span in spans.get_finished_spans())


# --- a request id from outside ----------------------------------------------------------------

FORGED_ID = "req-1\x1b[2J\n\u202etxt.exe <script>alert(1)</script> " + "X" * 4000


def test_a_request_id_from_outside_reaches_every_span_escaped_and_clipped(
    spans: InMemorySpanExporter,
) -> None:
    """Applications take the request id from an HTTP header (``X-Request-Id``); veridic
    keeps any text without NUL as the audit key, and every span held it whole: escape
    sequences, a bidi override and 5,000 characters in each span of the request."""
    gateway = scripted([{"tool_calls": [("c1", "get_weather", '{"city": "Oslo"}')]}, ANSWER])
    gateway.run(composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id=FORGED_ID)
    finished = spans.get_finished_spans()
    assert {span.name for span in finished} == {
        "invoke_agent",
        "chat scripted",
        "execute_tool get_weather",
    }
    for span in finished:
        shown = attributes(span)["veridic.request_id"]
        assert isinstance(shown, str)
        assert shown.isprintable()
        assert len(shown) < 200
        assert shown.startswith("'req-1\\x1b[2J\\n\\u202etxt.exe")


@pytest.mark.parametrize(
    "request_id", ["req-1", "0f8e2c9a-6f1e-4c1b-9a57-2d5c7a1d9e10", "tenant/42 order 7"]
)
def test_a_plain_request_id_reaches_the_spans_as_it_is(
    spans: InMemorySpanExporter, request_id: str
) -> None:
    scripted([ANSWER]).send(composer().build(), VIEW, request_id=request_id)
    (span,) = spans.get_finished_spans()
    assert attributes(span)["veridic.request_id"] == request_id


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: execute() refuses it
        return False
    # execute() refuses a request id longer than 4096 characters, before anything runs.
    return bool(text.strip()) and "\x00" not in text and len(text) <= 4096


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    request_id=st.one_of(adversarial_text(), st.text(min_size=250, max_size=400)).filter(_storable)
)
def test_every_request_id_reaches_a_tool_span_printable_short_and_recognisable(
    spans: InMemorySpanExporter, request_id: str
) -> None:
    spans.clear()
    execute(
        VIEW,
        "get_weather",
        {"city": "Oslo"},
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id=request_id,
        prompt=composer().build(),
    )
    (span,) = spans.get_finished_spans()
    shown = attributes(span)["veridic.request_id"]
    assert isinstance(shown, str)
    assert shown.isprintable()
    assert len(shown) <= 256
    plain = len(request_id) <= 256 and request_id.isprintable() and request_id == request_id.strip()
    assert (shown == request_id) is plain


def test_a_request_id_of_long_escapes_reaches_a_tool_span_at_most_256_characters(
    spans: InMemorySpanExporter,
) -> None:
    # Each tag character is escaped as ten characters: clipped at 60 characters, the id
    # took 600 (a case the property above finds only now and then).
    request_id = "req-" + "\U000e0001" * 100
    spans.clear()
    execute(
        VIEW,
        "get_weather",
        {"city": "Oslo"},
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id=request_id,
        prompt=composer().build(),
    )
    (span,) = spans.get_finished_spans()
    shown = attributes(span)["veridic.request_id"]
    assert isinstance(shown, str)
    assert shown.isprintable()
    assert len(shown) <= 256
    assert shown.startswith("'req-\\U000e0001")


# --- the switch, under overlapping blocks -----------------------------------------------------


def test_overlapping_instrumented_blocks_leave_the_switch_as_it_was() -> None:
    """Two tasks (or threads) each in ``with instrumented(...)``, ended in the order they
    started: the second block restored the first one's provider, so spans went on into a
    finished test's exporter for the rest of the process."""
    assert not is_instrumented()
    first, second = InMemorySpanExporter(), InMemorySpanExporter()

    def provider(exporter: InMemorySpanExporter) -> TracerProvider:
        tracing = TracerProvider()
        tracing.add_span_processor(SimpleSpanProcessor(exporter))
        return tracing

    async def block(exporter: InMemorySpanExporter, hold: asyncio.Event) -> None:
        with instrumented(provider(exporter)):
            await hold.wait()

    async def overlapping() -> None:
        a_done, b_done = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(block(first, a_done))
        await asyncio.sleep(0)
        b = asyncio.create_task(block(second, b_done))
        await asyncio.sleep(0)
        a_done.set()
        await a
        assert is_instrumented()  # the second block is still open
        b_done.set()
        await b

    try:
        asyncio.run(overlapping())
        assert not is_instrumented()
        scripted([ANSWER]).send(composer().build(), VIEW, request_id="req-after")
        assert first.get_finished_spans() == ()
        assert second.get_finished_spans() == ()
    finally:
        uninstrument()
