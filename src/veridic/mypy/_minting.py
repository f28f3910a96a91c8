"""Call hook: ``instruction()`` and every ``LiteralString`` parameter get text written in code.

Hook: ``get_function_hook`` and ``get_method_hook`` for every callee that has a
parameter annotated ``LiteralString`` (``veridic.instruction``, ``join``'s
separator, and any function or method of the user's own).

What it changes: nothing in the inferred types. It reports ``veridic-literal``
when an argument in such a position is not text written in code (see
``_code_text``), and ``veridic-any`` when it is of type ``Any``. A parameter typed
``TrustedText`` (``LiteralString | TrustedInstruction``: a component's name, hint
and offer, a ``Deny`` reason, an external tool's ``source``, ``BootError``'s reason,
any function of the user's own) takes text written in code or a minted
``TrustedInstruction``; anything else is ``veridic-literal``, with a note on how
to mint.

Why: mypy reads ``LiteralString`` as ``str`` (python/mypy#12554), so without
the plugin ``instruction(user_input)`` type-checks and only the run-time check
can catch it. Checking the callers of every ``LiteralString`` function is what
lets a helper take a ``LiteralString`` parameter and pass it on to
``instruction()``: the literal is checked where it is written.

Not checked: calls of an overloaded function (overloads use ``LiteralString``
to refine return types, as typeshed's ``str`` methods do), and ``LiteralString``
nested in another type (``list[LiteralString]``). A call through a value whose
type still shows the ``LiteralString`` parameter is checked too; a function
passed on as a value, whose type then says ``str``, is refused where it is
passed (``_escapes``).
"""

from __future__ import annotations

from collections.abc import Iterable

from mypy.checker import TypeChecker
from mypy.nodes import ARG_STAR, ARG_STAR2
from mypy.plugin import FunctionContext, MethodContext
from mypy.types import Instance, LiteralType, NoneType, Type, UnionType, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_guard import any_value, is_any
from veridic.mypy._code_text import AnyTyped, NotWritten, Verdict, classify, describe
from veridic.mypy._literal_string import union_items
from veridic.mypy._signature import (
    Argument,
    Callee,
    Role,
    arguments,
    is_trusted_instance,
    values,
)

_INSTRUCTION_ADVICE = (
    "write the text in the call as a string literal (or a Final str constant), "
    "place outside text as data with Composer.data() or Composer.user(), "
    "or vouch for it with a TrustPolicy"
)
_HELPER_ADVICE = (
    "pass a string literal, a Final str constant, a Literal[...] value, or a LiteralString "
    "parameter of the calling function"
)


def check(ctx: FunctionContext | MethodContext, callee: Callee, checker: TypeChecker) -> None:
    """Report every argument of a ``LiteralString`` parameter that is not written in code."""
    check_arguments(callee, arguments(ctx, callee), checker)


def check_arguments(callee: Callee, given: Iterable[Argument], checker: TypeChecker) -> None:
    """:func:`check` for arguments already matched to ``callee``'s parameters."""
    for argument in given:
        if argument.role not in (Role.CODE_TEXT, Role.TRUSTED_TEXT):
            continue
        trusted_text = argument.role is Role.TRUSTED_TEXT
        for expr, typ in values(argument, checker):
            if not _may_be_text(typ):
                continue  # None for an optional parameter, or a type mypy refuses itself
            if trusted_text and _is_minted(typ):
                continue
            if expr is argument.expr and argument.kind in (ARG_STAR, ARG_STAR2):
                unpacked = describe(expr, checker) + ", unpacked"
                verdict: Verdict = AnyTyped(unpacked) if is_any(typ) else NotWritten(unpacked)
            else:
                verdict = classify(expr, checker)
            if isinstance(verdict, AnyTyped):
                message = any_value(callee.display, argument.formal, verdict.what)
                checker.fail(message, expr, code=errorcodes.ANY)
            elif isinstance(verdict, NotWritten) and trusted_text:
                message = _trusted_text_message(callee, argument.formal, verdict)
                checker.fail(message, expr, code=errorcodes.LITERAL)
                checker.note(_TRUSTED_TEXT_NOTE, expr, code=errorcodes.LITERAL)
            elif isinstance(verdict, NotWritten):
                message = _message(callee, argument.formal, verdict)
                checker.fail(message, expr, code=errorcodes.LITERAL)


def _is_minted(typ: Type) -> bool:
    """``TrustedInstruction`` (or optional): minted already, so a trusted position takes it."""
    items = [i for i in union_items(typ) if not isinstance(i, NoneType)]
    return bool(items) and all(is_trusted_instance(item) for item in items)


def _may_be_text(typ: Type) -> bool:
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return any(_may_be_text(item) for item in proper.items)
    if isinstance(proper, LiteralType):
        proper = proper.fallback
    if isinstance(proper, Instance):
        return proper.type.has_base(_names.STR)
    return not isinstance(proper, NoneType)


_TRUSTED_TEXT_NOTE = (
    "A TrustedText parameter (LiteralString | TrustedInstruction) is printed in the "
    "capability section, which instructs the model. Write the text in the call, use a Final "
    'constant, or mint it: instruction("...") for a literal, an InstructionField read, join() '
    'of trusted parts, TrustPolicy("name").vouch(text, reason=...). Outside text (a reply, an '
    "exception's message) belongs in the log or in Composer.data(), not here"
)


def _trusted_text_message(callee: Callee, formal: str, verdict: NotWritten) -> str:
    return (
        f"{callee.display} takes trusted text for {formal} (TrustedText: text written in code "
        f"or a minted TrustedInstruction), got {verdict.what}; "
        f"{_trusted_text_advice(verdict)}"
    )


def _trusted_text_advice(verdict: NotWritten) -> str:
    if verdict.what.endswith("of type UntrustedText"):
        return "outside text may not reach the capability section: log it, or place it as data"
    return "write it in code, or mint it (see the note)"


def _message(callee: Callee, formal: str, verdict: NotWritten) -> str:
    if callee.fullname == _names.INSTRUCTION:
        return (
            f"instruction() mints only text written in code, got {verdict.what}; "
            f"{verdict.advice or _INSTRUCTION_ADVICE}"
        )
    return (
        f"{callee.display} takes text written in code for {formal} (a LiteralString "
        f"parameter), got {verdict.what}; {verdict.advice or _HELPER_ADVICE}"
    )
