"""Is this argument text written in code? The one test behind ``veridic-literal``.

Text is written in code when it is:

- a string literal (implicit concatenation and f-strings without values are
  literals to mypy too);
- ``+`` of two such texts, or ``a if cond else b`` of two such texts;
- a ``Final`` name bound to a literal, in this module or imported; read through
  an instance, only if no instance can hold its own value (a constructor
  parameter of that name, a method assigning it);
- a value whose type is ``Literal[...]`` (of ``str``) that the plugin sees come
  from code: a parameter so typed (``_any_guard`` refuses ``Any`` from its
  callers), a variable declared so, an attribute or item of a variable that took
  no ``Any`` nor ``cast()`` (``_literal_data``);
- a parameter of an enclosing function annotated ``LiteralString``, still
  holding what the caller passed (the plugin checks those callers the same
  way, so the literal is checked where it is written): bound to nothing else
  (``_rebinding``), with a default written in code, and reached through no
  declaration of plain ``str`` (``_overrides``);
- the variable of a loop or comprehension over such a ``*args`` parameter, over
  a list, tuple or set display of such texts, or over a ``Final`` tuple of
  literals, bound by nothing else.

Everything else is not: a variable, an f-string with values, ``str(x)``,
``%``, ``.format()``, any other call, a ``cast()``, ``UntrustedText``.
The verdict says which of these it was, so the message can say what to do.
A name is judged by how it is bound, not by its narrowed type: mypy narrows a
loop variable over literals to them and keeps that after an import rebinds it.
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
    Decorator,
    EllipsisExpr,
    Expression,
    FuncItem,
    IndexExpr,
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
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypeOfAny,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names
from veridic.mypy._literal_data import any_source, declared_source
from veridic.mypy._literal_string import mentions_literal_string
from veridic.mypy._overrides import reached_as_str, unchecked_way_in
from veridic.mypy._rebinding import assigns_attribute, being_checked, loop_source, rebinds
from veridic.mypy._signature import signature_of

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
    if isinstance(expr, CallExpr) and isinstance(expr.analyzed, CastExpr):
        return _not_written(expr, proper, checker)  # even to a Literal type
    if isinstance(expr, MemberExpr):
        shadow = _shadowed_final(expr, checker)
        if shadow is not None:
            return NotWritten(shadow, _SHADOW_ADVICE)
    constant = _final_value(expr, checker)
    if constant is not None:
        return Written(frozenset({constant}))
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
        return _name(expr, expr.node, proper, checker)
    values = _literal_values(proper)
    if values is not None:
        return _literal_data(expr, values, any_source(expr, checker), checker)
    return _not_written(expr, proper, checker)


def _name(
    expr: NameExpr, variable: Var, proper: ProperType | None, checker: TypeChecker
) -> Verdict:
    """A name: a parameter, a variable declared ``Literal[...]``, or a loop variable.

    Its narrowed type is not enough: mypy narrows a loop variable over literals to
    them, and keeps that type after an import or a ``global`` assignment elsewhere
    binds the name again. So a name is judged by how it is bound.
    """
    parameter = _parameter(expr, checker)
    if parameter is not None:
        return parameter
    owner = _owner(expr, checker)
    declared = None if variable.type is None else _literal_type(variable.type)
    if owner is not None:  # a parameter not typed LiteralString: its callers are checked
        if declared is None:
            return _not_written(expr, proper, checker)
        if rebinds(owner, variable):
            return NotWritten(
                f'the parameter "{expr.name}", which its function binds to other text'
            )
        return Written(declared)
    if not variable.is_inferred:  # declared, e.g. mode: Mode = ...
        if declared is None:
            return _not_written(expr, proper, checker)
        return _literal_data(expr, declared, declared_source(expr, variable, checker), checker)
    if _iterates_code_text(expr, checker):
        values = _literal_values(proper)
        return _UNKNOWN if values is None else Written(values)
    return _not_written(expr, proper, checker)


def _literal_data(
    expr: Expression, values: frozenset[str], source: str | None, checker: TypeChecker
) -> Verdict:
    if source is None:
        return Written(values)
    return NotWritten(
        f"{describe(expr, checker)}, typed Literal but filled by {source}", _LITERAL_ADVICE
    )


def _literal_type(typ: Type) -> frozenset[str] | None:
    """The values of a type declared ``Literal[...]`` (not a ``str`` narrowed to one)."""
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType):
        if not all(isinstance(get_proper_type(item), LiteralType) for item in proper.items):
            return None
    elif not isinstance(proper, LiteralType):
        return None
    return _literal_values(proper)


_SHADOW_ADVICE: Final = (
    "use the constant through the class (Prompts.TONE), where no instance can shadow it"
)
_LITERAL_ADVICE: Final = (
    "a Literal type that came from Any is not code: give the data its type where it comes "
    "from (a pydantic model or TypeAdapter checks a Literal), or write the texts in code "
    "and pick one by the value"
)
_PARAMETER_ADVICE: Final = (
    "declare it LiteralString there too, or mint the text where it is written and pass "
    "the TrustedInstruction"
)


def _shadowed_final(expr: MemberExpr, checker: TypeChecker) -> str | None:
    """Whether an instance may hold its own value for the ``Final`` class attribute ``expr``.

    Read through an instance, a ``Final`` class attribute is the class's value unless
    the instance sets one: a dataclass (or pydantic, attrs, ``NamedTuple``) field is
    set by the constructor, and a method may assign it (mypy reports that, but a
    ``# type: ignore`` silences it).
    """
    receiver = checker.lookup_type_or_none(expr.expr)
    proper = None if receiver is None else get_proper_type(receiver)
    if not isinstance(proper, Instance):
        return None  # read from the class itself, or not an attribute of a class
    symbol = proper.type.get(expr.name)
    variable = None if symbol is None else symbol.node
    if not isinstance(variable, Var) or not variable.is_final:
        return None
    where = f'the attribute "{expr.name}", which an instance of {proper.type.name} '
    constructor = signature_of(proper.type)
    if constructor is not None and expr.name in constructor.arg_names:
        return where + f'sets itself (its constructor takes "{expr.name}")'
    for info in proper.type.mro:
        for node in info.names.values():
            function = node.node.func if isinstance(node.node, Decorator) else node.node
            if isinstance(function, FuncItem) and assigns_attribute(function.body.body, expr.name):
                return where + f"may set itself (a method of {info.name} assigns it)"
    return None


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
    for scope in checker.scope.stack:
        if not isinstance(scope, FuncItem):
            continue
        function = being_checked(scope)
        if any(argument.variable is expr.node for argument in function.arguments):
            return function
    return None


def _parameter(expr: NameExpr, checker: TypeChecker) -> Verdict | None:
    """For a ``LiteralString`` parameter of an enclosing function: whether it holds code text.

    ``None`` when ``expr`` is no such parameter. It holds text written in code while
    every way in is checked: the function never binds it to anything else, its
    default is code text, and no declaration that callers may go through (a base
    class's or Protocol's method, the other of ``__init__``/``__new__``) takes plain
    ``str`` there (``_overrides``).
    """
    variable = expr.node
    if not isinstance(variable, Var) or variable.type is None:
        return None
    if not mentions_literal_string(variable.type):
        return None
    owner = _owner(expr, checker)
    if owner is None:
        return None
    argument = next(a for a in owner.arguments if a.variable is variable)
    name = f'the LiteralString parameter "{expr.name}"'
    if rebinds(owner, variable):
        return NotWritten(
            f"{name}, which its function binds to other text (mypy lets it hold any str then)"
        )
    if argument.initializer is not None and not _no_text(argument.initializer, checker):
        default = classify(argument.initializer, checker)
        if not isinstance(default, Written):
            what = default.what if isinstance(default, NotWritten | AnyTyped) else "unknown"
            return NotWritten(
                f"{name}, whose default is not text written in code ({what})",
                "write the default as a literal or a Final str constant",
            )
    unchecked = unchecked_way_in(owner, checker)
    if unchecked is not None:
        return NotWritten(
            f"{name} of {unchecked}",
            "type the parameter TrustedInstruction and mint the text with instruction() "
            "where it is written, or make it a plain function called by its own name",
        )
    reached = reached_as_str(owner, argument, checker)
    if reached is not None:
        return NotWritten(
            f"{name}, which callers reach through {reached}: a caller holding that type "
            "passes any str",
            _PARAMETER_ADVICE,
        )
    return _UNKNOWN


def _no_text(expr: Expression, checker: TypeChecker) -> bool:
    """``None`` or ``...``: a default that is no text at all."""
    if isinstance(expr, EllipsisExpr):
        return True
    typ = checker.lookup_type_or_none(expr)
    return isinstance(None if typ is None else get_proper_type(typ), NoneType)


def _iterates_code_text(expr: NameExpr, checker: TypeChecker) -> bool:
    """A loop variable over a ``*args: LiteralString`` parameter or a display of code texts."""
    variable = expr.node
    if not isinstance(variable, Var):
        return False
    scope = checker.scope.stack[-1]
    if isinstance(scope, FuncItem):
        body = being_checked(scope).body.body
    elif isinstance(scope, MypyFile):
        body = scope.defs
    else:
        return False
    source = loop_source(body, variable)
    if isinstance(source, ListExpr | TupleExpr | SetExpr):
        return all(isinstance(classify(item, checker), Written) for item in source.items)
    if isinstance(source, NameExpr) and _is_code_star_parameter(source, checker):
        return True
    return source is not None and _literal_items(source, checker)


def _literal_items(source: Expression, checker: TypeChecker) -> bool:
    """A ``Final`` tuple of literals (mypy keeps the items' values), not filled from ``Any``."""
    if not isinstance(source, RefExpr) or not isinstance(source.node, Var):
        return False
    if not source.node.is_final:
        return False
    typ = checker.lookup_type_or_none(source)
    proper = None if typ is None else get_proper_type(typ)
    return isinstance(proper, TupleType) and all(
        _literal_values(get_proper_type(item)) is not None for item in proper.items
    )


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
                and reached_as_str(owner, argument, checker) is None
                and unchecked_way_in(owner, checker) is None
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
        parameter = _parameter(expr, checker)
        if isinstance(parameter, NotWritten):
            return parameter.what
        if parameter is not None:
            return f'the LiteralString parameter "{expr.name}", whose value is not known here'
        return f'the parameter "{expr.name}"'
    if isinstance(expr, MemberExpr):
        return f'the attribute "{expr.name}"'
    if isinstance(expr, IndexExpr) and isinstance(expr.index, StrExpr):
        return f'the item "{expr.index.value}"'
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
