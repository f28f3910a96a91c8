"""TrustedText parameters (LiteralString | TrustedInstruction) take code text or minted text.

A component's name, hint and offer, a deny reason, an external tool's source, a
BootError's reason and a tool's description reach the capability section, which
instructs the model. Every TrustedText parameter is checked, veridic's and the user's.
"""

from typing import Final

from veridic import (
    BootError,
    Deny,
    Registry,
    TrustedInstruction,
    TrustedText,
    UntrustedText,
    instruction,
)

HINT: Final = "Ask an admin to enable billing."


def handler(arguments: dict[str, object]) -> object:
    return arguments


def label(text: TrustedText) -> TrustedText:
    return text


def accepted(
    registry: Registry, minted: TrustedInstruction, maybe: TrustedInstruction | None
) -> None:
    billing = registry.component("billing", hint=HINT, provides=instruction("invoices"))
    registry.component(minted, hint=minted, provides=maybe)
    registry.component("search", provides=None)
    Deny({"refund"}, reason="read-only session")
    Deny(reason=minted)
    registry.external(
        name="lookup",
        description="Look a customer up.",
        input_schema={"type": "object"},
        handler=handler,
        kind="query",
        source="crm",
    )
    billing.external(
        name="charge",
        description="Charge a card.",
        input_schema={"type": "object"},
        handler=handler,
        kind="write",
        source=minted,
    )
    label("written in code")
    label(minted)

    @registry.tool(kind="query", description="Look an order up.")
    def order(order_id: str) -> str:
        return order_id

    @billing.tool(kind="query", description=HINT)
    def invoice(invoice_id: str) -> str:
        return invoice_id


def boot() -> None:
    raise BootError("requires core >= 2.3")


def refused(registry: Registry, name: str, reply: str, u: UntrustedText) -> None:
    # P: [reportArgumentType]
    # E: [veridic-literal] Registry.component() takes trusted text for "name"
    billing = registry.component(name)
    # P: [reportArgumentType]
    # E: [veridic-literal] an f-string with values
    registry.component("billing", hint=f"failed: {reply}")
    # P: [reportArgumentType]
    registry.component("billing", provides=", ".join([name]))  # E: [veridic-literal] for "provides"
    # P: [reportArgumentType]
    Deny(reason=u)  # E: [veridic-literal] of type UntrustedText
    registry.external(
        name="lookup",
        description="Look a customer up.",
        input_schema={"type": "object"},
        handler=handler,
        kind="query",
        # P: [reportArgumentType]
        source=reply,  # E: [veridic-literal] Registry.external() takes trusted text for "source"
    )
    billing.external(
        name="charge",
        description="Charge a card.",
        input_schema={"type": "object"},
        handler=handler,
        kind="write",
        # P: [reportArgumentType]
        source=name,  # E: [veridic-literal] Component.external() takes trusted text
    )
    # P: [reportArgumentType]
    label(name)  # E: [veridic-literal] label() takes trusted text for "text"
    # A TrustedText return value is not code: mypy reads LiteralString as str.
    label(label("nested"))  # E: [veridic-literal] the result of "label()"

    # P: [reportArgumentType]
    @registry.tool(kind="query", description=reply)  # E: [veridic-literal] for "description"
    def order(order_id: str) -> str:
        return order_id


def failing_boot(reply: str) -> None:
    # P: [reportArgumentType]
    raise BootError(f"server said {reply}")  # E: [veridic-literal] BootError() takes trusted text
