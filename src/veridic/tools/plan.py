"""The plan normalizer: nothing the model proposed vanishes without a trace.

A plan is not a list of independent conveniences: its steps depend on each
other. The seed's normalizer skipped two steps naming tools the site could
not run (a plug-in had not booted), and the four that survived ran green and
built something broken. :func:`normalize_plan` checks every step against the
same :class:`~veridic.ToolView` that wrote the prompt (invariant I5) and:

- drops a step whose tool is ``"unknown"`` (never registered: a hallucinated
  name, with the nearest valid names), ``"unavailable"`` (its component did
  not start, or it has no description), ``"denied"`` (filtered by this view's
  policy, or refused by a deny rule of the user's approval policy when one is
  given) or whose arguments are invalid (``"invalid_arguments"``, with the
  offending fields);
- invalidates every step that depends on a dropped one, directly or
  transitively: it is not run;
- writes a ``notice`` for the user naming every removed ability, why, and
  the component's hint;
- raises :class:`~veridic.IncompletePlanError` instead in strict mode.

Two things deny a tool, and a :class:`DroppedStep` says which by its
``cause`` (its ``reason`` is ``"denied"`` for both, as the contract lists
it): the view's filters (``cause`` ``"role"``, ``"allow"``, ``"predicate"``
or ``"deny"``, the :class:`~veridic.ToolStatus` cause) keep the tool out of
this request, and the user's :class:`~veridic.ApprovalPolicy`, passed as
``policy=``, refuses it by a deny rule (``cause`` ``"approval_policy"``):
the model sees that tool, and executing the step would record it
``DENIED`` without running it, so the step and the steps after it are
removed before anything runs, and the notice says the user's rule refused
it. The policy decides as it does at run time (:meth:`ApprovalPolicy.request
<veridic.ApprovalPolicy.request>`): a step whose tool an ``ask`` rule or its
high risk puts to the user is kept, for the user to confirm when it runs.

A malformed plan (duplicate ids, a dependency on no step, a cycle, a step
that is not a mapping with the right keys) is a :class:`~veridic.PlanError`:
there is no sensible plan to return. That includes a step with a key veridic
does not know (``dependsOn``, ``needs``, ``"depends_on "`` with a trailing
space): read as absent, such a key would turn "run after s1" into "no
dependencies", so it is refused with the nearest known key instead
(invariant I10: nothing the model writes is ignored silently).

A step whose arguments refer to another step's output is a
:class:`~veridic.PlanError` too, the whole plan refused before any step runs.
veridic runs each step with its arguments as written and never puts one
step's output into another's arguments, so a placeholder would reach the tool
as text: a user created with the password ``{{step_4.output}}``. A placeholder
is, in an argument's value or in a key of it, at any depth:

- a ``{{ }}``, ``${ }`` or ``%( )`` whose inside names a step of the plan by a word
  of it, a quoted string or a part between dots (``{{ step_4.output }}``,
  ``${step_4.result}``, ``%(step_4)s``);
- a ``{ }``, a ``< >`` or a ``$`` followed by a path to a value, a name and an
  accessor after it, that names a step (``{step_4.output}``, ``<steps['step_4'].id>``,
  ``$step_4.output``): these forms are ordinary text too (``str.format``, JSON,
  markup, a price), so without an accessor (``{step_4}``, ``<step_4>``, ``$step_4``,
  ``$1.50``) they are read as text, and so is a ``$`` before a number (``$1.txt``, the
  shell's first argument, whatever a plan numbers its steps);
- any string held by a ``"$ref"`` key (a JSON reference, ``{"$ref":
  "#/steps/step_4/output"}``, or a list of them) that names a step.

It is refused whatever becomes of the step it names (dropped, refused, failed or
run): a plan that needs an output before it exists cannot run as proposed, and
the demanding user's plan is refused whole rather than run in part. Run the
steps that make the output, give the model their results, and ask it to plan
the rest. A placeholder that names no step of the plan (GitHub's ``${{
steps.build.outputs.sha }}``), prose that mentions one ("after step 4"), and a
JSONPath (``$.steps.step_4.output``: a query a tool runs on a document it reads, its
``$`` that document's root) are text. Ids are compared as a reader sees them (see
below), so ``{{ STEP_4 }}`` names ``step_4``, and a placeholder is read as a reviewer
sees it, without its invisible characters (``$\\u200bstep_4.output`` is
``$step_4.output``). When steps are numbered (``"1"``, ``"2"``), a number names a step
only in a step's place: first, with an accessor or a filter after it
(``{{ 1.output }}``), or after ``step``, ``steps``, ``output``, ``outputs``, ``result``
or ``results`` (``{{ steps[1].output }}``); a list index (``{{ items[1] }}``), arithmetic and a
template's own positional variable (``{{1}}``, the shell's ``${1}``) are text.

A step id holding an invisible character (zero-width spaces and joiners, soft
hyphens, variation selectors, bidi controls, tags: the Unicode default-ignorable
code points) is refused: a reader sees ``step_\\u200b1`` as ``step_1``, which no other
step can name it by. Ids, tool names, dependencies and keys are read as the plain
``str`` of their characters (a subclass's ``__eq__`` or ``__hash__`` could say
otherwise).

Step ids a reader cannot tell apart are refused (a :class:`~veridic.PlanError`):
ids equal once their Unicode compatibility form (NFKC), case and runs of spaces are
folded, such as ``step_1`` and ``step_\\uff11`` (a fullwidth one). Ids that
differ only by letters of other scripts that look alike (a Cyrillic ``\\u04551``
next to ``s1``) take a confusables table to tell, which veridic does not carry:
they are kept as separate steps, and every notice shows an id outside ASCII
escaped (``'\\u04551'``), so a reader tells them apart there.

A checked plan runs with :func:`~veridic.run.executor.execute_plan`, which
refuses an incomplete plan and stops at the first step that does not succeed.

>>> from veridic import Registry
>>> registry = Registry()
>>> @registry.tool(kind="write")
... def create_webhook(url: str) -> str:
...     '''Create a webhook that receives form submissions.
...
...     Args:
...         url: Where deliveries are sent.
...     '''
...     return "hook-1"
>>> plan = normalize_plan(
...     [
...         {"id": "s1", "tool": "create_webhook", "arguments": {"url": "https://x.test"}},
...         {"id": "s2", "tool": "create_snippet", "arguments": {}},
...         {"id": "s3", "tool": "create_webhook", "arguments": {"url": "y"}, "depends_on": ["s2"]},
...     ],
...     registry.view(),
... )
>>> [s.id for s in plan.steps], [(d.id, d.reason) for d in plan.dropped], plan.complete
(['s1'], [('s2', 'unknown')], False)
>>> [(i.id, i.because) for i in plan.invalidated]
[('s3', ('s2',))]
>>> print(plan.notice.splitlines()[0])
Some proposed steps were removed because this site cannot run them: create_snippet. ...
"""

from __future__ import annotations

import difflib
import graphlib
import heapq
import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, Protocol, runtime_checkable

from veridic import _json_object
from veridic._counted import counted
from veridic._sample import clip, quoted
from veridic._words import a_type
from veridic.errors import (
    IncompletePlanError,
    InvalidArgumentsError,
    PlanError,
    VeridicError,
)
from veridic.tools.risk import ApprovalMode
from veridic.tools.status import StatusCause
from veridic.tools.tool import SCHEMA_TOOL
from veridic.tools.view import ToolStatus, ToolView

__all__ = [
    "MAX_STEPS",
    "DropCause",
    "DropReason",
    "DroppedStep",
    "InvalidatedStep",
    "NormalizedPlan",
    "PlanStep",
    "normalize_plan",
]

DropReason = Literal["unknown", "unavailable", "denied", "invalid_arguments"]
DropCause = StatusCause | Literal["approval_policy"]
"""By what a step was dropped: the view's :data:`~veridic.tools.status.StatusCause` (``""``
for an unknown name or invalid arguments), or ``"approval_policy"`` for a deny rule of the
user's approval policy."""
_BY_POLICY: Final = "approval_policy"
INVALIDATED: Final = "depends_on_removed"
"""The ``reason`` of every invalidated step."""

_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_KEYS: Final = ("id", "tool", "arguments", "depends_on")
_SYNONYMS: Final = {
    # What models write instead, that no spelling distance finds.
    "needs": "depends_on",
    "requires": "depends_on",
    "after": "depends_on",
    "dependencies": "depends_on",
    "prerequisites": "depends_on",
    "params": "arguments",
    "parameters": "arguments",
    "input": "arguments",
    "inputs": "arguments",
    "name": "tool",
    "function": "tool",
    "action": "tool",
}


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One proposed step: an id, a tool name, its arguments and the ids it depends on.

    ``arguments`` is kept read-only, as the model sent it (a mapping; JSON
    text is decoded when the step is read). In a :class:`NormalizedPlan` they
    are the plan's own copy, nested dicts and lists included: changing the
    proposed steps after the check does not change the steps that run.
    """

    id: str
    tool: str
    arguments: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DroppedStep:
    """A step removed because its tool cannot run here, or its arguments are invalid.

    Attributes:
        reason: ``"unknown"``, ``"unavailable"``, ``"denied"`` or ``"invalid_arguments"``.
        why: the view's short explanation (``"its component 'pro' did not start (...)"``).
        detail: the full message dispatching it would raise.
        hint: what to do about it (the component's hint for an unavailable tool).
        suggestions: the nearest valid names, for an unknown one (and a hidden one).
            The nearest are looked for among the first 50 distinct such names of a
            plan (a plan of thousands of invented names would cost seconds); later
            names list the first exposed names that are not high risk, as a name
            with none near does.
        fields: the offending argument paths, for invalid arguments.
        cause: by what: for a ``"denied"`` step, ``"approval_policy"`` when a deny
            rule of the user's :class:`~veridic.ApprovalPolicy` refused it, and the
            view filter's cause otherwise (``"role"``, ``"allow"``, ``"predicate"``,
            ``"deny"``); for an ``"unavailable"`` one ``"component"``,
            ``"description"``, ``"pin"`` or ``"withheld"``; ``""`` for an unknown
            name or invalid arguments.
        hidden: the step names a tool the view hides from the model (a role, the
            allow list, a predicate, a ``Deny`` that does not tombstone it; see
            :attr:`ToolStatus.hidden <veridic.tools.status.ToolStatus.hidden>`). Its
            ``reason`` is ``"denied"`` and ``why`` says by what, for the application
            and the audit; the plan's ``notice``, which the user reads and a model
            re-planning may be given, words it as a name no tool has, with the
            nearest exposed names in ``suggestions``, so it confirms to no one a
            tool kept from them or the role that opens it.
    """

    id: str
    tool: str
    reason: DropReason
    why: str
    detail: str
    hint: str = ""
    suggestions: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    hidden: bool = False
    cause: DropCause = ""


@dataclass(frozen=True, slots=True)
class InvalidatedStep:
    """A step not run because a step it depends on (maybe transitively) was dropped.

    ``because`` lists those dropped steps' ids, in plan order.
    """

    id: str
    tool: str
    because: tuple[str, ...]
    reason: Literal["depends_on_removed"] = "depends_on_removed"


@dataclass(frozen=True, slots=True)
class NormalizedPlan:
    """A plan checked against a view: what may run, and everything that may not, with why.

    ``steps`` keeps the plan's order, which may list a step before one it
    depends on (a model may write ``depends_on`` forward): run the steps in
    :attr:`ordered`. ``notice`` is empty when the plan is
    complete; otherwise it is text for the user (not an instruction: it
    quotes the model's names), to show before anything runs. It stays short
    for a long plan: each of its lists names the first twenty and counts the
    rest, which ``dropped`` and ``invalidated`` hold in full.
    """

    steps: tuple[PlanStep, ...]
    dropped: tuple[DroppedStep, ...]
    invalidated: tuple[InvalidatedStep, ...]
    notice: str

    @property
    def complete(self) -> bool:
        """Whether every proposed step is kept."""
        return not self.dropped and not self.invalidated

    @property
    def ordered(self) -> tuple[PlanStep, ...]:
        """The kept steps in an order to run them: each after every step it depends on.

        The plan's own order wherever that allows (the order of ``steps``
        when no step comes before one it needs); otherwise a step
        waits only until what it needs has run, and steps that wait for
        nothing keep their places relative to each other. Running
        ``steps`` one by one would run a step listed before its
        dependency first, on state that step has not made yet.
        """
        position = {step.id: index for index, step in enumerate(self.steps)}
        waiting = {step.id: len(step.depends_on) for step in self.steps}
        users: dict[str, list[int]] = {step.id: [] for step in self.steps}
        for index, step in enumerate(self.steps):
            for need in step.depends_on:
                users[need].append(index)  # a kept step needs only kept steps
        ready = [position[step.id] for step in self.steps if not step.depends_on]
        heapq.heapify(ready)
        order: list[PlanStep] = []
        while ready:
            step = self.steps[heapq.heappop(ready)]
            order.append(step)
            for user in users[step.id]:
                waiting[self.steps[user].id] -= 1
                if not waiting[self.steps[user].id]:
                    heapq.heappush(ready, user)
        return tuple(order)

    @property
    def removed(self) -> tuple[DroppedStep | InvalidatedStep, ...]:
        """The dropped and the invalidated steps."""
        return (*self.dropped, *self.invalidated)


class _Decision(Protocol):
    """What :class:`_Policy` answers about a call (an :class:`~veridic.ApprovalRequest`)."""

    @property
    def mode(self) -> ApprovalMode | None: ...
    @property
    def why(self) -> str: ...


@runtime_checkable
class _Policy(Protocol):
    """What :func:`normalize_plan` asks of an :class:`~veridic.ApprovalPolicy`.

    A protocol, not the class: the approval policy belongs to the run, downstream of
    the tools, which import nothing of it. Only its own decision is read, so the plan
    removes exactly the steps whose calls the policy would deny when they run.
    """

    @property
    def view(self) -> ToolView: ...
    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> _Decision: ...


def normalize_plan(
    steps: Iterable[Mapping[str, object] | PlanStep],
    view: ToolView,
    *,
    strict: bool = False,
    policy: _Policy | None = None,
) -> NormalizedPlan:
    """Check a proposed plan against ``view``; drop, invalidate and explain, never skip silently.

    ``steps`` are :class:`PlanStep` objects or mappings with keys ``id``,
    ``tool``, ``arguments`` (a mapping, JSON text or absent) and
    ``depends_on`` (a list of ids, or absent), and no other key: a key
    spelled any other way (``dependsOn``, ``"depends_on "``, ``needs``) is
    refused, never ignored. Arguments are validated against the tool's
    schema without running it, and copied: the result holds none of the
    caller's dicts or lists.

    ``policy`` is the user's :class:`~veridic.ApprovalPolicy` for ``view``, the
    one that will approve the calls: a step whose tool it denies by a deny rule
    is dropped as ``"denied"`` with ``cause`` ``"approval_policy"`` (whatever its
    arguments: fixing them would not let it run), and the steps after it are
    invalidated. A step that an ``ask`` rule or a high-risk tool puts to the user
    is kept; ``policy.request(step.tool).pending`` says so when it runs (asked
    then, not now, since the user may change a rule while the plan runs). The
    policy is asked once for each tool of the plan, so the plan holds its rules as
    they were then: a deny rule added later still refuses the call when it runs
    (recorded ``DENIED``), and one removed later brings no step back (normalize
    again). The signature types ``policy`` by ``_Policy``, the part of an
    :class:`~veridic.ApprovalPolicy` read here: the tools import nothing of the run.

    Raises:
        PlanError: the plan is malformed (duplicate ids, a dependency on an
            id no step has, a cycle, a step of the wrong shape, a key that is
            not one of ``id``, ``tool``, ``arguments``, ``depends_on``; the
            message names the step, the key and the nearest known key), has
            more than ``MAX_STEPS`` (5,000) steps, has arguments nested
            deeper than 200 levels, has an argument (or a key of one) that refers
            to another step's output in a placeholder (``{{ step_4.output }}``,
            ``$step_4.output``; the message names the step, the argument's path
            and the step named), has a step id holding an invisible character, or
            has two step ids a reader cannot tell apart (see the module's docs). The
            message quotes ids clipped, and at most ten of them (a long cycle
            by its ends and its length).
        IncompletePlanError: ``strict`` is true and a step was removed; its
            ``.plan`` is the :class:`NormalizedPlan`.
        VeridicError: ``view`` is not a :class:`~veridic.ToolView`, ``policy``
            is not an :class:`~veridic.ApprovalPolicy` built for ``view``, or its
            ``request()`` answered with something other than an approval mode (or
            ``None``) and a reason.
        Exception: whatever ``policy.request()`` raised, with a note naming the
            policy, the tool and the step it was asked for: no plan is returned.
    """
    if not isinstance(view, ToolView):
        raise VeridicError(
            f"normalize_plan() needs the ToolView that produced the prompt, got "
            f"{type(view).__name__}: pass registry.view(...) of this request"
        )
    denies = None if policy is None else _Denies(_policy_of(policy, view))
    plan = _read(steps)
    _check_graph(plan)
    _check_references(plan)
    exposed = view.names()
    told = _Told(view)
    dropped = {
        step.id: d
        for step in plan
        if (d := _check_step(step, view, exposed, told, denies)) is not None
    }
    because = _dependents(plan, dropped)
    invalidated = tuple(
        InvalidatedStep(step.id, step.tool, because[step.id])
        for step in plan
        if step.id in because and step.id not in dropped
    )
    gone = set(dropped) | {step.id for step in invalidated}
    result = NormalizedPlan(
        tuple(step for step in plan if step.id not in gone),
        tuple(dropped.values()),
        invalidated,
        _notice(tuple(dropped.values()), invalidated),
    )
    if strict and not result.complete:
        raise IncompletePlanError(
            "the proposed plan cannot run as proposed: "
            f"{counted(len(result.dropped), 'step')} removed "
            f"and {len(result.invalidated)} invalidated. {result.notice} "
            f"{_replan(result.dropped)}, or normalize without strict=True and show .notice "
            "before running the remaining steps",
            result,
        )
    return result


def _replan(dropped: tuple[DroppedStep, ...]) -> str:
    """What to re-plan with: the view lists a tool the user's deny rule refuses, so a model
    told only to keep to the view's tools could propose the same step again."""
    by_policy = any(_told(d) == _BY_POLICY for d in dropped)
    if not by_policy:
        return "Re-plan with the tools this view lists"
    rules = "the user's deny rules refuse (or ask the user to change those rules)"
    if all(_told(d) == _BY_POLICY for d in dropped):
        return f"Re-plan without the tools {rules}"
    return f"Re-plan with the tools this view lists and without those {rules}"


# --- reading the plan ---------------------------------------------------------------


# The most steps a plan may have. A person reviews a plan before it runs, and a plan the
# model makes long costs more than its length: a chain of dropped steps with a kept step
# after each link gives ``.invalidated`` up to about n²/6 ids in all (4 million at 5,000
# steps, a second or two to build).
MAX_STEPS: Final = 5_000
"""The most steps :func:`normalize_plan` reads; a longer plan is a :class:`~veridic.PlanError`."""


def _read(steps: Iterable[Mapping[str, object] | PlanStep]) -> tuple[PlanStep, ...]:
    if isinstance(steps, str | bytes | Mapping) or not isinstance(steps, Iterable):
        raise PlanError(
            f"a plan is a list of steps, got a {type(steps).__name__}: pass a list of "
            "mappings with keys id, tool, arguments, depends_on (or PlanStep objects)"
        )
    read = list(itertools.islice(steps, MAX_STEPS + 1))  # a generator is not read to its end
    if len(read) > MAX_STEPS:
        counted = (
            f"{len(steps)} steps" if isinstance(steps, Sized) else f"more than {MAX_STEPS} steps"
        )
        raise PlanError(
            f"a plan of {counted} is more than veridic normalises (at most {MAX_STEPS}): "
            "nobody can review it before it runs; ask the model for a shorter plan, or split "
            "the work into plans that each run after the one before"
        )
    return tuple(_step(index, step) for index, step in enumerate(read))


def _step(index: int, raw: object) -> PlanStep:
    if isinstance(raw, PlanStep):
        return _step(index, {k: getattr(raw, k) for k in _KEYS})
    if not isinstance(raw, Mapping):
        raise PlanError(
            f"plan step #{index} is a {type(raw).__name__}, not a step: write each step as "
            '{"id": ..., "tool": ..., "arguments": {...}, "depends_on": [...]}'
        )
    _check_keys(index, raw)
    step_id = raw.get("id")
    if not isinstance(step_id, str) or not step_id.strip():
        raise PlanError(
            f"plan step #{index} has id {quoted(step_id)}: every step needs a non-empty string "
            'id, e.g. "step_1", so that other steps can depend on it'
        )
    step_id = _visible_id(index, _plain(step_id))
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise PlanError(
            f"{_where(index, step_id)} has tool {quoted(tool)}: every step names the tool it "
            "calls as a non-empty string"
        )
    arguments = _arguments(index, step_id, raw.get("arguments"))
    needs = _needs(index, step_id, raw.get("depends_on"))
    return PlanStep(step_id, _plain(tool), arguments, needs)


def _visible_id(index: int, step_id: str) -> str:
    """``step_id``, once it holds no invisible character (:data:`_INVISIBLE`).

    A reader of the plan sees ``"step_\u200b1"`` as ``step_1``, and an id of invisible
    characters alone as no id; a bidi control turns the text after it around. The other
    steps must name the id with the character, which nobody reading the plan can write.
    """
    hidden = _INVISIBLE.search(step_id)
    if hidden is None:
        return step_id
    raise PlanError(
        f"plan step #{index} has id {_plainly(step_id)}, which holds the invisible character "
        f"{_code_point(hidden.group())}: a reader of the plan sees an id the other steps "
        "cannot name by what they see; write the id without invisible characters"
    )


def _code_point(character: str) -> str:
    """``U+200B ZERO WIDTH SPACE``: a character a message cannot show by itself."""
    name = unicodedata.name(character, "")
    return f"U+{ord(character):04X}" + (f" {name}" if name else "")


def _where(index: int, step_id: str) -> str:
    return f"plan step #{index} ({_id(step_id)})"


def _id(step_id: str) -> str:
    """A model-written id for an error message: quoted, escaped and clipped.

    A plan's errors go back to the model that wrote it, and into logs: an id
    of 100,000 characters must not make them as long.
    """
    return _plainly(step_id, 40) if _INVISIBLE.search(step_id) else clip(step_id, 40)


def _check_keys(index: int, raw: Mapping[object, object]) -> None:
    """Refuse a step with a key veridic does not know: read as absent, it would change the plan."""
    # A key is read by its characters: a str subclass saying it equals "depends_on" passed
    # here, and raw.get("depends_on") then found no dependencies.
    unknown = [key for key in raw if not (isinstance(key, str) and _plain(key) in _KEYS)]
    if not unknown:
        return
    step_id = raw.get("id")
    where = (
        _where(index, step_id)
        if isinstance(step_id, str) and step_id.strip()
        else f"plan step #{index}"
    )
    listed = "; ".join(_unknown_key(key) for key in unknown[:5])
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    plural = "keys" if len(unknown) > 1 else "a key"
    raise PlanError(
        f"{where} has {plural} veridic does not know: {listed}{more}; reading "
        f"{'them' if len(unknown) > 1 else 'it'} as absent would change what the step "
        f"means (a misspelled depends_on would run it with no dependencies): a step's keys "
        f"are {', '.join(_KEYS)}; rename or remove the others"
    )


def _unknown_key(key: object) -> str:
    if not isinstance(key, str):
        return quoted(key, 40)
    key = _plain(key)
    shown = quoted(key, 40)
    nearest = _nearest_key(key)
    return f"{shown} (did you mean {nearest!r}?)" if nearest else shown


def _nearest_key(key: str) -> str | None:
    """The known key that ``key`` most likely misspells, compared without case or separators."""
    folded = {re.sub(r"[\W_]", "", known).lower(): known for known in _KEYS}
    plain = re.sub(r"[\W_]", "", key[:100]).lower()
    if plain in folded:
        return folded[plain]
    if plain in _SYNONYMS:
        return _SYNONYMS[plain]
    close = difflib.get_close_matches(plain, folded, n=1, cutoff=0.6)
    if close:
        return folded[close[0]]
    close = difflib.get_close_matches(key[:100], _KEYS, n=1, cutoff=0.6)
    return close[0] if close else None


def _arguments(index: int, step_id: str, raw: object) -> Mapping[str, object]:
    if raw is None:
        return MappingProxyType({})
    if isinstance(raw, str):
        try:
            raw = _json_object.loads(raw) if raw.strip() else {}
        except _json_object.RepeatedKeyError as error:
            raise PlanError(
                f"{_where(index, step_id)} has arguments in which {error}: which one is meant "
                "cannot be told; send each argument once"
            ) from error
        except ValueError as error:
            raise PlanError(
                f"{_where(index, step_id)} has arguments that are not JSON ({error}): send the "
                "arguments as an object (or JSON text of one)"
            ) from error
    if not isinstance(raw, dict | Mapping) or not all(isinstance(key, str) for key in raw):
        raise PlanError(
            f"{_where(index, step_id)} has arguments {quoted(raw)}: arguments are an object "
            "whose keys are the tool's parameter names"
        )
    try:
        copied = _copied(raw, _DEPTH)
    except _TooDeepError:
        raise PlanError(
            f"{_where(index, step_id)} has arguments nested deeper than {_DEPTH} levels: no "
            "tool's contract needs that; send the arguments as a flatter object"
        ) from None
    return MappingProxyType(copied)


# How deep a step's arguments may nest: far more than a tool's schema describes, far less
# than Python's recursion limit, which copying them must not reach.
_DEPTH: Final = 200


class _TooDeepError(Exception):
    """Arguments nested deeper than :data:`_DEPTH` (caught and told as a PlanError)."""


def _copied(value: Mapping[str, object], depth: int) -> dict[str, object]:
    """The plan's own copy of ``value``: every mapping, list and tuple in it copied, and
    every string, key or value, a plain ``str`` (see :func:`_plain`).

    The plan is checked once and run later; kept by reference, a nested dict or list
    of the caller's (a streaming parser still filling it, a dict reused for the next
    step) would change the arguments that run after their check.
    """
    return {_plain(key): _copied_value(item, depth - 1) for key, item in value.items()}


def _plain(text: str) -> str:
    """A string as a plain ``str`` of its characters (a ``str`` as it is, a subclass copied).

    The search for placeholders calls a string's methods, and the tool reads its
    characters: a subclass whose ``find`` or ``__str__`` says other than its characters
    hid ``{{ step_4.output }}`` from the check and passed it to the tool.
    ``str.__str__`` copies the characters without calling the subclass's own methods.
    """
    return str.__str__(text)


_ATOMS: Final = frozenset({str, int, float, bool, type(None)})
"""Values that hold nothing to copy (JSON's leaves): kept as they are, at once."""


def _copied_value(value: object, depth: int) -> object:
    if type(value) in _ATOMS:
        return value
    if isinstance(value, str):
        return _plain(value)
    if depth <= 0:
        raise _TooDeepError
    if isinstance(value, Mapping):
        return {
            _plain(key) if isinstance(key, str) else key: _copied_value(item, depth - 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_copied_value(item, depth - 1) for item in value]
    if isinstance(value, tuple):
        return tuple(_copied_value(item, depth - 1) for item in value)
    return value


def _needs(index: int, step_id: str, needs: object) -> tuple[str, ...]:
    if needs is None:
        return ()
    if not isinstance(needs, list | tuple) and (
        isinstance(needs, str) or not isinstance(needs, Sequence)
    ):
        raise PlanError(
            f"{_where(index, step_id)} has depends_on {quoted(needs)}: list the ids of the "
            'steps it needs, e.g. ["step_1"] (a list even for one id)'
        )
    if not all(isinstance(need, str) for need in needs):
        raise PlanError(
            f"{_where(index, step_id)} has depends_on {quoted(needs)}: the ids must be strings"
        )
    # Each id as its characters: a str subclass's own __eq__ and __hash__ made a dependency
    # on no step of the plan resolve to another.
    return tuple(dict.fromkeys(map(_plain, needs)))


def _check_graph(plan: tuple[PlanStep, ...]) -> None:
    seen: set[str] = set()
    looks: dict[str, str] = {}
    for step in plan:
        if step.id in seen:
            raise PlanError(
                f"plan step id {_id(step.id)} is used by more than one step: give each step its "
                "own id, so depends_on says which one it means"
            )
        seen.add(step.id)
        other = looks.setdefault(_look(step.id), step.id)
        if other != step.id:
            raise PlanError(
                f"plan step ids {_plainly(other)} and {_plainly(step.id)} differ only in case, "
                "spacing or Unicode form, so a reader of the plan or of "
                "its notice cannot tell them apart: give each step an id that differs plainly"
            )
    for step in plan:
        unknown = [need for need in step.depends_on if need not in seen]
        if unknown:
            raise PlanError(
                f"plan step {_id(step.id)} depends on {_few_ids(unknown)}, which no step of "
                f"the plan has as its id (ids: {_listing(seen)}): depend only on steps of "
                "this plan"
            )
    cycle = _cycle(plan)
    if cycle:
        raise PlanError(
            f"the plan's dependencies form a {_ring(cycle)}; a step cannot wait for itself: "
            "remove one of these dependencies"
        )


# A placeholder a model writes for a value it expects veridic to fill in, as an opener and
# the closer after it. In these, any word, quoted string or part of the inside names a step:
# ``{{ ... }}`` (jinja2, Handlebars, GitHub Actions), ``${ ... }`` (JavaScript, shell,
# Terraform), ``%( ... )`` (Python's ``%`` format).
_PLACEHOLDERS: Final = (("{{", "}}"), ("${", "}"), ("%(", ")"))
# Forms that ordinary text writes too (``{...}`` in str.format and JSON, ``<...>`` in markup
# and addresses): a placeholder only when the inside is a path to a value, a name and at least
# one accessor after it (``step_4.output``, ``steps['step_4'].result``), and the innermost
# opener before the closer starts it (JSON nests braces).
_PATHED: Final = (("{", "}"), ("<", ">"))
# A dotted part starts with a letter or "_", so a number (``$1.50``) is no path; a number
# is a part only with another accessor after it (``steps.1.output``, a numbered step).
_ACCESSOR: Final = (
    r"(?:\.{s}(?:[^\W\d][\w-]*|\d+(?={s}[.\[]))|\[{s}(?:'[^']*'|\"[^\"]*\"|[\w-]+){s}\])"
)
_PATH: Final = re.compile(r"\s*[\w-]+(?:\s*" + _ACCESSOR.format(s=r"\s*") + r")+\s*")
# ``$step_4.output``: a dollar and a path right after it, without spaces. A bare ``$step_4`` is
# not one: SQL and shell arguments write ``$1`` and ``$name`` for their own parameters. The path
# starts with a letter or "_", as a shell variable does: ``$1.txt`` is the shell's first
# argument and ".txt", whatever a plan numbers its steps.
_DOLLAR_PATH: Final = re.compile(r"[^\W\d][\w-]*" + _ACCESSOR.format(s="") + "+")
# The key of a JSON reference (``{"$ref": "#/steps/step_4/output"}``), an object that stands
# for the value found where its text points.
_POINTER: Final = "$ref"
_TOKEN: Final = re.compile(r"[\w-]+")


def _check_references(plan: tuple[PlanStep, ...]) -> None:
    """Refuse a step whose arguments refer to another step's output in a placeholder.

    veridic runs each step with its arguments as written and never puts one step's
    output into another's: the tool would get the placeholder itself (a user created
    with the password ``{{step_4.output}}``), or a JSON reference's object
    (``{"$ref": "step_4.output"}``). Refused whatever became of the step it
    names, before any step runs (the plan is a :class:`~veridic.PlanError`): a plan
    that needs an output before it exists cannot be run as proposed. A mapping's keys
    are read as its values are: the tool gets them as text too.
    """
    ids = {_look(step.id): step.id for step in plan}
    for index, step in enumerate(plan):
        for where, text, pointer in _strings(step.arguments, "arguments"):
            # Read as a reviewer sees it: "$\u200bstep_4.output" is "$step_4.output" to them.
            seen = _INVISIBLE.sub("", text)
            named = (
                _named_step([seen], ids, every_number=True)
                if pointer
                else _named_step(_placeholders(seen), ids, every_number=False)
            )
            if named is not None:
                read = ", read without its invisible characters" if seen != text else ""
                raise PlanError(
                    f"{_where(index, step.id)} has {where}{read}, which refers to "
                    f"the output of step {_id(named)}: veridic runs each step with its "
                    "arguments as written and never puts one step's output into another's "
                    "arguments, so the tool would get this text itself. Plan only steps whose "
                    "arguments are known now: run the steps that make the output, give the "
                    "model their results, and ask it to plan the rest"
                )


def _placeholders(text: str) -> Iterator[str]:
    """The text inside each placeholder of ``text``, in every form, each form in one pass.

    A regular expression (``\\{\\{(.*?)\\}\\}``) tried each opener against the whole
    rest of the text: a model's argument of 80 kB of ``{{`` with no ``}}`` held
    :func:`normalize_plan` for most of a minute. Here each search goes forward from where
    the last one stopped, and each inside is cut once, so each form reads the text a few
    times at most.
    """
    for opener, closer in _PLACEHOLDERS:
        yield from _wrapped(text, opener, closer, innermost=False)
    for opener, closer in _PATHED:
        for inside in _wrapped(text, opener, closer, innermost=True):
            if _PATH.fullmatch(inside):
                yield inside
    yield from _dollar_paths(text)


def _wrapped(text: str, opener: str, closer: str, *, innermost: bool) -> Iterator[str]:
    """The text between each ``opener`` and the ``closer`` after it; from the opener
    nearest the closer when ``innermost``, else from the first.

    Once no closer follows an opener, no later opener can close either, so the search
    stops there; the search back for the innermost opener reads only what the search
    for the closer read.
    """
    start = text.find(opener)
    while start != -1:
        end = text.find(closer, start + len(opener))
        if end == -1:
            return
        if innermost:
            start = text.rfind(opener, start, end)
        yield text[start + len(opener) : end]
        start = text.find(opener, end + len(closer))


def _dollar_paths(text: str) -> Iterator[str]:
    """Each path written right after a dollar (``$step_4.output``), read up to the next
    dollar, so each character is read once."""
    start = text.find("$")
    while start != -1:
        following = text.find("$", start + 1)
        found = _DOLLAR_PATH.match(text[start + 1 : len(text) if following == -1 else following])
        if found is not None:
            yield found.group()
        start = following


def _named_step(
    insides: Iterable[str], ids: Mapping[str, str], *, every_number: bool
) -> str | None:
    """The id of the first plan step a placeholder's text (each of ``insides``) names,
    compared as a reader sees ids (case, spacing, invisible characters and Unicode form
    folded); ``None`` when none does.

    A placeholder names a step by a word of it (``{{ step_4.output }}``), by a quoted
    string in it (``{{ steps['step 4'].output }}``) or by a part between dots, brackets,
    slashes, pipes, parentheses and commas (``${step 4.result}``, ``#/steps/step 4``):
    each found in one pass over the text, so a plan of thousands of ids and placeholders
    costs no search per id. A number names a step only in a step's place (see
    :func:`_candidates`), unless ``every_number`` (a JSON reference, which points at a
    value by what it is).
    """
    for inside in insides:
        candidates = _candidates(_look(inside), every_number=every_number)
        if ids.keys() & candidates:  # one set operation; the loop only names the first
            return next(ids[candidate] for candidate in candidates if candidate in ids)
    return None


def _candidates(inside: str, *, every_number: bool) -> list[str]:
    """The words, the quoted strings and the parts of a placeholder's (folded) text.

    Unless ``every_number``, a number is one only in a step's place: first, with an
    accessor or a filter after it (``1.output``, ``1['id']``, ``1 | trim``), or after a
    word that stands for the plan's steps or their outputs, which begins the path
    (``steps[1]``, ``steps.1``, ``outputs[1]``, ``step 1``, and joined to it, as ids are
    often written: ``step_1``, ``step1``, ``step-1``).
    Anywhere else it is the text's own: a list index (``{{ items[1] }}``, ``$args[1]``,
    Ansible's ``{{ out.results[1] }}``), a decimal (``{{ 1.5 }}``), arithmetic
    (``{{ loop.index + 1 }}``), a template's positional variable (WhatsApp's ``{{1}}``,
    ``%(1)s``) or the shell's first argument (``${1}``), which refused every plan whose
    steps are numbered.
    """
    quoted = [found.group(2).strip() for found in _QUOTED.finditer(inside)]
    parts = [part.strip().strip("'\"").strip() for part in _PARTS.split(inside)]
    found = [*_TOKEN.findall(inside), *quoted, *parts]
    if every_number:
        return found
    placed = {number.group(1) for number in _STEP_NUMBER.finditer(inside)}
    placed.update(number.group(1) for number in _ROOT_NUMBER.finditer(inside))
    kept = [candidate for candidate in found if not candidate.isdecimal() or candidate in placed]
    return [*kept, *sorted(placed)]  # step_1's number is no word of its own


_QUOTED: Final = re.compile(r"(['\"])(.*?)\1", re.DOTALL)
_PARTS: Final = re.compile(r"[.\[\]|(),/#]")
# A number in a step's place (text folded by _look, so lower case): first, before an accessor
# (a dot before a digit is a decimal: {{ 1.5 }}); or after a word for the plan's steps or
# outputs that no dot follows (Ansible's out.results[1] is a list index), and a dot, a slash,
# a bracket, a space, an underscore or a hyphen (step_1), or nothing (step1).
_ROOT_NUMBER: Final = re.compile(r"^[\s#/]*(\d+)\s*(?:\.(?!\s*\d)|[\[/|])")
_STEP_NUMBER: Final = re.compile(
    r"(?<![\w.-])(?:steps?|outputs?|results?)[\s_-]*(?:[./]\s*|\[\s*['\"]?\s*)?(\d+)(?!\w)"
)


def _strings(value: object, path: str, pointer: bool = False) -> Iterator[tuple[str, str, bool]]:
    """Every string in a step's (copied, at most 200 deep) arguments, keys included: where
    it is (``arguments.meta.roles[1] = 'x'``, ``a key 'x' in arguments.meta``), the
    string, and whether it is what a JSON reference points at (any string held by a
    ``"$ref"`` key, in lists and objects too)."""
    if isinstance(value, str):
        yield f"{path} = {quoted(value)}", value, pointer
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):  # a nested mapping's keys may be numbers
                yield f"a key {quoted(key)} in {path}", key, pointer
            at = f"{path}.{key}" if _PLAIN_KEY.fullmatch(str(key)) else f"{path}[{quoted(key)}]"
            yield from _strings(item, at, pointer or key == _POINTER)
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            yield from _strings(item, f"{path}[{position}]", pointer)


_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _cycle(plan: tuple[PlanStep, ...]) -> list[str]:
    """A cycle of "waits for" edges (``a -> c -> b -> a``), from the first of its steps in
    plan order; empty when there is none."""
    try:
        graphlib.TopologicalSorter({step.id: step.depends_on for step in plan}).prepare()
    except graphlib.CycleError as error:
        # graphlib lists it in running order (each node before the one that needs it).
        waits = list(reversed(error.args[1]))[:-1]
        order = {step.id: index for index, step in enumerate(plan)}
        first = min(range(len(waits)), key=lambda index: order[waits[index]])
        turned = waits[first:] + waits[:first]
        return [*turned, turned[0]]
    return []


def _listing(names: Iterable[str], limit: int = 10) -> str:
    ordered = sorted(names)
    shown = ", ".join(map(_id, ordered[:limit]))
    return shown + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def _few_ids(ids: Sequence[str], limit: int = 10) -> str:
    """The first ``limit`` of ``ids``, in their order, then how many more there are."""
    shown = ", ".join(map(_id, ids[:limit]))
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _ring(cycle: Sequence[str], ends: int = 5) -> str:
    """``cycle: 'a' -> 'c' -> 'b' -> 'a'``, or for a long one its first and last steps
    and its length (``cycle of 100 steps: 's0' -> ... -> 's99' -> 's0'``)."""
    steps = len(cycle) - 1
    if steps <= 2 * ends:
        return f"cycle: {' -> '.join(map(_id, cycle))}"
    quoted = [*map(_id, cycle[:ends]), "...", *map(_id, cycle[-ends - 1 :])]
    return f"cycle of {steps} steps: {' -> '.join(quoted)}"


# --- checking each step ------------------------------------------------------------------


# How many distinct names one plan gets the nearest exposed names for. Looking for them
# costs milliseconds a name in a registry of thousands of tools, so a plan of thousands of
# invented names held a worker for tens of seconds; later names list the first ten names
# that are not high risk, as a name with none near does. A name seen again costs nothing.
_NEAREST_LOOKED_UP: Final = 50


class _Told:
    """What one plan's refused names are told (:meth:`ToolView.unknown`), each name once,
    and the nearest names looked for only :data:`_NEAREST_LOOKED_UP` times."""

    __slots__ = ("_seen", "_view")

    def __init__(self, view: ToolView) -> None:
        self._view = view
        self._seen: dict[str, ToolStatus] = {}

    def status(self, name: str) -> ToolStatus:
        """:meth:`ToolView.status` of a name the view does not expose."""
        withheld = self._view._withheld.get(name)
        return withheld if withheld is not None else self.unknown(name)

    def unknown(self, name: str) -> ToolStatus:
        told = self._seen.get(name)
        if told is None:
            near = len(self._seen) < _NEAREST_LOOKED_UP
            told = self._seen[name] = self._view._unknown(name, near=near)
        return told


def _policy_of(policy: object, view: ToolView) -> _Policy:
    """``policy``, once it is an approval policy of ``view``: the rules of another view
    judge other tools (the same name may be another tool there)."""
    if not isinstance(policy, _Policy) or not isinstance(policy.view, ToolView):
        raise VeridicError(
            f"normalize_plan() got policy={type(policy).__name__}, which is not an approval "
            "policy: pass the user's ApprovalPolicy(view) that will approve the calls, or "
            "leave policy out"
        )
    if policy.view is not view:
        raise VeridicError(
            f"normalize_plan() got a policy built for another view ({policy.view!r}, not "
            f"{view!r}): build the policy for the view the plan is checked against, "
            "ApprovalPolicy(view, rules=policy.rules)"
        )
    return policy


class _Denies:
    """Which tools the user's approval policy denies, asked of the policy once per name."""

    __slots__ = ("_answers", "_policy")

    def __init__(self, policy: _Policy) -> None:
        self._policy = policy
        self._answers: dict[str, str | None] = {}

    def why(self, step: PlanStep) -> str | None:
        """The policy's reason when it denies every call of ``step``'s exposed tool."""
        if step.tool not in self._answers:
            self._answers[step.tool] = self._ask(step)
        return self._answers[step.tool]

    def _ask(self, step: PlanStep) -> str | None:
        asked = f"{type(self._policy).__name__}.request({step.tool!r})"
        try:
            decision = self._policy.request(step.tool)
        except Exception as error:
            # Not a decision: no plan, and the caller reads which question failed.
            error.add_note(
                f"raised by {asked}, asked by normalize_plan() for step {_plainly(step.id)}: "
                "no plan was returned; make the policy answer, or normalize without policy= "
                "(every call is still approved when it runs)"
            )
            raise
        mode, why = getattr(decision, "mode", _NO_ANSWER), getattr(decision, "why", _NO_ANSWER)
        odd = _odd_answer(mode, why)
        if odd:
            # Read by identity, an answer such as "denied" would keep a step the user refused.
            raise VeridicError(
                f"{asked} answered {odd}, so normalize_plan() cannot tell whether it denies "
                f"step {_plainly(step.id)}: pass the user's ApprovalPolicy(view), whose "
                "request() answers with an ApprovalMode (or None) and a reason"
            )
        return str(why) if mode is ApprovalMode.DENIED else None


_NO_ANSWER: Final = object()


def _odd_answer(mode: object, why: object) -> str:
    """What of a policy's answer is not an approval request's (``""``: nothing)."""
    for part, value, fits in (
        ("mode", mode, mode is None or isinstance(mode, ApprovalMode)),
        ("why", why, isinstance(why, str)),
    ):
        if value is _NO_ANSWER:
            return f"with no {part}"
        if not fits:
            return f"{part} {quoted(value)} ({a_type(value)})"
    return ""


def _check_step(
    step: PlanStep,
    view: ToolView,
    exposed: frozenset[str],
    told: _Told,
    denies: _Denies | None,
) -> DroppedStep | None:
    if step.tool not in exposed:
        return _refused(step, told.status(step.tool), told)
    denied = None if denies is None else denies.why(step)
    if denied is not None:
        return _denied_by_policy(step, denied)
    try:
        view.validate(step.tool, step.arguments)
    except InvalidArgumentsError as error:
        return DroppedStep(
            step.id,
            step.tool,
            "invalid_arguments",
            f"invalid arguments: {', '.join(error.fields) or '(arguments)'}",
            str(error),
            hint=(
                f"read the contract with {SCHEMA_TOOL}(name={step.tool!r}) and re-plan"
                if SCHEMA_TOOL in exposed
                else "read its input schema in the tool list and re-plan"
            ),
            fields=error.fields,
        )
    return None


def _denied_by_policy(step: PlanStep, why: str) -> DroppedStep:
    """A step whose tool the user's approval policy denies: the model sees the tool, so
    what it is told names the rule, and what it may do instead."""
    return DroppedStep(
        step.id,
        step.tool,
        "denied",
        "a deny rule of the user's approval policy refuses it",
        (
            f"tool {step.tool!r} is refused by a deny rule of the user's approval policy "
            f"({why}): executing the step would record it denied without running it; ask "
            "the user to change the rule if the step must run, or re-plan without it"
        ),
        hint="ask the user to change the rule if the step must run, or re-plan without it",
        cause=_BY_POLICY,
    )


def _refused(step: PlanStep, status: ToolStatus, told: _Told) -> DroppedStep:
    error = status.error()
    detail = str(error) if error is not None else status.reason
    reason: DropReason = (
        "unknown"
        if status.state == "unknown"
        else "unavailable"
        if status.state == "unavailable"
        else "denied"
    )
    # A hidden tool is told as an unknown name: its suggestions are an unknown name's.
    shown = told.unknown(step.tool) if status.hidden else status
    suggestions = shown.suggestions[:3] if shown.state == "unknown" else ()
    return DroppedStep(
        step.id,
        step.tool,
        reason,
        status.reason,
        detail,
        status.hint,
        suggestions,
        hidden=status.hidden,
        cause=status.cause,
    )


def _plainly(step_id: str, limit: int = 80) -> str:
    """An id with every character outside ASCII escaped (``'cafe\\u0301'``), clipped.

    Clipped after a whole escape: cut by its escaped text, ``'\\u0441'`` would end in
    ``'\\u04…'``, which reads as no character (or as another, when the cut leaves a
    backslash before the closing quote). Closed with the quote it opened with.
    """
    shown = ascii(step_id)
    if len(shown) <= limit:
        return shown
    quote, kept = shown[0], 1
    for escape in _ESCAPES.finditer(shown, 1):
        if escape.end() > limit - 2:
            break
        kept = escape.end()
    return f"{shown[:kept]}…{quote} ({len(step_id)} chars)"


# One character of ascii()'s text: an escape (\xe9, \u0441, \U0001f600, \n, \\, \') or a
# character as it is; read from the left, lazily, so clipping reads no further than it keeps.
_ESCAPES: Final = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)|.", re.DOTALL)


def _look(step_id: str) -> str:
    """What a reader sees of an id: its Unicode compatibility form (NFKC), case, invisible
    characters and runs of spaces folded (``"Step\\u200b 1 "`` and ``"step 1"`` look the
    same)."""
    folded = unicodedata.normalize("NFKC", _INVISIBLE.sub("", step_id)).casefold()
    return " ".join(folded.split())


# Unicode 14.0's default-ignorable code points (Default_Ignorable_Code_Point in
# DerivedCoreProperties.txt, which veridic.text.fence marks in data blocks): drawn as
# nothing, so an id with one inside reads as the id without it. NFKC keeps them (a
# zero-width space is no compatibility character).
_INVISIBLE: Final = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def _dependents(
    plan: tuple[PlanStep, ...], dropped: Mapping[str, DroppedStep]
) -> dict[str, tuple[str, ...]]:
    """For every kept step downstream of a dropped one: the dropped ids it depends on
    (directly or through other steps), in plan order.

    One pass in dependency order, each step's dropped ancestors a bit set (an int, bit
    ``i`` for the ``i``-th step of the plan): a plan the model makes long, with its
    drops chained, costs a few word operations per step, not a walk per dropped step.
    A step's set is let go once every step that needs it has read it (a chain of
    dropped steps would otherwise keep a set per link, quadratic in bits), and steps
    with the same dropped ancestors share one tuple of their ids (many steps after one
    long chain would otherwise each hold a copy of it).
    """
    position = {step.id: index for index, step in enumerate(plan)}
    needs = {step.id: step.depends_on for step in plan}
    readers = Counter(need for step in plan for need in step.depends_on)
    above: dict[str, int] = {}
    spelled: dict[int, tuple[str, ...]] = {}
    found: dict[str, tuple[str, ...]] = {}
    for step_id in graphlib.TopologicalSorter(needs).static_order():
        mask = 0
        for need in needs[step_id]:
            mask |= above[need] | ((1 << position[need]) if need in dropped else 0)
            readers[need] -= 1
            if not readers[need]:
                del above[need]
        if readers[step_id]:
            above[step_id] = mask
        if mask and step_id not in dropped:
            because = spelled.get(mask)
            if because is None:
                because = spelled[mask] = tuple(plan[index].id for index in _bits(mask))
            found[step_id] = because
    return found


def _bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``, lowest first, in time linear in its width
    (clearing the lowest bit of a wide int again and again is quadratic)."""
    binary = bin(mask)[:1:-1]  # lowest bit first, without the "0b"
    positions = []
    at = binary.find("1")
    while at != -1:
        positions.append(at)
        at = binary.find("1", at + 1)
    return positions


# --- the notice ---------------------------------------------------------------------------

_WHY: Final = {
    "unknown": "no tool has this name here",
    "unavailable": "cannot run on this site",
    "denied": "not allowed in this session",
    _BY_POLICY: "refused by a deny rule of the user's approval policy",
    "invalid_arguments": "the proposed arguments do not fit the tool",
}


# A plan the model made long (thousands of steps, or of hallucinated names) must not give the
# user a notice they cannot read: each list stops here and says how many it left out, and
# every removed step stays in ``.dropped`` and ``.invalidated``.
_SHOWN: Final = 20


def _notice(dropped: tuple[DroppedStep, ...], invalidated: tuple[InvalidatedStep, ...]) -> str:
    if not dropped and not invalidated:
        return ""
    cannot = _tools(d for d in dropped if _told(d) not in ("invalid_arguments", _BY_POLICY))
    refused = _tools(d for d in dropped if _told(d) == _BY_POLICY)
    misfit = _tools(d for d in dropped if d.reason == "invalid_arguments")
    lines = []
    if cannot:
        lines.append(
            f"Some proposed steps were removed because this site cannot run them: {cannot}."
        )
    if refused:
        lines.append(
            "Some proposed steps were removed because a deny rule of the user's approval "
            f"policy refuses their tools: {refused}."
        )
    if misfit:
        lines.append(
            "Some proposed steps were removed because their arguments do not fit the tool's "
            f"contract: {misfit}."
        )
    if dropped:
        lines[-1] += " The remaining plan may be incomplete."
    groups: dict[tuple[str, str, str], list[DroppedStep]] = {}
    for item in dropped:
        explanation = _explain(item)
        # Grouped by what the line shows: only an unavailable tool's hint is shown, so a
        # hidden step groups with unknown ones, as a name nobody registered would.
        hint = item.hint if _told(item) == "unavailable" else ""
        groups.setdefault((_told(item), explanation, hint), []).append(item)
    for (reason, explanation, hint), items in list(groups.items())[:_SHOWN]:
        tools = _few(dict.fromkeys(_name(d.tool) for d in items), "tools")
        ids = _few([_name(d.id) for d in items], "steps")
        line = f"- {tools} ({'steps' if len(items) > 1 else 'step'} {ids}): {_WHY[reason]}"
        line += f"; {explanation}" if explanation else ""
        # Only a component's hint speaks to the user; the others tell the model what to call.
        line += f". {_sentence(hint)}" if hint else ""
        line += "" if line.endswith((".", "?")) else "."
        lines.append(line)
    if len(groups) > _SHOWN:
        left = sum(len(items) for items in list(groups.values())[_SHOWN:])
        lines.append(f"- and {left} more removed steps, each in .dropped with its reason.")
    if invalidated:
        listed = ", ".join(map(_waiting, invalidated[:_SHOWN]))
        if len(invalidated) > _SHOWN:
            listed += f" and {len(invalidated) - _SHOWN} more steps, each in .invalidated"
        lines.append(f"Not run, because they depend on removed steps: {listed}.")
    return "\n".join(lines)


def _waiting(item: InvalidatedStep) -> str:
    needs = _few([_name(b) for b in item.because], "steps")
    return f"{_name(item.tool)} (step {_name(item.id)}, needs {needs})"


def _tools(items: Iterable[DroppedStep]) -> str:
    return _few(dict.fromkeys(_name(d.tool) for d in items), "tools")


def _few(names: Iterable[str], what: str) -> str:
    """The first ``_SHOWN`` of ``names``, then how many more there are."""
    names = list(names)
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more {what}" if len(names) > _SHOWN else "")


def _told(item: DroppedStep) -> str:
    """The reason the notice gives: a tool hidden from the model is a name no tool has, and
    a tool the user's approval policy denies is told apart from one the view denies."""
    if item.hidden:
        return "unknown"
    return _BY_POLICY if item.cause == _BY_POLICY else item.reason


def _explain(item: DroppedStep) -> str:
    if _told(item) == "unknown":
        nearest = ", ".join(item.suggestions)
        return f"did you mean {nearest}?" if nearest else ""
    if item.reason == "invalid_arguments":
        return f"check {', '.join(map(_name, item.fields))}" if item.fields else ""
    if _told(item) == _BY_POLICY:
        return "change the rule to run it, or re-plan without it"
    return item.why.strip().rstrip(".")


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _name(name: str) -> str:
    """A model-written name, shown as is when it looks like a name; otherwise quoted and
    clipped, every character outside ASCII escaped (``'\\u0441reate_webhook'``): shown as
    is, a look-alike of a tool's name or of another step's id reads as that one."""
    return name if _PLAIN_NAME.fullmatch(name) else _plainly(name, 44)
