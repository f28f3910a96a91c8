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
one). Declare the implementation's return as that union, and mint in its body.

Hook: the end of a module's check, with the module-wide reports (a module that only
defines overloads makes no call: mypy runs no call hook in it).
"""

from __future__ import annotations

from collections.abc import Iterator

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import Decorator, FuncDef, MypyFile, OverloadedFuncDef
from mypy.subtypes import is_proper_subtype
from mypy.typeops import make_simplified_union
from mypy.types import CallableType, Type, get_proper_type

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
        if is_proper_subtype(declared.ret_type, union, ignore_promotions=True):
            continue
        checker.fail(
            _message(definition.name, declared.ret_type, union, checker),
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
    """The return type an overload declares, ``None`` where unknown."""
    function = item.func if isinstance(item, Decorator) else item
    declared = function.type if isinstance(function, FuncDef) else None
    proper = get_proper_type(declared)
    return proper.ret_type if isinstance(proper, CallableType) else None


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
