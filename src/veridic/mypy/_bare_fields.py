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
(vouch for it with a ``TrustPolicy``) and pydantic stores what it returns: an
``Annotated[...]`` with metadata other than ``Field``, a constraint or a
``BeforeValidator`` (mypy keeps no metadata: the annotation is read again from the
source, :func:`_inert`), a field a ``field_validator`` (or the deprecated ``validator``)
of the class or a base names, other than one of ``mode="before"`` (its result is
validated as ``str`` again), or any field of a class with a ``model_validator`` that runs
after pydantic's own (it may set any field).

A generic model filled in with ``TrustedInstruction`` stores a plain ``str`` as well: a
subclass of ``Box[TrustedInstruction]`` or ``RootModel[TrustedInstruction]`` is refused
at the base expression that fills the field in (a class statement may span lines, and a
``type: ignore`` goes on the line of the error), and a call of the class filled in as
written (``Box[TrustedInstruction](...)``, an alias, ``.model_validate()``) at the call
(:func:`check_filled`, a function and method hook for generic models only).
``Box(item=...)`` is not filled in: pydantic validates ``item`` as ``Any`` and keeps the
minted value. Models in a ``.pyi`` stub are
read too (mypy reads the stub instead of the module): a stub need not list the validators
of the module's class, so the message says to list the one that mints the field.

Hook: none of its own. mypy's class hooks go to the first plugin that answers, and the
``pydantic.mypy`` plugin, listed before veridic's, answers for every model; so the
models of a module are read with the module-wide reports, at the module's first call
hook (outside any overload mypy is trying) or, in a module that makes no call or a
stub, at the end of its check (``get_additional_indirect_deps``).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type_bare
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    AssignmentStmt,
    Block,
    CallExpr,
    ClassDef,
    Context,
    Decorator,
    Expression,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    Statement,
    StrExpr,
    TypeAlias,
    TypeApplication,
    TypeInfo,
    Var,
)
from mypy.options import Options
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, Type, UnboundType, UnionType, get_proper_type
from mypy.typevars import fill_typevars

from veridic.mypy import _fields, _names, errorcodes

_ANNOTATED: Final = frozenset({"Annotated", "typing.Annotated", "typing_extensions.Annotated"})
"""``Annotated`` as written (``UnboundType`` names) and as resolved (full names)."""
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
    return any(_bare(model, tree) for model in _models(tree))


def report_module(checker: TypeChecker) -> None:
    """Refuse each field typed ``TrustedInstruction`` of the models the module defines.

    Run by the module's first call hook, which may run while mypy tries an overload's
    items (``field_validator`` is one) under watchers that throw errors away: the
    reports are recorded outside that try.
    """
    from veridic.mypy import _notes

    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    with _notes.outside_speculation(checker.msg.errors):
        for model in _models(tree):
            for where, name in _bare(model, tree):
                checker.fail(
                    f'pydantic {_noun(model)} "{model.name}" got field "{name}" typed '
                    f"TrustedInstruction{_filled_by(where, model, checker.options)}, {_WHY}"
                    f"{_IN_STUB if tree.is_stub else ''}",
                    where,
                    code=errorcodes.FORGE,
                )


_WHY: Final = (
    "which pydantic validates as str and stores as a plain str (a minted value too): mypy "
    "would call it trusted and the composer refuse it at run time; declare it "
    "InstructionField if the application reads it as instruction, UntrustedText or str if "
    "not, or use a TypedDict or a plain dataclass, which keep the values they are given"
)


_IN_STUB: Final = (
    "; in a stub, list the field_validator or model_validator that mints the field if the "
    "module's class has one (a stub need not list them, and mypy reads only the stub)"
)


def _filled_by(
    where: Expression | AssignmentStmt | ClassDef, model: ClassDef, options: Options
) -> str:
    if isinstance(where, AssignmentStmt):
        return ""
    base = _base_of(where, model.info)
    return "" if base is None else f" by its base {format_type_bare(base, options)}"


def _base_of(where: Expression | ClassDef, model: TypeInfo) -> Instance | None:
    """The base of ``model`` that the base expression ``where`` names."""
    named = _named_class(where)
    for base in model.bases:
        if base.args and (named is None or base.type.fullname == named):
            return base
    return None


def _named_class(expression: Expression | ClassDef) -> str | None:
    """The full name of the class a base expression names: ``Box[X]``, an alias of it."""
    if isinstance(expression, IndexExpr):
        expression = expression.base
    if isinstance(expression, RefExpr) and isinstance(expression.node, TypeAlias):
        target = get_proper_type(expression.node.target)
        return target.type.fullname if isinstance(target, Instance) else None
    return expression.fullname if isinstance(expression, RefExpr) else None


def _filled_base(model: ClassDef, name: str) -> Expression | ClassDef:
    """Where to report the inherited field ``name`` a generic base fills in: the base
    expression that fills it (``Box[TrustedInstruction]`` in a class statement over many
    lines, where a ``type: ignore`` goes), else the class."""
    for expression in model.base_type_exprs:
        named = _named_class(expression)
        for base in model.info.bases:
            if not base.args or base.type.fullname != named:
                continue
            if any(
                field == name and _fields.kind(typ) == "bare"
                for field, typ, _ in _fields.filled_fields(base)
            ):
                return expression
    return model


def check_filled(ctx: FunctionContext | MethodContext) -> None:
    """``Box[TrustedInstruction](...)``, ``PromptAlias(...)``, ``Box[...].model_validate()``:
    a generic model filled in with ``TrustedInstruction`` where pydantic validates it.

    Only a class filled in as written counts: ``Box(item=...)`` validates ``item`` as
    ``Any`` and keeps the minted value, though mypy infers ``Box[TrustedInstruction]``.
    """
    checker = ctx.api
    made = get_proper_type(ctx.default_return_type)
    if (
        isinstance(checker, TypeChecker)
        and not _names.in_package(checker.tree.fullname)
        and isinstance(made, Instance)
        and made.args
        and _written_filled(ctx.context)
    ):
        validated = _validated(made.type)
        for name, typ, _ in _fields.filled_fields(made):
            if validated & {_EVERY_FIELD, name} or _fields.kind(typ) != "bare":
                continue
            written = format_type_bare(made, checker.options)
            checker.fail(
                f'pydantic model "{made.type.name}" filled in as written ({written}) got field '
                f'"{name}" typed TrustedInstruction, {_WHY}',
                ctx.context,
                code=errorcodes.FORGE,
            )
            break


def _written_filled(context: Context) -> bool:
    """Whether a call's class is filled in as written: ``Box[X](...)``, an alias of
    ``Box[X]``, or either before ``.model_validate(...)``."""
    if not isinstance(context, CallExpr):
        return False
    callee = context.callee
    if isinstance(callee, MemberExpr):
        callee = callee.expr
    if isinstance(callee, IndexExpr):
        return isinstance(callee.analyzed, TypeApplication)
    return isinstance(callee, RefExpr) and isinstance(callee.node, TypeAlias)


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


def _bare(
    model: ClassDef, tree: MypyFile
) -> list[tuple[AssignmentStmt | Expression | ClassDef, str]]:
    """The field declarations of ``model`` typed ``TrustedInstruction`` (or a container of
    it) without ``InstructionField`` and without a validator of their own; then the fields
    it inherits from a generic model its bases fill in with ``TrustedInstruction``
    (``class Prompt(RootModel[TrustedInstruction])``), reported at the class."""
    found: list[tuple[AssignmentStmt | Expression | ClassDef, str]] = []
    validated = _validated(model.info)
    if _EVERY_FIELD in validated:
        return found
    declared: set[str] = set()
    for statement in model.defs.body:
        if not isinstance(statement, AssignmentStmt) or statement.unanalyzed_type is None:
            continue
        target = statement.lvalues[0]
        if not isinstance(target, NameExpr) or target.name.startswith("_"):
            continue
        declared.add(target.name)
        if target.name in validated:
            continue
        symbol = model.info.names.get(target.name)
        var = None if symbol is None else symbol.node
        if not isinstance(var, Var) or var.is_classvar or var.type is None:
            continue
        if _fields.kind(var.type) == "bare" and _inert(statement, tree):
            found.append((statement, target.name))
    itself = fill_typevars(model.info)
    if isinstance(itself, Instance) and any(base.args for base in model.info.bases):
        for name, typ, _ in _fields.filled_fields(itself):
            if name in declared or name in validated or _fields.kind(typ) != "bare":
                continue
            if not _declared_bare(model.info, name):
                found.append((_filled_base(model, name), name))
    return found


def _declared_bare(model: TypeInfo, name: str) -> bool:
    """Whether the base that declares the inherited field ``name`` types it
    ``TrustedInstruction`` itself: reported there, not again in each subclass. (The
    ``pydantic.mypy`` plugin copies inherited fields into the subclass: skipped.)"""
    for base in model.mro[1:]:
        symbol = base.names.get(name)
        node = None if symbol is None else symbol.node
        if isinstance(node, Var):
            return node.type is not None and _fields.kind(node.type) == "bare"
    return False


def _validated(model: TypeInfo) -> frozenset[str]:
    """The fields a validator of ``model`` or of a base may mint, ``"*"`` for all of them.

    A ``field_validator`` names its fields as literals (``"*"`` for all); one of
    ``mode="before"`` hands its result to pydantic's ``str`` validation, and mints
    nothing. A ``model_validator`` other than ``mode="before"`` may set any field.
    """
    names: set[str] = set()
    for info in model.mro:
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


def _inert(statement: AssignmentStmt, tree: MypyFile) -> bool:
    """Whether each ``Annotated`` in a field's annotation carries only metadata that
    validates nothing (``Field(description=...)``, a constraint, a ``BeforeValidator``,
    whose result pydantic validates as ``str`` again, a string): then the field stores a
    plain ``str`` as if it were written bare.

    mypy keeps no ``Annotated`` metadata (a call in it is parsed as an invalid type), so
    the annotation is read again from the module's source, and its names are resolved in
    the module's namespace. Anything not read for sure (no source, a name not found, a
    metadata item of another kind) may validate, and leaves the field alone.
    """
    if statement.unanalyzed_type is None or not _annotated(statement.unanalyzed_type):
        return True
    annotation = _annotation_source(statement, tree.path)
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if not isinstance(node, ast.Subscript) or _resolve(node.value, tree) not in _ANNOTATED:
            continue
        items = node.slice.elts[1:] if isinstance(node.slice, ast.Tuple) else []
        if not items or not all(_validates_nothing(item, tree) for item in items):
            return False
    return True


_INERT: Final = frozenset(
    {
        "pydantic.fields.Field",
        "pydantic.types.StringConstraints",
        "pydantic.types.Strict",
        "pydantic.functional_validators.BeforeValidator",
    }
)
"""What validates nothing a field stores: pydantic's ``Field`` and constraints (the
``annotated_types`` package's too), and a ``BeforeValidator``, whose result is
validated as the type under it. The run time reads the same (``veridic.templates``)."""


def _validates_nothing(item: ast.expr, tree: MypyFile) -> bool:
    if isinstance(item, ast.Constant):
        return True  # a docstring, a number: pydantic ignores what it does not know
    if not isinstance(item, ast.Call):
        return False
    name = _resolve(item.func, tree)
    return name is not None and (name in _INERT or name.startswith("annotated_types."))


def _annotation_source(statement: AssignmentStmt, path: str) -> ast.expr | None:
    """The annotation of ``statement`` (``name: annotation = ...``), parsed from the source."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None  # mypy -c, a file gone since: not read
    end = statement.end_line or statement.line
    text = textwrap.dedent("\n".join(lines[statement.line - 1 : end]))
    try:
        parsed = ast.parse(text)
    except SyntaxError:
        return None
    first = parsed.body[0] if parsed.body else None
    return first.annotation if isinstance(first, ast.AnnAssign) else None


def _resolve(expression: ast.expr, tree: MypyFile) -> str | None:
    """The full name a (dotted) name in ``tree``'s source refers to, through its imports."""
    parts: list[str] = []
    while isinstance(expression, ast.Attribute):
        parts.insert(0, expression.attr)
        expression = expression.value
    if not isinstance(expression, ast.Name):
        return None
    symbol = tree.names.get(expression.id)
    node = None if symbol is None else symbol.node
    for part in parts:
        if not isinstance(node, MypyFile):
            return None
        symbol = node.names.get(part)
        node = None if symbol is None else symbol.node
    return None if node is None else node.fullname
