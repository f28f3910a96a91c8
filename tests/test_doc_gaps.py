"""find_doc_gaps: a tool without a real description is in no view, and the lint says so."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pytest
from _source_docstring import written_in_source
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from veridic import DocGap, GapCode, Registry, VeridicError, find_doc_gaps

SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
}


def _codes(registry: Registry) -> list[tuple[str, str | None, str]]:
    return [(gap.tool, gap.parameter, str(gap.code)) for gap in find_doc_gaps(registry)]


def test_a_documented_registry_has_no_gaps() -> None:
    registry = Registry()

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(
        name: str, reason: Annotated[str, Field(description="Why it goes.")] = ""
    ) -> None:
        """Permanently delete a golden fixture; this is a hard delete and cannot be undone.

        Read `list_goldens` first; `name` must be one of its results.

        Args:
            name: The fixture to delete.
        """

    @registry.tool(kind="query")
    def list_goldens() -> list[str]:
        """List the golden fixtures."""
        return []

    assert find_doc_gaps(registry) == []
    assert find_doc_gaps(registry.view()) == []


@pytest.mark.parametrize(
    ("docstring", "code"),
    [
        (None, GapCode.MISSING_DESCRIPTION),
        ("", GapCode.MISSING_DESCRIPTION),
        ("   \n   ", GapCode.MISSING_DESCRIPTION),
        ("TODO", GapCode.PLACEHOLDER_DESCRIPTION),
        ("TODO: describe", GapCode.PLACEHOLDER_DESCRIPTION),
        ("tbd", GapCode.PLACEHOLDER_DESCRIPTION),
        ("FIXME later", GapCode.PLACEHOLDER_DESCRIPTION),
        ("XXX", GapCode.PLACEHOLDER_DESCRIPTION),
        ("Description.", GapCode.PLACEHOLDER_DESCRIPTION),
        ("Delete golden", GapCode.DESCRIPTION_IS_NAME),
        ("delete_golden", GapCode.DESCRIPTION_IS_NAME),
    ],
)
def test_a_tool_without_a_real_description_is_hidden_and_reported(
    docstring: str | None, code: GapCode
) -> None:
    registry = Registry()

    def delete_golden() -> None:
        """(docstring written by written_in_source)"""

    written_in_source(delete_golden, docstring)
    registry.tool(kind="write")(delete_golden)
    assert "delete_golden" not in registry.view().names()
    (gap,) = find_doc_gaps(registry)
    assert (gap.tool, gap.parameter, gap.code) == ("delete_golden", None, code)
    assert "'delete_golden'" in gap.message
    assert "test_doc_gaps.py" in gap.message
    assert "no view exposes it" in gap.message
    assert "description=..." in gap.message


def test_an_explicit_placeholder_description_is_hidden_too() -> None:
    registry = Registry()

    @registry.tool(kind="query", description="TODO: describe")
    def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q: Words to look for.
        """
        return q

    assert "search" not in registry.view().names()
    assert _codes(registry) == [("search", None, "placeholder-description")]


def test_a_description_that_merely_starts_with_todo_is_real() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def list_todos(user: int) -> list[str]:
        """Todo items assigned to a user, oldest first.

        Args:
            user: The user's id.
        """
        return []

    assert "list_todos" in registry.view().names()
    assert find_doc_gaps(registry) == []


def test_an_fstring_docstring_is_reported_as_dropped_by_python() -> None:
    registry = Registry()
    version = 2

    @registry.tool(kind="query")
    def status(order: int) -> str:
        f"""Order status, API v{version}."""  # noqa: B021 - the mistake under test
        return "open"

    assert "status" not in registry.view().names()
    gaps = find_doc_gaps(registry)
    assert gaps[0].code is GapCode.FSTRING_DOCSTRING
    assert "f-string" in gaps[0].message
    assert "test_doc_gaps.py" in gaps[0].message
    assert "use a plain string literal" in gaps[0].message


def test_a_docstring_with_only_sections_has_no_summary() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def status(order: int) -> str:
        """
        Args:
            order: The order id.
        """
        return "open"

    (gap,) = find_doc_gaps(registry)
    assert gap.code is GapCode.MISSING_DESCRIPTION
    assert "with no prose before its sections" in gap.message


def test_undocumented_parameters_are_reported_but_the_tool_is_exposed() -> None:
    registry = Registry()

    @registry.tool(kind="write")
    def refund(order: int, amount: int, note: str = "") -> None:
        """Refund part of an order.

        Args:
            order: The order id.
            note: TODO
        """

    assert "refund" in registry.view().names()
    assert _codes(registry) == [
        ("refund", "amount", "undocumented-parameter"),
        ("refund", "note", "undocumented-parameter"),
    ]
    amount, note = find_doc_gaps(registry)
    assert "parameter 'amount' of tool 'refund'" in amount.message
    assert "test_doc_gaps.py" in amount.message
    assert "Args section" in amount.message
    assert "Field(description=...)" in amount.message
    assert "only 'TODO'" in note.message


def test_backticked_names_of_missing_parameters_are_reported() -> None:
    registry = Registry()

    @registry.tool(kind="write")
    def rename_user(user_id: int, new_name: str) -> None:
        """Rename a user; `user` must exist (see `list_users`), ``raw`` is code.

        Args:
            user_id: The user, as returned by `list_users`.
            new_name: Replaces `old_name`; `True` if unchanged is not allowed.
        """

    @registry.tool(kind="query")
    def list_users() -> list[str]:
        """List the users."""
        return []

    assert _codes(registry) == [
        ("rename_user", "user", "unknown-parameter"),
        ("rename_user", "old_name", "unknown-parameter"),
    ]
    gap = find_doc_gaps(registry)[0]
    assert "names `user`" in gap.message
    assert "user_id, new_name" in gap.message
    assert "double backticks" in gap.message


def test_docstring_entries_for_parameters_the_function_lacks_are_reported() -> None:
    registry = Registry()

    @registry.tool(kind="write")
    def archive(order: int) -> None:
        """Archive an order.

        Args:
            order: The order id.
            order_id: Renamed to order long ago.
        """

    assert _codes(registry) == [("archive", "order_id", "unknown-parameter")]
    assert "does not take" in find_doc_gaps(registry)[0].message


def test_external_tools_are_linted_from_their_spec() -> None:
    registry = Registry()
    registry.external(
        name="web_search",
        description="",
        input_schema=SCHEMA,
        handler=lambda arguments: arguments,
        kind="query",
        source="mcp:search",
    )
    assert _codes(registry) == [
        ("web_search", None, "missing-description"),
        ("web_search", "q", "undocumented-parameter"),
    ]
    assert "mcp:search" in find_doc_gaps(registry)[0].message
    assert "web_search" not in registry.view().names()


def test_components_are_linted_without_booting_them() -> None:
    registry = Registry()
    booted: list[bool] = []
    pro = registry.component("Pro extension", boot=lambda: booted.append(True))

    @pro.tool(kind="write")
    def create_snippet(code: str) -> str:
        """Create a code snippet."""
        return code

    assert _codes(registry) == [("create_snippet", "code", "undocumented-parameter")]
    assert booted == []


def test_a_view_lints_what_it_exposes_and_what_it_hides_for_lack_of_description() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def shown(key: str) -> str:
        """Read a setting."""
        return key

    @registry.tool(kind="query")
    def blank(key: str) -> str:
        return key

    @registry.tool(kind="query")
    def denied(key: str) -> str:
        """Read a secret."""
        return key

    gaps = find_doc_gaps(registry.view(deny={"denied"}))
    assert [(g.tool, g.parameter) for g in gaps] == [
        ("shown", "key"),
        ("blank", None),
        ("blank", "key"),
    ]


def test_gaps_are_frozen_values() -> None:
    gap = DocGap("tool", None, GapCode.MISSING_DESCRIPTION, "message")
    with pytest.raises(dataclasses.FrozenInstanceError):
        gap.tool = "other"  # type: ignore[misc]  # assigning on purpose
    assert str(GapCode.MISSING_DESCRIPTION) == "missing-description"
    assert isinstance(GapCode.MISSING_DESCRIPTION, str)


def test_find_doc_gaps_refuses_other_sources() -> None:
    with pytest.raises(VeridicError, match="pass the Registry"):
        find_doc_gaps([])  # type: ignore[arg-type]  # wrong on purpose


@given(st.text(max_size=40))
def test_property_the_lint_and_the_views_agree_on_descriptions(text: str) -> None:
    registry = Registry()
    registry.tool(kind="query", name="probe", description=text)(_probe)  # type: ignore[veridic-literal]  # arbitrary descriptions under test
    described = not any(g.parameter is None for g in find_doc_gaps(registry))
    assert ("probe" in registry.view().names()) == described


def _probe(value: Annotated[int, Field(description="Any number.")] = 0) -> int:
    return value
