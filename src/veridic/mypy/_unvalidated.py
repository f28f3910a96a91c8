"""A pydantic model's ``Literal`` field is filled without validation only by code text.

The plugin reads a value typed ``Literal["short", "long"]`` as text written in code
(``_code_text``): a model's field so typed (``style.mode``) is accepted by
``instruction()`` and by a ``Literal`` parameter, since pydantic validates it. Two of
``BaseModel``'s methods skip validation: ``Style.model_construct(mode=reply)`` and
``style.model_copy(update={"mode": reply})`` store ``reply`` as it is, and mypy takes
any value there (``**values: Any``, ``update: Mapping[str, Any]``). The field then
holds outside text, and ``instruction(style.mode)`` mints it.

Hook (``veridic-literal``): ``get_method_hook`` for ``model_construct`` and
``model_copy`` of a model with a field typed a text ``Literal`` (or a union of them;
one nested in a container is not followed: see :func:`_typed_text_literal`). A value
given for such a field must be text written in code (a literal, a ``Literal``
parameter, ...); a mapping the plugin cannot read key by key (``**data``, ``update=
changes``) must not reach such a field either, so it is refused. Validate instead:
``Style(mode=reply)``, ``Style.model_validate(data)``, ``style.model_copy()`` of a
validated model.

The same hook refuses (``veridic-forge``) a value of ``model_copy(update=...)`` for a
field that holds trusted text (an ``InstructionField``) other than a minted
``TrustedInstruction``: nothing validates it, so nothing mints it, and the copy's field
holds a plain ``str`` that mypy reads as trusted. ``UntrustedText`` there is
``veridic-launder``'s (``_fields``).
"""

from __future__ import annotations

from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    ARG_NAMED,
    ARG_STAR2,
    CallExpr,
    Context,
    DictExpr,
    Expression,
    RefExpr,
    StrExpr,
    TypeInfo,
)
from mypy.plugin import MethodContext
from mypy.subtypes import is_subtype
from mypy.types import (
    CallableType,
    Instance,
    Type,
    TypedDictType,
    TypeType,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted, may_be_text
from veridic.mypy._any_guard import is_any
from veridic.mypy._code_text import Written, classify, describe
from veridic.mypy._fields import model_fields
from veridic.mypy._literal_data import holds_text_literal

_ADVICE: Final = (
    "it skips validation, so the field holds whatever was given, and the plugin reads a "
    "Literal field as text written in code (instruction() mints it); validate instead "
    "(Model(field=value), Model.model_validate(data)), or give text written in code"
)


def literal_fields(info: TypeInfo) -> frozenset[str]:
    """The fields of pydantic model ``info`` whose type holds a text ``Literal``."""
    found: set[str] = set()
    for name, declared in model_fields(info):
        if declared is not None and _typed_text_literal(declared):
            found.add(name)
        else:
            found.discard(name)
    return frozenset(found)


def _typed_text_literal(typ: Type) -> bool:
    """Whether a field is typed a text ``Literal``, or a union of them (``Optional`` too).

    A ``Literal`` nested in a container or a ``TypedDict`` is not followed: copying
    LangChain's ``AIMessage`` with ``model_copy(update={"tool_calls": calls})`` (its
    calls are ``TypedDict`` with a ``Literal`` ``type``) is everyday code, while reading
    a text from deep inside such a field into ``instruction()`` is not.
    """
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return any(_typed_text_literal(item) for item in proper.items)
    return holds_text_literal(proper, 0)


def check(method: str, ctx: MethodContext) -> Type:
    """Report a value for a ``Literal`` field that ``model_construct``/``model_copy`` stores
    unvalidated, unless it is text written in code."""
    checker = ctx.api
    info = _model(ctx.type)
    if not isinstance(checker, TypeChecker) or info is None:
        return ctx.default_return_type
    where = f"{info.name}.{method}()"
    if method == "model_copy":
        _check_trusted_update(checker, where, info, ctx)
    fields = literal_fields(info)
    if not fields:
        return ctx.default_return_type
    for names, exprs, kinds in zip(ctx.arg_names, ctx.args, ctx.arg_kinds, strict=True):
        for name, expr, kind in zip(names, exprs, kinds, strict=True):
            if method == "model_construct" and kind == ARG_STAR2:
                _check_mapping(checker, where, expr, fields)
            elif method == "model_construct" and name in fields:
                _check_value(checker, where, name, expr)
            elif method == "model_copy" and name == "update":
                _check_mapping(checker, where, expr, fields)
    return ctx.default_return_type


def trusted_fields(info: TypeInfo) -> dict[str, Type]:
    """The fields of pydantic model ``info`` whose type holds a ``TrustedInstruction`` (an
    ``InstructionField`` too), with that type."""
    found: dict[str, Type] = {}
    for name, declared in model_fields(info):
        if declared is not None and holds_trusted(declared):
            found[name] = declared
        else:
            found.pop(name, None)
    return found


def _check_trusted_update(
    checker: TypeChecker, where: str, info: TypeInfo, ctx: MethodContext
) -> None:
    """``model_copy(update=...)`` stores its values unvalidated: an ``InstructionField`` (or
    another field typed to hold a ``TrustedInstruction``) given a plain ``str`` there holds
    that ``str``, unminted, while mypy reads the field as trusted (``veridic-forge``)."""
    fields = trusted_fields(info)
    if not fields:
        return
    for names, exprs in zip(ctx.arg_names, ctx.args, strict=True):
        for name, expr in zip(names, exprs, strict=True):
            if name == "update":
                _check_trusted_mapping(checker, where, expr, fields)


def _check_trusted_mapping(
    checker: TypeChecker, where: str, expr: Expression, fields: dict[str, Type]
) -> None:
    items = _items(expr)
    if items is not None:
        for key, value in items:
            if key is None:
                _check_trusted_mapping(checker, where, value, fields)
            elif not isinstance(key, StrExpr):
                _fail_trusted(checker, where, "a key not written in code", fields, key)
            elif key.value in fields:
                typ = checker.lookup_type_or_none(value)
                if _untrusted(typ):
                    continue  # veridic-launder's (_fields)
                if typ is None or not is_subtype(typ, fields[key.value]) or is_any(typ):
                    shown = "unknown" if typ is None else format_type(typ, checker.options)
                    _fail_trusted(
                        checker,
                        where,
                        f"a value of type {shown}",
                        {key.value: fields[key.value]},
                        value,
                    )
        return
    typ = get_proper_type(checker.lookup_type_or_none(expr))
    if isinstance(typ, TypedDictType):  # read key by key, as a display
        given = [(name, typ.items[name]) for name in fields if name in typ.items]
        if all(_fills(item, fields[name], checker) for name, item in given):
            return
    elif isinstance(typ, Instance) and typ.args:
        item = typ.args[-1]
        if all(_fills(item, declared, checker) for declared in fields.values()):
            return  # a mapping of minted values, or of values that are no text at all
    _fail_trusted(checker, where, describe(expr, checker), fields, expr)


def _items(expr: Expression) -> list[tuple[Expression | None, Expression]] | None:
    """The keys and values of a dict display, or of a ``dict(key=value, **more)`` call
    (mypy types the call from ``update=``'s ``Mapping[str, Any]``, not from its
    values), with ``None`` for the key of a mapping unpacked into it."""
    if isinstance(expr, DictExpr):
        return list(expr.items)
    if not (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, RefExpr)
        and expr.callee.fullname == "builtins.dict"
        and all(kind in (ARG_NAMED, ARG_STAR2) for kind in expr.arg_kinds)
    ):
        return None
    return [
        (None if name is None else StrExpr(name), value)
        for name, value in zip(expr.arg_names, expr.args, strict=True)
    ]


def _fills(item: Type, declared: Type, checker: TypeChecker) -> bool:
    """Whether a value of type ``item`` may fill a field ``declared`` to hold trusted text:
    a minted value, or one that cannot be text (``dict(temperature=0.3)``, whose key a
    mapping of ``float`` values cannot turn into an instruction)."""
    if is_any(item):
        return False
    return is_subtype(item, declared) or not may_be_text(item, checker)


def _untrusted(typ: Type | None) -> bool:
    proper = get_proper_type(typ)
    return isinstance(proper, Instance) and proper.type.fullname == _names.UNTRUSTED


def _fail_trusted(
    checker: TypeChecker, where: str, what: str, fields: dict[str, Type], context: Context
) -> None:
    shown = ", ".join(sorted(fields)[:5])
    checker.fail(
        f"{where} got {what} in update= for the fields that hold trusted text ({shown}): "
        "model_copy() skips validation, so an InstructionField given a plain str there holds "
        "it unminted while mypy reads it as trusted, and the composer refuses it; validate "
        "instead (Model.model_validate({**model.model_dump(), ...}) mints an InstructionField), "
        "or give a minted TrustedInstruction",
        context,
        code=errorcodes.FORGE,
    )


def _model(typ: Type) -> TypeInfo | None:
    """The model a method is called on: a ``Style`` value, ``type[Style]`` or the class."""
    proper = get_proper_type(typ)
    if isinstance(proper, TypeType):
        proper = get_proper_type(proper.item)
    info = None
    if isinstance(proper, Instance):
        info = proper.type
    elif isinstance(proper, CallableType) and proper.is_type_obj():
        info = proper.type_object()
    return info if info is not None and info.has_base(_names.BASE_MODEL) else None


def _check_mapping(
    checker: TypeChecker, where: str, expr: Expression, fields: frozenset[str]
) -> None:
    items = _items(expr)
    if items is not None:
        for key, value in items:
            if key is None:
                _check_mapping(checker, where, value, fields)
            elif isinstance(key, StrExpr):
                if key.value in fields:
                    _check_value(checker, where, key.value, value)
            else:
                _fail(checker, where, "a key not written in code", fields, key)
        return
    _fail(checker, where, describe(expr, checker), fields, expr)


def _check_value(checker: TypeChecker, where: str, name: str, expr: Expression) -> None:
    verdict = classify(expr, checker)
    if isinstance(verdict, Written):
        return
    checker.fail(
        f'{where} got {verdict.what} for the Literal field "{name}": {_ADVICE}',
        expr,
        code=errorcodes.LITERAL,
    )


def _fail(
    checker: TypeChecker, where: str, what: str, fields: frozenset[str], context: Context
) -> None:
    shown = ", ".join(sorted(fields)[:5])
    checker.fail(
        f"{where} got {what}, a mapping that may fill the Literal fields ({shown}): {_ADVICE}",
        context,
        code=errorcodes.LITERAL,
    )
