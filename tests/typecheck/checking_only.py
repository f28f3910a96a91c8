"""Trusted text declared where only mypy reads it (veridic-forge).

mypy reads the body of "if TYPE_CHECKING:" and skips its "else:"; the run time does the
opposite. A declaration there is a stub inside the module: vetted(reply) type-checked as
trusted while the run time returned the reply, and a component's hint printed it in the
capability section.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol

from veridic import instruction

reply = os.environ["REPLY"]

if TYPE_CHECKING:
    from _checked_persona import Persona, persona

    from veridic import TrustedInstruction

    # E: [veridic-forge] got "vetted" declared "TrustedInstruction" with no implementation
    def vetted(text: str) -> TrustedInstruction: ...

    BANNER: TrustedInstruction  # E: [veridic-forge] got "BANNER" declared

    class Loaded:
        # E: [veridic-forge] got "rules" declared "list[TrustedInstruction]"
        # P: [reportReturnType]
        def rules(self) -> list[TrustedInstruction]:
            """Read from the store."""

        title: TrustedInstruction  # E: [veridic-forge] got "title" declared

    # A body mypy checks, a Protocol's members and abstract methods are declarations that
    # what implements them is checked against; a parameter demands trust and gives none.
    def checked() -> TrustedInstruction:
        return instruction("Be brief.")

    class Source(Protocol):
        prompt: TrustedInstruction

        def render(self) -> TrustedInstruction: ...

    class Base(ABC):
        @abstractmethod
        def render(self) -> TrustedInstruction: ...

    def takes(text: TrustedInstruction) -> None: ...
else:

    def vetted(text):  # E: [veridic-forge] got "vetted" bound again
        return text

    BANNER = reply  # E: [veridic-forge] got "BANNER" bound again
    # E: [veridic-forge] got "persona" bound again
    from os import getcwd as persona  # noqa: F401

    class Persona:  # E: [veridic-forge] got "Persona" bound again
        def rules(self):
            return reply

    TrustedInstruction = str  # a type-only name: mypy reads no trusted value there

    def takes(text):
        print(text)


if not TYPE_CHECKING:
    checked = vetted  # E: [veridic-forge] got "checked" bound again


class Page:
    if TYPE_CHECKING:
        prompt: TrustedInstruction  # E: [veridic-forge] got "prompt" declared
    else:
        prompt = reply  # E: [veridic-forge] got "prompt" bound again

    def __init__(self) -> None:
        self.body = instruction("Be brief.")
