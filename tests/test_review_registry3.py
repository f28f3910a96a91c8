"""Leaks a third attacker review of the registry, the tool views and the capability section
found.

Each test failed on the code before its fix; each goes through the public API.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from veridic import (
    ApprovalPolicy,
    Deny,
    Registry,
    ToolDeniedError,
    ToolView,
    UnknownToolError,
    execute,
)
from veridic.audit import SQLiteAuditSink

SHA = "0" * 64

# --- a tool the view hides reads to the model as a name nobody registered -------------------


def _shop(with_admin_tools: bool) -> Registry:
    registry = Registry("shop")

    @registry.tool(kind="query")
    def find_order(order_id: int) -> str:
        """Look up an order by its id.

        Args:
            order_id: The order's id.
        """
        return f"order {order_id}"

    if with_admin_tools:

        @registry.tool(kind="query", roles={"admin"})
        def export_customers(limit: int) -> str:
            """Export the customer table.

            Args:
                limit: How many rows at most.
            """
            return "all of them"

        @registry.tool(kind="query")
        def staff_notes(order_id: int) -> str:
            """Read the staff's private notes on an order.

            Args:
                order_id: The order's id.
            """
            return "notes"

    return registry


def _client_view(registry: Registry) -> ToolView:
    """No roles; export_customers hidden by its role, staff_notes by a deny filter."""
    if "staff_notes" not in registry.names():
        return registry.view()
    return registry.view(deny=[Deny(when=lambda tool: tool.name == "staff_notes")])


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


def _told(registry: Registry, name: str, arguments: dict[str, object]) -> str:
    view = _client_view(registry)
    sink = SQLiteAuditSink(":memory:")
    result = execute(
        view,
        name,
        arguments,
        policy=ApprovalPolicy(view),
        audit=sink,
        request_id="r-1",
        prompt_sha256=SHA,
    )
    sink.close()
    assert not result.ok
    return str(result.told)


@pytest.mark.parametrize("name", ["export_customers", "staff_notes"])
def test_the_model_cannot_tell_a_tool_hidden_from_it_from_a_name_nobody_registered(
    name: str,
) -> None:
    """A model that called a tool its view hides (a role the request lacks, a deny filter)
    was told "tool 'export_customers' is denied in this view (it requires one of the roles
    admin; this view has none)": a name planted in a document, or guessed, confirmed a tool
    kept from it and named the role that opens it, where a hidden tool is one the model
    "never learns the name" of. It is now told what a name nobody registered gets, word
    for word, for a call and for get_tool_schema alike."""
    for call in ((name, {"order_id": 1}), ("get_tool_schema", {"name": name})):
        hidden = _told(_shop(with_admin_tools=True), *call)
        unknown = _told(_shop(with_admin_tools=False), *call)
        assert hidden == unknown
        assert "admin" not in hidden
        assert "denied" not in hidden


def test_the_record_of_a_hidden_tools_call_says_it_was_denied_and_why(
    audit: SQLiteAuditSink,
) -> None:
    view = _client_view(_shop(with_admin_tools=True))
    result = execute(
        view,
        "export_customers",
        {"limit": 1},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="r-1",
        prompt_sha256=SHA,
    )
    (record,) = audit.records()
    assert record.detail.startswith("denied: it requires one of the roles admin")
    assert "hidden from the model" in record.detail
    # The view still answers the application truthfully.
    assert isinstance(result.error, UnknownToolError)
    assert view.status("export_customers").state == "denied"
    assert view.status("export_customers").hidden
    with pytest.raises(ToolDeniedError, match="requires one of the roles admin"):
        view.dispatch("export_customers", {"limit": 1})


def test_a_tombstoned_tool_is_still_told_with_its_reason() -> None:
    registry = _shop(with_admin_tools=True)
    view = registry.view(
        deny=[Deny({"staff_notes"}, reason="notes are closed today", tombstone=True)]
    )
    assert not view.status("staff_notes").hidden
    sink = SQLiteAuditSink(":memory:")
    result = execute(
        view,
        "staff_notes",
        {"order_id": 1},
        policy=ApprovalPolicy(view),
        audit=sink,
        request_id="r-1",
        prompt_sha256=SHA,
    )
    sink.close()
    assert "notes are closed today" in str(result.told)
    assert isinstance(result.error, ToolDeniedError)


def test_view_unknown_answers_as_for_a_name_nobody_registered() -> None:
    hidden = _client_view(_shop(with_admin_tools=True))
    plain = _client_view(_shop(with_admin_tools=False))
    assert hidden.unknown("export_customers") == plain.status("export_customers")
    assert hidden.unknown("find_ordr").suggestions == ("find_order",)
    error = hidden.unknown("export_customers").error()
    assert isinstance(error, UnknownToolError)
