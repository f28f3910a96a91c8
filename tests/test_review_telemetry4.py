"""Traces, a fourth look: what the model writes as a tool name stays out of the trace, and the
notes a broken run adds quote the application's request id clipped.

Reproducers of a fourth review of :mod:`veridic.run.telemetry` (and of the run loop's notes),
each through the public API with the SDK's in-memory exporter, as ``tests/test_telemetry.py``
reads them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    AuditRecordError,
    AuditWriteError,
    Composer,
    Limits,
    ModelGateway,
    PausedRun,
    Registry,
    RunLimitError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolContext,
    ToolView,
    VeridicError,
    aexecute,
    execute,
    instruction,
)
from veridic.run.telemetry import instrumented

SYSTEM = instruction("You report the weather.")
ANSWER = {"text": "It is sunny in Oslo.", "usage": {"input_tokens": 150, "output_tokens": 9}}
SECRET = "sk-live-"
"""What every invented name starts with: a key the injected text told the model to call."""


def make_view() -> ToolView:
    """A view of two tools and a third the view withholds (only for admins)."""
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

    @registry.tool(kind="query", roles={"admin"})
    def export_customers(limit: int) -> str:
        """Export the customer table.

        Args:
            limit: How many rows at most.
        """
        return "rows"

    return registry.view()


def composer(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section()).user("Weather in Oslo?")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with instrumented(provider):
        yield exporter


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def texts(span: ReadableSpan) -> Iterator[str]:
    """Every string a span holds: its name, each attribute's value and each element of one."""
    yield span.name
    for value in attributes(span).values():
        if isinstance(value, str):
            yield value
        elif isinstance(value, Sequence):
            yield from (item for item in value if isinstance(item, str))


def gateway(script: Sequence[Mapping[str, object]], audit: SQLiteAuditSink) -> ModelGateway:
    return ModelGateway(ScriptedProvider(script), audit=audit)


# --- a tool name the model invents --------------------------------------------------------------

INVENTED = st.one_of(
    st.from_regex(r"[A-Za-z0-9_.:\-]{0,40}", fullmatch=True),  # plain: it looked fit before
    st.text(max_size=40),
).map(lambda tail: SECRET + tail)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(INVENTED, min_size=1, max_size=4))
def test_a_tool_name_the_model_invents_never_reaches_the_trace(
    spans: InMemorySpanExporter, names: list[str]
) -> None:
    """A name the view's registry does not hold is the model's text (a prompt injection can
    make it a key read from the context): it reached ``gen_ai.tool.name`` on the tool's span
    and ``veridic.tool_calls`` on the chat span, as it was when it looked plain, escaped and
    clipped otherwise, so into a trace backend whose readers and retention are not the
    audit store's, and as one attribute value per invented name into the dashboards that
    group by it. It is now ``_OTHER`` there, with a digest of the name to tell repeats apart;
    the audit record keeps the name."""
    view = make_view()
    spans.clear()
    audit = SQLiteAuditSink(":memory:")
    calls = [(f"c{i}", name, "{}") for i, name in enumerate(names)]
    gateway([{"tool_calls": calls}, ANSWER], audit).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
    )
    finished = spans.get_finished_spans()
    assert not [text for span in finished for text in texts(span) if SECRET in text]
    tools = [span for span in finished if span.name == "execute_tool"]
    assert len(tools) == len(names)
    for span, name in zip(tools, names, strict=True):
        shown = attributes(span)
        assert shown["gen_ai.tool.name"] == "_OTHER"
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        assert shown["veridic.tool.name_sha256"] == digest
        assert shown["veridic.outcome"] == "refused"
    (chat, _) = [span for span in finished if span.name.startswith("chat ")]
    assert attributes(chat)["veridic.tool_calls"] == ("_OTHER",) * len(names)
    records = audit.records("req-1")
    assert len(records) == len(names)
    assert all(SECRET in record.tool for record in records)  # the record keeps it


def test_a_registered_name_the_view_withholds_is_shown_by_name(
    spans: InMemorySpanExporter,
) -> None:
    """The registry's names are the application's words, and a bounded set: a call of one the
    view withholds keeps its name on the chat span and the tool span, and gets no digest."""
    view = make_view()
    calls = [("c1", "export_customers", '{"limit": 1}'), ("c2", "get_weather", '{"city": "Oslo"}')]
    gateway([{"tool_calls": calls}, ANSWER], SQLiteAuditSink(":memory:")).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
    )
    finished = spans.get_finished_spans()
    chat = next(span for span in finished if span.name.startswith("chat "))
    assert attributes(chat)["veridic.tool_calls"] == ("export_customers", "get_weather")
    withheld = next(span for span in finished if span.name == "execute_tool export_customers")
    assert attributes(withheld)["gen_ai.tool.name"] == "export_customers"
    assert "veridic.tool.name_sha256" not in attributes(withheld)


# --- the notes of a broken run quote the request id clipped ---------------------------------------

LONG_ID = "req-" + "x" * 4092
"""A request id as long as one may be (4096 characters): an application's header, say."""


def test_a_note_on_a_run_broken_between_calls_quotes_the_request_id_clipped() -> None:
    """The note that says what the composer holds quoted the request id whole: 4096
    characters of the application's text in every traceback and log line of the error."""
    view = make_view()

    def confirm(request: object) -> bool:
        raise ValueError("the approval dialog crashed")

    calls = [("c1", "get_weather", '{"city": "Oslo"}'), ("c2", "set_units", '{"unit": "c"}')]
    with pytest.raises(ValueError, match="approval dialog crashed") as caught:
        gateway([{"tool_calls": calls}, ANSWER], SQLiteAuditSink(":memory:")).run(
            composer(view), view, policy=ApprovalPolicy(view), request_id=LONG_ID, confirm=confirm
        )
    notes = caught.value.__notes__
    (note,) = [note for note in notes if "the composer holds the model's answer" in note]
    assert LONG_ID not in note
    assert "(4096 chars)" in note
    assert len(note) < 600


def test_a_note_on_a_resume_that_failed_after_its_calls_quotes_the_request_id_clipped() -> None:
    """The note that says the paused run is spent quoted the request id whole, twice."""
    view = make_view()
    audit = SQLiteAuditSink(":memory:")
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    paused = (
        gateway([{"tool_calls": calls}], audit)
        .run(composer(view), view, policy=ApprovalPolicy(view), request_id=LONG_ID, defer=True)
        .paused
    )
    assert paused is not None
    stored = PausedRun.from_json(paused.to_json())
    answers = {approval.digest: True for approval in stored.approvals}
    resuming = gateway([], audit)  # no answer left: the model call after the resumed calls fails
    with pytest.raises(VeridicError, match="its script has no more") as caught:
        resuming.resume(
            stored,
            Composer().system(SYSTEM, view.capability_section()),
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
        )
    (note,) = [note for note in caught.value.__notes__ if "the paused run is spent" in note]
    assert LONG_ID not in note
    assert "(4096 chars)" in note
    assert len(note) < 1200


# --- a second read: names near a registered one, other entry points -----------------------------

REGISTERED = ("get_weather", "set_units", "export_customers")


def _near(name: str) -> st.SearchStrategy[str]:
    """Names that differ from ``name`` only by case, surrounding space or an invisible mark."""
    return st.sampled_from(
        (
            name.upper(),
            name.capitalize(),
            f" {name}",
            f"{name} ",
            f"{name}\n",
            f"{name}\u200b",
            name.replace("_", "-"),
            name.replace("_", "\u2010"),
        )
    )


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.sampled_from(REGISTERED).flatmap(_near))
def test_a_name_that_only_looks_like_a_registered_one_is_other(
    spans: InMemorySpanExporter, name: str
) -> None:
    """Only the registry's exact names are shown: one that differs by case, a space or an
    invisible character is the model's text, refused as unknown, and ``_OTHER`` in the trace
    with its own digest (never folded into the registered name's series)."""
    view = make_view()
    spans.clear()
    audit = SQLiteAuditSink(":memory:")
    gateway([{"tool_calls": [("c1", name, "{}")]}, ANSWER], audit).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
    )
    finished = spans.get_finished_spans()
    (tool,) = [span for span in finished if span.name.startswith("execute_tool")]
    assert tool.name == "execute_tool"
    shown = attributes(tool)
    assert shown["gen_ai.tool.name"] == "_OTHER"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    assert shown["veridic.tool.name_sha256"] == digest
    (chat, _) = [span for span in finished if span.name.startswith("chat ")]
    assert attributes(chat)["veridic.tool_calls"] == ("_OTHER",)


# --- the chat span's name holds the model bounded ----------------------------------------------


def test_the_chat_span_name_holds_the_model_name_escaped_and_clipped(
    spans: InMemorySpanExporter,
) -> None:
    """``chat {model}`` took the adapter's model as it was: any length, any character (a
    model name read from a setting or a request, an escape sequence in it), as a span name
    every trace backend indexes. It is shown as a server's name is: as it is when it looks
    like one, else escaped and clipped; ``gen_ai.request.model`` the same, on the run's span
    too."""
    view = make_view()
    model = "gpt-4o\x1b[2J" + "m" * 5000
    provider = ScriptedProvider([ANSWER], model=model)
    ModelGateway(provider, audit=SQLiteAuditSink(":memory:")).run(
        composer(view), view, policy=ApprovalPolicy(view), request_id="req-1"
    )
    (chat, run) = spans.get_finished_spans()
    assert chat.name.startswith("chat ")
    assert len(chat.name) < 120
    assert "\x1b" not in chat.name
    assert chat.name.endswith(" chars)")
    shown = chat.name.removeprefix("chat ")
    assert attributes(chat)["gen_ai.request.model"] == shown
    assert attributes(run)["gen_ai.request.model"] == shown


def test_a_plain_model_name_is_the_chat_span_name(spans: InMemorySpanExporter) -> None:
    view = make_view()
    provider = ScriptedProvider([ANSWER], model="meta-llama/Llama-3-70b@v2")
    ModelGateway(provider, audit=SQLiteAuditSink(":memory:")).send(
        composer(view).build(), view, request_id="req-1"
    )
    (chat,) = spans.get_finished_spans()
    assert chat.name == "chat meta-llama/Llama-3-70b@v2"
    assert attributes(chat)["gen_ai.request.model"] == "meta-llama/Llama-3-70b@v2"


# --- a confirm that raises leaves the denied record on the span --------------------------------


def _raises_value_error(request: object) -> bool:
    raise ValueError("the approval dialog crashed")


def _raises_interrupt(request: object) -> bool:
    raise KeyboardInterrupt


def _returns_a_coroutine(request: object) -> object:
    async def answer() -> bool:
        return True

    return answer()


@pytest.mark.parametrize(
    ("confirm", "raised"),
    [
        (_raises_value_error, ValueError),
        (_raises_interrupt, KeyboardInterrupt),
        (_returns_a_coroutine, VeridicError),
    ],
)
def test_a_confirm_that_does_not_answer_leaves_the_denied_record_on_the_span(
    spans: InMemorySpanExporter, confirm: object, raised: type[BaseException]
) -> None:
    """When ``confirm`` raised (an error, Ctrl-C at the prompt) or returned an awaitable to
    ``execute``, the call was recorded denied, but its span was an error with none of the
    record's attributes: no ``veridic.outcome``, so a query for denied calls missed it."""
    view = make_view()
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(raised):
        execute(
            view,
            "set_units",
            {"unit": "celsius"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=composer(view).build(),
            confirm=confirm,  # type: ignore[arg-type]  # the wrong kinds of confirm, on purpose
        )
    (record,) = audit.records("req-1")
    (span,) = spans.get_finished_spans()
    shown = attributes(span)
    assert span.status.status_code is StatusCode.ERROR
    assert shown["veridic.outcome"] == record.outcome.value == "denied"
    assert shown["veridic.approval"] == record.approval.value
    assert shown["veridic.kind"] == "write"
    assert shown["gen_ai.tool.name"] == "set_units"


@pytest.mark.parametrize("raised", [ValueError, asyncio.CancelledError])
def test_an_async_confirm_that_raises_leaves_the_denied_record_on_the_span(
    spans: InMemorySpanExporter, raised: type[BaseException]
) -> None:
    """:func:`aexecute`'s confirm, raising or cancelled at the prompt: the same."""
    view = make_view()
    audit = SQLiteAuditSink(":memory:")

    async def confirm(request: object) -> bool:
        raise raised

    async def call() -> None:
        await aexecute(
            view,
            "set_units",
            {"unit": "celsius"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt=composer(view).build(),
            confirm=confirm,
        )

    with pytest.raises(raised):
        asyncio.run(call())
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["veridic.outcome"] == "denied"


# --- every message that quotes the request id clips it -----------------------------------------


def _clipped(message: str) -> None:
    """``message`` quotes :data:`LONG_ID` clipped, with its length, never whole."""
    assert LONG_ID not in message
    assert "x" * 100 not in message
    assert "…' (4096 chars)" in message


def _paused(audit: SQLiteAuditSink, usage: bool = True) -> str:
    """A run of :data:`LONG_ID` paused for one write, as JSON."""
    view = make_view()
    calls = [("c1", "set_units", '{"unit": "celsius"}')]
    answer: dict[str, object] = {"tool_calls": calls}
    if usage:
        answer["usage"] = {"input_tokens": 10, "output_tokens": 2}
    paused = (
        gateway([answer], audit)
        .run(composer(view), view, policy=ApprovalPolicy(view), request_id=LONG_ID, defer=True)
        .paused
    )
    assert paused is not None
    return paused.to_json()


def _resume(saved: str, audit: SQLiteAuditSink, limits: Limits | None = None) -> None:
    view = make_view()
    stored = PausedRun.from_json(saved)
    gateway([ANSWER], audit).resume(
        stored,
        Composer().system(SYSTEM, view.capability_section()),
        view,
        policy=ApprovalPolicy(view),
        answers={approval.digest: True for approval in stored.approvals},
        limits=limits,
    )


def test_a_run_refused_for_its_answer_quotes_the_request_id_clipped() -> None:
    """An answer without a usage count under a token limit, and one with a call without a
    name: both errors quoted the request id whole (and the first the server's model name)."""
    view = make_view()
    unsaid = gateway([{"text": "hi"}], SQLiteAuditSink(":memory:"))
    with pytest.raises(VeridicError, match="did not say how many tokens") as caught:
        unsaid.run(
            composer(view),
            view,
            policy=ApprovalPolicy(view),
            request_id=LONG_ID,
            limits=Limits(tokens=1000),
        )
    _clipped(str(caught.value))
    nameless = gateway([{"tool_calls": [("c1", "", "{}")]}], SQLiteAuditSink(":memory:"))
    with pytest.raises(VeridicError, match="without a tool name") as caught:
        nameless.run(composer(view), view, policy=ApprovalPolicy(view), request_id=LONG_ID)
    _clipped(str(caught.value))


def test_a_resume_refused_for_its_limits_quotes_the_request_id_clipped() -> None:
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(RunLimitError) as spent:
        _resume(_paused(audit), audit, Limits(tool_calls=0))
    _clipped(str(spent.value))
    with pytest.raises(VeridicError, match="holds no count of the tokens") as uncounted:
        _resume(_paused(audit, usage=False), audit, Limits(tokens=1000))
    _clipped(str(uncounted.value))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # Answered by digest, which covers what the run had spent (format 7).
        (lambda saved: saved.update(tool_calls=0), "not the ones that waited"),
        (lambda saved: saved["approvals"][0].update(call_id="c9"), "does not end"),
    ],
)
def test_a_changed_paused_run_is_refused_with_the_request_id_clipped(
    change: Callable[[dict[str, Any]], None], message: str
) -> None:
    audit = SQLiteAuditSink(":memory:")
    saved = json.loads(_paused(audit))
    change(saved)
    with pytest.raises(VeridicError, match=message) as caught:
        _resume(json.dumps(saved), audit)
    _clipped(str(caught.value))


@dataclass
class _FullDisk:
    """A store whose every write fails as a full disk's does (``raised``: what it raises)."""

    raised: BaseException = field(
        default_factory=lambda: sqlite3.OperationalError("database or disk is full")
    )

    def write(self, record: AuditRecord, /) -> None:
        raise self.raised


def _weather(audit: object) -> None:
    view = make_view()
    execute(
        view,
        "get_weather",
        {"city": "Oslo"},
        policy=ApprovalPolicy(view),
        audit=audit,  # type: ignore[arg-type]  # a store that fails, by duck typing
        request_id=LONG_ID,
        prompt=composer(view).build(),
    )


def test_an_unwritten_record_quotes_the_request_id_clipped() -> None:
    """The error of a call that ran and whose record the store refused, and the note on an
    interrupt that came while the record was being written, quoted the request id whole."""
    with pytest.raises(AuditWriteError) as unwritten:
        _weather(_FullDisk())
    _clipped(str(unwritten.value))
    with pytest.raises(KeyboardInterrupt) as interrupted:
        _weather(_FullDisk(KeyboardInterrupt()))
    (note,) = [n for n in interrupted.value.__notes__ if "was being written" in n]
    _clipped(note)


def test_an_interrupted_call_whose_record_failed_notes_the_request_id_clipped() -> None:
    """Ctrl-C in the handler, then a store that refuses the record: the note on the
    interrupt quoted the request id whole."""
    registry = Registry()

    @registry.tool(kind="query")
    def wait_for_operator(order: str) -> str:
        """Wait for the operator, who presses Ctrl-C.

        Args:
            order: The order the operator looks at.
        """
        raise KeyboardInterrupt

    view = registry.view()
    with pytest.raises(KeyboardInterrupt) as interrupted:
        execute(
            view,
            "wait_for_operator",
            {"order": "A-1"},
            policy=ApprovalPolicy(view),
            audit=_FullDisk(),
            request_id=LONG_ID,
            prompt=Composer().system(SYSTEM).build(),
        )
    (note,) = [n for n in interrupted.value.__notes__ if "could not be written" in n]
    _clipped(note)


BLANK_ID = " " * 5000
"""A request id the integrations refuse (blank), longer than their quote of it."""


def _refusals() -> Iterator[tuple[str, Callable[[], object]]]:
    """Each entry point that refuses a blank request id, and a call of it with one."""
    view = make_view()
    policy = ApprovalPolicy(view)
    audit = SQLiteAuditSink(":memory:")
    prompt = composer(view).build()
    from veridic.integrations.langchain import structured_tools
    from veridic.integrations.openai_agents import function_tools
    from veridic.integrations.pydantic_ai import capability

    yield (
        "structured_tools",
        lambda: structured_tools(
            view, policy=policy, audit=audit, request_id=BLANK_ID, prompt=prompt
        ),
    )
    yield (
        "function_tools",
        lambda: function_tools(view, policy=policy, audit=audit, request_id=BLANK_ID),
    )
    yield "capability", lambda: capability(view, policy=policy, audit=audit, request_id=BLANK_ID)
    yield (
        "execute",
        lambda: execute(
            view, "get_weather", {}, policy=policy, audit=audit, request_id=BLANK_ID, prompt=prompt
        ),
    )
    registry = Registry()

    @registry.tool(kind="query")
    def whoami(ctx: ToolContext[None]) -> str:
        """Say which request this call belongs to."""
        return ctx.request_id

    prepared = registry.view().validate("whoami", {})
    yield "with_context", lambda: prepared.with_context(None, request_id=BLANK_ID)


@pytest.mark.parametrize(
    ("where", "refused"), [pytest.param(*case, id=case[0]) for case in _refusals()]
)
def test_a_refused_request_id_is_quoted_clipped_with_its_length(
    where: str, refused: Callable[[], object]
) -> None:
    """The integrations, ``execute`` and a tool's context quoted a refused request id as
    ``{request_id!r:.80}``: the first 80 characters of its repr, cut mid-quote with no mark
    and no length, so a reader could not tell a long id from a short one. It is now clipped
    as other quotes are, its length said."""
    with pytest.raises(VeridicError, match="request_id=") as caught:
        refused()
    message = str(caught.value)
    assert "' (5000 chars)" in message, where
    assert " " * 100 not in message


def test_a_langchain_turn_of_twin_call_ids_is_refused_with_its_text_clipped(
    tmp_path: Path,
) -> None:
    """The refusal of a model's turn that gives many gated calls one id quoted the id as
    ``{call_id!r:.80}`` (cut with no mark) and every call's name whole: the model's text,
    as long and as many as it wrote."""
    from langchain_core.messages import AIMessage, ToolCall
    from test_integration_langchain import make_world

    call_id = "call-" + "y" * 5000
    twins = AIMessage(
        "",
        tool_calls=[
            ToolCall(name="save_note", args={"text": f"note {index}"}, id=call_id)
            for index in range(500)
        ],
    )
    agent = make_world(tmp_path).agent(twins)
    with pytest.raises(VeridicError, match="500 calls of the model's turn") as caught:
        agent.ask()
    message = str(caught.value)
    assert "…' (5005 chars)" in message
    assert "y" * 100 not in message
    assert len(message) < 1000


def test_a_store_asked_with_a_key_it_cannot_keep_quotes_it_clipped_with_its_length() -> None:
    """The store's refusals of a blank key and of a key with NUL quoted it as
    ``{key!r:.80}``: cut mid-quote, with no mark and no length."""
    sink = SQLiteAuditSink(":memory:")
    with pytest.raises(AuditRecordError) as blank:
        sink.claim_paused(BLANK_ID)
    assert "' (5000 chars)" in str(blank.value)
    with pytest.raises(AuditRecordError) as nul:
        sink.records("\x00" + "x" * 4999)
    assert "' (5000 chars)" in str(nul.value)
    assert "x" * 100 not in str(nul.value)
