"""What the second read of the text core and templates found, one test each.

Each test failed on the code before its fix; each goes through the public API.
"""

from __future__ import annotations

import datetime
import uuid
from enum import Enum
from fractions import Fraction
from pathlib import Path
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

from veridic import (
    InstructionField,
    ProvenanceError,
    Templates,
    TrustedInstruction,
    instruction,
    unfence,
)
from veridic.templates import TemplateError


class Stored(BaseModel):
    """A row of a prompt store: its template is read as instruction."""

    content: InstructionField


def _load(folder: Path, kind: str, how: str, params: type) -> Any:
    """Template ``t.j2`` of ``folder``, shipped with the code or stored as a row."""
    templates = Templates(folder)
    if how == "stored":
        source = Stored(content=(folder / "t.j2").read_text()).content
        if kind == "instruction":
            return templates.instruction_from_source(source, params=params)
        return templates.data_from_source(source, params=params)
    if kind == "instruction":
        return templates.instruction("t.j2", params=params)
    return templates.data("t.j2", params=params)


# -- text that is a memory address, reached another way ----------------------------------------


class Told:
    """An object that says what it is when printed, and nothing when listed (no __repr__)."""

    def __str__(self) -> str:
        return "told"


class Anything(TypedDict):
    value: Any


@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_a_data_template_listing_objects_that_print_their_address_is_refused(
    tmp_path: Path, how: str
) -> None:
    # str() of a list writes repr() of each item: "[<Told object at 0x7f...>]", a different
    # block in every process, though the object has a __str__ of its own.
    (tmp_path / "t.j2").write_text("Items: {{ value }}")
    bound = _load(tmp_path, "data", how, Anything)
    assert "told" in bound.render({"value": Told()})  # printed alone, its __str__ is its text
    with pytest.raises(TemplateError, match="memory address") as caught:
        bound.render({"value": [Told()]})
    assert "line 1" in str(caught.value)


class Persona(TypedDict):
    persona: TrustedInstruction


@pytest.mark.parametrize(
    "body",
    [
        "{{ 'Persona: ' ~ persona.upper }}",  # the parentheses forgotten, in a concatenation
        "{{ persona.upper | string }}",
        "{{ '%s' | format(persona.upper) }}",
        "{{ persona.upper | pprint }}",
        "{{ 'Persona: %s' % persona.upper }}",
        "{{ '%s, %s' % (persona, persona.upper) }}",
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_a_method_made_text_before_its_output_is_refused_naming_the_line(
    tmp_path: Path, body: str, kind: str, how: str
) -> None:
    (tmp_path / "t.j2").write_text("{{ persona }}\n" + body)
    bound = _load(tmp_path, kind, how, Persona)
    with pytest.raises(TemplateError, match="memory address") as caught:
        bound.render({"persona": instruction("a helper")})
    assert "line 2" in str(caught.value)


@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_concatenations_and_strings_of_values_still_render(tmp_path: Path, kind: str) -> None:
    (tmp_path / "t.j2").write_text(
        "{{ 'Persona: ' ~ persona ~ 3 ~ none }} {{ persona.upper() | string }} "
        "{{ '%s-%d' | format(persona, 2) }} {{ [persona] | pprint }} {{ range(2) | string }}"
        "{{ ' %s/%s' % (persona, 1) }}{{ ' %d%%' % 5 }}"
    )
    text = _load(tmp_path, kind, "shipped", Persona).render({"persona": instruction("a")})
    if kind == "data":
        ((_, text),) = unfence(text)
    assert text == "Persona: a3None A a-2 ['a'] range(0, 2) a/1 5%"


# -- Enums whose members hold values that cannot change ------------------------------------------


class Release(Enum):
    FIRST = datetime.date(2024, 1, 15)
    SECOND = datetime.date(2024, 6, 1)


class Window(Enum):
    SHORT = datetime.timedelta(minutes=5)


class Share(Enum):
    THIRD = Fraction(1, 3)


class Tenant(Enum):
    MAIN = uuid.UUID(int=1)


class Stamp(Enum):
    START = datetime.datetime(2024, 1, 1, 9, 30, tzinfo=datetime.UTC)


class ReleaseParams(TypedDict):
    member: Release


class WindowParams(TypedDict):
    member: Window


class ShareParams(TypedDict):
    member: Share


class TenantParams(TypedDict):
    member: Tenant


class StampParams(TypedDict):
    member: Stamp


@pytest.mark.parametrize(
    ("params", "member", "shown"),
    [
        (ReleaseParams, Release.FIRST, "2024-01-15"),
        (WindowParams, Window.SHORT, "0:05:00"),
        (ShareParams, Share.THIRD, "1/3"),
        (TenantParams, Tenant.MAIN, "00000000-0000-0000-0000-000000000001"),
        (StampParams, Stamp.START, "2024-01-01 09:30:00+00:00"),
    ],
)
def test_an_enum_of_dates_fractions_or_uuids_is_allowed_in_an_instruction_template(
    tmp_path: Path, params: type, member: Enum, shown: str
) -> None:
    # Values nobody can change after the class was written, printed the same everywhere.
    (tmp_path / "t.j2").write_text("{{ member.name }}: {{ member.value }}")
    bound: Any = Templates(tmp_path).instruction("t.j2", params=params)
    assert bound.render({"member": member}) == f"{member.name}: {shown}"
    assert Templates(globals={"member": member}) is not None


class Tags(Enum):
    BASIC = frozenset({"read", "write", "admin"})


class Sentinel(Enum):
    MISSING = object()


class TagsParams(TypedDict):
    member: Tags


class SentinelParams(TypedDict):
    member: Sentinel


@pytest.mark.parametrize(
    ("params", "member", "why"),
    [
        (TagsParams, Tags.BASIC, "order that changes from process to process"),
        (SentinelParams, Sentinel.MISSING, "memory address"),
    ],
)
def test_an_enum_refused_for_its_values_text_says_why_truthfully(
    tmp_path: Path, params: type, member: Enum, why: str
) -> None:
    # A frozenset and a bare object() cannot be changed: they are refused because their
    # text differs from process to process, and the message said "can be changed".
    (tmp_path / "t.j2").write_text("{{ member.name }}")
    with pytest.raises(ProvenanceError, match=why) as caught:
        Templates(tmp_path).instruction("t.j2", params=params)
    assert "can be changed" not in str(caught.value)
    with pytest.raises(TemplateError, match=why):
        Templates(globals={"member": member})
