"""Which registered tools a view withholds, and why.

:func:`~veridic.tools.view.build_view` puts every registered tool through
these checks, in order, and exposes it only when none of them answers: its
component did not start or it has no real description (unavailable), the
request's roles, allow list, predicates or :class:`Deny` filters leave it
out (denied), its pinned description changed, or it was registered
unavailable. Each answer is the :class:`~veridic.tools.status.ToolStatus`
the view reports, with the reason and hint that the capability section and
the dispatch error repeat, so each is written once, here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from veridic._sample import quoted
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.text.provenance import TrustedText, refuse_untrusted
from veridic.tools._descriptions import one_line
from veridic.tools.status import ComponentState, ToolStatus
from veridic.tools.tool import Tool

__all__ = [
    "Deny",
    "Predicate",
]

Predicate = Callable[[Tool], bool]
"""A view filter: keep the tool when it returns ``True`` (evaluated when the view is built).

A plain function: the view is built synchronously, so an ``async def`` one is refused
(its coroutine is never awaited, and would read as "keep")."""


@dataclass(frozen=True, slots=True, init=False)
class Deny:
    """A deny filter: the tools it matches are not exposed by the view.

    It matches the tools named in ``names`` and, when ``when`` is given, every
    tool for which ``when(tool)`` is true. ``tombstone`` chooses how the tools
    disappear: hidden (``False``, the default: absent from all projections,
    the model never learns the name) or tombstoned (``True``: listed in the
    capability section as unavailable with ``reason``, so the model says so
    instead of reaching for a neighbour). Either way dispatch refuses them
    with :class:`~veridic.ToolDeniedError`; a hidden one's call from the model is
    answered as a name nobody registered (see
    :attr:`ToolStatus.hidden <veridic.tools.status.ToolStatus.hidden>`).

    >>> Deny({"delete_user"}, reason="read-only session", tombstone=True).tombstone
    True
    """

    names: frozenset[str]
    reason: str
    tombstone: bool
    when: Predicate | None

    def __init__(
        self,
        names: Iterable[str] = (),
        *,
        reason: TrustedText = "denied by policy",
        tombstone: bool = False,
        when: Predicate | None = None,
    ) -> None:
        refuse_untrusted(reason, "Deny(reason=...)", "write the reason in code")
        object.__setattr__(self, "names", _names(names))
        object.__setattr__(self, "reason", one_line(reason) or "denied by policy")
        object.__setattr__(self, "tombstone", bool(tombstone))
        object.__setattr__(self, "when", when)

    def matches(self, tool: Tool) -> bool:
        """Whether this filter denies ``tool``.

        Raises:
            VeridicError: ``when`` returned an awaitable (an ``async def``).
        """
        if tool.name in self.names:
            return True
        if self.when is None:
            return False
        denied: object = self.when(tool)
        return (
            denied if isinstance(denied, bool) else _read(denied, self.when, tool, "Deny(when={})")
        )


def _names(names: object) -> frozenset[str]:
    """The tool names a :class:`Deny` lists, refusing what is not one (a ``Deny(3)`` was a
    bare ``TypeError``, ``'int' object is not iterable``)."""
    listed = (
        tuple(names) if isinstance(names, Iterable) and not isinstance(names, str) else (names,)
    )
    for name in listed:
        if not isinstance(name, str):
            raise VeridicError(
                f"Deny() got {quoted(name)}, {a_type(name)}, where a tool name goes: pass the "
                'names of the tools it denies, e.g. Deny({"delete_user"}, reason=...), and '
                "when=... for a rule over tools"
            )
    return frozenset(cast("tuple[str, ...]", listed))


def _unavailable(tool: Tool, components: Mapping[str, ComponentState]) -> ToolStatus | None:
    state = components.get(tool.component) if tool.component is not None else None
    if state is not None and state.started is False:
        return ToolStatus(
            tool.name,
            "unavailable",
            reason=f"its component {state.name!r} did not start ({state.reason})",
            hint=state.hint or f"fix what keeps {state.name!r} from starting, then restart",
            cause="component",
            tool=tool,
        )
    problem = tool.description_gap
    if problem is not None:
        return ToolStatus(
            tool.name,
            "unavailable",
            reason=f"it has no real description ({problem}), so no view exposes it",
            hint=_description_hint(tool),
            cause="description",
            tool=tool,
        )
    return None


def _description_hint(tool: Tool) -> str:
    """What to write for a tool withheld for its description: under ``-OO`` not a
    docstring Python strips (:func:`~veridic.tools._written_doc.stripped_fix`)."""
    if tool._stripped_fix:
        fix = tool._stripped_fix
        return f"{fix} ({tool.origin}); find_doc_gaps(registry) lists every such tool"
    return (
        f"write what it does where it is defined ({tool.origin}): a docstring (the prose "
        "before Args:) or description=...; find_doc_gaps(registry) lists every such tool"
    )


def _pin_changed(tool: Tool) -> ToolStatus | None:
    if tool.description_trust != "changed":
        return None
    return ToolStatus(
        tool.name,
        "unavailable",
        reason=(
            "its description changed since it was pinned"
            if tool.pin_scope == "description"
            # One digest over the three: which part moved cannot be told from it.
            else "its name, description or input schema changed since it was pinned"
        ),
        hint=(
            f"review the tool {tool.name!r} as {tool.origin} now describes it and, if it is "
            "still what you approved, update pin= in code to veridic.tools.tool.tool_pin(name, "
            "description, input_schema)"
        ),
        cause="pin",
        tool=tool,
    )


def _withheld(tool: Tool) -> ToolStatus | None:
    if not tool.withheld:
        return None
    return ToolStatus(
        tool.name,
        "unavailable",
        reason=tool.withheld,
        hint=f"it was registered unavailable ({tool.origin}); the reason says what brings it back",
        cause="withheld",
        tool=tool,
    )


def _denied(
    tool: Tool,
    roles: frozenset[str],
    allowed: frozenset[str] | None,
    predicates: tuple[Predicate, ...],
    denials: _Denials,
) -> ToolStatus | None:
    hint = "do not call it here; the policy that built this view filtered it out"
    if tool.roles and not tool.roles & roles:
        need = ", ".join(sorted(tool.roles))
        have = ", ".join(sorted(roles)) or "none"
        reason = f"it requires one of the roles {need}; this view has {have}"
        return ToolStatus(tool.name, "denied", reason, hint, "role", tool=tool)
    if allowed is not None and tool.name not in allowed:
        reason = "it is not in the view's allow list"
        return ToolStatus(tool.name, "denied", reason, hint, "allow", tool=tool)
    for predicate in predicates:
        kept: object = predicate(tool)
        if not isinstance(kept, bool):
            kept = _read(kept, predicate, tool, "the view's predicate {}")
        if not kept:
            reason = f"the view's predicate {_label(predicate)} filtered it out"
            return ToolStatus(tool.name, "denied", reason, hint, "predicate", tool=tool)
    denial = denials.first_match(tool)
    if denial is not None:
        return ToolStatus(tool.name, "denied", denial.reason, hint, "deny", denial.tombstone, tool)
    return None


class _Denials:
    """A view's deny filters, in order, to find the first that matches a tool.

    A deny list of plain names is one ``Deny`` per name, and asking each of them
    about each tool cost a view of 10,000 tools with 3,000 names denied two seconds;
    the first filter naming a tool is looked up instead, and only the ``when``
    filters before it are asked, in order, as before. A filter of a subclass that
    decides in its own ``matches`` is asked as a ``when`` filter is: its names may not
    be all it denies.
    """

    __slots__ = ("_named", "_when")

    def __init__(self, denials: Iterable[Deny]) -> None:
        self._named: dict[str, tuple[int, Deny]] = {}
        self._when: list[tuple[int, Deny]] = []
        for index, denial in enumerate(denials):
            if type(denial).matches is not Deny.matches:
                self._when.append((index, denial))
                continue
            for name in denial.names:
                self._named.setdefault(name, (index, denial))
            if denial.when is not None:
                self._when.append((index, denial))

    def first_match(self, tool: Tool) -> Deny | None:
        """The first filter that denies ``tool`` (its ``when`` asked only if none before
        it named the tool), or ``None``."""
        named = self._named.get(tool.name)
        for index, denial in self._when:
            if named is not None and index >= named[0]:
                break
            if denial.matches(tool):
                return denial
        return None if named is None else named[1]


def _label(predicate: Predicate) -> str:
    return getattr(predicate, "__qualname__", None) or repr(predicate)


def _read(answer: object, predicate: Predicate, tool: Tool, what: str) -> bool:
    """What ``predicate`` meant by ``answer`` (not a bool) of ``tool``, refusing an answer
    that is not one yet.

    An ``async def`` filter gives a coroutine, which is true: read as an answer, a
    licence predicate would keep every tool (and a ``Deny(when=...)`` hide every one).
    ``what`` names the filter in an error, ``{}`` standing for its name.

    The callers read a bool themselves and call this for the rest only: a view that
    filters is built anew for every request, asking each filter of every tool, and a
    call per answer (the label made each time) cost such a view up to 1.7 times its
    build.

    Raises:
        VeridicError: the predicate returned an awaitable (closed unawaited when it is
            a coroutine, so none of its code runs and no warning leaks).
    """
    if inspect.isawaitable(answer):
        if inspect.iscoroutine(answer):
            answer.close()
        raise VeridicError(
            f"{what.format(_label(predicate))} returned a {type(answer).__name__} for tool "
            f"{tool.name!r}: a view is "
            "built synchronously, so an async filter's answer is never awaited (and an "
            "awaitable reads as true); pass a plain function, reading what it needs (a "
            "licence, a flag) before building the view"
        )
    return bool(answer)
