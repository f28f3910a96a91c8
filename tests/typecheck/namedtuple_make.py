"""A NamedTuple's trusted field filled by _make() with other text (veridic-forge).

typeshed types NamedTuple._make(iterable) as taking an Iterable[Any] and returning the
class: Persona._make([reply]) gave a plain str the type of the prompt field, which a
TrustedText position (a component's hint) printed in the capability section.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

from veridic import TrustedInstruction, instruction

reply = os.environ["REPLY"]
row: list[str] = json.loads(reply)
loose: Any = json.loads(reply)


class Persona(NamedTuple):
    prompt: TrustedInstruction
    size: int = 0


class Row(NamedTuple):
    name: str
    size: int


made = Persona._make([reply])  # E: [veridic-forge] the field "prompt" of "Persona"
from_row = Persona._make(row)  # E: [veridic-forge] the field "prompt" of "Persona"
from_any = Persona._make(loose)  # E: [veridic-any] the field "prompt" of "Persona"
shifted = Persona._make([1, instruction("Be brief.")])  # E: [veridic-forge] "prompt"
by_name = Persona._make(iterable=[reply])  # E: [veridic-forge] the field "prompt" of "Persona"
unpacked = Persona._make(*[[reply]])  # E: [veridic-forge] got unpacked arguments

# Accepted: each trusted field gets minted text (a display read item by item, or an
# iterable of trusted text), or the class holds no trusted field.
minted = Persona._make([instruction("Be brief."), 2])
pair = Persona._make((instruction("Be brief."), 2))
copied = Persona._make(minted)
texts: list[TrustedInstruction] = [instruction("Be brief.")]
listed = Persona._make(texts)
plain = Row._make([reply, 1])
plain_by_name = Row._make(iterable=[reply, 1])
plain_unpacked = Row._make(*[[reply, 1]])
hint: TrustedInstruction = minted.prompt
