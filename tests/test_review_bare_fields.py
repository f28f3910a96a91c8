"""Reproducers of the known gaps of the rule "a pydantic field typed TrustedInstruction".

pydantic validates the ``NewType`` as ``str`` and stores a plain ``str``. The mypy cases
are in ``tests/typecheck/instruction_fields.py`` (a filled-in generic model, ``RootModel``,
``Annotated`` with only ``Field`` or constraints) and ``model_fields_only.py``; here the
run-time twin, which binds an instruction template, and the values pydantic really stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final, Generic, TypeVar

import pytest
from pydantic import AfterValidator, BaseModel, RootModel, StringConstraints

from veridic import InstructionField, ProvenanceError, Templates, TrustedInstruction, instruction
from veridic.text.provenance import is_trusted

TEMPLATES: Final = Templates(Path(__file__).parent / "templates_fixtures")
Item = TypeVar("Item")


class Box(BaseModel, Generic[Item]):
    item: Item


def test_what_mypy_now_refuses_holds_a_plain_str_and_what_it_accepts_keeps_the_brand() -> None:
    # The mypy rule refuses exactly the forms whose value is not trusted any more.
    filled = Box[TrustedInstruction](item=instruction("x"))  # type: ignore[veridic-forge]
    assert not is_trusted(filled.item)
    root = RootModel[TrustedInstruction](instruction("x"))  # type: ignore[veridic-forge]
    assert not is_trusted(root.root)
    # Unfilled, the field is validated as Any and keeps the minted value: accepted.
    assert is_trusted(Box(item=instruction("x")).item)


def _vouched(text: str) -> TrustedInstruction:
    return instruction("vouched") if text else instruction("empty")


class NestedConstraint(BaseModel):
    persona: InstructionField
    # The field under test: mypy refuses it too.
    rules: list[Annotated[TrustedInstruction, StringConstraints(max_length=80)]]  # type: ignore[veridic-forge]


class NestedValidator(BaseModel):
    persona: InstructionField
    rules: list[Annotated[TrustedInstruction, AfterValidator(_vouched)]]


def test_a_constraint_inside_a_container_is_no_validator_at_binding() -> None:
    # Before, any Annotated let the field through at binding ("it may have a validator"),
    # though a constraint mints nothing: every render refused the plain str it stores.
    value = NestedConstraint(persona="Ava", rules=[instruction("Cite.")])
    assert not is_trusted(value.rules[0])
    with pytest.raises(ProvenanceError, match=r"field 'rules' is typed list\["):
        TEMPLATES.instruction("system.j2", params=NestedConstraint)


def test_a_validator_inside_a_container_still_binds_and_renders() -> None:
    template = TEMPLATES.instruction("system.j2", params=NestedValidator)
    result = template.render(NestedValidator(persona="Ava", rules=[instruction("Cite.")]))
    assert is_trusted(result)
    assert "- vouched" in result
