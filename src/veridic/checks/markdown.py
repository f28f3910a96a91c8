"""``--format markdown``: a report for a pull-request comment or ``$GITHUB_STEP_SUMMARY``.

One heading, a one-line summary (the counts and the verdict, or "no
findings"), the notes (in a code block: they quote what a server or a model
wrote), then a table of the items (severity, rule, tool,
file:line, message, how to fix) and, when the manifest drifted, a table of
the drift: one row per changed field (tool, field, old, new); an added or
removed tool shows each of its fields against ``(absent)``.

Every cell that holds text from the application or the model (a tool name,
a message quoting a description, a path, a manifest value) is a code span,
escaped as :func:`veridic.checks.audit_report.shown` does (a newline, a
control or an invisible character becomes a visible ``\\n``-style escape)
with its pipes escaped, inside a backtick fence longer than any run of
backticks in it. In a code span GitHub renders no HTML, link, image,
emphasis or ``@mention``, and the text cannot end its span, its cell or its
row. veridic's own words (the fixes) have HTML and Markdown
characters escaped.

>>> class Item:
...     severity, kind, file, line, subject, text, data = "error", "boot", "a.py", 3, None, None, ()
...     message = "tools <b>|</b> `x`"
>>> print(render_markdown([Item()], command="lint", target="app:registry", exit_code=1))
... # doctest: +ELLIPSIS
### veridic lint `app:registry`
<BLANKLINE>
1 finding: **failed** (exit 1).
<BLANKLINE>
| severity | rule | tool | file:line | message | how to fix |
|---|---|---|---|---|---|
| error | `boot` | — | `a.py:3` | `` tools <b>\\|</b> `x` `` | Fix the error ... |
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from veridic._counted import counted
from veridic.checks.audit_report import shown
from veridic.checks.rules import ReportItem, rule_for

__all__ = ["code_cell", "plain_cell", "render_markdown"]

_SEVERITY: Final[Mapping[str, str]] = {"error": "error", "warning": "warning", "info": "listed"}
_RANK: Final[Mapping[str, int]] = {"error": 0, "warning": 1, "info": 2}
_COUNTED: Final = (
    ("error", "finding", "findings"),
    ("warning", "warning", "warnings"),
    ("info", "listed for review", "listed for review"),
)
_FINDINGS_HEAD: Final = ("severity", "rule", "tool", "file:line", "message", "how to fix")
_DRIFT_HEAD: Final = ("tool", "field", "old", "new")
_MESSAGE_LIMIT: Final = 600
_NAME_LIMIT: Final = 80
_PATH_LIMIT: Final = 160
_VALUE_LIMIT: Final = 300
_CONTEXT: Final = 60
"""Characters kept before the first difference of two long texts (:func:`_values`)."""
_TICKS: Final = re.compile(r"`+")
_MARKDOWN: Final = re.compile(r"([\\`*_\[\]|~!#])")
_ABSENT: Final = "_(absent)_"
_EMPTY: Final = "_(empty)_"
_NONE: Final = "—"


def code_cell(text: str, limit: int | None = None) -> str:
    """``text`` as a GitHub Markdown code span that is inert in a table cell.

    >>> code_cell("a|b")
    '`a\\\\|b`'
    >>> code_cell("`x`")
    '`` `x` ``'
    >>> code_cell("line one\\nline two")
    '`line one\\\\nline two`'
    """
    if text == "":
        return _NONE
    return _fenced(shown(text, limit))


def _fenced(shown_text: str) -> str:
    """Text already escaped by :func:`shown` as a code span: pipes escaped, a long enough fence.

    GitHub strips one space from each end of a span that has one at both ends, so a text
    with a backtick or a space at an end gets one more space there. Not a text of spaces
    only, which GitHub keeps whole: padded, one space showed as three.
    """
    body = shown_text.replace("|", "\\|")
    longest = max((len(run) for run in _TICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    if body.strip(" ") and (longest or body.startswith(" ") or body.endswith(" ")):
        return f"{fence} {body} {fence}"
    return f"{fence}{body}{fence}"


def plain_cell(text: str) -> str:
    """veridic's own words with control characters, HTML and Markdown made inert.

    >>> plain_cell("use `x` | <b>")
    'use \\\\`x\\\\` \\\\| &lt;b&gt;'
    """
    escaped = shown(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", escaped)


def render_markdown(
    items: Iterable[ReportItem],
    *,
    command: str,
    target: str,
    exit_code: int,
    strict: bool = False,
    notes: Sequence[str] = (),
) -> str:
    """The report as GitHub Markdown (no final newline): summary, notes, findings, drift.

    ``exit_code`` is the command's (the format never changes it); ``strict``
    says warnings failed it.
    """
    chosen = sorted(items, key=_order)
    drift = [item for item in chosen if item.kind == "drift"]
    others = [item for item in chosen if item.kind != "drift"]
    out = [f"### veridic {plain_cell(command)} {code_cell(target, _PATH_LIMIT)}", ""]
    out.append(_summary(chosen, exit_code, strict))
    if notes:
        out.append("")
        out.extend(_notes_block(notes))
    if others:
        out.append("")
        out.extend(_table(_FINDINGS_HEAD, [_finding_row(item) for item in others]))
    if drift:
        out.extend(["", f"#### Manifest drift ({counted(len(drift), 'change')})", ""])
        out.extend(_table(_DRIFT_HEAD, [row for item in drift for row in _drift_rows(item)]))
    return "\n".join(out)


def _notes_block(notes: Sequence[str]) -> list[str]:
    """The notes as a fenced code block, one ``- `` line each, escaped as :func:`shown`.

    A note quotes what a server or a model wrote (``mcp pin --check`` the table of a
    rewritten description, ``probe`` the tool names the model called). Escaped as
    veridic's own words they still read as plain text, where GitHub turns
    ``@org/team`` into a notification, ``#123`` into a cross-reference and a bare URL
    into a link. In a code block it renders none of them, nor HTML; each line starts
    with ``- ``, so none can close the block, and the fence is longer than any run of
    backticks in it.
    """
    lines = [f"- {shown(note)}" for note in notes]
    longest = max((len(run) for line in lines for run in _TICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *lines, fence]


def _order(item: ReportItem) -> tuple[int, str, int, str, str]:
    return (_RANK.get(item.severity, 3), item.file or "", item.line or 0, item.kind, item.message)


def _summary(items: Sequence[ReportItem], exit_code: int, strict: bool) -> str:
    parts = []
    for severity, one, many in _COUNTED:
        count = sum(1 for item in items if item.severity == severity)
        if count:
            parts.append(counted(count, one, many))
    if exit_code == 0:
        verdict = "clean"
    elif strict and not any(item.severity == "error" for item in items):
        verdict = "failed (--strict: warnings fail)"
    else:
        verdict = "failed"
    counts = ", ".join(parts) if parts else "no findings"
    return f"{counts}: **{verdict}** (exit {exit_code})."


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _finding_row(item: ReportItem) -> tuple[str, ...]:
    where = "" if item.file is None else item.file
    if where and item.line is not None:
        where = f"{where}:{item.line}"
    message = item.message if item.text is None else f"{item.text}: {item.message}"
    return (
        _SEVERITY.get(item.severity, plain_cell(item.severity)),
        code_cell(item.kind, _NAME_LIMIT),
        code_cell(item.subject or "", _NAME_LIMIT),
        code_cell(where, _PATH_LIMIT),
        code_cell(message, _MESSAGE_LIMIT),
        plain_cell(rule_for(item.kind).help),
    )


def _drift_rows(item: ReportItem) -> list[tuple[str, str, str, str]]:
    data = dict(item.data)
    subject = str(data.get("subject") or item.subject or "")
    change, field = data.get("change"), data.get("field")
    before, after = data.get("before"), data.get("after")
    tool = _subject(subject)
    if change == "changed" and isinstance(before, dict) and isinstance(after, dict):
        return [
            (tool, code_cell(str(key), _NAME_LIMIT), *_values(before.get(key), after.get(key)))
            for key in sorted(before.keys() | after.keys())
            if before.get(key) != after.get(key)
        ]
    if change == "changed":
        named = _NONE if field is None else code_cell(str(field), _NAME_LIMIT)
        return [(tool, named, *_values(before, after))]
    entry = after if change == "added" else before
    if not isinstance(entry, dict) or not entry:
        old = _ABSENT if change == "added" else _value(before)
        new = _value(after) if change == "added" else _ABSENT
        return [(tool, f"_({plain_cell(str(change))})_", old, new)]
    rows = []
    for key in sorted(entry):
        value = _value(entry[key])
        old, new = (_ABSENT, value) if change == "added" else (value, _ABSENT)
        rows.append((tool, code_cell(str(key), _NAME_LIMIT), old, new))
    return rows


def _subject(subject: str) -> str:
    """``tool NAME`` as the name; ``component NAME`` keeps its word; others as words."""
    what, _, name = subject.partition(" ")
    if what == "tool" and name:
        return code_cell(name, _NAME_LIMIT)
    if what == "component" and name:
        return f"component {code_cell(name, _NAME_LIMIT)}"
    return plain_cell(subject) if subject else _NONE


def _values(before: object, after: object) -> tuple[str, str]:
    """The old and new cells of a changed field; two texts cut where they first differ.

    Each cell clipped alone at its start gave two equal cells when two long texts
    differ only past the clip (a description whose last sentence was swapped for one
    of the same length): the row said "changed" and showed no change. So when the
    first difference lies past the clip, both cells start a little before it, with
    ``…`` for what is left out and the whole length. Counted in the values' own
    characters, as the clip is (:func:`shown`): counted in escaped ones, two values of
    101 characters, well within the clip, were cut to a window when they held escapes.
    """
    if not isinstance(before, str) or not isinstance(after, str) or before == after:
        return _value(before), _value(after)
    same = next(
        (at for at, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    if same + _CONTEXT <= _VALUE_LIMIT:
        return _value(before), _value(after)
    start = same - _CONTEXT
    return _window(before, start), _window(after, start)


def _window(text: str, start: int) -> str:
    """``text`` from ``start`` as a code span of at most :data:`_VALUE_LIMIT` of its characters.

    Each character escaped whole (:func:`shown`), so no escape (``\\x1b``, ``\\\\``)
    is cut in two and read as another.
    """
    end = start + _VALUE_LIMIT
    tail = "…" if end < len(text) else ""
    return _fenced(f"…{shown(text[start:end])}{tail} ({len(text)} chars)")


def _value(value: object) -> str:
    """A drifted value's cell; an empty text is ``_(empty)_``, veridic's words, as no
    value's code span can be (a span of two quotes showed ``""`` and nothing alike)."""
    if isinstance(value, str):
        return code_cell(value, _VALUE_LIMIT) if value else _EMPTY
    return code_cell(json.dumps(value, ensure_ascii=False, sort_keys=True), _VALUE_LIMIT)
