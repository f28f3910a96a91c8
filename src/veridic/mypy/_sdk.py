"""Method hook: provider SDK calls made outside the gateway give instructions only in trusted text.

Hook: ``get_method_hook`` for the SDK methods that send a prompt to a model,
recognised by full name (module, class, method), so no copy of the SDKs'
signatures is needed and any SDK version with the same layout is covered:

==========================================  =====================  ====================
methods                                     system prompt          messages
==========================================  =====================  ====================
``anthropic`` ``messages`` (and ``beta``):  ``system=``            ``messages=``
``create``, ``stream``, ``parse``,
``tool_runner``
``openai`` ``responses`` (and ``beta``):    ``instructions=``      ``input=``
``create``, ``stream``, ``parse``
``openai`` ``chat.completions``:                                   ``messages=``
``create``, ``stream``, ``parse``
==========================================  =====================  ====================

Each on the sync and async resource and on their ``with_raw_response`` and
``with_streaming_response`` wrappers.

What it changes: nothing in the inferred types. It reports ``veridic-sdk``
when

- the system prompt is anything but a ``TrustedInstruction`` (``None`` and
  the SDK's ``omit`` / ``NOT_GIVEN`` are fine), or, for Anthropic, a list
  literal of text blocks whose ``"text"`` is a ``TrustedInstruction``;
- a message with role ``system`` or ``developer`` has content that is not a
  ``TrustedInstruction`` (or a list literal of text parts whose ``"text"``
  is one). Messages written as dict literals in a list literal are read one
  by one; any other value is judged by its type: a ``TypedDict`` that may be
  a system or developer message with ``str`` content (the SDK's own message
  unions) could carry untrusted instructions, and ``Any`` could be anything.

Why: ``ModelGateway`` is the one road to a model (it renders a ``Prompt``
whose system message was checked), but nothing stops code from calling the
SDK directly with ``system=ticket_text``. The SDKs type these parameters as
``str``; the run-time check cannot see this call; so the type checker must.
Calls inside the ``veridic`` package are the gateway itself and are not
checked.

Not seen: a system prompt smuggled through ``extra_body``, the Batches APIs
(their requests are nested mappings) and the other SDK endpoints that take
instructions (assistants, realtime sessions, agents): docs/providers.md
lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    CallExpr,
    DictExpr,
    Expression,
    ListExpr,
    MemberExpr,
    NameExpr,
    StarExpr,
    StrExpr,
    TupleExpr,
)
from mypy.plugin import MethodContext
from mypy.types import (
    AnyType,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    Type,
    TypedDictType,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes

__all__ = ["Target", "hook", "target"]

_INSTRUCTING_ROLES: Final = frozenset({"system", "developer"})
_TYPE_LIMIT: Final = 80
_SDKS: Final = ("anthropic.", "openai.")
_ABSENT: Final = frozenset({"Omit", "NotGiven"})
"""The SDKs' "not given" sentinels: ``anthropic._types.Omit``, ``openai._types.NotGiven``."""


@dataclass(frozen=True, slots=True)
class _Api:
    sdk: str
    module: re.Pattern[str]
    resource: str
    methods: frozenset[str]
    system: str | None
    messages: str


_APIS: Final = (
    _Api(
        "anthropic",
        re.compile(r"anthropic\.resources\.(beta\.)?messages(\.messages)?"),
        "Messages",
        frozenset({"create", "stream", "parse", "tool_runner"}),
        "system",
        "messages",
    ),
    _Api(
        "openai",
        re.compile(r"openai\.resources\.(beta\.)?responses(\.responses)?"),
        "Responses",
        frozenset({"create", "stream", "parse"}),
        "instructions",
        "input",
    ),
    _Api(
        "openai",
        re.compile(r"openai\.resources\.(beta\.)?chat\.completions(\.completions)?"),
        "Completions",
        frozenset({"create", "stream", "parse"}),
        None,
        "messages",
    ),
)


@dataclass(frozen=True, slots=True)
class Target:
    """An SDK method that sends a prompt, and which of its parameters instruct the model."""

    display: str
    """How messages name it: ``anthropic messages.create()``."""
    system: str | None
    messages: str


def target(fullname: str) -> Target | None:
    """The SDK method named ``fullname`` if it sends a prompt to a model, else ``None``."""
    owner, _, method = fullname.rpartition(".")
    module, _, cls = owner.rpartition(".")
    for api in _APIS:
        if method not in api.methods or not api.module.fullmatch(module):
            continue
        core = cls.removeprefix("Async").removesuffix("WithRawResponse")
        core = core.removesuffix("WithStreamingResponse")
        if core != api.resource:
            continue
        path = module.removeprefix(f"{api.sdk}.resources.").split(".")
        shown = ".".join(dict.fromkeys(path))  # "messages.messages" reads "messages"
        return Target(f"{api.sdk} {shown}.{method}()", api.system, api.messages)
    return None


def hook(fullname: str) -> Callable[[MethodContext], Type] | None:
    """The method hook for ``fullname``, when it is one of the SDK methods above."""
    if not fullname.startswith(_SDKS):
        return None  # the hook is asked about every method call: answer most at once
    found = target(fullname)
    return None if found is None else partial(check, found)


def check(found: Target, ctx: MethodContext) -> Type:
    """Report every instruction position of the call that is not given trusted text."""
    checker = ctx.api
    if not isinstance(checker, TypeChecker) or _names.in_package(checker.tree.fullname):
        return ctx.default_return_type
    for name, exprs, types in zip(ctx.callee_arg_names, ctx.args, ctx.arg_types, strict=False):
        if name is None:
            continue
        for expr, typ in zip(exprs, types, strict=True):
            if name == found.system:
                _check_system(found, name, expr, typ, checker)
            elif name == found.messages:
                _check_messages(found, name, expr, typ, checker)
    return ctx.default_return_type


# --- the system prompt parameter ---------------------------------------------------------


def _check_system(found: Target, name: str, expr: Expression, typ: Type, chk: TypeChecker) -> None:
    if _trusted_or_absent(typ) or _trusted_blocks(expr, chk):
        return
    chk.fail(
        f"{found.display} got {name}={_shown(expr, typ, chk)}; the system prompt gives the "
        "model instructions, so only TrustedInstruction may go there: mint it with "
        "instruction(), read it from an InstructionField or join() trusted parts, or send "
        "the prompt through veridic.ModelGateway",
        expr,
        code=errorcodes.SDK,
    )


def _trusted_or_absent(typ: Type) -> bool:
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return all(_trusted_or_absent(item) for item in proper.items)
    if isinstance(proper, NoneType):
        return True
    if isinstance(proper, AnyType):
        return proper.type_of_any == TypeOfAny.from_error
    return isinstance(proper, Instance) and (
        proper.type.fullname == _names.TRUSTED or proper.type.name in _ABSENT
    )


def _trusted_blocks(expr: Expression, chk: TypeChecker) -> bool:
    """A list literal of text blocks (dict literals) whose ``"text"`` is trusted."""
    if not isinstance(expr, ListExpr | TupleExpr) or not expr.items:
        return False
    for item in expr.items:
        if not isinstance(item, DictExpr):
            return False
        text = _value(item, "text")
        if text is None or not _trusted_or_absent(_type_of(text, chk)):
            return False
    return True


# --- the messages parameter ----------------------------------------------------------------


def _check_messages(
    found: Target, name: str, expr: Expression, typ: Type, chk: TypeChecker
) -> None:
    if isinstance(expr, ListExpr | TupleExpr):
        for item in expr.items:
            if isinstance(item, DictExpr):
                _check_message_literal(found, name, item, chk)
            else:
                inner = item.expr if isinstance(item, StarExpr) else item
                element = _type_of(inner, chk)
                shown = element
                if isinstance(item, StarExpr):
                    element = _element(element) or element
                _check_message_type(found, name, inner, shown, chk, element)
        return
    proper = get_proper_type(typ)
    if isinstance(proper, Instance) and proper.type.fullname == _names.STR:
        return  # Responses input="text": one user message.
    items = _element(typ)
    _check_message_type(found, name, expr, typ, chk, typ if items is None else items)


def _check_message_literal(found: Target, name: str, item: DictExpr, chk: TypeChecker) -> None:
    role_expr = _value(item, "role")
    if role_expr is None:
        return  # a function call, a tool result: no role, no instructions
    roles = _literal_strings(role_expr, chk)
    if roles is None or not roles & _INSTRUCTING_ROLES:
        return  # a user or assistant message; a non-literal role is mypy's own error
    content = _value(item, "content")
    if content is None:
        return
    if _trusted_or_absent(_type_of(content, chk)) or _trusted_blocks(content, chk):
        return
    role = "/".join(sorted(roles & _INSTRUCTING_ROLES))
    chk.fail(
        f"{found.display} got a {role} message in {name}= whose content is "
        f"{_shown(content, _type_of(content, chk), chk)}; a {role} message gives the model "
        "instructions, so its content must be a TrustedInstruction: mint it with "
        "instruction(), read it from an InstructionField or join() trusted parts, place "
        "outside text in a user message, or send the prompt through veridic.ModelGateway",
        content,
        code=errorcodes.SDK,
    )


def _check_message_type(
    found: Target, name: str, expr: Expression, typ: Type, chk: TypeChecker, element: Type
) -> None:
    problem = _message_type_problem(element)
    if problem is None:
        return
    chk.fail(
        f"{found.display} got {name}={_shown(expr, typ, chk)}, which {problem}; the type "
        "cannot show that its content is trusted: write the messages as a list literal in "
        "the call, each system or developer content a TrustedInstruction (mint it with "
        "instruction(), read it from an InstructionField or join() trusted parts), or send "
        "the prompt through veridic.ModelGateway",
        expr,
        code=errorcodes.SDK,
    )


def _message_type_problem(typ: Type) -> str | None:
    """Why a value of ``typ`` may be a system or developer message with untrusted content."""
    if _is_any(typ):
        return 'is of type "Any" and may hold any message'
    roles = _untrusted_roles(typ)
    if not roles:
        return None
    return f"may hold a {'/'.join(sorted(roles))} message whose content is typed str"


def _is_any(typ: Type) -> bool:
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return any(_is_any(item) for item in proper.items)
    return isinstance(proper, AnyType) and proper.type_of_any != TypeOfAny.from_error


def _untrusted_roles(typ: Type) -> frozenset[str]:
    """The instructing roles a message of ``typ`` may have with content that is not trusted."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return frozenset().union(*(_untrusted_roles(item) for item in proper.items))
    if not isinstance(proper, TypedDictType):
        return frozenset()  # a model object or a plain dict: mypy's own check judges it
    role_type = proper.items.get("role")
    content = proper.items.get("content")
    if role_type is None or content is None or _trusted_content_type(content):
        return frozenset()
    roles = _literal_type_strings(get_proper_type(role_type))
    return _INSTRUCTING_ROLES if roles is None else roles & _INSTRUCTING_ROLES


def _trusted_content_type(typ: Type) -> bool:
    """``TrustedInstruction``, or an iterable of text parts whose ``text`` is one."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return all(_trusted_content_type(item) for item in proper.items)
    if _trusted_or_absent(proper):
        return True
    element = _element(proper)
    if element is None:
        return False
    part = get_proper_type(element)
    parts = part.items if isinstance(part, UnionType) else [part]
    return all(
        isinstance(p := get_proper_type(item), TypedDictType)
        and "text" in p.items
        and _trusted_or_absent(p.items["text"])
        for item in parts
    )


# --- helpers ---------------------------------------------------------------------------------


def _value(item: DictExpr, key: str) -> Expression | None:
    for key_expr, value in item.items:
        if isinstance(key_expr, StrExpr) and key_expr.value == key:
            return value
    return None


def _type_of(expr: Expression, chk: TypeChecker) -> Type:
    found = chk.lookup_type_or_none(expr)
    return found if found is not None else AnyType(TypeOfAny.from_error)


def _literal_strings(expr: Expression, chk: TypeChecker) -> frozenset[str] | None:
    if isinstance(expr, StrExpr):
        return frozenset({expr.value})
    return _literal_type_strings(get_proper_type(_type_of(expr, chk)))


def _literal_type_strings(typ: ProperType) -> frozenset[str] | None:
    """The string values ``typ`` may take when it is a literal (or a union of them)."""
    items = typ.items if isinstance(typ, UnionType) else [typ]
    values: set[str] = set()
    for item in map(get_proper_type, items):
        if isinstance(item, Instance) and item.last_known_value is not None:
            item = item.last_known_value
        if not isinstance(item, LiteralType) or not isinstance(item.value, str):
            return None
        values.add(item.value)
    return frozenset(values)


def _element(typ: Type) -> Type | None:
    """The item type of an iterable type (``list[X]``, ``Iterable[X]``), else ``None``."""
    proper = get_proper_type(typ)
    if not isinstance(proper, Instance) or proper.type.fullname == _names.STR:
        return None
    for base in _bases(proper):
        if base.type.fullname == _names.ITERABLE and len(base.args) == 1:
            return base.args[0]
    return None


def _bases(instance: Instance) -> Iterator[Instance]:
    from mypy.maptype import map_instance_to_supertype

    for info in instance.type.mro:
        if info.fullname == _names.ITERABLE:
            yield map_instance_to_supertype(instance, info)


def _shown(expr: Expression, typ: Type, chk: TypeChecker) -> str:
    """Name ``expr`` and its type for a message: 'the variable "ticket" of type "str"'."""
    if isinstance(expr, NameExpr):
        what = f'the variable "{expr.name}"'
    elif isinstance(expr, MemberExpr):
        what = f'the attribute "{expr.name}"'
    elif isinstance(expr, StrExpr):
        what = "a str literal"
    elif isinstance(expr, ListExpr | TupleExpr):
        what = "a list literal"
    elif (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, MemberExpr)
        and isinstance(expr.callee.expr, StrExpr)
    ):
        what = "a formatted string"  # mypy reads f"..." as "".join([...]) or "...".format()
    elif isinstance(expr, CallExpr) and isinstance(expr.callee, NameExpr | MemberExpr):
        what = f"the result of {expr.callee.name}()"
    else:
        what = "an expression"
    shown = format_type(typ, chk.options)
    if len(shown) > _TYPE_LIMIT:
        shown = f'{shown[: _TYPE_LIMIT - 2]}…"'
    return f"{what} of type {shown}"
