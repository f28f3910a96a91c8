"""Properties of every view: for any registry and any filters, the projections agree.

The strategies below build arbitrary registries (plain and external tools,
components that boot or fail, good and missing descriptions, roles, pins)
and arbitrary filters; reuse them for properties of your own.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import pytest
from _source_docstring import written_in_source
from hypothesis import assume, given
from hypothesis import strategies as st

from veridic import (
    CapabilityWording,
    Deny,
    Registry,
    Risk,
    Tool,
    ToolDeniedError,
    ToolUnavailableError,
    ToolView,
    TrustPolicy,
    UnknownToolError,
    instruction,
)
from veridic.tool import description_pin
from veridic.tools._similarity import NameIndex, _lcs_length, _position_masks

DESCRIPTIONS = {
    "good": "Do the thing this tool is for.",
    "missing": "",
    "blank": "   \n ",
    "placeholder": "TODO: describe",
    "name": None,  # the tool's own name
}


@dataclass(frozen=True)
class ToolPlan:
    name: str
    kind: Literal["query", "write"]
    description: str
    component: int | None
    roles: frozenset[str]
    external: bool
    pin: str  # "none", "match", "changed"


@dataclass(frozen=True)
class RegistryPlan:
    tools: tuple[ToolPlan, ...]
    components: tuple[bool, ...]  # whether each component boots


@dataclass(frozen=True)
class FilterPlan:
    roles: frozenset[str]
    allow: frozenset[str] | None
    deny: tuple[tuple[frozenset[str], bool], ...]  # (names, tombstone)
    refused: frozenset[str]  # names a predicate filters out
    schema_tool: bool = True  # whether the view carries get_tool_schema
    wording: int = 0  # an index into WORDINGS


KINDS: tuple[Literal["query", "write"], ...] = ("query", "write")
WORDINGS = (
    CapabilityWording(),
    CapabilityWording(place=instruction("in Acme Desk")),
    CapabilityWording(
        intro=instruction(
            "Outils (nom, type, risque, arguments, rôle) ; get_tool_schema lit un schéma."
        ),
        intro_without_schema_tool=instruction("Outils (nom, type, risque, arguments, rôle)."),
        unavailable_heading=instruction("Indisponible {place} :"),
        place=instruction("ici"),
        provides_line=instruction("- {provides} : {name} arrêté ({reason}). {hint}"),
        component_line=instruction("- Outils de {name!r} : arrêtés ({reason}). {hint}"),
    ),
)
"""The section's wording: veridic's, a noun changed, another language. None changes a fact."""
ROLES = st.frozensets(st.sampled_from(["admin", "editor", "viewer"]), max_size=2)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: n != "get_tool_schema"
)


@st.composite
def registry_plans(draw: st.DrawFn) -> RegistryPlan:
    """A registry of up to 8 tools in up to 3 components, some of which fail to boot."""
    components = tuple(draw(st.lists(st.booleans(), max_size=3)))
    names = draw(st.lists(NAMES, max_size=8, unique=True))
    tools = []
    for name in names:
        choice = draw(st.sampled_from(sorted(DESCRIPTIONS)))
        text = DESCRIPTIONS[choice]
        tools.append(
            ToolPlan(
                name=name,
                kind=draw(st.sampled_from(KINDS)),
                description=name.replace("_", " ") if text is None else text,
                component=draw(st.none() | st.integers(0, len(components) - 1))
                if components
                else None,
                roles=draw(ROLES),
                external=draw(st.booleans()),
                pin=draw(st.sampled_from(["none", "match", "changed"])),
            )
        )
    return RegistryPlan(tuple(tools), components)


@st.composite
def filter_plans(draw: st.DrawFn, plan: RegistryPlan) -> FilterPlan:
    """Filters over the names of ``plan``: roles, an allow list, deny filters, a predicate."""
    names = [tool.name for tool in plan.tools]
    subsets = (
        st.frozensets(st.sampled_from(names), max_size=len(names))
        if names
        else st.just(frozenset())
    )
    return FilterPlan(
        roles=draw(ROLES),
        allow=draw(st.none() | subsets),
        deny=tuple(draw(st.lists(st.tuples(subsets, st.booleans()), max_size=3))),
        refused=draw(subsets),
        schema_tool=draw(st.booleans()),
        wording=draw(st.integers(0, len(WORDINGS) - 1)),
    )


def build(plan: RegistryPlan) -> Registry:
    registry = Registry("property")
    generated = TrustPolicy("generated-test-registry")
    components = [
        registry.component(
            generated.vouch(f"part {index}", reason="a component name the test generates"),
            boot=None if boots else _fail,
            hint="Fix it.",
        )
        for index, boots in enumerate(plan.components)
    ]
    for tool in plan.tools:
        owner = components[tool.component] if tool.component is not None else registry
        if tool.external:
            pin = {
                "none": None,
                "match": description_pin(tool.description),
                "changed": description_pin(tool.description + " (reviewed)"),
            }[tool.pin]
            owner.external(
                name=tool.name,
                description=tool.description,
                input_schema={"type": "object", "properties": {"value": {"type": "integer"}}},
                handler=lambda arguments: arguments,
                kind=tool.kind,
                pin=pin,
                roles=tool.roles,
            )
        else:
            owner.tool(kind=tool.kind, name=tool.name, roles=tool.roles)(_handler(tool.description))
    return registry


def _fail() -> None:
    raise RuntimeError("boot check failed")


def _handler(doc: str) -> Callable[[int], int]:
    def handler(value: int = 0) -> int:
        """(docstring written by written_in_source)"""
        return value

    written_in_source(handler, doc)
    return handler


def view_of(registry: Registry, filters: FilterPlan) -> ToolView:
    def predicate(tool: Tool) -> bool:
        return tool.name not in filters.refused

    return registry.view(
        roles=filters.roles,
        allow=filters.allow,
        deny=[Deny(names, tombstone=tomb, reason="policy") for names, tomb in filters.deny],
        predicates=[predicate],
        schema_tool=filters.schema_tool,
        wording=WORDINGS[filters.wording],
    )


def expected_exposed(plan: RegistryPlan, filters: FilterPlan) -> set[str]:
    """The oracle: what the view must expose, written out rule by rule."""
    exposed = {"get_tool_schema"} if filters.schema_tool else set()
    for tool in plan.tools:
        booted = tool.component is None or plan.components[tool.component]
        described = tool.description.strip() and tool.description != tool.name.replace("_", " ")
        described = described and not tool.description.startswith("TODO")
        pinned_ok = not (tool.external and tool.pin == "changed")
        roles_ok = not tool.roles or bool(tool.roles & filters.roles)
        allowed = filters.allow is None or tool.name in filters.allow
        denied = tool.name in filters.refused or any(tool.name in n for n, _ in filters.deny)
        if booted and described and pinned_ok and roles_ok and allowed and not denied:
            exposed.add(tool.name)
    return exposed


def section_names(view: ToolView) -> list[str]:
    available = str(view.capability_section()).split("\n\n", 1)[0]
    return [line[2:].split(" (", 1)[0] for line in available.splitlines() if line.startswith("- ")]


@st.composite
def registries_with_filters(draw: st.DrawFn) -> tuple[RegistryPlan, FilterPlan]:
    plan = draw(registry_plans())
    return plan, draw(filter_plans(plan))


@given(registries_with_filters())
def test_property_projections_name_the_same_set_each_once(
    case: tuple[RegistryPlan, FilterPlan],
) -> None:
    plan, filters = case
    view = view_of(build(plan), filters)
    names = view.names()
    assert sorted(section_names(view)) == sorted(names)
    assert sorted(s["function"]["name"] for s in view.tool_specs("openai")) == sorted(names)
    assert sorted(s["name"] for s in view.tool_specs("anthropic")) == sorted(names)
    assert sorted(s["name"] for s in view.tool_specs("mcp")) == sorted(names)
    for format in ("openai", "anthropic", "mcp"):
        view.assert_coupled(view.tool_specs(format))
    # Left out, the schema tool is in no projection, and no line tells the model to call it.
    assert ("get_tool_schema" in names) is filters.schema_tool
    if not filters.schema_tool:
        assert "get_tool_schema" not in view.capability_section()
        with pytest.raises(ToolDeniedError):
            view.dispatch("get_tool_schema", {"name": next(iter(names), "x")})


@given(registries_with_filters())
def test_property_view_exposes_exactly_what_the_rules_allow(
    case: tuple[RegistryPlan, FilterPlan],
) -> None:
    plan, filters = case
    view = view_of(build(plan), filters)
    assert view.names() == expected_exposed(plan, filters)


@given(registries_with_filters())
def test_property_every_registered_name_is_exposed_or_fails_with_its_reason(
    case: tuple[RegistryPlan, FilterPlan],
) -> None:
    plan, filters = case
    view = view_of(build(plan), filters)
    errors = {"unavailable": ToolUnavailableError, "denied": ToolDeniedError}
    for tool in plan.tools:
        status = view.status(tool.name)
        if status.exposed:
            assert view.dispatch(tool.name, {"value": 3}) in (3, {"value": 3})
            continue
        with pytest.raises(errors[status.state]):
            view.dispatch(tool.name, {"value": 3})
    with pytest.raises(UnknownToolError):
        view.dispatch("never_registered_name_x", {})


# --- the nearest names of an unknown one ------------------------------------------------

# Few letters, so a hallucinated name is often near real ones, scores often tie,
# and difflib's tie-break (the greater name first) decides the order.
NEAR_NAMES = st.from_regex(r"[ab][ab_]{0,7}", fullmatch=True)


@given(st.data())
def test_property_suggestions_never_steer_towards_more_risk(data: st.DataObject) -> None:
    names = data.draw(st.lists(NEAR_NAMES, min_size=1, max_size=10, unique=True), label="names")
    risks = {name: data.draw(st.sampled_from(list(Risk)), label=name) for name in names}
    word = data.draw(edited(names), label="word")
    assume(word not in names)
    registry = Registry("risky")
    for name in names:
        kind: Literal["query", "write"] = "query" if risks[name] is Risk.LOW else "write"
        registry.tool(kind=kind, name=name, risk=risks[name])(_handler("Do the thing it does."))
    view = registry.view()
    close = difflib.get_close_matches(word, sorted(view.names()), n=3, cutoff=0.6)
    suggested = view.status(word).suggestions
    risk_of = {tool.name: tool.risk for tool in view.tools()}
    if close:
        assert [n for n in close if n in suggested] == list(suggested)  # difflib's, in order
        safe = [risk_of[n] for n in close if risk_of[n] < Risk.HIGH]
        for name in suggested:
            typo = _one_edit(word, name)
            assert typo or risk_of[name] < Risk.HIGH
            assert typo or risk_of[name] <= safe[0]
        # Only risk removes a close name.
        for name in set(close) - set(suggested):
            assert risk_of[name] is Risk.HIGH or risk_of[name] > safe[0]
    else:
        assert all(risk_of[name] < Risk.HIGH for name in suggested)


def _one_edit(first: str, second: str) -> bool:
    """The oracle of 'near-identical': Damerau distance <= 1 after folding case, _ and -."""
    a, b = (s.replace("_", "").replace("-", "").casefold() for s in (first, second))
    if a == b:
        return True
    edits = {a[:i] + a[i + 1 :] for i in range(len(a))}  # deletions
    edits |= {a[:i] + c + a[i:] for i in range(len(a) + 1) for c in set(b)}  # insertions
    edits |= {a[:i] + c + a[i + 1 :] for i in range(len(a)) for c in set(b)}  # changes
    edits |= {a[:i] + a[i + 1] + a[i] + a[i + 2 :] for i in range(len(a) - 1)}  # swaps
    return b in edits


@st.composite
def edited(draw: st.DrawFn, bases: list[str], alphabet: str = "ab_c") -> str:
    """One of ``bases`` with up to three characters inserted, dropped or changed (or any text)."""
    if not bases or draw(st.integers(0, 4)) == 0:
        return draw(st.text(alphabet=alphabet, max_size=10))
    text = draw(st.sampled_from(bases))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        char = draw(st.sampled_from(alphabet))
        edit = draw(st.sampled_from(["insert", "drop", "change"]))
        if edit == "insert" or at == len(text):
            text = text[:at] + char + text[at:]
        elif edit == "drop":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + char + text[at + 1 :]
    return text


@given(st.data())
def test_property_unknown_name_is_told_the_names_difflib_finds_in_its_order(
    data: st.DataObject,
) -> None:
    names = data.draw(st.lists(NEAR_NAMES, max_size=10, unique=True), label="names")
    denied = data.draw(st.frozensets(st.sampled_from(names)) if names else st.just(frozenset()))
    word = data.draw(edited(names), label="word")
    assume(word not in names)
    registry = Registry("near")
    for name in names:
        registry.tool(kind="query", name=name)(_handler("Do the thing this tool is for."))
    view = registry.view(deny=denied)
    exposed = sorted(view.names())
    expected = difflib.get_close_matches(word, exposed, n=3, cutoff=0.6) or exposed[:10]
    status = view.status(word)
    assert status.state == "unknown"
    assert status.suggestions == tuple(expected)


@st.composite
def names_and_word(draw: st.DrawFn) -> tuple[list[str], str]:
    # Longer texts than a view allows, so the word can reach difflib's autojunk
    # length (200) and names can repeat characters many times.
    alphabet = draw(st.sampled_from(["ab", "ab_c", "abcdé_", "aaab"]))
    short = st.lists(st.text(alphabet=alphabet, max_size=12), max_size=20)
    long = st.lists(st.text(alphabet=alphabet, min_size=150, max_size=260), max_size=2)
    names = list(dict.fromkeys(draw(short) + draw(long)))
    return names, draw(edited(names, alphabet))


@given(
    case=names_and_word(),
    n=st.integers(1, 5),
    cutoff=st.floats(min_value=0.05, max_value=1.0),
)
def test_property_name_index_returns_what_difflib_returns(
    case: tuple[list[str], str], n: int, cutoff: float
) -> None:
    names, word = case
    expected = difflib.get_close_matches(word, names, n=n, cutoff=cutoff)
    assert NameIndex(names).close_matches(word, n, cutoff) == expected


@given(st.text(alphabet="abc_", max_size=40), st.text(alphabet="abc_", max_size=40))
def test_property_bit_parallel_lcs_is_the_longest_common_subsequence(
    first: str, second: str
) -> None:
    # The bound that lets the index skip difflib must never be below difflib's matches.
    row = [0] * (len(second) + 1)
    for char in first:
        diagonal = 0
        for j, other in enumerate(second, 1):
            diagonal, row[j] = row[j], (diagonal + 1 if char == other else max(row[j], row[j - 1]))
    assert _lcs_length(first, _position_masks(second), len(second)) == row[-1]


# --- tool specs are the JSON the spec text says ------------------------------------------

_PROPERTY_SCHEMAS = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "boolean", "array", "object"])},
    optional={
        "description": st.text(max_size=20),
        "enum": st.lists(st.text(max_size=5), min_size=1, max_size=3, unique=True),
        "default": st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    },
)


@given(
    extra=st.text(max_size=40),
    properties=st.dictionaries(
        st.text(st.characters(categories=["Ll"]), min_size=1, max_size=6),
        _PROPERTY_SCHEMAS,
        max_size=3,
    ),
    kind=st.sampled_from(["query", "write"]),
)
def test_every_spec_is_the_json_of_its_spec_text_in_order(
    extra: str, properties: dict[str, object], kind: Literal["query", "write"]
) -> None:
    import json

    from veridic.tool_specs import spec_json

    registry = Registry("specs")
    schema: dict[str, object] = {"type": "object", "properties": properties}
    registry.external(
        name="lookup",
        description=f"Look up an order by its number and return its status. {extra}",
        input_schema=schema,
        handler=lambda arguments: "",
        kind=kind,
        source="mcp:props",
    )
    view = registry.view()
    tools = view.tools()  # the built-in get_tool_schema first, then the external tool
    assert [tool.name for tool in tools][-1] == "lookup"
    for format in ("openai", "anthropic", "mcp"):
        specs = view.tool_specs(format)
        assert len(specs) == len(tools)
        for tool, spec in zip(tools, specs, strict=True):
            expected = json.loads(spec_json(tool, format))
            assert spec == expected
            assert json.dumps(spec) == json.dumps(expected)  # the same keys in the same order
            with pytest.raises(TypeError):
                cast("dict[str, object]", spec)["name"] = "other"  # read-only, every format
    # The digest is what its docstring says: SHA-256 of the MCP list as canonical JSON.
    canonical = json.dumps(
        view.tool_specs("mcp"), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    assert (
        view.tools_sha256()
        == hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    )
