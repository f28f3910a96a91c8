"""A brand's constructor passed as a value, or a cast() to a brand, forges trust (veridic-forge).

mypy types what the constructor returns as the brand, wherever it is called; a cast
changes only what mypy believes. The composer refuses the value, but a TrustedText
position (a Deny reason) cannot tell it from text written in code.
"""

import functools
import os
from collections.abc import Callable
from typing import Annotated, NamedTuple, NewType, TypeAlias, TypedDict, TypeVar, cast

from pydantic import TypeAdapter

import veridic
from veridic import Deny, InstructionField, TrustedInstruction, UntrustedText, instruction

reply = os.environ["REPLY"]
texts = [reply]

# E: [veridic-forge] TrustedInstruction(...) passed as a value
minted = list(map(TrustedInstruction, texts))
Deny({"export"}, reason=minted[0])
# E: [veridic-forge] TrustedInstruction(...) passed as a value
adapted = TypeAdapter(TrustedInstruction).validate_python(reply)
# E: [veridic-forge] TypeAdapter, a callback
listed = TypeAdapter(list[TrustedInstruction]).validate_python(texts)
# mypy's own hook on partial() checks the call the partial makes: a second report.
# E: [veridic-forge] passed as a value
# E: [veridic-forge] TrustedInstruction(...) forges trust
later = functools.partial(veridic.TrustedInstruction)
branded = list(map(UntrustedText, texts))  # E: [veridic-forge] untrusted(text, source=
Forge = TrustedInstruction
forged = list(map(Forge, texts))  # E: [veridic-forge] TrustedInstruction(...) passed as a value
handlers = {"forge": TrustedInstruction}  # E: [veridic-forge] passed as a value


def maker() -> Callable[[str], TrustedInstruction]:
    return TrustedInstruction  # E: [veridic-forge] passed as a value


def trusted(text: str) -> TrustedInstruction:
    # A cast hidden in a helper: its callers get a TrustedInstruction nothing minted.
    return cast(TrustedInstruction, text)  # E: [veridic-forge] a cast() to TrustedInstruction


Deny({"export"}, reason=trusted(reply))
optional = cast("list[TrustedInstruction] | None", texts)  # E: [veridic-forge] a cast() to
field = cast(InstructionField, reply)  # E: [veridic-forge] a cast() to TrustedInstruction
labelled = cast(UntrustedText, reply)  # E: [veridic-forge] a cast() to UntrustedText

# Type-only uses, the brand's attributes, InstructionField's validation and other casts
# stay clean.
T = TypeVar("T", bound=TrustedInstruction)
Sub = NewType("Sub", TrustedInstruction)
Parts: TypeAlias = list[TrustedInstruction]
Marked = Annotated[TrustedInstruction, "marked"]
empty = list[TrustedInstruction]()


class Row(NamedTuple):
    text: TrustedInstruction


Typed = TypedDict("Typed", {"text": TrustedInstruction})  # noqa: UP013
name = TrustedInstruction.__name__
stored = TypeAdapter(InstructionField).validate_python(reply)
F = InstructionField
also_stored = TypeAdapter(F).validate_python(reply)
number = cast(int, os.environ.get("N"))
rule: TrustedInstruction = instruction("Be brief.")
