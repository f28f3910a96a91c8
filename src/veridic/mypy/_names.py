"""Fully qualified names the plugin reacts to, in one place.

mypy gives plugins the full name of a definition where it is *defined*, not
where it was imported from: ``from veridic import TrustedInstruction`` arrives
as ``veridic.provenance.TrustedInstruction``. Moving one of these definitions
to another module means updating this file; the typecheck tests fail until
it is done.
"""

from __future__ import annotations

from typing import Final

PACKAGE: Final = "veridic"
"""Modules named this or ``veridic.*`` are the minting authority."""

TRUSTED: Final = "veridic.provenance.TrustedInstruction"
UNTRUSTED: Final = "veridic.provenance.UntrustedText"
BRANDS: Final = frozenset({TRUSTED, UNTRUSTED})

INSTRUCTION: Final = "veridic.provenance.instruction"
TRUST_POLICY: Final = "veridic.trust_policy.TrustPolicy"

STR: Final = "builtins.str"
TRUSTED_ADD: Final = TRUSTED + ".__add__"
"""mypy names ``+`` on a NewType after the NewType, though ``str`` defines it."""
ITERABLE: Final = "typing.Iterable"
MAPPING: Final = "typing.Mapping"

LITERAL_STRING: Final = frozenset({"typing.LiteralString", "typing_extensions.LiteralString"})
"""Both spellings of PEP 675's ``LiteralString``; mypy reads either as plain ``str``."""


def in_package(module: str) -> bool:
    """Whether ``module`` is veridic itself (not a module that merely starts with the name)."""
    return module == PACKAGE or module.startswith(PACKAGE + ".")
