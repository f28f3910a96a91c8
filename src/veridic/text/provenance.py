"""Branded text: where a string came from, carried by the string itself.

``TrustedInstruction`` and ``UntrustedText`` are ``typing.NewType`` brands over
``str``, so the type checker tells them apart at no run-time cost. A NewType
alone would be forgeable at run time (``TrustedInstruction(x)`` is the identity
function), so the values veridic mints are instances of private ``str``
subclasses that carry their provenance. Every ``str`` operation returns a plain
``str``: slicing, ``.upper()``, f-strings, ``format``, ``%`` and ``str.join``
all drop the brand. The one operation that keeps it is ``+`` between two
trusted values, and :func:`join` of trusted parts: exactly the composition
rules the ``veridic.mypy`` plugin applies statically.

The trust rules:

=====================================  =========================
operation                              result
=====================================  =========================
``instruction("literal")``             trusted, kind ``code``
reading an ``InstructionField``        trusted, kind ``field``
``ToolView.capability_section()``      trusted, kind ``registry``
instruction template, trusted values   trusted, kind ``template``
``TrustPolicy(name).vouch(...)``       trusted, kind ``policy``
trusted ``+`` trusted, ``join()``      trusted, spans of each part
``untrusted(x, source=...)``           untrusted, kind ``untrusted``
anything else                          plain ``str`` (``unknown``)
=====================================  =========================

>>> greeting = instruction("You are a support assistant.")
>>> is_trusted(greeting), is_trusted(greeting.upper()), is_trusted(greeting + greeting)
(True, False, True)
>>> provenance(untrusted("hi", source="ticket:42"))
Provenance(kind='untrusted', origin='ticket:42')
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal, LiteralString, NewType, TypeGuard

from veridic._sample import clip, quoted
from veridic._words import a_type
from veridic.config import mode_in_force
from veridic.errors import ProvenanceError

__all__ = [
    "Kind",
    "Provenance",
    "Span",
    "TrustedInstruction",
    "TrustedText",
    "UntrustedText",
    "instruction",
    "is_trusted",
    "join",
    "provenance",
    "untrusted",
]

TrustedInstruction = NewType("TrustedInstruction", str)
"""Text allowed to give the model instructions. Mint it; never construct it."""

UntrustedText = NewType("UntrustedText", str)
"""Text from outside the code: a data position only, always fenced or in a user turn."""

TrustedText = LiteralString | TrustedInstruction
"""What a trusted position that takes short text accepts: a literal written in code, or
text minted trusted. A component's name, hint and offer, a deny reason, an external
tool's source label: they reach the capability section, which instructs the model.
The ``veridic.mypy`` plugin refuses anything else there; at run time text branded
untrusted is refused (a plain ``str`` cannot be told from a literal at run time)."""

Kind = Literal["code", "field", "template", "registry", "policy", "untrusted", "unknown"]
"""Where a span of text came from: the five trusted kinds, ``untrusted``, or ``unknown``."""
TRUSTED_KINDS: Final = frozenset({"code", "field", "template", "registry", "policy"})

_log = logging.getLogger("veridic")
_SOURCE_SHOWN: Final = 80


@dataclass(frozen=True, slots=True)
class Span:
    """The characters ``[start, end)`` of a value and where they came from."""

    start: int
    end: int
    kind: Kind
    origin: str


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a value came from.

    ``kind`` and ``origin`` describe the whole value when it has one source.
    A value assembled from several (a :func:`join`, a template with values)
    reports the kind and origin of its first part, and every part in
    ``spans``; ``trusted`` holds for the value as a whole.
    """

    kind: Kind
    origin: str
    spans: tuple[Span, ...] = ()

    def __repr__(self) -> str:
        return f"Provenance(kind={self.kind!r}, origin={self.origin!r})"

    @property
    def trusted(self) -> bool:
        return self.kind in TRUSTED_KINDS


class _Mint:
    """The key that private constructors check, so only veridic mints."""


_KEY: Final = _Mint()


class _Joined:
    """Spans not yet computed: the parts and separator a trusted value was joined from.

    Joining is on the hot path of every prompt; asking where each character
    came from is not. So a join keeps its parts and works the spans out on
    first request.
    """

    __slots__ = ("head", "parts", "sep")

    def __init__(self, parts: tuple[str, ...], sep: str, head: tuple[Span, ...] = ()) -> None:
        self.parts = parts
        self.sep = sep
        self.head = head


class _Trusted(str):
    """Run-time form of a minted ``TrustedInstruction``.

    The ``_seal`` slot holds a private object, and ``_spans`` where each
    character came from. Their descriptors are removed from the class once
    the class exists, so no code outside this module can read or write them
    (a value's provenance is fixed when it is minted): an object of another
    ``str`` subclass whose ``__class__`` is reassigned to this one (CPython
    allows that between classes of the same layout) has no seal, and
    :func:`is_trusted` refuses it. Only deliberate interpreter introspection
    (``gc.get_referents``) gets around this; veridic guards against misuse,
    not against hostile code in the process.
    """

    __slots__ = ("_seal", "_spans")

    def __new__(cls, text: str, spans: tuple[Span, ...] | _Joined, key: _Mint) -> _Trusted:
        if key is not _KEY:
            raise ProvenanceError(
                "trusted text cannot be constructed directly; mint it with instruction(), "
                "read it from an InstructionField, join() trusted parts or vouch for it "
                "with a TrustPolicy"
            )
        value = super().__new__(cls, characters(text))
        _set_spans(value, spans)
        _set_seal(value, _SEAL)
        return value

    def __add__(self, other: str) -> str:
        joined = str.__add__(self, other)
        if _genuine(other) and _genuine(self):
            return _Trusted(joined, _Joined((self, other), ""), _KEY)
        return joined

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        # Trust does not survive a trip through storage: a pickled instruction
        # comes back as plain text, like any other stored text.
        return (str, (str(self),))

    def __copy__(self) -> str:
        return self if _genuine(self) else str(self)

    def __deepcopy__(self, memo: object) -> str:
        return self.__copy__()


def characters(text: str) -> str:
    """The characters ``text`` holds, as a plain ``str``.

    ``str.__new__`` of a subclass's instance calls the subclass's ``__str__``, which
    may say anything (text branded untrusted, text other than what was checked);
    ``str.__str__`` copies the characters themselves.
    """
    return text if type(text) is str else str.__str__(text)


def readable(text: str) -> str:
    """``text`` to read with ``str``'s methods: itself when they are ``str``'s own.

    A plain ``str`` and veridic's ``UntrustedText`` (whose class overrides no method
    that reads or copies characters) are read as they are; any other subclass is read
    as :func:`characters`. For the fence's hot path: copying a 10 MB document before
    marking it cost a copy of it in memory and time, and changed nothing.
    """
    return text if type(text) in _OWN_METHODS else str.__str__(text)


_SEAL: Final = object()


def _hidden_slot(
    cls: type, name: str
) -> tuple[Callable[[object, object], None], Callable[..., Any]]:
    """The setter and getter of slot ``name`` of ``cls``, whose descriptor leaves the class:
    only this module can read or write it after, so a value's brand cannot be edited."""
    slot = cls.__dict__[name]
    delattr(cls, name)
    return slot.__set__, slot.__get__


_set_seal, _get_seal = _hidden_slot(_Trusted, "_seal")
_set_spans, _get_spans = _hidden_slot(_Trusted, "_spans")


def _genuine(value: object) -> TypeGuard[_Trusted]:
    """Whether ``value`` is trusted text veridic minted (its type, and its seal)."""
    if type(value) is not _Trusted:
        return False
    try:
        return _get_seal(value) is _SEAL
    except AttributeError:  # an object given this class by ``__class__`` assignment
        return False


class _Untrusted(str):
    """Run-time form of ``UntrustedText``: a plain string that remembers its source.

    ``_mode`` is set (to a data mode) only on text that is exactly one data
    block veridic rendered (a data template's output), so the composer can
    place it in a user turn as the block it is, unneutralised. So the fields
    are fixed when the value is made, as :class:`_Trusted`'s are: their
    descriptors leave the class (``text._mode = "datamark"`` raises
    ``AttributeError``), and the mode of a value without the seal (another
    ``str`` subclass given this class by ``__class__`` assignment) is ``""``.
    """

    __slots__ = ("_mode", "_seal", "_source")

    def __new__(cls, text: str, source: str, key: _Mint, mode: str = "") -> _Untrusted:
        if key is not _KEY:
            raise ProvenanceError("untrusted text is made with untrusted(text, source=...)")
        value = super().__new__(cls, characters(text))
        _set_source(value, source)
        _set_mode(value, mode)
        _set_untrusted_seal(value, _SEAL)
        return value

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return (str, (str(self),))

    def __copy__(self) -> _Untrusted:
        return self

    def __deepcopy__(self, memo: object) -> _Untrusted:
        return self


_set_source, _get_source = _hidden_slot(_Untrusted, "_source")
_set_mode, _get_mode = _hidden_slot(_Untrusted, "_mode")
_set_untrusted_seal, _get_untrusted_seal = _hidden_slot(_Untrusted, "_seal")


def _source(value: _Untrusted) -> str:
    """The source label ``value`` was made with (``"unknown"`` for a value of this class
    that veridic did not make: another ``str`` subclass given it by ``__class__``)."""
    try:
        source: str = _get_source(value)
    except AttributeError:
        return "unknown"
    return source


_OWN_METHODS: Final = frozenset({str, _Untrusted})
"""The classes whose instances :func:`readable` reads as they are: their methods are ``str``'s."""


def mint(text: str, kind: Kind, origin: str) -> TrustedInstruction:
    """Brand ``text`` as trusted with one span. For veridic's own minting sites only.

    Raises:
        ProvenanceError: called from a module outside veridic.
    """
    if sys._getframe(1).f_globals.get("__name__") not in _MINTERS:
        _refuse_minter("mint")
    return TrustedInstruction(_Trusted(text, (Span(0, len(text), kind, origin),), _KEY))


def mint_spans(text: str, spans: tuple[Span, ...]) -> TrustedInstruction:
    """Brand ``text`` as trusted with the given spans. For veridic's own minting sites only."""
    if sys._getframe(1).f_globals.get("__name__") not in _MINTERS:
        _refuse_minter("mint_spans")
    return TrustedInstruction(_Trusted(text, spans, _KEY))


def joined(parts: Sequence[str], sep: str, head: tuple[Span, ...] = ()) -> TrustedInstruction:
    """``sep.join(parts)`` as trusted text; every part and ``sep`` must already be trusted.

    ``head`` goes before the parts' spans: an empty span there names the whole
    value (a template's file) without covering a character. For veridic's
    own minting sites only.
    """
    if sys._getframe(1).f_globals.get("__name__") not in _MINTERS:
        _refuse_minter("joined")
    return TrustedInstruction(_Trusted(sep.join(parts), _Joined(tuple(parts), sep, head), _KEY))


_MINTERS: Final = frozenset(
    {
        "veridic.text.provenance",
        "veridic.text.compose",
        "veridic.text.fence",
        "veridic.text.fields",
        "veridic.testing",
        "veridic.text.trust_policy",
        "veridic.tools.view",
        "veridic.templates._bound",
        "veridic.templates._env",
        "veridic.templates._runtime",
    }
)
"""The modules that mint: each is a row of the trust table above (``testing`` mints
arbitrary text for property tests, by name)."""


def _refuse_minter(helper: str) -> None:
    caller = _caller(3)
    raise ProvenanceError(
        f"veridic.provenance.{helper}() was called from {caller}, outside veridic; it is "
        "how veridic's own minting sites brand text, and calling it launders any text into "
        "an instruction: mint text written in code with instruction(), read stored "
        "instructions from an InstructionField, or vouch for text with a TrustPolicy, "
        "which records why"
    )


def instruction(text: LiteralString, /) -> TrustedInstruction:
    """Mint an instruction from text written in code.

    The caller's ``file:line`` becomes the origin. The type checker (with the
    ``veridic.mypy`` plugin, or pyright natively) accepts only literals here;
    at run time a branded untrusted value is refused as well.

    >>> rule = instruction("Answer in English.")
    >>> provenance(rule).kind
    'code'

    A ``str`` subclass is minted as the characters it holds; anything that is not a
    ``str`` is refused: ``str()`` of an object (a ticket, a request) is whatever its
    ``__str__`` returns, often the outside text it carries, and of ``None`` or bytes a
    repr nobody wrote.

    Raises:
        ProvenanceError: ``text`` is ``UntrustedText``, or not a ``str``.
    """
    if type(text) is _Untrusted:
        raise ProvenanceError(
            f"instruction() got untrusted text (source {source_shown(text)}): {clip(text)}; "
            "instruction() mints only text written in code: place outside text with "
            "Composer.data() or Composer.user(), or vouch for it with a TrustPolicy"
        )
    if _genuine(text):
        return TrustedInstruction(text)
    if not isinstance(text, str):
        raise ProvenanceError(_not_code_text(text, "instruction()"))
    return mint(text, "code", _caller(2))


def untrusted(text: str, /, *, source: str) -> UntrustedText:
    """Brand text from outside the code with the source it came from.

    ``source`` names where the text came from (``"ticket:42"``,
    ``"web:https://example.com"``) so that every audit and error can say so.

    >>> provenance(untrusted("Please reset my password", source="ticket:42")).origin
    'ticket:42'

    Only a ``str`` is branded: ``None``, bytes or a structured value would
    otherwise reach the prompt as their ``repr`` (``"None"``, ``"b'...'"``),
    text nobody wrote.

    Raises:
        ProvenanceError: ``source`` is empty, or ``text`` is not a ``str``.
    """
    if not isinstance(source, str) or not source.strip():
        raise ProvenanceError(
            f"untrusted() needs a non-empty source label, got {quoted(source)}: "
            'say where the text came from, e.g. untrusted(body, source="ticket:42")'
        )
    if not isinstance(text, str):
        raise ProvenanceError(_not_text(text, source))
    return UntrustedText(_Untrusted(text, source, _KEY))


def _not_text(value: object, source: str) -> str:
    """Say why ``untrusted()`` refused a value that is not text, and how to make it text.

    str() of it would put its repr in the prompt, so the caller must choose
    the text: decode bytes, write a structure as JSON, or leave out a missing value.
    """
    return (
        f"untrusted() got {a_type(value)}, not text (source {clip(source, _SOURCE_SHOWN)}); "
        "only a str is branded, since str() of anything else puts its repr in the prompt: "
        'decode bytes first (body.decode("utf-8")), write a structured value as JSON '
        "(json.dumps(value)), and leave a missing value (None) out of the prompt"
    )


def _not_code_text(value: object, where: str, role: str = "") -> str:
    """Say why ``where`` refused a value that is not text, and what to pass instead."""
    return (
        f"{where} got {a_type(value)}{role}, not text: {clip(repr(value))}; it mints "
        "only text written in code, and str() of an object is whatever its __str__ returns "
        "(often the outside text it carries, or a repr nobody wrote): write the instruction "
        "as a literal, and place outside text with Composer.data() or Composer.user()"
    )


def join(parts: Iterable[TrustedInstruction], sep: LiteralString = "\n\n") -> TrustedInstruction:
    """Join trusted parts into one trusted value that keeps every part's spans.

    ``str.join`` gives a plain ``str``; this is the join that stays trusted.

    >>> brief = instruction("Be brief.")
    >>> cite = instruction("Cite sources.")
    >>> both = join([brief, cite], sep=" ")
    >>> both, is_trusted(both), len(provenance(both).spans)
    ('Be brief. Cite sources.', True, 3)

    Raises:
        ProvenanceError: a part is not trusted text (in report mode: logged, and
            the result is a plain ``str``), or the separator is untrusted text or
            not a ``str``.
    """
    items = list(parts)
    origin = _caller(2)
    if not _genuine(sep):
        if type(sep) is _Untrusted:
            raise ProvenanceError(
                f"join() got an untrusted separator (source {source_shown(sep)}); "
                "the separator is part of the instruction: write it in code"
            )
        if not isinstance(sep, str):
            raise ProvenanceError(_not_code_text(sep, "join()", " as separator"))
        sep = mint(sep, "code", origin)
    for index, part in enumerate(items):
        if not is_trusted(part):
            report(part, f"join() part {index} (called at {origin})")
            return TrustedInstruction(str.join(sep, items))
    if not items:
        return mint("", "code", origin)
    return joined(items, sep)


def refuse_untrusted(value: object, where: str, fix: str) -> None:
    """Refuse text branded untrusted where the prompt will read it as instruction.

    For the strings an application writes next to its tools (a component's
    name, hint and offer, a deny reason): they reach the capability section,
    so they must come from code.

    Raises:
        ProvenanceError: ``value`` is ``UntrustedText``.
    """
    if type(value) is _Untrusted:
        raise ProvenanceError(
            f"{where} got untrusted text (source {source_shown(value)}): {clip(value)}; it goes "
            f"into the capability section, which instructs the model: {fix}"
        )


def is_untrusted(value: object) -> TypeGuard[UntrustedText]:
    """Whether ``value`` was branded untrusted with :func:`untrusted`."""
    return type(value) is _Untrusted


def source_shown(value: object) -> str:
    """The source label of text branded untrusted as a message quotes it: escaped and
    clipped (a label is often built from outside text: a URL, a file name, a header)."""
    return clip(source_of(value), _SOURCE_SHOWN)


def source_of(value: _Untrusted | object) -> str:
    """The source label of text branded untrusted (``""`` for anything else)."""
    return _source(value) if type(value) is _Untrusted else ""


def rebranded(original: str, text: str) -> str:
    """``text``, a rendering of ``original``, branded as ``original`` was (untrusted, or plain).

    Never trusted: a rendering that changed nothing is ``original`` itself, and a
    ``TrustedInstruction`` placed as a block's label or data is data there (a saved
    document whose spans call a block's label or data trusted is refused as edited).
    """
    if type(original) is _Untrusted:
        return _Untrusted(text, _source(original), _KEY)
    return text if type(text) is str else str.__str__(text)


def fenced_block(text: str, source: str, mode: str) -> UntrustedText:
    """``text``, exactly one data block veridic rendered in ``mode``, branded untrusted.

    For veridic's own data templates only: the composer places such text in a
    user turn unchanged, where it neutralises anything else that looks like a
    block.

    Raises:
        ProvenanceError: called from a module outside veridic.
    """
    if sys._getframe(1).f_globals.get("__name__") not in _MINTERS:
        _refuse_minter("fenced_block")
    return UntrustedText(_Untrusted(text, source, _KEY, mode))


def block_mode(value: object) -> str:
    """The data mode of a block :func:`fenced_block` made (``""`` for any other value)."""
    if type(value) is not _Untrusted:
        return ""
    try:
        sealed = _get_untrusted_seal(value) is _SEAL
    except AttributeError:  # an object given this class by ``__class__`` assignment
        return ""
    mode: str = _get_mode(value) if sealed else ""
    return mode


def is_trusted(value: object) -> bool:
    """Whether ``value`` was minted trusted (not merely typed so).

    >>> from typing import cast
    >>> is_trusted(cast(TrustedInstruction, "forged")), is_trusted(instruction("real"))
    (False, True)
    """
    return _genuine(value)


def provenance(value: str) -> Provenance:
    """Where ``value`` came from: its kind, its origin and its spans.

    >>> provenance("typed by someone")
    Provenance(kind='unknown', origin='unbranded str')
    """
    if _genuine(value):
        spans = _trusted_spans(value)
        if not spans:
            return Provenance("unknown", "unbranded str")
        first = spans[0]
        return Provenance(first.kind, first.origin, spans)
    if type(value) is _Untrusted:
        return Provenance(
            "untrusted", _source(value), (Span(0, len(value), "untrusted", _source(value)),)
        )
    return Provenance(
        "unknown", "unbranded str", (Span(0, len(value), "unknown", "unbranded str"),)
    )


def spans_of(value: str) -> tuple[Span, ...]:
    """The spans of any string, branded or not."""
    if _genuine(value):
        return _trusted_spans(value)
    return provenance(value).spans


def _trusted_spans(value: _Trusted) -> tuple[Span, ...]:
    spans: tuple[Span, ...] | _Joined = _get_spans(value)
    if isinstance(spans, _Joined):
        spans = spans.head + concat_spans(spans.parts, spans.sep)
        _set_spans(value, spans)
    return spans


def describe(value: str) -> str:
    """Say where ``value`` came from, for an error message."""
    if type(value) is _Untrusted:
        return f"provenance untrusted (source {source_shown(value)})"
    if _genuine(value):
        return f"provenance {provenance(value).kind}"
    if isinstance(value, str) and type(value) is not str:
        return (
            f"provenance unknown ({a_type(value)}, a str subclass veridic does not "
            "brand: its methods may give other text than it holds)"
        )
    if isinstance(value, str):
        return (
            "provenance unknown (a plain str: f-strings, str.join, format, % and slicing "
            "all give plain str)"
        )
    return f"{a_type(value)}, not text"


def report(value: object, sink: str) -> None:
    """Refuse ``value`` at an instruction position ``sink``, or log it in report mode.

    Raises:
        ProvenanceError: in enforce mode, always.
    """
    # The characters that pass, not what a str subclass's __str__ says it holds.
    sample = quoted(characters(value) if isinstance(value, str) else value)
    where = describe(value) if isinstance(value, str) else f"{a_type(value)}, not text"
    message = (
        f"{sink} got text of {where}: {sample}; only TrustedInstruction may give "
        "instructions: mint it with instruction(), read it from an InstructionField, "
        "join() trusted parts, or place it as data with Composer.data() or Composer.user()"
    )
    if mode_in_force() == "report" and isinstance(value, str):
        _log.warning("report mode, let pass: %s", message, extra={"veridic_sink": sink})
        return
    if not isinstance(value, str):
        kind, origin = "", ""
    elif _genuine(value) or type(value) is _Untrusted:
        found = provenance(value)
        kind, origin = found.kind, found.origin
    else:
        kind, origin = "plain", ""
    raise ProvenanceError(message, slot=sink, kind=kind, origin=origin)


def concat_spans(parts: Iterable[str], sep: str) -> tuple[Span, ...]:
    """Spans of ``sep.join(parts)``, shifted into place; adjacent twins merge."""
    spans: list[Span] = []
    offset = 0
    sep_spans = spans_of(sep)
    empty: tuple[Span, ...] = ()
    for index, part in enumerate(parts):
        if index:
            _extend(spans, sep_spans, offset)
            offset += len(sep)
        own = spans_of(part)
        empty = empty or own[:1]
        _extend(spans, own, offset)
        offset += len(part)
    if not spans and empty:
        # All parts were empty: keep where the (empty) value came from.
        return (Span(0, 0, empty[0].kind, empty[0].origin),)
    return tuple(spans)


def _extend(spans: list[Span], more: tuple[Span, ...], offset: int) -> None:
    for span in more:
        if span.start == span.end:
            continue
        start, end = span.start + offset, span.end + offset
        if spans:
            last = spans[-1]
            if last.end == start and last.kind == span.kind and last.origin == span.origin:
                spans[-1] = _span(last.start, end, span.kind, span.origin)
                continue
        spans.append(span if offset == 0 else _span(start, end, span.kind, span.origin))


_SPAN_FIELDS: Final = tuple(
    Span.__dict__[name].__set__ for name in ("start", "end", "kind", "origin")
)


def _span(start: int, end: int, kind: Kind, origin: str) -> Span:
    """``Span(start, end, kind, origin)`` without the frozen dataclass's checked ``__init__``:
    spans are made on every request, and the four fields are given here already checked."""
    made = object.__new__(Span)
    set_start, set_end, set_kind, set_origin = _SPAN_FIELDS
    set_start(made, start)
    set_end(made, end)
    set_kind(made, kind)
    set_origin(made, origin)
    return made


def _caller(depth: int) -> str:
    frame = sys._getframe(depth)
    return f"{_display_path(frame.f_code.co_filename)}:{frame.f_lineno}"


@lru_cache(maxsize=512)
def _display_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith("..") else relative
