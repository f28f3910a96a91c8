"""A call of a function that trusts its parameter, in code mypy did not check.

mypy checks no code it reads as unreachable: after a call typed as never returning
(``sys.exit()``, but also ``(lambda x=text: x)()``, which mypy 2 types as ``Never``),
or under a platform or version check it reads as false. No hook of the plugin runs
there either, so ``instruction(reply)``
after such a call type-checked, and the run time, which cannot tell a plain ``str``
from a literal, minted the reply.

Hook (``veridic-literal``): the first call hook run in a module notes each call, by
name, of a function or class that trusts a parameter (``instruction()``, a
``LiteralString`` helper of the user's, ``Deny(reason=...)``, ``TrustPolicy(name)``)
whose arguments to that parameter are not all string literals (``join(parts)`` gives
``sep`` none, and the run time checks its parts); at the end of the module's check,
each of them that mypy gave no type was not checked, and is reported.

Not seen: a call mypy skipped inside a function over a constrained type variable
(``TypeVar("T", str, bytes)``), which mypy checks on copies that keep the types. Nor
the body of a function without annotations when ``check_untyped_defs`` is
off (mypy's default, not ``--strict``'s): mypy checks it but drops every error there,
the plugin's too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from mypy.argmap import map_actuals_to_formals
from mypy.checker import TypeChecker
from mypy.nodes import (
    ARG_STAR,
    ARG_STAR2,
    CallExpr,
    ConditionalExpr,
    Decorator,
    Expression,
    FuncDef,
    MypyFile,
    NameExpr,
    OpExpr,
    RefExpr,
    StrExpr,
    TypeInfo,
    Var,
)
from mypy.server.subexpr import get_subexpressions
from mypy.types import AnyType, CallableType, TypeOfAny, TypeVarType

from veridic.mypy import _names, errorcodes
from veridic.mypy._rebinding import every_statement
from veridic.mypy._signature import code_text_parameter, code_text_positions, signature_of

_PENDING: dict[str, list[tuple[CallExpr, str]]] = {}
"""Per module checked in this build: its calls of trusting functions, until its end."""


def forget() -> None:
    """Drop what one build learnt (``VeridicPlugin`` calls this for each new build)."""
    _PENDING.clear()


def note(
    tree: MypyFile,
    expressions: Iterable[Expression],
    trusting: Callable[[Expression], tuple[str, str] | None],
) -> None:
    """Keep the calls among ``expressions`` of a function ``trusting`` names, with an
    argument other than a string literal (or a ``Final`` constant bound to one)."""
    found = []
    for expr in expressions:
        if not isinstance(expr, CallExpr):
            continue
        if all(_literal(arg, tree) for arg in expr.args):
            continue
        callee = _bound(expr.callee, tree)
        named = trusting(callee) or _trusting_class(callee)
        if named is not None and not all(_literal(arg, tree) for arg in _trusted(expr, callee)):
            found.append((expr, named[0]))
    if found:
        _PENDING[tree.fullname] = found


def _trusting_class(callee: Expression) -> tuple[str, str] | None:
    """``(display, parameter)`` when ``callee`` names a class whose constructor trusts a
    parameter (``Deny(reason=...)``, ``TrustPolicy(name)``)."""
    node = callee.node if isinstance(callee, RefExpr) else None
    signature = signature_of(node) if isinstance(node, TypeInfo) else None
    formal = None if signature is None else code_text_parameter(signature)
    return None if formal is None or node is None else (f"{node.name}()", formal)


def _trusted(call: CallExpr, callee: Expression) -> list[Expression]:
    """The arguments of ``call`` that reach a parameter its function (or its class's
    constructor) trusts: ``join()``'s ``sep``, not its parts, which the run time checks;
    all of them where that is not known (a method, an argument unpacked with ``*``)."""
    node = callee.node if isinstance(callee, RefExpr) else None
    function = node.func if isinstance(node, Decorator) else node
    signature = None if node is None else signature_of(node)
    if isinstance(node, TypeInfo) and node.typeddict_type is not None:
        return call.args  # a TypedDict's keys: no self to bind
    if signature is not None and isinstance(node, TypeInfo) and signature.arg_types:
        signature = signature.copy_modified(  # the constructor's self, bound by the call
            arg_types=signature.arg_types[1:],
            arg_kinds=signature.arg_kinds[1:],
            arg_names=signature.arg_names[1:],
        )
    elif not isinstance(function, FuncDef) or function.info:
        return call.args  # a method: its signature starts with the bound self or cls
    if signature is None:
        return call.args
    if any(kind in (ARG_STAR, ARG_STAR2) for kind in call.arg_kinds):
        return call.args
    formals = map_actuals_to_formals(
        call.arg_kinds,
        call.arg_names,
        signature.arg_kinds,
        signature.arg_names,
        lambda _position: AnyType(TypeOfAny.special_form),
    )
    return [
        call.args[actual]
        for position in code_text_positions(signature)
        for actual in formals[position]
    ]


def _literal(arg: Expression, tree: MypyFile) -> bool:
    """A string literal, a name of a ``Final`` constant bound to one, or literals joined
    with ``+`` or chosen with ``if``/``else``: what ``instruction()`` accepts where mypy
    checks it. Not an f-string with values, even of constants (mypy reads it as
    ``str.format()``, which ``instruction()`` refuses): accepted here, the same line would
    fail the check once the platform or version mypy checks for changes."""
    if isinstance(arg, StrExpr):
        return True
    if isinstance(arg, OpExpr) and arg.op == "+":
        return _literal(arg.left, tree) and _literal(arg.right, tree)
    if isinstance(arg, ConditionalExpr):
        return _literal(arg.if_expr, tree) and _literal(arg.else_expr, tree)
    if isinstance(arg, CallExpr) and _mints(_bound(arg.callee, tree)):
        return all(_literal(part, tree) for part in arg.args)  # instruction("...")
    bound = _bound(arg, tree)
    node = bound.node if isinstance(bound, NameExpr) else None
    return isinstance(node, Var) and node.is_final and isinstance(node.final_value, str)


def _mints(callee: Expression) -> bool:
    """Whether ``callee`` is ``instruction()`` (whose result from a literal is code text)."""
    if not isinstance(callee, RefExpr):
        return False
    node = callee.node
    return callee.fullname == _names.INSTRUCTION or (
        isinstance(node, FuncDef | Decorator) and node.fullname == _names.INSTRUCTION
    )


def _bound(callee: Expression, tree: MypyFile) -> Expression:
    """``callee``, or, for a name mypy did not bind (in a block it skipped as unreachable
    while it analysed the module: a platform check), the module's name of that spelling."""
    if not isinstance(callee, NameExpr) or callee.node is not None:
        return callee
    symbol = tree.names.get(callee.name)
    if symbol is None or symbol.node is None:
        return callee
    bound = NameExpr(callee.name)
    bound.node = symbol.node
    return bound


def report(checker: TypeChecker) -> None:
    """Report each noted call of ``checker``'s module that mypy did not check."""
    pending = _PENDING.pop(checker.tree.fullname, [])
    untyped = [
        (call, shown) for call, shown in pending if checker.lookup_type_or_none(call) is None
    ]
    copied = _copied(checker.tree) if untyped else set()
    for call, display in untyped:
        if id(call) not in copied:
            checker.fail(_message(display), call, code=errorcodes.LITERAL)


def _copied(tree: MypyFile) -> set[int]:
    """The expressions of the functions mypy checks on copies, not on themselves: one
    copy per value of a constrained type variable (``TypeVar("T", str, bytes)``) of the
    function or of its class, whose types stay with the copies (``expand_typevars``)."""
    found: set[int] = set()
    for statement in every_statement(tree.defs):
        function = statement.func if isinstance(statement, Decorator) else statement
        if not isinstance(function, FuncDef) or not isinstance(function.type, CallableType):
            continue
        variables = [*function.type.variables]
        if function.info:
            variables += function.info.defn.type_vars
        if any(isinstance(variable, TypeVarType) and variable.values for variable in variables):
            found.update(id(expr) for expr in get_subexpressions(function))
    return found


_WHY: Final = (
    "mypy reads this code as unreachable (after a call it types as never returning, such "
    "as sys.exit() or a lambda with a default called in place, or under a platform or "
    "version check it reads as false)"
)


def _message(display: str) -> str:
    return (
        f"{display} got arguments mypy did not check: {_WHY}, so nothing here was checked, "
        "while the run time takes whatever str this call gets as text written in code (it "
        "cannot tell a str from a literal); make the code reachable (warn_unreachable = True "
        "shows where mypy stops), or write the text in the call as a string literal; a "
        "branch for another Python version or platform is checked only by a mypy run with "
        "that --python-version or --platform"
    )
