"""Call hook: the brands' NewType constructors are veridic's alone.

Hook: ``get_function_hook`` for ``veridic.text.provenance.TrustedInstruction``
and ``veridic.text.provenance.UntrustedText`` (a call of a NewType is a call of its
class, and mypy reports the class's full name).

What it changes: nothing in the inferred type. Outside the ``veridic``
package it reports ``veridic-forge`` with what to call instead.

Why: a NewType's constructor accepts any ``str`` and is the identity at run
time, so ``TrustedInstruction(user_text)`` satisfies mypy while carrying no
provenance; the composer then refuses it at run time, and the two checks
disagree. Inside veridic the constructors wrap values that were minted.

The first call hook run in a module (or, in a module that makes no call, the end
of its check: ``_escapes``) also walks the module's expressions for

- a brand named anywhere but as the callee of a call or the owner of an
  attribute read (``map(TrustedInstruction, texts)``,
  ``TypeAdapter(TrustedInstruction).validate_python(raw)``, returned, a default,
  held in a dict, a type alias of the module that names one): what calls it later
  gets a value typed as the brand that nothing minted;
- a ``cast()`` whose target names a brand (``cast(TrustedInstruction, text)``,
  ``cast(list[TrustedInstruction], texts)``, a ``TypedDict`` with a brand's item:
  ``cast(Settings, json.loads(raw))``), however deep in a function it hides;
- a function declared to return ``TypeGuard[...]`` or ``TypeIs[...]`` of a type that
  names ``TrustedInstruction``: after ``if vetted(reply):`` mypy reads the reply as
  trusted, whatever the function checked (a cast by another name); unless it returns
  ``is_trusted()`` of the narrowed value, which checks the run time's mint.

The composer refuses such a value at run time, but the positions typed
``TrustedText`` (a ``Deny`` reason, a component's hint, a ``ToolHints`` title, a
``BootError``'s reason) cannot tell it from text written in code: the plugin
accepts a ``TrustedInstruction`` there as minted, and the run time prints it in the
capability section. So each is ``veridic-forge``, as the constructor's call is.
Type-only uses stay clean: annotations, a type alias definition, a ``TypeVar``
bound, ``NewType``, ``TypedDict``, ``NamedTuple``, ``list[TrustedInstruction]()``.

Not seen: a brand reached through a type alias defined in another module (``from
app.types import Forge``; ``veridic hatches`` follows those).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    AssignmentStmt,
    CallExpr,
    CastExpr,
    ClassDef,
    Decorator,
    Expression,
    ExpressionStmt,
    FuncDef,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OpExpr,
    OverloadedFuncDef,
    RefExpr,
    ReturnStmt,
    StrExpr,
    SymbolNode,
    TypeAlias,
    TypeApplication,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext
from mypy.server.subexpr import get_subexpressions
from mypy.subtypes import is_subtype
from mypy.types import (
    CallableType,
    Instance,
    TupleType,
    Type,
    TypedDictType,
    TypeType,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes
from veridic.mypy._rebinding import every_statement

_ADVICE = {
    _names.TRUSTED: (
        "TrustedInstruction(...) forges trust outside veridic: the NewType constructor accepts "
        "any str and records no provenance, so the composer refuses the value at run time; "
        'mint trusted text with instruction("..."), read it from an InstructionField, join() '
        'trusted parts, or vouch for it with TrustPolicy("name").vouch(text, reason=...)'
    ),
    _names.UNTRUSTED: (
        "UntrustedText(...) brands text outside veridic without saying where it came from, "
        "so no error or audit can name its source; brand outside text with "
        'untrusted(text, source="...")'
    ),
}


_VALUE_ADVICE: Final = (
    "a value typed {brand} that nothing minted: the composer "
    "refuses it, but a TrustedText position (a Deny reason, a component's hint, a ToolHints "
    "title) cannot tell it from text written in code and prints it in the capability "
    "section; {fix}"
)
_FIX: Final = {
    _names.TRUSTED: (
        "call instruction() on each text written in code (a lambda or a comprehension around "
        "the call is checked), read outside text into an InstructionField, or vouch for it "
        'with TrustPolicy("name").vouch(text, reason=...)'
    ),
    _names.UNTRUSTED: 'brand outside text with untrusted(text, source="...")',
}


def check(fullname: str, ctx: FunctionContext) -> Type:
    """Report a brand constructor called outside veridic."""
    api = ctx.api
    if isinstance(api, TypeChecker) and not _names.in_package(api.tree.fullname):
        api.fail(_ADVICE[fullname], ctx.context, code=errorcodes.FORGE)
    return ctx.default_return_type


_MADE: dict[str, tuple[MypyFile, list[CallExpr]]] = {}
"""Per module checked in this build: its tree, and its calls of a ``__new__`` by name."""


def forget() -> None:
    """Drop what one build learnt (``VeridicPlugin`` calls this for each new build)."""
    _MADE.clear()


def report_new(checker: TypeChecker) -> None:
    """Report ``str.__new__(cls, text)`` (a ``__new__`` called by its name) that makes
    trusted text: ``cls`` is the class of a ``TrustedInstruction`` (``type(minted)``), or of
    a type variable that one can fill (``type(x)`` for ``x: T``, ``T`` bound to ``str``).

    typeshed types the call as making an instance of ``cls`` from any text, and mypy asks
    no hook about it; at run time it makes an object of veridic's class without its
    provenance, which the composer refuses and a ``TrustedText`` position prints in the
    capability section. A ``str`` subclass's own ``__new__`` (``cls: type[Self]``, ``Self``
    bound to that subclass) makes no trusted text and stays clean. Run at the end of the
    module's check, over the calls :func:`report_values` kept, when mypy has typed them.
    """
    kept = _MADE.pop(checker.tree.fullname, None)
    if kept is None or kept[0] is not checker.tree:
        return
    trusted = trusted_instance(checker)
    if trusted is None:
        return
    for call in kept[1]:
        made = get_proper_type(checker.lookup_type_or_none(call))
        if isinstance(made, TypeVarType) and _text_bound(made, trusted, checker):
            shown = f'a type variable ("{made.name}") that a TrustedInstruction can fill'
        elif isinstance(made, Instance) and made.type.fullname == _names.TRUSTED:
            shown = format_type(made, checker.options)
        else:
            continue
        checker.fail(
            f"__new__() called by its name got the class of {shown}, and makes it from any text: "
            f"{_VALUE_ADVICE.format(brand='TrustedInstruction', fix=_FIX[_names.TRUSTED])}",
            call,
            code=errorcodes.FORGE,
        )


def _text_bound(variable: TypeVarType, trusted: Instance, checker: TypeChecker) -> bool:
    """Whether ``variable`` is bound to text that a ``TrustedInstruction`` can fill (``T``
    bound to ``str``): only such a class reaches ``str.__new__``. An unbounded one
    (``kind.__new__(kind)`` in a generic factory) makes no text."""
    bound = variable.upper_bound
    return is_subtype(trusted, bound) and is_subtype(bound, checker.named_type(_names.STR))


def trusted_instance(checker: TypeChecker) -> Instance | None:
    """``TrustedInstruction`` as a type, if the build holds veridic (else no value can be one)."""
    module, _, name = _names.TRUSTED.rpartition(".")
    tree = checker.modules.get(module)
    symbol = None if tree is None else tree.names.get(name)
    info = None if symbol is None else symbol.node
    return Instance(info, []) if isinstance(info, TypeInfo) else None


def report_values(checker: TypeChecker, expressions: list[Expression], kept: set[int]) -> None:
    """Report a brand used as a value (not called: ``kept`` holds the callees and the owners
    of attribute reads) and a ``cast()`` to a brand, in ``checker``'s module."""
    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    found: list[tuple[Expression, str]] = []
    made = [expr for expr in expressions if isinstance(expr, CallExpr) and _calls_new(expr)]
    if made:
        _MADE[tree.fullname] = (tree, made)
    for expr in expressions:
        if isinstance(expr, CastExpr):
            brand = _brand_in(expr.type)
            if brand is not None:
                message = _cast_message(brand)
                target = get_proper_type(expr.type)
                if isinstance(target, TypedDictType):  # say which TypedDict holds the brand
                    name = brand.rpartition(".")[2]
                    held = f'a cast() to "{target.fallback.type.name}", which holds {name}, '
                    message = message.replace(f"a cast() to {name} ", held, 1)
                checker.fail(message, expr, code=errorcodes.FORGE)
        elif id(expr) not in kept and isinstance(expr, RefExpr):
            brand = brand_named(expr.node)
            if brand is not None:
                found.append((expr, brand))
    if not found:
        return
    type_only = _type_only(tree, expressions)
    for expr, brand in found:
        if id(expr) not in type_only:
            checker.fail(_value_message(brand), expr, code=errorcodes.FORGE)


def _calls_new(call: CallExpr) -> bool:
    """Whether ``call`` calls a ``__new__`` by its name with a class (``str.__new__(cls,
    text)``)."""
    callee = call.callee
    return isinstance(callee, MemberExpr) and callee.name == "__new__" and bool(call.args)


def guards(tree: MypyFile) -> Iterator[FuncDef]:
    """The functions of ``tree`` (at any depth) declared to return ``TypeGuard[...]`` or
    ``TypeIs[...]`` of a type that names ``TrustedInstruction``."""
    for statement in every_statement(tree.defs):
        if isinstance(statement, Decorator):
            statement = statement.func
        items = statement.items if isinstance(statement, OverloadedFuncDef) else [statement]
        for item in items:
            func = item.func if isinstance(item, Decorator) else item
            if not isinstance(func, FuncDef) or not isinstance(func.type, CallableType):
                continue
            narrowed = func.type.type_guard or func.type.type_is
            if (
                narrowed is not None
                and _brand_in(narrowed) == _names.TRUSTED
                and not _checks_the_mint(func)
            ):
                yield func


_IS_TRUSTED: Final = "veridic.text.provenance.is_trusted"


def _checks_the_mint(func: FuncDef) -> bool:
    """Whether the guard ``func`` returns true only for minted text: its body is one
    ``return`` of ``is_trusted(x)`` (or of an ``and`` with it), ``x`` the narrowed
    parameter. ``is_trusted()`` checks the run time's mint, not a type, so the narrowing
    is true (``def genuine(value: object) -> TypeIs[TrustedInstruction]``)."""
    body = func.body.body
    if body and isinstance(body[0], ExpressionStmt) and isinstance(body[0].expr, StrExpr):
        body = body[1:]  # the docstring
    bound = 1 if func.info and not func.is_static else 0  # self or cls comes first
    if len(body) != 1 or not isinstance(body[0], ReturnStmt) or len(func.arguments) <= bound:
        return False
    return _requires_mint(body[0].expr, func.arguments[bound].variable)


def _requires_mint(expr: Expression | None, narrowed: Var) -> bool:
    if isinstance(expr, OpExpr) and expr.op == "and":
        return _requires_mint(expr.left, narrowed) or _requires_mint(expr.right, narrowed)
    return (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, RefExpr)
        and expr.callee.fullname == _IS_TRUSTED
        and len(expr.args) == 1
        and isinstance(expr.args[0], NameExpr)
        and expr.args[0].node is narrowed
    )


def report_guards(checker: TypeChecker) -> None:
    """Report each function of ``checker``'s module that narrows a value to trusted text.

    ``def vetted(text: str) -> TypeGuard[TrustedInstruction]`` makes mypy read ``text`` as
    a ``TrustedInstruction`` after ``if vetted(text):``, whatever the function checked:
    a value nothing minted, which the composer refuses and a ``TrustedText`` position
    prints in the capability section (a cast by another name).
    """
    if _names.in_package(checker.tree.fullname):
        return
    for func in guards(checker.tree):
        checker.fail(
            f'the function "{func.name}" narrows its argument to TrustedInstruction (a '
            "TypeGuard or TypeIs return): after its check mypy reads the text it got as "
            "trusted, so it is "
            f"{_VALUE_ADVICE.format(brand='TrustedInstruction', fix=_FIX[_names.TRUSTED])}",
            func,
            code=errorcodes.FORGE,
        )


def brand_named(node: SymbolNode | None) -> str | None:
    """The brand ``node`` is, or a type alias of this project names directly."""
    if isinstance(node, TypeInfo):
        return node.fullname if node.fullname in _names.BRANDS else None
    if isinstance(node, TypeAlias) and not _names.in_package(node.module):
        target = node.target
        if isinstance(target, Instance) and target.type.fullname in _names.BRANDS:
            return target.type.fullname
    return None


def _brand_in(typ: Type) -> str | None:
    """The brand a cast's target names anywhere (``list[TrustedInstruction] | None``;
    ``InstructionField``, an ``Annotated`` alias of it, mints nothing through a cast
    either), ``TrustedInstruction`` first."""
    named = set(_brands_of(typ, _DEPTH))
    for brand in (_names.TRUSTED, _names.UNTRUSTED):
        if brand in named:
            return brand
    return None


_DEPTH: Final = 8
"""How deep a cast's target is searched: deeper nesting names no brand in practice."""


def _brands_of(typ: Type, depth: int) -> Iterator[str]:
    proper = get_proper_type(typ)
    if depth == 0:
        return
    if isinstance(proper, Instance):
        if proper.type.fullname in _names.BRANDS:
            yield proper.type.fullname
        inner: Iterable[Type] = proper.args
    elif isinstance(proper, UnionType | TupleType):
        inner = proper.items
    elif isinstance(proper, TypedDictType):  # cast(Settings, json.loads(raw))
        inner = proper.items.values()
    elif isinstance(proper, CallableType):
        inner = [*proper.arg_types, proper.ret_type]
    elif isinstance(proper, TypeType):
        inner = [proper.item]
    else:
        return
    for item in inner:
        yield from _brands_of(item, depth - 1)


def _type_only(tree: MypyFile, expressions: Iterable[Expression]) -> set[int]:
    """The expressions of a module that mypy reads as types, never as values: a type alias
    definition, a class's bases, the arguments of ``TypeVar``/``NewType``/``TypedDict``/
    ``NamedTuple``, the type of a type application (``list[TrustedInstruction]()``,
    ``Box[TrustedInstruction].model_validate``)."""
    found: set[int] = set()
    for expr in expressions:
        if (
            isinstance(expr, MemberExpr)
            and isinstance(expr.expr, IndexExpr)
            and isinstance(expr.expr.analyzed, TypeApplication)
        ):  # Box[X].model_validate
            found.update(id(sub) for sub in get_subexpressions(expr.expr.index))
        if not isinstance(expr, CallExpr):
            continue
        if expr.analyzed is not None and not isinstance(expr.analyzed, CastExpr):
            found.update(id(sub) for arg in expr.args for sub in get_subexpressions(arg))
        if isinstance(expr.callee, IndexExpr):
            found.update(id(sub) for sub in get_subexpressions(expr.callee.index))
    for expr in _type_only_statements(tree):
        found.update(id(sub) for sub in get_subexpressions(expr))
    return found


def _type_only_statements(tree: MypyFile) -> Iterator[Expression]:
    """The expressions that statements read as types: a type alias definition's value (at
    any depth: ``Local: TypeAlias = TrustedInstruction`` in a function) and a class's
    bases (``class Lazy(Mapping[TrustedInstruction, str])``)."""
    for statement in every_statement(tree.defs):
        if isinstance(statement, AssignmentStmt) and statement.is_alias_def:
            yield statement.rvalue
        elif isinstance(statement, ClassDef):
            yield from statement.base_type_exprs
            yield from statement.removed_base_type_exprs


def _value_message(brand: str) -> str:
    name = brand.rpartition(".")[2]
    if brand == _names.UNTRUSTED:
        return (
            "UntrustedText(...) passed as a value: its NewType constructor brands any str without "
            "saying where it came from, so no error or audit can name the source of what it "
            f"makes; {_FIX[brand]}"
        )
    return (
        f"{name}(...) passed as a value: its NewType constructor accepts any str and records no "
        "provenance, and through a value (map, functools.partial, TypeAdapter, a callback, a "
        f"return) what calls it later gets {_VALUE_ADVICE.format(brand=name, fix=_FIX[brand])}"
    )


def _cast_message(brand: str) -> str:
    name = brand.rpartition(".")[2]
    if brand == _names.UNTRUSTED:
        return (
            "a cast() to UntrustedText brands text outside veridic: the value got the type "
            "without saying where it came from, so no error or audit can name its source; "
            f"{_FIX[brand]}"
        )
    return (
        f"a cast() to {name} forges it outside veridic: the value got the type, not a "
        f"provenance (a cast changes what mypy believes), so it is "
        f"{_VALUE_ADVICE.format(brand=name, fix=_FIX[brand])}"
    )
