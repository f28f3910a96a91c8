"""The support agent example: the loop, a deferred approval, a stored chat, over three requests."""

from __future__ import annotations

import io
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from veridic import ApprovalMode, ApprovalPolicy, Registry, SQLiteAuditSink, ToolContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples import support_agent


@pytest.fixture(scope="module")
def printed() -> str:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        support_agent.main()
    return _flat(buffer.getvalue())


def _flat(text: str) -> str:
    """The printed text as one line of single spaces: gutters, wrapping and columns removed."""
    return " ".join(" ".join(re.sub(r"^\s*\|?\s*", "", line) for line in text.splitlines()).split())


def test_the_first_request_stops_for_the_refund_and_says_why(printed: str) -> None:
    assert "refund {'order_id': 42} mid 'refund' is a write without an always rule" in printed
    assert "Loyalty points are not available on this site: the Loyalty plug-in did not start" in (
        printed
    )


def test_the_refund_runs_once_approved_in_the_second_request(printed: str) -> None:
    assert "the ledger holds ['refund 42 for Ada']" in printed
    assert "chat-7 refund user_confirmed ok" in printed
    assert "6 stored turns restored" in printed
    assert "4 model calls recorded before they were sent, 4 answers after." in printed


def test_the_example_prints_the_same_thing_every_run(printed: str) -> None:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        support_agent.main()
    assert _flat(buffer.getvalue()) == printed


def test_the_customer_reaches_the_handlers_and_never_the_model() -> None:
    ledger: list[str] = []
    view = support_agent.build_registry(ledger).view()
    assert all("ctx" not in str(spec) for spec in view.tool_specs("openai"))
    ada = support_agent.Customer("Ada", {1: "order 1: delivered"})
    assert view.dispatch("get_order", {"order_id": 1}, context=ada) == "order 1: delivered"
    assert view.tool("refund").context is not None
    assert ApprovalPolicy(view).request("close_account").pending  # high risk: always asked
    assert ToolContext.__name__ == "ToolContext"


def test_the_paused_run_is_kept_in_the_store_and_claimed_once(printed: str) -> None:
    """A double click cannot refund twice: the store hands the paused run out once."""
    assert "Kept in the store: the paused run of 'chat-7'" in printed
    assert "A second click finds nothing to resume: claim_paused gives None." in printed
    assert printed.count("refund user_confirmed ok") == 1


def test_the_always_rule_the_user_gave_stays_bound_to_the_refund_tool() -> None:
    """The example keeps rules where their grants survive: another 'refund' is asked about.

    ``dict(policy.rules)`` in a session keeps the rules alone; restored, an "always"
    rule is granted anew to whatever tool has the name then (another feature's
    'refund' that also closes the account). The store's round trip keeps the grant.
    """
    store = SQLiteAuditSink(":memory:")
    with redirect_stdout(io.StringIO()):
        support_agent.main(store)
    saved = store.rules("Ada")
    assert saved == {"refund": "always"}
    assert (
        ApprovalPolicy.restore(support_agent.build_registry([]).view(), saved)
        .request("refund")
        .mode
        is ApprovalMode.ALWAYS_RULE
    )

    other = Registry("support")

    @other.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order and close the customer's account with it.

        Args:
            order_id: The order to refund.
        """
        return "closed"

    asked = ApprovalPolicy.restore(other.view(), saved).request("refund")
    assert asked.mode is None, "an always rule carried over to a different tool"
    assert "refund" in asked.why
