"""No item declared trusted is filled by a method that mypy types as taking ``Any``.

mypy checks ``settings["prompt"] = reply`` against a ``TypedDict``'s item, and
``Persona(prompt=reply)`` against a ``NamedTuple``'s field, but not two methods that fill
the same items and are typed as taking anything:

- a ``TypedDict``'s ``__setitem__`` called by its name, which mypy types ``(str, Any)``:
  ``settings.__setitem__("prompt", reply)``, or kept as a value (``write =
  settings.__setitem__``) and called later;
- a ``NamedTuple``'s ``_make(iterable)``, which typeshed types as taking an
  ``Iterable[Any]`` and returning the class: ``Persona._make([reply])``.

The item keeps its declared type, so reads of it are typed trusted while it holds the
reply: the composer refuses it, and a ``TrustedText`` position (a component's hint, a
``Deny`` reason) prints it in the capability section.

Reported (``veridic-forge``; ``veridic-any`` for a value typed ``Any``), for a ``TypedDict``
or ``NamedTuple`` with an item that holds trusted text (``holds_trusted``):

- ``__setitem__`` called with a key written in the code whose item holds trusted text, and
  a value that mypy would not accept in ``settings["prompt"] = value``; with a key not
  known in the code, a value that is not trusted text of every such item; with unpacked
  arguments (``settings.__setitem__(*pair)``), always; ``__setitem__`` named other than as
  what a call calls;
- ``_make()`` given (by position or as ``iterable=``) a display (a list, a tuple) or an
  object typed as a tuple, read item by item against the fields; or another iterable, whose
  items are judged against each trusted field; with unpacked arguments (``_make(*rows)``),
  always.

Hooks: the first call hook run in a module keeps the expressions that name
``__setitem__`` or ``_make`` (:func:`note`, over the expressions it walks already); the end
of the module's check judges them, when mypy has typed them (:func:`report`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mypy.checker import TypeChecker
from mypy.checkexpr import has_any_type
from mypy.messages import format_type
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    CallExpr,
    Context,
    DictExpr,
    Expression,
    ListExpr,
    MemberExpr,
    MypyFile,
    SetExpr,
    StrExpr,
    TupleExpr,
)
from mypy.subtypes import is_subtype
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    TupleType,
    Type,
    TypedDictType,
    TypeType,
    get_proper_type,
)

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted, may_be_text
from veridic.mypy._any_guard import is_any

_DISPLAYS: Final = (ListExpr, TupleExpr, SetExpr, DictExpr)
_SETITEM: Final = "__setitem__"
_MAKE: Final = "_make"

_KEPT: dict[str, tuple[MypyFile, list[tuple[MemberExpr, CallExpr | None]]]] = {}
"""Per module checked in this build: its tree, and each expression naming ``__setitem__``
or ``_make`` with the call that calls it (``None`` when it is not called)."""


def forget() -> None:
    """Drop what one build learnt (``VeridicPlugin`` calls this for each new build)."""
    _KEPT.clear()


def note(tree: MypyFile, expressions: list[Expression]) -> None:
    """Keep the expressions of ``tree`` that name ``__setitem__`` or ``_make`` for
    :func:`report` (mypy has not typed them yet)."""
    if _names.in_package(tree.fullname):
        return
    named = [e for e in expressions if isinstance(e, MemberExpr) and e.name in (_SETITEM, _MAKE)]
    if not named:
        return
    calls = {id(e.callee): e for e in expressions if isinstance(e, CallExpr)}
    _KEPT[tree.fullname] = (tree, [(member, calls.get(id(member))) for member in named])


def report(checker: TypeChecker) -> None:
    """Judge the kept expressions of ``checker``'s module, now typed."""
    kept = _KEPT.pop(checker.tree.fullname, None)
    if kept is None or kept[0] is not checker.tree:
        return
    for member, call in kept[1]:
        owner = get_proper_type(checker.lookup_type_or_none(member.expr))
        if member.name == _SETITEM and isinstance(owner, TypedDictType):
            _check_setitem(checker, owner, member, call)
        elif member.name == _MAKE and call is not None:
            fields = _named_tuple(owner)
            if fields is not None:
                _check_make_call(checker, fields, call)


def _check_setitem(
    checker: TypeChecker, owner: TypedDictType, member: MemberExpr, call: CallExpr | None
) -> None:
    trusted = {key: typ for key, typ in owner.items.items() if holds_trusted(typ)}
    if not trusted:
        return
    name = owner.fallback.type.name
    if call is None:
        checker.fail(
            f'the TypedDict "{name}" got its __setitem__ method kept as a value: mypy types '
            f"it (str, Any), so what calls it later writes any text into its items "
            f"{_listed(trusted)} unchecked; {_CONSEQUENCE}; assign an item as "
            f'd["key"] = value (mypy checks that), and mint the text with {_MINT}',
            member,
            code=errorcodes.FORGE,
        )
        return
    if _unpacked(call):
        writer = f'__setitem__() of the TypedDict "{name}", called by its name'
        _fail_unpacked(checker, writer, f"its items {_listed(trusted)}", call)
        return
    if len(call.args) != 2 or call.arg_kinds != [ARG_POS, ARG_POS]:
        return  # mypy refuses the call
    key, value = call.args
    written = _written(checker, value)
    if written is None:
        return
    if isinstance(key, StrExpr):
        declared = trusted.get(key.value)
        if declared is None:
            return
        what = f'the item "{key.value}", declared {format_type(declared, checker.options)}'
        admitted = is_subtype(written, declared)
    else:
        what = f"a key not known in the code (its items {_listed(trusted)} hold trusted text)"
        admitted = not may_be_text(written, checker) or all(
            is_subtype(written, declared) for declared in trusted.values()
        )
    if admitted and not is_any(written):
        return
    writer = f'__setitem__() of the TypedDict "{name}", called by its name,'
    _fail(checker, writer, written, what, call)


def _written(checker: TypeChecker, value: Expression) -> Type | None:
    """The type of ``value`` as written: a display passed where mypy expects ``Any`` was
    typed in that context (``[reply]`` as a ``list[Any]``), so it is typed again alone."""
    typ = checker.lookup_type_or_none(value)
    if typ is None or not isinstance(value, _DISPLAYS) or not has_any_type(typ):
        return typ
    with checker.msg.filter_errors():
        return checker.expr_checker.accept(value)


def _named_tuple(owner: Type | None) -> TupleType | None:
    """The fields of the ``NamedTuple`` class (or instance) ``owner`` is, as a tuple type."""
    proper = get_proper_type(owner)
    if isinstance(proper, CallableType) and proper.is_type_obj():
        proper = get_proper_type(proper.ret_type)
    elif isinstance(proper, TypeType):
        proper = get_proper_type(proper.item)
    if isinstance(proper, Instance) and proper.type.tuple_type is not None:
        proper = get_proper_type(proper.type.tuple_type)
    if isinstance(proper, TupleType) and proper.partial_fallback.type.is_named_tuple:
        return proper
    return None


def _check_make_call(checker: TypeChecker, fields: TupleType, call: CallExpr) -> None:
    """Judge ``_make(iterable)``, its iterable passed by position or by name; with unpacked
    arguments (``_make(*rows)``), a class with a trusted field is reported."""
    info = fields.partial_fallback.type
    if _unpacked(call):
        named = zip(_field_names(fields), fields.items, strict=False)
        trusted = {name: typ for name, typ in named if holds_trusted(typ)}
        if trusted:
            _fail_unpacked(checker, f"{info.name}._make()", f"its fields {_listed(trusted)}", call)
        return
    for arg, kind, name in zip(call.args, call.arg_kinds, call.arg_names, strict=True):
        if kind == ARG_POS or (kind == ARG_NAMED and name == "iterable"):
            _check_make(checker, fields, arg, call)
            return


def _unpacked(call: CallExpr) -> bool:
    """Whether ``call`` passes arguments unpacked (``*pair``, ``**options``): the plugin
    cannot tell which parameter gets which value."""
    return any(kind in (ARG_STAR, ARG_STAR2) for kind in call.arg_kinds)


def _check_make(checker: TypeChecker, fields: TupleType, given: Expression, call: CallExpr) -> None:
    info = fields.partial_fallback.type
    for name, declared, written in _fills(checker, fields, given, call):
        if not holds_trusted(declared) or (is_subtype(written, declared) and not is_any(written)):
            continue
        shown = format_type(declared, checker.options)
        what = f'the field "{name}" of "{info.name}", declared {shown}'
        _fail(checker, f"{info.name}._make()", written, what, call)
        return  # one report a call: the first trusted field filled with other text


def _fills(
    checker: TypeChecker, fields: TupleType, given: Expression, call: CallExpr
) -> Iterator[tuple[str, Type, Type]]:
    """Each field's name, declared type, and the type of what ``_make(given)`` puts there."""
    names = _field_names(fields)
    if isinstance(given, ListExpr | TupleExpr):
        for name, declared, item in zip(names, fields.items, given.items, strict=False):
            typ = _written(checker, item)
            if typ is not None:
                yield name, declared, typ
        return
    typ = get_proper_type(checker.lookup_type_or_none(given))
    if isinstance(typ, TupleType):  # another NamedTuple, a tuple[...]
        yield from zip(names, fields.items, typ.items, strict=False)
    elif isinstance(typ, AnyType):
        for name, declared in zip(names, fields.items, strict=False):
            yield name, declared, typ
    elif typ is not None:
        with checker.msg.filter_errors():
            element = checker.iterable_item_type(typ, call)
        for name, declared in zip(names, fields.items, strict=False):
            yield name, declared, element


def _field_names(fields: TupleType) -> list[str]:
    """The names of a ``NamedTuple``'s fields (``#2`` where mypy keeps none)."""
    info = fields.partial_fallback.type
    names: list[str] = list(info.metadata.get("namedtuple", {}).get("fields", []))
    return names + [f"#{index + 1}" for index in range(len(names), len(fields.items))]


def _listed(items: dict[str, Type]) -> str:
    return ", ".join(f'"{key}"' for key in sorted(items)[:3])


_CONSEQUENCE: Final = (
    "reads of such an item are typed trusted while it holds whatever was written, which "
    "the composer refuses and a TrustedText position prints in the capability section"
)
_MINT: Final = 'instruction(), join() or TrustPolicy("name").vouch(text, reason=...)'


def _fail(checker: TypeChecker, writer: str, written: Type, what: str, context: Context) -> None:
    code = errorcodes.ANY if is_any(written) else errorcodes.FORGE
    checker.fail(
        f"{writer} got a value of type {format_type(written, checker.options)} for {what}: "
        f"mypy types that method as taking Any and checks nothing against the item's type; "
        f'{_CONSEQUENCE}; fill the item where mypy checks it (d["key"] = value, the '
        f"class's constructor), and mint the text with {_MINT}",
        context,
        code=code,
    )


def _fail_unpacked(checker: TypeChecker, writer: str, what: str, call: CallExpr) -> None:
    checker.fail(
        f"{writer} got unpacked arguments, where {what} hold trusted text: mypy types that "
        "method as taking Any, and the plugin cannot tell which item gets which value; "
        f'{_CONSEQUENCE}; fill the item where mypy checks it (d["key"] = value, the '
        f"class's constructor), and mint the text with {_MINT}",
        call,
        code=errorcodes.FORGE,
    )
