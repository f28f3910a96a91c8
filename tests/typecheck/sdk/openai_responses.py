"""openai responses: instructions= and system/developer input items take only trusted text."""

from __future__ import annotations

from _support import JOINED, LOADED, PLAIN, SYSTEM, TICKET, openai_async, openai_client
from openai.types.responses import ResponseInputParam

# Accepted.
openai_client.responses.create(model="m", instructions=SYSTEM, input="Weather in Oslo?")
openai_client.responses.create(model="m", instructions=JOINED, input=TICKET)
openai_client.responses.create(model="m", instructions=None, input="Hi")
openai_client.responses.create(model="m", input="Hi")
openai_client.responses.create(
    model="m",
    input=[
        {"role": "developer", "content": SYSTEM},
        {"role": "user", "content": TICKET},
        {"type": "function_call_output", "call_id": "c1", "output": TICKET},
    ],
)

# Refused.
openai_client.responses.create(
    model="m",
    # P: [reportArgumentType]
    instructions=TICKET,  # E: [veridic-sdk] openai responses.create() got instructions=
    input="Hi",
)
openai_client.responses.create(
    model="m",
    # P: [reportArgumentType]
    instructions=PLAIN,  # E: [veridic-sdk] got instructions=the variable "PLAIN" of type "str"
    input="Hi",
)
openai_client.responses.create(
    model="m",
    instructions=LOADED,  # E: [veridic-sdk] of type "Any"
    input="Hi",
)
openai_client.responses.create(
    model="m",
    input=[
        {
            "role": "system",
            "content": TICKET,  # E: [veridic-sdk] got a system message in input= whose content
        },
        {
            "role": "developer",
            "content": PLAIN,  # E: [veridic-sdk] a developer message gives the model instructions
        },
    ],
)
ITEMS: ResponseInputParam = [{"role": "user", "content": "Hi"}]
openai_client.responses.create(
    model="m",
    input=ITEMS,  # E: [veridic-sdk] may hold a developer/system message whose content is typed str
)
openai_client.responses.stream(
    model="m",
    # P: [reportArgumentType]
    instructions=TICKET,  # E: [veridic-sdk] openai responses.stream() got instructions=
    input="Hi",
)
openai_client.responses.with_raw_response.create(
    model="m",
    instructions=TICKET,  # E: [veridic-sdk] openai responses.create() got instructions=
    input="Hi",
)


async def async_calls() -> None:
    await openai_async.responses.create(
        model="m",
        # P: [reportArgumentType]
        instructions=TICKET,  # E: [veridic-sdk] openai responses.create() got instructions=
        input="Hi",
    )
    await openai_async.responses.create(model="m", instructions=SYSTEM, input="Hi")
