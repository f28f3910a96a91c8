"""A component that needs a production secret to start: the CI machine does not have it.

``veridic check`` and ``veridic manifest --check`` must pass on that machine
against a snapshot written where the secret is set: whether a component
starts is not part of the snapshot, its tools are.
"""

from __future__ import annotations

import os

from veridic import Registry

registry = Registry("secret")


def _billing_boot() -> None:
    os.environ["BILLING_API_KEY"]  # a KeyError on a machine without the secret


billing = registry.component(
    "Billing extension",
    boot=_billing_boot,
    hint="Set BILLING_API_KEY, then restart the agent.",
    provides="Refunds",
)


@billing.tool(kind="write", irreversible=True)
def refund_order(order_id: int, amount_cents: int) -> str:
    """Refund part or all of an order to the customer's card; a refund cannot be undone.

    Args:
        order_id: The order to refund.
        amount_cents: How much to refund, in cents.
    """
    return f"refunded {amount_cents} on {order_id}"


@registry.tool(kind="query")
def find_order(order_id: int) -> str:
    """Read one order with its lines, payments and refunds.

    Args:
        order_id: The order to read.
    """
    return str(order_id)


support_view = registry.view()
