"""OpenTelemetry spans of the run: ``chat`` per model call, ``execute_tool`` per tool call.

Off by default, and free when off: veridic does not depend on OpenTelemetry.
:func:`instrument` (the ``otel`` extra: ``pip install 'veridic[otel]'``)
turns the spans on for the process, :func:`uninstrument` turns them off, and
:func:`instrumented` does both around a block (for tests). The gateway and
the executor read one module global; while it is ``None`` they make no span
and import nothing.

The spans follow the OpenTelemetry GenAI semantic conventions (status
Development; the vocabulary of semconv 1.37 and later, where the provider
is ``gen_ai.provider.name``):

- ``invoke_agent`` (kind ``INTERNAL``) around a whole
  :meth:`ModelGateway.run <veridic.ModelGateway.run>`, ``arun``, ``resume``
  or ``aresume``; the run's model calls and tool calls are its children
  (through the OpenTelemetry context, which follows threads' and asyncio
  tasks' context: concurrent queries of ``arun`` nest too);
- ``chat {model}`` (kind ``CLIENT``) per model call of ``send``, ``asend``,
  ``stream``, ``astream`` (the model escaped and clipped when it is not a
  plain name): from before the request is checked and sent until
  the answer is read (a stream's span ends when the stream ends or is
  closed; a stream dropped before either ends its span when it is collected,
  marked ``veridic.stream.dropped``);
- ``execute_tool {name}`` (kind ``INTERNAL``) per :func:`veridic.execute` or
  :func:`veridic.aexecute`: check, approval (a user's confirmation
  included) and dispatch. A call made outside a run is a child of whatever
  span is current, or a root span. A name the view's registry does not hold
  (the model invented it) names no span: the span is ``execute_tool``, its
  ``gen_ai.tool.name`` is ``_OTHER`` and ``veridic.tool.name_sha256`` its digest
  (the audit record keeps the name).
- ``guard_refused {name}`` (kind ``INTERNAL``) when a guard refuses an
  operation of a task or thread a call started, after the call ended (its
  follow-up ``BLOCKED`` record): an error, a child of the call's span;
  ``late_effect {name}`` when a delegated tool the call dispatched finished its
  effect after the call ended (a follow-up record too): not an error, it was
  allowed.

A run and its model calls carry the request id as ``gen_ai.conversation.id``:
a paused run's spans and its resume's (often in another trace, another
process) share it, and GenAI trace viewers group a conversation by it.

A model call's span names the server it went to, ``server.address`` and
``server.port``, from the host and port of the SDK client's ``base_url`` alone.

Besides ``gen_ai.*`` attributes each span carries veridic's: the request id,
the prompt's and tool list's sha256 (the audit record's), the approval, risk,
kind and outcome of a tool call, the kinds and origins of the system
message's spans (its provenance, never its text). No span holds prompt text,
arguments, results or error messages: the conventions make content opt-in,
and veridic does not offer it (an exception's message may quote a secret;
see :attr:`CallResult.told <veridic.CallResult.told>`): when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content,
:func:`instrument` says so in a warning instead.

Errors: the span's status is ``ERROR`` and ``error.type`` names the
exception's class when the SDK call raises, a check refuses the prompt or
the answer, or a tool call ends ``failed``, ``blocked`` (a guard refused an
operation) or ``refused`` (unknown, unavailable, invalid arguments: the
operation could not be done). A tool call an interrupt stops
(``KeyboardInterrupt``, a cancelled task) is recorded ``failed`` and its span
shows that record, with the interrupt's class as ``error.type``. A
``denied`` call is not an error: approval worked as it should; its
``veridic.outcome`` says so and its status stays unset.

OpenTelemetry is for observability and may be sampled or dropped; the audit
store is the record (see :mod:`veridic.run.audit`). So a tracer that fails
(a span processor or an exporter that raises) never fails the call it
traces: the failure is logged on ``veridic.telemetry`` (a warning, once per
span) and the call goes on, its span incomplete or missing. A span processor
that blocks blocks the call (OpenTelemetry runs ``on_end`` in the caller's
thread): export with a ``BatchSpanProcessor``, not a ``SimpleSpanProcessor``.

>>> from opentelemetry.sdk.trace import TracerProvider
>>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
>>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
>>> exporter = InMemorySpanExporter()
>>> tracing = TracerProvider()
>>> tracing.add_span_processor(SimpleSpanProcessor(exporter))
>>> registry = Registry()
>>> @registry.tool(kind="query")
... def get_weather(city: str) -> str:
...     '''Current weather in a city.
...
...     Args:
...         city: City name, e.g. "Oslo".
...     '''
...     return f"Sunny in {city}"
>>> view = registry.view()
>>> prompt = Composer().system(instruction("You report the weather.")).user("Oslo?").build()
>>> with instrumented(tracing):
...     result = execute(view, "get_weather", {"city": "Oslo"}, policy=ApprovalPolicy(view),
...                      audit=SQLiteAuditSink(":memory:"), request_id="req-1", prompt=prompt)
>>> [(span.name, span.attributes["veridic.outcome"]) for span in exporter.get_finished_spans()]
[('execute_tool get_weather', 'ok')]
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol, Self, TypeVar, cast
from urllib.parse import urlsplit

from veridic._extras import require
from veridic._sample import clip, message_shown, shown
from veridic._workflow_commands import inert_line
from veridic.errors import GuardDeniedError, VeridicError
from veridic.providers._base import PARTS, Usage
from veridic.run.audit import AuditRecord, CallOutcome
from veridic.text.prompt import PromptSpan, ToolCall
from veridic.tools.view import ToolView

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from veridic.providers._base import Adapter

__all__ = ["instrument", "instrumented", "is_instrumented", "uninstrument"]

SCOPE: Final = "veridic"
"""The instrumentation scope (tracer name) of every span veridic makes."""

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.37.0"

_ERRORS: Final = frozenset({CallOutcome.FAILED, CallOutcome.BLOCKED, CallOutcome.REFUSED})
"""The outcomes that are errors of the call (a denial is approval doing its job)."""

_GUARD_DENIED: Final = f"{GuardDeniedError.__module__}.{GuardDeniedError.__qualname__}"
"""``error.type`` of a guard's refusal, as :func:`error_type` names the class."""

_PLAIN: Final = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
"""A tool name fit for a span's name (others are named by the audit record's form)."""

_OTHER: Final = "_OTHER"
"""``gen_ai.tool.name`` of a name the view's registry does not hold: the conventions' value for
one outside the known set (see :func:`_tool_names`)."""


_TOOL_CALLS_SHOWN: Final = 64
"""How many of an answer's tool calls a chat span names in ``veridic.tool_calls`` (the
first, in order); ``veridic.tool_call_count`` says how many there were."""


_SERVED: Final = re.compile(r"[A-Za-z0-9_.:/@+\-]{0,256}")
"""An id, model name or finish reason as servers write them (``meta-llama/Llama-3-70b``,
an empty id), kept as it is."""


_PORTS: Final = {"https": 443, "http": 80}
"""``server.port`` of a base URL that names none: its scheme's."""


def _written(text: str, plain: re.Pattern[str] = _PLAIN) -> str:
    """A name or id the model or the server wrote, as a span may hold it: as it is when
    ``plain``, else escaped and clipped as an audit record quotes it (no control character,
    no length)."""
    return text if plain.fullmatch(text) is not None else clip(text)


_Value = str | bool | int | float | Sequence[str]
"""A span attribute's value, of the types veridic sets."""

_log: Final = logging.getLogger("veridic.telemetry")
"""Where a tracer's failure goes (the call it traced goes on)."""

_tracer: Tracer | None = None
"""The one global the hooks read: ``None`` while spans are off."""

_switch = threading.Lock()


def instrument(tracer_provider: TracerProvider | None = None) -> None:
    """Make spans for every model call, tool call and run of this process from now on.

    ``tracer_provider`` is where they go; ``None`` means OpenTelemetry's
    global provider (the one ``opentelemetry.trace.set_tracer_provider``
    sets, also when set later). Calling it again replaces the provider.

    Raises:
        MissingExtraError: ``opentelemetry-api`` is not installed
            (``pip install 'veridic[otel]'``).
        VeridicError: ``tracer_provider`` is not an OpenTelemetry ``TracerProvider``.
    """
    tracer = _tracer_of(tracer_provider, "instrument()")
    global _tracer
    with _switch:
        _tracer = tracer


def _tracer_of(tracer_provider: TracerProvider | None, where: str) -> Tracer:
    require("opentelemetry.trace", "otel", f"veridic.run.telemetry.{where}")
    from opentelemetry import trace

    if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
        raise VeridicError(
            f"{where} got a {type(tracer_provider).__name__} as tracer_provider: pass an "
            "OpenTelemetry TracerProvider (opentelemetry.sdk.trace.TracerProvider), or None for "
            "the global one"
        )
    tracer = trace.get_tracer(
        SCOPE, _version(), tracer_provider=tracer_provider, schema_url=SCHEMA_URL
    )
    _say_content_is_never_captured(where)
    return tracer


CAPTURE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable the OpenTelemetry GenAI instrumentations read to put prompts,
arguments and results in their spans (``true``; ``SPAN_ONLY``, ``EVENT_ONLY``,
``SPAN_AND_EVENT`` in the newer ones)."""

_ASKS_FOR_CONTENT: Final = frozenset({"true", "span_only", "event_only", "span_and_event"})
"""The values of :data:`CAPTURE_CONTENT` that ask for content (case aside): the
instrumentations read every other value (``false``, ``NO_CONTENT``, ``0``, a typo) as
none, so a warning for those would tell the operator they asked for what they turned off."""


def _say_content_is_never_captured(where: str) -> None:
    """Warn when :data:`CAPTURE_CONTENT` asks for content: veridic's spans never hold it.

    The operator who set it expects the prompts in the trace. Ignored in silence, it
    would have them look for content that is not coming, or take a trace without it for
    the whole story.
    """
    asked = os.environ.get(CAPTURE_CONTENT, "")
    if asked.strip().lower() not in _ASKS_FOR_CONTENT:
        return
    _log.warning(
        "%s is %s, but veridic's spans (turned on by %s) never hold prompts, arguments, "
        "results or error messages (they may quote the user's data or a secret); other "
        "instrumentations may still capture them. Find a span's content by its "
        "veridic.prompt_sha256, the digest its audit records and Prompt.sha256 carry, in "
        "what the application keeps (unset %s if veridic's spans were the ones it was for)",
        CAPTURE_CONTENT,
        clip(asked),
        where,
        CAPTURE_CONTENT,
    )


def uninstrument() -> None:
    """Make no more spans (those already started still end, where they were going)."""
    global _tracer
    with _switch:
        _tracer = None


def is_instrumented() -> bool:
    """Whether :func:`instrument` is in force."""
    return _tracer is not None


_blocks: list[tuple[object, Tracer]] = []
"""The open :func:`instrumented` blocks, in the order they began, each with its tracer."""

_outside: Tracer | None = None
"""The tracer in force when the first of the open blocks began."""


@contextmanager
def instrumented(tracer_provider: TracerProvider | None = None) -> Iterator[None]:
    """:func:`instrument` for the block, then back to what was in force before it.

    For tests: the switch is for the process, so blocks in concurrent
    threads or tasks see each other's. Blocks may end in any order: while
    one is open, the latest open one's provider is in force, and when the
    last ends, what was in force before the first began.
    """
    global _tracer, _outside
    tracer = _tracer_of(tracer_provider, "instrumented()")
    mine = object()
    with _switch:
        if not _blocks:
            _outside = _tracer
        _blocks.append((mine, tracer))
        _tracer = tracer
    try:
        yield
    finally:
        with _switch:
            _blocks[:] = [block for block in _blocks if block[0] is not mine]
            _tracer = _blocks[-1][1] if _blocks else _outside


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("veridic")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        return "0"


# --- the hooks the gateway and the executor call --------------------------------------------
#
# Each returns a no-op object while spans are off (one global read), so the call sites stay
# one line and cost nothing measurable.


class _Answer(Protocol):
    """What a chat span reads of a :class:`~veridic.Reply`."""

    @property
    def response_id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def tool_calls(self) -> tuple[ToolCall, ...]: ...
    @property
    def view(self) -> ToolView: ...


class _Called(Protocol):
    """What a tool span reads of a :class:`~veridic.CallResult`."""

    @property
    def record(self) -> AuditRecord: ...
    @property
    def error(self) -> Exception | None: ...


class _Counted(Protocol):
    """The model calls and tokens a run counts: a :class:`~veridic.RunResult`'s, or the
    :class:`~veridic.PausedRun`'s a resume counts on from."""

    @property
    def turns(self) -> int: ...
    @property
    def usage(self) -> Usage | None: ...


class _Ran(_Counted, Protocol):
    """What an agent span reads of a :class:`~veridic.RunResult`."""

    @property
    def outcomes(self) -> tuple[object, ...]: ...
    @property
    def paused(self) -> object: ...


A = TypeVar("A", bound=_Answer)
C = TypeVar("C", bound=_Called)
R = TypeVar("R", bound=_Ran)


class _Hook:
    """A span's ``with`` block: the span is current inside it; an exception ends it as an error."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class ChatSpan(_Hook):
    """A model call's span, as the gateway sees it (this base does nothing: spans are off)."""

    __slots__ = ()

    def sent(
        self,
        prompt_sha256: str,
        tools_sha256: str,
        tools: Sequence[str],
        spans: Sequence[PromptSpan],
        request: Mapping[str, object],
        options_sha256: str = "",
    ) -> None:
        """The request passed the gateway's checks and was recorded; ``request`` is what
        goes to the SDK (its parameters are shown, never its prompt), ``options_sha256``
        the digest of its options that the model call's record carries."""

    def answered(self, reply: A) -> A:
        """The whole answer was read: the span ends."""
        return reply

    def failed(self, error: BaseException) -> None:
        """The call raised (the SDK, a check, a stream cut short): the span ends as an error."""

    def closed(self) -> None:
        """The stream was closed before its end: the span ends (not an error)."""

    def handed(self) -> None:
        """The span outlives the ``with`` block: a stream ends it."""

    def held_by(self, stream: object) -> None:
        """``stream`` ends the span; if it is dropped before it ends or closes, the span ends
        then, marked incomplete and dropped."""


class ToolSpan(_Hook):
    """A tool call's span, as the executor sees it (this base does nothing: spans are off)."""

    __slots__ = ()

    def ended(self, result: C) -> C:
        """The call's record was written: the span ends."""
        return result

    def recorded(self, record: AuditRecord) -> None:
        """The record of a call that an exception leaving the ``with`` block ends: the
        handler stopped by an interrupt (``KeyboardInterrupt``, a cancelled task), or a
        ``confirm`` that raised or returned an awaitable to blocking code (the call is
        recorded denied). The span shows the record, and the exception ends it as an
        error."""


class AgentSpan(_Hook):
    """A run's span, as the gateway sees it (this base does nothing: spans are off)."""

    __slots__ = ()

    def ran(self, result: R, *, since: _Counted | None = None) -> R:
        """The run returned (answered, or paused for approvals): the span ends.

        ``since`` is the paused run a resume goes on from: the result counts on
        from its turns and tokens, the span counts only its own.
        """
        return result


_OFF_CHAT: Final = ChatSpan()
NO_CHAT: Final = _OFF_CHAT
"""The span of a stream made while spans were off (the streams' default)."""
_OFF_TOOL: Final = ToolSpan()
_OFF_AGENT: Final = AgentSpan()


def chat(provider: Adapter, request_id: object, *, streamed: bool) -> ChatSpan:
    """The span of one model call through ``provider`` (a no-op while spans are off)."""
    tracer = _tracer
    if tracer is None:
        return _OFF_CHAT
    return _LiveChat(tracer, provider, request_id, streamed)


def tool(name: object, request_id: object, view: object, call_id: object) -> ToolSpan:
    """The span of one tool call of the tool the model named ``name`` in ``view`` (a no-op
    while off).

    ``call_id`` is the model's id of the call, as :func:`veridic.execute` got it (the
    gateway and every framework adapter give it); a call a handler makes in turn has
    its own (none, unless it gives one).
    """
    tracer = _tracer
    if tracer is None:
        return _OFF_TOOL
    return _LiveTool(tracer, name, request_id, view, call_id)


def agent(provider: Adapter, request_id: object, *, resumed: bool) -> AgentSpan:
    """The span of one run (or resumed run) through ``provider`` (a no-op while off)."""
    tracer = _tracer
    if tracer is None:
        return _OFF_AGENT
    return _LiveAgent(tracer, provider, request_id, resumed)


def late(record: AuditRecord, *, refused: bool) -> None:
    """A follow-up record of a call that had ended: a guard refused an operation of a task or
    thread the call started (``refused``), or a delegated tool the call dispatched finished
    its effect after the call ended (not ``refused``: it happened).

    The call's own span has ended, often ``ok``; the follow-up gets a span of its own,
    started and ended now, a child of whatever span is current (the call's own, whose
    context the task or thread carries). A refusal is ``guard_refused {name}``, an error;
    an effect is ``late_effect {name}``, not an error (it was allowed while the call ran),
    its record's ``veridic.irreversible`` or ``veridic.wrote_instruction_fields`` saying
    which. Both records are ``BLOCKED`` (what makes a record a follow-up), so only the span
    tells a reader who looks for the effect that there is one to look for.
    Neither has a ``gen_ai.operation.name``: it is not a second call of the tool.
    """
    tracer = _tracer
    if tracer is None:
        return
    from opentelemetry.trace import Status, StatusCode

    name = record.tool
    what = "guard_refused" if refused else "late_effect"
    span_name = f"{what} {name}" if _PLAIN.fullmatch(name) is not None else what
    attributes: dict[str, _Value] = {**_record_attributes(record), "veridic.follow_up": True}
    if refused:
        attributes["error.type"] = _GUARD_DENIED
    try:
        span = tracer.start_span(span_name, attributes=attributes)
        if refused:
            span.set_status(Status(StatusCode.ERROR, f"{record.outcome.value}: {_GUARD_DENIED}"))
        span.end()
    except Exception as error:  # the follow-up and its record go on without the span
        _tracer_failed(span_name, "make", error)


# --- the live spans ---------------------------------------------------------------------------


def provider_name(api: str) -> str:
    """``gen_ai.provider.name`` of an adapter's ``api``: ``"openai.responses"`` -> ``"openai"``.

    >>> provider_name("anthropic.messages"), provider_name("scripted")
    ('anthropic', 'scripted')
    """
    return api.partition(".")[0] or "_OTHER"


def error_type(error: BaseException) -> str:
    """``error.type``: the class's qualified name (never the message, which may hold secrets),
    as :func:`~veridic._sample.shown` shows text.

    A class is not always named in code: a task queue's client (Celery's
    ``create_exception_cls``) or an RPC library makes the class of a remote error from the
    name the remote end sent, which can hold a terminal escape, a forged log line, a lone
    surrogate an exporter cannot encode, or thousands of characters.

    Read without running the class's code: the name is copied out of a ``str`` subclass,
    and a ``__module__`` that is not exactly text (a class made at run time may carry any
    object there) is left out, so the class is named by its qualified name alone. Code of
    the error's class that runs here and fails would fail the call it traces.

    >>> error_type(ValueError("a secret")), error_type(type("E\\n!", (Exception,), {})())
    ('ValueError', "'veridic.run.telemetry.E\\\\n!'")
    """
    kind = type(error)
    module, name = kind.__module__, str.__str__(kind.__qualname__)
    named_alone = type(module) is not str or module == "builtins"
    return shown(name if named_alone else f"{module}.{name}")


def _tracer_failed(span_name: str, what: str, error: Exception) -> None:
    """Log a tracer's failure (a span processor's or an exporter's bug): never raised.

    A span is observability. Raised, the failure would stand for the call it traced: a
    write that ran and was recorded would look failed to its caller, who may run it
    again; a failing ``on_start`` would stop every call before it ran.

    The message is an exporter's, which may quote what a collector sent back: it is
    written as :func:`~veridic._sample.shown` writes outside text, with nothing a CI
    runner would obey, and the traceback is formatted from its frames alone (``exc_info``
    would print the message again, raw).
    """
    _log.warning(
        "OpenTelemetry failed to %s the span %r (%s: %s); the call went on without it, and "
        "its audit record is the record: fix the tracer provider's span processors or "
        "exporter\n%s",
        what,
        span_name,
        inert_line(error_type(error)),
        message_shown(error),
        "".join(traceback.format_tb(error.__traceback__)).rstrip("\n"),
    )


class _Live:
    """A started span, current inside its ``with`` block, ended once.

    Every call into OpenTelemetry goes through :meth:`_use`, which contains what the
    tracer raises (see :func:`_tracer_failed`; logged once per span).
    """

    __slots__ = ("_ended", "_failed", "_handed", "_name", "_span", "_token")

    def _start(
        self,
        tracer: Tracer,
        name: str,
        client: bool,
        attributes: Mapping[str, _Value],
    ) -> None:
        from opentelemetry.trace import INVALID_SPAN, SpanKind

        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
        self._name = name
        self._failed = False
        self._token: Token[Context] | None = None
        self._ended = False
        self._handed = False
        self._span: Span = INVALID_SPAN  # a span that records nothing, if the start fails

        def start() -> None:
            self._span = tracer.start_span(name, kind=kind, attributes=attributes)

        self._use("start", start)

    def _use(self, what: str, act: Callable[[], object]) -> None:
        """Do ``act`` on the span; what the tracer raises is logged (once), never raised."""
        try:
            act()
        except Exception as error:
            if not self._failed:
                self._failed = True
                _tracer_failed(self._name, what, error)

    def _set(self, attributes: Mapping[str, _Value]) -> None:
        self._use("set attributes of", lambda: self._span.set_attributes(attributes))

    def __enter__(self) -> Self:
        self._enter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._exit(error)

    def _enter(self) -> None:
        from opentelemetry import context, trace

        def attach() -> None:
            self._token = context.attach(trace.set_span_in_context(self._span))

        self._use("make current", attach)

    def _exit(self, error: BaseException | None) -> None:
        from opentelemetry import context

        token = self._token
        if token is not None:
            self._token = None
            self._use("leave", lambda: context.detach(token))
        if error is not None:
            self._error(error_type(error), "raised")
        elif not self._handed:
            self._end()

    def _error(self, kind: str, what: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        if self._ended:
            return
        self._set({"error.type": kind})
        self._use(
            "set the status of",
            lambda: self._span.set_status(Status(StatusCode.ERROR, f"{what}: {kind}")),
        )
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            # In the lambda: a tracer whose span has no ``end`` fails in _use, not in the call.
            self._use("end", lambda: self._span.end())


def _record_attributes(record: AuditRecord) -> dict[str, str | bool]:
    """What a tool call's span shows of its audit record (never its detail: it may quote
    an exception's message)."""
    attributes: dict[str, str | bool] = {
        "gen_ai.tool.name": record.tool,
        "veridic.request_id": shown(record.request_id),
        "veridic.approval": record.approval.value,
        "veridic.outcome": record.outcome.value,
        "veridic.prompt_sha256": record.prompt_sha256,
        "veridic.tools_sha256": record.tools_sha256,
        "veridic.wrote_instruction_fields": record.wrote_instruction_fields,
        "veridic.irreversible": record.irreversible,
    }
    if record.kind is not None:
        attributes["veridic.kind"] = record.kind
    if record.risk is not None:
        attributes["veridic.risk"] = record.risk.value
    return attributes


def _request_id(request_id: object) -> dict[str, str]:
    """``veridic.request_id``, as :func:`~veridic._sample.shown` shows it (none when it is
    not text)."""
    return {"veridic.request_id": shown(request_id)} if isinstance(request_id, str) else {}


def _conversation(request_id: object) -> dict[str, str]:
    """``veridic.request_id``, and the same as ``gen_ai.conversation.id``: the id a paused
    run's spans share with its resume's (a resume goes on under the paused run's request
    id, often in another process), which GenAI trace viewers group a conversation by."""
    ids = _request_id(request_id)
    if ids:
        ids["gen_ai.conversation.id"] = ids["veridic.request_id"]
    return ids


def _registered(name: object, view: object) -> str | None:
    """``name`` when a span may be named by it: a plain name the view's registry holds
    (exposed or withheld), else ``None``.

    The model writes the name of a call; a span name is indexed and counted by trace
    backends (a metric series each), so a name the model invented, which a prompt
    injection can make anything (a key from the context included), never becomes one.
    """
    if not isinstance(name, str) or _PLAIN.fullmatch(name) is None:
        return None
    if not isinstance(view, ToolView):
        return None
    if name in view.names() or any(status.name == name for status in view.withheld()):
        return name
    return None


def _tool_names(name: object, view: object) -> dict[str, str]:
    """``gen_ai.tool.name`` of a call of ``name`` in ``view``: the name when the view's
    registry holds it, else ``_OTHER`` and ``veridic.tool.name_sha256``, the digest of what
    the model wrote (when it wrote text).

    The registry's names are the application's words, and a bounded set. Any other name is
    the model's text, which a prompt injection can make a key read from the context: a
    trace is read by more people, kept longer and sent further than the audit store, and
    trace backends group calls by this attribute (a series each). The digest tells the
    calls of one invented name from those of another without saying it; the audit record
    (``veridic.request_id`` and ``gen_ai.tool.call.id`` find it) keeps the name itself.
    """
    known = _registered(name, view)
    if known is not None:
        return {"gen_ai.tool.name": known}
    if not isinstance(name, str):
        return {"gen_ai.tool.name": _OTHER}
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return {"gen_ai.tool.name": _OTHER, "veridic.tool.name_sha256": digest}


def _server(provider: Adapter) -> dict[str, str | int]:
    """``server.address`` and ``server.port`` of the adapter's SDK client (its ``base_url``),
    none when the client has no base URL (:class:`~veridic.ScriptedProvider`, an adapter of
    the application's own).

    Only the host and the port: a base URL may carry a user name and a password, or a key
    in its query, and a span is read by whoever reads the traces. A client whose
    ``base_url`` cannot be read or parsed gives none, logged (the call goes on).
    """
    client = provider.client
    try:
        base_url = getattr(client, "base_url", None)
        if base_url is None:
            return {}
        url = urlsplit(str(base_url))
        host, port = url.hostname, url.port  # port: ValueError when it is not a number
    except Exception as error:
        _log.warning(
            "the base URL of %s's client could not be read (%s), so its chat spans have no "
            "server.address: check the client's base_url",
            provider,
            error_type(error),
        )
        return {}
    if not host:
        return {}
    shown: dict[str, str | int] = {"server.address": _written(host, _SERVED)}
    port = port if port is not None else _PORTS.get(url.scheme)
    if port is not None:
        shown["server.port"] = port
    return shown


_NUMBERS: Final = (
    ("gen_ai.request.temperature", "temperature"),
    ("gen_ai.request.top_p", "top_p"),
    ("gen_ai.request.top_k", "top_k"),
    ("gen_ai.request.frequency_penalty", "frequency_penalty"),
    ("gen_ai.request.presence_penalty", "presence_penalty"),
)
"""The request's sampling parameters the GenAI conventions name (each a double), by key."""

_MAX_TOKENS: Final = ("max_completion_tokens", "max_output_tokens", "max_tokens")
"""The keys of the output-token bound, in the order the APIs prefer them (chat completions
take ``max_completion_tokens`` over the older ``max_tokens``; the Responses API's is
``max_output_tokens``; Anthropic's ``max_tokens``)."""

_FORMATS: Final = (("response_format",), ("text", "format"), ("output_config", "format"))
"""Where each API takes the answer's format: chat completions, Responses, Anthropic."""

_OUTPUT_TYPES: Final = {"json_object": "json", "json_schema": "json", "text": "text"}
"""``gen_ai.output.type`` of a format's ``type``."""

_STOPS_SHOWN: Final = 16
"""How many stop sequences a span names (OpenAI takes 4; others more)."""


def _request_attributes(request: Mapping[str, object]) -> dict[str, _Value]:
    """The request parameters the GenAI conventions name (``gen_ai.request.*``,
    ``gen_ai.output.type``), as sent: ``extra_body``'s keys over the others, as the SDKs
    merge it. A value of another type than the conventions say (``True``, ``NaN``, a
    string, a number past a double or a 64-bit int) is left out; the request goes as it
    was built."""
    body = request.get("extra_body")
    merged: Mapping[str, object] = (
        {**request, **{k: v for k, v in body.items() if isinstance(k, str)}}
        if isinstance(body, Mapping)
        else request
    )
    shown: dict[str, _Value] = {}
    for name, key in _NUMBERS:
        number = _double(merged.get(key))
        if number is not None:
            shown[name] = number
    for key in _MAX_TOKENS:
        value = merged.get(key)
        if _int64(value):
            shown["gen_ai.request.max_tokens"] = cast(int, value)
            break
    seed = merged.get("seed")
    if _int64(seed):
        shown["gen_ai.request.seed"] = cast(int, seed)
    stops = merged.get("stop", merged.get("stop_sequences"))
    stops = (stops,) if isinstance(stops, str) else stops
    if isinstance(stops, list | tuple) and stops and all(isinstance(s, str) for s in stops):
        shown["gen_ai.request.stop_sequences"] = tuple(
            _written(stop, _SERVED) for stop in stops[:_STOPS_SHOWN]
        )
    for path in _FORMATS:
        kind = _path(merged, (*path, "type"))
        if isinstance(kind, str) and kind in _OUTPUT_TYPES:
            shown["gen_ai.output.type"] = _OUTPUT_TYPES[kind]
            break
    return shown


def _double(value: object) -> float | None:
    """``value`` as the double a span shows, or ``None``: not an ``int`` or ``float`` (a
    ``bool`` is neither), not finite, or a whole number past the doubles (``10**400``,
    whose conversion raises OverflowError in the gateway, before the request is sent)."""
    if type(value) is int:
        try:
            value = float(value)
        except OverflowError:
            return None
    return value if type(value) is float and math.isfinite(value) else None


def _int64(value: object) -> bool:
    """Whether ``value`` is an ``int`` (not a ``bool``) an exporter can send: OTLP's
    integers are 64-bit, and an exporter that meets a larger one drops the span's batch."""
    return type(value) is int and -(2**63) <= value < 2**63


def _path(value: object, path: Sequence[str]) -> object:
    """The value at ``path`` of nested mappings (``None`` where one is missing)."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _model(model: object) -> str:
    """The adapter's model as a chat span's name and ``gen_ai.request.model`` hold it: as a
    server's name is shown (as it is when it looks like one, else escaped and clipped).

    The application names the model, but often from a setting, an environment variable or
    a request: a span name is indexed by every trace backend and shown in every viewer, so
    it gets no escape sequence and no 5000 characters.
    """
    return _written(str(model), _SERVED)


class _LiveChat(_Live, ChatSpan):
    __slots__ = ()

    def __init__(
        self, tracer: Tracer, provider: Adapter, request_id: object, streamed: bool
    ) -> None:
        model = _model(provider.model)
        self._start(
            tracer,
            f"chat {model}",
            True,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider_name(provider.api),
                "gen_ai.request.model": model,
                "veridic.api": provider.api,
                "veridic.streamed": streamed,
                **_server(provider),
                **_conversation(request_id),
            },
        )

    def sent(
        self,
        prompt_sha256: str,
        tools_sha256: str,
        tools: Sequence[str],
        spans: Sequence[PromptSpan],
        request: Mapping[str, object],
        options_sha256: str = "",
    ) -> None:
        self._set(
            {
                "veridic.prompt_sha256": prompt_sha256,
                "veridic.tools_sha256": tools_sha256,
                "veridic.options_sha256": options_sha256,
                "veridic.tools": tuple(tools),
                "veridic.system.kinds": tuple(span.kind for span in spans),
                "veridic.system.origins": tuple(span.origin for span in spans),
                **_request_attributes(request),
            }
        )

    def answered(self, reply: A) -> A:
        self._set(
            {
                # The server writes these three (a proxy may write anything): as the model's names.
                "gen_ai.response.id": _written(reply.response_id, _SERVED),
                "gen_ai.response.model": _written(reply.model, _SERVED),
                "gen_ai.response.finish_reasons": (_written(reply.stop_reason, _SERVED),),
                # The model decides how many calls an answer holds (thousands, looping or told
                # to): the span names the first few and counts them all.
                "veridic.tool_calls": tuple(
                    _registered(call.name, reply.view) or _OTHER
                    for call in reply.tool_calls[:_TOOL_CALLS_SHOWN]
                ),
                "veridic.tool_call_count": len(reply.tool_calls),
            }
        )
        if reply.usage is not None:
            self._set(_usage_attributes(reply.usage))
        self._end()
        return reply

    def failed(self, error: BaseException) -> None:
        self._error(error_type(error), "raised")

    def closed(self) -> None:
        if not self._ended:
            self._set({"veridic.stream.incomplete": True})
        self._end()

    def handed(self) -> None:
        self._handed = True

    def held_by(self, stream: object) -> None:
        # A stream nobody reads to its end nor closes (a ``break`` without ``with``, a web
        # client gone) would leave its span open for ever, and the model call out of every
        # trace. The finalizer holds the span, not the stream.
        weakref.finalize(stream, self._dropped)

    def _dropped(self) -> None:
        if not self._ended:
            self._set({"veridic.stream.dropped": True})
        self.closed()


class _LiveTool(_Live, ToolSpan):
    __slots__ = ("_names", "_record")

    def __init__(
        self, tracer: Tracer, name: object, request_id: object, view: object, call_id: object
    ) -> None:
        self._record: AuditRecord | None = None
        """the record the executor handed over before an interrupt left the ``with`` block"""
        self._names = _tool_names(name, view)
        """``gen_ai.tool.name`` (and the invented name's digest), over the record's form"""
        attributes: dict[str, str | bool | int | Sequence[str]] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.type": "function",
            **_request_id(request_id),
            **self._names,
        }
        if isinstance(call_id, str) and call_id:
            attributes["gen_ai.tool.call.id"] = _written(call_id)
        known = _registered(name, view)
        self._start(
            tracer, "execute_tool" if known is None else f"execute_tool {known}", False, attributes
        )

    def __enter__(self) -> _LiveTool:
        self._enter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The one way a span that an error ends shows its call's record: the record the
        # executor handed over (the call ran, then an interrupt came), else the one an
        # AuditWriteError carries (the call ran, its record could not be written), raised
        # itself or under the interrupt that came while the record was being written.
        if error is not None and not self._ended:
            record = self._record or _carried(error)
            if record is not None:
                self._recorded(record)
        self._exit(error)

    def _recorded(self, record: AuditRecord) -> None:
        self._set({**_record_attributes(record), **self._names})

    def recorded(self, record: AuditRecord) -> None:
        self._record = record

    def ended(self, result: C) -> C:
        record = result.record
        self._recorded(record)
        if record.outcome in _ERRORS:
            error = result.error
            kind = error_type(error) if error is not None else record.outcome.value
            self._error(kind, record.outcome.value)
        self._end()
        return result


def _carried(error: BaseException) -> AuditRecord | None:
    """The record of a call that ran, as an :class:`~veridic.AuditWriteError` carries it:
    ``error`` itself, or the error it was raised during (an interrupt raised while the
    record was being written; a few links at most, and no cycle followed)."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen and len(seen) < 8:
        seen.add(id(link))
        record = getattr(getattr(link, "result", None), "record", None)
        if isinstance(record, AuditRecord):
            return record
        link = link.__context__
    return None


class _LiveAgent(_Live, AgentSpan):
    __slots__ = ()

    def __init__(
        self, tracer: Tracer, provider: Adapter, request_id: object, resumed: bool
    ) -> None:
        self._start(
            tracer,
            "invoke_agent",
            False,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": provider_name(provider.api),
                "gen_ai.request.model": _model(provider.model),
                "veridic.resumed": resumed,
                **_conversation(request_id),
            },
        )

    def ran(self, result: R, *, since: _Counted | None = None) -> R:
        turns, usage = _own(result, since)
        shown: dict[str, str | bool | int | Sequence[str]] = {
            "veridic.turns": turns,
            "veridic.run.tool_calls": len(result.outcomes),
            "veridic.paused": result.paused is not None,
        }
        if usage is not None:
            shown.update(_usage_attributes(usage))
        self._set(shown)
        self._end()
        return result


def _own(result: _Counted, since: _Counted | None) -> tuple[int, Usage | None]:
    """The model calls and tokens of ``result`` that are not ``since``'s.

    A resumed run counts on from its paused part, so that its limits hold for
    the whole run; its span covers only the model calls made under it, as its
    ``chat`` children and its ``veridic.run.tool_calls`` do. Summed over a
    request's agent spans, the paused part would otherwise count twice (and a
    stored :class:`~veridic.PausedRun` edited to say any usage would say it in
    the trace of the resume).

    A part is stated in the resumed part as it is in the whole run's sum: a sum states a
    part only when every answer of the run did (:meth:`Usage.__add__ <veridic.Usage>`),
    those after the pause included, so a part the whole states, the resumed part states
    too, and one it does not, no span of it can say.
    """
    if since is None:
        return result.turns, result.usage
    usage, before = result.usage, since.usage
    if usage is not None and before is not None:
        # A paused run of format 4 kept the two totals only: a part it lost counts from 0.
        usage = Usage(
            usage.input_tokens - before.input_tokens,
            usage.output_tokens - before.output_tokens,
            **{part: max(0, getattr(usage, part) - getattr(before, part)) for part in PARTS},
            stated=frozenset(part for part in PARTS if usage.part(part) is not None),
        )
    return result.turns - since.turns, usage


_USAGE: Final = (
    ("gen_ai.usage.input_tokens", "input_tokens"),
    ("gen_ai.usage.output_tokens", "output_tokens"),
    ("gen_ai.usage.cache_read.input_tokens", "cache_read_input_tokens"),
    ("gen_ai.usage.cache_creation.input_tokens", "cache_creation_input_tokens"),
    ("gen_ai.usage.reasoning.output_tokens", "reasoning_output_tokens"),
)
"""The GenAI conventions' name of each count of a :class:`~veridic.Usage`."""


def _usage_attributes(usage: Usage) -> dict[str, int]:
    """The two totals, and each part the provider stated (:meth:`Usage.part
    <veridic.Usage.part>`), a stated 0 included: a cache read of 0 says nothing came from
    the cache, as ``veridic audit`` shows it. A part it did not state is left out, since
    0 would say that too (the provider may not break its counts down at all).

    A count past 64 bits is left out too: each answer's fit (they are checked), but a
    run's sum of them need not, and an OTLP exporter that meets one drops the whole batch
    of spans it is in."""
    totals = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    counts = {**totals, **{part: usage.part(part) for part in PARTS}}
    shown = {name: counts[key] for name, key in _USAGE}
    return {name: n for name, n in shown.items() if n is not None and _int64(n)}
