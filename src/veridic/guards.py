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
high risk and this call of it was confirmed by the user. Delegation does not
launder risk: a mid tool that calls into a high-risk write, directly or
through a nested dispatch, is still judged as the mid tool it is. Code that
runs outside any agent dispatch (migrations, admin scripts, the application's
own UI handlers) is not affected: there the guards do nothing.

The context variable follows ``asyncio`` tasks and ``asyncio.to_thread``,
and each thread has its own. A raw ``threading.Thread`` or an executor
started without ``contextvars.copy_context()`` starts outside any dispatch,
so its guarded operations are not checked: carry the context into work you
hand off (``asyncio.to_thread`` does it for you).

>>> from veridic.risk import ApprovalMode, Risk
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

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import BaseModel

from veridic.errors import GuardDeniedError, VeridicError
from veridic.fields import instruction_fields
from veridic.provenance import _caller
from veridic.risk import ApprovalMode, Risk

__all__ = [
    "Dispatch",
    "DispatchScope",
    "GuardEvent",
    "GuardKind",
    "current_dispatch",
    "dispatching",
    "guard_instruction_write",
    "guard_irreversible",
]

GuardKind = Literal["irreversible", "instruction_write"]


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A tool call the executor dispatched: the tool, its declared risk, how it was approved."""

    tool: str
    risk: Risk
    approval: ApprovalMode
    request_id: str = ""

    @property
    def may_do_high_risk(self) -> bool:
        """Whether this call may perform irreversible or instruction writes."""
        return self.risk >= Risk.HIGH and self.approval is ApprovalMode.USER_CONFIRMED


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """One guard that fired during a dispatch.

    Attributes:
        kind: which guard.
        operations: the operation keys (``"irreversible:hard delete golden fixture"``,
            ``"instruction_write:StoredPrompt.content"``), as the audit record stores them.
        allowed: whether the operation was (or, when observing, would be) let through.
        direct: the directly dispatched call the guard judged.
        where: ``file:line`` of the store code that called the guard.
    """

    kind: GuardKind
    operations: tuple[str, ...]
    allowed: bool
    direct: Dispatch
    where: str


class DispatchScope:
    """What one dispatch saw: the call, and every guard that fired inside it.

    Yielded by :func:`dispatching`; the executor reads :attr:`events` after
    the handler returns to fill the audit record. Guards that fire inside a
    nested dispatch are reported to every enclosing scope too.
    """

    __slots__ = ("_events", "_lock", "_observing", "_parent", "call", "direct")
    call: Dispatch
    direct: Dispatch
    _parent: DispatchScope | None
    _observing: bool
    _events: list[GuardEvent]
    _lock: threading.Lock

    def __init__(
        self, call: Dispatch, parent: DispatchScope | None, *, observing: bool = False
    ) -> None:
        self.call = call
        """The call this scope was entered for."""
        self.direct = call if parent is None else parent.direct
        """The call the agent dispatched directly: the outermost one; guards judge it."""
        self._parent = parent
        # Only an outermost scope may observe: code running inside a real dispatch cannot
        # switch its guards off by entering veridic.effects.observe().
        self._observing = observing if parent is None else parent._observing
        self._events = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DispatchScope({self.call.tool!r}, direct={self.direct.tool!r})"

    @property
    def observing(self) -> bool:
        """Whether guards record without refusing (the effects harness, :mod:`veridic.effects`)."""
        return self._observing

    @property
    def events(self) -> tuple[GuardEvent, ...]:
        """The guards that fired so far, in order."""
        with self._lock:
            return tuple(self._events)

    @property
    def blocked(self) -> tuple[GuardEvent, ...]:
        """The guards that refused an operation."""
        return tuple(event for event in self.events if not event.allowed)

    def _record(self, event: GuardEvent) -> None:
        scope: DispatchScope | None = self
        while scope is not None:
            with scope._lock:
                scope._events.append(event)
            scope = scope._parent


_current: Final[ContextVar[DispatchScope | None]] = ContextVar("veridic_dispatch", default=None)


def current_dispatch() -> Dispatch | None:
    """The call the agent dispatched directly in this context, or ``None`` outside any dispatch.

    >>> current_dispatch() is None
    True
    """
    scope = _current.get()
    return None if scope is None else scope.direct


@contextmanager
def dispatching(
    tool: str, risk: Risk, approval: ApprovalMode, *, request_id: str = ""
) -> Iterator[DispatchScope]:
    """Run the body as the dispatch of ``tool``, so guards inside it can judge the call.

    The executor enters it around ``view.dispatch``; call it yourself only
    when you dispatch tools without :func:`veridic.execute`. Nested
    dispatches keep the outer call as the direct one: delegating never
    gains authority.

    Raises:
        VeridicError: ``tool`` is empty, ``risk`` is not a :class:`Risk` or
            ``approval`` not an :class:`ApprovalMode`.
    """
    with _entered(Dispatch(tool, risk, approval, request_id), observing=False) as scope:
        yield scope


@contextmanager
def _entered(call: Dispatch, *, observing: bool) -> Iterator[DispatchScope]:
    _check_call(call)
    scope = DispatchScope(call, _current.get(), observing=observing)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def guard_irreversible(operation: str, /) -> None:
    """Call before an operation that cannot be undone; raises if this dispatch may not do it.

    Name the operation, not the instance (``"hard delete golden fixture"``,
    not ``"delete fixture 42"``): the name is the key by which the audit
    store recognises a later call attempting the same thing.

    Raises:
        GuardDeniedError: inside a dispatch whose direct tool is not high risk
            or whose call was not confirmed by the user. Outside any dispatch
            the guard does nothing.
        VeridicError: ``operation`` is empty.
    """
    if not isinstance(operation, str) or not operation.strip():
        raise VeridicError(
            f"guard_irreversible() needs the operation's name, got {operation!r} "
            f"(called at {_caller(2)}): name what cannot be undone, "
            'e.g. guard_irreversible("hard delete golden fixture")'
        )
    scope = _current.get()
    if scope is None:
        return
    _judge(scope, "irreversible", (f"irreversible:{operation.strip()}",), repr(operation.strip()))


def guard_instruction_write(target: type[BaseModel] | BaseModel | str | Iterable[str], /) -> None:
    """Call before writing fields read as instruction; raises if this dispatch may not do it.

    ``target`` is the pydantic model being written (class or instance: every
    ``InstructionField`` in it counts, nested models included) or field
    names as ``"Model.field"``. A model without instruction fields needs no
    guard, and passes.

    Raises:
        GuardDeniedError: inside a dispatch whose direct tool is not high risk
            or whose call was not confirmed by the user. Outside any dispatch
            the guard does nothing.
        VeridicError: ``target`` names no field (an empty string or list).
    """
    fields = _instruction_targets(target)
    if not fields:
        return
    scope = _current.get()
    if scope is None:
        return
    operations = tuple(f"instruction_write:{name}" for name in fields)
    _judge(scope, "instruction_write", operations, ", ".join(fields))


def _judge(scope: DispatchScope, kind: GuardKind, operations: tuple[str, ...], what: str) -> None:
    direct = scope.direct
    allowed = direct.may_do_high_risk
    where = _caller(3)
    scope._record(GuardEvent(kind, operations, allowed, direct, where))
    if allowed or scope.observing:
        return
    label = "irreversible operation" if kind == "irreversible" else "write of instruction fields"
    via = "" if scope.call is direct else f" (delegated through {scope.call.tool!r})"
    raise GuardDeniedError(
        f"{label} {what} (at {where}) was refused before it happened: the tool the agent "
        f"dispatched directly is {direct.tool!r}{via}, risk {direct.risk.value}, "
        f"approval {direct.approval.value}; it needs a high-risk tool whose call the user "
        f"confirmed: declare {direct.tool!r} high risk (irreversible=True, or writes= the "
        "model) so each call asks the user, or do this outside agent dispatch"
    )


def _instruction_targets(target: type[BaseModel] | BaseModel | str | Iterable[str]) -> list[str]:
    if isinstance(target, BaseModel):
        target = type(target)
    if isinstance(target, type) and issubclass(target, BaseModel):
        return sorted(f"{target.__name__}.{path}" for path in instruction_fields(target))
    names = [target] if isinstance(target, str) else list(target)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise VeridicError(
            f"guard_instruction_write() needs a pydantic model or field names, got "
            f"{target!r} (called at {_caller(3)}): pass the model being written, "
            'e.g. guard_instruction_write(StoredPrompt), or "StoredPrompt.content"'
        )
    return sorted({n.strip() for n in names})


def _check_call(call: Dispatch) -> None:
    if not isinstance(call.tool, str) or not call.tool.strip():
        raise VeridicError(
            f"a dispatch needs the tool's name, got {call.tool!r}: pass the name the model called"
        )
    if not isinstance(call.risk, Risk) or not isinstance(call.approval, ApprovalMode):
        raise VeridicError(
            f"the dispatch of {call.tool!r} got risk {call.risk!r} and approval "
            f"{call.approval!r}: pass the tool's declared Risk and the ApprovalMode the "
            "policy decided"
        )
