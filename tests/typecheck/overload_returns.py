"""An overloaded function whose implementation is declared to return more than its
overloads (veridic-forge). mypy accepts an implementation declared to return a supertype
of an overload's return type (`str` for `TrustedInstruction`), and checks its body only
against the implementation's: `return text` passes, and every caller of the overload
reads the plain str as trusted.
"""

import json
from typing import Any, overload

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
