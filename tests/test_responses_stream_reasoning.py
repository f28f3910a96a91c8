"""A Responses stream keeps every reasoning item of its final response.

The stream's finished items (``response.output_item.done``) are the ones the
API says to send back, so they replaced the final response's reasoning list
whole: a stream that finished fewer reasoning items than the final response
holds (a proxy that drops events, a server that does not send each item's
``done``) left the others out of the reply, silently, and they were never sent
back with the next request.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
from _sdk_server import FakeServer, http_module, sse
from test_reasoning import FUNCTION_CALL, REASONING, VIEW, gateway, openai_response, question

from veridic import OpenAIResponses, Reply

SECOND = {**REASONING, "id": "rs_68a2", "encrypted_content": "gAAAAABoq1N0-second=="}


def _stream(final: dict[str, Any]) -> str:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**final, "output": []}},
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.done", "output_index": 1, "item": FUNCTION_CALL},
        # the second reasoning item's done event never came
        {"type": "response.completed", "response": final},
    ]
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return sse(events, named=True)


def test_a_reasoning_item_the_stream_did_not_finish_is_kept_from_the_final_response() -> None:
    final = openai_response(REASONING, FUNCTION_CALL, SECOND)
    body = _stream(final)
    server = FakeServer(http_module("openai"), [("sse", body), ("sse", body)])
    sync_gw, _ = gateway(OpenAIResponses(server.client(openai, "OpenAI"), model="o4-mini"))
    with sync_gw.stream(question().build(), VIEW, request_id="req-1") as stream:
        assert list(stream) == []
    async_gw, _ = gateway(
        OpenAIResponses(server.async_client(openai, "AsyncOpenAI"), model="o4-mini")
    )

    async def run() -> Reply:
        streamed = await async_gw.astream(question().build(), VIEW, request_id="req-2")
        async with streamed:
            assert [piece async for piece in streamed] == []
        return streamed.reply

    for reply in (stream.reply, asyncio.run(run())):
        assert [item.block() for item in reply.reasoning] == [REASONING, SECOND]
