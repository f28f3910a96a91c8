"""``InstructionField``: stored text that the application reads as instruction.

Some stored text is meant to instruct a model: a prompt store's ``content``, a
feature's system prompt kept in a database. Declaring the field as
``InstructionField`` is the application's decision, written in code, that
whatever validates into that field is read as instruction. Validation mints it
with provenance kind ``field`` and origin ``Model.field``; serialisation gives
plain strings back, because trust never survives a trip through storage.

The declaration is also the write side's contract: a tool that writes a model
with instruction fields must be high risk (see the registry), and
:func:`instruction_fields` is how the registry and the guards find them.

>>> from pydantic import BaseModel
>>> class StoredPrompt(BaseModel):
...     name: str
...     content: InstructionField
>>> stored = StoredPrompt(name="triage", content="Classify the ticket.")
>>> provenance(stored.content)
Provenance(kind='field', origin='StoredPrompt.content')
>>> type(stored.model_dump()["content"]) is str
True
>>> sorted(instruction_fields(StoredPrompt))
['content']
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, Field, PlainSerializer, ValidationInfo

from veridic.provenance import TrustedInstruction, mint

__all__ = ["InstructionField", "instruction_fields"]

_SCHEMA_MARK: Final = "x-veridic-instruction"


def _read_as_instruction(value: str, info: ValidationInfo) -> TrustedInstruction:
    model = info.config.get("title", "model") if info.config else "model"
    return mint(value, "field", f"{model}.{info.field_name}")


def _as_plain_text(value: str) -> str:
    return str(value)


_MINT: Final = AfterValidator(_read_as_instruction)

InstructionField = Annotated[
    TrustedInstruction,
    _MINT,
    PlainSerializer(_as_plain_text, return_type=str),
    Field(json_schema_extra={_SCHEMA_MARK: True}),
]
"""A pydantic field type for text read as instruction (``readAsInstruction``)."""


def instruction_fields(model: type[BaseModel]) -> frozenset[str]:
    """The dotted paths of every ``InstructionField`` in ``model``, nested models included.

    A field counts when the instruction text sits anywhere in its type
    (``InstructionField``, ``list[InstructionField]``, a nested model that has one).
    """
    return frozenset(_fields(model, "", frozenset()))


def _fields(model: type[BaseModel], prefix: str, seen: frozenset[type[BaseModel]]) -> list[str]:
    found: list[str] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        if _MINT in info.metadata or _mentions(info.annotation):
            found.append(path)
        for nested in _models_in(info.annotation):
            if nested not in seen and nested is not model:
                found.extend(_fields(nested, f"{path}.", seen | {model}))
    return found


def _mentions(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Annotated:
        if _MINT in annotation.__metadata__:
            return True
        return _mentions(typing.get_args(annotation)[0])
    return any(_mentions(arg) for arg in typing.get_args(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if isinstance(annotation, types.GenericAlias | types.UnionType) or typing.get_origin(
        annotation
    ):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []
