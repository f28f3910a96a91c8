"""A stored template cannot hang a worker: the render's budget, found by an attacker review.

Each refusal test failed on the code before its fix, at sizes just past a bound (so the
old code rendered them in well under a second); at the sizes an attacker picks
(``range(100000)`` twice, ``center(10**9)``, forty doublings) the old code hung or asked
for gigabytes. Every test goes through the public API.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import InstructionField, Templates, VeridicError, unfence
from veridic.templates import TemplateError, TemplateSandboxError


class Nothing(TypedDict):
    pass


class Document(TypedDict):
    doc: str


class Rows(TypedDict):
    rows: list[str]


class Stored(BaseModel):
    """A row of a prompt store: its template is read as instruction."""

    content: InstructionField


def _stored(body: str, params: type, kind: str = "data") -> object:
    templates = Templates()
    source = Stored(content=body).content
    if kind == "instruction":
        return templates.instruction_from_source(source, params=params)
    return templates.data_from_source(source, params=params)


def _refused(body: str, fragment: str, *, kind: str = "data", **values: object) -> None:
    bound = _stored(body, Nothing if not values else Document, kind)
    with pytest.raises(TemplateSandboxError, match="sandbox forbids") as caught:
        bound.render(values)  # type: ignore[attr-defined]  # an InstructionTemplate or a DataTemplate
    assert fragment in str(caught.value), str(caught.value)


# -- filters and text methods that amplify --------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('{{ "x" | center(10000001) }}', "|center(10,000,001) would make"),  # center(10**9)
        ('{{ "x" | indent(width=10000001) }}', "|indent would make"),
        ('{{ ("a " * 1000) | wordwrap(2, wrapstring="x" * 5000) }}', "|wordwrap would make"),
        ('{{ ("a" * 1000) | replace("a", "b" * 10001) }}', "|replace would make"),
        ('{{ range(1001) | join("x" * 10000) }}', "|join would make"),
        ("{{ range(3) | slice(100001) | list | length }}", "|slice asks for 100,001 pieces"),
        ("{{ range(3) | batch(100001, 0) | list | length }}", "|batch asks for 100,001 pieces"),
        ('{{ [["x"] * 1000] | tojson(indent=10000) }}', "|tojson(indent=...) would make"),
        ('{{ "x".center(10000001) }}', "str.center() would make"),
        ('{{ "x".zfill(10000001) }}', "str.zfill() would make"),
        ('{{ "\t".expandtabs(10000001) }}', "str.expandtabs() would make"),
        ('{{ ("a" * 1000).replace("a", "b" * 10001) }}', "str.replace() would make"),
        ('{{ ("x" * 10000).join(range(1002) | map("string") | list) }}', "str.join() would"),
        ('{{ "ab".join(range(3) | map("string")) }}', "joins a list or a tuple"),
        ('{{ "x".translate({120: "y"}) }}', "str.translate() is not available"),
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_a_filter_or_method_that_would_make_too_much_is_refused_before_it_runs(
    body: str, fragment: str, kind: str
) -> None:
    _refused(body, fragment, kind=kind)


def test_sum_of_lists_is_joined_once_and_gives_what_python_gives() -> None:
    # Python's sum copies the list at each item: ([[0]] * 100000) | sum(start=[]) ran
    # for minutes on the old code.
    bound = _stored(
        "{{ [[1], [2, 3]] | sum(start=[]) }} {{ [(1,), (2,)] | sum(start=()) }} "
        "{{ ([[0]] * 2000) | sum(start=[]) | length }} {{ [1, 2] | sum }}",
        Nothing,
    )
    [(_, text)] = unfence(bound.render({}))  # type: ignore[attr-defined]
    assert text == "[1, 2, 3] (1, 2) 2000 3"
    mixed = _stored("{{ [[1], (2,)] | sum(start=[]) }}", Nothing)
    with pytest.raises(TemplateError, match="can only concatenate list") as caught:
        mixed.render({})  # type: ignore[attr-defined]
    assert isinstance(caught.value.__cause__, TypeError)  # Python's own error, as its cause


# -- loops, calls, and values that double -----------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        # range(100000) twice: 10**10 iterations, with or without output
        (
            "{% for i in range(1001) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
            "more than 1,000,000 loop iterations",
        ),
        (
            "{% for i in range(1001) %}{% for j in range(1000) if j < 0 %}{% endfor %}{% endfor %}",
            "more than 1,000,000 loop iterations",
        ),
        (
            "{% for row in [range(1001)] * 1000 recursive %}"
            "{% if row is iterable %}{{ loop(row) }}{% endif %}{% endfor %}",
            "more than 1,000,000 loop iterations",
        ),
        # a macro that calls itself twice: f(40) is 2**41 calls
        (
            "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
            "{{ f(18) }}",
            "more than 200,000 calls",
        ),
        # doubling a string in a namespace: forty doublings are a terabyte
        (
            '{% set ns = namespace(s="x") %}{% for i in range(24) %}'
            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
            "made a str of more than 10,000,000 characters",
        ),
        (
            '{% set ns = namespace(s="x") %}{% for i in range(24) %}'
            "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
            "str + str would make 16,777,216",
        ),
        (
            '{% set ns = namespace(s="x") %}{% for i in range(24) %}'
            "{% set s %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = s %}{% endfor %}",
            "made a str of more than 10,000,000 characters",
        ),
        # a list that holds itself twice: its text doubles, sixty times is 2**60
        (
            '{% set ns = namespace(t=["x"]) %}{% for i in range(24) %}'
            "{% set ns.t = [ns.t, ns.t] %}{% endfor %}{{ ns.t | length }}",
            "characters and items (each time a value holds another counts)",
        ),
        ('{{ (["x" * 1000] * 10001) | length }}', "made a list of more than 10,000,000 characters"),
        ("{% set ns = namespace() %}{{ [ns] | length }}", "a list holds a namespace()"),
        (
            "{% set ns = namespace() %}{% set ns.me = namespace() %}",
            "a namespace() would hold another namespace",
        ),
        # past Python's recursion limit: was a bare RecursionError
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "maximum recursion depth"),
    ],
)
@pytest.mark.parametrize("kind", ["instruction", "data"])
def test_loops_calls_and_values_that_grow_are_refused_past_the_render_budget(
    body: str, fragment: str, kind: str
) -> None:
    _refused(body, fragment, kind=kind)


def test_a_render_that_writes_more_than_ten_million_characters_is_refused() -> None:
    _refused(
        "{% for i in range(1001) %}{{ doc }}{% endfor %}",
        "wrote more than 10,000,000 characters",
        doc="x" * 10_000,
    )


def test_a_stored_template_cannot_change_the_values_it_is_given() -> None:
    # Two doors at once: a list that grows after it was measured ({{ l.extend(l) }} forty
    # times), and a stored row that edits the application's own objects.
    rows = ["first"]
    bound = _stored('{{ rows.append("injected") }}{{ rows.clear() }}', Rows)
    with pytest.raises(TemplateSandboxError, match="attribute 'append' of 'list' object"):
        bound.render({"rows": rows})  # type: ignore[attr-defined]
    assert rows == ["first"]


# -- what real templates do still works, and templates shipped with the code pay nothing --


_REPORT = (
    "{% for line in doc.splitlines() %}{{ loop.index }}. {{ line | trim | indent(2) }}\n"
    "{% endfor %}{{ doc | wordwrap(80) | length }} {{ doc | replace('a', 'A') | length }}"
    " {{ doc.split() | join(' ') | length }} {{ [doc, doc] | join('\n---\n') | length }}"
    "{% set ns = namespace(total=0) %}{% for word in doc.split() %}"
    "{% set ns.total = ns.total + word | length %}{% endfor %} {{ ns.total }}"
)


def test_a_long_document_renders_through_a_stored_data_template_as_shipped(
    tmp_path: Path,
) -> None:
    doc = ("A line of a long document, with words to wrap and to count.\n" * 16_000)[:200_000]
    (tmp_path / "report.j2").write_text(_REPORT)
    shipped = Templates(tmp_path).data("report.j2", params=Document)
    stored = _stored(_REPORT, Document)
    rendered = stored.render({"doc": doc})  # type: ignore[attr-defined]
    [(_, text)] = unfence(rendered)
    assert [text] == [text for _, text in unfence(shipped.render({"doc": doc}))]
    assert len(text) > 200_000


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=300), st.integers(1, 40))
def test_a_stored_template_renders_what_jinja2_renders(doc: str, width: int) -> None:
    body = (
        "{{ doc | center(W) }}|{{ doc | indent(W) }}|{{ doc | wordwrap(W) }}|"
        "{{ doc.rjust(W) }}|{{ doc.split() | join(',') }}|{{ [doc] * 2 }}|"
        "{{ [[doc], [doc]] | sum(start=[]) }}|{% for c in doc %}{{ c ~ c }}{% endfor %}"
    ).replace("W", str(width))
    stored = Templates().data_from_source(Stored(content=body).content, params=Document)
    [(_, text)] = unfence(stored.render({"doc": doc}))
    assert text == jinja2.Environment().from_string(body).render(doc=doc)


def test_templates_shipped_with_the_code_are_not_bounded(tmp_path: Path) -> None:
    # The render the sandbox refuses past its output bound (above), shipped with the code.
    (tmp_path / "long.j2").write_text("{% for i in range(1001) %}{{ doc }}{% endfor %}")
    templates = Templates(tmp_path)
    shipped = templates.data("long.j2", params=Document)
    [(_, text)] = unfence(shipped.render({"doc": "x" * 10_000}))
    assert len(text) == 10_010_000


# -- the sandbox's answer for an attribute is remembered per class and name ------------------


class Notes(BaseModel):
    """An application's own class whose method names a list's: reading it is safe."""

    lines: tuple[str, ...] = ()

    def append(self, line: str) -> str:
        return line


class Values(TypedDict):
    rows: list[str]
    doc: str
    table: dict[str, str]
    notes: Notes


_ATTRIBUTES = (
    "count",
    "index",
    "append",
    "clear",
    "upper",
    "format",
    "format_map",
    "get",
    "pop",
    "update",
    "keys",
    "split",
    "__class__",
    "mro",
)


def _outcome(templates: Templates, kind: str, attribute: str) -> str:
    body = (
        "{% if rows and doc and table and notes %}{% endif %}"
        # Read by truth, which a refused attribute (an undefined) fails like its text: a
        # method made text (~ '') is refused for its memory address whether it may be read.
        + f"{{% if {kind}.{attribute} %}}True{{% endif %}}"
    )
    bound = templates.data_from_source(Stored(content=body).content, params=Values)
    values: Values = {"rows": ["a"], "doc": "a", "table": {"a": "b"}, "notes": Notes()}
    try:
        [(_, text)] = unfence(bound.render(values))
        return text
    except VeridicError as refused:  # a sandbox refusal, or an attribute the value lacks
        return f"refused ({type(refused).__name__}): {refused}"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(("rows", "doc", "table", "notes")), st.sampled_from(_ATTRIBUTES)),
        min_size=1,
        max_size=12,
    )
)
def test_the_sandbox_answers_each_attribute_as_a_fresh_one_would(
    reads: list[tuple[str, str]],
) -> None:
    # One Templates object remembers whether a class's attribute may be read; whatever
    # was read before, the answer is the one a fresh sandbox gives for that read alone.
    shared = Templates()
    for kind, attribute in reads:
        assert _outcome(shared, kind, attribute) == _outcome(Templates(), kind, attribute)


def test_a_safe_method_read_first_does_not_open_a_mutating_one() -> None:
    templates = Templates()
    assert _outcome(templates, "rows", "count") == "True"
    assert _outcome(templates, "doc", "upper") == "True"
    assert "attribute 'append' of 'list' object" in _outcome(templates, "rows", "append")
    assert _outcome(templates, "notes", "append") == "True"
    assert "format" in _outcome(templates, "doc", "format")
    assert _outcome(templates, "rows", "count") == "True"
