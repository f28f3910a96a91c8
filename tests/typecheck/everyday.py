"""Everyday application code that every rule must accept: no mark, no error.

Each block is a shape real applications write around prompts (a web handler reading
its settings from the framework's state, settings models, TypedDicts and dataclasses
of prompts, JSON kept beside trusted text, version branches, tuning copies). Each was
reported by a rule of the sixth attacker review before its second read.
"""

import json
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar

import requests
from pydantic import BaseModel
from typing_extensions import TypeIs

from veridic import Composer, InstructionField, TrustedInstruction, instruction, is_trusted, join


class Settings(BaseModel):
    persona: InstructionField
    temperature: float = 0.2
    max_tokens: int = 512


class Envelope(TypedDict):
    system: TrustedInstruction
    meta: dict[str, Any]


@dataclass
class Agent:
    system: TrustedInstruction = field(repr=False)
    rules: list[TrustedInstruction] = field(default_factory=list, repr=False)
    temperature: float = 0.2
    extras: dict[str, Any] = field(default_factory=dict)

    def tune(self, tuning: dict[str, float]) -> None:
        for key, value in tuning.items():
            setattr(self, key, value)


def handler(state: Any, url: str) -> str:
    # A web framework's app.state (Starlette's is typed Any) holds the objects built at
    # start-up: their constructors were checked, the attribute reads are Any.
    settings: Settings = state.settings
    agent: Agent = state.agent
    body: dict[str, Any] = requests.get(url, timeout=5).json()
    envelope: Envelope = {"system": settings.persona, "meta": body}
    pair: tuple[TrustedInstruction, Any] = (agent.system, json.loads("{}"))
    cooler = settings.model_copy(update=dict(temperature=0.1))  # noqa: C408 (the spelling)
    shorter = settings.model_copy(update={"max_tokens": 128})
    composer = Composer().system(join([envelope["system"], pair[0], *agent.rules]))
    return f"{composer} {cooler} {shorter}"


def genuine(value: object) -> TypeIs[TrustedInstruction]:
    return is_trusted(value)


AnyText = TypeVar("AnyText", str, bytes)


def framed(value: AnyText, mode: Literal["brief", "long"]) -> AnyText:
    print(instruction(mode))
    return value


if sys.version_info >= (3, 12):
    RULES = join([instruction("Prefer pathlib."), instruction("Use type statements.")])
else:
    RULES = join([instruction("Prefer pathlib.")])


@dataclass
class Contact:
    name: str
    email: str


def loops_and_files(agent: Agent, path: str) -> TrustedInstruction:
    # A loop over trusted text built in code, a file opened next to trusted variables.
    parts: list[TrustedInstruction] = [instruction("Be brief."), instruction("Cite sources.")]
    rule: TrustedInstruction
    for rule in parts:
        Composer().system(rule)
    for index, rule in enumerate(parts):
        print(index, rule)
    for name, rule in {"brief": agent.system}.items():
        print(name, rule)
    with open(path) as handle:
        notes = handle.read()
    print(notes)
    return join(parts)


def namespaces_read(agent: Agent, contact: Contact, raw: str) -> str:
    # vars() and __dict__ read for logging, or copied and the copy changed.
    print(vars(agent), agent.__dict__.get("system"), json.dumps(vars(contact)))
    snapshot = dict(vars(agent))
    snapshot["system"] = raw
    loaded: dict[str, Any] = json.loads(raw)
    for key, value in loaded.items():  # no attribute of Contact holds trusted text
        setattr(contact, key, value)
    vars(contact).update(loaded)
    names: list[str] = [str(item) for item in json.loads(raw)]
    titles: dict[str, str] = {key: str(value) for key, value in loaded.items()}
    return f"{snapshot} {names} {titles}"


def label(rule: TrustedInstruction, count: int) -> str:
    return f"{rule} x{count}"


def unrelated_ignore(count: object) -> str:
    # The ignore is for the count, not for the trusted text next to it.
    return label(instruction("Be brief."), count)  # type: ignore[arg-type]
