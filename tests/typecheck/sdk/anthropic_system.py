"""anthropic messages: the system= parameter takes only trusted text."""

from __future__ import annotations

from _support import (
    JOINED,
    LOADED,
    PLAIN,
    STORED,
    SYSTEM,
    TICKET,
    anthropic_async,
    anthropic_client,
)
from anthropic import omit
from anthropic.types import TextBlockParam

from veridic import TrustedInstruction

# Accepted: minted, joined or read from an InstructionField; omitted; trusted text blocks.
anthropic_client.messages.create(
    model="m", max_tokens=64, system=SYSTEM, messages=[{"role": "user", "content": "Hi"}]
)
anthropic_client.messages.create(model="m", max_tokens=64, system=JOINED, messages=[])
anthropic_client.messages.create(model="m", max_tokens=64, system=STORED.content, messages=[])
anthropic_client.messages.create(model="m", max_tokens=64, system=omit, messages=[])
anthropic_client.messages.create(model="m", max_tokens=64, messages=[])
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
    messages=[],
)


def with_parameter(system: TrustedInstruction) -> None:
    anthropic_client.messages.create(model="m", max_tokens=64, system=system, messages=[])


# Refused: text that is not trusted, whatever its static type.
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=TICKET,  # E: [veridic-sdk] got system=the variable "TICKET" of type "UntrustedText"
    messages=[],
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system="You obey the user.",  # E: [veridic-sdk] got system=a str literal of type "str"
    messages=[],
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=PLAIN,  # E: [veridic-sdk] anthropic messages.create() got system=the variable "PLAIN"
    messages=[],
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=f"{SYSTEM} {TICKET}",  # E: [veridic-sdk] only TrustedInstruction may go there
    messages=[],
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    system=LOADED,  # E: [veridic-sdk] of type "Any"
    messages=[],
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=SYSTEM.upper(),  # E: [veridic-sdk] got system=the result of upper()
    messages=[],
)
BLOCKS: list[TextBlockParam] = [{"type": "text", "text": SYSTEM}]
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    system=BLOCKS,  # E: [veridic-sdk] of type "list[TextBlockParam]"  # P: [reportArgumentType]
    messages=[],
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    # E: [veridic-sdk] got system=a list literal of type "list[TextBlockParam]"
    # P: [reportArgumentType]
    system=[{"type": "text", "text": TICKET}],
    messages=[],
)


# The same rule on every method that sends a prompt: stream, raw and streaming responses,
# the async client and the beta namespace.
anthropic_client.messages.stream(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=TICKET,  # E: [veridic-sdk] anthropic messages.stream() got system=
    messages=[],
)
anthropic_client.messages.with_raw_response.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=TICKET,  # E: [veridic-sdk] anthropic messages.create() got system=
    messages=[],
)
anthropic_client.messages.with_streaming_response.create(
    model="m",
    max_tokens=64,
    system=TICKET,  # E: [veridic-sdk] got system=  # P: [reportArgumentType]
    messages=[],
)
anthropic_client.beta.messages.create(
    model="m",
    max_tokens=64,
    # P: [reportArgumentType]
    system=TICKET,  # E: [veridic-sdk] anthropic beta.messages.create() got system=
    messages=[],
)


async def async_calls() -> None:
    await anthropic_async.messages.create(
        model="m",
        max_tokens=64,
        # P: [reportArgumentType]
        system=TICKET,  # E: [veridic-sdk] anthropic messages.create() got system=
        messages=[],
    )
    await anthropic_async.messages.create(model="m", max_tokens=64, system=SYSTEM, messages=[])
    await anthropic_async.beta.messages.create(
        model="m",
        max_tokens=64,
        # P: [reportArgumentType]
        system=PLAIN,  # E: [veridic-sdk] anthropic beta.messages.create() got system=
        messages=[],
    )
