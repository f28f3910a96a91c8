"""A render is the same bytes for the same values: nothing in it may print a memory
address or a hash, however the template reaches it.

An output whose text is a memory address was refused (``{{ persona.upper }}``), but the
same address reached the prompt through a filter that writes its input as text
(``|e``, ``|trim``, ``|lower``, ``|join``), through an object whose own ``__repr__``
embeds one, and a shipped template could print ``x.__hash__()``, which differs in every
process for text. ``|tojson`` of what JSON cannot write raised a bare ``TypeError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import InstructionField, Templates, TrustedInstruction, instruction, unfence
from veridic.templates import TemplateError


class Stored(BaseModel):
    content: InstructionField


class Persona(TypedDict):
    persona: TrustedInstruction


class Anything(TypedDict):
    value: Any


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


def _text(kind: str, rendered: str) -> str:
    if kind == "data":
        ((_, rendered),) = unfence(rendered)
    return rendered


# -- 1. an address written as text by a filter ---------------------------------------------


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("{{ persona.upper | e }}", "|e (persona.upper)"),
        ("{{ persona.upper | trim }}", "|trim (persona.upper)"),
        ("{{ persona.upper | lower }}", "|lower (persona.upper)"),
        ("{{ persona.upper | replace('a', 'b') }}", "|replace (persona.upper)"),
        ("{{ persona.upper | truncate(500) }}", "|truncate (persona.upper)"),
        ("{{ [persona.upper] | join(', ') }}", "|join"),
        ("{{ [persona.upper] | map('lower') | list }}", "|lower"),
        ("{{ persona.upper | string }}", "|string (persona.upper)"),
        ("{{ {'a': persona.upper} | xmlattr }}", "|xmlattr"),
        ("{{ [{'a': persona.upper}] | map('xmlattr') | list }}", "|xmlattr"),
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_a_method_written_as_text_by_a_filter_is_refused_naming_filter_and_line(
    tmp_path: Path, body: str, shown: str, kind: str, how: str
) -> None:
    (tmp_path / "t.j2").write_text("{{ persona }}\n" + body)
    bound = _load(tmp_path, kind, how, Persona)
    with pytest.raises(TemplateError, match="memory address") as caught:
        bound.render({"persona": instruction("a helper")})
    message = str(caught.value)
    assert "line 2" in message, message
    assert shown in message, message
    assert "a method" in message, message


class User:
    """An object with fields and no text of its own: what a filter reads an attribute of."""

    def __init__(self, name: str) -> None:
        self.name = name


@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_filters_of_values_and_of_objects_attributes_still_render(
    tmp_path: Path, kind: str
) -> None:
    (tmp_path / "t.j2").write_text(
        "{{ persona | upper | e }} {{ persona | trim | lower }} {{ [persona, 1] | join('+') }}"
        " {{ [persona] | map('title') | join }} {{ (persona ~ ' x') | replace('x', 'y') }}"
    )
    text = _text(
        kind, _load(tmp_path, kind, "shipped", Persona).render({"persona": instruction("a b")})
    )
    assert text == "A B a b a b+1 A B a b y"


@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_join_of_an_attribute_of_plain_objects_renders(tmp_path: Path, how: str) -> None:
    # The objects print their address, their names do not: join writes the names only.
    (tmp_path / "t.j2").write_text("{{ value | join(', ', attribute='name') }}")
    bound = _load(tmp_path, "data", how, Anything)
    assert _text("data", bound.render({"value": [User("ann"), User("bo")]})) == "ann, bo"


class Labelled:
    """An object with text of its own (``__str__``) and Python's ``__repr__``."""

    def __str__(self) -> str:
        return "primary"


@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_xmlattr_of_values_with_text_of_their_own_renders(tmp_path: Path, how: str) -> None:
    # |xmlattr writes each value's str(), not its repr(): an object whose __str__ writes
    # what it holds renders, however its repr is written; None is left out, as jinja2 does.
    (tmp_path / "t.j2").write_text("<p{{ value | xmlattr }}>")
    bound = _load(tmp_path, "data", how, Anything)
    text = _text("data", bound.render({"value": {"class": Labelled(), "id": 7, "x": None}}))
    assert text == '<p class="primary" id="7">'


class Pairs:
    """Not a ``Mapping``, but with the ``items()`` that ``|xmlattr`` reads."""

    def __init__(self, pairs: dict[str, object]) -> None:
        self.pairs = pairs

    def items(self) -> Any:
        return self.pairs.items()


@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_xmlattr_of_an_object_with_items_checks_each_value(tmp_path: Path, how: str) -> None:
    # |xmlattr reads any object's items(): only a Mapping's values were checked, so a
    # method's address reached the prompt through an object of the application's own.
    (tmp_path / "t.j2").write_text("<p{{ value | xmlattr }}>")
    bound = _load(tmp_path, "data", how, Anything)
    with pytest.raises(TemplateError, match=r"\|xmlattr"):
        bound.render({"value": Pairs({"class": "x", "id": Labelled().__str__})})
    text = _text("data", bound.render({"value": Pairs({"class": Labelled(), "x": None})}))
    assert text == '<p class="primary">'


# -- 1. an address in an object's own text ---------------------------------------------------


class Handle:
    """An object whose __repr__ and __str__ embed its own address: different in every process."""

    def __repr__(self) -> str:
        return f"<Handle {id(self):#x}>"

    __str__ = __repr__


class Wrapper:
    """An object whose __str__ embeds the default repr of another."""

    def __str__(self) -> str:
        return f"Wrapper({object()!r})"


class Coloured:
    """An object whose text holds a short hexadecimal number: its value, not an address."""

    def __str__(self) -> str:
        return "Colour(0xff00ff)"


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (Handle(), "a Handle"),
        (Wrapper(), "a Wrapper"),
        ([Handle()], "a list holding a Handle"),
        ({"h": Handle()}, "a dict holding a Handle"),
    ],
)
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_an_object_whose_own_text_embeds_an_address_is_refused(
    tmp_path: Path, value: object, what: str, how: str
) -> None:
    (tmp_path / "t.j2").write_text("Value:\n{{ value }}")
    bound = _load(tmp_path, "data", how, Anything)
    with pytest.raises(TemplateError, match="memory address") as caught:
        bound.render({"value": value})
    message = str(caught.value)
    assert what in message, message
    assert "line 2" in message, message


def test_an_object_whose_text_holds_a_short_hex_number_and_text_holding_an_address_render(
    tmp_path: Path,
) -> None:
    # Only what an object's own __str__/__repr__ writes is read for an address: text a
    # user pasted (a traceback in a ticket) is data, the same bytes in every process.
    (tmp_path / "t.j2").write_text(
        "{{ value[0] }} {{ value[1] }} {{ value[1] | trim }} {{ value[2] }}"
    )
    bound = _load(tmp_path, "data", "shipped", Anything)
    pasted = "<Foo object at 0x7f43deadbeef>"
    text = _text("data", bound.render({"value": [Coloured(), pasted, pasted.encode()]}))
    assert text == f"Colour(0xff00ff) {pasted} {pasted} b'{pasted}'"


# -- 2. dunder access in a shipped template ----------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "{{ persona.__hash__() }}",
        "{{ persona['__hash__']() }}",
        "{% set h = persona.__class__ %}{{ h }}",
        "{{ persona | attr('__hash__') }}",
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_a_shipped_template_reading_a_dunder_is_refused_when_it_loads(
    tmp_path: Path, body: str, kind: str
) -> None:
    (tmp_path / "t.j2").write_text("{{ persona }}\n" + body)
    templates = Templates(tmp_path)
    load = templates.instruction if kind == "instruction" else templates.data
    with pytest.raises(
        TemplateError, match=r"line 2 reads '__(hash|class)__'.*parameter"
    ) as caught:
        load("t.j2", params=Persona)
    assert "t.j2" in str(caught.value)


@pytest.mark.parametrize(
    "body",
    [
        "{{ persona[name]() }}",
        "{{ persona | attr(name) }}",
        "{{ [persona] | map(attribute=name) | list }}",
    ],
)
def test_a_dunder_named_at_render_is_refused_naming_the_line(tmp_path: Path, body: str) -> None:
    class Named(TypedDict):
        persona: TrustedInstruction
        name: TrustedInstruction

    (tmp_path / "t.j2").write_text("{{ persona }}\n" + body)
    bound = Templates(tmp_path).instruction("t.j2", params=Named)
    with pytest.raises(TemplateError, match=r"line 2 reads '__hash__'") as caught:
        bound.render({"persona": instruction("a"), "name": instruction("__hash__")})
    assert "t.j2" in str(caught.value)


def test_items_and_private_attributes_still_render(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text(
        "{{ value['a'] }} {{ value._private }} {{ value.items() | list }}"
    )

    class Holder(dict[str, int]):
        _private = 7

    text = _text(
        "data", _load(tmp_path, "data", "shipped", Anything).render({"value": Holder(a=1)})
    )
    assert text == "1 7 [('a', 1)]"


# -- 4. |tojson of what JSON cannot write -----------------------------------------------------


@pytest.mark.parametrize("kind", ["instruction", "data"])
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_tojson_of_a_method_is_a_template_error_naming_template_line_and_variable(
    tmp_path: Path, kind: str, how: str
) -> None:
    (tmp_path / "t.j2").write_text("{{ persona }}\n{{ persona.upper | tojson }}")
    bound = _load(tmp_path, kind, how, Persona)
    with pytest.raises(TemplateError, match="JSON") as caught:
        bound.render({"persona": instruction("a helper")})
    message = str(caught.value)
    assert ("t.j2" if how == "shipped" else "Stored.content") in message, message
    assert "line 2" in message, message
    assert "persona.upper" in message, message
    assert isinstance(caught.value.__cause__, TypeError)


def test_tojson_of_values_json_writes_still_renders(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("{{ value | tojson }}")
    bound = _load(tmp_path, "data", "shipped", Anything)
    assert _text("data", bound.render({"value": {"b": [1, "x"], "a": None}})) == (
        '{"a": null, "b": [1, "x"]}'
    )


class Digest:
    """An object whose text is a long hexadecimal number it holds: a digest, a key."""

    def __init__(self, written: str) -> None:
        self.written = written

    def __str__(self) -> str:
        return self.written

    __repr__ = __str__


@pytest.mark.parametrize(
    "written",
    [
        "commit 0x" + "3f2a9c1d0b" * 4,  # a git sha written as a hexadecimal number
        "0x" + "ab" * 32,  # a sha256
        "0x52908400098527886E0F7030069857D2E4169EE7",  # an account on a ledger
        "id 0x" + "5f0e3c9a2b7d4e1f8a6c0b9d3e2f1a4c",  # a UUID without dashes
        "commit 3f2a9c1d0b3f2a9c1d0b3f2a9c1d0b3f2a9c1d0b",  # a git sha as git writes it
        "Colour(0xff00ff)",
    ],
)
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_an_object_whose_text_holds_a_hexadecimal_value_longer_than_an_address_renders(
    tmp_path: Path, written: str, how: str
) -> None:
    # A memory address is at most sixteen hexadecimal digits (64 bits): a longer number
    # is a value (a digest, a key), the same in every process, and must render.
    (tmp_path / "t.j2").write_text("{{ value[0] }} {{ value }} {{ value[0] | lower }}")
    bound = _load(tmp_path, "data", how, Anything)
    text = _text("data", bound.render({"value": [Digest(written)]}))
    assert text == f"{written} [{written}] {written.lower()}"


@given(st.integers(min_value=0x1_0000_0000, max_value=2**64 - 1))
def test_property_an_object_writing_a_pointer_sized_number_is_refused(number: int) -> None:
    template = Templates().data_from_source(instruction("{{ value }}"), params=Anything)
    with pytest.raises(TemplateError, match="writes a memory address"):
        template.render({"value": Digest(f"<Handle {number:#x}>")})


def test_the_refusal_of_an_object_text_says_how_to_pass_a_number_that_is_a_value(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.j2").write_text("{{ value }}")
    with pytest.raises(TemplateError, match=r"0x80070005.*pass its text \(str\(x\)\)"):
        _load(tmp_path, "data", "shipped", Anything).render({"value": Digest("E 0x80070005")})


# -- a method where a filter reads a value ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("{{ persona.upper | int }}", "|int (persona.upper)"),  # was 0, without a word
        ("{{ persona.upper | float }}", "|float (persona.upper)"),  # was 0.0
        ("{{ persona.upper | wordcount }}", "|wordcount (persona.upper)"),  # counted its repr
        ("{{ persona.upper | first }}", "|first (persona.upper)"),  # a bare TypeError
        ("{{ persona.upper | last }}", "|last (persona.upper)"),
        ("{{ persona.upper | length }}", "|length (persona.upper)"),
        ("{{ [persona.upper] | map('int') | list }}", "|int"),
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_a_method_read_as_a_value_by_a_filter_is_refused_naming_filter_and_line(
    tmp_path: Path, body: str, shown: str, kind: str, how: str
) -> None:
    (tmp_path / "t.j2").write_text("{{ persona }}\n" + body)
    bound = _load(tmp_path, kind, how, Persona)
    with pytest.raises(TemplateError, match=r"a method .*call the method") as caught:
        bound.render({"persona": instruction("a helper")})
    message = str(caught.value)
    assert "line 2" in message, message
    assert shown in message, message


@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_filters_reading_values_of_iterators_and_text_still_render(
    tmp_path: Path, kind: str
) -> None:
    (tmp_path / "t.j2").write_text(
        "{{ '7' | int }} {{ 'x' | int }} {{ '1.5' | float }} {{ persona | wordcount }}"
        " {{ [3, 1, 2] | select('odd') | first }} {{ persona | first }} {{ persona | last }}"
        " {{ persona | length }} {{ ['a', 'bb'] | map('length') | list }}"
    )
    text = _text(
        kind, _load(tmp_path, kind, "shipped", Persona).render({"persona": instruction("a b")})
    )
    assert text == "7 0 1.5 2 3 a b 3 [1, 2]"


@pytest.mark.parametrize(
    "body",
    [
        "{{ '{}'.format(persona.upper) }}",
        "{{ 'Persona: {p}'.format(p=persona.upper) }}",
        "{{ '{p}'.format_map({'p': persona.upper}) }}",
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_a_method_written_by_str_format_is_refused_naming_the_line(
    tmp_path: Path, body: str, kind: str, how: str
) -> None:
    # The sandbox formats through its own formatter; a shipped template called str.format.
    (tmp_path / "t.j2").write_text("{{ persona }}\n" + body)
    bound = _load(tmp_path, kind, how, Persona)
    with pytest.raises(TemplateError, match="memory address") as caught:
        bound.render({"persona": instruction("a helper")})
    assert "line 2" in str(caught.value)


def test_str_format_of_values_still_renders(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("{{ '{} {p}'.format(persona, p=persona.upper()) }}")
    bound = _load(tmp_path, "instruction", "shipped", Persona)
    assert bound.render({"persona": instruction("a b")}) == "a b A B"


def test_a_dunder_name_given_at_render_is_clipped_in_the_refusal(tmp_path: Path) -> None:
    # The name may be a value from anywhere (data): the message shows a sample of it.
    (tmp_path / "t.j2").write_text("{{ value['x'][value['name']] }}")
    bound = _load(tmp_path, "data", "shipped", Anything)
    with pytest.raises(TemplateError, match="one of Python's own attributes") as caught:
        bound.render({"value": {"x": "text", "name": "__" + "a" * 100_000 + "__"}})
    assert len(str(caught.value)) < 2_000


@pytest.mark.parametrize("how", ["shipped", "stored"])
def test_a_key_that_starts_with_two_underscores_but_is_no_dunder_renders(
    tmp_path: Path, how: str
) -> None:
    # A GraphQL response names each object's type "__typename": a key of the data, not one
    # of Python's own attributes (those are __name__-shaped), in a shipped template too.
    (tmp_path / "t.j2").write_text(
        "{{ value['__typename'] }} {{ value.__typename }} {{ value[key] }}"
        " {{ [value] | map(attribute='__typename') | join }}"
    )

    class Keyed(TypedDict):
        value: Any
        key: str

    bound = _load(tmp_path, "data", how, Keyed)
    rendered = bound.render({"value": {"__typename": "User"}, "key": "__typename"})
    assert _text("data", rendered) == "User User User User"
