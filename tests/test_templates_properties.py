"""Properties of templates for arbitrary values: no laundering, exact fences, no evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Final, TypedDict

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    Composer,
    InstructionField,
    ProvenanceError,
    Templates,
    TrustedInstruction,
    UntrustedText,
    configure,
    is_trusted,
    provenance,
    unfence,
    untrusted,
)
from veridic.fence import DataMode
from veridic.testing import adversarial_text, data_modes, template_syntax, trusted_instructions

FIXTURES: Final = Path(__file__).parent / "templates_fixtures"
TEMPLATES: Final = Templates(FIXTURES)
RAW: Final = jinja2.Environment(
    loader=jinja2.FileSystemLoader(FIXTURES), undefined=jinja2.StrictUndefined
)
SINGLE: Final = ("echo.j2", "wrapped.j2", "computed.j2", "blocks.j2")
LISTS: Final = ("with_macro.j2", "numbered.j2")


class Value(TypedDict):
    value: TrustedInstruction


class Values(TypedDict):
    values: list[TrustedInstruction]


class DataValue(TypedDict):
    value: str


class DataValues(TypedDict):
    values: list[str]


class Ticket(TypedDict):
    customer: str
    subject: UntrustedText
    body: UntrustedText


class Stored(BaseModel):
    content: InstructionField


def not_trusted() -> st.SearchStrategy[str]:
    """Text an instruction must refuse: branded untrusted, or plain ``str``."""
    return st.one_of(adversarial_text().map(lambda t: untrusted(t, source="test")), st.text())


@given(name=st.sampled_from(SINGLE), value=not_trusted())
def test_property_untrusted_value_never_reaches_instruction_output(name: str, value: str) -> None:
    template = TEMPLATES.instruction(name, params=Value)
    with pytest.raises(ProvenanceError, match=r"variable 'value'"):
        template.render({"value": value})  # type: ignore[typeddict-item]  # under test


@given(
    name=st.sampled_from(LISTS),
    trusted=st.lists(trusted_instructions(), max_size=4),
    bad=not_trusted(),
    data=st.data(),
)
def test_property_untrusted_item_never_reaches_instruction_output(
    name: str, trusted: list[TrustedInstruction], bad: str, data: st.DataObject
) -> None:
    position = data.draw(st.integers(0, len(trusted)))
    values: list[str] = [*trusted[:position], bad, *trusted[position:]]
    template = TEMPLATES.instruction(name, params=Values)
    with pytest.raises(ProvenanceError, match=rf"variable 'values'\[{position}\]"):
        template.render({"values": values})  # type: ignore[typeddict-item]  # under test


@given(name=st.sampled_from(SINGLE), value=not_trusted())
def test_property_report_mode_output_with_untrusted_value_is_never_trusted(
    name: str, value: str
) -> None:
    template = TEMPLATES.instruction(name, params=Value)
    previous = configure(mode="report")
    try:
        result = template.render({"value": value})  # type: ignore[typeddict-item]  # under test
    finally:
        configure(mode=previous.mode)
    assert not is_trusted(result)
    assert result == RAW.get_template(name).render(value=value)


@given(name=st.sampled_from(SINGLE), value=trusted_instructions())
def test_property_trusted_instruction_output_is_jinja2_output_with_spans(
    name: str, value: TrustedInstruction
) -> None:
    result = TEMPLATES.instruction(name, params=Value).render({"value": value})
    assert result == RAW.get_template(name).render(value=value)
    assert is_trusted(result)
    spans = provenance(result).spans
    assert spans[0].kind == "template"
    assert sum(span.end - span.start for span in spans) == len(result)
    assert all(span.kind in ("template", "code") for span in spans)
    if name in ("echo.j2", "wrapped.j2") and value:  # the value goes through unchanged
        assert any(
            (span.kind, span.origin, result[span.start : span.end])
            == ("code", "veridic.testing", value)
            for span in spans
        )


@given(customer=st.text(), subject=adversarial_text(), body=adversarial_text())
def test_property_data_output_unfences_to_the_original_values(
    customer: str, subject: str, body: str
) -> None:
    template = TEMPLATES.data("ticket.j2", params=Ticket)
    turn = template.render(
        {
            "customer": customer,
            "subject": untrusted(subject, source="ticket:1"),
            "body": untrusted(body, source="ticket:1"),
        }
    )
    # One block: the template's own text and the values, as jinja2 renders them.
    expected = [("ticket.j2", f"Ticket from {customer}, subject: {subject}\n\n{body}")]
    assert unfence(turn) == expected
    prompt = Composer().user(turn).build()
    assert unfence(prompt.messages[-1].content) == expected


@given(values=st.lists(adversarial_text(), max_size=5), mode=data_modes())
def test_property_data_template_output_is_jinja2_output_in_one_block(
    values: list[str], mode: DataMode
) -> None:
    result = TEMPLATES.data("numbered.j2", params=DataValues).render({"values": values}, mode=mode)
    lines = "".join(f"{index}. {value}\n" for index, value in enumerate(values, 1))
    assert unfence(result) == [("numbered.j2", f"Count: {len(values)}\n{lines}")]


@given(value=adversarial_text())
def test_property_filtered_untrusted_value_stays_in_the_block(value: str) -> None:
    result = TEMPLATES.data("computed.j2", params=DataValue).render({"value": value})
    first = value[0] if value else ""
    expected = (
        f"Upper: {value.upper()}; joined: {value}!; replaced: {value.replace('a', 'b')}; "
        f"first: {first}"
    )
    assert unfence(result) == [("computed.j2", expected)]


@given(value=template_syntax())
def test_property_template_syntax_in_values_is_never_executed(value: str) -> None:
    trusted = Stored.model_validate({"content": value}).content
    instruction_text = TEMPLATES.instruction("wrapped.j2", params=Value).render({"value": trusted})
    assert instruction_text == f"before\n{value}\nafter"
    data_text = TEMPLATES.data("wrapped.j2", params=DataValue).render({"value": value})
    assert unfence(data_text) == [("wrapped.j2", f"before\n{value}\nafter")]


@given(value=template_syntax())
def test_property_template_syntax_in_values_is_never_executed_in_the_sandbox(value: str) -> None:
    source = Stored.model_validate({"content": "[{{ value }}]"}).content
    template = TEMPLATES.instruction_from_source(source, params=Value)
    trusted = Stored.model_validate({"content": value}).content
    assert template.render({"value": trusted}) == f"[{value}]"
