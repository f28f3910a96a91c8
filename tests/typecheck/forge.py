"""Calling a brand's NewType constructor outside veridic is forging (veridic-forge)."""

from veridic import TrustedInstruction, UntrustedText
from veridic.provenance import TrustedInstruction as Brand


def forged(text: str) -> list[str]:
    return [
        TrustedInstruction(text),  # E: [veridic-forge] mint trusted text with instruction
        Brand("even a literal"),  # E: [veridic-forge] TrustedInstruction(...) forges trust
        UntrustedText(text),  # E: [veridic-forge] untrusted(text, source=
    ]
