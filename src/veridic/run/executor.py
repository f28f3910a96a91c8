"""The executor: approve, dispatch under guard, record. One audit record per call, always.

:func:`execute` (and :func:`aexecute` for ``async`` code) is the road from a
model's tool call to its effect (see "The road data takes" in docs/design.md):

1. the name is checked against the view that produced the prompt; an unknown,
   unavailable or denied tool, or invalid arguments, is *refused* and nothing
   runs;
2. the :class:`~veridic.ApprovalPolicy` decides the approval mode, asking the
   user through ``confirm`` when its rules say so; a denied call does not run;
3. the handler runs inside :func:`~veridic.tools.guards.dispatching`, so the guards
   in store code judge this call, the one the agent dispatched directly; its
   result must be finished when it returns (a generator, an iterator or an
   awaitable left for later is refused: see :meth:`PreparedCall.invoke
   <veridic.tools.view.PreparedCall.invoke>`), and its authority ends with it;
4. an :class:`~veridic.AuditRecord` is written whatever happened: refused,
   denied, blocked by a guard, failed, or done. A guard that fires later, in
   a task or thread the call started, is refused and gets a follow-up record
   (:attr:`AuditRecord.follow_up <veridic.AuditRecord.follow_up>`).

Each record carries the digest of the arguments as the model gave them
(:func:`~veridic.run.records.arguments_sha256`, taken before they are parsed
or validated, so a refused call's too) and the seconds its handler ran
(``0.0`` for a call that never ran).

The store is reached as the caller's code runs: :func:`execute` calls the
sink's ``write``; :func:`aexecute` awaits its ``awrite`` when it has one (an
:class:`AsyncAuditSink`, such as :class:`~veridic.SQLiteAuditSink` or
:class:`~veridic.AsyncPostgresAuditSink`), so the event loop never waits on
the store, and calls ``write`` otherwise. A store with only ``awrite``
serves :func:`aexecute` and the async gateway; :func:`execute` refuses it.

Any name the model writes is refused or run, and recorded: a name with
quotes, newlines, NUL, lone surrogates, 100 KB of text or nothing at all is
an unknown tool, recorded escaped and clipped (see :mod:`veridic.run.audit`).

Errors from the call are returned in :class:`CallResult`, not raised, so the
agent loop can answer the model (``result.error``) and carry on; only misuse
of the executor itself raises.

>>> from veridic import ApprovalPolicy, Prompt, Registry, SQLiteAuditSink, instruction
>>> registry = Registry()
>>> @registry.tool(kind="write")
... def rename_fixture(name: str, new_name: str) -> str:
...     \'\'\'Rename a golden fixture; the old name is kept as an alias.
...
...     Args:
...         name: The fixture.
...         new_name: Its new name.
...     \'\'\'
...     return new_name
>>> view = registry.view()
>>> policy = ApprovalPolicy(view)
>>> policy.allow_always("rename_fixture")
>>> audit = SQLiteAuditSink(":memory:")
>>> prompt = Composer().system(instruction("You maintain fixtures.")).build()
>>> result = execute(view, "rename_fixture", {"name": "a", "new_name": "b"}, policy=policy,
...                  audit=audit, request_id="req-1", prompt=prompt)
>>> result.value, result.record.approval, result.record.outcome
('b', <ApprovalMode.ALWAYS_RULE: 'always_rule'>, <CallOutcome.OK: 'ok'>)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import re
import threading
import time
import traceback
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, NoReturn, TypedDict

from pydantic_core import to_jsonable_python

from veridic._counted import counted
from veridic._exception_groups import leaves as _leaves
from veridic._sample import (
    class_named,
    clip,
    cut_short,
    error_message,
    message_shown,
    quoted,
    traceback_shown,
)
from veridic._words import a_type
from veridic.errors import (
    AlwaysAllowRefusedError,
    ApprovalDeniedError,
    AuditWriteError,
    GuardDeniedError,
    IncompletePlanError,
    InvalidArgumentsError,
    UnknownToolError,
    VeridicError,
)
from veridic.run import telemetry as _telemetry
from veridic.run._audit_writes import Sink
from veridic.run.approval import (
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    Confirm,
    _deny_rules,
    _request_of,
)
from veridic.run.audit import AsyncAuditSink, AuditSink
from veridic.run.records import (
    _FOLLOW_UP,
    AuditRecord,
    CallOutcome,
    _recorded_tool,
    _storable,
    arguments_sha256,
)
from veridic.text.prompt import Prompt
from veridic.text.provenance import UntrustedText, untrusted
from veridic.tools.guards import (
    _NO_APPLICATION_FRAME,
    DispatchScope,
    GuardEvent,
    LateReporter,
    dispatching,
)
from veridic.tools.plan import NormalizedPlan, PlanStep, _name, normalize_plan
from veridic.tools.risk import Risk
from veridic.tools.status import _hidden_error
from veridic.tools.tool import Tool
from veridic.tools.view import PreparedCall, ToolView

__all__ = [
    "AsyncConfirm",
    "CallResult",
    "PlanRun",
    "aexecute",
    "aexecute_plan",
    "execute",
    "execute_plan",
    "tools_sha256",
]

AsyncConfirm = Callable[[ApprovalRequest], "bool | Awaitable[bool]"]
"""Asks the user about a pending call from async code; may return an awaitable."""

_DETAIL_LIMIT: Final = 200
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_REQUEST_ID_LIMIT: Final = 4096
"""The longest request id a call takes: every record of the request keeps it whole (an
application may take it from a client's header, which an attacker writes)."""
_RECORD_SHOWN: Final = 2 * _REQUEST_ID_LIMIT
"""Characters of an unwritten record's ``repr`` a log line keeps (:func:`_unwritten_under`):
a record of the longest request id whole, but not a call id of a megabyte."""
_log = logging.getLogger("veridic.executor")
_UNRENDERED: Final = object()
"""A :class:`CallResult` whose value was not rendered inside a dispatch (made by hand)."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """What became of one call: the handler's value or the error, and its audit record."""

    record: AuditRecord
    value: object = None
    error: Exception | None = None
    _plain: object = field(default=_UNRENDERED, repr=False, compare=False)
    """The value as JSON data, rendered inside the call's dispatch (see :attr:`told`)."""
    _message: str | None = field(default=None, repr=False, compare=False)
    """The handler's error's message, read inside the call's dispatch (see :attr:`told`)."""

    @property
    def outcome(self) -> CallOutcome:
        return self.record.outcome

    @property
    def ok(self) -> bool:
        return self.record.outcome is CallOutcome.OK

    def unwrap(self) -> object:
        """The handler's value; raises the call's error when it did not succeed."""
        if self.error is not None:
            raise self.error
        return self.value

    @property
    def json_value(self) -> object:
        """The value as JSON data (a ``str`` as it is), as :attr:`told` writes it.

        Rendered inside the call's dispatch by :func:`execute` (see :attr:`told`); for a
        result made by hand, rendered when read. Write the value from this, not from
        ``value``, wherever it is shown: rendering it again would run its code again,
        after the dispatch, unguarded.
        """
        return self._plain if self._plain is not _UNRENDERED else _plain(self.value)

    @property
    def told(self) -> UntrustedText:
        """What the model is told of this call (untrusted text, source ``tool:<name>``).

        The value as text: a ``str`` as it is, anything else as JSON, pydantic
        models and dataclasses included (pydantic's ``to_jsonable_python``;
        what JSON cannot hold, as ``str``). :func:`execute` renders it inside
        the call's dispatch, once: rendering runs code of the result (a
        ``__str__``, a pydantic ``computed_field`` or serializer), which the
        guards must judge as part of the call, and which must not run again
        each time the text is read. A call that did not succeed says
        why: veridic's own message (unknown, unavailable, denied, invalid
        arguments, a guard) or a handler's :class:`~veridic.ToolError` (or the
        messages of an exception group that holds only such errors, as a
        ``TaskGroup`` raises them); of any other exception only its type,
        because its message may hold what the model must not read. The record
        keeps the message (clipped). A handler's error is read once, inside the
        dispatch, as its result is: an exception's ``__str__`` is code of the
        call too.
        """
        error = self.error
        source = f"tool:{self.record.tool}"
        if error is None:
            plain = self.json_value
            if isinstance(plain, str):
                return untrusted(plain, source=source)
            return untrusted(json.dumps(plain, ensure_ascii=False), source=source)
        if _told_whole(error):
            message = self._message if self._message is not None else _message(error)
            return untrusted(f"error: {message}", source=source)
        return untrusted(
            f"error: the tool failed ({class_named(error)}); the application's log has what "
            "went wrong",
            source=source,
        )


def _plain(value: object) -> object:
    """``value`` as JSON data for the model: a ``str`` as it is, anything else as pydantic
    writes it (what JSON cannot hold, as ``str``). Runs code of the value: call it inside
    the dispatch.

    Only an exact ``str`` is kept as it is: a subclass's methods (``__str__``,
    ``__format__``, ``replace``) would run again wherever the text is fenced or
    printed, after the dispatch, unguarded; pydantic copies its characters into a
    plain ``str`` without calling any of them.
    """
    if type(value) is str:
        return value
    return to_jsonable_python(value, fallback=str)


def execute(
    view: ToolView,
    name: str,
    arguments: Mapping[str, object] | str | None = None,
    *,
    policy: ApprovalPolicy,
    audit: AuditSink | AsyncAuditSink,
    request_id: str,
    prompt: Prompt | str | None = None,
    prompt_sha256: str | None = None,
    confirm: Confirm | None = None,
    tools_digest: str | None = None,
    context: object = None,
    call_id: str = "",
) -> CallResult:
    """Run one model tool call: check, approve, dispatch under guard, record.

    ``prompt`` is the :class:`~veridic.Prompt` the model answered; where only its hash
    was kept (a call resumed later), pass ``prompt_sha256=`` instead (one of the two;
    a ``str`` in ``prompt=`` still works, with a ``DeprecationWarning``);
    ``tools_digest`` the hash of the tool list sent with it (default:
    :func:`tools_sha256` of ``view``). ``confirm`` asks the user
    about a call the policy will not decide alone; without it such a call
    is denied. Only ``True`` confirms; any other answer denies the call, and
    the record says the user refused only for ``False`` (else what
    ``confirm`` answered).

    ``context`` is the application's per-request object (the user, a DB
    session): a handler that declares a ``ToolContext[X]`` parameter gets
    ``ToolContext(context, request_id, tool name)`` there; other tools
    ignore it. It is not an argument: never in the specs, the approval
    request or the audit record (see :mod:`veridic.tools.context`).

    ``call_id`` is the provider's id of the model's tool call (``ToolCall.id``),
    kept in the record (:attr:`AuditRecord.call_id <veridic.AuditRecord.call_id>`,
    a NUL or lone surrogate escaped as elsewhere): pass it for every call a model
    made, since it is how :meth:`ModelGateway.resume <veridic.ModelGateway.resume>`
    sees that a paused run's waiting call already ran. ``""`` for a call no model
    named (a call run by hand; :func:`execute_plan` passes ``"plan step <id>"``).

    ``name`` is whatever the model wrote: a name the view does not expose is
    refused (never run) and recorded, however odd its characters. A handler
    that returns a lazy value (a generator, an iterator, a coroutine) fails
    the call: outcome ``FAILED``, its ``VeridicError`` in ``result.error``.
    A guarded operation attempted after the call returned, by a task or
    thread it started, is refused and written to ``audit`` as a follow-up
    record (same request and tool, outcome ``BLOCKED``); when that write
    fails, the guard's ``GuardDeniedError`` is chained to the sink's error,
    which is also logged on ``veridic.guards``.

    ``audit`` needs a blocking ``write``: a store that only has ``awrite``
    (:class:`~veridic.AsyncPostgresAuditSink`) is refused before anything
    runs; use :func:`aexecute`, or :class:`~veridic.PostgresAuditSink`.

    Raises:
        VeridicError: misuse: ``audit`` has no ``write`` (an async-only store:
            use :func:`aexecute`), ``policy`` belongs to another view, the tool is
            ``async`` (use :func:`aexecute`), ``prompt`` is not a prompt or
            a sha256, ``tools_digest`` is not a sha256, ``request_id`` is
            not a non-empty string a store can keep, or the tool asks for a
            ``ToolContext[X]`` and ``context`` is not an ``X`` (``None``: none
            was given), or ``call_id`` is not a string, or ``policy`` (a subclass)
            answered outside the approval contract: no approval for a write or a
            high-risk tool, a call confirmed before anyone was asked, a mode that is
            no ``ApprovalMode``, a request that describes another tool or other
            arguments than the call that runs, or one of a subclass of
            ``ApprovalRequest`` (whose ``answer`` could speak for the user). Raised once the
            call was checked against the view, before approval; nothing runs and
            nothing is recorded. Or ``confirm``
            returned an awaitable (an ``async def``: use :func:`aexecute`); the
            call did not run and is recorded denied.
        AlwaysAllowRefusedError: ``policy`` (a subclass) allowed a high-risk
            tool by an always rule; nothing runs and nothing is recorded.
        AuditWriteError: the handler ran but its audit record could not be
            written; the error holds the call's result and the record.
        AuditRecordError, sqlite3.Error: the audit record of a call that did
            not run (refused, denied) could not be written (the call's own
            errors are in the result, never raised).
        BaseException: whatever ``confirm`` or the handler raised that is
            not an ``Exception`` (``KeyboardInterrupt``), after recording it;
            when the record cannot be written, the interrupt still goes on and
            the store's failure is logged on ``veridic.executor``.
    """
    # The call's span (a no-op unless veridic.run.telemetry.instrument() was called).
    with _telemetry.tool(name, request_id, view, call_id) as span:
        answered = _answered(prompt, prompt_sha256, "execute")
        call = _Call(
            view, name, policy, audit, request_id, answered, tools_digest, arguments, call_id
        )
        checked = call.check(arguments, sync=True, context=context)
        if isinstance(checked, CallResult):
            return _raised_if_guarded(span.ended(call.stored(checked)))
        prepared, request = checked
        mode, answer = request.mode, None
        if mode is None:
            mode, answer = call.ask(prepared.tool, request, confirm, span)
        if mode is ApprovalMode.DENIED:
            denied = call.denied(prepared.tool, request, asked=confirm is not None, answer=answer)
            return span.ended(call.stored(denied))
        value: object = None
        error: BaseException | None = None
        late = call.reporter(prepared.tool, mode)
        with dispatching(
            prepared.tool.name,
            prepared.tool.risk,
            mode,
            request_id=request_id,
            on_late=late,
            kind=prepared.tool.kind,
            denied=_deny_rules(policy),
        ) as scope:
            started = time.perf_counter()
            try:
                value = prepared.invoke()
            except BaseException as raised:
                error = raised
            ran = _rendered(_Ran(prepared.tool, mode, scope, value, error, _since(started)))
        # The scope is closed: its events are final, and later guards go to the reporter.
        return span.ended(call.ended(ran, span))


async def aexecute(
    view: ToolView,
    name: str,
    arguments: Mapping[str, object] | str | None = None,
    *,
    policy: ApprovalPolicy,
    audit: AuditSink | AsyncAuditSink,
    request_id: str,
    prompt: Prompt | str | None = None,
    prompt_sha256: str | None = None,
    confirm: AsyncConfirm | None = None,
    tools_digest: str | None = None,
    context: object = None,
    call_id: str = "",
) -> CallResult:
    """:func:`execute` for async code: awaits ``async`` handlers and an async ``confirm``.

    The dispatch context follows the handler's awaits (a context variable of
    the task), so guards in async store code judge this call too. A task the
    handler starts and does not await inherits the context but not the
    authority: once ``aexecute`` has returned, its guarded operations are
    refused and recorded as follow-ups, as for :func:`execute`. The awaited
    result must be finished (not a generator, an async generator, an
    iterator or another awaitable). ``context`` is given to a handler that
    asks for it, as for :func:`execute` (and a mismatch raises the same way).

    Records go to ``audit.awrite`` when the sink has it (a coroutine
    function: :class:`AsyncAuditSink`), so the loop never waits on the store,
    else to ``audit.write``. An awaited write runs to its end even if the
    task awaiting ``aexecute`` is cancelled meanwhile (its failure is then
    logged on ``veridic.executor``): a call that ran keeps its record. A
    follow-up record (a guard that fires after the call ended) is written
    by the guard's own thread or task, in a function that cannot await:
    through ``write`` when the sink has one; for an async-only sink,
    ``awrite`` goes to the loop the call ran on, as a task of its own from a
    task of that loop (a failure is logged on ``veridic.executor``, with the
    record), and waited for from another thread (a failure reaches the
    guard's refusal, as for ``write``).
    """
    with _telemetry.tool(name, request_id, view, call_id) as span:
        answered = _answered(prompt, prompt_sha256, "aexecute")
        call = _Call(
            view,
            name,
            policy,
            audit,
            request_id,
            answered,
            tools_digest,
            arguments,
            call_id,
            sync=False,
        )
        checked = call.check(arguments, sync=False, context=context)
        if isinstance(checked, CallResult):
            return _raised_if_guarded(span.ended(await call.astored(checked)))
        prepared, request = checked
        mode, answer = request.mode, None
        if mode is None:
            try:
                answer = confirm(request) if confirm is not None else False
                if inspect.isawaitable(answer):
                    answer = await answer
            except BaseException as raised:
                asked = call.confirm_raised(prepared.tool, request)
                span.recorded(asked)
                await call.awrite_asked(asked, raised)
                raise
            mode = request.answer(answer is True)
        if mode is ApprovalMode.DENIED:
            denied = call.denied(prepared.tool, request, asked=confirm is not None, answer=answer)
            return span.ended(await call.astored(denied))
        value: object = None
        error: BaseException | None = None
        late = call.reporter(prepared.tool, mode)
        with dispatching(
            prepared.tool.name,
            prepared.tool.risk,
            mode,
            request_id=request_id,
            on_late=late,
            kind=prepared.tool.kind,
            denied=_deny_rules(policy),
        ) as scope:
            started = time.perf_counter()
            try:
                value = await prepared.ainvoke()
            except BaseException as raised:
                error = raised
            ran = _rendered(_Ran(prepared.tool, mode, scope, value, error, _since(started)))
        return span.ended(await call.aended(ran, span))


# --- plans ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanRun:
    """What became of a plan :func:`execute_plan` ran: each step that ran, with its call's
    result (and so its audit record), and each step that did not run.

    Every step of the plan is in exactly one of :attr:`ran` and :attr:`not_run`. Only
    the last step of :attr:`ran` may have failed (or been denied, refused, blocked):
    the plan stops at the first step that does not succeed.
    """

    ran: tuple[tuple[PlanStep, CallResult], ...]
    """The steps that ran (their calls were made), in the order they ran, with results."""
    not_run: tuple[PlanStep, ...]
    """The steps after the one the plan stopped at, in the order they would have run."""

    @property
    def stopped_at(self) -> PlanStep | None:
        """The step whose call did not succeed, or ``None`` when every step succeeded."""
        if self.ran and not self.ran[-1][1].ok:
            return self.ran[-1][0]
        return None

    @property
    def complete(self) -> bool:
        """Whether every step of the plan ran and succeeded."""
        return self.stopped_at is None and not self.not_run

    @property
    def notice(self) -> str:
        """For the user, when the plan stopped: at which step and why, what ran (its
        effects happened) and what did not; ``""`` when the plan ran whole.

        It quotes the model's ids and names and the call's recorded detail: text to
        show, not an instruction. Each list names twenty steps and counts the rest.
        """
        stopped = self.stopped_at
        if stopped is None:
            return ""
        record = self.ran[-1][1].record
        return "\n".join(
            (
                f"The plan stopped at step {_step_named(stopped)}: {_what_became(record)}.",
                f"Ran: {_steps_named([step for step, _ in self.ran])}.",
                f"Not run: {_steps_named(self.not_run) or 'none'}.",
            )
        )


def execute_plan(
    view: ToolView,
    plan: NormalizedPlan,
    *,
    policy: ApprovalPolicy,
    audit: AuditSink | AsyncAuditSink,
    request_id: str,
    prompt: Prompt | None = None,
    prompt_sha256: str | None = None,
    confirm: Confirm | None = None,
    tools_digest: str | None = None,
    context: object = None,
) -> PlanRun:
    """Run a checked plan's steps, each after what it depends on, each through :func:`execute`.

    Each step is one call, approved, dispatched under guard and recorded as
    :func:`execute` does it (``confirm`` is asked about each step the policy puts to
    the user). Each record's ``call_id`` is ``"plan step <id>"``, the step's id, so an
    audit row says which step it is of; marked so, it is never taken for a provider's id
    of a model's call, by which a resume finds a call that ran already.

    The plan runs whole or stops, and says where:

    - An incomplete plan (:attr:`NormalizedPlan.complete` is false: a step was
      removed) is refused before anything runs: the steps that remain are not the plan
      the model proposed (the first seed's build ran green without the step that set
      the password). Show its ``.notice``; to run what remains once the user accepts
      it, ``normalize_plan(plan.steps, view)`` makes it a plan of its own.
    - The plan is checked again against ``view`` and ``policy`` before anything runs
      (as ``normalize_plan(plan.steps, view, policy=policy)``): a plan normalized
      against another view, or a tool a deny rule set since refuses, is refused whole
      rather than stopping half-way.
    - The first step whose call does not succeed (it failed, was denied by the user or
      a rule, refused, or blocked by a guard) stops the plan: no later step runs, those
      that depend on it and those that do not (``depends_on`` is the model's word, and
      the user reviewed the plan as a whole). :attr:`PlanRun.notice` says where it
      stopped, what ran and what did not.

    Raises:
        IncompletePlanError: the plan is incomplete, or no longer fits ``view`` and
            ``policy``; ``.plan`` is the plan that was refused. Nothing ran.
        VeridicError: ``plan`` is not a :class:`~veridic.NormalizedPlan`, a step's id
            is longer than 1,024 characters, a step's tool is ``async`` (use
            :func:`aexecute_plan`) or asks for a ``ToolContext[X]`` that ``context`` is
            not, ``confirm`` is an ``async def`` (or an object whose ``__call__`` is
            one, or a ``functools.partial`` of either: use :func:`aexecute_plan`), or
            misuse as for :func:`execute` found before the first step runs.
            Nothing ran. A policy (a subclass) that answers outside the approval
            contract raises at that step's call, with the note below.
        BaseException: whatever :func:`execute` raised for a step (an interrupt, an
            :class:`~veridic.AuditWriteError`), with a note naming the step, the steps
            that ran before it and those that did not run.
    """
    _refuse_async_confirm(confirm)
    running = _Running(view, plan, policy, request_id, prompt, prompt_sha256, "execute_plan")
    running.check_steps(view, context, sync=True)
    for step, given in running.calls(view, audit, tools_digest, context):
        with running.calling(step):
            running.went(step, execute(**given, confirm=confirm))
    return running.run()


async def aexecute_plan(
    view: ToolView,
    plan: NormalizedPlan,
    *,
    policy: ApprovalPolicy,
    audit: AuditSink | AsyncAuditSink,
    request_id: str,
    prompt: Prompt | None = None,
    prompt_sha256: str | None = None,
    confirm: AsyncConfirm | None = None,
    tools_digest: str | None = None,
    context: object = None,
) -> PlanRun:
    """:func:`execute_plan` for async code: each step through :func:`aexecute`.

    The same checks, the same stop at the first step that does not succeed, the same
    records and :class:`PlanRun`; ``async`` handlers and an async ``confirm`` are
    awaited.
    """
    running = _Running(view, plan, policy, request_id, prompt, prompt_sha256, "aexecute_plan")
    running.check_steps(view, context, sync=False)
    for step, given in running.calls(view, audit, tools_digest, context):
        with running.calling(step):
            running.went(step, await aexecute(**given, confirm=confirm))
    return running.run()


def _refuse_async_confirm(confirm: object) -> None:
    """Refuse, before any step runs, a ``confirm`` that :func:`execute_plan` cannot await.

    Found at its call, it left the first step it was asked about recorded denied, and the
    plan stopped there, half-way, after the steps before it ran, with a misuse error.
    A plain function that returns an awaitable is only found at its call, as by
    :func:`execute`.
    """
    called = confirm
    while isinstance(called, functools.partial):  # a partial calls what it wraps
        called = called.func
    # An async def (a bound method too), or an object whose class's __call__ is one.
    if inspect.iscoroutinefunction(called) or inspect.iscoroutinefunction(type(called).__call__):
        named = getattr(called, "__qualname__", None) or type(called).__qualname__
        raise VeridicError(
            f"execute_plan() got an async confirm, {quoted(named, 60)}, which blocking code "
            "cannot await, so nothing ran: every step the user is asked about would be "
            "recorded denied and stop the plan there; use await aexecute_plan(...) with the "
            "async confirm, or pass execute_plan() a plain function that returns True or False"
        )


class _StepCall(TypedDict):
    """What a step is called with, on either road (all but ``confirm``, typed per road)."""

    view: ToolView
    name: str
    arguments: Mapping[str, object]
    policy: ApprovalPolicy
    audit: AuditSink | AsyncAuditSink
    request_id: str
    prompt: Prompt | None
    prompt_sha256: str | None
    tools_digest: str | None
    context: object
    call_id: str


class _Running:
    """One plan's run, the one core of the sync and the async road: the plan checked before
    anything runs, the steps to call and what with, when the plan stops, what is noted on an
    error a step's call raised, and the :class:`PlanRun`. A road only makes each call,
    blocking or awaited:

    .. code-block:: python

        for step, given in running.calls(view, audit, tools_digest, context):
            with running.calling(step):
                running.went(step, execute(**given, confirm=confirm))
        return running.run()
    """

    __slots__ = ("_policy", "_ran", "order", "prompt", "prompt_sha256", "request_id", "where")

    def __init__(
        self,
        view: ToolView,
        plan: object,
        policy: ApprovalPolicy,
        request_id: str,
        prompt: Prompt | None,
        prompt_sha256: str | None,
        where: str,
    ) -> None:
        self.where = where
        self.request_id = request_id
        # Misuse is refused before any step runs, not at the first step's call.
        answered = _answered(prompt, prompt_sha256, where)
        _check_request_id(request_id, f"{where}()")
        _check_request_id_length(request_id, f"{where}()")
        # Passed on as one of the two, so a deprecated str prompt warns once, here.
        self.prompt = answered if isinstance(answered, Prompt) else None
        self.prompt_sha256 = None if isinstance(answered, Prompt) else answered
        self.order = _checked(view, plan, policy, where).ordered
        self._policy = policy
        self._ran: list[tuple[PlanStep, CallResult]] = []

    def check_steps(self, view: ToolView, context: object, *, sync: bool) -> None:
        """Refuse, before any step runs, a step :func:`execute` would refuse at its own call.

        Refused there, it would stop the plan half-way, after the steps before it ran,
        with a misuse error that is no step's outcome.

        Raises:
            VeridicError: a step's id is longer than a record keeps, its tool is ``async``
                and the plan runs sync, or its tool asks for a ``ToolContext[X]`` that
                ``context`` is not.
        """
        for step in self.order:
            if len(step.id) > _STEP_ID_LIMIT:
                self._refuse(
                    step,
                    f"its id is {len(step.id)} characters long, and each record keeps its "
                    f"step's id whole (at most {_STEP_ID_LIMIT}): ask the model for short ids",
                )
            # Checked by normalize_plan() already: the arguments fit, so this is the call.
            prepared = view.validate(step.tool, step.arguments)
            if sync and prepared.tool.is_async:
                self._refuse(
                    step,
                    f"its tool is async ({prepared.tool.origin}), and execute_plan() runs each "
                    "step through execute(): use await aexecute_plan(...)",
                )
            try:
                prepared.with_context(context, request_id=self.request_id)
            except VeridicError as error:
                self._refuse(step, str(error))

    def _refuse(self, step: PlanStep, why: str) -> NoReturn:
        raise VeridicError(
            f"{self.where}() cannot run step {_step_named(step)}, so nothing ran: {why}"
        )

    def calls(
        self,
        view: ToolView,
        audit: AuditSink | AsyncAuditSink,
        tools_digest: str | None,
        context: object,
    ) -> Iterator[tuple[PlanStep, _StepCall]]:
        """Each step to call, in :attr:`order`, with what to call it with; none after a
        step whose result (given to :meth:`went`) did not succeed."""
        for step in self.order:
            yield (
                step,
                _StepCall(
                    view=view,
                    name=step.tool,
                    arguments=step.arguments,
                    policy=self._policy,
                    audit=audit,
                    request_id=self.request_id,
                    prompt=self.prompt,
                    prompt_sha256=self.prompt_sha256,
                    tools_digest=tools_digest,
                    context=context,
                    call_id=_call_id(step),
                ),
            )
            if not self._ran or self._ran[-1][0] is not step:
                raise RuntimeError(f"{self.where}(): step {_step_named(step)} ran unrecorded")
            if not self._ran[-1][1].ok:
                return

    @contextlib.contextmanager
    def calling(self, step: PlanStep) -> Iterator[None]:
        """Note on whatever ``step``'s call raises which steps ran and which did not."""
        try:
            yield
        except BaseException as error:
            self._cut(error, step)
            raise

    def went(self, step: PlanStep, result: CallResult) -> None:
        """Note that ``step`` ran, with ``result``."""
        self._ran.append((step, result))

    def run(self) -> PlanRun:
        return PlanRun(tuple(self._ran), self.order[len(self._ran) :])

    def _cut(self, error: BaseException, step: PlanStep) -> None:
        """Say on ``error``, raised by ``step``'s call, which steps ran and which did not."""
        ran = _steps_named([done for done, _ in self._ran]) or "none"
        left = _steps_named(self.order[len(self._ran) + 1 :]) or "none"
        error.add_note(
            f"veridic: {self.where}() stopped at step {_step_named(step)}, whose call raised "
            f"{class_named(error)}: ran before it: {ran}; not run: {left}"
        )


def _checked(view: ToolView, plan: object, policy: ApprovalPolicy, where: str) -> NormalizedPlan:
    """``plan`` checked again against ``view`` and ``policy``, when it is a complete
    normalized plan and still fits them.

    Raises:
        VeridicError: ``plan`` is not a normalized plan, or ``policy`` is not one of ``view``.
        IncompletePlanError: ``plan`` is incomplete, or does not fit ``view`` and ``policy``.
    """
    if not isinstance(plan, NormalizedPlan):
        raise VeridicError(
            f"{where}() runs a plan checked by normalize_plan(steps, view), got "
            f"{a_type(plan)}: normalize the model's steps against this request's view, show "
            "the plan's .notice when it is not complete, then run it"
        )
    if not isinstance(policy, ApprovalPolicy) or policy.view is not view:
        got = (
            "a policy built for another view"
            if isinstance(policy, ApprovalPolicy)
            else a_type(policy)
        )
        raise VeridicError(
            f"{where}() needs the ApprovalPolicy of the view it runs with, got {got}: pass "
            "ApprovalPolicy(view, rules=previous.rules) for this request's view"
        )
    if not plan.complete:
        raise IncompletePlanError(
            f"{where}() got an incomplete plan ({counted(len(plan.dropped), 'step')} removed, "
            f"{len(plan.invalidated)} invalidated), so nothing ran: the steps that remain "
            f"are not the plan the model proposed.\n{plan.notice}\nShow the plan's .notice "
            "to the user and re-plan; to run the steps that remain once the user accepts "
            "them, run normalize_plan(plan.steps, view), a plan of its own",
            plan,
        )
    again = normalize_plan(plan.steps, view, policy=policy)
    if not again.complete:
        raise IncompletePlanError(
            f"{where}() got a plan that does not fit the view and the policy it runs with "
            "(it was normalized against another view, or a deny rule set since refuses a "
            f"step), so nothing ran:\n{again.notice}\nNormalize the steps against this "
            "view with policy=, show the notice, and run that plan",
            again,
        )
    return again


def _what_became(record: AuditRecord) -> str:
    """How a step's call ended, with its recorded detail, for the notice.

    The detail often quotes the model's arguments (a handler's error, an invalid
    value): one that is not printable on one line is shown quoted and escaped, so a
    newline or a bidi control in it cannot forge a line of the notice."""
    said = {
        CallOutcome.FAILED: "it failed",
        CallOutcome.DENIED: "it was denied",
        CallOutcome.BLOCKED: "a guard blocked it",
        CallOutcome.REFUSED: "it was refused",
    }.get(record.outcome, record.outcome.value)
    detail = record.detail
    if not detail:
        return said
    return f"{said} ({detail if detail.isprintable() else clip(detail, _DETAIL_LIMIT)})"


# The longest step id a plan run records as its calls' id: a reply's tool call ids are held
# to the same (``veridic.run._sending.CALL_ID_LIMIT``, which imports this module).
_STEP_ID_LIMIT: Final = 1024


def _call_id(step: PlanStep) -> str:
    """The id a step's call is recorded under (``AuditRecord.call_id``): its step's id,
    marked so that it is never taken for a provider's id of a model's call (``call_0``,
    ``toolu_…``), by which a resume and the integrations find a call that ran already."""
    return f"plan step {step.id}"


# How many steps each list of a plan run's notice names before it counts the rest, as in
# the normalized plan's notice: a long plan's notice stays readable.
_PLAN_SHOWN: Final = 20


def _step_named(step: PlanStep) -> str:
    """``id (tool)``, as the plan's notice shows them: a look-alike escaped, a long one
    clipped."""
    return f"{_name(step.id)} ({_name(step.tool)})"


def _steps_named(steps: Sequence[PlanStep]) -> str:
    """The first twenty steps named, then how many more there are."""
    shown = ", ".join(_step_named(step) for step in steps[:_PLAN_SHOWN])
    left = len(steps) - _PLAN_SHOWN
    return shown + (f" and {counted(left, 'more step')}" if left > 0 else "")


def tools_sha256(view: ToolView) -> str:
    """SHA-256 of the view's tool list: :meth:`ToolView.tools_sha256`.

    The audit record's ``tools_sha256`` when the caller does not pass the
    digest of the list it sent.
    """
    return view.tools_sha256()


def _answered(prompt: Prompt | str | None, prompt_sha256: str | None, where: str) -> Prompt | str:
    """The prompt (or its hash) a call answers, from exactly one of the two parameters."""
    if prompt_sha256 is not None:
        if prompt is not None:
            raise VeridicError(
                f"{where}() got both prompt= and prompt_sha256=: pass one, the Prompt the "
                "model answered, or its .sha256 where only the hash was kept"
            )
        return prompt_sha256
    if prompt is None:
        raise VeridicError(
            f"{where}() needs the prompt the model answered, for the audit record: pass "
            "prompt=the Prompt, or prompt_sha256=its .sha256"
        )
    if isinstance(prompt, str):
        warnings.warn(
            f"{where}(prompt=<sha256>) is deprecated: pass prompt_sha256=... (prompt= takes "
            "the Prompt itself)",
            DeprecationWarning,
            stacklevel=3,
        )
    return prompt


@dataclass(frozen=True, slots=True)
class _Ran:
    """What a dispatch left: the handler's value or error, and how long it ran."""

    tool: Tool
    mode: ApprovalMode
    scope: DispatchScope
    value: object
    error: BaseException | None
    duration: float
    plain: object = _UNRENDERED
    """The value as JSON data for the model (:func:`_rendered`)."""
    message: str = ""
    """The error's message, read inside the dispatch (:func:`_rendered`)."""


def _since(started: float) -> float:
    return time.perf_counter() - started


def _rendered(ran: _Ran) -> _Ran:
    """``ran`` with its value rendered for the model, or its error's message read; called
    inside the dispatch.

    Rendering runs code of the result (a ``__str__`` that pydantic falls
    back on, a ``computed_field``, a serializer), and reading an error's
    message runs the exception's ``__str__``: inside the dispatch their
    guarded operations are judged as the call's own, where after it they
    would run unguarded and unrecorded. A result that cannot be rendered
    fails the call.
    """
    if ran.error is not None:
        return replace(ran, message=_message(ran.error))
    try:
        return replace(ran, plain=_plain(ran.value))
    except BaseException as raised:  # the call's failure, recorded as the handler's would be
        return replace(ran, value=None, error=raised, message=_message(raised))


def _message(error: BaseException) -> str:
    """``str(error)``, or what stands in for it when the exception's ``__str__`` raises
    (:func:`~veridic._sample.error_message`): the call's record must be written whatever
    its error does.

    Of an exception group (a ``TaskGroup`` the handler ran), the messages of the
    errors it holds: its own says only how many it holds. When every one of them is
    veridic's (a ``ToolError`` raised in a task), the model is told them, as it would
    be told one raised outside a group; else each is named with its type, for the
    record and the log.
    """
    if not isinstance(error, BaseExceptionGroup):
        return error_message(error)
    leaves = _leaves(error)
    if _told_whole(error):
        return "; ".join(error_message(leaf) for leaf in leaves)
    return "; ".join(f"{class_named(leaf)}: {error_message(leaf)}" for leaf in leaves)


def _told_whole(error: BaseException) -> bool:
    """Whether the model is told ``error``'s message: veridic's own errors (a refusal, a
    guard, a handler's ``ToolError``), alone or all the errors of a group. Decided by
    type alone: it runs none of the error's code."""
    return all(isinstance(leaf, VeridicError) for leaf in _leaves(error))


_DESCRIBED: Final = (
    ("tool", "name"),
    ("kind", "kind"),
    ("risk", "risk"),
    ("irreversible", "irreversible"),
    ("writes_instruction_fields", "writes_instruction_fields"),
)
"""What an approval request says of its tool (the request's attribute, the tool's): the user
is asked by it."""


def _within_contract(
    prepared: PreparedCall, request: object, policy: ApprovalPolicy
) -> ApprovalRequest:
    """The request the user is asked by and the record keeps, when ``request`` is one the
    approval contract allows for ``prepared``'s call.

    :class:`ApprovalPolicy` decides within it, but the executor runs whatever the
    policy answers, and a subclass (a "dev mode" that allows everything) may answer
    anything: an irreversible purge "always allowed", a write that "needs no
    approval", a call "confirmed" that nobody was asked about, a request that shows
    the user another tool, or this one as less risky, or other arguments, than the
    call that runs, or one whose own ``answer`` confirms what the user refused. So
    the executor holds the contract itself (invariants I7, I8), before anything runs,
    and asks the user by a request of its own making: the tool's facts, the
    arguments it compared, and the policy's mode and why.

    Raises:
        AlwaysAllowRefusedError: an always rule for a high-risk tool.
        VeridicError: anything else outside the contract (see above).
    """
    tool = prepared.tool
    where = f"{type(policy).__name__}.request({tool.name!r})"
    if type(request) is not ApprovalRequest:
        raise VeridicError(
            f"{where} returned {a_type(request)}, not an ApprovalRequest itself (the "
            "executor asks the user by its answer): nothing ran; return what "
            "ApprovalPolicy.request returns, changed with dataclasses.replace"
        )
    mode, why = request.mode, request.why
    if (mode is not None and type(mode) is not ApprovalMode) or type(why) is not str:
        raise VeridicError(
            f"{where} answered the mode {clip(repr(mode))} with {a_type(why)} as why: a mode "
            "is an ApprovalMode member, or None while the user is to be asked, and a why is "
            "text; nothing ran: decide with ApprovalMode (ApprovalMode.DENIED to deny)"
        )
    arguments = dict(prepared.arguments)
    shown = request.arguments
    shown = dict(shown) if isinstance(shown, Mapping) else None  # read once: what is asked
    differ = [said for said, is_ in _DESCRIBED if getattr(request, said) != getattr(tool, is_)]
    if shown != arguments:
        differ.append("arguments")
    if differ:
        raise VeridicError(
            f"{where} describes the call otherwise than it is ({', '.join(differ)}): the "
            f"user would approve, and the record keep, another call than the one of "
            f"{tool.name!r} ({tool.origin}) that runs; nothing ran: build the request from "
            "super().request(...) and change only its mode and why"
        )
    if mode is ApprovalMode.ALWAYS_RULE and tool.risk >= Risk.HIGH:
        raise AlwaysAllowRefusedError(
            f"{where} allowed a call of {tool.name!r} ({tool.origin}) by an always rule, but it "
            "is high risk, and high-risk tools are never always allowed; nothing ran: leave the "
            "call pending (mode None) so the user confirms it, or deny it",
            tool=tool.name,
            risk=tool.risk.value,
        )
    if mode is ApprovalMode.NOT_REQUIRED and (tool.risk >= Risk.HIGH or tool.kind == "write"):
        what = "high risk" if tool.risk >= Risk.HIGH else "a write"
        raise VeridicError(
            f"{where} said the call of {tool.name!r} ({tool.origin}) needs no approval, but it "
            f"is {what}; nothing ran: allow a write by an always rule (never a high-risk "
            "tool), or leave the call pending (mode None) so the user confirms it"
        )
    if mode in (ApprovalMode.USER_CONFIRMED, ApprovalMode.NOT_ASKED):
        raise VeridicError(
            f"{where} decided {mode.value} for the call of {tool.name!r} before anyone was "
            "asked; nothing ran: only the user confirms (leave the call pending, mode None, "
            "and pass confirm=), and a policy denies with ApprovalMode.DENIED"
        )
    return _request_of(tool, mode, why, arguments)


class _Call:
    """One call's fixed facts, and the records it can end with.

    The methods that decide a record only build it; :func:`execute` writes
    it with the blocking twin (:meth:`stored`, :meth:`ended`) and
    :func:`aexecute` with the awaited one (:meth:`astored`, :meth:`aended`),
    so the two roads record the same things in the same order.
    """

    __slots__ = (
        "_late_lock",
        "_pending",
        "_recorded",
        "_settled",
        "arguments_sha256",
        "call_id",
        "name",
        "policy",
        "prompt_sha256",
        "request_id",
        "sink",
        "tools_sha256",
        "view",
    )

    def __init__(
        self,
        view: ToolView,
        name: str,
        policy: ApprovalPolicy,
        audit: object,
        request_id: str,
        prompt: Prompt | str,
        tools_digest: str | None,
        arguments: object,
        call_id: object = "",
        *,
        sync: bool = True,
    ) -> None:
        if not isinstance(view, ToolView) or not isinstance(policy, ApprovalPolicy):
            raise VeridicError(
                f"execute() needs a ToolView and an ApprovalPolicy, got {type(view).__name__} "
                f"and {type(policy).__name__}: pass the request's view and ApprovalPolicy(view)"
            )
        if policy.view is not view:
            raise VeridicError(
                f"execute() got a policy built for another view ({policy.view!r}, not "
                f"{view!r}): build the policy for this request's view, "
                "ApprovalPolicy(view, rules=previous.rules)"
            )
        digest = prompt.sha256 if isinstance(prompt, Prompt) else prompt
        if not isinstance(digest, str):
            raise VeridicError(
                f"execute() got prompt={type(prompt).__name__}: pass the Prompt the model "
                "answered as prompt=, or its .sha256 as prompt_sha256="
            )
        # Checked before anything runs: a record that cannot be built after the handler ran
        # would lose the call's effects from the audit.
        if not _SHA256.fullmatch(digest):
            raise VeridicError(
                f"execute() got the prompt hash {clip(digest)}, which is not a Prompt's sha256 "
                "(64 lowercase hex digits): pass the Prompt the model answered as prompt=, or "
                "its .sha256 as prompt_sha256="
            )
        if tools_digest is not None and (
            not isinstance(tools_digest, str) or not _SHA256.fullmatch(tools_digest)
        ):
            raise VeridicError(
                f"execute() got tools_digest={quoted(tools_digest)}, which is not a sha256: pass "
                "the digest of the tool list sent (tools_sha256(view)), or leave it out"
            )
        _check_request_id(request_id, "execute()")
        _check_request_id_length(request_id, "execute()" if sync else "aexecute()")
        if not isinstance(call_id, str):
            raise VeridicError(
                f"execute() got call_id={quoted(call_id)}, a {type(call_id).__name__}: pass the "
                "provider's id of the model's tool call (ToolCall.id) as a string, or leave it "
                "out for a call no model made"
            )
        self.sink = Sink(audit, "execute" if sync else "aexecute", sync=sync)
        # Escaped as every other text a record keeps; a resume looks it up the same way.
        self.call_id = _storable(call_id)
        self.view = view
        self.name = name
        self.policy = policy
        self.request_id = request_id
        self.prompt_sha256 = digest
        self.tools_sha256 = tools_digest if tools_digest is not None else tools_sha256(view)
        # What the model sent, before parsing: a refused call's arguments are on record too.
        self.arguments_sha256 = arguments_sha256(arguments)
        self._recorded = _recorded_tool(name)
        self._late_lock = threading.Lock()
        self._settled = False
        self._pending: list[GuardEvent] = []

    def check(
        self, arguments: Mapping[str, object] | str | None, *, sync: bool, context: object = None
    ) -> CallResult | tuple[PreparedCall, ApprovalRequest]:
        """Refuse what the view cannot run (a result whose record is not written yet);
        otherwise the prepared call (its context bound) and the policy's view. Misuse (an
        async tool run sync, a context that does not fit the tool) raises."""
        if not isinstance(self.name, str):
            error = UnknownToolError(
                f"the tool name the model called is a {type(self.name).__name__} "
                f"({self._recorded[0]}), not text: call one of the tools this view lists by "
                "its name"
            )
            return self._refused(None, "unknown: the name is not text", error)
        status = self.view.status(self.name)
        if not status.exposed:
            # The view's own words (an unknown name quoted clipped and escaped): the model
            # is told what dispatch() raises, the record keeps the name as _recorded_tool does.
            error = status.error() or VeridicError(f"tool {clip(self.name)} is not exposed")
            detail = f"{status.state}: {status.reason}"
            if status.hidden:
                # The model reads a name nobody registered (ToolStatus.hidden); the error's
                # type and the record say it was denied, and why.
                error = _hidden_error(status, self.view.unknown(self.name))
                detail += "; hidden from the model, which was told no tool has this name"
            return self._refused(status.tool, detail, error)
        try:
            prepared = self.view.validate(self.name, arguments)
        except InvalidArgumentsError as error:
            return self._refused(
                status.tool, f"invalid_arguments: {', '.join(error.fields)}", error
            )
        except GuardDeniedError as error:  # a validator's guarded operation (Tool.validate)
            detail = f"guard_denied: an argument validator's guarded operation: {error}"
            return self._refused(status.tool, detail, error)
        if sync and prepared.tool.is_async:
            raise VeridicError(
                f"tool {self.name!r} ({prepared.tool.origin}) is async, and execute() would "
                "leave its coroutine to run after the dispatch's guards were gone: use "
                "await aexecute(...)"
            )
        # The model's arguments go to the policy and the record; the context only to the handler.
        prepared = prepared.with_context(context, request_id=self.request_id)
        request = self.policy.request(self.name, prepared.arguments)
        return prepared, _within_contract(prepared, request, self.policy)

    def ask(
        self,
        tool: Tool,
        request: ApprovalRequest,
        confirm: Confirm | None,
        span: _telemetry.ToolSpan,
    ) -> tuple[ApprovalMode, object]:
        """The mode ``confirm``'s answer gives a pending call, and the answer itself.

        A ``confirm`` that raises, or returns what cannot be awaited here, leaves the call
        recorded denied, and that record on ``span``: the error that goes on ends the span,
        which must still say what the record says (``veridic.outcome`` ``denied``).

        Raises:
            VeridicError: ``confirm`` returned an awaitable (an ``async def``), which
                blocking code cannot await: the call is recorded denied (nobody
                answered it) and did not run.
        """
        if confirm is None:
            return ApprovalMode.DENIED, None
        try:
            answer: object = confirm(request)
        except BaseException as raised:
            asked = self.confirm_raised(tool, request)
            span.recorded(asked)
            self.write_asked(asked, raised)
            raise
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()  # never awaited: no warning, and none of its code runs
            why = (
                f"{request.why}; confirm returned {_shown(answer)}, which execute() cannot "
                "await, so nobody answered"
            )
            unanswered = self.record(tool, ApprovalMode.DENIED, CallOutcome.DENIED, why)
            span.recorded(unanswered)
            self.sink.write(unanswered)
            raise VeridicError(
                f"execute() got a confirm that returned {_shown(answer)} for the call of "
                f"{tool.name!r}: blocking code cannot await it, so nobody answered and the "
                "call did not run (recorded denied); pass a plain function that returns True "
                "or False, or use await aexecute(...) (ModelGateway.arun) with the async one"
            )
        return request.answer(answer is True), answer

    def confirm_raised(self, tool: Tool, request: ApprovalRequest) -> AuditRecord:
        """The record of a call whose ``confirm`` raised: denied, and it did not run."""
        return self.record(
            tool, ApprovalMode.DENIED, CallOutcome.DENIED, f"{request.why}; confirm raised"
        )

    def write_asked(self, record: AuditRecord, raised: BaseException) -> None:
        """Write the record of a call whose ``confirm`` raised ``raised``, which the caller
        raises again.

        The store's failure propagates in place of an ordinary error (nothing ran, as
        for any call that did not run), but never in place of an interrupt (Ctrl-C at
        the approval prompt, a cancellation): that goes on, and the failure is logged.
        """
        try:
            self.sink.write(record)
        except Exception as failure:
            if isinstance(raised, Exception):
                raise
            _unwritten_under(record, raised, failure, _CONFIRM_CUT)

    async def awrite_asked(self, record: AuditRecord, raised: BaseException) -> None:
        """:meth:`write_asked` from the loop."""
        try:
            await self.sink.awrite(record)
        except Exception as failure:
            if isinstance(raised, Exception):
                raise
            _unwritten_under(record, raised, failure, _CONFIRM_CUT)

    def denied(
        self, tool: Tool, request: ApprovalRequest, *, asked: bool, answer: object = False
    ) -> CallResult:
        """The result of a call that was not approved; ``answer`` is what ``confirm`` returned.

        Only ``False`` is the user's no: any other answer that is not ``True`` (``None``
        from a callback that forgot to return, ``"yes"``) is recorded as what it is.
        """
        if request.mode is ApprovalMode.DENIED:
            why = request.why
        elif not asked:
            why = f"{request.why}; there was no confirm callback, so nobody confirmed it"
        elif answer is not False:
            why = (
                f"{request.why}; confirm answered {_shown(answer)}, not True or False, so "
                "nobody confirmed it"
            )
        else:
            why = f"{request.why}; the user refused"
        record = self.record(tool, ApprovalMode.DENIED, CallOutcome.DENIED, why)
        error = ApprovalDeniedError(
            f"the call of tool {tool.name!r} was not approved ({why}), so it did not run: "
            "tell the user it needs their approval; do not reach for another tool to do it"
        )
        return CallResult(record, error=error)

    def stored(self, result: CallResult) -> CallResult:
        """Write the record of a call that did not run (refused, denied): a failing sink's
        error propagates, since nothing happened that the caller must not repeat."""
        self.sink.write(result.record)
        return result

    async def astored(self, result: CallResult) -> CallResult:
        """:meth:`stored` from the loop."""
        await self.sink.awrite(result.record)
        return result

    def ended(self, ran: _Ran, span: _telemetry.ToolSpan) -> CallResult:
        """Record a call that ran; an interrupt (not an ``Exception``) goes on after it, its
        record shown on ``span`` first (the interrupt ends the span as an error), and its
        result kept for :func:`_interrupted_result`."""
        if ran.error is None or isinstance(ran.error, Exception):
            return self._ended(ran)
        try:  # KeyboardInterrupt and friends go on, recorded if the sink can
            span.recorded(self._ended(ran, ran.error).record)
        finally:
            raise ran.error

    async def aended(self, ran: _Ran, span: _telemetry.ToolSpan) -> CallResult:
        """:meth:`ended` from the loop: the same records, awaited."""
        if ran.error is None or isinstance(ran.error, Exception):
            return await self._aended(ran)
        try:  # CancelledError and friends go on, recorded if the sink can
            span.recorded((await self._aended(ran, ran.error)).record)
        finally:
            raise ran.error

    def _ended(self, ran: _Ran, cut: BaseException | None = None) -> CallResult:
        """Write the record of a call that ran; ``cut`` is the interrupt that stopped its
        handler, on which the result is kept (:func:`_interrupted`) before the write, so
        that the call is answered whatever the write does: fail, or meet a second
        interrupt (the one that goes on is ``cut``)."""
        result: CallResult | None = None
        own = _OWN_FAILED
        try:
            result = self._result(ran)
            if cut is not None:
                _interrupted(cut, result)
            try:
                self.sink.write(result.record)
                own = _OWN_WRITTEN
            except Exception as failure:
                raise self._unwritten(result, failure, cut) from failure
            except BaseException as interrupt:  # Ctrl-C inside the store's write
                own = _OWN_CUT
                _log.error(
                    "the audit record of a call that ran may be unwritten: %s",
                    quoted(result.record, _RECORD_SHOWN),
                )
                _kept(
                    interrupt,
                    result,
                    "the write was cut short, so the store may lack it "
                    "(it is logged on veridic.executor)",
                    cut,
                )
                raise
        finally:
            # Whatever became of the call's own record, the late guards that waited for it
            # are written now (a failure there is logged by _settle).
            try:
                late = self._settle(ran.tool, ran.mode)
            except BaseException as interrupt:  # Ctrl-C inside a follow-up's write
                if result is not None:
                    fate = f"{own}; {_FOLLOW_UP_CUT}"
                    _kept(interrupt, result, fate, cut, written=_FOLLOW_UPS)
                raise
        if late is not None:
            raise self._follow_up_unwritten(result, late) from late
        return result

    async def _aended(self, ran: _Ran, cut: BaseException | None = None) -> CallResult:
        """:meth:`_ended` from the loop."""
        result: CallResult | None = None
        own = _OWN_FAILED
        try:
            result = self._result(ran)
            if cut is not None:
                _interrupted(cut, result)
            try:
                await self.sink.awrite(result.record)
                own = _OWN_WRITTEN
            except Exception as failure:
                raise self._unwritten(result, failure, cut) from failure
            except BaseException as interrupt:  # a cancellation while the write is awaited
                own = _OWN_ON
                _kept(
                    interrupt,
                    result,
                    "the write goes on to its end (a failure is logged on "
                    "veridic.executor, with the record)",
                    cut,
                )
                raise
        finally:
            try:
                late = await self._asettle(ran.tool, ran.mode)
            except BaseException as interrupt:  # a cancellation while a follow-up is awaited
                if result is not None:
                    fate = f"{own}; {_FOLLOW_UP_ON}"
                    _kept(interrupt, result, fate, cut, written=_FOLLOW_UPS)
                raise
        if late is not None:
            raise self._follow_up_unwritten(result, late) from late
        return result

    def reporter(self, tool: Tool, mode: ApprovalMode) -> LateReporter:
        """The dispatch's ``on_late``: a follow-up record for each guard that fires too late.

        A late guard that fires before the call's own record is written (a
        thread racing the end of the call) waits, so the store keeps the
        call's record first; :meth:`_settle` writes it right after.
        """

        def report(event: GuardEvent) -> None:
            with self._late_lock:
                if not self._settled:
                    self._pending.append(event)
                    return
            self.sink.write(self._follow_up(tool, mode, event))

        return report

    def _follow_up(self, tool: Tool, mode: ApprovalMode, event: GuardEvent) -> AuditRecord:
        """The record of a guard that fired after the call ended, or of the effect of a
        delegated tool that finished after it (``irreversible`` or
        ``wrote_instruction_fields`` set: it happened).

        It carries the call's ``arguments_sha256``, so a reviewer can tell
        which of a request's calls of the tool left the work behind, and a
        ``duration`` of ``0.0``: it records an attempt, not a run.
        """
        operations = ", ".join(event.operations)
        if event.allowed:
            # A delegated tool allowed while the call ran finished after it: its effect
            # happened, and the call's own record (written) cannot show it. Outcome blocked
            # all the same: that is what makes a record a follow-up, not a second call.
            detail = (
                f"{_FOLLOW_UP}{operations} happened: a delegated tool finished it in a task "
                f"or thread the call started ({_site('dispatched at', event, tool)})"
            )
            wrote, irreversible = event.kind == "instruction_write", event.kind == "irreversible"
        else:
            detail = (
                f"{_FOLLOW_UP}a guard refused {operations} ({_site('at', event, tool)}), "
                "attempted by a task or thread the call started"
            )
            wrote = irreversible = False
        record = self.record(
            tool, mode, CallOutcome.BLOCKED, detail, wrote, irreversible, set(event.operations)
        )
        # The call's span ended, often ok: the follow-up gets a span too (a no-op while off).
        _telemetry.late(record, refused=not event.allowed)
        return record

    def _waiting(self) -> list[GuardEvent]:
        """Mark the call's record written; the late guards that waited for it."""
        with self._late_lock:
            self._settled = True
            pending, self._pending = self._pending, []
        return pending

    def _settle(self, tool: Tool, mode: ApprovalMode) -> Exception | None:
        """Mark the call's record written; write the late guards that waited for it.

        Returns the first write that failed (each failure is logged).
        """
        first: Exception | None = None
        pending = self._waiting()
        for index, event in enumerate(pending):
            try:
                self.sink.write(self._follow_up(tool, mode, event))
            except Exception as failure:  # logged, and returned to be raised by the caller
                _follow_up_failed(tool, event, failure, self.request_id)
                first = first or failure
            except BaseException as interrupt:  # Ctrl-C: this one and the rest, logged
                for left in pending[index:]:
                    _follow_up_failed(tool, left, interrupt, self.request_id)
                raise
        return first

    async def _asettle(self, tool: Tool, mode: ApprovalMode) -> Exception | None:
        """:meth:`_settle` from the loop: the waiting follow-ups are awaited in order."""
        first: Exception | None = None
        pending = self._waiting()
        for index, event in enumerate(pending):
            try:
                await self.sink.awrite(self._follow_up(tool, mode, event))
            except Exception as failure:  # logged, and returned to be raised by the caller
                _follow_up_failed(tool, event, failure, self.request_id)
                first = first or failure
            except BaseException as interrupt:  # cancelled: this write goes on; the rest, logged
                for left in pending[index + 1 :]:
                    _follow_up_failed(tool, left, interrupt, self.request_id)
                raise
        return first

    def _unwritten(
        self, result: CallResult, failure: Exception, cut: BaseException | None = None
    ) -> AuditWriteError:
        """The error of a call that ran whose record the sink refused with ``failure``.

        When an interrupt ``cut`` stopped the handler, the interrupt is what goes on, and
        this error only rides in its ``__context__``, which a handler of Ctrl-C or of a
        cancellation seldom reads: so it is logged here on ``veridic.executor`` (with the
        request, the tool and the unwritten record), and the interrupt gets a note.
        """
        record = result.record
        error = AuditWriteError(
            f"tool {record.tool!r} ran (outcome {record.outcome.value}, request "
            f"{clip(self.request_id)}) but its audit record could not be written "
            f"({class_named(failure)}: {message_shown(failure)}): the call's result and the "
            "unwritten record "
            "are on this error (.result, .result.record): store the record elsewhere, and do "
            "not run the call again, its effects happened",
            result,
        )
        if cut is not None:
            error.__cause__ = failure  # as the caller's raise ... from failure will set it
            _unwritten_under(record, cut, error, _HANDLER_CUT)
        return error

    def _follow_up_unwritten(self, result: CallResult, late: Exception) -> AuditWriteError:
        return AuditWriteError(
            f"tool {result.record.tool!r} ran (outcome {result.outcome.value}, request "
            f"{clip(self.request_id)}) and its record was written, but the follow-up record of a "
            f"guard refused after the call ended could not be ({class_named(late)}: "
            f"{message_shown(late)}): the call's result is on this error (.result); see the "
            "veridic.executor log for the refused operation, and do not run the call again, "
            "its effects happened",
            result,
        )

    def _result(self, ran: _Ran) -> CallResult:
        """The result of a call that ran, with its record (not written yet)."""
        tool, error = ran.tool, ran.error
        events = ran.scope.events
        blocked = [event for event in events if not event.allowed]
        if blocked:
            outcome = CallOutcome.BLOCKED
            detail = "a guard refused " + ", ".join(
                f"{op} (at {event.where})" for event in blocked for op in event.operations
            )
        elif error is not None and not isinstance(error, Exception):
            # Cancelled or Ctrl-C while the handler ran: it may have done its work.
            outcome, detail = CallOutcome.FAILED, _cut_short(error, ran.message)
        elif error is not None:
            outcome, detail = CallOutcome.FAILED, f"{class_named(error)}: {ran.message}"
        else:
            outcome, detail = CallOutcome.OK, ""
        allowed = [event for event in events if event.allowed]
        done = outcome is CallOutcome.OK
        wrote = any(e.kind == "instruction_write" for e in allowed) or (
            done and tool.writes_instruction_fields
        )
        irreversible = any(e.kind == "irreversible" for e in allowed) or (
            done and tool.irreversible
        )
        operations = {op for event in events for op in event.operations}
        record = self.record(
            tool, ran.mode, outcome, detail, wrote, irreversible, operations, ran.duration
        )
        if isinstance(error, Exception):
            if not blocked and not _told_whole(error):
                self._log_failure(tool, error, ran.message)
            return CallResult(record, error=error, _message=ran.message)
        if blocked:
            # The handler caught the guard's refusal; the call still did not do what it tried.
            caught = GuardDeniedError(f"{detail}; the handler of {tool.name!r} caught the refusal")
            return CallResult(record, value=ran.value, error=caught, _plain=ran.plain)
        return CallResult(record, value=ran.value, _plain=ran.plain)

    def _log_failure(self, tool: Tool, error: Exception, message: str) -> None:
        """Log a handler's own failure whole: the model is told only its type, the record
        keeps a clipped message, and whoever runs the application needs the rest.

        The message is the one read inside the dispatch, given as ``%r`` (one line,
        whatever it holds: a model's argument quoted in it cannot forge log lines),
        and the traceback is formatted from its frames alone: ``exc_info`` would read
        the exception's message again when the log is written, outside the dispatch,
        running its ``__str__`` unguarded. The class's name is written as everywhere
        veridic writes it (:func:`~veridic._sample.class_named`: escaped and clipped unless
        it is printable text of at most 256 characters, with nothing a CI runner would
        obey): a task queue's client or an RPC library names the class of a remote error
        by what the remote end sent, which could otherwise forge log lines too. The tool,
        the request and the call id are clipped (:func:`~veridic._sample.clip`): the call
        id is the caller's, a model's, of any length, and the log line of every failed
        call carried it whole.
        """
        kind = class_named(error)
        _log.warning(
            "the handler of tool %s failed (request %s, call id %s), so the model was told "
            "only %s: %s: %r\n%s",
            clip(tool.name),
            clip(self.request_id),
            clip(self.call_id),
            kind,
            kind,
            message,
            "".join(traceback.format_tb(error.__traceback__)).rstrip("\n"),
        )

    def _refused(self, tool: Tool | None, detail: str, error: Exception) -> CallResult:
        record = self.record(tool, ApprovalMode.NOT_ASKED, CallOutcome.REFUSED, detail)
        return CallResult(record, error=error)

    def record(
        self,
        tool: Tool | None,
        mode: ApprovalMode,
        outcome: CallOutcome,
        detail: str,
        wrote: bool = False,
        irreversible: bool = False,
        operations: set[str] | None = None,
        duration: float = 0.0,
    ) -> AuditRecord:
        declared = (
            set() if tool is None else {f"instruction_write:{p}" for p in tool.instruction_writes}
        )
        shown, note = self._recorded
        if note:
            detail = f"{detail}; {note}"
        detail = cut_short(detail, _DETAIL_LIMIT)
        # The record keeps what a store can encode: lone surrogates escaped (a model's
        # argument quoted in an exception, an operation named from outside text).
        keys = {_storable(op) for op in declared | (operations or set())}
        return AuditRecord(
            time=time.time(),
            request_id=self.request_id,
            tool=shown,
            kind=None if tool is None else tool.kind,
            risk=None if tool is None else tool.risk,
            approval=mode,
            wrote_instruction_fields=wrote,
            irreversible=irreversible,
            prompt_sha256=self.prompt_sha256,
            tools_sha256=self.tools_sha256,
            outcome=outcome,
            detail=_storable(detail),
            operations=tuple(sorted(keys)),
            duration=duration,
            arguments_sha256=self.arguments_sha256,
            call_id=self.call_id,
        )


def _raised_if_guarded(refused: CallResult) -> CallResult:
    """``refused``, the result of a call the view refused (its record written), or its
    error raised when that is a guard's refusal of an argument validator's operation: the
    application's code to fix (move the effect into the handler), not the model's call."""
    if isinstance(refused.error, GuardDeniedError):
        raise refused.error
    return refused


_INTERRUPTED: Final = "_veridic_interrupted_call"
"""Where an interrupt keeps the result of the call it cut short (in its ``__dict__``: a
``KeyboardInterrupt`` cannot be weakly referenced, so no table keyed by it)."""


def _cut_short(interrupt: BaseException, message: str) -> str:
    """The record's detail of a call whose handler an interrupt stopped (a ``CancelledError``
    from ``asyncio.wait_for``, a ``KeyboardInterrupt``): its handler had started, so the
    call may have run, said first, where the clipped detail keeps it; then the interrupt's
    own message, when it has one."""
    said = f" ({message})" if message else ""
    return (
        f"{class_named(interrupt)}: the call may have run: it was interrupted while its "
        f"handler ran{said}, so check what it did before calling it again"
    )


def _interrupted(interrupt: BaseException, result: CallResult) -> CallResult:
    """Keep, for :func:`_interrupted_result`, the recorded result of a call ``interrupt`` cut
    short; returns ``result``.

    Its error says what happened, for the model: the handler was interrupted while it
    ran, so what it did is unknown (the record says failed).
    """
    error = VeridicError(
        f"the call of tool {result.record.tool!r} was interrupted "
        f"({class_named(interrupt)}) while it ran, so whether it did what it does is "
        "unknown: check before calling it again"
    )
    vars(interrupt)[_INTERRUPTED] = replace(result, error=error, _message=str(error))
    return result


_FOLLOW_UPS: Final = "the follow-up record of a guard that fired after it ended"
_FOLLOW_UP_CUT: Final = (
    "the follow-up write was cut short, so the store may lack it (it is logged on veridic.executor)"
)
_FOLLOW_UP_ON: Final = (
    "the follow-up write goes on to its end (a failure is logged on veridic.executor, with "
    "the record)"
)
# What became of the call's own record, written before its follow-ups: the note on an
# interrupt that lands on a follow-up says it, so nobody trusts a record the store refused.
_OWN_WRITTEN: Final = "the call's own record was written before"
_OWN_FAILED: Final = (
    "the call's own record could not be written (the AuditWriteError in this interrupt's "
    "__context__ holds it)"
)
_OWN_CUT: Final = (
    "the write of the call's own record was cut short by an earlier interrupt, so the store "
    "may lack it (it is logged on veridic.executor)"
)
_OWN_ON: Final = (
    "the write of the call's own record met an earlier interrupt, and goes on to its end (a "
    "failure is logged on veridic.executor, with the record)"
)


def _kept(
    interrupt: BaseException,
    result: CallResult,
    fate: str,
    cut: BaseException | None = None,
    *,
    written: str | None = None,
) -> None:
    """Keep, for :func:`_interrupted_result`, the result of a call when ``interrupt`` landed
    while its record was being written, and say the record's fate in a note on
    ``interrupt``: the gateway answers the call with it (the result is known).

    ``cut`` is an earlier interrupt that stopped the handler itself: it is the one that
    goes on, so it gets the note too, and its kept result (the call was interrupted) is
    the one ``interrupt`` keeps. A result kept already stays. ``written`` says what was
    being written, when it was not the call's own record.
    """
    kept = _interrupted_result(cut) if cut is not None else None
    if _interrupted_result(interrupt) is None:
        vars(interrupt)[_INTERRUPTED] = kept or result
    record = result.record
    call = f", call id {clip(record.call_id)}" if record.call_id else ""
    how = (
        f"ran to its end (outcome {record.outcome.value}), and the {class_named(interrupt)}"
        if cut is None
        else f"was interrupted ({class_named(cut)}) while it ran, and a second "
        f"{class_named(interrupt)}"
    )
    note = (
        f"veridic: the call of tool {record.tool!r} (request {clip(record.request_id)}{call}) "
        f"{how} landed while {written or f'its audit record {record.record_id}'} was being "
        f"written: {fate}"
    )
    interrupt.add_note(note)
    if cut is not None and cut is not interrupt:
        cut.add_note(note)


_HANDLER_CUT: Final = "was interrupted while its handler ran"
_CONFIRM_CUT: Final = "was denied, its confirm interrupted before it answered"


def _unwritten_under(
    record: AuditRecord, interrupt: BaseException, failure: Exception, what: str
) -> None:
    """Log a record the store refused with ``failure`` while ``interrupt`` goes on, and
    say so on the interrupt: ``failure`` rides only in the interrupt's ``__context__``
    (if at all), which a handler of Ctrl-C or of a cancellation seldom reads. ``what``
    says what became of the call."""
    call = f", call id {clip(record.call_id)}" if record.call_id else ""
    _log.error(
        "the audit record of tool %s (request %s%s), which %s (%s), could not be written "
        "(%s); the interrupt goes on, and the record is: %s\n%s",
        clip(record.tool),
        clip(record.request_id),
        call,
        what,
        class_named(interrupt),
        class_named(failure),
        quoted(record, _RECORD_SHOWN),
        traceback_shown(failure),
    )
    interrupt.add_note(
        f"veridic: the call of tool {clip(record.tool)} (request {clip(record.request_id)}{call}) "
        f"{what}, and its audit record could not be written ({class_named(failure)}): it "
        "is logged on veridic.executor, with the record"
    )


def _interrupted_result(interrupt: BaseException) -> CallResult | None:
    """The result of the call that ``interrupt`` (a ``CancelledError``, a
    ``KeyboardInterrupt``) cut short inside :func:`execute` or :func:`aexecute`, as recorded
    (outcome failed), with an error that says so; ``None`` when it interrupted no call.

    The executor records such a call and lets the interrupt go on, so the caller gets no
    :class:`CallResult`: this is how the gateway still answers the call on the composer.
    """
    kept = vars(interrupt).get(_INTERRUPTED)
    return kept if isinstance(kept, CallResult) else None


def _check_request_id(request_id: object, where: str) -> None:
    """Refuse a request id no store can keep, before anything runs or is sent: the gateway
    refused only an empty one, and a NUL failed in the model call's record, after the model
    had answered.

    Raises:
        VeridicError: the id is not a non-empty string without NUL or lone surrogates.
    """
    if (
        not isinstance(request_id, str)
        or not request_id.strip()
        or _storable(request_id) != request_id
    ):
        raise VeridicError(
            f"{where} got request_id={quoted(request_id)}: every call needs the id of the "
            "request it belongs to, a non-empty string without NUL or lone surrogates, so its "
            "records can be stored and found together; pass one"
        )


def _check_request_id_length(request_id: object, where: str) -> None:
    """Refuse a request id longer than :data:`_REQUEST_ID_LIMIT`, before anything runs or is
    sent: each record of the request (model calls, tool calls, follow-ups) keeps it whole.

    Raises:
        VeridicError: the id is too long; the message says to pass a digest of it.
    """
    if isinstance(request_id, str) and len(request_id) > _REQUEST_ID_LIMIT:
        raise VeridicError(
            f"{where} got a request_id of {len(request_id)} characters "
            f"({clip(request_id, 40)}), more than the {_REQUEST_ID_LIMIT} a request id may "
            "have: every record of the request keeps it whole; pass a digest of it instead "
            "(hashlib.sha256(request_id.encode()).hexdigest()) and keep the original in the "
            "application's own log"
        )


def _shown(answer: object) -> str:
    """What a ``confirm`` returned, for a record: a short repr of a plain value, else its type."""
    if type(answer) is str:
        return clip(answer, 40)
    if answer is None or type(answer) in (int, float, bool):
        return cut_short(repr(answer), 40)
    return f"a {type(answer).__name__}"


def _site(preposition: str, event: GuardEvent, tool: Tool) -> str:
    """Where a late event came from, for its follow-up record: the application's code on the
    stack of the thread or task that caused it; when a thread or task of the standard
    library ran veridic's dispatch itself (``Thread(target=view.dispatch)``), the handler
    that started it, since ``threading.py`` is nobody's code."""
    if event.where == _NO_APPLICATION_FRAME:
        return f"started by its handler at {tool.origin}"
    return f"{preposition} {event.where}"


def _follow_up_failed(
    tool: Tool, event: GuardEvent, failure: BaseException, request_id: str
) -> None:
    """Log a follow-up record that could not be written, with the request it belongs to.

    An allowed late event is the effect of a delegated tool that finished after the call
    ended: it happened, so the log says so, never "refused"; a reader who believed it
    refused would not look for the effect.
    """
    what = "happened: a delegated tool finished it" if event.allowed else "refused"
    _log.error(
        "the follow-up audit record of %s (%s at %s after the call of %s had ended, "
        "request %s) could not be written\n%s",
        ", ".join(event.operations),
        what,
        event.where,
        clip(tool.name),
        clip(request_id),
        traceback_shown(failure),
    )
