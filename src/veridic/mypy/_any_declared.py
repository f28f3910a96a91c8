"""No value of type ``Any`` is assigned to a target declared to hold trusted text.

``config: Settings = json.loads(raw)`` with ``Settings`` a ``TypedDict`` whose
``persona`` is a ``TrustedInstruction``; ``prompt: TrustedInstruction = payload["p"]``;
``self.prompt = response.json()``: mypy lets ``Any`` into any declared type, even under
``--strict``, and from then on reads the target as trusted. ``Composer().system(
config["persona"])`` type-checks, the run time refuses the plain ``str`` (or, in a
``TrustedText`` position, prints it in the capability section): the two checks
disagree. ``_any_guard`` refuses ``Any`` passed straight into an instruction position;
this rule refuses it one step earlier, where it is given the trusted type.

Reported (``veridic-any``): an assignment (annotated or not; names, attributes, items
of a ``TypedDict`` or a container) whose target's declared type holds a
``TrustedInstruction`` (in a container, a union, a tuple, a ``TypedDict`` item, a
callable's return, or a base of a class of the project: ``class Prompts(dict[str,
TrustedInstruction])``), and whose value is ``Any``, or a list, tuple, set or dict
display with an ``Any`` item in a slot so declared (an ``Any`` under a ``TypedDict`` key
or at a tuple position declared ``Any`` is not); and ``Any`` put into a built-in
container or a ``TypedDict`` that holds trusted text (``append``, ``extend``,
``insert``, ``add``, ``update``, ``setdefault``, ``+=``, ``|=``); a comprehension is read
as the display it makes (``[item for item in json.loads(raw)]``).
A function that returns ``Any`` (a ``lambda``, a ``def ... -> Any``) assigned to, or
passed for a parameter declared as, a ``Callable`` whose result holds trusted text: its
callers read what it returns as trusted. ``Any`` bound without an assignment to a target
so declared: a ``for`` target (``for prompt in json.loads(raw)``, also unpacked, nested or
starred), a ``with ... as`` target whose manager is ``Any`` or enters as ``Any``, a
parameter's default, a walrus (``if prompt := json.loads(raw):``) and a name a ``case``
captures (``case {"system": prompt}``); in an overload's implementation too, and in a
module that makes no call.

Not reported: ``Any`` declared as a class whose attributes hold trusted text
(``settings: Settings = request.app.state.settings``): ``Any`` from JSON makes no
object with attributes, and frameworks hand typed objects out as ``Any`` every day.

Hook: the end of a module's check (``get_additional_indirect_deps``), when every
expression of the module has its type. mypy has no assignment hook.

``**kwargs`` of ``Any`` into a trusted ``__init__`` is ``_any_guard``'s: a call's own
arguments, through ``super()`` too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Final

from mypy.argmap import map_actuals_to_formals
from mypy.checker import TypeChecker
from mypy.maptype import map_instance_to_supertype
from mypy.meet import is_overlapping_types
from mypy.messages import format_type
from mypy.nodes import (
    AssignmentExpr,
    AssignmentStmt,
    CallExpr,
    Decorator,
    DictExpr,
    DictionaryComprehension,
    Expression,
    ForStmt,
    FuncDef,
    GeneratorExpr,
    IndexExpr,
    ListComprehension,
    ListExpr,
    MatchStmt,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    RefExpr,
    SetComprehension,
    SetExpr,
    StarExpr,
    StrExpr,
    TempNode,
    TupleExpr,
    TypeInfo,
    Var,
    WithStmt,
)
from mypy.server.subexpr import get_subexpressions
from mypy.subtypes import find_member
from mypy.types import (
    AnyType,
    CallableType,
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
from veridic.mypy._any_guard import is_any
from veridic.mypy._code_text import describe
from veridic.mypy._rebinding import every_statement


def may_report(tree: MypyFile) -> bool:
    """Whether ``tree`` declares a name typed with trusted text, read from its nodes: a
    module that made no call is searched for its checker only then."""
    if _names.in_package(tree.fullname) or tree.is_stub:
        return False
    for statement in every_statement(tree.defs):
        if isinstance(statement, ForStmt | WithStmt | MatchStmt):
            return True  # binds without an assignment: its targets' types are known later
        if isinstance(statement, Decorator):
            statement = statement.func
        if isinstance(statement, FuncDef) and _defaults_trusted(statement):
            return True
        if not isinstance(statement, AssignmentStmt) or isinstance(statement.rvalue, TempNode):
            continue  # a declaration without a value (a model's field) assigns nothing
        if statement.type is not None and holds_trusted(statement.type):
            return True
    return any(
        isinstance(expr, AssignmentExpr) and _declared_trusted(expr.target)
        for statement in tree.defs
        for expr in get_subexpressions(statement)
    )


def _declared_trusted(target: NameExpr) -> bool:
    """Whether a walrus's target is a name declared (or a parameter typed) to hold trusted
    text: a walrus is an expression, which no statement of the module shows."""
    variable = target.node
    return isinstance(variable, Var) and variable.type is not None and holds_trusted(variable.type)


def _defaults_trusted(function: FuncDef) -> bool:
    """Whether a parameter of ``function`` declared to hold trusted text has a default."""
    signature = function.type
    return isinstance(signature, CallableType) and any(
        argument.initializer is not None and holds_trusted(declared)
        for argument, declared in zip(function.arguments, signature.arg_types, strict=False)
    )


def report(checker: TypeChecker) -> None:
    """Report each ``Any`` assigned to a target declared to hold trusted text."""
    tree = checker.tree
    if _names.in_package(tree.fullname) or tree.is_stub:
        return
    for statement in every_statement(tree.defs):
        if not isinstance(statement, AssignmentStmt) or isinstance(statement.rvalue, TempNode):
            continue  # a declaration without a value (``prompt: TrustedInstruction``)
        for target in statement.lvalues:
            if isinstance(target, TupleExpr | ListExpr):
                continue  # unpacking: mypy types each target from the value's items
            declared = _declared(target, checker)
            if declared is None or not holds_trusted(declared):
                continue
            for value in _loose(statement.rvalue, declared, checker):
                _fail(checker, target, declared, value)
    _report_fills(checker)
    _report_bindings(checker)


def _report_bindings(checker: TypeChecker) -> None:
    """``Any`` bound to a target declared to hold trusted text by what is no assignment: a
    ``for`` target (``for prompt in json.loads(raw)`` after ``prompt: TrustedInstruction``),
    a ``with ... as`` target whose context manager is ``Any`` or enters as ``Any``, and a
    parameter's default (``prompt: TrustedInstruction = json.loads(raw)``). mypy binds each
    without a check against the declaration, as it does an assignment of ``Any``."""
    for statement in every_statement(checker.tree.defs):
        if isinstance(statement, ForStmt) and statement.inferred_item_type is not None:
            shown = f"an item of {describe(statement.expr, checker)}"
            _check_bound(checker, statement.index, statement.inferred_item_type, shown)
        elif isinstance(statement, WithStmt):
            for manager, target in zip(statement.expr, statement.target, strict=True):
                entered = None if target is None else _entered(manager, statement, checker)
                if target is not None and entered is not None:
                    shown = f'what "with" enters of {describe(manager, checker)}'
                    _check_bound(checker, target, entered, shown)
        elif isinstance(statement, FuncDef | Decorator):
            _check_defaults(
                checker, statement.func if isinstance(statement, Decorator) else statement
            )
        elif isinstance(statement, MatchStmt):
            _check_captures(checker, statement)


def _check_captures(checker: TypeChecker, statement: MatchStmt) -> None:
    """Each name a ``case`` captures (``case {"system": prompt}``) declared to hold trusted
    text and bound to ``Any``: mypy checks a capture against the declaration, which ``Any``
    passes. The patterns are matched again against the subject's type, their errors
    dropped (mypy reported them already)."""
    subject = checker.lookup_type_or_none(statement.subject)
    if subject is None:
        return
    shown = f"a capture of {describe(statement.subject, checker)}"
    for pattern in statement.patterns:
        with checker.msg.filter_errors():
            captured = checker.pattern_checker.accept(pattern, subject).captures
        for target, typ in captured.items():
            _check_bound(checker, target, typ, shown)


def _check_bound(checker: TypeChecker, target: Expression, bound: Type, shown: str) -> None:
    """Report ``target`` (unpacked into its names) declared to hold trusted text and bound
    to ``Any``, ``bound`` being the type of what is bound to it."""
    if isinstance(target, TupleExpr | ListExpr):
        for item, item_type in _unpacked(target, bound):
            _check_bound(checker, item, item_type, shown)
        return
    declared = _declared(target, checker)
    if declared is not None and is_any(bound) and holds_trusted(declared):
        where = describe(target, checker).replace("the variable", "the name")
        checker.fail(_any_message(where, declared, shown, checker), target, code=errorcodes.ANY)


def _unpacked(target: TupleExpr | ListExpr, bound: Type) -> Iterator[tuple[Expression, Type]]:
    """Each item of an unpacking ``target`` with the type bound to it: a tuple's item at its
    position, ``Any`` for each of ``Any``, the item type of a homogeneous container."""
    proper = get_proper_type(bound)
    for star, rest in enumerate(target.items):
        if isinstance(rest, StarExpr):
            yield from _unpacked_around(target, rest, star, proper)
            return
    if isinstance(proper, TupleType):
        if len(proper.items) == len(target.items):
            yield from zip(target.items, proper.items, strict=True)
        return
    item = _unpacked_item(proper)
    if item is not None:
        yield from ((each, item) for each in target.items)


def _unpacked_around(
    target: TupleExpr | ListExpr, rest: StarExpr, star: int, proper: ProperType
) -> Iterator[tuple[Expression, Type]]:
    """The items of ``target`` around ``rest``, its starred item at ``star``, and ``rest``
    as ``Any`` when an item it takes is ``Any`` (mypy checks the list it makes,
    ``list[Any]``, against the declaration, which ``Any`` passes)."""
    items = target.items
    if isinstance(proper, TupleType):
        after = len(items) - star - 1
        if len(proper.items) < len(items) - 1:
            return
        end = len(proper.items) - after
        yield from zip(items[:star], proper.items[:star], strict=True)
        yield from zip(items[star + 1 :], proper.items[end:], strict=True)
        taken = proper.items[star:end]
    else:
        item = _unpacked_item(proper)
        if item is None:
            return
        yield from ((other, item) for other in items if other is not rest)
        taken = [item]
    loose = next((typ for typ in taken if is_any(typ)), None)
    if loose is not None:
        yield rest.expr, loose


def _unpacked_item(proper: ProperType) -> Type | None:
    """The type of each item unpacked from a value of type ``proper``: ``Any`` from ``Any``,
    the item type of a homogeneous container."""
    if isinstance(proper, AnyType):
        return proper
    if isinstance(proper, Instance) and len(proper.args) == 1:
        return proper.args[0]
    return None


def _entered(manager: Expression, statement: WithStmt, checker: TypeChecker) -> Type | None:
    """The type a ``with`` binds from ``manager``: ``Any`` for a manager typed ``Any``, else
    what its ``__enter__`` returns (``__aenter__``'s awaited result for ``async with``)."""
    typ = checker.lookup_type_or_none(manager)
    proper = None if typ is None else get_proper_type(typ)
    if proper is None or isinstance(proper, AnyType):
        return proper
    method = "__aenter__" if statement.is_async else "__enter__"
    enter = (
        get_proper_type(find_member(method, proper, proper))
        if isinstance(proper, Instance)
        else None
    )
    if not isinstance(enter, CallableType):
        return None
    result = get_proper_type(enter.ret_type)
    if statement.is_async and isinstance(result, Instance):
        if result.type.fullname == "typing.Coroutine" and len(result.args) == 3:
            return result.args[2]
        if result.type.fullname == "typing.Awaitable" and result.args:
            return result.args[0]
        return None
    return result


def _check_defaults(checker: TypeChecker, function: FuncDef) -> None:
    """A parameter declared to hold trusted text whose default is ``Any``."""
    signature = function.type
    if not isinstance(signature, CallableType) or len(signature.arg_types) != len(
        function.arguments
    ):
        return
    for argument, declared in zip(function.arguments, signature.arg_types, strict=True):
        default = argument.initializer
        if default is None or not holds_trusted(declared):
            continue
        typ = checker.lookup_type_or_none(default)
        if typ is not None and is_any(typ):
            where = f'the parameter "{argument.variable.name}"'
            shown = f"its default, {describe(default, checker)}"
            checker.fail(
                _any_message(where, declared, shown, checker), default, code=errorcodes.ANY
            )


_FILLERS: Final = frozenset(
    {"append", "appendleft", "extend", "extendleft", "insert", "add", "update", "setdefault"}
)
"""Methods that put their arguments into a container (``__setitem__`` is an assignment)."""
_KEYED: Final = frozenset({"insert", "setdefault"})
"""Fillers whose first argument says where, not what."""
_WHOLE: Final = frozenset({"extend", "extendleft", "update"})
"""Fillers whose argument holds many items (declared as the container), not one."""


def _declared_key(declared: Type, key: str, default: Type) -> Type:
    """The type a ``TypedDict`` declares for ``key``, or ``default``."""
    proper = get_proper_type(declared)
    return proper.items.get(key, default) if isinstance(proper, TypedDictType) else default


def _report_fills(checker: TypeChecker) -> None:
    """``prompts.append(loose)``, ``settings.update(json.loads(raw))``, ``prompts +=
    json.loads(raw)``: ``Any`` put into a container (or a ``TypedDict``) that holds trusted
    text, which the container's reads then type as trusted."""
    for statement in every_statement(checker.tree.defs):
        if isinstance(statement, OperatorAssignmentStmt) and statement.op in ("+", "|"):
            declared = _container(statement.lvalue, checker)
            if declared is not None:
                for value in _loose(statement.rvalue, declared, checker):
                    _fail(checker, statement.lvalue, declared, value)
    for statement in checker.tree.defs:
        for expr in get_subexpressions(statement):
            if isinstance(expr, AssignmentExpr):
                _report_walrus(checker, expr)
            if isinstance(expr, CallExpr) and expr.args:
                _report_callbacks(checker, expr)
            if not (
                isinstance(expr, CallExpr)
                and isinstance(expr.callee, MemberExpr)
                and expr.callee.name in _FILLERS
            ):
                continue
            declared = _container(expr.callee.expr, checker)
            if declared is None:
                continue
            method = expr.callee.name
            given = expr.args[1:] if method in _KEYED else expr.args
            slot = declared if method in _WHOLE else _item_of(get_proper_type(declared), declared)
            if method == "setdefault" and expr.args and isinstance(expr.args[0], StrExpr):
                slot = _declared_key(declared, expr.args[0].value, slot)
            for arg in given:
                for value in _loose(arg, slot, checker):
                    _fail(checker, expr.callee.expr, declared, value)


def _report_walrus(checker: TypeChecker, expr: AssignmentExpr) -> None:
    """``if prompt := json.loads(raw):`` after ``prompt: TrustedInstruction``: an assignment
    that is an expression, which no assignment statement spells."""
    declared = _declared(expr.target, checker)
    if declared is not None and holds_trusted(declared):
        for value in _loose(expr.value, declared, checker):
            _fail(checker, expr.target, declared, value)


def callee_formals(
    call: CallExpr, checker: TypeChecker
) -> tuple[CallableType, list[list[int]]] | None:
    """The type of ``call``'s callee and, for each of its parameters, the indexes of the
    arguments that fill it; ``None`` when mypy gives the callee no callable type."""
    callee = get_proper_type(checker.lookup_type_or_none(call.callee))
    if not isinstance(callee, CallableType):
        return None
    formals = map_actuals_to_formals(
        call.arg_kinds,
        call.arg_names,
        callee.arg_kinds,
        callee.arg_names,
        lambda i: checker.lookup_type(call.args[i]),
    )
    return callee, formals


def _report_callbacks(checker: TypeChecker, call: CallExpr) -> None:
    """``keep(lambda: json.loads(raw))`` where ``keep`` takes a ``Callable[[],
    TrustedInstruction]``: a function returning ``Any`` passed where its result is then
    read as trusted (an assignment is ``_loose``'s)."""
    if not any(_returns_any(checker.lookup_type_or_none(arg)) for arg in call.args):
        return  # the common case: no argument is a function returning Any
    found = callee_formals(call, checker)
    if found is None:
        return
    callee, formals = found
    for index, actuals in enumerate(formals):
        slot = callee.arg_types[index]
        for actual in actuals:
            if _returns_any(checker.lookup_type_or_none(call.args[actual])) and _trusted_result(
                slot
            ):
                name = callee.arg_names[index]
                formal = f'the parameter "{name}"' if name else f"argument {index + 1}"
                checker.fail(
                    _function_message(formal, slot, call.args[actual], checker),
                    call.args[actual],
                    code=errorcodes.ANY,
                )


def _trusted_result_of(factory: Expression, slot: Type, checker: TypeChecker) -> bool:
    """A field's ``factory`` returns ``Any`` for a ``slot`` that holds trusted text."""
    return _returns_any(checker.lookup_type_or_none(factory)) and holds_trusted(slot)


def _returns_any(typ: Type | None) -> bool:
    proper = get_proper_type(typ)
    return isinstance(proper, CallableType) and is_any(proper.ret_type)


def _trusted_result(slot: Type) -> bool:
    """A slot declared as a function whose result holds trusted text."""
    proper = get_proper_type(slot)
    return isinstance(proper, CallableType) and holds_trusted(proper.ret_type)


def _container(expr: Expression, checker: TypeChecker) -> Type | None:
    """The type of ``expr`` when it is a built-in container or a ``TypedDict`` that holds
    trusted text (a class of the project's may define ``update`` as it likes)."""
    typ = checker.lookup_type_or_none(expr)
    proper = get_proper_type(typ)
    if isinstance(proper, TypedDictType) or (
        isinstance(proper, Instance)
        and proper.type.module_name in _CONTAINER_MODULES
        and proper.args
    ):
        return typ if typ is not None and holds_trusted(typ) else None
    return None


_CONTAINER_MODULES: Final = frozenset({"builtins", "collections", "typing"})


def _fail(checker: TypeChecker, target: Expression, declared: Type, value: Expression) -> None:
    checker.fail(_message(target, declared, value, checker), value, code=errorcodes.ANY)


def _declared(target: Expression, checker: TypeChecker) -> Type | None:
    """The type ``target`` was declared with (not inferred from the value)."""
    if isinstance(target, NameExpr):
        node = target.node
        return node.type if isinstance(node, Var) and not node.is_inferred else None
    if isinstance(target, MemberExpr):
        owner = get_proper_type(checker.lookup_type_or_none(target.expr))
        if isinstance(owner, Instance):
            symbol = owner.type.get(target.name)
            node = None if symbol is None else symbol.node
            if isinstance(node, Var) and not node.is_inferred:
                return node.type
        return None
    if isinstance(target, IndexExpr):
        owner = get_proper_type(checker.lookup_type_or_none(target.base))
        if isinstance(owner, TypedDictType):
            key = target.index
            return owner.items.get(key.value) if isinstance(key, StrExpr) else None
        if isinstance(owner, Instance) and owner.args:
            return owner.args[-1]  # list[X], dict[K, X]: the item stored
    return None


def _loose(value: Expression, slot: Type, checker: TypeChecker) -> Iterator[Expression]:
    """``value`` when it is ``Any`` and ``slot``, the type declared where it goes, holds
    trusted text; or such items of a display, each against the slot declared for it (a
    ``TypedDict``'s key, a tuple's position), so that ``Any`` next to trusted text in a
    slot declared ``Any`` (``{"system": instruction("..."), "meta": json.loads(raw)}``)
    is no finding."""
    if isinstance(value, ListExpr | TupleExpr | SetExpr | DictExpr):
        for item, item_slot in _slots(value, slot):
            yield from _loose(item, item_slot, checker)
        return
    made = _made(value)
    if made is not None:  # ``[item for item in json.loads(raw)]``: each item it makes
        yield from _loose(made, _item_of(get_proper_type(slot), slot), checker)
        return
    if isinstance(value, CallExpr) and _specifies_field(value.callee):
        for name, arg in zip(value.arg_names, value.args, strict=True):
            if name == "default":  # a field's declaration is no value, but its default is
                yield from _loose(arg, slot, checker)
            elif name in _FACTORIES and _trusted_result_of(arg, slot, checker):
                yield arg  # ``field(default_factory=lambda: json.loads(raw))``
        return
    typ = checker.lookup_type_or_none(value)
    if typ is not None and is_any(typ) and holds_trusted(slot):
        yield value
    elif _returns_any(typ) and _trusted_result(slot):
        yield value  # ``make: Callable[[], TrustedInstruction] = lambda: json.loads(raw)``


def _made(value: Expression) -> Expression | None:
    """The expression a comprehension makes each item (or a dict's each value) of."""
    if isinstance(value, ListComprehension | SetComprehension):
        return value.generator.left_expr
    if isinstance(value, GeneratorExpr):
        return value.left_expr
    return value.value if isinstance(value, DictionaryComprehension) else None


def _specifies_field(callee: Expression) -> bool:
    return isinstance(callee, RefExpr) and callee.fullname in _FIELD_SPECIFIERS


def _slots(
    display: ListExpr | TupleExpr | SetExpr | DictExpr, slot: Type
) -> Iterator[tuple[Expression, Type]]:
    """Each item of ``display`` with the type declared for it in ``slot``; ``slot`` itself
    where the declaration says nothing finer (a union, a key not written in code)."""
    proper = get_proper_type(slot)
    if isinstance(display, DictExpr):
        for key, item in display.items:
            if key is None:  # ``**other``: a mapping of the same declaration
                yield item, slot
            elif isinstance(proper, TypedDictType) and isinstance(key, StrExpr):
                yield item, proper.items.get(key.value, slot)
            else:
                yield item, _item_of(proper, slot)
        return
    if (
        isinstance(proper, TupleType)
        and len(proper.items) == len(display.items)
        and not any(isinstance(item, StarExpr) for item in display.items)
    ):
        yield from zip(display.items, proper.items, strict=True)
        return
    for item in display.items:
        yield item, _item_of(proper, slot)


def _item_of(proper: ProperType, slot: Type) -> Type:
    """The type declared for an item of a container (``list[X]``, ``dict[K, X]``,
    ``tuple[X, ...]``), or ``slot`` itself."""
    if isinstance(proper, Instance) and proper.args:
        return proper.args[-1]
    return slot


def holds_trusted(typ: Type, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a value of type ``typ`` holds a ``TrustedInstruction`` a reader then trusts.

    ``seen`` holds the recursive aliases (``JSON = dict[str, JSON] | ...``) and classes
    already looked into, so that each is read once.
    """
    if isinstance(typ, TypeAliasType) and typ.alias is not None:
        if typ.alias.fullname in seen:
            return False
        seen = seen | {typ.alias.fullname}
    proper = get_proper_type(typ)
    if isinstance(proper, UnionType | TupleType):
        return any(holds_trusted(item, seen) for item in proper.items)
    if isinstance(proper, TypedDictType):
        return any(holds_trusted(item, seen) for item in proper.items.values())
    if isinstance(proper, CallableType):
        return holds_trusted(proper.ret_type, seen)
    if not isinstance(proper, Instance):
        return False
    if proper.type.fullname == _names.TRUSTED:
        return True
    if _library(proper.type):
        return any(holds_trusted(arg, seen) for arg in proper.args)
    return _container_of_trusted(proper, seen)


def may_be_text(typ: Type, checker: TypeChecker) -> bool:
    """Whether a value of type ``typ`` may be a ``str`` (a ``float | None`` may not: it
    forges no text wherever it is written)."""
    return is_overlapping_types(typ, checker.named_type("builtins.str"))


def may_hold_text(typ: Type, checker: TypeChecker) -> bool:
    """Whether a value of type ``typ`` may be text or hold some (``list[str]``, a tuple
    with a ``str``, a function that returns one)."""
    proper = get_proper_type(typ)
    if may_be_text(proper, checker):
        return True
    if isinstance(proper, UnionType | TupleType):
        return any(may_hold_text(item, checker) for item in proper.items)
    if isinstance(proper, TypedDictType):
        return any(may_hold_text(item, checker) for item in proper.items.values())
    if isinstance(proper, CallableType):
        return may_hold_text(proper.ret_type, checker)
    if isinstance(proper, Instance):
        return any(may_hold_text(arg, checker) for arg in proper.args)
    return False


_FACTORIES: Final = frozenset({"default_factory", "factory"})
"""A field specifier's argument that makes the default (dataclasses, pydantic; attrs)."""
_FIELD_SPECIFIERS: Final = frozenset(
    {
        "pydantic.fields.Field",
        "pydantic.fields.PrivateAttr",
        "dataclasses.field",
        "attrs.field",
        "attr.attrib",
        "attr.ib",
        "attr.field",
    }
)
"""Typed ``Any`` so that they fit any field's annotation (``field(repr=False)``,
``attrs.field(repr=False)``); they are no value of the field: pydantic validates it,
the constructor of a dataclass or an attrs class takes a parameter of the declared
type."""
_LIBRARIES: Final = ("builtins", "typing", "collections", "pydantic")
"""Packages whose classes hold no text of the project's."""
_PRIVATE_LIBRARIES: Final = frozenset(
    {"_typeshed", *(name for name in sys.stdlib_module_names if name.startswith("_"))}
)
"""The standard library's private modules (``_collections_abc``) and typeshed's
``_typeshed``, named one by one: a project's own module may start with ``_`` too
(``_models.py``), and its containers of trusted text are looked into."""


def _library(info: TypeInfo) -> bool:
    module = info.module_name
    return module.startswith(_LIBRARIES) or module.partition(".")[0] in _PRIVATE_LIBRARIES


def _container_of_trusted(instance: Instance, seen: frozenset[str]) -> bool:
    """Whether a class of the project is a container of trusted text by a base
    (``class Prompts(dict[str, TrustedInstruction])``, ``Store[TrustedInstruction]`` of
    ``class Store(dict[str, T])``), whose items a reader then trusts.

    A class's attributes are not looked into, nor its own type arguments (``Box[T]``
    whose ``item`` is a ``T``): a value typed ``Any`` (``json.loads()``, a framework's
    ``app.state``, a container of dependencies) makes no object with attributes unless
    code built one, so ``settings: Settings = request.app.state.settings`` forges
    nothing, and a ``dict`` posing as the object fails at its first attribute.
    """
    info = instance.type
    if info.fullname in seen or _names.in_package(info.module_name):
        return False
    seen = seen | {info.fullname}
    return any(
        holds_trusted(map_instance_to_supertype(instance, base), seen)
        for base in info.mro[1:]
        if _library(base) and base.type_vars
    )


def _message(target: Expression, declared: Type, value: Expression, checker: TypeChecker) -> str:
    if isinstance(target, IndexExpr) and not isinstance(target.index, StrExpr):
        where = f"an item of {describe(target.base, checker)}"  # ``items[0] = ...``
    else:
        where = describe(target, checker)
    where = where.replace("the variable", "the name")
    if _returns_any(checker.lookup_type_or_none(value)):
        return _function_message(where, declared, value, checker)
    return _any_message(where, declared, describe(value, checker), checker)


def _any_message(where: str, declared: Type, shown: str, checker: TypeChecker) -> str:
    """The message for ``Any`` (``shown``) given to ``where``, declared ``declared``."""
    return (
        f"{where} is declared {format_type(declared, checker.options)} but got a value of type "
        f'"Any" ({shown}): Any passes any declared type unchecked, and from '
        "here on mypy reads the text as trusted while the run time refuses it (or prints it "
        "in the capability section); validate the value where it comes from (a pydantic model "
        "with an InstructionField, a TypeAdapter), declare the text str or UntrustedText and "
        'place it as data, or vouch for it with TrustPolicy("name").vouch(text, reason=...)'
    )


def _function_message(where: str, declared: Type, value: Expression, checker: TypeChecker) -> str:
    return (
        f"{where} is declared {format_type(declared, checker.options)} but got "
        f'{describe(value, checker)}, a function that returns "Any": its result passes the '
        "declared type unchecked, and mypy reads it as trusted while the run time "
        "refuses it; give the function the return type (a TrustedInstruction minted in its "
        "body with instruction() or join()), or declare the result str and place it as data "
        "with Composer.data()"
    )
