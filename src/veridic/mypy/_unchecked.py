"""A call of a function that trusts its parameter, in code mypy did not check.

mypy checks no code it reads as unreachable: after a call typed as never returning
(``sys.exit()``, but also ``(lambda x=text: x)()``, which mypy 2 types as ``Never``),
or under a platform or version check it reads as false. No hook of the plugin runs
there either, so ``instruction(reply)``
after such a call type-checked, and the run time, which cannot tell a plain ``str``
from a literal, minted the reply.

Hook (``veridic-literal``): the first call hook run in a module notes each call, by
name, of a function that trusts a parameter (``instruction()``, a ``LiteralString``
helper of the user's) whose arguments are not all string literals
(:func:`candidates`); at the end of the module's check, each of them that mypy
gave no type was not checked, and is reported.

Not seen: the body of a function without annotations when ``check_untyped_defs`` is
off (mypy's default, not ``--strict``'s): mypy checks it but drops every error there,
the plugin's too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from mypy.checker import TypeChecker
from mypy.nodes import CallExpr, Expression, MypyFile, NameExpr, StrExpr, Var

from veridic.mypy import errorcodes

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
        named = trusting(_bound(expr.callee, tree))
        if named is not None:
            found.append((expr, named[0]))
    if found:
        _PENDING[tree.fullname] = found


def _literal(arg: Expression, tree: MypyFile) -> bool:
    """A string literal, or a name of a ``Final`` constant bound to one."""
    if isinstance(arg, StrExpr):
        return True
    bound = _bound(arg, tree)
    node = bound.node if isinstance(bound, NameExpr) else None
    return isinstance(node, Var) and node.is_final and isinstance(node.final_value, str)


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
    for call, display in _PENDING.pop(checker.tree.fullname, []):
        if checker.lookup_type_or_none(call) is None:
            checker.fail(_message(display), call, code=errorcodes.LITERAL)


_WHY: Final = (
    "mypy reads this code as unreachable (after a call it types as never returning, such "
    "as sys.exit() or a lambda with a default called in place, or under a platform or "
    "version check it reads as false)"
)


def _message(display: str) -> str:
    return (
        f"{display} got arguments mypy did not check: {_WHY}, so nothing here was checked, "
        "while the run time mints whatever str this call gets; make the code reachable "
        "(warn_unreachable = True shows where mypy stops), or write the text in the call as "
        "a string literal"
    )
