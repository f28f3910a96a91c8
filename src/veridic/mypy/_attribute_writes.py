"""``setattr()`` and an object's namespace do not write outside text into an attribute
declared trusted.

mypy checks ``page.prompt = reply`` against the attribute's declared type, but not
``setattr(page, "prompt", reply)`` nor ``object.__setattr__(page, "prompt", reply)``
(the way into a frozen dataclass): both take any ``object``. Nor a write through the
instance's namespace, ``vars(page)["prompt"] = reply`` or ``page.__dict__.update(...)``,
which mypy types as a ``dict[str, Any]``. The attribute keeps its declared type, so
``Composer().system(page.prompt)`` type-checks, and the run time refuses the plain
``str`` (or a ``TrustedText`` position prints it in the capability section).

Hooks:

- every call of ``setattr()`` and of a ``__setattr__`` called by its name
  (``object.__setattr__(page, ...)``, ``page.__setattr__(...)``,
  ``super().__setattr__(...)``) (``veridic-forge``) on an instance or a class whose
  attribute of that name is declared to hold a ``TrustedInstruction`` (in a container, a
  union, a ``TypedDict``), with a value whose type mypy would not accept in a plain
  assignment; or named by text not known in the code, on an object with such an
  attribute, unless the value cannot be text (a ``float``), or the call is a
  ``__setattr__`` passing its own parameters on (its callers are checked);
- the end of a module's check, for a module whose first call hook saw ``vars(obj)``,
  ``obj.__dict__`` or ``getattr(obj, "__dict__")`` (:func:`note`): an item assigned
  through such a namespace (also one kept in a variable, ``ns = vars(page);
  ns["prompt"] = reply``), an item's ``+=`` (judged by what the operator makes, as
  ``page.prompt += reply`` is), ``update()``, ``setdefault()``, ``__setitem__()`` or
  ``|=`` on it, and the namespace passed to a function that can write it, judged as
  ``setattr()`` is, each key by its text when it is written in the code.

An attribute typed by its class's type variables is judged as the object may hold it: filled
by the object's type (``Holder[TrustedInstruction]``), a covariant one that a
``TrustedInstruction`` can be held as filled with one (a ``Box[str]`` may be a
``Box[TrustedInstruction]``, as ``_covariant_writes`` says), where a value that holds no
text (a number, ``None``) is accepted; an object its function made itself (``_fresh``)
is held as it was made.

A value typed ``Any`` is ``veridic-any``, as ``page.prompt = loose`` is: into an attribute
named in the code, or named by text not known there (``for key, value in data.items():
setattr(page, key, value)`` over a ``dict[str, Any]``), on an object with a trusted one.

An object's namespace passed to a function whose parameter is a mapping it can write
(``fill(vars(page))`` with ``def fill(ns: dict[str, Any])``) is judged as a write of that
mapping's values under a name not known in the code: the function writes where the
plugin does not look; a parameter typed by a type variable (``rows.append(vars(page))``)
passes it along. ``vars`` or ``getattr`` kept in a variable (``v = vars;
v(page)["prompt"] = reply``) reaches the namespace as the function does.

Not seen: the namespace passed to a parameter typed ``Any`` or ``object`` (``print()``,
``json.dumps()`` read it; a function could still write through it), or reached through
what the plugin cannot follow (``object.__getattribute__(page, "__dict__")``, a variable
that holds ``vars`` and is bound to something else too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from mypy.checker import TypeChecker, infer_operator_assignment_method
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.messages import format_type
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    COVARIANT,
    AssignmentStmt,
    CallExpr,
    Context,
    Expression,
    FuncDef,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    OperatorAssignmentStmt,
    OpExpr,
    RefExpr,
    StrExpr,
    SuperExpr,
    TempNode,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.server.subexpr import get_subexpressions
from mypy.subtypes import is_same_type, is_subtype
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    Type,
    TypeType,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import (
    callee_formals,
    holds_trusted,
    may_be_text,
    may_hold_text,
)
from veridic.mypy._any_guard import is_any
from veridic.mypy._forging import trusted_instance
from veridic.mypy._fresh import made
from veridic.mypy._namespace import FILLERS, checked_here, filled, items_of, writable
from veridic.mypy._rebinding import every_statement

WRITERS: Final = frozenset({"builtins.setattr", "builtins.object.__setattr__"})
_VARS: Final = "builtins.vars"
_GETATTR: Final = "builtins.getattr"
_READERS: Final = frozenset({_VARS, _GETATTR})
_NO_READERS: Final[Mapping[int, str]] = {}
_WRITABLE: Final = "typing.MutableMapping"
"""What a parameter that can write a namespace passed to it is (``dict`` is one)."""

_NOTED: set[str] = set()
"""Modules checked in this build whose code reaches an object's namespace."""


def forget() -> None:
    """Drop what one build learnt (``VeridicPlugin`` calls this for each new build)."""
    _NOTED.clear()


def writes(callee: str, ctx: FunctionContext | MethodContext) -> bool:
    """Whether the call is ``setattr()`` or a ``__setattr__`` called by its name: unbound
    (``object.__setattr__(page, ...)``, ``Page.__setattr__(page, ...)``), bound
    (``page.__setattr__(...)``) or through ``super()``."""
    if callee in WRITERS or callee.endswith(".__setattr__"):
        return True
    call = ctx.context
    return (
        isinstance(call, CallExpr)
        and isinstance(call.callee, SuperExpr)
        and call.callee.name == "__setattr__"
    )


def check(callee: str, ctx: FunctionContext | MethodContext, checker: TypeChecker) -> None:
    """Report a ``setattr()`` that writes a value of another type into a trusted attribute."""
    if _names.in_package(checker.tree.fullname):
        return
    if len(ctx.args) < 2 or any(len(group) != 1 for group in ctx.args):
        return
    # setattr(page, name, value), Page.__setattr__(page, name, value); else bound:
    # page.__setattr__(name, value), super().__setattr__(name, value)
    owner = _object_of(ctx.arg_types[0][0]) if len(ctx.args) == 3 else _bound_to(ctx)
    if owner is None:
        return
    if len(ctx.args) == 3:
        owner = _as_made(checker, ctx.args[0][0], owner)
    elif isinstance(ctx.context, CallExpr) and isinstance(ctx.context.callee, MemberExpr):
        owner = _as_made(checker, ctx.context.callee.expr, owner)
    name = ctx.args[-2][0]
    if _forwards(checker, name):
        return
    key = name.value if isinstance(name, StrExpr) else None
    writer = f"{callee.removeprefix('builtins.')}()"
    if isinstance(ctx.context, CallExpr) and isinstance(ctx.context.callee, SuperExpr):
        writer = "super().__setattr__()"
    elif callee not in WRITERS:
        writer = f"{_info(owner).name}.__setattr__()"
    _check_write(checker, writer, owner, key, ctx.arg_types[-1][0], ctx.context)


def _forwards(checker: TypeChecker, name: Expression) -> bool:
    """Whether the write is a ``__setattr__`` of the project's passing its own parameter on
    (``super().__setattr__(name, value)``): its callers' ``page.prompt = reply`` is checked
    by mypy, and its callers' ``setattr()`` here."""
    function = checker.scope.current_function()
    return (
        function is not None
        and function.name == "__setattr__"
        and len(function.arguments) == 3
        and isinstance(name, NameExpr)
        and name.node is function.arguments[1].variable
    )


def _bound_to(ctx: FunctionContext | MethodContext) -> _Owner | None:
    """The object a bound ``__setattr__`` writes into (``super()``'s: the class whose method
    calls it)."""
    call = ctx.context
    if isinstance(call, CallExpr) and isinstance(call.callee, SuperExpr):
        return call.callee.info
    if isinstance(ctx, MethodContext):
        typ = get_proper_type(ctx.type)
        return typ if isinstance(typ, Instance) else None
    return None


def note(tree: MypyFile, expressions: list[Expression]) -> None:
    """Keep ``tree`` for :func:`report_namespaces` when one of its ``expressions`` (all of
    them, walked once by the first call hook) reaches an object's namespace, or keeps
    ``vars`` or ``getattr`` in a variable."""
    if _names.in_package(tree.fullname):
        return
    if any(_reaches_namespace(expr, _NO_READERS) for expr in expressions) or _kept_reader(
        expressions
    ):
        _NOTED.add(tree.fullname)


def _kept_reader(expressions: list[Expression]) -> bool:
    """Whether ``vars`` or ``getattr`` is named other than as what a call calls (``v =
    vars``): kept in a variable, it reaches a namespace by another name."""
    named = [e for e in expressions if isinstance(e, NameExpr) and e.fullname in _READERS]
    if not named:
        return False
    called = {id(e.callee) for e in expressions if isinstance(e, CallExpr)}
    return any(id(name) not in called for name in named)


def report_namespaces(checker: TypeChecker) -> None:
    """Report each write through an object's namespace into an attribute declared trusted,
    at the end of the module's check (the types of the namespaces' owners are known)."""
    tree = checker.tree
    if tree.fullname not in _NOTED:
        return
    _NOTED.discard(tree.fullname)
    held = _held(checker)
    for statement in every_statement(tree.defs):
        if isinstance(statement, AssignmentStmt):
            value = checker.lookup_type_or_none(statement.rvalue)
            for target in statement.lvalues:
                if isinstance(target, IndexExpr) and value is not None:
                    owner = _owner(target.base, checker, held)
                    if owner is not None:
                        key = target.index.value if isinstance(target.index, StrExpr) else None
                        writer = f"an item assigned through {owner[1]}"
                        _check_write(checker, writer, owner[0], key, value, target)
        elif isinstance(statement, OperatorAssignmentStmt):
            _check_operator(checker, statement, held)
    for statement in tree.defs:
        for expr in get_subexpressions(statement):
            if not isinstance(expr, CallExpr):
                continue
            if isinstance(expr.callee, MemberExpr) and expr.callee.name in FILLERS:
                owner = _owner(expr.callee.expr, checker, held)
                if owner is not None:
                    writer = f"{expr.callee.name}() through {owner[1]}"
                    for key, typ in filled(expr, checker):
                        _check_write(checker, writer, owner[0], key, typ, expr)
            _check_passed(checker, expr, held)


def _check_passed(checker: TypeChecker, call: CallExpr, held: _Held) -> None:
    """``fill(vars(page))``: a namespace passed to a parameter that is a mapping the
    function can write, judged as a write of that mapping's values under a name not known
    in the code (the function writes where the plugin does not look)."""
    passed = [
        (index, owner)
        for index, arg in enumerate(call.args)
        if call.arg_kinds[index] in (ARG_POS, ARG_NAMED)
        and (owner := _owner(arg, checker, held)) is not None
    ]
    if not passed:
        return  # the common case: no namespace among the arguments
    found = callee_formals(call, checker)
    if found is None:
        return
    callee, formals = found
    definition = callee.definition
    own = definition is not None and checked_here(definition.fullname, checker)
    function = call.callee.name if isinstance(call.callee, NameExpr | MemberExpr) else "a function"
    for formal, actuals in enumerate(formals):
        declared = callee.arg_types[formal]
        as_written = _as_written(callee, formal)
        value = _written_value(declared) if writable(as_written, own) else None
        if value is None:
            continue  # a Mapping, an object, a library's Any: it reads (or is not seen)
        parameter = callee.arg_names[formal] or f"#{formal + 1}"
        for index, (info, how) in passed:
            if index in actuals:
                writer = (
                    f'{how} passed to {function}() for its parameter "{parameter}", a '
                    f"{format_type(declared, checker.options)} it can write (declare it a "
                    "Mapping if the function only reads it),"
                )
                _check_write(checker, writer, info, None, value, call.args[index])


def _as_written(callee: CallableType, formal: int) -> Type:
    """The type of ``callee``'s parameter ``formal`` as its definition writes it, before mypy
    infers the type variables of the call: a parameter typed ``T`` (``list.append``,
    ``copy.deepcopy``) passes a namespace along, knowing nothing of it to write, though
    at the call mypy types it ``dict[str, Any]``. The call's own type where the definition
    does not line up with it (a decorator's signature, an overload)."""
    definition = callee.definition
    written = definition.type if isinstance(definition, FuncDef) else None
    if isinstance(written, CallableType):
        at = formal + len(written.arg_types) - len(callee.arg_types)  # a bound self, or not
        name = callee.arg_names[formal]
        if at in (formal, formal + 1) and written.arg_names[at] == name:
            return written.arg_types[at]
    return callee.arg_types[formal]


def _written_value(declared: Type) -> Type | None:
    """What a parameter that can write a mapping writes into it: its values' type (``Any``
    for a parameter typed ``Any``)."""
    proper = get_proper_type(declared)
    if isinstance(proper, UnionType):
        found = (_written_value(item) for item in proper.items)
        return next((value for value in found if value is not None), None)
    if isinstance(proper, AnyType):
        return proper
    if not isinstance(proper, Instance):
        return None
    mapping = next((base for base in proper.type.mro if base.fullname == _WRITABLE), None)
    return None if mapping is None else map_instance_to_supertype(proper, mapping).args[1]


def _check_operator(checker: TypeChecker, statement: OperatorAssignmentStmt, held: _Held) -> None:
    """``vars(page) |= {...}`` (items written into the namespace), and ``vars(page)["prompt"]
    += reply`` (the item's operator, whose result is written back into the attribute)."""
    owner = _owner(statement.lvalue, checker, held)
    if owner is not None and statement.op == "|":
        for key, typ in items_of(statement.rvalue, checker):
            _check_write(checker, f"|= through {owner[1]}", owner[0], key, typ, statement)
        return
    target = statement.lvalue
    owner = _owner(target.base, checker, held) if isinstance(target, IndexExpr) else None
    value = checker.lookup_type_or_none(statement.rvalue)
    if owner is None or value is None or not isinstance(target, IndexExpr):
        return
    key = target.index.value if isinstance(target.index, StrExpr) else None
    writer = f"{statement.op}= through {owner[1]}"
    declared = None if key is None else _declared(checker, owner[0], key)
    if declared is not None and holds_trusted(declared.held) and is_subtype(value, declared.held):
        value = operated(checker, statement, declared.held)  # ``+= instruction("...")``: a str
    _check_write(checker, writer, owner[0], key, value, statement)


def operated(checker: TypeChecker, statement: OperatorAssignmentStmt, declared: Type) -> Type:
    """The type of what ``statement``'s operator makes of an item declared ``declared``: a
    ``TrustedInstruction`` plus trusted text is a plain ``str``, as for ``page.prompt +=``."""
    inplace, method = infer_operator_assignment_method(declared, statement.op)
    with checker.msg.filter_errors():
        if inplace:
            return checker.expr_checker.check_op(method, declared, statement.rvalue, statement)[0]
        operation = OpExpr(statement.op, TempNode(declared), statement.rvalue)
        return checker.expr_checker.accept(operation)


def _reaches_namespace(expr: Expression, readers: Mapping[int, str]) -> bool:
    """``vars(obj)``, ``obj.__dict__`` or ``getattr(obj, "__dict__")`` (a module's is
    ``_namespace``'s concern); ``readers``: the variables that hold ``vars`` or
    ``getattr``, by the id of their ``Var``."""
    if isinstance(expr, MemberExpr) and expr.name == "__dict__":
        return not (isinstance(expr.expr, RefExpr) and isinstance(expr.expr.node, MypyFile))
    if not (isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr)):
        return False
    reader = _reader(expr.callee, readers)
    if reader == _GETATTR and len(expr.args) == 2:
        name = expr.args[1]
        return isinstance(name, StrExpr) and name.value == "__dict__"
    return reader == _VARS and len(expr.args) == 1


def _reader(callee: RefExpr, readers: Mapping[int, str]) -> str | None:
    """``vars`` or ``getattr``, called by its name or through a variable that holds it."""
    if callee.fullname in _READERS:
        return callee.fullname
    return readers.get(id(callee.node)) if isinstance(callee.node, Var) else None


class _Held(NamedTuple):
    """What a module keeps in variables on the way to an object's namespace."""

    namespaces: dict[int, tuple[_Owner, str]]
    """The variables bound to an object's namespace (``ns = vars(page)``), by the id of
    their ``Var``, with the object and how the namespace was reached."""
    readers: dict[int, str]
    """The variables bound to ``vars`` or ``getattr`` (``v = vars``), and to nothing else."""


def _held(checker: TypeChecker) -> _Held:
    """The variables of the module that hold a namespace, or ``vars`` or ``getattr``."""
    readers: dict[int, str] = {}
    rebound: set[int] = set()
    assignments = [
        statement
        for statement in every_statement(checker.tree.defs)
        if isinstance(statement, AssignmentStmt)
    ]
    for statement in assignments:
        value = statement.rvalue
        read = value.fullname if isinstance(value, NameExpr) else None
        for target in statement.lvalues:
            if isinstance(target, NameExpr) and isinstance(target.node, Var):
                if read in _READERS:
                    readers[id(target.node)] = read
                else:
                    rebound.add(id(target.node))
    held = _Held({}, {key: read for key, read in readers.items() if key not in rebound})
    for statement in assignments:
        owner = _owner(statement.rvalue, checker, held)
        if owner is not None:
            for target in statement.lvalues:
                if isinstance(target, NameExpr) and isinstance(target.node, Var):
                    held.namespaces[id(target.node)] = owner
    return held


def _owner(expr: Expression, checker: TypeChecker, held: _Held) -> tuple[_Owner, str] | None:
    """The instance whose namespace ``expr`` is, and how it was reached
    (``vars()``, ``__dict__``); ``None`` for anything else, a class's (a read-only
    ``mappingproxy``) and a module's too."""
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
        return held.namespaces.get(id(expr.node))
    if not _reaches_namespace(expr, held.readers):
        return None
    if isinstance(expr, CallExpr):
        getter = len(expr.args) == 2
        owner, how = expr.args[0], "getattr()" if getter else "vars()"
    elif isinstance(expr, MemberExpr):
        owner, how = expr.expr, "__dict__"
    else:
        return None
    typ = get_proper_type(checker.lookup_type_or_none(owner))
    return (_as_made(checker, owner, typ), how) if isinstance(typ, Instance) else None


def _check_write(
    checker: TypeChecker,
    writer: str,
    owner: _Owner,
    key: str | None,
    value: Type,
    context: Context,
) -> None:
    """Report ``value`` written by ``writer`` into the attribute ``key`` of ``owner``
    (``None``: named by text not known in the code) that holds trusted text."""
    code = errorcodes.FORGE
    info = _info(owner)
    fix = "assign the attribute by its name (mypy checks that)"
    if key is not None:
        declared = _declared(checker, owner, key)
        if declared is None or not holds_trusted(declared.held):
            return
        if is_any(value):
            code = errorcodes.ANY  # as ``page.prompt = loose`` is (``_any_declared``)
        elif _admitted(checker, value, declared):
            return
        what = f'the attribute "{key}" of "{info.name}", declared {_shown(checker, declared)}'
        if not is_same_type(declared.held, declared.seen):
            fix = _WIDER_FIX
    else:
        if not may_be_text(value, checker):
            return  # ``setattr(self, key, 0.2)`` over tuning values: no text to forge
        loose = is_any(value)
        trusted = sorted(
            attribute
            for attribute, declared in _attributes(checker, owner)
            if holds_trusted(declared.held) and (loose or not _admitted(checker, value, declared))
        )
        if not trusted:
            return
        if loose:
            code = errorcodes.ANY
        what = (
            f'an attribute of "{info.name}" named by text not known in the code (its '
            f"attributes {', '.join(trusted[:3])} hold trusted text)"
        )
    checker.fail(
        f"{writer} got a value of type {format_type(value, checker.options)} for {what}: mypy "
        "checks no setattr() and no write through an object's namespace (vars(), __dict__) "
        "against the attribute's type, so reads of it are typed trusted while it holds "
        "whatever was written, which the composer refuses and a TrustedText position prints "
        f"in the capability section; {fix}, and mint the text with instruction() or vouch for "
        'it with TrustPolicy("name").vouch(text, reason=...)',
        context,
        code=code,
    )


_WIDER_FIX: Final = (
    "make the attribute read-only (a property, a frozen dataclass) or declare the type "
    "variable invariant: mypy checks even a write by name against the wider view"
)
"""For an attribute typed by a covariant type variable: by its name, mypy checks the write
against the view (``Box[str]``), not the object (``Box[TrustedInstruction]``)."""


class _Made(NamedTuple):
    """An object its function made itself (``_fresh``): no narrower view of it exists, so
    it holds its attributes as it was made, whatever the view written through."""

    view: Instance
    """The object's type where it is written: ``Box[str]``."""
    made: Instance
    """The type the call that made it gave it: ``Box[str]``, or ``TrustedBox``, which
    fills the variable with ``TrustedInstruction``."""


_Owner = Instance | TypeInfo | _Made
"""The object whose attribute is written: an instance, with its type's arguments
(``Box[str]``), one its function made itself, or a class (or an instance whose type the
plugin reads no arguments of: ``super()``'s)."""


def _as_made(checker: TypeChecker, expr: Expression, owner: _Owner) -> _Owner:
    """``owner``, the object ``expr`` gives, as :class:`_Made` when its function made it."""
    typ = made(checker, expr)
    return owner if typ is None or not isinstance(owner, Instance) else _Made(owner, typ)


class _Declared(NamedTuple):
    """An attribute's type as its class declares it, as the object's type shows it, and as
    the object may hold it."""

    written: Type
    """As the class declares it: ``T_co``."""
    seen: Type
    """With the class's type variables filled by the object's type: ``str`` in a
    ``Box[str]``."""
    held: Type
    """As the object may hold it: a covariant type variable that ``TrustedInstruction`` can
    be held as filled with one (the ``Box[str]`` may be a ``Box[TrustedInstruction]``)."""


def _info(owner: _Owner) -> TypeInfo:
    if isinstance(owner, _Made):
        return owner.view.type
    return owner.type if isinstance(owner, Instance) else owner


def _object_of(typ: Type) -> _Owner | None:
    """The object ``setattr()`` is given: an instance, or a class (its class object)."""
    proper = get_proper_type(typ)
    if isinstance(proper, CallableType) and proper.is_type_obj():
        return proper.type_object()
    if isinstance(proper, TypeType):
        item = get_proper_type(proper.item)
        return item.type if isinstance(item, Instance) else None
    return proper if isinstance(proper, Instance) else None


def _declared(checker: TypeChecker, owner: _Owner, name: str) -> _Declared | None:
    symbol = _info(owner).get(name)
    node = None if symbol is None else symbol.node
    return _as_held(checker, owner, node) if isinstance(node, Var) else None


def _attributes(checker: TypeChecker, owner: _Owner) -> list[tuple[str, _Declared]]:
    return [
        (name, declared)
        for base in _info(owner).mro
        for name, symbol in base.names.items()
        if isinstance(symbol.node, Var)
        and (declared := _as_held(checker, owner, symbol.node)) is not None
    ]


def _as_held(checker: TypeChecker, owner: _Owner, attribute: Var) -> _Declared | None:
    """``attribute``'s :class:`_Declared` types in ``owner``; ``None`` when it has none."""
    written = attribute.type
    if written is None:
        return None
    defined_in = attribute.info
    instance = owner.view if isinstance(owner, _Made) else owner
    if isinstance(instance, TypeInfo) or all(base is not defined_in for base in instance.type.mro):
        return _Declared(written, written, written)  # a class's, or not the class's own
    view = map_instance_to_supertype(instance, defined_in)
    seen = expand_type_by_instance(written, view)
    if isinstance(owner, _Made):
        if all(base is not defined_in for base in owner.made.type.mro):
            return _Declared(written, seen, seen)
        as_made = map_instance_to_supertype(owner.made, defined_in)
        return _Declared(written, seen, expand_type_by_instance(written, as_made))
    trusted = trusted_instance(checker)
    widest = None if trusted is None else held_view(view, defined_in, trusted)
    held = seen if widest is None else expand_type_by_instance(written, widest)
    return _Declared(written, seen, held)


def held_view(view: Instance, info: TypeInfo, trusted: Instance) -> Instance | None:
    """``view`` with each covariant type variable of ``info`` that it fills with a type a
    ``TrustedInstruction`` can be held as (a wider one: ``str``, ``object``) filled with
    ``TrustedInstruction``: the object the view may be; ``None`` when there is none."""
    args = list(view.args)
    for index, variable in enumerate(info.defn.type_vars):
        if not isinstance(variable, TypeVarType) or variable.variance != COVARIANT:
            continue
        arg = args[index]
        if is_subtype(trusted, arg) and not is_subtype(arg, trusted):
            args[index] = trusted
    return None if args == list(view.args) else view.copy_modified(args=args)


def admitted(checker: TypeChecker, value: Type, held: Type, seen: Type) -> bool:
    """Whether ``value`` may be written into an attribute the object may hold as ``held``
    and its type shows as ``seen``: it is ``held``, or it holds no text and ``seen`` is
    wider (a number or ``None`` written through a ``Box[object]`` or a ``Box[str | None]``,
    which may be a ``Box[TrustedInstruction]``, puts no text where trusted text is read)."""
    if is_subtype(value, held):
        return True
    return not is_same_type(held, seen) and not may_hold_text(value, checker)


def _admitted(checker: TypeChecker, value: Type, declared: _Declared) -> bool:
    return admitted(checker, value, declared.held, declared.seen)


def _shown(checker: TypeChecker, declared: _Declared) -> str:
    """The attribute's declared type, and the one the object may hold when it differs
    (``"T_co"``, held as ``"TrustedInstruction"``)."""
    written = format_type(declared.written, checker.options)
    held = format_type(declared.held, checker.options)
    return written if written == held else f"{written}, held as {held}"
