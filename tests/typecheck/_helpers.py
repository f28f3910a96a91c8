"""Support module (not a case): a helper that passes its LiteralString parameter on."""

from typing import LiteralString

from veridic import TrustedInstruction, instruction


def rule(text: LiteralString) -> TrustedInstruction:
    return instruction(text)
