"""A failed component is listed in the views that would hold its tools, and only there.

A view built for a role, an allow list or a deny list keeps some tools from the
model as names nobody registered. Listing a failed component whose every tool
the view keeps out told the model of capabilities the view hides, and that they
exist but are broken; a component with a tool the view would show is still
listed, so the reason that tool is missing is said where it would have been.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import Registry, ToolDeniedError, ToolUnavailableError


def _fails() -> None:
    raise RuntimeError("licence expired")


def _registry(roles_of_tools: list[tuple[str, ...]]) -> Registry:
    registry = Registry("shop")
    billing = registry.component(
        "Billing", boot=_fails, hint="Renew the licence.", provides="Refunds"
    )
    for index, roles in enumerate(roles_of_tools):

        def refund(order_id: int) -> str:
            """Refund an order in full.

            Args:
                order_id: The order's id.
            """
            return "refunded"

        billing.tool(kind="write", name=f"refund_{index}", roles=roles)(refund)

    @registry.tool(kind="query")
    def find_order(order_id: int) -> str:
        """Find an order by its id.

        Args:
            order_id: The order's id.
        """
        return "shipped"

    return registry


def test_a_failed_component_whose_tools_the_role_filter_hides_is_not_listed() -> None:
    registry = _registry([("admin",)])
    clerk = registry.view(roles=("clerk",))
    assert "Billing" not in clerk.capability_section()
    assert "Refunds" not in clerk.capability_section()
    assert clerk.unavailable_components() == ()
    # The application is told the truth; the model, a name nobody registered.
    with pytest.raises(ToolDeniedError, match="roles admin"):
        clerk.dispatch("refund_0", {"order_id": 1})
    assert clerk.unknown("refund_0").state == "unknown"
    admin = registry.view(roles=("admin",))
    assert "the Billing did not start" in admin.capability_section()
    assert [state.name for state in admin.unavailable_components()] == ["Billing"]
    with pytest.raises(ToolUnavailableError, match="did not start"):
        admin.dispatch("refund_0", {"order_id": 1})


def test_a_failed_component_kept_out_by_allow_or_deny_is_not_listed() -> None:
    registry = _registry([()])
    assert "Billing" not in registry.view(allow=["find_order"]).capability_section()
    assert "Billing" not in registry.view(deny=["refund_0"]).capability_section()
    assert "Billing" in registry.view().capability_section()


def test_a_failed_component_kept_out_by_a_predicate_is_not_listed() -> None:
    registry = _registry([(), ()])
    reads_only = registry.view(predicates=[lambda tool: tool.kind == "query"])
    assert "Billing" not in reads_only.capability_section()
    assert reads_only.unavailable_components() == ()
    one_left = registry.view(predicates=[lambda tool: tool.name != "refund_0"])
    assert "the Billing did not start" in one_left.capability_section()


@given(
    st.lists(st.sampled_from([(), ("admin",), ("clerk",), ("admin", "clerk")]), max_size=4),
    st.sampled_from([(), ("admin",), ("clerk",)]),
)
def test_a_failed_component_is_listed_exactly_when_the_view_would_hold_one_of_its_tools(
    roles_of_tools: list[tuple[str, ...]], view_roles: tuple[str, ...]
) -> None:
    view = _registry(roles_of_tools).view(roles=view_roles)
    would_hold = not roles_of_tools or any(
        not roles or set(roles) & set(view_roles) for roles in roles_of_tools
    )
    assert ("the Billing did not start" in view.capability_section()) is would_hold
    assert bool(view.unavailable_components()) is would_hold
