"""What a view says about a name it is asked for, and about a component that did not start.

A :class:`ToolStatus` is the one answer to "can the model call this here?":
:meth:`ToolView.status <veridic.ToolView.status>` returns it, dispatch raises
the error it names, the capability section lists the withheld tools it
describes, and :func:`veridic.normalize_plan` drops a step by it. A
:class:`ComponentState` is a component's boot outcome, which the registry
records and a view reports. They are values apart from the view, so the code
that decides them (the filters) and the code that writes them out (the
section) read the same ones without importing the view that gathers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from veridic._sample import clip
from veridic.errors import (
    ToolDeniedError,
    ToolUnavailableError,
    UnknownToolError,
    VeridicError,
)
from veridic.tools.tool import SCHEMA_TOOL, Tool

__all__ = [
    "ComponentState",
    "StatusCause",
    "StatusState",
    "ToolStatus",
]

StatusState = Literal["exposed", "unknown", "unavailable", "denied"]
"""The four answers a view gives about a name; each but ``"exposed"`` is an error to dispatch
(:meth:`ToolStatus.error`)."""
StatusCause = Literal[
    "", "component", "description", "pin", "withheld", "role", "allow", "predicate", "deny"
]
"""Why a registered name is not exposed (``""`` when it is, or was never registered): the
capability section reads it to choose which withheld tools it names, the doc-gap report to
find the tools withheld for their description."""


@dataclass(frozen=True, slots=True)
class ComponentState:
    """The boot outcome of a component: ``started`` is ``None`` until the registry boots.

    ``reason`` is what the capability section says about a failed boot: the
    reason a :class:`~veridic.BootError` gave in code, or only the exception's
    type (an exception's message may quote outside text). ``detail`` is the
    whole message, for logs and operators; it never reaches a prompt.
    """

    name: str
    started: bool | None
    reason: str
    hint: str
    provides: str | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ToolStatus:
    """What a view says about a name, without raising.

    ``state`` is ``"exposed"``, ``"unknown"`` (never registered),
    ``"unavailable"`` (registered, cannot run here; ``cause`` is
    ``"component"``, ``"description"``, ``"pin"`` or ``"withheld"``) or ``"denied"``
    (filtered by this view's policy; ``cause`` is ``"role"``, ``"allow"``,
    ``"predicate"`` or ``"deny"``). ``tool`` is the registered tool whenever
    there is one; ``suggestions`` are the nearest exposed names of an unknown one.
    """

    name: str
    state: StatusState
    reason: str = ""
    hint: str = ""
    cause: StatusCause = ""
    tombstoned: bool = False
    tool: Tool | None = None
    suggestions: tuple[str, ...] = ()

    @property
    def exposed(self) -> bool:
        return self.state == "exposed"

    @property
    def hidden(self) -> bool:
        """Whether the view keeps this tool from the model altogether: denied, not tombstoned.

        A tool filtered out by a role, the allow list, a predicate or a
        :class:`~veridic.Deny` that does not tombstone it is in none of the three
        projections, so the model never learns its name. For the application and a
        reviewer it stays ``"denied"`` (``cause`` says by what, ``reason`` why;
        :meth:`error` is the :class:`~veridic.ToolDeniedError` that ``view.dispatch``
        raises, a dropped plan step's reason is ``"denied"``, the audit record says
        so), since that is the truth and what the contract calls a tool a policy
        filtered out. What the *model* is told of it is what a name nobody
        registered gets (:meth:`ToolView.unknown <veridic.ToolView.unknown>`):
        :func:`veridic.execute` answers its call that way, and so do
        ``get_tool_schema`` asked for it and a plan's notice. "Denied (it requires
        one of the roles admin)" would confirm a tool kept from it, and name what
        opens it, to any text that planted or guessed the name.

        The built-in ``get_tool_schema`` of a view built with ``schema_tool=False`` is
        not hidden: its name is in every registry, and the model that calls it is told
        where the input schemas are instead.
        """
        return self.state == "denied" and not self.tombstoned and self.name != SCHEMA_TOOL

    def error(self) -> VeridicError | None:
        """The error dispatching this name raises (``None`` when it is exposed)."""
        if self.state == "exposed":
            return None
        if self.state == "unknown":
            # Who reads this is most often the model that wrote the name (a typo, a tool
            # it made up), told through execute(): the name is quoted clipped and escaped,
            # and it is pointed at the tools it may call, not told to register one.
            nearest = ", ".join(self.suggestions) or "none"
            return UnknownToolError(
                f"no tool is named {clip(self.name)}; it was never registered (nearest valid "
                f"names: {nearest}): call one of the tools this view lists by its name",
                name=self.name,
                suggestions=self.suggestions,
            )
        if self.state == "unavailable":
            return ToolUnavailableError(
                f"tool {self.name!r} is registered but cannot run here: {self.reason}; {self.hint}",
                name=self.name,
                reason=self.reason,
                hint=self.hint,
                component=None if self.tool is None else self.tool.component,
            )
        return ToolDeniedError(
            f"tool {self.name!r} is denied in this view ({self.reason}); {self.hint}"
        )


def _hidden_error(status: ToolStatus, unknown: ToolStatus) -> ToolDeniedError:
    """The error of a call of a tool hidden from the model, where the model reads it.

    A :class:`~veridic.ToolDeniedError`, so the application still tells the
    case apart by its type; its message is ``unknown``'s (what a name nobody
    registered gets, :meth:`ToolView.unknown <veridic.ToolView.unknown>`), since
    the model reads the message; a note, which tracebacks show and the model
    does not, says why it was refused.
    """
    error = ToolDeniedError(str(unknown.error()))
    error.add_note(
        f"{status.name!r} is hidden from the model by this view's policy ({status.reason}): "
        "the model is told what a name nobody registered gets"
    )
    return error
