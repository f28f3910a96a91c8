"""Seventh review, speed: the fast paths of two regressions keep their meaning.

A model-call record checks every span of the system message when it is made and
again in the store; the check now looks roles and kinds up in sets, which hash what
they are given. A span altered to hold an unhashable role or kind must still be
refused as a malformed record, not escape as a ``TypeError`` from the lookup.

A view's filters (predicates, ``Deny(when=...)``) are asked of every tool each time
a filtered view is built; a bool answer is now read at once, and every other answer
must still count by its truth, an awaitable still be refused naming the filter.
"""

from __future__ import annotations

import hashlib
from typing import cast

import pytest

from veridic import AuditRecordError, Deny, ModelCallRecord, Registry, Tool, VeridicError
from veridic.text.prompt import PromptSpan
from veridic.tools.filters import Predicate

SHA = hashlib.sha256(b"perf7").hexdigest()


@pytest.mark.parametrize("field", ["role", "kind"])
@pytest.mark.parametrize("value", [["system"], {"code": 1}, b"system", None])
def test_a_span_altered_to_an_unhashable_or_odd_value_is_refused_as_malformed(
    field: str, value: object
) -> None:
    span = PromptSpan(0, "system", 0, 5, "code", "tests:1")
    object.__setattr__(span, field, value)
    with pytest.raises(AuditRecordError, match="instruction_spans must be a tuple of PromptSpan"):
        ModelCallRecord(1.0, "req-1", "openai.responses", "m", SHA, SHA, (), (span,))


def test_every_role_and_kind_a_prompt_gives_is_accepted() -> None:
    roles = ("system", "user", "assistant", "tool")
    kinds = ("code", "field", "template", "registry", "policy", "untrusted", "unknown")
    spans = tuple(
        PromptSpan(0, role, 0, 5, kind, "tests:1")  # type: ignore[arg-type]  # all of them
        for role in roles
        for kind in kinds
    )
    record = ModelCallRecord(1.0, "req-1", "openai.responses", "m", SHA, SHA, (), spans)
    assert record.instruction_spans == spans


# --- view filters: the bool answer is read at once, every other one as before --------------


def _shop() -> Registry:
    registry = Registry("shop")

    @registry.tool(kind="query")
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order.
        """
        return order

    return registry


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        (True, True),
        (False, False),
        (1, True),
        (0, False),
        ("yes", True),
        ("", False),
        (None, False),
    ],
)
def test_a_filter_answer_is_read_by_its_truth_whatever_its_type(answer: object, kept: bool) -> None:
    registry = _shop()
    predicate = cast("Predicate", lambda tool: answer)
    assert ("lookup" in registry.view(predicates=[predicate]).names()) is kept
    assert ("lookup" in registry.view(deny=[Deny(when=predicate)]).names()) is not kept


def test_an_awaitable_answer_names_its_filter_only_when_it_is_refused() -> None:
    registry = _shop()

    async def licensed(tool: Tool) -> bool:
        return True

    async_filter = cast("Predicate", licensed)
    with pytest.raises(VeridicError, match=r"predicate .*licensed returned a coroutine.*'lookup'"):
        registry.view(predicates=[async_filter])
    with pytest.raises(VeridicError, match=r"Deny\(when=.*licensed\) returned a coroutine"):
        registry.view(deny=[Deny(when=async_filter)])
