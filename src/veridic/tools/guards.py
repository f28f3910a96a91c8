"""Guards on the write side: store code refuses dangerous operations the call was not approved for.

A tool's declared risk decides how its call is approved (invariant I7), but
the declaration sits next to the handler, not next to the write. A mid-risk
"revert" that appends an older revision of another feature's system prompt,
or a mid-risk tool that reaches a hard delete through an internal helper,
would pass any check made on the handler alone. So the store marks the
operations themselves:

- :func:`guard_irreversible` before an operation that cannot be undone
  (a hard delete, a ``forget``, an outbound payment);
- :func:`guard_instruction_write` before writing fields read as instruction
  (the write side of :data:`veridic.InstructionField`).

A guard looks at the tool the agent dispatched *directly* (recorded by the
executor in a context variable, see :func:`dispatching`) and raises
:class:`GuardDeniedError` before the operation happens unless that tool is
high risk and this call of it was confirmed by the user. A query never may,
whatever its risk: it reads and changes nothing, and the user who confirmed a
high-risk one was not asked about a delete. Delegation does not
launder risk: a mid tool that calls into a high-risk write, directly or
through a nested dispatch, is still judged as the mid tool it is. A nested
dispatch through a view is itself judged (operation ``"delegation:<tool>"``):
a high-risk tool runs only inside a high-risk call the user confirmed, and a
write never inside a query, whether or not its store code has guards. Code that
runs outside any agent dispatch (migrations, admin scripts, the application's
own UI handlers) is not affected: there the guards do nothing. Validating a call's
arguments is not such code: it runs before the call is approved and outside its
dispatch, so a guarded operation in an argument model's validator is refused
(:meth:`veridic.tools.tool.Tool.validate`), approved by nobody.

The context variable follows ``asyncio`` tasks and ``asyncio.to_thread``,
and each thread has its own. A raw ``threading.Thread``, an executor's
``submit`` and ``loop.run_in_executor`` (which submits to an executor and
copies no context) start outside any dispatch, so their guarded operations
are not checked: carry the context into work you hand off
(``asyncio.to_thread`` does it for you; else
``executor.submit(contextvars.copy_context().run, fn)``).

The authority of a call ends with the call (invariant I10). A task or
worker started during a dispatch in its context (``asyncio.create_task``,
``asyncio.to_thread``, a thread or executor job run in a copied context)
inherits its scope, but :func:`dispatching` closes the scope when it exits, and a closed
scope allows nothing: a guarded operation attempted later is refused, even
for a call the user confirmed, and even under :func:`veridic.run.effects.observe`.
Such a late refusal is not lost: it is kept in :attr:`DispatchScope.late_events`
and handed to the scope's ``on_late`` reporter, through which
:func:`veridic.execute` writes a follow-up audit record. Work that must
finish, finishes inside the call: await the task, join the thread.

A handler's result must be finished too: a generator, an iterator, a
callback, a coroutine or another awaitable would run its code (and its guarded
operations) after the dispatch ended, unaudited. :meth:`veridic.ToolView.dispatch`
and :func:`veridic.execute` refuse such a result inside the dispatch (see
:meth:`veridic.tools.view.PreparedCall.invoke` for exactly what counts as lazy).

>>> from veridic.tools.risk import ApprovalMode, Risk
>>> guard_irreversible("hard delete golden fixture")  # outside any dispatch: no effect
>>> with dispatching("purge", Risk.MID, ApprovalMode.ALWAYS_RULE) as scope:
...     guard_irreversible("hard delete golden fixture")
Traceback (most recent call last):
  ...
veridic.errors.GuardDeniedError: irreversible operation 'hard delete golden fixture' ...
>>> [event.allowed for event in scope.events]
[False]
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import enum
import functools
import gc
import inspect
import ipaddress
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import (
    AsyncIterator,
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    ValuesView,
)
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import (
    BuiltinFunctionType,
    ClassMethodDescriptorType,
    FrameType,
    MappingProxyType,
    MethodDescriptorType,
    MethodWrapperType,
    WrapperDescriptorType,
)
from typing import TYPE_CHECKING, Final, Literal, NewType, TypeGuard, get_origin

from pydantic import BaseModel

from veridic._counted import counted
from veridic._sample import clip, quoted
from veridic._words import a_type
from veridic.errors import GuardDeniedError, VeridicError
from veridic.text.provenance import _caller, _display_path
from veridic.tools._external_schema import model_instruction_paths
from veridic.tools.risk import ApprovalMode, Risk, ToolKind

__all__ = [
    "Dispatch",
    "DispatchScope",
    "GuardEvent",
    "GuardKind",
    "LateReporter",
    "current_dispatch",
    "dispatching",
    "guard_instruction_write",
    "guard_irreversible",
]

if TYPE_CHECKING:
    import asyncio

GuardKind = Literal["irreversible", "instruction_write", "delegation"]
"""What a guard judged: an irreversible operation, a write of instruction fields, or a
handler's own dispatch of a tool through a view (``"delegation:<tool>"``), which needs
the authority that tool's direct call would need."""

_log = logging.getLogger("veridic.guards")

WriteTarget = type[BaseModel] | BaseModel | str
"""What :func:`guard_instruction_write` judges: a model class, a model, or a field's name."""


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A tool call the executor dispatched: the tool, its declared risk, how it was approved.

    ``kind`` is the tool's declared kind when the dispatcher knows it
    (:func:`veridic.execute` and :meth:`veridic.ToolView.dispatch` do), ``None``
    otherwise.
    """

    tool: str
    risk: Risk
    approval: ApprovalMode
    request_id: str = ""
    kind: ToolKind | None = None

    @property
    def may_do_high_risk(self) -> bool:
        """Whether this call may perform irreversible or instruction writes.

        Never a query's: a query reads and changes nothing, and the user who
        confirmed a high-risk one (it reads personal data, say) was shown a
        query, not an irreversible operation or a write of instructions.
        """
        return (
            self.kind != "query"
            and self.risk >= Risk.HIGH
            and self.approval is ApprovalMode.USER_CONFIRMED
        )


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """One guard that fired during a dispatch.

    Attributes:
        kind: which guard.
        operations: the operation keys (``"irreversible:hard delete golden fixture"``,
            ``"instruction_write:StoredPrompt.content"``), as the audit record stores them.
        allowed: whether the operation was (or, when observing, would be) let through.
        direct: the directly dispatched call the guard judged.
        where: ``file:line`` of the store code that called the guard (of a delegation,
            of the code that dispatched the tool, or ``"a thread or task with no
            application code on its stack"`` when a thread or task of the standard library
            ran the dispatch itself).
        late: the guard fired after the call that gave the authority had ended
            (in a task or thread it started); a late guard is never allowed. A late
            event that is ``allowed`` is not a guard: it is the effect of a delegated
            tool whose dispatch was allowed while the call ran and that finished after
            it ended (an ``"irreversible"`` or ``"instruction_write"`` that happened).
    """

    kind: GuardKind
    operations: tuple[str, ...]
    allowed: bool
    direct: Dispatch
    where: str
    late: bool = False


LateReporter = Callable[[GuardEvent], None]
"""Told about each guard that fires in a scope after the scope closed, and about each
declared effect of a delegated tool that finished after it closed (an allowed late
:class:`GuardEvent`).

:func:`veridic.execute` passes one that writes a follow-up audit record. It
runs in the thread or task whose guard fired, before the guard raises; what
it raises is logged and chained onto the :class:`~veridic.errors.GuardDeniedError`.
"""

# One lock for every scope's state: judging a guard (is the scope still open? record the
# event) and closing a scope are atomic with respect to each other, so each event lands
# either in the scope's events (and so in the call's record) or among its late events
# (and so in a follow-up record), never in neither, never in both.
_STATE: Final = threading.Lock()


class DispatchScope:
    """What one dispatch saw: the call, and every guard that fired inside it.

    Yielded by :func:`dispatching`; the executor reads :attr:`events` after
    the dispatch ends to fill the audit record. Guards that fire inside a
    nested dispatch are reported to every enclosing scope too.

    A scope is open while its ``with`` block runs and closed after it: from
    then on :attr:`events` no longer changes, and guards that fire in work
    the call left behind are refused and go to :attr:`late_events` (and to
    the ``on_late`` reporter) instead.
    """

    __slots__ = (
        "_call",
        "_claimed",
        "_closed",
        "_denied",
        "_direct",
        "_events",
        "_late",
        "_observing",
        "_on_late",
        "_openers",
        "_parent",
    )
    _call: Dispatch
    _direct: Dispatch
    _parent: DispatchScope | None
    _observing: bool
    _events: list[GuardEvent]
    _late: list[GuardEvent]
    _closed: bool
    _claimed: bool
    _on_late: LateReporter | None
    _openers: tuple[FrameType, ...]
    _denied: frozenset[str]

    def __init__(
        self,
        call: Dispatch,
        parent: DispatchScope | None,
        *,
        observing: bool = False,
        on_late: LateReporter | None = None,
        denied: frozenset[str] = frozenset(),
    ) -> None:
        self._call = call
        self._direct = call if parent is None else parent.direct
        self._parent = parent
        # Only an outermost scope may observe: code running inside a real dispatch cannot
        # switch its guards off by entering veridic.run.effects.observe().
        self._observing = observing if parent is None else parent._observing
        self._events = []
        self._late = []
        self._closed = False
        self._claimed = False  # whether the dispatch this scope was entered for has begun
        self._on_late = on_late
        self._denied = denied
        # The application's frames that entered the scope: only a dispatch one of them
        # makes can be the scope's own (see _its_own); dropped when the scope closes.
        self._openers = ()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"DispatchScope({self.call.tool!r}, direct={self.direct.tool!r}{state})"

    @property
    def call(self) -> Dispatch:
        """The call this scope was entered for."""
        return self._call

    @property
    def direct(self) -> Dispatch:
        """The call the agent dispatched directly: the outermost one; guards judge it.

        Read-only: a handler holding its nested scope cannot name itself the
        direct call and so be judged as a confirmed high-risk one.
        """
        return self._direct

    @property
    def observing(self) -> bool:
        """Whether guards record without refusing (:mod:`veridic.run.effects` observes so)."""
        return self._observing

    @property
    def closed(self) -> bool:
        """Whether the dispatch has ended: a closed scope allows nothing."""
        return self._closed

    @property
    def events(self) -> tuple[GuardEvent, ...]:
        """The guards that fired while the scope was open, in order."""
        with _STATE:
            return tuple(self._events)

    @property
    def late_events(self) -> tuple[GuardEvent, ...]:
        """The guards that fired after the scope closed (all refused), in order."""
        with _STATE:
            return tuple(self._late)

    @property
    def blocked(self) -> tuple[GuardEvent, ...]:
        """The guards that refused an operation while the scope was open."""
        return tuple(event for event in self.events if not event.allowed)

    def _ended(self) -> bool:
        """Whether this scope or one around it is closed (call with ``_STATE`` held)."""
        scope: DispatchScope | None = self
        while scope is not None:
            if scope._closed:
                return True
            scope = scope._parent
        return False

    def _close(self) -> None:
        with _STATE:
            self._closed = True
            self._openers = ()


_current: Final[ContextVar[DispatchScope | None]] = ContextVar("veridic_dispatch", default=None)


def current_dispatch() -> Dispatch | None:
    """The call the agent dispatched directly in this context, or ``None`` outside any dispatch.

    In a task or thread that a call started and that outlived it, this is
    still that call (so the code knows it runs on an agent's behalf), but
    its authority has ended: the guards refuse everything there.

    >>> current_dispatch() is None
    True
    """
    scope = _current.get()
    return None if scope is None else scope.direct


@contextmanager
def dispatching(
    tool: str,
    risk: Risk,
    approval: ApprovalMode,
    *,
    request_id: str = "",
    on_late: LateReporter | None = None,
    kind: ToolKind | None = None,
    denied: Iterable[str] = (),
) -> Iterator[DispatchScope]:
    """Run the body as the dispatch of ``tool``, so guards inside it can judge the call.

    The executor enters it around ``view.dispatch``; call it yourself only
    when you dispatch tools without :func:`veridic.execute`. Nested
    dispatches keep the outer call as the direct one: delegating never
    gains authority, and entered inside another call (by a handler, or by
    :func:`veridic.execute` that a handler runs) a scope has no dispatch of
    its own: every dispatch in it is judged as that call's delegation. The
    scope's own dispatch is the first one of ``tool``
    (its name, risk and kind) that the ``with`` block's own function makes
    through a view (the block under a ``@contextmanager`` or
    ``@asynccontextmanager`` of yours that wraps this one counts as well);
    any other dispatch in it (one that a handler you call directly makes,
    or a helper function, a task or a thread) is judged as a delegation, so
    a handler that forwards to a same-named tool elsewhere cannot pass that
    tool off as the call itself. When the body ends the
    scope closes, and with it the call's authority: work the call left
    running (a task, a thread in a copied context) is refused every guarded
    operation, and each such late guard is kept in
    :attr:`DispatchScope.late_events` and passed to ``on_late`` (see
    :data:`LateReporter`); without a reporter it is logged as a warning on
    the ``veridic.guards`` logger. ``kind`` is the tool's
    declared kind: under a ``"query"`` every guarded operation is refused,
    whatever the risk and approval (a query changes nothing). ``denied`` names
    the tools the request's approval policy has a deny rule for
    (:func:`veridic.execute` passes them): a deny rule holds for every call of
    its tool, so a handler's dispatch of one of them through a view, at any
    depth of this call and in any view, is refused before it runs.

    Raises:
        VeridicError: ``tool`` is empty, ``risk`` is not a :class:`Risk`,
            ``approval`` not an :class:`ApprovalMode`, ``kind`` not
            ``"query"``, ``"write"`` or ``None``, or ``denied`` not names.
    """
    call = Dispatch(tool, risk, approval, request_id, kind)
    names = _denied_names(denied, call)
    with _entered(call, observing=False, on_late=on_late, denied=names) as scope:
        yield scope


def _denied_names(denied: Iterable[str], call: Dispatch) -> frozenset[str]:
    names = frozenset([denied] if isinstance(denied, str) else denied)
    if not all(isinstance(name, str) for name in names):
        raise VeridicError(
            f"the dispatch of {clip(call.tool)} got denied={quoted(denied)}: pass the names "
            "of the tools the request's approval policy denies (or leave it out)"
        )
    return names


@contextmanager
def _entered(
    call: Dispatch,
    *,
    observing: bool,
    on_late: LateReporter | None = None,
    denied: frozenset[str] = frozenset(),
) -> Iterator[DispatchScope]:
    _check_call(call)
    parent = _current.get()
    scope = DispatchScope(call, parent, observing=observing, on_late=on_late, denied=denied)
    scope._openers = _entering_frames(sys._getframe(1))
    token = _current.set(scope)
    try:
        yield scope
    finally:
        scope._close()
        _current.reset(token)


def guard_irreversible(operation: str, /) -> None:
    """Call before an operation that cannot be undone; raises if this dispatch may not do it.

    Name the operation, not the instance (``"hard delete golden fixture"``,
    not ``"delete fixture 42"``): the name is the key by which the audit
    store recognises a later call attempting the same thing.

    Raises:
        GuardDeniedError: inside a dispatch whose direct tool is not high risk,
            is a query, or whose call was not confirmed by the user; or while a
            call's arguments are validated (before the call is approved, outside its
            dispatch). Outside any dispatch and any
            validation the guard does nothing.
        VeridicError: ``operation`` is empty.
    """
    if not isinstance(operation, str) or not operation.strip():
        raise VeridicError(
            f"guard_irreversible() needs the operation's name, got {quoted(operation)} "
            f"(called at {_caller(2)}): name what cannot be undone, "
            'e.g. guard_irreversible("hard delete golden fixture")'
        )
    scope = _current.get()
    if scope is None:
        _refuse_while_validating("irreversible operation", repr(operation.strip()))
        return
    _judge(scope, "irreversible", (f"irreversible:{operation.strip()}",), repr(operation.strip()))


def guard_instruction_write(target: WriteTarget | Iterable[WriteTarget], /) -> None:
    """Call before writing fields read as instruction; raises if this dispatch may not do it.

    ``target`` is the pydantic model being written (class or instance: every
    ``InstructionField`` in it counts, in nested models, dataclasses and
    ``TypedDict`` classes too; of an instance, also those of every model it
    holds where its class does not name one, such as a revision's
    ``payload: Any`` that holds a stored prompt) or field
    names as ``"Model.field"``, or a list of these (the rows of a batch, each
    judged as it would be alone). A model without instruction fields needs no
    guard, and passes.

    Raises:
        GuardDeniedError: inside a dispatch whose direct tool is not high risk,
            is a query, or whose call was not confirmed by the user; or while a
            call's arguments are validated (before the call is approved, outside its
            dispatch). Outside any dispatch and any validation the guard does nothing.
        VeridicError: ``target`` names no field (an empty string or list), or is
            a mapping (its keys are not what is written: pass its ``.values()``).
    """
    fields = _instruction_targets(target)
    if not fields:
        return
    scope = _current.get()
    if scope is None:
        _refuse_while_validating("write of instruction fields", ", ".join(fields))
        return
    operations = tuple(f"instruction_write:{name}" for name in fields)
    _judge(scope, "instruction_write", operations, ", ".join(fields))


_arguments_of: Final[ContextVar[str | None]] = ContextVar(
    "veridic_validating_arguments", default=None
)


@contextmanager
def _validating(tool: str) -> Iterator[None]:
    """Within it, outside any dispatch, every guarded operation is refused: the arguments
    of ``tool`` are being validated.

    Validation runs before approval by design (the policy, the user and a plan's
    normalizer judge validated arguments), so it runs outside the call's dispatch, where
    a guard did nothing: a ``model_validator`` of an argument model that deleted a report
    deleted it for a call the policy then denied, and for a plan step that was only
    normalized. Nothing that runs there was approved by anyone. Inside a dispatch (a
    handler dispatching another tool) the guards judge the call around it as usual.
    """
    token = _arguments_of.set(tool)
    try:
        yield
    finally:
        _arguments_of.reset(token)


def _refuse_while_validating(label: str, what: str) -> None:
    """Raise for a guarded operation attempted while a call's arguments are validated."""
    tool = _arguments_of.get()
    if tool is None:
        return
    raise GuardDeniedError(
        f"{label} {what} (at {_caller(3)}) was refused before it happened: it ran while the "
        f"arguments of tool {clip(tool)} were validated (a validator of an argument model), "
        "which happens before the call is approved and outside its dispatch, so nobody "
        "approved it; validate without effects, and move it into the handler, which runs "
        "inside the approved call"
    )


def _delegated(tool: str, risk: Risk, kind: ToolKind) -> bool:
    """Judge a handler's dispatch of ``tool`` through a view, inside the dispatch of another.

    Delegating never gains authority: the call the agent dispatched directly
    must be one that could run ``tool`` itself. A high-risk tool runs only
    inside a high-risk call the user confirmed (a high-risk write only inside
    a write: :attr:`Dispatch.may_do_high_risk`), and a write never inside a
    query, nor in work a call left running after it ended (its authority
    ended with it), and no tool that the approval policy of a call around it
    denies, whatever its risk (a deny rule holds for every call of its tool, see
    :func:`dispatching`). What passes this is recorded like any guard when it is high risk
    (the call did something high risk); a lower-risk dispatch inside a write
    is the write's own business and is not recorded.

    Returns whether the dispatch was judged and allowed (not only observed): then,
    when ``tool`` returns, :func:`_delegate_done` records what it did.

    Raises:
        GuardDeniedError: the direct call may not run ``tool``; nothing ran.
    """
    scope = _current.get()
    if scope is None or _its_own(scope, tool, risk, kind):
        return False  # no dispatch around it, or the executor's own dispatch of this very tool
    what = f"{'high-risk ' if risk >= Risk.HIGH else ''}tool {tool!r} ({kind}, risk {risk.value})"
    denier = _denier(scope, tool)
    if denier is not None:
        refusal = (
            f"the approval policy of the call of {clip(denier.call.tool)} has a deny rule for "
            f"{tool!r}, and a deny rule holds for every call of that tool, the ones a handler "
            f"makes through a view too: leave {clip(tool)} out of what {clip(denier.call.tool)} "
            f"does, or lift the rule (policy.ask({tool!r}), so each direct call is put to the "
            "user)"
        )
        where = _outside_veridic()
        return _judge(scope, "delegation", (f"delegation:{tool}",), what, where, False, refusal)
    direct = scope.direct
    if risk >= Risk.HIGH:
        permitted = (
            direct.may_do_high_risk
            if kind == "write"
            else direct.risk >= Risk.HIGH and direct.approval is ApprovalMode.USER_CONFIRMED
        )
    elif kind == "write" and (direct.kind == "query" or _late(scope)):
        permitted = False  # a query changes nothing; an ended call's authority is gone
    else:
        return False
    return _judge(scope, "delegation", (f"delegation:{tool}",), what, _outside_veridic(), permitted)


def _denier(scope: DispatchScope, tool: str) -> DispatchScope | None:
    """The innermost scope around a dispatch of ``tool`` whose approval policy denies it."""
    current: DispatchScope | None = scope
    while current is not None:
        if tool in current._denied:
            return current
        current = current._parent
    return None


def _delegate_done(tool: str, irreversible: bool, writes: bool, fields: Iterable[str]) -> None:
    """Record what a delegated ``tool`` did, once it returned: its declared effects happened.

    The dispatch itself was recorded (``"delegation:<tool>"``) before it ran; a tool
    declared ``irreversible`` or writing instruction fields did that inside the call,
    whether or not its store code has guards, so the call's audit record must say it:
    an ``"irreversible"`` event under the same operation key, an ``"instruction_write"``
    one with the declared ``fields`` (or that key, for instruction arguments). Only an
    allowed dispatch gets here: a refused one never ran. When the call that delegated
    has ended meanwhile (the tool ran in work it left behind), its record is written
    already: each effect goes, as an allowed ``late`` event, to the closed scope's
    ``on_late`` reporter (:func:`veridic.execute` writes a follow-up record of it), and
    is logged where there is none.
    """
    scope = _current.get()
    if scope is None:
        return
    where = _outside_veridic()
    made: list[GuardEvent] = []
    if irreversible:
        made.append(GuardEvent("irreversible", (f"delegation:{tool}",), True, scope.direct, where))
    if writes:
        keys = tuple(f"instruction_write:{path}" for path in sorted(fields)) or (
            f"delegation:{tool}",
        )
        made.append(GuardEvent("instruction_write", keys, True, scope.direct, where))
    if not made:
        return
    closed: list[tuple[DispatchScope, LateReporter | None]] = []
    with _STATE:
        current: DispatchScope | None = scope
        while current is not None:
            if current._closed:
                closed.append((current, current._on_late))
            else:
                current._events.extend(made)
            current = current._parent
    for ended, report in closed:
        for event in made:
            _report_finished_late(tool, dataclasses.replace(event, late=True), ended, report)


def _report_finished_late(
    tool: str, event: GuardEvent, scope: DispatchScope, report: LateReporter | None
) -> None:
    """Hand the effect of a delegated ``tool`` that finished after ``scope`` closed to its
    reporter (a follow-up record: the call's own record is written and cannot show it);
    logged when there is no reporter or it fails, never dropped."""
    operations = ", ".join(event.operations)
    if report is not None:
        try:
            report(event)
        except Exception as error:  # the effect happened: nothing to refuse, so logged
            _log.error(
                "the follow-up audit record of delegated tool %s (%s, finished at %s after "
                "the call of %s in request %s had ended) could not be written",
                clip(tool),
                operations,
                event.where,
                clip(scope.call.tool),
                clip(scope.call.request_id),
                exc_info=error,
            )
        return
    _log.warning(
        "delegated tool %s (%s) finished at %s after the call of %s in request %s had "
        "ended, and no reporter records it (dispatch through veridic.execute to get a "
        "follow-up audit record); finish delegated work inside the handler",
        clip(tool),
        operations,
        event.where,
        clip(scope.call.tool),
        clip(scope.call.request_id),
    )


def _its_own(scope: DispatchScope, tool: str, risk: Risk, kind: ToolKind) -> bool:
    """Whether the dispatch of ``tool`` is the one ``scope`` was entered for: the first of
    that name, risk and kind inside it, made by the code that entered the scope (then the
    scope is claimed).

    The name alone would not do: a handler that forwards to a tool of its own
    name in another view (``inner.dispatch("deploy", ...)``, where that ``deploy``
    is a high-risk write) would pass as the executor's own dispatch. Nor would name,
    risk and kind: a confirmed high-risk ``deploy`` that forwards to another
    registry's irreversible ``deploy`` ran it unjudged, and the call's record said
    nothing irreversible happened. The call's own dispatch comes first; any later one
    in the scope, however named, is the handler's and is judged (and recorded) as such.
    Nor would "the first": code that enters :func:`dispatching` and calls the handler
    itself, not through a view, makes no dispatch of its own, and the handler's forward
    would come first. So the dispatch must also come from a frame that entered the
    scope (the application's, below veridic's own: :func:`_entering_frames`):
    :func:`veridic.execute`'s caller for the executor, the ``with dispatching(...)``
    block's function otherwise, and the block under a generator-based context manager
    the application wrapped around :func:`dispatching`. A handler, a helper, a task or a
    thread is called or started inside the scope, so its frames did not enter it: what
    it dispatches is judged. Frames are compared by identity while the scope holds them,
    so none is reused for another.

    A scope entered inside another call (a handler's own ``with dispatching(...)``, or
    :func:`veridic.execute` run by a handler) has no dispatch of its own: entering it
    gains no authority (its call is not the direct one), so what is dispatched in it is
    the direct call's delegation, and judged. Else a mid handler that entered
    :func:`dispatching` for a high-risk tool it forwards to ran that tool unjudged (I7).
    """
    call = scope.call
    if scope._parent is not None:
        return False
    if call.tool != tool or call.risk != risk or call.kind not in (None, kind):
        return False
    caller = _application_frame(sys._getframe(1))
    with _STATE:
        # No application frame under the dispatch (a task, a thread) is the opener's only
        # when none was under the scope's entry either: the executor run in a task.
        opened = caller in scope._openers if caller is not None else not scope._openers
        if scope._claimed or not opened:
            return False
        scope._claimed = True
        return True


def _claimed(scope: DispatchScope) -> None:
    """Mark ``scope``'s own dispatch as begun, for a dispatch that entered the scope itself
    (a tool dispatched outside :func:`veridic.execute`) and so never passes
    :func:`_its_own`: a tool of its name, risk and kind run by its handler is the
    handler's, judged and recorded, as it is inside the executor's scope."""
    with _STATE:
        scope._claimed = True


def _late(scope: DispatchScope) -> bool:
    with _STATE:
        return scope._ended()


_PACKAGE: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_PLUMBING: Final = (
    os.path.dirname(asyncio.__file__) + os.sep,
    os.path.dirname(concurrent.futures.__file__) + os.sep,
    threading.__file__,
)
"""The standard library's modules that start and run threads and tasks: a frame of them
is never the application's code that dispatched (``Thread(target=view.dispatch)``), and
no frame below it is either: below a task's step lies the line that runs the event loop
(``asyncio.run(main())``), below a thread's run its bootstrap."""
_PASSED: Final = (contextlib.__file__, functools.__file__)
"""Standard library frames between veridic and its caller: a guard's ``with`` (contextlib),
a ``singledispatch`` or ``partialmethod`` wrapper (functools)."""
_NO_APPLICATION_FRAME: Final = "a thread or task with no application code on its stack"
""":attr:`GuardEvent.where` when no frame of the stack is the application's: a thread or
task of the standard library ran veridic directly. The record names the handler of the
call that started it instead."""


def _outside_veridic() -> str:
    """``file:line`` of the innermost frame outside veridic and the standard library's
    wrappers: who dispatched; ``_NO_APPLICATION_FRAME`` when that frame is the thread and
    task plumbing (or there is none): nothing below it called the dispatch."""
    frame = _application_frame(sys._getframe(1))
    if frame is None:
        return _NO_APPLICATION_FRAME
    return f"{_display_path(frame.f_code.co_filename)}:{frame.f_lineno}"


def _veridic_frame(frame: FrameType) -> bool:
    """Whether ``frame`` is veridic's own code (a view's dispatch, which judged its call)."""
    return frame.f_code.co_filename.startswith(_PACKAGE)


def _entering_frames(frame: FrameType | None) -> tuple[FrameType, ...]:
    """The application's frames that enter a scope from ``frame`` outwards: the innermost
    (:func:`_application_frame`), and while it is a generator's (an application's
    ``@contextmanager`` or ``@asynccontextmanager`` wrapped around :func:`dispatching`)
    the next one too, whose ``with`` block runs the scope's body.

    Not the whole stack: its callers cannot run while the block does, and walking them
    made each dispatch's cost grow with the stack's depth (60 frames: about 3 times).
    """
    frames: list[FrameType] = []
    found = _application_frame(frame)
    while found is not None:
        frames.append(found)
        if not found.f_code.co_flags & _GENERATORS:
            break
        found = _application_frame(found.f_back)
    return tuple(frames)


_GENERATORS: Final = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def _application_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame from ``frame`` outwards that is neither veridic's nor the
    standard library's wrappers; ``None`` when the thread and task plumbing comes first."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_PLUMBING):
            return None
        if not filename.startswith(_PACKAGE) and not filename.startswith(_PASSED):
            return frame
        frame = frame.f_back
    return None


def _judge(
    scope: DispatchScope,
    kind: GuardKind,
    operations: tuple[str, ...],
    what: str,
    where: str | None = None,
    permitted: bool | None = None,
    refusal: str | None = None,
) -> bool:
    """Record the event in every enclosing scope; raise unless it is allowed or observed.

    ``refusal`` says why a call that is not ``permitted`` was refused, when that is not its
    risk (a deny rule). Returns whether it was allowed (``False`` only when observing lets
    it through).
    """
    direct = scope.direct
    where = _caller(3) if where is None else where
    reporters: list[tuple[DispatchScope, LateReporter | None]] = []
    with _STATE:
        late = scope._ended()
        allowed = (direct.may_do_high_risk if permitted is None else permitted) and not late
        event = GuardEvent(kind, operations, allowed, direct, where, late)
        current: DispatchScope | None = scope
        while current is not None:
            if current._closed:
                current._late.append(event)
                reporters.append((current, current._on_late))
            else:
                current._events.append(event)
            current = current._parent
    failure = _report_late(event, reporters) if reporters else None
    if allowed or (scope.observing and not late):
        return allowed
    label = _LABELS[kind]
    if late:
        request = f" (request {clip(direct.request_id)})" if direct.request_id else ""
        unwritten = (
            ""
            if failure is None
            else f"; its follow-up audit record could not be written ({type(failure).__name__}: "
            f"{failure}), see the veridic.guards log"
        )
        raise GuardDeniedError(
            f"{label} {what} (at {where}) was refused before it happened: it was attempted "
            f"after the call of {clip(direct.tool)}{request} had ended, by a task or thread that "
            "call started, and a call's authority ends with the call"
            f"{unwritten}: finish the work inside the handler (await the task, join the "
            "thread) before it returns, or ask for the operation in a new call"
        ) from failure
    via = "" if scope.call is direct else f" (delegated through {clip(scope.call.tool)})"
    if refusal is not None:
        raise GuardDeniedError(
            f"{label} {what} (at {where}) was refused before it ran: the tool the agent "
            f"dispatched directly is {clip(direct.tool)}{via}; {refusal}"
        )
    if direct.kind == "query":
        raise GuardDeniedError(
            f"{label} {what} (at {where}) was refused before it happened: the tool the agent "
            f"dispatched directly, {clip(direct.tool)}{via}, is a query (risk {direct.risk.value}, "
            f"approval {direct.approval.value}), and a query reads and changes nothing, so "
            "whoever approved it was not asked about this: declare it kind='write' "
            "(irreversible=True, or writes= the model) so each call is confirmed as what it "
            "does, or keep the operation out of the query"
        )
    if kind == "delegation":
        raise GuardDeniedError(
            f"{label} {what} (at {where}) was refused before it ran: the tool the agent "
            f"dispatched directly is {clip(direct.tool)}{via}, risk {direct.risk.value}, approval "
            f"{direct.approval.value}, and a call delegates no authority it was not given: "
            "a high-risk tool runs only in a high-risk call the user confirmed; let the "
            f"agent call {what.split(' (')[0].removeprefix('high-risk ')} itself (so each "
            f"call is approved as what it is), or declare {clip(direct.tool)} as risky as what "
            "it runs"
        )
    raise GuardDeniedError(
        f"{label} {what} (at {where}) was refused before it happened: the tool the agent "
        f"dispatched directly is {clip(direct.tool)}{via}, risk {direct.risk.value}, "
        f"approval {direct.approval.value}; it needs a high-risk tool whose call the user "
        f"confirmed: declare {clip(direct.tool)} high risk (irreversible=True, or writes= the "
        "model) so each call asks the user, or do this outside agent dispatch"
    )


_LABELS: Final[dict[GuardKind, str]] = {
    "irreversible": "irreversible operation",
    "instruction_write": "write of instruction fields",
    "delegation": "dispatch of",
}


def _report_late(
    event: GuardEvent, reporters: list[tuple[DispatchScope, LateReporter | None]]
) -> Exception | None:
    """Hand a late event to each closed scope's reporter; log (and return) what failed."""
    failure: Exception | None = None
    for scope, report in reporters:
        if report is None:
            _log.warning(
                "guard refused %s at %s after the dispatch of %s in request %s had ended; no "
                "reporter records it (dispatch through veridic.execute to get a follow-up "
                "audit record)",
                ", ".join(event.operations),
                event.where,
                clip(scope.call.tool),
                clip(scope.call.request_id),
            )
            continue
        try:
            report(event)
        except Exception as error:  # logged here, chained onto the refusal by the caller
            _log.error(
                "the follow-up audit record of %s (refused at %s after the call of %s in "
                "request %s had ended) could not be written",
                ", ".join(event.operations),
                event.where,
                clip(scope.call.tool),
                clip(scope.call.request_id),
                exc_info=error,
            )
            failure = failure or error
    return failure


# --- lazy results -----------------------------------------------------------------------


def _finished(value: object, tool: str, origin: str, *, awaited: bool) -> object:
    """``value`` when it is a finished result; a lazy one is closed and refused.

    Lazy values inside a finished container count too (``{"deleted": (delete(i) for i
    in ids)}``): whoever renders the result for the model would run them after the
    dispatch. Called inside the dispatch, so whatever closing runs (a generator's
    ``finally``) is still judged and recorded as part of the call. What counts
    as lazy is documented on :meth:`veridic.tools.view.PreparedCall.invoke`.

    Raises:
        VeridicError: ``value`` is lazy or holds a lazy value.
    """
    what = _lazy(value)
    if what is not None:
        lazy = [value]
        returned = what
    else:
        nested = _nested_lazy(value)
        if not nested:
            return value
        where, first = nested[0]
        lazy = [item for _, item in nested]
        returned = f"{a_type(value)} whose {where} is {_lazy(first)}"
        if len(nested) > 1:
            returned += f" (and {counted(len(nested) - 1, 'more lazy value')} inside it)"
    got = "returned, after being awaited," if awaited else "returned"
    if callable(lazy[0]) and not inspect.isawaitable(lazy[0]):
        remedy = (
            "call it inside the handler and return what it did, or return data that says "
            "what is left to do (a later tool call does it, under its own approval)"
        )
    elif inspect.isawaitable(lazy[0]) and not awaited:
        remedy = (
            "declare the handler async def so that veridic awaits it inside its dispatch "
            "(await aexecute(...) or view.adispatch(...)), or return the finished value"
        )
    else:
        remedy = (
            "return a finished value from the handler (a list, a dict, the text: "
            "e.g. list(...) of the items), so its work is done inside the call"
        )
    error = VeridicError(
        f"tool {tool!r} ({origin}) {got} {returned}, whose code would run only when someone "
        "consumes it: after its dispatch ended, outside the write-side guards and the audit "
        f"record; it was refused{_closed_note(lazy[0])}: {remedy}"
    )
    failure: Exception | None = None
    for item in lazy:
        try:
            _discard(item)
        except Exception as raised:
            failure = failure or raised
    if failure is not None:
        raise error from failure
    raise error


_LEAVES: Final = frozenset({str, bytes, bytearray, int, float, bool, complex, type(None)})
"""Types that hold nothing: a container of only these needs no look inside."""


def _key(key: object) -> str:
    """A mapping key as the path to a refused value shows it: its ``repr``, clipped. The
    message is told to the model, and a key is data the handler read (one of 100,000
    characters was quoted whole)."""
    if isinstance(key, str):
        return clip(key, 40)
    shown = repr(key)
    return shown if len(shown) <= 60 else f"{shown[:59]}… ({len(shown)} chars)"


_SEQUENCES: Final = (
    list,
    tuple,
    set,
    frozenset,
    deque,
    collections.UserList,
    KeysView,  # only a dict's views get here: the others iterate with code of their own
    ValuesView,
    ItemsView,
)
"""The standard containers whose items are looked at one by one (a dict view's are its dict's)."""


def _nested_lazy(value: object) -> list[tuple[str, object]]:
    """Every lazy value inside ``value``'s containers, each with where it sits.

    Looks through what a result is rendered from: mappings (keys and values),
    lists, tuples, sets, dataclass fields and pydantic model fields, each object
    once. A container of leaves only is passed over with one C-level look at
    its item types, so a large finished result costs little.
    """
    found: list[tuple[str, object]] = []
    seen: dict[int, object] = {}  # kept alive: a dict view's pairs are made as it is read
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if type(item) in _LEAVES or id(item) in seen:
            continue
        seen[id(item)] = item
        if path and _lazy(item) is not None:
            found.append((path, item))
            continue
        children: Iterable[tuple[str, object]]
        wrapped = _wrapped(path, item)
        if wrapped is not None:
            # Its content is another object's, read with that object's code: judged first.
            children = (wrapped,)
        elif isinstance(item, collections.ChainMap):
            # Its content is its maps': each is judged before anything of it is read.
            children = ((f"{path}.maps[{index}]", child) for index, child in enumerate(item.maps))
        elif isinstance(item, Mapping):
            if _LEAVES.issuperset(map(type, item.values())) and _LEAVES.issuperset(
                map(type, item.keys())
            ):
                continue
            children = [
                pair
                for index, (key, child) in enumerate(item.items())
                for pair in ((f"{path}.keys()[{index}]", key), (f"{path}[{_key(key)}]", child))
            ]
        elif isinstance(item, _SEQUENCES):
            if _LEAVES.issuperset(map(type, item)):
                continue
            children = ((f"{path}[{index}]", child) for index, child in enumerate(item))
        elif isinstance(item, BaseModel):
            children = ((f"{path}.{name}", getattr(item, name)) for name in type(item).model_fields)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            children = (
                (f"{path}.{field.name}", getattr(item, field.name))
                for field in dataclasses.fields(item)
            )
        else:
            continue
        stack.extend(reversed(list(children)))
    return found


_WRAPPERS: Final = (collections.UserDict, collections.UserList, collections.UserString)
"""The standard wrappers whose content is their ``.data``'s, read with its code."""

_READ_THROUGH: Final = frozenset((MappingProxyType, collections.ChainMap, *_WRAPPERS))
"""The standard containers whose content is another object's: one wrapped in another is
looked into as well, never read as a finished container."""


def _wrapped(path: str, item: object) -> tuple[str, object] | None:
    """What a standard wrapper (a ``MappingProxyType``, a ``UserDict``, a ``UserList``, a
    ``UserString``) wraps, with where it sits, when that is not a standard container
    itself (another wrapper, or a ``ChainMap``, is looked into in turn); ``None`` for
    anything else.

    Reading the wrapper runs the wrapped object's code, each time: a mapping that
    answers finished data to the check and a generator to the application's next
    read passed inside a proxy, where returned alone it is refused. So the wrapped
    object is judged as a value of its own, before anything of it is read. A proxy
    whose mapping cannot be seen (an interpreter whose proxies keep other references)
    is read as a mapping, once, as before this look existed.
    """
    if isinstance(item, MappingProxyType):
        # A proxy shows its mapping and keeps no other reference (CPython's traverse).
        held = gc.get_referents(item)
        inner = held[0] if len(held) == 1 else None
        where = f"{path}'s mapping" if path else "mapping"
    elif isinstance(item, _WRAPPERS):
        inner = item.data
        where = f"{path}.data"
    else:
        return None
    if inner is None or (type(inner) in _PLAIN and type(inner) not in _READ_THROUGH):
        return None  # a standard container: read as the wrapper, which runs no code of it
    return where, inner


def _lazy(value: object) -> str | None:
    if type(value) in _PLAIN:  # the common case, at the cost of one look-up
        return None
    if inspect.isgenerator(value):
        return "a generator"
    if inspect.iscoroutine(value):
        return "a coroutine"
    if inspect.isasyncgen(value):
        return "an async generator"
    kind = type(value).__name__
    if inspect.isawaitable(value):
        return f"an awaitable ({kind})"
    if isinstance(value, Iterator):
        return f"an iterator ({kind})"
    if isinstance(value, AsyncIterator):
        return f"an async iterator ({kind})"
    if callable(value) and not _is_type(value):
        # A callback (a function, a partial, a bound method) runs its code when the
        # application calls it, as a generator does when it is iterated.
        return f"{a_type(value)} (a callback)"
    iterable = _own_iteration(value)
    if iterable is not None:
        return f"{iterable} ({kind})"
    return None


_READERS: Final = ("__iter__", "__getitem__", "keys", "values", "items")
"""How a container's content is read: a subclass that overrides one in Python reads it with its
own code (an ``OrderedDict``'s views override ``__iter__`` in C)."""

_CONTAINERS: Final[tuple[type, ...]] = (
    collections.OrderedDict,  # before dict: its own iteration is the standard one
    dict,
    list,
    tuple,
    set,
    frozenset,
    deque,
    str,
    bytes,
    bytearray,
    memoryview,
    range,
    type({}.keys()),
    type({}.values()),
    type({}.items()),
    MappingProxyType,
    collections.ChainMap,
    collections.UserDict,
    collections.UserList,
    collections.UserString,
)
"""The standard containers: what they hold exists already, and reading it runs no code of theirs."""

_PLAIN: Final = _LEAVES | frozenset(_CONTAINERS)
"""The standard containers and leaves themselves, not subclassed: finished at a glance."""

_DATA_ITERATION: Final = (BaseModel.__iter__, enum.Flag.__iter__, ipaddress.IPv4Network.__iter__)
"""Iterations of data that run no code of the value: a pydantic model's fields, a flag's members,
an ``ipaddress`` network's addresses (IPv4 and IPv6 share it), made from the network's numbers."""

_WRITTEN_IN_C: Final = (
    WrapperDescriptorType,
    MethodDescriptorType,
    BuiltinFunctionType,
    MethodWrapperType,
    ClassMethodDescriptorType,
)
"""What a method written in C is, found on its class: it runs no Python code of the class."""

_UNDECLARED: Final = object()


def _own_iteration(value: object) -> str | None:
    """``"an iterable"`` or ``"an async iterable"`` when iterating ``value`` runs Python code of
    its own class, which may make its items (and do the call's work) only when someone
    iterates it, after the dispatch; ``None`` for finished data.

    Finished: the standard containers (and subclasses that read their content as the
    container does: a ``namedtuple``, a ``defaultdict``, a ``Counter``), pydantic models,
    flags, ``ipaddress`` networks, classes and type hints, whatever cannot be iterated,
    and a class that iterates and reads its items with C code only (a NumPy array, an
    ``array.array``): C code cannot run the application's Python code, unless it calls a
    ``__getitem__`` that the class wrote in Python, which is refused. Judged by the class
    alone, without iterating: ``__iter__``, ``__aiter__``, or the old sequence protocol
    (``__getitem__`` with no ``__iter__``).
    """
    if _is_type(value):
        return None
    cls = type(value)
    if getattr(cls, "__aiter__", None) is not None:
        return "an async iterable"
    for container in _CONTAINERS:
        if isinstance(value, container):
            return "an iterable" if _reads_in_python(cls, container) else None
    iterate = _declared(cls, "__iter__")
    if iterate is None or any(iterate is known for known in _DATA_ITERATION):
        return None  # None declares the class not iterable
    readers = (iterate, _declared(cls, "__getitem__"))
    return "an iterable" if any(map(_written_in_python, readers)) else None


def _reads_in_python(cls: type, container: type) -> bool:
    """Whether ``cls`` reads its content with Python code that the ``container`` it
    subclasses does not have."""
    for name in _READERS:
        reader = getattr(cls, name, None)
        if reader is not getattr(container, name, None) and _written_in_python(reader):
            return True
    return False


def _declared(cls: type, name: str) -> object:
    """What ``cls`` declares as the special method ``name``, found where Python finds it (the
    class and its bases, not its metaclass: an ``Enum``'s ``__getitem__`` is its class's)."""
    return next((vars(klass)[name] for klass in cls.__mro__ if name in vars(klass)), _UNDECLARED)


def _written_in_python(method: object) -> bool:
    declared = method is not None and method is not _UNDECLARED
    return declared and not isinstance(method, _WRITTEN_IN_C)


def _is_type(value: object) -> bool:
    """Whether ``value`` is a class or a type hint (``list[int]``, ``Optional[str]``,
    ``Literal["a"]``, a ``NewType``): data, as ``typing.get_type_hints`` returns it, though
    calling one builds a value."""
    return isinstance(value, type | NewType) or get_origin(value) is not None


def _closed_note(value: object) -> str:
    if inspect.isgenerator(value) or inspect.iscoroutine(value) or inspect.isasyncgen(value):
        return " and closed without running further"
    if _is_future(value):
        return " and cancelled"
    return ""


def _discard(value: object) -> None:
    """Stop what can be stopped: close a generator or coroutine, cancel an asyncio future."""
    if inspect.isgenerator(value) or inspect.iscoroutine(value):
        value.close()
    elif inspect.isasyncgen(value):
        closing = value.aclose()
        try:
            closing.send(None)
        except StopIteration:
            return
        closing.close()  # its cleanup wants to await: that cannot happen here
        raise VeridicError(
            "the refused async generator's cleanup awaits something, which a sync "
            "dispatch cannot do; it was closed without that cleanup"
        )
    elif _is_future(value):
        value.cancel()


def _is_future(value: object) -> TypeGuard[asyncio.Future[object]]:
    # asyncio is imported only by programs that use it; no future exists without it.
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and isinstance(value, asyncio.Future)


def _instruction_targets(target: WriteTarget | Iterable[WriteTarget]) -> list[str]:
    if isinstance(target, Mapping):
        raise VeridicError(
            f"guard_instruction_write() got a mapping, {quoted(target)} (called at "
            f"{_caller(3)}), and a mapping's keys are not what is written: pass the models "
            "being written (its .values()), or the field names as a list, e.g. "
            '["StoredPrompt.content"]'
        )
    items = [target] if isinstance(target, str | BaseModel | type) else list(target)
    if not items or not all(_is_target(item) for item in items):
        raise VeridicError(
            f"guard_instruction_write() needs a pydantic model or field names, got "
            f"{quoted(target)} (called at {_caller(3)}): pass the model being written, "
            'e.g. guard_instruction_write(StoredPrompt), or "StoredPrompt.content", or a '
            "list of them (the rows of a batch)"
        )
    return sorted({field for item in items for field in _fields_written(item)})


def _is_target(item: object) -> bool:
    """Whether ``item`` names what is written: a model, a model class or a field's name."""
    if isinstance(item, str):
        return bool(item.strip())
    return isinstance(item, BaseModel) or (isinstance(item, type) and issubclass(item, BaseModel))


def _fields_written(item: WriteTarget) -> set[str]:
    """The instruction fields written with ``item`` (checked by :func:`_is_target`)."""
    if isinstance(item, str):
        return {item.strip()}
    if isinstance(item, BaseModel):
        paths = model_instruction_paths(type(item)) | _held_paths(item)
        return {f"{type(item).__name__}.{path}" for path in paths}
    return {f"{item.__name__}.{path}" for path in model_instruction_paths(item)}


def _held_paths(model: BaseModel) -> set[str]:
    """The paths of the instruction fields of the models that ``model`` holds, at any depth,
    where its class does not say so: in a field declared ``Any``, ``BaseModel`` or
    ``dict[str, object]``, an extra field, a list or a dataclass of one.

    A revision store's row (``payload: Any``) that holds another feature's system prompt
    writes that prompt as surely as the prompt's own model does: judged by its class, the
    guard saw no instruction field, and a mid "revert" under an always rule wrote it.
    Containers add nothing to the path (as :func:`model_instruction_paths` writes it).
    """
    found: set[str] = set()
    seen: dict[int, object] = {}  # kept alive: a mapping may build its values as it is read
    stack: list[tuple[str, object]] = list(_fields_of(model, ""))
    while stack:
        path, value = stack.pop()
        if type(value) in _LEAVES or id(value) in seen:
            continue
        seen[id(value)] = value
        if isinstance(value, BaseModel):
            found.update(f"{path}.{inner}" for inner in model_instruction_paths(type(value)))
            stack.extend(_fields_of(value, f"{path}."))
        elif isinstance(value, Mapping):
            stack.extend((path, item) for item in value.values())
        elif isinstance(value, _SEQUENCES):
            stack.extend((path, item) for item in value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            stack.extend(
                (f"{path}.{field.name}", getattr(value, field.name))
                for field in dataclasses.fields(value)
            )
    return found


def _fields_of(model: BaseModel, prefix: str) -> list[tuple[str, object]]:
    """``model``'s declared and extra fields with their values, each path after ``prefix``.

    An extra field's name is data (any key of what was validated): one that is not a short
    identifier is shown clipped, in brackets, as the refusal and the audit record quote it.
    """
    declared = [(f"{prefix}{name}", getattr(model, name)) for name in type(model).model_fields]
    extra = model.model_extra or {}
    return declared + [(_extra_path(prefix, name), value) for name, value in extra.items()]


def _extra_path(prefix: str, name: str) -> str:
    if name.isidentifier() and len(name) <= 40:
        return f"{prefix}{name}"
    return f"{prefix.removesuffix('.')}[{_key(name)}]"


def _check_call(call: Dispatch) -> None:
    if not isinstance(call.tool, str) or not call.tool.strip():
        raise VeridicError(
            f"a dispatch needs the tool's name, got {quoted(call.tool)}: pass the name the "
            "model called"
        )
    if not isinstance(call.risk, Risk) or not isinstance(call.approval, ApprovalMode):
        raise VeridicError(
            f"the dispatch of {clip(call.tool)} got risk {quoted(call.risk)} and approval "
            f"{quoted(call.approval)}: pass the tool's declared Risk and the ApprovalMode the "
            "policy decided"
        )
    if call.kind not in (None, "query", "write"):
        raise VeridicError(
            f"the dispatch of {clip(call.tool)} got kind {quoted(call.kind)}: pass the tool's "
            'declared kind, "query" or "write" (or leave it out)'
        )
