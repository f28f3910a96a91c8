"""Reproducers of a second read of the text core, the templates and the mypy plugin.

The changes under review read labels and texts "as the characters they hold", found
blocks in one pass, and refused a pydantic field typed ``TrustedInstruction``. Each test
here failed on the merged code before its fix.
"""

from __future__ import annotations

import sys
import tracemalloc
import uuid
from pathlib import Path
from typing import Final

import pytest
from mypy.checker import TypeChecker
from mypy.nodes import MypyFile
from pydantic import BaseModel, Field, field_validator, model_validator
from test_typecheck import POLICIES, run_mypy, write_config

import veridic.mypy
from veridic import (
    Composer,
    InstructionField,
    ProvenanceError,
    Templates,
    TrustedInstruction,
    TrustPolicy,
    instruction,
    is_trusted,
    untrusted,
)
from veridic.fence import DATA_MODES, DataMode

TEMPLATES: Final = Templates(Path(__file__).parent / "templates_fixtures")

# --- the fence's hot path copies no document it only reads ----------------------------------


@pytest.mark.parametrize("mode", DATA_MODES)
def test_a_block_of_a_large_untrusted_document_costs_no_extra_copy(mode: DataMode) -> None:
    # block_parts() read every text "as the characters it holds" by copying it, the
    # UntrustedText the composer places too: a 10 MB document's block held one more
    # copy of it at its peak (benchmarks/sizes.py: 8.1x to 10.0x the document).
    document = untrusted("Ünïcode line ☃ with <tags> and [brackets]\n" * 25_000, source="doc")
    size = sys.getsizeof(document)
    composer = Composer(data_mode=mode).system(instruction("Be brief."))
    tracemalloc.start()
    try:
        composer.data("doc", document)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # What the mode writes: datamark and encode a rendering and the message, verbatim
    # the message and the content's brand; a copy of the document more fails.
    assert peak < {"datamark": 4.8, "encode": 3.2, "verbatim": 2.5}[mode] * size


# --- an instruction template and a pydantic field typed TrustedInstruction -----------------

_TABLE = TrustPolicy("persona-table")


def _vouched(text: str) -> TrustedInstruction:
    return _TABLE.vouch(text, reason="the persona table is reviewed by the product team")


class ValidatedSystem(BaseModel):
    """pydantic's usual way to give a field a validator: a ``field_validator``."""

    persona: TrustedInstruction
    rules: list[InstructionField]

    @field_validator("persona")
    @classmethod
    def _vouch(cls, value: str) -> TrustedInstruction:
        return _vouched(value)


class ModelValidatedSystem(BaseModel):
    persona: TrustedInstruction
    rules: list[InstructionField]

    @model_validator(mode="after")
    def _vouch(self) -> ModelValidatedSystem:
        self.persona = _vouched(self.persona)
        return self


@pytest.mark.parametrize("model", [ValidatedSystem, ModelValidatedSystem])
def test_a_field_its_model_validator_mints_binds_and_renders(model: type[BaseModel]) -> None:
    # The merged check refused any model with a bare TrustedInstruction field at binding,
    # though a validator of the model's own had vouched for its text (it rendered before).
    template = TEMPLATES.instruction("system.j2", params=model)
    result = template.render(model.model_validate({"persona": "Ava", "rules": ["Cite."]}))
    assert result == "You are Ava.\n- Cite.\nBe brief."
    assert is_trusted(result)


class BoundedSystem(BaseModel):
    persona: TrustedInstruction = Field(max_length=40)  # type: ignore[veridic-forge]  # under test
    rules: list[InstructionField]


def test_a_field_with_a_length_bound_only_is_refused_at_binding_as_mypy_refuses_it() -> None:
    # A constraint is no validator that mints: pydantic stores a plain str all the same,
    # and every render refused it; the binding let it through as "validated".
    assert not is_trusted(BoundedSystem(persona=instruction("Ava"), rules=[]).persona)
    with pytest.raises(ProvenanceError, match=r"field 'persona' is typed TrustedInstruction"):
        TEMPLATES.instruction("system.j2", params=BoundedSystem)


# --- the mypy plugin: a module of models costs no search of the heap ------------------------


def test_a_module_of_models_with_nothing_to_report_costs_no_search_for_its_checker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module that makes no call is reported after a search of every object mypy holds
    # for its checker (some 30 ms in a small build, more in a large one): the merged rule
    # asked for it for every module that defines a model (a models.py, a schemas.py).
    searched: list[str] = []
    real = veridic.mypy._checker_of

    def counted(tree: MypyFile) -> TypeChecker | None:
        searched.append(tree.fullname)
        return real(tree)  # the real search, counted

    monkeypatch.setattr(veridic.mypy, "_checker_of", counted)
    run = uuid.uuid4().hex[:8]
    clean = tmp_path / f"schemas_{run}.py"
    clean.write_text(
        "from pydantic import BaseModel\n"
        "from veridic import InstructionField\n\n\n"
        "class Ticket(BaseModel):\n    body: str\n    prompt: InstructionField\n"
    )
    bare = tmp_path / f"settings_{run}.py"
    bare.write_text(
        "from pydantic import BaseModel\n"
        "from veridic import TrustedInstruction\n\n\n"
        "class Settings(BaseModel):\n    greeting: TrustedInstruction\n"
    )
    reported, _ = run_mypy([clean, bare], write_config(tmp_path / "config", POLICIES))
    assert [(r.path.name, r.line, r.code) for r in reported] == [(bare.name, 6, "veridic-forge")]
    assert searched == [bare.stem]
