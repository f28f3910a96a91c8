"""anthropic messages: a system message inside messages= takes only trusted text."""

from __future__ import annotations

from _support import SYSTEM, TICKET, anthropic_client
from anthropic.types import MessageParam, UserMessageParam

# Accepted: user and assistant turns hold any text; a system message holds trusted text.
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    messages=[
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TICKET},
        {"role": "assistant", "content": "Looking."},
    ],
)
USERS: list[UserMessageParam] = [{"role": "user", "content": TICKET}]
anthropic_client.messages.create(model="m", max_tokens=64, messages=USERS)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    messages=[{"role": "system", "content": [{"type": "text", "text": SYSTEM}]}],
)

# Refused: a system message with untrusted content, and a list whose type allows one.
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    messages=[
        {  # P: [reportArgumentType]
            "role": "system",
            "content": TICKET,  # E: [veridic-sdk] got a system message in messages= whose content
        }
    ],
)
HISTORY: list[MessageParam] = [{"role": "user", "content": "Hi"}]
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    messages=HISTORY,  # E: [veridic-sdk] may hold a system message whose content is typed str
)
anthropic_client.messages.create(
    model="m",
    max_tokens=64,
    messages=[
        *HISTORY,  # E: [veridic-sdk] got messages=the variable "HISTORY"
        {"role": "user", "content": "And tomorrow?"},
    ],
)
