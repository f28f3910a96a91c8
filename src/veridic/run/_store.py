"""The audit store's statements and answers, written once for every SQL store.

A question a reviewer asks (how was each write approved, what came after a
refusal) must get the same answer from the embedded SQLite file and from the
Postgres server many hosts write to. So the SQL and the reading back of rows
live here, once, in the subset both dialects speak (``?`` placeholders,
which a Postgres store turns into ``%s``; no ``%`` anywhere; booleans as
conditions, never compared to ``1``), and each store supplies only how a
statement reaches its database, through the methods of
:mod:`veridic.run._sql_store` (private too: the stores are the public names).

Every statement is harmless to run twice, so a store sends one again after a
lost connection: inserts of records keyed by their own id (``ON CONFLICT DO
NOTHING``; an answer that names no call is keyed by the digest of its columns),
a save of a paused run (kept once while unclaimed), and a claim of a paused run,
which carries a token that a second try brings again (:func:`claim_paused`). An
insert keyed by its id that adds no row (its rowcount is 0) is checked against
the row already under that id (:class:`Keyed`): the same record is a retry,
kept once; another one is refused, never dropped.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeGuard, TypeVar, get_args

from veridic import _json_object
from veridic._sample import clip, cut_short, quoted
from veridic.errors import AuditRecordError, VeridicError
from veridic.providers._base import PARTS, Usage
from veridic.run.approval import _RULES, ApprovalMode, ApprovalRules, _SavedRules, _storable_rule
from veridic.run.deferred import PausedRun
from veridic.run.records import (
    _FIELDS,
    _FOLLOW_UP,
    _ID,
    _TOOL_LIMIT,
    AuditRecord,
    CallOutcome,
    ModelCallRecord,
    ModelReplyRecord,
    Substitution,
    _check_model_call,
    _check_model_reply,
    _checked_fields,
    _is_seconds,
    _json,
    _recorded_tool,
    _storable,
)
from veridic.run.records import (
    _STOPPED as _STOPPED_OUTCOMES,
)
from veridic.text.conversation import Conversation
from veridic.text.prompt import PromptSpan, Role
from veridic.text.provenance import Kind
from veridic.text.trust_policy import VouchRecord, _check_vouch
from veridic.tools.risk import Risk, ToolKind

T = TypeVar("T")

Rows = list[tuple[Any, ...]]
"""Rows as a driver gives them: ``Any``, since each reader knows its own columns' types."""


@dataclass(frozen=True, slots=True)
class Statement(Generic[T]):
    """One statement, its parameters, and how its rows become the answer."""

    sql: str
    params: tuple[object, ...]
    answer: Callable[[Rows], T]
    keyed: Keyed | None = None
    """For an insert of a record keyed by its own id: how to check a row already there."""
    record: object = None
    """The record the insert writes, for the error of one refused (:func:`check_kept`)."""

    @property
    def writes(self) -> bool:
        """Whether it changes the database (every query of this module begins with SELECT)."""
        return not self.sql.startswith("SELECT")


def nothing(rows: Rows) -> None:
    return None


def _rows(rows: Rows) -> Rows:
    return rows


@dataclass(frozen=True, slots=True)
class Keyed:
    """A table whose records are keyed by their own id, inserted ``ON CONFLICT DO NOTHING``.

    Doing nothing on a conflict makes a write sent again (after a lost connection whose
    first try was committed) harmless; it also dropped, without a word, another record
    under the same id (a reply with another model for one call, a record changed with
    ``object.__setattr__`` and written again). A store whose insert added no row reads
    the row under the id (:meth:`stored`) and :func:`check_kept` tells the two apart.
    """

    table: str
    columns: str
    """The inserted columns, in the order of the insert's parameters."""
    key: str

    def stored(self, params: tuple[object, ...]) -> Statement[Rows]:
        """The row kept under the id of the insert of ``params``."""
        at = self.columns.split(", ").index(self.key)
        return Statement(
            f"SELECT {self.columns} FROM {self.table} WHERE {self.key} = ?",
            (params[at],),
            _rows,
        )


def check_kept(where: object, statement: Statement[Any], stored: Rows) -> None:
    """Refuse ``statement``'s record unless ``stored``, the row under its id, is the same.

    Called only when the insert added no row, so this costs a read on a retry and on a
    conflict, never on a write that landed. The message names the table, the id and the
    columns that differ, never their values (a detail, a model name: text a model or an
    attacker may have written). ``where`` is the store (its ``repr`` is taken only here).

    Raises:
        AuditRecordError: another record is kept under the id (the refused one is on the
            error, as ``.record``), or no row is, though the insert added none.
    """
    keyed = statement.keyed
    if keyed is None:
        return
    names = keyed.columns.split(", ")
    key = statement.params[names.index(keyed.key)]
    if stored:
        differ = [
            name
            for name, given, kept in zip(names, statement.params, stored[0], strict=True)
            if _plain(given) != kept
        ]
        if not differ:
            return  # the same record: a retry, kept once
        what = (
            f"holds another record under the {keyed.key} {clip(str(key))} in {keyed.table}: "
            f"the one written differs in {', '.join(differ)}"
        )
    else:
        what = f"added no row for the {keyed.key} {clip(str(key))} to {keyed.table}, nor holds one"
    error = AuditRecordError(
        f"{where!r} {what}. It was not stored (the store keeps the first; a record is "
        "never overwritten), and it is on this error (.record): store it elsewhere. A record's "
        "id names one record: build a new record (a new id) rather than change one written "
        "(object.__setattr__), and check what else writes records with this id"
    )
    error.record = statement.record
    raise error


def _plain(given: object) -> object:
    """``given``, a parameter of an insert, as the built-in value a driver reads back.

    Compared as it was, a ``str`` subclass that says it equals anything (its ``__eq__``,
    ``__ne__``) was asked whether it equals the row kept, and another record was taken
    for a retry and dropped, without a word. The built-in types' own conversions never
    ask the subclass.
    """
    if isinstance(given, str):
        return str.__str__(given)
    if isinstance(given, bool) or given is None:
        return given
    if isinstance(given, int):
        return int.__int__(given)
    if isinstance(given, float):
        return float.__float__(given)
    return given


COLUMNS: Final = (
    "time, request_id, tool, kind, risk, approval, wrote_instruction_fields, irreversible, "
    "prompt_sha256, tools_sha256, outcome, detail, operations, duration, arguments_sha256, "
    "record_id, call_id"
)
_CALL_COLUMNS: Final = (
    "time, request_id, api, model, prompt_sha256, tools_sha256, tools, instruction_spans, "
    "streamed, call_id, options_sha256"
)
_REPLY_COLUMNS: Final = (
    "time, request_id, prompt_sha256, response_id, model, stop_reason, tool_calls, "
    "input_tokens, output_tokens, latency, call_id, cache_read_input_tokens, "
    "cache_creation_input_tokens, reasoning_output_tokens"
)
_VOUCH_COLUMNS: Final = "time, policy, reason, caller, sample, record_id"


def _insert(table: str, columns: str, unique: str | None) -> str:
    marks = ",".join("?" * (columns.count(",") + 1))
    conflict = "" if unique is None else f" ON CONFLICT ({unique}) DO NOTHING"
    return f"INSERT INTO {table} ({columns}) VALUES ({marks}){conflict}"


INSERT: Final = _insert("veridic_audit", COLUMNS, "record_id")
_INSERT_CALL: Final = _insert("veridic_model_calls", _CALL_COLUMNS, "call_id")
_INSERT_REPLY: Final = _insert("veridic_model_replies", _REPLY_COLUMNS, "call_id")
_INSERT_VOUCH: Final = _insert("veridic_vouches", _VOUCH_COLUMNS, "record_id")
KEYED_AUDIT: Final = Keyed("veridic_audit", COLUMNS, "record_id")
_KEYED_CALL: Final = Keyed("veridic_model_calls", _CALL_COLUMNS, "call_id")
_KEYED_REPLY: Final = Keyed("veridic_model_replies", _REPLY_COLUMNS, "call_id")
_KEYED_VOUCH: Final = Keyed("veridic_vouches", _VOUCH_COLUMNS, "record_id")

_CALLS_ONLY: Final = (
    f"NOT (outcome = 'blocked' AND substr(detail, 1, {len(_FOLLOW_UP)}) = '{_FOLLOW_UP}')"
)
"""Rows that record calls, not follow-ups (constants inlined: no placeholder, no ``%``)."""
_STOPPED: Final = f"outcome IN ({', '.join(repr(o.value) for o in sorted(_STOPPED_OUTCOMES))})"
"""Rows of calls that were stopped (:attr:`AuditRecord.stopped`)."""


# --- writes --------------------------------------------------------------------------------


def checked_row(where: object, record: object) -> tuple[object, ...]:
    """The parameters of :data:`INSERT` for ``record``, checked again (frozen is not immutable).

    ``where`` names the store in a message (its ``repr`` is taken only then).

    Raises:
        AuditRecordError: ``record`` is not a valid :class:`AuditRecord`.
    """
    if not isinstance(record, AuditRecord):
        raise AuditRecordError(
            f"{where}.write() got a {type(record).__name__}, not an AuditRecord: "
            "build an AuditRecord (its fields are checked when it is made)"
        )
    return _row(_checked_fields(record))


def write_record(where: object, record: object) -> Statement[None]:
    """The insert of a tool call's ``record``, checked again (:func:`checked_row`)."""
    return Statement(INSERT, checked_row(where, record), nothing, keyed=KEYED_AUDIT, record=record)


DETAIL_LIMIT: Final = 4096
"""The most characters of a record's ``detail`` a store keeps; past that it is cut, visibly.

The executor keeps a detail short itself (a reason, a guard, an error's
first 200 characters), but a record built by other code (an adapter, an
application's own) may carry a whole tool result or argument: megabytes in a
row, read back by every review of the store and printed by ``veridic show``.
4096 characters keep any reason veridic writes whole, and a clipped error
with room to spare."""


def _cut(detail: str) -> str:
    """``detail`` within :data:`DETAIL_LIMIT` characters, a cut one saying how much went.

    What is kept is the start, so a follow-up's ``"after the call ended: "``
    stays (:attr:`AuditRecord.follow_up`); what was cut is counted, in
    characters, in the text itself, so a reader of the row sees it is not whole.
    The note is within the limit too: a cut detail is kept as it is when a
    record read back is written again, to the same store (a retry, kept once)
    or to another (a migration), where the start and the note past the limit
    were cut a second time.
    """
    if len(detail) <= DETAIL_LIMIT:
        return detail
    # The note of a cut of every character is at least as long as the note of the cut made.
    start = DETAIL_LIMIT - len(_cut_note(len(detail), len(detail)))
    return detail[:start] + _cut_note(len(detail) - start, len(detail))


def _cut_note(cut: int, whole: int) -> str:
    return f"… [the audit store cut {cut} of {whole} characters]"


OPERATION_LIMIT: Final = _TOOL_LIMIT
"""The most characters of one of a record's ``operations`` a store keeps, as of a tool name."""
OPERATIONS_LIMIT: Final = 64
"""The most of a record's ``operations`` a store keeps; past that it says how many it cut.

An operation is named by the handler's code (``guard_irreversible(name)``,
``guard_instruction_write(target)``), and a handler may name it from what the
model wrote (``f"delete {path}"``) or name one per item of a loop: each went
whole into the row, megabytes read back by every review of the store. No
operation veridic names comes near either limit."""


def _operations(operations: tuple[str, ...]) -> str:
    """The stored JSON list of ``operations``: whole within the limits, cut visibly past them.

    An operation past :data:`OPERATION_LIMIT` keeps its start, its length and
    the first 16 hex digits of its SHA-256, in :data:`OPERATION_LIMIT` characters
    in all, so two records of the same long operation still share it
    (:attr:`Substitution.same_operation`) and two that differ past the start do
    not. Past :data:`OPERATIONS_LIMIT`, the first ones (in order) are kept and one
    more entry says how many of how many were cut, with the digest of them all.
    What is kept is sorted and unique, as a record's operations are, and within
    both limits, so the row reads back as a record that is written again as it is.
    """
    if not operations:
        return "[]"
    if len(operations) <= OPERATIONS_LIMIT and all(
        len(operation) <= OPERATION_LIMIT for operation in operations
    ):
        return _json(list(operations))
    kept = sorted({_operation(operation) for operation in operations})
    if len(kept) > OPERATIONS_LIMIT:
        everything = hashlib.sha256("\n".join(operations).encode()).hexdigest()[:16]
        cut = len(kept) - OPERATIONS_LIMIT + 1
        kept = sorted(
            [
                *kept[: OPERATIONS_LIMIT - 1],
                f"… [the audit store cut {cut} of {len(operations)} operations, "
                f"sha256 {everything}]",
            ]
        )
    return _json(kept)


def _operation(operation: str) -> str:
    """``operation`` within :data:`OPERATION_LIMIT` characters: a longer one is its start,
    with its length and digest, in the limit (so it is not cut again when written again)."""
    if len(operation) <= OPERATION_LIMIT:
        return operation
    digest = hashlib.sha256(operation.encode()).hexdigest()[:16]
    note = f"… [{len(operation)} chars, sha256 {digest}]"
    return operation[: OPERATION_LIMIT - len(note)] + note


def to_row(record: AuditRecord) -> tuple[object, ...]:
    """The parameters of :data:`INSERT` for ``record`` (not checked: see :func:`checked_row`)."""
    return _row(_FIELDS(record))


def _row(fields: tuple[Any, ...]) -> tuple[object, ...]:
    """:func:`to_row` of the fields :data:`~veridic.run.records._FIELDS` read."""
    (
        time,
        request_id,
        tool,
        kind,
        risk,
        approval,
        wrote,
        irreversible,
        prompt_sha256,
        tools_sha256,
        outcome,
        detail,
        operations,
        duration,
        arguments_sha256,
        record_id,
        call_id,
    ) = fields
    # ``_value_``: the member's value, as ``.value`` gives it, without its descriptor.
    return (
        _real(time),
        request_id,
        tool,
        kind,
        None if risk is None else risk._value_,
        approval._value_,
        wrote,
        irreversible,
        prompt_sha256,
        tools_sha256,
        outcome._value_,
        _cut(detail),
        _operations(operations),
        _real(duration),
        arguments_sha256,
        record_id,
        call_id,
    )


def write_model_call(where: str, record: object) -> Statement[None]:
    if not isinstance(record, ModelCallRecord):
        raise AuditRecordError(
            f"{where}.write_model_call() got a {type(record).__name__}: pass the "
            "ModelCallRecord the gateway built"
        )
    _check_model_call(record)  # again: frozen is not immutable (object.__setattr__)
    spans = [
        [s.message, s.role, s.start, s.end, s.kind, s.origin] for s in record.instruction_spans
    ]
    row = (
        _real(record.time),
        record.request_id,
        record.api,
        record.model,
        record.prompt_sha256,
        record.tools_sha256,
        json.dumps(list(record.tools)),
        _json(spans),
        record.streamed,
        record.call_id,
        record.options_sha256,
    )
    return Statement(_INSERT_CALL, row, nothing, keyed=_KEYED_CALL, record=record)


def write_model_reply(where: str, record: object) -> Statement[None]:
    if not isinstance(record, ModelReplyRecord):
        raise AuditRecordError(
            f"{where}.write_model_reply() got a {type(record).__name__}: pass the "
            "ModelReplyRecord the gateway built"
        )
    _check_model_reply(record)  # again, as write_model_call
    usage = record.usage
    row = (
        _real(record.time),
        _storable(record.request_id),
        record.prompt_sha256,
        _called(record.response_id),
        _called(record.model),
        _called(record.stop_reason),
        json.dumps([_called(name) for name in record.tool_calls]),
        None if usage is None else usage.input_tokens,
        None if usage is None else usage.output_tokens,
        _real(record.latency),
        record.call_id or None,
        *_stored_parts(usage),
    )
    if not record.call_id:
        keyed = (*row, unlinked_sha256(row))
        return Statement(_INSERT_UNLINKED, keyed, nothing, keyed=_KEYED_UNLINKED, record=record)
    return Statement(_INSERT_REPLY, row, nothing, keyed=_KEYED_REPLY, record=record)


def unlinked_sha256(row: Sequence[object]) -> str:
    """The key of an answer that names no call: the SHA-256 of its columns' values.

    An answer recorded before records had ids (read back from an earlier release's
    store, or one a migration kept without its link) has no key (``call_id`` NULL), so
    ``ON CONFLICT`` never held it back: written again (a retry, a copy run twice) it was
    kept twice, and a review counted its tokens twice. What is the same answer is every
    column alike (a count unknown, NULL, alike only with another unknown one), so its key
    is the digest of them all; one that differs in any is another answer, kept beside it.

    The key sits in a column of its own under a unique index, which makes the check
    atomic: ``INSERT ... WHERE NOT EXISTS`` was not on Postgres, where two hosts writing
    the same answer at once (READ COMMITTED) each looked before the other's row was
    committed, and both inserted. An index over the columns themselves could not hold a
    long request id or tool list (a B-tree entry holds 2704 bytes), nor treat two NULL
    counts as alike before Postgres 15. The values are those of the insert (``row``, in
    the order of the columns, ``call_id`` ``None``), as a store reads them back: a float
    is written by ``repr``, which gives it back exactly, so a migration that keys the rows
    already kept (it reads them as they are) gives an answer the key its insert gives it.
    ``default=repr`` keys a value veridic never writes (a BLOB another program wrote).
    """
    return hashlib.sha256(json.dumps(list(row), default=repr).encode()).hexdigest()


def unlinked_keys(rows: Rows) -> list[tuple[str, object]]:
    """The key (:func:`unlinked_sha256`) and id of each answer kept without its call's id
    that repeats none before it, for a migration that keys the answers already kept.

    ``rows`` are ``(id, *columns)`` in the order kept, the columns those of the insert. A
    repeat (two writers that raced, before the key) keeps no key, NULL: the unique index
    holds it, and the migration drops no row.
    """
    keys: dict[str, object] = {}
    for row_id, *columns in rows:
        keys.setdefault(unlinked_sha256(columns), row_id)
    return list(keys.items())


_UNLINKED_COLUMNS: Final = f"{_REPLY_COLUMNS}, unlinked_sha256"
_INSERT_UNLINKED: Final = _insert("veridic_model_replies", _UNLINKED_COLUMNS, "unlinked_sha256")
_KEYED_UNLINKED: Final = Keyed("veridic_model_replies", _UNLINKED_COLUMNS, "unlinked_sha256")


def _stored_parts(usage: Usage | None) -> tuple[int | None, ...]:
    """The parts of ``usage`` as an answer's record keeps them: NULL where they are unknown.

    A part the provider did not state (:meth:`Usage.part` ``None``: not in the answer,
    or every part 0 in a usage built without :attr:`~Usage.stated`) is NULL, each on
    its own: stored as 0, it would say there was no cache read, which nobody said; a
    part stated as 0 is stored as 0. It reads back as the same :class:`Usage`.
    """
    if usage is None:
        return (None,) * len(PARTS)
    return tuple(usage.part(part) for part in PARTS)


def _called(name: str) -> str:
    """A name the answer gave, as an answer's record keeps it: a tool name the model
    wrote, and the model, answer id and stop reason the provider (or a proxy) named.

    A name of up to 200 characters once escaped where no store can keep it (NUL,
    a lone surrogate) is kept so; a longer one as a tool call's record keeps it
    (:attr:`AuditRecord.tool`): escaped, cut to 200 characters in all and marked
    with its length. A model that answered with a name of a megabyte stored that
    megabyte in the answer's record, read back by every review, while its call's
    record kept 200 characters of it. What this keeps is kept as it is when a
    record read back is written again (to the same store, a retry; to another).
    """
    kept = _storable(name)
    return kept if len(kept) <= _TOOL_LIMIT else _recorded_tool(name)[0]


def write_vouch(where: str, record: object) -> Statement[None]:
    if not isinstance(record, VouchRecord):
        raise AuditRecordError(
            f"{where}.write_vouch() got a {type(record).__name__}: pass the VouchRecord "
            "TrustPolicy.vouch made (TrustPolicy.record_to(store) does)"
        )
    _check_vouch(record)  # again, as write_model_call
    time = _seconds(record.time, f"{where}.write_vouch()", "the vouch's time")
    row = (
        time,
        _storable(record.policy),
        _storable(record.reason),
        _storable(record.caller),
        _storable(record.sample),
        record.record_id,
    )
    return Statement(_INSERT_VOUCH, row, nothing, keyed=_KEYED_VOUCH, record=record)


def save_conversation(
    where: str, key: str, conversation: object, time: float | None
) -> Statement[None]:
    check_key(key, f"{where}.save_conversation()")
    if not isinstance(conversation, Conversation):
        raise AuditRecordError(
            f"{where}.save_conversation() got a {type(conversation).__name__}: pass "
            "composer.conversation()"
        )
    when = _now(time, f"{where}.save_conversation()")
    row = (when, key, len(conversation), conversation.to_json())
    return Statement(
        "INSERT INTO veridic_conversations (time, key, turns, document) VALUES (?,?,?,?)",
        row,
        nothing,
    )


def save_rules(where: str, scope: str, rules: object) -> Statement[None]:
    check_key(scope, f"{where}.save_rules()")
    if not isinstance(rules, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in rules.items()
    ):
        raise AuditRecordError(
            f"{where}.save_rules() got {clip(repr(rules))}: pass a mapping of tool names "
            "to rules, policy.rules"
        )
    wrong = [(name, rule) for name, rule in rules.items() if not _storable_rule(rule)]
    if wrong:
        name, rule = wrong[0]
        raise AuditRecordError(
            f"{where}.save_rules() got the rule {clip(rule)} for tool {clip(name)} "
            f"({len(wrong)} such), which no approval policy applies: a restore would skip it, "
            f"and the tool would be asked about again; nothing was saved: pass the rules "
            f"{', '.join(map(repr, _RULES))} (policy.rules), or the grants saved beside them "
            "(dict(policy.grants))"
        )
    kept: dict[str, object] = dict(sorted(rules.items()))
    if isinstance(rules, ApprovalRules) and rules.grants:
        # Beside the rules, not mixed into them: a row without grants (an earlier
        # release's, or a caller's own mapping) reads as it always did.
        kept = {"rules": kept, "grants": dict(sorted(rules.grants.items()))}
    document = json.dumps(kept, ensure_ascii=False)
    return Statement(
        "INSERT INTO veridic_approval_rules (time, scope, document) VALUES (?,?,?)",
        (_time.time(), scope, _storable(document)),
        nothing,
    )


def save_paused(where: str, paused: object) -> Statement[None]:
    if not isinstance(paused, PausedRun):
        raise AuditRecordError(
            f"{where}.save_paused() got a {type(paused).__name__}: pass result.paused"
        )
    # Checked, not escaped: claim_paused(paused.request_id) must find the row.
    check_key(paused.request_id, f"{where}.save_paused()")
    document = paused.to_json()
    # Kept once while it waits: a save sent again (after a lost connection whose first try
    # was committed, or by an application that saves twice) finds the same run unclaimed and
    # adds nothing, so it is safe to send again, as a record is. A run claimed meanwhile is
    # saved anew, as claim_paused says a retry does; that is what the caller would do by
    # hand once told the save may not have landed, and a claim takes every save anyway.
    return Statement(
        "INSERT INTO veridic_paused_runs (time, request_id, document) SELECT ?, ?, ? "
        "WHERE NOT EXISTS (SELECT 1 FROM veridic_paused_runs WHERE request_id = ? "
        "AND claimed IS NULL AND document = ?)",
        (_time.time(), paused.request_id, document, paused.request_id, document),
        nothing,
    )


def claim_paused(where: str, request_id: str, token: str | None) -> Statement[PausedRun | None]:
    check_key(request_id, "claim_paused()")
    claim = _claim_sha256(secrets.token_hex(16) if token is None else _claim_token(token))
    # The document is handed out as saved: the row's time never dates a run saved undated
    # (format 5): it is the saving host's clock, not the gateway's, later than the pause, and
    # no digest covers it (SQLStore.claim_paused says so to the caller).
    # Every unclaimed save of the request is taken at once, and the latest one handed out:
    # a run saved twice (save_paused sent again, an application that saved it on two hosts)
    # was handed out once per save, its second claim taking the earlier save, so a double
    # click resumed it twice. One statement: no second claim sees any row unclaimed.
    # The claim leaves its token's digest in the rows it took. Sent again (a lost answer), it
    # finds them by the digest and hands out the same run, taking nothing more: a save made
    # since waits for a claim of its own. Once any row holds the digest, no unclaimed row is
    # taken.
    # Was: sent again, it found the run taken and gave it to nobody, so it was never sent
    # again, and a claim whose answer a dropped connection lost lost the run with it.
    return Statement(
        "UPDATE veridic_paused_runs SET claimed = COALESCE(claimed, ?), claim_sha256 = ? "
        "WHERE request_id = ? AND (claim_sha256 = ? OR claimed IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM veridic_paused_runs WHERE request_id = ? AND claim_sha256 = ?)) "
        "RETURNING id, document",
        (_time.time(), claim, request_id, claim, request_id, claim),
        lambda rows: None if not rows else _claimed(where, request_id, max(rows)[1]),
    )


def _claim_sha256(token: str) -> str:
    """What a claim keeps of its token: the SHA-256 of it, never the token.

    A token brought again is the claim itself: kept as given, whoever reads the database
    (a reviewer's read-only role, a backup, ``veridic audit``) could bring a client's
    idempotency key again and be handed the run a second time. The digest finds the rows
    of a retry as well, and gives nobody the token.
    """
    return hashlib.sha256(token.encode()).hexdigest()


def _claim_token(token: object) -> str:
    """A caller's claim token, as plain text, refused as :func:`check_key` refuses a key.

    Checked as the built-in ``str`` it holds: a subclass that says it equals anything
    passed the check with a lone surrogate, and the claim failed on encoding it.

    Raises:
        AuditRecordError: ``token`` is not a non-empty string without NUL or lone
            surrogates (as :func:`check_key` refuses a key).
    """
    plain = str.__str__(token) if isinstance(token, str) else None
    if plain is not None and plain.strip() and _storable(plain) == plain:
        return plain
    raise AuditRecordError(
        f"claim_paused() got the token {quoted(token, 80)}: pass a non-empty string without "
        "NUL or lone surrogates, new for each attempt to claim and brought again only by "
        "that attempt's retry (secrets.token_hex(16), or the idempotency key a client sends "
        "again when it retries a request): two claims that bring one token both get the run"
    )


def _claimed(where: str, request_id: str, document: object) -> PausedRun:
    """The paused run a claim of ``request_id`` took, refused unless it is that request's.

    ``save_paused`` keeps a run under its own request id, so a row whose
    document is another request's was edited, or restored from elsewhere: an
    application that hands the run of request A to the user who owns A would
    resume B's calls (another user's refund) with A's answers.

    Raises:
        AuditRecordError: the document is the paused run of another request, or is not
            a paused run this veridic reads (:meth:`PausedRun.from_json` says why). That
            one ended in ``from_json``'s words alone, which named neither the store nor
            the request, nor said that the claim had taken the run all the same.
    """
    try:
        paused = PausedRun.from_json(str(document))
    except VeridicError as error:
        raise AuditRecordError(
            f"{where} cannot read back the paused run claimed under request "
            f"{clip(request_id)} in veridic_paused_runs ({_said(error)}); save_paused writes what "
            "PausedRun.from_json reads, so the row was edited, written by another program, or "
            "by a release whose format this one does not read; nothing was resumed (the "
            "request's saves stay claimed): check what else writes to veridic_paused_runs, "
            "and ask the user anew"
        ) from error
    if paused.request_id != request_id:
        raise AuditRecordError(
            f"{where}: the paused run claimed under request {clip(request_id)} holds the "
            f"paused run of request {clip(paused.request_id)}: save_paused keeps a run under "
            "its own request, so the row was edited or restored from elsewhere; nothing was "
            "resumed (the request's saves stay claimed): check what else writes to "
            "veridic_paused_runs, and ask the user anew"
        )
    return paused


# --- reads ---------------------------------------------------------------------------------


def select(
    columns: str,
    table: str,
    answer: Callable[[Rows], T],
    *,
    since: float | None,
    until: float | None,
    **equal: object,
) -> Statement[T]:
    """``columns`` of the rows of ``table`` in the order written, narrowed as asked.

    ``since`` is inclusive, ``until`` exclusive, both seconds since the epoch;
    each of ``equal`` not ``None`` keeps the rows whose column holds that value.
    """
    for column, value in equal.items():
        _check_asked(column, value)
    conditions = [(f"{column} = ?", value) for column, value in equal.items()]
    conditions += [("time >= ?", _bound("since", since)), ("time < ?", _bound("until", until))]
    kept = [(condition, value) for condition, value in conditions if value is not None]
    narrowed = f" WHERE {' AND '.join(c for c, _ in kept)}" if kept else ""
    # Within a time range, the rows are found through the index on time and then sorted
    # ("+id" is no column an index keeps in order). Ordered by "id", SQLite's planner, which
    # has no statistics, read every row in key order instead, to spare itself the sort:
    # veridic audit --since over a year of records read them all to print one day's.
    # (Postgres reads "ORDER BY id": its planner has statistics; see postgres._placeholders.)
    timed = since is not None or until is not None
    return Statement(
        f"SELECT {columns} FROM {table}{narrowed} ORDER BY {'+id' if timed else 'id'}",
        tuple(value for _, value in kept),
        answer,
    )


def records(
    request_id: str | None, since: float | None, until: float | None
) -> Statement[tuple[AuditRecord, ...]]:
    return select(
        COLUMNS, "veridic_audit", _records, since=since, until=until, request_id=request_id
    )


def _records(rows: Rows) -> tuple[AuditRecord, ...]:
    return tuple(from_row(row) for row in rows)


def model_calls(
    request_id: str | None, since: float | None, until: float | None
) -> Statement[tuple[ModelCallRecord, ...]]:
    return select(
        _CALL_COLUMNS,
        "veridic_model_calls",
        _model_calls,
        since=since,
        until=until,
        request_id=request_id,
    )


def _model_calls(rows: Rows) -> tuple[ModelCallRecord, ...]:
    return tuple(_model_call(row) for row in rows)


def _model_call(row: Sequence[Any]) -> ModelCallRecord:
    """A stored model call, read back, or refused naming its row (see :func:`_unreadable`)."""
    (time, request, api, model, prompt, tools_digest, tools, spans, streamed) = row[:9]
    (call_id, options) = row[9:11]
    read_tools = _names(tools, "veridic_model_calls", "tools")
    read_spans = _spans(spans)
    try:
        record = ModelCallRecord(
            time=time,
            request_id=request,
            api=api,
            model=model,
            prompt_sha256=prompt,
            tools_sha256=tools_digest,
            tools=read_tools,
            instruction_spans=read_spans,
            streamed=bool(streamed),
            options_sha256=options,
        )
    except AuditRecordError as error:
        raise _unreadable("model-call", "veridic_model_calls", row, error) from error
    return record._stored(call_id)


def _unreadable(what: str, table: str, row: Sequence[object], error: Exception) -> AuditRecordError:
    """The refusal of a stored ``row`` of ``table`` that its record refuses (``error``).

    The record's own words tell a caller who builds one what to pass ("build it from the
    call as sent"); of a row read back, they named neither the table nor the row, and
    told a reviewer to do what only the gateway does. An audit row's refusal
    (:func:`from_row`) is worded so too.
    """
    return AuditRecordError(
        f"{what} row {quoted(tuple(row), 120)} cannot be read back ({_said(error)}); the {table} "
        f"table was written by something other than veridic: check what else writes to {table}"
    )


def model_replies(
    request_id: str | None, since: float | None, until: float | None
) -> Statement[tuple[ModelReplyRecord, ...]]:
    return select(
        _REPLY_COLUMNS,
        "veridic_model_replies",
        _replies,
        since=since,
        until=until,
        request_id=request_id,
    )


def _replies(rows: Rows) -> tuple[ModelReplyRecord, ...]:
    return tuple(_reply(row) for row in rows)


def _reply(row: Sequence[Any]) -> ModelReplyRecord:
    """A stored answer, read back, or refused naming its row (see :func:`_unreadable`)."""
    tool_calls = _names(row[6], "veridic_model_replies", "tool_calls")
    try:
        return ModelReplyRecord(
            time=row[0],
            request_id=row[1],
            prompt_sha256=row[2],
            response_id=row[3],
            model=row[4],
            stop_reason=row[5],
            tool_calls=tool_calls,
            usage=_usage(row[7], row[8], row[11:14]),
            latency=row[9],
            call_id=row[10] or "",
        )
    except AuditRecordError as error:
        raise _unreadable("model-reply", "veridic_model_replies", row, error) from error


def _usage(read: Any, wrote: Any, parts: Sequence[Any]) -> Usage | None:
    """An answer's stored usage, its unknown parts (NULL) read as 0 and left out of its
    :attr:`~Usage.stated`, as :class:`Usage` has them.

    The record checks what it is given (:class:`ModelReplyRecord`): a row edited to
    hold a part above its total, or text, is refused there.
    """
    if read is None and wrote is None and all(part is None for part in parts):
        return None
    known = {name: part for name, part in zip(PARTS, parts, strict=True) if part is not None}
    return Usage(read, wrote, **known, stated=frozenset(known))


def vouches(
    policy: str | None, since: float | None, until: float | None
) -> Statement[tuple[VouchRecord, ...]]:
    return select(
        _VOUCH_COLUMNS, "veridic_vouches", _vouches, since=since, until=until, policy=policy
    )


def _vouches(rows: Rows) -> tuple[VouchRecord, ...]:
    return tuple(_vouch(row) for row in rows)


def _vouch(row: Sequence[object]) -> VouchRecord:
    """A stored vouch, read back only as :func:`write_vouch` writes one.

    A :class:`VouchRecord` checks its fields when it is made, but not its id,
    which it makes itself; a row edited by hand came back as it was: a time of
    ``'abc'`` or ``-1`` typed as seconds, an id no store makes; a review that
    sorted or printed them failed far from the row, or showed what veridic
    never wrote.

    Raises:
        AuditRecordError: a field is not what :func:`write_vouch` writes.
    """
    time, policy, reason, caller, sample, record_id = row
    texts = (policy, reason, caller, sample, record_id)
    if (
        _is_seconds(time)
        and all(isinstance(text, str) for text in texts)
        and _ID.fullmatch(str(record_id))
    ):
        return VouchRecord(str(policy), str(reason), str(caller), str(sample), _real(time))._stored(
            str(record_id)
        )
    raise AuditRecordError(
        f"vouch row {quoted(tuple(row), 120)} cannot be read back: the veridic_vouches "
        "table was written by something other than veridic (a time that is not seconds, "
        "an id new_id() does not make); check what else writes to it"
    )


def count() -> Statement[int]:
    return Statement("SELECT COUNT(*) FROM veridic_audit", (), lambda rows: int(rows[0][0]))


def writes_by_approval() -> Statement[dict[ApprovalMode, int]]:
    return Statement(
        "SELECT approval, COUNT(*) FROM veridic_audit WHERE kind = 'write' "
        f"AND {_CALLS_ONLY} GROUP BY approval",
        (),
        _by_approval,
    )


def _by_approval(rows: Rows) -> dict[ApprovalMode, int]:
    counts = dict.fromkeys(ApprovalMode, 0)
    for approval, total in rows:
        counts[ApprovalMode(approval)] = int(total)
    return counts


def instruction_writes_under_always_rule() -> Statement[tuple[AuditRecord, ...]]:
    return Statement(
        f"SELECT {COLUMNS} FROM veridic_audit "
        "WHERE wrote_instruction_fields AND approval = 'always_rule' ORDER BY id",
        (),
        _records,
    )


# --- a whole review read in pages (veridic audit) ----------------------------------------------


def _timed(since: float | None, until: float | None) -> tuple[list[str], tuple[object, ...]]:
    """The conditions of a time range (checked as :func:`select` checks it), and their values."""
    bounds = [("time >= ?", _bound("since", since)), ("time < ?", _bound("until", until))]
    kept = [(condition, value) for condition, value in bounds if value is not None]
    return [condition for condition, _ in kept], tuple(value for _, value in kept)


def last_record_id() -> Statement[int]:
    """The row id of the last record written (0 for none): where a paged review stops."""
    return Statement(
        "SELECT COALESCE(MAX(id), 0) FROM veridic_audit", (), lambda rows: int(rows[0][0])
    )


ONLY: Final[dict[str, str]] = {
    "writes": f"kind = 'write' AND {_CALLS_ONLY}",
    "follow_ups": f"NOT ({_CALLS_ONLY})",
    "high": "approval = 'always_rule' AND (risk = 'high' OR irreversible)",
}
"""The records a paged review may read alone: write calls, follow-ups, and calls of a
high-risk or irreversible tool approved by an always rule (each as its record's properties
say: ``veridic.checks.audit_report`` keeps exactly those of a page)."""


def records_page(
    after: int,
    size: int,
    since: float | None,
    until: float | None,
    last: int,
    only: str | None = None,
) -> Statement[tuple[tuple[int, AuditRecord], ...]]:
    """The first ``size`` records of the range written after the row ``after`` (0: the
    first) and up to the row ``last`` (those of :data:`ONLY` ``[only]``), each with its row
    id, in the order written: a review of a whole store reads it page by page, never
    every record at once.

    Ordered by the key and read from ``after`` on, so a time range costs a walk from the
    first record in it to the last, once for all the pages.
    """
    conditions, values = _timed(since, until)
    narrowed = [] if only is None else [ONLY[only]]
    where = " AND ".join(["id > ?", "id <= ?", *conditions, *narrowed])
    return Statement(
        f"SELECT id, {COLUMNS} FROM veridic_audit WHERE {where} ORDER BY id LIMIT ?",
        (after, last, *values, size),
        lambda rows: tuple((int(row[0]), from_row(row[1:])) for row in rows),
    )


_REVIEWED: Final = ("veridic_audit", "veridic_model_calls", "veridic_model_replies")
"""The tables whose rows make a request part of a review: its calls, model calls and answers."""


def request_firsts(
    since: float | None, until: float | None
) -> Statement[tuple[tuple[str, float, int], ...]]:
    """Each request of the range, with the time of its first record, call or answer in it,
    and how many of them the range holds (what reading its rows makes)."""
    conditions, values = _timed(since, until)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    union = " UNION ALL ".join(f"SELECT request_id, time FROM {t}{where}" for t in _REVIEWED)
    return Statement(
        f"SELECT request_id, MIN(time), COUNT(*) FROM ({union}) AS reviewed GROUP BY request_id",
        values * len(_REVIEWED),
        lambda rows: tuple((str(row[0]), float(row[1]), int(row[2])) for row in rows),
    )


def records_of(
    request_ids: Sequence[str], since: float | None, until: float | None
) -> Statement[tuple[AuditRecord, ...]]:
    """The records of the requests ``request_ids`` in the range, in the order written."""
    return _of_requests(COLUMNS, "veridic_audit", _records, request_ids, since, until)


def model_calls_of(
    request_ids: Sequence[str], since: float | None, until: float | None
) -> Statement[tuple[ModelCallRecord, ...]]:
    """The model calls of the requests ``request_ids`` in the range, in the order sent."""
    return _of_requests(
        _CALL_COLUMNS, "veridic_model_calls", _model_calls, request_ids, since, until
    )


def model_replies_of(
    request_ids: Sequence[str], since: float | None, until: float | None
) -> Statement[tuple[ModelReplyRecord, ...]]:
    """The model answers of the requests ``request_ids`` in the range, in the order read."""
    return _of_requests(
        _REPLY_COLUMNS, "veridic_model_replies", _replies, request_ids, since, until
    )


def _of_requests(
    columns: str,
    table: str,
    answer: Callable[[Rows], T],
    request_ids: Sequence[str],
    since: float | None,
    until: float | None,
) -> Statement[T]:
    """``columns`` of the rows of ``table`` of the requests ``request_ids`` in the range, in
    the order written: one statement for a page of requests.

    A review of a whole store read each request's records, model calls and answers
    with a statement each: on a store of many small requests the statements, not the
    rows, were the cost (``benchmarks/audit_report.py``). Ordered by ``+id`` so that
    SQLite finds the rows through the index on ``(request_id, id)`` and sorts the few
    it finds rather than read the table in key order, as :func:`select` does for a
    range (Postgres reads ``id``: :func:`veridic.run.postgres._placeholders`).
    """
    for request_id in request_ids:
        _check_asked("request_id", request_id)
    conditions, values = _timed(since, until)
    asked = f"request_id IN ({', '.join('?' for _ in request_ids)})"
    return Statement(
        f"SELECT {columns} FROM {table} WHERE {' AND '.join([asked, *conditions])} ORDER BY +id",
        (*request_ids, *values),
        answer,
    )


def model_call_count(since: float | None, until: float | None) -> Statement[int]:
    """How many model calls the range holds."""
    conditions, values = _timed(since, until)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return Statement(
        f"SELECT COUNT(*) FROM veridic_model_calls{where}", values, lambda rows: int(rows[0][0])
    )


def substitutions(
    request_id: str | None = None,
    since: float | None = None,
    until: float | None = None,
    *,
    between: tuple[int, int | None] | None = None,
) -> Statement[tuple[Substitution, ...]]:
    """Each stopped call of the request and range asked, and the call after it, and no other row.

    The window runs in the database: the rows read back (and made records) are
    the stopped calls asked for and their next ones only, not every call in the
    store (``veridic audit --request`` on a store of 100,000 calls made them all:
    4 s; then every stopped call of the store and its next, for one request's
    few). The next call is the next of the whole request, even outside the
    range: the range selects the stopped calls only. ``between`` (``after``, ``last``)
    narrows the stopped calls to the rows of one page of :func:`records_page`
    (``last`` ``None``: every row after ``after``).

    Raises:
        AuditRecordError: ``request_id`` holds a NUL or a lone surrogate, or a
            bound is not seconds (as :func:`select`).
    """
    _check_asked("request_id", request_id)
    timed: list[tuple[str, object]] = [
        ("time >= ?", _bound("since", since)),
        ("time < ?", _bound("until", until)),
    ]
    if between is not None:
        timed += [("id > ?", between[0]), ("id <= ?", between[1])]
    bounds = [(condition, value) for condition, value in timed if value is not None]
    chosen = " AND ".join([_STOPPED, *(condition for condition, _ in bounds)])
    values = tuple(value for _, value in bounds)
    calls = _CALLS_ONLY
    asked: tuple[object, ...] = ()
    if request_id is not None:
        calls, asked = f"{calls} AND request_id = ?", (request_id,)
    if bounds:
        # Only the requests of a stopped call chosen, from the first one on, can hold a
        # chosen call or the call after one: the window reads those rows (found through the
        # index on time, then the one on request), not every row of the store.
        calls += (
            f" AND request_id IN (SELECT request_id FROM veridic_audit WHERE {chosen})"
            f" AND id >= (SELECT MIN(id) FROM veridic_audit WHERE {chosen})"
        )
        asked += values + values
    return Statement(
        f"SELECT id, next, chosen, {COLUMNS} FROM (SELECT id, "
        "LEAD(id) OVER (PARTITION BY request_id ORDER BY id) AS next, "
        f"({chosen}) AS chosen, "
        f"LAG({chosen}) OVER (PARTITION BY request_id ORDER BY id) AS after_chosen, "
        f"{COLUMNS} FROM veridic_audit WHERE {calls}) AS calls "
        "WHERE chosen OR after_chosen ORDER BY id",
        (*values, *values, *asked),
        _substitutions,
    )


def _substitutions(rows: Rows) -> tuple[Substitution, ...]:
    found = {row[0]: from_row(row[3:]) for row in rows}
    return tuple(
        Substitution(found[row[0]], None if row[1] is None else found[row[1]])
        for row in rows
        if row[2]
    )


def substitution_rate(found: tuple[Substitution, ...]) -> float | None:
    """Of the stopped calls that the model followed with another call in the
    same request, the share whose next call attempted the same operation.

    ``None`` when no stopped call was followed by anything (a stopped call
    that ends its request says nothing about substitution).
    """
    followed = [s for s in found if s.next is not None]
    if not followed:
        return None
    return sum(s.same_operation for s in followed) / len(followed)


def conversation(where: str, key: str) -> Statement[Conversation | None]:
    check_key(key, "conversation()")
    return Statement(
        "SELECT document FROM veridic_conversations WHERE key = ? ORDER BY id DESC LIMIT 1",
        (key,),
        lambda rows: None if not rows else _conversation(where, key, rows[0][0]),
    )


def _conversation(where: str, key: str, document: object) -> Conversation:
    """The conversation last saved under ``key``, read back, or refused naming its row.

    Raises:
        AuditRecordError: the document is not a conversation (:meth:`Conversation.from_json`
            says why: a system turn, a key given twice). That ended in ``from_json``'s
            words alone, which named neither the store nor the key.
    """
    try:
        return Conversation.from_json(str(document))
    except VeridicError as error:
        raise AuditRecordError(
            f"{where} cannot read back the conversation last saved under the key {clip(key)} "
            f"in veridic_conversations ({_said(error)}); save_conversation writes what "
            "Conversation.from_json reads, so the row was edited or written by another "
            "program, and nothing of it was read: check what else writes to "
            "veridic_conversations, and save the conversation again from where it is whole"
        ) from error


def rules(scope: str) -> Statement[dict[str, str]]:
    check_key(scope, "rules()")

    def answer(rows: Rows) -> dict[str, str]:
        """The latest rules saved under ``scope``, read one way only.

        A key given twice is refused, not read as its last value (a reviewer of
        the row sees the first: ``deny``, and the policy got ``always``); a value
        that is not text is refused, not turned into one (``["deny"]`` read as
        the rule ``"['deny']"``).
        """
        if not rows:
            return {}
        try:
            loaded: object = _json_object.loads(str(rows[0][0]))
        except ValueError as error:
            raise AuditRecordError(
                f"the rules stored under {scope!r} cannot be read one way ({error}): "
                "save_rules wrote them otherwise, so the row was edited; check what else "
                "writes to veridic_approval_rules, and save the rules again"
            ) from error
        grants: object = {}
        # Saved with grants: two objects (names to rules never map a name to one).
        if (
            isinstance(loaded, dict)
            and loaded.keys() == {"rules", "grants"}
            and isinstance(loaded["rules"], dict)
        ):
            loaded, grants = loaded["rules"], loaded["grants"]
        if not _texts(loaded) or not _texts(grants):
            raise AuditRecordError(
                f"the rules stored under {scope!r} are {clip(str(rows[0][0]))}, not a JSON "
                "object of tool names to rules (text), with the grants of the always rules "
                "beside them: save_rules wrote them otherwise, so the row was edited; check "
                "what else writes to veridic_approval_rules, and save the rules again"
            )
        return _SavedRules(loaded, grants)

    return Statement(
        "SELECT document FROM veridic_approval_rules WHERE scope = ? ORDER BY id DESC LIMIT 1",
        (scope,),
        answer,
    )


def _texts(loaded: object) -> TypeGuard[dict[str, str]]:
    """Whether ``loaded`` (read with :mod:`veridic._json_object`) maps text to text."""
    return isinstance(loaded, dict) and all(isinstance(v, str) for v in loaded.values())


def pending_runs() -> Statement[tuple[str, ...]]:
    return Statement(
        "SELECT request_id FROM veridic_paused_runs WHERE claimed IS NULL "
        "GROUP BY request_id ORDER BY MIN(id)",
        (),
        lambda rows: tuple(_pending(row[0]) for row in rows),
    )


def _pending(request_id: object) -> str:
    """A request a paused run waits under, refused unless it is text, as saved.

    SQLite keeps a BLOB in a TEXT column, and ``str()`` listed ``x'00ff'`` as the request
    ``"b'\\x00\\xff'"``, which nothing saved and whose claim finds nothing.
    """
    if isinstance(request_id, str):
        return request_id
    raise AuditRecordError(
        f"veridic_paused_runs holds a paused run under the request {quoted(request_id)}, "
        "not text as save_paused writes it: the table was written by something other than "
        "veridic; check what else writes to veridic_paused_runs"
    )


# --- rows ----------------------------------------------------------------------------------


def check_key(key: object, where: str) -> None:
    """Refuse a key no store keeps, on a save and on a read alike.

    A NUL or a lone surrogate is refused rather than escaped: asked for, SQLite
    found no row and Postgres raised, and a paused run saved under an escaped
    id was never found by its own (``claim_paused`` said "already claimed").

    Raises:
        AuditRecordError: ``key`` is not a non-empty string every store keeps.
    """
    if not isinstance(key, str) or not key.strip() or _storable(key) != key:
        raise AuditRecordError(
            f"{where} got the key {quoted(key, 80)}: pass a non-empty string without NUL or lone "
            "surrogates (a chat's id, a request id, a user's id)"
        )


def _bound(name: str, value: object) -> float | None:
    """A time range's ``since`` or ``until`` as a float, checked (``None``: no bound).

    Raises:
        AuditRecordError: ``value`` is not a number of seconds: asked for
            ``until=nan``, SQLite found no record and Postgres every one (NaN is
            above every number there), and a word or an int past 2**63 failed
            in one store only.
    """
    if value is None:
        return None
    if type(value) is float and value == value:
        return value
    if type(value) is int and abs(value) <= sys.float_info.max:
        return float(value)
    raise AuditRecordError(
        f"the store was asked for records with {name}={quoted(value)}: pass seconds since "
        "the epoch (a float or an int, not NaN), or None for no bound"
    )


def _check_asked(column: str, value: object) -> None:
    """Refuse to look for a value no record holds (see :func:`check_key`).

    Raises:
        AuditRecordError: ``value`` is text with a NUL or a lone surrogate.
    """
    if isinstance(value, str) and _storable(value) != value:
        raise AuditRecordError(
            f"the store was asked for the {column} {quoted(value, 80)}, which holds a NUL or a "
            "lone surrogate: no record holds one (veridic records them escaped, as \\x00 and "
            "\\udXXX), and Postgres cannot be asked for one; ask for the escaped text"
        )


def _now(time: float | None, where: str) -> float:
    """``time`` as the seconds a store keeps, or now when it is ``None``."""
    return _time.time() if time is None else _seconds(time, where, "time")


def _seconds(value: object, where: str, what: str) -> float:
    """``value`` as a float of seconds, refused where the stores would not keep it alike.

    Raises:
        AuditRecordError: ``value`` is not a finite number of seconds, 0 or more
            (SQLite refuses NaN and keeps a word, Postgres keeps NaN and refuses a word).
    """
    if not _is_seconds(value):
        raise AuditRecordError(
            f"{where} got {quoted(value)} as {what}: pass seconds since the epoch, a finite "
            "float of 0 or more (time.time())"
        )
    return _real(value)


def _real(value: float) -> float:
    """``value`` as the float every store keeps alike: ``-0.0`` as ``0.0``.

    A record's seconds are 0 or more, and ``-0.0`` is; but SQLite writes a whole
    REAL as an integer and reads ``0.0`` back, while Postgres keeps the sign, so
    one record read back differently from the two stores (``-0.0`` in a report of
    one, ``0.0`` of the other). Adding ``0.0`` turns ``-0.0`` into ``0.0`` and
    leaves every other float as it is.
    """
    return float(value) + 0.0


def from_row(row: Sequence[object]) -> AuditRecord:
    (time, request_id, tool, kind, risk, approval, wrote, irreversible) = row[:8]
    (prompt_sha256, tools_sha256, outcome, detail, operations, duration) = row[8:14]
    (arguments_digest, record_id, call_id) = row[14:17]
    texts = (request_id, tool, prompt_sha256, tools_sha256, detail, arguments_digest, call_id)
    try:
        if not all(isinstance(text, str) for text in texts):
            # SQLite keeps a BLOB in a TEXT column: str() made x'00ff' the text "b'\x00\xff'".
            raise ValueError("a column veridic writes as text holds something else")
        return AuditRecord(
            time=float(time),  # type: ignore[arg-type]  # a REAL column: the driver gives a float
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
            operations=_names(operations, "veridic_audit", "operations"),
            duration=float(duration),  # type: ignore[arg-type]  # a REAL column, as time
            arguments_sha256=str(arguments_digest),
            call_id=str(call_id),
        )._stored(str(record_id))
    except (KeyError, ValueError) as error:
        raise AuditRecordError(
            f"audit row {quoted(tuple(row), 120)} cannot be read back ({_said(error)}); "
            "the table was written by something other than veridic: check what else "
            "writes to veridic_audit"
        ) from error


_SAID: Final = 300
"""Characters of what a record or a document's reader said of a stored row that a
refusal of the row quotes."""


def _said(error: BaseException) -> str:
    """What ``error`` said of a stored row, cut to :data:`_SAID` characters.

    A record's or a reader's words quote the row's text escaped (``repr``), but not always
    cut (:meth:`Conversation.from_json` quotes a format whole, a model-call record its
    request id, an enum the value it refused): a row of thousands of characters made a
    refusal of thousands.
    """
    return cut_short(str(error), _SAID)


def _names(stored: object, table: str, column: str) -> tuple[str, ...]:
    """A stored JSON list of text (operations, tool names), read as what it says.

    ``tuple(json.loads(...))`` read a JSON object as its keys (an edited
    ``{"instruction_write:...": false}`` as the operation, which the row says it
    was not) and a JSON string as its characters; a number was made text.

    Raises:
        AuditRecordError: the column holds anything else than a JSON list of text.
    """
    try:
        loaded: object = json.loads(str(stored))
    except ValueError:
        loaded = None
    if isinstance(loaded, list) and all(isinstance(name, str) for name in loaded):
        return tuple(loaded)
    raise AuditRecordError(
        f"the {column} {quoted(stored, 120)} stored in {table} is not a JSON list of text: "
        f"the table was written by something other than veridic; check what else writes to "
        f"{table}"
    )


_ROLES: Final[dict[object, Role]] = {role: role for role in get_args(Role)}
_SPAN_KINDS: Final[dict[object, Kind]] = {kind: kind for kind in get_args(Kind)}


def _spans(stored: object) -> tuple[PromptSpan, ...]:
    """A model call's stored instruction spans, read back, or refused as :func:`_span` is.

    ``json.loads`` of the column ended ``veridic audit`` with a traceback (a
    ``JSONDecodeError``, a ``TypeError`` for a number) on a row that was not
    a JSON list, instead of the refusal every other unreadable row gets.
    """
    try:
        loaded: object = json.loads(str(stored))
    except ValueError:
        loaded = None
    if not isinstance(loaded, list):
        raise AuditRecordError(
            f"the instruction_spans {quoted(stored, 120)} stored in veridic_model_calls are "
            "not a JSON list: the table was written by something other than veridic; check "
            "what else writes to it"
        )
    return tuple(_span(span) for span in loaded)


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
        f"a stored instruction span {quoted(raw, 120)} cannot be read back: the "
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


# --- the stores' shared methods ------------------------------------------------------------
