"""``setattr()`` does not write outside text into an attribute declared trusted.

mypy checks ``page.prompt = reply`` against the attribute's declared type, but not
``setattr(page, "prompt", reply)`` nor ``object.__setattr__(page, "prompt", reply)``
(the way into a frozen dataclass): both take any ``object``. The attribute keeps its
declared type, so ``Composer().system(page.prompt)`` type-checks, and the run time
refuses the plain ``str`` (or a ``TrustedText`` position prints it in the capability
section).

Hook (``veridic-forge``): every call of ``setattr()`` and ``object.__setattr__()`` on
an instance or a class whose attribute of that name is declared to hold a
``TrustedInstruction`` (in a container, a union, a ``TypedDict``), with a value whose
type mypy would not accept in a plain assignment; or named by text not known in the
code, on an object with such an attribute, unless the value cannot be text (a
``float``). A value typed ``Any`` into an attribute
named in the code is ``veridic-any``, as ``page.prompt = loose`` is.

Not seen: a write through ``vars(page)`` or ``page.__dict__`` (typed ``dict[str, Any]``).
"""

from __future__ import annotations

from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import StrExpr, TypeInfo, Var
from mypy.plugin import FunctionContext, MethodContext
from mypy.subtypes import is_subtype
from mypy.types import CallableType, Instance, Type, TypeType, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted, may_be_text
from veridic.mypy._any_guard import is_any

WRITERS: Final = frozenset({"builtins.setattr", "builtins.object.__setattr__"})


def check(callee: str, ctx: FunctionContext | MethodContext, checker: TypeChecker) -> None:
    """Report a ``setattr()`` that writes a value of another type into a trusted attribute."""
    if _names.in_package(checker.tree.fullname):
        return
    if len(ctx.args) < 3 or any(len(group) != 1 for group in ctx.args[:3]):
        return
    info = _class_of(get_proper_type(ctx.arg_types[0][0]))
    if info is None:
        return
    name, value = ctx.args[1][0], ctx.arg_types[2][0]
    code = errorcodes.FORGE
    if isinstance(name, StrExpr):
        declared = _declared(info, name.value)
        if declared is None or not holds_trusted(declared):
            return
        if is_any(value):
            code = errorcodes.ANY  # as ``page.prompt = loose`` is (``_any_declared``)
        elif is_subtype(value, declared):
            return
        shown = format_type(declared, checker.options)
        what = f'the attribute "{name.value}" of "{info.name}", declared {shown}'
    else:
        trusted = sorted(
            attribute
            for attribute, declared in _attributes(info)
            if holds_trusted(declared) and not is_subtype(value, declared)
        )
        if not may_be_text(value, checker):
            return  # ``setattr(self, key, 0.2)`` over tuning values: no text to forge
        if not trusted:
            return
        what = (
            f'an attribute of "{info.name}" named by text not known in the code (its '
            f"attributes {', '.join(trusted[:3])} hold trusted text)"
        )
    checker.fail(
        f"{callee.removeprefix('builtins.')}() got a value of type "
        f"{format_type(value, checker.options)} for {what}: mypy checks no setattr() against "
        "the attribute's type, so reads of it are typed trusted while it holds whatever was "
        "written, which the composer refuses and a TrustedText position prints in the "
        "capability section; assign the attribute by its name (mypy checks that), and mint "
        'the text with instruction() or vouch for it with TrustPolicy("name").vouch(text, '
        "reason=...)",
        ctx.context,
        code=code,
    )


def _class_of(typ: Type) -> TypeInfo | None:
    proper = get_proper_type(typ)
    if isinstance(proper, CallableType) and proper.is_type_obj():
        return proper.type_object()
    if isinstance(proper, TypeType):
        proper = get_proper_type(proper.item)
    return proper.type if isinstance(proper, Instance) else None


def _declared(info: TypeInfo, name: str) -> Type | None:
    symbol = info.get(name)
    node = None if symbol is None else symbol.node
    return node.type if isinstance(node, Var) else None


def _attributes(info: TypeInfo) -> list[tuple[str, Type]]:
    return [
        (name, symbol.node.type)
        for base in info.mro
        for name, symbol in base.names.items()
        if isinstance(symbol.node, Var) and symbol.node.type is not None
    ]
