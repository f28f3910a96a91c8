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

An "always" rule is granted for one tool, not for a name: the policy keeps a
*grant* (:attr:`ApprovalPolicy.grants`: digests of the tool's kind, risk,
irreversibility, description, input schema, what it writes, where it is
defined and the name of its registry) and applies the rule only while the
tool under that name is the one it was granted for. Carried to another view
(``rules=policy.rules``), or restored with its saved grants, a rule whose name
now belongs to a different tool (another feature's ``revert``, an MCP tool
whose description changed) is not applied: the user is asked again, and the
request's ``why`` says what differs. Two registries' tools built by one
factory (same code, same contract, other data) differ by their registry's
name: name each registry (``Registry("notes:team-a")``) for its rules to stay
apart. The rule stays bound to its tool, so it applies again where that tool
comes back.

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

import hashlib
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Final, Literal

from veridic._counted import counted
from veridic._sample import clip
from veridic.errors import AlwaysAllowRefusedError, VeridicError
from veridic.tools.risk import ApprovalMode, Risk, ToolKind
from veridic.tools.tool import Tool
from veridic.tools.view import ToolView, _registry_of

__all__ = [
    "ApprovalMode",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRules",
    "Confirm",
    "Rule",
    "SkippedRule",
]

Rule = Literal["always", "ask", "deny"]
_RULES: Final = ("always", "ask", "deny")
_log = logging.getLogger("veridic.approval")
_GRANT: Final = "grant-v2"
_GRANTED_PARTS: Final = (
    ("kind", "kind"),
    ("risk", "risk"),
    ("irreversible", "irreversibility"),
    ("description", "description"),
    ("schema", "input schema"),
    ("writes", "what it writes"),
    ("defined", "where it is defined"),
    ("registry", "registry"),
)
APPROVALS_EXPIRE_AFTER: Final = timedelta(hours=24)
"""How long the user's answers to a deferred run hold by default
(:attr:`ApprovalPolicy.approvals_expire_after`): a working day and the night after it, so an
approval asked in the afternoon may be given the next morning, and one asked last week may
not."""
_GRANT_V1: Final = "grant-v1"
"""Grants saved before they named the registry: every part but ``registry``, compared as
they are (such a grant cannot tell two registries' tools of one factory apart)."""


class ApprovalRules(Mapping[str, Rule]):
    """A read-only copy of a policy's rules by tool name, with the grants of its "always" rules.

    A plain mapping of names to rules for everything that reads it; passed on
    as ``ApprovalPolicy(next_view, rules=policy.rules)``, or saved as
    ``store.save_rules(scope, policy.rules)`` and read back by
    ``ApprovalPolicy.restore(view, store.rules(scope))``, it also carries
    :attr:`grants`, so each "always" rule stays bound to the tool it was
    granted for. (``dict(policy.rules)`` is the rules alone.)
    """

    __slots__ = ("_grants", "_rules")

    def __init__(self, rules: Mapping[str, Rule], grants: Mapping[str, str]) -> None:
        self._rules = MappingProxyType(dict(rules))
        self._grants = MappingProxyType(dict(grants))

    @property
    def grants(self) -> Mapping[str, str]:
        """The grant of each "always" rule, by tool name (see :attr:`ApprovalPolicy.grants`)."""
        return self._grants

    def __getitem__(self, name: str) -> Rule:
        return self._rules[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"ApprovalRules({dict(self._rules)!r})"


def _storable_rule(value: str) -> bool:
    """Whether a store may save ``value`` under a tool name: a rule word a policy applies,
    or a grant (the grants of a policy are saved through the same call,
    ``save_rules(scope, dict(policy.grants))``). Any other word would be skipped at the
    next restore, turning an "always" the user gave into "ask" without a word at the save."""
    return value in _RULES or value.startswith((_GRANT + " ", _GRANT_V1 + " "))


class _SavedRules(dict[str, str]):
    """Rules a store read back, with the grants saved beside them.

    A ``dict`` as :meth:`~veridic.SQLiteAuditSink.rules` always returned, so
    that everything reading it as one still does; :meth:`ApprovalPolicy.restore`
    also reads :attr:`grants`, so the documented round trip
    (``store.save_rules(scope, policy.rules)``, then
    ``ApprovalPolicy.restore(view, store.rules(scope))``) keeps each "always"
    rule bound to its tool without a second argument to forget.
    """

    __slots__ = ("grants",)

    def __init__(self, rules: Mapping[str, str], grants: Mapping[str, str]) -> None:
        super().__init__(rules)
        self.grants: Mapping[str, str] = MappingProxyType(dict(grants))


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


def _request_of(
    tool: Tool, mode: ApprovalMode | None, why: str, arguments: Mapping[str, object]
) -> ApprovalRequest:
    """The request a user is asked by for a call of ``tool``: every fact of the tool read
    from the tool itself, so the policy and the executor can differ from it in the mode
    and why alone, and the arguments kept as a read-only copy."""
    return ApprovalRequest(
        tool.name,
        tool.kind,
        tool.risk,
        tool.irreversible,
        tool.writes_instruction_fields,
        mode,
        why,
        MappingProxyType(dict(arguments)),
    )


class ApprovalPolicy:
    """The standing approval rules for the tools of one view.

    Decisions, for a tool the view exposes (an ``always`` rule counts only
    for the tool it was granted for: see the module's docs):

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

    __slots__ = ("_expire_after", "_grants", "_lock", "_rules", "_skipped", "_view")

    def __init__(
        self,
        view: ToolView,
        rules: Mapping[str, Rule] | None = None,
        *,
        grants: Mapping[str, str] | None = None,
        approvals_expire_after: timedelta = APPROVALS_EXPIRE_AFTER,
    ) -> None:
        """``rules`` (and ``grants``, which ``rules=policy.rules`` carries along)
        are checked against ``view``; an ``always`` rule without a grant is
        granted for the tool ``view`` has under its name now.
        ``approvals_expire_after`` is how long the user's answers to a deferred
        run hold (:attr:`approvals_expire_after`).

        Raises:
            VeridicError: ``view`` is not a :class:`~veridic.ToolView`, a rule is
                not a rule, ``grants`` is not a mapping of names to text, or
                ``approvals_expire_after`` is not a positive ``timedelta``.
            UnknownToolError, AlwaysAllowRefusedError: as :meth:`allow_always`.
        """
        if not isinstance(view, ToolView):
            raise VeridicError(
                f"ApprovalPolicy() needs the request's ToolView, got {type(view).__name__}: "
                "pass registry.view(...), the view that dispatches the calls"
            )
        self._expire_after = _expiry_checked(approvals_expire_after)
        self._view = view
        self._rules: dict[str, Rule] = {}
        self._grants: dict[str, str] = {}
        self._lock = threading.Lock()
        self._skipped: tuple[SkippedRule, ...] = ()
        given = _grants_of(rules, grants, "ApprovalPolicy()")
        for name, rule in (rules or {}).items():
            self._set(name, rule, given.get(name))

    @classmethod
    def restore(
        cls,
        view: ToolView,
        rules: Mapping[str, object],
        *,
        grants: Mapping[str, str] | None = None,
        approvals_expire_after: timedelta = APPROVALS_EXPIRE_AFTER,
    ) -> ApprovalPolicy:
        """A policy for ``view`` with the saved ``rules`` that still hold; the rest skipped.

        Rules saved in an earlier request (``policy.rules`` in a
        session, or an audit store's ``save_rules``) may have gone stale since: the tool was
        renamed or removed, or became high risk, so its "always" rule is
        refused. Where ``ApprovalPolicy(view, rules=...)`` raises on the first
        such rule, this applies every rule that holds and reports each stale
        one in :attr:`skipped` (and as a warning on the ``veridic.approval``
        logger), so one stale rule never fails the whole request. A skipped
        rule is dropped, never weakened: the tool falls back to the default
        (a write is asked about).

        ``grants`` are the saved :attr:`grants` (``dict(policy.grants)``, kept
        beside the rules): with them, an "always" rule applies only to the
        tool it was granted for, and a different tool that took the name
        since is asked about again. Without them, each "always" rule is
        granted anew for the tool the view has under its name.
        ``approvals_expire_after`` is as for the constructor: set in code, never saved.

        Raises:
            VeridicError: ``rules`` or ``grants`` is not a mapping, or
                ``approvals_expire_after`` is not a positive ``timedelta``.
        """
        if not isinstance(rules, Mapping):
            raise VeridicError(
                f"ApprovalPolicy.restore() got a {type(rules).__name__} as rules: pass the "
                "saved mapping of tool name to rule, dict(policy.rules)"
            )
        given = _grants_of(rules, grants, "ApprovalPolicy.restore()")
        policy = cls(view, approvals_expire_after=approvals_expire_after)
        skipped: list[SkippedRule] = []
        for name, rule in rules.items():
            try:
                if not isinstance(name, str):
                    raise VeridicError(f"the tool name {name!r} is not text")
                policy._set(name, rule, given.get(name))  # type: ignore[arg-type]  # checked by _set
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
        return f"ApprovalPolicy({self._view!r}, {counted(len(self._rules), 'rule')})"

    @property
    def view(self) -> ToolView:
        """The view whose tools these rules judge."""
        return self._view

    @property
    def approvals_expire_after(self) -> timedelta:
        """How long the user's answers to a deferred run hold, from the pause (24 hours
        unless the policy was built with another bound).

        :meth:`ModelGateway.resume <veridic.ModelGateway.resume>` runs none of a paused
        run's calls when more time than this passed between the pause
        (:attr:`PausedRun.paused_at <veridic.PausedRun>`) and the resume, by the gateway's
        clock: the order, the price or the user's mind may have changed meanwhile, so a
        "yes" given to what the dialog showed then no longer says yes to what would run
        now. It raises :class:`~veridic.ApprovalExpiredError`, and the user is asked anew.
        """
        return self._expire_after

    @property
    def rules(self) -> ApprovalRules:
        """A read-only copy of the rules, by tool name (with the grants of the "always" ones)."""
        with self._lock:
            return ApprovalRules(self._rules, self._grants)

    @property
    def grants(self) -> Mapping[str, str]:
        """For each "always" rule, the tool it was granted for, as text a store can keep.

        Save it beside the rules (``dict(policy.grants)``) and pass it to
        :meth:`restore`, so a saved "always" rule never applies to a different
        tool that takes its name later. The text is veridic's own digest of
        the tool; compare it, do not parse it.
        """
        with self._lock:
            return MappingProxyType(dict(self._grants))

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
        with self._lock:
            rule, grant = self._rules.get(name), self._grants.get(name)
        mode, why = _decide(tool, rule)
        if mode is ApprovalMode.ALWAYS_RULE and grant is not None:
            changed = _changed(grant, _grant(tool, self._view))
            if changed:
                mode, why = (
                    None,
                    (
                        f"the always rule for {tool.name!r} was granted for a different tool of "
                        f"that name ({changed}); this one is asked about until it is allowed itself"
                    ),
                )
        return _request_of(tool, mode, why, arguments or {})

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

    def _set(self, name: str, rule: Rule, grant: str | None = None) -> None:
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
            if rule == "always":
                self._grants[name] = _grant(tool, self._view) if grant is None else grant
            else:
                self._grants.pop(name, None)

    def _registered(self, name: str) -> Tool:
        status = self._view.status(name)
        if status.tool is None:
            error = status.error()
            raise error if error is not None else VeridicError(f"no tool is named {name!r}")
        return status.tool


def _deny_rules(policy: ApprovalPolicy) -> frozenset[str]:
    """The names ``policy`` has a deny rule for (of :meth:`~ApprovalPolicy.asking`, those of
    the rules it asks under): the executor hands them to the call's dispatch, where they
    hold for the tools a handler dispatches through a view as well (see
    :func:`veridic.tools.guards.dispatching`)."""
    while isinstance(policy, _Asking):
        policy = policy._rules_of
    return frozenset(name for name, rule in policy.rules.items() if rule == "deny")


def _expiry_checked(bound: object) -> timedelta:
    """``bound`` as :attr:`ApprovalPolicy.approvals_expire_after`, once checked."""
    if not isinstance(bound, timedelta) or bound <= timedelta(0):
        raise VeridicError(
            f"ApprovalPolicy(approvals_expire_after={clip(repr(bound))}): pass how long the "
            "user's answers to a deferred run hold, a positive timedelta (timedelta(hours=24) "
            "is the default; a workflow whose approvals wait longer names its own, such as "
            "timedelta(days=7))"
        )
    return bound


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


def _grants_of(
    rules: Mapping[str, object] | None, grants: Mapping[str, str] | None, where: str
) -> Mapping[str, str]:
    if grants is None:
        return rules.grants if isinstance(rules, ApprovalRules | _SavedRules) else {}
    if not isinstance(grants, Mapping) or not all(
        isinstance(name, str) and isinstance(grant, str) for name, grant in grants.items()
    ):
        raise VeridicError(
            f"{where} got {clip(repr(grants))} as grants: pass the "
            "saved mapping of tool name to grant, dict(policy.grants)"
        )
    return grants


def _grant(tool: Tool, view: ToolView) -> str:
    """What an "always" rule is granted for: digests of what makes ``tool`` the tool it is.

    Where a tool is defined is its handler's module and qualified name (a line
    number would change with every edit above it), or the source of an
    external tool, whose handler is the client's. Its registry is the name of the
    registry of ``view`` (every view of one registry gives the same): a factory that
    registers the same tool on two registries makes tools alike in every other part,
    whose handlers reach different data. Computed once per tool and registry (a tool
    is immutable), since every call under an always rule compares it.
    """
    registry = _registry_of(view)
    memo = f"approval-grant:{registry}"
    kept = tool._memo.get(memo)
    if isinstance(kept, str):
        return kept
    handler = inspect.unwrap(tool.handler)
    defined = (
        tool.origin
        if tool.external
        else f"{getattr(handler, '__module__', '')}.{getattr(handler, '__qualname__', '')}"
    )
    values = {
        "kind": tool.kind,
        "risk": tool.risk.value,
        "irreversible": str(tool.irreversible),
        "description": tool.description,
        "schema": tool.schema_json,
        "writes": "\n".join(
            [f"{model.__module__}.{model.__qualname__}" for model in tool.writes]
            + sorted(tool.instruction_writes)
        ),
        "defined": defined,
        "registry": registry,
    }
    digests = (f"{part}={_part_digest(values[part])}" for part, _ in _GRANTED_PARTS)
    grant = tool._memo[memo] = " ".join((_GRANT, *digests))
    return grant


def _part_digest(text: str) -> str:
    """One part's digest in a grant: 16 hex digits of the SHA-256 of ``text``.

    Enough to tell one tool's description or schema from the next, short enough to
    read in a saved rule; :func:`veridic.run.deferred.bound_grant` rebuilds a part
    with it, so the two agree on the length.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _changed(granted: str, current: str) -> str:
    """What differs between the tool an always rule was granted for and now (``""``: none)."""
    if granted == current:
        return ""
    then = dict(item.partition("=")[::2] for item in granted.split(" ")[1:])
    now = dict(item.partition("=")[::2] for item in current.split(" ")[1:])
    if granted.startswith(_GRANT_V1 + " "):
        now.pop("registry", None)  # saved before grants named it: compared without it
    elif not granted.startswith(_GRANT + " "):
        then = {}
    if then.keys() != now.keys():
        # Not quoted: whatever the store held is no text for an approval dialog.
        return f"its saved grant ({len(granted)} characters) is not a grant veridic wrote"
    differ = [label for part, label in _GRANTED_PARTS if part in now and then[part] != now[part]]
    return "its " + ", ".join(differ) if differ else ""


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
        super().__init__(policy.view, approvals_expire_after=policy.approvals_expire_after)
        self._rules_of = policy

    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> ApprovalRequest:
        decided = self._rules_of.request(name, arguments)
        if decided.mode is None or decided.mode is ApprovalMode.DENIED:
            return decided
        return replace(decided, mode=None, why=f"{decided.why}, and the user was asked")
