"""The same in a module that makes no call (mypy runs no call hook in it)."""

from typing import overload

from veridic import TrustedInstruction


@overload
def launder(text: str) -> TrustedInstruction: ...
@overload
def launder(text: bytes) -> bytes: ...
# E: [veridic-forge] launder() got an implementation declared to return "str | bytes"
def launder(text: str | bytes) -> str | bytes:
    return text
