"""A module whose first call is an overload (field_validator): the TrustedInstruction
field declared after it was reported while mypy tried the overload's items, which threw
the error away, and the module passed."""

from pydantic import BaseModel, field_validator

from veridic import TrustedInstruction


class Checked(BaseModel):
    topic: str

    @field_validator("topic")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class Config(BaseModel):
    prompt: TrustedInstruction  # E: [veridic-forge] pydantic model "Config" got field "prompt"
