"""A function that trusts its ``LiteralString`` parameter is called by its name, never passed on.

The plugin lets a ``LiteralString`` (or ``TrustedText``) parameter hold text written
in code inside its function because it checks every call of that function by its
name (``_minting``): ``instruction()``, ``join()``'s separator, a helper of the
user's. mypy reads ``LiteralString`` as ``str``, so to mypy the function is a
``Callable[[str], R]``. Passed or kept as a value (``functools.partial(instruction,
text)``, ``map(instruction, texts)``, a callback, a decorator's argument, a dict of
handlers, a variable typed ``Callable[[str], R]``), it is called later where no
hook sees a call of it by name, with any ``str``; the run time cannot tell a plain
``str`` from a literal, and mints it.

Hooks (``veridic-literal``), outside the call hooks of ``_minting``:

- the first call hook run in a module walks the module's expressions for a
  reference to such a function (by name, ``module.name`` or ``Class.name``)
  anywhere but as the callee of a call or the owner of an attribute read
  (``instruction.__doc__``);
- every call hook looks at the types of its arguments for such a function that
  no name shows: a bound method (``obj.rule``), the function a decorator
  receives (even a decorator that keeps the signature may store the function
  and call it elsewhere).

- every call hook looks at the parameter each class argument fills: a class whose
  constructor trusts a parameter (``BootError``, ``ToolHints``) given where a
  ``Callable`` is expected (``map(BootError, reasons)``, ``functools.partial``, a
  callback) is called there later, unchecked; given where a class is taken
  (``isinstance``, ``except``, ``type[T]``, a ``TypeVar``), it is not.

The same walk reports a brand used as a value and a ``cast()`` to a brand
(``_forging``), and a ``Final`` constant rewritten through a module's namespace
(``_namespace``).

A module that makes no call at all (mypy runs no call hook in it) is walked at the
end of its check, from ``get_additional_indirect_deps``, when :func:`may_report`
finds something to look at: ``mint: Callable[[str], R] = instruction`` in a module of
declarations is refused like any other.

The same walk reports such a class kept as a ``Callable`` other than as an argument:
assigned to a variable declared ``Callable[...]`` or returned from a function declared
to return one (``make: Callable[[str], BootError] = BootError``).

Not seen: such a class in a display kept as ``Callable`` values (``{"boot": BootError}``
declared ``dict[str, Callable[[str], BootError]]``). An overloaded
function's parameters are not trusted in its body (``_code_text``), so passing it
on is fine.
"""

from __future__ import annotations

from typing import Final

from mypy.checker import TypeChecker
from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    CastExpr,
    Context,
    Decorator,
    Expression,
    FuncDef,
    MemberExpr,
    MypyFile,
    RefExpr,
    ReturnStmt,
    SymbolNode,
    TempNode,
    TypeInfo,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.server.subexpr import get_subexpressions
from mypy.types import CallableType, Overloaded, Type, UnionType, get_proper_type

from veridic.mypy import (
    _attribute_writes,
    _forging,
    _item_writes,
    _literal_data,
    _names,
    _namespace,
    _unchecked,
    errorcodes,
)
from veridic.mypy._rebinding import every_statement, own_statements
from veridic.mypy._signature import called_value, code_text_parameter, signature_of

_KEEPING_DECORATORS: Final = frozenset(
    {"contextlib.contextmanager", "contextlib.asynccontextmanager"}
)
"""Decorators whose result is called with the arguments of a call of the decorated
function's name (its parameters kept by a ``ParamSpec``), and that keep nothing else."""
_ADVICE: Final = (
    "call it by its name with text written in code (a lambda or a def around the call is "
    "checked like any call), or take a TrustedInstruction and mint the text where it is "
    "written"
)


def report_references(checker: TypeChecker) -> None:
    """Report every reference in ``checker``'s module to a function that trusts a parameter,
    other than a call of it or a read of one of its attributes.

    Once per module, from whichever call hook runs first in it, possibly while mypy tries
    a check it may discard: the reports are recorded outside that try.
    """
    from veridic.mypy import _notes

    tree = checker.tree
    if tree.is_stub:
        return
    expressions = [expr for statement in tree.defs for expr in get_subexpressions(statement)]
    kept = {id(expr.callee) for expr in expressions if isinstance(expr, CallExpr)}
    kept |= {id(expr.expr) for expr in expressions if isinstance(expr, MemberExpr)}
    _unchecked.note(tree, expressions, _named_function)
    _attribute_writes.note(tree, expressions)
    _item_writes.note(tree, expressions)
    with _notes.outside_speculation(checker.msg.errors):
        _forging.report_values(checker, expressions, kept)
        _forging.report_guards(checker)
        _namespace.report_writes(checker, expressions)
        _literal_data.report_escaping_casts(checker, expressions)
        _report_kept_classes(checker)
        for expr in expressions:
            if id(expr) in kept:
                continue
            found = _named_function(expr)
            if found is not None:
                _fail(checker, f"{found[0]} passed as a value", found[1], expr)


def _report_kept_classes(checker: TypeChecker) -> None:
    """Report a class whose constructor trusts a parameter kept as a ``Callable``: assigned
    to a variable declared ``Callable[...]`` (``make: Callable[[str], BootError] =
    BootError``) or returned from a function declared to return one. (An argument is
    judged by the parameter it fills, :func:`check_arguments`; a ``type[...]`` stays clean.)
    """
    for statement in every_statement(checker.tree.defs):
        if isinstance(statement, AssignmentStmt) and statement.type is not None:
            if _is_callable(statement.type):
                _check_kept_class(checker, statement.rvalue)
            continue
        function = statement.func if isinstance(statement, Decorator) else statement
        if (
            isinstance(function, FuncDef)
            and isinstance(function.type, CallableType)
            and _is_callable(function.type.ret_type)
        ):
            for inner in own_statements(function.body.body):
                if isinstance(inner, ReturnStmt) and inner.expr is not None:
                    _check_kept_class(checker, inner.expr)


def _is_callable(typ: Type) -> bool:
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return any(_is_callable(item) for item in proper.items)
    return isinstance(proper, CallableType | Overloaded) and not proper.is_type_obj()


def _check_kept_class(checker: TypeChecker, expr: Expression) -> None:
    node = expr.node if isinstance(expr, RefExpr) else None
    if not isinstance(node, TypeInfo):
        return
    signature = signature_of(node)
    formal = None if signature is None else code_text_parameter(signature)
    if formal is not None:
        _fail(checker, f"the class {node.name} kept as a Callable", formal, expr)


def _trusting_class(node: SymbolNode | None) -> bool:
    """Whether ``node`` is a class whose constructor trusts a parameter."""
    if not isinstance(node, TypeInfo):
        return False
    signature = signature_of(node)
    return signature is not None and code_text_parameter(signature) is not None


def may_report(tree: MypyFile) -> bool:
    """Whether :func:`report_references` could report something in ``tree``, read from its
    nodes alone: a reference to a function that trusts a parameter or to a brand, a
    ``cast()``, a module's ``__dict__``. A module that makes no call is walked only then."""
    if _names.in_package(tree.fullname):
        return False
    if next(_forging.guards(tree), None) is not None:
        return True
    for statement in tree.defs:
        for expr in get_subexpressions(statement):
            if isinstance(expr, CastExpr) or (
                isinstance(expr, MemberExpr) and expr.name == "__dict__"
            ):
                return True
            if isinstance(expr, RefExpr) and (
                _named_function(expr) is not None
                or _forging.brand_named(expr.node) is not None
                or _trusting_class(expr.node)
            ):
                return True
    return False


def check_arguments(
    callee: str, ctx: FunctionContext | MethodContext, checker: TypeChecker
) -> None:
    """Report an argument that is such a function and that no name shows (a bound method,
    what a decorator receives); a named one is reported by :func:`report_references`.
    A class whose constructor trusts a parameter is reported where the parameter it fills
    is a ``Callable`` (``map(BootError, reasons)``, ``functools.partial(ToolHints)``), not
    where it is taken as a class (``isinstance``, ``except``, ``type[T]``).

    ``callee`` is the full name of what is called: the standard library's context
    manager decorators call the function only with the arguments of a call of its name,
    which the plugin checks, and keep nothing else of it.
    """
    if callee in _KEEPING_DECORATORS:
        return
    if _attribute_writes.writes(callee, ctx):
        _attribute_writes.check(callee, ctx, checker)
    if callee in _namespace.ATTRIBUTE_WRITERS:
        _namespace.check_attribute_write(callee, ctx, checker)
        return
    if callee in _namespace.RUNNERS:
        _namespace.check_runner(callee, ctx, checker)
        return
    formals: list[Type | None] | None = None
    if _namespace.may_pass_namespace(ctx):
        formals = _formal_types(ctx, checker)
        _namespace.check_passed(callee, ctx, checker, formals)
    for position, (exprs, types) in enumerate(zip(ctx.args, ctx.arg_types, strict=True)):
        for expr, typ in zip(exprs, types, strict=True):
            if _named_function(expr) is not None:
                continue
            proper = get_proper_type(typ)
            if not isinstance(proper, CallableType):
                continue
            formal = code_text_parameter(proper)
            if formal is None:
                continue
            if proper.is_type_obj():
                if formals is None:
                    formals = _formal_types(ctx, checker)
                if not _takes_callable(formals[position] if position < len(formals) else None):
                    continue
                what = f"the class {proper.type_object().name}"
            else:
                what = _callable_display(proper)
            if isinstance(expr, TempNode):
                what = f"the decorated function {what}"
            _fail(checker, f"{what} passed as a value", formal, expr)


def _formal_types(ctx: FunctionContext | MethodContext, checker: TypeChecker) -> list[Type | None]:
    """The declared type of each parameter a call's arguments are grouped by (the overload
    item whose parameters match, for an overloaded callee), ``None`` where unknown."""
    unknown: list[Type | None] = [None] * len(ctx.args)
    call = ctx.context
    if not isinstance(call, CallExpr):
        return unknown
    typ = checker.lookup_type_or_none(call.callee)
    proper = None if typ is None else get_proper_type(typ)
    items = (
        [proper]
        if isinstance(proper, CallableType)
        else proper.items
        if isinstance(proper, Overloaded)
        else []
    )
    for item in items:
        if len(item.arg_types) == len(ctx.args) and item.arg_names == ctx.callee_arg_names:
            return list(item.arg_types)
    return unknown


def _takes_callable(formal: Type | None) -> bool:
    """Whether a parameter is typed as something to call (``Callable[...]``, or optional):
    a class given there is called later, where no hook checks the call."""
    proper = None if formal is None else get_proper_type(formal)
    if isinstance(proper, UnionType):
        return any(_takes_callable(item) for item in proper.items)
    return isinstance(proper, CallableType | Overloaded) and not proper.is_type_obj()


def check_call_through_value(ctx: FunctionContext | MethodContext, checker: TypeChecker) -> None:
    """A call that no name-based hook checks, of a value whose type still shows a trusting
    parameter (a function or bound method kept in a list, a dict or a variable): its
    arguments are checked as a call of the function by name would be.

    Only a function hook's own call: mypy runs the method hooks of what a call returns
    (``__aenter__`` of ``async with connect(...)``) with that call as their context.
    """
    call = ctx.context
    if isinstance(ctx, MethodContext) or not isinstance(call, CallExpr):
        return
    typ = checker.lookup_type_or_none(call.callee)
    proper = None if typ is None else get_proper_type(typ)
    if not isinstance(proper, CallableType) or proper.is_type_obj():
        return
    if len(proper.arg_types) != len(ctx.args):
        return  # not this call's signature
    callee = called_value(proper, _callable_display(proper))
    if callee is not None:
        from veridic.mypy import _minting

        _minting.check(ctx, callee, checker)


def _named_function(expr: Expression) -> tuple[str, str] | None:
    """``(display, parameter)`` when ``expr`` names a function that trusts a parameter."""
    if not isinstance(expr, RefExpr):
        return None
    node: SymbolNode | None = expr.node
    if node is None and isinstance(expr, MemberExpr):
        owner = expr.expr.node if isinstance(expr.expr, RefExpr) else None
        symbol = owner.get(expr.name) if isinstance(owner, TypeInfo) else None
        node = None if symbol is None else symbol.node
    if not isinstance(node, FuncDef | Decorator):
        return None
    signature = signature_of(node)
    formal = None if signature is None else code_text_parameter(signature)
    if formal is None:
        return None
    function = node.func if isinstance(node, Decorator) else node
    owner_name = function.info.name if function.info else None  # FakeInfo is falsy
    display = f"{owner_name}.{function.name}()" if owner_name else f"{function.name}()"
    return display, formal


def _callable_display(signature: CallableType) -> str:
    """``Persona.rule()`` from mypy's ``rule of Persona``; ``a function`` without a name."""
    if not signature.name:
        return "a function"
    name, _, owner = signature.name.partition(" of ")
    return f"{owner}.{name}()" if owner else f"{name}()"


def _fail(checker: TypeChecker, what: str, formal: str, context: Context) -> None:
    checker.fail(
        f"{what}: the plugin checks each call of it by name and trusts {formal} as text "
        "written in code, but through a value (functools.partial, map, a callback, a "
        "decorator, a variable typed Callable[[str], ...]) it is called unchecked and "
        f"{formal} got any str, which the run time mints; {_ADVICE}",
        context,
        code=errorcodes.LITERAL,
    )
