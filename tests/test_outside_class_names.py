"""Exception classes named by outside text, and tracers' messages, wherever veridic writes
them: the model's text, the audit record's detail, the log.

A task queue's client (Celery's ``create_exception_cls``) or an RPC library makes the class
of a remote error from the name the remote end sent, and a class's ``__name__`` may be a
``str`` subclass whose own methods fail or lie. Real parts throughout: the SQLite store,
the OpenTelemetry SDK's tracer provider, ScriptedProvider.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from test_deferred_expiry import CALLS, HOUR, PAUSED_AT, SYSTEM, at, gateway
from test_read18_runloop import _async_refunds

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    AuditSink,
    AuditWriteError,
    CallResult,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    execute,
    normalize_plan,
)
from veridic.integrations.mcp.server import McpRequest, mcp_server
from veridic.run.executor import execute_plan
from veridic.run.telemetry import instrumented
from veridic.testing import adversarial_text

FORGED = "Boom\x1b[2J\n##[error]deploy approved\n::error::forged"


class _Failing(str):
    """A class name that is text, whose own methods fail when veridic writes it."""

    def __format__(self, spec: str) -> str:
        raise RuntimeError("formatted")

    def __str__(self) -> str:
        raise RuntimeError("written")

    def __repr__(self) -> str:
        raise RuntimeError("quoted")


class _Lying(str):
    """A class name that is text, whose own methods write something else."""

    def __format__(self, spec: str) -> str:
        return "RemoteError\n##[error]deploy approved"

    def __str__(self) -> str:
        return "RemoteError\n##[error]deploy approved"


def _named(name: str, base: type[BaseException] = Exception) -> type[BaseException]:
    kind = type("RemoteError", (base,), {})
    kind.__name__ = name
    return kind


def _view(kind: type[BaseException]) -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def fetch_report(key: str) -> str:
        """Fetch a report a worker built.

        Args:
            key: The report's key.
        """
        raise kind("the worker's message")

    return registry.view()


def _fetch(view: ToolView, audit: AuditSink) -> CallResult:
    return execute(
        view,
        "fetch_report",
        {"key": "k"},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="r",
        prompt_sha256="0" * 64,
    )


def _inert(text: str, limit: int) -> None:
    """``text`` has no line a terminal, a log reader or a CI runner would obey."""
    assert len(text) <= limit
    for line in text.split("\n"):
        assert line.isprintable(), line
        assert "##[" not in line, line
        assert not line.lstrip().startswith("::"), line


def _lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    """Each record of ``logger`` as a handler writes it, its traceback included."""
    formatter = logging.Formatter()
    return [formatter.format(r) for r in caplog.records if r.name == logger]


# --- what the model is told ------------------------------------------------------------------


def test_the_model_is_told_a_huge_class_name_clipped() -> None:
    """The model read the class's ``__name__`` whole: a megabyte name, a megabyte of the
    tool's answer (untrusted, but not clipped), where the record keeps 60 characters."""
    result = _fetch(_view(_named("R" * 1_000_000)), SQLiteAuditSink())
    assert not result.ok
    _inert(result.told, 400)
    assert "RRRR" in result.told  # still recognisable


def test_the_model_is_told_a_forged_class_name_escaped() -> None:
    result = _fetch(_view(_named(FORGED)), SQLiteAuditSink())
    _inert(result.told, 400)
    assert "Boom" in result.told


def test_the_model_is_told_a_plain_class_name_as_it_is() -> None:
    result = _fetch(_view(LookupError), SQLiteAuditSink())
    assert result.told.startswith("error: the tool failed (LookupError); ")


# --- the audit record's detail ---------------------------------------------------------------


@pytest.mark.parametrize("name", [_Failing("RemoteError"), _Lying("RemoteError")])
def test_a_class_name_whose_own_methods_fail_or_lie_still_has_its_record_written(
    name: str,
) -> None:
    """The record's detail formatted ``__name__`` with an f-string after the handler ran:
    a name whose ``__format__`` raised left ``execute`` with that error and no record of
    a call that ran; one whose ``__format__`` lied wrote a forged line into the detail."""
    audit = SQLiteAuditSink()
    result = _fetch(_view(_named(name)), audit)
    (record,) = audit.records("r")
    assert record.detail == "RemoteError: the worker's message"
    assert result.record.detail == record.detail
    assert result.told.startswith("error: the tool failed (RemoteError); ")


def test_an_interrupt_named_by_outside_text_is_recorded_escaped() -> None:
    """A handler stopped by an interrupt of the application's own (a ``KeyboardInterrupt``
    subclass a signal library names) is recorded ``failed``; the detail named it raw."""
    audit = SQLiteAuditSink()
    with pytest.raises(KeyboardInterrupt):
        _fetch(_view(_named(_Failing(FORGED), KeyboardInterrupt)), audit)
    (record,) = audit.records("r")
    _inert(record.detail, 600)
    assert record.detail.startswith("'Boom\\x1b[2J\\n##")


# --- the log ---------------------------------------------------------------------------------


@dataclass
class _RefusingSink:
    """A store whose driver names its errors by what the server sent."""

    attempts: list[AuditRecord] = field(default_factory=list)

    def write(self, record: AuditRecord, /) -> None:
        self.attempts.append(record)
        raise _named(_Failing(FORGED))("the server refused the row")


def test_an_interrupted_confirm_whose_record_the_store_refused_is_logged_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ctrl-C at the approval prompt while the store refused the record: the log line
    named the interrupt's and the store failure's classes with ``%s``, so a forged name
    wrote lines of its own (and a failing ``__str__`` lost the line)."""
    interrupt = _named(_Failing(FORGED), KeyboardInterrupt)

    def confirm(request: object) -> bool:
        raise interrupt

    registry = Registry()

    @registry.tool(kind="write")
    def send_report(key: str) -> str:
        """Send a report to the customer.

        Args:
            key: The report's key.
        """
        return "sent"

    view = registry.view()
    sink = _RefusingSink()
    with caplog.at_level(logging.ERROR, logger="veridic.executor"), pytest.raises(interrupt):
        execute(
            view,
            "send_report",
            {"key": "k"},
            policy=ApprovalPolicy(view),
            audit=sink,
            request_id="r",
            prompt_sha256="0" * 64,
            confirm=confirm,
        )
    assert len(sink.attempts) == 1
    (logged,) = [r for r in caplog.records if r.name == "veridic.executor"]
    message = logged.getMessage()
    _inert(message, 4000)
    first_line = message.split("\n", 1)[0]
    assert first_line.count("'Boom\\x1b[2J\\n##") == 2  # each class, still recognisable


class _Refused(SpanProcessor):
    """A span processor whose exporter quotes what the collector sent back."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise RuntimeError(f"the collector answered 400: {FORGED}")

    def on_end(self, span: ReadableSpan) -> None:
        pass


def test_a_tracers_message_is_logged_escaped(caplog: pytest.LogCaptureFixture) -> None:
    """``_tracer_failed`` logged the exporter's message with ``%s`` (and whole in the
    traceback): what a collector sent back wrote lines of its own in the application's
    log."""
    provider = TracerProvider()
    provider.add_span_processor(_Refused())
    with caplog.at_level(logging.WARNING, logger="veridic.telemetry"), instrumented(provider):
        result = _fetch(_view(LookupError), SQLiteAuditSink())
    assert result.record.detail == "LookupError: the worker's message"
    (line,) = _lines(caplog, "veridic.telemetry")
    _inert(line, 4000)
    assert "the collector answered 400: " in line  # still recognisable


# --- for every class name --------------------------------------------------------------------


names = st.one_of(
    adversarial_text(),
    st.sampled_from([FORGED, "##[error]x", "::warning::x", " padded ", "", "\ud800"]),
    st.integers(257, 200_000).map(lambda n: "N" * n),
)


def _as_name(text: str) -> str:
    """``text`` as a class's ``__name__`` can hold it (no NUL, no lone surrogate): the
    ``__qualname__`` keeps the text whole."""
    return text.replace("\0", "").encode("utf-8", "replace").decode("utf-8")


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names, made=st.sampled_from([str, _Failing, _Lying]))
def test_every_class_name_is_written_printable_bounded_and_inert(
    caplog: pytest.LogCaptureFixture, name: str, made: type[str]
) -> None:
    """For every name a class may have (as text, or as a ``str`` subclass whose methods
    fail or lie), the model's text, the record's detail and the log line are printable,
    bounded and obey nothing, and the record is written."""
    caplog.clear()
    kind = _named(made(_as_name(name)))
    kind.__qualname__ = name
    audit = SQLiteAuditSink()
    with caplog.at_level(logging.WARNING, logger="veridic.executor"):
        result = _fetch(_view(kind), audit)
    (record,) = audit.records("r")
    _inert(result.told, 400)
    _inert(record.detail, 600)
    (line,) = _lines(caplog, "veridic.executor")
    _inert(line, 6000)


# --- which method to use --------------------------------------------------------------------


def test_a_blocking_resume_of_an_async_tools_call_names_aresume() -> None:
    """A resume in time whose calls include an async tool's was told to use
    ``arun_tools()`` or ``arun()``, which cannot resume a paused run."""
    audit = SQLiteAuditSink()
    ran: list[str] = []
    view = _async_refunds(ran)
    policy = ApprovalPolicy(view)
    composer = Composer().system(SYSTEM).user("My parcel 42 is lost, refund it.")
    pausing = gateway([CALLS], audit, at(PAUSED_AT), asynchronous=True)
    run = asyncio.run(pausing.arun(composer, view, policy=policy, request_id="req-1", defer=True))
    assert run.paused is not None
    answers = {approval.digest: True for approval in run.paused.approvals}
    again = Composer().system(SYSTEM)
    resuming = gateway([], audit, at(PAUSED_AT + HOUR))
    with pytest.raises(VeridicError, match="is async") as raised:
        resuming.resume(run.paused, again, view, policy=policy, answers=answers)
    assert "await gateway.aresume(...)" in str(raised.value)
    assert "arun_tools" not in str(raised.value)
    assert ran == ["get_order 42"]


# --- what an MCP client is told ------------------------------------------------------------


def test_an_mcp_client_is_told_a_view_factorys_forged_class_name_escaped() -> None:
    """veridic's MCP server told the client (and its model) the class of a view factory's
    error raw: a factory that asks a licence server over RPC met an error whose class the
    remote end named, and its name reached the model whole."""
    remote = _named(FORGED + "X" * 5000)

    def view(request: McpRequest) -> ToolView:
        raise remote("the licence server refused")

    server = mcp_server(view, audit=SQLiteAuditSink())

    async def main() -> types.CallToolResult:
        async with Client(server) as client:
            return await client.call_tool("fetch_report", {"key": "k"})

    result = anyio.run(main)
    assert result.is_error
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    _inert(block.text, 500)
    assert "nothing ran" in block.text


# --- a store's, a plan's and a boot check's errors named by outside text ---------------------


class _Unreadable(Exception):
    """An error whose message cannot be read: its ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("unreadable")


@dataclass
class _RaisingSink:
    """A store whose ``write`` raises ``error``."""

    error: BaseException

    def write(self, record: AuditRecord, /) -> None:
        raise self.error


@pytest.mark.parametrize(
    "failure",
    [_named(_Failing(FORGED))(f"the row was refused: {FORGED}"), _Unreadable()],
    ids=["forged-class", "unreadable-message"],
)
def test_a_store_refusal_named_or_worded_by_outside_text_still_raises_the_audit_write_error(
    failure: Exception,
) -> None:
    """``AuditWriteError``'s message formatted the store failure's class and message with an
    f-string: a driver's error whose class's ``__format__`` raised, or whose ``__str__``
    raised, replaced the ``AuditWriteError`` (and the result and record it carries) with
    that error, and a forged name or message wrote lines of its own in the error."""
    with pytest.raises(AuditWriteError) as raised:
        _fetch(_view(LookupError), _RaisingSink(failure))
    message = str(raised.value)
    _inert(message, 2000)
    assert raised.value.result.record.tool == "fetch_report"
    assert "could not be written" in message


def test_a_plain_store_refusal_is_quoted_as_it_is() -> None:
    with pytest.raises(AuditWriteError) as raised:
        _fetch(_view(LookupError), _RaisingSink(OSError("database is locked")))
    assert "(OSError: database is locked)" in str(raised.value)


def test_an_interrupt_named_by_outside_text_landing_in_the_write_keeps_going() -> None:
    """Ctrl-C (an application's ``KeyboardInterrupt`` subclass) inside the store's write:
    the note on it formatted its class's name with an f-string, so a name whose
    ``__format__`` raised replaced the interrupt with that error."""
    interrupt = _named(_Failing(FORGED), KeyboardInterrupt)
    with pytest.raises(interrupt) as raised:
        _fetch(_view(LookupError), _RaisingSink(interrupt()))
    (note,) = raised.value.__notes__
    _inert(note, 2000)
    assert "'Boom\\x1b[2J\\n##" in note


def test_a_plan_step_interrupted_by_a_class_named_by_outside_text_keeps_the_interrupt() -> None:
    """``execute_plan`` noted on the error of a step's call its class's name with an
    f-string: an interrupt whose class's ``__format__`` raised was replaced by that error,
    and a forged name wrote a line of its own in the traceback's notes."""
    interrupt = _named(_Failing(FORGED), KeyboardInterrupt)
    view = _view(interrupt)
    plan = normalize_plan([{"id": "s0", "tool": "fetch_report", "arguments": {"key": "k"}}], view)
    with pytest.raises(interrupt) as raised:
        execute_plan(
            view,
            plan,
            policy=ApprovalPolicy(view),
            audit=SQLiteAuditSink(),
            request_id="r",
            prompt_sha256="0" * 64,
        )
    notes = raised.value.__notes__
    assert any("stopped at step" in note for note in notes)
    for note in notes:
        _inert(note, 2000)


def test_a_store_refusal_under_an_interrupt_is_logged_without_its_raw_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The log line of a record refused while an interrupt goes on carried the store's
    error as ``exc_info``: its traceback printed the store's message raw (a driver quoting
    the refused row), and ran its ``__str__`` when the line was written."""
    interrupt = _named(_Failing(FORGED), KeyboardInterrupt)

    def confirm(request: object) -> bool:
        raise interrupt

    registry = Registry()

    @registry.tool(kind="write")
    def send_report(key: str) -> str:
        """Send a report to the customer.

        Args:
            key: The report's key.
        """
        return "sent"

    view = registry.view()
    refused = _named(_Failing(FORGED))(f"the row was refused: {FORGED}")
    with caplog.at_level(logging.ERROR, logger="veridic.executor"), pytest.raises(interrupt):
        execute(
            view,
            "send_report",
            {"key": "k"},
            policy=ApprovalPolicy(view),
            audit=_RaisingSink(refused),
            request_id="r",
            prompt_sha256="0" * 64,
            confirm=confirm,
        )
    (line,) = _lines(caplog, "veridic.executor")
    _inert(line, 8000)
    assert "the row was refused: " in line  # still recognisable


def test_a_concurrent_calls_error_named_by_outside_text_is_noted_on_the_one_raised() -> None:
    """Of a reply's concurrent calls, the error not raised was noted on the one raised with
    an f-string of its class's ``__qualname__`` and an unguarded ``str()``: a name whose
    ``__format__`` raised, or a message that could not be read, replaced the error raised
    with that one."""

    class _Stop(BaseException):
        """An application's own stop, raised by a handler."""

    stop = _named("Stop", _Stop)
    stop.__qualname__ = _Failing(FORGED)

    class _Silent(_Stop):
        def __str__(self) -> str:
            raise RuntimeError("unreadable")

    stops = iter([stop, _Silent])
    registry = Registry()

    @registry.tool(kind="query")
    async def fetch_report(key: str) -> str:
        """Fetch a report a worker built.

        Args:
            key: The report's key.
        """
        raise next(stops)("stopped")

    view = registry.view()
    calls = {
        "tool_calls": [
            ("c1", "fetch_report", '{"key": "a"}'),
            ("c2", "fetch_report", '{"key": "b"}'),
        ]
    }
    running = ModelGateway(ScriptedProvider([calls], asynchronous=True), audit=SQLiteAuditSink())
    composer = Composer().system(SYSTEM).user("Fetch both reports.")
    with pytest.raises(_Stop) as raised:
        asyncio.run(running.arun(composer, view, policy=ApprovalPolicy(view), request_id="r"))
    notes = [note for note in raised.value.__notes__ if "raised too" in note]
    assert len(notes) == 1
    _inert(notes[0], 2000)


@pytest.mark.parametrize(
    "error",
    [_named(_Failing(FORGED))("licence server down"), _Unreadable()],
    ids=["forged-class", "unreadable-message"],
)
def test_a_boot_check_error_named_or_worded_by_outside_text_still_marks_it_not_started(
    error: Exception,
) -> None:
    """A component's failed boot was described with an f-string of its error's
    ``__qualname__`` and an unguarded ``str()``: a name whose ``__format__`` raised, or a
    message that could not be read, made the boot raise that error instead of telling the
    component did not start."""
    if type(error) is not _Unreadable:
        type(error).__qualname__ = _Failing(FORGED)

    def boot() -> None:
        raise error

    registry = Registry("shop")
    registry.component("Billing", boot=boot, hint="Renew the licence.")
    registry.view()
    (state,) = registry.components()
    assert state.started is False
    _inert(state.detail, 2000)
