"""What one render of a stored template may spend: loops, calls, what it makes and writes.

The operator bounds of ``_bounds`` refuse one result too large to write; a template
can still hang a worker with results that are each small: nested loops over
``range(100000)`` (10**10 iterations), a macro that calls itself twice (2**40 calls),
a namespace that doubles a string forty times, a list that holds itself twice sixty
times (its text is 2**60 items). So every render of a sandboxed template carries a
:class:`Budget` (in a context variable: compiled code finds it without an argument,
and templates shipped with the code never look), and:

- loop iterations (recursive loops too), and the items a filter goes through one by one
  (``|select``, ``|map``, ``|sort``, ``|join``, ``|sum``, ``|max``...: a list, tuple, dict,
  set, range or view is charged its length when it is handed over, an iterator an
  iteration for each item taken, so that a chain of lazy filters pays for each item it
  passes on and ``|first`` pays for one; a text is charged a word in five characters by
  the filters that go through it word by word in Python, ``|wordwrap``, ``|urlize``...):
  at most :data:`MOST_ITERATIONS` a render. ``|length``, ``|first``, ``|last``,
  ``|count``, ``|default``, ``|attr`` and ``|reverse`` take what they need
  and are not charged;
- what filters, tests (``is in``), comparisons and ``in`` (Python's, which jinja2 compiles
  with no sandbox hook: veridic rewrites their operands) and the methods of texts and
  containers (``.count``, ``.find``, ``.index``) read: a text its characters, a container
  its size (below), at most :data:`MOST_READ` a render; ``in`` a dict or a set is a lookup
  by hash and reads nothing, ``in`` an iterator an iteration for each item;
- calls (a macro, a method, a global, ``loop()``): at most :data:`MOST_CALLS` a render
  (a macro call costs jinja2 some microseconds, twenty times an empty iteration); a
  call's arguments past the eighth (``m(*items)``) are iterations;
- every text, list, tuple or dict that the template makes (``~``, ``+``, ``*``,
  ``%``, a ``[...]``, ``(...)`` or ``{...}``, a filter, a call, a ``{% set %}`` block
  or a macro's output) is *sized* when it is made: its characters and items, counting
  what it holds as often as it holds it (``[x, x]`` is twice ``x``), at most
  :data:`LONGEST`; a slice is charged its length (it holds what its source held); what
  the render makes in all is at most :data:`MOST_MADE`;
- what the render writes is at most :data:`LONGEST` characters.

So the work of a render is bounded by a constant times these bounds: per item, what a
filter or a C loop of Python spends, at most some microseconds. What a render spends is
still proportional to its source's length (each expression runs at each iteration), and
a filter or global the application registered, or a ``repr`` of the application's own
class, costs what its code costs.

Sizes are remembered per object for the render (the sandbox refuses changing a
list, dict or set, so a size stays true), so sizing a list of lists costs its own
length. An object of the application's own class counts the length of its ``repr``
(what jinja2 writes for it inside a list), measured once a render. A
``namespace()`` may not hold another namespace or be held by a container: it is the
one value a template can change after it was sized.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized
from contextvars import ContextVar
from typing import Final

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

from veridic._words import a_type, article

__all__ = [
    "LONGEST",
    "MOST_CALLS",
    "MOST_ITERATIONS",
    "MOST_MADE",
    "MOST_READ",
    "BoundedNamespace",
    "Budget",
    "consumed",
    "copied",
    "current",
    "iterate",
    "made",
    "making",
    "read",
    "render",
    "searched",
    "size",
]

LONGEST: Final = 10_000_000
"""Characters a render writes, and the size of any one value it makes: past what any
model reads (a 2M-token context is about 8M characters)."""
MOST_MADE: Final = 100_000_000
"""Characters and items a render makes in all (ten times what it may write)."""
MOST_ITERATIONS: Final = 1_000_000
"""Loop iterations in one render, and items a filter goes through one by one (ten ranges
of jinja2's largest; a quarter of a second)."""
MOST_READ: Final = 100_000_000
"""Characters and items that filters, tests, comparisons and methods read in one render
(as much as it may make)."""
MOST_CALLS: Final = 200_000
"""Calls in one render (a second or two of macro calls)."""

_CONTAINERS: Final = (list, tuple, dict, set, frozenset)
_VIEWS: Final[tuple[type[Sized], ...]] = (
    type({}.keys()),
    type({}.values()),
    type({}.items()),
    range,
)
"""Sized values that are not sized by what they hold: read item by item, ``len`` each."""
_SCALARS: Final = frozenset({int, float, bool, type(None)})
_HASHED: Final[tuple[type, ...]] = (dict, set, frozenset, type({}.keys()))
"""Containers that ``in`` searches by hash, without reading them."""
_SIZED: Final = (str, bytes, *_CONTAINERS)
_ONE_BY_ONE: Final[tuple[type[Sized], ...]] = (*_CONTAINERS, *_VIEWS)
_ADVICE: Final = (
    "a prompt template never needs that much: remove the loop, call or value that grows "
    "from the stored template, or ship the template with the code and load it with "
    "Templates(directory) (it is not bounded)"
)


class Budget:
    """What one render has spent so far, and the sizes it has measured."""

    __slots__ = ("_sizes", "calls", "iterations", "made", "read", "written")

    def __init__(self) -> None:
        self.iterations = 0
        self.calls = 0
        self.made = 0
        self.read = 0
        self.written = 0
        # id -> (the object, its size): the object is kept so that its id is not reused.
        self._sizes: dict[int, tuple[object, int]] = {}

    def iteration(self) -> None:
        self.iterations += 1
        if self.iterations > MOST_ITERATIONS:
            self._too_many_iterations()

    def items(self, count: int) -> None:
        """``count`` items a filter goes through one by one: iterations, charged at once."""
        self.iterations += count
        if self.iterations > MOST_ITERATIONS:
            self._too_many_iterations()

    def _too_many_iterations(self) -> None:
        raise SecurityError(
            f"the render ran more than {MOST_ITERATIONS:,} loop iterations (each item a "
            f"filter such as |select, |map, |sort or |join goes through counts as one); "
            f"{_ADVICE}"
        )

    def reading(self, value: object) -> None:
        """``value``, read whole by a filter, test, comparison or method: charged its extent."""
        kind = type(value)
        if kind in _SCALARS:
            return  # the common case: a number compared, a flag tested
        self.read += len(value) if kind is str else self._extent(value)  # type: ignore[arg-type]  # a str, by its exact type
        if self.read > MOST_READ:
            raise SecurityError(
                f"the render read more than {MOST_READ:,} characters and items in filters, "
                "tests, comparisons and methods (a long text or a large list searched, "
                f"compared or scanned again and again); {_ADVICE}"
            )

    def searching(self, value: object) -> None:
        """``value``, searched by ``in``: a dict or a set looks up by hash, anything else
        is read whole."""
        if not isinstance(value, _HASHED):
            self.reading(value)

    def _extent(self, value: object) -> int:
        """What reading ``value`` whole costs: its size (a text's characters, what a
        container holds), a range's or a view's length, one for anything else."""
        if isinstance(value, _SIZED):
            return self.size(value)
        if isinstance(value, _VIEWS):
            return len(value)
        return 1

    def call(self) -> None:
        self.calls += 1
        if self.calls > MOST_CALLS:
            raise SecurityError(
                f"the render made more than {MOST_CALLS:,} calls (macros, methods, globals); "
                f"{_ADVICE}"
            )

    def check(self, value: object) -> None:
        """Refuse ``value`` if its size is past :data:`LONGEST`."""
        self._bound(type(value).__name__, self.size(value))

    def make(self, value: object) -> None:
        """Size ``value``, just made, and charge it; refuse it past a bound."""
        self.check(value)
        self._charge(len(value) if isinstance(value, (str, bytes, *_CONTAINERS)) else 1)

    def making(self, length: int) -> None:
        """A text of ``length`` characters about to be made: refused or charged first."""
        self._bound("str", length)
        self._charge(length)

    def _bound(self, kind: str, measured: int) -> None:
        if measured > LONGEST:
            raise SecurityError(
                f"the render made {article(kind)} of more than {LONGEST:,} characters and items "
                f"(each time a value holds another counts); {_ADVICE}"
            )

    def _charge(self, count: int) -> None:
        self.made += count
        if self.made > MOST_MADE:
            raise SecurityError(
                f"the render made more than {MOST_MADE:,} characters and items in all; {_ADVICE}"
            )

    def write(self, chunk: str) -> None:
        self.written += len(chunk)
        if self.written > LONGEST:
            raise SecurityError(f"the render wrote more than {LONGEST:,} characters; {_ADVICE}")

    def size(self, value: object) -> int:
        """Characters and items of ``value``, what it holds counted as often as it holds it."""
        if isinstance(value, str | bytes):
            return len(value)
        if isinstance(value, bool | float) or value is None:
            return 1
        if isinstance(value, int):
            return value.bit_length() // 3 + 1
        if isinstance(value, Namespace):
            return self._namespace(value)
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        measured = self._measure(value)
        self._sizes[id(value)] = (value, measured)
        return measured

    def _measure(self, value: object) -> int:
        if isinstance(value, dict):
            items: Iterable[object] = (part for pair in value.items() for part in pair)
        elif isinstance(value, _CONTAINERS):
            items = value
        elif isinstance(value, range):
            return 1
        else:
            return len(repr(value))
        total = 1
        for item in items:
            kind = type(item)
            if kind is str:  # the common items first, sized inline: a measure is per item
                total += len(item)  # type: ignore[arg-type]  # a str, by its exact type
            elif kind is int:
                total += item.bit_length() // 3 + 1  # type: ignore[attr-defined]  # an int, likewise
            elif isinstance(item, Namespace):
                raise SecurityError(
                    f"{a_type(value)} holds a namespace(); a namespace can change "
                    "after the value holding it was measured: keep namespaces in variables"
                )
            else:
                total += self.size(item)
            if total > LONGEST:
                break  # over the bound: the caller refuses it, the rest need not be counted
        return total

    def _namespace(self, value: Namespace) -> int:
        # Not remembered: {% set ns.x = ... %} changes it. It holds no namespace, so
        # measuring it costs what its values cost (each remembered).
        attributes: dict[str, object] = object.__getattribute__(value, "_Namespace__attrs")
        return self._measure(attributes)


_BUDGET: ContextVar[Budget | None] = ContextVar("veridic_template_budget", default=None)


def current() -> Budget:
    # No budget outside a render: jinja2 folds constant expressions while compiling,
    # and each is bounded on its own by the size of one value.
    return _BUDGET.get() or Budget()


def render(chunks: Iterable[str]) -> list[str]:
    """The chunks of one sandboxed render, under a fresh budget; each counted as written."""
    budget = Budget()
    token = _BUDGET.set(budget)
    try:
        kept: list[str] = []
        for chunk in chunks:
            budget.write(chunk)
            kept.append(chunk)
        return kept
    finally:
        _BUDGET.reset(token)


def made(value: object) -> object:
    """``value``, made by the template, sized and charged to the render."""
    current().make(value)
    return value


def making(length: int) -> None:
    """A text of ``length`` characters the render is about to make: refused or charged."""
    current().making(length)


def size(value: object) -> int:
    """The size of ``value`` as the render's budget measures it (see the module)."""
    return current().size(value)


def copied(value: object) -> object:
    """``value``, a slice the template took (``items[1:]``, ``text[::-1]``): charged as made.

    A slice holds only what its source held, so its length is charged and it is not
    measured again (measuring a copy of a long list item by item would cost more than
    making it).
    """
    current()._charge(len(value) if isinstance(value, _SIZED) else 1)
    return value


def read(value: object) -> object:
    """``value``, about to be read whole (a comparison's operand): charged to the render."""
    if type(value) not in _SCALARS:
        current().reading(value)
    return value


def searched(value: object) -> object:
    """``value``, searched by ``in`` (the right operand): charged to the render.

    An iterator (``items|reverse``) is searched item by item: an iteration for each.
    """
    if isinstance(value, Iterator):
        return iterate(value)
    current().searching(value)
    return value


def consumed(value: object, step: int) -> object:
    """``value``, handed to a filter that reads it: charged to the render.

    A list, tuple, dict, set, range or view is charged its items as iterations; a text is
    charged as iterations too when the filter goes through it in Python, ``step``
    characters at a time (1 for ``|unique`` or ``|sort`` of a text, a word for
    ``|wordwrap``); 0 reads it whole, as C code does. Either way its size is charged as
    read. An iterator (what ``|select`` or ``|map`` gives) is charged lazily, an iteration
    for each item taken: a chain of filters pays for each item it passes on, and
    ``|first`` pays for one.
    """
    budget = current()
    if type(value) in _SCALARS:
        return value
    if isinstance(value, _ONE_BY_ONE):
        budget.items(len(value))
    elif step and isinstance(value, str):
        budget.items(len(value) // step)
    elif isinstance(value, Iterator):
        return iterate(value)
    budget.reading(value)
    return value


def iterate(iterable: Iterable[object]) -> Iterator[object]:
    """``iterable``'s items, each an iteration of the render (a ``{% for %}``'s)."""
    budget = current()
    for item in iterable:
        budget.iterations += 1  # Budget.iteration(), inlined: this runs for every item
        if budget.iterations > MOST_ITERATIONS:
            budget.iteration()  # raises
        yield item


class BoundedNamespace(Namespace):
    """``namespace()`` of a stored template: its values are sized, and none is a namespace."""

    def __init__(*args: object, **kwargs: object) -> None:
        Namespace.__init__(*args, **kwargs)
        self = args[0]
        if not isinstance(self, BoundedNamespace):  # pragma: no cover - called as a method
            raise TypeError("BoundedNamespace.__init__ needs the namespace first")
        for value in object.__getattribute__(self, "_Namespace__attrs").values():
            _check_held(value)

    def __setitem__(self, name: str, value: object) -> None:
        _check_held(value)
        super().__setitem__(name, value)


def _check_held(value: object) -> None:
    if isinstance(value, Namespace):
        raise SecurityError(
            "a namespace() would hold another namespace, which can change after it was "
            "measured: keep namespaces in variables of their own"
        )
    current().check(value)  # made (and charged) where it was computed
