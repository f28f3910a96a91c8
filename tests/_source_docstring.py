"""Give a test function a docstring as if it had been written in its source.

veridic reads a tool's docstring only when it is the docstring written in the
function's source (its code's docstring constant): a ``__doc__`` assigned at
run time is refused. Tests that make tools in a loop, or from hypothesis text,
still need tools whose docstrings vary, so this helper writes the text where
the source would have put it. It is code rewriting a code object, which is
outside what veridic guards against (outside text reaching ``__doc__``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Final, TypeVar

F = TypeVar("F", bound=Callable[..., object])

PLACEHOLDER: Final = "(docstring written by written_in_source)"
_HAS_DOCSTRING: Final[int] = getattr(inspect, "CO_HAS_DOCSTRING", 0)


def written_in_source(function: F, doc: str | None) -> F:
    """``function``, whose docstring must be :data:`PLACEHOLDER`, with ``doc`` in its place."""
    code = function.__code__
    if function.__doc__ != PLACEHOLDER or code.co_consts[:1] != (PLACEHOLDER,):
        raise ValueError(f"give {function!r} the docstring {PLACEHOLDER!r} to replace")
    flags = code.co_flags
    if _HAS_DOCSTRING:
        flags = flags | _HAS_DOCSTRING if doc is not None else flags & ~_HAS_DOCSTRING
    function.__code__ = code.replace(co_consts=(doc, *code.co_consts[1:]), co_flags=flags)
    function.__doc__ = doc
    return function
