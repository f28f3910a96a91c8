"""``Prompt``: the immutable result of composing, and its provider formats.

A prompt is a tuple of messages, each holding its exact text and the spans
that say where every character came from. It renders the same bytes every
time (no nonces, no timestamps), so its ``sha256`` can key a provider's prompt
cache and an audit record alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, cast

from veridic.errors import VeridicError
from veridic.provenance import Kind, Span, concat_spans
from veridic.wire import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicRequest,
    OpenAIMessage,
    OpenAIToolCall,
)

__all__ = ["Message", "Prompt", "PromptSpan", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made, with its arguments as canonical JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Message:
    """One message: its role, exact text, the branded parts it was made of, tool-call links."""

    role: Role
    content: str
    parts: tuple[str, ...] = field(repr=False, compare=False)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    @property
    def spans(self) -> tuple[Span, ...]:
        """Where every character of ``content`` came from (worked out on request)."""
        return concat_spans(self.parts, "")


@dataclass(frozen=True, slots=True)
class PromptSpan:
    """Characters ``[start, end)`` of message number ``message`` and their provenance."""

    message: int
    role: Role
    start: int
    end: int
    kind: Kind
    origin: str

    @property
    def trusted(self) -> bool:
        return self.kind in ("code", "field", "template", "registry", "policy")


@dataclass(frozen=True)
class Prompt:
    """An immutable chat prompt. Build it with :class:`veridic.Composer`."""

    messages: tuple[Message, ...]

    @property
    def system(self) -> str:
        """The system message's text, or ``""`` when there is none."""
        if self.messages and self.messages[0].role == "system":
            return self.messages[0].content
        return ""

    @cached_property
    def sha256(self) -> str:
        """Hex SHA-256 of a canonical encoding of roles, texts and tool calls.

        Provenance is not hashed: two prompts the model reads identically hash
        identically, whoever wrote them.
        """
        canonical = [
            [m.role, m.content, [[c.id, c.name, c.arguments] for c in m.tool_calls], m.tool_call_id]
            for m in self.messages
        ]
        encoded = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls no later tool result answers; providers reject a prompt with any."""
        answered = {m.tool_call_id for m in self.messages if m.tool_call_id is not None}
        return tuple(
            call for m in self.messages for call in m.tool_calls if call.id not in answered
        )

    def spans(self) -> tuple[PromptSpan, ...]:
        """Every character range of every message with where it came from."""
        return tuple(
            PromptSpan(index, message.role, span.start, span.end, span.kind, span.origin)
            for index, message in enumerate(self.messages)
            for span in message.spans
        )

    def to_openai(self) -> list[OpenAIMessage]:
        """Chat-completions ``messages``."""
        rendered: list[OpenAIMessage] = []
        for message in self.messages:
            item: OpenAIMessage = {"role": message.role, "content": message.content}
            if message.tool_calls:
                item["content"] = message.content or None
                item["tool_calls"] = [_openai_call(call) for call in message.tool_calls]
            if message.tool_call_id is not None:
                item["tool_call_id"] = message.tool_call_id
            rendered.append(item)
        return rendered

    def to_anthropic(self) -> AnthropicRequest:
        """Messages API ``system`` and ``messages``; consecutive same-role turns merged.

        Raises:
            VeridicError: the conversation is empty or does not start with a
                user turn, which the Messages API rejects.
        """
        messages: list[AnthropicMessage] = []
        for message in self.messages:
            if message.role == "system":
                continue
            role: Literal["user", "assistant"] = (
                "assistant" if message.role == "assistant" else "user"
            )
            blocks = _anthropic_blocks(message)
            if not blocks:
                # An empty assistant turn carries nothing, and the Messages API
                # rejects an empty content list: there is nothing to send.
                continue
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)
            else:
                messages.append({"role": role, "content": blocks})
        if not messages or messages[0]["role"] != "user":
            raise VeridicError(
                "the Anthropic Messages API needs a conversation that starts with a user turn, "
                f"this prompt has {len(messages)} turn(s) starting with "
                f"{messages[0]['role'] if messages else 'nothing'}: add Composer.user() or "
                "Composer.data() before the first assistant turn"
            )
        return {"system": self.system, "messages": messages}


def _openai_call(call: ToolCall) -> OpenAIToolCall:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _anthropic_blocks(message: Message) -> list[AnthropicBlock]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
        ]
    blocks: list[AnthropicBlock] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        arguments = cast(dict[str, object], json.loads(call.arguments))
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks
