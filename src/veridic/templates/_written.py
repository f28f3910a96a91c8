"""jinja2's filters that write their input as text, checked as an output is.

An output whose text is a memory address is refused (``_runtime.refuse_address``), but
an output is read only once it is text: ``{{ persona.upper | lower }}`` (the parentheses
forgotten) wrote ``<built-in method upper of _trusted object at 0x7f43...>``, a str by
the time the output was checked, and so did ``|e``, ``|trim``, ``|join`` and the other
filters that call ``str()`` on their input. So their input is checked first:

- where the template names the filter (``x | lower``), the rewrite (``_env``) checks
  the input inline, as an output is: a type lookup for text, no call, so a render pays
  nothing it did not (:func:`written` runs only for what is not text or a number);
- where a name is given at render (``map("lower")``), the environment's
  ``call_filter`` checks it;
- ``|join`` checks each item it writes, after ``attribute=`` is read from it (the
  objects may print their address, their names do not), and ``|xmlattr`` each value
  of the mapping it writes (``str()`` of it, as an output is): both held wrapped
  (:func:`written_filters`). A key ``|xmlattr`` cannot write (not text, or holding a
  space, ``/``, ``>`` or ``=``) is a ``TemplateError`` naming the expression, not
  jinja2's bare ``TypeError`` or ``ValueError`` quoting the key whole.

In an instruction template each of these checks is ``_runtime.check_written``, which
also refuses a value whose own code (its ``__str__``, ``__repr__``, ``__html__``) writes
untrusted text: ``{{ tier | upper }}`` wrote what the member's ``__str__`` returned. The
arguments of a filter that writes its input (``|replace('a', x)``) are checked as ``~``
checks what it joins, and ``|join``'s as its items.

A filter that reads its input as a value (``|int``, ``|first``, :data:`READ_AS_A_VALUE`)
is checked the same two ways for a method, a call whose parentheses were left out:
``|int`` made it 0 without a word (:func:`valued`).

``|tojson`` is not about addresses: JSON cannot write a method, a set or an object at
all, and jinja2 raised a bare ``TypeError``; it is held wrapped so that the error names
the template, the line and the expression. Both wrapped filters are passed the
expression they filter by the rewrite (keyword :data:`EXPRESSION`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from jinja2 import Undefined, nodes
from jinja2.exceptions import FilterArgumentError
from jinja2.filters import make_attrgetter
from jinja2.nodes import EvalContext

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import ProvenanceError, TemplateError
from veridic.templates._runtime import (
    SCALARS,
    check_written,
    refuse_address,
    refuse_callable,
    template_line,
    unwrapped,
)

__all__ = [
    "EXPRESSION",
    "READ_AS_A_VALUE",
    "STR_OF_INPUT",
    "WRAPPED",
    "gives",
    "spelled",
    "valued",
    "written",
    "written_filters",
    "written_in_instruction",
]

EXPRESSION: Final = "veridic_expression"
"""The keyword the rewrite adds to a call of a filter of :data:`WRAPPED`: the
expression it filters, spelled (:func:`spelled`), for the message that refuses it."""

STR_OF_INPUT: Final = frozenset(
    {
        "capitalize",
        "center",
        "e",
        "escape",
        "forceescape",
        "indent",
        "lower",
        "pprint",
        "replace",
        "string",
        "striptags",
        "title",
        "trim",
        "truncate",
        "upper",
        "urlencode",
        "urlize",
        "wordwrap",
    }
)
"""jinja2's filters that write their input (``str()`` or ``repr()`` of it) as text."""
READ_AS_A_VALUE: Final = frozenset(
    {
        "abs",
        "count",
        "filesizeformat",
        "first",
        "float",
        "int",
        "last",
        "length",
        "list",
        "max",
        "min",
        "round",
        "sort",
        "sum",
        "unique",
        "wordcount",
    }
)
"""jinja2's filters that read their input as a number, a sequence or text: a method there
is a call whose parentheses were left out (``|int`` made it 0, ``|first`` raised a bare
``TypeError``), refused by :func:`valued`. An iterator is a value to them (``|first``)."""
WRAPPED: Final = frozenset({"join", "tojson", "xmlattr"})
"""The filters held wrapped: ``|join`` (each item it writes), ``|tojson``, ``|xmlattr``
(each value it writes)."""


def written(value: object, doing: str) -> object:
    """``value``, the input of a filter that writes it as text, once checked as an output
    is (compiled inline for text and numbers, which pass: see ``_env``).

    Raises:
        TemplateError: its text would be a memory address (``refuse_address``).
    """
    refuse_address(value, template_line, doing)
    return value


def written_in_instruction(value: object, doing: str) -> object:
    """``value``, the input of a filter that writes it as text in an instruction template,
    once :func:`~veridic.templates._runtime.check_written` passed it (compiled inline for
    plain text and numbers, which pass): ``{{ tier | upper }}`` wrote what the member's
    ``__str__`` returned, outside text or not."""
    check_written(value, template_line, doing)
    return value


def valued(value: object, doing: str) -> object:
    """``value``, the input of a filter that reads it as a value (:data:`READ_AS_A_VALUE`),
    once checked not to be a method (compiled inline for text and numbers, see ``_env``).

    Raises:
        TemplateError: a method or function (``refuse_callable``).
    """
    refuse_callable(value, template_line, doing)
    return value


def written_filters(
    filters: Mapping[str, Callable[..., object]], *, instruction: bool
) -> dict[str, Callable[..., object]]:
    """``filters`` with those of :data:`WRAPPED` wrapped (the function under the name,
    which in a sandbox is already bounded: the check runs first, then the bounds), and
    ``|reverse``, whose refusals of what it reads keep their message. In an
    ``instruction`` template, what ``|join`` and ``|xmlattr`` write is checked by
    :func:`~veridic.templates._runtime.check_written`, else for an address alone."""
    check = _checked_in_instruction if instruction else _written
    wrapped = dict(filters)
    wrapped["join"] = _join(filters["join"], check)
    wrapped["tojson"] = _tojson(filters["tojson"])
    wrapped["xmlattr"] = _xmlattr(filters["xmlattr"], check)
    wrapped["reverse"] = _reverse(filters["reverse"])
    return wrapped


def _join(
    function: Callable[..., object], check: Callable[[object, str], None]
) -> Callable[..., object]:
    """``|join``, each item it writes checked by ``check`` (after ``attribute=`` is read
    from it: the objects may print their address, their names do not), and the text it
    joins them with."""

    def join(
        eval_ctx: EvalContext,
        value: Iterable[object],
        d: str = "",
        attribute: str | int | None = None,
        **options: Any,
    ) -> object:
        expression = options.pop(EXPRESSION, None)
        doing = gives("join", expression)
        check(d, doing)
        if attribute is not None:
            value = map(make_attrgetter(eval_ctx.environment, attribute), value)
        if type(value) is list or type(value) is tuple:
            for item in value:
                check(item, doing)
        else:  # an iterator is read once, item by item, as join reads it
            value = _each_written(value, doing, check)
        return function(eval_ctx, value, d, **options)

    return _like(join, function)


def _each_written(
    items: Iterable[object], doing: str, check: Callable[[object, str], None]
) -> Iterator[object]:
    for item in items:
        check(item, doing)
        yield item


def _written(item: object, doing: str) -> None:
    if type(item) not in SCALARS:  # text and numbers pass: nothing to call
        refuse_address(item, template_line, doing)


def _checked_in_instruction(item: object, doing: str) -> None:
    if type(item) not in SCALARS:
        check_written(item, template_line, doing)


def _xmlattr(
    function: Callable[..., object], check: Callable[[object, str], None]
) -> Callable[..., object]:
    """``|xmlattr``, each value it writes checked (``{'a': persona.upper} | xmlattr`` wrote
    ``a="&lt;built-in method upper of ... at 0x7f43...&gt;"``); a ``None`` or undefined
    value it leaves out, a key is text (jinja2 refuses any other).

    jinja2 reads any object's ``items()``, a ``Mapping``'s or not: they are read once, and
    what was checked is what jinja2 is given to write (a second ``items()`` may differ).
    """

    def xmlattr(eval_ctx: EvalContext, value: object, *arguments: Any, **options: Any) -> object:
        expression = options.pop(EXPRESSION, None)
        given = value
        items = None if isinstance(value, Undefined) else getattr(value, "items", None)
        if callable(items):
            pairs = _Pairs(items())
            doing = gives("xmlattr", expression)
            for held in pairs.values():
                if not isinstance(held, Undefined):  # left out, not written
                    check(held, doing)
            value = pairs
        try:
            return function(eval_ctx, value, *arguments, **options)
        except (TypeError, ValueError) as error:
            template, line = template_line()
            raise TemplateError(
                f"template {template!r}{line} {gives('xmlattr', expression)} {a_type(given)}"
                f" that it cannot write as attributes ({clip(str(error))}): give it a mapping "
                "whose keys are attribute names written in the template (text with no space, "
                "/, >, = or quote) and whose values are what varies"
            ) from error

    return _like(xmlattr, function)


class _Pairs:
    """The pairs an object's ``items()`` gave ``|xmlattr``, read once: what it writes."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.pairs = list(items)

    def items(self) -> list[Any]:
        return self.pairs

    def values(self) -> Iterator[object]:
        """Each pair's value; what is no pair jinja2 refuses when it reads it."""
        for pair in self.pairs:
            try:
                _, held = pair
            except (TypeError, ValueError):
                continue  # jinja2 raises it when it unpacks the pair
            yield held


def _tojson(function: Callable[..., object]) -> Callable[..., object]:
    """``|tojson``, what JSON cannot write a ``TemplateError`` naming the template, line
    and expression (jinja2 raised a bare ``TypeError``)."""

    def tojson(eval_ctx: EvalContext, value: object, *arguments: Any, **options: Any) -> object:
        expression = options.pop(EXPRESSION, None)
        try:
            return function(eval_ctx, value, *arguments, **options)
        except (TypeError, ValueError) as error:
            template, line = template_line()
            raise TemplateError(
                f"template {template!r}{line} {gives('tojson', expression)} "
                f"{a_type(unwrapped(value))} ({clip(repr(value))}), which JSON cannot write "
                f"({error}): pass text, "
                "numbers, booleans, None, lists and dicts with text keys (a set as a sorted "
                "list; call a method: persona.upper()), or write the value with other filters"
            ) from error

    return _like(tojson, function)


def _reverse(function: Callable[..., object]) -> Callable[..., object]:
    """``|reverse``, a refusal of what it reads raised as it is: jinja2 catches a
    ``TypeError`` to try another way, and a ``ProvenanceError`` is one, so an application's
    iterable holding untrusted text was refused as "argument must be iterable", naming
    neither the text nor its source."""

    def reverse(value: object, *arguments: Any, **options: Any) -> object:
        try:
            return function(value, *arguments, **options)
        except FilterArgumentError as error:
            if isinstance(error.__cause__, ProvenanceError):
                raise error.__cause__ from None
            raise

    return _like(reverse, function)


def gives(name: str, expression: object) -> str:
    """How the template writes a value: ``gives |lower (persona.upper)``."""
    return f"gives |{name}" + (f" ({expression})" if isinstance(expression, str) else "")


def _like(wrapper: Callable[..., object], function: Callable[..., object]) -> Callable[..., object]:
    """``wrapper`` with ``function``'s name, docs and jinja2's marker of what it is passed."""
    return functools.wraps(function, assigned=("__name__", "__doc__"), updated=("__dict__",))(
        wrapper
    )


def spelled(node: nodes.Node) -> str:
    """``node`` as the template spells it, near enough to find it: ``persona.upper``,
    ``rules[0]``, ``m.tool(...)``; an expression it cannot spell is ``...``."""
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        return f"{spelled(node.node)}.{node.attr}"
    if isinstance(node, nodes.Getitem):
        key = repr(node.arg.value) if isinstance(node.arg, nodes.Const) else "..."
        return f"{spelled(node.node)}[{key}]"
    if isinstance(node, nodes.Call):
        return f"{spelled(node.node)}(...)"
    if isinstance(node, nodes.Filter) and node.node is not None:
        if node.name.startswith("<veridic:"):  # the rewrite's own: what it wraps
            return spelled(node.node)
        return f"{spelled(node.node)} | {node.name}"
    if isinstance(node, nodes.Const):
        return clip(repr(node.value))
    return "..."
