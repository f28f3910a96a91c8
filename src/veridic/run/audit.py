"""The audit store: one record per tool call, and the questions it must answer.

Invariant I8 says every write records how it was approved; the seeds add two
numbers an operator must be able to check rather than assume:

- instruction-field writes approved by an "always" rule: the gates make this
  zero (an always rule is refused for high-risk tools, and a guard denies an
  instruction write unless the directly dispatched tool is high and its call
  was confirmed), so the query exists to prove it;
- the substitution rate: after a call is denied, does the model's next call in
  the same request attempt the same blocked operation through another door?

:class:`AuditSink` is the one method a store needs; :class:`SQLiteAuditSink`
is the default (standard library only). Every record is validated before it
is stored (:class:`AuditRecordError`), and committed before ``write`` returns,
so a crash loses at most the record in flight.

Two kinds of text need care, because a model writes them:

- a tool name may be anything (quotes, newlines, NUL, 100 KB, empty):
  :func:`veridic.execute` records a name that is not a plain one escaped
  (``repr``) and clipped, and says so in the record's ``detail`` with the
  original length and a SHA-256 prefix, so repeated attempts stay
  recognisable;
- text with a lone surrogate (``"\\ud800"``) cannot be encoded as UTF-8, so
  no store can keep it: a record holding one is refused
  (:class:`AuditRecordError`), and the executor escapes surrogates
  (``\\ud800``) in what it records.

A guard that fires after its call's record was written (in a task or thread
the call started) gets a *follow-up* record: same request and tool, outcome
``BLOCKED``, a ``detail`` beginning ``"after the call ended: "``
(:attr:`AuditRecord.follow_up`). A follow-up is not a call: the per-call
queries (:meth:`SQLiteAuditSink.writes_by_approval`,
:meth:`SQLiteAuditSink.substitutions`) skip it.

>>> sink = SQLiteAuditSink(":memory:")
>>> sink.write(AuditRecord(
...     time=1.0, request_id="req-1", tool="delete_golden", kind="write", risk=Risk.HIGH,
...     approval=ApprovalMode.USER_CONFIRMED, wrote_instruction_fields=False, irreversible=True,
...     prompt_sha256="0" * 64, tools_sha256="f" * 64, outcome=CallOutcome.OK))
>>> sink.writes_by_approval()[ApprovalMode.USER_CONFIRMED]
1
>>> sink.instruction_writes_under_always_rule()
()
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time as _time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum, unique
from typing import Any, Final, Literal, Protocol, Self, get_args, runtime_checkable

from veridic._sample import clip
from veridic.errors import AuditRecordError
from veridic.providers._base import Usage
from veridic.run._sqlite_schema import prepare
from veridic.run.approval import ApprovalMode
from veridic.run.deferred import PausedRun
from veridic.text.conversation import Conversation
from veridic.text.prompt import PromptSpan, Role
from veridic.text.provenance import Kind
from veridic.tools.risk import Risk, ToolKind

__all__ = [
    "AsyncAuditStore",
    "AuditRecord",
    "AuditSink",
    "AuditStore",
    "CallOutcome",
    "ModelCallRecord",
    "ModelReplyRecord",
    "SQLiteAuditSink",
    "Substitution",
    "new_id",
]

_KINDS: Final = ("query", "write")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_ID: Final = re.compile(r"[0-9a-f]{32}")


def new_id() -> str:
    """A record's own id: 128 random bits as 32 hex digits, made by the writer, not the store.

    Made when the record is, so the record keeps it through a retry, and any
    store (one file, a server several hosts write to) can refuse a second
    copy without asking the others.
    """
    return os.urandom(16).hex()


_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_FOLLOW_UP: Final = "after the call ended: "
"""How the ``detail`` of a follow-up record begins (a guard that fired after its call ended)."""
_TOOL_LIMIT: Final = 200
"""The longest model-written tool name a record keeps as it is."""


@unique
class CallOutcome(StrEnum):
    """What became of a call.

    ``DENIED``, ``BLOCKED`` and ``REFUSED`` are the three ways a call is
    stopped; each is a "denied call" for :meth:`SQLiteAuditSink.substitutions`.
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


@dataclass(frozen=True, slots=True)
class AuditRecord:
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
            a short clipped text; empty for a plain success.
        operations: the guarded operations the call attempted or was declared
            to perform (``"instruction_write:StoredPrompt.content"``,
            ``"irreversible:hard delete golden fixture"``), sorted, unique;
            how a later call is recognised as attempting the same thing.
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
    record_id: str = field(default_factory=lambda: new_id(), compare=False, init=False)

    def __post_init__(self) -> None:
        _validate(self)

    def _stored(self, record_id: str) -> AuditRecord:
        """This record with the id a store read back (the store's own rows only)."""
        object.__setattr__(self, "record_id", record_id)
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
        call_id: the call's own id (:func:`new_id`), made with the record (not
            an argument); the :class:`ModelReplyRecord` of its answer carries
            it. Not compared.

    Raises:
        AuditRecordError: a field is malformed (an empty request id, a hash
            that is not 64 lowercase hex digits).
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
    call_id: str = field(default_factory=lambda: new_id(), compare=False, init=False)

    def _stored(self, call_id: str) -> ModelCallRecord:
        """This record with the id a store read back (the store's own rows only)."""
        object.__setattr__(self, "call_id", call_id)
        return self

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be a non-empty string, got {value!r}"
            for name, value in (
                ("request_id", self.request_id),
                ("api", self.api),
                ("model", self.model),
            )
            if not isinstance(value, str) or not value.strip()
        ]
        problems += [
            f"{name} {_surrogate_problem(value)}"
            for name, value in (
                ("request_id", self.request_id),
                ("api", self.api),
                ("model", self.model),
            )
            if isinstance(value, str) and _SURROGATE.search(value)
        ]
        if not isinstance(self.tools, tuple) or not all(
            isinstance(name, str) for name in self.tools
        ):
            problems.append(f"tools must be a tuple of names, got {_shown(self.tools)}")
        problems += [
            f"{name} must be 64 lowercase hex digits, got {value!r}"
            for name, value in (
                ("prompt_sha256", self.prompt_sha256),
                ("tools_sha256", self.tools_sha256),
            )
            if not isinstance(value, str) or not _SHA256.fullmatch(value)
        ]
        if not isinstance(self.call_id, str) or not _ID.fullmatch(self.call_id):
            problems.append(f"call_id must be 32 lowercase hex digits, got {self.call_id!r}")
        if problems:
            raise AuditRecordError(
                f"model-call record of request {self.request_id!r} is malformed: "
                f"{'; '.join(problems)}; build it from the call as sent (ModelGateway does)"
            )


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
        usage: the tokens the provider counted, ``None`` where it did not say.
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
        problems = []
        if not isinstance(self.request_id, str) or not self.request_id.strip():
            problems.append(f"request_id must be a non-empty string, got {self.request_id!r}")
        if not isinstance(self.prompt_sha256, str) or not _SHA256.fullmatch(self.prompt_sha256):
            problems.append(
                f"prompt_sha256 must be 64 lowercase hex digits, got {self.prompt_sha256!r}"
            )
        for name in ("response_id", "model", "stop_reason"):
            if not isinstance(getattr(self, name), str):
                problems.append(f"{name} must be a string, got {getattr(self, name)!r}")
        if not isinstance(self.tool_calls, tuple) or not all(
            isinstance(name, str) for name in self.tool_calls
        ):
            problems.append(f"tool_calls must be a tuple of names, got {_shown(self.tool_calls)}")
        if self.usage is not None and not isinstance(self.usage, Usage):
            problems.append(f"usage must be a Usage or None, got {_shown(self.usage)}")
        if not isinstance(self.call_id, str) or not (
            self.call_id == "" or _ID.fullmatch(self.call_id)
        ):
            problems.append(f"call_id must be a ModelCallRecord's call_id, got {self.call_id!r}")
        if isinstance(self.latency, bool) or not (
            isinstance(self.latency, int | float) and self.latency >= 0
        ):
            problems.append(f"latency must be seconds, 0 or more, got {self.latency!r}")
        if problems:
            raise AuditRecordError(
                f"model-reply record of request {self.request_id!r} is malformed: "
                f"{'; '.join(problems)}; build it from the answer as read (ModelGateway does)"
            )


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go. ``write`` must store the record durably or raise."""

    def write(self, record: AuditRecord, /) -> None:
        """Store ``record``; raise :class:`AuditRecordError` for a malformed one."""
        ...


@runtime_checkable
class AuditStore(AuditSink, Protocol):
    """An audit sink that answers the questions the store exists for, whatever it runs on.

    A compliance reviewer asks them of the store, not of one host's file: how
    was each write approved (:meth:`writes_by_approval`), did an always rule
    ever approve an instruction-field write
    (:meth:`instruction_writes_under_always_rule`, which must be empty), what
    did the model call after a refusal (:meth:`substitutions`,
    :meth:`substitution_rate`), and what happened in one request
    (:meth:`records`, :meth:`model_calls`). :class:`SQLiteAuditSink` is one;
    a store on a server implements the same, with the same answers.
    """

    def records(self, request_id: str | None = None) -> tuple[AuditRecord, ...]:
        """Every call's record in the order written, or those of one request."""
        ...

    def model_calls(self, request_id: str | None = None) -> tuple[ModelCallRecord, ...]:
        """Every model call in the order sent, or those of one request."""
        ...

    def writes_by_approval(self) -> dict[ApprovalMode, int]:
        """How many write calls were recorded under each approval mode (every mode present)."""
        ...

    def instruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """Instruction-field writes approved by an always rule: must be empty."""
        ...

    def substitutions(self) -> tuple[Substitution, ...]:
        """Each stopped call and the next call of its request (or ``None``)."""
        ...

    def substitution_rate(self) -> float | None:
        """Of the stopped calls followed by another, the share that tried the same operation."""
        ...


@runtime_checkable
class AsyncAuditStore(Protocol):
    """:class:`AuditStore` for async code: every method a coroutine, none blocks the loop."""

    async def awrite(self, record: AuditRecord, /) -> None:
        """Store ``record`` durably, or raise."""
        ...

    async def arecords(self, request_id: str | None = None) -> tuple[AuditRecord, ...]:
        """As :meth:`AuditStore.records`."""
        ...

    async def amodel_calls(self, request_id: str | None = None) -> tuple[ModelCallRecord, ...]:
        """As :meth:`AuditStore.model_calls`."""
        ...

    async def awrites_by_approval(self) -> dict[ApprovalMode, int]:
        """As :meth:`AuditStore.writes_by_approval`."""
        ...

    async def ainstruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """As :meth:`AuditStore.instruction_writes_under_always_rule`."""
        ...

    async def asubstitutions(self) -> tuple[Substitution, ...]:
        """As :meth:`AuditStore.substitutions`."""
        ...

    async def asubstitution_rate(self) -> float | None:
        """As :meth:`AuditStore.substitution_rate`."""
        ...


_CALL_COLUMNS: Final = (
    "time, request_id, api, model, prompt_sha256, tools_sha256, tools, instruction_spans, "
    "streamed, call_id"
)
_INSERT_CALL: Final = (
    f"INSERT INTO veridic_model_calls ({_CALL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (call_id) DO NOTHING"
)
_REPLY_COLUMNS: Final = (
    "time, request_id, prompt_sha256, response_id, model, stop_reason, tool_calls, "
    "input_tokens, output_tokens, latency, call_id"
)
_INSERT_REPLY: Final = (
    f"INSERT INTO veridic_model_replies ({_REPLY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)
_COLUMNS: Final = (
    "time, request_id, tool, kind, risk, approval, wrote_instruction_fields, irreversible, "
    "prompt_sha256, tools_sha256, outcome, detail, operations, record_id"
)
_INSERT: Final = (
    f"INSERT INTO veridic_audit ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (record_id) DO NOTHING"
)

_Row = tuple[float, str, str, str | None, str | None, str, int, int, str, str, str, str, str, str]
_CALLS_ONLY: Final = "NOT (outcome = 'blocked' AND substr(detail, 1, ?) = ?)"
_CALLS_ONLY_ARGS: Final = (len(_FOLLOW_UP), _FOLLOW_UP)


class SQLiteAuditSink:
    """The default audit store: one SQLite table, one committed transaction per record.

    ``path`` is a file (opened in WAL mode, so readers never block the
    writer) or ``":memory:"``. One connection is shared behind a lock, so any
    number of threads may call :meth:`write`; asyncio tasks may call it
    directly (a write holds the loop for tens of microseconds) or through
    ``asyncio.to_thread``. Each record is its own transaction, committed
    before ``write`` returns: a crash loses at most the record in flight.

    ``synchronous`` is SQLite's setting: ``"NORMAL"`` (the default) survives
    a crash of the process; ``"FULL"`` also survives power loss, at the price
    of an fsync per record.

    Raises:
        AuditRecordError: :meth:`write` got something that is not a valid
            :class:`AuditRecord`.
        sqlite3.Error: the database cannot be opened or written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise AuditRecordError(
                f"SQLiteAuditSink(synchronous={synchronous!r}) is not a setting; "
                'use "NORMAL" (survives a process crash) or "FULL" (survives power loss)'
            )
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        # isolation_level=None: autocommit, so each INSERT is its own committed transaction.
        self._db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        with self._lock:
            if self._path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            prepare(self._db, repr(self))

    def __repr__(self) -> str:
        return f"SQLiteAuditSink({self._path!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; every record written so far is already committed."""
        with self._lock:
            self._db.close()

    def write(self, record: AuditRecord, /) -> None:
        """Validate ``record`` and commit it before returning.

        Raises:
            AuditRecordError: ``record`` is not a valid :class:`AuditRecord`.
        """
        if not isinstance(record, AuditRecord):
            raise AuditRecordError(
                f"{self!r}.write() got a {type(record).__name__}, not an AuditRecord: "
                "build an AuditRecord (its fields are checked when it is made)"
            )
        # A frozen dataclass can still be altered with object.__setattr__: check again.
        _validate(record)
        row = _to_row(record)
        with self._lock:
            self._db.execute(_INSERT, row)

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        """Commit a :class:`ModelCallRecord` (what the gateway sent) before returning.

        Raises:
            AuditRecordError: ``record`` is not a :class:`ModelCallRecord`.
        """
        if not isinstance(record, ModelCallRecord):
            raise AuditRecordError(
                f"{self!r}.write_model_call() got a {type(record).__name__}: pass the "
                "ModelCallRecord the gateway built"
            )
        spans = [
            [s.message, s.role, s.start, s.end, s.kind, s.origin] for s in record.instruction_spans
        ]
        row = (
            record.time,
            record.request_id,
            record.api,
            record.model,
            record.prompt_sha256,
            record.tools_sha256,
            json.dumps(list(record.tools)),
            _json(spans),
            int(record.streamed),
            record.call_id,
        )
        with self._lock:
            self._db.execute(_INSERT_CALL, row)

    def model_calls(self, request_id: str | None = None) -> tuple[ModelCallRecord, ...]:
        """Every model call in the order sent, or those of one request."""
        rows = self._rows(_CALL_COLUMNS, "veridic_model_calls", request_id)
        return tuple(
            ModelCallRecord(
                time=time,
                request_id=request,
                api=api,
                model=model,
                prompt_sha256=prompt,
                tools_sha256=tools_digest,
                tools=tuple(json.loads(tools)),
                instruction_spans=tuple(_span(span) for span in json.loads(spans)),
                streamed=bool(streamed),
            )._stored(call_id)
            for (
                time,
                request,
                api,
                model,
                prompt,
                tools_digest,
                tools,
                spans,
                streamed,
                call_id,
            ) in rows
        )

    def write_model_reply(self, record: ModelReplyRecord, /) -> None:
        """Commit a :class:`ModelReplyRecord` (what the model answered) before returning.

        Raises:
            AuditRecordError: ``record`` is not a :class:`ModelReplyRecord`.
        """
        if not isinstance(record, ModelReplyRecord):
            raise AuditRecordError(
                f"{self!r}.write_model_reply() got a {type(record).__name__}: pass the "
                "ModelReplyRecord the gateway built"
            )
        usage = record.usage
        row = (
            record.time,
            _storable(record.request_id),
            record.prompt_sha256,
            _storable(record.response_id),
            _storable(record.model),
            _storable(record.stop_reason),
            json.dumps([_storable(name) for name in record.tool_calls]),
            None if usage is None else usage.input_tokens,
            None if usage is None else usage.output_tokens,
            float(record.latency),
            record.call_id or None,
        )
        with self._lock:
            self._db.execute(_INSERT_REPLY, row)

    def model_replies(self, request_id: str | None = None) -> tuple[ModelReplyRecord, ...]:
        """Every model answer in the order read, or those of one request."""
        rows = self._rows(_REPLY_COLUMNS, "veridic_model_replies", request_id)
        return tuple(
            ModelReplyRecord(
                time=row[0],
                request_id=row[1],
                prompt_sha256=row[2],
                response_id=row[3],
                model=row[4],
                stop_reason=row[5],
                tool_calls=tuple(json.loads(row[6])),
                usage=None if row[7] is None else Usage(row[7], row[8]),
                latency=row[9],
                call_id=row[10] or "",
            )
            for row in rows
        )

    def save_conversation(
        self, key: str, conversation: Conversation, /, *, time: float | None = None
    ) -> None:
        """Store ``conversation`` under ``key`` (a chat's id, a paused run's request id).

        Each save is kept, in order: the store holds how a conversation grew,
        and :meth:`conversation` reads the latest. What is stored holds no
        trust (see :mod:`veridic.text.conversation`).

        Raises:
            AuditRecordError: ``key`` is empty or not storable text, or
                ``conversation`` is not a :class:`~veridic.Conversation`.
        """
        _check_key(key, f"{self!r}.save_conversation()")
        if not isinstance(conversation, Conversation):
            raise AuditRecordError(
                f"{self!r}.save_conversation() got a {type(conversation).__name__}: pass "
                "composer.conversation()"
            )
        row = (
            _time.time() if time is None else time,
            key,
            len(conversation),
            conversation.to_json(),
        )
        with self._lock:
            self._db.execute(
                "INSERT INTO veridic_conversations (time, key, turns, document) VALUES (?,?,?,?)",
                row,
            )

    def conversation(self, key: str, /) -> Conversation | None:
        """The conversation last saved under ``key``, or ``None`` if none was.

        Raises:
            VeridicError: the stored document is not a conversation (changed
                in the database by hand: see :meth:`Conversation.from_json`).
        """
        with self._read() as db:
            row = db.execute(
                "SELECT document FROM veridic_conversations WHERE key = ? ORDER BY id DESC LIMIT 1",
                (key,),
            ).fetchone()
        return None if row is None else Conversation.from_json(row[0])

    # --- approval state that outlives the process --------------------------------------

    def save_rules(self, scope: str, rules: Mapping[str, str], /) -> None:
        """Keep approval rules (``dict(policy.rules)``) under ``scope`` (a user, a tenant).

        Each save is kept; :meth:`rules` reads the latest. Read them back
        through :meth:`ApprovalPolicy.restore <veridic.ApprovalPolicy.restore>`,
        which checks each rule again against the new view.

        Raises:
            AuditRecordError: ``scope`` is not storable text, or ``rules`` is not
                a mapping of tool names to rules (text).
        """
        _check_key(scope, f"{self!r}.save_rules()")
        if not isinstance(rules, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in rules.items()
        ):
            raise AuditRecordError(
                f"{self!r}.save_rules() got {clip(repr(rules))}: pass a mapping of tool names "
                "to rules, dict(policy.rules)"
            )
        document = json.dumps(dict(sorted(rules.items())), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT INTO veridic_approval_rules (time, scope, document) VALUES (?,?,?)",
                (_time.time(), scope, _storable(document)),
            )

    def rules(self, scope: str, /) -> dict[str, str]:
        """The rules last saved under ``scope`` (``{}`` if none were)."""
        with self._read() as db:
            row = db.execute(
                "SELECT document FROM veridic_approval_rules WHERE scope = ? "
                "ORDER BY id DESC LIMIT 1",
                (scope,),
            ).fetchone()
        if row is None:
            return {}
        loaded: object = json.loads(row[0])
        if not isinstance(loaded, dict):
            raise AuditRecordError(f"the rules stored under {scope!r} are not a JSON object")
        return {str(k): str(v) for k, v in loaded.items()}

    def save_paused(self, paused: PausedRun, /) -> None:
        """Keep a run paused for approvals until one request claims it (:meth:`claim_paused`).

        Raises:
            AuditRecordError: ``paused`` is not a :class:`~veridic.PausedRun`.
        """
        if not isinstance(paused, PausedRun):
            raise AuditRecordError(
                f"{self!r}.save_paused() got a {type(paused).__name__}: pass result.paused"
            )
        with self._lock:
            self._db.execute(
                "INSERT INTO veridic_paused_runs (time, request_id, document) VALUES (?,?,?)",
                (_time.time(), _storable(paused.request_id), paused.to_json()),
            )

    def pending_runs(self) -> tuple[str, ...]:
        """The request ids of runs paused and not claimed yet, oldest first."""
        with self._read() as db:
            rows = db.execute(
                "SELECT DISTINCT request_id FROM veridic_paused_runs WHERE claimed IS NULL "
                "ORDER BY id"
            ).fetchall()
        return tuple(str(row[0]) for row in rows)

    def claim_paused(self, request_id: str, /) -> PausedRun | None:
        """The run paused under ``request_id``, for one caller only; ``None`` once claimed.

        Two requests that bring the user's answers at once (a double click,
        two hosts) must not both resume the run, or an approved write would
        run twice: the claim is one conditional update, and only the caller
        whose update took the row gets the paused run. Claiming marks it
        taken even if the resume then fails: save the new pause the resume
        returns, or save the paused run again to retry.
        """
        with self._lock:
            row = self._db.execute(
                "UPDATE veridic_paused_runs SET claimed = ? WHERE id = (SELECT id FROM "
                "veridic_paused_runs WHERE request_id = ? AND claimed IS NULL ORDER BY id DESC "
                "LIMIT 1) AND claimed IS NULL RETURNING document",
                (_time.time(), request_id),
            ).fetchone()
        return None if row is None else PausedRun.from_json(row[0])

    def records(self, request_id: str | None = None) -> tuple[AuditRecord, ...]:
        """Every record in the order written, or those of one request."""
        return tuple(_from_row(row) for row in self._rows(_COLUMNS, "veridic_audit", request_id))

    def _rows(self, columns: str, table: str, request_id: str | None) -> list[Any]:
        """``columns`` of every row of ``table`` in the order written, or of one request's.

        ``Any``, as sqlite3 gives rows: each caller reads its own columns' types.
        """
        query = f"SELECT {columns} FROM {table}"
        with self._read() as db:
            if request_id is None:
                return db.execute(f"{query} ORDER BY id").fetchall()
            return db.execute(f"{query} WHERE request_id = ? ORDER BY id", (request_id,)).fetchall()

    def count(self) -> int:
        """How many records the store holds."""
        with self._read() as db:
            (total,) = db.execute("SELECT COUNT(*) FROM veridic_audit").fetchone()
        return int(total)

    def writes_by_approval(self) -> dict[ApprovalMode, int]:
        """How many write calls were recorded under each approval mode (every mode present).

        Follow-up records (:attr:`AuditRecord.follow_up`) are not calls and are not counted.
        """
        counts = dict.fromkeys(ApprovalMode, 0)
        with self._read() as db:
            rows = db.execute(
                f"SELECT approval, COUNT(*) FROM veridic_audit WHERE kind = 'write' "
                f"AND {_CALLS_ONLY} GROUP BY approval",
                _CALLS_ONLY_ARGS,
            ).fetchall()
        for approval, total in rows:
            counts[ApprovalMode(approval)] = int(total)
        return counts

    def instruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """Calls that wrote instruction fields approved by an always rule: must be empty.

        The gates make it so; a non-empty answer is a bug to report, with the
        records that prove it.
        """
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM veridic_audit "
                "WHERE wrote_instruction_fields = 1 AND approval = 'always_rule' ORDER BY id"
            ).fetchall()
        return tuple(_from_row(row) for row in rows)

    def substitutions(self) -> tuple[Substitution, ...]:
        """For each stopped call, the next call of the same request (or ``None``), in order.

        Follow-up records (:attr:`AuditRecord.follow_up`) are skipped on both
        sides: they record work a call left behind, not a call the model made.
        """
        with self._read() as db:
            rows = db.execute(
                f"SELECT id, LEAD(id) OVER (PARTITION BY request_id ORDER BY id), {_COLUMNS} "
                f"FROM veridic_audit WHERE {_CALLS_ONLY} ORDER BY id",
                _CALLS_ONLY_ARGS,
            ).fetchall()
        records = {row[0]: _from_row(row[2:]) for row in rows}
        return tuple(
            Substitution(records[row[0]], None if row[1] is None else records[row[1]])
            for row in rows
            if records[row[0]].stopped
        )

    def substitution_rate(self) -> float | None:
        """Of the stopped calls that the model followed with another call in the
        same request, the share whose next call attempted the same operation.

        ``None`` when no stopped call was followed by anything (a stopped call
        that ends its request says nothing about substitution).
        """
        followed = [s for s in self.substitutions() if s.next is not None]
        if not followed:
            return None
        return sum(s.same_operation for s in followed) / len(followed)

    # --- the async twins: the same questions on a worker thread --------------------------

    async def awrite(self, record: AuditRecord, /) -> None:
        """:meth:`write` on a worker thread, so the event loop is never held by the disk."""
        await asyncio.to_thread(self.write, record)

    async def arecords(self, request_id: str | None = None) -> tuple[AuditRecord, ...]:
        """:meth:`records` on a worker thread."""
        return await asyncio.to_thread(self.records, request_id)

    async def amodel_calls(self, request_id: str | None = None) -> tuple[ModelCallRecord, ...]:
        """:meth:`model_calls` on a worker thread."""
        return await asyncio.to_thread(self.model_calls, request_id)

    async def awrites_by_approval(self) -> dict[ApprovalMode, int]:
        """:meth:`writes_by_approval` on a worker thread."""
        return await asyncio.to_thread(self.writes_by_approval)

    async def ainstruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """:meth:`instruction_writes_under_always_rule` on a worker thread."""
        return await asyncio.to_thread(self.instruction_writes_under_always_rule)

    async def asubstitutions(self) -> tuple[Substitution, ...]:
        """:meth:`substitutions` on a worker thread."""
        return await asyncio.to_thread(self.substitutions)

    async def asubstitution_rate(self) -> float | None:
        """:meth:`substitution_rate` on a worker thread."""
        return await asyncio.to_thread(self.substitution_rate)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db


def _check_key(key: object, where: str) -> None:
    if not isinstance(key, str) or not key.strip() or _storable(key) != key:
        raise AuditRecordError(
            f"{where} got the key {key!r:.80}: pass a non-empty string without lone "
            "surrogates (a chat's id, a request id, a user's id)"
        )


def _to_row(record: AuditRecord) -> _Row:
    return (
        record.time,
        record.request_id,
        record.tool,
        record.kind,
        None if record.risk is None else record.risk.value,
        record.approval.value,
        int(record.wrote_instruction_fields),
        int(record.irreversible),
        record.prompt_sha256,
        record.tools_sha256,
        record.outcome.value,
        record.detail,
        _json(list(record.operations)) if record.operations else "[]",
        record.record_id,
    )


def _from_row(row: Sequence[object]) -> AuditRecord:
    (time, request_id, tool, kind, risk, approval, wrote, irreversible) = row[:8]
    (prompt_sha256, tools_sha256, outcome, detail, operations, record_id) = row[8:14]
    try:
        return AuditRecord(
            time=float(time),  # type: ignore[arg-type]  # REAL column, sqlite gives a float
            request_id=str(request_id),
            tool=str(tool),
            kind=_kind(kind),
            risk=None if risk is None else Risk(str(risk)),
            approval=ApprovalMode(str(approval)),
            wrote_instruction_fields=bool(wrote),
            irreversible=bool(irreversible),
            prompt_sha256=str(prompt_sha256),
            tools_sha256=str(tools_sha256),
            outcome=CallOutcome(str(outcome)),
            detail=str(detail),
            operations=tuple(str(o) for o in json.loads(str(operations))),
        )._stored(str(record_id))
    except (KeyError, ValueError) as error:
        raise AuditRecordError(
            f"audit row {_shown(tuple(row), 120)} cannot be read back ({error}); "
            "the table was written by something other than veridic: check what else "
            "writes to veridic_audit"
        ) from error


_ROLES: Final[dict[object, Role]] = {role: role for role in get_args(Role)}
_SPAN_KINDS: Final[dict[object, Kind]] = {kind: kind for kind in get_args(Kind)}


def _span(raw: object) -> PromptSpan:
    """A stored instruction span, read back with its role and kind checked (they are Literal)."""
    if isinstance(raw, list) and len(raw) == 6:
        message, role, start, end, kind, origin = raw
        if (
            type(message) is int
            and type(start) is int
            and type(end) is int
            and role in _ROLES
            and kind in _SPAN_KINDS
            and isinstance(origin, str)
        ):
            return PromptSpan(message, _ROLES[role], start, end, _SPAN_KINDS[kind], origin)
    raise AuditRecordError(
        f"a stored instruction span {_shown(raw, 120)} cannot be read back: the "
        "veridic_model_calls table was written by something other than veridic; check what "
        "else writes to it"
    )


def _kind(value: object) -> ToolKind | None:
    if value == "query":
        return "query"
    if value == "write":
        return "write"
    if value is None:
        return None
    raise ValueError(f"kind {value!r}")


def _validate(record: AuditRecord) -> None:
    if _well_formed(record):
        return
    problems = list(_problems(record))
    if problems:
        where = f"audit record of tool {record.tool!r} in request {record.request_id!r}"
        raise AuditRecordError(
            f"{where} is malformed: {'; '.join(problems)}; build the record from the call "
            "as it happened (veridic.execute does), or fix the listed fields"
        )


def _well_formed(r: AuditRecord) -> bool:
    """The fast answer of :func:`_problems` (no problem), checked on every write."""
    approval, outcome, risk, kind = r.approval, r.outcome, r.risk, r.kind
    if not (
        type(r.time) in (float, int)
        and 0 <= r.time < math.inf
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
        and not _SURROGATE.search(r.request_id)
        and not _SURROGATE.search(r.tool)
        and not _SURROGATE.search(r.detail)
    ):
        return False
    if r.operations and not (
        all(isinstance(o, str) and o and not _SURROGATE.search(o) for o in r.operations)
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
    if type(r.time) not in (float, int) or not math.isfinite(r.time) or r.time < 0:
        yield f"time must be seconds since the epoch (a finite float >= 0), got {r.time!r}"
    for name in ("request_id", "tool"):
        value = getattr(r, name)
        if not isinstance(value, str) or not value.strip():
            yield f"{name} must be a non-empty string, got {_shown(value)}"
    for name in ("request_id", "tool", "detail"):
        value = getattr(r, name)
        if isinstance(value, str) and _SURROGATE.search(value):
            yield f"{name} {_surrogate_problem(value)}"
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
                f"got {_shown(value)}"
            )
    if not isinstance(r.detail, str):
        yield f"detail must be a string, got {type(r.detail).__name__}"
    if not isinstance(r.record_id, str) or not _ID.fullmatch(r.record_id):
        yield f"record_id must be 32 lowercase hex digits (new_id()), got {_shown(r.record_id)}"
    if not isinstance(r.operations, tuple) or not all(
        isinstance(o, str) and o for o in r.operations
    ):
        yield f"operations must be a tuple of non-empty strings, got {_shown(r.operations)}"
    elif list(r.operations) != sorted(set(r.operations)):
        yield f"operations must be sorted and unique, got {_shown(r.operations)}"
    elif any(_SURROGATE.search(o) for o in r.operations):
        yield f"operations {_surrogate_problem(' '.join(r.operations))}"
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


def _shown(value: object, limit: int = 60) -> str:
    """``value`` for a message: a string clipped and quoted, anything else as a clipped repr."""
    if isinstance(value, str):
        return clip(value, limit)
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


def _surrogate_problem(text: str) -> str:
    """The problem with ``text`` that holds a lone surrogate, for a validation message."""
    return (
        f"holds a lone surrogate ({_shown(text)}), which UTF-8 cannot encode and so no store "
        "can keep: escape it first, text.encode('utf-8', 'backslashreplace').decode()"
    )


def _json(value: object) -> str:
    """JSON text that any UTF-8 store can keep: readable, with lone surrogates escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(value) if _SURROGATE.search(text) else text


def _storable(text: str) -> str:
    """``text`` with each lone surrogate escaped as ``\\udXXX``, so UTF-8 can encode it."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _recorded_tool(name: object) -> tuple[str, str]:
    """The tool name a record keeps for a model-written ``name``, and a note when it was altered.

    A plain name (printable, no surrounding space, at most 200 characters)
    is kept as it is, and the note is empty. Anything else (a newline, NUL,
    a lone surrogate, an empty or blank name, a 100 KB one, a name that is not
    a string) is kept as :func:`~veridic._sample.clip` shows it: ``repr``-escaped,
    quoted and cut at 200 characters; the note says so, with the original
    length and the first 16 hex digits of the SHA-256 of its UTF-8 bytes
    (surrogates passed through), so the same name is recognisable across records.

    >>> _recorded_tool("purge")
    ('purge', '')
    >>> _recorded_tool("purge\\n")
    ("'purge\\\\n'", 'tool name recorded escaped (6 chars, sha256 b821c64de5b8645d)')
    """
    if isinstance(name, str):
        if 0 < len(name) <= _TOOL_LIMIT and name.isprintable() and name == name.strip():
            return name, ""
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        how = "escaped and clipped" if len(name) > _TOOL_LIMIT else "escaped"
        return clip(
            name, _TOOL_LIMIT
        ), f"tool name recorded {how} ({len(name)} chars, sha256 {digest})"
    shown = repr(name)
    shown = shown if len(shown) <= _TOOL_LIMIT else f"{shown[:_TOOL_LIMIT]}…"
    return (
        f"<{type(name).__name__} {_storable(shown)}>",
        "tool name is not text, recorded as its repr",
    )
