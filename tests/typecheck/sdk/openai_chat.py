"""openai chat completions: system and developer messages take only trusted text."""

from __future__ import annotations

from _support import PLAIN, STORED, SYSTEM, TICKET, openai_async, openai_client
from openai.types.chat import (
    ChatCompletionMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionUserMessageParam,
)

# Accepted: trusted system/developer content (text or text parts); any user content.
openai_client.chat.completions.create(
    model="m",
    messages=[
        {"role": "system", "content": SYSTEM},
        {"role": "developer", "content": STORED.content},
        {"role": "user", "content": TICKET},
        {"role": "assistant", "content": PLAIN},
    ],
)
openai_client.chat.completions.create(
    model="m",
    messages=[{"role": "developer", "content": [{"type": "text", "text": SYSTEM}]}],
)
USERS: list[ChatCompletionUserMessageParam] = [{"role": "user", "content": TICKET}]
openai_client.chat.completions.create(model="m", messages=USERS)

# Refused.
openai_client.chat.completions.create(
    model="m",
    messages=[
        {  # P: [reportArgumentType]
            "role": "system",
            "content": TICKET,  # E: [veridic-sdk] chat.completions.create() got a system message
        },
        {"role": "user", "content": "Hi"},
    ],
)
openai_client.chat.completions.create(
    model="m",
    messages=[
        {  # P: [reportArgumentType]
            "role": "developer",
            "content": PLAIN,  # E: [veridic-sdk] got a developer message in messages= whose content
        }
    ],
)
openai_client.chat.completions.create(
    model="m",
    messages=[
        {  # P: [reportArgumentType]
            "role": "system",
            "content": [{"type": "text", "text": TICKET}],  # E: [veridic-sdk] content is a list
        }
    ],
)
HISTORY: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hi"}]
openai_client.chat.completions.create(
    model="m",
    messages=HISTORY,  # E: [veridic-sdk] may hold a developer/system message whose content is
)
openai_client.chat.completions.stream(
    model="m",
    messages=[
        # P: [reportArgumentType]
        {
            "role": "system",
            "content": TICKET,  # E: [veridic-sdk] chat.completions.stream() got
        }
    ],
)


async def async_calls() -> None:
    await openai_async.chat.completions.create(
        model="m",
        messages=[
            # P: [reportArgumentType]
            {
                "role": "system",
                "content": TICKET,  # E: [veridic-sdk] got a system message
            }
        ],
    )
    await openai_async.chat.completions.create(
        model="m", messages=[{"role": "system", "content": SYSTEM}]
    )


# pyright (with the SDK stubs) checks a system message where it is built; mypy where it is sent.
# P: [reportAssignmentType]
BUILT: ChatCompletionSystemMessageParam = {"role": "system", "content": TICKET}
TRUSTED: ChatCompletionSystemMessageParam = {"role": "system", "content": SYSTEM}
openai_client.chat.completions.create(
    model="m",
    messages=[TRUSTED],  # E: [veridic-sdk] may hold a system message whose content is typed str
)
