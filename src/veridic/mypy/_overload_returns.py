"""An overloaded function's implementation returns no more than its overloads declare.

mypy checks an overload's implementation against each overload loosely: its declared
return type may be a supertype of an overload's (``str`` for ``TrustedInstruction``), or
``Any``, and its body is checked only against that wider declaration. So::

    @overload
    def launder(text: str) -> TrustedInstruction: ...
    @overload
    def launder(text: int) -> int: ...
    def launder(text: str | int) -> str | int:
        return text

type-checks under ``--strict``, and every caller of ``launder(reply)`` reads the plain
``str`` as trusted: a forge without a ``cast()`` or a ``type: ignore``, in a shape a
reviewer reads as an ordinary overload. The run time refuses the text, too late.

Reported (``veridic-forge``, on the implementation): an overloaded function or method
of the project one of whose overloads returns trusted text (``_any_declared.
holds_trusted``), whose implementation is declared to return a type that is not a
subtype of the union of the overloads' return types (a proper subtype: ``Any`` is not
one) in a part that can hold plain text (``_plain``): ``str``, ``object``, ``Any``, a
``Literal`` string, or a type with one among its arguments. Declare the implementation's
return as that union, and mint in its body.

Accepted: a part that holds no plain text, though wider than the overloads: the ``None``
of a ``dict.get``-like implementation (``-> TrustedInstruction | T | None`` for overloads
``-> TrustedInstruction`` and ``-> TrustedInstruction | T``), a ``Sequence[
TrustedInstruction]`` for overloads returning a ``list`` and a ``tuple`` of it (the body is
checked to return trusted text either way). An ``async`` overload is compared by what its
coroutine returns (no ``async def`` can declare a union of coroutines).

Hook: the end of a module's check, with the module-wide reports (a module that only
defines overloads makes no call: mypy runs no call hook in it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import Decorator, FuncDef, MypyFile, OverloadedFuncDef
from mypy.subtypes import is_proper_subtype
from mypy.typeops import make_simplified_union
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    TupleType,
    Type,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._rebinding import every_statement


def may_report(tree: MypyFile) -> bool:
    """Whether ``tree`` defines an overloaded function with an implementation, read from
    its nodes: a module that made no call is searched for its checker only then."""
    return any(_overloads(tree))


def report(checker: TypeChecker) -> None:
    """Report each implementation declared to return more than its overloads."""
    for definition in _overloads(checker.tree):
        implementation = _implementation(definition)
        returns = [_returned(item) for item in definition.items]
        if implementation is None or None in returns:
            continue
        items = [ret for ret in returns if ret is not None]
        if not any(holds_trusted(ret) for ret in items):
            continue
        declared = implementation.type
        if not isinstance(declared, CallableType):
            continue  # not annotated: --strict reports it already
        union = make_simplified_union(items)
        returned = _awaited(implementation, declared.ret_type)
        if not any(_plain(part) for part in _wider(returned, union)):
            continue
        checker.fail(
            _message(definition.name, returned, union, checker),
            implementation,
            code=errorcodes.FORGE,
        )


def _overloads(tree: MypyFile) -> Iterator[OverloadedFuncDef]:
    if _names.in_package(tree.fullname) or tree.is_stub:
        return
    for statement in every_statement(tree.defs):
        if isinstance(statement, OverloadedFuncDef) and statement.impl is not None:
            yield statement


def _implementation(definition: OverloadedFuncDef) -> FuncDef | None:
    impl = definition.impl
    return impl.func if isinstance(impl, Decorator) else impl


def _returned(item: Decorator | FuncDef | object) -> Type | None:
    """The return type an overload declares (what its coroutine returns, for an ``async
    def``), ``None`` where unknown."""
    function = item.func if isinstance(item, Decorator) else item
    if not isinstance(function, FuncDef):
        return None
    proper = get_proper_type(function.type)
    return _awaited(function, proper.ret_type) if isinstance(proper, CallableType) else None


def _awaited(function: FuncDef, declared: Type) -> Type:
    """What an ``async def`` declared to return ``declared`` gives its awaiting caller."""
    proper = get_proper_type(declared)
    if function.is_coroutine and isinstance(proper, Instance) and proper.args:
        return proper.args[-1]  # Coroutine[Any, Any, T]
    return declared


def _wider(declared: Type, union: Type) -> Iterator[Type]:
    """The parts of ``declared`` that are no proper subtype of ``union``. A type variable
    the overloads return too is theirs (each signature binds its own copy of it): what
    the body returns as it is what the caller passed."""
    proper, among = get_proper_type(declared), get_proper_type(union)
    parts = proper.items if isinstance(proper, UnionType) else [declared]
    names = {
        item.fullname
        for item in map(get_proper_type, among.items if isinstance(among, UnionType) else [among])
        if isinstance(item, TypeVarType)
    }
    for part in parts:
        variable = get_proper_type(part)
        if isinstance(variable, TypeVarType) and variable.fullname in names:
            continue
        if not is_proper_subtype(part, union, ignore_promotions=True):
            yield part


def _plain(typ: Type) -> bool:
    """Whether ``typ`` can hold text that is not minted: ``Any``, ``str``, ``object``, a
    ``Literal`` string, or a type (a union, a tuple, a generic) with such a part."""
    proper = get_proper_type(typ)
    if isinstance(proper, AnyType):
        return True
    if isinstance(proper, LiteralType):
        return proper.fallback.type.fullname == "builtins.str"
    if isinstance(proper, Instance):
        if proper.type.fullname in _PLAIN:
            return True
        return any(_plain(arg) for arg in proper.args)
    if isinstance(proper, TypeVarType):
        return _plain(proper.upper_bound)
    if isinstance(proper, (UnionType, TupleType)):
        return any(_plain(item) for item in proper.items)
    if isinstance(proper, CallableType):
        return _plain(proper.ret_type)
    return False  # None, a TypedDict's own checks, a type of a type: no text there


_PLAIN: Final = frozenset({"builtins.str", "builtins.object"})


def _message(name: str, declared: Type, union: Type, checker: TypeChecker) -> str:
    shown = format_type(declared, checker.options)
    wanted = format_type(union, checker.options)
    return (
        f"the overloaded function {name}() got an implementation declared to return "
        f"{shown}, more than its overloads return ({wanted}): mypy checks the body only "
        "against the implementation, so it may return a plain str that every caller reads "
        f"as trusted; declare the implementation to return {wanted} and mint the text in "
        "its body with instruction() or join() (or place outside text as data with "
        "Composer.data())"
    )
