"""An attribute declared trusted over a base's attribute that takes any text (veridic-forge).

mypy accepts the narrower redeclaration (its mutable-override code is off by default),
and checks a write through the base against the base's str: fill(page) put the reply
in page.prompt, which a read through TrustedPage typed trusted, and a TrustedText
position (a component's hint) printed it in the capability section.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from veridic import TrustedInstruction, UntrustedText, instruction

reply = os.environ["REPLY"]
Text = TypeVar("Text", bound=str)


class Page:
    def __init__(self) -> None:
        self.prompt: str = ""
        self.footer: str = ""


class TrustedPage(Page):
    prompt: TrustedInstruction  # E: [veridic-forge] of its base class "Page"

    def __init__(self) -> None:
        super().__init__()
        # pyright reports the first assignment of each narrowed attribute.
        # P: [reportIncompatibleVariableOverride]
        self.prompt = instruction("Answer in French.")
        # E: [veridic-forge] got "footer" declared "TrustedInstruction" over
        # P: [reportIncompatibleVariableOverride]
        self.footer: TrustedInstruction = instruction("Sign as the bot.")


def fill(page: Page) -> None:
    page.prompt = reply


class Settings:
    tone: str = "Be brief."


class Trusted(Settings):
    pass


class Grandchild(Trusted):
    # The base's attribute may be further up the MRO.
    # P: [reportIncompatibleVariableOverride]
    tone: TrustedInstruction = instruction("Be brief.")  # E: [veridic-forge] base class "Settings"


@dataclass
class Note:
    text: str | None = None


@dataclass
class SignedNote(Note):
    # P: [reportIncompatibleVariableOverride]
    text: TrustedInstruction | None = None  # E: [veridic-forge] its base class "Note"


class WithSetter:
    @property
    def rules(self) -> str:
        return ""

    @rules.setter
    def rules(self, value: str) -> None:
        pass


class OverSetter(WithSetter):
    # E: [veridic-forge] its base class "WithSetter", which takes "str"
    # P: [reportIncompatibleMethodOverride]
    rules: TrustedInstruction = instruction("Keep it short.")


# Accepted: the base already holds trusted text, or cannot be written (Final, a read-only
# property), or the override is no narrower than the base.
class Persona:
    rules: TrustedInstruction = instruction("Be polite.")
    limit: Final[str] = "none"

    @property
    def title(self) -> str:
        return ""


class Pirate(Persona):
    rules: TrustedInstruction = instruction("Talk like a pirate.")

    @property
    def title(self) -> TrustedInstruction:
        return instruction("Captain")


class Loose(Page):
    prompt: str
    footer: str


class Data(Page):
    prompt: UntrustedText  # P: [reportIncompatibleVariableOverride]


class Holder(Generic[Text]):
    def __init__(self, item: Text) -> None:
        self.item = item


class TrustedHolder(Holder[TrustedInstruction]):
    # The base's attribute, as this class fills it in, takes trusted text already.
    item: TrustedInstruction


class LooseHolder(Holder[str]):
    # pyright reads an attribute the base only assigns (no declaration) as no override.
    item: TrustedInstruction  # E: [veridic-forge] which takes "str"


# An Optional narrowed to its trusted type gives no text the brand: a write through the
# base can put None there, not a reply (these were refused).
SIGNATURE = instruction("Sign as the bot.")


@dataclass
class Draft:
    prompt: TrustedInstruction | None = None
    rules: list[TrustedInstruction] | None = None


@dataclass
class Signed(Draft):
    # P: [reportIncompatibleVariableOverride]
    prompt: TrustedInstruction = SIGNATURE
    # P: [reportIncompatibleVariableOverride]
    rules: list[TrustedInstruction] = field(default_factory=list)


# A base that takes Any takes any text (this was accepted).
class Loosely:
    prompt: Any = ""


class Tightly(Loosely):
    # E: [veridic-forge] its base class "Loosely", which takes "Any"
    prompt: TrustedInstruction = instruction("Be brief.")
