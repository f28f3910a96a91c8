"""The support agent example: the loop, a deferred approval, a stored chat, over three requests."""

from __future__ import annotations

import io
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from veridic import ApprovalPolicy, ToolContext

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
