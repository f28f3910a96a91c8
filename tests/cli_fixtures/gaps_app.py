"""Each kind of documentation gap, once."""

from __future__ import annotations

from veridic import Registry

registry = Registry("gaps")


@registry.tool(kind="query")
def list_users(team: str) -> str:  # no docstring at all
    return team


@registry.tool(kind="query")
def list_teams(region: str) -> str:
    """TODO: describe.

    Args:
        region: The region whose teams to list.
    """
    return region


@registry.tool(kind="query")
def find_order(order_id: int, verbose: bool) -> str:
    """Read one order with its lines; set `detail` for the payment history.

    Args:
        order_id: The order to read.
    """
    return f"{order_id} {verbose}"
