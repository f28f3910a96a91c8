"""What the second read of the text core and templates found, one test each.

Each test failed on the code before its fix; each goes through the public API.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from enum import Enum
from fractions import Fraction
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    Composer,
    InstructionField,
    ProvenanceError,
    ReasoningItem,
    Templates,
    TrustedInstruction,
    VeridicError,
    instruction,
    unfence,
    untrusted,
)
from veridic.templates import TemplateError
from veridic.text.prompt import DocumentMessage, Message, PromptDocument


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


# -- tool calls put on their turn at once: the same prompt, stored and restored alike -----------


_THOUGHT = ReasoningItem.of(
    "anthropic", {"type": "thinking", "thinking": "Look it up.", "signature": "EqQB"}
)


@st.composite
def _conversations(draw: st.DrawFn) -> tuple[Composer, list[tuple[str, tuple[str, ...]]]]:
    """A composer fed turns in any order the rules allow (several calls on a turn, results
    in any order, errors, turns refused while calls wait), and the (role, call ids) of each
    message it must hold."""
    composer = Composer().system(instruction("You help."))
    expected: list[tuple[str, tuple[str, ...]]] = []
    waiting: list[str] = []
    made = 0
    for _ in range(draw(st.integers(0, 14))):
        text = draw(st.text(max_size=8))
        joins = bool(expected) and expected[-1][0] == "assistant"
        choices = ["result", "refused"] if waiting else ["user", "data", "assistant"]
        if joins or not waiting:
            choices.append("call")
        step = draw(st.sampled_from(choices))
        if step == "call":
            call_id, made = f"call-{made}", made + 1
            composer.tool_call(call_id, "lookup", {"q": text})
            if joins:
                expected[-1] = ("assistant", (*expected[-1][1], call_id))
            else:
                expected.append(("assistant", (call_id,)))
            waiting.append(call_id)
        elif step == "result":
            call_id = waiting.pop(draw(st.integers(0, len(waiting) - 1)))
            error = draw(st.booleans())
            composer.tool_result(call_id, untrusted(text, source="tool:lookup"), error=error)
            expected.append(("tool", ()))
        elif step == "refused":  # a turn between calls and their results changes nothing
            with pytest.raises(VeridicError, match=r"waits? for (its result|their results)"):
                composer.user("next")
        elif step == "user":
            composer.user(text if text.strip() else "hello")
            expected.append(("user", ()))
        elif step == "data":
            composer.data("doc", untrusted(text, source="doc"))
            expected.append(("user", ()))
        else:
            composer.assistant(text, reasoning=draw(st.sampled_from([(), (_THOUGHT,)])))
            expected.append(("assistant", ()))
    return composer, expected


@settings(max_examples=60, deadline=None)
@given(_conversations())
def test_calls_on_a_turn_come_back_alike_from_build_document_and_restore(
    conversation: tuple[Composer, list[tuple[str, tuple[str, ...]]]],
) -> None:
    composer, expected = conversation
    prompt = composer.build()
    found = [(m.role, tuple(call.id for call in m.tool_calls)) for m in prompt.messages[1:]]
    assert found == expected
    assert composer.build().sha256 == prompt.sha256  # building again changes nothing
    text = prompt.to_document()
    document = PromptDocument.from_json(text)
    assert (document.sha256, document.to_json()) == (prompt.sha256, text)
    assert all(type(m.tool_calls) is tuple for m in document.messages)
    restored = Composer().system(instruction("You help.")).restore(composer.conversation())
    again = restored.build()
    assert again.sha256 == prompt.sha256
    assert again.pending_tool_calls == prompt.pending_tool_calls


# -- a message or document made by hand with no sequence where one belongs ---------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Message("user", "hi", None),  # type: ignore[arg-type]  # the mistake under test
        lambda: Message("assistant", "hi", ("hi",), 5),  # type: ignore[arg-type]  # likewise
        lambda: DocumentMessage("assistant", "hi", None),  # type: ignore[arg-type]  # likewise
        lambda: DocumentMessage("assistant", "hi", (), None, 3),  # type: ignore[arg-type]  # likewise
        lambda: PromptDocument(None, (), "0" * 64),  # type: ignore[arg-type]  # likewise
        lambda: PromptDocument((), "spans", "0" * 64),  # type: ignore[arg-type]  # likewise
    ],
)
def test_a_message_or_document_given_no_sequence_is_refused_saying_what_it_got(
    make: Callable[[], object],
) -> None:
    # tuple(None) failed with a bare "'NoneType' object is not iterable"; tuple("spans")
    # split the text into characters.
    with pytest.raises(VeridicError, match="not a tuple"):
        make()


# -- a random filter named at render says where -------------------------------------------------


class Named(TypedDict):
    items: list[TrustedInstruction]
    how: TrustedInstruction


@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_a_random_filter_named_at_render_is_refused_naming_the_template_line(
    tmp_path: Path, kind: str
) -> None:
    (tmp_path / "t.j2").write_text("Rules:\n{{ items | map(how) | list }}")
    bound = _load(tmp_path, kind, "shipped", Named)
    with pytest.raises(TemplateError, match=r"t\.j2' line 2 uses the \|random filter"):
        bound.render({"items": [instruction("a"), instruction("b")], "how": instruction("random")})
