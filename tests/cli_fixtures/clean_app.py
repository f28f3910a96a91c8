"""A small application with nothing to report: every `veridic` command exits 0."""

from __future__ import annotations

from pydantic import BaseModel

from veridic import InstructionField, Registry, Risk

registry = Registry("clean")
not_a_registry = 42


class StoredPrompt(BaseModel):
    name: str
    content: InstructionField


@registry.tool(kind="query")
def find_ticket(ticket_id: int) -> str:
    """Read one support ticket with its messages and current status.

    Args:
        ticket_id: The number of the ticket to read.
    """
    return f"ticket {ticket_id}"


@registry.tool(kind="write")
def close_ticket(ticket_id: int, note: str) -> str:
    """Close a ticket; a closed ticket can be reopened later from the archive.

    Args:
        ticket_id: The ticket to close.
        note: Why it was closed, shown to the customer.
    """
    return f"closed {ticket_id}: {note}"


@registry.tool(kind="write", irreversible=True, risk=Risk.HIGH)
def delete_golden(fixture_id: int) -> str:
    """Permanently delete a golden fixture; this is a hard delete and cannot be undone.

    Args:
        fixture_id: The fixture to delete.
    """
    return f"deleted {fixture_id}"


@registry.tool(kind="write", writes=(StoredPrompt,))
def edit_prompt(name: str, content: str) -> str:
    """Save new content for a prompt template.
    The owning feature uses it verbatim as its system prompt from the next run on.

    Args:
        name: The prompt template to edit.
        content: The new text of the prompt.
    """
    return f"edited {name}"


billing = registry.component("Billing extension", boot=lambda: True, provides="Refunds")


@billing.tool(kind="write")
def refund_order(order_id: int) -> str:
    """Refund an order to the original payment method; the refund can be reversed within a day.

    Args:
        order_id: The order to refund.
    """
    return f"refunded {order_id}"


support_view = registry.view(deny=["delete_golden"])
