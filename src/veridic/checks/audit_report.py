"""``veridic audit``: the audit store's questions answered for a reviewer (text, JSON, Markdown).

A compliance reviewer asks the store four things about a request or a time
range, and this module answers them from the :class:`~veridic.AuditStore`
protocol alone (so a server's store answers as the SQLite file does):

- how was each write approved: the count per :class:`~veridic.ApprovalMode`
  and the writes themselves;
- did an "always" rule ever approve an instruction-field write, or a call of a
  high-risk or irreversible tool: it must not (invariant I8), so any such
  record is a *finding* and the command exits 1;
- what did the model call after each stopped call (the substitutions, with
  their same-tool and same-operation flags and the rate);
- what happened in each request: its model calls and their answers (usage,
  latency), its tool calls in order, and its follow-up records (a guard that
  fired after its call had ended).

The selection is a set of request ids and a time range, both optional: a
record is selected when its request is one of those named (or none were) and
``since <= time < until``. The store narrows the records, model calls and
answers itself (:meth:`~veridic.AuditStore.records` with ``since`` and
``until``, through an index on time in either store); the counts follow the
store's own rules (a follow-up is not a call and is not counted as a write),
and the always-rule and substitution answers are the store's own, restricted
to the selection (a substitution is selected by its stopped call; the call
that followed it is shown even when it falls outside the range; veridic's
stores narrow the substitutions themselves, so a report of one request or one
day reads that request's or that day's rows, not every stopped call).

Everything in the store that a model or a handler wrote (tool names, details,
request ids, model names) is shown escaped and clipped: a control character,
an ANSI escape, a bidi or zero-width character, a variation selector, a blank
filler, a space other than U+0020, a newline becomes a visible
``\\x1b``-style escape, so no record can move the cursor, colour the terminal,
forge a line of the report, show two different values alike, or (in Markdown)
add a link, a mention, HTML or a table cell. The JSON report holds the exact
values, with every non-ASCII character escaped by the JSON encoder.

>>> from veridic import ApprovalMode, Risk, SQLiteAuditSink
>>> from veridic.run.audit import AuditRecord, CallOutcome
>>> store = SQLiteAuditSink(":memory:")
>>> store.write(AuditRecord(
...     time=1.0, request_id="req-1", tool="save_note", kind="write", risk=Risk.MID,
...     approval=ApprovalMode.ALWAYS_RULE, wrote_instruction_fields=False, irreversible=False,
...     prompt_sha256="0" * 64, tools_sha256="f" * 64, outcome=CallOutcome.OK))
>>> report = build_report(store, Selection(), database=":memory:")
>>> report.writes_by_approval[ApprovalMode.ALWAYS_RULE], report.exit_code()
(1, 0)
>>> shown("bad\\x1b[31mname\\n")
'bad\\\\x1b[31mname\\\\n'
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Final, Generic, Literal, Protocol, TypeVar, overload

from veridic._counted import counted
from veridic.providers import Usage
from veridic.run._sql_store import SQLStore
from veridic.run.audit import (
    AuditRecord,
    AuditStore,
    ModelCallRecord,
    ModelReplyRecord,
    Substitution,
)
from veridic.text.fence import _INVISIBLE_CHAR
from veridic.tools.risk import ApprovalMode, Risk

__all__ = [
    "SCHEMA_VERSION",
    "AuditReport",
    "ModelCallReport",
    "RequestReport",
    "Selection",
    "build_report",
    "parse_time",
    "shown",
    "stream_report",
    "utc",
]

SCHEMA_VERSION: Final = 1
"""``schema`` of the JSON report (docs/audit.md); raised when a field changes meaning or goes."""
_SHORT: Final = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NUMBER: Final = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_NAME_LIMIT: Final = 64
"""Tool names and request ids are shown whole up to 64 characters, the longest name a
registry takes: clipped at 40, two tools (or requests) alike in their first 40 characters
and of one length showed as one, so a reviewer could not tell which one an always rule
approved. A longer value (a model-written name, an id from a header) is clipped."""
_DETAIL_LIMIT: Final = 80


def shown(text: str, limit: int | None = None) -> str:
    """``text`` safe to print: invisible and control characters escaped, clipped at ``limit``.

    A backslash is doubled, so an escape in the output always means a character
    that was escaped (``\\x1b``), never the four characters the model wrote.
    The clip keeps the first ``limit`` characters of ``text``, each escaped whole,
    and says how long the text was: ``'name…' (1000 chars)``. Clipped after
    escaping, a name of 64 characters with a newline in it lost its last one, and
    a cut through ``\\\\`` or ``\\n`` left one backslash for either: two
    different names showed alike.

    >>> shown("delete_golden")
    'delete_golden'
    >>> shown("\\u202eevil\\u200b")
    '\\\\u202eevil\\\\u200b'
    >>> shown("x" * 50, 10)
    'xxxxxxxxxx… (50 chars)'

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError(
            f"shown() got limit {limit}: a limit counts the characters kept, so pass 0 or "
            "more, or None to keep the whole text"
        )
    clipped = limit is not None and len(text) > limit
    out = []
    for char in text[:limit] if clipped else text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif _unseen(char):
            point = ord(char)
            out.append(
                f"\\x{point:02x}"
                if point < 0x100
                else f"\\u{point:04x}"
                if point < 0x10000
                else f"\\U{point:08x}"
            )
        else:
            out.append(char)
    escaped = "".join(out)
    return f"{escaped}… ({len(text)} chars)" if clipped else escaped


def _unseen(char: str) -> bool:
    """Whether ``char`` is shown as an escape: the characters the terminal view shows as codes.

    What Python does not call printable (controls such as ANSI's ESC and C1, format
    characters such as bidi and zero-width ones, surrogates, private use, unassigned,
    line and paragraph separators, and every space but U+0020, which reads as a space
    and is not one), and the printable characters nobody sees (variation selectors,
    which carry hidden bytes after any character, and blank fillers: the fence's
    ``_INVISIBLE_CHAR``). A cell that showed any of them raw could show two different
    texts alike, or a change as none.
    """
    return not char.isprintable() or _INVISIBLE_CHAR.match(char) is not None


def parse_time(text: str, *, option: str = "--since") -> float:
    """Seconds since the epoch from ``text``: a number of seconds, or an ISO 8601 date or time.

    An ISO time without a timezone is read as UTC (the store keeps UTC epoch
    seconds, and a reviewer's local zone is not the servers'); a date alone is
    its midnight, UTC.

    Raises:
        ValueError: ``text`` is neither; the message says what to write.

    >>> parse_time("1714564800")
    1714564800.0
    >>> parse_time("2024-05-01T12:00:00")
    1714564800.0
    >>> parse_time("2024-05-01T14:00:00+02:00")
    1714564800.0
    """
    stripped = text.strip()
    if _looks_like_a_date(stripped):
        raise ValueError(
            f"{option} {shown(text, 40)!r} reads both as a date (the year, or ISO 8601's "
            "YYYYMMDD) and as seconds since the epoch (a moment of 1970): write the date with "
            "dashes (2024-05-01), or the seconds with a decimal point (20240501.0)"
        )
    if _NUMBER.fullmatch(stripped):
        value = float(stripped)
    else:
        try:
            moment = datetime.fromisoformat(stripped)
        except ValueError:
            raise ValueError(
                f"{option} {shown(text, 40)!r} is not a time: write seconds since the epoch "
                "(1714564800) or ISO 8601 (2024-05-01, 2024-05-01T12:00:00, "
                "2024-05-01T12:00:00+02:00; without a zone it is UTC)"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = moment.timestamp()
    if not math.isfinite(value):
        raise ValueError(f"{option} {shown(text, 40)!r} is not a finite time")
    try:
        utc(value)  # the report names the bound as a date: one it cannot name is no bound
    except (OverflowError, OSError, ValueError):
        raise ValueError(
            f"{option} {shown(text, 40)!r} is outside the years 1 to 9999 (UTC) a report can "
            "name: leave the option out for an open range, or write a time within them"
        ) from None
    return value


def _looks_like_a_date(text: str) -> bool:
    """Whether ``text`` is a year (``2024``) or a basic ISO 8601 date (``20240501``).

    Read as seconds, such a bound meant a moment of 1970: ``--until 20240501``
    selected nothing of 2024, and the report said the store had no finding.
    """
    if not text.isascii() or not text.isdigit() or len(text) not in (4, 8):
        return False
    try:
        datetime.strptime(text, "%Y" if len(text) == 4 else "%Y%m%d")
    except ValueError:
        return False
    return True


def utc(seconds: float) -> str:
    """``seconds`` since the epoch as ISO 8601 in UTC, to the millisecond.

    The year has four digits, as ISO 8601 says (``strftime``'s ``%Y`` wrote
    the year 1 as ``1``).

    >>> utc(1714564800.25)
    '2024-05-01T12:00:00.250Z'
    >>> utc(-62135596800.0)
    '0001-01-01T00:00:00.000Z'
    """
    moment = datetime.fromtimestamp(seconds, UTC)
    return (
        f"{moment.year:04d}"
        + moment.strftime("-%m-%dT%H:%M:%S.")
        + (f"{moment.microsecond // 1000:03d}Z")
    )


@dataclass(frozen=True, slots=True)
class Selection:
    """Which records a report is about: some requests (all when empty), a time range.

    ``since`` is inclusive and ``until`` exclusive, both seconds since the epoch.
    """

    request_ids: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None

    def holds(self, request_id: str, time: float) -> bool:
        return (
            (not self.request_ids or request_id in self.request_ids)
            and (self.since is None or time >= self.since)
            and (self.until is None or time < self.until)
        )

    @property
    def everything(self) -> bool:
        return not self.request_ids and self.since is None and self.until is None

    def describe(self, *, md: bool = False) -> str:
        """The selection in words; request ids escaped (as code spans with ``md``)."""
        parts = []
        if self.request_ids:
            names = (_cell(r, _NAME_LIMIT, md) for r in self.request_ids)
            parts.append("requests " + ", ".join(names))
        if self.since is not None:
            parts.append(f"since {utc(self.since)}")
        if self.until is not None:
            parts.append(f"until {utc(self.until)} (exclusive)")
        return "; ".join(parts) if parts else "every record in the store"

    def to_json(self) -> dict[str, object]:
        return {
            "request_ids": list(self.request_ids),
            "since": self.since,
            "since_utc": None if self.since is None else utc(self.since),
            "until": self.until,
            "until_utc": None if self.until is None else utc(self.until),
        }


@dataclass(frozen=True, slots=True)
class ModelCallReport:
    """One model call as sent, and its answer as read (``None``: no answer on record)."""

    call: ModelCallRecord
    reply: ModelReplyRecord | None


@dataclass(frozen=True, slots=True)
class RequestReport:
    """What one request did: its model calls (with answers) and its tool calls, in order.

    ``replies_without_call`` are the answers selected whose model call is not: sent
    before ``since``, or not on record. They are shown on their own, never dropped:
    an answer says which tools the model asked for.
    """

    request_id: str
    model_calls: tuple[ModelCallReport, ...]
    tool_calls: tuple[AuditRecord, ...]
    replies_without_call: tuple[ModelReplyRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The store's answers for one :class:`Selection`; render with :meth:`text`,
    :meth:`markdown` or :meth:`to_json`."""

    database: str
    selection: Selection
    records: Sequence[AuditRecord]
    writes: Sequence[AuditRecord]
    writes_by_approval: dict[ApprovalMode, int]
    always_rule_instruction_writes: Sequence[AuditRecord]
    substitutions: Sequence[Substitution]
    follow_ups: Sequence[AuditRecord]
    requests: Sequence[RequestReport]
    unmatched_requests: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    always_rule_high_risk_calls: Sequence[AuditRecord] = field(default=())
    """Calls of a high-risk (or irreversible) tool recorded as approved by an always rule:
    the policy never gives that mode to such a tool (invariant I8), so each is a finding."""
    _tally: _Tally | None = field(default=None, repr=False, compare=False)
    """What :func:`stream_report` counted as it went (``None``: count the sequences)."""

    @property
    def substitution_rate(self) -> float | None:
        """As :meth:`~veridic.AuditStore.substitution_rate`, over the selected stopped calls."""
        followed, same = self._followed()
        return same / followed if followed else None

    def _followed(self) -> tuple[int, int]:
        """How many stopped calls another followed, and how many of those tried the same
        operation again (a streamed report counted them as it was made)."""
        if self._tally is not None and self._tally.followed is not None:
            return self._tally.followed
        return _Tally.stopped(self.substitutions)[1:]

    def _counted(self) -> _Tally:
        """The calls, model calls and time span of the report (see :class:`_Tally`)."""
        if self._tally is not None:
            return self._tally
        return _Tally.of(self.records, sum(len(r.model_calls) for r in self.requests))

    def exit_code(self) -> int:
        """1 when an always rule approved an instruction-field write or a high-risk call
        (it must approve neither: invariant I8), else 0."""
        return 1 if self.always_rule_instruction_writes or self.always_rule_high_risk_calls else 0

    # --- JSON ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, object]:
        """The report as plain data; its schema is documented in docs/audit.md."""
        return {
            key: list(value) if isinstance(value, _Array) else value
            for key, value in self._document().items()
        }

    def _document(self) -> dict[str, object]:
        """:meth:`to_json`, its long arrays made as they are written (:class:`_Array`)."""
        rate = self.substitution_rate
        tally = self._counted()
        return {
            "command": "audit",
            "schema": SCHEMA_VERSION,
            "database": self.database,
            "selection": self.selection.to_json(),
            "exit_code": self.exit_code(),
            "counts": {
                "records": len(self.records),
                "calls": tally.calls,
                "writes": len(self.writes),
                "follow_ups": len(self.follow_ups),
                "requests": len(self.requests),
                "model_calls": tally.model_calls,
                "substitutions": len(self.substitutions),
            },
            "writes_by_approval": {
                mode.value: self.writes_by_approval[mode] for mode in ApprovalMode
            },
            "instruction_writes_under_always_rule": _Array(
                self.always_rule_instruction_writes, _record_json
            ),
            "high_risk_calls_under_always_rule": _Array(
                self.always_rule_high_risk_calls, _record_json
            ),
            "writes": _Array(self.writes, _record_json),
            "substitutions": _Array(self.substitutions, _substitution_json),
            "substitution_rate": rate,
            "follow_ups": _Array(self.follow_ups, _record_json),
            "requests": _Array(self.requests, _request_json),
            "unmatched_requests": list(self.unmatched_requests),
            "notes": list(self.notes),
        }

    def json(self) -> str:
        """:meth:`to_json` as text: indented, keys sorted, ASCII only (safe in any terminal)."""
        return "".join(self.json_chunks())

    def json_chunks(self) -> Iterator[str]:
        """:meth:`json` in pieces, each array item as it is read: written out one by one,
        a report of a whole store (:func:`stream_report`) is never held whole."""
        return _json_chunks(self._document())

    # --- text ---------------------------------------------------------------------------

    def text(self) -> str:
        """The report for a person at a terminal: numbered sections, aligned columns."""
        return "\n".join(self.text_lines())

    def text_lines(self) -> Iterator[str]:
        """:meth:`text` line by line, each record read as its line is made (see
        :meth:`json_chunks`)."""
        yield self._headline()
        yield f"  selection: {self.selection.describe()}"
        yield from (f"  note: {note}" for note in self._notes(md=False))

        yield ""
        found = self.always_rule_instruction_writes
        if found:
            yield (
                f"[1] FINDING: {counted(len(found), 'instruction-field write')} approved by an "
                "always rule (there must be none: the gates refuse this, so each record below is "
                "a bug to report)"
            )
            yield from _table(_WRITE_HEAD, found, _write_row)
        else:
            yield "[1] instruction-field writes approved by an always rule: none (as required)"
        high = self.always_rule_high_risk_calls
        if high:
            yield (
                f"[1] FINDING: {counted(len(high), 'high-risk call')} approved by an always rule "
                f"({_HIGH_RISK_WHY}, so each record below is a bug to report)"
            )
            yield from _table(_WRITE_HEAD, high, _write_row)
        else:
            yield "[1] high-risk calls approved by an always rule: none (as required)"

        yield ""
        yield f"[2] writes by approval ({counted(len(self.writes), 'write call')})"
        yield from (
            _table(
                ("approval", "writes"),
                [(mode.value, str(self.writes_by_approval[mode])) for mode in ApprovalMode],
                _cells,
            )
        )
        if self.writes:
            yield ""
            yield from _table(_WRITE_HEAD, self.writes, _write_row)

        yield ""
        yield "[3] after a stopped call (substitutions)"
        yield f"    {self._rate_words()}"
        if self.substitutions:
            yield from _table(_SUBSTITUTION_HEAD, self.substitutions, _substitution_row)

        yield ""
        if self.follow_ups:
            yield (
                f"[4] follow-ups (a guard fired after its call had ended): {len(self.follow_ups)}"
            )
            yield from _table(_FOLLOW_UP_HEAD, self.follow_ups, _follow_up_row)
        else:
            yield "[4] follow-ups (a guard fired after its call had ended): none"

        yield ""
        yield f"[5] requests ({len(self.requests)})"
        for request in self.requests:
            yield ""
            yield f"  request {shown(request.request_id, _NAME_LIMIT)}"
            if request.model_calls:
                yield "    model calls"
                yield from _table(_MODEL_HEAD, request.model_calls, _model_row, indent=6)
                yield from (
                    f"      tools {digest}: {names}" for digest, names in _tool_lists(request)
                )
            else:
                yield "    model calls: none on record"
            if request.replies_without_call:
                yield f"    {_LONE_REPLIES}"
                yield from _table(_REPLY_HEAD, request.replies_without_call, _reply_row, indent=6)
            if request.tool_calls:
                yield "    tool calls, in order"
                yield from _table(_CALL_HEAD, request.tool_calls, _call_row, indent=6)
            else:
                yield "    tool calls: none"

        yield ""
        yield f"result: {self._verdict()}"

    # --- Markdown -----------------------------------------------------------------------

    def markdown(self) -> str:
        """The report for a pull-request comment or ``$GITHUB_STEP_SUMMARY`` (GitHub Markdown).

        Text from the store is in code spans, escaped as in :func:`shown`, with
        backticks and pipes escaped too, so it cannot end its span or its cell.
        """
        return "\n".join(self.markdown_lines())

    def markdown_lines(self) -> Iterator[str]:
        """:meth:`markdown` line by line (see :meth:`text_lines`)."""
        yield f"## veridic audit: {_md(self.database)}"
        yield ""
        yield f"{self._summary()}; selection: {self.selection.describe(md=True)}."
        for note in self._notes(md=True):
            yield from ("", f"> note: {note}")
        yield ""
        found = self.always_rule_instruction_writes
        if found:
            yield (
                f"**FINDING: {counted(len(found), 'instruction-field write')} approved by an "
                "always rule.** There must be none: the gates refuse this, so each record is a bug "
                "to report."
            )
            yield ""
            yield from _md_table(_WRITE_HEAD, found, _write_row)
        else:
            yield "**Instruction-field writes approved by an always rule: none** (as required)."
        high = self.always_rule_high_risk_calls
        yield ""
        if high:
            yield (
                f"**FINDING: {counted(len(high), 'high-risk call')} approved by an always "
                f"rule.** {_HIGH_RISK_WHY.capitalize()}, so each record is a bug to report."
            )
            yield ""
            yield from _md_table(_WRITE_HEAD, high, _write_row)
        else:
            yield "**High-risk calls approved by an always rule: none** (as required)."
        yield ""
        yield f"### Writes by approval ({len(self.writes)})"
        yield ""
        yield from (
            _md_table(
                ("approval", "writes"),
                [(f"`{mode.value}`", str(self.writes_by_approval[mode])) for mode in ApprovalMode],
                _md_cells,
            )
        )
        if self.writes:
            yield ""
            yield from _md_table(_WRITE_HEAD, self.writes, _write_row)
        yield ""
        yield "### After a stopped call"
        yield ""
        yield _md_plain(self._rate_words())
        if self.substitutions:
            yield ""
            yield from _md_table(_SUBSTITUTION_HEAD, self.substitutions, _substitution_row)
        yield ""
        yield f"### Follow-ups ({len(self.follow_ups)})"
        if self.follow_ups:
            yield ""
            yield from _md_table(_FOLLOW_UP_HEAD, self.follow_ups, _follow_up_row)
        yield ""
        yield f"### Requests ({len(self.requests)})"
        for request in self.requests:
            yield ""
            yield f"#### Request {_md(request.request_id, _NAME_LIMIT)}"
            if request.model_calls:
                yield ""
                yield from _md_table(_MODEL_HEAD, request.model_calls, _model_row)
                yield ""
                yield from (
                    f"- tools {digest}: {names}" for digest, names in _tool_lists(request, md=True)
                )
            if request.replies_without_call:
                yield from ("", _md_plain(_LONE_REPLIES.capitalize()), "")
                yield from _md_table(_REPLY_HEAD, request.replies_without_call, _reply_row)
            if request.tool_calls:
                yield ""
                yield from _md_table(_CALL_HEAD, request.tool_calls, _call_row)
        yield ""
        yield f"**Result: {self._verdict()}**"

    # --- shared words -------------------------------------------------------------------

    def _notes(self, *, md: bool) -> list[str]:
        unmatched = [
            f"request {_cell(r, _NAME_LIMIT, md)} has nothing on record"
            for r in self.unmatched_requests
        ]
        return [*unmatched, *self.notes]

    def _headline(self) -> str:
        return f"veridic audit {shown(self.database)}: {self._summary()}"

    def _summary(self) -> str:
        tally = self._counted()
        span = ""
        if tally.first is not None and tally.last is not None:
            span = f", {_when(tally.first)} .. {_when(tally.last)}"
        requests = counted(len(self.requests), "request")
        return f"{counted(tally.calls, 'tool call')} in {requests}{span}"

    def _rate_words(self) -> str:
        stopped = len(self.substitutions)
        if not stopped:
            return "no stopped call"
        followed, same = self._followed()
        if not followed:
            return f"{counted(stopped, 'stopped call')}, none followed by another call: no rate"
        return (
            f"{counted(stopped, 'stopped call')}, {followed} followed by another call; "
            f"{same} of those tried the same operation again (rate {same / followed:.0%})"
        )

    def _verdict(self) -> str:
        approved = [
            what
            for what, found in (
                ("an instruction-field write", self.always_rule_instruction_writes),
                ("a high-risk call", self.always_rule_high_risk_calls),
            )
            if found
        ]
        if approved:
            return f"failed: an always rule approved {' and '.join(approved)} (exit 1)"
        return "clean (exit 0)"


def build_report(store: AuditStore, selection: Selection, *, database: str) -> AuditReport:
    """Ask ``store`` its questions and keep the answers about ``selection``.

    ``database`` names the store in the report (a path, a URL without its
    password). It is the operator's own argument, so it is shown whole (escaped,
    never clipped): a CI runner's paths are often longer than a line.

    Raises:
        AuditRecordError: a stored row cannot be read back (the store's own error).
    """
    records = _read(store.records, selection)
    writes = tuple(r for r in records if _is_write(r))
    counts = dict.fromkeys(ApprovalMode, 0)
    for record in writes:
        counts[record.approval] += 1
    always = tuple(r for r in store.instruction_writes_under_always_rule() if _in(selection, r))
    high = tuple(r for r in records if _always_high_risk(r))
    substitutions = _substitutions(store, selection)
    follow_ups = tuple(r for r in records if r.follow_up)

    model_calls = _read(store.model_calls, selection)
    replies = _read(store.model_replies, selection)
    order: dict[str, float] = {}
    firsts = [(r.request_id, r.time) for r in records]
    firsts += [(c.request_id, c.time) for c in model_calls]
    firsts += [(r.request_id, r.time) for r in replies]
    for request_id, time in firsts:
        order[request_id] = min(order.get(request_id, math.inf), time)
    # Grouped once: each request's rows were filtered out of every row (a report of 8,000
    # requests took 6 s, of 80,000 ten minutes).
    by_records, by_calls, by_replies = (
        _by_request(records),
        _by_request(model_calls),
        _by_request(replies),
    )
    requests = tuple(
        _request(
            request_id,
            by_records.get(request_id, []),
            by_calls.get(request_id, []),
            by_replies.get(request_id, []),
        )
        for request_id in sorted(order, key=lambda key: (order[key], key))
    )
    notes = []
    if not hasattr(store, "model_replies"):
        notes.append("this store does not keep model answers: no usage or latency shown")
    if not records and not model_calls:
        notes.append("no record is selected")
    return AuditReport(
        database=database,
        selection=selection,
        records=records,
        writes=writes,
        writes_by_approval=counts,
        always_rule_instruction_writes=always,
        always_rule_high_risk_calls=high,
        substitutions=substitutions,
        follow_ups=follow_ups,
        requests=requests,
        unmatched_requests=tuple(r for r in _unique(selection.request_ids) if r not in order),
        notes=tuple(notes),
    )


# --- gathering -----------------------------------------------------------------------------

_T = TypeVar("_T", AuditRecord, ModelCallRecord, ModelReplyRecord)
_T_co = TypeVar("_T_co", covariant=True)
_X = TypeVar("_X")
_X_contra = TypeVar("_X_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class _Tally:
    """The counts a report's summary and JSON give that no one of its sequences has."""

    calls: int
    model_calls: int
    first: float | None
    """The time of the earliest record selected (as ``min`` finds it), ``None`` for none."""
    last: float | None
    followed: tuple[int, int] | None = None
    """Of the stopped calls, how many another call followed and how many of those tried
    the same operation again (``None``: count them)."""

    @classmethod
    def of(cls, records: Iterable[AuditRecord], model_calls: int) -> _Tally:
        calls = 0
        first: float | None = None
        last: float | None = None
        for r in records:  # in one pass; each comparison as min() and max() make it
            calls += not r.follow_up
            first = r.time if first is None or r.time < first else first
            last = r.time if last is None or r.time > last else last
        return cls(calls, model_calls, first, last)

    @staticmethod
    def stopped(substitutions: Iterable[Substitution]) -> tuple[int, int, int]:
        """How many stopped calls, how many another call followed, and how many of those
        tried the same operation again: counted in one pass, none kept."""
        stopped = followed = same = 0
        for s in substitutions:
            stopped += 1
            if s.next is not None:
                followed += 1
                same += s.same_operation
        return stopped, followed, same


_PAGE: Final = 500
"""Records a streamed report reads at once (:func:`stream_report`)."""


class _Reread(Sequence[_X]):
    """Items read again from the store each time they are gone through, and never kept.

    What :func:`stream_report` gives a report in place of a tuple: a sequence of
    every record of a store that holds no more than a page of them at once.
    """

    def __init__(self, read: Callable[[], Iterator[_X]], length: int | None = None) -> None:
        self._read = read
        self._length = length

    def __iter__(self) -> Iterator[_X]:
        return self._read()

    def __len__(self) -> int:
        if self._length is None:
            self._length = sum(1 for _ in self._read())
        return self._length

    @overload
    def __getitem__(self, index: int) -> _X: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[_X]: ...
    def __getitem__(self, index: int | slice) -> _X | Sequence[_X]:
        if isinstance(index, slice):
            return tuple(self)[index]
        at = index + len(self) if index < 0 else index
        for n, item in enumerate(self):
            if n == at:
                return item
        raise IndexError(f"report sequence index {index} out of range")


def stream_report(store: AuditStore, selection: Selection, *, database: str) -> AuditReport:
    """:func:`build_report`, for a report written out as it is read (``veridic audit``).

    A report of a whole store (no request named) held every record, model call and
    answer of it at once. Of a veridic store, this one reads the records in pages
    of 500: once to count them, then the writes, follow-ups and findings each twice
    (for the column widths of their table, then its lines), the stopped calls
    thrice, and the requests' rows a page of requests at a time (whose rows make a
    page together, or one request of more), three statements a page, as their
    sections are written. Written with
    :meth:`~AuditReport.text_lines`, :meth:`~AuditReport.markdown_lines` or
    :meth:`~AuditReport.json_chunks`, it holds a page or one request at a time (and
    the request ids, in order), and its text is that of :func:`build_report`'s.
    It reads the store each time it is written: write it before the store is closed.
    The sections read at different moments: the record sections read no record
    past the last one there was when the report was made, but in a store written
    meanwhile (a live Postgres database) a request's section may show a record
    written after the counts were made. Any other store or selection is read whole,
    as :func:`build_report` reads it.

    Raises:
        AuditRecordError: a stored row cannot be read back (the store's own error).
    """
    if selection.request_ids or not isinstance(store, SQLStore):
        return build_report(store, selection, database=database)
    since, until = selection.since, selection.until
    last = store._last_record_id()
    windows: list[tuple[int, int | None]] = []  # the pages' row ids, for the stopped calls
    counts = dict.fromkeys(ApprovalMode, 0)
    lengths = {"records": 0, "writes": 0, "follow_ups": 0, "high": 0}

    def counting() -> Iterator[AuditRecord]:
        for window, page in _pages(store, since, until, last, None):
            windows.append(window)
            for r in page:
                lengths["records"] += 1
                lengths["follow_ups"] += r.follow_up
                lengths["high"] += _always_high_risk(r)
                if _is_write(r):
                    lengths["writes"] += 1
                    counts[r.approval] += 1
                yield r

    def kept(only: _Only) -> Iterator[AuditRecord]:
        keep = _ONLY[only]
        for _, page in _pages(store, since, until, last, only):
            yield from (r for r in page if keep(r))  # the store narrows; this decides

    def substitutions() -> Iterator[Substitution]:
        for window in windows:
            yield from store._substitutions_between(window, since, until)

    tally = _Tally.of(counting(), store._model_call_count(since, until))
    stopped = _Tally.stopped(substitutions())
    firsts = sorted(store._request_firsts(since, until), key=lambda first: (first[1], first[0]))
    order = [(request_id, rows) for request_id, _, rows in firsts]

    def requests() -> Iterator[RequestReport]:
        for page in _request_pages(order):
            records, calls, replies = store._rows_of_requests(page, since, until)
            by_records, by_calls = _by_request(records), _by_request(calls)
            by_replies = _by_request(replies)
            for request_id in page:
                yield _request(
                    request_id,
                    by_records.get(request_id, ()),
                    by_calls.get(request_id, ()),
                    by_replies.get(request_id, ()),
                )

    return AuditReport(
        database=database,
        selection=selection,
        records=_Reread(partial(kept, None), lengths["records"]),
        writes=_Reread(partial(kept, "writes"), lengths["writes"]),
        writes_by_approval=counts,
        always_rule_instruction_writes=tuple(
            r for r in store.instruction_writes_under_always_rule() if _in(selection, r)
        ),
        always_rule_high_risk_calls=_Reread(partial(kept, "high"), lengths["high"]),
        substitutions=_Reread(substitutions, stopped[0]),
        follow_ups=_Reread(partial(kept, "follow_ups"), lengths["follow_ups"]),
        requests=_Reread(requests, len(order)),
        notes=() if lengths["records"] or tally.model_calls else ("no record is selected",),
        _tally=dataclasses.replace(tally, followed=stopped[1:]),
    )


_Only = Literal["writes", "follow_ups", "high"] | None
_ONLY: Final[dict[_Only, Callable[[AuditRecord], bool]]] = {
    None: lambda record: True,
    "writes": lambda record: _is_write(record),
    "follow_ups": lambda record: record.follow_up,
    "high": lambda record: _always_high_risk(record),
}
"""Which records a pass of :func:`stream_report` keeps (the store narrows its pages to them,
:data:`veridic.run._store.ONLY`; these decide, as :func:`build_report` does)."""


def _pages(
    store: SQLStore, since: float | None, until: float | None, last: int, only: _Only
) -> Iterator[tuple[tuple[int, int | None], tuple[AuditRecord, ...]]]:
    """The records of the range up to the row ``last`` (those ``only`` names), a page at a
    time, each with the window of row ids it spans (``after``, ``last``; ``None``: to the
    end)."""
    after = 0
    while True:
        page = store._records_page(after, _PAGE, since, until, last, only)
        full = len(page) == _PAGE
        yield (after, page[-1][0] if full else None), tuple(r for _, r in page)
        if not full:
            return
        after = page[-1][0]


def _request_pages(order: Sequence[tuple[str, int]]) -> Iterator[tuple[str, ...]]:
    """The request ids of ``order`` (each with how many rows it holds), in pages of
    requests whose rows, together, are a page (:data:`_PAGE`) at most, or of one request
    that holds more: each page is read with three statements, not three a request.

    The counts are those of the moment the report was made: in a store written
    meanwhile, a page may read the few rows written since.
    """
    page: list[str] = []
    held = 0
    for request_id, rows in order:
        if page and (held + rows > _PAGE or len(page) == _PAGE):
            yield tuple(page)
            page, held = [], 0
        page.append(request_id)
        held += rows
    if page:
        yield tuple(page)


def _is_write(record: AuditRecord) -> bool:
    return not record.follow_up and record.kind == "write"


_HIGH_RISK_WHY: Final = (
    "there must be none: an always rule is refused for a high-risk tool, and an irreversible "
    "one is high risk, so the gates confirm each call"
)


def _always_high_risk(record: AuditRecord) -> bool:
    """An always rule recorded for a call of a high-risk or irreversible tool (I8 forbids it).

    The policy gives ``ALWAYS_RULE`` to no such tool, so a record that says so is a
    store written by something else, or a bug; a report that called it clean would
    hide the one failure the always rule's ceiling exists to prevent.
    """
    return record.approval is ApprovalMode.ALWAYS_RULE and (
        record.risk is Risk.HIGH or record.irreversible
    )


def _in(selection: Selection, record: AuditRecord) -> bool:
    return selection.holds(record.request_id, record.time)


class _Reader(Protocol[_T_co]):
    """A store's ``records``, ``model_calls`` or ``model_replies``: they narrow alike."""

    def __call__(
        self, request_id: str | None = None, *, since: float | None, until: float | None
    ) -> tuple[_T_co, ...]: ...


def _read(read: _Reader[_T], selection: Selection) -> tuple[_T, ...]:
    """What ``read`` holds of ``selection``, narrowed by the store itself (request and range)."""
    since, until = selection.since, selection.until
    if not selection.request_ids:
        return read(since=since, until=until)
    return tuple(
        item
        for request in _unique(selection.request_ids)
        for item in read(request, since=since, until=until)
    )


def _substitutions(store: AuditStore, selection: Selection) -> tuple[Substitution, ...]:
    """The store's substitutions whose stopped call is in ``selection``.

    veridic's stores narrow them in the database (as :func:`_read` does the
    records): asked for everything and filtered here, a report of one request
    made a record of every stopped call in the store and of the call after
    each. Another store is asked for everything, as its protocol allows.
    """
    if not isinstance(store, SQLStore):
        return tuple(s for s in store.substitutions() if _in(selection, s.denied))
    since, until = selection.since, selection.until
    if not selection.request_ids:
        return store.substitutions(since=since, until=until)
    return tuple(
        found
        for request in _unique(selection.request_ids)
        for found in store.substitutions(request, since=since, until=until)
    )


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _by_request(items: Sequence[_T]) -> dict[str, list[_T]]:
    """``items`` grouped by their request, each group in the order read."""
    grouped: dict[str, list[_T]] = {}
    for item in items:
        grouped.setdefault(item.request_id, []).append(item)
    return grouped


def _request(
    request_id: str,
    records: Sequence[AuditRecord],
    model_calls: Sequence[ModelCallRecord],
    replies: Sequence[ModelReplyRecord],
) -> RequestReport:
    """The report of one request, from its own rows (see :func:`_by_request`)."""
    paired, unpaired = _paired(model_calls, replies)
    return RequestReport(
        request_id=request_id,
        model_calls=paired,
        tool_calls=tuple(records),
        replies_without_call=unpaired,
    )


def _paired(
    calls: Sequence[ModelCallRecord], replies: Sequence[ModelReplyRecord]
) -> tuple[tuple[ModelCallReport, ...], tuple[ModelReplyRecord, ...]]:
    """Each call with its answer (the reply that names its ``call_id``), and the answers left.

    An answer recorded before records had ids names none; it goes with the
    first unanswered call of the same prompt, in order. An answer no selected
    call takes (its call was sent before the range, or is not on record, or a
    second answer names the same call) is returned apart, to be shown apart.
    """
    by_id = {r.call_id: r for r in replies if r.call_id}
    left = [r for r in replies if not r.call_id]
    paired = []
    for call in calls:
        reply = by_id.get(call.call_id) or next(
            (r for r in left if r.prompt_sha256 == call.prompt_sha256), None
        )
        if reply is not None and reply in left:
            left.remove(reply)
        paired.append(ModelCallReport(call, reply))
    taken = [m.reply for m in paired if m.reply is not None]
    unpaired = tuple(r for r in replies if not any(r is t for t in taken))
    return tuple(paired), unpaired


# --- rows ----------------------------------------------------------------------------------

_WRITE_HEAD: Final = ("time (UTC)", "request", "tool", "risk", "approval", "outcome")
_SUBSTITUTION_HEAD: Final = (
    "time (UTC)",
    "request",
    "stopped call",
    "outcome",
    "next call",
    "same tool",
    "same operation",
)
_FOLLOW_UP_HEAD: Final = ("time (UTC)", "request", "tool", "detail")
_MODEL_HEAD: Final = (
    "time (UTC)",
    "api",
    "model",
    "prompt",
    "tools",
    "options",
    "stop",
    "tokens in/out",
    "latency",
    "called",
)
_REPLY_HEAD: Final = (
    "time (UTC)",
    "model",
    "call id",
    "stop",
    "tokens in/out",
    "latency",
    "called",
)
_LONE_REPLIES: Final = (
    "answers whose model call is not in the selection (sent before the range, or not on record)"
)
_CALL_HEAD: Final = ("time (UTC)", "tool", "kind", "risk", "approval", "outcome", "detail")


def _cell(text: str, limit: int, md: bool) -> str:
    return _md(text, limit) if md else shown(text, limit)


def _write_row(r: AuditRecord, *, md: bool = False) -> tuple[str, ...]:
    return (
        _when(r.time),
        _cell(r.request_id, _NAME_LIMIT, md),
        _cell(r.tool, _NAME_LIMIT, md),
        _value(r.risk),
        r.approval.value,
        r.outcome.value,
    )


def _substitution_row(s: Substitution, *, md: bool = False) -> tuple[str, ...]:
    after = s.next
    return (
        _when(s.denied.time),
        _cell(s.denied.request_id, _NAME_LIMIT, md),
        _cell(s.denied.tool, _NAME_LIMIT, md),
        s.denied.outcome.value,
        "(none: the request ended)" if after is None else _cell(after.tool, _NAME_LIMIT, md),
        _yes(s.same_tool) if after is not None else "-",
        _yes(s.same_operation) if after is not None else "-",
    )


def _follow_up_row(r: AuditRecord, *, md: bool = False) -> tuple[str, ...]:
    return (
        _when(r.time),
        _cell(r.request_id, _NAME_LIMIT, md),
        _cell(r.tool, _NAME_LIMIT, md),
        _cell(r.detail, _DETAIL_LIMIT, md),
    )


def _tool_lists(request: RequestReport, *, md: bool = False) -> list[tuple[str, str]]:
    """Each tool list the request's model calls were sent with, once: (digest prefix, names)."""
    lists: dict[str, tuple[str, ...]] = {}
    for m in request.model_calls:
        lists.setdefault(m.call.tools_sha256[:12], m.call.tools)
    return [
        (digest, ", ".join(_cell(name, _NAME_LIMIT, md) for name in names) or "none")
        for digest, names in lists.items()
    ]


def _model_row(m: ModelCallReport, *, md: bool = False) -> tuple[str, ...]:
    call, reply = m.call, m.reply
    tools = f"{call.tools_sha256[:12]} ({len(call.tools)})"
    answer = ("(no answer on record)", "-", "-", "-") if reply is None else _answer_cells(reply, md)
    return (
        _when(call.time),
        _cell(call.api, 30, md),
        _cell(call.model, 30, md),
        call.prompt_sha256[:12],
        tools,
        call.options_sha256[:12] or "-",
        *answer,
    )


def _reply_row(reply: ModelReplyRecord, *, md: bool = False) -> tuple[str, ...]:
    """An answer shown on its own (its call is not in the report), with the call it names."""
    return (
        _when(reply.time),
        _cell(reply.model, 30, md),
        _cell(reply.call_id, _NAME_LIMIT, md) if reply.call_id else "-",
        *_answer_cells(reply, md),
    )


def _answer_cells(reply: ModelReplyRecord, md: bool) -> tuple[str, str, str, str]:
    """An answer's stop reason, tokens, latency and the tools it called, as table cells."""
    usage = reply.usage
    return (
        _cell(reply.stop_reason, 20, md) if reply.stop_reason else "-",
        "-" if usage is None else _tokens(usage),
        _ms(reply.latency),
        ", ".join(_cell(name, _NAME_LIMIT, md) for name in reply.tool_calls)
        if reply.tool_calls
        else "-",
    )


_PART_LABELS: Final = (
    ("cache_read_input_tokens", "cache read"),
    ("cache_creation_input_tokens", "cache write"),
    ("reasoning_output_tokens", "reasoning"),
)
"""The parts of a :class:`~veridic.providers.Usage`, as a report's cell names them."""


def _tokens(usage: Usage) -> str:
    """Tokens read and written, with the parts the provider broke them into, where it did.

    A part the provider did not state (:meth:`~veridic.providers.Usage.part` ``None``:
    not in its answer, or recorded before schema 8) is left out, so a cell of ``120/7``
    says nothing of the cache, rather than "no cache read"; a part stated as 0 is shown,
    ``cache read 0``: the provider said there was none.
    """
    known = [f"{label} {n}" for part, label in _PART_LABELS if (n := usage.part(part)) is not None]
    totals = f"{usage.input_tokens}/{usage.output_tokens}"
    return f"{totals} ({', '.join(known)})" if known else totals


def _call_row(r: AuditRecord, *, md: bool = False) -> tuple[str, ...]:
    return (
        _when(r.time),
        _cell(r.tool, _NAME_LIMIT, md),
        r.kind or "-",
        _value(r.risk),
        r.approval.value,
        r.outcome.value + (" (follow-up)" if r.follow_up else ""),
        _cell(r.detail, _DETAIL_LIMIT, md) if r.detail else "",
    )


def _ms(seconds: float) -> str:
    millis = seconds * 1000
    return f"{millis:.1f} ms" if millis < 10 else f"{millis:.0f} ms"


def _value(risk: object) -> str:
    value = getattr(risk, "value", None)
    return "-" if value is None else str(value)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _table(
    head: Sequence[str],
    items: Iterable[_X],
    row: Callable[[_X], Sequence[str]],
    *,
    indent: int = 4,
) -> Iterator[str]:
    """A row of each item under a header, each column as wide as its widest cell.

    ``items`` is gone through twice, for the widths and then for the lines, and no row
    is kept: it may be a whole store's records, read in pages (:func:`stream_report`).
    """
    widths = [len(cell) for cell in head]
    for item in items:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row(item), strict=True)]
    pad = " " * indent

    def line(cells: Sequence[str]) -> str:
        padded = (cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        return pad + "  ".join(padded).rstrip()

    yield line(head)
    yield from (line(row(item)) for item in items)


class _MarkdownRow(Protocol[_X_contra]):
    def __call__(self, item: _X_contra, /, *, md: bool) -> Sequence[str]: ...


def _md_table(head: Sequence[str], items: Iterable[_X], row: _MarkdownRow[_X]) -> Iterator[str]:
    """A row of each item (its cells made with ``md=True``) under a header, one at a time."""
    yield "| " + " | ".join(head) + " |"
    yield "|" + "---|" * len(head)
    yield from ("| " + " | ".join(row(item, md=True)) + " |" for item in items)


def _cells(cells: tuple[str, ...]) -> tuple[str, ...]:
    """A row whose cells are made already (the approval counts)."""
    return cells


def _md_cells(cells: tuple[str, ...], *, md: bool) -> tuple[str, ...]:
    return cells


def _md(text: str, limit: int | None = None) -> str:
    """Store text as a Markdown code span that cannot end itself or its table cell.

    Escaped as :func:`shown` (so no newline, control or invisible character
    survives), then backticks and pipes as ``\\x60`` and ``\\x7c``: inside a
    code span GitHub renders no link, mention, emphasis or HTML. A text that starts or
    ends with a space gets one more at each end: GitHub strips one from each end of a
    span, and `` ` save_note ` `` showed as the tool ``save_note``. Not a text of spaces
    only, which GitHub keeps whole (padded, one space showed three); an empty text is
    ``_(empty)_``, as no span can be empty (two backticks showed as themselves).
    """
    if not text:
        return "_(empty)_"
    escaped = shown(text, limit).replace("`", "\\x60").replace("|", "\\x7c")
    if escaped.strip(" ") and (escaped.startswith(" ") or escaped.endswith(" ")):
        return f"` {escaped} `"
    return f"`{escaped}`"


def _md_plain(text: str) -> str:
    """veridic's own words (no store text in them) with HTML and pipes made inert."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _record_json(r: AuditRecord) -> dict[str, object]:
    return {
        "time": r.time,
        "time_utc": _time_utc(r.time),
        "request_id": r.request_id,
        "tool": r.tool,
        "kind": r.kind,
        "risk": None if r.risk is None else r.risk.value,
        "approval": r.approval.value,
        "outcome": r.outcome.value,
        "wrote_instruction_fields": r.wrote_instruction_fields,
        "irreversible": r.irreversible,
        "prompt_sha256": r.prompt_sha256,
        "tools_sha256": r.tools_sha256,
        "call_id": r.call_id,
        "arguments_sha256": r.arguments_sha256,
        "detail": r.detail,
        "operations": list(r.operations),
        "follow_up": r.follow_up,
    }


def _time_utc(seconds: float) -> str | None:
    """:func:`utc`, or ``None`` for a stored time no date can show (a hand-edited store).

    One rule for every record of a report: a store veridic wrote never holds
    such a time, and a report on one that does still answers, every time it
    cannot date left ``null`` in JSON (:func:`_when` in text).
    """
    try:
        return utc(seconds)
    except (OverflowError, OSError, ValueError):
        return None


def _when(seconds: float) -> str:
    """:func:`utc` for a table, or the stored number and why it has no date."""
    return _time_utc(seconds) or f"{seconds!r} (no date)"


def _call_json(call: ModelCallRecord) -> dict[str, object]:
    """A model call as sent, in the one shape the audit report and ``veridic show`` share."""
    return {
        "call_id": call.call_id,
        "request_id": call.request_id,
        "time": call.time,
        "time_utc": _time_utc(call.time),
        "api": call.api,
        "model": call.model,
        "prompt_sha256": call.prompt_sha256,
        "tools_sha256": call.tools_sha256,
        "options_sha256": call.options_sha256 or None,
        "tools": list(call.tools),
        "streamed": call.streamed,
    }


def _model_call_json(m: ModelCallReport) -> dict[str, object]:
    call, reply = m.call, m.reply
    return {**_call_json(call), "reply": None if reply is None else _reply_json(reply)}


def _reply_json(reply: ModelReplyRecord) -> dict[str, object]:
    return {
        "time": reply.time,
        "time_utc": _time_utc(reply.time),
        "response_id": reply.response_id,
        "model": reply.model,
        "stop_reason": reply.stop_reason,
        "tool_calls": list(reply.tool_calls),
        "usage": None if reply.usage is None else _usage_json(reply.usage),
        "latency": reply.latency,
    }


def _usage_json(usage: Usage) -> dict[str, int | None]:
    """An answer's usage: its totals, and its parts, each ``null`` where the provider did
    not state it (:meth:`~veridic.providers.Usage.part`; an answer recorded before schema
    8 too): ``0`` would say there was no cache read, which nobody said.
    """
    parts = {part: usage.part(part) for part, _ in _PART_LABELS}
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, **parts}


def _substitution_json(s: Substitution) -> dict[str, object]:
    return {
        "stopped": _record_json(s.denied),
        "next": None if s.next is None else _record_json(s.next),
        "same_tool": s.same_tool,
        "same_operation": s.same_operation,
    }


def _request_json(request: RequestReport) -> dict[str, object]:
    return {
        "request_id": request.request_id,
        "model_calls": [_model_call_json(m) for m in request.model_calls],
        "replies_without_call": [
            {**_reply_json(r), "call_id": r.call_id, "prompt_sha256": r.prompt_sha256}
            for r in request.replies_without_call
        ],
        "tool_calls": [_record_json(r) for r in request.tool_calls],
    }


class _Array(Generic[_X]):
    """A JSON array of a report whose items are made as they are written, from ``items``."""

    __slots__ = ("_items", "_made")

    def __init__(self, items: Iterable[_X], made: Callable[[_X], object]) -> None:
        self._items = items
        self._made = made

    def __iter__(self) -> Iterator[object]:
        return map(self._made, self._items)


_dumps: Final = partial(json.dumps, indent=2, sort_keys=True, ensure_ascii=True)


def _json_chunks(document: dict[str, object]) -> Iterator[str]:
    """``json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True)``, in pieces,
    with each :class:`_Array` of it written an item at a time.

    The same text: an item is dumped alone and indented as ``json`` indents it in
    place (a string of JSON holds no line break, so every one is the layout's).
    """
    yield "{"
    for n, key in enumerate(sorted(document)):
        yield f"{',' if n else ''}\n  {_dumps(key)}: "
        value = document[key]
        if not isinstance(value, _Array):
            yield _dumps(value).replace("\n", "\n  ")
            continue
        empty = True
        for item in value:
            yield f"{'[' if empty else ','}\n    " + _dumps(item).replace("\n", "\n    ")
            empty = False
        yield "[]" if empty else "\n  ]"
    yield "\n}" if document else "}"
