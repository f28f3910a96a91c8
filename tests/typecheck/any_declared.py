"""Any assigned to a target declared to hold a TrustedInstruction (veridic-any).

mypy lets Any into any declared type, and from then on reads the target as trusted:
Composer().system(settings["persona"]) type-checked, and the run time refused it.
"""

import json
from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import BaseModel, Field

from veridic import InstructionField, TrustedInstruction, UntrustedText, instruction


class Settings(TypedDict):
    persona: TrustedInstruction
    topic: str


@dataclass
class Holder:
    prompt: TrustedInstruction


class Nested(TypedDict):
    holder: Holder


class Config(BaseModel):
    persona: InstructionField
    # E: [veridic-forge] "Config" got field "limit"
    limit: TrustedInstruction = Field(max_length=40)


class Page:
    prompt: TrustedInstruction
    title: str

    def __init__(self, raw: str) -> None:
        self.prompt = json.loads(raw)  # E: [veridic-any] the attribute "prompt" is declared
        self.title = json.loads(raw)


JSON = dict[str, "JSON"] | list["JSON"] | str | int | None


def declared(
    raw: str, loose: Any, page: Page, settings: Settings, items: list[TrustedInstruction]
) -> None:
    # E: [veridic-any] the name "prompt" is declared "TrustedInstruction"
    prompt: TrustedInstruction = json.loads(raw)
    loaded: Settings = json.loads(raw)  # E: [veridic-any] the name "loaded" is declared "Settings"
    nested: Nested = json.loads(raw)  # E: [veridic-any] declared "Nested"
    holder: Holder = loose  # E: [veridic-any] declared "Holder"
    config: Config = json.loads(raw)  # E: [veridic-any] declared "Config"
    # E: [veridic-any] declared "list[TrustedInstruction]"
    parts: list[TrustedInstruction] = [instruction("x"), loose]
    # E: [veridic-any] declared "dict[str, TrustedInstruction]"
    table: dict[str, TrustedInstruction] = {"a": loose}
    later: TrustedInstruction
    later = loose  # E: [veridic-any] the name "later" is declared
    page.prompt = loose  # E: [veridic-any] the attribute "prompt" is declared
    settings["persona"] = loose  # E: [veridic-any] declared "TrustedInstruction"
    items[0] = loose  # E: [veridic-any] declared "TrustedInstruction"
    items.append(loose)  # E: [veridic-any] declared "list[TrustedInstruction]"
    items.extend(json.loads(raw))  # E: [veridic-any] the result of "loads()"
    items.insert(loose, loose)  # E: [veridic-any] declared "list[TrustedInstruction]"
    items += json.loads(raw)  # E: [veridic-any] declared "list[TrustedInstruction]"
    settings.update(json.loads(raw))  # E: [veridic-any] declared "Settings"
    table.setdefault(loose, loose)  # E: [veridic-any] declared "dict[str, TrustedInstruction]"
    print(prompt, loaded, nested, holder, config, parts, table, later)


def accepted(raw: str, loose: Any, page: Page, settings: Settings) -> None:
    text: str = json.loads(raw)
    data: UntrustedText = loose
    tree: JSON = json.loads(raw)
    minted: TrustedInstruction = instruction("Be brief.")
    page.title = loose
    settings["topic"] = loose
    names: list[str] = []
    names.append(loose)
    page.title.split(loose)
    inferred = json.loads(raw)
    first, second = loose
    print(text, data, tree, minted, inferred, first, second)
