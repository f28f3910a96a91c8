"""``CapabilityWording``: the words of the capability section around the view's facts.

The capability section (:meth:`veridic.ToolView.capability_section`) is an
instruction position, so every character of it traces to code (invariant I9).
Most of it is facts of the view: which tools, with which kind, risk and
arguments, which components did not start, why, and what to do about it.
Around the facts is wording: a first line, a heading before what is
unavailable, and the sentence for a component that did not start. veridic's
wording is English and calls the application "this site"; an application
that talks to its users in another language, or is a helpdesk and not a
site, words the section itself, and the section stays a projection of the
view: the facts are still the view's, so the section, the tool list and the
dispatch table still name the same tools.

Every field is a :data:`~veridic.TrustedInstruction`, because the wording
instructs the model as much as the tool list does. ``instruction("...")``
mints one from a literal; mypy (with the ``veridic.mypy`` plugin for the
literal) refuses any other text before the code runs, and the constructor
refuses, with a :class:`~veridic.ProvenanceError`, a value that was not
minted, so the two checks agree.

Placeholders are ``str.format`` fields, checked when the wording is built so
a typo fails at start-up, not in a prompt:

=====================================  ==============================================
field                                  placeholders
=====================================  ==============================================
``intro`` (names ``get_tool_schema``)  ``{place}``
``intro_without_schema_tool``          ``{place}``; used when a view leaves the
                                       schema tool out, so it may not name it
``unavailable_heading``                ``{place}``
``place`` (``on this site``)           none: it is what ``{place}`` becomes
``provides_line``                      ``{provides}``, ``{reason}`` and ``{hint}``
                                       (required), ``{name}``, ``{place}``
``component_line``                     ``{name}``, ``{reason}`` and ``{hint}``
                                       (required), ``{place}``
=====================================  ==============================================

``provides_line`` is the line for a component declared with ``provides=``
(what it offers), ``component_line`` for one declared without. ``{name}`` is
the component's name, ``{provides}`` what it offers, ``{reason}`` why it is
unavailable (what a failed boot shows: a :class:`~veridic.BootError`'s reason,
a message written in code, or only the exception's type; never outside text,
see :meth:`veridic.Registry.component`), ``{hint}`` what to do about it (empty
when the component has none; the line's trailing spaces are dropped, so a
hint at the end of the line needs no care). The reason and the hint are
required because a line that leaves them out would hide what the view knows.

The scheme is deliberately small: a placeholder is a plain name, optionally
with ``!r`` (the value quoted as Python writes it, as ``{name!r}`` in the
default) or ``!s``; a format spec (``{reason:>40}``), an attribute or an index
(``{name.upper}``, ``{name[0]}``) and positional fields (``{}``, ``{0}``) are
refused, and a literal brace is written ``{{`` or ``}}``. Each field is one
line, since the section lists one item per line.

What is not wording: the tool lines (name, kind, risk, required arguments
and description: the tool list's facts, kind and risk as the specs carry
them) and what veridic says of external tools whose description or schema is
not pinned, which tells the model to read outside text as data: a wording
must not be able to soften it.

>>> from veridic import CapabilityWording, Registry, instruction
>>> registry = Registry("helpdesk", wording=CapabilityWording(place=instruction("in Acme")))
>>> pro = registry.component("Pro plan", boot=lambda: False, provides="Refunds")
>>> print(registry.view().capability_section().splitlines()[-1])
- Refunds are not available in Acme: the Pro plan did not start (its boot check returned False).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Final

from veridic.errors import VeridicError
from veridic.text.provenance import (
    TrustedInstruction,
    instruction,
    is_trusted,
    provenance,
    report,
)

__all__ = ["CapabilityWording"]

_Piece = tuple[str, str | None, str | None]
"""A parsed template: literal text, then a placeholder's name (or ``None``) and its conversion."""

_PLACE: Final = frozenset({"place"})
_ALLOWED: Final[Mapping[str, frozenset[str]]] = {
    "intro": _PLACE,
    "intro_without_schema_tool": _PLACE,
    "unavailable_heading": _PLACE,
    "place": frozenset(),
    "provides_line": frozenset({"name", "provides", "reason", "hint", "place"}),
    "component_line": frozenset({"name", "reason", "hint", "place"}),
}
_REQUIRED: Final[Mapping[str, tuple[str, ...]]] = {
    "provides_line": ("provides", "reason", "hint"),
    "component_line": ("name", "reason", "hint"),
}
_WHY_REQUIRED: Final[Mapping[str, str]] = {
    "provides": "what is unavailable",
    "name": "which component is unavailable",
    "reason": "why it is unavailable",
    "hint": "what to do about it",
}
_CONVERSIONS: Final[Mapping[str | None, Callable[[object], str]]] = {
    None: str,
    "s": str,
    "r": repr,
}
_FORMATTER: Final = string.Formatter()

# veridic's English wording: the section every view rendered before wording was configurable.
_INTRO: Final = instruction(
    "Tools you can call (name, kind, risk, required arguments, what it does). Before "
    "calling a tool whose arguments you are not sure of, read its input schema with "
    "get_tool_schema; do not rely on memory."
)
_INTRO_WITHOUT_SCHEMA_TOOL: Final = instruction(
    "Tools you can call (name, kind, risk, required arguments, what it does). Before "
    "calling a tool whose arguments you are not sure of, read its input schema in the "
    "tool list; do not rely on memory."
)
_UNAVAILABLE_HEADING: Final = instruction(
    "Not available here. If a request needs one of these, say so plainly; do not use "
    "another tool in its place:"
)
_PLACE_TEXT: Final = instruction("on this site")
_PROVIDES_LINE: Final = instruction(
    "- {provides} are not available {place}: the {name} did not start ({reason}). {hint}"
)
_COMPONENT_LINE: Final = instruction(
    "- The tools of component {name!r} are not available {place}: it did not start "
    "({reason}). {hint}"
)


@dataclass(frozen=True, slots=True)
class CapabilityWording:
    """The words of the capability section, as an application wants them said.

    Pass it as ``Registry(..., wording=...)`` (every view's default) or
    ``registry.view(..., wording=...)`` (one view). The defaults are veridic's
    English wording, so ``CapabilityWording()`` renders exactly the section a
    view without a wording renders; override only the fields you need
    (``dataclasses.replace`` works too and checks again).

    The module docstring of :mod:`veridic.tools.wording` lists each field's
    placeholders.

    >>> from veridic import instruction
    >>> CapabilityWording(place=instruction("in this workspace")).place
    'in this workspace'

    Raises:
        ProvenanceError: a field is not trusted text (mint it with
            ``instruction("...")``); in report mode a ``str`` is let through
            with a warning, and the sections worded with it are plain text,
            never minted.
        VeridicError: a field is empty or spans lines, a placeholder is
            unknown to its field or malformed, or a component line leaves out
            the reason or the hint.
    """

    intro: TrustedInstruction = _INTRO
    """The section's first line, for a view that carries ``get_tool_schema``."""
    intro_without_schema_tool: TrustedInstruction = _INTRO_WITHOUT_SCHEMA_TOOL
    """The first line for a view built with ``schema_tool=False``: it must not name the tool."""
    unavailable_heading: TrustedInstruction = _UNAVAILABLE_HEADING
    """The line before the unavailable components and tools (absent when there are none)."""
    place: TrustedInstruction = _PLACE_TEXT
    """What ``{place}`` becomes: the application's own noun ("in Acme Desk")."""
    provides_line: TrustedInstruction = _PROVIDES_LINE
    """The line for a component declared with ``provides=`` that did not start."""
    component_line: TrustedInstruction = _COMPONENT_LINE
    """The line for a component declared without ``provides=`` that did not start."""
    _parsed: Mapping[str, tuple[_Piece, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    # Part of equality: a wording let through by report mode is not a minted one.
    _minted: bool = field(init=False, repr=False, default=True)

    def __post_init__(self) -> None:
        parsed: dict[str, tuple[_Piece, ...]] = {}
        minted = True
        for item in fields(self):
            if item.name.startswith("_"):
                continue
            value: object = getattr(self, item.name)
            if not is_trusted(value):
                # Enforce mode raises; report mode logs and lets a str pass, unminted.
                report(value, f"CapabilityWording({item.name}=...)")
                minted = False
            parsed[item.name] = _parse(item.name, str(value), _origin(value))
        object.__setattr__(self, "_parsed", parsed)
        object.__setattr__(self, "_minted", minted)

    # --- what the view renders (veridic.tools.view) ---------------------------------

    def _intro(self, schema_tool: bool) -> str:
        return self._render("intro" if schema_tool else "intro_without_schema_tool", {})

    def _heading(self) -> str:
        return self._render("unavailable_heading", {})

    def _component(self, name: str, provides: str | None, reason: str, hint: str) -> str:
        values = {"name": name, "provides": provides or "", "reason": reason, "hint": hint}
        line = self._render("provides_line" if provides else "component_line", values)
        return line.rstrip(" ")

    def _render(self, which: str, values: Mapping[str, str]) -> str:
        out: list[str] = []
        for literal, name, conversion in self._parsed[which]:
            out.append(literal)
            if name is not None:
                value = self._render("place", {}) if name == "place" else values[name]
                out.append(_CONVERSIONS[conversion](value))
        return "".join(out)

    def _mentions(self, text: str) -> tuple[str, ...]:
        """The fields (other than ``intro``) whose text contains ``text``."""
        return tuple(
            name for name in _ALLOWED if name != "intro" and text in str(getattr(self, name))
        )


def _origin(value: object) -> str:
    """Where a field came from, for an error message: the ``file:line`` it was minted at."""
    if not isinstance(value, str):
        return f"a {type(value).__name__}"
    found = provenance(value)
    return found.origin if found.trusted else f"text of {found.kind} provenance"


def _parse(name: str, text: str, origin: str) -> tuple[_Piece, ...]:
    where = f"CapabilityWording({name}=...) (from {origin})"
    if not text.strip():
        raise VeridicError(
            f"{where} is empty: the capability section needs the words it stands for; "
            "write them, or leave the field out for veridic's default"
        )
    if len(f"x{text}x".splitlines()) != 1:
        raise VeridicError(
            f"{where} spans more than one line ({text!r}): the capability section lists "
            "one item per line; write the field on one line"
        )
    allowed = _ALLOWED[name]
    listed = ", ".join(f"{{{n}}}" for n in sorted(allowed)) or "none"
    try:
        pieces = list(_FORMATTER.parse(text))
    except ValueError as error:
        raise VeridicError(
            f"{where} is not a valid template ({error}): {text!r}; placeholders are "
            "{name}-style fields, and a literal brace is written {{ or }}"
        ) from None
    parsed: list[_Piece] = []
    for literal, field_name, spec, conversion in pieces:
        if field_name is None:
            parsed.append((literal, None, None))
            continue
        shown = "{" + field_name + (f"!{conversion}" if conversion else "")
        shown += f":{spec}}}" if spec else "}"
        if field_name not in allowed:
            simple = field_name.isidentifier()
            raise VeridicError(
                f"{where} has the placeholder {shown}, which "
                + ("this field does not have" if simple else "is not a plain name")
                + f": its placeholders are {listed} (a plain name, or name!r for the value "
                "quoted); write a literal brace as {{ or }}"
            )
        if spec or conversion not in _CONVERSIONS:
            raise VeridicError(
                f"{where} has the placeholder {shown}: a placeholder is a plain name, "
                "optionally with !r (the value quoted) or !s, without a format spec; "
                f"its placeholders are {listed}"
            )
        parsed.append((literal, field_name, conversion))
    used = {piece[1] for piece in parsed}
    missing = [n for n in _REQUIRED.get(name, ()) if n not in used]
    if missing:
        needs = "; ".join(f"{{{n}}} says {_WHY_REQUIRED[n]}" for n in missing)
        raise VeridicError(
            f"{where} leaves out {', '.join(f'{{{n}}}' for n in missing)}: the line must "
            f"say what the view knows ({needs}); put them in the line, e.g. "
            f"{_EXAMPLES[name]!r}"
        )
    return tuple(parsed)


_EXAMPLES: Final = {
    "provides_line": "- {provides} are not available {place}: the {name} did not start "
    "({reason}). {hint}",
    "component_line": "- The tools of {name} are not available {place} ({reason}). {hint}",
}
