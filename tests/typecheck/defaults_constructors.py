"""Defaults of LiteralString parameters, and classes built with __new__ as well as __init__."""

from typing import Final, LiteralString, NamedTuple

from _constants import NOT_LITERAL

from veridic import TrustedInstruction, instruction

DEFAULT: Final = "Be brief."
COMPUTED: Final = DEFAULT.upper()


def literal_default(text: LiteralString = "Be brief.") -> TrustedInstruction:
    return instruction(text)


def final_default(text: LiteralString = DEFAULT) -> TrustedInstruction:
    return instruction(text)


def no_default(text: LiteralString | None = None) -> TrustedInstruction:
    return instruction("none") if text is None else instruction(text)


# pyright reads DEFAULT.upper() as a LiteralString
def computed_default(text: LiteralString = COMPUTED) -> TrustedInstruction:
    return instruction(text)  # E: [veridic-literal] whose default is not text written in code


def imported_default(text: LiteralString = NOT_LITERAL) -> TrustedInstruction:
    return instruction(text)  # E: [veridic-literal] the Final name "NOT_LITERAL"


def outer(name: str) -> TrustedInstruction:
    # P: [reportArgumentType]
    def inner(text: LiteralString = name) -> TrustedInstruction:
        return instruction(text)  # E: [veridic-literal] whose default

    return inner()


class Made:
    def __new__(cls, text: LiteralString) -> "Made":
        instruction(text)
        return super().__new__(cls)


class Twin:
    def __new__(cls, text: LiteralString) -> "Twin":
        # E: [veridic-literal] Twin() calls, which mypy checks against Twin.__init__()
        instruction(text)
        return super().__new__(cls)

    def __init__(self, text: str) -> None:
        self.text = text


class Both:
    def __new__(cls, text: LiteralString) -> "Both":
        instruction(text)
        return super().__new__(cls)

    def __init__(self, text: LiteralString) -> None:
        instruction(text)


class Rule(NamedTuple):
    text: LiteralString


def callers(name: str) -> None:
    Made("written in code")
    # P: [reportArgumentType]
    Made(name)  # E: [veridic-literal] Made() takes text written in code for "text"
    # P: [reportArgumentType]
    Twin(name)
    # P: [reportArgumentType] # P: [reportArgumentType]
    Both(name)  # E: [veridic-literal] Both() takes text written in code
    Rule("written in code")
    # P: [reportArgumentType]
    Rule(name)  # E: [veridic-literal] Rule() takes text written in code for "text"
    computed_default()
