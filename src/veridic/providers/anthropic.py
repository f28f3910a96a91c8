"""Adapter for the ``anthropic`` SDK: the Messages API (``pip install 'veridic[anthropic]'``).

:class:`AnthropicMessages` sends ``Prompt.to_anthropic()`` (its ``system``
text, left out when empty, and its ``messages``) with
``view.tool_specs("anthropic")`` as ``tools``. It takes the SDK's client,
sync (``anthropic.Anthropic``) or async (``anthropic.AsyncAnthropic``);
without one, a sync ``anthropic.Anthropic()`` is built (reading
``ANTHROPIC_API_KEY`` as the SDK does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from veridic.errors import VeridicError
from veridic.prompt import Prompt, ToolCall
from veridic.providers._base import (
    Adapter,
    Completion,
    arguments_json,
    attr,
    items,
    require_sdk,
    text_of,
)
from veridic.tool import JsonObject

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic

__all__ = ["AnthropicMessages"]

_EXTRA: Final = "anthropic"


class AnthropicMessages(Adapter):
    """The Messages API (``client.messages.create``).

    ``max_tokens`` is required by the API, so it is required here; other
    request parameters (``temperature``, ``tool_choice``, ``thinking``, ...)
    go in ``options``. The prompt, the tools, the model and streaming are the
    gateway's to set.

    Raises:
        MissingExtraError: the ``anthropic`` package is not installed.
        VeridicError: the client is not an Anthropic client, ``max_tokens``
            is not a positive integer, or an option sets what the gateway sets.
    """

    api = "anthropic.messages"
    spec_format = "anthropic"
    owned = frozenset({"system", "messages", "tools"})

    __slots__ = ()

    def __init__(
        self,
        client: Anthropic | AsyncAnthropic | None = None,
        *,
        model: str,
        max_tokens: int,
        options: Mapping[str, object] | None = None,
    ) -> None:
        sdk = require_sdk("anthropic", _EXTRA, "AnthropicMessages")
        if type(max_tokens) is not int or max_tokens < 1:
            raise VeridicError(
                f"AnthropicMessages() got max_tokens={max_tokens!r}; the Messages API needs "
                "a positive number of output tokens: pass e.g. max_tokens=1024"
            )
        made: object = sdk.Anthropic() if client is None else client
        super().__init__(made, model, {"max_tokens": max_tokens, **(options or {})})

    def method(self) -> Callable[..., object]:
        method = attr(self.client, "messages", "create")
        if not callable(method):
            raise VeridicError(
                f"AnthropicMessages got a {type(self.client).__name__}, which has no "
                "messages.create(): pass an anthropic.Anthropic or anthropic.AsyncAnthropic "
                "client (from a version the 'anthropic' extra allows)"
            )
        return method

    def render(self, prompt: Prompt, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        rendered = prompt.to_anthropic()
        request: JsonObject = {"messages": rendered["messages"], "tools": specs}
        if rendered["system"]:
            request["system"] = rendered["system"]
        return request

    def parse(self, response: object) -> Completion:
        where = f"{self!r}"
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in items(response, "content"):
            kind = attr(block, "type")
            if kind == "text":
                text.append(text_of(block, "text", where=where))
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        text_of(block, "id", where=where),
                        text_of(block, "name", where=where),
                        arguments_json(attr(block, "input")),
                    )
                )
        return Completion(
            text="".join(text),
            tool_calls=tuple(calls),
            stop_reason=text_of(response, "stop_reason", where=where, default=""),
            response_id=text_of(response, "id", where=where, default=""),
            model=text_of(response, "model", where=where, default=self.model),
        )

    def assembler(self) -> _MessagesAssembler:
        return _MessagesAssembler(repr(self), self.model)


class _MessagesAssembler:
    """Messages stream events: blocks open, grow by deltas, and the message stops."""

    def __init__(self, where: str, model: str) -> None:
        self._where = where
        self._model = model
        self._id = ""
        self._stop = ""
        self._done = False
        self._blocks: dict[int, list[str]] = {}
        """index -> [kind, text or JSON so far, tool id, tool name]"""

    def feed(self, event: object) -> str:
        kind = attr(event, "type")
        if kind == "message_start":
            self._id = text_of(event, "message", "id", where=self._where, default="")
            self._model = text_of(event, "message", "model", where=self._where, default=self._model)
        elif kind == "content_block_start":
            block = attr(event, "content_block")
            block_kind = text_of(block, "type", where=self._where)
            if block_kind == "tool_use":
                self._blocks[self._index(event)] = [
                    block_kind,
                    "",
                    text_of(block, "id", where=self._where),
                    text_of(block, "name", where=self._where),
                ]
            else:
                start = text_of(block, "text", where=self._where, default="")
                self._blocks[self._index(event)] = [block_kind, start, "", ""]
                return start if block_kind == "text" else ""
        elif kind == "content_block_delta":
            return self._delta(event)
        elif kind == "message_delta":
            self._stop = text_of(event, "delta", "stop_reason", where=self._where, default="")
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            raise VeridicError(
                f"{self._where}: the stream reported an error "
                f"({attr(event, 'error', 'message') or 'no message'}); nothing was answered: "
                "send the request again"
            )
        return ""

    def _index(self, event: object) -> int:
        index = attr(event, "index")
        return index if isinstance(index, int) else len(self._blocks)

    def _delta(self, event: object) -> str:
        block = self._blocks.get(self._index(event))
        delta = attr(event, "delta")
        delta_kind = attr(delta, "type")
        if block is None:
            return ""
        if delta_kind == "text_delta":
            text = text_of(delta, "text", where=self._where, default="")
            block[1] += text
            return text
        if delta_kind == "input_json_delta":
            block[1] += text_of(delta, "partial_json", where=self._where, default="")
        return ""

    def finish(self) -> Completion:
        if not self._done:
            raise VeridicError(
                f"{self._where}: the stream ended before message_stop; the answer is "
                "incomplete: send the request again"
            )
        text: list[str] = []
        calls: list[ToolCall] = []
        for _, (kind, body, call_id, name) in sorted(self._blocks.items()):
            if kind == "text":
                text.append(body)
            elif kind == "tool_use":
                calls.append(ToolCall(call_id, name, _canonical(body or "{}")))
        return Completion("".join(text), tuple(calls), self._stop, self._id, self._model)


def _canonical(arguments: str) -> str:
    """The same JSON text for the same arguments, streamed or not (as :func:`arguments_json`)."""
    try:
        decoded: object = json.loads(arguments)
    except ValueError:
        return arguments
    return arguments_json(decoded)
