"""setattr() into an attribute declared to hold a TrustedInstruction (veridic-forge).

mypy checks `page.prompt = reply` but not setattr(page, "prompt", reply) nor
object.__setattr__ (the way into a frozen dataclass): page.prompt stayed typed trusted.
"""

import json
from dataclasses import dataclass

from veridic import Composer, TrustedInstruction, instruction


@dataclass(frozen=True)
class Page:
    prompt: TrustedInstruction
    title: str


def writes(page: Page, reply: str, name: str) -> None:
    # E: [veridic-forge] setattr() got a value of type "str" for the attribute "prompt"
    setattr(page, "prompt", reply)  # noqa: B010
    # E: [veridic-forge] object.__setattr__() got a value of type "str"
    object.__setattr__(page, "prompt", reply)
    setattr(page, name, reply)  # E: [veridic-forge] named by text not known in the code
    # E: [veridic-forge] the attribute "prompt" of "Page"
    setattr(Page, "prompt", reply)  # noqa: B010
    # As page.prompt = json.loads(reply) is (veridic-any): Any passes is_subtype.
    # E: [veridic-any] setattr() got a value of type "Any" for the attribute "prompt"
    setattr(page, "prompt", json.loads(reply))  # noqa: B010
    Composer().system(page.prompt)


def accepted(page: Page, reply: str, name: str, tuning: dict[str, float | None]) -> None:
    for key, value in tuning.items():  # no text: it cannot be an instruction
        setattr(page, key, value)
    setattr(page, "title", reply)  # noqa: B010
    setattr(page, "prompt", instruction("Be brief."))  # noqa: B010
    object.__setattr__(page, "title", reply)
    object.__setattr__(page, "title", json.loads(reply))
    setattr(reply, name, reply)
