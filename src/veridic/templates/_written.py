"""jinja2's filters that write their input as text, checked as an output is.

An output whose text is a memory address is refused (``_runtime.refuse_address``), but
an output is read only once it is text: ``{{ persona.upper | lower }}`` (the parentheses
forgotten) wrote ``<built-in method upper of _trusted object at 0x7f43...>``, a str by
the time the output was checked, and so did ``|e``, ``|trim``, ``|join`` and the other
filters that call ``str()`` on their input. Each of them is held, in every environment,
wrapped: its input is checked as an output is before it runs. Only these filters pay
for it (a type lookup, for text), so a render that uses none costs what it did.

``|tojson`` is not about addresses: JSON cannot write a method, a set or an object at
all, and jinja2 raised a bare ``TypeError``; it is held wrapped so that the error names
the template, the line and the expression.

The rewrite (``_env``) passes each filter it sees in the template the expression it
filters (keyword :data:`EXPRESSION`), so that a refusal names it; a filter named at
render (``map("lower")``) has no expression to name, and says the template and line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from jinja2 import nodes
from jinja2.filters import make_attrgetter
from jinja2.nodes import EvalContext

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import TemplateError
from veridic.templates._runtime import SCALARS, refuse_address, template_line

__all__ = ["EXPRESSION", "WRITES_TEXT", "spelled", "written_filters"]

EXPRESSION: Final = "veridic_expression"
"""The keyword the rewrite adds to a call of a filter of :data:`WRITES_TEXT`: the
expression it filters, spelled (:func:`spelled`), for the message that refuses it."""

_STR_OF_INPUT: Final = frozenset(
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
WRITES_TEXT: Final = _STR_OF_INPUT | {"join", "tojson"}
"""Every filter held wrapped: those above, ``|join`` (each item), ``|tojson``."""


def written_filters(
    filters: Mapping[str, Callable[..., object]],
) -> dict[str, Callable[..., object]]:
    """``filters`` with each of :data:`WRITES_TEXT` wrapped (the function under the name,
    which in a sandbox is already bounded: the check runs first, then the bounds)."""
    wrapped = dict(filters)
    for name in WRITES_TEXT & filters.keys():
        function = filters[name]
        if name == "join":
            wrapped[name] = _join(function)
        elif name == "tojson":
            wrapped[name] = _tojson(function)
        else:
            wrapped[name] = _checked(name, function)
    return wrapped


def _checked(name: str, function: Callable[..., object]) -> Callable[..., object]:
    """``function``, its input refused first when its text would be a memory address."""
    passed = getattr(function, "jinja_pass_arg", None) is not None

    def checked(*arguments: Any, **options: Any) -> object:
        expression = options.pop(EXPRESSION, None)
        value = arguments[passed] if len(arguments) > passed else None
        if type(value) not in SCALARS:
            refuse_address(value, template_line, _gives(name, expression))
        return function(*arguments, **options)

    return _like(checked, function)


def _join(function: Callable[..., object]) -> Callable[..., object]:
    """``|join``, each item it writes checked (after ``attribute=`` is read from it: the
    objects may print their address, their names do not)."""

    def join(
        eval_ctx: EvalContext,
        value: Iterable[object],
        d: str = "",
        attribute: str | int | None = None,
        **options: Any,
    ) -> object:
        expression = options.pop(EXPRESSION, None)
        if attribute is not None:
            value = map(make_attrgetter(eval_ctx.environment, attribute), value)
        doing = _gives("join", expression)
        if type(value) is list or type(value) is tuple:
            if not SCALARS.issuperset(map(type, value)):  # at C speed: text, numbers
                for item in value:
                    _written(item, doing)
        else:  # an iterator is read once, item by item, as join reads it
            value = _each_written(value, doing)
        return function(eval_ctx, value, d, **options)

    return _like(join, function)


def _each_written(items: Iterable[object], doing: str) -> Iterator[object]:
    for item in items:
        _written(item, doing)
        yield item


def _written(item: object, doing: str) -> None:
    if type(item) not in SCALARS:
        refuse_address(item, template_line, doing)


def _tojson(function: Callable[..., object]) -> Callable[..., object]:
    """``|tojson``, what JSON cannot write a ``TemplateError`` naming the template, line
    and expression (jinja2 raised a bare ``TypeError``)."""

    def tojson(eval_ctx: EvalContext, value: object, *arguments: Any, **options: Any) -> object:
        expression = options.pop(EXPRESSION, None)
        try:
            return function(eval_ctx, value, *arguments, **options)
        except (TypeError, ValueError) as error:
            template, line = template_line()
            shown = "" if value is None else f" ({clip(repr(value))})"
            raise TemplateError(
                f"template {template!r}{line} {_gives('tojson', expression)} {a_type(value)}"
                f"{shown}, which JSON cannot write ({error}): pass text, numbers, booleans, "
                "None, lists and dicts with text keys (a set as a sorted list; call a method: "
                "persona.upper()), or write the value with other filters"
            ) from error

    return _like(tojson, function)


def _gives(name: str, expression: object) -> str:
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
