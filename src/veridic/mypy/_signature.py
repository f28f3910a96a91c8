"""Which parameters of a called function are checked, and how.

mypy's call hooks receive the actual arguments grouped by formal parameter,
but not the formal parameter types. The plugin looks the callee up by its full
name and reads its declared signature, so the decision rests on what the
function declares, wherever it is defined and whether it was read from
mypy's cache.

A parameter has a role when it is an instruction position:

- ``CODE_TEXT``: annotated ``LiteralString`` (``instruction()``'s text,
  ``join()``'s separator, any helper of the user's): its argument must be text
  written in code.
- ``TRUSTED_TEXT``: typed ``TrustedText`` (``LiteralString | TrustedInstruction``,
  or optional): a component's name, a deny reason, ``BootError``'s reason. Its
  argument must be text written in code or a minted ``TrustedInstruction``.
- ``INSTRUCTION``: typed ``TrustedInstruction`` (or optional): no ``Any``.
- ``INSTRUCTIONS``: an iterable of ``TrustedInstruction`` (``join()``'s parts):
  no ``Any`` item.
- ``LITERAL``: typed ``Literal[...]`` of strings (or optional): no ``Any``. The
  plugin reads a ``Literal``-typed value as text written in code, so ``Any`` may
  not fill one (a dataclass or ``TypedDict`` built from ``json.loads``). Not for
  typeshed's functions, nor for a pydantic model, which checks the value when it
  is built.

A class is looked up the way mypy does: its signature is that of ``__init__``
or ``__new__``, whichever is defined first in the MRO (``__init__`` on a tie);
a ``TypedDict``'s is its keys.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

from mypy.checker import TypeChecker
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    ARG_NAMED,
    ARG_STAR,
    ARG_STAR2,
    ArgKind,
    Decorator,
    Expression,
    FuncDef,
    GeneratorExpr,
    ListComprehension,
    ListExpr,
    MypyFile,
    SetComprehension,
    SetExpr,
    StarExpr,
    SymbolNode,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext, Plugin
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    TupleType,
    Type,
    TypeAliasType,
    TypedDictType,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names
from veridic.mypy._literal_string import is_literal_string, union_items


class Role(enum.Enum):
    """What a parameter is, for the checks."""

    CODE_TEXT = "code text"
    TRUSTED_TEXT = "trusted text"
    INSTRUCTION = "instruction"
    INSTRUCTIONS = "instructions"
    LITERAL = "literal"


@dataclass(frozen=True, slots=True)
class Callee:
    """A called function with at least one checked parameter."""

    fullname: str
    display: str
    """How messages name it: ``instruction()``, ``Composer.system()``."""
    roles: tuple[Role | None, ...]
    """One per formal parameter of the declared (unbound) signature."""
    names: tuple[str | None, ...]

    def bound(self, count: int) -> tuple[tuple[Role | None, str | None], ...]:
        """Roles and names of the ``count`` formals a hook sees.

        A method call binds ``self`` (and a class call binds ``__init__``'s
        ``self``), so the hook sees the trailing ``count`` formals.
        """
        if count > len(self.roles):
            return ((None, None),) * count
        start = len(self.roles) - count
        return tuple(zip(self.roles[start:], self.names[start:], strict=True))


def find(plugin: Plugin, fullname: str, node: SymbolNode) -> Callee | None:
    """The callee ``node`` named ``fullname`` if it has a checked parameter, else ``None``."""
    signature = signature_of(node)
    if signature is None:
        return None
    roles = tuple(_role(t) for t in signature.arg_types)
    if not any(roles):
        return None
    if Role.LITERAL in roles and not _checks_literals(plugin, fullname, node):
        roles = tuple(None if role is Role.LITERAL else role for role in roles)
        if not any(roles):
            return None
    return Callee(fullname, _display(plugin, fullname), roles, tuple(signature.arg_names))


def called_value(signature: CallableType, display: str) -> Callee | None:
    """The callee of a call through a value (``handlers[0](text)``, ``obj.rule`` kept in a
    list) whose type still shows a ``LiteralString`` or ``TrustedText`` parameter, with
    only those parameters checked; ``None`` when it has none."""
    roles = tuple(
        role if role in (Role.CODE_TEXT, Role.TRUSTED_TEXT) else None
        for role in map(_role, signature.arg_types)
    )
    if not any(roles):
        return None
    return Callee("", display, roles, tuple(signature.arg_names))


def code_text_positions(signature: CallableType) -> list[int]:
    """The positions of the parameters whose argument must be text written in code."""
    return [
        position
        for position, formal in enumerate(signature.arg_types)
        if _role(formal) in (Role.CODE_TEXT, Role.TRUSTED_TEXT)
    ]


def code_text_parameter(signature: CallableType) -> str | None:
    """The first parameter whose argument must be text written in code (``LiteralString``
    or ``TrustedText``), as messages name it, or ``None`` when there is none."""
    for position, (formal, name) in enumerate(
        zip(signature.arg_types, signature.arg_names, strict=True), start=1
    ):
        if _role(formal) in (Role.CODE_TEXT, Role.TRUSTED_TEXT):
            return f'"{name}"' if name else f"argument {position}"
    return None


def signature_of(node: SymbolNode) -> CallableType | None:
    """The declared signature of a function, method or class (as mypy builds its call)."""
    typ: Type | None = None
    if isinstance(node, FuncDef):
        typ = node.type
    elif isinstance(node, Decorator):
        typ = node.var.type
    elif isinstance(node, Var):
        typ = node.type
    elif isinstance(node, TypeInfo) and not node.is_newtype:
        if node.typeddict_type is not None:
            return _keys(node.typeddict_type)
        constructor = constructor_of(node)
        return None if constructor is None else signature_of(constructor)
    proper = None if typ is None else get_proper_type(typ)
    return proper if isinstance(proper, CallableType) else None


def constructor_of(info: TypeInfo) -> FuncDef | Decorator | None:
    """The ``__init__`` or ``__new__`` whose signature mypy gives a call of ``info``.

    mypy takes whichever is defined first in the MRO, and ``__init__`` on a tie.
    """
    init = _method(info, "__init__")
    new = _method(info, "__new__")
    if init is None or new is None:
        return init or new
    if info.mro.index(new.info) < info.mro.index(init.info):
        return new
    return init


def _method(info: TypeInfo, name: str) -> FuncDef | Decorator | None:
    symbol = info.get(name)
    node = None if symbol is None else symbol.node
    if isinstance(node, FuncDef | Decorator) and node.info in info.mro:
        return node
    return None


def _keys(typeddict: TypedDictType) -> CallableType:
    """A ``TypedDict``'s constructor, keyword per key (the grouping mypy's hook gets)."""
    return CallableType(
        list(typeddict.items.values()),
        [ARG_NAMED] * len(typeddict.items),
        list(typeddict.items),
        typeddict.fallback,
        typeddict.fallback,
    )


def _role(formal: Type) -> Role | None:
    if isinstance(formal, Instance):  # most parameters: answer without building a list
        return _instance_role(formal)
    if _instruction_field(formal):
        return None  # validated from str, and minted: _fields checks what goes in
    items = union_items(formal)
    literal_string = any(is_literal_string(item) for item in items)
    trusted = any(is_trusted_instance(item) for item in items)
    if literal_string:
        return Role.TRUSTED_TEXT if trusted else Role.CODE_TEXT
    if trusted:
        return Role.INSTRUCTION
    for item in items:
        if isinstance(item, Instance) and _instance_role(item) is Role.INSTRUCTIONS:
            return Role.INSTRUCTIONS
    if is_literal_text(items):
        return Role.LITERAL
    return None


def _instance_role(item: Instance) -> Role | None:
    if item.type.fullname == _names.TRUSTED:
        return Role.INSTRUCTION
    if item.args and len(item.args) == 1 and is_trusted_instance(item.args[0]):
        return Role.INSTRUCTIONS if item.type.has_base(_names.ITERABLE) else None
    return None


def _instruction_field(formal: Type) -> bool:
    """An ``InstructionField`` (or optional): a model's constructor parameter for it."""
    members = formal.items if isinstance(formal, UnionType) else [formal]
    return any(
        isinstance(member, TypeAliasType)
        and member.alias is not None
        and member.alias.fullname == _names.INSTRUCTION_FIELD
        for member in members
    )


def is_literal_text(items: list[Type]) -> bool:
    """``Literal["a", ...]`` of strings, maybe with ``None``: text the plugin reads as code."""
    found = False
    for item in items:
        if isinstance(item, LiteralType) and item.fallback.type.fullname == _names.STR:
            found = True
        elif not isinstance(item, NoneType):
            return False
    return found


def _checks_literals(plugin: Plugin, fullname: str, node: SymbolNode) -> bool:
    """Whether ``Any`` for a ``Literal`` parameter of this callee is refused.

    Not for typeshed's stubs (``open(mode=...)``: no prompt text is made there), nor
    for a pydantic model, whose validation refuses a value outside the ``Literal``.
    """
    if isinstance(node, TypeInfo) and node.has_base(_names.BASE_MODEL):
        return False
    module = _module_of(plugin, fullname)
    return module is None or not module.is_stub


def _module_of(plugin: Plugin, fullname: str) -> MypyFile | None:
    modules = plugin._modules or {}
    name = fullname
    while "." in name:
        name = name.rpartition(".")[0]
        if name in modules:
            return modules[name]
    return None


def is_trusted_instance(typ: Type) -> bool:
    """Whether ``typ`` is ``TrustedInstruction`` itself."""
    proper = get_proper_type(typ)
    return isinstance(proper, Instance) and proper.type.fullname == _names.TRUSTED


def _display(plugin: Plugin, fullname: str) -> str:
    """Name a callee as a reader knows it: ``join()``, ``Composer.system()``."""
    owner, _, name = fullname.rpartition(".")
    parent = plugin.lookup_fully_qualified(owner) if owner else None
    if parent is not None and isinstance(parent.node, TypeInfo):
        if name == "__init__":
            return f"{parent.node.name}()"
        return f"{parent.node.name}.{name}()"
    return f"{name}()"


@dataclass(frozen=True, slots=True)
class Argument:
    """One actual argument that lands in a checked parameter."""

    role: Role
    formal: str
    """The parameter as messages name it: ``"parts"``, or ``argument 1`` when it has no
    name (mypy keeps no names for positional-only parameters)."""
    expr: Expression
    type: Type
    kind: ArgKind


def arguments(ctx: FunctionContext | MethodContext, callee: Callee) -> Iterator[Argument]:
    """The actual arguments of a call that land in ``callee``'s checked parameters."""
    formals = callee.bound(len(ctx.args))
    for position, ((role, name), exprs, types, kinds) in enumerate(
        zip(formals, ctx.args, ctx.arg_types, ctx.arg_kinds, strict=True), start=1
    ):
        if role is None:
            continue
        formal = f'"{name}"' if name else f"argument {position}"
        for expr, typ, kind in zip(exprs, types, kinds, strict=True):
            yield Argument(role, formal, expr, typ, kind)


def values(argument: Argument, checker: TypeChecker) -> Iterator[tuple[Expression, Type]]:
    """The values an argument puts in its parameter, each with the expression that made it.

    One value for a plain argument; the items of ``*args``, ``**kwargs`` and of an
    iterable of instructions (a list display gives each item with its own expression).
    """
    if argument.kind == ARG_STAR2:
        yield from _mapping_values(argument.expr, argument.type, checker)
    elif argument.role is Role.INSTRUCTIONS or argument.kind == ARG_STAR:
        yield from _items(argument.expr, argument.type, checker)
    else:
        yield argument.expr, argument.type


def _items(
    expr: Expression, typ: Type | None, checker: TypeChecker
) -> Iterator[tuple[Expression, Type]]:
    """The items of an iterable argument, each with the expression that produced it."""
    if isinstance(expr, ListExpr | TupleExpr | SetExpr):
        for item in expr.items:
            if isinstance(item, StarExpr):
                yield from _items(item.expr, checker.lookup_type_or_none(item.expr), checker)
            else:
                yield from _typed(item, checker)
        return
    if isinstance(expr, ListComprehension | SetComprehension):
        expr = expr.generator
    if isinstance(expr, GeneratorExpr):
        yield from _typed(expr.left_expr, checker)
        return
    if typ is None:
        return
    proper = get_proper_type(typ)
    if isinstance(proper, AnyType):
        yield expr, proper
    elif isinstance(proper, TupleType):
        yield from ((expr, item) for item in proper.items)
    elif isinstance(proper, Instance):
        iterable = checker.lookup_typeinfo(_names.ITERABLE)
        if proper.type.has_base(_names.ITERABLE):
            yield expr, map_instance_to_supertype(proper, iterable).args[0]


def _mapping_values(
    expr: Expression, typ: Type, checker: TypeChecker
) -> Iterator[tuple[Expression, Type]]:
    proper = get_proper_type(typ)
    if isinstance(proper, AnyType):
        yield expr, proper
    elif isinstance(proper, Instance) and proper.type.has_base(_names.MAPPING):
        mapping = checker.lookup_typeinfo(_names.MAPPING)
        yield expr, map_instance_to_supertype(proper, mapping).args[1]


def _typed(expr: Expression, checker: TypeChecker) -> Iterator[tuple[Expression, Type]]:
    typ = checker.lookup_type_or_none(expr)
    if typ is not None:
        yield expr, typ
