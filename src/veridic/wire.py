"""The provider wire formats veridic emits, as ``TypedDict`` s.

The core never imports a provider SDK; it emits plain dicts that the SDKs
accept, typed precisely enough that a wrapper does not need ``Any``.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = [
    "AnthropicBlock",
    "AnthropicMessage",
    "AnthropicRequest",
    "AnthropicTextBlock",
    "AnthropicToolResultBlock",
    "AnthropicToolUseBlock",
    "OpenAIFunctionCall",
    "OpenAIMessage",
    "OpenAIToolCall",
]


class OpenAIFunctionCall(TypedDict):
    name: str
    arguments: str


class OpenAIToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: OpenAIFunctionCall


class OpenAIMessage(TypedDict):
    """One chat-completions message; ``content`` is ``None`` only beside tool calls."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: NotRequired[list[OpenAIToolCall]]
    tool_call_id: NotRequired[str]


class AnthropicTextBlock(TypedDict):
    type: Literal["text"]
    text: str


class AnthropicToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, object]


class AnthropicToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str


AnthropicBlock = AnthropicTextBlock | AnthropicToolUseBlock | AnthropicToolResultBlock


class AnthropicMessage(TypedDict):
    role: Literal["user", "assistant"]
    content: list[AnthropicBlock]


class AnthropicRequest(TypedDict):
    """The ``system`` and ``messages`` parameters of a Messages API call."""

    system: str
    messages: list[AnthropicMessage]
