"""model_copy(update=...) into a field that holds trusted text (veridic-forge).

model_copy() skips validation: an InstructionField given a plain str there held it
unminted, mypy read the copy's field as trusted, and the composer refused it.
"""

from typing import Any, TypedDict

from pydantic import BaseModel

from veridic import Composer, InstructionField, TrustedInstruction, UntrustedText, instruction


class Persona(BaseModel):
    persona: InstructionField
    topic: str
    temperature: float = 0.2


class Tuning(TypedDict, total=False):
    temperature: float
    topic: str


class Rewrite(TypedDict):
    persona: str


def copies(
    model: Persona,
    reply: str,
    data: UntrustedText,
    changes: dict[str, str],
    minted: dict[str, TrustedInstruction],
    loose: dict[str, Any],
    anything: dict[str, object],
    rewrite: Rewrite,
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
    model.model_copy(update=loose)  # E: [veridic-forge] got the parameter "loose" in update=
    model.model_copy(update=anything)  # E: [veridic-forge] got the parameter "anything" in update=
    model.model_copy(update=rewrite)  # E: [veridic-forge] got the parameter "rewrite" in update=
    # E: [veridic-forge] got a value of type "str" in update=
    model.model_copy(update=dict(topic=reply, persona=reply))  # noqa: C408 (the spelling under test)


def tunes(
    model: Persona,
    temperature: float,
    numbers: dict[str, float | None],
    tuning: Tuning,
) -> None:
    # A mapping whose values cannot be text changes no field that holds trusted text.
    model.model_copy(update=dict(temperature=temperature))  # noqa: C408 (the spelling under test)
    model.model_copy(update=numbers)
    model.model_copy(update=tuning)
