"""The hash of a prompt's pieces: :attr:`Prompt.sha256 <veridic.Prompt.sha256>`'s encoding.

Private and below both the prompt and its saved document: the prompt hashes
its messages, and the document (:mod:`veridic.text.document`) hashes its own
again, to refuse a text changed after it was written. One function, so the
two cannot hash differently.
"""

from __future__ import annotations

import hashlib
from typing import Final

_HASH_HEADER: Final = b"veridic.prompt/2\0"
_SLICE: Final = 1 << 20
"""Code points encoded at a time: a 10 MB text is never copied into one 10 MB ``bytes``."""


def _digest(pieces: list[str]) -> str:
    """SHA-256 of ``len:text`` per piece: short pieces encoded together, long ones in slices."""
    state = hashlib.sha256(_HASH_HEADER)
    batch: list[str] = []
    size = 0
    for text in pieces:
        if len(text) > _SLICE:
            if batch:
                state.update("".join(batch).encode("utf-8", "surrogatepass"))
                batch, size = [], 0
            state.update(f"{len(text)}:".encode("ascii"))
            for start in range(0, len(text), _SLICE):
                state.update(text[start : start + _SLICE].encode("utf-8", "surrogatepass"))
            continue
        batch += (f"{len(text)}:", text)
        size += len(text)
        if size > _SLICE:
            state.update("".join(batch).encode("utf-8", "surrogatepass"))
            batch, size = [], 0
    if batch:
        state.update("".join(batch).encode("utf-8", "surrogatepass"))
    return state.hexdigest()
