"""A function over a constrained TypeVar is judged like any other function.

mypy checks such a function once per constraint, each time on a copy of its body
whose names are new variables: the plugin must look at the copy it is checking.
"""

from typing import Any, Generic, Literal, LiteralString, TypeVar

from veridic import TrustedInstruction, instruction

AnyText = TypeVar("AnyText", str, bytes)
Mode = Literal["short", "long"]


def plain(tail: LiteralString) -> TrustedInstruction:
    return instruction(tail)


def beside_text(data: AnyText, tail: LiteralString) -> tuple[AnyText, TrustedInstruction]:
    return data, instruction(tail)


def beside_text_default(data: AnyText, tail: LiteralString = "Be brief.") -> TrustedInstruction:
    return instruction(tail)


def beside_text_star(data: AnyText, *tails: LiteralString) -> list[TrustedInstruction]:
    return [instruction(tail) for tail in tails]


def beside_text_display(data: AnyText) -> list[TrustedInstruction]:
    return [instruction(rule) for rule in ("Be brief.", "Cite sources.")]


def beside_text_nested(data: AnyText, tail: LiteralString) -> TrustedInstruction:
    def inner() -> TrustedInstruction:
        return instruction(tail)

    return inner()


def beside_text_rebound(data: AnyText, tail: LiteralString, other: str) -> TrustedInstruction:
    # P: [reportAssignmentType]
    tail += other
    return instruction(tail)  # E: [veridic-literal] binds to other text


def beside_text_any(data: AnyText, raw: Any) -> TrustedInstruction:
    mode: Mode = raw
    return instruction(mode)  # E: [veridic-literal] the variable "mode", typed Literal


class Framed(Generic[AnyText]):
    def rule(self, data: AnyText, tail: LiteralString) -> TrustedInstruction:
        return instruction(tail)
