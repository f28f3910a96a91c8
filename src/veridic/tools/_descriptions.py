"""What counts as a real description, and the codes of every documentation gap.

For the model a description is not polish, it is the gate: a tool without
one is a tool it never learns about, and a placeholder is worse, because it
passes a presence check while telling the model nothing. So the registry
withholds a tool whose description is missing, blank, a placeholder (TODO,
TBD, FIXME, XXX, "description", ...) or only its own name, and
:func:`veridic.find_doc_gaps` reports it with the same code.

The codes live here, in one place, so the registry (which withholds) and the
lint (which reports) can never disagree about what is missing.

>>> description_problem("delete_user", "Delete user")
<GapCode.DESCRIPTION_IS_NAME: 'description-is-name'>
>>> description_problem("delete_user", "TODO: describe") is GapCode.PLACEHOLDER_DESCRIPTION
True
>>> description_problem("delete_user", "Permanently delete a user account.") is None
True
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from enum import StrEnum
from typing import Final

from veridic.text.fence import _INVISIBLE_CHAR

__all__ = [
    "GapCode",
    "backticked_names",
    "description_problem",
    "docstrings_stripped",
    "one_line",
]


class GapCode(StrEnum):
    """The kinds of documentation gap; each member is its own string value."""

    MISSING_DESCRIPTION = "missing-description"
    """No description at all: no docstring, a blank one, or no prose before its sections."""
    FSTRING_DOCSTRING = "fstring-docstring"
    """The function starts with an f-string, which Python does not keep as ``__doc__``."""
    PLACEHOLDER_DESCRIPTION = "placeholder-description"
    """A placeholder such as TODO, TBD, FIXME, XXX or "description"."""
    DESCRIPTION_IS_NAME = "description-is-name"
    """The description only repeats the tool's name."""
    UNDOCUMENTED_PARAMETER = "undocumented-parameter"
    """A parameter without a description (docstring section or ``Field(description=...)``)."""
    UNKNOWN_PARAMETER = "unknown-parameter"
    """A description names (in backticks, or in a docstring section) a parameter the tool lacks."""


STRIPPED_FIX: Final = (
    "Python runs with -OO (sys.flags.optimize >= 2), which strips every docstring, so the "
    "tool's docstring is read as none: give the text in code (description=..., and "
    "Annotated[..., Field(description=...)] for a parameter), or run Python without -OO"
)
"""The fix of a description missing under ``-OO`` whose function has a docstring in its
source, in place of "write a docstring"."""

UNDOCUMENTED_UNDER_OO_FIX: Final = (
    "the function has no docstring, and one would not help: Python runs with -OO "
    "(sys.flags.optimize >= 2), which strips every docstring: give the text in code "
    "(description=..., and Annotated[..., Field(description=...)] for a parameter)"
)
"""The fix of a description missing under ``-OO`` whose function has no docstring: running
without ``-OO`` gives it none."""

UNREAD_UNDER_OO_FIX: Final = (
    "Python runs with -OO (sys.flags.optimize >= 2), which strips every docstring, and the "
    "function's source cannot be read to tell whether it has one: give the text in code "
    "(description=..., and Annotated[..., Field(description=...)] for a parameter), or, if "
    "it has a docstring, run Python without -OO"
)
"""The fix of a description missing under ``-OO`` when the function's source cannot be read
(code made by ``exec``, typed at a prompt)."""


def docstrings_stripped() -> bool:
    """Whether Python strips docstrings (``-OO``, ``sys.flags.optimize >= 2``).

    A tool described by its docstring alone then has no description, and a fix that says
    "write a docstring" sends the reader to the one already written: the fix says
    :data:`STRIPPED_FIX` instead.
    """
    return sys.flags.optimize >= 2


WITHHOLDING_CODES: Final = frozenset(
    {
        GapCode.MISSING_DESCRIPTION,
        GapCode.FSTRING_DOCSTRING,
        GapCode.PLACEHOLDER_DESCRIPTION,
        GapCode.DESCRIPTION_IS_NAME,
    }
)
"""The codes that keep a tool out of every view (the others are reported only)."""

_PLACEHOLDER_WORDS: Final = frozenset({"todo", "tbd", "tbc", "fixme", "xxx", "placeholder", "wip"})
_PLACEHOLDER_TEXTS: Final = frozenset(
    {
        "add description",
        "describe",
        "desc",
        "description",
        "docstring",
        "lorem ipsum",
        "n a",
        "na",
        "no description",
        "none",
        "description here",
        "tool",
        "tool description",
        "",
    }
)
_WORDS: Final = re.compile(r"[^\W_]+")
_BACKTICKED: Final = re.compile(r"(?<!`)`([A-Za-z_][A-Za-z0-9_]*)`(?!`)")
_SPACES: Final = re.compile(r"\s+")
_FIRST_WORD: Final = re.compile(r"[\W_]*([^\W_]+)\s*(:?)")


def description_problem(name: str, text: str | None) -> GapCode | None:
    """Why ``text`` is not a real description of tool ``name``, or ``None`` when it is.

    Judged by what a reader sees of it: a description of characters nobody sees (the
    Hangul fillers, which are letters to a regular expression, the braille blank,
    zero-width and other format characters) is missing, and ``T\u200bO\u200bD\u200bO``
    is the placeholder it reads as. The capability section writes such characters as
    codes (``⟦3164⟧``), which tell the model nothing about the tool.
    """
    if text is None:
        return GapCode.MISSING_DESCRIPTION
    text = _seen_only(text)
    if not text.strip():
        return GapCode.MISSING_DESCRIPTION
    words = _WORDS.findall(text.casefold())
    if _starts_with_placeholder(text, len(words)) or " ".join(words) in _PLACEHOLDER_TEXTS:
        return GapCode.PLACEHOLDER_DESCRIPTION
    if "".join(words) == "".join(_WORDS.findall(name.casefold())):
        return GapCode.DESCRIPTION_IS_NAME
    return None


def _seen_only(text: str) -> str:
    """``text`` without the characters a reader does not see: those not printable (but
    whitespace) and the printable ones drawn as nothing (see ``veridic.text.fence``)."""
    if _INVISIBLE_CHAR.search(text) is None and "".join(text.split()).isprintable():
        return text  # the usual case, at C speed
    return "".join(
        char
        for char in text
        if char.isspace() or (char.isprintable() and _INVISIBLE_CHAR.match(char) is None)
    )


def _starts_with_placeholder(text: str, word_count: int) -> bool:
    # "TODO: describe", "FIXME", "tbd" are placeholders; "Todo items of a user." is not.
    first = _FIRST_WORD.match(text)
    if first is None or first.group(1).casefold() not in _PLACEHOLDER_WORDS:
        return False
    return first.group(1).isupper() or first.group(2) == ":" or word_count <= 2


def backticked_names(texts: Iterable[str]) -> list[str]:
    """Identifiers quoted in single backticks, in order (double backticks are code, skipped).

    >>> backticked_names(["Set `user_id`; ``raw`` and `a.b` are not names."])
    ['user_id']
    """
    return [match for text in texts for match in _BACKTICKED.findall(text)]


def one_line(text: str) -> str:
    """``text`` with every run of whitespace turned into one space, for a one-line listing."""
    return _SPACES.sub(" ", text).strip()
