"""OpenTelemetry spans: names, attributes, nesting, durations and errors, read with the SDK.

Every test goes through the public API (the gateway, ``execute``) with the
SDK's in-memory exporter behind a ``SimpleSpanProcessor``, so a span is
exported the moment it ends.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import pytest
from _sdk_server import FakeServer, http_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    OpenAIChat,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolError,
    ToolView,
    VeridicError,
    aexecute,
    execute,
    instruction,
)
from veridic.run.telemetry import instrument, instrumented, is_instrumented, uninstrument

SYSTEM = instruction("You report the weather.")
SECRET = "s3cr3t-token"


def make_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        time.sleep(0.01)
        return f"Sunny in {city}"

    @registry.tool(kind="query")
    async def get_forecast(city: str) -> str:
        """Tomorrow's weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        await asyncio.sleep(0.01)
        return f"Rain in {city}"

    @registry.tool(kind="query")
    def get_pressure(city: str) -> str:
        """Air pressure in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        raise ValueError(f"the backend said {SECRET}")

    @registry.tool(kind="write")
    def set_units(unit: str) -> str:
        """Set the units the user sees.

        Args:
            unit: "celsius" or "fahrenheit".
        """
        return unit

    return registry.view()


VIEW = make_view()


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


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = by_name(exporter, name)
    assert len(found) == 1, [span.name for span in exporter.get_finished_spans()]
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None
    assert span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def text_of(exporter: InMemorySpanExporter) -> str:
    """Everything the spans would export, as text: where a leak would show."""
    return "\n".join(span.to_json() for span in exporter.get_finished_spans())


WEATHER = {
    "tool_calls": [("call-1", "get_weather", '{"city": "Oslo"}')],
    "usage": {"input_tokens": 120, "output_tokens": 7},
}
ANSWER = {"text": "It is sunny in Oslo.", "usage": {"input_tokens": 150, "output_tokens": 9}}


def test_a_run_nests_its_model_calls_and_tool_calls_under_invoke_agent(
    spans: InMemorySpanExporter,
) -> None:
    gateway = scripted([WEATHER, ANSWER])
    result = gateway.run(composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1")

    agent = one(spans, "invoke_agent")
    chats = by_name(spans, "chat scripted")
    tool = one(spans, "execute_tool get_weather")
    assert len(chats) == 2
    assert agent.parent is None
    assert {parent_id(span) for span in [*chats, tool]} == {span_id(agent)}
    assert agent.kind is SpanKind.INTERNAL
    assert tool.kind is SpanKind.INTERNAL
    assert all(chat.kind is SpanKind.CLIENT for chat in chats)

    assert attributes(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.conversation.id": "req-1",
        "veridic.request_id": "req-1",
        "veridic.resumed": False,
        "veridic.turns": 2,
        "veridic.run.tool_calls": 1,
        "veridic.paused": False,
        "gen_ai.usage.input_tokens": 270,
        "gen_ai.usage.output_tokens": 16,
    }
    first = attributes(chats[0])
    record = result.outcomes[0].result.record
    prompt_sha256 = record.prompt_sha256
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "scripted"
    assert first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.response.model"] == "scripted"
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first["gen_ai.usage.input_tokens"] == 120
    assert first["gen_ai.usage.output_tokens"] == 7
    assert first["veridic.prompt_sha256"] == prompt_sha256
    assert first["veridic.tools_sha256"] == record.tools_sha256 == VIEW.tools_sha256()
    assert first["veridic.tool_calls"] == ("get_weather",)
    assert first["veridic.tools"] == tuple(sorted(VIEW.names()))
    kinds = first["veridic.system.kinds"]
    origins = first["veridic.system.origins"]
    assert isinstance(kinds, tuple)
    assert (kinds[0], kinds[-1]) == ("code", "registry")
    assert isinstance(origins, tuple)
    assert len(origins) == len(kinds)
    assert origins[-1] == "Registry('registry').view()"
    assert attributes(chats[1])["gen_ai.response.finish_reasons"] == ("stop",)

    assert attributes(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call-1",
        "veridic.request_id": "req-1",
        "veridic.approval": "not_required",
        "veridic.outcome": "ok",
        "veridic.kind": "query",
        "veridic.risk": "low",
        "veridic.prompt_sha256": prompt_sha256,
        "veridic.tools_sha256": record.tools_sha256,
        "veridic.wrote_instruction_fields": False,
        "veridic.irreversible": False,
    }
    assert tool.status.status_code is StatusCode.UNSET
    # Real durations: the handler sleeps 10 ms, inside the tool's span, inside the run's.
    assert seconds(tool) >= 0.01
    assert seconds(agent) >= seconds(tool) + sum(seconds(chat) for chat in chats)
    assert all(seconds(chat) > 0 for chat in chats)


def test_no_span_holds_the_prompt_the_arguments_or_the_results(
    spans: InMemorySpanExporter,
) -> None:
    gateway = scripted([WEATHER, ANSWER])
    gateway.run(composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1")
    exported = text_of(spans)
    for content in ("You report the weather", "Weather in Oslo", '"city"', "Sunny in", "sunny"):
        assert content not in exported


def test_a_direct_execute_is_a_root_span_or_a_child_of_the_callers_span(
    spans: InMemorySpanExporter,
) -> None:
    prompt = composer().build()
    policy = ApprovalPolicy(VIEW)
    audit = SQLiteAuditSink(":memory:")
    execute(
        VIEW,
        "get_weather",
        {"city": "Oslo"},
        policy=policy,
        audit=audit,
        request_id="req-1",
        prompt=prompt,
    )
    app_provider = TracerProvider()  # the application's own tracing, into the same exporter
    app_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = trace.get_tracer("the-app", tracer_provider=app_provider)
    with tracer.start_as_current_span("handle request") as outer:
        execute(
            VIEW,
            "get_weather",
            {"city": "Bergen"},
            policy=policy,
            audit=audit,
            request_id="req-2",
            prompt=prompt,
        )
    root, child = by_name(spans, "execute_tool get_weather")
    assert root.parent is None
    assert parent_id(child) == outer.get_span_context().span_id
    assert "gen_ai.tool.call.id" not in attributes(root)  # no model call: no call id


@pytest.mark.parametrize(
    ("name", "arguments", "outcome", "error"),
    [
        ("get_pressure", {"city": "Oslo"}, "failed", "ValueError"),
        ("get_wether", {"city": "Oslo"}, "refused", "veridic.errors.UnknownToolError"),
        ("get_weather", {"town": "Oslo"}, "refused", "veridic.errors.InvalidArgumentsError"),
    ],
)
def test_a_failed_or_refused_call_is_an_error_named_by_its_type_not_its_message(
    spans: InMemorySpanExporter, name: str, arguments: dict[str, str], outcome: str, error: str
) -> None:
    result = execute(
        VIEW,
        name,
        arguments,
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=composer().build(),
    )
    assert result.outcome.value == outcome
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["error.type"] == error
    assert attributes(span)["veridic.outcome"] == outcome
    assert attributes(span)["veridic.approval"] == result.record.approval.value
    assert span.events == ()  # no exception event: its message could hold a secret
    assert SECRET not in text_of(spans)


def test_a_denied_call_is_not_an_error_of_the_system(spans: InMemorySpanExporter) -> None:
    result = execute(
        VIEW,
        "set_units",
        {"unit": "kelvin"},
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=composer().build(),
    )
    assert result.outcome.value == "denied"
    span = one(spans, "execute_tool set_units")
    assert span.status.status_code is StatusCode.UNSET
    assert attributes(span)["veridic.outcome"] == "denied"
    assert attributes(span)["veridic.approval"] == "denied"
    assert attributes(span)["veridic.risk"] == "mid"
    assert attributes(span)["veridic.kind"] == "write"


def test_the_tool_span_covers_the_users_confirmation(spans: InMemorySpanExporter) -> None:
    def confirm(request: object) -> bool:
        time.sleep(0.01)
        return True

    result = execute(
        VIEW,
        "set_units",
        {"unit": "celsius"},
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=composer().build(),
        confirm=confirm,
    )
    span = one(spans, "execute_tool set_units")
    assert result.ok
    assert attributes(span)["veridic.approval"] == "user_confirmed"
    assert seconds(span) >= 0.01


def test_an_odd_tool_name_does_not_become_the_span_name(spans: InMemorySpanExporter) -> None:
    name = 'x" \n' * 1000
    execute(
        VIEW,
        name,
        {},
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=composer().build(),
    )
    (span,) = spans.get_finished_spans()
    assert span.name == "execute_tool"
    assert attributes(span)["gen_ai.tool.name"] == "_OTHER"  # not the model's text


def test_a_model_written_name_or_call_id_reaches_a_span_escaped_and_clipped(
    spans: InMemorySpanExporter,
) -> None:
    """The model writes these: no control character, no markup run and no length of its
    choosing goes into a trace."""
    written = "KEY=sk-live-123 \x1b[2J <script>alert(1)</script> " + "X" * 300
    script: list[Mapping[str, object]] = [
        {"tool_calls": [(f"call-{written}", written, "{}")]},
        ANSWER,
    ]
    scripted(script).run(composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1")
    chat = by_name(spans, "chat scripted")[0]
    # A name the registry does not hold is not shown at all (tests/test_review_telemetry4.py).
    assert attributes(chat)["veridic.tool_calls"] == ("_OTHER",)
    call_id = cast(str, attributes(one(spans, "execute_tool"))["gen_ai.tool.call.id"])
    assert "\x1b" not in call_id
    assert len(call_id) < 100
    assert call_id.endswith(" chars)")
    plain = scripted([WEATHER, ANSWER])
    plain.run(composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-2")
    assert attributes(by_name(spans, "chat scripted")[-2])["veridic.tool_calls"] == ("get_weather",)


# --- a real SDK behind a fake transport ----------------------------------------------------------

openai = pytest.importorskip("openai")

CHAT_COMPLETION = {
    "id": "chatcmpl-7",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-test-2025",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Sunny."},
        }
    ],
    "usage": {"prompt_tokens": 31, "completion_tokens": 2, "total_tokens": 33},
}


def test_a_real_sdk_call_gets_the_providers_name_and_the_answers_ids(
    spans: InMemorySpanExporter,
) -> None:
    server = FakeServer(http_module("openai"), [("json", CHAT_COMPLETION)])
    adapter = OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")
    gateway = ModelGateway(adapter, audit=SQLiteAuditSink(":memory:"))
    gateway.send(composer().build(), VIEW, request_id="req-1")
    span = one(spans, "chat gpt-test")
    assert span.kind is SpanKind.CLIENT
    assert {key: value for key, value in attributes(span).items() if key.startswith("gen_ai")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.conversation.id": "req-1",
        "gen_ai.response.model": "gpt-test-2025",
        "gen_ai.response.id": "chatcmpl-7",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 31,
        "gen_ai.usage.output_tokens": 2,
    }
    assert attributes(span)["veridic.api"] == "openai.chat.completions"


def test_an_sdk_error_ends_the_chat_span_as_an_error(spans: InMemorySpanExporter) -> None:
    http = http_module("openai")

    def fail(request: Any) -> Any:
        return http.Response(500, json={"error": {"message": f"boom {SECRET}"}})

    client = openai.OpenAI(
        api_key="test-key",
        max_retries=0,
        http_client=http.Client(transport=http.MockTransport(fail)),
    )
    gateway = ModelGateway(OpenAIChat(client, model="gpt-test"), audit=SQLiteAuditSink())
    with pytest.raises(openai.InternalServerError):
        gateway.send(composer().build(), VIEW, request_id="req-1")
    span = one(spans, "chat gpt-test")
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["error.type"] == "openai.InternalServerError"
    assert "gen_ai.response.id" not in attributes(span)
    assert SECRET not in text_of(spans)


def test_a_refused_prompt_ends_its_chat_span_as_an_error(spans: InMemorySpanExporter) -> None:
    other = Registry().view()  # the prompt's capability section is VIEW's, not this view's
    with pytest.raises(VeridicError):
        scripted([ANSWER]).send(composer().build(), other, request_id="req-1")
    span = one(spans, "chat scripted")
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["error.type"] == "veridic.errors.ToolCouplingError"


# --- streams --------------------------------------------------------------------------------


def test_a_streams_span_ends_when_the_stream_ends(spans: InMemorySpanExporter) -> None:
    gateway = scripted([{"text": "It is sunny in Oslo today"}])
    with gateway.stream(composer().build(), VIEW, request_id="req-1") as stream:
        first = next(stream)
        assert first
        assert by_name(spans, "chat scripted") == []  # still open: the answer is being read
        time.sleep(0.01)
        rest = list(stream)
    span = one(spans, "chat scripted")
    assert "".join([first, *rest]).strip() == "It is sunny in Oslo today"
    assert attributes(span)["veridic.streamed"] is True
    assert attributes(span)["gen_ai.response.finish_reasons"] == ("stop",)
    assert "veridic.stream.incomplete" not in attributes(span)
    assert seconds(span) >= 0.01


def test_a_stream_closed_early_ends_its_span_there(spans: InMemorySpanExporter) -> None:
    gateway = scripted([{"text": "It is sunny in Oslo today"}])
    stream = gateway.stream(composer().build(), VIEW, request_id="req-1")
    next(stream)
    stream.close()
    span = one(spans, "chat scripted")
    assert attributes(span)["veridic.stream.incomplete"] is True
    assert span.status.status_code is StatusCode.UNSET


def test_an_async_streams_span_ends_when_the_stream_ends(spans: InMemorySpanExporter) -> None:
    gateway = scripted([{"text": "It is sunny"}], asynchronous=True)

    async def read() -> str:
        stream = await gateway.astream(composer().build(), VIEW, request_id="req-1")
        assert by_name(spans, "chat scripted") == []
        return "".join([text async for text in stream])

    assert asyncio.run(read()).strip() == "It is sunny"
    assert attributes(one(spans, "chat scripted"))["gen_ai.response.id"]


# --- async runs -----------------------------------------------------------------------------


def test_concurrent_queries_of_an_async_run_nest_under_its_agent_span(
    spans: InMemorySpanExporter,
) -> None:
    calls = [(f"call-{i}", "get_forecast", json.dumps({"city": c})) for i, c in enumerate("ABC")]

    async def two_runs() -> None:
        await asyncio.gather(
            *(
                scripted([{"tool_calls": calls}, ANSWER], asynchronous=True).arun(
                    composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id=request_id
                )
                for request_id in ("req-1", "req-2")
            )
        )

    asyncio.run(two_runs())
    agents = {str(attributes(s)["veridic.request_id"]): s for s in by_name(spans, "invoke_agent")}
    assert sorted(agents) == ["req-1", "req-2"]
    tools = by_name(spans, "execute_tool get_forecast")
    assert len(tools) == 6
    for request_id, agent in agents.items():
        mine = [span for span in tools if parent_id(span) == span_id(agent)]
        assert {attributes(span)["veridic.request_id"] for span in mine} == {request_id}
        assert sorted(str(attributes(span)["gen_ai.tool.call.id"]) for span in mine) == [
            "call-0",
            "call-1",
            "call-2",
        ]
        # They ran at once: each started before any of them ended.
        assert max(s.start_time or 0 for s in mine) < min(s.end_time or 0 for s in mine)
        assert all(seconds(span) >= 0.01 for span in mine)
    chats = by_name(spans, "chat scripted")
    assert len(chats) == 4
    assert {parent_id(span) for span in chats} == {span_id(agent) for agent in agents.values()}


def test_an_async_execute_outside_a_run_is_a_root_span(spans: InMemorySpanExporter) -> None:
    asyncio.run(
        aexecute(
            VIEW,
            "get_forecast",
            {"city": "Oslo"},
            policy=ApprovalPolicy(VIEW),
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-1",
            prompt=composer().build(),
        )
    )
    span = one(spans, "execute_tool get_forecast")
    assert span.parent is None
    assert seconds(span) >= 0.01


# --- paused and resumed runs ----------------------------------------------------------------


def test_a_paused_run_and_its_resume_are_two_agent_spans(spans: InMemorySpanExporter) -> None:
    audit = SQLiteAuditSink(":memory:")
    script = [
        {
            "tool_calls": [
                ("c1", "get_weather", '{"city": "Oslo"}'),
                ("c2", "set_units", '{"unit": "celsius"}'),
            ]
        }
    ]
    gateway = ModelGateway(ScriptedProvider([*script, ANSWER]), audit=audit)
    paused = gateway.run(
        composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1", defer=True
    ).paused
    assert paused is not None
    resumed = Composer().system(SYSTEM, VIEW.capability_section())
    gateway.resume(paused, resumed, VIEW, policy=ApprovalPolicy(VIEW), answers={"c2": True})
    first, second = by_name(spans, "invoke_agent")
    assert attributes(first)["veridic.paused"] is True
    assert attributes(second)["veridic.resumed"] is True
    assert attributes(second)["veridic.request_id"] == "req-1"
    units = one(spans, "execute_tool set_units")
    assert parent_id(units) == span_id(second)
    assert attributes(units)["gen_ai.tool.call.id"] == "c2"
    assert attributes(units)["veridic.approval"] == "user_confirmed"


def test_a_run_that_reaches_a_limit_ends_its_span_as_an_error(
    spans: InMemorySpanExporter,
) -> None:
    from veridic import Limits, RunLimitError

    with pytest.raises(RunLimitError):
        scripted([WEATHER, WEATHER]).run(
            composer(),
            VIEW,
            policy=ApprovalPolicy(VIEW),
            request_id="req-1",
            limits=Limits(turns=1),
        )
    agent = one(spans, "invoke_agent")
    assert agent.status.status_code is StatusCode.ERROR
    assert attributes(agent)["error.type"] == "veridic.errors.RunLimitError"


# --- the switch -----------------------------------------------------------------------------


def test_no_span_is_made_while_instrumentation_is_off() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert not is_instrumented()
    scripted([WEATHER, ANSWER]).run(
        composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1"
    )
    instrument(provider)
    try:
        assert is_instrumented()
        uninstrument()
        scripted([WEATHER, ANSWER]).run(
            composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-2"
        )
    finally:
        uninstrument()
    assert exporter.get_finished_spans() == ()


def test_instrument_refuses_what_is_not_a_tracer_provider() -> None:
    with pytest.raises(VeridicError, match="TracerProvider"):
        instrument(object())  # type: ignore[arg-type]
    assert not is_instrumented()


# --- for any script -------------------------------------------------------------------------

CALL = st.sampled_from(
    [
        ("get_weather", '{"city": "Oslo"}'),
        ("get_pressure", '{"city": "Oslo"}'),
        ("set_units", '{"unit": "celsius"}'),
        ("no_such_tool", "{}"),
        ("get_weather", "not json"),
    ]
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(turns=st.lists(st.lists(CALL, min_size=1, max_size=3), max_size=3))
def test_every_tool_span_has_one_agent_ancestor_and_one_audit_record(
    spans: InMemorySpanExporter, turns: list[list[tuple[str, str]]]
) -> None:
    spans.clear()
    script: list[Mapping[str, object]] = [
        {"tool_calls": [(f"c{t}-{i}", name, args) for i, (name, args) in enumerate(calls)]}
        for t, calls in enumerate(turns)
    ]
    audit = SQLiteAuditSink(":memory:")
    gateway = ModelGateway(ScriptedProvider([*script, ANSWER]), audit=audit)
    gateway.run(composer(), VIEW, policy=ApprovalPolicy(VIEW), request_id="req-p")
    finished = spans.get_finished_spans()
    by_id = {span_id(span): span for span in finished}
    tools = [span for span in finished if span.name.startswith("execute_tool")]
    for span in tools:
        ancestors = []
        parent = parent_id(span)
        while parent is not None:
            ancestors.append(by_id[parent])
            parent = parent_id(by_id[parent])
        assert [a.name for a in ancestors] == ["invoke_agent"]
    records = audit.records("req-p")
    assert len(tools) == len(records) == sum(len(calls) for calls in turns)
    assert [attributes(span)["veridic.outcome"] for span in tools] == [
        record.outcome.value for record in records
    ]
    assert len(by_name(spans, "chat scripted")) == len(turns) + 1


def test_a_tool_error_reaches_the_model_but_not_the_span(spans: InMemorySpanExporter) -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        raise ToolError(f"no key {SECRET}")

    view = registry.view()
    result = execute(
        view,
        "lookup",
        {"key": "k"},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=Composer().system(SYSTEM).build(),
    )
    assert SECRET in result.told
    (span,) = spans.get_finished_spans()
    assert attributes(span)["error.type"] == "veridic.errors.ToolError"
    assert SECRET not in text_of(spans)
