"""Properties of every view: for any registry and any filters, the projections agree.

The strategies below build arbitrary registries (plain and external tools,
components that boot or fail, good and missing descriptions, roles, pins)
and arbitrary filters; reuse them for properties of your own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import (
    Deny,
    Registry,
    Tool,
    ToolDeniedError,
    ToolUnavailableError,
    ToolView,
    UnknownToolError,
)
from veridic.tool import description_pin

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


KINDS: tuple[Literal["query", "write"], ...] = ("query", "write")
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
    )


def build(plan: RegistryPlan) -> Registry:
    registry = Registry("property")
    components = [
        registry.component(f"part {index}", boot=None if boots else _fail, hint="Fix it.")
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
        return value

    handler.__doc__ = doc
    return handler


def view_of(registry: Registry, filters: FilterPlan) -> ToolView:
    def predicate(tool: Tool) -> bool:
        return tool.name not in filters.refused

    return registry.view(
        roles=filters.roles,
        allow=filters.allow,
        deny=[Deny(names, tombstone=tomb, reason="policy") for names, tomb in filters.deny],
        predicates=[predicate],
    )


def expected_exposed(plan: RegistryPlan, filters: FilterPlan) -> set[str]:
    """The oracle: what the view must expose, written out rule by rule."""
    exposed = {"get_tool_schema"}
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
