"""A support agent over three HTTP requests: the loop, an approval that waits, a stored chat.

What a new user had to write by hand around veridic (about 345 lines against
about 100 in the frameworks) is now the library's: ``gateway.run`` is the
loop, ``defer=True`` stops it for the user's approval and ``gateway.resume``
goes on in a later request, ``composer.conversation()`` is what the chat
keeps between requests, and ``ToolContext`` gives handlers the request's user
without globals. Each request builds its registry view and system part from
code; only plain data (the paused run, the stored conversation) passes
between them, so each could run on another host.

Run from the repository root: ``python -m examples.support_agent``. The model
is scripted, so the run is the same every time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from examples._console import heading, quote, say, section, table
from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolContext,
    ToolView,
    instruction,
)

__all__ = ["Customer", "build_registry", "main"]

SYSTEM = instruction(
    "You are the support agent of Acme. Be brief; never promise what no tool does."
)


@dataclass(frozen=True)
class Customer:
    """Who the request is for: the handlers read it from their ToolContext, never the model."""

    name: str
    orders: Mapping[int, str]


def build_registry(ledger: list[str]) -> Registry:
    """The application's tools: a query, three writes, and a component whose licence lapsed."""
    registry = Registry("support")

    @registry.tool(kind="query")
    def get_order(ctx: ToolContext[Customer], order_id: int) -> str:
        """The status of one of the customer's orders.

        Args:
            order_id: The order number, as the customer gives it.
        """
        return ctx.deps.orders.get(order_id, f"order {order_id} is not one of this customer's")

    @registry.tool(kind="write")
    def refund(ctx: ToolContext[Customer], order_id: int) -> str:
        """Refund an order to the card it was paid with; the customer is told by email.

        Args:
            order_id: The order to refund.
        """
        ledger.append(f"refund {order_id} for {ctx.deps.name}")
        return f"refund of order {order_id} started"

    @registry.tool(kind="write", irreversible=True)
    def close_account(ctx: ToolContext[Customer]) -> str:
        """Close the customer's account and erase their data; this cannot be undone."""
        ledger.append(f"closed {ctx.deps.name}")
        return "account closed"

    def licensed() -> bool:
        return False  # the loyalty plug-in's licence expired this morning

    loyalty = registry.component(
        "Loyalty plug-in", boot=licensed, provides="Loyalty points", recheck=60.0
    )

    @loyalty.tool(kind="query")
    def loyalty_points(ctx: ToolContext[Customer]) -> int:
        """The customer's loyalty points."""
        return 120

    return registry


def request(
    script: Sequence[Mapping[str, object]], audit: SQLiteAuditSink, ledger: list[str]
) -> tuple[ModelGateway, ToolView, Composer]:
    """What every request builds from code: the gateway, the view, the system part."""
    view = build_registry(ledger).view()
    gateway = ModelGateway(ScriptedProvider(script), audit=audit)
    return gateway, view, Composer().system(SYSTEM, view.capability_section())


def main(audit: SQLiteAuditSink | None = None) -> None:
    heading(
        "A support agent over three requests",
        "the run loop, an approval that waits for a person, a conversation that is kept",
    )
    audit = SQLiteAuditSink(":memory:") if audit is None else audit
    ledger: list[str] = []
    ada = Customer("Ada", {42: "order 42: lost in transit"})

    section(1, "Request 1: the model looks the order up, then asks for a refund")
    gateway, view, composer = request(
        [
            {"tool_calls": [("c1", "get_order", '{"order_id": 42}')]},
            {"tool_calls": [("c2", "refund", '{"order_id": 42}')]},
        ],
        audit,
        ledger,
    )
    composer.user("My parcel 42 never came. Refund it, and how many points do I have?")
    policy = ApprovalPolicy(view)
    first = gateway.run(composer, view, policy=policy, request_id="chat-7", defer=True, context=ada)
    say("The capability section the model read says what is missing, and why:")
    quote(view.capability_section().splitlines()[-1])
    say("The run stopped before the refund; the request ends with what to ask the user:")
    table((a.tool, repr(dict(a.arguments)), a.risk.value, a.why) for a in first.pending)
    shown = first.pending  # the dialog posts each one's digest back with the user's answer
    assert first.paused is not None
    # Kept in the store, not in the session: claim_paused hands it out once, so a double
    # click (or a second host) cannot resume it twice and refund twice.
    audit.save_paused(first.paused)
    # The rules go to the store as policy.rules: it keeps each "always" rule's grant
    # beside it (dict(policy.rules) would keep the rules alone, and a restored "always"
    # would then hold for whatever tool has the name by then).
    audit.save_rules(ada.name, policy.rules)
    kept = first.paused.request_id
    say(f"Kept in the store: the paused run of {kept!r}, and the customer's approval rules.")

    section(2, "Request 2, maybe on another host: the user approved")
    gateway, view, composer = request(
        [{"text": "Done: the refund of order 42 started."}], audit, ledger
    )
    policy = ApprovalPolicy.restore(view, audit.rules(ada.name))
    paused = audit.claim_paused("chat-7")
    assert paused is not None  # None: another click or host claimed it first, nothing to run
    # Keyed by the digest the dialog showed: a paused run changed where it was kept
    # would match no answer, and nothing would run.
    answers = {approval.digest: True for approval in shown}
    second = gateway.resume(paused, composer, view, policy=policy, answers=answers, context=ada)
    say(f"The model answered: {second.text!r}; the ledger holds {ledger}.")
    again = audit.claim_paused("chat-7")
    say(f"A second click finds nothing to resume: claim_paused gives {again}.")
    policy.allow_always("refund")  # the dialog's "don't ask me again for refunds"
    audit.save_rules(ada.name, policy.rules)
    audit.save_conversation("chat-7", composer.conversation())

    section(3, "Request 3: the conversation comes back from the store, its trust does not")
    gateway, view, composer = request([{"text": "It should show in 3-5 days."}], audit, ledger)
    stored = audit.conversation("chat-7")
    assert stored is not None
    composer.restore(stored).user("When will I see the money?")
    policy = ApprovalPolicy.restore(view, audit.rules(ada.name))
    third = gateway.run(composer, view, policy=policy, request_id="chat-7b", context=ada)
    say(
        f"{len(stored)} stored turns restored after the system part built from code; "
        f"the model answered {third.text!r}."
    )
    say(
        f"The user's rules came back from the store with their grants: {dict(policy.rules)}, "
        f"each for the tool it was given for ({policy.request('refund').why})."
    )

    section(4, "The audit store: every call, and how it was approved")
    table((r.request_id, r.tool, r.approval.value, r.outcome.value) for r in audit.records())
    say(
        f"{len(audit.model_calls())} model calls recorded before they were sent, "
        f"{len(audit.model_replies())} answers after."
    )


if __name__ == "__main__":
    main()
