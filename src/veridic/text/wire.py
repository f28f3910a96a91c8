"""The provider wire formats veridic emits, as ``TypedDict`` s.

The core never imports a provider SDK; it emits plain dicts that the SDKs
accept, typed precisely enough that a wrapper does not need ``Any``.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = [
    "AnthropicBlock",
    "AnthropicMessage",
    "AnthropicReasoningBlock",
    "AnthropicRedactedThinkingBlock",
    "AnthropicRequest",
    "AnthropicTextBlock",
    "AnthropicThinkingBlock",
    "AnthropicToolResultBlock",
    "AnthropicToolUseBlock",
    "OpenAIFunctionCall",
    "OpenAIMessage",
    "OpenAIReasoningContent",
    "OpenAIReasoningItem",
    "OpenAIReasoningSummary",
    "OpenAIToolCall",
    "ReasoningBlock",
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
    is_error: NotRequired[bool]


class AnthropicThinkingBlock(TypedDict):
    """A ``thinking`` block: the model's reasoning and the signature that authenticates it."""

    type: Literal["thinking"]
    thinking: str
    signature: str


class AnthropicRedactedThinkingBlock(TypedDict):
    """A ``redacted_thinking`` block: reasoning the provider encrypted; only ``data`` travels."""

    type: Literal["redacted_thinking"]
    data: str


AnthropicReasoningBlock = AnthropicThinkingBlock | AnthropicRedactedThinkingBlock

AnthropicBlock = (
    AnthropicTextBlock
    | AnthropicToolUseBlock
    | AnthropicToolResultBlock
    | AnthropicThinkingBlock
    | AnthropicRedactedThinkingBlock
)


class AnthropicMessage(TypedDict):
    role: Literal["user", "assistant"]
    content: list[AnthropicBlock]


class AnthropicRequest(TypedDict):
    """The ``system`` and ``messages`` parameters of a Messages API call."""

    system: str
    messages: list[AnthropicMessage]


class OpenAIReasoningSummary(TypedDict):
    type: Literal["summary_text"]
    text: str


class OpenAIReasoningContent(TypedDict):
    type: Literal["reasoning_text"]
    text: str


class OpenAIReasoningItem(TypedDict):
    """A Responses API ``reasoning`` item, as an output item and, unchanged, as an input item.

    ``encrypted_content`` is there when the request set
    ``include=["reasoning.encrypted_content"]`` (or the API returns it by default).
    """

    type: Literal["reasoning"]
    id: str
    summary: list[OpenAIReasoningSummary]
    encrypted_content: NotRequired[str | None]
    content: NotRequired[list[OpenAIReasoningContent]]


ReasoningBlock = AnthropicThinkingBlock | AnthropicRedactedThinkingBlock | OpenAIReasoningItem
"""One provider's reasoning block or item, as :meth:`veridic.ReasoningItem.block` returns it.

The API may add keys these types do not name; they are kept and sent back too.
"""
