"""Every error veridic raises, in one place.

Every one is a ``VeridicError``, so ``except VeridicError`` sees them all. A
caller catches what it can act on: ``ProvenanceError`` when text of the wrong
provenance reached an instruction position (a programming error, hence also a
``TypeError``), and the other subclasses for what the application may want to
handle at run time (a tool the site cannot run, a risk declaration
that breaks a floor, an "always allow" that is not allowed).

Each message has three parts: what is wrong, where it came from, and what to
do instead.

This module is the bottom of the package: it imports nothing of veridic, not
even for typing. An error that carries a result of the code that raised it
(a plan, a call that ran) types it with a protocol declared here, which the
result's class satisfies: ``error.plan.steps`` type-checks as it is, and
``isinstance(error.plan, NormalizedPlan)`` gives the whole class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Protocol

__all__ = [
    "AlwaysAllowRefused",
    "AlwaysAllowRefusedError",
    "ApprovalDeniedError",
    "ApprovalExpiredError",
    "AuditRecordError",
    "AuditWriteError",
    "CalledTool",
    "EarlierOutcome",
    "GuardDeniedError",
    "IncompletePlanError",
    "IntegrationError",
    "InvalidArgumentsError",
    "MissingExtraError",
    "PlanError",
    "PlanResult",
    "PlannedStep",
    "ProvenanceError",
    "RanCall",
    "RemovedStep",
    "RiskFloorError",
    "RiskViolation",
    "RunLimitError",
    "TemplateError",
    "TemplateParamsError",
    "TemplateSandboxError",
    "ToolCouplingError",
    "ToolDeniedError",
    "ToolError",
    "ToolUnavailableError",
    "UnknownToolError",
    "UnwrittenRecord",
    "VeridicError",
    "VouchNotRecordedError",
]


class VeridicError(Exception):
    """Base of every veridic error."""


class ProvenanceError(VeridicError, TypeError):
    """Text of the wrong provenance reached a place that requires trusted text.

    Also a ``TypeError`` because it is the run-time twin of the type error that
    the ``veridic.mypy`` plugin reports for the same code. Where an instruction
    position refused a value, ``slot`` names the position (``"system slot (part 0)"``)
    and ``kind`` and ``origin`` the value's provenance (``"untrusted"``,
    ``"ticket:42"``; ``kind`` is ``"plain"`` for a ``str`` that carries none);
    they are empty when the error is about something else (a forged brand, a
    policy name).
    """

    def __init__(self, message: str, *, slot: str = "", kind: str = "", origin: str = "") -> None:
        super().__init__(message)
        self.slot = slot
        self.kind = kind
        self.origin = origin


class UnknownToolError(VeridicError, LookupError):
    """A name that no tool was ever registered under.

    ``name`` is the name asked for, as given (quote it clipped), and
    ``suggestions`` the registered names nearest to it, never one riskier than
    the nearest safe one: what to answer the model with.
    """

    def __init__(self, message: str, *, name: str = "", suggestions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.name = name
        self.suggestions = suggestions


class ToolUnavailableError(VeridicError, LookupError):
    """A registered tool that cannot run here: its component did not start.

    ``reason`` is what the capability section says about it, ``hint`` what to do,
    ``component`` the component's name (``None`` for a tool of no component).
    """

    def __init__(
        self,
        message: str,
        *,
        name: str = "",
        reason: str = "",
        hint: str = "",
        component: str | None = None,
    ) -> None:
        super().__init__(message)
        self.name = name
        self.reason = reason
        self.hint = hint
        self.component = component


class ToolDeniedError(VeridicError, PermissionError):
    """A registered, working tool that a policy filtered out of this view."""


class InvalidArgumentsError(VeridicError, ValueError):
    """A tool call's arguments do not match the tool's input schema.

    ``tool`` is the tool's name and ``fields`` the dotted paths of the
    offending arguments, so a caller can answer the model precisely. The
    names in a path come from the caller (a model, an MCP client), so a path
    that is not plain letters, digits, ``_ . -`` (or is longer than 80
    characters) is held quoted, escaped and clipped, as the message shows it,
    and at most the first ten paths are held: the executor's audit detail and
    a dropped plan step's note join them as they are.
    """

    def __init__(self, message: str, *, tool: str = "", fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.tool = tool
        self.fields = fields


class RunLimitError(VeridicError):
    """A run of the model loop reached one of its limits before the model answered.

    ``limit`` names it (``"turns"``, ``"tool_calls"``, ``"seconds"``), ``allowed``
    is the limit and ``reached`` what the run had used. The calls made so far
    ran and are recorded, and the composer the run was given holds the
    conversation up to there: show it, or run on with a higher limit.
    """

    def __init__(self, message: str, *, limit: str, allowed: float, reached: float) -> None:
        super().__init__(message)
        self.limit = limit
        self.allowed = allowed
        self.reached = reached


class ToolError(VeridicError):
    """Raised by a tool's handler to tell the model what went wrong, in words written for it.

    The model is told the message of a ``ToolError`` (and of veridic's own
    errors: a refusal, a guard); of any other exception only its type, since
    its message may hold what the model must not read (a path, a query, a
    token in a driver's error). The audit record keeps the message (clipped),
    and the ``veridic.executor`` logger logs any other exception of a handler
    whole, with its traceback.

    >>> raise ToolError("the archive is full: ask the user to delete old notes")
    Traceback (most recent call last):
      ...
    veridic.errors.ToolError: the archive is full: ask the user to delete old notes
    """


class ToolCouplingError(VeridicError, RuntimeError):
    """The tool specs sent to a provider and a view's dispatch table disagree.

    A ``RuntimeError``, not an ``AssertionError`` (as in 0.1): the gateway raises
    it for a real request, and an ``AssertionError`` reads as a failed ``assert``
    to test runners and to code that catches one.
    """


@dataclass(frozen=True, slots=True)
class RiskViolation:
    """One tool whose declared risk is below what it needs (``"low"``, ``"mid"``,
    ``"high"``), and why: a rule's reason at boot, the effects seen when observed."""

    tool: str
    declared: str
    required: str
    reason: str


class RiskFloorError(VeridicError):
    """A tool declared a risk below the floor its effects require.

    ``violations`` lists every one (boot reports them all at once).
    """

    def __init__(self, message: str, *, violations: tuple[RiskViolation, ...] = ()) -> None:
        super().__init__(message)
        self.violations = violations


class AlwaysAllowRefusedError(VeridicError):
    """An "always allow" rule was asked for a tool whose risk forbids it.

    ``tool`` is the tool's name and ``risk`` its risk (``"high"``).
    """

    def __init__(self, message: str, *, tool: str = "", risk: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        self.risk = risk


AlwaysAllowRefused = AlwaysAllowRefusedError
"""The name the public API contract (docs/design.md) imports; ``AlwaysAllowRefusedError``
has the suffix of every other error."""


class ApprovalDeniedError(VeridicError, PermissionError):
    """A call was not approved (a deny rule, the user said no, nobody to ask); it did not run."""


class ApprovalExpiredError(ApprovalDeniedError):
    """The user's answers to a paused run came too late to hold, so none of its calls ran.

    Raised by :meth:`ModelGateway.resume <veridic.ModelGateway.resume>` (and
    ``aresume``) when the paused run is older than its policy's
    ``approvals_expire_after``, is dated in the future, or does not say when it
    paused. ``request_id`` is the paused run's request, ``paused_at`` when it paused
    (``None``: it does not say), ``age`` how long before the resume that was (negative
    for a paused run dated in the future; ``None`` when it does not say) and ``bound``
    the policy's ``approvals_expire_after``. Ask the user anew: the message says how.
    """

    def __init__(
        self,
        message: str,
        *,
        request_id: str = "",
        paused_at: datetime | None = None,
        age: timedelta | None = None,
        bound: timedelta | None = None,
    ) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.paused_at = paused_at
        self.age = age
        self.bound = bound


class GuardDeniedError(VeridicError, PermissionError):
    """A guarded operation (irreversible, or a write of instruction fields) was refused.

    Raised by the guards in store code, before the operation happens, when the
    tool the agent dispatched directly is not high risk or its call was not
    confirmed by the user. Not a :class:`ToolDeniedError`: the tool exists and
    ran; one thing it tried to do is above what its call was approved for.
    """


class PlanError(VeridicError, ValueError):
    """A plan is malformed: duplicate step ids, a dependency on no step, a cycle."""


class PlannedStep(Protocol):
    """A step of a plan as :class:`IncompletePlanError` shows it (a :class:`veridic.PlanStep`)."""

    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, object]: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...


class RemovedStep(Protocol):
    """A step normalisation removed: dropped, or invalidated by a dropped dependency."""

    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def reason(self) -> str: ...


class PlanResult(Protocol):
    """What normalising a plan gave (a :class:`veridic.NormalizedPlan`)."""

    @property
    def steps(self) -> tuple[PlannedStep, ...]: ...
    @property
    def removed(self) -> tuple[RemovedStep, ...]: ...
    @property
    def notice(self) -> str: ...
    @property
    def complete(self) -> bool: ...


class IncompletePlanError(VeridicError):
    """Strict plan normalisation removed steps; ``.plan`` holds the full result."""

    def __init__(self, message: str, plan: PlanResult) -> None:
        super().__init__(message)
        self.plan = plan

    def __reduce__(self) -> tuple[object, ...]:
        return _reduced(self, self.plan)

    def __str__(self) -> str:
        return _message(self)


class AuditRecordError(VeridicError, ValueError):
    """An audit record is malformed, so the store refuses it rather than keep a lie."""

    record: object = None
    """The record a store refused because it holds another under the same id, not kept
    anywhere else (``None`` for every other refusal): store it elsewhere, or find what
    wrote the other one."""


class UnwrittenRecord(Protocol):
    """The audit record a sink did not store (a :class:`veridic.AuditRecord`)."""

    @property
    def request_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def outcome(self) -> Enum: ...
    @property
    def detail(self) -> str: ...


class RanCall(Protocol):
    """A call that ran, with its record (a :class:`veridic.CallResult`)."""

    @property
    def record(self) -> UnwrittenRecord: ...
    @property
    def value(self) -> object: ...
    @property
    def error(self) -> Exception | None: ...
    @property
    def ok(self) -> bool: ...
    @property
    def outcome(self) -> Enum: ...


class CalledTool(Protocol):
    """A tool call the model asked for (a :class:`veridic.run.gateway.ToolCall`)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


class EarlierOutcome(Protocol):
    """A call of the same reply that ran before the failed one (a :class:`veridic.ToolOutcome`)."""

    @property
    def call(self) -> CalledTool: ...
    @property
    def result(self) -> RanCall: ...


class AuditWriteError(VeridicError):
    """A tool call ran, but its audit record could not be written.

    Its effects happened, so running the call again would do them twice. The
    error keeps what would otherwise be lost: ``.result`` is the call's
    :class:`~veridic.run.executor.CallResult` (the handler's value or error), and
    ``.result.record`` the record the sink did not store. ``__cause__`` is
    the sink's own error. Write the record again once the store is back
    (``sink.write(error.result.record)``): a store keeps one row per record
    id, so a write that did land before the error is not stored twice.
    """

    def __init__(self, message: str, result: RanCall) -> None:
        super().__init__(message)
        self.result = result
        self.earlier: tuple[EarlierOutcome, ...] = ()
        """From :meth:`ModelGateway.run_tools <veridic.ModelGateway.run_tools>`: the outcomes of
        the reply's calls that ran before this one (the calls after it did not run)."""

    def __reduce__(self) -> tuple[object, ...]:
        return _reduced(self, self.result)

    def __str__(self) -> str:
        return _message(self)


def _reduced(error: VeridicError, kept: object) -> tuple[object, ...]:
    """How ``pickle`` makes ``error`` again: its class called with its message and ``kept``
    (what its ``__init__`` takes after the message), then its attributes set.

    By default ``pickle`` calls the class with ``args``, the message alone, and an
    ``__init__`` that takes more failed (``missing 1 required positional argument``):
    a copy for a process pool or a task queue was lost, with the record or plan it holds.
    """
    return (type(error), (_message(error), kept), error.__dict__)


def _message(error: BaseException) -> str:
    """An error's message: its first argument (a copy made by another route than its
    ``__init__``, LangChain's non-retryable twin, may hold more arguments than that)."""
    return str(error.args[0]) if error.args else ""


class VouchNotRecordedError(VeridicError):
    """A trust policy's vouch could not be written to the store it records to.

    Nothing was minted: the escape hatch is open only while it is audited.
    ``__cause__`` is the store's error; vouch again once the store is back.
    """


class TemplateError(VeridicError):
    """A template could not be loaded or rendered: not found, bad syntax, a forbidden construct."""


class TemplateParamsError(TemplateError):
    """A template's variables and its parameter type disagree (checked when it loads)."""


class TemplateSandboxError(TemplateError):
    """A template from stored text tried something jinja2's sandbox forbids."""


class IntegrationError(VeridicError):
    """A protocol or framework veridic sits under failed: an MCP server that did not start
    or answer, or a tool of it that answered with an error.

    ``reason`` is the short cause in veridic's words (``"the MCP server did not start"``);
    the message adds what the other side said.
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class MissingExtraError(VeridicError, ImportError):
    """An optional integration was used without its extra installed (a provider SDK)."""
