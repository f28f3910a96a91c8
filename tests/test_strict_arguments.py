"""What the model's arguments become: pydantic's lax mode by default, strict where a tool asks.

The default is kept lax on purpose (see docs/tools.md, "What the model's arguments
become"): the coercions it keeps keep what the model wrote ("5" is the order 5; those
that change a value's kind, such as JSON's true for an int, are refused: see
tests/test_argument_kinds.py), the approval request and the handler get the coerced
value, and the record keeps the digest of what the model wrote. A tool that wants the
model's exact JSON types marks its fields strict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field, Strict

from veridic import (
    ApprovalPolicy,
    AuditRecord,
    CallOutcome,
    CallResult,
    Composer,
    InvalidArgumentsError,
    Registry,
    SQLiteAuditSink,
    ToolView,
    execute,
    instruction,
)
from veridic.run.approval import ApprovalRequest
from veridic.run.records import arguments_sha256

PROMPT = Composer().system(instruction("You refund orders.")).build()


def refunds(ran: list[object]) -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="write", irreversible=True)
    def refund(order_id: int, full: bool = False) -> str:
        """Refund an order to the card it was paid with; this cannot be undone.

        Args:
            order_id: The order.
            full: Whether to refund the shipping too.
        """
        ran.append((order_id, full))
        return "refunded"

    @registry.tool(kind="write", irreversible=True)
    def strict_refund(
        order_id: Annotated[int, Strict()], full: Annotated[bool, Field(strict=True)] = False
    ) -> str:
        """Refund an order, taking only the exact JSON types the schema names.

        Args:
            order_id: The order.
            full: Whether to refund the shipping too.
        """
        ran.append((order_id, full))
        return "refunded"

    return registry.view()


def confirmed(
    view: ToolView, name: str, arguments: str, asked: list[ApprovalRequest]
) -> tuple[CallResult, Sequence[AuditRecord]]:
    audit = SQLiteAuditSink()

    def confirm(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    result = execute(
        view,
        name,
        arguments,
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="req-1",
        prompt=PROMPT,
        confirm=confirm,
    )
    return result, audit.records()


def test_by_default_a_string_number_is_the_number_the_user_confirms_and_the_handler_gets() -> None:
    ran: list[object] = []
    asked: list[ApprovalRequest] = []
    written = '{"order_id": "5", "full": "true"}'
    result, (record,) = confirmed(refunds(ran), "refund", written, asked)
    assert result.outcome is CallOutcome.OK
    assert dict(asked[0].arguments) == {"order_id": 5, "full": True}  # what runs is asked
    assert ran == [(5, True)]
    assert record.arguments_sha256 == arguments_sha256(written)  # what the model wrote


def test_a_strict_field_refuses_what_the_model_wrote_in_another_json_type_and_nothing_runs() -> (
    None
):
    ran: list[object] = []
    asked: list[ApprovalRequest] = []
    result, (record,) = confirmed(refunds(ran), "strict_refund", '{"order_id": "5"}', asked)
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, InvalidArgumentsError)
    assert "order_id: Input should be a valid integer" in str(result.error)
    assert record.detail.startswith("invalid_arguments: order_id")
    assert (ran, asked) == ([], [])
    result, _ = confirmed(refunds(ran), "strict_refund", '{"order_id": 5, "full": 1}', asked)
    assert isinstance(result.error, InvalidArgumentsError)
    assert "full: Input should be a valid boolean" in str(result.error)
    assert ran == []


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_property_strict_takes_only_json_integers_where_lax_also_takes_their_text(
    order_id: int,
) -> None:
    ran: list[object] = []
    view = refunds(ran)
    as_text = json.dumps({"order_id": str(order_id)})
    as_number = json.dumps({"order_id": order_id})
    assert view.validate("refund", as_text).arguments["order_id"] == order_id
    assert view.validate("strict_refund", as_number).arguments["order_id"] == order_id
    with pytest.raises(InvalidArgumentsError, match="order_id: Input should be a valid integer"):
        view.validate("strict_refund", as_text)
    assert ran == []


def test_a_json_boolean_for_an_integer_is_refused_whether_or_not_the_field_is_strict() -> None:
    # It changes the kind of the value: refused in lax mode too (tests/test_argument_kinds.py).
    ran: list[object] = []
    view = refunds(ran)
    for name in ("refund", "strict_refund"):
        for written in ('{"order_id": true}', '{"order_id": false}'):
            with pytest.raises(
                InvalidArgumentsError, match="order_id: Input should be a valid integer"
            ):
                view.validate(name, written)
    assert ran == []
