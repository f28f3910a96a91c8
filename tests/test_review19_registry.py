"""The tool registry, its views and the capability section, tried as an attacker (round 19).

Each test failed before its fix. Through the public API only: a real registry,
real views, tools described in code (or in a docstring written in the source).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import ClassVar

import pytest
from _source_docstring import written_in_source
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    GapCode,
    ProvenanceError,
    Registry,
    Tool,
    UnknownToolError,
    VeridicError,
    find_doc_gaps,
    untrusted,
)
from veridic.tools.filters import Deny

# Characters a reader does not see: zero-width and joiners, the word joiner, the byte
# order mark, the Hangul fillers (letters to Python's regular expressions), the braille
# blank, a variation selector, a Unicode tag, a soft hyphen, the combining grapheme joiner.
_UNSEEN = "\u200b\u200c\u200d\u2060\ufeff\u3164\u115f\u1160\uffa0\u2800\ufe0f\U000e0041\u00ad\u034f"


def _site() -> Registry:
    registry = Registry("shop")

    @registry.tool(kind="query")
    def list_orders(customer: int) -> list[int]:
        """List the orders of a customer, newest first.

        Args:
            customer: The customer's id.
        """
        return []

    @registry.tool(kind="write")
    def cancel_order(order: int) -> str:
        """Cancel an order that has not shipped yet.

        Args:
            order: The order's id.
        """
        return "cancelled"

    return registry


# --- a filter whose answer changes ------------------------------------------------------


class _DenyWritesWhen(Deny):
    """A deny filter of the application's own, deciding in its ``matches``: writes are
    denied while the flag is up (a maintenance window read from a feature flag)."""

    __slots__ = ()
    flag: ClassVar[dict[str, bool]] = {"up": False}

    def matches(self, tool: Tool) -> bool:
        return self.flag["up"] and tool.kind == "write"


def test_a_deny_subclass_that_decides_in_matches_is_asked_for_every_view() -> None:
    registry = _site()
    _DenyWritesWhen.flag["up"] = False
    before = registry.view(deny=[_DenyWritesWhen(reason="maintenance window")])
    assert "cancel_order" in before.names()
    _DenyWritesWhen.flag["up"] = True
    try:
        during = registry.view(deny=[_DenyWritesWhen(reason="maintenance window")])
    finally:
        _DenyWritesWhen.flag["up"] = False
    # The cached view of the first call promised a write the filter now denies.
    assert "cancel_order" not in during.names()
    assert "cancel_order" not in during.capability_section()
    assert [s["function"]["name"] for s in during.tool_specs("openai")] == [
        "get_tool_schema",
        "list_orders",
    ]
    assert during.status("cancel_order").state == "denied"


def test_two_deny_subclasses_with_the_same_fields_do_not_share_a_view() -> None:
    class DenyQueries(Deny):
        __slots__ = ()

        def matches(self, tool: Tool) -> bool:
            return tool.kind == "query"

    class DenyWrites(Deny):
        __slots__ = ()

        def matches(self, tool: Tool) -> bool:
            return tool.kind == "write"

    registry = _site()
    no_queries = registry.view(deny=[DenyQueries(reason="scoped")])
    no_writes = registry.view(deny=[DenyWrites(reason="scoped")])
    assert "list_orders" not in no_queries.names()
    assert "cancel_order" in no_queries.names()
    assert "cancel_order" not in no_writes.names()
    assert "list_orders" in no_writes.names()


def test_a_plain_deny_view_is_still_taken_from_the_cache() -> None:
    registry = _site()
    first = registry.view(deny=[Deny({"cancel_order"}, reason="read-only")])
    assert registry.view(deny=[Deny({"cancel_order"}, reason="read-only")]) is first


# --- descriptions nobody can read -----------------------------------------------------------


def test_a_description_of_hangul_fillers_is_no_description() -> None:
    registry = Registry()

    @registry.tool(kind="query", description="\u3164\u3164\u3164")
    def lookup(sku: str) -> str:
        """(not read: description= is given)

        Args:
            sku: The product's stock keeping unit.
        """
        return sku

    view = registry.view()
    assert "lookup" not in view.names()
    assert view.status("lookup").cause == "description"
    assert "lookup" not in view.capability_section()
    assert [(g.tool, g.parameter, g.code) for g in find_doc_gaps(registry)] == [
        ("lookup", None, GapCode.MISSING_DESCRIPTION)
    ]


def test_a_placeholder_spelt_with_invisible_characters_is_a_placeholder() -> None:
    registry = Registry()

    @registry.tool(kind="query", description="T\u200bO\u200bD\u200bO")
    def lookup(sku: str) -> str:
        """(not read)

        Args:
            sku: The product's stock keeping unit.
        """
        return sku

    assert "lookup" not in registry.view().names()
    assert [g.code for g in find_doc_gaps(registry)] == [GapCode.PLACEHOLDER_DESCRIPTION]


def test_a_parameter_described_by_invisible_characters_is_undocumented() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def lookup(sku: str) -> str:
        """Look a product up by its stock keeping unit.

        Args:
            sku: \u3164
        """
        return sku

    assert [(g.parameter, g.code) for g in find_doc_gaps(registry)] == [
        ("sku", GapCode.UNDOCUMENTED_PARAMETER)
    ]


@settings(max_examples=60, deadline=None)
@given(
    unseen=st.text(alphabet=_UNSEEN + " \t\n", min_size=1, max_size=12),
)
def test_a_docstring_of_only_unseen_characters_never_exposes_its_tool(unseen: str) -> None:
    registry = Registry()

    def lookup(sku: str) -> str:
        """(docstring written by written_in_source)"""
        return sku

    written_in_source(lookup, unseen + "\n\nArgs:\n    sku: The product's code.\n")
    registry.tool(kind="query")(lookup)
    view = registry.view()
    assert view.names() == {"get_tool_schema"}
    assert view.status("lookup").cause == "description"


@settings(max_examples=60, deadline=None)
@given(
    words=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=12),
    unseen=st.text(alphabet=_UNSEEN, max_size=4),
)
def test_a_real_description_with_unseen_characters_in_it_is_still_real(
    words: str, unseen: str
) -> None:
    registry = Registry()

    def lookup(sku: str) -> str:
        """(docstring written by written_in_source)"""
        return sku

    written_in_source(lookup, f"Look up {words}{unseen} by its code.\n\nArgs:\n    sku: Code.\n")
    registry.tool(kind="query")(lookup)
    assert "lookup" in registry.view().names()


# --- tools that share a signature -------------------------------------------------------


def test_a_default_equal_to_another_tools_of_another_type_is_its_own() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def ratio(limit: int | float = 1.0) -> str:
        """Give back the limit the call ended up with, as Python writes it.

        Args:
            limit: How many.
        """
        return repr(limit)

    @registry.tool(kind="query")
    def count(limit: int | float = 1) -> str:
        """Give back the limit the call ended up with, as Python writes it, too.

        Args:
            limit: How many.
        """
        return repr(limit)

    @registry.tool(kind="query")
    def flag(limit: int | bool = True) -> str:
        """Give back the flag the call ended up with, as Python writes it.

        Args:
            limit: How many.
        """
        return repr(limit)

    @registry.tool(kind="query")
    def number(limit: int | bool = 1) -> str:
        """Give back the number the call ended up with, as Python writes it.

        Args:
            limit: How many.
        """
        return repr(limit)

    view = registry.view()
    assert view.dispatch("ratio", {}) == "1.0"
    assert view.dispatch("count", {}) == "1"
    assert view.dispatch("flag", {}) == "True"
    assert view.dispatch("number", {}) == "1"
    defaults = [
        json.loads(view.tool(name).schema_json)["properties"]["limit"]["default"]
        for name in ("ratio", "count", "flag", "number")
    ]
    assert [(type(v), v) for v in defaults] == [
        (float, 1.0),
        (int, 1),
        (bool, True),
        (int, 1),
    ]


def test_tools_with_the_same_signature_still_share_one_model() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def first(limit: int = 1) -> str:
        """The first of two tools of one signature.

        Args:
            limit: How many.
        """
        return "1"

    @registry.tool(kind="query")
    def second(limit: int = 1) -> str:
        """The second of two tools of one signature.

        Args:
            limit: How many.
        """
        return "2"

    view = registry.view()
    assert view.tool("first").input_model is view.tool("second").input_model


# --- filters given what is not a name ------------------------------------------------------


def test_an_allow_filter_naming_a_long_unknown_name_is_refused_with_the_name_clipped() -> None:
    registry = _site()
    asked = "list_orders_" + "x" * 10_000
    with pytest.raises(UnknownToolError) as raised:
        registry.view(allow=[asked])
    message = str(raised.value)
    assert len(message) < 1_000
    assert "(10012 chars)" in message
    assert "list_orders" in message  # the nearest, still suggested


@pytest.mark.parametrize(
    ("filters", "said"),
    [
        ({"allow": [{"name": "list_orders"}]}, "the view's allow filter got {'name'"),
        ({"deny": [3]}, "the view's deny filter got 3, an int, where a tool name goes"),
        ({"roles": [{"admin": True}]}, "got the role {'admin': True}, a dict"),
    ],
)
def test_filters_given_what_is_not_a_name_say_so(filters: dict[str, object], said: str) -> None:
    with pytest.raises(VeridicError) as raised:
        _site().view(**filters)  # type: ignore[arg-type]  # what is not a name, on purpose
    assert said in str(raised.value)
    assert not isinstance(raised.value, TypeError)


def test_a_deny_filter_given_a_name_that_is_not_text_says_so() -> None:
    with pytest.raises(VeridicError, match=r"^Deny\(\) got 3, an int, where a tool name goes"):
        Deny([3])  # type: ignore[list-item]  # not a name, on purpose


def test_a_deny_filter_given_a_generator_of_names_denies_them() -> None:
    denied = _site().view(deny=[Deny(name for name in ("cancel_order",))])
    assert "cancel_order" not in denied.names()


# --- a name set at run time ---------------------------------------------------------------


def _handler() -> Callable[[str], str]:
    def lookup(q: str) -> str:
        """Look a product up in the catalogue.

        Args:
            q: Words to look for.
        """
        return q

    return lookup


def test_an_untrusted_dunder_name_is_refused_as_the_name_not_as_a_schema_title() -> None:
    handler = _handler()
    handler.__name__ = untrusted("lookup_everything", source="openapi:operationId")
    registry = Registry()
    # Refused where it is registered, as name=untrusted(...) is, not at boot as a schema
    # title (a message about the input schema, for a name).
    with pytest.raises(ProvenanceError) as raised:
        registry.tool(kind="query")(handler)
    message = str(raised.value)
    assert "openapi:operationId" in message
    assert "__name__" in message
    assert "input schema" not in message
    assert registry.names() == frozenset()


def test_a_long_dunder_name_is_quoted_clipped() -> None:
    handler = _handler()
    handler.__name__ = "lookup_" + "x" * 5_000
    with pytest.raises(VeridicError) as raised:
        Registry().tool(kind="query")(handler)
    message = str(raised.value)
    assert "not a valid tool name" in message
    assert len(message) < 1_000, message[:300]


def test_an_untrusted_dunder_name_with_a_name_written_in_code_registers() -> None:
    handler = _handler()
    handler.__name__ = untrusted("anything_at_all", source="openapi:operationId")
    registry = Registry()
    registry.tool(kind="query", name="lookup_product")(handler)
    assert "lookup_product" in registry.view().names()


def test_a_wrapped_tool_keeps_the_name_of_the_function_it_wraps() -> None:
    def logged(function: Callable[[str], str]) -> Callable[[str], str]:
        @functools.wraps(function)
        def wrapper(q: str) -> str:
            return function(q)

        return wrapper

    registry = Registry()
    registry.tool(kind="query")(logged(_handler()))
    view = registry.view()
    assert "lookup" in view.names()
    assert "- lookup (query" in view.capability_section()


def test_an_external_tool_refused_for_its_declaration_quotes_its_name_clipped() -> None:
    # The name is a server's (an MCP listing, an OpenAPI document): any length.
    with pytest.raises(VeridicError) as raised:
        Registry().external(
            name="search_" + "x" * 5_000,
            description="Search the web.",
            input_schema={"type": "object", "properties": {}},
            handler=lambda arguments: "",
            kind="read",  # type: ignore[arg-type]  # a kind that is not one, on purpose
        )
    message = str(raised.value)
    assert "kind='read'" in message
    assert len(message) < 1_000, message[:300]


def test_an_empty_name_is_refused_not_replaced_by_the_functions() -> None:
    registry = Registry()
    with pytest.raises(VeridicError, match="is not a valid tool name"):
        registry.tool(kind="query", name="")(_handler())
    assert registry.names() == frozenset()


# --- the second read -------------------------------------------------------------------------


def _echo_tool(registry: Registry, name: str, annotation: object, default: object) -> None:
    """Register a tool ``name`` of one parameter ``x`` that gives back ``repr(x)``."""

    def echo(x: int = 0) -> str:
        """Give back the argument the call ended up with, as Python writes it.

        Args:
            x: The argument.
        """
        return repr(x)

    echo.__annotations__["x"] = annotation
    echo.__defaults__ = (default,)
    registry.tool(kind="query", name=name)(echo)


def test_a_decimal_default_equal_to_another_tools_is_its_own() -> None:
    registry = Registry()
    _echo_tool(registry, "precise", Decimal, Decimal("1.0"))
    _echo_tool(registry, "whole", Decimal, Decimal("1"))
    _echo_tool(registry, "prices", tuple[Decimal, ...], (Decimal("2.50"),))
    _echo_tool(registry, "price", tuple[Decimal, ...], (Decimal("2.5"),))
    view = registry.view()
    assert view.dispatch("precise", {}) == "Decimal('1.0')"
    assert view.dispatch("whole", {}) == "Decimal('1')"
    assert view.dispatch("prices", {}) == "(Decimal('2.50'),)"
    assert view.dispatch("price", {}) == "(Decimal('2.5'),)"
    assert json.loads(view.tool("whole").schema_json)["properties"]["x"]["default"] == "1"


def test_a_union_written_in_another_order_is_its_own() -> None:
    # int | float == float | int, but pydantic tries the members in the order written:
    # "1" is 1 to the first and 1.0 to the second, and the schema lists them so.
    registry = Registry()
    _echo_tool(registry, "counted", int | float, 0)
    _echo_tool(registry, "measured", float | int, 0)
    view = registry.view()
    assert view.dispatch("counted", {"x": "1"}) == "1"
    assert view.dispatch("measured", {"x": "1"}) == "1.0"
    listed = json.loads(view.tool("measured").schema_json)["properties"]["x"]["anyOf"]
    assert [member["type"] for member in listed] == ["number", "integer"]


_EQUAL_DEFAULTS = st.sampled_from(
    [
        (1, 1.0, True, Decimal("1"), Decimal("1.0"), Decimal("1.00")),
        (0, 0.0, -0.0, False, Decimal("0"), Decimal("-0"), Decimal("0E+2")),
        ((1,), (1.0,), (True,), (Decimal("1.0"),)),
        (frozenset({1}), frozenset({1.0}), frozenset({True})),
    ]
)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_tool_gets_its_own_default_whatever_an_equal_one_another_tool_has(
    data: st.DataObject,
) -> None:
    equal = data.draw(_EQUAL_DEFAULTS)
    first, second = data.draw(st.permutations(equal))[:2]
    registry = Registry()
    _echo_tool(registry, "first", object, first)
    _echo_tool(registry, "second", object, second)
    view = registry.view()
    assert view.dispatch("first", {}) == repr(first)
    assert view.dispatch("second", {}) == repr(second)


class _Names:
    """A deny list of the application's own, hashable by identity, that grows."""

    def __init__(self) -> None:
        self.listed: list[str] = []

    def __iter__(self) -> Iterator[str]:
        return iter(self.listed)


def test_a_deny_item_that_is_no_name_is_refused_not_cached_stale() -> None:
    registry = _site()
    blocked = _Names()
    # Was taken as a list of names, and its first answer kept for the object in the cache.
    with pytest.raises(VeridicError, match=r"the view's deny filter got .*_Names"):
        registry.view(deny=[blocked])  # type: ignore[list-item]  # not a name, on purpose


@pytest.mark.parametrize(
    ("filters", "said"),
    [
        ({"deny": [{"name": "cancel_order"}]}, "the view's deny filter got {'name'"),
        ({"deny": [["cancel_order"]]}, "the view's deny filter got ['cancel_order'], a list"),
        ({"roles": [3]}, "got the role 3, an int"),
        ({"roles": [None]}, "got the role None"),
        ({"roles": 3}, "got roles=3, an int"),
        ({"allow": 3}, "got allow=3, an int"),
        ({"deny": 3}, "got deny=3, an int"),
        ({"predicates": 3}, "got predicates=3, an int"),
    ],
)
def test_filters_through_the_registry_given_what_is_not_a_name_say_so(
    filters: dict[str, object], said: str
) -> None:
    with pytest.raises(VeridicError) as raised:
        _site().view(**filters)  # type: ignore[arg-type]  # what is not a name, on purpose
    assert said in str(raised.value)
    assert not isinstance(raised.value, TypeError)
