"""A LiteralString parameter reached through a declaration of plain str is not code text.

mypy reads LiteralString as str, so it accepts an override (or a Protocol's
implementation) that narrows str to LiteralString; a caller holding the base type
passes any str, and the override would mint it as a literal.
"""

from abc import ABC, abstractmethod
from typing import LiteralString, Protocol

from veridic import TrustedInstruction, TrustedText, UntrustedText, instruction


class Base:
    def say(self, text: str) -> TrustedInstruction:
        return instruction("base")

    def both(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)

    def trusted(self, text: TrustedText) -> TrustedInstruction:
        return instruction("base")

    def many(self, *texts: str) -> list[TrustedInstruction]:
        return []

    def data(self, text: UntrustedText) -> TrustedInstruction:
        return instruction("base")


class Override(Base):
    # P: [reportIncompatibleMethodOverride]
    def say(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)  # E: [veridic-literal] callers reach through Base.say()

    def both(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)

    # P: [reportIncompatibleMethodOverride]
    def trusted(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)

    # P: [reportIncompatibleMethodOverride]
    def many(self, *texts: LiteralString) -> list[TrustedInstruction]:
        return [instruction(t) for t in texts]  # E: [veridic-literal] the variable "t"

    # P: [reportIncompatibleMethodOverride]
    def data(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)  # E: [veridic-literal] Base.data()


class Grandchild(Override):
    def both(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)


class Speaker(Protocol):
    def speak(self, text: str) -> TrustedInstruction: ...


class LiteralSpeaker(Protocol):
    def speak(self, text: LiteralString) -> TrustedInstruction: ...


class Named(Speaker):
    # P: [reportIncompatibleMethodOverride]
    def speak(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)  # E: [veridic-literal] Speaker.speak()


class Structural:
    def speak(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)  # E: [veridic-literal] the Protocol Speaker.speak()


class Unrelated:
    def shout(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)


class Rule(ABC):
    @abstractmethod
    def render(self, text: str) -> TrustedInstruction: ...


class Concrete(Rule):
    # P: [reportIncompatibleMethodOverride]
    def render(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)  # E: [veridic-literal] Rule.render()


class Static(Base):
    @staticmethod
    def helper(text: LiteralString) -> TrustedInstruction:
        return instruction(text)


def callers(base: Base, speaker: Speaker, literal: LiteralSpeaker, name: str) -> None:
    base.say(name)
    speaker.speak(name)
    literal.speak("fine")
    # P: [reportArgumentType]
    literal.speak(name)  # E: [veridic-literal] takes text written in code for "text"
    # P: [reportArgumentType]
    Override().say(name)  # E: [veridic-literal] Override.say()
