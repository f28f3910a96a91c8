"""A small application around prompts that every rule must accept: no mark, no error.

A plugin host: it loads plugins by names from its configuration and sets their flags,
keeps results in generic containers (covariant, as read-only views are declared), fills
TypedDict settings, reads rows into NamedTuples, declares its types under TYPE_CHECKING,
narrows a base's attribute to a Literal, and keeps Final text constants next to module
state it changes through globals(). Each shape sits next to a rule of the thirteenth or
fourteenth round (covariant writes, module namespaces and lookups, TypedDict
__setitem__, NamedTuple._make, str.__new__, narrowed attributes, TYPE_CHECKING).
"""

from __future__ import annotations

import csv
import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Generic, Literal, NamedTuple, TypedDict, TypeVar

from veridic import Composer, TrustedInstruction, instruction, join

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

T_co = TypeVar("T_co", covariant=True)

GREETING: Final = "You help with billing."
PLUGINS: Final = ("billing", "refunds")
loaded_count = 0


class Result(Generic[T_co]):
    """A result built step by step where it is made, then handed out read-only."""

    def __init__(self, value: T_co) -> None:
        self.value = value
        self.error: str | None = None
        self.attempts = 0
        self.note: T_co | None = None


@dataclass
class Page(Generic[T_co]):
    items: Sequence[T_co]
    total: int = 0
    cursor: str | None = None


def fetch(query: str) -> Result[str]:
    result = Result(query.strip())
    result.attempts += 1
    result.value = query.lower()
    result.note = f"fetched {query}"
    result.error = None
    if not result.value:
        result.value = "nothing"
    return result


def first_page(rows: Iterable[str], cursor: str | None) -> Page[str]:
    page: Page[str] = Page(list(rows))
    page.cursor = cursor
    page.total = len(page.items)
    page.items = [row.upper() for row in page.items]
    return page


def retried(result: Result[str], error: str) -> None:
    # Through a view only what holds no trusted text is written: a count, an error field
    # typed str (not by the type variable), None into a T_co | None.
    result.attempts += 1
    result.error = error
    result.note = None


class PluginSettings(TypedDict):
    name: str
    enabled: bool
    persona: TrustedInstruction


def settings_for(name: str) -> PluginSettings:
    settings: PluginSettings = {
        "name": name,
        "enabled": True,
        "persona": instruction("You are a plugin."),
    }
    settings["enabled"] = name in PLUGINS
    settings["name"] = name.title()
    return settings


def load_plugins(names: Sequence[str]) -> list[str]:
    """Import each plugin by its configured name and set its flags."""
    global loaded_count
    loaded: list[str] = []
    for name in names:
        module = importlib.import_module(f"plugins.{name}")
        setattr(module, "enabled", True)  # noqa: B010
        vars(module)["priority"] = len(loaded)
        vars(importlib.import_module(name))["enabled"] = True
        sys.modules[name].__dict__.update(enabled=True, retries=3)
        loaded.append(module.__name__)
        loaded_count += 1
    globals()["loaded_count"] = loaded_count
    globals().update(last_loaded=loaded[-1] if loaded else None)
    return loaded


class Row(NamedTuple):
    name: str
    amount: int


def read_rows(path: str) -> list[Row]:
    with open(path, newline="") as handle:
        return [Row._make([name, int(amount)]) for name, amount in csv.reader(handle)]


class Slug(str):
    """A str subclass of the project's own: its __new__ stays clean."""

    def __new__(cls, text: str) -> Slug:
        return str.__new__(cls, text.lower().replace(" ", "-"))


@dataclass
class Event:
    kind: str
    detail: str = ""


@dataclass
class Refund(Event):
    # pyright refuses a mutable attribute narrowed in a subclass; mypy accepts it.
    # P: [reportIncompatibleVariableOverride]
    kind: Literal["refund"] = "refund"
    reasons: list[str] = field(default_factory=list)


class Tuning:
    """Settings with a Final text constant, tuned by names read from a file."""

    LABEL: Final = "tuning"
    temperature: float = 0.2
    max_tokens: int = 512

    def tune(self, values: dict[str, float]) -> None:
        for key, value in values.items():
            setattr(self, key, value)


def this_module_flag(name: str) -> object:
    this = sys.modules[__name__]
    return getattr(this, name, None)


def system_prompt(result: Result[str], refund: Refund) -> TrustedInstruction:
    print(result.value, refund.kind, Slug(refund.detail))
    persona = instruction(GREETING)
    return join([persona, instruction("Answer in the customer's language.")])


def main() -> None:
    names = os.environ.get("PLUGINS", "billing").split(",")
    print(load_plugins(names), read_rows("refunds.csv"), settings_for("billing"))
    result = fetch("refund status")
    retried(result, "timeout")
    print(first_page(["a"], None), Composer().system(system_prompt(result, Refund())))
