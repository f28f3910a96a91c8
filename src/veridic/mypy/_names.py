"""Fully qualified names the plugin reacts to, in one place.

mypy gives plugins the full name of a definition where it is *defined*, not
where it was imported from: ``from veridic import TrustedInstruction`` arrives
as ``veridic.text.provenance.TrustedInstruction``. Moving one of these definitions
to another module means updating this file; the typecheck tests fail until
it is done.
"""

from __future__ import annotations

from typing import Final

PACKAGE: Final = "veridic"
"""Modules named this or ``veridic.*`` are the minting authority."""

TRUSTED: Final = "veridic.text.provenance.TrustedInstruction"
UNTRUSTED: Final = "veridic.text.provenance.UntrustedText"
BRANDS: Final = frozenset({TRUSTED, UNTRUSTED})
TRUSTED_TEXT: Final = "veridic.text.provenance.TrustedText"
"""``LiteralString | TrustedInstruction``: the trusted positions that take short text."""
INSTRUCTION_FIELD: Final = "veridic.text.fields.InstructionField"
"""``Annotated[TrustedInstruction, ...]``: mypy drops ``Annotated`` and expands the alias,
so the plugin keeps a reference to it (``_fields``) to tell such a field from a bare one."""

INSTRUCTION: Final = "veridic.text.provenance.instruction"
TRUST_POLICY: Final = "veridic.text.trust_policy.TrustPolicy"

STR: Final = "builtins.str"
TRUSTED_ADD: Final = TRUSTED + ".__add__"
"""mypy names ``+`` on a NewType after the NewType, though ``str`` defines it."""
ITERABLE: Final = "typing.Iterable"
MAPPING: Final = "typing.Mapping"
GETATTR: Final = "builtins.getattr"
REPLACE: Final = frozenset({"dataclasses.replace", "copy.replace"})
"""Calls that build a dataclass again with some fields changed: its ``__init__`` runs."""

_MINTING_HOMES: Final = {
    "veridic.text.provenance": "veridic.text.provenance",
    "veridic.text.fields": "veridic.text.fields",
    "veridic.provenance": "veridic.text.provenance",
    "veridic.fields": "veridic.text.fields",
}
"""Each module path that holds veridic's minting machinery, and its home (the old flat
paths are aliases of the modules in ``veridic.text``: importing from either is the same)."""
MINTING_MODULES: Final = frozenset(_MINTING_HOMES)
"""Modules whose ``_``-prefixed names are veridic's private minting machinery."""
MINTING_HELPERS: Final = frozenset(
    {
        "veridic.text.provenance.mint",
        "veridic.text.provenance.mint_spans",
        "veridic.text.provenance.joined",
        "veridic.text.provenance.fenced_block",
    }
)
"""Public-looking names of those modules that brand text without a check: veridic's own
(the run time refuses a call of each from outside veridic too)."""

INSTALLED: Final = ("site-packages", "dist-packages")
"""Parts of the path of a module installed from a package, not the project's own code."""

BASE_MODEL: Final = "pydantic.main.BaseModel"
TYPE_ADAPTER: Final = "pydantic.type_adapter.TypeAdapter"
MODEL_METHODS: Final = frozenset({"model_validate", "model_construct", "model_copy"})
"""``BaseModel`` methods that fill fields from a mapping or keywords."""

LITERAL_STRING: Final = frozenset({"typing.LiteralString", "typing_extensions.LiteralString"})
"""Both spellings of PEP 675's ``LiteralString``; mypy reads either as plain ``str``."""


def in_package(module: str) -> bool:
    """Whether ``module`` is veridic itself (not a module that merely starts with the name)."""
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def is_private_minting(fullname: str) -> bool:
    """Whether ``fullname`` is one of veridic's private minting names (or inside one)."""
    module, _, rest = fullname.rpartition(".")
    while module and module not in _MINTING_HOMES:  # a name inside one: _Trusted.__new__
        module, _, head = module.rpartition(".")
        rest = f"{head}.{rest}"
    if not module:
        return False
    if f"{_MINTING_HOMES[module]}.{rest}" in MINTING_HELPERS:
        return True
    return rest.startswith("_") and not rest.startswith("__")
