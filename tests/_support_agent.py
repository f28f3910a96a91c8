"""A small support agent, as an application would write it, for the whole-run tests.

The test process and a fresh one (``python tests/_support_agent.py resume ...``)
build the same registry and system part from this code; only the stored
paused run, the stored conversation and the audit database pass between them.
The model is the real OpenAI or Anthropic SDK over a mock HTTP transport
(:mod:`_sdk_server`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _sdk_server import FakeServer, http_module
from pydantic import BaseModel

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    OpenAIChat,
    PausedRun,
    Registry,
    SQLiteAuditSink,
    ToolView,
    instruction,
)

SYSTEM = instruction("You are the support agent of Acme. Answer as a Resolution JSON object.")


class Resolution(BaseModel):
    order_id: int
    refunded: bool


def registry(ran: list[str]) -> Registry:
    agent = Registry("support")

    @agent.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(f"get_order {order_id}")
        return f"order {order_id}: lost in transit"

    @agent.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(f"refund {order_id}")
        return f"refunded order {order_id}"

    return agent


def system_part(view: ToolView) -> Composer:
    """The system part, built from code for every request (never read from storage)."""
    return Composer().system(SYSTEM, view.capability_section())


def chat(
    reply_id: str, *, text: str | None = None, calls: tuple[tuple[str, str, str], ...] = ()
) -> dict[str, Any]:
    """An OpenAI Chat completion: text, or tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def openai_gateway(
    replies: list[dict[str, Any]], audit: SQLiteAuditSink
) -> tuple[ModelGateway, FakeServer]:
    import openai

    server = FakeServer(http_module("openai"), [("json", reply) for reply in replies])
    adapter = OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")
    return ModelGateway(adapter, audit=audit), server


def resume(paused_file: Path, database: Path, replies_file: Path, out_file: Path) -> None:
    """The second request, in a fresh process: the user's answers came, the run goes on."""
    ran: list[str] = []
    view = registry(ran).view()
    paused = PausedRun.from_json(paused_file.read_text(encoding="utf-8"))
    answers = {approval.call_id: True for approval in paused.approvals}
    with SQLiteAuditSink(database) as audit:
        gateway, server = openai_gateway(json.loads(replies_file.read_text()), audit)
        composer = system_part(view)
        result = gateway.resume(
            paused,
            composer,
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
            output_type=Resolution,
        )
        audit.save_conversation(paused.request_id, composer.conversation())
    assert result.output is not None
    out_file.write_text(
        json.dumps(
            {
                "output": result.output.model_dump(),
                "ran": ran,
                "turns": result.turns,
                "usage": None if result.usage is None else result.usage.total_tokens,
                "sent": [body for _, body in server.sent],
            }
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    command, *paths = sys.argv[1:]
    assert command == "resume", command
    resume(*(Path(path) for path in paths))
