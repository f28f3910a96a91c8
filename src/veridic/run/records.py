"""What the audit store holds: one record per tool call, per model call and per answer.

Each record is checked when it is made (:class:`~veridic.AuditRecordError`
names every malformed field) and again by the store that writes it, since a
frozen dataclass can still be altered with ``object.__setattr__``. The stores
(:mod:`veridic.run.audit`, :mod:`veridic.run.postgres`) hold these and nothing
else, so one question has one answer whichever store holds the rows.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum, unique
from itertools import repeat
from typing import Final, TypeGuard, get_args

from veridic._ids import ID, new_id
from veridic._sample import quoted
from veridic.errors import AuditRecordError
from veridic.providers._base import PARTS, Usage, _parts_past_totals, _stated_well
from veridic.run.approval import ApprovalMode
from veridic.text.prompt import PromptSpan, Role
from veridic.text.provenance import Kind
from veridic.tools.risk import Risk, ToolKind

__all__ = [
    "AuditRecord",
    "CallOutcome",
    "ModelCallRecord",
    "ModelReplyRecord",
    "Substitution",
    "arguments_sha256",
    "new_id",
]

_KINDS: Final = ("query", "write")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_ID: Final = ID
_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")
"""What no store can keep: a lone surrogate (UTF-8 cannot encode it), NUL (Postgres text)."""
_FOLLOW_UP: Final = "after the call ended: "
"""How the ``detail`` of a follow-up record begins (a guard that fired after its call ended)."""
_TOOL_LIMIT: Final = 200
"""The longest model-written tool name a record keeps as it is."""
_SECONDS_MAX: Final = sys.float_info.max
"""The most seconds a record keeps: a store writes the float of an int (see :func:`_is_seconds`)."""
_COUNT_MAX: Final = 2**63 - 1
"""The largest token count a store keeps (a Postgres ``BIGINT``, a SQLite ``INTEGER``)."""
_SPAN_ROLES: Final = frozenset(get_args(Role))
_SPAN_KINDS: Final = frozenset(get_args(Kind))
"""The roles and kinds a span may have, read once: every model call checks each span of
its system message twice (when its record is made, and by the store)."""


@unique
class CallOutcome(StrEnum):
    """What became of a call.

    ``DENIED``, ``BLOCKED`` and ``REFUSED`` are the three ways a call is
    stopped; each is a "denied call" for :meth:`~veridic.SQLiteAuditSink.substitutions`.
    """

    OK = "ok"
    """The handler ran and returned."""
    FAILED = "failed"
    """The handler ran and raised (a guard refusal is ``BLOCKED`` instead)."""
    DENIED = "denied"
    """Approval refused it (a deny rule, or the user said no); the handler never ran."""
    BLOCKED = "blocked"
    """A guard refused an operation inside the handler, before it happened."""
    REFUSED = "refused"
    """The view refused the call: unknown, unavailable or filtered tool, invalid arguments."""


_STOPPED: Final = frozenset({CallOutcome.DENIED, CallOutcome.BLOCKED, CallOutcome.REFUSED})
_NOT_RUN: Final = frozenset({CallOutcome.DENIED, CallOutcome.REFUSED})


class _Validated:
    """A slot for the fields as validated when a record was made (see :func:`_checked_fields`).

    A base class, not a dataclass field, so that it is no part of the record:
    ``dataclasses.fields``, ``asdict``, ``replace`` and pickling see the stored
    fields only (an unpickled or copied record lacks it and is checked in full).
    """

    __slots__ = ("_checked",)


@dataclass(frozen=True, slots=True)
class AuditRecord(_Validated):
    """One tool call as it happened.

    Attributes:
        time: seconds since the epoch (``time.time()``) when the call ended.
        request_id: the request (one model turn or agent run) the call belongs to.
        tool: the name the model called, even when no such tool exists.
        kind: ``"query"`` or ``"write"``; ``None`` only for a refused call
            whose name the view could not resolve.
        risk: the tool's declared risk; ``None`` only for such a refused call.
        approval: how the call was approved; ``DENIED`` exactly when the
            outcome is ``DENIED`` (a deny rule, the user's no), ``NOT_ASKED``
            exactly when it is ``REFUSED`` (refused before anyone was asked).
        wrote_instruction_fields: the call wrote a field read as instruction.
        irreversible: the call did something that cannot be undone.
        prompt_sha256: ``Prompt.sha256`` of the prompt the model answered.
        tools_sha256: hash of the tool list the model was shown.
        outcome: what became of the call.
        detail: why it was stopped or failed (a reason, a guard, an error),
            a short clipped text; empty for a plain success. A store keeps
            at most 4096 characters of it (``veridic.run._store.DETAIL_LIMIT``):
            past that, its start and a note of how many of how many characters
            it cut, 4096 in all, so a record read back is written again as it
            is: a record built by other code may carry a whole tool result.
        operations: the guarded operations the call attempted or was declared
            to perform (``"instruction_write:StoredPrompt.content"``,
            ``"irreversible:hard delete golden fixture"``), sorted, unique;
            how a later call is recognised as attempting the same thing. A
            store keeps 64 of them, of 200 characters each
            (``veridic.run._store.OPERATIONS_LIMIT``, ``OPERATION_LIMIT``):
            a longer one keeps its start, its length and a digest, 200
            characters in all; past 64, one more entry says how many were cut.
        duration: seconds the handler ran, from dispatch (after approval) to
            its end; ``0.0`` for a call that never ran (refused, denied).
        arguments_sha256: SHA-256 of the arguments as the model wrote them
            (:func:`arguments_sha256`), so a reviewer can tell two calls with
            the same arguments apart from two with different ones without the
            store keeping what may be personal data; a follow-up record
            carries its call's; ``""`` where no arguments were seen (a record
            written by hand).
        call_id: the provider's id of the model's tool call (``ToolCall.id``)
            this record is of, as the executor was given it (``"plan step <id>"``
            for a step run by :func:`~veridic.run.executor.execute_plan`;
            ``""`` for a call that had none: a call run by hand, an MCP
            client's call, a record stored before records kept it). How
            :meth:`ModelGateway.resume <veridic.ModelGateway.resume>` sees that
            a paused run's waiting calls already ran: a copy of the paused run
            resumed again is refused instead of running them twice.
        record_id: the record's own id (32 hex digits), made when the record
            is: a store keeps one row per id, so writing a record again (a
            retry after :class:`~veridic.AuditWriteError`) never stores it
            twice. Not compared (two records of the same call are equal) and
            not an argument: ``dataclasses.replace`` makes a new record, with
            a new id.

    Raises:
        AuditRecordError: a field has the wrong type or value, or the fields
            contradict each other (a denied call that wrote something).
    """

    time: float
    request_id: str
    tool: str
    kind: ToolKind | None
    risk: Risk | None
    approval: ApprovalMode
    wrote_instruction_fields: bool
    irreversible: bool
    prompt_sha256: str
    tools_sha256: str
    outcome: CallOutcome
    detail: str = ""
    operations: tuple[str, ...] = field(default=())
    duration: float = 0.0
    arguments_sha256: str = ""
    call_id: str = ""
    record_id: str = field(default_factory=lambda: new_id(), compare=False, init=False)

    def __post_init__(self) -> None:
        _validate(self)
        object.__setattr__(self, "_checked", _FIELDS(self))

    def _stored(self, record_id: str) -> AuditRecord:
        """This record with the id a store read back (the store's own rows only).

        Raises:
            AuditRecordError: the stored id is not one :func:`new_id` makes.
        """
        object.__setattr__(self, "record_id", _stored_id(record_id, "record_id", self.request_id))
        return self

    @property
    def stopped(self) -> bool:
        """Whether the call was denied, blocked or refused."""
        return self.outcome in _STOPPED

    @property
    def follow_up(self) -> bool:
        """Whether this records a guard that fired after its call had ended, not a call.

        Written by :func:`veridic.execute` for a task or thread that the call
        started and that attempted a guarded operation later: outcome
        ``BLOCKED``, ``detail`` beginning ``"after the call ended: "``.
        """
        return self.outcome is CallOutcome.BLOCKED and self.detail.startswith(_FOLLOW_UP)


@dataclass(frozen=True, slots=True)
class Substitution:
    """A stopped call and what the model called next in the same request.

    ``same_operation`` holds when the next call names the same tool or
    attempts one of the stopped call's operations: the model tried the
    blocked thing again, through the same door or another one.
    """

    denied: AuditRecord
    next: AuditRecord | None

    @property
    def same_tool(self) -> bool:
        return self.next is not None and self.next.tool == self.denied.tool

    @property
    def same_operation(self) -> bool:
        if self.next is None:
            return False
        return self.same_tool or not set(self.denied.operations).isdisjoint(self.next.operations)


@dataclass(frozen=True, slots=True)
class ModelCallRecord:
    """One model call, as the gateway sent it.

    Attributes:
        time: seconds since the epoch when the request was sent.
        request_id: the request (one model turn or agent run) the call belongs to.
        api: the provider API, ``"openai.chat.completions"``, ``"openai.responses"``
            or ``"anthropic.messages"``.
        model: the model named in the request.
        prompt_sha256: ``Prompt.sha256`` of the prompt sent.
        tools_sha256: :func:`veridic.run.executor.tools_sha256` of the view whose
            tool list was sent (the digest the tool calls' records carry).
        tools: the names in the tool list sent, sorted.
        instruction_spans: where every character of the instruction position
            (the system message) came from; empty when the prompt has none.
        streamed: the answer was requested as a stream.
        options_sha256: the SHA-256 of the canonical JSON of the request's
            options, what the model read beyond the prompt and the tools (a
            structured-output schema, ``prediction``, sampling settings;
            docs/providers.md says which), as :attr:`Reply.options_sha256
            <veridic.Reply.options_sha256>` carries it; ``""`` in a call
            recorded before audit schema 9, which did not keep it.
        call_id: the call's own id (:func:`new_id`), made with the record (not
            an argument); the :class:`ModelReplyRecord` of its answer carries
            it. Not compared.

    Raises:
        AuditRecordError: a field is malformed (an empty request id, a hash
            that is not 64 lowercase hex digits, a time that is not a finite
            number of seconds, 0 or more).
    """

    time: float
    request_id: str
    api: str
    model: str
    prompt_sha256: str
    tools_sha256: str
    tools: tuple[str, ...]
    instruction_spans: tuple[PromptSpan, ...]
    streamed: bool = False
    options_sha256: str = ""
    call_id: str = field(default_factory=lambda: new_id(), compare=False, init=False)

    def _stored(self, call_id: str) -> ModelCallRecord:
        """This record with the id a store read back (the store's own rows only).

        Raises:
            AuditRecordError: the stored id is not one :func:`new_id` makes.
        """
        object.__setattr__(self, "call_id", _stored_id(call_id, "call_id", self.request_id))
        return self

    def __post_init__(self) -> None:
        _check_model_call(self)


@dataclass(frozen=True, slots=True)
class ModelReplyRecord:
    """What came back from one model call: written when the answer is read.

    The :class:`ModelCallRecord` is written before the request leaves (so a
    call that never returns is still on record); this one follows it with
    what only the answer knows. The two share ``request_id`` and
    ``prompt_sha256``, and come in the same order.

    Attributes:
        time: seconds since the epoch when the answer was read.
        request_id, prompt_sha256: those of the model call it answers.
        response_id: the provider's id of the answer (``""`` if it gave none).
        model: the model that answered, as the provider named it.
        stop_reason: why the model stopped, as the provider said it.
        tool_calls: the names of the tools the answer called, in order.
        usage: the tokens the provider counted, ``None`` where it did not say;
            its parts (cache reads and writes, reasoning) within the totals they
            are parts of, as the gateway checks them. A store keeps the parts
            from audit schema 8 on: an answer recorded before reads back with
            them 0, "not broken down".
        latency: seconds from sending the request to the whole answer.
        call_id: the :attr:`ModelCallRecord.call_id` of the call it answers
            (``""`` in an answer recorded before records had ids).

    Raises:
        AuditRecordError: a field is malformed.
    """

    time: float
    request_id: str
    prompt_sha256: str
    response_id: str
    model: str
    stop_reason: str
    tool_calls: tuple[str, ...]
    usage: Usage | None
    latency: float
    call_id: str = ""

    def __post_init__(self) -> None:
        _check_model_reply(self)


def _check_model_call(r: ModelCallRecord) -> None:
    """Refuse a malformed :class:`ModelCallRecord`: when it is made, and again by a store.

    A store checks it again before writing it (``object.__setattr__`` alters a
    frozen record): a row written with an empty request id or a span no reader
    takes was refused on every read of the store after it, by every reviewer.

    Raises:
        AuditRecordError: names every malformed field.
    """
    problems = [
        f"{name} must be a non-empty string, got {quoted(value)}"
        for name, value in (
            ("request_id", r.request_id),
            ("api", r.api),
            ("model", r.model),
        )
        if not isinstance(value, str) or not value.strip()
    ]
    problems += [
        f"{name} {_unstorable_problem(value)}"
        for name, value in (
            ("request_id", r.request_id),
            ("api", r.api),
            ("model", r.model),
        )
        if isinstance(value, str) and _UNSTORABLE.search(value)
    ]
    # map() asks isinstance of each name without a Python frame per name (a record names
    # every tool of the view, on every model call).
    if not isinstance(r.tools, tuple) or not all(map(isinstance, r.tools, repeat(str))):
        problems.append(f"tools must be a tuple of names, got {quoted(r.tools)}")
    problems += [
        f"{name} must be 64 lowercase hex digits, got {quoted(value)}"
        for name, value in (
            ("prompt_sha256", r.prompt_sha256),
            ("tools_sha256", r.tools_sha256),
        )
        if not isinstance(value, str) or not _SHA256.fullmatch(value)
    ]
    if not isinstance(r.options_sha256, str) or not (
        r.options_sha256 == "" or _SHA256.fullmatch(r.options_sha256)
    ):
        problems.append(
            "options_sha256 must be 64 lowercase hex digits (the reply's options_sha256) "
            f'or "" (not recorded), got {quoted(r.options_sha256)}'
        )
    if not isinstance(r.instruction_spans, tuple) or not all(map(_is_span, r.instruction_spans)):
        problems.append(
            "instruction_spans must be a tuple of PromptSpan (prompt.spans of the system "
            f"message), got {quoted(r.instruction_spans)}"
        )
    if not isinstance(r.call_id, str) or not _ID.fullmatch(r.call_id):
        problems.append(f"call_id must be 32 lowercase hex digits, got {quoted(r.call_id)}")
    problems += _time_problems(r, "time")
    if problems:
        raise AuditRecordError(
            f"model-call record of request {quoted(r.request_id)} is malformed: "
            f"{'; '.join(problems)}; build it from the call as sent (ModelGateway does)"
        )


def _is_span(span: object) -> bool:
    """Whether ``span`` is a :class:`PromptSpan` a store reads back as it was written."""
    return (
        isinstance(span, PromptSpan)
        and type(span.message) is int
        and type(span.start) is int
        and type(span.end) is int
        and isinstance(span.role, str)
        and span.role in _SPAN_ROLES
        and isinstance(span.kind, str)
        and span.kind in _SPAN_KINDS
        and isinstance(span.origin, str)
    )


def _check_model_reply(r: ModelReplyRecord) -> None:
    """Refuse a malformed :class:`ModelReplyRecord`: when it is made, and again by a store.

    Raises:
        AuditRecordError: names every malformed field.
    """
    problems = []
    if not isinstance(r.request_id, str) or not r.request_id.strip():
        problems.append(f"request_id must be a non-empty string, got {quoted(r.request_id)}")
    if not isinstance(r.prompt_sha256, str) or not _SHA256.fullmatch(r.prompt_sha256):
        problems.append(
            f"prompt_sha256 must be 64 lowercase hex digits, got {quoted(r.prompt_sha256)}"
        )
    for name in ("response_id", "model", "stop_reason"):
        if not isinstance(getattr(r, name), str):
            problems.append(f"{name} must be a string, got {quoted(getattr(r, name))}")
    if not isinstance(r.tool_calls, tuple) or not all(
        isinstance(name, str) for name in r.tool_calls
    ):
        problems.append(f"tool_calls must be a tuple of names, got {quoted(r.tool_calls)}")
    if r.usage is not None:
        problems += _usage_problems(r.usage)
    if not isinstance(r.call_id, str) or not (r.call_id == "" or _ID.fullmatch(r.call_id)):
        problems.append(f"call_id must be a ModelCallRecord's call_id, got {quoted(r.call_id)}")
    problems += _time_problems(r, "time", "latency")
    if problems:
        raise AuditRecordError(
            f"model-reply record of request {quoted(r.request_id)} is malformed: "
            f"{'; '.join(problems)}; build it from the answer as read (ModelGateway does)"
        )


def _usage_problems(usage: object) -> list[str]:
    """What is wrong with an answer's record's ``usage``: counts, and parts within totals.

    The gateway records only a usage it checked; a record built by other code (an
    adapter, an application's own) was kept with its parts unchecked: text or a
    negative count stored where a review sums tokens, or cache reads above the
    tokens read, which no answer can have.
    """
    if not isinstance(usage, Usage):
        return [f"usage must be None or a Usage, got {quoted(usage)}"]
    counts = {name: getattr(usage, name) for name in ("input_tokens", "output_tokens", *PARTS)}
    bad = [
        f"{name}={quoted(n)}"
        for name, n in counts.items()
        if type(n) is not int or not 0 <= n <= _COUNT_MAX
    ]
    if bad:
        return [f"usage must hold token counts (ints from 0 to 2**63 - 1), got {', '.join(bad)}"]
    if not _stated_well(usage.stated):
        return [
            f"usage's stated must be None or a frozenset of the names of its parts "
            f"({', '.join(PARTS)}), got {quoted(usage.stated)}"
        ]
    return [
        f"usage's {' and '.join(f'{name}={n}' for name, n in parts)} "
        f"{'are' if len(parts) > 1 else 'is'} more than the {total_name}={total} "
        f"{'they are' if len(parts) > 1 else 'it is'} part of"
        for parts, total_name, total in _parts_past_totals(usage)
    ]


_FIELDS: Final = operator.attrgetter(
    "time",
    "request_id",
    "tool",
    "kind",
    "risk",
    "approval",
    "wrote_instruction_fields",
    "irreversible",
    "prompt_sha256",
    "tools_sha256",
    "outcome",
    "detail",
    "operations",
    "duration",
    "arguments_sha256",
    "record_id",
    "call_id",
)
"""Every stored field of an :class:`AuditRecord`, in the order of the audit table's columns."""


def _checked_fields(record: AuditRecord) -> tuple[object, ...]:
    """The stored fields of ``record`` (as :data:`_FIELDS`), validated.

    A store checks a record again before writing it, since ``object.__setattr__``
    can alter a frozen dataclass. Whether a record is valid depends on its
    field values alone, and a record validated when it was made keeps the
    very objects it was validated with: each is immutable (a str, a float
    or an int, a bool, an enum member, a tuple of str, ``None``), and only
    ``object.__setattr__`` can put another in its place. So when every field
    is still the same object (``is``, never ``==``, which a substitute could
    answer as it likes), the record is the valid one it was, and a full
    check (a few microseconds a write) would find nothing; any other record
    (one altered after it was made, or read back from a store) is checked
    in full.

    Raises:
        AuditRecordError: the record is malformed (as :class:`AuditRecord` says).
    """
    fields: tuple[object, ...] = _FIELDS(record)
    checked = getattr(record, "_checked", None)  # unset in an unpickled or copied record
    if not (
        type(checked) is tuple
        and len(checked) == len(fields)
        and all(map(operator.is_, fields, checked))
    ):
        _validate(record)
    return fields


def _validate(record: AuditRecord) -> None:
    if _well_formed(record):
        return
    problems = list(_problems(record))
    if problems:
        where = f"audit record of tool {quoted(record.tool)} in request {quoted(record.request_id)}"
        raise AuditRecordError(
            f"{where} is malformed: {'; '.join(problems)}; build the record from the call "
            "as it happened (veridic.execute does), or fix the listed fields"
        )


def _well_formed(r: AuditRecord) -> bool:
    """The fast answer of :func:`_problems` (no problem), checked on every write."""
    approval, outcome, risk, kind = r.approval, r.outcome, r.risk, r.kind
    if not (
        type(r.time) in (float, int)
        and 0 <= r.time <= _SECONDS_MAX
        and isinstance(r.request_id, str)
        and r.request_id.strip()
        and isinstance(r.tool, str)
        and r.tool.strip()
        and (kind is None or kind in _KINDS)
        and (risk is None or isinstance(risk, Risk))
        and isinstance(approval, ApprovalMode)
        and isinstance(outcome, CallOutcome)
        and type(r.wrote_instruction_fields) is bool
        and type(r.irreversible) is bool
        and isinstance(r.prompt_sha256, str)
        and _SHA256.fullmatch(r.prompt_sha256)
        and isinstance(r.tools_sha256, str)
        and _SHA256.fullmatch(r.tools_sha256)
        and isinstance(r.detail, str)
        and isinstance(r.operations, tuple)
        and isinstance(r.record_id, str)
        and _ID.fullmatch(r.record_id)
        and type(r.duration) in (float, int)
        and 0 <= r.duration <= _SECONDS_MAX
        and isinstance(r.arguments_sha256, str)
        and (r.arguments_sha256 == "" or _SHA256.fullmatch(r.arguments_sha256))
        and isinstance(r.call_id, str)
        and not _UNSTORABLE.search(r.call_id)
        and not _UNSTORABLE.search(r.request_id)
        and not _UNSTORABLE.search(r.tool)
        and not _UNSTORABLE.search(r.detail)
    ):
        return False
    if r.operations and not (
        all(isinstance(o, str) and o and not _UNSTORABLE.search(o) for o in r.operations)
        and list(r.operations) == sorted(set(r.operations))
    ):
        return False
    did_not_run = outcome in _NOT_RUN
    return (
        (outcome is CallOutcome.DENIED) == (approval is ApprovalMode.DENIED)
        and (outcome is CallOutcome.REFUSED) == (approval is ApprovalMode.NOT_ASKED)
        and not (did_not_run and (r.wrote_instruction_fields or r.irreversible))
        and ((kind is not None and risk is not None) or outcome is CallOutcome.REFUSED)
    )


def _problems(r: AuditRecord) -> Iterator[str]:
    if not _is_seconds(r.time):
        yield f"time must be seconds since the epoch (a finite float >= 0), got {quoted(r.time)}"
    for name in ("request_id", "tool"):
        value = getattr(r, name)
        if not isinstance(value, str) or not value.strip():
            yield f"{name} must be a non-empty string, got {quoted(value)}"
    if not isinstance(r.call_id, str):
        yield (
            "call_id must be a string (the model's tool-call id, or empty), "
            f"got {quoted(r.call_id)}"
        )
    for name in ("request_id", "tool", "detail", "call_id"):
        value = getattr(r, name)
        if isinstance(value, str) and _UNSTORABLE.search(value):
            yield f"{name} {_unstorable_problem(value)}"
    if r.kind is not None and r.kind not in _KINDS:
        yield f'kind must be "query", "write" or None, got {r.kind!r}'
    if r.risk is not None and not isinstance(r.risk, Risk):
        yield f"risk must be a Risk or None, got {r.risk!r}"
    if not isinstance(r.approval, ApprovalMode):
        yield f"approval must be an ApprovalMode, got {r.approval!r}"
    if not isinstance(r.outcome, CallOutcome):
        yield f"outcome must be a CallOutcome, got {r.outcome!r}"
    for name in ("wrote_instruction_fields", "irreversible"):
        if type(getattr(r, name)) is not bool:
            yield f"{name} must be a bool, got {getattr(r, name)!r}"
    for name in ("prompt_sha256", "tools_sha256"):
        value = getattr(r, name)
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            yield (
                f"{name} must be 64 lowercase hex digits (hashlib.sha256().hexdigest()), "
                f"got {quoted(value)}"
            )
    if not _is_seconds(r.duration):
        yield f"duration must be seconds (a finite float >= 0), got {quoted(r.duration)}"
    if not isinstance(r.arguments_sha256, str) or not (
        r.arguments_sha256 == "" or _SHA256.fullmatch(r.arguments_sha256)
    ):
        yield (
            "arguments_sha256 must be 64 lowercase hex digits (arguments_sha256(arguments)) "
            f"or empty, got {quoted(r.arguments_sha256)}"
        )
    if not isinstance(r.detail, str):
        yield f"detail must be a string, got {type(r.detail).__name__}"
    if not isinstance(r.record_id, str) or not _ID.fullmatch(r.record_id):
        yield f"record_id must be 32 lowercase hex digits (new_id()), got {quoted(r.record_id)}"
    if not isinstance(r.operations, tuple) or not all(
        isinstance(o, str) and o for o in r.operations
    ):
        yield f"operations must be a tuple of non-empty strings, got {quoted(r.operations)}"
    elif list(r.operations) != sorted(set(r.operations)):
        yield f"operations must be sorted and unique, got {quoted(r.operations)}"
    elif any(_UNSTORABLE.search(o) for o in r.operations):
        yield f"operations {_unstorable_problem(' '.join(r.operations))}"
    if isinstance(r.outcome, CallOutcome) and isinstance(r.approval, ApprovalMode):
        yield from _contradictions(r)


def _contradictions(r: AuditRecord) -> Iterator[str]:
    did_not_run = r.outcome in _NOT_RUN
    if (r.outcome is CallOutcome.DENIED) != (r.approval is ApprovalMode.DENIED) or (
        r.outcome is CallOutcome.REFUSED
    ) != (r.approval is ApprovalMode.NOT_ASKED):
        yield (
            f"approval {r.approval.value} contradicts outcome {r.outcome.value} (approval is "
            "denied exactly when the outcome is denied, and not_asked exactly when it is "
            "refused: a call refused before approval was never asked about)"
        )
    if did_not_run and (r.wrote_instruction_fields is True or r.irreversible is True):
        yield f"a call with outcome {r.outcome.value} did not run, so it wrote nothing"
    if (r.kind is None or r.risk is None) and r.outcome is not CallOutcome.REFUSED:
        yield (
            "kind and risk may be None only for a refused call (a name the view could not resolve)"
        )


def _stored_id(value: object, name: str, request_id: str) -> str:
    """A record's id as a store gave it back, checked as the record's other fields are.

    The constructor checks every field but the id, which it makes itself; a
    stored id bypasses it. Every view of a store prints the ids (``veridic
    show`` lists a call's id for ``--call``), so one a hand-edited row holds
    (an escape sequence that repaints the reviewer's terminal, a forged line)
    is refused like any other field that veridic never wrote.
    """
    if isinstance(value, str) and _ID.fullmatch(value):
        return value
    raise AuditRecordError(
        f"a stored record of request {quoted(request_id)} has {name} {quoted(value)}, not 32 "
        "lowercase hex digits (new_id()): the table was written by something other than "
        "veridic; check what else writes to the audit store"
    )


def _is_seconds(value: object) -> TypeGuard[float]:
    """Whether ``value`` is seconds that every store keeps alike: a finite float or int, >= 0.

    NaN is refused (SQLite stores it as NULL and refuses the row, Postgres keeps
    NaN), and so is an int that no float holds; the stores write the float of an
    int (SQLite had no INTEGER for one past 2**63, which Postgres kept as a float).
    """
    if type(value) is float or type(value) is int:
        return 0 <= value <= _SECONDS_MAX
    return False


def _time_problems(record: object, *names: str) -> list[str]:
    """What is wrong with the times named (seconds, :func:`_is_seconds`) of ``record``."""
    return [
        f"{name} must be seconds (a finite float >= 0), got {quoted(getattr(record, name))}"
        for name in names
        if not _is_seconds(getattr(record, name))
    ]


def _unstorable_problem(text: str) -> str:
    """The problem with ``text`` that holds a NUL or a lone surrogate, for a validation message."""
    return (
        f"holds a NUL or a lone surrogate ({quoted(text)}), which not every store can keep "
        "(UTF-8 cannot encode a lone surrogate, Postgres text cannot hold NUL): escape it "
        "first, as veridic.execute does (NUL as \\x00, a surrogate as \\udXXX)"
    )


def _json(value: object) -> str:
    """JSON text that any UTF-8 store can keep: readable, with lone surrogates escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(value) if _UNSTORABLE.search(text) else text


def _storable(text: str) -> str:
    """``text`` with each lone surrogate escaped as ``\\udXXX`` and NUL as ``\\x00``.

    What every store can keep: UTF-8 cannot encode a lone surrogate, and
    Postgres text cannot hold NUL.
    """
    if not _UNSTORABLE.search(text):
        return text
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return escaped.replace("\x00", "\\x00")


def _recorded_tool(name: object) -> tuple[str, str]:
    """The tool name a record keeps for a model-written ``name``, and a note when it was altered.

    A plain name (printable, no surrounding space, at most 200 characters)
    is kept as it is, and the note is empty. Anything else (a newline, NUL,
    a lone surrogate, an empty or blank name, a 100 KB one, a name that is not
    a string) is kept as :func:`~veridic._sample.clip` shows it: ``repr``-escaped
    and quoted, and cut to 200 characters in all (:func:`_clipped`); the note
    says so, with the original length and the first 16 hex digits of the SHA-256
    of its UTF-8 bytes (surrogates passed through), so the same name is
    recognisable across records.

    >>> _recorded_tool("purge")
    ('purge', '')
    >>> _recorded_tool("purge\\n")
    ("'purge\\\\n'", 'tool name recorded escaped (6 chars, sha256 b821c64de5b8645d)')
    """
    if isinstance(name, str):
        if 0 < len(name) <= _TOOL_LIMIT and name.isprintable() and name == name.strip():
            return name, ""
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        kept = _clipped(name, _TOOL_LIMIT)
        how = "escaped" if kept == repr(name) else "escaped and clipped"
        return kept, f"tool name recorded {how} ({len(name)} chars, sha256 {digest})"
    shown = repr(name)
    shown = shown if len(shown) <= _TOOL_LIMIT else f"{shown[:_TOOL_LIMIT]}…"
    return (
        f"<{type(name).__name__} {_storable(shown)}>",
        "tool name is not text, recorded as its repr",
    )


def _clipped(text: str, limit: int) -> str:
    """``text`` as :func:`~veridic._sample.clip` shows it, in at most ``limit`` characters.

    ``clip`` cuts the text at ``limit`` before escaping it, so what it gives is longer
    than ``limit`` (the quotes, the escapes, the length): a store that keeps a name of
    at most ``limit`` characters as it is cut that again when a record read back was
    written again. Here the start kept is the longest whose escaped form, with the
    ``…`` and the length, fits, so what this gives is kept as it is by the next cut.

    >>> _clipped("short", 200)
    "'short'"
    >>> _clipped("x" * 300, 30)
    "'xxxxxxxxxxxxxxx…' (300 chars)"
    """
    shown = repr(text)
    if len(shown) <= limit:
        return shown
    length = f" ({len(text)} chars)"
    # The escaped form of a start only grows with it: the longest start that fits, halving.
    fits, over = 0, min(len(text), limit)
    while fits < over:
        middle = (fits + over + 1) // 2
        if len(repr(text[:middle])) + 1 + len(length) <= limit:
            fits = middle
        else:
            over = middle - 1
    quoted = repr(text[:fits])
    return f"{quoted[:-1]}…{quoted[-1]}{length}"


def arguments_sha256(arguments: object, /) -> str:
    """The digest an :class:`AuditRecord` keeps of a call's arguments, as the model wrote them.

    JSON text (what providers send) is hashed as its UTF-8 bytes, exactly as
    written; anything else as canonical JSON (sorted keys, no spaces, UTF-8),
    any mapping as an object (a plan step's read-only arguments too), with what
    JSON cannot hold shown by ``repr``, so the same arguments give the same
    digest on every host and in every store.

    >>> arguments_sha256({"b": 1, "a": "x"}) == arguments_sha256({"a": "x", "b": 1})
    True
    >>> arguments_sha256({"a": "x"}) == arguments_sha256('{"a":"x"}')
    True
    >>> arguments_sha256({"a": "x"}) == arguments_sha256('{"a": "x"}')
    False
    >>> from types import MappingProxyType
    >>> arguments_sha256(MappingProxyType({"a": "x"})) == arguments_sha256({"a": "x"})
    True
    """
    if isinstance(arguments, str):
        data = arguments
    else:
        try:
            data = json.dumps(
                arguments,
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                default=_as_json,
            )
        except (TypeError, ValueError):  # keys that do not sort, a cycle
            data = repr(arguments)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _as_json(value: object) -> object:
    """What :func:`arguments_sha256` writes for a value ``json`` cannot: a mapping that is
    not a ``dict`` (a read-only ``MappingProxyType``) as the object it holds, so that its
    digest does not depend on its key order or its class; anything else as its ``repr``."""
    return dict(value) if isinstance(value, Mapping) else repr(value)
