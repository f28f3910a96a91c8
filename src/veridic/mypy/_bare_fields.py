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

A pydantic dataclass validates its fields as a model does, and is read the same way.
A field with a validator of its own is left alone, as that validator may mint the text
(vouch for it with a ``TrustPolicy``) and pydantic stores what it returns: an annotation
written with ``Annotated[...]`` (mypy keeps none of its validators to look at), a field a
``field_validator`` (or the deprecated ``validator``) of the class or a base names, other
than one of ``mode="before"`` (its result is validated as ``str`` again), or any field of
a class with a ``model_validator`` that runs after pydantic's own (it may set any field).

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
    ARG_NAMED,
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    MypyFile,
    NameExpr,
    RefExpr,
    Statement,
    StrExpr,
    Var,
)
from mypy.types import Type, UnboundType, UnionType

from veridic.mypy import _fields, _names, errorcodes

_ANNOTATED: Final = frozenset({"Annotated", "typing.Annotated", "typing_extensions.Annotated"})
_DATACLASS: Final = "pydantic.dataclasses.dataclass"
_FIELD_VALIDATORS: Final = frozenset(
    {
        "pydantic.functional_validators.field_validator",
        "pydantic.deprecated.class_validators.validator",
    }
)
_MODEL_VALIDATOR: Final = "pydantic.functional_validators.model_validator"
_EVERY_FIELD: Final = "*"
_NO_VALIDATORS: Final = frozenset({"builtins", "pydantic"})


def may_report(tree: MypyFile) -> bool:
    """Whether ``tree`` (outside veridic) has a field to report: read from its nodes.

    Exact, not "defines a model": a module that makes no call is reported only after a
    search of the heap for its checker, which a module of models with nothing to report
    (most ``models.py`` and ``schemas.py``) must not cost.
    """
    if _names.in_package(tree.fullname):
        return False
    return any(_bare(model) for model in _models(tree))


def report_module(checker: TypeChecker) -> None:
    """Refuse each field typed ``TrustedInstruction`` of the models the module defines."""
    if _names.in_package(checker.tree.fullname):
        return
    for model in _models(checker.tree):
        for statement, name in _bare(model):
            checker.fail(
                f'pydantic {_noun(model)} "{model.name}" got field "{name}" typed '
                "TrustedInstruction, which pydantic validates as str and stores as a plain "
                "str (a minted value too): mypy would call it trusted and the composer refuse "
                "it at run time; declare it InstructionField if the application reads it as "
                "instruction, UntrustedText or str if not, or use a TypedDict or a plain "
                "dataclass, which keep the values they are given",
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
    """Whether pydantic validates ``defn``'s fields: a model, or a pydantic dataclass."""
    if _pydantic_dataclass(defn):
        return True
    try:
        return defn.info.has_base(_names.BASE_MODEL)
    except AttributeError:  # a class mypy did not analyse (unreachable code): no MRO
        return False


def _pydantic_dataclass(defn: ClassDef) -> bool:
    return any(_callee(decorator) == _DATACLASS for decorator in defn.decorators)


def _noun(defn: ClassDef) -> str:
    return "dataclass" if _pydantic_dataclass(defn) else "model"


def _callee(expression: Expression) -> str | None:
    """The full name a decorator calls or is: ``@x`` and ``@x(...)`` both give ``x``'s."""
    if isinstance(expression, CallExpr):
        expression = expression.callee
    return expression.fullname if isinstance(expression, RefExpr) else None


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
    validated = _validated(model)
    if _EVERY_FIELD in validated:
        return found
    for statement in model.defs.body:
        if not isinstance(statement, AssignmentStmt) or statement.unanalyzed_type is None:
            continue
        target = statement.lvalues[0]
        if not isinstance(target, NameExpr) or target.name.startswith("_"):
            continue
        if target.name in validated:
            continue
        symbol = model.info.names.get(target.name)
        var = None if symbol is None else symbol.node
        if not isinstance(var, Var) or var.is_classvar or var.type is None:
            continue
        if not _annotated(statement.unanalyzed_type) and _fields.kind(var.type) == "bare":
            found.append((statement, target.name))
    return found


def _validated(model: ClassDef) -> frozenset[str]:
    """The fields a validator of ``model`` or of a base may mint, ``"*"`` for all of them.

    A ``field_validator`` names its fields as literals (``"*"`` for all); one of
    ``mode="before"`` hands its result to pydantic's ``str`` validation, and mints
    nothing. A ``model_validator`` other than ``mode="before"`` may set any field.
    """
    names: set[str] = set()
    for info in model.info.mro:
        if info.module_name in _NO_VALIDATORS or info.module_name.startswith("pydantic."):
            continue  # pydantic's own bases and object: no validator of a user's field
        for statement in info.defn.defs.body:
            if not isinstance(statement, Decorator):
                continue
            for decorator in statement.original_decorators:
                if not isinstance(decorator, CallExpr) or _mode(decorator) == "before":
                    continue
                callee = _callee(decorator)
                if callee == _MODEL_VALIDATOR:
                    return frozenset({_EVERY_FIELD})
                if callee in _FIELD_VALIDATORS:
                    for kind, arg in zip(decorator.arg_kinds, decorator.args, strict=True):
                        if kind == ARG_NAMED:
                            continue  # mode=..., check_fields=...
                        if kind != ARG_POS or not isinstance(arg, StrExpr):
                            return frozenset({_EVERY_FIELD})  # names mypy cannot read
                        names.add(arg.value)
    return frozenset(names)


def _mode(call: CallExpr) -> str | None:
    for name, value in zip(call.arg_names, call.args, strict=True):
        if name == "mode" and isinstance(value, StrExpr):
            return value.value
    return None


def _annotated(typ: Type) -> bool:
    """Whether an annotation as written uses ``Annotated`` anywhere in it."""
    if isinstance(typ, UnboundType):
        return typ.name in _ANNOTATED or any(_annotated(arg) for arg in typ.args)
    if isinstance(typ, UnionType):  # X | Y as written
        return any(_annotated(item) for item in typ.items)
    return False
