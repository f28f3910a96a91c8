"""What an MCP server showed when someone reviewed it, and what differs now.

Trust on first use: ``veridic mcp pin`` records every tool a server lists
(name, description, input schema, annotations) in a JSON file that is
reviewed and committed like the manifest. On later runs each listed tool is
compared with its record; a tool whose description, schema or annotations
changed, a tool the server added, and a pinned tool it no longer lists are
kept out of every view with a reason naming what changed (the rug pull: a
server that rewrites a description after it was approved).

Annotations are pinned too although the model never sees them: they choose
an undeclared tool's default risk, so a server that flips ``destructiveHint``
could otherwise lower it.

The file holds each entry's ``pin`` (:func:`veridic.tools.tool.tool_pin` of
name, description and schema) beside the fields it covers, so an entry
edited by hand, whose fields no longer give its pin, is refused when the file
is read rather than trusted.

A name is one tool: a listing or a file that holds a name twice is refused,
never reduced to one of its copies, because which copy a comparison kept and
which one a client registers could differ (a reviewed copy compared, a
rewritten one registered as if it matched).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from veridic._counted import counted
from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.text.provenance import TrustedInstruction, instruction, join
from veridic.text.provenance_map import _hidden
from veridic.text.terminal_view import visible
from veridic.tools.pins import _tool_pin
from veridic.tools.tool import JsonObject, tool_pin

__all__ = ["FORMAT", "Part", "PinChange", "PinnedTool", "Pins", "render_changes"]

FORMAT: Final = "veridic-mcp-pins/1"

Part = Literal["description", "input schema", "annotations"]
"""A part of a listed tool that its pin covers."""

_PART_TEXT: Final[Mapping[Part, TrustedInstruction]] = {
    "description": instruction("its description"),
    "input schema": instruction("its input schema"),
    "annotations": instruction("its annotations"),
}


@dataclass(frozen=True, slots=True)
class PinnedTool:
    """One tool as the server lists it: what the model is shown, and the server's hints."""

    name: str
    description: str
    input_schema: JsonObject
    annotations: JsonObject

    @property
    def pin(self) -> str:
        """The pin of what the model is shown (``tool-sha256:...``).

        Raises:
            ProvenanceError: the tool is as a server listed it (:func:`list_tools` brands
                its description untrusted), not as a person reviewed it: a pin of it
                would vouch for whatever the server says now. Record it in a pins file.
        """
        return tool_pin(self.name, self.description, self.input_schema)

    def as_json(self) -> JsonObject:
        """The tool as a pins file records it, for a person to review (its pin
        computed as it is, reviewed or not: the file is where the review happens)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
            "pin": _tool_pin(self.name, self.description, self.input_schema),
        }


@dataclass(frozen=True, slots=True)
class PinChange:
    """How a listed tool differs from its record.

    ``kind`` is ``"changed"`` (``parts`` says which), ``"new"`` (listed, never
    recorded) or ``"gone"`` (recorded, no longer listed); ``old`` and ``new``
    are the two versions (``None`` where there is none).
    """

    tool: str
    kind: Literal["changed", "new", "gone"]
    parts: tuple[Part, ...] = ()
    old: PinnedTool | None = None
    new: PinnedTool | None = None

    @property
    def reason(self) -> TrustedInstruction:
        """Why the tool is unavailable, as the capability section says it (written here)."""
        if self.kind == "new":
            return instruction(
                "the MCP server lists it but its pins do not: review it with "
                "veridic mcp pin --check, then record the pins again"
            )
        if self.kind == "gone":
            return instruction("the MCP server no longer lists it")
        return self._changed(
            instruction(
                " changed since its pin was recorded: review the change with "
                "veridic mcp pin --check, then record the pins again"
            )
        )

    @property
    def since_registered(self) -> TrustedInstruction:
        """Why a tool of a connection without pins is withheld: it changed after ``connect``
        registered it (there is no pin to speak of, nor one to record again)."""
        if self.kind != "changed":
            return self.reason
        return self._changed(
            instruction(
                " changed after the tool was registered (the MCP server is not pinned): "
                "connect again, with a new registry, to take the new version, after "
                "reviewing it (veridic mcp pin records pins)"
            )
        )

    def _changed(self, since: TrustedInstruction) -> TrustedInstruction:
        """The parts that changed ("its description and its input schema"), then ``since``."""
        return join([join([_PART_TEXT[p] for p in self.parts], sep=" and "), since], sep="")


@dataclass(frozen=True, slots=True)
class Pins:
    """The recorded tools of one MCP server."""

    server: str
    tools: Mapping[str, PinnedTool]

    @staticmethod
    def of(server: str, listed: Iterable[PinnedTool]) -> Pins:
        """Pins recording ``listed`` as they are now (what ``veridic mcp pin`` writes).

        Made of :func:`list_tools`'s answer (descriptions branded untrusted) they are
        for a file a person reviews (``Pins.dump()``); ``connect`` refuses them as they
        are, since a pin made at run time vouches for whatever the server says.

        Raises:
            VeridicError: ``listed`` holds a name twice (one name is one tool).
        """
        tools = sorted(listed, key=lambda t: t.name)
        twice = _twice(tools)
        if twice is not None:
            raise VeridicError(
                f"Pins.of({server!r}) got two tools named {clip(twice)}: a name is one tool, "
                "and which copy was reviewed cannot be told; record the pins from one listing "
                "of the server (list_tools() refuses a listing that names a tool twice)"
            )
        return Pins(server, {tool.name: tool for tool in tools})

    @staticmethod
    def load(path: str | os.PathLike[str]) -> Pins:
        """Read a pins file.

        Raises:
            VeridicError: the file is missing, not UTF-8, not JSON, not a pins file of
                this format, or an entry's fields do not give its pin (edited by hand).
        """
        where = os.fspath(path)
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise VeridicError(
                f"MCP pins {where!r} cannot be read ({error.strerror or error}): record them "
                "with veridic mcp pin MODULE:SERVER -o FILE, or pass the right path"
            ) from error
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:  # saved again by an editor in another encoding
            raise VeridicError(
                f"MCP pins {where!r} are not UTF-8 ({error.reason} at byte {error.start}), so "
                "not a pins file veridic wrote: record them again with veridic mcp pin "
                f"MODULE:SERVER -o {where}"
            ) from error
        return Pins.loads(text, where)

    @staticmethod
    def loads(text: str, where: str = "<pins>") -> Pins:
        """:meth:`load` from text; ``where`` names it in errors.

        Raises:
            VeridicError: as :meth:`load`; and the text holds, as itself, a character
                a reader cannot see (see ``_refuse_unseen``).
        """
        _refuse_unseen(text, where)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise VeridicError(
                f"MCP pins {where!r} are not JSON ({error.msg} at line {error.lineno}): "
                "record them again with veridic mcp pin"
            ) from error
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise VeridicError(
                f"MCP pins {where!r} are not a pins file of format {FORMAT!r} (found "
                f"{found!r}): record them with veridic mcp pin"
            )
        server, entries = data.get("server"), data.get("tools")
        if not isinstance(server, str) or not isinstance(entries, list):
            raise VeridicError(
                f"MCP pins {where!r} need a 'server' name and a 'tools' list: record them again "
                "with veridic mcp pin"
            )
        tools = [_entry(entry, where, index) for index, entry in enumerate(entries)]
        twice = _twice(tools)
        if twice is not None:
            raise VeridicError(
                f"MCP pins {where!r} hold two entries of tool {clip(twice)}: a name is one tool, "
                "and which entry was reviewed cannot be told (the file was edited by hand or "
                "merged badly); review the server's tool and record the pins again with "
                "veridic mcp pin"
            )
        return Pins.of(server, tools)

    def dumps(self) -> str:
        """The file's text: sorted, indented, one entry per tool (diffs review well).

        Every character a reader cannot see (a control, a zero-width or bidi
        character, a Unicode tag) is written as a JSON escape: the file is what a
        person reviews before a pinned description reaches the capability section
        as instruction, and written as itself such a character hid words (a
        model reads tag characters as text) from every editor and pull request.
        """
        document = {
            "format": FORMAT,
            "server": self.server,
            "tools": [tool.as_json() for tool in self.tools.values()],
        }
        return _shown_escaped(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`dumps` to ``path``, making its folder first (as ``veridic mcp pin -o``
        does): a pins file is usually kept beside the code, in a folder of its own.

        Raises:
            VeridicError: the folder cannot be made or the file cannot be written.
        """
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.dumps(), encoding="utf-8")
        except OSError as error:
            raise VeridicError(
                f"MCP pins {os.fspath(path)!r} cannot be written ({error.strerror or error}): "
                "choose a writable path"
            ) from error

    def compare(self, listed: Iterable[PinnedTool]) -> tuple[PinChange, ...]:
        """Every difference between the record and ``listed``, sorted by tool name.

        Raises:
            VeridicError: ``listed`` names a tool twice. Kept to one copy, the
                comparison could pass on the reviewed copy while a client
                registers the other one.
        """
        tools = list(listed)
        twice = _twice(tools)
        if twice is not None:
            raise VeridicError(
                f"the listing compared with the pins of MCP server {self.server!r} names tool "
                f"{clip(twice)} twice: a name is one tool, and which copy a client would use "
                "cannot be told; refuse the listing (list_tools() and connect() do) and fix "
                "the server"
            )
        now = {tool.name: tool for tool in tools}
        changes: list[PinChange] = []
        for name in sorted(now.keys() | self.tools.keys()):
            old, new = self.tools.get(name), now.get(name)
            if old is None:
                changes.append(PinChange(name, "new", new=new))
            elif new is None:
                changes.append(PinChange(name, "gone", old=old))
            else:
                parts = _changed_parts(old, new)
                if parts:
                    changes.append(PinChange(name, "changed", parts, old, new))
        return tuple(changes)


def _shown_escaped(text: str) -> str:
    """JSON text with each character nobody sees as its ``\\u`` escape (a tag character as
    its surrogate pair, as JSON writes it), its line breaks kept; one line break after."""
    lines = [
        "".join(json.dumps(c)[1:-1] if _hidden(c, False) else c for c in line)
        for line in text.split("\n")
    ]
    return "\n".join(lines) + "\n"


def _refuse_unseen(text: str, where: str) -> None:
    """Refuse a pins file holding, as itself, a character a reader cannot see.

    :meth:`Pins.dumps` writes each as a ``\\u`` escape, so such a file was written by
    hand, or by a veridic before that, or edited in a pull request with its pin computed
    again (a sha256 anyone can compute): its reviewer read "Search the issues." where the
    pinned description, printed in the capability section as instruction, held hidden
    words. The whitespace JSON allows between tokens (line breaks, a carriage return, a
    tab) is seen, and a raw control inside a string is not JSON anyway.
    """
    flat = text.replace("\n", " ").replace("\r", " ").replace("\t", " ")
    hidden = next((at for at, c in enumerate(flat) if _hidden(c, False)), None)
    if hidden is None:
        return
    line = text.count("\n", 0, hidden) + 1
    start = text.rfind("\n", 0, hidden) + 1
    end = text.find("\n", hidden)
    end = min(hidden + 40, len(text) if end < 0 else end)
    around = visible(text[max(start, hidden - 40) : end].strip(), None)
    raise VeridicError(
        f"MCP pins {where!r} hold U+{ord(text[hidden]):04X} written as itself at line {line}, "
        f"column {hidden - start + 1} ({around}): a character a reader cannot see (a "
        "Unicode tag, which models read as text, a zero-width, bidi or control character) "
        "hides words from whoever reviews the file, and a pinned description reaches the "
        "capability section as instruction; record the pins again with veridic mcp pin "
        "MODULE:SERVER -o FILE, which writes each such character as a \\u escape and warns "
        "of it, and review them"
    )


def _unseen(tool: PinnedTool) -> int:
    """How many characters of ``tool``'s recorded text (keys and values) a reader cannot
    see: counted in the text itself, not in its JSON, where a control is already an
    escape (``\\u001b``) that a reviewer skips as noise. A line break and a tab, which
    JSON writes as ``\\n`` and ``\\t``, are seen."""
    return sum(
        1 for text in _texts(tool.as_json()) for c in text if c not in "\n\t" and _hidden(c, False)
    )


def _texts(value: object) -> Iterator[str]:
    """Every string of a JSON value: its keys and its string values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _twice(tools: Iterable[PinnedTool]) -> str | None:
    """The first name that ``tools`` holds twice, or ``None`` when each name is one tool."""
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            return tool.name
        seen.add(tool.name)
    return None


def _changed_parts(old: PinnedTool, new: PinnedTool) -> tuple[Part, ...]:
    parts: list[Part] = []
    if old.description != new.description:
        parts.append("description")
    if _canonical(old.input_schema) != _canonical(new.input_schema):
        parts.append("input schema")
    if _canonical(old.annotations) != _canonical(new.annotations):
        parts.append("annotations")
    return tuple(parts)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _entry(entry: object, where: str, index: int) -> PinnedTool:
    if not isinstance(entry, dict):
        raise VeridicError(f"MCP pins {where!r}: tools[{index}] is not an object: record again")
    name, description = entry.get("name"), entry.get("description")
    schema, annotations = entry.get("input_schema"), entry.get("annotations", {})
    if not (
        isinstance(name, str)
        and isinstance(description, str)
        and isinstance(schema, dict)
        and isinstance(annotations, dict)
    ):
        raise VeridicError(
            f"MCP pins {where!r}: tools[{index}] needs a name, a description, an input_schema "
            "object and an annotations object: record the pins again with veridic mcp pin"
        )
    tool = PinnedTool(name, description, schema, annotations)
    if entry.get("pin") != tool.pin:
        raise VeridicError(
            f"MCP pins {where!r}: the entry of tool {clip(name)} does not give its own pin "
            f"({entry.get('pin')!r} recorded, {tool.pin!r} from its fields): the file was "
            "edited by hand; review the server's tool and record the pins again"
        )
    return tool


def render_changes(server: str, changes: Iterable[PinChange]) -> str:
    """A Markdown table of the changes (tool, field, pinned, now), for a terminal or a PR.

    Each cell is one line, its control and invisible characters shown as
    ``⟦U+XXXX⟧`` and its pipes escaped; a long value is clipped, and a pinned and
    current value that differ only past the clip are both shown from a little
    before their first difference, so no changed row shows two equal cells.
    """
    rows = [row for change in changes for row in _rows(change)]
    if not rows:
        return f"MCP server {server!r}: every listed tool matches its pin.\n"
    lines = [
        f"MCP server {server!r}: {counted(len(rows), 'difference')} from the pins.",
        "",
        "| tool | field | pinned | now |",
        "| --- | --- | --- | --- |",
    ]
    lines.extend("| " + " | ".join(_cells(row)) + " |" for row in rows)
    return "\n".join(lines) + "\n"


def _cells(row: tuple[str, str, str, str]) -> list[str]:
    """A row's cells; the pinned and the current value cut where they first differ.

    Each value clipped alone at its start gave two equal cells when a description
    changed only past the clip (a sentence appended to a long one: the rug pull this
    table is for), so the row showed no change. When the first difference lies past
    the clip, both values start a little before it, ``...`` marking what is left out.
    """
    tool, field, old, new = (_flat(cell) for cell in row)
    same = next(
        (at for at, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
        min(len(old), len(new)),
    )
    start = 0 if same + _CONTEXT <= _CELL else same - _CONTEXT
    return [_clip(tool), _clip(field), _clip(old, start), _clip(new, start)]


def _rows(change: PinChange) -> Iterator[tuple[str, str, str, str]]:
    if change.kind == "new":
        yield change.tool, "(tool)", "(not pinned)", "listed"
        return
    if change.kind == "gone":
        yield change.tool, "(tool)", "pinned", "(no longer listed)"
        return
    old, new = change.old, change.new
    if old is None or new is None:  # pragma: no cover - a "changed" entry has both
        return
    if "description" in change.parts:
        yield change.tool, "description", old.description, new.description
    if "input schema" in change.parts:
        for path, before, after in _json_diff(old.input_schema, new.input_schema, "input_schema"):
            yield change.tool, path, before, after
    if "annotations" in change.parts:
        for path, before, after in _json_diff(old.annotations, new.annotations, "annotations"):
            yield change.tool, path, before, after


def _json_diff(old: object, new: object, path: str) -> Iterator[tuple[str, str, str]]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys(), key=str):
            yield from _json_diff(old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}.{key}")
    elif old is _ABSENT or new is _ABSENT or _canonical(old) != _canonical(new):
        yield path, _shown(old), _shown(new)


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT: Final = _Absent()


def _shown(value: object) -> str:
    return "(absent)" if value is _ABSENT else _canonical(value)


_CELL: Final = 120
_CONTEXT: Final = 40


def _flat(text: str) -> str:
    """Outside text for one table cell: one line, every control or invisible character
    as ``⟦U+001B⟧`` (an escape sequence in a description cannot repaint the terminal).

    Line breaks and other whitespace are shown as codes too, never folded into one
    space: folded, a description changed only in them (a line break, a no-break space,
    an information separator such as U+001E) showed as two equal cells.
    """
    return visible(text, None)


def _clip(flat: str, start: int = 0) -> str:
    """``flat`` from ``start``, clipped to one cell, pipes escaped (last, so none is cut)."""
    head = "..." if start else ""
    shown = flat[start:]
    if len(head) + len(shown) > _CELL:
        shown = shown[: _CELL - len(head) - 3] + "..."
    return (head + shown).replace("|", "\\|")
