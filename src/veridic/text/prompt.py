"""``Prompt``: the immutable result of composing, and its provider formats.

A prompt is a tuple of messages, each holding its exact text and the spans
that say where every character came from. It renders the same bytes every
time (no nonces, no timestamps), so its ``sha256`` can key a provider's prompt
cache and an audit record alike.

An assistant turn may also carry the model's :class:`ReasoningItem` s (Anthropic
thinking blocks, OpenAI reasoning items): model output going back to the model
that wrote it, byte for byte. They are data, never an instruction; they are
covered by ``sha256`` and have no provenance spans (they are not message
text). Each goes back only to its own provider's API: rendering a prompt for
an API that cannot take one of its items raises, see :func:`check_reasoning`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Final, Literal, cast

from typing_extensions import deprecated

from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.text.provenance import Kind, Span, concat_spans
from veridic.text.wire import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicReasoningBlock,
    AnthropicRequest,
    AnthropicToolResultBlock,
    OpenAIMessage,
    OpenAIToolCall,
    ReasoningBlock,
)

__all__ = [
    "Message",
    "Prompt",
    "PromptSpan",
    "PromptSpans",
    "ReasoningItem",
    "ReasoningKind",
    "ReasoningProvider",
    "Role",
    "ToolCall",
    "check_reasoning",
]

Role = Literal["system", "user", "assistant", "tool"]
ReasoningProvider = Literal["anthropic", "openai"]
ReasoningKind = Literal["thinking", "redacted_thinking", "reasoning"]

_REASONING_FIELDS: Final[dict[str, dict[str, tuple[tuple[str, type], ...]]]] = {
    "anthropic": {
        "thinking": (("thinking", str), ("signature", str)),
        "redacted_thinking": (("data", str),),
    },
    "openai": {"reasoning": (("id", str), ("summary", list))},
}
"""provider -> block type -> the keys (and their JSON types) a block of that type must have."""

_REASONING_HOME: Final[dict[str, str]] = {
    "anthropic": "the Anthropic Messages API (AnthropicMessages)",
    "openai": "the OpenAI Responses API (OpenAIResponses)",
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made, with its arguments as canonical JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, repr=False)
class ReasoningItem:
    """One reasoning item of a model's answer, exactly as the provider's API returned it.

    Reasoning models return their reasoning as opaque blocks: Anthropic
    ``thinking`` blocks (the text and a ``signature``) and ``redacted_thinking``
    blocks (encrypted ``data``), OpenAI Responses ``reasoning`` items (``id``,
    ``summary``, and ``encrypted_content`` when the request set
    ``include=["reasoning.encrypted_content"]``). The provider wants them back,
    unchanged, on the assistant turn that produced them: with Anthropic
    extended thinking and tool use, the next request is refused without them;
    an OpenAI reasoning model keeps its reasoning across tool calls only when
    they come back. :attr:`veridic.Reply.reasoning` holds them and
    :meth:`veridic.Reply.record` puts them on the recorded turn.

    ``provider`` is the provider whose API produced the block; the block goes
    back to that provider's API only (its signature or encryption binds it to
    the provider, and to the model, that made it). ``json_text`` is the block
    as canonical JSON (keys sorted, no spaces): every key and value as
    returned, nothing parsed away; :meth:`block` gives a fresh dict of it each
    time, so no caller can change an item. Two items of the same block are
    equal and weigh the same in :attr:`Prompt.sha256`.

    Build one with :meth:`of` from the block (a mapping); ``ReasoningItem(provider,
    json_text)`` restores one the application stored (``item.json_text``).
    Either way it is the model's own output: restore items only from your own
    records of what the model returned.

    >>> item = ReasoningItem.of(
    ...     "anthropic", {"type": "thinking", "thinking": "Check Oslo first.", "signature": "EqQB"}
    ... )
    >>> item
    ReasoningItem('anthropic', thinking, 69 chars)
    >>> item.block()["signature"]
    'EqQB'
    >>> item == ReasoningItem("anthropic", item.json_text)
    True

    Raises:
        VeridicError: the provider is not ``"anthropic"`` or ``"openai"``, the
            block is not JSON, is not a reasoning block of that provider, or
            lacks a key the provider always sends.
    """

    provider: ReasoningProvider
    json_text: str

    def __post_init__(self) -> None:
        where = f"ReasoningItem({self.provider!r}, ...)"
        kinds = _REASONING_FIELDS.get(self.provider) if isinstance(self.provider, str) else None
        if kinds is None:
            raise VeridicError(
                f"{where}: {self.provider!r} is not a provider of reasoning items; pass "
                "'anthropic' or 'openai', the provider whose API returned the block"
            )
        if not isinstance(self.json_text, str):
            raise VeridicError(
                f"{where} got a {type(self.json_text).__name__} as json_text: pass the JSON "
                "text of a stored item (item.json_text), or build one with "
                "ReasoningItem.of(provider, block)"
            )
        try:
            block: object = json.loads(self.json_text)
        except ValueError as error:
            raise VeridicError(
                f"{where}: json_text {clip(self.json_text)} is not JSON ({error}): pass the "
                "json_text of a stored item unchanged, or build one with "
                "ReasoningItem.of(provider, block)"
            ) from error
        kind = block.get("type") if isinstance(block, dict) else None
        fields = kinds.get(kind) if isinstance(kind, str) else None
        if not isinstance(block, dict) or fields is None:
            found = f"a block of type {kind!r}" if isinstance(block, dict) else "no JSON object"
            raise VeridicError(
                f"{where} got {found} ({clip(self.json_text)}); {self.provider} reasoning "
                f"blocks are of type {' or '.join(map(repr, kinds))}: pass a reasoning block "
                "of the reply (Reply.reasoning), not another content block"
            )
        for name, expected in fields:
            if not isinstance(block.get(name), expected):
                raise VeridicError(
                    f"{where}: the {kind!r} block {clip(self.json_text)} has no "
                    f"{expected.__name__} at {name!r}, which {self.provider} always sends: "
                    "pass the block exactly as the provider returned it"
                )
        object.__setattr__(self, "json_text", _canonical_json(block))

    def __repr__(self) -> str:
        # The block may be long (encrypted content) and is the model's private
        # reasoning: a repr in a log shows what it is, not what it says.
        return f"ReasoningItem({self.provider!r}, {self.kind}, {len(self.json_text)} chars)"

    @classmethod
    def of(cls, provider: ReasoningProvider, block: Mapping[str, object]) -> ReasoningItem:
        """The item of ``block``, a reasoning block as ``provider``'s API returned it.

        Raises:
            VeridicError: as the class says, or a value in ``block`` is not
                JSON (a set, a non-finite number, a key that is not text).
        """
        where = f"ReasoningItem.of({provider!r}, ...)"
        if not isinstance(block, Mapping):
            raise VeridicError(
                f"{where} got a {type(block).__name__}: pass the block as a mapping, "
                "exactly as the provider returned it"
            )
        _require_json(block, where, "the block")
        return cls(provider, _canonical_json(block))

    @property
    def kind(self) -> ReasoningKind:
        """The block's ``type``: ``"thinking"``, ``"redacted_thinking"`` or ``"reasoning"``."""
        return self.block()["type"]

    def block(self) -> ReasoningBlock:
        """A fresh copy of the block, to send back to the provider that produced it."""
        block: ReasoningBlock = json.loads(self.json_text)
        return block


def _canonical_json(value: object) -> str:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


_HASH_HEADER: Final = b"veridic.prompt/2\0"
_SLICE: Final = 1 << 20
"""Code points encoded at a time: a 10 MB text is never copied into one 10 MB ``bytes``."""


def _digest(pieces: list[str]) -> str:
    """SHA-256 of ``len:text`` per piece: short pieces encoded together, long ones in slices."""
    state = hashlib.sha256(_HASH_HEADER)
    batch: list[str] = []
    size = 0
    for text in pieces:
        if len(text) > _SLICE:
            if batch:
                state.update("".join(batch).encode("utf-8", "surrogatepass"))
                batch, size = [], 0
            state.update(f"{len(text)}:".encode("ascii"))
            for start in range(0, len(text), _SLICE):
                state.update(text[start : start + _SLICE].encode("utf-8", "surrogatepass"))
            continue
        batch += (f"{len(text)}:", text)
        size += len(text)
        if size > _SLICE:
            state.update("".join(batch).encode("utf-8", "surrogatepass"))
            batch, size = [], 0
    if batch:
        state.update("".join(batch).encode("utf-8", "surrogatepass"))
    return state.hexdigest()


def _require_json(value: object, where: str, path: str) -> None:
    """Refuse what JSON would change or reject: it could not go back as the provider sent it."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise VeridicError(
                f"{where}: {path} is {value!r}, which JSON cannot hold: pass the block "
                "exactly as the provider returned it (JSON values only)"
            )
        return
    if isinstance(value, list | tuple):
        for index, element in enumerate(value):
            _require_json(element, where, f"{path}[{index}]")
        return
    if isinstance(value, Mapping):
        for key, element in value.items():
            if not isinstance(key, str):
                raise VeridicError(
                    f"{where}: {path} has the key {key!r}, a {type(key).__name__}; JSON keys "
                    "are text: pass the block exactly as the provider returned it"
                )
            _require_json(element, where, f"{path}[{key!r}]")
        return
    raise VeridicError(
        f"{where}: {path} is a {type(value).__name__}, not a JSON value: pass the block "
        "exactly as the provider returned it (JSON values only)"
    )


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


class PromptSpans(tuple[PromptSpan, ...]):
    """:attr:`Prompt.spans`: a tuple of :class:`PromptSpan`, in message order.

    Callable only so that ``prompt.spans()`` (0.1, when it was a method) keeps
    working, with a ``DeprecationWarning``.
    """

    __slots__ = ()

    @deprecated("Prompt.spans is a property since 0.2: write prompt.spans, without the call")
    def __call__(self) -> PromptSpans:
        return self


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
        """Hex SHA-256 of a canonical encoding of roles, texts, tool calls and reasoning items.

        Provenance is not hashed: two prompts the model reads identically hash
        identically, whoever wrote them. The encoding (version 2) is fed to
        SHA-256 piece by piece, each text as its length in code points, a
        colon and its UTF-8 bytes (lone surrogates as ``surrogatepass``
        writes them), so hashing costs about what hashing the texts' bytes
        costs, and long texts are encoded in slices rather than copied whole::

            veridic.prompt/2 NUL, then per message: role, content, the number of
            tool calls, each call's id, name and arguments, the tool call id
            (empty without one), the number of reasoning items, each item's
            provider and canonical JSON, and for a tool result that reports a
            failure the piece ``tool-error`` (no role is spelled so: unambiguous,
            and the hash of every other prompt is what it was)

        ``tests/test_reasoning.py`` pins it.
        """
        pieces: list[str] = []
        for m in self.messages:
            pieces += (m.role, m.content, str(len(m.tool_calls)))
            for call in m.tool_calls:
                pieces += (call.id, call.name, call.arguments)
            pieces += (m.tool_call_id or "", str(len(m.reasoning)))
            for item in m.reasoning:
                pieces += (item.provider, item.json_text)
            if m.tool_error:
                pieces.append("tool-error")
        return _digest(pieces)

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls no later tool result answers; providers reject a prompt with any."""
        answered = {m.tool_call_id for m in self.messages if m.tool_call_id is not None}
        return tuple(
            call for m in self.messages for call in m.tool_calls if call.id not in answered
        )

    @property
    def spans(self) -> PromptSpans:
        """Every character range of every message with where it came from (a tuple).

        A property, as :attr:`Message.spans` and ``provenance(text).spans`` are:
        veridic's attributes are what an object holds or is, worked out on
        request when that is cheap; methods take arguments. ``prompt.spans()``,
        the spelling of 0.1, still works and warns.
        """
        return PromptSpans(
            PromptSpan(index, message.role, span.start, span.end, span.kind, span.origin)
            for index, message in enumerate(self.messages)
            for span in message.spans
        )

    @property
    def reasoning(self) -> tuple[ReasoningItem, ...]:
        """Every reasoning item of every assistant turn, in order."""
        return tuple(item for m in self.messages for item in m.reasoning)

    def without_reasoning(self, provider: ReasoningProvider | None = None) -> Prompt:
        """This prompt with the reasoning items of ``provider`` (of all, when ``None``) left out.

        The way to drop reasoning knowingly: an API refuses another provider's
        items (see :func:`check_reasoning`), so a conversation that moves to
        another provider leaves them out here. The result hashes differently,
        as it should: the model reads less.

        >>> from veridic import Composer
        >>> item = ReasoningItem.of("openai", {"type": "reasoning", "id": "rs_1", "summary": []})
        >>> prompt = Composer().user("Hi").assistant("Hello.", reasoning=[item]).build()
        >>> prompt.without_reasoning("openai").reasoning
        ()
        >>> prompt.without_reasoning("anthropic") == prompt
        True
        """
        return Prompt(
            tuple(
                replace(
                    m,
                    reasoning=tuple(
                        i for i in m.reasoning if provider is not None and i.provider != provider
                    ),
                )
                if m.reasoning
                else m
                for m in self.messages
            )
        )

    def to_openai(self) -> list[OpenAIMessage]:
        """Chat-completions ``messages``.

        Raises:
            VeridicError: the prompt holds reasoning items, which Chat
                Completions cannot carry (see :func:`check_reasoning`).
        """
        check_reasoning(self, None, "the OpenAI Chat Completions API (to_openai)")
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

        An assistant message's thinking blocks come first in its content,
        before its text and ``tool_use`` blocks, as the API requires, each
        exactly as the model returned it.

        Raises:
            VeridicError: the conversation is empty or does not start with a
                user turn, which the Messages API rejects; or the prompt holds
                OpenAI reasoning items (see :func:`check_reasoning`).
        """
        check_reasoning(self, "anthropic", "the Anthropic Messages API (to_anthropic)")
        turns: list[tuple[Literal["user", "assistant"], list[AnthropicBlock], list[AnthropicBlock]]]
        turns = []
        for message in self.messages:
            if message.role == "system":
                continue
            role: Literal["user", "assistant"] = (
                "assistant" if message.role == "assistant" else "user"
            )
            thinking: list[AnthropicBlock] = [_anthropic_block(i) for i in message.reasoning]
            blocks = _anthropic_blocks(message)
            if not blocks and not thinking:
                # An empty assistant turn carries nothing, and the Messages API
                # rejects an empty content list: there is nothing to send.
                continue
            if turns and turns[-1][0] == role:
                turns[-1][1].extend(thinking)
                turns[-1][2].extend(blocks)
            else:
                turns.append((role, thinking, blocks))
        messages: list[AnthropicMessage] = [
            {"role": role, "content": [*thinking, *blocks]} for role, thinking, blocks in turns
        ]
        if not messages or messages[0]["role"] != "user":
            raise VeridicError(
                "the Anthropic Messages API needs a conversation that starts with a user turn, "
                f"this prompt has {len(messages)} turn(s) starting with "
                f"{messages[0]['role'] if messages else 'nothing'}: add Composer.user() or "
                "Composer.data() before the first assistant turn"
            )
        return {"system": self.system, "messages": messages}


def check_reasoning(prompt: Prompt, carries: ReasoningProvider | None, api: str) -> None:
    """Refuse to render ``prompt`` for ``api`` when it holds reasoning items ``api`` cannot take.

    The cross-provider rule: a reasoning item goes back only to the API of
    the provider that produced it (Anthropic items to the Messages API,
    OpenAI items to the Responses API; Chat Completions, ``carries=None``,
    takes none). Another API would reject the block, and leaving it out
    quietly would send less than the prompt's hash describes, so rendering
    raises instead; :meth:`Prompt.without_reasoning` drops items knowingly.

    Raises:
        VeridicError: naming the first item ``api`` cannot take, its message
            and the prompt.
    """
    for index, message in enumerate(prompt.messages):
        for item in message.reasoning:
            if item.provider != carries:
                raise VeridicError(
                    f"prompt {prompt.sha256[:12]} holds {item.provider} reasoning ({item.kind} "
                    f"in message {index}), which {api} cannot take: a reasoning item goes back "
                    f"only to {_REASONING_HOME[item.provider]}, bound to the provider and "
                    "model that produced it; send the prompt there, or leave the items out "
                    f"knowingly with prompt.without_reasoning({item.provider!r})"
                )


def _anthropic_block(item: ReasoningItem) -> AnthropicReasoningBlock:
    # check_reasoning() let only Anthropic items through: their blocks are thinking blocks.
    return cast(AnthropicReasoningBlock, item.block())


def _openai_call(call: ToolCall) -> OpenAIToolCall:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _anthropic_blocks(message: Message) -> list[AnthropicBlock]:
    if message.role == "tool":
        result: AnthropicToolResultBlock = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.tool_error:
            result["is_error"] = True
        return [result]
    blocks: list[AnthropicBlock] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        arguments = cast(dict[str, object], json.loads(call.arguments))
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks
