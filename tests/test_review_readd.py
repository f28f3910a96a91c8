"""A second read of the fourth attacker review's fixes: what they broke or left open.

Each test failed on the code before its fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sdk_server import FakeServer, http_module, sse
from test_providers import MESSAGE, VIEW, first_prompt, gateway

from veridic import AnthropicMessages, Usage

anthropic = pytest.importorskip("anthropic")


def _claude_stream(start_usage: dict[str, int], delta_usage: dict[str, int]) -> Usage | None:
    """The usage of a streamed Anthropic answer whose events carry these counts."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**MESSAGE, "content": [], "stop_reason": None, "usage": start_usage},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": delta_usage,
        },
        {"type": "message_stop"},
    ]
    server = FakeServer(http_module("anthropic"), [("sse", sse(events, named=True))])
    adapter = AnthropicMessages(
        server.client(anthropic, "Anthropic"), model="claude-test", max_tokens=9
    )
    gw, _, _ = gateway(adapter)
    with gw.stream(first_prompt(), VIEW, request_id="r") as stream:
        list(stream)
    return stream.reply.usage


def test_a_streamed_anthropic_answer_keeps_its_tokens_read_when_the_start_counts_no_output() -> (
    None
):
    # message_start read as a whole usage dropped its input_tokens when it gave no
    # output_tokens (a compatible server), and the reply counted 0 tokens read.
    assert _claude_stream({"input_tokens": 10}, {"output_tokens": 5}) == Usage(10, 5)


def test_a_streamed_anthropic_answer_that_counts_no_tokens_read_has_no_usage() -> None:
    # Without input_tokens at the start, the reply counted 0 tokens read, which a
    # Limits(tokens=...) let through; a send of the same answer gives no usage.
    assert _claude_stream({"output_tokens": 1}, {"output_tokens": 5}) is None
    assert _claude_stream({"input_tokens": 10, "output_tokens": 1}, {}) == Usage(10, 1)
    assert _claude_stream({"input_tokens": 10, "output_tokens": 1}, {"output_tokens": 5}) == (
        Usage(10, 5)
    )
