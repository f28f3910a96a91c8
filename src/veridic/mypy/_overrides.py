"""Is a ``LiteralString`` parameter reached through a declaration of plain ``str``?

A method's ``LiteralString`` parameter holds text written in code only if
every caller is checked as a caller of a ``LiteralString`` parameter. mypy
reads ``LiteralString`` as ``str``, so it accepts an override that narrows
``str`` to ``LiteralString`` (and a class that implements a Protocol that way):
a caller holding the base type passes any ``str``, is checked against the
base's signature, and the override then mints the text as if it were a
literal. pyright refuses such an override; mypy has nothing to refuse.

So the plugin trusts such a parameter in the method's body only when no
declaration that callers may go through takes plain text there:

- a method of the same name in a base class (the whole MRO, ``Protocol`` and
  ``ABC`` bases included) whose parameter (by name, or by position when it is
  positional-only) is typed ``str``, ``UntrustedText``, a type variable or
  ``Any``;
- a ``Protocol`` of the project that the class implements structurally (mypy's
  own subtype check decides), with such a member. Only the Protocols already
  analysed when the method is checked are seen: those of the modules it
  imports, directly or not, and of its own module. A Protocol declared in a
  module that imports the class's module is checked later (docs/mypy.md);
- for ``__init__`` and ``__new__``: the other of the two, when a call of the
  class is checked against it (mypy uses whichever comes first in the MRO);
- an overload, or a property with a setter: mypy keeps both as one overloaded
  definition, and the plugin checks neither the callers of an overloaded
  function (``_minting``) nor an assignment to a property, so any ``str`` gets in
  through its implementation or its setter.

Constructors are not compared with their bases, as mypy does not compare them:
``type[Base]`` called with a subclass is outside what the plugin can follow.

(Hook: none of its own; ``_code_text`` asks when it meets such a parameter.)
"""

from __future__ import annotations

from typing import Final

from mypy.checker import TypeChecker
from mypy.nodes import (
    ARG_STAR,
    Argument,
    Decorator,
    FuncDef,
    FuncItem,
    MypyFile,
    OverloadedFuncDef,
    SymbolNode,
    TypeInfo,
)
from mypy.subtypes import is_subtype
from mypy.types import AnyType, Instance, Type, TypeVarType
from mypy.typevars import fill_typevars, fill_typevars_with_any

from veridic.mypy import _names
from veridic.mypy._literal_string import mentions_literal_string, union_items
from veridic.mypy._signature import constructor_of, signature_of

_CONSTRUCTORS: Final = frozenset({"__init__", "__new__"})

_protocols: dict[str, tuple[int, tuple[TypeInfo, ...]]] = {}
"""Per module: the id of its tree and the Protocols it defines, once it is analysed."""


def forget() -> None:
    """A new build starts: its modules are new objects."""
    _protocols.clear()


def reached_as_str(function: FuncItem, argument: Argument, checker: TypeChecker) -> str | None:
    """Through what callers reach ``argument`` of ``function`` as plain text, else ``None``."""
    if not isinstance(function, FuncDef) or not function.info:
        return None  # a function, a lambda: called by its own name only
    info = function.info
    if function.name in _CONSTRUCTORS:
        return _constructor_twin(function, argument)
    for base in info.mro[1:]:
        symbol = base.names.get(function.name)
        if symbol is not None and _declares_text(symbol.node, function, argument):
            return f"{base.name}.{function.name}(), which declares it as plain text"
    for protocol in _implemented_protocols(info, function.name, checker):
        member = protocol.names[function.name].node
        if _declares_text(member, function, argument):
            return (
                f"the Protocol {protocol.name}.{function.name}(), which {info.name} implements "
                "and which declares it as plain text"
            )
    return None


def unchecked_way_in(function: FuncItem, checker: TypeChecker) -> str | None:
    """An overloaded definition ``function`` belongs to (an overload, a property's setter)."""
    if not isinstance(function, FuncDef):
        return None
    if function.info:
        symbol = function.info.names.get(function.name)
    else:
        module = checker.modules.get(function.fullname.rpartition(".")[0])
        symbol = None if module is None else module.names.get(function.name)
    definition = None if symbol is None else symbol.node
    if not isinstance(definition, OverloadedFuncDef):
        return None
    if definition.is_property:
        getter = definition.items[0]
        if isinstance(getter, Decorator) and getter.func is function:
            return None  # the getter takes no text
        return f"the setter of the property {function.name}, where an assignment passes any str"
    return (
        f"the overloaded function {function.name}(), whose callers the plugin does not check "
        "(an overload may pass any str)"
    )


def _constructor_twin(function: FuncDef, argument: Argument) -> str | None:
    """``__init__`` vs ``__new__``: calls are checked against the one mypy picks."""
    info = function.info
    chosen = constructor_of(info)
    node = chosen.func if chosen is not None and not isinstance(chosen, FuncDef) else chosen
    if node is None or node is function:
        return None
    if _declares_text(chosen, function, argument):
        return (
            f"{info.name}() calls, which mypy checks against {node.info.name}.{node.name}(), "
            "where it is plain text"
        )
    return None


def _declares_text(node: SymbolNode | None, function: FuncDef, argument: Argument) -> bool:
    """Whether ``node``'s signature takes plain text where ``function`` takes ``argument``."""
    if node is None:
        return False
    signature = signature_of(node)
    if signature is None:
        return False
    index = function.arguments.index(argument)
    declared: Type | None = None
    if argument.kind == ARG_STAR:
        kinds = zip(signature.arg_types, signature.arg_kinds, strict=True)
        declared = next((typ for typ, kind in kinds if kind == ARG_STAR), None)
    elif not argument.pos_only and argument.variable.name in signature.arg_names:
        declared = signature.arg_types[signature.arg_names.index(argument.variable.name)]
    elif index < len(signature.arg_types) and signature.arg_kinds[index].is_positional():
        declared = signature.arg_types[index]
    return declared is not None and _plain_text(declared)


def _plain_text(typ: Type) -> bool:
    """A declared type under which a caller may pass text that was not written in code."""
    if mentions_literal_string(typ):
        return False
    for item in union_items(typ):
        if isinstance(item, AnyType | TypeVarType):
            return True
        if (
            isinstance(item, Instance)
            and item.type.has_base(_names.STR)
            and item.type.fullname != _names.TRUSTED
        ):
            return True
    return False


def _implemented_protocols(info: TypeInfo, member: str, checker: TypeChecker) -> list[TypeInfo]:
    """The project's Protocols with ``member`` that ``info`` implements without naming them."""
    found = []
    instance: Instance | None = None
    for module in checker.modules.values():
        for protocol in _project_protocols(module):
            if member not in protocol.names or protocol in info.mro:
                continue
            if instance is None:
                filled = fill_typevars(info)
                if not isinstance(filled, Instance):
                    return []
                instance = filled
            if is_subtype(instance, fill_typevars_with_any(protocol)):
                found.append(protocol)
    return found


def _project_protocols(module: MypyFile) -> tuple[TypeInfo, ...]:
    """The Protocols ``module`` defines, if it is the project's own (not installed, no stub)."""
    cached = _protocols.get(module.fullname)
    if cached is not None and cached[0] == id(module):
        return cached[1]
    if not module.names:
        return ()  # not analysed yet: look again next time
    protocols: tuple[TypeInfo, ...] = ()
    if not (
        module.is_stub
        or _names.in_package(module.fullname)
        or any(part in module.path for part in _names.INSTALLED)
    ):
        protocols = tuple(
            node
            for symbol in module.names.values()
            if isinstance(node := symbol.node, TypeInfo)
            and node.is_protocol
            and node.module_name == module.fullname
        )
    _protocols[module.fullname] = (id(module), protocols)
    return protocols
