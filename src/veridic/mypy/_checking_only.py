"""No trusted text is declared where only mypy reads it.

mypy reads the body of ``if TYPE_CHECKING:`` and skips its ``else:``, and the run time
does the opposite. A declaration there is a stub inside the module: mypy believes it and
checks no implementation against it (it does not even ask for a body)::

    if TYPE_CHECKING:
        def vetted(text: str) -> TrustedInstruction: ...
    else:
        def vetted(text):
            return text

Every caller of ``vetted(reply)`` reads the reply as trusted, with no ``cast()``, no
``type: ignore`` and no error; a ``TrustedText`` position (a component's hint, a ``Deny``
reason) prints it in the capability section.

Reported (``veridic-forge``), in a module of the project (not a stub, which
``_stub_trust`` reads, not veridic's own):

- in a block only mypy reads (``if TYPE_CHECKING:``, the ``else:`` of ``if not
  TYPE_CHECKING:``), a function or method without a body (``...``, a docstring, ``pass``)
  declared to return trusted text (``holds_trusted``), and a variable or attribute
  declared to hold it without a value; a ``Protocol``'s members, and abstract methods,
  are declarations that every implementation is checked against, and are accepted;
- in a block only the run time reads (the ``else:`` of ``if TYPE_CHECKING:``), a
  function, class, assignment or import that binds a name that mypy reads, from the
  other branch, as holding trusted text (a function returning it, a variable of that
  type, a class with such a member): the run time binds it to code no mypy run checks.

Type-only imports (``from veridic import TrustedInstruction``) bind nothing trusted and
are accepted; so is a real body under ``TYPE_CHECKING``, which mypy checks, and the run
time's side of a type-only name: a placeholder that holds no text (``Persona = object``,
``= Any``, ``= None``, what users write for an optional dependency), or an import of the
very name the other branch imports. Module and class bodies are read, through ``try`` and
``with`` statements; a function's local ``TYPE_CHECKING`` test is not (it is rare, and its
names have no table to look them up in).

Hook: the end of a module's check, with the module-wide reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    NOT_ABSTRACT,
    AssignmentStmt,
    Block,
    ClassDef,
    Context,
    Decorator,
    Expression,
    FuncDef,
    IfStmt,
    Import,
    ImportFrom,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    Statement,
    SymbolNode,
    SymbolTable,
    SymbolTableNode,
    TempNode,
    TryStmt,
    TupleExpr,
    TypeInfo,
    Var,
    WithStmt,
)
from mypy.options import Options
from mypy.reachability import MYPY_FALSE, MYPY_TRUE, infer_condition_value
from mypy.semanal import is_trivial_body
from mypy.types import CallableType, Type, get_proper_type
from mypy.util import correct_relative_import

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted

_MYPY: Final = "mypy"
"""A block only mypy reads (``if TYPE_CHECKING:``)."""
_RUN_TIME: Final = "the run time"
"""A block only the run time reads (the ``else:`` of ``if TYPE_CHECKING:``)."""
_PLACEHOLDERS: Final = frozenset({"object", "None", "Any"})
"""What the run time's branch binds a type-only name to, holding no text (read by name:
mypy resolves no name in a branch it skips), also as ``typing.Any``."""


def may_report(tree: MypyFile, options: Options) -> bool:
    """Whether ``tree`` has anything to report (read without the checker, which a module
    that makes no call costs a search to find)."""
    return any(True for _ in _findings(tree, options))


def report(checker: TypeChecker) -> None:
    """Report the trusted declarations only mypy reads, and the bindings only the run time
    makes of names mypy reads as trusted."""
    for reader, name, declared, where in _findings(checker.tree, checker.options):
        fail = _fail_declared if reader == _MYPY else _fail_rebound
        fail(checker, name, declared, where)


def _findings(tree: MypyFile, options: Options) -> Iterator[tuple[str, str, Type, Context]]:
    if tree.is_stub or _names.in_package(tree.fullname):
        return
    split = list(_split(tree.defs, tree.names, options, None))
    checked_imports = {
        (id(names), bound): source
        for reader, statement, names in split
        if reader == _MYPY
        for bound, source in _imported(statement, tree)
    }
    for reader, statement, names in split:
        if reader == _MYPY:
            for name, declared, where in _declarations(statement):
                yield reader, name, declared, where
            continue
        imported = dict(_imported(statement, tree))
        for name, where in _bindings(statement):
            symbol = names.get(name)
            trusted = None if symbol is None else _trusted_type(symbol.node)
            if trusted is None or _holds_no_text(statement):
                continue
            source = imported.get(name)
            if source is not None and source in (
                checked_imports.get((id(names), name)),
                _fullname(symbol),
            ):
                continue  # the very name mypy reads, imported at run time too
            yield reader, name, trusted, where


def _imported(statement: Statement, tree: MypyFile) -> Iterator[tuple[str, str]]:
    """Each name a ``from ... import`` binds, with the full name it imports."""
    if isinstance(statement, ImportFrom):
        module, _ = correct_relative_import(
            tree.fullname, statement.relative, statement.id, tree.is_package_init_file()
        )
        for name, alias in statement.names:
            yield alias or name, f"{module}.{name}"


def _fullname(symbol: SymbolTableNode | None) -> str | None:
    return None if symbol is None or symbol.node is None else symbol.node.fullname


def _holds_no_text(statement: Statement) -> bool:
    """Whether ``statement`` binds a placeholder that holds no text (``Persona = object``,
    ``= Any``, ``= None``): the run time's side of a name used in annotations, or of an
    optional dependency. Reads of it fail at run time; none reads a reply as trusted."""
    if not isinstance(statement, AssignmentStmt):
        return False
    value = statement.rvalue
    return isinstance(value, NameExpr | MemberExpr) and value.name in _PLACEHOLDERS


def _split(
    statements: list[Statement], names: SymbolTable, options: Options, reader: str | None
) -> Iterator[tuple[str, Statement, SymbolTable]]:
    """Each statement of a block only mypy or only the run time reads, at any depth of
    module and class bodies, with its reader and the table its names are bound in."""
    for statement in statements:
        if reader is not None:
            yield reader, statement, names
        if isinstance(statement, ClassDef) and reader != _RUN_TIME and statement.info:
            yield from _split(statement.defs.body, statement.info.names, options, reader)
        elif isinstance(statement, IfStmt):
            for inner, block in _branches(statement, options, reader):
                yield from _split(block.body, names, options, inner)
        elif isinstance(statement, TryStmt | WithStmt):
            for block in _blocks(statement):
                yield from _split(block.body, names, options, reader)


def _blocks(statement: TryStmt | WithStmt) -> Iterator[Block]:
    """The blocks of a ``try`` or ``with`` statement, which run (or not) alike for mypy and
    the run time: an ``if TYPE_CHECKING:`` inside them is read as at the top."""
    if isinstance(statement, WithStmt):
        yield statement.body
        return
    yield statement.body
    yield from statement.handlers
    for block in (statement.else_body, statement.finally_body):
        if block is not None:
            yield block


def _branches(
    statement: IfStmt, options: Options, reader: str | None
) -> Iterator[tuple[str | None, Block]]:
    """The blocks of an ``if`` statement (an ``elif`` is an ``if`` in the ``else``), each
    with who reads it alone."""
    value = infer_condition_value(statement.expr[0], options)
    first, rest = reader, reader
    if value == MYPY_TRUE:
        first, rest = _MYPY, _RUN_TIME
    elif value == MYPY_FALSE:
        first, rest = _RUN_TIME, _MYPY
    yield first, statement.body[0]
    if statement.else_body is not None:
        yield rest, statement.else_body


def _declarations(statement: Statement) -> Iterator[tuple[str, Type, Context]]:
    """What ``statement`` declares trusted without an implementation mypy checks."""
    if isinstance(statement, AssignmentStmt):
        declared = statement.type
        if declared is not None and _no_value(statement.rvalue) and holds_trusted(declared):
            for target in statement.lvalues:
                if isinstance(target, NameExpr) and not _in_protocol(target.node):
                    yield target.name, declared, statement
        return
    items = statement.items if isinstance(statement, OverloadedFuncDef) else [statement]
    for item in items:
        function = item.func if isinstance(item, Decorator) else item
        if not isinstance(function, FuncDef) or not is_trivial_body(function.body):
            continue
        if function.abstract_status != NOT_ABSTRACT or _in_protocol(function):
            continue
        signature = get_proper_type(function.type)
        if isinstance(signature, CallableType) and holds_trusted(signature.ret_type):
            yield function.name, signature.ret_type, function


def _no_value(rvalue: Expression) -> bool:
    return isinstance(rvalue, TempNode) and rvalue.no_rhs


def _in_protocol(node: SymbolNode | None) -> bool:
    """Whether ``node`` is a member of a ``Protocol``: a declaration that each implementation
    is checked against."""
    info = getattr(node, "info", None)
    return isinstance(info, TypeInfo) and bool(info) and info.is_protocol  # FakeInfo is falsy


def _bindings(statement: Statement) -> Iterator[tuple[str, Context]]:
    """The names ``statement`` binds (a ``*`` import binds names not known here)."""
    if isinstance(statement, FuncDef | OverloadedFuncDef | ClassDef):
        yield statement.name, statement
    elif isinstance(statement, Decorator):
        yield statement.func.name, statement
    elif isinstance(statement, AssignmentStmt):
        for target in statement.lvalues:
            yield from _targets(target)
    elif isinstance(statement, Import):
        for module, alias in statement.ids:
            yield alias or module.partition(".")[0], statement
    elif isinstance(statement, ImportFrom):
        for name, alias in statement.names:
            yield alias or name, statement


def _targets(target: Expression) -> Iterator[tuple[str, Context]]:
    if isinstance(target, NameExpr):
        yield target.name, target
    elif isinstance(target, TupleExpr | ListExpr):
        for item in target.items:
            yield from _targets(item)


def _trusted_type(node: SymbolNode | None) -> Type | None:
    """The trusted text ``node`` holds, as mypy reads it: a function's return, a variable's
    type, a class's member's; ``None`` when it holds none."""
    if isinstance(node, Decorator):
        node = node.func
    if isinstance(node, OverloadedFuncDef):
        for item in node.items:
            found = _trusted_type(item)
            if found is not None:
                return found
        return None
    if isinstance(node, FuncDef):
        signature = get_proper_type(node.type)
        if isinstance(signature, CallableType) and holds_trusted(signature.ret_type):
            return signature.ret_type
        return None
    if isinstance(node, Var):
        return node.type if node.type is not None and holds_trusted(node.type) else None
    if isinstance(node, TypeInfo) and not _names.in_package(node.fullname):
        for symbol in node.names.values():
            found = _trusted_type(symbol.node) if symbol.node is not node else None
            if found is not None:
                return found
    return None


def _fail_declared(checker: TypeChecker, name: str, declared: Type, where: Context) -> None:
    shown = format_type(declared, checker.options)
    checker.fail(
        f'"if TYPE_CHECKING:" got "{name}" declared {shown} with no implementation: '
        "mypy believes the declaration and checks nothing against it, while the run time "
        "runs other code, so whatever that returns (a reply as it came) is read as trusted; "
        "declare it where it is implemented, outside the TYPE_CHECKING block, so that mypy "
        "checks its body, and mint the text there with instruction() or join()",
        where,
        code=errorcodes.FORGE,
    )


def _fail_rebound(checker: TypeChecker, name: str, declared: Type, where: Context) -> None:
    shown = format_type(declared, checker.options)
    checker.fail(
        f'the branch of a TYPE_CHECKING test that only the run time reads got "{name}" bound '
        f"again, while mypy reads it from the other branch as holding {shown}: no mypy run "
        "checks this code, so whatever it gives is read as trusted; "
        "give the name one binding outside the TYPE_CHECKING test, where mypy checks it, "
        "and keep only type-only imports under the test",
        where,
        code=errorcodes.FORGE,
    )
