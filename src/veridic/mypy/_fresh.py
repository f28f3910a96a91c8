"""Which variables hold an object their function made itself and nothing holds as trusted.

A write through a covariant view (``box.item = reply`` on a ``Box[str]``) is a forge only
where the object is a ``Box[TrustedInstruction]`` that something reads as one. An object
made by a call of its class, bound to a variable of the function that made it, was never
typed with trusted text in the variable unless the call made it so (``TrustedBox(...)``,
whose class fills the variable with ``TrustedInstruction``): every other name for it is
the same type or a wider one, and mypy refuses to narrow a wider view back to a
``Box[TrustedInstruction]`` (without ``cast()`` or ``Any``, which are the ``veridic-any``
rules' to report).

Fresh, then: a variable of a function (not a parameter, not a module's or a class's
variable, which other code may bind) that one statement binds, ``local = Box(reply)``
(also annotated, ``local: Box[str] = Box(reply)``, or with the type written,
``Box[str](reply)``), to a call of a class whose result mypy typed as an instance, and
that nothing else binds in the module: no other assignment, ``for``, ``with``, ``del``,
``except ... as``, ``match`` capture, walrus, comprehension, import of its name, nor a
nested function's ``nonlocal`` assignment.

Not seen, so reported: an object made by a function (``make_box()``), bound again, kept
in an attribute; a class whose constructor returns an object held elsewhere (a cache in
``__new__`` or a metaclass's ``__call__``, through ``Any`` or ``cast()``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from mypy.checker import TypeChecker
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,
    CallExpr,
    Decorator,
    DictionaryComprehension,
    Expression,
    FuncItem,
    GeneratorExpr,
    IndexExpr,
    LambdaExpr,
    ListExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    StarExpr,
    TupleExpr,
    TypeApplication,
    TypeInfo,
    Var,
)
from mypy.server.subexpr import get_subexpressions
from mypy.types import Instance, get_proper_type

from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._rebinding import assigned, every_statement, imports_name, own_statements

_MADE: dict[str, tuple[MypyFile, dict[int, CallExpr]]] = {}
""":func:`_constructed` of each module walked in this build, with the tree it read."""


def forget() -> None:
    """Drop what one build learnt (``VeridicPlugin`` calls this for each new build)."""
    _MADE.clear()


def made(checker: TypeChecker, owner: Expression) -> Instance | None:
    """The type the call that made ``owner``'s object gave it, when ``owner`` names an object
    its function made itself: the object is that, and no narrower view of it exists."""
    if not isinstance(owner, NameExpr) or not isinstance(owner.node, Var):
        return None
    call = _constructed(checker.tree).get(id(owner.node))
    typ = get_proper_type(None if call is None else checker.lookup_type_or_none(call))
    return typ if isinstance(typ, Instance) else None


def fresh(checker: TypeChecker, owner: Expression, attribute: Var) -> bool:
    """Whether ``owner`` names an object its function made itself, of a type that does not
    fill ``attribute`` with trusted text: no read of that attribute of it is typed trusted,
    whatever is written through a wider view of it."""
    typ = made(checker, owner)
    if typ is None or attribute.type is None:
        return False
    if all(base is not attribute.info for base in typ.type.mro):
        return False
    as_made = map_instance_to_supertype(typ, attribute.info)
    return not holds_trusted(expand_type_by_instance(attribute.type, as_made))


def _constructed(tree: MypyFile) -> dict[int, CallExpr]:
    """The variables of ``tree``'s functions bound once, by a call of a class, by the id of
    their ``Var``, with that call."""
    cached = _MADE.get(tree.fullname)
    if cached is not None and cached[0] is tree:
        return cached[1]
    others = _bound_otherwise(tree)
    made: dict[int, CallExpr] = {}
    for function in _functions(tree):
        for statement in own_statements(function.body.body):
            if not isinstance(statement, AssignmentStmt) or len(statement.lvalues) != 1:
                continue
            target, call = statement.lvalues[0], statement.rvalue
            if (
                isinstance(target, NameExpr)
                and isinstance(target.node, Var)
                and isinstance(call, CallExpr)
                and _is_class(call.callee)
                and id(target.node) not in others
                and not imports_name(tree.defs, target.node)
            ):
                made[id(target.node)] = call
    _MADE[tree.fullname] = (tree, made)
    return made


def _bound_otherwise(tree: MypyFile) -> set[int]:
    """The ids of the ``Var``s that ``tree`` binds other than by one assignment: the
    module's own, every function's parameters, and those bound twice or more, by a
    walrus or by a comprehension."""
    others = {id(symbol.node) for symbol in tree.names.values()}
    for function in _functions(tree):
        others |= {id(argument.variable) for argument in function.arguments}
    bound = Counter(
        id(target.node)
        for target in assigned(tree.defs)
        if isinstance(target, NameExpr) and isinstance(target.node, Var)
    )
    others |= {key for key, count in bound.items() if count > 1}
    for statement in tree.defs:
        for expr in get_subexpressions(statement):
            if isinstance(expr, AssignmentExpr):
                others.add(id(expr.target.node))
            elif isinstance(expr, GeneratorExpr | DictionaryComprehension):
                others |= {id(leaf.node) for leaf in _names_in(expr.indices)}
            elif isinstance(expr, LambdaExpr):
                others |= {id(argument.variable) for argument in expr.arguments}
    return others


def _names_in(targets: list[Expression]) -> Iterator[NameExpr]:
    """The names ``targets`` bind (``for key, (a, *b) in ...``)."""
    for target in targets:
        if isinstance(target, TupleExpr | ListExpr):
            yield from _names_in(target.items)
        elif isinstance(target, StarExpr):
            yield from _names_in([target.expr])
        elif isinstance(target, NameExpr):
            yield target


def _functions(tree: MypyFile) -> Iterator[FuncItem]:
    """Every function and method of ``tree``, at any depth."""
    for statement in every_statement(tree.defs):
        function = statement.func if isinstance(statement, Decorator) else statement
        if isinstance(function, FuncItem):
            yield function


def _is_class(callee: Expression) -> bool:
    """Whether a call of ``callee`` calls a class: ``Box`` or ``Box[str]``."""
    if isinstance(callee, IndexExpr) and isinstance(callee.analyzed, TypeApplication):
        callee = callee.analyzed.expr
    return isinstance(callee, RefExpr) and isinstance(callee.node, TypeInfo)
