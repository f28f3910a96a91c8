"""A new user's pass over the twelfth round's new refusals: each message's advice names
things that exist, with the parameters it says they take.

Each test triggers the refusal through the public API and checks the key facts of the
words (a parameter named is one the call takes, an import path resolves), not the whole
message.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from typing import Any

import pytest

from veridic import (
    ApprovalExpiredError,
    ApprovalPolicy,
    Composer,
    Deny,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolCouplingError,
    ToolView,
    VeridicError,
    instruction,
)

SYSTEM = instruction("You look up orders.")
PAUSED_AT = 1_750_000_000.0


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    with SQLiteAuditSink(":memory:") as sink:
        yield sink


def _view_with_an_unpinned_external_tool() -> ToolView:
    registry = Registry()
    registry.external(
        name="wiki_search",
        description="Search the wiki.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        handler=lambda q: "nothing found",
        kind="query",
    )
    return registry.view()


def _parameters(call: Any) -> list[str]:
    return list(inspect.signature(call).parameters)


def test_the_unlabelled_tool_text_refusal_names_a_tool_pin_that_imports(
    audit: SQLiteAuditSink,
) -> None:
    view = _view_with_an_unpinned_external_tool()
    gateway = ModelGateway(ScriptedProvider([{"text": "hi"}]), audit=audit)
    prompt = Composer().system(SYSTEM).user("Find the refund policy.").build()
    with pytest.raises(ToolCouplingError) as refused:
        gateway.send(prompt, view, request_id="r-1")
    words = str(refused.value)
    # It said pin=tool_pin(...), which no import from veridic gives: the name must be a
    # path a new user can import, to the function the message describes.
    named = re.search(r"pin=([\w.]+)\(name, description, input_schema\)", words)
    assert named is not None, words
    module, _, function = named.group(1).rpartition(".")
    assert module, f"{named.group(1)} says nowhere to import it from"
    pin = getattr(importlib.import_module(module), function)
    assert _parameters(pin) == ["name", "description", "input_schema"]
    # The other remedy it names: Deny(when=...) and the tool attribute it reads.
    assert "Deny(when=lambda tool: not tool.schema_trusted)" in words
    assert "when" in _parameters(Deny)
    assert [t.schema_trusted for t in view.tools()] == [True, False]  # the schema tool, and it
    assert view.names() == frozenset({"wiki_search", "get_tool_schema"})
    denied = Registry()
    denied.external(
        name="wiki_search",
        description="Search the wiki.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        handler=lambda q: "nothing found",
        kind="query",
    )
    kept_out = denied.view(deny=[Deny(when=lambda tool: not tool.schema_trusted)])
    assert "wiki_search" not in kept_out.names()


def test_the_expired_approval_names_the_policy_parameter_and_a_run_that_asks_anew(
    audit: SQLiteAuditSink,
) -> None:
    registry = Registry()

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        return f"refunded {order_id}"

    view = registry.view()
    calls = {"tool_calls": [("c1", "refund", '{"order_id": 42}')]}
    first = ModelGateway(ScriptedProvider([calls]), audit=audit, clock=lambda: PAUSED_AT)
    composer = Composer().system(SYSTEM, view.capability_section()).user("Refund 42.")
    paused = first.run(
        composer, view, policy=ApprovalPolicy(view), request_id="r-1", defer=True
    ).paused
    assert paused is not None
    late = ModelGateway(
        ScriptedProvider([{"text": "Refunded."}]), audit=audit, clock=lambda: PAUSED_AT + 90_000
    )
    answers = {approval.digest: True for approval in paused.approvals}
    again = Composer().system(SYSTEM, view.capability_section())
    with pytest.raises(ApprovalExpiredError) as expired:
        late.resume(paused, again, view, policy=ApprovalPolicy(view), answers=answers)
    words = str(expired.value)
    assert "ApprovalPolicy(view, approvals_expire_after=...)" in words
    assert _parameters(ApprovalPolicy)[0] == "view"
    assert "approvals_expire_after" in _parameters(ApprovalPolicy)
    asked = re.search(r"gateway\.run\(composer, view, ([^)]*)\)", words)
    assert asked is not None, words
    keywords = [part.split("=")[0] for part in asked.group(1).split(", ")]
    assert set(keywords) <= set(_parameters(ModelGateway.run)), keywords
    # and it does what it says: the model asks again, in a paused run dated now
    anew = ModelGateway(
        ScriptedProvider([{"tool_calls": [("c2", "refund", '{"order_id": 42}')]}]),
        audit=audit,
        clock=lambda: PAUSED_AT + 90_000,
    ).run(again, view, policy=ApprovalPolicy(view), request_id=paused.request_id, defer=True)
    assert anew.paused is not None
    assert anew.paused.paused_at is not None
    assert paused.paused_at is not None
    assert anew.paused.paused_at > paused.paused_at


@pytest.mark.parametrize(("wait", "shown"), [(0, "0"), (float("inf"), "inf"), ("600", "'600'")])
def test_an_approval_timeout_that_is_no_time_is_quoted_as_it_was_given(
    audit: SQLiteAuditSink, wait: object, shown: str
) -> None:
    from veridic.integrations.mcp.server import mcp_server

    # A 0 was shown as '0', in quotes, as if text had been passed where a number was.
    with pytest.raises(VeridicError) as refused:
        mcp_server(lambda request: Registry().view(), audit=audit, approval_timeout=wait)  # type: ignore[arg-type]  # the misuse under test
    words = str(refused.value)
    assert f"approval_timeout={shown}:" in words
    assert "serve()" in words  # serve() passes it on, and its caller reads this too
