"""A message of a prompt, and the parts a message is made of.

The role, the tool calls and the spans located by message are not the
prompt's alone: a saved prompt (:class:`~veridic.text.prompt.PromptDocument`)
holds them too, and the audit records and the telemetry name them. Here,
below the prompt, the document reads them without importing the prompt that
writes it. Every name here also imports from :mod:`veridic.text.prompt`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.text.provenance import Kind, Span, concat_spans
from veridic.text.reasoning import ReasoningItem

__all__ = ["Message", "PromptSpan", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from: the four roles of a chat prompt, whatever the provider."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made, with its arguments as canonical JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Message:
    """One message: its role, exact text, the branded parts it was made of, tool-call links.

    ``reasoning`` holds the model's reasoning items of an assistant turn
    (:class:`ReasoningItem`), in the order the model produced them; only an
    assistant turn carries any.

    Raises:
        VeridicError: ``reasoning`` holds something that is not a
            :class:`ReasoningItem`, or sits on a turn that is not the assistant's.
    """

    role: Role
    content: str
    parts: tuple[str, ...] = field(repr=False, compare=False)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: tuple[ReasoningItem, ...] = ()
    tool_error: bool = False
    """A tool result that reports a failed, refused or denied call (Anthropic's ``is_error``)."""

    def __post_init__(self) -> None:
        if not self.reasoning:
            return
        if not isinstance(self.reasoning, tuple) or not all(
            isinstance(item, ReasoningItem) for item in self.reasoning
        ):
            raise VeridicError(
                f"a {self.role} message got reasoning={clip(repr(self.reasoning))}: pass a "
                "tuple of ReasoningItem, as Reply.reasoning holds them"
            )
        if self.role != "assistant":
            raise VeridicError(
                f"a {self.role} message got {len(self.reasoning)} reasoning item(s): reasoning "
                "is the model's own output and goes on an assistant turn only; pass it with "
                "Composer.assistant(text, reasoning=...)"
            )

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
