"""Call hook: no value of type ``Any`` reaches an instruction position.

Hook: ``get_function_hook`` and ``get_method_hook`` for every callee with a
parameter typed ``TrustedInstruction`` (or ``TrustedInstruction | None``) or
an iterable of it: ``Composer.system()``, ``join()``'s parts, and the user's
own functions that declare an instruction parameter. (``LiteralString``
parameters get the same treatment from ``_minting``.)

What it changes: nothing in the inferred types. It reports ``veridic-any``
for an argument of type ``Any``, for an ``Any`` item of a list, tuple, set or
comprehension passed as the parts, and for ``*args`` or ``**kwargs`` whose
items are ``Any``. The same for a parameter typed ``Literal[...]`` of strings
(a dataclass, ``NamedTuple`` or ``TypedDict`` field, ``Config(**data)``): the
plugin reads a ``Literal``-typed value as text written in code, so a ``Literal``
filled from ``Any`` would be code text that came from anywhere. For the same
reason a ``Literal`` parameter's argument that is a ``cast()``, or a variable
that took a ``cast()`` or ``Any`` (``_literal_data``), is ``veridic-literal``:
its type is right, so mypy is content, and its text is whatever was cast.

Why: ``Any`` is compatible with every type, so a value from an untyped
library or ``json.loads`` passes ``TrustedInstruction`` parameters silently,
even under ``--strict``. The run-time check would refuse it, but a strict
project should not lose the static check through one untyped call.

``Any`` first assigned to a target declared ``TrustedInstruction`` (whose type is then
``TrustedInstruction``) is refused at the assignment by ``_any_declared``.
"""

from __future__ import annotations

from collections.abc import Iterable

from mypy.checker import TypeChecker
from mypy.nodes import CallExpr, CastExpr, Expression
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import AnyType, Type, TypeOfAny, UnionType, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._code_text import describe
from veridic.mypy._literal_data import any_source
from veridic.mypy._signature import Argument, Callee, Role, arguments, values


def check(ctx: FunctionContext | MethodContext, callee: Callee, checker: TypeChecker) -> None:
    """Report every ``Any`` that lands in one of ``callee``'s instruction parameters."""
    check_arguments(callee, arguments(ctx, callee), checker)


def check_arguments(callee: Callee, given: Iterable[Argument], checker: TypeChecker) -> None:
    """:func:`check` for arguments already matched to ``callee``'s parameters."""
    for argument in given:
        if argument.role in (Role.CODE_TEXT, Role.TRUSTED_TEXT):
            continue  # _minting's
        for expr, typ in values(argument, checker):
            if not is_any(typ):
                if argument.role is Role.LITERAL:
                    _check_literal_source(callee, argument.formal, expr, checker)
                continue
            what = describe(expr, checker)
            if argument.role is Role.LITERAL:
                message = any_literal(callee.display, argument.formal, what)
            else:
                message = any_value(callee.display, argument.formal, what)
            checker.fail(message, expr, code=errorcodes.ANY)


def _check_literal_source(
    callee: Callee, formal: str, expr: Expression, checker: TypeChecker
) -> None:
    """A ``Literal``-typed argument that a ``cast()`` or ``Any`` filled (``veridic-literal``).

    Its type is the parameter's, so mypy is content; but the function reads the
    parameter as text written in code, and a ``cast(Mode, raw)`` (or a variable that
    took one, or took ``Any``) holds whatever ``raw`` held.
    """
    if _names.in_package(checker.tree.fullname):
        return  # veridic casts stored values it has just checked, as its own tests pin
    what = describe(expr, checker)
    if not (isinstance(expr, CallExpr) and isinstance(expr.analyzed, CastExpr)):
        source = any_source(expr, checker)
        if source is None:
            return
        what += f" (filled by {source})"
    checker.fail(
        f"{callee.display} got {what} for {formal}, which is typed Literal: the plugin reads "
        "a Literal-typed value as text written in code, and a cast() or Any could hold any "
        "text; give the value its type where it comes from (a pydantic model or TypeAdapter "
        "checks a Literal), write the texts in code and pick one by the value, or type "
        f"{formal} as str if it is outside text",
        expr,
        code=errorcodes.LITERAL,
    )


def any_literal(callee: str, formal: str, what: str) -> str:
    """The ``veridic-any`` message for ``Any`` filling a ``Literal`` parameter."""
    return (
        f'{callee} got a value of type "Any" for {formal} ({what}), which is typed Literal: '
        "the plugin reads a Literal-typed value as text written in code, and Any could hold "
        "any text; give the value its type where it comes from: validate it (a pydantic model "
        f"or TypeAdapter checks a Literal when it is built), or type {formal} as str if it is "
        "outside text"
    )


def any_value(callee: str, formal: str, what: str) -> str:
    """The ``veridic-any`` message."""
    return (
        f'{callee} got a value of type "Any" for {formal} ({what}); Any hides whether '
        "the text is trusted, so it may not reach an instruction position: give the value a "
        "type where it comes from (annotate the untyped result as str), then mint it with "
        "instruction() or join(), or place it as data with Composer.data()"
    )


def is_any(typ: Type) -> bool:
    """``Any`` (or a union with ``Any``), except ``Any`` from an error mypy reported already."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return any(is_any(item) for item in proper.items)
    return isinstance(proper, AnyType) and proper.type_of_any != TypeOfAny.from_error
