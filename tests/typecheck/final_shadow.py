"""A Final class attribute is code text only where no instance can hold its own value."""

from dataclasses import dataclass
from typing import Final

from veridic import TrustedInstruction, instruction


class Prompts:
    TONE: Final = "Be kind."

    def tone(self) -> TrustedInstruction:
        return instruction(self.TONE)


@dataclass
class Persona:
    TONE: Final = "Be kind."

    def tone(self) -> TrustedInstruction:
        return instruction(self.TONE)  # E: [veridic-literal] its constructor takes "TONE"


class Assigned:
    STYLE: Final = "Be concise."

    def __init__(self, style: str) -> None:
        self.STYLE = style  # type: ignore[misc]

    def style(self) -> TrustedInstruction:
        return instruction(self.STYLE)  # E: [veridic-literal] a method of Assigned assigns it


class Inherited(Assigned):
    def again(self) -> TrustedInstruction:
        return instruction(self.STYLE)  # E: [veridic-literal] a method of Assigned assigns it


def read(name: str, prompts: Prompts) -> list[TrustedInstruction]:
    # P: [reportArgumentType]
    persona = Persona(TONE=name)
    return [
        instruction(prompts.TONE),
        instruction(Prompts.TONE),
        instruction(Persona.TONE),
        instruction(Assigned.STYLE),
        instruction(persona.TONE),  # E: [veridic-literal] an instance of Persona sets itself
    ]
