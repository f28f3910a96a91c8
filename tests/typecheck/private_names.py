"""veridic's private minting names outside veridic forge trust (veridic-forge)."""

import veridic.text.provenance as provenance
from veridic import is_trusted

# E: [veridic-forge] veridic.text.fields._read_as_instruction
from veridic.text.fields import _read_as_instruction

# E: [veridic-forge] veridic.text.provenance.mint
# E: [veridic-forge] veridic.text.provenance._Trusted
from veridic.text.provenance import (
    TrustedInstruction,
    _Trusted,
    instruction,
    mint,
)


def forged(text: str) -> list[object]:
    return [
        # E: [veridic-forge] a call outside veridic got veridic.text.provenance.mint
        mint(text, "code", "here"),
        provenance.mint_spans(text, ()),  # E: [veridic-forge] veridic.text.provenance.mint_spans
        provenance.joined([text], ""),  # E: [veridic-forge] veridic.text.provenance.joined
        # E: [veridic-forge] veridic.text.provenance._Trusted
        # E: [veridic-forge] a reference outside veridic got veridic.text.provenance._KEY
        provenance._Trusted(text, (), provenance._KEY),
        getattr(provenance, "mint"),  # noqa: B009  # E: [veridic-forge] getattr() outside veridic
        str.__new__(_Trusted, text),
        _read_as_instruction,
    ]


def public(text: str) -> list[object]:
    return [
        instruction("fine"),
        provenance.instruction("fine"),
        provenance.untrusted(text, source="ticket:1"),
        is_trusted(text),
        getattr(provenance, "instruction"),  # noqa: B009
    ]


def typed(t: TrustedInstruction) -> TrustedInstruction:
    return t
