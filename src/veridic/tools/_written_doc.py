"""Whether a function tool's docstring was written in the source of the function.

A tool's docstring is its description, printed as trusted text in the
capability section and sent as the application's own words in the provider's
tool list. A docstring written in the source is code; a ``__doc__`` assigned
at run time is not, whether it came from an OpenAPI document, a GraphQL
schema, a database row, or a decorator that sets it: the ``veridic.mypy``
plugin never sees such an assignment, and a plain ``str`` carries no brand.

Python keeps the docstring written in a function's source as its code
object's docstring constant, which no assignment to ``__doc__`` changes:
``co_consts[0]`` when it is a ``str`` (Python 3.11 to 3.13 put the docstring,
or ``None``, first), and only when ``CO_HAS_DOCSTRING`` is set on 3.14 and
later, where the first constant may be any string. So a ``__doc__`` is read
only when it equals, character for character (no ``inspect.cleandoc`` on
either side), one of:

- the docstring constant of the function, of a bound method's, a
  ``staticmethod``'s or a ``classmethod``'s function (``__func__``), or of a
  function it wraps (the ``__wrapped__`` chain ``functools.wraps`` sets);
- the docstring of a function written in C (a builtin, a method of a C
  type), which Python does not let code assign.

Anything else is refused: a run-time ``__doc__``, a decorator's, and the
docstring of a callable object's class (a class keeps no docstring constant,
and a class docstring, like ``functools.partial``'s, describes the class, not
the tool). The fix is a ``description=`` written in code, which the plugin
checks; then a docstring that cannot be traced to the source is not read at
all, its parameter sections included.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import tokenize
import types
from collections.abc import Callable, Iterator
from typing import Final

from veridic._sample import clip
from veridic.errors import ProvenanceError
from veridic.tools._descriptions import (
    STRIPPED_FIX,
    UNDOCUMENTED_UNDER_OO_FIX,
    UNREAD_UNDER_OO_FIX,
    docstrings_stripped,
)

__all__ = ["stripped_fix", "written_docstring"]

_HAS_DOCSTRING: Final[int] = getattr(inspect, "CO_HAS_DOCSTRING", 0)
"""The code flag that marks a docstring constant (Python 3.14+); 0 before it existed."""

_WRITTEN_IN_C: Final = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
)
"""Callables whose ``__doc__`` comes from C source and cannot be assigned."""

_LINKS_FOLLOWED: Final = 100
"""How many wrappers deep a docstring is looked for (an object whose ``__getattr__``
makes a new ``__wrapped__`` each time would be followed forever)."""

_FUNCTIONS: Final = (
    types.FunctionType,
    types.MethodType,
    staticmethod,
    classmethod,
    *_WRITTEN_IN_C,
)


def written_docstring(
    function: Callable[..., object], doc: str | None, tool: str, *, described: bool
) -> str | None:
    """``doc`` (``function.__doc__``) when it was written in the function's source.

    ``described`` says that the tool has a ``description=`` written in code:
    a docstring that cannot be traced to the source is then not read, so
    neither its summary nor its parameter sections reach the model.

    What is returned is the source's own ``str``, compared character by
    character (``str.__eq__``): a ``str`` subclass assigned to ``__doc__``
    could say it equals the source's text (a case-blind key type) and then
    print its own.

    Raises:
        ProvenanceError: ``doc`` was set at run time, or is the docstring of
            a callable object's class, and no ``description=`` was given.
    """
    if doc is None:
        return None
    for written in _source_docstrings(function):
        if str.__eq__(doc, written) is True:
            return written
    if described:
        return None
    raise ProvenanceError(_refusal(function, doc, tool))


def _source_docstrings(function: object) -> Iterator[str]:
    """The docstrings written in the source of ``function`` and of what it wraps."""
    waiting = [function]
    seen: set[int] = set()
    while waiting and len(seen) < _LINKS_FOLLOWED:
        current = waiting.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, _WRITTEN_IN_C) and isinstance(current.__doc__, str):
            yield current.__doc__
        code = getattr(current, "__code__", None)
        if isinstance(code, types.CodeType):
            constant = _docstring_constant(code)
            if constant is not None:
                yield constant
        for link in ("__func__", "__wrapped__"):
            inner = getattr(current, link, None)
            if inner is not None:
                waiting.append(inner)


def _docstring_constant(code: types.CodeType) -> str | None:
    if _HAS_DOCSTRING and not code.co_flags & _HAS_DOCSTRING:
        return None
    first = code.co_consts[0] if code.co_consts else None
    return first if isinstance(first, str) else None


def _refusal(function: object, doc: str, tool: str) -> str:
    bound = _unbound(function)
    from_class = not isinstance(bound, _FUNCTIONS) and "__doc__" not in getattr(
        bound, "__dict__", {}
    )
    what = (
        f"is the docstring of its class {type(bound).__qualname__}, which describes the "
        "class, not this tool, and which veridic cannot trace to the source (a class keeps "
        "no docstring constant)"
        if from_class
        else "was set at run time, not written in the source of the function (an assignment "
        "to __doc__, from a spec, a stored row or a decorator, is text the veridic.mypy "
        "plugin never sees)"
    )
    return (
        f"the docstring of tool {tool!r} {what}: {clip(doc)}; a tool's docstring goes into "
        "the capability section and the provider's tool list as the application's own "
        "words: write the docstring in the function's source, or pass description=... "
        "written in code (describe parameters with Annotated[..., Field(description=...)]), "
        "or register a tool described from outside with registry.external(..., pin=...), "
        "which prints its text only once pinned"
    )


def _unbound(function: object) -> object:
    """What a bound method, ``staticmethod`` or ``classmethod`` wraps (their ``__doc__`` is
    its), down to what wraps nothing: a callable object bound as a method reads its
    class's docstring, not one set at run time."""
    for _ in range(_LINKS_FOLLOWED):
        if not isinstance(function, types.MethodType | staticmethod | classmethod):
            break
        function = function.__func__
    return function


def stripped_fix(function: Callable[..., object], *, described: bool) -> str:
    """The fix of a function tool's missing description when ``-OO`` is part of why: its
    docstring stripped, or a docstring it does not have no help; ``""`` when ``-OO`` is
    not in it (Python runs without it, or ``description=`` was given: blank, it is text
    given in code, which ``-OO`` does not touch), and the usual fix applies.

    Under ``-OO`` Python keeps no trace of a stripped docstring in the code object, so
    the function's source is read to tell the two apart.
    """
    if described or not docstrings_stripped():
        return ""
    written = _source_has_docstring(function)
    if written is None:
        return UNREAD_UNDER_OO_FIX
    return STRIPPED_FIX if written else UNDOCUMENTED_UNDER_OO_FIX


def _source_has_docstring(function: object) -> bool | None:
    """Whether the source of the function a tool reads its docstring from has one
    (``None``: its source cannot be read, or what stands at its line now is another
    function: its file changed after import). A callable object, a builtin or a lambda has
    none a tool reads (a class docstring is refused, a builtin's is not stripped)."""
    unbound = _unbound(function)
    if not callable(unbound):
        return False
    try:
        target = inspect.unwrap(unbound)
    except ValueError:  # a __wrapped__ chain that loops
        return None
    if not isinstance(target, types.FunctionType) or target.__name__ == "<lambda>":
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):  # not found, or not whole
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    if node.name != target.__code__.co_name:  # its file changed on disk since it was read
        return None
    return ast.get_docstring(node, clean=False) is not None
