"""No override is declared ``Any`` where its base holds trusted text.

mypy accepts an override that returns ``Any`` (a method, a property) or an attribute
declared ``Any`` over a base's ``TrustedInstruction``, even under ``--strict``::

    class Persona:
        def rules(self) -> TrustedInstruction: ...

    class Loaded(Persona):
        def rules(self) -> Any:
            return json.loads(reply)

A caller holding a ``Persona`` reads ``persona.rules()`` as trusted, and gets the reply:
``Any`` given a trusted type by a declaration, as in ``_any_declared``, one class away.

Reported (``veridic-any``, on the override): a method, property or attribute of a class
of the project declared ``Any`` (its return type, for a method or a property) where the
same name in a base class (the whole MRO) holds trusted text (``holds_trusted``); and
the same one level in: ``list[Any]`` over ``list[TrustedInstruction]`` (an argument of the
same generic), ``Callable[[], Any]`` over ``Callable[[], TrustedInstruction]``.
Declare the override with the base's type, and mint in its body.

Not seen: a class that implements a ``Protocol`` structurally with an ``Any`` member
(it names no base to compare with).

Hook: the end of a module's check, with the module-wide reports. A module that defines
a class always makes a call (mypy calls a hook for ``__init_subclass__``), so the end of
its check always comes with the checker its first call kept.
"""

from __future__ import annotations

from collections.abc import Iterator

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    ClassDef,
    Decorator,
    FuncDef,
    MypyFile,
    OverloadedFuncDef,
    SymbolNode,
    TypeInfo,
    Var,
)
from mypy.types import AnyType, CallableType, Instance, Type, TypeOfAny, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._rebinding import every_statement


def report(checker: TypeChecker) -> None:
    """Report each member declared ``Any`` over a base's trusted one."""
    for info in classes(checker.tree):
        for name, symbol in info.names.items():
            own = _declared(symbol.node)
            if own is None or not _mentions_any(own[0]):
                continue
            for base in info.mro[1:]:
                found = base.names.get(name)
                declared = None if found is None else _declared(found.node)
                if declared is not None and _any_over_trusted(own[0], declared[0]):
                    _fail(checker, name, own, declared[0], base)
                    break


def classes(tree: MypyFile) -> Iterator[TypeInfo]:
    """The classes ``tree`` defines, at any depth, when it is a module of the project (not
    veridic's, not a stub): the ones whose overrides are compared with their bases. A class
    in code mypy skipped (``else:`` of ``if TYPE_CHECKING:``, another platform's branch)
    was never analysed: it has no members to read."""
    if _names.in_package(tree.fullname) or tree.is_stub:
        return
    for statement in every_statement(tree.defs):
        if isinstance(statement, ClassDef) and statement.info:
            yield statement.info  # not a class mypy skipped (its info is a falsy FakeInfo)


def _declared(node: SymbolNode | None) -> tuple[Type, FuncDef | Var] | None:
    """The type a member declares (its return type for a method or a property), and
    the declaration; ``None`` when not declared."""
    if isinstance(node, OverloadedFuncDef) and node.items:
        node = node.items[0]  # a property with a setter: its getter
    if isinstance(node, Decorator):
        node = node.func
    if isinstance(node, FuncDef):
        proper = get_proper_type(node.type)
        return (proper.ret_type, node) if isinstance(proper, CallableType) else None
    if isinstance(node, Var) and node.type is not None and not node.is_inferred:
        return node.type, node
    return None


def _explicit_any(typ: Type) -> bool:
    proper = get_proper_type(typ)
    return isinstance(proper, AnyType) and proper.type_of_any == TypeOfAny.explicit


def _mentions_any(typ: Type) -> bool:
    """Whether ``typ`` is, or has among its arguments, an ``Any`` written in the code
    (the cheap test before each base is compared)."""
    proper = get_proper_type(typ)
    if isinstance(proper, Instance):
        return any(_mentions_any(arg) for arg in proper.args)
    if isinstance(proper, CallableType):
        return _mentions_any(proper.ret_type)
    return _explicit_any(proper)


def _any_over_trusted(own: Type, base: Type) -> bool:
    """Whether ``own`` has a written ``Any`` where ``base`` holds trusted text: the whole
    type, an argument of the same generic (``list[Any]`` over ``list[TrustedInstruction]``),
    or a function's result (``Callable[[], Any]`` over ``Callable[[], TrustedInstruction]``):
    mypy takes each as compatible, and a caller holding the base reads it as trusted."""
    if _explicit_any(own):
        return holds_trusted(base)
    mine, theirs = get_proper_type(own), get_proper_type(base)
    if isinstance(mine, CallableType) and isinstance(theirs, CallableType):
        return _any_over_trusted(mine.ret_type, theirs.ret_type)
    return (
        isinstance(mine, Instance)
        and isinstance(theirs, Instance)
        and mine.type is theirs.type
        and len(mine.args) == len(theirs.args)
        and any(map(_any_over_trusted, mine.args, theirs.args))
    )


def _fail(
    checker: TypeChecker,
    name: str,
    own: tuple[Type, FuncDef | Var],
    base_type: Type,
    base: TypeInfo,
) -> None:
    shown = format_type(base_type, checker.options)
    mine = format_type(own[0], checker.options)
    where = own[1]
    method = isinstance(where, FuncDef)
    what = "declared to return" if method else "declared"
    gives = "returns" if method else "holds"
    checker.fail(
        f'"{name}" is {what} {mine} over {shown} of the base class "{base.name}": a caller '
        f"holding a {base.name} got whatever it {gives} (a JSON reply, an untyped "
        f"library's value) read as trusted; declare it as the base does ({shown}) and "
        "mint the text with instruction() or join(), or place outside text as data with "
        "Composer.data()",
        where,
        code=errorcodes.ANY,
    )
