"""A template's parameter type: its keys, and what an instruction template may be given.

A template is bound to a ``TypedDict`` or a pydantic model. This module reads
the keys that type declares (checked against the template's variables when
the template loads) and, for an instruction template, turns each field's type
into a run-time check. An instruction field may only hold what code wrote, so its
type must be ``TrustedInstruction`` (``InstructionField`` included), a scalar
whose text carries no words of its own (``bool``, ``int``, ``float``, ``None``,
a member of an ``Enum`` class or a ``Literal`` value, both written in code: a
refund limit, a tier), an ordered container of those (``list``, ``tuple``,
``Sequence``, ``Mapping`` or ``dict`` with ``TrustedInstruction`` keys, a
nested ``TypedDict``), or a union of them. Scalars are checked by exact type
(an ``int`` subclass may override ``__str__``), Enum members by identity with a
member of the class body (:func:`written_member`: a pseudo-member that
``_missing_`` made from a value is refused), and an Enum class only if its members
hold text, numbers, dates, UUIDs or tuples of them (:func:`changeable_member`). Sets
are refused because their order, and so the prompt's bytes, changes from run to run.

A value is checked as it will be read: :func:`snapshot` copies containers
into plain ``dict``, ``list`` and ``tuple`` before the check, and the render
reads the copy, so a mapping that makes values on access (a ``defaultdict``,
a custom ``__getitem__``) cannot hand the template a value the check never saw.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import math
import operator
import types
import typing
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    MutableSet,
    Sequence,
)
from collections.abc import Set as AbstractSet
from decimal import Decimal
from enum import Enum, Flag
from fractions import Fraction
from itertools import chain, pairwise
from typing import Annotated, Final, Literal, Union, cast
from uuid import UUID

import typing_extensions
from pydantic import BaseModel, BeforeValidator

from veridic._sample import class_named, clip, error_message
from veridic._words import a_type, article
from veridic.errors import ProvenanceError, TemplateParamsError
from veridic.text.provenance import TrustedInstruction, is_trusted, untrusted

__all__ = [
    "Check",
    "Params",
    "SortedSet",
    "changeable_member",
    "declared_text",
    "error_message",
    "instruction_checks",
    "keys_holding_sets",
    "ordered",
    "read_params",
    "snapshot",
    "trusted_text",
    "written_member",
]

Bad = tuple[str, object] | None
"""What a check found: ``None`` when the value may render, else the path and the offending leaf."""

Check = Callable[[object], Bad]

_WRAPPERS: Final = frozenset(
    {
        typing_extensions.Required,
        typing_extensions.NotRequired,
        typing_extensions.ReadOnly,
        typing.Required,
        typing.NotRequired,
    }
)
_SEQUENCES: Final = frozenset({list, tuple, Sequence})
_MAPPINGS: Final = frozenset({dict, Mapping})
_LITERAL_TYPES: Final = frozenset({str, int, bool})


class Params:
    """What a parameter type declares: its name, its keys, and whether it is a model."""

    __slots__ = ("keys", "model", "name", "type")

    def __init__(self, params: type, model: bool, keys: tuple[str, ...]) -> None:
        self.type = params
        self.name = params.__name__
        self.model = model
        self.keys = keys

    def values(self, value: object) -> dict[str, object]:
        """The template variables ``value`` holds.

        A model's fields are read as attributes, never dumped: dumping turns an
        ``InstructionField`` back into plain text.

        Raises:
            TemplateParamsError: ``value`` is not an instance of the parameter type.
        """
        if self.model:
            if isinstance(value, self.type):
                return {key: getattr(value, key) for key in self.keys}
        elif isinstance(value, Mapping):
            return {key: value[key] for key in self.keys if key in value}
        shape = (
            f"{article(self.name)} instance"
            if self.model
            else f"a dict with the keys of {self.name}"
        )
        raise TemplateParamsError(
            f"render() got {a_type(value)}, but the template is bound to {self.name}: pass {shape}"
        )


def read_params(params: object) -> Params:
    """Read a parameter type.

    Raises:
        TemplateParamsError: ``params`` is neither a ``TypedDict`` nor a pydantic model.
    """
    if isinstance(params, type):
        if typing_extensions.is_typeddict(params):
            # The keys alone: a data template never needs its types resolved.
            return Params(params, False, tuple(params.__annotations__))
        if issubclass(params, BaseModel):
            return Params(params, True, tuple(params.model_fields))
    raise TemplateParamsError(
        f"params={params!r} is not a parameter type: bind a template to a TypedDict or a "
        "pydantic model whose keys are the template's variables, e.g. "
        "class Params(TypedDict): persona: TrustedInstruction"
    )


def instruction_checks(params: Params, template: str) -> dict[str, Check]:
    """One run-time check per key of ``params``, for an instruction template.

    Raises:
        ProvenanceError: a field's type admits text that is not trusted. It is
            the run-time twin of the type error a plain ``str`` gets in the
            system slot, so it is the same error.
    """
    checks: dict[str, Check] = {}
    _refuse_bare_brands(params, template)
    for key, annotation in _field_hints(params).items():
        try:
            checks[key] = _check_for(annotation)
        except _Refused as refused:
            raise ProvenanceError(
                f"instruction template {template!r} is bound to {params.name}, whose field "
                f"{key!r} is typed {_show(annotation)}, which admits {_show(refused.part)}"
                f"{refused.where}, not what code wrote; an instruction template renders into the "
                "system slot, so each field must be TrustedInstruction, InstructionField, bool, "
                "int, float, an Enum or Literal defined in code, or a list, tuple or Mapping of "
                "them: retype the field (text read from a store as instruction: "
                "InstructionField), or render outside text with a data template "
                "(templates.data) and place it with Composer.user()"
            ) from None
    return checks


def _refuse_bare_brands(params: Params, template: str) -> None:
    """Refuse a pydantic model whose field is typed ``TrustedInstruction`` alone.

    pydantic validates the ``NewType`` as ``str`` and stores a plain ``str``, a
    minted value too, so every render would refuse the value it was given (as
    untrusted text), far from the declaration; the ``veridic.mypy`` plugin reports
    the same field (``veridic-forge``). A field with a validator of its own may mint
    its text (vouch for it with a ``TrustPolicy``) and is left to the render's check:
    one in its annotation (``Annotated[TrustedInstruction, AfterValidator(...)]``;
    a constraint such as ``Field(max_length=...)`` mints nothing), a
    ``field_validator`` naming it, or a ``model_validator``, either not of
    ``mode="before"``.

    Raises:
        ProvenanceError: such a field, named.
    """
    if not (params.model and issubclass(params.type, BaseModel)):
        return
    validated = _validated(params.type)
    if _EVERY_FIELD in validated:
        return
    for key, info in params.type.model_fields.items():
        if key in validated or any(_may_mint(item) for item in info.metadata):
            continue
        if _reaches_brand(info.annotation):
            raise ProvenanceError(
                f"instruction template {template!r} is bound to pydantic model "
                f"{params.name}, whose field {key!r} is typed "
                f"{_show(info.annotation)}: pydantic validates it as str and stores a plain "
                "str (a minted value too), so every render would refuse it; declare the "
                "field InstructionField (text the application reads as instruction), or "
                "bind the template to a TypedDict, which keeps the minted values it is given"
            )


_EVERY_FIELD: Final = "*"


def _may_mint(metadata: object) -> bool:
    """Whether an item of a field's metadata validates the value itself and may return
    another one: pydantic's ``AfterValidator``, ``PlainValidator``, ``WrapValidator`` or a
    type's own schema hook; not a constraint (``MaxLen``, ``Strict``, a pattern), and not
    a ``BeforeValidator``, whose result pydantic validates as ``str`` again."""
    return hasattr(metadata, "__get_pydantic_core_schema__") and not isinstance(
        metadata, BeforeValidator
    )


def _validated(model: type[BaseModel]) -> frozenset[str]:
    """The fields a validator of ``model``'s own may mint, ``"*"`` for all of them."""
    found = model.__pydantic_decorators__
    if any(d.info.mode != "before" for d in found.model_validators.values()):
        return frozenset({_EVERY_FIELD})
    names = {
        name
        for decorator in found.field_validators.values()
        if decorator.info.mode != "before"
        for name in decorator.info.fields
    }
    names.update(name for decorator in found.validators.values() for name in decorator.info.fields)
    return frozenset(names)


def _reaches_brand(annotation: object) -> bool:
    """Whether ``TrustedInstruction`` is in ``annotation`` outside any ``Annotated`` whose
    metadata may mint (a constraint there, ``list[Annotated[TrustedInstruction,
    MaxLen(80)]]``, stores a plain ``str`` all the same)."""
    if annotation is TrustedInstruction:
        return True
    if typing.get_origin(annotation) is Annotated:
        inner, *metadata = typing.get_args(annotation)
        return not any(_may_mint(item) for item in metadata) and _reaches_brand(inner)
    return any(_reaches_brand(arg) for arg in typing.get_args(annotation))


_SETS: Final = (set, frozenset, AbstractSet, MutableSet)
"""Set types, as written or as the origin of ``typing.Set[...]``, ``AbstractSet[...]``."""


def keys_holding_sets(params: Params) -> frozenset[str]:
    """The keys of a data template whose declared type holds a set: rendered sorted.

    A set of text iterates in an order that changes from process to process
    (the hash seed), so the same values rendered different bytes on two
    workers: a different block, prompt ``sha256`` and provider prompt cache.
    The render gives the template such a key's value with every set in it
    read sorted (:func:`ordered`), as deferred approvals show a set argument; only
    these keys are walked, so the others cost nothing. The declared types are
    read, nested ``TypedDict``, pydantic models, dataclasses and containers included; a
    key typed ``Any`` or ``object`` (or a container or field of them) may hold a set
    anywhere, so it is walked too. A set in a class whose annotations cannot be resolved
    is not seen. Instruction templates refuse sets (:func:`instruction_checks`).
    """
    try:
        hints = _field_hints(params)
    except TemplateParamsError:
        return frozenset()  # a data template needs only the keys: it loads as before
    return frozenset(key for key, annotation in hints.items() if _holds_set_type(annotation, set()))


def _holds_set_type(annotation: object, seen: set[int]) -> bool:
    """Whether ``annotation`` is or holds a set type, or ``Any`` or ``object`` (which may
    hold one): in its arguments, or the fields of a ``TypedDict``, a pydantic model, a
    dataclass or an attrs class."""
    if id(annotation) in seen:
        return False
    seen.add(id(annotation))
    origin = typing.get_origin(annotation)
    if any(annotation is kind or origin is kind for kind in _SETS):
        return True
    if annotation is typing.Any or annotation is object:
        return True  # may be a set, or hold one: walked at render
    parts = list(typing.get_args(annotation))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            parts += [info.annotation for info in annotation.model_fields.values()]
        elif typing_extensions.is_typeddict(annotation) or _declared_fields(annotation):
            with contextlib.suppress(TemplateParamsError):  # unresolvable: not seen
                parts += _hints(annotation).values()
    return any(_holds_set_type(part, seen) for part in parts)


class SortedSet(frozenset[object]):
    """A set that iterates (and prints) its items sorted, and is looked up as a set is.

    What a data template is given for a set its parameter type declares: ``{% for %}``,
    ``|join``, ``|list`` and ``{{ tags }}`` read the items in one order in every process,
    while ``x in tags`` stays a lookup (a sorted list would make it a scan).
    """

    __slots__ = ("_order", "_written")

    _order: tuple[object, ...]
    _written: str

    def __new__(cls, items: list[object], written: str) -> SortedSet:
        made = super().__new__(cls, items)
        made._order = tuple(items)
        made._written = written
        return made

    def __iter__(self) -> Iterator[object]:
        return iter(self._order)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self._order))
        if self._written == "set":
            return f"{{{inner}}}" if inner else "set()"
        return f"{self._written}({{{inner}}})" if inner else f"{self._written}()"

    __str__ = __repr__


def ordered(value: object, where: str) -> object:
    """``value`` with each set in it (in lists, tuples, mappings, their keys, sets, and the
    fields of dataclasses, pydantic models and attrs instances) a :class:`SortedSet`.

    What holds no set is given back as it is, not copied: a field typed ``Any`` is walked
    at every render, and an application's own ``Mapping`` or named tuple keeps its type
    (and its methods) unless a set inside it had to be replaced; a dataclass, model or attrs
    instance holding one is a shallow copy (``copy.copy``) with that field replaced, so
    its methods read the sorted set, and the caller's instance is left as it is. A value
    that holds itself (a tree of dicts with links to their parents) is walked once: with
    no set in it, it is given back as it is; with one, its containers and instances on
    the loop are copied, the copies holding each other as the originals did.

    Raises:
        TemplateParamsError: a set's items cannot be ordered (text beside numbers, a NaN),
            a value holding a set is nested past Python's recursion limit, or an instance
            holding one copies as itself.
    """
    if not _holds_set(value):
        return value
    try:
        return _Sorting(where).of(value)
    except RecursionError:
        raise TemplateParamsError(
            f"{where} holds a set in a value nested past Python's recursion limit, too deep "
            "to read its sets sorted: pass the value flatter, or as text made in code"
        ) from None


_LEAVES: Final = frozenset({str, int, float, bool, type(None), bytes})
"""Types that hold no set: what almost every item of a walked value is, passed at a lookup
(minted text, a ``str`` subclass, a little later)."""


def _holds_set(value: object) -> bool:
    """Whether ``value`` is or holds a set in its lists, tuples and mappings (keys too),
    and the fields of its dataclasses, pydantic models and attrs instances.

    A loop, not a recursion: a field typed ``Any`` is walked at every render, however
    deep or self-holding its value, and most hold no set (then nothing is copied).
    """
    pending = [value]
    walked: set[int] = set()
    while pending:
        item = pending.pop()
        if type(item) in _LEAVES or isinstance(item, str):
            continue
        held: Iterable[object]
        if isinstance(item, list | tuple | dict):  # no ABC to ask: the usual containers
            held = item
        elif isinstance(item, AbstractSet):
            return True
        elif isinstance(item, Mapping):
            held = item
        else:
            names = _fields(item)
            if names is None:
                continue
            held = [getattr(item, name, None) for name in names]  # None: a field not set
        if id(item) in walked:
            continue
        walked.add(id(item))
        pending.extend(held)
        if isinstance(held, Mapping):
            pending.extend(held.values())
    return False


def _fields(value: object) -> tuple[str, ...] | None:
    """The names of the fields of a dataclass, a pydantic model (its extra fields too) or
    an attrs instance: what a template reads of it (``item.tags``), and what may hold a
    set; ``None`` for any other object (its attributes are its own business)."""
    names = _declared_fields(type(value))
    if names is not None and isinstance(value, BaseModel) and value.__pydantic_extra__:
        return (*names, *value.__pydantic_extra__)
    return names


def _declared_fields(kind: type) -> tuple[str, ...] | None:
    """The field names instances of ``kind`` declare (:func:`_fields`), read once a type:
    a value typed ``Any`` is walked at every render."""
    try:
        return _DECLARED[kind]
    except KeyError:
        pass
    names: tuple[str, ...] | None = None
    if issubclass(kind, BaseModel):
        names = tuple(kind.model_fields)
    elif dataclasses.is_dataclass(kind):
        names = tuple(field.name for field in dataclasses.fields(kind))
    elif (attributes := getattr(kind, "__attrs_attrs__", None)) is not None:
        names = tuple(attribute.name for attribute in attributes)
    if len(_DECLARED) >= _DECLARED_KEPT:  # classes made at run time, without end
        _DECLARED.clear()
    _DECLARED[kind] = names
    return names


_DECLARED: Final[dict[type, tuple[str, ...] | None]] = {}
_DECLARED_KEPT: Final = 1024


class _Sorting:
    """One walk of a value that holds a set, remembering what each container became.

    A list or mapping is entered before its items are read, so an item holding it (a
    loop) is given its copy; one whose items are all unchanged, and that no item holds,
    is given back as it is.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.became: dict[int, object] = {}
        self.looped: set[int] = set()

    def of(self, value: object) -> object:
        key = id(value)
        if key in self.became:
            self.looped.add(key)
            return self.became[key]
        if type(value) in _LEAVES or isinstance(value, str | SortedSet):
            return value
        if isinstance(value, AbstractSet):
            return self._set(value)
        if isinstance(value, list):
            copy: list[object] = []
            self.became[key] = copy
            items = [self.of(item) for item in value]
            if key not in self.looped and all(map(operator.is_, items, value)):
                return self._kept(value)
            copy.extend(items)
            return copy if type(value) is list else self._refilled(value, items, items)
        if isinstance(value, tuple):
            items = [self.of(item) for item in value]
            if key in self.became:  # made while its items were read, through a loop
                return self.became[key]
            if all(map(operator.is_, items, value)):
                return self._kept(value)
            made = self._tupled(value, items)
            self.became[key] = made
            return made
        if isinstance(value, Mapping):
            pairs: dict[object, object] = {}
            self.became[key] = pairs
            given = list(value.items())
            read = [(self.of(name), self.of(item)) for name, item in given]
            if key not in self.looped and all(map(operator.is_, chain(*read), chain(*given))):
                return self._kept(value)
            pairs.update(read)
            return pairs if type(value) is dict else self._remapped(value, pairs)
        names = _fields(value)
        if names is None:
            return value
        return self._fielded(value, names)

    def _fielded(self, value: object, names: tuple[str, ...]) -> object:
        """A dataclass, model or attrs instance holding a set: a shallow copy whose fields
        holding one are set to their sorted copies (as its own ``__init__`` sets them,
        frozen or not); the caller's instance is left as it is."""
        made = self._copied(value)
        if made is value:  # a __copy__ of its own that gives the instance itself
            raise TemplateParamsError(
                f"{self.where} holds {a_type(value)} whose copy is itself (its own __copy__), "
                "with a set in it: the render reads a set sorted, and cannot without changing "
                "the instance you passed: pass the set as a list in the order the prompt "
                "should show, or let copy.copy() make a new instance"
            )
        self.became[id(value)] = made
        given = [(name, getattr(value, name, None)) for name in names]  # None: a field not set
        changed = [(name, new) for name, old in given if (new := self.of(old)) is not old]
        if not changed and id(value) not in self.looped:
            return self._kept(value)
        extra = made.__pydantic_extra__ if isinstance(made, BaseModel) else None
        for name, new in changed:
            if extra is not None and name in extra:
                extra[name] = new  # the copy's own mapping (BaseModel.__copy__ copies it)
            else:
                object.__setattr__(made, name, new)
        return made

    def _tupled(self, value: tuple[object, ...], items: list[object]) -> tuple[object, ...]:
        """``value`` remade of ``items`` as its own type, so what a subclass adds (a property,
        a method a template calls) is still there: a named tuple by ``_make``, another
        subclass called with the items as one iterable, its instance attributes copied.

        Raises:
            TemplateParamsError: the subclass cannot be remade so (its constructor takes
                its items one by one, or makes other items of them).
        """
        if type(value) is tuple:
            return tuple(items)
        if hasattr(value, "_make"):
            return cast("tuple[object, ...]", value._make(items))
        return cast("tuple[object, ...]", self._called(value, items, items))

    def _remapped(self, value: Mapping[object, object], pairs: dict[object, object]) -> object:
        """``value``, a mapping that is not exactly a ``dict``, remade of ``pairs`` as its own
        type: a ``dict`` subclass (``defaultdict``, ``OrderedDict``, ...) copied and refilled
        through its own methods, another mapping called with ``pairs``.

        Raises:
            TemplateParamsError: it cannot be remade so.
        """
        held = list(chain.from_iterable(pairs.items()))
        if isinstance(value, MutableMapping):
            return self._refilled(value, pairs, held)
        return self._called(value, pairs, held)

    def _refilled(self, value: object, items: Iterable[object], held: list[object]) -> object:
        """A list subclass or mutable mapping remade as its own type: a shallow copy
        (``copy.copy``, which keeps its instance attributes), cleared and refilled with
        ``items`` through its own ``clear`` and ``update`` or ``extend``.

        Raises:
            TemplateParamsError: it holds itself (a loop, which the copy cannot keep), or
                its copy is not a new one of its type holding ``held``.
        """
        if id(value) in self.looped:
            raise self._unremade(value, " (it holds itself)", "hold itself")
        try:
            made = copy.copy(value)
            if made is value or type(made) is not type(value):
                raise TypeError("copy.copy() did not make a new one of its type")
            cast("MutableMapping[object, object] | list[object]", made).clear()
            if isinstance(made, list):
                made.extend(items)
            else:
                cast("MutableMapping[object, object]", made).update(
                    cast("dict[object, object]", items)
                )
        except Exception as error:
            raise self._unremade(value, f" (it raised {class_named(error)})", "") from error
        if not _holds_each(_held(made), held):
            raise self._unremade(value, "", "")
        self.became[id(value)] = made
        return made

    def _called(self, value: object, given: object, held: list[object]) -> object:
        """``type(value)(given)``, checked to hold ``held`` itself, with the instance
        attributes of ``value`` its constructor did not set copied.

        Raises:
            TemplateParamsError: the call raised, or made something else.
        """
        kind: Callable[[object], object] = type(value)
        try:
            made = kind(given)
        except Exception as error:
            raise self._unremade(value, f" (it raised {class_named(error)})", "") from error
        if type(made) is not kind or not _holds_each(_held(made), held):
            raise self._unremade(value, "", "")
        if state := getattr(value, "__dict__", None):
            # What the constructor set (a mapping's own store of its items) is its own.
            vars(made).update(
                (name, held) for name, held in state.items() if name not in vars(made)
            )
        self.became[id(value)] = made
        return made

    def _unremade(self, value: object, tried: str, instead: str) -> TemplateParamsError:
        """A refusal of ``value`` (a subclass of a list, tuple or mapping, or another
        mapping) that cannot be remade of its items with its sets sorted."""
        instead = instead or (
            "be remade by copy.copy() and refilled"
            if isinstance(value, list | MutableMapping)
            else "be built from one iterable of its items"
        )
        return TemplateParamsError(
            f"{self.where} holds {a_type(value)} with a set in it, and "
            f"{type(value).__qualname__} cannot be remade of its items{tried}: the render "
            "reads a set sorted on a copy, to leave the value you passed as it is: pass the "
            f"set as a list in the order the prompt should show, or let {a_type(value)} "
            f"{instead}"
        )

    def _copied(self, value: object) -> object:
        """``copy.copy(value)``, or a message naming the variable if the class refuses it
        (a ``__reduce_ex__`` or ``__copy__`` of its own that raises)."""
        try:
            return copy.copy(value)
        except Exception as error:
            raise TemplateParamsError(
                f"{self.where} holds {a_type(value)} with a set in it, and the instance cannot "
                f"be copied ({class_named(error)}: {clip(error_message(error))}): the render "
                "reads a set sorted on a shallow copy, to leave the instance you passed as it is: "
                "pass the set as a list in the order the prompt should show, or let copy.copy() "
                "copy the instance"
            ) from error

    def _kept(self, value: object) -> object:
        self.became[id(value)] = value
        return value

    def _set(self, value: AbstractSet[object]) -> SortedSet:
        items = [self.of(item) for item in value]
        for item in items:
            if _holds_nan(item):
                raise TemplateParamsError(
                    f"{self.where} holds a set with NaN ({clip(repr(item))}): NaN is neither "
                    "less nor more than any number, and equal to none, itself included, so "
                    "the set has no order to render in (it would change from process to "
                    "process) and `x in` the set misses it: leave NaN out of the set, or pass "
                    "a value that says what it stands for (None, a label)"
                )
        kinds = ", ".join(sorted({type(item).__name__ for item in items}))
        keys = [_content(item) for item in items]
        try:  # items of one orderable kind, or TypeError
            order = sorted(range(len(items)), key=keys.__getitem__)
            tie = next((two for two in pairwise(order) if not keys[two[0]] < keys[two[1]]), None)
        except TypeError:
            raise TemplateParamsError(
                f"{self.where} holds a set of {kinds} that cannot be sorted: a "
                "set's order changes from process to process, so the template reads it "
                "sorted; pass a list in the order the prompt should show"
            ) from None
        if tie is not None:
            first, second = (clip(repr(items[at])) for at in tie)
            raise TemplateParamsError(
                f"{self.where} holds a set of {kinds} in which two items, {first} and {second}, "
                "are neither less nor more than each other (sets in them compare by inclusion, "
                "and an __lt__ of your own may compare only part of them): the sort leaves them "
                "in the order "
                "the hash seed gave them, which changes from process to process; pass a list in "
                "the order the prompt should show"
            )
        return SortedSet(
            [items[at] for at in order], "set" if isinstance(value, set) else type(value).__name__
        )


def _holds_each(made: list[object], items: list[object]) -> bool:
    """Whether ``made`` holds ``items`` themselves, in order (not items equal to them)."""
    return len(made) == len(items) and all(map(operator.is_, made, items))


def _held(made: object) -> list[object]:
    """What a remade sequence holds, or a remade mapping's pairs' keys and values, in order."""
    if isinstance(made, Mapping):
        return list(chain.from_iterable(made.items()))
    return list(cast("Iterable[object]", made))


def _holds_nan(item: object) -> bool:
    """Whether ``item`` is NaN (a float's, a ``Decimal``'s) or a tuple or set holding one.

    Infinities are ordered (``-inf`` < every number < ``inf``) and equal to themselves,
    so a set holds them as any number: only NaN is refused.
    """
    if isinstance(item, float):
        return math.isnan(item)
    if isinstance(item, Decimal):
        return item.is_nan()
    if isinstance(item, tuple | SortedSet):
        return any(map(_holds_nan, item))
    return False


def _content(item: object) -> typing.Any:  # whatever the item compares as
    """What a set's item is sorted by: the item, a set (and a tuple holding one) by the items
    it holds, in order. ``<`` of two sets asks whether one holds the other, which leaves
    sets that do not in the order the hash seed gave them. A named tuple orders as a tuple
    does, so it is read as one; a tuple with an ``__lt__`` of its own is sorted by it (and
    refused where it leaves two items unordered, as a dataclass's order is)."""
    if isinstance(item, SortedSet):
        return tuple(map(_content, item))
    if isinstance(item, tuple) and type(item).__lt__ is tuple.__lt__:  # a named tuple too
        return tuple(map(_content, item))
    return item


def declared_text(params: Params, key: str) -> tuple[str, bool, tuple[str, ...]]:
    """How ``params`` types ``key``, for the message that refuses a text value there.

    Gives the type as written (``Literal['calm', 'brisk']``), whether trusted text
    fills it anywhere, and the ``Literal`` strings it names: a str that is none
    of them was refused, and the message must say what would have been taken.
    """
    annotation = _field_hints(params).get(key)
    trusted = False
    words: list[str] = []
    pending = [annotation]
    while pending:
        part = pending.pop()
        if part is TrustedInstruction:
            trusted = True
        elif typing.get_origin(part) is Literal:
            words.extend(arg for arg in typing.get_args(part) if isinstance(arg, str))
        else:
            pending.extend(arg for arg in typing.get_args(part) if arg is not Ellipsis)
    return _show(annotation), trusted, tuple(dict.fromkeys(words))


def _field_hints(params: Params) -> dict[str, object]:
    """Each field of the parameter type with its annotation."""
    if params.model and issubclass(params.type, BaseModel):
        return {key: info.annotation for key, info in params.type.model_fields.items()}
    return _hints(params.type)


def _hints(typed_dict: type) -> dict[str, object]:
    try:
        return typing.get_type_hints(typed_dict, include_extras=True)
    except NameError as error:
        raise TemplateParamsError(
            f"the annotations of {typed_dict.__name__} cannot be resolved ({error}): define the "
            "parameter type at module level, in a module that imports every name its "
            "annotations use"
        ) from error


class _Refused(Exception):
    def __init__(self, part: object, where: str = "") -> None:
        super().__init__(repr(part))
        self.part = part
        self.where = where


def _show(annotation: object) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return repr(annotation).replace("typing.", "").replace("veridic.text.provenance.", "")


def _check_for(annotation: object) -> Check:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated or origin in _WRAPPERS:
        return _check_for(args[0])
    if annotation is TrustedInstruction:
        return trusted_text
    if annotation is bool or annotation is int or annotation is float:
        return _scalar(annotation)
    if annotation is None or annotation is type(None):
        return _none
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        changeable = changeable_member(annotation)
        if changeable is not None:
            raise _Refused(annotation, f" ({changeable})")
        return _member(annotation)
    if origin is Literal and all(type(arg) in _LITERAL_TYPES for arg in args):
        return _literal(args)
    if origin is Union or origin is types.UnionType:
        return _any_of(tuple(_check_for(arg) for arg in args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _each(_check_for(args[0]))
    if origin is tuple and args:
        return _positions(tuple(_check_for(arg) for arg in args))
    if origin in _SEQUENCES and len(args) == 1:
        return _each(_check_for(args[0]))
    if origin in _MAPPINGS and len(args) == 2:
        try:
            keys = _check_for(args[0])
        except _Refused as refused:
            where = (
                " as the keys of a Mapping (a template can output them; a TypedDict fits records)"
            )
            raise _Refused(refused.part, refused.where or where) from None
        return _items(keys, _check_for(args[1]))
    if isinstance(annotation, type) and typing_extensions.is_typeddict(annotation):
        fields = _hints(annotation)
        return _record({key: _check_for(value) for key, value in fields.items()})
    raise _Refused(annotation)


def trusted_text(value: object) -> Bad:
    """The check of a ``TrustedInstruction`` field."""
    return None if is_trusted(value) else ("", value)


def _scalar(kind: type) -> Check:
    def check(value: object) -> Bad:
        return None if type(value) is kind else ("", value)

    return check


def _member(enum: type[Enum]) -> Check:
    def check(value: object) -> Bad:
        return None if isinstance(value, enum) and written_member(value) else ("", value)

    return check


def changeable_member(enum: type[Enum]) -> str | None:
    """Which member of ``enum`` holds a value code can change after the class was written.

    A template reads a member's value (``{{ plan.value.label }}``): a dict or list there,
    changed at run time with outside text (``Plan.PRO.value["label"] = ...``), would reach
    the system slot as the template's own text. Text, numbers, ``None``, trusted text and
    tuples of them cannot change.
    """
    for name, member in enum.__members__.items():
        if not _unchangeable(member._value_):
            return (
                f"its member {name} holds {a_type(member._value_)}, {_why(member._value_)}, "
                "and a template reads it as {{ x.value }}; give the members text, numbers, "
                "dates or tuples of them"
            )
    return None


_UNCHANGEABLE: Final = frozenset(
    {
        str,
        int,
        float,
        complex,
        bool,
        bytes,
        type(None),
        Decimal,
        Fraction,
        UUID,
        datetime.date,
        datetime.timedelta,
    }
)
"""Values no code changes once made, whose text is the same in every process."""
_ZONED: Final = frozenset({datetime.datetime, datetime.time})
"""Likewise when their zone is none or a fixed offset (a ``tzinfo`` class is anyone's)."""


def _unchangeable(value: object) -> bool:
    kind = type(value)
    if kind in _UNCHANGEABLE or is_trusted(value):
        return True
    if kind in _ZONED:
        zone = value.tzinfo  # type: ignore[attr-defined]  # a datetime's or a time's
        return zone is None or type(zone) is datetime.timezone
    return kind is tuple and all(map(_unchangeable, value))  # type: ignore[call-overload]  # a tuple


def _why(value: object) -> str:
    """Why a member's value may not reach a template, said truthfully for its kind."""
    if isinstance(value, AbstractSet):
        return (
            "whose text lists its items in an order that changes from process to process "
            "(the hash seed)"
        )
    kind = type(value)
    if kind.__repr__ is object.__repr__ and kind.__str__ is object.__str__:
        return "whose text is its memory address, different in every process"
    return "which can be changed after the class was written, by text from anywhere"


def written_member(value: Enum) -> bool:
    """Whether ``value`` is a member its class body wrote, or the standard ``Flag`` of some.

    ``isinstance`` is not enough: an Enum's ``_missing_`` may make a pseudo-member from any
    value (an "open" enum that keeps values it does not know, ``Tier(request["tier"])``),
    and its ``value``, ``name`` and text are then that value. A member is found under its
    own name in ``__members__``; a ``Flag`` combination is made by the standard ``_missing_``
    from the members' bits, and its text names only members.
    """
    kind = type(value)
    if kind.__members__.get(value._name_) is value:  # a pseudo-member's name may be None
        return True
    if isinstance(value, Flag):
        missing = getattr(kind._missing_, "__func__", None)
        return missing is getattr(Flag._missing_, "__func__", Flag._missing_)
    return False


_UNTRUSTED: Final = type(untrusted("", source="veridic.templates"))


def _plain_text(value: object) -> bool:
    """Whether ``value`` is text whose methods a check can rely on: a plain ``str``, text
    of one of veridic's brands, or a member its class body wrote of an Enum of ``str``.
    Another subclass may override ``__str__``, ``__eq__``, ``upper``...: the check would
    read one text and the template another."""
    if type(value) is str or type(value) is _UNTRUSTED or is_trusted(value):
        return True
    # A member of a str Enum (a StrEnum) that its class body wrote is code's text, as it
    # is for an Enum variable: its methods are the code's too.
    return isinstance(value, str) and isinstance(value, Enum) and written_member(value)


def _literal(args: tuple[object, ...]) -> Check:
    allowed = frozenset((type(arg), arg) for arg in args)

    def check(value: object) -> Bad:
        # Exact type and value: an equal str of any brand renders the literal's own text
        # (the brands are str's own methods; another subclass is refused, as an int's is).
        if isinstance(value, str):
            if not _plain_text(value):
                return ("", value)
            value = str.__str__(value)
        return None if (type(value), value) in allowed else ("", value)

    return check


def snapshot(value: object) -> object:
    """``value`` with every ``Mapping``, ``list`` and ``tuple`` in it copied into a plain one.

    What an instruction template checks is then what it reads: items are
    read once, through ``items()`` or iteration, and the template gets plain
    containers that make nothing on access.
    """
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return value
    if isinstance(value, list) and kind is list:
        return [snapshot(item) for item in value]
    if isinstance(value, tuple) and kind is tuple:
        return tuple(snapshot(item) for item in value)
    if isinstance(value, Mapping):
        return {key: snapshot(item) for key, item in value.items()}
    return value


def _none(value: object) -> Bad:
    return None if value is None else ("", value)


def _any_of(checks: tuple[Check, ...]) -> Check:
    def check(value: object) -> Bad:
        deepest: Bad = None
        for each in checks:
            bad = each(value)
            if bad is None:
                return None
            # Report the leaf that failed deepest inside a container.
            if deepest is None or len(bad[0]) > len(deepest[0]):
                deepest = bad
        return deepest

    return check


def _each(item: Check) -> Check:
    def check(value: object) -> Bad:
        if type(value) is not list and type(value) is not tuple:
            return ("", value)
        for index, element in enumerate(value):
            bad = item(element)
            if bad is not None:
                return (f"[{index}]{bad[0]}", bad[1])
        return None

    return check


def _positions(items: tuple[Check, ...]) -> Check:
    def check(value: object) -> Bad:
        if type(value) is not tuple or len(value) != len(items):
            return ("", value)
        for index, (each, element) in enumerate(zip(items, value, strict=True)):
            bad = each(element)
            if bad is not None:
                return (f"[{index}]{bad[0]}", bad[1])
        return None

    return check


def _items(key_check: Check, value_check: Check) -> Check:
    def check(value: object) -> Bad:
        if not isinstance(value, Mapping):
            return ("", value)
        for key, element in value.items():
            bad = key_check(key)
            if bad is not None:
                return (f" (the key {_clipped(key)})", bad[1])
            bad = value_check(element)
            if bad is not None:
                return (f"[{_clipped(key)}]{bad[0]}", bad[1])
        return None

    return check


def _record(fields: dict[str, Check]) -> Check:
    def check(value: object) -> Bad:
        if not isinstance(value, dict):
            return ("", value)
        for key, element in value.items():
            # A key that is not plain text could compare equal to a declared one.
            each = fields.get(str.__str__(key)) if _plain_text(key) else None
            if each is None:
                return (f" (the key {_clipped(key)}, which its TypedDict does not declare)", key)
            bad = each(element)
            if bad is not None:
                return (f"[{key!r}]{bad[0]}", bad[1])
        return None

    return check


def _clipped(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 40 else f"{text[:39]}…"
