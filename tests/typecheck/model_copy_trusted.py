"""model_copy(update=...) into a field that holds trusted text (veridic-forge).

model_copy() skips validation: an InstructionField given a plain str there held it
unminted, mypy read the copy's field as trusted, and the composer refused it.
"""

from pydantic import BaseModel

from veridic import Composer, InstructionField, TrustedInstruction, UntrustedText, instruction


class Persona(BaseModel):
    persona: InstructionField
    topic: str


def copies(
    model: Persona,
    reply: str,
    data: UntrustedText,
    changes: dict[str, str],
    minted: dict[str, TrustedInstruction],
) -> None:
    # E: [veridic-forge] Persona.model_copy() got a value of type "str" in update=
    copied = model.model_copy(update={"persona": reply})
    Composer().system(copied.persona)
    model.model_copy(update={"persona": data})  # E: [veridic-launder] model_copy()
    model.model_copy(update=changes)  # E: [veridic-forge] got the parameter "changes" in update=
    model.model_copy(update={"topic": reply})
    model.model_copy(update={"persona": instruction("Be brief.")})
    model.model_copy(update=minted)
    model.model_copy()
