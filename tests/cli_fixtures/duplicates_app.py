"""Two tools the model cannot tell apart, and a third that is fine."""

from __future__ import annotations

from veridic import Registry

registry = Registry("duplicates")


@registry.tool(kind="write")
def archive_ticket(ticket_id: int) -> str:
    """Move a support ticket out of the open queue so agents no longer see it.

    Args:
        ticket_id: The ticket to move.
    """
    return f"archived {ticket_id}"


@registry.tool(kind="write")
def close_ticket(ticket_id: int) -> str:
    """Move a support ticket out of the open queue so agents no longer see it anymore.

    Args:
        ticket_id: The ticket to move.
    """
    return f"closed {ticket_id}"


@registry.tool(kind="query")
def find_ticket(ticket_id: int) -> str:
    """Read one support ticket with its messages and current status.

    Args:
        ticket_id: The ticket to read.
    """
    return f"ticket {ticket_id}"
