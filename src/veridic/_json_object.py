"""JSON read whole and written so that it can be kept.

``json.loads`` keeps the last of two equal keys, so ``{"amount": 5, "amount": 5000}``
reads as 5000 without a word, and a reader of the raw text (a reviewer, a log) may
see the 5. The executor, the plan normalizer and the deferred approvals read
arguments with :func:`loads`, which raises :class:`RepeatedKeyError` instead.

A document veridic hands out to be kept (a conversation, a paused run) is
written with :func:`dumps`: readable, and always encodable as UTF-8, which
``json.dumps(..., ensure_ascii=False)`` is not when the text holds a lone
surrogate (valid JSON a model writes as ``"\\ud800"``).
"""

from __future__ import annotations

import json
import re
from typing import Final

from veridic._sample import clip

__all__ = ["RepeatedKeyError", "dumps", "loads"]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class RepeatedKeyError(ValueError):
    """A JSON object gives one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {clip(key)} is given twice")
        self.key = key


def loads(text: str | bytes) -> object:
    """``json.loads(text)``, refusing an object that gives a key twice.

    Bytes are read as ``json.loads`` reads them (UTF-8, UTF-16 or UTF-32).

    Raises:
        ValueError: ``text`` is not JSON (``json.JSONDecodeError``), gives a key
            twice in one object (:class:`RepeatedKeyError`), or nests deeper than
            Python's recursion limit lets ``json`` read (a ``ValueError`` that says
            so: ``json`` raises a bare ``RecursionError``, which the callers, who
            refuse what is not JSON, would let escape unrecorded).
    """
    try:
        return json.loads(text, object_pairs_hook=_once)
    except RecursionError:
        raise ValueError(
            "it is nested too deeply to read (arrays or objects inside one another past "
            "Python's recursion limit)"
        ) from None


def _once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise RepeatedKeyError(key)
        found[key] = value
    return found


def dumps(value: object) -> str:
    """Compact JSON text of ``value`` that UTF-8 can encode, and that reads back equal.

    Non-ASCII characters are written as they are, unless the text holds a lone
    surrogate (UTF-8 cannot encode one, so a store, a file or a session would
    refuse the whole document): then every non-ASCII character is written as
    a ``\\u`` escape, which :func:`loads` reads back to the same string (JSON
    has no way to write a lone high surrogate followed by a lone low one: the
    two read back as the one character they spell together).

    >>> dumps({"a": "é"})
    '{"a":"é"}'
    >>> dumps({"a": "é\\ud800"})
    '{"a":"\\\\u00e9\\\\ud800"}'
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if _SURROGATE.search(text):
        return json.dumps(value, separators=(",", ":"))
    return text
