"""No attribute is declared trusted over a base's attribute that takes any text.

mypy accepts an attribute redeclared with a narrower type in a subclass, even under
``--strict`` (its ``mutable-override`` code is off by default), although the base's
attribute can still be written through a reference typed as the base::

    class Page:
        def __init__(self) -> None:
            self.prompt: str = ""

    class TrustedPage(Page):
        prompt: TrustedInstruction

    def fill(page: Page) -> None:
        page.prompt = reply  # checked against Page's str: accepted

    page = TrustedPage()
    fill(page)
    registry.component("billing", hint=page.prompt)  # read as trusted

The reply is read as a ``TrustedInstruction`` without anything having minted it: the
composer refuses it, but a ``TrustedText`` position (a component's hint, a ``Deny``
reason) takes a ``TrustedInstruction`` as minted and prints it in the capability section.

Reported (``veridic-forge``, on the override): an attribute of a class of the project
whose declared type holds trusted text (``holds_trusted``) where the same name in a base
class (the whole MRO) is an attribute that can be written (not ``Final``, not a read-only
property) with a type that is not a subtype of the override's (``str`` under
``TrustedInstruction``). Declare the attribute as the base does and mint where it is
read, or give the base the trusted type.

Hook: the end of a module's check, with ``_any_overrides`` (a module that defines a class
always makes a call, so the end of its check comes with the checker its first call kept).
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.messages import format_type
from mypy.nodes import Decorator, OverloadedFuncDef, SymbolNode, TypeInfo, Var
from mypy.subtypes import is_subtype
from mypy.types import (
    AnyType,
    CallableType,
    NoneType,
    TupleType,
    Type,
    UnionType,
    get_proper_type,
)
from mypy.typevars import fill_typevars_with_any

from veridic._words import article
from veridic.mypy import errorcodes
from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._any_overrides import classes


def report(checker: TypeChecker) -> None:
    """Report each attribute declared trusted over a base's writable, wider one."""
    for info in classes(checker.tree):
        for name, symbol in info.names.items():
            own = symbol.node
            if not isinstance(own, Var) or own.type is None or not holds_trusted(own.type):
                continue
            for base in info.mro[1:]:
                found = base.names.get(name)
                if found is None:
                    continue
                written = _written_as(found.node)
                if written is not None:
                    written = _as_seen_from(info, base, written)
                if written is not None and _admits_other(written, own.type):
                    _fail(checker, name, own, written, base)
                break  # the nearest base's declaration is the one a caller writes through


def _as_seen_from(info: TypeInfo, base: TypeInfo, declared: Type) -> Type:
    """``declared``, a member type of generic ``base``, with its type variables filled in as
    ``info`` fills them (``Box[TrustedInstruction]``'s ``item: T`` takes a trusted text)."""
    if not base.type_vars:
        return declared
    itself = fill_typevars_with_any(info)
    instance = itself.partial_fallback if isinstance(itself, TupleType) else itself
    mapped = map_instance_to_supertype(instance, base)
    return expand_type_by_instance(declared, mapped)


def _admits_other(written: Type, own: Type) -> bool:
    """Whether a write checked against ``written`` may put there what ``own`` does not hold.

    ``None`` is no text: a base's ``prompt: TrustedInstruction | None = None`` that a subclass
    declares ``TrustedInstruction`` (ordinary dataclass and model code) lets no write give a
    ``str`` the brand. ``Any`` takes any text, and counts."""
    proper = get_proper_type(written)
    items = proper.relevant_items() if isinstance(proper, UnionType) else [proper]
    return any(
        isinstance(item, AnyType) or not (isinstance(item, NoneType) or is_subtype(item, own))
        for item in map(get_proper_type, items)
    )


def _written_as(node: SymbolNode | None) -> Type | None:
    """The type a write of the member ``node`` is checked against: an attribute's that is
    not ``Final``, or a property setter's value; ``None`` when it cannot be written."""
    if isinstance(node, Var):
        if (
            node.is_final
            or node.type is None
            or (node.is_property and not node.is_settable_property)
        ):
            return None
        return node.type
    if isinstance(node, OverloadedFuncDef) and node.is_property and len(node.items) > 1:
        setter = node.items[1]
        function = setter.func if isinstance(setter, Decorator) else setter
        signature = get_proper_type(getattr(function, "type", None))
        if isinstance(signature, CallableType) and len(signature.arg_types) > 1:
            return signature.arg_types[1]
    return None


def _fail(checker: TypeChecker, name: str, own: Var, written: Type, base: TypeInfo) -> None:
    assert own.type is not None
    mine = format_type(own.type, checker.options)
    theirs = format_type(written, checker.options)
    checker.fail(
        f'class "{own.info.name}" got "{name}" declared {mine} over the attribute of its base '
        f'class "{base.name}", which takes {theirs}: code holding {article(base.name)} writes any '
        f"{theirs} there (a reply, a request's text), mypy checks that write against "
        f"{base.name}, and reads of this class then type it trusted although nothing minted "
        "it, which a TrustedText position prints in the capability section; declare it as "
        f"the base does ({theirs}) and mint where the text is written, or declare the "
        f"base's attribute {mine} too",
        own if own.line > 0 else own.info.defn,  # a plugin's attribute has no line of its own
        code=errorcodes.FORGE,
    )
