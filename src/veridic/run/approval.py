"""Approvals: per-tool rules, and the mode every call records.

``ApprovalMode`` is the vocabulary of invariant I8: every executed write says
how it came to run, so "an instruction-field write approved by an always rule"
is a query over the audit store, not a guess.

- ``NOT_REQUIRED``: the call needs no approval (a query).
- ``ALWAYS_RULE``: a standing "always allow" rule approved it (never a
  high-risk tool: :class:`AlwaysAllowRefusedError`).
- ``USER_CONFIRMED``: the user approved this one call.
- ``DENIED``: a deny rule or the user refused it; it did not run.
- ``NOT_ASKED``: the call was refused before anyone was asked (an unknown or
  unavailable tool, one the view denies, invalid arguments); it did not run.
  The model's mistake is not a user's denial, and the store keeps them apart.

An :class:`ApprovalPolicy` holds the user's standing rules for one view's
tools: ``always``, ``ask`` (the default for a write) or ``deny``. "Always
allow" is a permission, not a mood: it is refused outright for a high-risk
tool (:class:`~veridic.AlwaysAllowRefusedError`), because a hard delete or a write
that becomes another feature's system prompt must never be taught to the
agent as permanently fine. A single call of a high-risk tool can always be
confirmed by the user.

>>> from veridic import Registry
>>> registry = Registry()
>>> @registry.tool(kind="write", irreversible=True)
... def delete_golden(name: str) -> str:
...     '''Permanently delete a golden fixture; this cannot be undone.
...
...     Args:
...         name: The fixture to delete.
...     '''
...     return "deleted"
>>> policy = ApprovalPolicy(registry.view())
>>> policy.allow_always("delete_golden")
Traceback (most recent call last):
  ...
veridic.errors.AlwaysAllowRefusedError: "always allow" was asked for tool 'delete_golden', ...
>>> policy.decide("delete_golden", {"name": "v1"}, confirm=lambda request: True)
<ApprovalMode.USER_CONFIRMED: 'user_confirmed'>
>>> ApprovalMode("always_rule") is ApprovalMode.ALWAYS_RULE
True
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final, Literal

from veridic.errors import AlwaysAllowRefusedError, VeridicError
from veridic.tools.risk import ApprovalMode, Risk, ToolKind
from veridic.tools.tool import Tool
from veridic.tools.view import ToolView

__all__ = ["ApprovalMode", "ApprovalPolicy", "ApprovalRequest", "Confirm", "Rule", "SkippedRule"]

Rule = Literal["always", "ask", "deny"]
_RULES: Final = ("always", "ask", "deny")
_log = logging.getLogger("veridic.approval")


@dataclass(frozen=True, slots=True)
class SkippedRule:
    """A saved rule :meth:`ApprovalPolicy.restore` did not apply, and why."""

    tool: str
    rule: object
    reason: str


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call and what the policy decided about it before asking anyone.

    ``mode`` is the decision when the policy can make it alone
    (``NOT_REQUIRED``, ``ALWAYS_RULE``, ``DENIED``) and ``None`` while the
    user must be asked (:attr:`pending`); ``why`` says which rule applied,
    for the confirmation dialog and the audit record.
    """

    tool: str
    kind: ToolKind
    risk: Risk
    irreversible: bool
    writes_instruction_fields: bool
    mode: ApprovalMode | None
    why: str
    arguments: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def pending(self) -> bool:
        """Whether the user must confirm this call."""
        return self.mode is None

    def answer(self, confirmed: bool) -> ApprovalMode:
        """The mode of a pending request once the user answered.

        Raises:
            VeridicError: the request is not pending (the policy decided it).
        """
        if self.mode is not None:
            raise VeridicError(
                f"the call of {self.tool!r} is not waiting for the user: the policy decided "
                f"{self.mode.value} ({self.why}); record that mode instead of asking"
            )
        return ApprovalMode.USER_CONFIRMED if confirmed is True else ApprovalMode.DENIED


Confirm = Callable[[ApprovalRequest], bool]
"""Asks the user about one pending call; ``True`` (exactly) confirms it."""


class ApprovalPolicy:
    """The standing approval rules for the tools of one view.

    Decisions, for a tool the view exposes:

    ========================================  ==========================
    the call                                   mode
    ========================================  ==========================
    a ``deny`` rule                            ``DENIED``
    a high-risk tool (any kind)                the user is asked
    a query without an ``ask`` rule            ``NOT_REQUIRED``
    a write with an ``always`` rule            ``ALWAYS_RULE``
    any other write, an ``ask`` rule           the user is asked
    ========================================  ==========================

    The user's answer is ``USER_CONFIRMED`` or ``DENIED``; with no one to
    ask (no ``confirm`` callback) a pending call is ``DENIED``. Rules are
    per tool name and may be carried to the next request's view with
    ``ApprovalPolicy(next_view, rules=policy.rules)``; every rule is checked
    again there. Safe to share between threads.

    Its methods raise:
        UnknownToolError: a rule or decision names a tool never registered.
        AlwaysAllowRefusedError: an ``always`` rule for a high-risk tool.
    """

    __slots__ = ("_lock", "_rules", "_skipped", "_view")

    def __init__(self, view: ToolView, rules: Mapping[str, Rule] | None = None) -> None:
        if not isinstance(view, ToolView):
            raise VeridicError(
                f"ApprovalPolicy() needs the request's ToolView, got {type(view).__name__}: "
                "pass registry.view(...), the view that dispatches the calls"
            )
        self._view = view
        self._rules: dict[str, Rule] = {}
        self._lock = threading.Lock()
        self._skipped: tuple[SkippedRule, ...] = ()
        for name, rule in (rules or {}).items():
            self._set(name, rule)

    @classmethod
    def restore(cls, view: ToolView, rules: Mapping[str, object]) -> ApprovalPolicy:
        """A policy for ``view`` with the saved ``rules`` that still hold; the rest skipped.

        Rules saved in an earlier request (``dict(policy.rules)`` in a
        session or a database) may have gone stale since: the tool was
        renamed or removed, or became high risk, so its "always" rule is
        refused. Where ``ApprovalPolicy(view, rules=...)`` raises on the first
        such rule, this applies every rule that holds and reports each stale
        one in :attr:`skipped` (and as a warning on the ``veridic.approval``
        logger), so one stale rule never fails the whole request. A skipped
        rule is dropped, never weakened: the tool falls back to the default
        (a write is asked about).

        Raises:
            VeridicError: ``rules`` is not a mapping.
        """
        if not isinstance(rules, Mapping):
            raise VeridicError(
                f"ApprovalPolicy.restore() got a {type(rules).__name__} as rules: pass the "
                "saved mapping of tool name to rule, dict(policy.rules)"
            )
        policy = cls(view)
        skipped: list[SkippedRule] = []
        for name, rule in rules.items():
            try:
                if not isinstance(name, str):
                    raise VeridicError(f"the tool name {name!r} is not text")
                policy._set(name, rule)  # type: ignore[arg-type]  # checked by _set
            except VeridicError as error:
                skipped.append(SkippedRule(str(name), rule, str(error)))
                _log.warning("saved approval rule %r for %r skipped: %s", rule, name, error)
        policy._skipped = tuple(skipped)
        return policy

    @property
    def skipped(self) -> tuple[SkippedRule, ...]:
        """The saved rules :meth:`restore` could not apply (``()`` for any other policy)."""
        return self._skipped

    def __repr__(self) -> str:
        return f"ApprovalPolicy({self._view!r}, {len(self._rules)} rule(s))"

    @property
    def view(self) -> ToolView:
        """The view whose tools these rules judge."""
        return self._view

    @property
    def rules(self) -> Mapping[str, Rule]:
        """A read-only copy of the rules, by tool name."""
        with self._lock:
            return MappingProxyType(dict(self._rules))

    def rule(self, name: str) -> Rule | None:
        """The rule set for ``name``, or ``None``."""
        with self._lock:
            return self._rules.get(name)

    def allow_always(self, name: str) -> None:
        """Let every call of ``name`` run without asking.

        Raises:
            AlwaysAllowRefusedError: ``name`` is a high-risk tool; a single call of
                it can still be confirmed by the user.
            UnknownToolError: no tool is named ``name``.
        """
        self._set(name, "always")

    def ask(self, name: str) -> None:
        """Ask the user before each call of ``name`` (the default for a write)."""
        self._set(name, "ask")

    def deny(self, name: str) -> None:
        """Refuse every call of ``name``; it is recorded as ``DENIED``."""
        self._set(name, "deny")

    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> ApprovalRequest:
        """What the policy decides about a call of ``name``, before asking anyone.

        Raises:
            UnknownToolError, ToolUnavailableError, ToolDeniedError: the view
                does not expose ``name`` (as :meth:`ToolView.tool`).
        """
        tool = self._view.tool(name)
        rule = self.rule(name)
        mode, why = _decide(tool, rule)
        return ApprovalRequest(
            tool.name,
            tool.kind,
            tool.risk,
            tool.irreversible,
            tool.writes_instruction_fields,
            mode,
            why,
            MappingProxyType(dict(arguments or {})),
        )

    def decide(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        confirm: Confirm | None = None,
    ) -> ApprovalMode:
        """The approval mode of one call of ``name``, asking ``confirm`` when the rules say so.

        A pending call with no ``confirm`` callback is ``DENIED``: nobody
        confirmed it; so is one whose ``confirm`` answers anything but ``True``.

        Raises:
            UnknownToolError, ToolUnavailableError, ToolDeniedError: as :meth:`request`.
            VeridicError: ``confirm`` returned an awaitable (an ``async def``), which
                this method cannot await: nobody answered.
        """
        request = self.request(name, arguments)
        if request.mode is not None:
            return request.mode
        answer: object = confirm(request) if confirm is not None else False
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()  # never awaited: no warning, and none of its code runs
            raise VeridicError(
                f"decide() got a confirm that returned a {type(answer).__name__} for the call "
                f"of {name!r}: a blocking method cannot await it, so nobody answered; pass a "
                "plain function that returns True or False (or await it yourself and call "
                "request(...).answer(...) with the result)"
            )
        return request.answer(answer is True)

    def asking(self) -> ApprovalPolicy:
        """These rules, except that a call they would let run unasked is put to the user.

        For recording a call the user refused after it was deferred (a
        framework's interruption, an MCP elicitation): with a ``confirm`` that
        says no, the executor records ``DENIED`` with the rule's reason, even
        when the rules changed meanwhile and would now let the call run. A
        ``deny`` rule stays the reason when there is one.
        """
        return _Asking(self)

    def _set(self, name: str, rule: Rule) -> None:
        if rule not in _RULES:
            raise VeridicError(
                f"approval rule {rule!r} for tool {name!r} is not a rule: use "
                '"always", "ask" or "deny"'
            )
        tool = self._registered(name)
        if rule == "always" and tool.risk >= Risk.HIGH:
            raise AlwaysAllowRefusedError(
                f'"always allow" was asked for tool {name!r}, which is high risk '
                f"({_why_high(tool)}; declared at {tool.origin}); high-risk tools are never "
                "always allowed: keep the default (ask), or deny it; a single call can still "
                "be confirmed by the user when it is made",
                tool=name,
                risk=tool.risk.value,
            )
        with self._lock:
            self._rules[name] = rule

    def _registered(self, name: str) -> Tool:
        status = self._view.status(name)
        if status.tool is None:
            error = status.error()
            raise error if error is not None else VeridicError(f"no tool is named {name!r}")
        return status.tool


def _decide(tool: Tool, rule: Rule | None) -> tuple[ApprovalMode | None, str]:
    if rule == "deny":
        return ApprovalMode.DENIED, f"a deny rule for {tool.name!r}"
    if tool.risk >= Risk.HIGH:
        return None, f"{tool.name!r} is high risk ({_why_high(tool)}): each call is confirmed"
    if tool.kind == "query" and rule != "ask":
        return ApprovalMode.NOT_REQUIRED, "a query needs no approval"
    if rule == "always":
        return ApprovalMode.ALWAYS_RULE, f"an always rule for {tool.name!r}"
    if rule == "ask":
        return None, f"an ask rule for {tool.name!r}"
    return None, f"{tool.name!r} is a write without an always rule"


def _why_high(tool: Tool) -> str:
    if tool.irreversible:
        return "irreversible"
    if tool.writes_instruction_fields:
        return "it writes text read as instruction"
    return "declared high"


class _Asking(ApprovalPolicy):
    """:meth:`ApprovalPolicy.asking`: the user is asked whatever the rules would decide."""

    __slots__ = ("_rules_of",)

    def __init__(self, policy: ApprovalPolicy) -> None:
        super().__init__(policy.view)
        self._rules_of = policy

    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> ApprovalRequest:
        decided = self._rules_of.request(name, arguments)
        if decided.mode is None or decided.mode is ApprovalMode.DENIED:
            return decided
        return replace(decided, mode=None, why=f"{decided.why}, and the user was asked")
