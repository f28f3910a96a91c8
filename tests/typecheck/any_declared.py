"""Any assigned to a target declared to hold a TrustedInstruction (veridic-any).

mypy lets Any into any declared type, and from then on reads the target as trusted:
Composer().system(settings["persona"]) type-checked, and the run time refused it.
"""

import json
from dataclasses import dataclass, field
from typing import Any, Generic, TypedDict, TypeVar, overload

import attr
import attrs
from _stores import Prompts
from pydantic import BaseModel, Field

from veridic import InstructionField, TrustedInstruction, UntrustedText, instruction


class Settings(TypedDict):
    persona: TrustedInstruction
    topic: str


@dataclass
class Holder:
    prompt: TrustedInstruction


@dataclass(kw_only=True)
class Fields:
    """A field declared with field() (or attrs') options only: typed Any, no value."""

    prompt: TrustedInstruction = field(repr=False)
    rules: list[TrustedInstruction] = field(default_factory=list, repr=False)
    # E: [veridic-any] the name "loaded" is declared "TrustedInstruction"
    loaded: TrustedInstruction = field(default=json.loads('"Be brief."'), repr=False)
    # E: [veridic-any] a function that returns "Any"
    made: TrustedInstruction = field(default_factory=lambda: json.loads('"Be brief."'))


@attrs.define
class AttrsFields:
    hint: TrustedInstruction = attrs.field(repr=False)
    title: TrustedInstruction = attr.ib(repr=False)
    # E: [veridic-any] a function that returns "Any"
    made: TrustedInstruction = attrs.field(factory=lambda: json.loads('"Be brief."'))


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


class Envelope(TypedDict):
    system: TrustedInstruction
    meta: dict[str, Any]


class Stored(dict[str, TrustedInstruction]):
    """A project class that is a container of trusted text."""


T = TypeVar("T")
LOADED = json.loads('"Be brief."')


class Store(dict[str, T]):
    """A generic container of the project's."""


class Box(Generic[T]):
    """A generic class of the project's that is no container: an attribute holds T."""

    def __init__(self, item: T) -> None:
        self.item = item


def declared(
    raw: str, loose: Any, page: Page, settings: Settings, items: list[TrustedInstruction]
) -> None:
    # E: [veridic-any] the name "prompt" is declared "TrustedInstruction"
    prompt: TrustedInstruction = json.loads(raw)
    loaded: Settings = json.loads(raw)  # E: [veridic-any] the name "loaded" is declared "Settings"
    # E: [veridic-any] declared "list[TrustedInstruction]"
    parts: list[TrustedInstruction] = [instruction("x"), loose]
    # E: [veridic-any] declared "Envelope"
    envelope: Envelope = {"system": loose, "meta": {}}
    # E: [veridic-any] declared "tuple[TrustedInstruction, Any]"
    pair: tuple[TrustedInstruction, Any] = (loose, loose)
    stored: Stored = json.loads(raw)  # E: [veridic-any] declared "Stored"
    store: Store[TrustedInstruction] = json.loads(raw)  # E: [veridic-any] declared "Store
    # E: [veridic-any] declared "dict[str, TrustedInstruction]"
    table: dict[str, TrustedInstruction] = {"a": loose}
    later: TrustedInstruction
    later = loose  # E: [veridic-any] the name "later" is declared
    page.prompt = loose  # E: [veridic-any] the attribute "prompt" is declared
    settings["persona"] = loose  # E: [veridic-any] declared "TrustedInstruction"
    items[0] = loose  # E: [veridic-any] an item of the name "items" is declared
    items.append(loose)  # E: [veridic-any] declared "list[TrustedInstruction]"
    items.extend(json.loads(raw))  # E: [veridic-any] the result of "loads()"
    items.insert(loose, loose)  # E: [veridic-any] declared "list[TrustedInstruction]"
    items += json.loads(raw)  # E: [veridic-any] declared "list[TrustedInstruction]"
    settings.update(json.loads(raw))  # E: [veridic-any] declared "Settings"
    table.setdefault(loose, loose)  # E: [veridic-any] declared "dict[str, TrustedInstruction]"
    print(prompt, loaded, parts, envelope, pair, stored, store, table, later)


def bound(raw: str, loose: Any, page: Page, pairs: list[tuple[str, Any]]) -> None:
    """Any bound by a for or with target declared to hold trusted text."""
    prompt: TrustedInstruction
    for prompt in json.loads(raw):  # E: [veridic-any] the name "prompt" is declared
        print(prompt)
    for page.prompt in loose:  # E: [veridic-any] the attribute "prompt" is declared
        print(page.prompt)
    name: str
    for name, prompt in pairs:  # E: [veridic-any] the name "prompt" is declared
        print(name, prompt)
    with loose as prompt:  # E: [veridic-any] the name "prompt" is declared
        print(prompt)
    with open(raw) as handle, loose.session() as prompt:  # E: [veridic-any] the name "prompt"
        print(handle, prompt)
    # E: [veridic-any] the name "kept" is declared "list[TrustedInstruction]"
    kept: list[TrustedInstruction] = [item for item in json.loads(raw) if item]
    # E: [veridic-any] the name "table" is declared "dict[str, TrustedInstruction]"
    table: dict[str, TrustedInstruction] = {key: value for key, value in loose.items() if key}
    print(kept, table)


def defaulted(
    raw: str,
    prompt: TrustedInstruction = LOADED,  # E: [veridic-any] the parameter "prompt"
    title: str = LOADED,
) -> None:
    print(raw, prompt, title)


async def bound_async(raw: str, loose: Any, rows: list[tuple[str, tuple[int, Any]]]) -> None:
    """The same through async for, async with and nested or starred unpacking."""
    prompt: TrustedInstruction
    async for prompt in loose:  # E: [veridic-any] the name "prompt" is declared
        print(prompt)
    async with loose as prompt:  # E: [veridic-any] the name "prompt" is declared
        print(prompt)
    name: str
    count: int
    for name, (count, prompt) in rows:  # E: [veridic-any] the name "prompt" is declared
        print(name, count, prompt)
    rest: list[TrustedInstruction]
    for name, *rest in json.loads(raw):  # E: [veridic-any] the name "rest" is declared
        print(name, rest)


def bound_otherwise(raw: str) -> None:
    """Any bound by a walrus or a match capture, which no assignment statement spells."""
    prompt: TrustedInstruction
    if prompt := json.loads(raw):  # E: [veridic-any] the name "prompt" is declared
        print(prompt)
    match json.loads(raw):
        case {"system": prompt}:  # E: [veridic-any] the name "prompt" is declared
            print(prompt)
        case [str(), prompt]:  # E: [veridic-any] the name "prompt" is declared
            print(prompt)
        case _:
            pass


@overload
def overloaded(raw: int) -> None: ...
@overload
def overloaded(raw: str, prompt: TrustedInstruction = ...) -> None: ...
def overloaded(
    raw: int | str,
    prompt: TrustedInstruction = LOADED,  # E: [veridic-any] the parameter "prompt"
) -> None:
    """An overload's implementation is checked as any function."""
    loaded: TrustedInstruction = json.loads(str(raw))  # E: [veridic-any] the name "loaded"
    for prompt in json.loads(str(raw)):  # E: [veridic-any] the name "prompt" is declared
        print(prompt, loaded)


def in_private_module(raw: str) -> None:
    """A project module named with a leading "_" is the project's, not a library."""
    prompts: Prompts = json.loads(raw)  # E: [veridic-any] declared "Prompts"
    print(prompts)


def accepted_bound(raw: str, loose: Any, texts: list[str]) -> None:
    for text in json.loads(raw):  # inferred: Any, refused where it reaches a position
        print(text)
    title: str
    for title in loose:
        print(title)
    prompt: TrustedInstruction
    for prompt in [instruction("Be brief.")]:
        print(prompt)
    with open(raw) as handle:
        print(handle, texts)
    kept: list[TrustedInstruction] = [instruction("Be brief.") for _ in json.loads(raw)]
    print(kept)
    rest: list[TrustedInstruction]
    for title, *rest in [("a", instruction("Be brief."))]:
        print(title, rest)
    if prompt := instruction("Be brief."):
        print(prompt)
    match [instruction("Be brief.")]:
        case [prompt]:
            print(prompt)
        case _:
            pass


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


def accepted_slots(raw: str, loose: Any, page: Page) -> None:
    # Any into the slots declared Any, next to trusted text written in code.
    envelope: Envelope = {"system": instruction("Be brief."), "meta": json.loads(raw)}
    pair: tuple[TrustedInstruction, Any] = (instruction("Be brief."), json.loads(raw))
    # An object typed Any (a framework's app.state, a DI container, a cache) declared as
    # a class: JSON makes no object with attributes, so no text is forged through one.
    holder: Holder = loose
    config: Config = loose.state.config
    nested: Nested = json.loads(raw)
    pages: list[Page] = loose
    boxed: Box[TrustedInstruction] = loose.state.box
    page = loose.page
    print(envelope, pair, holder, config, nested, pages, boxed, page)
