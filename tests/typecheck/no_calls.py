"""A module that makes no call at all is walked too (no call hook runs in it).

mypy runs no call hook here, so the plugin walks the module at the end of its
check: a function that trusts its parameter kept in a Callable[[str], R] (another
module calls it with any str), a cast() to a brand or to a Literal hidden in a
helper's return, an import of a private minting name. (An item read or written, a
display of a dict, list or set, and a value given where a Protocol with __call__ is
expected are calls to mypy: this module holds none.)
"""

from collections.abc import Callable
from typing import Final, Literal, cast

import _helpers

from veridic import TrustedInstruction, instruction
from veridic.text.provenance import mint as minted  # E: [veridic-forge] an import outside veridic

Mode = Literal["short", "long"]
Mint = Callable[[str], TrustedInstruction]
TONE: Final = "Be brief."


# E: [veridic-literal] instruction() passed as a value
# P: [reportAssignmentType]
mint: Mint = instruction
# E: [veridic-literal] rule() passed as a value
# P: [reportAssignmentType]
kept: Callable[[str], TrustedInstruction] = _helpers.rule


def forged(text: str) -> TrustedInstruction:
    return cast(TrustedInstruction, text)  # E: [veridic-forge] a cast() to TrustedInstruction


def to_mode(raw: str) -> Mode:
    return cast(Mode, raw)  # E: [veridic-literal] returned from to_mode()


# Neighbours that stay clean: types, a read of an attribute, casts that give no Literal.
doc = instruction.__doc__
minted_name = minted.__name__
fallback: Mode = "short"
length: int = cast(int, TONE)


def chosen(brief: bool) -> Mode:
    return "short" if brief else "long"


def widened(raw: str) -> str:
    return cast(Mode, raw)
