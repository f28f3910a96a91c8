"""The kind of JSON value a model wrote stays its kind when a function tool validates it.

pydantic's lax mode keeps the coercions that keep what the model wrote (``"5"``
is 5, ``"true"`` is True, ``1.0`` is 1). It also makes some that change the
kind of a value: JSON ``true`` is the integer 1 (``{"order_id": true}``
refunded the order 1), a number is a boolean, and a number is a date, a
datetime, a time or a timedelta (seconds since 1970, or in a day). For the
arguments a model wrote those are refused, at every depth of the input model,
as other invalid arguments are; a tool that takes both kinds declares both
(``int | bool``), and pydantic's smart union keeps each as it was written.

pydantic has no per-type switch for this (strict mode refuses ``"5"`` too), so
the input model's core schema is copied with a check before each such leaf,
and the copy validates the model's arguments. The model class, its JSON
schema and its own validator stay as they were: only model-written arguments
pass here. Literal and enum leaves are checked by the kinds of their values, so
``Literal[1]`` refuses ``true`` and ``Literal[True]`` refuses ``1``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ValidationError
from pydantic_core import CoreSchema, ErrorDetails, PydanticCustomError, SchemaValidator

# Each leaf the check guards: the JSON kinds it refuses, and what it wants, as an error says it.
_NUMBER_WANTED: Final = {
    "int": "a valid integer",
    "float": "a valid number",
    "fraction": "a valid fraction",
    "complex": "a valid complex number",
}
_TIME_WANTED: Final = {
    "date": "a valid date (a string such as 2026-05-01)",
    "datetime": "a valid datetime (a string such as 2026-05-01T09:30:00Z)",
    "time": "a valid time (a string such as 09:30:00)",
    "timedelta": "a valid duration (a string such as PT1H or 01:00:00)",
}

# The keys of a core schema node whose values hold schemas (or fields, arguments, choices).
_NESTED: Final = frozenset(
    {
        "schema",
        "items_schema",
        "keys_schema",
        "values_schema",
        "choices",
        "definitions",
        "fields",
        "arguments_schema",
        "var_args_schema",
        "var_kwargs_schema",
        "lax_schema",
        "strict_schema",
        "json_schema",
        "python_schema",
        "steps",
        "extras_schema",
        "extras_keys_schema",
    }
)

# Kept as function_schema keeps the models (bounded, cleared when full): a validation holds
# its model, so a weak key would never die.
_VALIDATIONS: dict[type[BaseModel], Callable[[object], BaseModel]] = {}
_VALIDATIONS_KEPT: Final = 4096


def kind_keeping_validation(model: type[BaseModel]) -> Callable[[object], BaseModel]:
    """The validation of ``model`` that refuses a JSON value whose kind a leaf would change.

    Built once per model (tools of one signature share a model) and kept, as
    :mod:`veridic.tools.function_schema` keeps the shared models. It returns a
    ``model`` instance and raises pydantic's ``ValidationError``, as
    ``model.model_validate`` does, which it is for a model without such a leaf.

    A nested model with an ``__init__`` of its own is built by that ``__init__``,
    which validates with the class's own validator, past the guards: its
    arguments are checked first by the copy without that ``__init__`` (only the
    changed kinds it finds are refused, so an ``__init__`` that fills a value in
    still may), then validated by ``model`` itself. Its validators then run
    twice, as pydantic runs them for each branch of a union it tries.
    """
    found = _VALIDATIONS.get(model)
    if found is None:
        schema = model.__pydantic_core_schema__
        walk = _Walk(schema.get("definitions", []) if schema["type"] == "definitions" else [])
        checked = walk.checked(schema)
        found = model.model_validate
        if walk.own_init:
            found = _checked_first(_built(checked).validate_python, model.model_validate)
        elif checked is not schema:
            found = _built(checked).validate_python
        if len(_VALIDATIONS) >= _VALIDATIONS_KEPT:
            _VALIDATIONS.clear()
        _VALIDATIONS[model] = found
    return found


def _checked_first(
    check: Callable[[object], object], validation: Callable[[object], BaseModel]
) -> Callable[[object], BaseModel]:
    """``validation``, after ``check`` found no changed kind in what it is given.

    Only the changed kinds ``check`` finds are refused here: it sets the models' own
    ``__init__`` aside, so its other errors (a value such an ``__init__`` fills in)
    may not be the model's; ``validation`` says those that are.
    """

    def validate(arguments: object) -> BaseModel:
        try:
            check(arguments)
        except ValidationError as error:
            changed = [item for item in error.errors() if _is_changed_kind(item)]
            if changed:
                raise ValidationError.from_exception_data(
                    error.title,
                    [
                        {
                            "type": PydanticCustomError(_KIND_CHANGED, _SAID, item["ctx"]),
                            "loc": item["loc"],
                            "input": item["input"],
                        }
                        for item in changed
                    ],
                ) from None
        return validation(arguments)

    return validate


def _is_changed_kind(item: ErrorDetails) -> bool:
    """Whether a guard raised the error (an application's validator may use the same type)."""
    return item["type"] == _KIND_CHANGED and set(item.get("ctx", ())) == _SAID_KEYS


def _built(schema: object) -> SchemaValidator:
    """A validator of ``schema`` built whole from it, the guards of nested models included.

    pydantic-core validates a model or a pydantic dataclass that is complete with
    the class's own prebuilt validator, whatever schema names it, and the guards
    would never run; ``_use_prebuilt=False`` (the switch pydantic itself passes
    when it rebuilds a model) builds every node from the copy instead. The
    application's classes are read, never changed, so another thread using them
    meanwhile sees them as they were. The switch came with pydantic 2.13, the
    least version veridic installs with.
    """
    return SchemaValidator(schema, _use_prebuilt=False)  # type: ignore[arg-type]  # a core schema, copied


@dataclass
class _Walk:
    """One copy of a core schema with its leaves guarded, and the definitions its refs name
    (a union's labels are read with them)."""

    definitions: list[CoreSchema]
    own_init: bool = False  # whether a guarded model's __init__ was set aside in the copy

    def checked(self, value: object) -> object:
        """``value`` (a schema, a field, a list or mapping of them) with its leaves guarded;
        ``value`` itself when nothing in it is, so that an unguarded model keeps its validator."""
        if isinstance(value, dict):
            if isinstance(value.get("type"), str):
                return self._node(value)
            return _changed(value, {key: self.checked(item) for key, item in value.items()})
        if isinstance(value, list | tuple):
            items = [self.checked(item) for item in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            return items if isinstance(value, list) else tuple(items)
        return value

    def _node(self, node: dict[str, object]) -> dict[str, object]:
        refusal = _refusal(node)
        if refusal is not None:
            return _guarded(node, refusal)
        nested = {key: self.checked(item) for key, item in node.items() if key in _NESTED}
        new = _changed(node, {**node, **nested})
        if new is node:
            return node
        if node["type"] == "union":
            new["choices"] = self._labelled(node["choices"], new["choices"])
        if node["type"] == "model" and node.get("custom_init"):
            new["custom_init"] = False  # its __init__ would validate past the guards
            self.own_init = True
        return new

    def _labelled(self, old: object, new: object) -> object:
        """A union's choices, each guarded one labelled as pydantic labels the choice it guards.

        pydantic names a union's branch in an error's location by its validator
        (``label.int``), and a guard's name (``function-before[...]``) is no word
        for the model to read.
        """
        if not isinstance(old, list) or not isinstance(new, list):
            return new  # a tagged union's choices are a mapping, keyed by their tags
        return [
            choice
            if choice is before or isinstance(choice, tuple)
            else (choice, self._title(before))
            for before, choice in zip(old, new, strict=True)
        ]

    def _title(self, choice: object) -> str:
        schema = {"type": "definitions", "schema": choice, "definitions": self.definitions}
        return SchemaValidator(schema).title


def _changed(old: dict[str, object], new: dict[str, object]) -> dict[str, object]:
    return old if all(new[key] is item for key, item in old.items()) else new


def _guarded(node: dict[str, object], refusal: Callable[[object], object]) -> dict[str, object]:
    guarded: dict[str, object] = {
        "type": "function-before",
        "function": {"type": "no-info", "function": refusal},
        "schema": {key: item for key, item in node.items() if key != "ref"},
    }
    if "ref" in node:  # a definition is found by its ref: the guard takes it over
        guarded["ref"] = node["ref"]
    return guarded


def _refusal(node: dict[str, object]) -> Callable[[object], object] | None:
    """The guard of a leaf whose lax validation changes a JSON value's kind, if it is one."""
    kind = node["type"]
    if kind in _NUMBER_WANTED:
        return _refusing(_NUMBER_WANTED[str(kind)], boolean=True, number=False)
    if kind == "bool":
        return _refusing("a valid boolean", boolean=False, number=True)
    if kind in _TIME_WANTED:
        return _refusing(_TIME_WANTED[str(kind)], boolean=True, number=True)
    if kind == "literal":
        return _refusing_values(node.get("expected"), "one of the listed values")
    if kind == "enum":
        members = node.get("members")
        values = [getattr(member, "value", None) for member in members or ()]  # type: ignore[attr-defined]  # a list of enum members
        return _refusing_values(values, "one of the enum's values")
    return None


def _refusing_values(values: object, wanted: str) -> Callable[[object], object] | None:
    """The check of a literal or an enum: a kind none of its values has is refused."""
    listed = list(values) if isinstance(values, list | tuple) else []
    booleans = any(isinstance(value, bool) for value in listed)
    numbers = any(_is_number(value) for value in listed)
    if booleans == numbers:  # both kinds, or neither: pydantic's own check suffices
        return None
    return _refusing(wanted, boolean=not booleans, number=not numbers)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _refusing(wanted: str, *, boolean: bool, number: bool) -> Callable[[object], object]:
    key = (wanted, boolean, number)
    found = _REFUSALS.get(key)
    if found is None:
        found = _REFUSALS[key] = _refusal_of(wanted, boolean=boolean, number=number)
    return found


def _refusal_of(wanted: str, *, boolean: bool, number: bool) -> Callable[[object], object]:
    def refuse_a_changed_kind(value: object) -> object:
        if boolean and isinstance(value, bool):
            written = "true" if value else "false"
            raise PydanticCustomError(
                _KIND_CHANGED,
                _SAID,
                {"wanted": wanted, "kind": "boolean", "written": f"boolean {written}"},
            )
        if number and _is_number(value):
            raise PydanticCustomError(
                _KIND_CHANGED,
                _SAID,
                {"wanted": wanted, "kind": "number", "written": f"number {_number_written(value)}"},
            )
        return value

    return refuse_a_changed_kind


_KIND_CHANGED: Final = "kind_changed"
_SAID_KEYS: Final = frozenset({"wanted", "kind", "written"})
_SAID: Final = (
    "Input should be {wanted}, not the {written}: a {kind} is not read as another kind of value"
)


def _number_written(value: object) -> str:
    """The number as an error quotes it back to the model: a huge integer by its size alone
    (its digits would fill the error, and past 4300 digits Python will not write them)."""
    if isinstance(value, int) and value.bit_length() > _BITS_QUOTED:
        return f"of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


_BITS_QUOTED: Final = 128
_REFUSALS: dict[tuple[str, bool, bool], Callable[[object], object]] = {}
