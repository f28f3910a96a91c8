"""``InstructionField``: stored text that the application reads as instruction.

Some stored text is meant to instruct a model: a prompt store's ``content``, a
feature's system prompt kept in a database. Declaring the field as
``InstructionField`` is the application's decision, written in code, that
whatever validates into that field is read as instruction. Validation mints it
with provenance kind ``field`` and origin ``Model.field``; serialisation gives
plain strings back, because trust never survives a trip through storage.
Text branded untrusted (:func:`veridic.untrusted`) is refused with a
:class:`~veridic.ProvenanceError`, whichever way it arrives (the constructor,
``model_validate``, assignment under ``validate_assignment``, a
``TypeAdapter``): handing outside text to a flagged field would launder it.
So is a JSON document branded untrusted (an MCP server's answer, a tool
result) given to ``model_validate_json`` or ``TypeAdapter.validate_json``: its
strings carry no brand once parsed, but the document did. A ``Json[...]``
field parses its string inside pydantic, where the brand cannot be seen: give
outside JSON to ``model_validate_json`` instead. The same holds for the application's own
parse (``json.loads()``, then ``model_validate()``) and for pydantic-core's
validator called directly (``Model.__pydantic_validator__.validate_json()``):
the document is found only at pydantic's public entry points, and strings
parsed elsewhere carry no brand.

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

import functools
import sys
import types
import typing
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PlainSerializer,
    ValidationInfo,
)

from veridic._sample import clip
from veridic.errors import ProvenanceError, VeridicError
from veridic.text.provenance import TrustedInstruction, is_untrusted, mint, source_shown

__all__ = ["InstructionField", "instruction_fields"]

_SCHEMA_MARK: Final = "x-veridic-instruction"
_FIX: Final = (
    "reading a flagged field mints its text as an instruction, so it may hold only what "
    "the application stored as one: keep outside text out of the field (store it in a "
    "plain str field and place it with Composer.data()), or vouch for it with a "
    "TrustPolicy, which records why"
)

_JSON_ENTRIES: Final = {
    ("pydantic.main", "model_validate_json"): "json_data",
    ("pydantic.type_adapter", "validate_json"): "data",
}
"""pydantic's public entry points that parse a JSON document, and the name of the
parameter that holds the document."""


def _refuse_untrusted(value: object, info: ValidationInfo) -> object:
    # Seen before pydantic's str validation, which drops the brand: a flagged
    # field fed text branded untrusted would mint it, which is laundering.
    if is_untrusted(value):
        raise ProvenanceError(
            f"InstructionField {_field_of(info)} got untrusted text (source "
            f"{source_shown(value)}): {clip(value)}; {_FIX}"
        )
    if info.mode == "json":
        document = _json_document()
        if is_untrusted(document):
            raise ProvenanceError(
                f"InstructionField {_field_of(info)} was read from a JSON document branded "
                f"untrusted (source {source_shown(document)}): "
                f"{clip(value) if isinstance(value, str) else clip(document)}; {_FIX}"
            )
    return value


def _json_document() -> object:
    """The JSON document that the validation running this validator was given, or ``None``.

    In JSON mode a flagged field sees a string pydantic parsed, with no brand left:
    the brand was on the document. pydantic-core runs validators without frames of
    its own, so the nearest frame above that is one of pydantic's JSON entry points
    (past any validator of the application's in between) holds the document.
    """
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        parameter = _JSON_ENTRIES.get((module, frame.f_code.co_name))
        if parameter is not None:
            return frame.f_locals.get(parameter)
        frame = frame.f_back
    return None


def _read_as_instruction(value: str, info: ValidationInfo) -> TrustedInstruction:
    return mint(value, "field", _field_of(info))


def _field_of(info: ValidationInfo) -> str:
    """``Model.field`` of the value being validated (``InstructionField`` in a bare adapter)."""
    if info.field_name is None:
        return "InstructionField"
    model = info.config.get("title", "model") if info.config else "model"
    return f"{model}.{info.field_name}"


def _as_plain_text(value: str) -> str:
    """The field's text for storage; never text branded untrusted.

    Validation refuses untrusted text, but ``model_construct()``,
    ``model_copy(update=...)`` and assignment without ``validate_assignment`` put
    values in unchecked: serialised as a plain string, outside text would be stored
    and read back, minted, as an instruction.
    """
    if is_untrusted(value):
        raise ProvenanceError(
            f"an InstructionField holds untrusted text (source {source_shown(value)}): "
            f"{clip(value)}; it was put there without validation (model_construct(), "
            "model_copy(update=...), or assignment without validate_assignment), and "
            "serialising it would store outside text to be read back as instruction: set "
            "the field through validation (model_validate(), "
            "ConfigDict(validate_assignment=True)), or keep outside text in a plain str field"
        )
    return str(value)


_MINT: Final = AfterValidator(_read_as_instruction)

InstructionField = Annotated[
    TrustedInstruction,
    BeforeValidator(_refuse_untrusted),
    _MINT,
    PlainSerializer(_as_plain_text, return_type=str),
    Field(json_schema_extra={_SCHEMA_MARK: True}),
]
"""A pydantic field type for text read as instruction (``readAsInstruction``)."""


@functools.lru_cache(maxsize=4096)
def instruction_fields(model: type[BaseModel]) -> frozenset[str]:
    """The dotted paths of every ``InstructionField`` in ``model``, nested models included.

    A field counts when the instruction text sits anywhere in its type
    (``InstructionField``, ``list[InstructionField]``, a nested model that has one).
    Read once per model class (a model's fields are fixed when it is complete).

    Raises:
        VeridicError: ``model``, or a model it nests, is not fully defined yet (a
            forward reference pydantic has not resolved): its fields are not known,
            and an answer of "none" would be kept after ``model_rebuild()``.
    """
    return frozenset(_fields(model, "", frozenset()))


def _fields(model: type[BaseModel], prefix: str, seen: frozenset[type[BaseModel]]) -> list[str]:
    if model is not BaseModel and not model.__pydantic_complete__:  # BaseModel: no fields
        raise VeridicError(
            f"{model.__name__} is not fully defined yet (pydantic has not resolved the "
            "annotations it refers to), so which of its fields are read as instruction is "
            "not known: define the classes it refers to, then call "
            f"{model.__name__}.model_rebuild() before asking"
        )
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
