"""An application's own filters and globals, with the provenance rules they need.

An instruction template hands every expression output to ``emit``, which mints
what it computed from the template's values: sound, because every value was
checked trusted before the render and jinja2's filters only transform their
input. A filter the application writes may do more (read a database, fetch a
page), so its output is not trusted because its input was:

- ``filters=``: usable in data templates (their output is data anyway); an
  instruction template that uses one is refused when it loads, naming the
  filter and the line (``map("name")`` counts as a use), and one that names
  it to ``map`` by a value is refused when it renders;
- ``safe_filters=``: the application vouches that the filter only transforms
  its arguments (``slugify``, ``indent_by``); instruction templates may use
  it, and its output is minted as text the expression computed.

A global is a value every template may read. It renders where a value of an
instruction template would, so it must be what such a value may be: trusted
text (minted with ``instruction()``), a number, a bool, ``None`` or an
``Enum`` member, checked when the ``Templates`` is made. A function is not a
global: its result would be text nobody checked; register it as a filter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Final

from jinja2.defaults import DEFAULT_NAMESPACE
from jinja2.filters import FILTERS as DEFAULT_FILTERS

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import TemplateError
from veridic.templates._params import changeable_member, written_member
from veridic.text.provenance import TrustedInstruction, describe, is_trusted

__all__ = ["Custom", "Filter", "Global", "custom"]

Filter = Callable[..., object]
Global = TrustedInstruction | int | float | Enum | None
_SCALARS: Final = (bool, int, float, type(None))


class Custom:
    """The checked filters and globals of one ``Templates``."""

    __slots__ = ("filters", "globals", "unsafe")

    def __init__(
        self, filters: dict[str, Filter], unsafe: frozenset[str], globals: dict[str, object]
    ) -> None:
        self.filters = filters
        self.unsafe = unsafe
        self.globals = globals


NONE: Final = Custom({}, frozenset(), {})


def custom(
    filters: Mapping[str, Filter] | None,
    safe_filters: Mapping[str, Filter] | None,
    globals: Mapping[str, Global] | None,
) -> Custom:
    """The filters and globals given to ``Templates``, checked.

    Raises:
        TemplateError: a name that is not an identifier, shadows one of
            jinja2's own, or is given twice; a filter that is not callable; a
            global that is not trusted text, a number, a bool, None or an Enum member.
    """
    if not filters and not safe_filters and not globals:
        return NONE
    plain, safe = dict(filters or {}), dict(safe_filters or {})
    for name in sorted(plain.keys() & safe.keys()):
        raise TemplateError(
            f"Templates got filter {name!r} both in filters= and in safe_filters=: give it once, "
            "in safe_filters= if it only transforms its arguments, else in filters="
        )
    for option, given in (("filters", plain), ("safe_filters", safe)):
        for name, function in given.items():
            _check_name(option, name, DEFAULT_FILTERS, "filter")
            if not callable(function):
                raise TemplateError(
                    f"Templates({option}=...) got {name!r}: {a_type(function)}, not a "
                    "function: pass the function jinja2 calls with the filtered value"
                )
    checked: dict[str, object] = {}
    for name, value in (globals or {}).items():
        _check_name("globals", name, DEFAULT_NAMESPACE, "global")
        checked[name] = _check_global(name, value)
    return Custom({**plain, **safe}, frozenset(plain), checked)


def _check_name(option: str, name: object, builtin: Mapping[str, object], what: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise TemplateError(
            f"Templates({option}=...) got the name {name!r}: a {what} name must be a Python "
            "identifier, which is what a template can spell"
        )
    if name in builtin or name == "safe":
        raise TemplateError(
            f"Templates({option}=...) got {name!r}, which is jinja2's own {what}: shadowing it "
            f"would change what every template that uses it means; choose another name"
        )


def _check_global(name: str, value: object) -> object:
    if is_trusted(value) or type(value) in _SCALARS:
        return value
    if isinstance(value, Enum):
        changeable = changeable_member(type(value))
        if changeable is not None:
            raise TemplateError(
                f"Templates(globals=...) got {name!r}: {clip(repr(value))}, whose Enum "
                f"{type(value).__name__} cannot reach a template: {changeable}"
            )
        if written_member(value):
            return value
        detail = (
            f"{clip(repr(value))}, a pseudo-member that {type(value).__name__}._missing_ made "
            "from a value, not a member its class body wrote: its text is that value; pass "
            "one of the Enum's own members"
        )
    elif callable(value):
        detail = (
            "a function, whose result would be text nobody checked: register it with "
            "safe_filters= (if it only transforms its arguments) or filters="
        )
    elif isinstance(value, str):
        detail = (
            f"text of {describe(value)}: {clip(value)}; globals render where an instruction "
            "template's values do: mint it with instruction() or read it from an InstructionField"
        )
    else:
        detail = (
            f"{a_type(value)}: a global may be trusted text, a number, a bool, None or "
            "an Enum member; pass structured values as a template's parameters instead"
        )
    raise TemplateError(f"Templates(globals=...) got {name!r}: {detail}")
