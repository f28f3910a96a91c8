"""What an instruction template's render yields before veridic reads it, and how it is read.

jinja2 turns every expression output into a plain ``str`` (``str(value)``,
concatenation, filters), so a value's provenance cannot ride on text that a
filter produced. The rewritten instruction templates (see ``_env``)
therefore hand every expression output, unconverted, to a function of this
module, and what the render yields is chunks that still know where they came
from. Every value was checked trusted before the render, so everything the
render yields is minted:

- literal text is yielded as the trusted value minted when the template
  compiled (kind ``template``, origin ``file:line``);
- :func:`emit` passes a minted value through unchanged (its own spans) and
  mints anything else as text the expression at ``file:line`` computed, once
  :func:`check_written` passed it: a value that is not text writes its text by
  its own code (an ``Enum`` member's ``__str__``), and untrusted text that code
  returns is refused, here and wherever the template makes text of a value;
- buffered output (a macro call, ``caller()``, ``super()``, a ``{% set %}``
  block) goes through :func:`concat`, which keeps its chunks in a
  :class:`Rendered` that an output passes through as it is;
- :func:`instruction_text` joins it all into one trusted value whose spans
  are worked out only when asked for.

Every ``str`` operation (a filter, ``~``, a method call) returns a plain
``str``. So an output is taken for "the value itself" only when the value went
through unchanged; anything computed is read as computed. A data template
needs none of this: its whole output is one data block (``_bound``).
"""

from __future__ import annotations

import logging
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, ValuesView
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from typing import Any, Final, cast

from jinja2 import Template as JinjaTemplate
from jinja2.utils import Namespace

from veridic._sample import clip
from veridic._words import article
from veridic.config import settings
from veridic.errors import ProvenanceError, TemplateError
from veridic.text.provenance import (
    Span,
    TrustedInstruction,
    describe,
    joined,
    mint,
    untrusted,
)

__all__ = [
    "EMITTED_AS_IS",
    "SCALARS",
    "STORED_LITERALS",
    "TRUSTED",
    "CheckedIterable",
    "Rendered",
    "check_written",
    "concat",
    "cut",
    "emit",
    "finalize",
    "handed_out",
    "instruction_text",
    "refuse_address",
    "refuse_callable",
    "refuse_own_untrusted",
    "refuse_untrusted",
    "reported",
    "stored_literal",
    "template_line",
    "text_of",
    "unwrapped",
]

TRUSTED: Final = type(mint("", "code", "veridic.templates"))
UNTRUSTED: Final = type(untrusted("", source="veridic.templates"))
"""The run-time type of minted text: ``type(value) is TRUSTED`` is ``is_trusted(value)``."""
_COMPUTED_KEPT: Final = 4096
_COMPUTED_LONGEST: Final = 200
_CALL_ORIGIN: Final = "call block"


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
    if kind is UNTRUSTED or kind not in SCALARS:
        check_written(value, lambda: _place(origin))
        text = str(value)
        if type(text) is UNTRUSTED:  # __str__ read again: what it wrote is what counts
            doing = f"outputs {article(kind.__name__)} whose __str__() returns"
            refuse_untrusted(text, lambda: _place(origin), doing)
        return _computed_part(text, origin)
    return _computed_part(str(value), origin)


def check_written(
    value: object, where: Callable[[], tuple[str, str]], doing: str = "outputs"
) -> None:
    """Refuse what an instruction template may not make text of: untrusted text, a value
    whose text is a memory address (:func:`refuse_address`), and a value whose own code
    writes untrusted text (:func:`refuse_own_untrusted`).

    The one check of every way an instruction template makes text of a value that is not
    plain text or a number: an output, ``~``, a filter that writes its input or its
    arguments as text, ``|join``'s items, a format field, a ``%`` format's values. Text
    and numbers never come here (compiled inline, or checked by type first).

    Raises:
        ProvenanceError: untrusted text (in enforce mode; report mode logs it).
        TemplateError: text that would be a memory address.
    """
    if type(value) is UNTRUSTED:
        refuse_untrusted(value, where, doing)
        return
    refuse_address(value, where, doing)
    refuse_own_untrusted(value, where, doing)


def text_of(value: object) -> object:
    """What an instruction template makes text of with ``~``, ``%``, ``|format`` and
    ``.format()``, and a filter's argument that it writes as text: ``value``, once
    :func:`check_written` passed it (``finalize`` is a data template's)."""
    if type(value) not in SCALARS:
        check_written(value, template_line)
    return value


def refuse_own_untrusted(
    value: object, where: Callable[[], tuple[str, str]], doing: str = "outputs"
) -> None:
    """Refuse a value whose own code writes untrusted text, where an instruction template
    makes text of it.

    The values were checked trusted before the render, but a value that is not text
    writes its text by its own code: an ``Enum`` member's ``__str__``, ``__repr__`` (for
    ``|pprint``, ``%r``, an item of a list) or ``__html__`` (``|e``) may return outside
    text kept where it finds it, and ``{{ x }}``, ``|upper`` or ``'%s!' % x`` made it the
    template's own. Whichever of them the template's way of writing uses, each is read
    (a value whose ``__repr__`` alone returns untrusted text is refused in ``{{ x }}``
    too), and so is each item of a list, tuple, dict or set (what its text is made of).
    Untrusted text is refused as :func:`refuse_untrusted` says.
    """
    found = _own_untrusted(value, set())
    if found is None:
        return
    text, kind, method = found
    holder = "" if kind is type(unwrapped(value)) else f"{article(type(value).__name__)} holding "
    whose = f" whose {method}() returns" if method else ""
    refuse_untrusted(text, where, f"{doing} {holder}{article(kind.__name__)}{whose}")


_BUILTIN_CONTAINERS: Final = frozenset({list, tuple, dict, set, frozenset})
"""Containers whose own text is their items' ``repr``, nothing of their own."""
_OWN_TEXTS: Final = (("__str__", str), ("__repr__", repr))


def _own_untrusted(value: object, seen: set[int]) -> tuple[str, type, str] | None:
    """The first untrusted text that ``value``'s own code, or an item's, writes for it,
    the class whose code wrote it and the method (``""``: the item is that text)."""
    value = unwrapped(value)
    kind = type(value)
    if kind in SCALARS:
        return (cast("str", value), kind, "") if kind is UNTRUSTED else None
    if kind not in _BUILTIN_CONTAINERS:
        for method, write in _OWN_TEXTS:
            text = write(value)
            if type(text) is UNTRUSTED:
                return text, kind, method
        html = getattr(kind, "__html__", None)
        if callable(html) and type(text := html(value)) is UNTRUSTED:
            return text, kind, "__html__"
    items = _written_items(value)
    if items is None or id(value) in seen:
        return None
    seen.add(id(value))
    for held in items:
        found = _own_untrusted(held, seen)
        if found is not None:
            return found
    return None


_log = logging.getLogger("veridic")
_REPORTED: ContextVar[bool] = ContextVar("veridic_template_reported", default=False)
"""Whether the instruction render running let untrusted text pass in report mode."""


def refuse_untrusted(value: str, where: Callable[[], tuple[str, str]], doing: str) -> None:
    """Refuse untrusted text that an instruction template reached while it rendered.

    Its values were checked before the render, but a value may hand out text of its own:
    an attribute set on an ``Enum`` member at run time, what its method returns, what a
    filter of ``safe_filters=`` returns. Such text would be minted as the template's own
    and reach the system slot. ``doing`` says how the template reached it (``outputs``,
    ``reads .note, which gives``). In report mode the refusal is logged and the render's
    result is not minted (:func:`reported`).

    Raises:
        ProvenanceError: in enforce mode, naming the template, line and source.
    """
    template, line = where()
    message = (
        f"instruction template {template!r}{line} {doing} text of {describe(value)}: "
        f"{clip(value)}; its values were checked trusted, but this text came out of one (an "
        "attribute, a method or the __str__ of an Enum member, a filter of safe_filters=), "
        "and only what code wrote may instruct: keep outside text off what an instruction "
        "template reads (mint the value with instruction() if code wrote it), or render it "
        "with a data template (templates.data) and place it with Composer.user()"
    )
    if settings().mode == "report":
        _log.warning("report mode, let pass: %s", message, extra={"veridic_sink": template})
        _REPORTED.set(True)
        return
    raise ProvenanceError(message)


def cut(message: str, limit: int) -> str:
    """``message``, or its first and last ``limit // 2`` characters when it is longer: a
    message of veridic's own that quotes what it was given at length (a ``%`` format's
    mapping key, whole) keeps what was wrong, which ends it, and what to do."""
    if len(message) <= limit:
        return message
    half = limit // 2
    return f"{message[:half]}… ({len(message) - 2 * half:,} characters left out) …{message[-half:]}"


_HOLDERS: Final = (list, tuple, Mapping, AbstractSet, ValuesView)
"""What holds values a template can take out of it (``|first``, a loop, ``x[0]``)."""


def handed_out(value: object, where: Callable[[], tuple[str, str]], doing: str) -> object:
    """``value``, which a value handed an instruction template as it rendered (an
    attribute, what a call or a filter returned), once no untrusted text is in it.

    The text need not be the value itself: a list, a dict, a ``NamedTuple`` holding it
    gave it to ``|first``, a loop or a format field, and ``|upper`` made plain text of
    it. A container is searched item by item; an iterator (a generator a method
    returned) is given back as one that checks each item as the template takes it, and
    so is any other iterable (a class of the application's with ``__iter__``), in a
    :class:`CheckedIterable`: searched now, a second pass could give other items.
    Untrusted text is refused as :func:`refuse_untrusted` says.
    """
    kind = type(value)
    if kind is UNTRUSTED:
        refuse_untrusted(cast("str", value), where, doing)
    elif kind in SCALARS or kind is CheckedIterable or isinstance(value, str):
        pass
    elif isinstance(value, _HOLDERS):
        held = _untrusted_in(value, set())
        if held is not None:
            refuse_untrusted(held, where, f"{doing} {article(kind.__name__)} holding")
    elif isinstance(value, Iterator):
        return _checking(value, where, doing)
    elif isinstance(value, Iterable) and not isinstance(value, _INERT):
        return CheckedIterable(value, where, doing)
    return value


_INERT: Final = (bytes, bytearray, memoryview, range, type)
"""Iterables that give no text (bytes and ranges give numbers; a class, such as an
``Enum``, gives its members, each checked where the template reads it), kept as they are:
a class keeps the sandbox's rules for a class's attributes."""


class CheckedIterable:
    """An application's iterable handed to an instruction template: each item checked as
    the template takes it (a loop, ``|first``, ``|join``, ``|last``, ``x[0]``), as an
    iterator's are.

    Its length, truth, equality and ``in`` are the value's own. So are its text
    (``{{ x }}``, ``|string``, a format field) and what its attributes and methods give
    Python code (``|dictsort`` calls ``.items()``, an application's filter reads
    ``.rows``), each checked as it comes out: untrusted text is refused there too. The
    template's ``x.y`` and ``x[k]`` read the value itself (:func:`unwrapped`), by the
    environment's rules (the sandbox's too), and what they give is checked there.
    """

    __slots__ = ("_doing", "_value", "_where")

    def __init__(
        self, value: Iterable[object], where: Callable[[], tuple[str, str]], doing: str
    ) -> None:
        self._value, self._where = value, where
        self._doing = f"{doing} {article(type(value).__name__)}"

    def __iter__(self) -> Iterator[object]:
        return self._each(iter(self._value))

    def __reversed__(self) -> Iterator[object]:
        # |last and |reverse: the value's own __reversed__, or its length and items.
        return self._each(reversed(self._value))  # type: ignore[call-overload]  # the value's own TypeError when it cannot be reversed

    def __getitem__(self, key: object) -> object:
        return handed_out(self._value[key], self._where, f"{self._doing} giving")  # type: ignore[index]  # the value's own TypeError when it has no items

    def __len__(self) -> int:
        return len(self._value)  # type: ignore[arg-type]  # the value's own TypeError when it has no length

    def __contains__(self, item: object) -> bool:
        return item in self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return bool(self._value == unwrapped(other))

    def __hash__(self) -> int:
        return hash(self._value)

    def __str__(self) -> str:
        return self._text(str(self._value), "whose text is")

    def __repr__(self) -> str:
        return self._text(repr(self._value), "whose repr() is")

    def __format__(self, spec: str) -> str:
        return self._text(format(self._value, spec), "formatted as")

    def __getattr__(self, name: str) -> object:
        found = getattr(self._value, name)
        if callable(found) and not isinstance(found, type):
            return self._checked_call(found, name)
        return handed_out(found, self._where, f"{self._doing} whose .{clip(name, 40)} gives")

    def _each(self, items: Iterator[object]) -> Iterator[object]:
        for item in items:
            yield handed_out(item, self._where, f"{self._doing} giving")

    def _text(self, text: str, doing: str) -> str:
        """The value's own text, once it is not untrusted text it holds, returned as it is
        (``__str__`` may return its item itself)."""
        if type(text) is UNTRUSTED:
            refuse_untrusted(text, self._where, f"{self._doing} {doing}")
        return text

    def _checked_call(self, method: Callable[..., object], name: str) -> Callable[..., object]:
        def checked(*arguments: object, **options: object) -> object:
            doing = f"{self._doing} whose {clip(name, 40)}() returns"
            return handed_out(method(*arguments, **options), self._where, doing)

        return checked


def unwrapped(value: object) -> object:
    """The value a :class:`CheckedIterable` holds, or ``value`` itself."""
    return value._value if type(value) is CheckedIterable else value


def _untrusted_in(value: object, seen: set[int]) -> str | None:
    """The first untrusted text ``value`` holds, however deep; ``None`` when none."""
    if type(value) is UNTRUSTED:
        return value
    if not isinstance(value, _HOLDERS) or id(value) in seen:
        return None
    seen.add(id(value))
    items: Iterable[object] = value
    if isinstance(value, Mapping):
        items = (part for pair in value.items() for part in pair)
    for item in items:
        if type(item) in SCALARS and type(item) is not UNTRUSTED:
            continue
        found = _untrusted_in(item, seen)
        if found is not None:
            return found
    return None


def _checking(
    items: Iterator[object], where: Callable[[], tuple[str, str]], doing: str
) -> Iterator[object]:
    for item in items:
        yield handed_out(item, where, f"{doing} an iterator giving")


def reported(run: Callable[[], list[str]]) -> tuple[list[str], bool]:
    """The chunks ``run`` renders, and whether report mode let untrusted text pass in it."""
    token = _REPORTED.set(False)
    try:
        chunks = run()
        return chunks, _REPORTED.get()
    finally:
        _REPORTED.reset(token)


def finalize(value: object) -> object:
    """A data template's expression output, as jinja2 hands it to ``str()``, and in every
    template what ``~``, ``|string``, ``|pprint`` and ``|format`` make text of: refused
    when that text would be a memory address (see :func:`refuse_address`)."""
    if type(value) not in SCALARS:
        refuse_address(value, template_line)
    return value


SCALARS: Final = frozenset({str, TRUSTED, UNTRUSTED, int, float, bool, type(None)})
"""Types whose text is their value: what an output almost always is, checked no further."""
_ADDRESS: Final = re.compile(r"(?<![0-9A-Za-z_])0x[0-9a-fA-F]{8,16}(?![0-9A-Za-z_])")
"""A hexadecimal number of eight to sixteen digits standing alone in what an object's own
``__str__`` or ``__repr__`` wrote: the shape of a memory address (``<Handle 0x7f43...>``,
``Wrapper(<object object at 0x7f43...>)``), and of a ``hash()``: either differs in every
process. A pointer has at most sixteen digits (64 bits): a longer number is a value (a git
sha, a sha256, a UUID without dashes, a key), the same in every process."""
_CONTAINERS: Final = (list, tuple, Mapping, AbstractSet, ValuesView)
"""What prints the text of each item it holds: checked item by item."""


def _written_items(value: object) -> Iterable[object] | None:
    """The values whose ``repr`` ``value``'s text is made of, or ``None`` for a value that
    writes no one else's: a container's items (a mapping's keys and values, a
    ``dict.values()``'s), and a ``namespace()``'s, whose text is its attributes' ``repr``
    (``<Namespace {'a': ...}>``), and which a template makes of any value."""
    if isinstance(value, _CONTAINERS):
        if isinstance(value, Mapping):
            return (part for pair in value.items() for part in pair)
        return cast("Iterable[object]", value)
    if isinstance(value, Namespace):
        held: dict[str, object] = object.__getattribute__(value, "_Namespace__attrs")
        return (part for pair in held.items() for part in pair)
    return None


_CALLABLES: Final = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
)
_GENERATORS: Final = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)


def refuse_address(
    value: object,
    where: Callable[[], tuple[str, str]],
    doing: str = "outputs",
    *,
    item: bool = False,
) -> None:
    """Refuse an output whose text is the value's memory address, not what it holds.

    ``{{ persona.upper }}`` (the parentheses forgotten) printed ``<built-in method upper of
    _Trusted object at 0x7f43...>``, ``{{ rules | reverse }}`` (``|list`` forgotten)
    ``<list_reverseiterator object at 0x...>``: text that differs in every process, so
    the prompt's bytes, its ``sha256`` and the provider's prompt cache do too (and, in
    the system slot, text minted as the template's own). ``doing`` says how the template
    writes the value (``outputs``; a filter that writes its input as text, ``_written``);
    ``item``, that it writes its ``repr`` (a format field's ``!r``), as a list's items.

    Raises:
        TemplateError: such an output, with the template and line.
    """
    value = unwrapped(value)  # named by the application's class, not by veridic's wrapper
    found = _addressed(value, set(), item=item)
    if found is None:
        return
    what, kind, why = found
    template, line = where()  # only now: finding the line walks the stack
    holder = "" if kind is type(value) else f"{article(type(value).__name__)} holding "
    raise TemplateError(
        f"template {template!r}{line} {doing} {holder}{what} ({kind.__name__}), {why}, "
        "different in every process (provider prompt caching and the audit's sha256 rely on "
        f"the same bytes for the same values): {_REMEDY if why is _ITS_ADDRESS else _OWN_TEXT}"
    )


def refuse_callable(value: object, where: Callable[[], tuple[str, str]], doing: str) -> None:
    """Refuse a method or function where a filter reads a value (a number, a sequence).

    ``{{ persona.upper | int }}`` (the parentheses forgotten) rendered ``0`` without a word,
    ``|wordcount`` counted the words of its ``repr()``, ``|first`` raised a bare
    ``TypeError``: no filter of jinja2 that reads a value reads a callable's.

    Raises:
        TemplateError: such an input, with the template, line, filter and expression.
    """
    if not isinstance(value, _CALLABLES):
        return
    shown = "a function" if isinstance(value, types.FunctionType) else "a method"
    template, line = where()
    raise TemplateError(
        f"template {template!r}{line} {doing} {shown} ({type(value).__name__}), not a value: "
        "a call whose parentheses were left out, which the filter would read as a value it "
        "is not (|int made it 0): call the method (persona.upper()), or pass the value"
    )


_ITS_ADDRESS: Final = "whose text is its memory address"
_REMEDY: Final = (
    "call the method (persona.upper()), add |list after a filter that gives an iterator "
    "(|select, |map, |reverse), give the class a __str__ (and a __repr__, for an item of a "
    "list) that writes what it holds, or output a value"
)
_OWN_TEXT: Final = (
    "give the class a __str__ (and a __repr__, for an item of a list) that writes what it "
    "holds, not an address; if that number is a value and not an address, pass its text "
    "(str(x)) as the value: text given as a value is never read for addresses"
)


def _addressed(
    value: object, seen: set[int], *, item: bool = False
) -> tuple[str, type, str] | None:
    """What in ``value`` prints a memory address (itself, or an item it holds), its type,
    and why; ``None`` when nothing does.

    An output is written with ``str()``, the items of a container with ``repr()``: an
    object with a ``__str__`` of its own but not a ``__repr__`` prints its text alone and
    its address in a list (``item``). An object's own text is read for an address
    (:data:`_ADDRESS`); text (a ``str``, ``bytes``) is not: what it says is a value, the
    same bytes in every process, even a traceback a user pasted.
    """
    value = unwrapped(value)
    kind = type(value)
    if kind in SCALARS:
        return None
    if kind.__repr__ is object.__repr__ and (item or kind.__str__ is object.__str__):
        shown = "an iterator" if isinstance(value, Iterator) else article(kind.__name__)
        return shown, kind, _ITS_ADDRESS
    items = _written_items(value)
    if items is not None:
        if id(value) in seen:  # a container holding itself prints as [...]
            return None
        seen.add(id(value))
        for held in items:
            found = _addressed(held, seen, item=True)
            if found is not None:
                return found
        return None
    if isinstance(value, _CALLABLES):
        shown = "a function" if isinstance(value, types.FunctionType) else "a method"
        return shown, kind, _ITS_ADDRESS
    if isinstance(value, _GENERATORS):
        return "a generator", kind, _ITS_ADDRESS
    if isinstance(value, str | bytes | bytearray):  # a value's own text, not an object's
        return None
    address = _ADDRESS.search(repr(value) if item else str(value))
    if address is None:
        return None
    written = "__repr__" if item else "__str__"
    return article(kind.__name__), kind, f"whose {written} writes a memory address ({address[0]})"


def _place(origin: str) -> tuple[str, str]:
    """``(file, " line N")`` of an output's ``file:line`` origin."""
    file, _, line = origin.rpartition(":")
    return (file, f" line {line}") if line.isdigit() else (origin, "")


def template_line() -> tuple[str, str]:
    """``(file, " line N")`` of the innermost template frame on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        template = frame.f_globals.get("__jinja_template__")
        if isinstance(template, JinjaTemplate):
            line = template.get_corresponding_lineno(frame.f_lineno)
            return template.filename or template.name or "<template>", f" line {line}"
        frame = frame.f_back  # type: ignore[assignment]  # None ends the loop
    return "<template>", ""


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


STORED_LITERALS: Final[dict[tuple[str, str], TrustedInstruction]] = {}
"""The literal parts of stored templates, minted, by text and ``file:line``: what compiled
stored templates look up first (inline), so a render mints none of its literals again."""
_STORED_KEPT: Final = 4_000_000
"""What :data:`STORED_LITERALS` keeps, in characters: each entry counts its text, its
origin and :data:`_STORED_ENTRY`; all forgotten when full."""
_STORED_ENTRY: Final = 256
"""What an entry costs besides its characters, in characters (its key, the minted text and
its span take about 400 bytes): a template of many one-character literals between its
expressions would otherwise keep 4,000,000 entries, more than a gigabyte."""
_stored_chars = 0


def stored_literal(text: str, origin: str) -> TrustedInstruction:
    """A literal part of a stored template that :data:`STORED_LITERALS` does not hold: minted,
    and kept while the memo has room.

    A stored source is one of unboundedly many (every version of every row rendered), so
    its literals are kept by a bounded memo, not by the environment for as long as the
    process runs (as those of templates shipped with the code are).
    """
    global _stored_chars
    part = mint(text, "template", origin)
    cost = len(text) + len(origin) + _STORED_ENTRY
    if cost > _STORED_KEPT:
        return part
    if _stored_chars + cost > _STORED_KEPT:
        STORED_LITERALS.clear()
        _stored_chars = 0
    STORED_LITERALS[text, origin] = part
    _stored_chars += cost
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


def concat(chunks: Iterable[str]) -> str:
    """``environment.concat``: join buffered output and keep its chunks."""
    parts = tuple(chunks)
    rendered = str.__new__(Rendered, "".join(parts))
    rendered._parts = parts
    return rendered
