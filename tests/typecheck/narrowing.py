"""Trusted text made by narrowing, not minting (veridic-forge): a TypeGuard or TypeIs
function that narrows to TrustedInstruction, and a cast() to a TypedDict that holds one.
After `if vetted(text):` mypy read text as trusted, whatever vetted() checked."""

import json
from typing import TypedDict, TypeGuard, cast

from typing_extensions import TypeIs

from veridic import Composer, TrustedInstruction, UntrustedText, is_trusted


class Settings(TypedDict):
    persona: TrustedInstruction


class Public(TypedDict):
    topic: str


# E: [veridic-forge] the function "vetted" narrows its argument to TrustedInstruction
def vetted(text: object) -> TypeGuard[TrustedInstruction]:
    return isinstance(text, str)


# E: [veridic-forge] the function "all_vetted" narrows
def all_vetted(texts: list[str]) -> TypeGuard[list[TrustedInstruction]]:
    return bool(texts)


class Checks:
    @staticmethod
    # E: [veridic-forge] the function "trusted" narrows
    def trusted(text: object) -> TypeIs[TrustedInstruction]:
        return isinstance(text, str)


def genuine(value: object) -> TypeIs[TrustedInstruction]:
    """Narrows only what the run time minted: is_trusted() checks the mint, not the type."""
    return is_trusted(value)


class Reply:
    def minted(self, text: str) -> TypeGuard[TrustedInstruction]:
        return isinstance(text, str) and is_trusted(text)

    # E: [veridic-forge] the function "other" narrows
    def other(self, text: str) -> TypeGuard[TrustedInstruction]:
        return is_trusted(self)


# E: [veridic-forge] the function "either" narrows
def either(text: object) -> TypeGuard[TrustedInstruction]:
    return is_trusted(text) or isinstance(text, str)


def is_data(text: object) -> TypeGuard[UntrustedText]:
    return isinstance(text, str)


def is_text(value: object) -> TypeIs[str]:
    return isinstance(value, str)


def use(raw: str, reply: str) -> None:
    if vetted(reply):
        Composer().system(reply)
    # E: [veridic-forge] a cast() to "Settings", which holds TrustedInstruction, forges it
    settings = cast(Settings, json.loads(raw))
    public = cast(Public, json.loads(raw))
    print(settings, public)
