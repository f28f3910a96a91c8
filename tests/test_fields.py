"""InstructionField: stored text the application declared to be read as instruction."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    Composer,
    InstructionField,
    TrustedInstruction,
    instruction,
    instruction_fields,
    is_trusted,
    provenance,
)


class StoredPrompt(BaseModel):
    name: str
    content: InstructionField


class Feature(BaseModel):
    title: str
    prompt: StoredPrompt
    fallbacks: list[InstructionField] = []


def test_reading_an_instruction_field_mints_it_with_model_and_field() -> None:
    stored = StoredPrompt.model_validate({"name": "triage", "content": "Classify the ticket."})
    assert is_trusted(stored.content)
    assert provenance(stored.content).kind == "field"
    assert provenance(stored.content).origin == "StoredPrompt.content"


def test_other_fields_stay_plain() -> None:
    stored = StoredPrompt(name="triage", content=instruction("Classify."))
    assert not is_trusted(stored.name)


def test_an_instruction_field_can_reach_the_system_slot() -> None:
    stored = StoredPrompt.model_validate_json('{"name": "t", "content": "Be terse."}')
    prompt = Composer().system(stored.content).user("hi").build()
    assert prompt.system == "Be terse."
    assert prompt.spans[0].origin == "StoredPrompt.content"


def test_serialisation_gives_plain_strings_back() -> None:
    stored = StoredPrompt(name="t", content=instruction("Be terse."))
    dumped = stored.model_dump()
    assert type(dumped["content"]) is str
    assert json.loads(stored.model_dump_json())["content"] == "Be terse."


def test_construct_without_validation_does_not_mint() -> None:
    unchecked = StoredPrompt.model_construct(name="t", content=TrustedInstruction("forged"))  # type: ignore[veridic-forge]  # under test
    assert not is_trusted(unchecked.content)


def test_nested_and_container_fields_are_minted_and_listed() -> None:
    feature = Feature.model_validate(
        {"title": "x", "prompt": {"name": "p", "content": "c"}, "fallbacks": ["a", "b"]}
    )
    assert all(is_trusted(f) for f in feature.fallbacks)
    assert provenance(feature.fallbacks[0]).origin == "Feature.fallbacks"
    assert instruction_fields(Feature) == frozenset({"fallbacks", "prompt.content"})


def test_a_model_without_instruction_fields_lists_none() -> None:
    class Plain(BaseModel):
        title: str

    assert instruction_fields(Plain) == frozenset()


def test_instruction_fields_are_marked_in_the_json_schema() -> None:
    schema = StoredPrompt.model_json_schema()
    assert schema["properties"]["content"]["x-veridic-instruction"] is True
    assert "x-veridic-instruction" not in schema["properties"]["name"]


@given(text=st.text())
def test_property_any_validated_text_is_trusted_and_round_trips(text: str) -> None:
    stored = StoredPrompt(name="n", content=text)  # validation mints
    assert is_trusted(stored.content)
    assert stored.content == text
    assert StoredPrompt.model_validate(stored.model_dump()).content == text
