"""What a template render yields before veridic reads it, and how it is read.

jinja2 turns every expression output into a plain ``str`` (``str(value)``,
concatenation, filters), so a value's provenance cannot ride on text that a
filter produced. The rewritten templates (see ``_template_env``) therefore
hand every expression output, unconverted, to a function of this module, and
what the render yields is chunks that still know where they came from:

- In an **instruction** template every value was checked trusted before the
  render, so everything it yields is minted: literal text is yielded as the
  trusted value minted when the template compiled (kind ``template``, origin
  ``file:line``); :func:`emit` passes a minted value through unchanged (its own
  spans) and mints anything else as text the expression at ``file:line``
  computed; :func:`instruction_text` joins it all into one trusted value whose
  spans are worked out only when asked for.
- In a **data** template literal text is yielded as the :class:`TemplateText`
  made for it when the template compiled. An output of the template's own
  body goes straight to the render, so :func:`final` fences it at once (a
  :class:`Piece`); an output inside a block, macro or buffer may still be
  computed on, so :func:`out` yields an :class:`Out` chunk that remembers the
  value and the expression's label, and :func:`data_text` fences it at the end.
- In both, buffered output (a macro call, ``caller()``, ``super()``, a
  ``{% set %}`` block) goes through :func:`concat`, which keeps its chunks in a
  :class:`Rendered` that an output passes through as it is.

Every ``str`` operation (a filter, ``~``, a method call) returns a plain
``str``. So an output is taken for "the value itself" only when the value went
through unchanged; anything computed is read as computed, whatever the filter
was: that is the no-laundering rule, and it does not depend on knowing filters.
The chunk classes return themselves from ``__str__`` (a safety net should
jinja2 convert them after all), and their attributes start with ``_`` so a
sandboxed template cannot read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from veridic.fence import fence_checked
from veridic.provenance import Span, TrustedInstruction, joined, mint

__all__ = [
    "EMITTED_AS_IS",
    "OUTPUT_LABEL",
    "TRUSTED",
    "Out",
    "Piece",
    "Rendered",
    "TemplateText",
    "concat",
    "data_text",
    "emit",
    "final",
    "instruction_text",
    "out",
]

OUTPUT_LABEL: Final = "output"
"""The fence label of output that is neither template text nor an expression's value."""

TRUSTED: Final = type(mint("", "code", "veridic.templates"))
"""The run-time type of minted text: ``type(value) is TRUSTED`` is ``is_trusted(value)``."""
_INERT: Final = frozenset({int, float, bool, type(None)})
_COMPUTED_KEPT: Final = 4096
_COMPUTED_LONGEST: Final = 200
_CALL_ORIGIN: Final = "call block"


class TemplateText(str):
    """A data template's own text, made once when the template compiled."""

    __slots__ = ()

    def __str__(self) -> str:
        return self


class Out(str):
    """One expression's output in a data template: its text, value and label."""

    __slots__ = ("_label", "_value")
    _value: object
    _label: str

    def __str__(self) -> str:
        return self


class Piece(str):
    """One output of a data template's own body, final: already fenced, or safe as it is."""

    __slots__ = ()

    def __str__(self) -> str:
        return self


class Rendered(str):
    """Buffered template output (a macro call, a block, a set block) with its chunks."""

    __slots__ = ("_parts",)
    _parts: tuple[str, ...]

    def __str__(self) -> str:
        return self


# -- instruction templates -----------------------------------------------------------------

_computed: dict[tuple[str, str], TrustedInstruction] = {}


EMITTED_AS_IS: Final = frozenset({TRUSTED, Rendered})
"""The types :func:`emit` passes through unchanged (compiled templates check this inline)."""


def emit(value: object, origin: str) -> str:
    """One expression output of an instruction template: trusted text, or buffered output."""
    kind = type(value)
    if kind is TRUSTED or kind is Rendered:
        return value  # type: ignore[return-value]  # a str subclass
    return _computed_part(str(value), origin)


def _computed_part(text: str, origin: str) -> TrustedInstruction:
    # Computed inside an instruction template from trusted values only: trusted,
    # attributed to the expression. Short outputs are memoised: the same ones
    # ("1", "2", a count, a name) recur at every render.
    if len(text) > _COMPUTED_LONGEST:
        return mint(text, "template", origin)
    key = (text, origin)
    part = _computed.get(key)
    if part is None:
        if len(_computed) >= _COMPUTED_KEPT:
            _computed.clear()
        part = _computed[key] = mint(text, "template", origin)
    return part


def instruction_text(chunks: Iterable[str], head: tuple[Span, ...]) -> TrustedInstruction:
    """A whole instruction render: its trusted parts joined, spans worked out on request."""
    parts: list[str] = []
    _trusted_parts(chunks, parts)
    return joined(parts, "", head)


def _trusted_parts(chunks: Iterable[str], parts: list[str]) -> None:
    append = parts.append
    chunk: Any  # one of the chunk types, read by exact type on the hot path
    for chunk in chunks:
        kind = type(chunk)
        if kind is TRUSTED:
            append(chunk)
        elif kind is Rendered:
            for inner in chunk._parts:  # one level inline: a macro call's output
                if type(inner) is TRUSTED:
                    append(inner)
                else:
                    _trusted_parts((inner,), parts)
        else:
            # Only a {% call %} of a plain callable yields its result unconverted.
            append(_computed_part(str(chunk), _CALL_ORIGIN))


# -- data templates ------------------------------------------------------------------------


def out(value: object, label: str) -> str:
    """Wrap one expression output of a data template with the value and its label."""
    if type(value) is Rendered:
        return value
    chunk = str.__new__(Out, value)  # str(value): an Undefined raises here, as in jinja2
    chunk._value = value
    chunk._label = label
    return chunk


def final(value: object, label: str) -> str:
    """An output of a data template's own body: :func:`out` and :func:`data_text` in one step.

    The body's outputs go straight to the render (buffered output, blocks
    and macros go through :func:`out`, since a filter may still compute on
    their text), so each can be fenced as it is produced.
    """
    kind = type(value)
    if kind is Rendered or kind is TRUSTED:
        return value  # type: ignore[return-value]  # a str subclass
    if kind in _INERT:
        return str.__new__(Piece, value)
    return str.__new__(Piece, fence_checked(label, str(value)))


def concat(chunks: Iterable[str]) -> str:
    """``environment.concat``: join buffered output and keep its chunks."""
    parts = tuple(chunks)
    rendered = str.__new__(Rendered, "".join(parts))
    rendered._parts = parts
    return rendered


def data_text(chunks: Iterable[str]) -> str:
    """The text of a data template's chunks, with every value not trusted fenced.

    Inserted as they are: the template's literal text, a minted
    ``TrustedInstruction`` that went through unchanged, and numbers, booleans
    and ``None`` (their text cannot carry words). Everything else, untrusted
    text, plain ``str`` and anything computed, is fenced under the label of
    the expression that output it.
    """
    pieces: list[str] = []
    _data_pieces(chunks, pieces)
    return "".join(pieces)


def _data_pieces(chunks: Iterable[str], pieces: list[str]) -> None:
    append = pieces.append
    chunk: Any  # as in _trusted_parts
    for chunk in chunks:
        kind = type(chunk)
        if kind is TemplateText or kind is Piece:
            append(chunk)
        elif kind is Out:
            value_type = type(chunk._value)
            if value_type is TRUSTED or value_type in _INERT:
                append(chunk)
            else:
                append(fence_checked(chunk._label, str.__str__(chunk)))
        elif kind is Rendered:
            _data_pieces(chunk._parts, pieces)
        elif kind is TRUSTED:
            append(chunk)
        else:
            append(fence_checked(OUTPUT_LABEL, str(chunk)))
