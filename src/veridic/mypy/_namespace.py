"""A module's ``Final`` text constants are not rewritten through its namespace.

The plugin reads a ``Final`` name bound to a literal (``TONE: Final = "Be brief."``)
as text written in code, wherever it is read: ``instruction(TONE)`` is accepted.
mypy refuses ``TONE = reply`` and ``prompts.TONE = reply``, but not a write through
the module's namespace, which mypy types as ``dict[str, Any]`` or ``object``:
``globals()["TONE"] = reply``, ``globals().update(...)``, ``vars(prompts)[...]``,
``prompts.__dict__[...]``, ``setattr(prompts, "TONE", reply)``. At run time the
name then holds the outside text, and ``instruction(TONE)`` mints it.

Hooks (``veridic-literal``), only for a module that holds such a constant (or one
the plugin cannot name):

- the first call hook run in a module walks its statements for an item assigned
  or deleted, and a mutating method (``update``, ``setdefault``, ``pop``, ...)
  called, on ``globals()``, ``vars()``, ``vars(module)`` or ``module.__dict__``;
- every call of ``setattr()`` or ``delattr()`` on a module: named by a literal that
  is one of its ``Final`` text constants, by text not known in the code, or on a
  module the plugin cannot name (``sys.modules[name]``).

Not seen: the namespace kept in a variable first (``ns = globals()``), and
``exec()`` (which runs any code).
"""

from __future__ import annotations

from typing import Final

from mypy.checker import TypeChecker
from mypy.nodes import (
    CallExpr,
    Context,
    Expression,
    IndexExpr,
    MemberExpr,
    MypyFile,
    RefExpr,
    StrExpr,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._rebinding import assigned

ATTRIBUTE_WRITERS: Final = frozenset({"builtins.setattr", "builtins.delattr"})
_MUTATORS: Final = frozenset(
    {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
)
_NAMESPACES: Final = frozenset({"builtins.globals", "builtins.vars"})
_MODULE_TYPE: Final = "types.ModuleType"
_UNKNOWN: Final = object()
"""A module object the plugin cannot name (``sys.modules[name]``)."""
_ADVICE: Final = (
    "a Final constant is read as text written in code wherever it is used, so keep it "
    "constant: hold text that changes in a variable (placed as data with Composer.data()), "
    "or mint it where it is written"
)


def report_writes(checker: TypeChecker, expressions: list[Expression]) -> None:
    """Report writes through a namespace of a module with ``Final`` text constants."""
    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    for target in assigned(tree.defs):
        if isinstance(target, IndexExpr):
            _check_namespace(checker, target.base, target, "an item assigned through")
    for expr in expressions:
        if isinstance(expr, MemberExpr) and expr.name in _MUTATORS:
            _check_namespace(checker, expr.expr, expr, f"{expr.name}() called on")


def check_attribute_write(
    callee: str, ctx: FunctionContext | MethodContext, checker: TypeChecker
) -> None:
    """Report ``setattr()``/``delattr()`` on a module that may rewrite a ``Final`` constant."""
    if len(ctx.args) < 2 or len(ctx.args[0]) != 1 or len(ctx.args[1]) != 1:
        return
    owner, name = ctx.args[0][0], ctx.args[1][0]
    module: MypyFile | object | None = _module(owner)
    if module is None:
        typ = get_proper_type(ctx.arg_types[0][0])
        if not isinstance(typ, Instance) or typ.type.fullname != _MODULE_TYPE:
            return  # not a module: no Final constant of a module lives there
        module = _UNKNOWN
    what = f"{callee.rpartition('.')[2]}()"
    constants = _constants(module)
    if isinstance(name, StrExpr):
        if constants is not None and name.value not in constants:
            return
        target = (
            f'the Final constant "{name.value}"'
            if constants is not None
            else f'"{name.value}", which may be a Final constant of it'
        )
    else:
        if constants == frozenset():
            return
        target = "an attribute named by text not known in the code"
    _fail(checker, f"{what} on {_display(module)} sets {target}", ctx.context)


def _check_namespace(checker: TypeChecker, base: Expression, context: Context, how: str) -> None:
    module = _namespace_of(base, checker.tree)
    if module is None:
        return
    constants = _constants(module)
    if constants == frozenset():
        return
    shown = (
        "" if constants is None else f" (its Final constants: {', '.join(sorted(constants)[:5])})"
    )
    _fail(checker, f"{how} the namespace of {_display(module)}{shown}", context)


def _namespace_of(expr: Expression, tree: MypyFile) -> MypyFile | object | None:
    """The module whose namespace ``expr`` is: ``globals()``, ``vars()`` or ``vars(module)``,
    ``module.__dict__``; ``None`` when it is none of them."""
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        if expr.callee.fullname not in _NAMESPACES:
            return None
        if not expr.args:
            return tree
        return _module(expr.args[0]) if len(expr.args) == 1 else None
    if isinstance(expr, MemberExpr) and expr.name == "__dict__":
        return _module(expr.expr)
    return None


def _module(expr: Expression) -> MypyFile | None:
    return expr.node if isinstance(expr, RefExpr) and isinstance(expr.node, MypyFile) else None


def _constants(module: MypyFile | object) -> frozenset[str] | None:
    """The names in ``module``'s namespace bound to a ``Final`` text constant (its own or
    imported: either is read as code text there); ``None`` when the module is unknown."""
    if not isinstance(module, MypyFile):
        return None
    return frozenset(
        name
        for name, symbol in module.names.items()
        if isinstance(symbol.node, Var)
        and symbol.node.is_final
        and isinstance(symbol.node.final_value, str)
    )


def _display(module: MypyFile | object) -> str:
    if isinstance(module, MypyFile):
        return f'module "{module.fullname}"'
    return "a module the plugin cannot name"


def _fail(checker: TypeChecker, what: str, context: Context) -> None:
    checker.fail(
        f"{what}: the plugin reads a Final name bound to a literal as text written in code "
        "(instruction(TONE) is accepted), but rewritten at run time the name got whatever was "
        f"written there, and instruction() mints it; {_ADVICE}",
        context,
        code=errorcodes.LITERAL,
    )
