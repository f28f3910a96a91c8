"""A pydantic model's field typed ``TrustedInstruction`` holds no trusted text (``veridic-forge``).

pydantic validates a ``NewType`` as the type under it: a ``TrustedInstruction`` field
stores a plain ``str``, even one given a minted value (``Config(prompt=instruction(
"..."))``), and the brand and its provenance are gone. mypy keeps the field's declared
type, so ``composer.system(config.prompt)`` type-checks, and the composer (or an
instruction template bound to the model) refuses it at run time: the two checks
disagree, and the error comes where the model is used, far from where it was declared.
So the declaration is refused, with what to write instead: ``InstructionField`` when
the application reads the field as instruction (its validator mints the text, with
the field's provenance), ``UntrustedText`` or ``str`` when it does not, or a
``TypedDict`` or dataclass, which keep the values they are given.

An annotation written with ``Annotated[...]`` is left alone: its validators (an
``AfterValidator`` that vouches for the text with a ``TrustPolicy``) may mint it, and
mypy keeps none of them to look at.

Hook: none of its own. mypy's class hooks go to the first plugin that answers, and the
``pydantic.mypy`` plugin, listed before veridic's, answers for every model; so the
models of a module are read with the module-wide reports, at the module's first call
hook or, in a module that makes no call, at the end of its check
(``get_additional_indirect_deps``).
"""

from __future__ import annotations

from typing import Final

from mypy.checker import TypeChecker
from mypy.nodes import (
    AssignmentStmt,
    Block,
    ClassDef,
    Decorator,
    MypyFile,
    NameExpr,
    Statement,
    Var,
)
from mypy.types import Type, UnboundType, UnionType

from veridic.mypy import _fields, _names, errorcodes

_ANNOTATED: Final = frozenset({"Annotated", "typing.Annotated", "typing_extensions.Annotated"})


def may_report(tree: MypyFile) -> bool:
    """Whether ``tree`` defines a pydantic model (outside veridic): read from its nodes."""
    return not _names.in_package(tree.fullname) and bool(_models(tree))


def report_module(checker: TypeChecker) -> None:
    """Refuse each field typed ``TrustedInstruction`` of the models the module defines."""
    if _names.in_package(checker.tree.fullname):
        return
    for model in _models(checker.tree):
        for statement, name in _bare(model):
            checker.fail(
                f'pydantic model "{model.name}" got field "{name}" typed '
                "TrustedInstruction, which pydantic validates as str and stores as a plain "
                "str (a minted value too): mypy would call it trusted and the composer refuse "
                "it at run time; declare it InstructionField if the application reads it as "
                "instruction, UntrustedText or str if not, or use a TypedDict or dataclass, "
                "which keep the values they are given",
                statement,
                code=errorcodes.FORGE,
            )


def _models(tree: MypyFile) -> list[ClassDef]:
    """The pydantic models a module defines, at any depth (in a class, a function, an
    ``if``): walked by hand, as the compiled mypy's visitors cannot be subclassed."""
    found: list[ClassDef] = []
    pending: list[Statement] = list(tree.defs)
    while pending:
        statement = pending.pop()
        if isinstance(statement, ClassDef) and _is_model(statement):
            found.append(statement)
        pending.extend(_inner(statement))
    return sorted(found, key=lambda model: model.line)


def _is_model(defn: ClassDef) -> bool:
    try:
        return defn.info.has_base(_names.BASE_MODEL)
    except AttributeError:  # a class mypy did not analyse (unreachable code): no MRO
        return False


def _inner(statement: Statement) -> list[Statement]:
    """The statements directly inside ``statement``'s blocks."""
    if isinstance(statement, Decorator):
        return list(statement.func.body.body)
    blocks: list[Block] = []
    for attribute in ("defs", "body", "else_body", "finally_body", "handlers"):
        value = getattr(statement, attribute, None)
        if isinstance(value, Block):
            blocks.append(value)
        elif isinstance(value, list):
            blocks.extend(item for item in value if isinstance(item, Block))
    return [inner for block in blocks for inner in block.body]


def _bare(model: ClassDef) -> list[tuple[AssignmentStmt, str]]:
    """The field declarations of ``model`` typed ``TrustedInstruction`` (or a container of
    it) without ``InstructionField`` and without ``Annotated``."""
    found: list[tuple[AssignmentStmt, str]] = []
    for statement in model.defs.body:
        if not isinstance(statement, AssignmentStmt) or statement.unanalyzed_type is None:
            continue
        target = statement.lvalues[0]
        if not isinstance(target, NameExpr) or target.name.startswith("_"):
            continue
        symbol = model.info.names.get(target.name)
        var = None if symbol is None else symbol.node
        if not isinstance(var, Var) or var.is_classvar or var.type is None:
            continue
        if not _annotated(statement.unanalyzed_type) and _fields.kind(var.type) == "bare":
            found.append((statement, target.name))
    return found


def _annotated(typ: Type) -> bool:
    """Whether an annotation as written uses ``Annotated`` anywhere in it."""
    if isinstance(typ, UnboundType):
        return typ.name in _ANNOTATED or any(_annotated(arg) for arg in typ.args)
    if isinstance(typ, UnionType):  # X | Y as written
        return any(_annotated(item) for item in typ.items)
    return False
