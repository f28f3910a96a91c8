"""Does a function ever bind its parameter to something else?

A ``LiteralString`` parameter holds text written in code only as long as the
function leaves it alone: mypy reads ``LiteralString`` as ``str``, so
``text = text.upper()`` or ``text = input()`` type-checks and keeps the
declared type. The plugin trusts such a parameter only when nothing in the
function (nested functions and classes included, so a ``nonlocal`` or
``global`` assignment counts) binds it again: an assignment, augmented
assignment, ``for`` or ``with`` target, ``del``, ``except ... as``, a ``match``
capture, an assignment expression, or an ``import``/``from ... import`` (mypy
keeps the old meaning of a name an import rebinds, silently).

The same walk answers the question for a loop variable: ``for text in
texts`` (a statement or a comprehension) holds an item of ``texts`` only while
nothing else binds ``text``; :func:`loop_source` finds what it iterates over. A
comprehension that binds the name in two of its generators (``for t in rules
for t in names``) holds the last one's items, so it is no source at all.

(mypy's ``TraverserVisitor`` cannot be subclassed by an interpreted plugin
when mypy is compiled, so this walks the statements itself.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,
    Block,
    ClassDef,
    Decorator,
    DelStmt,
    DictionaryComprehension,
    Expression,
    ForStmt,
    FuncItem,
    GeneratorExpr,
    IfStmt,
    Import,
    ImportAll,
    ImportFrom,
    ListExpr,
    MatchStmt,
    MemberExpr,
    NameExpr,
    OperatorAssignmentStmt,
    OverloadedFuncDef,
    StarExpr,
    Statement,
    TempNode,
    TryStmt,
    TupleExpr,
    Var,
    WhileStmt,
    WithStmt,
)
from mypy.patterns import (
    AsPattern,
    ClassPattern,
    MappingPattern,
    OrPattern,
    Pattern,
    SequencePattern,
    StarredPattern,
)
from mypy.server.subexpr import get_subexpressions


def being_checked(function: FuncItem) -> FuncItem:
    """The copy of ``function`` (from ``checker.scope``) whose body mypy is checking now.

    mypy checks a function over a constrained TypeVar (``TypeVar("T", str, bytes)``,
    its own or its class's) once per constraint, each time on a copy whose names are
    new variables, while ``checker.scope`` holds the function as written. Matched
    against the written one, a parameter of the copy would be no parameter at all.
    The copy being checked is the last in ``expanded`` (the function itself when
    there is nothing to expand).
    """
    return function.expanded[-1] if function.expanded else function


def rebinds(function: FuncItem, variable: Var) -> bool:
    """Whether ``function``'s body binds ``variable`` anywhere."""
    if any(_names(target, variable) for target in _targets(function.body.body)):
        return True
    if any(_imports(statement, variable) for statement in _statements(function.body.body)):
        return True
    return any(
        isinstance(expr, AssignmentExpr) and expr.target.node is variable
        for expr in get_subexpressions(function.body)
    )


def loop_source(body: list[Statement], variable: Var) -> Expression | None:
    """What ``variable`` iterates over, if one ``for`` or comprehension is all that binds it.

    ``body`` is the enclosing function's (or module's) statements. A
    comprehension's variable is its own (Python forbids rebinding it with
    ``:=``), so the comprehension that binds it is enough; a ``for``
    statement's variable must be bound by nothing else in ``body``.
    """
    expressions = [expr for statement in body for expr in get_subexpressions(statement)]
    for expr in expressions:
        if isinstance(expr, GeneratorExpr | DictionaryComprehension):
            bound = [
                (index, sequence)
                for index, sequence in zip(expr.indices, expr.sequences, strict=True)
                if _names(index, variable)
            ]
            if bound:
                index, sequence = bound[0]
                return sequence if len(bound) == 1 and isinstance(index, NameExpr) else None
    if any(_imports(statement, variable) for statement in _statements(body)):
        return None
    loops = [
        statement
        for statement in _statements(body)
        if isinstance(statement, ForStmt)
        and isinstance(statement.index, NameExpr)
        and statement.index.node is variable
    ]
    if len(loops) != 1 or sum(_names(target, variable) for target in _targets(body)) != 1:
        return None
    if any(isinstance(e, AssignmentExpr) and e.target.node is variable for e in expressions):
        return None
    return loops[0].expr


def sources(body: list[Statement], variable: Var) -> Iterator[Expression]:
    """The expressions ``variable`` takes its values from in ``body``, at any depth.

    The value of an assignment (also augmented, and ``:=``), the iterable of a
    ``for`` loop, the context manager of a ``with``. (``except ... as`` and
    ``match`` captures are left out: they do not give a ``Literal`` type.)
    """
    for statement in _statements(body):
        if isinstance(statement, AssignmentStmt):
            if isinstance(statement.rvalue, TempNode) and statement.rvalue.no_rhs:
                continue  # a declaration without a value: "severity: Severity"
            for lvalue in statement.lvalues:
                if _names(lvalue, variable):
                    yield _unpacked(lvalue, statement.rvalue, variable)
        elif isinstance(statement, OperatorAssignmentStmt):
            if _names(statement.lvalue, variable):
                yield statement.rvalue
        elif isinstance(statement, ForStmt):
            if _names(statement.index, variable):
                yield statement.expr
        elif isinstance(statement, WithStmt):
            for expr, target in zip(statement.expr, statement.target, strict=True):
                if _names(target, variable):
                    yield expr
    for statement in body:
        for expr in get_subexpressions(statement):
            if isinstance(expr, AssignmentExpr) and expr.target.node is variable:
                yield expr.value


def imports_name(body: list[Statement], variable: Var) -> bool:
    """Whether an import in ``body`` (at any depth) binds ``variable``'s name."""
    return any(_imports(statement, variable) for statement in _statements(body))


def bound_in_a_function(body: list[Statement], variable: Var) -> bool:
    """Whether a function nested in ``body`` binds ``variable`` (``global``, ``nonlocal``)."""
    for statement in _statements(body):
        function = statement.func if isinstance(statement, Decorator) else statement
        if isinstance(function, FuncItem) and any(
            _names(target, variable) for target in _targets(function.body.body)
        ):
            return True
    return False


def assigns_attribute(statements: list[Statement], name: str) -> bool:
    """Whether ``statements`` assign (or delete) an attribute called ``name`` of anything."""
    return any(
        isinstance(leaf, MemberExpr) and leaf.name == name
        for target in _targets(statements)
        for leaf in _leaves(target)
    )


def every_statement(statements: list[Statement]) -> Iterator[Statement]:
    """Every statement of ``statements``, at any depth (function and class bodies too)."""
    return _statements(statements)


def own_statements(statements: list[Statement]) -> Iterator[Statement]:
    """Every statement of a function's body ``statements``, at any depth, but not those of
    the functions and classes defined in it (their ``return`` is their own)."""
    for statement in statements:
        yield statement
        if not isinstance(statement, FuncItem | Decorator | OverloadedFuncDef | ClassDef):
            yield from own_statements(list(_blocks(statement)))


def assigned(statements: list[Statement]) -> Iterator[Expression]:
    """Every expression ``statements`` assign or delete (names, attributes, items), at any
    depth, displays unpacked."""
    for target in _targets(statements):
        yield from _leaves(target)


def _leaves(target: Expression | None) -> Iterator[Expression]:
    if isinstance(target, TupleExpr | ListExpr):
        for item in target.items:
            yield from _leaves(item)
    elif isinstance(target, StarExpr):
        yield from _leaves(target.expr)
    elif target is not None:
        yield target


def _statements(statements: Iterable[Statement]) -> Iterator[Statement]:
    """Every statement, at any depth."""
    for statement in statements:
        yield statement
        yield from _statements(_blocks(statement))


def _imports(statement: Statement, variable: Var) -> bool:
    """Whether ``statement`` is an import that binds ``variable``'s name."""
    if isinstance(statement, ImportFrom):
        return any((alias or name) == variable.name for name, alias in statement.names)
    if isinstance(statement, Import):
        return any(
            (alias or module.partition(".")[0]) == variable.name for module, alias in statement.ids
        )
    return isinstance(statement, ImportAll)


def _unpacked(target: Expression, value: Expression, variable: Var) -> Expression:
    """What of ``value`` an assignment to ``target`` gives ``variable``: the matching item
    of a display unpacked into a display of names (``code, severity = "a", "info"``,
    whose display mypy types item by item, storing no type of its own), else all of it."""
    if (
        isinstance(target, TupleExpr | ListExpr)
        and isinstance(value, TupleExpr | ListExpr)
        and len(target.items) == len(value.items)
        and not any(isinstance(item, StarExpr) for item in [*target.items, *value.items])
    ):
        for item, part in zip(target.items, value.items, strict=True):
            if _names(item, variable):
                return _unpacked(item, part, variable)
    return value


def _names(target: Expression | None, variable: Var) -> bool:
    if isinstance(target, NameExpr):
        return target.node is variable
    if isinstance(target, TupleExpr | ListExpr):
        return any(_names(item, variable) for item in target.items)
    if isinstance(target, StarExpr):
        return _names(target.expr, variable)
    return False


def _targets(statements: Iterable[Statement]) -> Iterator[Expression | None]:
    """Every expression a statement binds, at any depth."""
    for statement in statements:
        if isinstance(statement, AssignmentStmt):
            yield from statement.lvalues
        elif isinstance(statement, OperatorAssignmentStmt):
            yield statement.lvalue
        elif isinstance(statement, DelStmt):
            yield statement.expr
        elif isinstance(statement, ForStmt):
            yield statement.index
        elif isinstance(statement, WithStmt):
            yield from statement.target
        elif isinstance(statement, TryStmt):
            yield from statement.vars
        elif isinstance(statement, MatchStmt):
            for pattern in statement.patterns:
                yield from _captures(pattern)
        yield from _targets(_blocks(statement))


def _blocks(statement: Statement) -> Iterator[Statement]:
    """The statements nested in ``statement``."""
    blocks: list[Block | None] = []
    if isinstance(statement, Block):
        yield from statement.body
        return
    if isinstance(statement, IfStmt):
        blocks = [*statement.body, statement.else_body]
    elif isinstance(statement, WhileStmt | ForStmt):
        blocks = [statement.body, statement.else_body]
    elif isinstance(statement, WithStmt):
        blocks = [statement.body]
    elif isinstance(statement, TryStmt):
        blocks = [
            statement.body,
            *statement.handlers,
            statement.else_body,
            statement.finally_body,
        ]
    elif isinstance(statement, MatchStmt):
        blocks = list(statement.bodies)
    elif isinstance(statement, FuncItem):
        blocks = [statement.body]
    elif isinstance(statement, Decorator):
        blocks = [statement.func.body]
    elif isinstance(statement, OverloadedFuncDef):
        yield from statement.items
        if statement.impl is not None:  # the implementation is checked code too
            yield statement.impl
        return
    elif isinstance(statement, ClassDef):
        blocks = [statement.defs]
    for block in blocks:
        if block is not None:
            yield from block.body


def _captures(pattern: Pattern | None) -> Iterator[Expression | None]:
    if isinstance(pattern, AsPattern):
        yield pattern.name
        yield from _captures(pattern.pattern)
    elif isinstance(pattern, OrPattern | SequencePattern):
        for item in pattern.patterns:
            yield from _captures(item)
    elif isinstance(pattern, StarredPattern):
        yield pattern.capture
    elif isinstance(pattern, MappingPattern):
        yield pattern.rest
        for value in pattern.values:
            yield from _captures(value)
    elif isinstance(pattern, ClassPattern):
        for item in [*pattern.positionals, *pattern.keyword_values]:
            yield from _captures(item)
