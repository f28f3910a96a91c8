"""An overloaded function whose implementation is declared to return more than its
overloads (veridic-forge). mypy accepts an implementation declared to return a supertype
of an overload's return type (`str` for `TrustedInstruction`), and checks its body only
against the implementation's: `return text` passes, and every caller of the overload
reads the plain str as trusted.
"""

import json
from collections.abc import Sequence
from typing import Any, TypeVar, overload

from veridic import Composer, TrustedInstruction, UntrustedText, instruction, untrusted


@overload
def launder(text: str) -> TrustedInstruction: ...
@overload
def launder(text: int) -> int: ...
# E: [veridic-forge] launder() got an implementation declared to return "str | int"
def launder(text: str | int) -> str | int:
    return text


@overload
def loaded(raw: str) -> TrustedInstruction: ...
@overload
def loaded(raw: bytes) -> TrustedInstruction: ...
# E: [veridic-forge] loaded() got an implementation declared to return "Any"
def loaded(raw: str | bytes) -> Any:
    return json.loads(raw)


@overload
def many(texts: str) -> list[TrustedInstruction]: ...
@overload
def many(texts: None) -> None: ...
def many(texts: str | None) -> list[TrustedInstruction] | None:
    return None if texts is None else [instruction("Be brief.")]


@overload
def placed(text: str, outside: bool) -> UntrustedText: ...
@overload
def placed(text: TrustedInstruction) -> TrustedInstruction: ...
def placed(text: str, outside: bool = True) -> UntrustedText | TrustedInstruction:
    return untrusted(text, source="ticket") if outside else instruction("Be brief.")


class Prompts:
    @overload
    def get(self, key: str) -> TrustedInstruction: ...
    @overload
    def get(self, key: int) -> None: ...
    # E: [veridic-forge] get() got an implementation declared to return "str | None"
    def get(self, key: str | int) -> str | None:
        return key if isinstance(key, str) else None


def use(reply: str) -> None:
    Composer().system(launder(reply))
    Composer().system(Prompts().get(reply))


# Accepted: an implementation wider than its overloads only where no text can pass.
# The `dict.get` shape: its `None` default makes the implementation `... | None`.
_T = TypeVar("_T")


@overload
def lookup(key: str) -> TrustedInstruction: ...
@overload
def lookup(key: str, default: _T) -> TrustedInstruction | _T: ...
def lookup(key: str, default: _T | None = None) -> TrustedInstruction | _T | None:
    return instruction("Be brief.") if key else default


# An async overload: each is declared `Coroutine[Any, Any, ...]`, so the implementation's
# one coroutine of the union is no union of coroutines (which no `async def` can declare).
@overload
async def fetch(key: str) -> TrustedInstruction: ...
@overload
async def fetch(key: int) -> None: ...
async def fetch(key: str | int) -> TrustedInstruction | None:
    return instruction("Be brief.") if isinstance(key, str) else None


@overload
async def fetch_loose(key: str) -> TrustedInstruction: ...
@overload
async def fetch_loose(key: int) -> None: ...
# E: [veridic-forge] fetch_loose() got an implementation declared to return "str | None"
async def fetch_loose(key: str | int) -> str | None:
    return key if isinstance(key, str) else None


# A wider container of trusted text holds trusted text only: its body is checked so.
@overload
def rules(kind: str) -> list[TrustedInstruction]: ...
@overload
def rules(kind: int) -> tuple[TrustedInstruction, ...]: ...
def rules(kind: str | int) -> Sequence[TrustedInstruction]:
    return [instruction("Be brief.")] if isinstance(kind, str) else ()


@overload
def texts(kind: str) -> list[TrustedInstruction]: ...
@overload
def texts(kind: int) -> None: ...
# E: [veridic-forge] texts() got an implementation declared to return "Sequence[str] | None"
def texts(kind: str | int) -> Sequence[str] | None:
    return [kind] if isinstance(kind, str) else None


@overload
def anything(kind: str) -> TrustedInstruction: ...
@overload
def anything(kind: int) -> int: ...
# E: [veridic-forge] anything() got an implementation declared to return "object"
def anything(kind: str | int) -> object:
    return kind


# A type variable the overloads do not return is no pass: `x` is the caller's str.
@overload
def echo(text: str) -> TrustedInstruction: ...
@overload
def echo(text: int) -> int: ...
# E: [veridic-forge] echo() got an implementation declared to return "_T"
def echo(text: _T) -> _T:
    return text
