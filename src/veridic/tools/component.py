"""``Component``: an optional part of an application, whose tools are promised only while it runs.

A plug-in or a paid tier registers its tools through :meth:`Registry.component
<veridic.Registry.component>`; its boot check decides whether those tools are in a
view. The check runs at boot and again as ``recheck`` says (a licence that
expires mid-process must not stay promised); a check that fails takes the
component's tools out of every later view, and each view's capability section
says so, with the reason (decided by :mod:`veridic.tools.boot_failure`) and the
hint. The registry holds the components and applies their states; this module
holds what one component knows about itself.
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Literal, Protocol, TypeVar

from pydantic import BaseModel

from veridic._sample import clip
from veridic._words import a_type
from veridic._workflow_commands import inert_line
from veridic.errors import VeridicError
from veridic.text.provenance import TrustedText
from veridic.text.terminal_view import visible
from veridic.tools._decorator_use import kind_required
from veridic.tools.boot_failure import BootError, _boot_detail, _boot_reason
from veridic.tools.risk import RiskLike, ToolKind
from veridic.tools.tool import ToolHints
from veridic.tools.view import ComponentState

__all__ = ["Component", "Recheck"]

F = TypeVar("F", bound=Callable[..., object])

Recheck = Literal["view"] | float | None
"""When a component's boot check runs again: ``None`` (never: once, at boot), ``"view"``
(for every view) or a positive number of seconds (when a view is made and the last check
is older than that)."""


class _Owner(Protocol):
    """What a component asks of the registry that made it: to register its tools.

    A protocol, not the ``Registry`` class: the registry imports this module, and a
    component needs nothing else of it.
    """

    def _decorator(
        self,
        component: str | None,
        kind: ToolKind,
        risk: RiskLike | None,
        irreversible: bool,
        writes: Iterable[type[BaseModel]],
        name: str | None,
        description: str | None,
        roles: Iterable[str],
        hints: ToolHints | None = None,
    ) -> Callable[[F], F]: ...

    def _external(
        self,
        component: str | None,
        name: str,
        description: str,
        input_schema: Mapping[str, object],
        handler: Callable[[dict[str, object]], object],
        kind: ToolKind,
        risk: RiskLike | None,
        pin: str | None,
        irreversible: bool,
        source: TrustedText,
        roles: Iterable[str],
        unavailable: TrustedText | None = None,
        hints: ToolHints | None = None,
    ) -> None: ...


_log = logging.getLogger("veridic.registry")
"""The registry's log: a component is part of it."""


class Component:
    """An optional part of the application (a plug-in, a paid tier) and its tools.

    Made by :meth:`~veridic.Registry.component`. Its ``boot`` check runs when
    the registry boots, and again as ``recheck`` says (``None``: never again;
    ``"view"``: for every view; seconds: when a view is made and the last
    check is older) or when :meth:`~veridic.Registry.recheck` asks; if it raises (or
    returns ``False`` or another false value; ``None`` and a value with no truth value,
    such as a NumPy array, are a pass) the component is down:
    its tools are in no view, and
    every view's capability section says so, with the reason and the hint.
    """

    __slots__ = (
        "_applied",
        "_boot",
        "_checked_at",
        "_lock",
        "_recheck",
        "_reentered",
        "_registry",
        "_runner",
        "_runs",
        "hint",
        "name",
        "provides",
    )

    def __init__(
        self,
        registry: _Owner,
        name: TrustedText,
        boot: Callable[[], object] | None,
        hint: TrustedText,
        provides: TrustedText | None,
        recheck: Recheck = None,
    ) -> None:
        self._registry = registry
        self._boot = boot
        self.name = name
        self.hint = hint
        self.provides = provides
        self._recheck: Recheck = recheck
        # One check at a time (the boot callable need not be thread-safe); _runs
        # numbers the checks, _applied is the latest whose state the registry holds.
        self._lock = threading.Lock()
        self._runs = 0
        self._applied = 0
        self._checked_at = -math.inf
        # The thread running the check now, and whether the check asked the registry to
        # run it again (a view, a recheck) meanwhile: see _refuse_reentry.
        self._runner: int | None = None
        self._reentered = False

    def __repr__(self) -> str:
        return f"<Component {self.name!r} of {self._registry!r}>"

    @property
    def recheck(self) -> Recheck:
        """When the boot check runs again (as declared; seconds as a ``float``)."""
        return self._recheck

    # kind_required forwards the call as it is made, and callers call tool() by its
    # name, which the plugin checks: the wrapper is reached only through that name.
    @kind_required  # type: ignore[veridic-literal]  # see the comment above
    def tool(
        self,
        *,
        kind: ToolKind,
        risk: RiskLike | None = None,
        irreversible: bool = False,
        writes: Iterable[type[BaseModel]] = (),
        name: str | None = None,
        description: TrustedText | None = None,
        roles: Iterable[str] = (),
        hints: ToolHints | None = None,
    ) -> Callable[[F], F]:
        """Register a tool of this component; the keywords of :meth:`~veridic.Registry.tool`."""
        return self._registry._decorator(
            self.name, kind, risk, irreversible, writes, name, description, roles, hints
        )

    def external(
        self,
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, object],
        handler: Callable[[dict[str, object]], object],
        kind: ToolKind,
        risk: RiskLike | None = None,
        pin: str | None = None,
        irreversible: bool = False,
        source: TrustedText = "an external spec",
        roles: Iterable[str] = (),
        unavailable: TrustedText | None = None,
        hints: ToolHints | None = None,
    ) -> None:
        """Register an external tool of this component, as :meth:`~veridic.Registry.external`."""
        self._registry._external(
            self.name,
            name,
            description,
            input_schema,
            handler,
            kind,
            risk,
            pin,
            irreversible,
            source,
            roles,
            unavailable,
            hints,
        )

    def run_boot(self) -> ComponentState:
        """Run the boot check and say how it went (a failure is logged).

        The registry runs it at boot and as ``recheck`` says; calling it
        yourself changes no view (:meth:`~veridic.Registry.recheck` does). The
        state's ``reason`` is what the capability section will say; the
        exception's whole message is logged (with the traceback at DEBUG) and
        kept in the state's ``detail``.
        """
        state = self._evaluate()
        if state.started is False:
            _log.warning("component %r did not start: %s", self.name, _logged(state.detail))
        return state

    def _run(self, clock: Callable[[], float]) -> tuple[ComponentState, int]:
        """Run the check now, one at a time; the state and the check's number.

        ``clock`` (the registry's ``time.monotonic``) dates the check when it ends.
        """
        self._refuse_reentry()
        with self._lock:
            return self._numbered(clock)

    def _run_if_due(
        self, now: float, clock: Callable[[], float]
    ) -> tuple[ComponentState, int] | None:
        """Run the check if ``recheck`` says it is due at ``now`` (a ``clock()``); ``None``
        when it is not, or a check that ended while this one waited made it fresh."""
        self._refuse_reentry()
        with self._lock:
            return self._numbered(clock) if self._due(now) else None

    def _numbered(self, clock: Callable[[], float]) -> tuple[ComponentState, int]:
        self._runner, self._reentered = threading.get_ident(), False
        try:
            state = self._evaluate()
        finally:
            self._runner = None
        if self._reentered:
            state = _reentered_state(self)
        self._checked_at = clock()
        self._runs += 1
        return state, self._runs

    def _refuse_reentry(self) -> None:
        """Refuse to run the check from inside itself (it asked the registry for a view).

        The check holds this component's lock while it runs, so waiting for the lock
        would hang the thread for good (the seed's own fix, "ask the executable catalog",
        written as ``boot=lambda: "x" in registry.view().names()``). What the view would
        hold depends on this very check, so there is no answer to give: the call raises,
        and the component does not start, even if the check caught the error.
        """
        if self._runner == threading.get_ident():
            self._reentered = True
            raise BootError(_REENTERED)

    def _due(self, now: float) -> bool:
        recheck = self._recheck
        return recheck == "view" or (
            isinstance(recheck, float) and now - self._checked_at >= recheck
        )

    def _evaluate(self) -> ComponentState:
        if self._boot is None:
            return ComponentState(self.name, True, "", self.hint, self.provides)
        try:
            result = self._boot()
        except Exception as error:
            reason, detail = _boot_reason(error), _boot_detail(error)
            if _log.isEnabledFor(logging.DEBUG):
                _log.debug("component %r boot failure:\n%s", self.name, _logged_traceback(error))
            return ComponentState(self.name, False, reason, self.hint, self.provides, detail)
        if result is False:
            reason = "its boot check returned False"
            return ComponentState(self.name, False, reason, self.hint, self.provides, reason)
        if inspect.isawaitable(result):
            # Never awaited, so nothing was checked; a coroutine is no "started" (fail closed).
            # Not the type's name: a class made at run time may carry any, and the reason is
            # printed in the capability section (the detail, for the log, names it).
            shown = "an awaitable"
            if inspect.iscoroutine(result):
                result.close()
                shown = "a coroutine"
            reason = f"its boot check returned {shown}, which is never awaited"
            detail = (
                f"its boot check returned {a_type(result)}, which is never awaited: the "
                "registry runs boot checks synchronously, so an async def check "
                "never runs; pass a plain function (read what it needs before, or run the "
                "coroutine in it with asyncio.run)"
            )
            return ComponentState(self.name, False, reason, self.hint, self.provides, detail)
        if result is not None and result is not True:
            refused = _refused_answer(result)
            if refused is not None:
                reason, detail = refused
                return ComponentState(self.name, False, reason, self.hint, self.provides, detail)
        return ComponentState(self.name, True, "", self.hint, self.provides)


def _refused_answer(result: object) -> tuple[str, str] | None:
    """The reason and detail when a check's answer, neither ``None``, ``True`` nor
    ``False``, is a "no": a false value (``0`` days of licence left, an empty key read
    from the environment, an empty list of features), as it is for a view's predicate.
    ``None`` stays a pass: a check that returns nothing raises to fail (``lambda:
    calls.append(1)``). So does a value with no truth value: a check that warms a model
    up returns its prediction (a NumPy array, a pandas frame), which says it ran, not
    "no", as any value that is not false did before false values counted."""
    try:
        if result:
            return None
    except Exception:  # no truth value: see above
        return None
    reason = "its boot check returned a false value"
    try:
        shown = clip(repr(result), 60)
    except Exception:  # a repr that fails says nothing more than the type
        shown = "a value"
    detail = (
        f"{reason} ({shown} of type {type(result).__qualname__}): return True to start "
        "the component, or raise BootError with the reason it did not start"
    )
    return reason, detail


_REENTERED: Final = (
    "its boot check asked the registry for a view (or a recheck) while the check ran"
)


def _reentered_state(component: Component) -> ComponentState:
    """The state of a component whose check asked the registry to run it again."""
    detail = (
        f"BootError: {_REENTERED}: what a view holds depends on this check, so it cannot "
        "be asked while the check runs; read registry.names() (every registered name, "
        "without booting) or registry.components() in the check instead, or check the "
        "other component's own condition"
    )
    return ComponentState(
        component.name, False, _REENTERED, component.hint, component.provides, detail
    )


def _logged(detail: str) -> str:
    """A failed boot's message for one log line: its controls and invisible characters shown,
    and no workflow command in it.

    The message is the exception's, and the exception may quote outside text (a
    licence server's answer). Raw, its line breaks and escape sequences would
    forge log lines, or repaint the terminal of the ``veridic`` command that
    prints the log before its report; and an application that logs to stderr in
    GitHub Actions would have the runner obey its ``##[error]`` (see
    :mod:`veridic._workflow_commands`). ``Registry.components()`` keeps it whole.
    """
    return inert_line(visible(detail, None))


def _logged_traceback(error: BaseException) -> str:
    """``error``'s traceback for the DEBUG log, every line of it as :func:`_logged` shows one.

    Logged raw (``exc_info``), its last lines are the exception's message, outside text
    like the detail :func:`_logged` shows: its ``##[error]`` or a line of ``::error ...::``
    reached a CI log as a workflow command. The traceback stays whole, frame by frame;
    only its characters are shown as the other log lines show them.
    """
    lines = "".join(traceback.format_exception(error)).splitlines()
    return "\n".join(_logged(line) for line in lines)


def _recheck_mode(name: str, recheck: object, boot: object) -> Recheck:
    """``recheck`` checked: ``None``, ``"view"`` or a positive, finite number of seconds."""
    if recheck is None:
        return None
    if recheck == "view" and isinstance(recheck, str):
        mode: Recheck = "view"
    elif (
        isinstance(recheck, int | float)
        and not isinstance(recheck, bool)
        and math.isfinite(recheck)
        and recheck > 0
    ):
        mode = float(recheck)
    else:
        raise VeridicError(
            f"registry.component({name!r}, recheck={recheck!r}): recheck is None (run the "
            'boot check once, at boot), "view" (run it again for every view) or a positive '
            "number of seconds (run it again when a view is made and the last check is older "
            'than that): pass one of those, e.g. recheck=300 or recheck="view"'
        )
    if boot is None:
        raise VeridicError(
            f"registry.component({name!r}, recheck={recheck!r}) has no boot check to run "
            "again: pass boot=... (the licence or feature check), or leave recheck out"
        )
    return mode
