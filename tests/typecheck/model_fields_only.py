"""A module that only declares pydantic models is read too (it makes no call).

A field typed TrustedInstruction holds a plain str once pydantic has validated it, so
the module that declares one is reported even when nothing in it is called: the
plugin reads its models at the end of its check.
"""

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, RootModel

from veridic import InstructionField, TrustedInstruction


class Settings(BaseModel):
    greeting: TrustedInstruction  # E: [veridic-forge] "Settings" got field "greeting" typed
    stored: InstructionField


def nested() -> None:
    class Local(BaseModel):
        tone: TrustedInstruction | None = None  # E: [veridic-forge] "Local" got field "tone"


class Described(BaseModel):
    # E: [veridic-forge] "Described" got field "prompt" typed
    prompt: Annotated[TrustedInstruction, Field(description="read by the composer")]
    checked: Annotated[TrustedInstruction, AfterValidator(str.strip)]


class Prompt(RootModel[TrustedInstruction]):  # E: [veridic-forge] "Prompt" got field "root"
    pass
