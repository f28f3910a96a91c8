"""veridic's private minting names are veridic's alone (``veridic-forge``).

``veridic.text.provenance`` mints with ``mint``, ``mint_spans`` and ``joined`` (and
brands data with ``fenced_block``), and with the ``_Trusted`` class and its
``_KEY``; ``veridic.text.fields`` with ``_read_as_instruction`` and ``_MINT``. They
check nothing: they are how the checked doors (``instruction()``, an
``InstructionField``, ``join()``, a ``TrustPolicy``) make a trusted value.
Outside veridic, using one forges trust as surely as ``TrustedInstruction(x)``
does, and more quietly. The run time refuses a call of the four helpers from
outside veridic; the plugin refuses every use it can see, before the code runs.
The names are in ``_names`` (``MINTING_HELPERS``, and every ``_``-prefixed name
of ``MINTING_MODULES``).

Hooks, outside the ``veridic`` package:

- ``get_function_hook`` / ``get_method_hook`` for a call of such a name, however
  it was reached (``from veridic.text.provenance import mint``, ``import
  veridic.text.provenance as p; p.mint(...)``, an alias, the 0.1 path
  ``veridic.provenance``, ``p._Trusted.__new__``);
- ``get_function_hook`` for ``getattr(veridic.text.provenance, "mint")`` with a
  literal name (or a ``Final`` constant);
- the first call hook run in a module (any call: the plugin wraps them all while
  the module is a suspect) reads the module's imports: a ``from
  veridic.text.provenance import _KEY``, or ``veridic``, ``veridic.text.provenance`` or
  ``veridic.text.fields`` (or their 0.1 paths) imported as a module, makes it report
  the import and any reference (``p._Trusted`` used as a value) found in the module's
  expressions.
  Not ``get_additional_deps``: mypy skips it for a module whose cached metadata
  it reads, then checks that module again when a dependency changed, and the
  imports would go unreported (and be cached so).

A module that makes no call at all is read at the end of its check (``_escapes``).

Not seen: ``getattr`` with a computed name, ``vars(p)``, ``p.__dict__`` and
``importlib.import_module`` (their results are ``Any``, which ``veridic-any``
refuses in an instruction position).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy.checker import TypeChecker
from mypy.nodes import (
    CallExpr,
    Context,
    Import,
    ImportFrom,
    MemberExpr,
    MypyFile,
    RefExpr,
    StrExpr,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.server.subexpr import get_subexpressions
from mypy.types import Type

from veridic.mypy import _names, errorcodes

_ADVICE: Final = (
    "it mints without any check, so using it forges trust; mint trusted text "
    'with instruction("..."), read it from an InstructionField, join() trusted parts, or '
    'vouch for it with TrustPolicy("name").vouch(text, reason=...)'
)


def suspects(file: MypyFile) -> bool:
    """Whether ``file`` imports a private minting name, or a module that holds them."""
    if _names.in_package(file.fullname):
        return False
    for node in file.imports:
        if isinstance(node, ImportFrom) and node.relative == 0:
            if node.id in _names.MINTING_MODULES and any(
                _names.is_private_minting(f"{node.id}.{name}") for name, _ in node.names
            ):
                return True
            if _names.in_package(node.id) and any(
                f"{node.id}.{name}" in _names.MINTING_MODULES for name, _ in node.names
            ):
                return True
        elif isinstance(node, Import) and any(_names.in_package(module) for module, _ in node.ids):
            return True
    return False


def report_module(checker: TypeChecker) -> None:
    """Report every private minting name that ``checker``'s module imports or refers to.

    Once per module, from whichever call hook runs first in it, possibly while mypy
    tries a check it may discard: the reports are recorded outside that try.
    """
    from veridic.mypy import _notes

    tree = checker.tree
    with _notes.outside_speculation(checker.msg.errors):
        for node in tree.imports:
            if (
                isinstance(node, ImportFrom)
                and node.relative == 0
                and node.id in _names.MINTING_MODULES
            ):
                for name, _ in node.names:
                    fullname = f"{node.id}.{name}"
                    if _names.is_private_minting(fullname):
                        _fail(checker, fullname, "an import outside veridic", node)
        for expr in _references(tree):
            _fail(checker, expr.fullname, "a reference outside veridic", expr)


def _references(tree: MypyFile) -> Iterator[MemberExpr]:
    """Attribute references to private minting names (``p._Trusted``) other than calls.

    A call is reported by its own hook; a name imported with ``from`` is reported
    at the import.
    """
    expressions = [expr for statement in tree.defs for expr in get_subexpressions(statement)]
    called = {id(expr.callee) for expr in expressions if isinstance(expr, CallExpr)}
    for expr in expressions:
        if (
            isinstance(expr, MemberExpr)
            and id(expr) not in called
            and _names.is_private_minting(expr.fullname)
        ):
            yield expr


def check_call(fullname: str, ctx: FunctionContext | MethodContext) -> Type:
    """A call of a private minting name outside veridic."""
    checker = ctx.api
    if isinstance(checker, TypeChecker) and not _names.in_package(checker.tree.fullname):
        _fail(checker, fullname, "a call outside veridic", ctx.context)
    return ctx.default_return_type


def check_getattr(ctx: FunctionContext) -> Type:
    """``getattr(veridic.text.provenance, "mint")``: the same name, spelled as a string."""
    checker = ctx.api
    if (
        not isinstance(checker, TypeChecker)
        or _names.in_package(checker.tree.fullname)
        or len(ctx.args) < 2
        or len(ctx.args[0]) != 1
        or len(ctx.args[1]) != 1
    ):
        return ctx.default_return_type
    owner, name = ctx.args[0][0], _literal(ctx.args[1][0])
    if isinstance(owner, RefExpr) and isinstance(owner.node, MypyFile) and name is not None:
        fullname = f"{owner.node.fullname}.{name}"
        if _names.is_private_minting(fullname):
            _fail(checker, fullname, "getattr() outside veridic", ctx.context)
    return ctx.default_return_type


def _literal(expr: object) -> str | None:
    if isinstance(expr, StrExpr):
        return expr.value
    if isinstance(expr, RefExpr) and isinstance(expr.node, Var) and expr.node.is_final:
        value = expr.node.final_value
        return value if isinstance(value, str) else None
    return None


def _fail(checker: TypeChecker, fullname: str, how: str, context: Context) -> None:
    checker.fail(
        f"{how} got {fullname}, one of veridic's private minting names (not its API): {_ADVICE}",
        context,
        code=errorcodes.FORGE,
    )
