"""Bounds on what a stored template's operators make, so that one stored row cannot hang a worker.

jinja2's sandbox keeps a stored template away from Python's internals and bounds
``range`` (to 100,000 items), but ``**``, ``*`` and ``%`` run as Python runs them,
and jinja2 folds a constant expression when the template compiles, before anything
renders: ``{{ 9 ** (9 ** 9) }}`` spends minutes of a core inside one big-integer
power, which no timeout can interrupt, and ``{{ "x" * 10 ** 10 }}`` asks for 10 GB.
The sandboxed environment intercepts these three operators (jinja2's documented hook,
which also stops their folding), and each refuses a result past a bound with a
``SecurityError``, which the render reports as a
:class:`~veridic.errors.TemplateSandboxError`:

- ``a ** b`` and ``a * b`` of integers: more than 14,284 bits (4,300 digits, the
  most Python writes as text, so nothing larger could reach a prompt), refused
  before it is computed when the operands say so and after otherwise;
- a string, bytes, list or tuple repeated by ``*``: more than 100,000 characters or
  items (the sandbox's bound on a range);
- ``text % values`` and the ``|format`` filter: a width or precision over 100,000,
  or one taken from the values (``*``);
- ``+`` of two texts, lists or tuples: more than 10,000,000 characters or items;
- ``|pprint``, which formats its value item by item in Python: the items it walks
  (nested ones too, and a text's words) are charged as loop iterations;
- filters whose arguments say how much they make, checked before they run:
  ``|center``, ``|indent``, ``|wordwrap`` (its wrapstring after each character),
  ``|replace``, ``|join`` and ``|tojson(indent=...)`` making more than 10,000,000
  characters, ``|batch`` and ``|slice`` asking for more than 100,000 pieces; ``|sum``
  of lists or tuples joins them once (Python's ``sum`` copies them at each item);
- methods of text: ``center``, ``ljust``, ``rjust``, ``zfill``, ``expandtabs``,
  ``replace`` and ``join`` making more than 10,000,000 characters; ``join`` takes a list,
  a tuple, a dict or a dict's view (in the order the dict was built) and refuses a set,
  whose order depends on the process's hash seed (a render is the same text in every
  worker: provider prompt caching and audit hashes rely on it), and an iterator, whose
  size is not known before it is read; ``translate`` is refused (a table can map a
  character to any text);
- ``int.to_bytes()``: more than 10,000,000 bytes (allocated and filled before anything
  could size the result);
- ``|round`` to more than 4,300 digits either side of the point (``round(n, -k)`` of an
  integer computes ``10 ** k`` in one call); ``.encode`` and ``.decode`` with the
  ``punycode`` and ``idna`` codecs (quadratic in the distinct characters).

What a whole render may spend (loop iterations and the items filters go through, what
filters, tests, comparisons and methods read, calls, the size of every value it makes,
what it writes) is ``_budget``'s: every filter and test of the sandboxed environment
charges what it reads (:func:`bounded_filters`, :func:`bounded_tests`). Some costs stay
unbounded in-process: ``|wordwrap`` of one very long word at a small width (quadratic in
Python's ``textwrap``), a value of the application's own class whose ``repr`` is slow,
a filter or global of the application's own. A template from authors the application
does not trust (its customers) should render in a worker process with a timeout.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Final

from jinja2 import pass_environment, pass_eval_context
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS, do_format, make_attrgetter
from jinja2.nodes import EvalContext
from jinja2.sandbox import MAX_RANGE
from jinja2.tests import TESTS

from veridic._sample import clip
from veridic._words import a_type
from veridic.templates._budget import (
    LONGEST,
    MOST_ITERATIONS,
    consumed,
    current,
    made,
    searched,
    size,
)
from veridic.templates._params import SortedSet

__all__ = [
    "INTERCEPTED",
    "bounded_filters",
    "bounded_format",
    "bounded_tests",
    "check_binop",
    "check_call",
    "check_result",
]

INTERCEPTED: Final = frozenset({"**", "*", "%", "+", "-"})
"""The operators the sandboxed environment hands to :func:`check_binop` first, and whose
results :func:`check_result` reads (``-`` of two integers gains a bit, as ``+`` does)."""

_LARGEST_BITS: Final = 14_284
"""The most bits of an integer Python writes as text: ``2 ** 14_284 < 10 ** 4_300``, and
Python refuses ``str()`` of one past 4,300 digits (``sys.get_int_max_str_digits()``)."""
_LONGEST: Final = MAX_RANGE
Filter = Callable[..., object]
_SEQUENCES: Final = (str, bytes, list, tuple)
_PRINTF: Final = re.compile(r"%%|%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def check_binop(operator: str, left: object, right: object) -> None:
    """Refuse ``left operator right`` when its result would pass a bound (see the module).

    Raises:
        SecurityError: the result would be too large; nothing was computed.
    """
    if operator == "**":
        _check_power(left, right)
    elif operator == "*":
        _check_product(left, right)
    elif operator == "%" and isinstance(left, str):
        _check_printf(left)
    elif operator == "+" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
        _check_longest(f"{type(left).__name__} + {type(right).__name__}", len(left) + len(right))


def check_result(value: object) -> None:
    """Refuse an integer an operator made with more digits than Python writes as text.

    :func:`check_binop` bounds a power's and a product's bits from below, so that a
    huge one is never computed; one just past the bound is computed, and refused here
    (its ``str()`` would raise a bare ``ValueError`` out of the render).

    Raises:
        SecurityError: ``value`` is an integer of more than 14,284 bits.
    """
    if type(value) is int and value.bit_length() > _LARGEST_BITS:
        raise SecurityError(
            f"an integer of {value.bit_length():,} bits would have more digits than Python "
            f"writes as text (at most {_LARGEST_BITS:,} bits, 4,300 digits)"
        )


def bounded_format(value: object, *args: object, **kwargs: object) -> str:
    """jinja2's ``|format`` filter, with the bounds of ``%`` on its widths.

    Raises:
        SecurityError: a width or precision is over 100,000 or given by ``*``.
    """
    _check_printf(str(value))
    return do_format(str(value), *args, **kwargs)


def _check_power(base: object, exponent: object) -> None:
    if not isinstance(base, int) or not isinstance(exponent, int):
        return
    if exponent <= 0 or abs(base) <= 1:
        return
    if (abs(base).bit_length() - 1) * exponent > _LARGEST_BITS:
        raise SecurityError(
            f"a power of integers ({base.bit_length()}-bit base, exponent of "
            f"{exponent.bit_length()} bits) would have more than {_LARGEST_BITS:,} bits, more "
            "digits than Python writes as text"
        )


def _check_product(left: object, right: object) -> None:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > _LARGEST_BITS + 1:
            raise SecurityError(
                f"a product of integers would have more than {_LARGEST_BITS:,} bits, more "
                "digits than Python writes as text"
            )
        return
    for repeated, times in ((left, right), (right, left)):
        if not isinstance(repeated, _SEQUENCES) or not isinstance(times, int):
            continue
        if len(repeated) * times > _LONGEST:
            raise SecurityError(
                f"{a_type(repeated)} of {len(repeated):,} repeated {times:,} "
                f"times would be longer than {_LONGEST:,}"
            )


def _check_printf(text: str) -> None:
    """Refuse a ``%`` format whose widths and precisions ask for more than the bound in
    all: each field kept to it, ``"%(k)100000s"`` twenty times over one mapping's value
    made two million characters (``str.format`` is bounded so too, in ``_format``)."""
    asked = 0
    for match in _PRINTF.finditer(text):
        for given in match.groups():
            if given is None:
                continue
            if given == "*":
                raise SecurityError(
                    f"the format {clip(match.group(), 20)} takes its width or precision from "
                    f"the values (*): write it in the format, at most {_LONGEST:,}"
                )
            asked += int(given) if len(given) <= 6 else _LONGEST + 1
            if asked > _LONGEST:
                raise SecurityError(
                    f"the format {clip(match.group(), 20)} asks for a width or precision "
                    f"over {_LONGEST:,} in all, with those of the fields before it: write "
                    f"the format in the template, at most {_LONGEST:,} wide in all"
                )


def _check_longest(what: str, predicted: int) -> None:
    if predicted > LONGEST:
        raise SecurityError(
            f"{what} would make {predicted:,} characters or items, more than {LONGEST:,}, "
            "the most a stored template's render may make of one value or write"
        )


def _check_count(what: str, count: object) -> None:
    if isinstance(count, int) and count > _LONGEST:
        raise SecurityError(f"{what} asks for {count:,} pieces, more than {_LONGEST:,}")


# -- filters: the size each would make, checked before it is made -------------------------


def _check_center(value: object, width: object = 80) -> None:
    if isinstance(width, int):
        _check_longest(f"|center({width:,})", width)


def _check_indent(
    value: object, width: object = 4, first: object = False, blank: object = False
) -> None:
    text = str(value)
    _check_longest("|indent", len(text) + (text.count("\n") + 1) * _length(width))


def _length(width: object) -> int:
    """The characters a width argument stands for: a number of spaces, or a text."""
    if isinstance(width, str):
        return len(width)
    return width if isinstance(width, int) else 0


def _check_wordwrap(
    value: object,
    width: object = 79,
    break_long_words: object = True,
    wrapstring: object = None,
    break_on_hyphens: object = True,
) -> None:
    # At most a line a character: the text and a wrapstring after each.
    text = str(value)
    joint = len(wrapstring) if isinstance(wrapstring, str) else 1
    _check_longest("|wordwrap", len(text) * (1 + joint))


def _check_replace(value: object, old: object, new: object, count: object = None) -> None:
    _check_text_replace("|replace", str(value), str(old), str(new), count)


def _check_text_replace(what: str, text: str, old: str, new: str, count: object) -> None:
    found = text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    _check_longest(what, len(text) + found * max(len(new) - len(old), 0))


def _check_batch(value: object, linecount: object, fill_with: object = None) -> None:
    _check_count("|batch", linecount)


def _check_slice(value: object, slices: object, fill_with: object = None) -> None:
    _check_count("|slice", slices)


def _check_tojson(value: object, indent: object = None) -> None:
    if indent is not None:
        # A line an item, indented once for each level it is nested in.
        measured = size(value)
        _check_longest("|tojson(indent=...)", measured * (1 + _length(indent) * _depth(value)))


def _depth(value: object) -> int:
    """How deep lists, tuples and dicts nest in ``value`` (each shared one walked once)."""
    depths: dict[int, int] = {}

    def walk(item: object) -> int:
        if isinstance(item, dict):
            inner: Iterable[object] = item.values()
        elif isinstance(item, list | tuple):
            inner = item
        else:
            return 0
        if id(item) not in depths:
            depths[id(item)] = 1  # a cycle: json refuses it, the walk stops
            depths[id(item)] = 1 + max((walk(child) for child in inner), default=0)
        return depths[id(item)]

    return walk(value)


def _check_pprint(value: object, *_: object, **__: object) -> None:
    # pprint formats its value in Python, item by item and nested ones too (a microsecond
    # or so each): read once in C it would be charged one read of its size, and a loop of
    # |pprint over a large value could spend minutes within every bound.
    current().items(_walked(value))


def _walked(value: object) -> int:
    """The items ``pprint`` walks in Python in ``value``, a shared one as often as it is held.

    A text is split in C and walked word by word (``_WORD`` characters an item, as the
    word-by-word filters are charged): charged a character an item, a record of long
    texts that formats in a few hundredths of a second was refused.
    """
    walked: dict[int, int] = {}

    def walk(item: object) -> int:
        if isinstance(item, str | bytes):
            return 1 + len(item) // _WORD
        if isinstance(item, dict):
            inner: Iterable[object] = (part for pair in item.items() for part in pair)
        elif isinstance(item, list | tuple | set | frozenset):
            inner = item
        else:
            return 1
        if id(item) not in walked:
            walked[id(item)] = 1  # a cycle: pprint writes <Recursion on ...>, the walk stops
            total = 1
            for child in inner:
                total += walk(child)
                if total > MOST_ITERATIONS:
                    break  # refused once charged: the rest need not be walked
            walked[id(item)] = total
        return walked[id(item)]

    return walk(value)


def _check_round(value: object, precision: object = 0, method: object = "common") -> None:
    # round(n, -k) of an integer computes 10 ** k inside one C call: k = 30,000,000 is a
    # minute and a half of a core that nothing interrupts.
    if isinstance(precision, int) and abs(precision) > _LARGEST_DIGITS:
        raise SecurityError(
            f"|round({precision:,}) asks for more digits than Python writes as text (at "
            f"most {_LARGEST_DIGITS:,} either side of the point)"
        )


_LARGEST_DIGITS: Final = 4_300
"""The most digits Python writes of an integer (``sys.get_int_max_str_digits()``)."""


_FILTER_CHECKS: Final[dict[str, Callable[..., None]]] = {
    "round": _check_round,
    "center": _check_center,
    "indent": _check_indent,
    "wordwrap": _check_wordwrap,
    "replace": _check_replace,
    "batch": _check_batch,
    "slice": _check_slice,
    "tojson": _check_tojson,
    "pprint": _check_pprint,
}
"""Checks of the filters whose arguments say how much they make, before they make it."""


@pass_eval_context
def _bounded_join(
    eval_ctx: EvalContext, value: Iterable[object], d: object = "", attribute: object = None
) -> object:
    """``|join``, its size known before the text is made (items, and a separator between)."""
    if attribute is not None:
        value = map(make_attrgetter(eval_ctx.environment, attribute), value)  # type: ignore[arg-type]  # jinja2 reads an attribute name or an index
    items = list(value)
    separator = len(str(d)) * max(len(items) - 1, 0)
    _check_longest("|join", sum(size(item) for item in items) + separator)
    return FILTERS["join"](eval_ctx, items, d)


@pass_environment
def _bounded_sum(
    environment: object, iterable: Iterable[object], attribute: object = None, start: object = 0
) -> object:
    """``|sum``; lists or tuples are joined once (Python's sum copies them at each item)."""
    if not isinstance(start, list | tuple):
        return FILTERS["sum"](environment, iterable, attribute, start)
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)  # type: ignore[arg-type]  # as in |join
    parts: list[list[object] | tuple[object, ...]] = [start]
    for part in iterable:
        if not isinstance(part, list | tuple) or type(part) is not type(start):
            raise TypeError(
                f'can only concatenate {type(start).__name__} (not "{type(part).__name__}") '
                f"to {type(start).__name__}"
            )
        parts.append(part)
    _check_longest("|sum", sum(len(part) for part in parts))
    items = [item for part in parts for item in part]
    return items if isinstance(start, list) else tuple(items)


_AT_ONCE: Final = frozenset({"length", "count", "first", "last", "default", "d", "attr", "reverse"})
"""jinja2's filters that take what they need of their value without reading it whole
(``|reverse`` of a list gives an iterator, charged as it is read; of a text it makes one)."""
_ONE_BY_ONE: Final = frozenset(
    {
        "batch",
        "dictsort",
        "groupby",
        "items",
        "join",
        "list",
        "map",
        "max",
        "min",
        "reject",
        "rejectattr",
        "select",
        "selectattr",
        "slice",
        "sort",
        "sum",
        "unique",
    }
)
"""jinja2's filters that go through their value item by item (a text character by
character): what they read is charged as iterations."""
_WORD_BY_WORD: Final = frozenset({"striptags", "title", "urlize", "wordcount", "wordwrap"})
"""jinja2's filters that go through a text word by word in Python (a microsecond a word,
a thousand times what ``|upper`` spends): a text's words are charged as iterations."""
_WORD: Final = 5
"""Characters counted as one word, one iteration, of a text a filter goes through."""


def _step(name: str) -> int:
    """How many characters of a text the filter ``name`` takes in an iteration (0: none)."""
    if name in _ONE_BY_ONE:
        return 1
    return _WORD if name in _WORD_BY_WORD else 0


def bounded_filters(filters: Mapping[str, Filter]) -> dict[str, Filter]:
    """``filters`` for a sandboxed environment: what each reads charged to the render and
    its result sized; jinja2's own filters that pad, wrap, replace, join, sum or cut into
    pieces checked before they run."""
    bounded: dict[str, Filter] = {}
    for name, function in filters.items():
        own = function is FILTERS.get(name)
        check = _FILTER_CHECKS.get(name) if own else None
        if function is FILTERS.get("join"):
            function = _bounded_join
        elif function is FILTERS.get("sum"):
            function = _bounded_sum
        reads = not (own and name in _AT_ONCE)
        bounded[name] = _bounded_filter(function, check, reads, _step(name) if own else 0)
    return bounded


def _bounded_filter(
    function: Filter, check: Callable[..., None] | None, reads: bool, step: int
) -> Filter:
    passed = 1 if getattr(function, "jinja_pass_arg", None) is not None else 0

    def bounded(*arguments: object, **options: object) -> object:
        if reads and len(arguments) > passed:
            subject = consumed(arguments[passed], step)
            if subject is not arguments[passed]:  # an iterator, charged as it is read
                arguments = (*arguments[:passed], subject, *arguments[passed + 1 :])
        if check is not None:
            check(*arguments[passed:], **options)
        result = function(*arguments, **options)
        if not any(result is argument for argument in arguments):
            made(result)
        return result

    if passed:
        bounded.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]  # jinja2's own marker, read by its compiler
    bounded.__name__ = getattr(function, "__name__", "filter")
    bounded.__doc__ = function.__doc__
    return bounded


_TYPE_TESTS: Final = frozenset(
    {
        "boolean",
        "callable",
        "defined",
        "escaped",
        "even",
        "false",
        "filter",
        "float",
        "integer",
        "iterable",
        "mapping",
        "none",
        "number",
        "odd",
        "sameas",
        "sequence",
        "string",
        "test",
        "true",
        "undefined",
    }
)
"""jinja2's tests that look at their value's type, identity or length, never at what it
holds: not charged (``tools is not none`` in a loop over the messages reads no tool)."""


def bounded_tests(tests: Mapping[str, object]) -> dict[str, Filter]:
    """``tests`` for a sandboxed environment: every value a test reads is charged to the
    render (``x is in items`` searches ``items``; ``|select("in", items)`` does it once
    for each item it selects from); jinja2's tests of a type or identity read nothing."""
    return {name: _bounded_test(name, function) for name, function in tests.items()}


def _bounded_in(value: object, seq: object) -> bool:
    """The ``in`` test: ``seq`` searched (a dict or a set by hash), ``value`` read."""
    current().reading(value)
    return value in searched(seq)  # type: ignore[operator]  # as jinja2's test_in: Python refuses what has no `in`


def _bounded_test(name: str, function: object) -> Filter:
    if function is TESTS.get("in"):
        return _bounded_in
    own = function is TESTS.get(name)
    if not callable(function):
        raise TypeError(f"the test {name!r} is {a_type(function)}, not a function")
    if own and name in _TYPE_TESTS:
        return function  # jinja2's own, reading nothing it is charged for
    passed = 1 if getattr(function, "jinja_pass_arg", None) is not None else 0

    def bounded(*arguments: object, **options: object) -> object:
        budget = current()
        for argument in arguments[passed:]:
            budget.reading(argument)
        if options:
            for option in options.values():
                budget.reading(option)
        return function(*arguments, **options)

    if passed:
        bounded.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]  # as for filters
    bounded.__name__ = getattr(function, "__name__", "test")
    bounded.__doc__ = function.__doc__
    return bounded


# -- methods of text --------------------------------------------------------------------


def check_call(function: object, arguments: tuple[object, ...], options: dict[str, object]) -> None:
    """For a method of text that pads, replaces or joins: its result's size, before it is made.

    Raises:
        SecurityError: the result would be past :data:`LONGEST`.
    """
    owner = getattr(function, "__self__", None)
    if type(function) in _BUILTIN_METHODS and isinstance(owner, _READ_BY_METHODS):
        _charge_method(owner, getattr(function, "__name__", ""), arguments, options)
    if isinstance(owner, int) and getattr(function, "__name__", "") == "to_bytes":
        # Allocated and filled before anything could size it: (1).to_bytes(2 * 10**10) is 20 GB.
        # Of any int: true.to_bytes(...) and an IntEnum value's are the same method.
        length = arguments[0] if arguments else options.get("length", 1)
        if isinstance(length, int):
            _check_longest("int.to_bytes()", length)
        return
    if not isinstance(owner, str | bytes):
        return
    name = getattr(function, "__name__", "")
    what = f"{type(owner).__name__}.{name}()"
    if name in _PADDING and arguments and isinstance(arguments[0], int):
        _check_longest(what, max(arguments[0], len(owner)))
    elif name == "expandtabs":
        tab = arguments[0] if arguments else options.get("tabsize", 8)
        tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
        if isinstance(tab, int):
            _check_longest(what, len(owner) + tabs * tab)
    elif name == "replace" and len(arguments) >= 2:
        old, new = arguments[0], arguments[1]
        if isinstance(old, str | bytes) and isinstance(new, str | bytes):
            count = arguments[2] if len(arguments) > 2 else options.get("count", -1)
            found = owner.count(old)  # type: ignore[arg-type]  # str with str, bytes with bytes: Python refuses a mix
            if isinstance(count, int) and count >= 0:
                found = min(found, count)
            _check_longest(what, len(owner) + found * max(len(new) - len(old), 0))
    elif name == "join" and arguments:
        _check_join(what, owner, arguments)
    elif name in ("encode", "decode"):
        _check_codec(what, arguments, options)
    elif name == "translate":
        raise SecurityError(
            f"{what} is not available to a stored template: a table can map a character "
            "to any text; use |replace"
        )


def _check_codec(what: str, arguments: tuple[object, ...], options: dict[str, object]) -> None:
    encoding = arguments[0] if arguments else options.get("encoding", "utf-8")
    if not isinstance(encoding, str):
        return  # Python refuses it
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        return  # Python refuses it
    if codec in _QUADRATIC_CODECS:
        raise SecurityError(
            f"{what} with the {codec} codec is not available to a stored template: its time "
            "grows with the square of the distinct characters (20,000 take half a minute of "
            "a core); encode with utf-8"
        )


_QUADRATIC_CODECS: Final = frozenset({"punycode", "idna"})
"""Codecs written in Python whose time is quadratic in their input (``idna`` encodes each
label with ``punycode`` before it checks the label's length); every other standard text
codec is a C loop over the characters."""
_BUILTIN_METHODS: Final = (type("".count), type([].__len__))
_READ_BY_METHODS: Final = (str, bytes, list, tuple, dict, set, frozenset)
_AT_THE_ENDS: Final = frozenset({"startswith", "endswith"})


def _charge_method(
    owner: object, name: str, arguments: tuple[object, ...], options: dict[str, object]
) -> None:
    """A method of a text or a container (``.count``, ``.index``, ``.find``, ``.join``) reads
    its value and its arguments whole, as a filter does: charged to the render. A dict's
    methods (``.get``, ``.items()``) and ``.startswith`` read only their arguments."""
    budget = current()
    if not isinstance(owner, dict) and name not in _AT_THE_ENDS:
        budget.reading(owner)
    for argument in (*arguments, *options.values()):
        budget.reading(argument)


def _check_join(what: str, owner: str | bytes, arguments: tuple[object, ...]) -> None:
    items = arguments[0]
    if isinstance(items, _IN_ORDER):
        items = list(items)  # in the order it was built in (a declared set: sorted)
    elif isinstance(items, set | frozenset):
        raise SecurityError(
            f"{what} of {a_type(items)}: a set's order depends on the process's "
            "hash seed, so the text would differ from one worker to the next (provider "
            "prompt caching and audit hashes need the same bytes at every render): sort it "
            "first, (items|sort|list)"
        )
    elif not isinstance(items, list | tuple):
        raise SecurityError(
            f"{what} of {a_type(items)}: a stored template joins a list or a tuple "
            "(or a dict's keys or values), so that the size is known before the text is "
            "made: |list first"
        )
    separator = len(owner) * max(len(items) - 1, 0)
    _check_longest(what, sum(size(item) for item in items) + separator)


_IN_ORDER: Final[tuple[type[Collection[object]], ...]] = (
    SortedSet,
    dict,
    type({}.keys()),
    type({}.values()),
    type({}.items()),
)
"""What a stored template may join besides a list or a tuple: a dict and its views, whose
order is the order the dict was built in, the same in every process, and a set its
parameter type declares, which the render gives it sorted (``_params.SortedSet``)."""


_PADDING: Final = frozenset({"center", "ljust", "rjust", "zfill"})
