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
(``=``, or an operator's ``+=``, judged by what the operator makes) to an attribute whose
declared type holds a covariant type variable of its class, through an object whose type
fills that variable with a type a ``TrustedInstruction`` can be held as (``str``,
``object``, ``str | None``), when the value is not what the attribute would hold with the
variable filled by ``TrustedInstruction``. The plugin cannot tell where the object was
made, so every such write is reported: make the attribute read-only (a property, a frozen
dataclass), or declare the type variable invariant, which makes mypy refuse the wider view.

Accepted: the class's own writes through ``self`` (its variable is not filled there), a
view that holds trusted text already (``Box[TrustedInstruction]``) or that no trusted
text can be held as (``Box[int]``), minted text written through any view, a value that
holds no text (a number, ``None``: through a ``Box[object]`` or a ``Box[str | None]``
it puts no text where trusted text is read), an attribute typed by an invariant type
variable. ``setattr()`` and a write through the object's namespace are judged the same
way (``_attribute_writes``).

Not seen: a mutable container typed by the variable (``self.items: list[T_co]``) filled
through the view (``box.items.append(reply)``): each read of it is an ordinary read.

Hook: the end of a module's check, with the module-wide reports (a module that makes no
call, when it assigns an attribute of something other than ``self``: :func:`may_report`).
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.messages import format_type, format_type_bare
from mypy.nodes import (
    AssignmentStmt,
    Context,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    SymbolNode,
    Var,
)
from mypy.types import Instance, Type, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._any_guard import is_any
from veridic.mypy._attribute_writes import admitted, held_view, operated
from veridic.mypy._forging import trusted_instance
from veridic.mypy._rebinding import every_statement


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
        receiver = get_proper_type(checker.lookup_type_or_none(target.expr))
        if not isinstance(receiver, Instance):
            continue
        symbol = receiver.type.get(target.name)
        attribute = _writable(None if symbol is None else symbol.node)
        if attribute is None or attribute.type is None:
            continue
        view = map_instance_to_supertype(receiver, attribute.info)
        filled = held_view(view, attribute.info, trusted)
        if filled is None:
            continue
        declared = expand_type_by_instance(attribute.type, filled)
        if not holds_trusted(declared):
            continue  # the attribute is not typed by the variable filled
        seen = expand_type_by_instance(attribute.type, view)
        written = _written(checker, statement, declared)
        if written is None or (admitted(checker, written, declared, seen) and not is_any(written)):
            continue
        _fail(checker, target, view, filled, written, statement)


def _writes(tree: MypyFile) -> list[tuple[AssignmentStmt | OperatorAssignmentStmt, MemberExpr]]:
    found: list[tuple[AssignmentStmt | OperatorAssignmentStmt, MemberExpr]] = []
    for statement in every_statement(tree.defs):
        if isinstance(statement, AssignmentStmt):
            targets = statement.lvalues
        elif isinstance(statement, OperatorAssignmentStmt):
            targets = [statement.lvalue]
        else:
            continue
        found += [
            (statement, target)
            for target in targets
            if isinstance(target, MemberExpr) and not _own(target)
        ]
    return found


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
    checker: TypeChecker, statement: AssignmentStmt | OperatorAssignmentStmt, declared: Type
) -> Type | None:
    """What the statement writes: the value, or what the operator makes of the attribute
    (``box.item += reply`` is a ``str`` however the item was declared)."""
    if isinstance(statement, OperatorAssignmentStmt):
        return operated(checker, statement, declared)
    return checker.lookup_type_or_none(statement.rvalue)


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
