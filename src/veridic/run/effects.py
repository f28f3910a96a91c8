"""A test harness that judges a tool's risk by what it did, not by what it says.

A declared risk ships in the same change as the behaviour it describes, so
the case worth catching is behaviour moving while the declaration stands
still: a hard delete named ``purge`` declared mid. The guards in store code
(:func:`~veridic.tools.guards.guard_irreversible`,
:func:`~veridic.tools.guards.guard_instruction_write`) are the observation points:
run the tool under :func:`observe`, and the guards record what fired instead of
refusing it, so the whole handler runs and every effect is seen. Then
:func:`check_declared_risk` fails when an observed effect needs a higher risk
than the tool declared.

Only guarded operations are seen: an effect the store does not mark (mail,
an after-commit hook, a background job) is invisible here, as it is to the
run-time gate. A guard that fires after the observed block ended, in a task
or thread the tool started, is refused like any late guard (observing does
not extend a call's authority) and still counts: it is among the
observation's events, marked ``late``. A tool whose handler returns a lazy
value (a generator, an iterator, a coroutine from a sync wrapper, an
iterable whose class iterates with Python code of its own) fails
:func:`run_observed`, as it fails :func:`veridic.execute`. What
:func:`veridic.execute` runs of the call inside its dispatch is observed
too: the result rendered for the model (a ``computed_field``, a ``__str__``),
and the message of the error it raised. Validating the arguments is not part of the
call: it runs before approval, so a guarded operation in an argument model's validator
is refused (:class:`~veridic.GuardDeniedError`, raised by :func:`run_observed` before
anything is observed), as it is by :func:`veridic.execute`.

>>> def purge(name: str) -> None:
...     guard_irreversible("hard delete golden fixture")
>>> with observe("purge", Risk.MID) as seen:
...     purge("fixture-42")
>>> seen.observation.required, seen.observation.operations
(<Risk.HIGH: 'high'>, ('irreversible:hard delete golden fixture',))
>>> check_declared_risk([seen.observation])
Traceback (most recent call last):
  ...
veridic.errors.RiskFloorError: tool 'purge' declares risk mid but did ...
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from veridic.errors import RiskFloorError, RiskViolation, VeridicError
from veridic.run.approval import ApprovalMode
from veridic.run.executor import _message, _plain
from veridic.tools.guards import Dispatch, DispatchScope, GuardEvent, _entered
from veridic.tools.risk import Risk, ToolKind
from veridic.tools.view import ToolView

__all__ = [
    "Observation",
    "Observer",
    "arun_observed",
    "check_declared_risk",
    "observe",
    "run_observed",
]


@dataclass(frozen=True, slots=True)
class Observation:
    """What a tool did while it was observed: the guards that fired, in order.

    ``events`` ends with the late ones (``event.late``): guards that fired in
    work the tool left running after the observed block ended. They were
    refused, but the tool attempted them, so they count towards :attr:`required`.
    """

    tool: str
    declared: Risk
    events: tuple[GuardEvent, ...]
    kind: ToolKind | None = None
    """The tool's declared kind (``None``: not said): a query that did anything is understated."""

    @property
    def operations(self) -> tuple[str, ...]:
        """Every guarded operation the tool performed, sorted, unique."""
        return tuple(sorted({op for event in self.events for op in event.operations}))

    @property
    def required(self) -> Risk | None:
        """The least risk the observed effects need (``None`` when no guard fired)."""
        return Risk.HIGH if self.events else None

    @property
    def understated(self) -> bool:
        """Whether the tool declared less than its effects need: a risk below them, or
        a query (which changes nothing) at any risk, unless all it did was read a
        high-risk query through the view while declared high risk itself."""
        if self.required is None:
            return False
        if self.declared < self.required:
            return True
        # A high-risk query may read another high-risk query through the view (that
        # dispatch was allowed); any other effect is no query's, whatever its risk.
        return self.kind == "query" and not all(_read(event) for event in self.events)


class Observer:
    """Yielded by :func:`observe`; :attr:`observation` holds what was seen so far."""

    __slots__ = ("_scope",)

    def __init__(self, scope: DispatchScope) -> None:
        self._scope = scope

    @property
    def observation(self) -> Observation:
        """What was seen so far: the events of the block, then the late ones."""
        call = self._scope.call
        events = self._scope.events + self._scope.late_events
        return Observation(call.tool, call.risk, events, call.kind)


@contextmanager
def observe(tool: str, declared: Risk, *, kind: ToolKind | None = None) -> Iterator[Observer]:
    """Run the body as a user-confirmed dispatch of ``tool`` whose guards record, never refuse.

    For tests only: inside it, an understated tool's dangerous operations
    really happen, so point it at test data. Entered inside a real dispatch
    it switches nothing off: the guards keep judging the outer call.
    ``kind`` is the tool's declared kind: a ``"query"`` whose body fires a
    guard is understated whatever ``declared`` says.
    """
    call = Dispatch(tool, declared, ApprovalMode.USER_CONFIRMED, "veridic.effects", kind)
    with _entered(call, observing=True) as scope:
        yield Observer(scope)


def run_observed(
    view: ToolView, name: str, arguments: Mapping[str, object] | str | None = None
) -> Observation:
    """Dispatch ``name`` through ``view`` under :func:`observe` with its declared risk.

    The handler's own errors propagate; an ``async`` tool needs :func:`arun_observed`.
    The result is rendered for the model inside the observation, and an error's
    message read there, as :func:`veridic.execute` does inside its dispatch: code
    they run (a ``computed_field``, a ``__str__``) is part of the call.

    Raises:
        UnknownToolError, ToolUnavailableError, ToolDeniedError,
        InvalidArgumentsError: as :meth:`ToolView.validate`.
        VeridicError: the tool is ``async``, or its handler returned a lazy
            value (see :meth:`veridic.tools.view.PreparedCall.invoke`); a refused
            generator or coroutine is closed inside the observation.
    """
    prepared = view.validate(name, arguments)
    if prepared.tool.is_async:
        raise VeridicError(
            f"tool {name!r} ({prepared.tool.origin}) is async: observe it with "
            "await arun_observed(view, name, arguments)"
        )
    with observe(prepared.tool.name, prepared.tool.risk, kind=prepared.tool.kind) as seen:
        try:
            _plain(prepared.invoke())
        except Exception as error:
            _message(error)
            raise
    return seen.observation


async def arun_observed(
    view: ToolView, name: str, arguments: Mapping[str, object] | str | None = None
) -> Observation:
    """:func:`run_observed` for any tool, awaiting an ``async`` handler inside the observation.

    Raises:
        VeridicError: the awaited result is lazy (a generator, an async
            generator, an iterator, another awaitable).
    """
    prepared = view.validate(name, arguments)
    with observe(prepared.tool.name, prepared.tool.risk, kind=prepared.tool.kind) as seen:
        try:
            _plain(await prepared.ainvoke())
        except Exception as error:
            _message(error)
            raise
    return seen.observation


def check_declared_risk(observations: Iterable[Observation]) -> None:
    """Fail when any observed tool did something its declared risk does not cover.

    Raises:
        RiskFloorError: naming every understated tool, each effect and where
            it happened, and the declaration to write instead.
    """
    understated = [o for o in observations if o.understated]
    if understated:
        raise RiskFloorError(
            "; ".join(map(_problem, understated)),
            violations=tuple(
                RiskViolation(
                    o.tool,
                    o.declared.value,
                    (o.required or Risk.HIGH).value,
                    ("a query that did " if o.kind == "query" else "did ")
                    + ", ".join(_describe(op) for op in o.operations),
                )
                for o in understated
            ),
        )


def _problem(observation: Observation) -> str:
    # dict.fromkeys: once each (a delegated tool's dispatch and its effect share a key).
    seen = ", ".join(
        dict.fromkeys(
            f"{_describe(op)} (at {event.where})"
            for event in observation.events
            for op in event.operations
        )
    )
    required = observation.required or Risk.HIGH
    if observation.kind == "query" and all(e.kind == "delegation" for e in observation.events):
        # What it ran may be a high-risk query (fine at high risk) or a write (never fine).
        return (
            f"tool {observation.tool!r} is declared a query (risk "
            f"{observation.declared.value}) but did {seen} while observed; a query runs "
            "through the view only other queries, and a high-risk one only when it is high "
            "risk itself: declare risk=Risk.HIGH when what it runs is a high-risk query, "
            "kind='write' when what it runs writes, or remove the effect"
        )
    if observation.kind == "query":  # no risk covers it: "declare risk=HIGH" would not do
        return (
            f"tool {observation.tool!r} is declared a query (risk "
            f"{observation.declared.value}) but did {seen} while observed; a query reads and "
            "changes nothing, and no approval of it covers such an effect: declare "
            "kind='write' (irreversible=True for an operation that cannot be undone, writes= "
            "the model for a write read as instruction), or remove the effect"
        )
    return (
        f"tool {observation.tool!r} declares risk {observation.declared.value} but did {seen} "
        f"while observed; those effects need risk {required.value}: declare "
        f"risk=Risk.{required.name} (irreversible=True for an operation that cannot be "
        "undone, writes= the model for a write read as instruction), or remove the effect"
    )


def _read(event: GuardEvent) -> bool:
    """Whether ``event`` is one a query may cause: an allowed dispatch of a high-risk query
    (the guards allow a query no other operation, nor a dispatch of a write)."""
    return event.kind == "delegation" and event.allowed


def _describe(operation: str) -> str:
    kind, _, what = operation.partition(":")
    if kind == "irreversible":
        return f"irreversible operation {what!r}"
    if kind == "delegation":
        return f"a dispatch of tool {what!r}"
    return f"a write of instruction field {what}"
