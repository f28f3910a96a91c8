"""Reading a tool's summary and parameter descriptions from its docstring.

A tool's description is written where the tool is defined; for a Python
function that place is the docstring. Three styles are read, because code
bases use all three:

Google::

    Args:
        user_id (int): The user to delete.

NumPy::

    Parameters
    ----------
    user_id : int
        The user to delete.

reST::

    :param user_id: The user to delete.
    :param int user_id: The user to delete.

The description is all the prose before the first section (``Args:``, a
NumPy header, a reST field, a doctest), as Pydantic AI, LangChain and the
OpenAI Agents SDK read it: a second paragraph that says when to use the tool
is for the model too. Wrapped lines are joined by single spaces, paragraphs
by a blank line. A docstring that starts with a section has no description.

>>> doc = parse_docstring('''Delete a user.
...
... Only after the user asked twice.
...
... Args:
...     user_id: The user to delete,
...         by id.
... ''')
>>> doc.summary, doc.parameters
('Delete a user.\\n\\nOnly after the user asked twice.', {'user_id': 'The user to delete, by id.'})
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ParsedDocstring", "parse_docstring"]

_GOOGLE_PARAMETER_HEADERS: Final = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "kwargs",
        "other parameters",
    }
)
_GOOGLE_OTHER_HEADERS: Final = frozenset(
    {
        "attributes",
        "example",
        "examples",
        "note",
        "notes",
        "raises",
        "references",
        "return",
        "returns",
        "see also",
        "todo",
        "warning",
        "warnings",
        "warns",
        "yield",
        "yields",
    }
)
_NUMPY_PARAMETER_HEADERS: Final = frozenset({"parameters", "other parameters"})
_GOOGLE_HEADER: Final = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY: Final = re.compile(r"^\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_RULE: Final = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY: Final = re.compile(
    r"^(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?$"
)
_REST_FIELD: Final = re.compile(r"^:(\w+)(?:\s+([^:]*?))?:(.*)$")
_REST_PARAMETER_FIELDS: Final = frozenset(
    {"param", "parameter", "arg", "argument", "key", "keyword"}
)


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    """The summary paragraph and the documented parameters, by name."""

    summary: str = ""
    parameters: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Read ``doc`` (a raw ``__doc__``, or ``None``) in any of the three styles."""
    if not doc or not doc.strip():
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    parameters: dict[str, str] = {}
    _read_google(lines, parameters)
    _read_numpy(lines, parameters)
    _read_rest(lines, parameters)
    return ParsedDocstring(_summary(lines), parameters)


def _summary(lines: list[str]) -> str:
    """The prose before the first section: paragraphs of lines joined by spaces."""
    paragraphs: list[list[str]] = [[]]
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped and _starts_section(lines, index):
            break
        if stripped:
            paragraphs[-1].append(stripped)
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(paragraph) for paragraph in paragraphs if paragraph)


def _starts_section(lines: list[str], index: int) -> bool:
    line = lines[index].strip()
    header = _GOOGLE_HEADER.match(line)
    if header and header.group(1).lower() in _GOOGLE_PARAMETER_HEADERS | _GOOGLE_OTHER_HEADERS:
        return True
    if index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1]) and line:
        return True
    return _REST_FIELD.match(line) is not None or line.startswith(">>>")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _read_google(lines: list[str], parameters: dict[str, str]) -> None:
    index = 0
    while index < len(lines):
        header = _GOOGLE_HEADER.match(lines[index].strip())
        if not header or header.group(1).lower() not in _GOOGLE_PARAMETER_HEADERS:
            index += 1
            continue
        base = _indent(lines[index])
        index += 1
        body: list[str] = []
        while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > base):
            body.append(lines[index])
            index += 1
        _read_entries(body, parameters)


def _read_entries(body: list[str], parameters: dict[str, str]) -> None:
    indents = [_indent(line) for line in body if line.strip()]
    if not indents:
        return
    entry_indent = min(indents)
    name: str | None = None
    for line in body:
        if not line.strip():
            continue
        if _indent(line) == entry_indent:
            entry = _GOOGLE_ENTRY.match(line.strip())
            name = entry.group(1) if entry else None
            if entry and name is not None:
                parameters[name] = entry.group(2).strip()
        elif name is not None:
            parameters[name] = f"{parameters[name]} {line.strip()}".strip()


def _read_numpy(lines: list[str], parameters: dict[str, str]) -> None:
    index = 0
    while index + 1 < len(lines):
        title = lines[index].strip().lower()
        if title not in _NUMPY_PARAMETER_HEADERS or not _NUMPY_RULE.match(lines[index + 1]):
            index += 1
            continue
        index += 2
        names: list[str] = []
        while index < len(lines):
            line = lines[index]
            if index + 1 < len(lines) and line.strip() and _NUMPY_RULE.match(lines[index + 1]):
                break
            if line.strip() and _indent(line) == 0:
                entry = _NUMPY_ENTRY.match(line.strip())
                names = [n.strip().lstrip("*") for n in entry.group(1).split(",")] if entry else []
                for name in names:
                    parameters.setdefault(name, "")
            elif line.strip():
                for name in names:
                    parameters[name] = f"{parameters[name]} {line.strip()}".strip()
            index += 1


def _read_rest(lines: list[str], parameters: dict[str, str]) -> None:
    name: str | None = None
    base = 0
    for line in lines:
        stripped = line.strip()
        found = _REST_FIELD.match(stripped)
        if found:
            name = None
            words = (found.group(2) or "").split()
            if found.group(1) in _REST_PARAMETER_FIELDS and words:
                name = words[-1].lstrip("*")
                base = _indent(line)
                parameters[name] = found.group(3).strip()
        elif name is not None and stripped and _indent(line) > base:
            parameters[name] = f"{parameters[name]} {stripped}".strip()
        elif stripped:
            name = None
