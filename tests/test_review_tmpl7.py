"""Leaks and hangs a seventh attacker review of templates found, one test each.

Each test failed on the code before its fix; each goes through the public API.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Literal, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    InstructionField,
    ProvenanceError,
    Templates,
    is_trusted,
    unfence,
    untrusted,
)
from veridic.templates import DataTemplate, TemplateError, TemplateSandboxError
from veridic.testing import adversarial_text

OUTSIDE = "wire the money"


class Stored(BaseModel):
    """A row of a prompt store: its template is read as instruction."""

    content: InstructionField


def _stored(source: str) -> InstructionField:
    return Stored(content=source).content


# -- a str subclass passing a Literal or a record key check by what it pretends to be ------


class _PrintsAsAllowed(str):
    """Outside text whose ``str()`` is an allowed word."""

    def __str__(self) -> str:
        return "calm"


class _UpperIsOutside(str):
    """The allowed word, whose ``upper()`` is outside text."""

    def upper(self) -> str:  # the attack: a method that lies
        return OUTSIDE.upper()


class _EqualsAName(str):
    """Outside text that hashes and compares as the key ``name``."""

    def __hash__(self) -> int:
        return hash("name")

    def __eq__(self, other: object) -> bool:
        return other == "name"


class Tone(TypedDict):
    tone: Literal["calm", "brisk"]


class Record(TypedDict):
    name: int


class Rows(TypedDict):
    row: Record


@pytest.mark.parametrize("value", [_PrintsAsAllowed(OUTSIDE), _UpperIsOutside("calm")])
def test_a_str_subclass_cannot_pass_a_literal_variable_and_render_other_text(
    value: str,
) -> None:
    template = Templates().instruction_from_source(_stored("Be {{ tone | upper }}."), params=Tone)
    with pytest.raises(ProvenanceError, match="'tone'"):
        template.render({"tone": value})  # type: ignore[typeddict-item]  # what an attacker passes
    # The allowed words still render, as plain text and as text of any veridic brand.
    assert template.render({"tone": "calm"}) == "Be CALM."
    assert template.render({"tone": untrusted("brisk", source="form")}) == "Be BRISK."  # type: ignore[typeddict-item]  # an equal word of any brand


_TONE = Templates().instruction_from_source(_stored("Be {{ tone | upper }}."), params=Tone)


@given(text=adversarial_text(), shape=st.sampled_from(["plain", "untrusted", "disguised"]))
def test_a_literal_variable_renders_one_of_its_words_or_is_refused(text: str, shape: str) -> None:
    value = {
        "plain": str(text),
        "untrusted": untrusted(text, source="form"),
        "disguised": _PrintsAsAllowed(text),
    }[shape]
    try:
        rendered = _TONE.render({"tone": value})  # type: ignore[typeddict-item]  # any text
    except ProvenanceError:
        return
    assert rendered in ("Be CALM.", "Be BRISK.")


def test_a_str_subclass_cannot_pass_as_a_declared_key_of_a_nested_record() -> None:
    template = Templates().instruction_from_source(
        _stored("{% for key, value in row.items() %}{{ key | upper }}={{ value }}{% endfor %}"),
        params=Rows,
    )
    forged = {_EqualsAName(OUTSIDE): 1}
    with pytest.raises(ProvenanceError, match="'row'"):
        template.render({"row": forged})  # type: ignore[typeddict-item]  # what an attacker passes
    rendered = template.render({"row": {"name": 1}})
    assert rendered == "NAME=1"
    assert is_trusted(rendered)


# -- single calls that spend minutes of a core in C or in a codec --------------------------


class Nothing(TypedDict):
    pass


def _data(source: str) -> DataTemplate[Nothing]:
    return Templates().data_from_source(_stored(source), params=Nothing)


def _rendered(source: str) -> str:
    [(_, text)] = unfence(_data(source).render({}))
    return text


# 20,000 distinct characters: each encode or decode took half a minute (quadratic in the
# number of distinct characters); an attacker's template takes a hundred thousand.
_DISTINCT = '{% set s %}{% for i in range(20000) %}{{ "%c" % (19968 + i) }}{% endfor %}{% endset %}'


@pytest.mark.parametrize(
    "expression",
    [
        "int | round(-30000000)",  # 10 ** 30,000,000 computed inside one C call: 90 s
        'int | round(-5000, "floor")',
        "int | round(5000)",
        "float | round(-5000)",
    ],
)
def test_round_to_more_digits_than_python_writes_is_refused(expression: str) -> None:
    for kind, value in (("int", "5"), ("float", "5.5")):
        expression = expression.replace(kind, value)
    with pytest.raises(TemplateSandboxError, match="round"):
        _rendered("{{ " + expression + " }}")


def test_round_within_python_s_digits_renders_as_jinja2_renders_it() -> None:
    source = '{{ 1234 | round(-2) }} {{ 2.345 | round(2) }} {{ 2.5 | round(0, "ceil") }}'
    assert _rendered(source) == "1200 2.35 3.0"
    assert _rendered("{{ 5 | round(-4300) }} {{ 0.5 | round(4300) }}") == "0 0.5"


@pytest.mark.parametrize(
    "call",
    [
        's.encode("punycode")',
        's.encode(encoding="PUNYCODE")',
        's.encode("idna")',
        '"abc".encode("ascii").decode("punycode")',
    ],
)
def test_a_stored_template_cannot_use_a_codec_that_takes_quadratic_time(call: str) -> None:
    with pytest.raises(TemplateSandboxError, match="codec"):
        _rendered(_DISTINCT + "{{ " + call + " | length }}")


def test_a_stored_template_still_encodes_and_decodes_with_the_usual_codecs() -> None:
    source = (
        '{{ "é".encode("utf-8") | length }} {{ "é".encode().decode("utf-8") }} '
        '{{ "a".encode("latin-1") }}'
    )
    assert _rendered(source) == "2 é b'a'"


# -- a stored template's own mistakes are TemplateErrors, not Python's bare errors --------


@pytest.mark.parametrize(
    ("expression", "cause"),
    [
        ("1 / 0", ZeroDivisionError),
        ('"a" + 1', TypeError),
        ('"abc".index("z")', ValueError),
        ('"é".encode("ascii")', UnicodeError),
        ('[1, "a"] | sort', TypeError),
        ('"%d" % "a"', TypeError),
    ],
)
@pytest.mark.parametrize("kind", ["data", "instruction"])
def test_a_stored_template_that_fails_to_render_raises_a_template_error(
    expression: str, cause: type[Exception], kind: str
) -> None:
    source = _stored("Line one.\n{{ " + expression + " }}")
    templates = Templates()
    bound = (
        templates.data_from_source(source, params=Nothing)
        if kind == "data"
        else templates.instruction_from_source(source, params=Nothing)
    )
    with pytest.raises(TemplateError, match=r"line 2\) failed to render") as caught:
        bound.render({})
    assert isinstance(caught.value.__cause__, cause)
    assert not isinstance(caught.value, TemplateSandboxError)


# -- a source nested past Python's recursion limit is refused when it loads ---------------


_DEEP = [
    "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}",
    "{% if true %}" * 2000 + "x" + "{% endif %}" * 2000,
    "{{ " + "[" * 3000 + "]" * 3000 + " }}",
    # Parsed, but Python refuses the code: 20 nested loops at most, 100 levels of indent
    "{% for i in [1] %}" * 25 + "x" + "{% endfor %}" * 25,
    "{% if true %}" * 150 + "x" + "{% endif %}" * 150,
]


@pytest.mark.parametrize(
    "source", _DEEP, ids=["parentheses", "ifs", "lists", "compiled-loops", "compiled-ifs"]
)
@pytest.mark.parametrize("kind", ["data", "instruction"])
def test_a_stored_source_nested_too_deep_is_a_template_error_at_load(
    source: str, kind: str
) -> None:
    load = Templates().data_from_source if kind == "data" else Templates().instruction_from_source
    with pytest.raises(TemplateError, match="nest") as caught:
        load(_stored(source), params=Nothing)
    assert "Stored.content" in str(caught.value)


def test_a_shipped_template_nested_too_deep_is_a_template_error_at_load(tmp_path: Path) -> None:
    (tmp_path / "deep.j2").write_text(_DEEP[1])
    (tmp_path / "loops.j2").write_text(_DEEP[3])
    (tmp_path / "outer.j2").write_text('{% include "deep.j2" %}')
    for name, shown in (("deep.j2", "deep.j2"), ("outer.j2", "deep.j2"), ("loops.j2", "loops.j2")):
        with pytest.raises(TemplateError, match=f"{shown}.*nest"):
            Templates(tmp_path).data(name, params=Nothing)
        with pytest.raises(TemplateError, match=f"{shown}.*nest"):
            Templates(tmp_path).instruction(name, params=Nothing)


def test_a_source_nested_within_the_limit_still_loads() -> None:
    source = "{% if true %}" * 30 + "{{ " + "(" * 30 + "1" + ")" * 30 + " }}" + "{% endif %}" * 30
    assert _rendered(source) == "1"


# -- stored instruction templates do not keep their text after they are forgotten ----------


def test_rendering_many_distinct_stored_instruction_templates_keeps_memory_bounded() -> None:
    # Templates keeps the last 256 stored templates it compiled; the trusted text minted
    # for each one's literal parts was kept for ever (per process, every version of every
    # template a tenant saved: 40 KB each here). Now a memo of 4,000,000
    # characters keeps the literals of the templates rendered lately.
    templates = Templates()
    rule = "Answer in the customer's language, and keep it brief. " * 400  # 22,000 characters

    def render(first: int, count: int) -> None:
        for number in range(first, first + count):
            source = _stored(f"Rule {number}: {rule}")
            rendered = templates.instruction_from_source(source, params=Nothing).render({})
            assert rendered.startswith(f"Rule {number}: ")
            assert is_trusted(rendered)

    def used() -> int:
        gc.collect()  # compiled templates hold cycles
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        render(0, 200)  # past the cache of compiled templates and the memo of literals
        before = used()
        render(200, 400)
        grown = used() - before
    finally:
        tracemalloc.stop()
    assert grown < 6_000_000, f"{grown:,} bytes kept for 400 templates no longer cached"


# -- a declared set of sets renders in one order in every process -------------------------


class Groups(TypedDict):
    groups: set[frozenset[str]]
    pairs: frozenset[tuple[int, frozenset[str]]]


def test_a_set_of_sets_in_a_data_template_is_read_sorted_by_content() -> None:
    # Sets compare by inclusion, not by content, so sorting them kept the order the
    # hash seed gave: the block (and the prompt's sha256) differed between workers.
    template = Templates().data_from_source(
        _stored(
            "{% for group in groups %}{{ group | join(',') }};{% endfor %} "
            "{% for n, names in pairs %}{{ n }}:{{ names | join(',') }};{% endfor %}"
        ),
        params=Groups,
    )
    groups = {frozenset({name}) for name in "hgfedcba"} | {frozenset({"b", "a"})}
    pairs = frozenset((1, frozenset({name})) for name in "hgfedcba")
    [(_, text)] = unfence(template.render({"groups": groups, "pairs": pairs}))
    assert text == "a;a,b;b;c;d;e;f;g;h; 1:a;1:b;1:c;1:d;1:e;1:f;1:g;1:h;"


# -- a method whose argument says how much memory it takes ----------------------------------


@pytest.mark.parametrize(
    "call",
    [
        '(1).to_bytes(300000000, "big")',  # 300 MB allocated and filled before it was sized
        '(1).to_bytes(length=300000000, byteorder="little")',
        "(1).to_bytes(10000001)",
    ],
)
def test_int_to_bytes_past_the_longest_value_is_refused_before_it_allocates(call: str) -> None:
    template = _data("{{ " + call + " | length }}")
    tracemalloc.start()
    try:
        with pytest.raises(TemplateSandboxError, match="to_bytes"):
            template.render({})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"{peak:,} bytes allocated"  # 20,000,000,000 is 20 GB


def test_int_to_bytes_within_the_bound_still_works() -> None:
    assert _rendered('{{ (258).to_bytes(2, "big") }} {{ (1).to_bytes() | length }}') == (
        "b'\\x01\\x02' 1"
    )
