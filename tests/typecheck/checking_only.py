"""Trusted text declared where only mypy reads it (veridic-forge).

mypy reads the body of "if TYPE_CHECKING:" and skips its "else:"; the run time does the
opposite. A declaration there is a stub inside the module: vetted(reply) type-checked as
trusted while the run time returned the reply, and a component's hint printed it in the
capability section.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Protocol

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


# The same declarations inside a try statement (these were not seen).
try:
    if TYPE_CHECKING:
        # E: [veridic-forge] got "checked_again" declared "TrustedInstruction"
        def checked_again(text: str) -> TrustedInstruction: ...
    else:

        def checked_again(text):  # E: [veridic-forge] got "checked_again" bound again
            return text

except ImportError:
    pass

# What users write for an optional dependency or a name used only in annotations: the
# run time binds a placeholder that holds no text, or imports the very name mypy reads
# (these were refused).
if TYPE_CHECKING:
    from _checked_persona import BANNER as SHOWN
    from _checked_persona import Persona as Shown
    from _checked_persona import Persona as Typed
    from _checked_persona import persona as persona_again
else:
    Shown = object
    Typed = Any
    try:
        from _checked_persona import persona as persona_again
    except ImportError:
        persona_again = None
    from _checked_persona import BANNER as SHOWN


def shown(persona: Shown, typed: Typed) -> None:
    print(persona.rules(), typed.rules(), SHOWN, persona_again())
