"""Did a ``Literal``-typed value come from ``Any``?

The plugin reads a value typed ``Literal["short", "long"]`` as text written in
code: its possible values are written in the type. That holds only if the value
was checked into the type. ``Any`` is compatible with every type, so mypy lets
``json.loads(raw)`` fill a ``Literal``-typed dataclass field, ``TypedDict`` item
or variable silently, and the "literal" is then whatever the outside sent.

Two checks close the roads the plugin can see:

- at a call (``_any_guard``): ``Any`` for a parameter typed ``Literal[...]``
  (``Config(**data)``, ``Config(mode=data["mode"])``, a ``NamedTuple``, any
  function) is ``veridic-any``;
- where such a value reaches an instruction position (this module): a value whose
  root is a variable of the enclosing function or module (``settings["mode"]``,
  ``config.mode``, ``mode``) is not code when the variable takes a value that
  contains ``Any`` or is a ``cast()`` (``settings: Settings = json.loads(raw)``),
  or a display or class call with such a part (``Settings(mode=loose)``: mypy
  checks a ``TypedDict`` call with its errors hidden, so the call hook cannot
  report it), directly or through another such variable.

A ``Literal`` value is also read as code where a call returns it (``instruction(
to_mode(raw))``, ``pick(to_mode(raw))``) and where another module reads it
(``instruction(settings.MODE)``, ``instruction(config.mode)``), so a ``cast()`` to a
type holding a ``Literal`` that leaves the code it is written in is reported where it
is written (:func:`report_escaping_casts`, from the module walk of ``_escapes``):
returned from a function declared to return one (``return cast(Mode, raw)``), or
yielded by a generator declared to yield one, directly, through a variable of the
function or a conditional, in a decorated function or a property too, or the body of
a ``lambda``; or stored in a module's or a class's variable or in an attribute
(``MODE: Mode = cast(Mode, os.environ["MODE"])``, ``self.mode = cast(Mode, raw)``).

Not seen: ``Any`` (rather than a cast) stored into an attribute (``config.mode =
loose``), or into a variable of another function or module that is then passed on,
or returned through a variable that took ``Any`` (``mode: Mode = data; return
mode``); mypy gives a plugin no hook on assignments. ``--disallow-any-expr`` reports
those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    CastExpr,
    ClassDef,
    ConditionalExpr,
    Decorator,
    DictExpr,
    Expression,
    FuncDef,
    FuncItem,
    IndexExpr,
    LambdaExpr,
    ListExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    ReturnStmt,
    SetExpr,
    Statement,
    TupleExpr,
    TypeInfo,
    Var,
    YieldExpr,
)
from mypy.server.subexpr import get_subexpressions
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names
from veridic.mypy._rebinding import (
    being_checked,
    bound_in_a_function,
    every_statement,
    imports_name,
    own_statements,
    sources,
)

_DEPTH: Final = 4
"""How many variables deep to follow a value, and how deep to look into a type."""


def any_source(expr: Expression, checker: TypeChecker, depth: int = _DEPTH) -> str | None:
    """What filled the ``Literal``-typed ``expr`` from ``Any``, for a message; else ``None``."""
    root = expr
    while isinstance(root, MemberExpr | IndexExpr):
        root = root.expr if isinstance(root, MemberExpr) else root.base
    if not isinstance(root, NameExpr) or not isinstance(root.node, Var) or depth == 0:
        return None
    body = _scope_of(root.node, checker)
    for source in [] if body is None else sources(body, root.node):
        if isinstance(source, CallExpr) and isinstance(source.analyzed, CastExpr):
            return f'a cast() assigned to "{root.name}"'
        typ = checker.lookup_type_or_none(source)
        if typ is not None and _contains_any(typ, _DEPTH):
            return f'a value of type "Any" assigned to "{root.name}"'
        if any(_contains_any(t, _DEPTH) for t in _built_from(source, checker)):
            return f'a value of type "Any" built into "{root.name}"'
        further = any_source(source, checker, depth - 1)
        if further is not None:
            return further
    return None


def report_escaping_casts(checker: TypeChecker, expressions: list[Expression]) -> None:
    """Report a ``cast()`` to a ``Literal`` type that leaves the code it is written in: a
    function returns or yields it as one, or it is stored where other code reads it (a
    module's or a class's variable, an attribute).

    Run by the walk of a whole module (``expressions`` are the module's), outside veridic.
    """
    from veridic.mypy import errorcodes

    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    found: list[tuple[CastExpr, str]] = []
    for statement in every_statement(tree.defs):
        if isinstance(statement, AssignmentStmt):
            found.extend(_stored(statement))
        function = statement.func if isinstance(statement, Decorator) else statement
        if not isinstance(function, FuncDef) or not isinstance(function.type, CallableType):
            continue
        if not holds_text_literal(function.type.ret_type, _DEPTH):
            continue
        body = function.body.body
        for given, how in _given_out(body):
            found.extend((cast, f"{how} {function.name}()") for cast in _casts(given, body))
    for expr in expressions:
        if isinstance(expr, LambdaExpr):
            found.extend((cast, "returned from a lambda") for cast in _casts(expr.expr(), []))
    for cast, where in found:
        checker.fail(
            f"a cast() to {format_type(cast.type, checker.options)} {where}: other code "
            "reads a Literal value as text written in code (instruction(f(raw)) and "
            "instruction(settings.MODE) are accepted, and so is a Literal parameter filled by "
            "it), but a cast changes what mypy believes, not the value, so that code got "
            f"whatever text was cast, and instruction() mints it; {_RETURN_ADVICE}",
            cast,
            code=errorcodes.LITERAL,
        )


def _stored(statement: AssignmentStmt) -> Iterator[tuple[CastExpr, str]]:
    """The casts to a ``Literal`` type an assignment stores where other code reads them: an
    attribute (``self.mode = ...``), a module's or a class's variable (a function's own
    variable is followed where it is returned, and where it is used)."""
    casts = list(_casts(statement.rvalue, []))
    if not casts:
        return
    for lvalue in statement.lvalues:
        if isinstance(lvalue, MemberExpr):
            where = f'stored in the attribute "{lvalue.name}"'
        elif isinstance(lvalue, NameExpr) and isinstance(lvalue.node, Var):
            if lvalue.node.fullname == lvalue.node.name:
                continue  # a function's variable
            where = f'stored in "{lvalue.node.fullname}"'
        else:
            continue
        for cast in casts:
            yield cast, where
        return


_RETURN_ADVICE: Final = (
    'return the literal itself (if raw == "short": return "short"), use a mapping written in '
    'code ({"short": "short"}[raw]), or validate the text (pydantic\'s '
    "TypeAdapter(Mode).validate_python)"
)


def _given_out(body: list[Statement]) -> Iterator[tuple[Expression, str]]:
    """What a function's ``body`` returns or yields (not its nested functions'), and how."""
    for statement in own_statements(body):
        if isinstance(statement, ReturnStmt) and statement.expr is not None:
            yield statement.expr, "returned from"
        if isinstance(statement, FuncItem | Decorator | ClassDef):
            continue
        for expr in get_subexpressions(statement):
            if isinstance(expr, YieldExpr) and expr.expr is not None:
                yield expr.expr, "yielded by"


def _casts(expr: Expression, body: list[Statement], depth: int = _DEPTH) -> Iterator[CastExpr]:
    """The ``cast()`` calls to a ``Literal`` type that ``expr`` returns: itself, a branch of a
    conditional, or what a variable of ``body`` took."""
    if isinstance(expr, CallExpr) and isinstance(expr.analyzed, CastExpr):
        expr = expr.analyzed
    if isinstance(expr, CastExpr):
        if holds_text_literal(expr.type, _DEPTH):
            yield expr
    elif isinstance(expr, ConditionalExpr):
        yield from _casts(expr.if_expr, body, depth)
        yield from _casts(expr.else_expr, body, depth)
    elif isinstance(expr, NameExpr) and isinstance(expr.node, Var) and depth > 0:
        for source in sources(body, expr.node):
            yield from _casts(source, body, depth - 1)


def holds_text_literal(typ: Type, depth: int) -> bool:
    """Whether ``typ`` holds a ``Literal`` of text anywhere a value can be read from it."""
    return _holds(typ, depth, _text_literal)


def _text_literal(proper: ProperType) -> bool:
    return (
        isinstance(proper, LiteralType)
        and isinstance(proper.value, str)
        and proper.fallback.type.fullname == "builtins.str"
    )


def _holds(typ: Type, depth: int, leaf: Callable[[ProperType], bool]) -> bool:
    """Whether ``typ`` is, or holds ``depth`` levels down, a type ``leaf`` accepts: the
    members of a union or tuple, the items of a ``TypedDict``, the arguments of a class."""
    proper = get_proper_type(typ)
    if leaf(proper):
        return True
    if depth == 0:
        return False
    if isinstance(proper, UnionType | TupleType):
        parts: Iterable[Type] = proper.items
    elif isinstance(proper, TypedDictType):
        parts = proper.items.values()
    elif isinstance(proper, Instance):
        parts = proper.args
    else:
        return False
    return any(_holds(part, depth - 1, leaf) for part in parts)


def declared_source(expr: NameExpr, variable: Var, checker: TypeChecker) -> str | None:
    """For a variable declared ``Literal[...]``: what else than code may have filled it.

    ``Any`` (as :func:`any_source`), and the bindings mypy's narrowing does not see:
    an import of the same name, and an assignment in a nested function (``nonlocal``)
    or, for a module's variable, in any of its functions (``global``).
    """
    body = _scope_of(variable, checker)
    if body is not None:
        if imports_name(body, variable):
            return f'an import that binds "{expr.name}" again'
        if bound_in_a_function(body, variable):
            return f'an assignment to "{expr.name}" in another function'
    return any_source(expr, checker)


def _built_from(source: Expression, checker: TypeChecker) -> Iterator[Type]:
    """The types of what a display or a class call puts in the value it builds.

    mypy checks a ``TypedDict`` call with its errors hidden from plugins, and a
    display assigned to a declared type takes that type: the parts tell.
    """
    parts: list[Expression] = []
    if isinstance(source, DictExpr):
        parts = [value for _, value in source.items]
    elif isinstance(source, ListExpr | TupleExpr | SetExpr):
        parts = list(source.items)
    elif (
        isinstance(source, CallExpr)
        and isinstance(source.callee, RefExpr)
        and isinstance(source.callee.node, TypeInfo)
    ):
        parts = list(source.args)
    for part in parts:
        typ = checker.lookup_type_or_none(part)
        if typ is not None:
            yield typ


def _scope_of(variable: Var, checker: TypeChecker) -> list[Statement] | None:
    """The body of the innermost enclosing function that binds ``variable``, or the module's."""
    for scope in reversed(checker.scope.stack):
        if not isinstance(scope, FuncItem):
            continue
        body = being_checked(scope).body.body
        if any(True for _ in sources(body, variable)):
            return body
    return checker.tree.defs


def _contains_any(typ: Type, depth: int) -> bool:
    return _holds(typ, depth, _any)


def _any(proper: ProperType) -> bool:
    return isinstance(proper, AnyType) and proper.type_of_any != TypeOfAny.from_error
