"""No attribute typed by a covariant type variable is written through a wider view.

mypy lets a generic class declare an attribute typed by its covariant type variable and
lets code write it (its variance check reads method parameters, not attributes), while
the variance lets a ``Box[TrustedInstruction]`` be held as a ``Box[str]``. A write through
that view is checked against the view's ``str``::

    T_co = TypeVar("T_co", covariant=True)

    class Box(Generic[T_co]):
        def __init__(self, item: T_co) -> None:
            self.item = item

    def fill(box: Box[str]) -> None:
        box.item = reply  # checked against str: accepted

    trusted = Box(instruction("Be brief."))
    fill(trusted)
    registry.component("billing", hint=trusted.item)  # read as trusted

The reply is read as a ``TrustedInstruction`` without anything having minted it: the
composer refuses it, but a ``TrustedText`` position (a component's hint, a ``Deny`` reason)
takes a ``TrustedInstruction`` as minted and prints it in the capability section.

Reported (``veridic-forge``; ``veridic-any`` for a value typed ``Any``): an assignment
(``=``, also to one target of several, ``box.item, n = reply, 1``; a ``for`` loop's
target; an operator's ``+=``, judged by what the operator makes) to an attribute whose
declared type holds a covariant type variable of its class, through an object (or one of
a union's, or a type variable's bound) whose type fills that variable with a type a
``TrustedInstruction`` can be held as (``str``, ``object``, ``str | None``), when the value
is not what the attribute would hold with the variable filled by ``TrustedInstruction``.
A parameter, an attribute, a function's return value, a module's variable may each be a
view of a trusted object: make the attribute read-only (a property, a frozen dataclass),
or declare the type variable invariant, which makes mypy refuse the wider view.

Accepted: a write through a variable that holds an object its function made itself
(``local = Box(reply)``, bound once, by the call of the class: ``_fresh``), which nothing
holds as a ``Box[TrustedInstruction]``; the class's own writes through ``self`` (its
variable is not filled there), a view that holds trusted text already
(``Box[TrustedInstruction]``) or that no trusted text can be held as (``Box[int]``),
minted text written through any view, a value that holds no text (a number, ``None``:
through a ``Box[object]`` or a ``Box[str | None]`` it puts no text where trusted text is
read), an attribute typed by an invariant type variable. ``setattr()`` and a write
through the object's namespace are judged the same way (``_attribute_writes``).

Not seen: a mutable container typed by the variable (``self.items: list[T_co]``) filled
through the view (``box.items.append(reply)``): each read of it is an ordinary read. A
``with`` statement's or a comprehension's target that is such an attribute
(``with open(path) as box.item``).

Hook: the end of a module's check, with the module-wide reports (a module that makes no
call, when it assigns an attribute of something other than ``self``: :func:`may_report`).
"""

from __future__ import annotations

from collections.abc import Iterator

from mypy.checker import TypeChecker
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.messages import format_type, format_type_bare
from mypy.nodes import (
    AssignmentStmt,
    Context,
    Expression,
    ForStmt,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    StarExpr,
    SymbolNode,
    TupleExpr,
    Var,
)
from mypy.types import Instance, TupleType, Type, TypeVarType, UnionType, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._any_guard import is_any
from veridic.mypy._attribute_writes import admitted, held_view, operated
from veridic.mypy._forging import trusted_instance
from veridic.mypy._fresh import fresh
from veridic.mypy._rebinding import every_statement

_Write = AssignmentStmt | OperatorAssignmentStmt | ForStmt
"""A statement that assigns its targets: ``=``, an operator's ``+=``, a ``for`` loop."""


def may_report(tree: MypyFile) -> bool:
    """Whether ``tree`` assigns an attribute of something other than ``self`` or ``cls``
    (read without the checker, which a module that makes no call costs a search to find)."""
    return any(True for _ in _writes(tree))


def report(checker: TypeChecker) -> None:
    """Report each write through a covariant view into an attribute typed by its variable."""
    trusted = trusted_instance(checker)
    if trusted is None or _names.in_package(checker.tree.fullname):
        return  # no module of the build can hold a TrustedInstruction
    for statement, target in _writes(checker.tree):
        for receiver in _receivers(checker.lookup_type_or_none(target.expr)):
            if _reported(checker, trusted, statement, target, receiver):
                break  # one report a write, however many of a union's objects it fits


def _receivers(typ: Type | None) -> list[Instance]:
    """The objects a write's owner may be: an instance, each of a union's, or the bound of a
    type variable (``box: B``, ``B`` bound to ``Box[str]``)."""
    proper = get_proper_type(typ)
    if isinstance(proper, TypeVarType):
        proper = get_proper_type(proper.upper_bound)
    if isinstance(proper, UnionType):
        return [item for item in map(get_proper_type, proper.items) if isinstance(item, Instance)]
    return [proper] if isinstance(proper, Instance) else []


def _reported(
    checker: TypeChecker,
    trusted: Instance,
    statement: _Write,
    target: MemberExpr,
    receiver: Instance,
) -> bool:
    """Report the write into ``target`` of an object typed ``receiver``; whether it did."""
    symbol = receiver.type.get(target.name)
    attribute = _writable(None if symbol is None else symbol.node)
    if attribute is None or attribute.type is None or fresh(checker, target.expr, attribute):
        return False
    view = map_instance_to_supertype(receiver, attribute.info)
    filled = held_view(view, attribute.info, trusted)
    if filled is None:
        return False
    declared = expand_type_by_instance(attribute.type, filled)
    if not holds_trusted(declared):
        return False  # the attribute is not typed by the variable filled
    seen = expand_type_by_instance(attribute.type, view)
    written = _written(checker, statement, target, declared)
    if written is None or (admitted(checker, written, declared, seen) and not is_any(written)):
        return False
    _fail(checker, target, view, filled, written, statement)
    return True


def _writes(tree: MypyFile) -> list[tuple[_Write, MemberExpr]]:
    """Each attribute of something other than ``self`` or ``cls`` that a statement assigns,
    also as one target of several (``box.item, count = ...``), with the statement."""
    found: list[tuple[_Write, MemberExpr]] = []
    for statement in every_statement(tree.defs):
        if isinstance(statement, AssignmentStmt):
            targets = statement.lvalues
        elif isinstance(statement, OperatorAssignmentStmt):
            targets = [statement.lvalue]
        elif isinstance(statement, ForStmt):
            targets = [statement.index]
        else:
            continue
        found += [
            (statement, target)
            for target in _flattened(targets)
            if isinstance(target, MemberExpr) and not _own(target)
        ]
    return found


def _flattened(targets: list[Expression]) -> Iterator[Expression]:
    for target in targets:
        if isinstance(target, TupleExpr | ListExpr):
            yield from _flattened(target.items)
        else:
            yield target


def _own(target: MemberExpr) -> bool:
    """Whether ``target`` is an attribute of ``self`` or ``cls``: the class's own writes,
    where its type variables are not filled."""
    owner = target.expr
    return isinstance(owner, NameExpr) and owner.name in ("self", "cls")


def _writable(node: SymbolNode | None) -> Var | None:
    """``node``, if it is an attribute that a write may change (not ``Final``, not a frozen
    dataclass's field or a property, which mypy refuses to write)."""
    if not isinstance(node, Var) or node.is_final or node.is_property or node.is_classvar:
        return None
    return node


def _written(
    checker: TypeChecker, statement: _Write, target: MemberExpr, declared: Type
) -> Type | None:
    """What the statement writes into ``target``: the value (its part, for one target of
    several), what a ``for`` loop's iterable gives, or what the operator makes of the
    attribute (``box.item += reply`` is a ``str`` however the item was declared)."""
    if isinstance(statement, OperatorAssignmentStmt):
        return operated(checker, statement, declared)
    if isinstance(statement, ForStmt):
        return _part(checker, statement.index, None, statement.inferred_item_type, target)
    for lvalue in statement.lvalues:
        found = _part(checker, lvalue, statement.rvalue, None, target)
        if found is not None:
            return found
    return None


def _part(
    checker: TypeChecker,
    lvalue: Expression,
    value: Expression | None,
    typ: Type | None,
    target: MemberExpr,
) -> Type | None:
    """The type of what ``lvalue`` gets into ``target`` (within it) from ``value`` (or, with
    no expression, a value of type ``typ``); ``None`` when ``target`` is not in ``lvalue``."""
    if lvalue is target:
        return typ if value is None else checker.lookup_type_or_none(value)
    if not isinstance(lvalue, TupleExpr | ListExpr) or _starred(lvalue.items):
        return None  # a starred target: mypy checks the list it gets against the attribute
    if (
        isinstance(value, TupleExpr | ListExpr)
        and len(value.items) == len(lvalue.items)
        and not _starred(value.items)
    ):
        pairs = zip(lvalue.items, value.items, strict=True)
        parts = (_part(checker, item, part, None, target) for item, part in pairs)
        return next((part for part in parts if part is not None), None)
    whole = get_proper_type(typ if value is None else checker.lookup_type_or_none(value))
    if isinstance(whole, TupleType) and len(whole.items) == len(lvalue.items):
        items = whole.items
    elif whole is not None:
        with checker.msg.filter_errors():
            items = [checker.iterable_item_type(whole, target)] * len(lvalue.items)
    else:
        return None
    typed = zip(lvalue.items, items, strict=True)
    parts = (_part(checker, item, None, part, target) for item, part in typed)
    return next((part for part in parts if part is not None), None)


def _starred(items: list[Expression]) -> bool:
    return any(isinstance(item, StarExpr) for item in items)


def _fail(
    checker: TypeChecker,
    target: MemberExpr,
    view: Instance,
    filled: Instance,
    written: Type,
    context: Context,
) -> None:
    held = format_type_bare(filled, checker.options)
    shown = format_type_bare(view, checker.options)
    code = errorcodes.ANY if is_any(written) else errorcodes.FORGE
    checker.fail(
        f'the attribute "{target.name}" of "{view.type.name}", typed by its covariant type '
        f"variable, got a value of type {format_type(written, checker.options)} through a "
        f"{shown}: mypy lets a {held} be held as a {shown} and checks the write against that "
        "view, so where the object is one, reads of the attribute are typed trusted while it "
        "holds whatever was written, which the composer refuses and a TrustedText position "
        "prints in the capability section; make the attribute read-only (a property, a frozen "
        "dataclass) or declare the type variable invariant, and mint the text with "
        'instruction(), join() or TrustPolicy("name").vouch(text, reason=...)',
        context,
        code=code,
    )
