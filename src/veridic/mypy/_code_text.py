"""Is this argument text written in code? The one test behind ``veridic-literal``.

Text is written in code when it is:

- a string literal (implicit concatenation and f-strings without values are
  literals to mypy too);
- ``+`` of two such texts, or ``a if cond else b`` of two such texts;
- a ``Final`` name bound to a literal, in this module or imported;
- a value whose type is ``Literal[...]`` (of ``str``);
- a parameter of an enclosing function annotated ``LiteralString``, still
  holding what the caller passed (the plugin checks those callers the same
  way, so the literal is checked where it is written);
- the variable of a loop or comprehension over such a ``*args`` parameter, or
  over a list, tuple or set display of such texts, bound by nothing else.

Everything else is not: a variable, an f-string with values, ``str(x)``,
``%``, ``.format()``, any other call, a ``cast()``, ``UntrustedText``.
The verdict says which of these it was, so the message can say what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    ARG_STAR,
    CallExpr,
    CastExpr,
    ConditionalExpr,
    Expression,
    FuncItem,
    ListExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    RefExpr,
    SetExpr,
    StrExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    ProperType,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names
from veridic.mypy._literal_string import mentions_literal_string
from veridic.mypy._rebinding import loop_source, rebinds

_MAX_VALUES: Final = 64
"""Past this many possible values (``a if x else b`` chains), stop listing them."""


@dataclass(frozen=True, slots=True)
class Written:
    """Text written in code; ``values`` are its possible values when the code shows them."""

    values: frozenset[str] | None


@dataclass(frozen=True, slots=True)
class NotWritten:
    """Text from somewhere else: ``what`` names it for a message, ``advice`` says what to do."""

    what: str
    advice: str = ""


@dataclass(frozen=True, slots=True)
class AnyTyped:
    """A value of type ``Any``: nothing can be said about where it came from."""

    what: str


Verdict = Written | NotWritten | AnyTyped

_UNKNOWN: Final = Written(None)


def classify(expr: Expression, checker: TypeChecker) -> Verdict:
    """Decide whether ``expr`` (already type-checked) is text written in code."""
    if isinstance(expr, StrExpr):
        return Written(frozenset({expr.value}))
    if isinstance(expr, OpExpr) and expr.op == "+":
        return _concatenation(classify(expr.left, checker), classify(expr.right, checker))
    if isinstance(expr, ConditionalExpr):
        return _either(classify(expr.if_expr, checker), classify(expr.else_expr, checker))
    typ = checker.lookup_type_or_none(expr)
    proper = None if typ is None else get_proper_type(typ)
    if isinstance(proper, AnyType):
        if proper.type_of_any == TypeOfAny.from_error:
            return _UNKNOWN  # mypy has reported this expression already
        return AnyTyped(describe(expr, checker))
    constant = _final_value(expr, checker)
    if constant is not None:
        return Written(frozenset({constant}))
    values = _literal_values(proper)
    if values is not None:
        return Written(values)
    if isinstance(expr, NameExpr) and (
        _is_code_parameter(expr, checker) or _iterates_code_text(expr, checker)
    ):
        return _UNKNOWN
    return _not_written(expr, proper, checker)


def _final_value(expr: Expression, checker: TypeChecker) -> str | None:
    """The literal a ``Final`` name or attribute is bound to, if it is one."""
    variable = None
    if isinstance(expr, RefExpr) and isinstance(expr.node, Var):
        variable = expr.node
    elif isinstance(expr, MemberExpr):
        # A class attribute (``Prompts.TONE``, ``self.TONE``): mypy leaves ``node`` unset.
        owner = expr.expr.node if isinstance(expr.expr, RefExpr) else None
        if not isinstance(owner, TypeInfo):
            receiver = checker.lookup_type_or_none(expr.expr)
            proper = None if receiver is None else get_proper_type(receiver)
            owner = proper.type if isinstance(proper, Instance) else None
        symbol = None if owner is None else owner.get(expr.name)
        variable = symbol.node if symbol is not None and isinstance(symbol.node, Var) else None
    if variable is None or not variable.is_final:
        return None
    return variable.final_value if isinstance(variable.final_value, str) else None


def _concatenation(left: Verdict, right: Verdict) -> Verdict:
    if not isinstance(left, Written):
        return left
    if not isinstance(right, Written):
        return right
    if left.values is None or right.values is None:
        return _UNKNOWN
    if len(left.values) * len(right.values) > _MAX_VALUES:
        return _UNKNOWN
    return Written(frozenset(a + b for a, b in product(left.values, right.values)))


def _either(first: Verdict, second: Verdict) -> Verdict:
    if not isinstance(first, Written):
        return first
    if not isinstance(second, Written):
        return second
    if first.values is None or second.values is None:
        return _UNKNOWN
    both = first.values | second.values
    return Written(both) if len(both) <= _MAX_VALUES else _UNKNOWN


def _literal_values(typ: ProperType | None) -> frozenset[str] | None:
    """The values of a ``Literal[...]`` str type (or a union of them), else ``None``."""
    if isinstance(typ, UnionType):
        found: set[str] = set()
        for item in typ.items:
            values = _literal_values(get_proper_type(item))
            if values is None:
                return None
            found |= values
        return frozenset(found)
    if isinstance(typ, LiteralType):
        if typ.fallback.type.fullname == _names.STR and isinstance(typ.value, str):
            return frozenset({typ.value})
        return None
    if isinstance(typ, Instance) and typ.type.fullname == _names.STR:
        # A literal expression or a Final name: mypy keeps its value alongside ``str``.
        return _literal_values(typ.last_known_value)
    return None


def _owner(expr: NameExpr, checker: TypeChecker) -> FuncItem | None:
    """The enclosing function that ``expr`` is a parameter of, if any."""
    for function in checker.scope.stack:
        if isinstance(function, FuncItem) and any(
            argument.variable is expr.node for argument in function.arguments
        ):
            return function
    return None


def _is_code_parameter(expr: NameExpr, checker: TypeChecker) -> bool:
    """A parameter declared ``LiteralString`` that its function never binds to anything else."""
    variable = expr.node
    if not isinstance(variable, Var) or variable.type is None:
        return False
    if not mentions_literal_string(variable.type):
        return False
    owner = _owner(expr, checker)
    return owner is not None and not rebinds(owner, variable)


def _iterates_code_text(expr: NameExpr, checker: TypeChecker) -> bool:
    """A loop variable over a ``*args: LiteralString`` parameter or a display of code texts."""
    variable = expr.node
    if not isinstance(variable, Var):
        return False
    scope = checker.scope.stack[-1]
    if isinstance(scope, FuncItem):
        body = scope.body.body
    elif isinstance(scope, MypyFile):
        body = scope.defs
    else:
        return False
    source = loop_source(body, variable)
    if isinstance(source, ListExpr | TupleExpr | SetExpr):
        return all(isinstance(classify(item, checker), Written) for item in source.items)
    return isinstance(source, NameExpr) and _is_code_star_parameter(source, checker)


def _is_code_star_parameter(expr: NameExpr, checker: TypeChecker) -> bool:
    """``*texts: LiteralString`` of an enclosing function that never binds ``texts`` again."""
    owner = _owner(expr, checker)
    signature = None if owner is None else owner.type
    if owner is None or not isinstance(signature, CallableType):
        return False
    for argument, declared in zip(owner.arguments, signature.arg_types, strict=False):
        if argument.variable is expr.node:
            return (
                argument.kind == ARG_STAR
                and mentions_literal_string(declared)
                and not rebinds(owner, argument.variable)
            )
    return False


def _not_written(expr: Expression, typ: ProperType | None, checker: TypeChecker) -> NotWritten:
    what = describe(expr, checker)
    brand = typ.type.fullname if isinstance(typ, Instance) else None
    if brand == _names.UNTRUSTED:
        return NotWritten(
            f"{what} of type UntrustedText",
            "place outside text as data with Composer.data() or Composer.user()",
        )
    if brand == _names.TRUSTED:
        return NotWritten(
            f"{what} of type TrustedInstruction",
            "it is trusted already: pass it on as it is, or join() it with other parts",
        )
    if isinstance(expr, CallExpr) and isinstance(expr.analyzed, CastExpr):
        return NotWritten(
            what, "a cast hides where the text came from: vouch for it with a TrustPolicy"
        )
    return NotWritten(what)


def describe(expr: Expression, checker: TypeChecker) -> str:
    """Name ``expr`` for a message, the way its author would: 'the parameter "name"'."""
    if isinstance(expr, NameExpr):
        if isinstance(expr.node, Var) and expr.node.is_final:
            return f'the Final name "{expr.name}", whose value is not a literal'
        if _owner(expr, checker) is None:
            return f'the variable "{expr.name}"'
        if _is_code_parameter(expr, checker):
            return f'the LiteralString parameter "{expr.name}", whose value is not known here'
        declared = expr.node.type if isinstance(expr.node, Var) else None
        if declared is not None and mentions_literal_string(declared):
            return (
                f'the LiteralString parameter "{expr.name}", which its function binds to '
                "other text (mypy lets it hold any str then)"
            )
        return f'the parameter "{expr.name}"'
    if isinstance(expr, MemberExpr):
        return f'the attribute "{expr.name}"'
    if isinstance(expr, OpExpr):
        if expr.op == "%":
            return "a %-formatted string"
        if expr.op == "+":
            return "a concatenation"
    if isinstance(expr, CallExpr) and isinstance(expr.analyzed, CastExpr):
        return "a cast()"
    if isinstance(expr, CallExpr):
        return _describe_call(expr)
    typ = checker.lookup_type_or_none(expr)
    shown = "unknown" if typ is None else format_type(typ, checker.options)
    return f"an expression of type {shown}"


def _describe_call(call: CallExpr) -> str:
    callee = call.callee
    if isinstance(callee, MemberExpr) and isinstance(callee.expr, StrExpr):
        if callee.name == "join" and callee.expr.value == "":
            return "an f-string with values (or a str.join() result)"
        if callee.name == "format":
            return "a str.format() result"
    if isinstance(callee, NameExpr | MemberExpr):
        if callee.fullname == _names.STR:
            return "a str() conversion"
        return f'the result of "{callee.name}()"'
    return "the result of a call"
