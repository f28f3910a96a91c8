"""A LiteralString parameter whose callers the plugin cannot check is not code text.

mypy keeps an overloaded function, and a property with a setter, as one overloaded
definition; the plugin checks no caller of an overloaded function and no
assignment to a property, so any str reaches the implementation or the setter.
"""

from typing import LiteralString, overload

from veridic import TrustedInstruction, instruction


@overload
def rule(text: LiteralString) -> TrustedInstruction: ...
@overload
def rule(text: LiteralString, weight: int) -> TrustedInstruction: ...
def rule(text: LiteralString, weight: int = 0) -> TrustedInstruction:
    return instruction(text)  # E: [veridic-literal] the overloaded function rule()


@overload
def rules(*texts: LiteralString) -> list[TrustedInstruction]: ...
@overload
def rules(*texts: LiteralString, weight: int) -> list[TrustedInstruction]: ...
def rules(*texts: LiteralString, weight: int = 0) -> list[TrustedInstruction]:
    return [instruction(t) for t in texts]  # E: [veridic-literal] the variable "t"


class Persona:
    def __init__(self) -> None:
        self._rule = instruction("Be helpful.")

    @property
    def rule(self) -> TrustedInstruction:
        return self._rule

    @rule.setter
    def rule(self, text: LiteralString) -> None:
        self._rule = instruction(text)  # E: [veridic-literal] the setter of the property rule

    def plain(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)  # a method called by its name: its callers are checked


def plain(text: LiteralString) -> TrustedInstruction:
    return instruction(text)
