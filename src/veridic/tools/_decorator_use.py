"""The tool decorator written as Python allows but veridic cannot read, said by veridic.

``@registry.tool`` without its parentheses, ``@registry.tool()`` without ``kind=``
and ``@registry.tool("query")`` failed with Python's own words ("takes 1 positional
argument but 2 were given", "missing 1 required keyword-only argument"), which name
neither the tool nor what to write. :func:`kind_required` checks the call first, at
the decoration, and says what was wrong, where, and the line to write instead.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Final, ParamSpec, TypeVar

from veridic._counted import counted
from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.tools.risk import ToolKind
from veridic.tools.tool import _origin_of

P = ParamSpec("P")
R = TypeVar("R")

_KINDS: Final = typing.get_args(ToolKind)


def kind_required(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` (a ``tool`` decorator factory), refusing a call without ``kind=`` by keyword.

    The signature is kept (``functools.wraps``), so the type checker and the docs see
    the method's own keywords. The check adds a frame between the caller and the
    method: the registry looks one frame further for the scope it resolves
    annotations in.
    """

    @functools.wraps(method)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        owner, given = type(args[0]).__name__.lower(), args[1:]
        if given:
            raise VeridicError(_positional(owner, given))
        if "kind" not in kwargs:
            raise VeridicError(_without_kind(owner, sorted(kwargs)))
        return method(*args, **kwargs)

    return checked


def _choices(owner: str) -> str:
    """What to write instead: the decorator once for each kind, with what each kind means."""
    query, write = _KINDS
    return (
        f'kind="{query}" for a tool that only reads, kind="{write}" for one that changes '
        f'anything: write @{owner}.tool(kind="{query}") or @{owner}.tool(kind="{write}") above '
        "the function"
    )


def _positional(owner: str, given: tuple[object, ...]) -> str:
    """A function given to the factory (no parentheses), or options given by position."""
    if len(given) == 1 and callable(given[0]):
        function = given[0]
        name = getattr(function, "__name__", None) or type(function).__name__
        return (
            f"@{owner}.tool was applied without its arguments to {name!r} "
            f"({_origin_of(function)}): the decorator needs {_choices(owner)}"
        )
    shown = ", ".join(clip(repr(value)) for value in given[:3])
    return (
        f"@{owner}.tool() got {counted(len(given), 'argument')} by position ({shown}); its "
        f'options are given by keyword: @{owner}.tool(kind="{_KINDS[0]}"), with risk=, '
        "name= and the others by keyword too"
    )


def _without_kind(owner: str, keywords: list[str]) -> str:
    """The factory called without ``kind=`` (with these other keywords, or none)."""
    others = f" (it got {', '.join(f'{key}=' for key in keywords)})" if keywords else ""
    return f"@{owner}.tool() needs kind={others}: {_choices(owner)}"
