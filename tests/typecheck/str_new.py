"""A value made by str.__new__() with the class of trusted text (veridic-forge).

typeshed types str.__new__(cls, object) as returning an instance of cls: given the class
of a minted value (type(minted), or type(x) for an x typed by a type variable that a
TrustedInstruction fills), it made a value typed trusted from any text. At run time the
value is of veridic's class without its provenance: the composer refuses it, but a
TrustedText position (a component's hint) printed it in the capability section.
"""

from __future__ import annotations

import os
from typing import Self, TypeVar

from veridic import TrustedInstruction, instruction

reply = os.environ["REPLY"]
minted = instruction("Be brief.")
Text = TypeVar("Text", bound=str)
Name = TypeVar("Name", bound="Slug")
Kind = TypeVar("Kind")


# E: [veridic-forge] __new__() called by its name
forged: TrustedInstruction = str.__new__(type(minted), reply)


def rebuilt(text: Text, raw: str) -> Text:
    return str.__new__(type(text), raw)  # E: [veridic-forge] a type variable


again: TrustedInstruction = rebuilt(minted, reply)
# E: [veridic-forge] got the class of "TrustedInstruction"
through_class: TrustedInstruction = type(minted).__new__(type(minted), reply)


# Accepted: a class of the project's own that holds no trusted text, its own __new__, a
# type variable bound to such a class, and one bound to no text.
class Slug(str):
    def __new__(cls, value: str) -> Self:
        return str.__new__(cls, value.strip().lower())


def slugged(slug: Name, raw: str) -> Name:
    return str.__new__(type(slug), raw)


def build(kind: type[Kind]) -> Kind:
    return kind.__new__(kind)  # a generic factory over any class makes no text


plain = str.__new__(str, reply)
slug = str.__new__(Slug, reply)
