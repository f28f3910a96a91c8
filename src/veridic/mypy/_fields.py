"""Hooks for ``InstructionField``: outside text is never handed to a field read as instruction.

Declaring a pydantic field ``InstructionField`` is the application's decision
that whatever validates into it is read as instruction: validation mints it.
Handing a value branded ``UntrustedText`` to such a field is laundering: the
run time refuses it (``ProvenanceError``), and this module makes mypy refuse it
too, with ``veridic-launder``, wherever the plugin can see the value:

- the model's constructor: ``StoredPrompt(content=u)``, ``StoredPrompt(**{"content": u})``,
  a dict display for a nested model's field (``Outer(inner={"content": u})``), and
  ``**kwargs`` whose values are ``UntrustedText``;
- ``StoredPrompt.model_validate({...})`` with a dict display (or a mapping whose
  values are ``UntrustedText``), ``model_construct(...)``, ``model_copy(update={...})``;
- ``TypeAdapter(InstructionField).validate_python(u)`` (and any ``TypeAdapter``
  of a type with such a field).

A plain ``str`` (a literal, text read from storage) is accepted: reading a field
declared ``InstructionField`` is the application's decision that the stored text
instructs. mypy sees a model's ``__init__`` with the field's type,
``TrustedInstruction`` (through pydantic's ``dataclass_transform``, or the
``pydantic.mypy`` plugin with ``init_typed = True``), and would refuse every
``str``; but the field validates from ``str``. So the constructor's signature
takes ``str`` for an ``InstructionField`` (a function signature hook), and the
call hook refuses what is branded untrusted. With ``init_typed = False`` (the
``pydantic.mypy`` default) the parameters are ``Any`` and the call hook is all
there is. A field typed ``TrustedInstruction`` without the validator keeps its
type: pydantic would store a plain ``str`` there, which nothing minted.

Hooks: ``get_type_analyze_hook`` for ``veridic.fields.InstructionField`` (mypy
drops ``Annotated`` and expands the alias, so the annotation keeps a reference
to it, as ``_literal_string`` does for ``LiteralString``: it survives the cache);
``get_function_signature_hook`` and ``get_function_hook`` for the models that
have such a field; ``get_method_hook`` for their ``model_*`` methods and for
``TypeAdapter.validate_python``.

Not seen: an assignment ``stored.content = u`` (mypy reports it itself: the
attribute is a ``TrustedInstruction``; with ``validate_assignment`` a plain
``str`` would do, but mypy refuses that too, and gives a plugin no hook on
assignments), ``model_validate_json`` and ``validate_json`` (their input is
JSON text), and a mapping whose values are plain ``str`` built from untrusted
text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Final

from mypy.checker import TypeChecker
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    ARG_STAR2,
    DictExpr,
    Expression,
    ListExpr,
    SetExpr,
    StrExpr,
    TupleExpr,
    TypeAlias,
    TypeInfo,
    Var,
)
from mypy.plugin import (
    AnalyzeTypeContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    Plugin,
)
from mypy.types import (
    FunctionLike,
    Instance,
    ProperType,
    TupleType,
    Type,
    TypeAliasType,
    TypedDictType,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes
from veridic.mypy._code_text import describe

_DEPTH: Final = 4

Kind = str
"""``"field"``: an ``InstructionField``; ``"bare"``: typed ``TrustedInstruction`` only;
``"model"``: a nested model that has one of those."""

_fields: dict[str, tuple[int, dict[str, Kind]]] = {}
"""Per model: the id of its ``TypeInfo`` and its instruction fields."""


def forget() -> None:
    """A new build starts: its models are new objects."""
    _fields.clear()


def analyze(plugin: Plugin, ctx: AnalyzeTypeContext) -> Type:
    """Keep a reference to the ``InstructionField`` alias in an annotation."""
    symbol = plugin.lookup_fully_qualified(_names.INSTRUCTION_FIELD)
    alias = None if symbol is None else symbol.node
    if not isinstance(alias, TypeAlias):  # pragma: no cover - veridic.fields defines it
        return ctx.api.named_type(_names.TRUSTED, [])
    return TypeAliasType(alias, [], line=ctx.type.line, column=ctx.type.column)


def is_instruction_field(typ: Type) -> bool:
    """Whether ``typ`` is (still) the ``InstructionField`` alias."""
    return (
        isinstance(typ, TypeAliasType)
        and typ.alias is not None
        and typ.alias.fullname == _names.INSTRUCTION_FIELD
    )


def model(plugin: Plugin, fullname: str) -> TypeInfo | None:
    """The pydantic model named ``fullname``, if it has an instruction field."""
    symbol = plugin.lookup_fully_qualified(fullname)
    info = None if symbol is None else symbol.node
    if isinstance(info, TypeInfo) and info.has_base(_names.BASE_MODEL) and fields_of(info):
        return info
    return None


def model_fields(info: TypeInfo) -> Iterator[tuple[str, Type | None]]:
    """Each field a pydantic model declares, with its type, from ``BaseModel``'s first
    subclass to ``info``: a field declared again later overrides the earlier one."""
    for base in reversed(info.mro):
        if base.fullname == _names.BASE_MODEL or not base.has_base(_names.BASE_MODEL):
            continue
        for name, symbol in base.names.items():
            node = symbol.node
            if isinstance(node, Var) and not node.is_classvar and not name.startswith("_"):
                yield name, node.type


def filled_fields(instance: Instance) -> Iterator[tuple[str, Type, TypeInfo]]:
    """Each field of a pydantic model as ``instance`` fills in its type variables
    (``Box[TrustedInstruction]``'s ``item: T`` is a ``TrustedInstruction``), with the class
    that declares it; a field declared again later overrides the earlier one."""
    latest: dict[str, tuple[Type, TypeInfo]] = {}
    for base in reversed(instance.type.mro):
        if base.fullname == _names.BASE_MODEL or not base.has_base(_names.BASE_MODEL):
            continue
        mapped = map_instance_to_supertype(instance, base)
        for name, symbol in base.names.items():
            node = symbol.node
            if isinstance(node, Var) and not node.is_classvar and not name.startswith("_"):
                if node.type is not None:
                    latest[name] = (expand_type_by_instance(node.type, mapped), base)
                else:
                    latest.pop(name, None)
    for name, (typ, base) in latest.items():
        yield name, typ, base


def fields_of(info: TypeInfo) -> dict[str, Kind]:
    """The fields of a pydantic model that are read as instruction, with their kind."""
    cached = _fields.get(info.fullname)
    if cached is not None and cached[0] == id(info):
        return cached[1]
    _fields[info.fullname] = (id(info), {})  # a model that contains itself
    found: dict[str, Kind] = {}
    for name, declared in model_fields(info):
        kind = None if declared is None else _kind(declared, _DEPTH)
        if kind is None:
            found.pop(name, None)
        else:
            found[name] = kind
    for name, alias in _aliases(info).items():
        if name in found:
            found[alias] = found[name]
    _fields[info.fullname] = (id(info), found)
    return found


def _aliases(info: TypeInfo) -> dict[str, str]:
    """Field name to alias, as the ``pydantic.mypy`` plugin recorded them (when it runs)."""
    recorded = info.metadata.get("pydantic-mypy-metadata", {}).get("fields", {})
    return {
        name: data["alias"]
        for name, data in recorded.items()
        if isinstance(data, dict) and isinstance(data.get("alias"), str)
    }


def kind(typ: Type) -> Kind | None:
    """Whether a field's type reads instruction text, and how (see :data:`Kind`)."""
    return _kind(typ, _DEPTH)


def _kind(typ: Type, depth: int) -> Kind | None:
    if is_instruction_field(typ):
        return "field"
    proper = get_proper_type(typ)
    if depth == 0:
        return None
    parts: list[Type] = []
    if isinstance(proper, Instance):
        if proper.type.fullname == _names.TRUSTED:
            return "bare"
        if proper.type.has_base(_names.BASE_MODEL):
            if fields_of(proper.type):
                return "model"
            # A generic model holds what its fields hold once filled in, not its arguments.
            parts = [typ for _, typ, _ in filled_fields(proper)] if proper.args else []
        else:
            parts = list(proper.args)
    elif isinstance(proper, UnionType | TupleType):
        parts = list(proper.items)
    kinds = [_kind(part, depth - 1) for part in parts]
    return next((kind for kind in ("field", "bare", "model") if kind in kinds), None)


def widen(ctx: FunctionSigContext) -> FunctionLike:
    """A model's constructor takes ``str`` for an ``InstructionField``: the field validates it."""
    signature = ctx.default_signature
    text = ctx.api.named_generic_type(_names.STR, [])
    widened = [_widened(t, text, _DEPTH) for t in signature.arg_types]
    if all(new is old for new, old in zip(widened, signature.arg_types, strict=True)):
        return signature
    return signature.copy_modified(arg_types=widened)


def _widened(typ: Type, text: Instance, depth: int) -> Type:
    if is_instruction_field(typ):
        return text
    if depth == 0 or isinstance(typ, TypeAliasType):
        return typ
    if isinstance(typ, UnionType):
        items = [_widened(item, text, depth - 1) for item in typ.items]
        changed = any(new is not old for new, old in zip(items, typ.items, strict=True))
        return UnionType(items, typ.line, typ.column) if changed else typ
    if isinstance(typ, Instance) and typ.args:
        args = [_widened(arg, text, depth - 1) for arg in typ.args]
        changed = any(new is not old for new, old in zip(args, typ.args, strict=True))
        return typ.copy_modified(args=args) if changed else typ
    return typ


# --- the checks --------------------------------------------------------------------------


def check_call(
    info: TypeInfo, inner: Callable[[FunctionContext], Type] | None, ctx: FunctionContext
) -> Type:
    """``Model(...)``: no untrusted text for an instruction field."""
    _check_keywords(info, info.name + "()", ctx)
    return ctx.default_return_type if inner is None else inner(ctx)


def method_hook(plugin: Plugin, fullname: str) -> Callable[[MethodContext], Type] | None:
    """The hook for ``Model.model_validate`` and friends, and ``TypeAdapter.validate_python``."""
    owner, _, method = fullname.rpartition(".")
    if fullname == _names.TYPE_ADAPTER + ".validate_python":
        return _check_adapter
    if method not in _names.MODEL_METHODS:
        return None
    info = model(plugin, owner)
    return None if info is None else partial(_check_method, info, method)


def _check_method(info: TypeInfo, method: str, ctx: MethodContext) -> Type:
    where = f"{info.name}.{method}()"
    if method == "model_construct":
        _check_keywords(info, where, ctx)
    else:
        wanted = "obj" if method == "model_validate" else "update"
        for name, exprs in zip(ctx.callee_arg_names, ctx.args, strict=False):
            if name == wanted:
                for expr in exprs:
                    _check_mapping(info, where, expr, ctx)
    return ctx.default_return_type


def _check_adapter(ctx: MethodContext) -> Type:
    adapter = get_proper_type(ctx.type)
    if not isinstance(adapter, Instance) or not adapter.args:
        return ctx.default_return_type
    target = get_proper_type(adapter.args[0])
    if isinstance(target, Instance) and target.type.has_base(_names.BASE_MODEL):
        if fields_of(target.type):
            for expr in ctx.args[0] if ctx.args else []:
                _check_mapping(target.type, "TypeAdapter.validate_python()", expr, ctx)
        return ctx.default_return_type
    if _kind(adapter.args[0], _DEPTH) is None:
        return ctx.default_return_type
    for expr, typ in zip(ctx.args[0] if ctx.args else [], ctx.arg_types[0], strict=False):
        if _untrusted(typ, _DEPTH):
            _launder(ctx, "TypeAdapter.validate_python()", "the value", expr, "the adapter's type")
    return ctx.default_return_type


def _check_keywords(info: TypeInfo, where: str, ctx: FunctionContext | MethodContext) -> None:
    fields = fields_of(info)
    for names, exprs, types, kinds in zip(
        ctx.arg_names, ctx.args, ctx.arg_types, ctx.arg_kinds, strict=True
    ):
        for name, expr, typ, kind in zip(names, exprs, types, kinds, strict=True):
            if kind == ARG_STAR2:
                _check_mapping(info, where, expr, ctx)
            elif name in fields:
                _check_value(info, where, name, expr, typ, ctx)


def _check_mapping(
    info: TypeInfo, where: str, expr: Expression, ctx: FunctionContext | MethodContext
) -> None:
    """A mapping of field values: a dict display key by key, else by its value type."""
    fields = fields_of(info)
    if isinstance(expr, DictExpr):
        for key, value in expr.items:
            if isinstance(key, StrExpr) and key.value in fields:
                typ = _type_of(ctx, value)
                if typ is not None:
                    _check_value(info, where, key.value, value, typ, ctx)
            elif key is None:  # {**other}
                _check_mapping(info, where, value, ctx)
        return
    found = _type_of(ctx, expr)
    values = [] if found is None else _mapping_values(get_proper_type(found))
    if any(_untrusted(value, _DEPTH) for value in values):
        _launder(ctx, where, "a value", expr, f"one of {info.name}'s instruction fields")


def _check_value(
    info: TypeInfo,
    where: str,
    name: str,
    expr: Expression,
    typ: Type,
    ctx: FunctionContext | MethodContext,
) -> None:
    kind = fields_of(info)[name]
    if kind == "model" and isinstance(expr, DictExpr):
        nested = _nested_model(info, name)
        if nested is not None:
            _check_mapping(nested, where, expr, ctx)
        return
    if isinstance(expr, ListExpr | TupleExpr | SetExpr):
        # A display takes its context's type (list[str]): its items tell what it holds.
        for item in expr.items:
            found = _type_of(ctx, item)
            if found is not None and _untrusted(found, _DEPTH):
                _launder(ctx, where, f'"{name}"', item, f'"{name}"')
    elif _untrusted(typ, _DEPTH):
        _launder(ctx, where, f'"{name}"', expr, f'"{name}"')


def _type_of(ctx: FunctionContext | MethodContext, expr: Expression) -> Type | None:
    """The type mypy gave ``expr`` where it stands (a display takes its context's type)."""
    checker = ctx.api
    if isinstance(checker, TypeChecker):
        return checker.lookup_type_or_none(expr)
    return ctx.api.get_expression_type(expr)


def _nested_model(info: TypeInfo, name: str) -> TypeInfo | None:
    symbol = info.get(name)
    node = None if symbol is None else symbol.node
    if not isinstance(node, Var) or node.type is None:
        return None
    for item in _members(get_proper_type(node.type)):
        if isinstance(item, Instance) and item.type.has_base(_names.BASE_MODEL):
            return item.type
    return None


def _members(typ: ProperType) -> Iterator[ProperType]:
    if isinstance(typ, UnionType):
        for item in typ.items:
            yield from _members(get_proper_type(item))
    else:
        yield typ


def _mapping_values(typ: ProperType) -> list[Type]:
    if isinstance(typ, TypedDictType):
        return list(typ.items.values())
    if isinstance(typ, Instance) and typ.type.has_base(_names.MAPPING) and len(typ.args) == 2:
        return [typ.args[1]]
    return []


def _untrusted(typ: Type, depth: int) -> bool:
    """Whether ``typ`` is (or holds) ``UntrustedText``."""
    proper = get_proper_type(typ)
    if isinstance(proper, Instance):
        if proper.type.fullname == _names.UNTRUSTED:
            return True
        return depth > 0 and any(_untrusted(arg, depth - 1) for arg in proper.args)
    if isinstance(proper, UnionType | TupleType):
        return depth > 0 and any(_untrusted(item, depth - 1) for item in proper.items)
    return False


def _launder(
    ctx: FunctionContext | MethodContext, where: str, what: str, expr: Expression, field: str
) -> None:
    checker = ctx.api
    if not isinstance(checker, TypeChecker) or _names.in_package(checker.tree.fullname):
        return
    checker.fail(
        f"{where} got untrusted text for {what} ({describe(expr, checker)} of type "
        f"UntrustedText), but {field} is read as instruction: validating text into an "
        "InstructionField mints it, so this would launder outside text into the system "
        "prompt; keep it in a str field and place it with Composer.data(), or vouch for it "
        'with TrustPolicy("name").vouch(text, reason=...)',
        expr,
        code=errorcodes.LAUNDER,
    )
