"""A module's ``Final`` text constants are not rewritten through its namespace.

The plugin reads a ``Final`` name bound to a literal (``TONE: Final = "Be brief."``)
as text written in code, wherever it is read: ``instruction(TONE)`` is accepted.
mypy refuses ``TONE = reply`` and ``prompts.TONE = reply``, but not a write through
the module's namespace, which mypy types as ``dict[str, Any]`` or ``object``:
``globals()["TONE"] = reply``, ``globals().update(...)``, ``vars(prompts)[...]``,
``prompts.__dict__[...]``, ``setattr(prompts, "TONE", reply)``. At run time the
name then holds the outside text, and ``instruction(TONE)`` mints it.

The same writes into a module's variable declared to hold trusted text (``PROMPT:
TrustedInstruction = instruction(...)``, then ``globals()["PROMPT"] = reply``) leave reads
of it typed trusted while it holds the reply unminted, which a ``TrustedText`` position
prints in the capability section: reported as ``veridic-forge``, wherever a write to a
``Final`` constant is.

Hooks (``veridic-literal``), only for a module that holds such a constant (or one
the plugin cannot name):

- the first call hook run in a module walks its statements for an item assigned
  or deleted, and a mutating method (``update``, ``setdefault``, ``pop``, ...)
  called, on ``globals()``, ``vars()``, ``vars(module)`` or ``module.__dict__``; a
  value assigned or filled in is judged at the end of the module's check, when its
  type is known (:func:`report_values`);
- every call of ``setattr()`` or ``delattr()`` on a module: named by a literal that
  is one of its ``Final`` text constants, by text not known in the code, or on a
  module the plugin cannot name (``sys.modules[name]``); the same on a class with a
  ``Final`` text constant (its own or a base's), or on an instance of one, whose
  attribute then shadows the constant for reads through it (``self.TONE``).

A name written in the code that is a constant (or a variable declared trusted) is refused
whatever the value (mypy refuses ``TONE = True``); one the module does not bind, or binds to
a plain ``str``, stays clean: ``globals()["counter"] = 1`` beside ``TONE``. Any other name
(a class or a module whose constants are read through it, ``globals()["Prompts"] =
Impostor``; a variable typed by a ``Literal``), a name not known in the code, or a module
the plugin cannot name, takes only a value that reaches no text: ``None``, a flag, a
number, or a builtin container of them (not text, ``object``, ``Any``, an object of
another class, a class, a module, a function), as a plugin loader's
``vars(import_module(name))["enabled"] = True``.

The namespace may be kept in a variable first (``ns = globals(); ns["TONE"] = reply``,
``ns = vars(prompts)``, ``(ns := prompts.__dict__)``): a name bound to a namespace
anywhere in the module is read as that namespace. ``exec()`` and ``eval()`` run code
in the caller's namespace when no ``globals`` are given (``exec(f"TONE = {reply!r}")``,
``eval("(TONE := ...)")``, a ``global TONE`` inside), or in the namespace they are
given: each such call is reported (``exec(code, {})`` runs in a namespace of its own
and stays clean), and so is a namespace passed where a function takes a mutable
mapping (``dict``, ``MutableMapping``, or ``Any`` in the project's own code: not
``json.dumps(globals())``), which may write through it.

A module reached as ``sys.modules[__name__]`` is the module itself. A module looked up by a
name written in the code (``sys.modules["prompts"]``, ``importlib.import_module("prompts")``,
also kept in a variable first: ``persona = importlib.import_module("persona")``) is that
module when this module imports it (mypy checks it first, so its names are known); looked
up by another name, or by text not known in the code, it is a module the plugin cannot
name, whose namespace is checked as ``setattr()`` on one is. Not seen: a module object
passed to a function as a ``ModuleType`` and written through there, a namespace passed
through a parameter typed ``Mapping`` and cast back; ``exec()`` of text that names another
module (``import prompts; prompts.TONE = ...``): code run by ``exec`` is not checked at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Final, NamedTuple

from mypy.checker import TypeChecker
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    ARG_STAR2,
    AssignmentExpr,
    AssignmentStmt,
    CallExpr,
    Context,
    DictExpr,
    Expression,
    Import,
    ImportAll,
    ImportFrom,
    IndexExpr,
    MemberExpr,
    MypyFile,
    NameExpr,
    RefExpr,
    StrExpr,
    SymbolNode,
    TypeInfo,
    Var,
)
from mypy.plugin import FunctionContext, MethodContext
from mypy.server.subexpr import get_subexpressions
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    TypeType,
    UnionType,
    get_proper_type,
)
from mypy.util import correct_relative_import

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted
from veridic.mypy._rebinding import assigned, every_statement

ATTRIBUTE_WRITERS: Final = frozenset({"builtins.setattr", "builtins.delattr"})
RUNNERS: Final = frozenset({"builtins.exec", "builtins.eval"})
"""Built-ins that run code in the namespace they are given, else in their caller's."""
_MUTABLE_MAPPINGS: Final = ("builtins.dict", "typing.MutableMapping")
_PASSED: Final = "a parameter typed as a mutable mapping, which the function may write through, got"
_RUN_HINT: Final = "run the code in a namespace of its own (exec(code, {})); "
_PASS_HINT: Final = "pass a copy (dict(globals())); "
_MUTATORS: Final = frozenset(
    {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
)
FILLERS: Final = frozenset({"update", "setdefault", "__setitem__", "__ior__"})
"""The mutating methods of a mapping that write a value (not ``pop``, ``clear``)."""
_KEYED: Final = frozenset({"setdefault", "__setitem__"})
"""Fillers whose first argument is the key and whose second is the value."""
_NAMESPACES: Final = frozenset({"builtins.globals", "builtins.vars"})
_MODULE_TYPE: Final = "types.ModuleType"
_UNKNOWN: Final = object()
_SYS_MODULES: Final = "sys.modules"
_IMPORT_MODULE: Final = "importlib.import_module"
"""A module object the plugin cannot name (``sys.modules[name]``, a name it does not import)."""
_ADVICE: Final = (
    "a Final constant is read as text written in code wherever it is used, so keep it "
    "constant: hold text that changes in a variable (placed as data with Composer.data()), "
    "or mint it where it is written"
)


def report_writes(checker: TypeChecker, expressions: list[Expression]) -> None:
    """Report writes through a namespace of a module with ``Final`` text constants (or
    trusted variables); a write of a value, whose type is not known yet at the module's
    first call, is kept for :func:`report_values`."""
    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    scope = _scope_of(checker, expressions)
    items = [
        (target, module)
        for target in assigned(tree.defs)
        if isinstance(target, IndexExpr)
        and (module := _namespace_of(target.base, scope)) is not None
    ]
    values = _assigned_values(tree) if items else {}
    for target, module in items:
        value = values.get(id(target))
        if value is None:  # deleted, a loop's target, +=, one of several targets
            _check_runs_in(checker, module, "an item assigned through", target)
        else:
            _keep(tree, _Kept(module, "an item assigned through", target, value, None))
    calls = {id(expr.callee): expr for expr in expressions if isinstance(expr, CallExpr)}
    for expr in expressions:
        if isinstance(expr, MemberExpr) and expr.name in _MUTATORS:
            module = _namespace_of(expr.expr, scope)
            if module is None:
                continue
            call = calls.get(id(expr))
            how = f"{expr.name}() called on"
            if call is None or expr.name not in FILLERS:  # kept as a value, or a deletion
                _check_runs_in(checker, module, how, expr)
            else:
                _keep(tree, _Kept(module, how, expr, None, call))


def report_values(checker: TypeChecker) -> None:
    """Report the writes of values :func:`report_writes` kept, at the end of the module's
    check (when their types are known): a value that reaches no text (``True``, a count) may
    be written under a name not known in the code, or into a module the plugin cannot name
    (a plugin loader's flag, ``vars(import_module(name))["enabled"] = True``), as it puts
    no text where text written in code (or minted text) is read."""
    for kept in _KEPT.pop(checker.tree.fullname, []):
        pairs: Sequence[_Written] = _ANYTHING
        if kept.filler is not None:
            pairs = _written_by(kept.filler, checker)
        elif kept.value is not None:
            index = kept.context.index if isinstance(kept.context, IndexExpr) else None
            key = index.value if isinstance(index, StrExpr) else None
            pairs = [(key, checker.lookup_type_or_none(kept.value))]
        _check_runs_in(checker, kept.module, kept.how, kept.context, pairs=pairs)


def _written_by(call: CallExpr, checker: TypeChecker) -> Sequence[_Written]:
    """What a filler's call writes (:func:`filled`), with anything under any name for an
    argument whose items are not read: ``update(*pairs)``, a mapping of a class of the
    project's own, a value of a type not known."""
    method = call.callee.name if isinstance(call.callee, MemberExpr) else ""
    if method in _KEYED:
        return list(filled(call, checker)) or _ANYTHING
    pairs: list[_Written] = []
    for arg, kind, name in zip(call.args, call.arg_kinds, call.arg_names, strict=True):
        if kind == ARG_NAMED:
            pairs.append((name, checker.lookup_type_or_none(arg)))
        elif kind in (ARG_POS, ARG_STAR2):
            pairs += list(items_of(arg, checker)) or _ANYTHING
        else:
            pairs += _ANYTHING
    return pairs


class _Kept(NamedTuple):
    """A write through a module's namespace judged by what it writes (:func:`report_values`)."""

    module: MypyFile | object
    how: str
    context: Expression
    """The item assigned (``globals()["TONE"]``), or the filler named (``.update``)."""
    value: Expression | None
    """The value assigned (``reply`` in ``globals()["TONE"] = reply``)."""
    filler: CallExpr | None
    """Or the filler's call (``globals().update(TONE=reply)``)."""


_KEPT: dict[str, list[_Kept]] = {}
"""The writes :func:`report_writes` found in each module, for :func:`report_values`."""


def _keep(tree: MypyFile, kept: _Kept) -> None:
    _KEPT.setdefault(tree.fullname, []).append(kept)


def _assigned_values(tree: MypyFile) -> dict[int, Expression]:
    """The value of each plain assignment's target (``globals()["TONE"] = value``), by the
    id of the target; a target that is one of several (``a, b = ...``) has none."""
    return {
        id(lvalue): statement.rvalue
        for statement in every_statement(tree.defs)
        if isinstance(statement, AssignmentStmt)
        for lvalue in statement.lvalues
    }


def check_runner(callee: str, ctx: FunctionContext | MethodContext, checker: TypeChecker) -> None:
    """Report ``exec()``/``eval()`` run in a namespace of a module with ``Final`` text
    constants: the caller's, when no ``globals`` are given, or the one given (as
    ``globals`` or ``locals``)."""
    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    what = f"{callee.rpartition('.')[2]}()"
    given = [arg for exprs in ctx.args[1:3] for arg in exprs]
    seen: list[MypyFile | object] = []
    if not ctx.args[1:2] or not ctx.args[1] or _is_none(ctx.args[1][0]):
        seen.append(tree)
        _check_runs_in(checker, tree, f"{what} without globals runs in", ctx.context, _RUN_HINT)
    for arg in given:
        module = _namespace_of(arg, _scope_of(checker))
        if module is not None and module not in seen:
            seen.append(module)
            _check_runs_in(checker, module, f"{what} runs in", arg, _RUN_HINT)


def filled(call: CallExpr, checker: TypeChecker) -> Iterator[tuple[str | None, Type]]:
    """Each key (``None`` when not known in the code) and value type a filler's call puts
    into the namespace: ``update(prompt=reply)``, ``update(data)``, ``setdefault(k, v)``."""
    method = call.callee.name if isinstance(call.callee, MemberExpr) else ""
    if method in _KEYED:
        if len(call.args) == 2:
            key = call.args[0]
            typ = checker.lookup_type_or_none(call.args[1])
            if typ is not None:
                yield (key.value if isinstance(key, StrExpr) else None), typ
        return
    for arg, kind, name in zip(call.args, call.arg_kinds, call.arg_names, strict=True):
        if kind == ARG_NAMED and name is not None:
            typ = checker.lookup_type_or_none(arg)
            if typ is not None:
                yield name, typ
        elif kind in (ARG_POS, ARG_STAR2):
            yield from items_of(arg, checker)


def items_of(mapping: Expression, checker: TypeChecker) -> Iterator[tuple[str | None, Type]]:
    """Each key (``None`` when not known in the code) and value type of a mapping: a dict
    display item by item, a ``TypedDict`` by its keys, another mapping by its value type."""
    if isinstance(mapping, DictExpr):
        for key, value in mapping.items:
            if key is None:
                yield from items_of(value, checker)  # ``{**other}``
                continue
            typ = checker.lookup_type_or_none(value)
            if typ is not None:
                yield (key.value if isinstance(key, StrExpr) else None), typ
        return
    typ = get_proper_type(checker.lookup_type_or_none(mapping))
    if isinstance(typ, AnyType):
        yield None, typ
    elif isinstance(typ, TypedDictType):
        yield from typ.items.items()
    elif isinstance(typ, Instance) and len(typ.args) == 2:
        yield None, typ.args[1]  # dict[str, V], Mapping[str, V]
    elif isinstance(typ, Instance) and len(typ.args) == 1:
        pair = get_proper_type(typ.args[0])  # an iterable of pairs: list[tuple[str, V]]
        if isinstance(pair, TupleType) and len(pair.items) == 2:
            yield None, pair.items[1]
        elif isinstance(pair, AnyType):
            yield None, pair


def _is_none(expr: Expression) -> bool:
    """Whether ``expr`` is ``None`` written out: ``exec(code, None)`` runs in the caller's
    namespace, as if no ``globals`` were given."""
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.None"


def check_passed(
    callee: str,
    ctx: FunctionContext | MethodContext,
    checker: TypeChecker,
    formals: list[Type | None],
) -> None:
    """Report a namespace of a module with ``Final`` text constants passed where a function
    takes a mutable mapping (``poke(globals())``): the function may write through it.

    A parameter typed ``Any`` counts only in the project's own code: the standard
    library's and installed packages' (``json.dumps(globals())``, a logger's ``extra=``)
    take ``Any`` to read it.
    """
    tree = checker.tree
    if _names.in_package(tree.fullname):
        return
    own = checked_here(callee, checker)
    for position, exprs in enumerate(ctx.args):
        for arg in exprs:
            if not _may_be_namespace(arg):
                continue
            module = _namespace_of(arg, _scope_of(checker))
            formal = formals[position] if position < len(formals) else None
            if module is not None and writable(formal, own):
                _check_runs_in(checker, module, _PASSED, arg, _PASS_HINT)


def may_pass_namespace(ctx: FunctionContext | MethodContext) -> bool:
    """Whether a call's arguments may hold a module's namespace (a cheap look at their
    shapes, before the parameters' types are looked up)."""
    return any(_may_be_namespace(arg) for exprs in ctx.args for arg in exprs)


def _may_be_namespace(expr: Expression) -> bool:
    if isinstance(expr, AssignmentExpr):
        return True
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        return expr.callee.fullname in _NAMESPACES
    if isinstance(expr, MemberExpr):
        return expr.name == "__dict__"
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
        typ = None if expr.node.type is None else get_proper_type(expr.node.type)
        return isinstance(typ, Instance) and typ.type.fullname == "builtins.dict"
    return False


def checked_here(callee: str, checker: TypeChecker) -> bool:
    """Whether ``callee`` is defined in the project's own code (not a stub, not installed);
    a name whose module the build does not hold is taken as the project's."""
    module = callee
    while module:
        tree = checker.modules.get(module)
        if tree is not None:
            return not (tree.is_stub or any(part in tree.path for part in _names.INSTALLED))
        module = module.rpartition(".")[0]
    return True


def writable(formal: Type | None, own: bool) -> bool:
    """Whether a parameter may be written through: a ``dict``, a ``MutableMapping``, or
    ``Any`` of a function of the project's own code (``own``)."""
    proper = None if formal is None else get_proper_type(formal)
    if isinstance(proper, UnionType):
        return any(writable(item, own) for item in proper.items)
    if isinstance(proper, AnyType):
        return own
    return isinstance(proper, Instance) and any(
        proper.type.has_base(name) for name in _MUTABLE_MAPPINGS
    )


_Written = tuple[str | None, Type | None]
"""A name written (``None``: not known in the code) and the type of the value written
under it (``None``: not known, or anything, as code run in the namespace writes)."""
_ANYTHING: Final[Sequence[_Written]] = ((None, None),)


def _check_runs_in(
    checker: TypeChecker,
    module: MypyFile | object,
    how: str,
    context: Context,
    hint: str = "",
    pairs: Sequence[_Written] = _ANYTHING,
) -> None:
    """Report a write of ``pairs`` (any value under any name, by default) into ``module``'s
    namespace that may rewrite a variable declared trusted or a ``Final`` constant."""
    trusted = _trusted(module)
    if any(_rewrites(module, trusted, key, value) for key, value in pairs):
        shown = f" (its variables declared trusted: {', '.join(sorted(trusted)[:5])})"
        _fail_trusted(checker, f"{how} the namespace of {_display(module)}{shown}", context)
    constants = _constants(module)
    if not any(_rewrites(module, constants, key, value) for key, value in pairs):
        return
    shown = (
        "" if constants is None else f" (its Final constants: {', '.join(sorted(constants)[:5])})"
    )
    _fail(checker, f"{how} the namespace of {_display(module)}{shown}", context, hint)


def _rewrites(
    module: MypyFile | TypeInfo | object,
    names: frozenset[str] | None,
    key: str | None,
    value: Type | None,
) -> bool:
    """Whether writing ``value`` under ``key`` into ``module`` may rewrite one of ``names``
    (``None``: not known, the namespace of a module the plugin cannot name), or what they
    are read through. A name written in the code that is one of them is, whatever the
    value (mypy would refuse ``prompts.TONE = True``); one the code does not bind, or binds
    to a plain ``str``, is not. Another name the code binds (a class or a module whose
    constants are read through it, a variable typed by a ``Literal``), another name, or
    an unknown module, is rewritten unless the value reaches no text (:func:`_inert`)."""
    if names == frozenset():
        return False
    if key is not None and names is not None:
        if key in names:
            return True
        if not _reaches_text(_bound(module, key)):
            return False
    return not _inert(value)


def _bound(module: MypyFile | TypeInfo | object, key: str) -> SymbolNode | None:
    """What ``module`` (or a class, or a base of it) binds ``key`` to in the code."""
    if isinstance(module, MypyFile):
        symbol = module.names.get(key)
    elif isinstance(module, TypeInfo):
        symbol = module.get(key)
    else:
        return None
    return None if symbol is None else symbol.node


def _reaches_text(node: SymbolNode | None) -> bool:
    """Whether text read as written in code may be reached through ``node``: anything bound
    but a variable declared a plain ``str`` (or a value that reaches no text), which no
    rule reads as text written in code (a ``Literal`` one is)."""
    if node is None:
        return False
    if not isinstance(node, Var) or node.type is None:
        return True
    proper = get_proper_type(node.type)
    items = proper.items if isinstance(proper, UnionType) else [proper]
    return not all(_plain_text(item) or _inert(item) for item in items)


def _plain_text(typ: Type) -> bool:
    proper = get_proper_type(typ)
    return isinstance(proper, Instance) and proper.type.fullname == "builtins.str"


_INERT: Final = frozenset({"builtins.bool", "builtins.int", "builtins.float", "builtins.complex"})
"""Values that reach no text: a flag or a number (``bool`` cannot be subclassed)."""
_INERT_CONTAINERS: Final = frozenset(
    {"builtins.list", "builtins.tuple", "builtins.dict", "builtins.set", "builtins.frozenset"}
)


def _inert(typ: Type | None) -> bool:
    """Whether a value of type ``typ`` reaches no text: ``None``, a flag, a number, or a
    builtin container of those. An object of any other class (its attributes may be read
    where the name it replaces was: ``Prompts.TONE``), a class, a module, a function, text,
    ``object`` and ``Any`` may."""
    proper = get_proper_type(typ)
    if isinstance(proper, NoneType):
        return True
    if isinstance(proper, LiteralType):
        return _inert(proper.fallback)  # an enum's member is an object of its class
    if isinstance(proper, UnionType):
        return all(_inert(item) for item in proper.items)
    if isinstance(proper, TupleType):
        fallback = proper.partial_fallback.type.fullname
        return fallback == "builtins.tuple" and all(_inert(item) for item in proper.items)
    if isinstance(proper, Instance):
        name = proper.type.fullname
        return name in _INERT or (
            name in _INERT_CONTAINERS and all(_inert(arg) for arg in proper.args)
        )
    return False


def check_attribute_write(
    callee: str, ctx: FunctionContext | MethodContext, checker: TypeChecker
) -> None:
    """Report ``setattr()``/``delattr()`` on a module, or on a class or its instance, that may
    rewrite (or, on an instance, shadow) a ``Final`` constant."""
    if len(ctx.args) < 2 or len(ctx.args[0]) != 1 or len(ctx.args[1]) != 1:
        return
    owner, name = ctx.args[0][0], ctx.args[1][0]
    module: MypyFile | TypeInfo | object | None = _module(owner, _scope_of(checker))
    if module is None:
        typ = get_proper_type(ctx.arg_types[0][0])
        if isinstance(typ, Instance) and typ.type.fullname == _MODULE_TYPE:
            module = _UNKNOWN
        else:
            module = _class_of(typ)
            if module is None:
                return  # neither a module nor a class: no Final constant lives there
    what = f"{callee.rpartition('.')[2]}()"
    key = name.value if isinstance(name, StrExpr) else None
    value = ctx.arg_types[2][0] if len(ctx.arg_types) > 2 and len(ctx.arg_types[2]) == 1 else None
    trusted = _trusted(module)
    if _rewrites(module, trusted, key, value):
        target = (
            f'the variable "{name.value}", declared trusted'
            if isinstance(name, StrExpr)
            else "an attribute named by text not known in the code"
        )
        _fail_trusted(checker, f"{what} on {_display(module)} sets {target}", ctx.context)
    constants = _constants(module)
    if not _rewrites(module, constants, key, value):
        return
    if isinstance(name, StrExpr) and constants is not None and name.value in constants:
        target = f'the Final constant "{name.value}"'
    elif isinstance(name, StrExpr) and constants is not None:
        target = f'"{name.value}", through which its Final constants may be read'
    elif isinstance(name, StrExpr):
        target = f'"{name.value}", which may be a Final constant of it'
    else:
        target = "an attribute named by text not known in the code"
    _fail(checker, f"{what} on {_display(module)} sets {target}", ctx.context)


class _Scope(NamedTuple):
    """What a module's code reaches modules through, read once per module."""

    tree: MypyFile
    imported: Mapping[str, MypyFile]
    """The modules the module imports, by name (mypy checks them first): a module looked up
    by one of these names written in the code (``sys.modules["prompts"]``,
    ``importlib.import_module("prompts")``) is that module. Another name may be any module:
    the build may not have read that one yet."""
    namespaces: dict[int, MypyFile | object]
    """The variables bound anywhere in the module to a module's namespace (``ns =
    globals()``, ``(ns := vars(prompts))``), by the id of their ``Var``, with the module."""
    modules: dict[int, MypyFile | object]
    """The variables bound to a module looked up by name (``persona =
    importlib.import_module("persona")``), by the id of their ``Var``, with the module."""


_SCOPES: dict[str, _Scope] = {}
""":func:`_scope_of` each module walked in this build."""


def forget() -> None:
    """Drop what one build learnt (``VeridicPlugin`` calls this for each new build)."""
    _SCOPES.clear()
    _KEPT.clear()


def _scope_of(checker: TypeChecker, expressions: list[Expression] | None = None) -> _Scope:
    """The :class:`_Scope` of ``checker``'s module, read once per module (the call hooks ask
    at each call); ``expressions`` are the module's, when the caller has them already."""
    tree = checker.tree
    cached = _SCOPES.get(tree.fullname)
    if cached is not None and cached.tree is tree:
        return cached
    imported = {name: checker.modules[name] for name in _imports(tree) if name in checker.modules}
    scope = _SCOPES[tree.fullname] = _Scope(tree, imported, {}, {})
    bindings = [
        (lvalue.node, statement.rvalue)
        for statement in every_statement(tree.defs)
        if isinstance(statement, AssignmentStmt)
        for lvalue in statement.lvalues
        if isinstance(lvalue, NameExpr) and isinstance(lvalue.node, Var)
    ]
    if expressions is None:
        expressions = [expr for statement in tree.defs for expr in get_subexpressions(statement)]
    bindings += [
        (expr.target.node, expr.value)
        for expr in expressions
        if isinstance(expr, AssignmentExpr) and isinstance(expr.target.node, Var)
    ]
    for var, value in bindings:
        module = _looked_up(value, scope)
        if module is not None:
            scope.modules[id(var)] = module
    for var, value in bindings:
        module = _namespace_of(value, scope)
        if module is not None:
            scope.namespaces[id(var)] = module
    return scope


def _imports(tree: MypyFile) -> Iterator[str]:
    """The names of the modules ``tree`` imports (``import app.prompts`` imports ``app``
    too), at any depth of its code."""
    for statement in tree.imports:
        if isinstance(statement, Import):
            names = [module for module, _ in statement.ids]
        elif isinstance(statement, ImportFrom | ImportAll):
            module, _ = correct_relative_import(
                tree.fullname, statement.relative, statement.id, tree.is_package_init_file()
            )
            names = [module]
            if isinstance(statement, ImportFrom):  # from app import prompts
                names += [f"{module}.{name}" for name, _ in statement.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            yield from (".".join(parts[:end]) for end in range(1, len(parts) + 1))


def _namespace_of(expr: Expression, scope: _Scope) -> MypyFile | object | None:
    """The module whose namespace ``expr`` is: ``globals()``, ``vars()`` or ``vars(module)``,
    ``module.__dict__``, a variable bound to one (or ``:=`` binds); ``None`` when it is none
    of them."""
    if isinstance(expr, AssignmentExpr):
        return _namespace_of(expr.value, scope)
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
        return scope.namespaces.get(id(expr.node))
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        if expr.callee.fullname not in _NAMESPACES:
            return None
        if not expr.args:
            return scope.tree
        return _module(expr.args[0], scope) if len(expr.args) == 1 else None
    if isinstance(expr, MemberExpr) and expr.name == "__dict__":
        return _module(expr.expr, scope)
    return None


def _module(expr: Expression, scope: _Scope) -> MypyFile | object | None:
    """The module ``expr`` is: an imported module, one looked up by name (``tree`` itself
    through ``sys.modules[__name__]``), or a variable bound to one of those; ``None``
    when it is none of them."""
    if isinstance(expr, RefExpr) and isinstance(expr.node, MypyFile):
        return expr.node
    if isinstance(expr, NameExpr) and isinstance(expr.node, Var):
        return scope.modules.get(id(expr.node))
    return _looked_up(expr, scope)


def _looked_up(expr: Expression, scope: _Scope) -> MypyFile | object | None:
    """The module ``sys.modules[...]`` or ``importlib.import_module(...)`` gives: the build's
    module of the name written in the code (the module itself for its ``__name__``), else
    one the plugin cannot name (:data:`_UNKNOWN`); ``None`` for any other expression.

    mypy types either as a ``ModuleType``, whose namespace is a ``dict[str, Any]``: a write
    through it is checked against nothing, as one through ``vars(prompts)`` is."""
    name: Expression | None = None
    if isinstance(expr, IndexExpr) and isinstance(expr.base, RefExpr):
        if expr.base.fullname != _SYS_MODULES:
            return None
        if _is_own_name(expr.index, scope.tree):
            return scope.tree
        name = expr.index
    elif isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        if expr.callee.fullname != _IMPORT_MODULE:
            return None
        if len(expr.args) == 1 and expr.arg_names[0] is None:
            name = expr.args[0]  # import_module(name, package) resolves a relative name
    else:
        return None
    if isinstance(name, StrExpr) and not name.value.startswith("."):
        return scope.imported.get(name.value, _UNKNOWN)
    return _UNKNOWN


def _is_own_name(expr: Expression, tree: MypyFile) -> bool:
    """Whether ``expr`` is the module's ``__name__`` (or its name written out)."""
    if isinstance(expr, StrExpr):
        return expr.value == tree.fullname
    return isinstance(expr, NameExpr) and expr.fullname == f"{tree.fullname}.__name__"


def _class_of(typ: ProperType) -> TypeInfo | None:
    """The class ``setattr()`` writes on: ``Prompts`` itself, ``type[Prompts]``, or an
    instance (whose attribute of that name shadows the class's for reads through it)."""
    if isinstance(typ, CallableType) and typ.is_type_obj():
        return typ.type_object()
    if isinstance(typ, TypeType):
        typ = get_proper_type(typ.item)
    return typ.type if isinstance(typ, Instance) else None


def _constants(module: MypyFile | TypeInfo | object) -> frozenset[str] | None:
    """The names in ``module``'s namespace bound to a ``Final`` text constant (its own or
    imported: either is read as code text there), or a class's (its bases' too); ``None``
    when the module is unknown."""
    if isinstance(module, TypeInfo):
        return frozenset(
            name
            for base in module.mro
            for name, symbol in base.names.items()
            if isinstance(symbol.node, Var)
            and symbol.node.is_final
            and isinstance(symbol.node.final_value, str)
        )
    if not isinstance(module, MypyFile):
        return None
    return frozenset(
        name
        for name, symbol in module.names.items()
        if isinstance(symbol.node, Var)
        and symbol.node.is_final
        and isinstance(symbol.node.final_value, str)
    )


def _trusted(module: MypyFile | TypeInfo | object) -> frozenset[str]:
    """The names of a module's variables declared to hold trusted text (its own or
    imported): mypy reads them as minted wherever they are used. A class's are
    ``_attribute_writes``'s, which checks ``setattr()`` on any object."""
    if not isinstance(module, MypyFile):
        return frozenset()
    return frozenset(
        name
        for name, symbol in module.names.items()
        if isinstance(symbol.node, Var)
        and symbol.node.type is not None
        and holds_trusted(symbol.node.type)
    )


def _display(module: MypyFile | TypeInfo | object) -> str:
    if isinstance(module, TypeInfo):
        return f'class "{module.name}"'
    if isinstance(module, MypyFile):
        return f'module "{module.fullname}"'
    return "a module the plugin cannot name"


def _fail(checker: TypeChecker, what: str, context: Context, hint: str = "") -> None:
    checker.fail(
        f"{what}: the plugin reads a Final name bound to a literal as text written in code "
        "(instruction(TONE) is accepted), but rewritten at run time the name got whatever was "
        f"written there, and instruction() mints it; {hint}{_ADVICE}",
        context,
        code=errorcodes.LITERAL,
    )


def _fail_trusted(checker: TypeChecker, what: str, context: Context) -> None:
    checker.fail(
        f"{what}: mypy types such a write as Any and checks nothing, while reads of the "
        "variable stay typed trusted, so it got whatever was written (a reply, unminted), "
        "which a TrustedText position prints in the capability section; assign the variable "
        "by its name (mypy checks that), and mint the text with instruction(), join() or "
        'TrustPolicy("name").vouch(text, reason=...)',
        context,
        code=errorcodes.FORGE,
    )
