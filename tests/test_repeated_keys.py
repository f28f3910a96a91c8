"""Arguments that give a key twice are refused, never read as whichever copy came last.

``json.loads`` keeps the last of two equal keys, so ``{"amount": 5, "amount": 5000}``
would run with 5000 while a reader of the model's text may see 5. Nothing the model
writes is ignored silently (invariant I10): the executor, the plan normalizer and the
deferred approvals refuse such arguments, naming the key.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    PlanError,
    Registry,
    SQLiteAuditSink,
    execute,
    normalize_plan,
)

_KEYS = st.text(min_size=1, max_size=6)
_VALUES = st.one_of(st.integers(), st.text(max_size=6), st.booleans(), st.none())


def _shop(paid: list[int]) -> Registry:
    registry = Registry("shop")

    @registry.tool(kind="write")
    def refund(order_id: int, amount: int) -> str:
        """Refund part of an order to the card it was paid with.

        Args:
            order_id: The order.
            amount: Euros to refund.
        """
        paid.append(amount)
        return "refunded"

    return registry


def test_a_tool_call_giving_a_key_twice_is_refused_and_recorded() -> None:
    paid: list[int] = []
    view = _shop(paid).view()
    policy = ApprovalPolicy(view)
    policy.allow_always("refund")
    audit = SQLiteAuditSink()
    result = execute(
        view,
        "refund",
        '{"order_id": 42, "amount": 5, "amount": 5000}',
        policy=policy,
        audit=audit,
        request_id="req-1",
        prompt_sha256="0" * 64,
    )
    assert result.outcome is CallOutcome.REFUSED
    assert "the key 'amount' is given twice" in str(result.error)
    assert paid == []
    (record,) = audit.records("req-1")
    assert record.outcome is CallOutcome.REFUSED


def test_a_plan_step_giving_a_key_twice_is_refused() -> None:
    view = _shop([]).view()
    steps = [{"id": "s1", "tool": "refund", "arguments": '{"order_id": 1, "order_id": 2}'}]
    with pytest.raises(PlanError, match="the key 'order_id' is given twice"):
        normalize_plan(steps, view)


@given(st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=5), st.data())
def test_property_json_with_a_repeated_key_is_refused_and_without_one_reads_the_same(
    arguments: dict[str, object], data: st.DataObject
) -> None:
    paid: list[int] = []
    view = _shop(paid).view()
    text = json.dumps(arguments)
    repeated = data.draw(st.sampled_from(sorted(arguments)))
    doubled = text[:-1] + ", " + json.dumps(repeated) + ": " + json.dumps(arguments[repeated]) + "}"
    for given_text, refused in ((text, False), (doubled, True)):
        result = execute(
            view,
            "refund",
            given_text,
            policy=ApprovalPolicy(view),
            audit=SQLiteAuditSink(),
            request_id="req-1",
            prompt_sha256="0" * 64,
        )
        assert ("is given twice" in str(result.error)) is refused
    assert paid == []  # never approved: nothing ran either way
