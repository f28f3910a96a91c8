"""Untrusted text handed to an InstructionField is laundering (veridic-launder).

Validating text into an InstructionField mints it. A plain str is accepted (reading
the field is the application's decision that the stored text instructs); text branded
UntrustedText is refused. tests/test_typecheck_fields.py runs this file again with the
pydantic.mypy plugin, with init_typed off (its default: the constructor takes Any) and
on: the marks hold in all three configurations. pyright reads the constructor's
parameter as the field's type, TrustedInstruction, and refuses every str.
"""

import json
from dataclasses import dataclass
from typing import Annotated, ClassVar, Generic, TypedDict, TypeVar

import pydantic.dataclasses
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    RootModel,
    StringConstraints,
    TypeAdapter,
    field_validator,
    model_validator,
)

from veridic import (
    InstructionField,
    TrustedInstruction,
    TrustPolicy,
    UntrustedText,
    instruction,
    untrusted,
)

LEGACY = TrustPolicy("legacy-prompts")


def _vouched(text: str) -> TrustedInstruction:
    return LEGACY.vouch(text, reason="the persona table is written by the product team")


class StoredPrompt(BaseModel):
    name: str
    content: InstructionField
    fallback: InstructionField | None = None


class Feature(BaseModel):
    title: str
    prompt: StoredPrompt
    rules: list[InstructionField] = []


def laundered(u: UntrustedText, many: dict[str, UntrustedText]) -> None:
    # P: [reportArgumentType]
    # E: [veridic-launder] StoredPrompt() got untrusted text for "content"
    StoredPrompt(name="x", content=u)
    # P: [reportArgumentType] # P: [reportArgumentType]
    StoredPrompt(name="x", content="ok", fallback=u)  # E: [veridic-launder] for "fallback"
    # P: [reportArgumentType]
    # E: [veridic-launder] "content"
    StoredPrompt(name="x", content=untrusted("hi", source="ticket:1"))
    StoredPrompt(**{"name": "x", "content": u})  # noqa: PIE804  # E: [veridic-launder] "content"
    # E: [veridic-launder] model_validate()
    StoredPrompt.model_validate({"name": "x", "content": u})
    # E: [veridic-launder] one of StoredPrompt's instruction fields
    StoredPrompt.model_validate(many)
    # E: [veridic-launder] "content"
    Feature.model_validate({"title": "t", "prompt": {"name": "x", "content": u}})
    # P: [reportArgumentType] # P: [reportArgumentType]
    # E: [veridic-launder] for "rules"
    Feature(title="t", prompt=StoredPrompt(name="x", content="ok"), rules=[u])
    # E: [veridic-launder] TypeAdapter.validate_python()
    TypeAdapter(InstructionField).validate_python(u)
    # E: [veridic-launder] "content"
    TypeAdapter(StoredPrompt).validate_python({"name": "x", "content": u})
    # P: [reportArgumentType]
    stored = StoredPrompt(name="x", content="ok")
    stored.model_copy(update={"content": u})  # E: [veridic-launder] model_copy()
    # P: [reportAttributeAccessIssue]
    stored.content = u  # E: [assignment] "UntrustedText", variable has type "TrustedInstruction"


def accepted(raw: str, text: str, u: UntrustedText, t: TrustedInstruction) -> None:
    # P: [reportArgumentType]
    StoredPrompt(name="x", content="Classify the ticket.")
    # P: [reportArgumentType]
    StoredPrompt(name=u, content=text)
    StoredPrompt(name="x", content=t, fallback=instruction("Be brief."))
    StoredPrompt(**json.loads(raw))
    StoredPrompt.model_validate({"name": u, "content": text})
    StoredPrompt.model_validate(json.loads(raw))
    StoredPrompt.model_validate_json(raw)
    TypeAdapter(InstructionField).validate_python(text)
    TypeAdapter(str).validate_python(u)
    # P: [reportArgumentType] # P: [reportArgumentType]
    Feature(title=u, prompt=StoredPrompt(name="x", content=text), rules=[text])


# A field typed TrustedInstruction (not InstructionField): pydantic validates it as str and
# stores a plain str, so the value mypy calls trusted is refused at run time.
class Persona(BaseModel):
    name: str
    prompt: TrustedInstruction  # E: [veridic-forge] "Persona" got field "prompt" typed
    rules: list[TrustedInstruction] = []  # E: [veridic-forge] stores as a plain str
    note: TrustedInstruction | None = None  # E: [veridic-forge] declare it InstructionField
    read: InstructionField
    vouched: Annotated[TrustedInstruction, AfterValidator(_vouched)]
    maybe: Annotated[TrustedInstruction, AfterValidator(_vouched)] | None = None
    _private: TrustedInstruction = instruction("kept in the class")
    shared: ClassVar[TrustedInstruction] = instruction("a class constant")


class Derived(Persona):
    extra: TrustedInstruction  # E: [veridic-forge] "Derived" got field "extra"


class Kept(TypedDict):
    prompt: TrustedInstruction


@dataclass
class AlsoKept:
    prompt: TrustedInstruction


# A validator of the model's own that mints (a field_validator vouching with a
# TrustPolicy) stores what it returns, trusted text: only the fields it names are kept.
class VouchedPersona(BaseModel):
    prompt: TrustedInstruction
    tone: TrustedInstruction  # E: [veridic-forge] "VouchedPersona" got field "tone"

    @field_validator("prompt")
    @classmethod
    def _vouch(cls, value: str) -> TrustedInstruction:
        return _vouched(value)


class VouchedEverything(BaseModel):
    prompt: TrustedInstruction
    tone: TrustedInstruction

    @field_validator("*", mode="wrap")
    @classmethod
    def _vouch(cls, value: object, handler: object) -> TrustedInstruction:
        return _vouched(str(value))


class VouchedByTheModel(BaseModel):
    prompt: TrustedInstruction

    @model_validator(mode="after")
    def _vouch(self) -> "VouchedByTheModel":
        self.prompt = _vouched(self.prompt)
        return self


class CheckedBefore(BaseModel):
    prompt: TrustedInstruction  # E: [veridic-forge] "CheckedBefore" got field "prompt"

    @field_validator("prompt", mode="before")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


# A pydantic dataclass validates its fields as a model does: a plain str again.
@pydantic.dataclasses.dataclass
class PersonaRecord:
    prompt: TrustedInstruction  # E: [veridic-forge] pydantic dataclass "PersonaRecord"
    read: InstructionField


# A model generic in its field's type, filled in with TrustedInstruction where pydantic
# validates it: a subclass of the filled-in model, RootModel's root, a call of the
# filled-in class (or of an alias of it). Unfilled, the field is validated as Any and keeps
# the minted value: Box(item=instruction("...")) and an annotation Box[TrustedInstruction]
# are accepted.
Item = TypeVar("Item")


class Box(BaseModel, Generic[Item]):
    item: Item


class Tagged(BaseModel, Generic[Item]):
    count: int


class TrustedBox(Box[TrustedInstruction]):  # E: [veridic-forge] "TrustedBox" got field "item"
    pass


class Prompt(RootModel[TrustedInstruction]):  # E: [veridic-forge] "Prompt" got field "root"
    pass


# Over many lines, the base that fills the field in is where the error (and a
# type: ignore) goes, not the class line.
class TaggedTrustedBox(
    Tagged[str],
    # E: [veridic-forge] "item" typed TrustedInstruction by its base Box[TrustedInstruction]
    Box[TrustedInstruction],
):
    pass


class Prompts(RootModel[list[TrustedInstruction]]):  # E: [veridic-forge] field "root" typed
    pass


class VouchedPrompt(RootModel[TrustedInstruction]):
    @field_validator("root")
    @classmethod
    def _vouch(cls, value: str) -> TrustedInstruction:
        return _vouched(value)


class Holder(BaseModel):
    box: Box[TrustedInstruction]  # E: [veridic-forge] "Holder" got field "box"
    tagged: Tagged[TrustedInstruction]
    boxed: Box[str]


PromptAlias = RootModel[TrustedInstruction]
BoxAlias = Box[TrustedInstruction]


def filled_in(box: Box[TrustedInstruction], prompt: RootModel[TrustedInstruction]) -> None:
    Box(item=instruction("kept: validated as Any"))
    Box[TrustedInstruction](item=instruction("x"))  # E: [veridic-forge] "Box" filled in as written
    RootModel[TrustedInstruction](instruction("x"))  # E: [veridic-forge] field "root"
    PromptAlias(instruction("x"))  # E: [veridic-forge] "RootModel" filled in as written
    BoxAlias(item=instruction("x"))  # E: [veridic-forge] "Box" filled in as written
    Box[TrustedInstruction].model_validate({"item": "x"})  # E: [veridic-forge] "Box" filled
    Box[str](item="x")
    Tagged[TrustedInstruction](count=1)
    VouchedPrompt(instruction("x"))


# Annotated with metadata that validates nothing (a Field's description, a constraint, a
# BeforeValidator, whose result is validated as str again) keeps the plain str.
class Described(BaseModel):
    # E: [veridic-forge] "Described" got field "prompt"
    prompt: Annotated[TrustedInstruction, Field(description="the persona")]
    # E: [veridic-forge] got field "short"
    short: Annotated[TrustedInstruction, StringConstraints(max_length=80)] | None = None
    # E: [veridic-forge] got field "stripped"
    stripped: list[Annotated[TrustedInstruction, BeforeValidator(str.strip), "doc"]] = []
    vouched: Annotated[TrustedInstruction, Field(min_length=1), AfterValidator(_vouched)]
