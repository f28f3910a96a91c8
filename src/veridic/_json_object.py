"""The model's JSON arguments read whole: a key written twice is refused, not decided by order.

``json.loads`` keeps the last of two equal keys, so ``{"amount": 5, "amount": 5000}``
reads as 5000 without a word, and a reader of the raw text (a reviewer, a log) may
see the 5. The executor, the plan normalizer and the deferred approvals read
arguments with :func:`loads`, which raises :class:`RepeatedKeyError` instead.
"""

from __future__ import annotations

import json

from veridic._sample import clip

__all__ = ["RepeatedKeyError", "loads"]


class RepeatedKeyError(ValueError):
    """A JSON object gives one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {clip(key)} is given twice")
        self.key = key


def loads(text: str) -> object:
    """``json.loads(text)``, refusing an object that gives a key twice.

    Raises:
        ValueError: ``text`` is not JSON (``json.JSONDecodeError``) or gives a key
            twice in one object (:class:`RepeatedKeyError`).
    """
    return json.loads(text, object_pairs_hook=_once)


def _once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise RepeatedKeyError(key)
        found[key] = value
    return found
