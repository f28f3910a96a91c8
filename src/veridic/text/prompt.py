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

Parts of a prompt have modules of their own, whose names import from here
too: :mod:`veridic.text.message` (a message and its parts) and
:mod:`veridic.text.reasoning` (the reasoning items).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Final, Literal, Protocol, cast, get_args

from typing_extensions import deprecated

from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.text.message import Message, PromptSpan, Role, ToolCall
from veridic.text.provenance import Kind
from veridic.text.provenance_map import Specs, render
from veridic.text.reasoning import ReasoningItem, ReasoningKind, ReasoningProvider
from veridic.text.wire import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicReasoningBlock,
    AnthropicRequest,
    AnthropicToolResultBlock,
    OpenAIMessage,
    OpenAIToolCall,
)

__all__ = [
    "DocumentMessage",
    "DocumentReasoning",
    "Message",
    "Prompt",
    "PromptDocument",
    "PromptSpan",
    "PromptSpans",
    "ReasoningItem",
    "ReasoningKind",
    "ReasoningProvider",
    "Role",
    "ToolCall",
    "check_reasoning",
]


_REASONING_HOME: Final[dict[str, str]] = {
    "anthropic": "the Anthropic Messages API (AnthropicMessages)",
    "openai": "the OpenAI Responses API (OpenAIResponses)",
}


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

    def to_html(self, *, tools: Specs | None = None) -> str:
        """This prompt's provenance map: a self-contained HTML page (no script, no network).

        Every message as the model reads it, each span coloured by its kind with its
        origin on hover and in a side list, data blocks with their fence lines,
        label and mode, and the prompt's ``sha256``. ``tools`` (the
        :class:`~veridic.ToolView` the prompt was built with, or the specs it sent)
        links the capability section's tools to their specs; without it the section
        is shown as text. The same prompt gives the same bytes. The page escapes all
        of the prompt's text and forbids scripts with a Content-Security-Policy;
        :mod:`veridic.text.provenance_map` says what it guarantees.

        Raises:
            VeridicError: a spec in ``tools`` has no name.
        """
        return render(self, tools=tools)

    def _repr_html_(self) -> str:
        """The provenance map for a notebook cell: :meth:`to_html`'s body, without specs."""
        return render(self, document=False)

    def to_document(self) -> str:
        """This prompt as a display document: JSON text a reviewer can open later.

        The document (``"format": "veridic-prompt/1"``) holds what the
        provenance map and the terminal view show: every message (role, text,
        tool calls, tool call id, reasoning items, whether a tool result reports
        an error), every span of :attr:`spans` (message, role, start, end, kind,
        origin) and :attr:`sha256`. Save it where the application keeps its
        evidence; ``veridic show FILE.json`` prints it, or writes its map.

        Reading it back (:meth:`PromptDocument.from_json`) never gives a
        :class:`Prompt`: trust does not survive storage, so what comes back is
        a display-only :class:`PromptDocument` whose texts are plain ``str``
        (no brand, no instruction) and whose spans say what the file says.
        The text is checked against the ``sha256``; the spans cannot be
        (provenance is not hashed), so a document shows provenance as it was
        recorded, no more. The JSON is ASCII (every other character as a
        ``\\u`` escape), so printing the file cannot drive a terminal.

        >>> from veridic import Composer, instruction
        >>> prompt = Composer().system(instruction("Be brief.")).user("Hi").build()
        >>> document = PromptDocument.from_json(prompt.to_document())
        >>> document.sha256 == prompt.sha256, document.to_html() == prompt.to_html()
        (True, True)

        Raises:
            VeridicError: a text holds a lone high surrogate directly before a
                lone low one, which JSON would read back as one character (the
                text could not come back as it is).
        """
        return _document_json(self.sha256, self.messages, self.spans)

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


# --- the display document ----------------------------------------------------------------

DOCUMENT_FORMAT: Final = "veridic-prompt/1"
"""The ``format`` of :meth:`Prompt.to_document`'s JSON (hashes as ``Prompt.sha256`` version 2)."""

_ROLES: Final[tuple[Role, ...]] = get_args(Role)
_KIND_NAMES: Final[tuple[Kind, ...]] = get_args(Kind)
_PROVIDERS: Final[tuple[ReasoningProvider, ...]] = get_args(ReasoningProvider)
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_PAIRED_SURROGATES: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_TO_DOCUMENT: Final = "write the document with prompt.to_document() and pass its text unchanged"


@dataclass(frozen=True, slots=True)
class DocumentReasoning:
    """A reasoning item as a document recorded it: its provider and JSON, for display only.

    Not a :class:`ReasoningItem`: nothing read from a document goes back to a model.
    """

    provider: ReasoningProvider
    json_text: str


@dataclass(frozen=True, slots=True)
class DocumentMessage:
    """One message of a :class:`PromptDocument`: what the model read, as plain text.

    The fields are those of :class:`Message` the map and the terminal view
    show; ``content`` is a plain ``str``, so no composer takes it as an
    instruction.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: tuple[DocumentReasoning, ...] = ()
    tool_error: bool = False


@dataclass(frozen=True, slots=True)
class PromptDocument:
    """A prompt read back from :meth:`Prompt.to_document`'s JSON: for display, never for sending.

    Trust never survives storage (see :mod:`veridic.text.conversation`): a
    document is text anyone with write access to the file could have
    changed, so it holds plain text and recorded spans, not branded parts,
    and nothing in veridic takes it as a prompt. It has what
    :func:`veridic.text.provenance_map.render` and
    :func:`veridic.text.terminal_view.render_terminal` read: :meth:`to_html`
    gives the same page the prompt gave.

    Every document is valid: the spans lie inside their message, in order,
    without overlap, with the message's role; and the ``sha256`` is the hash
    of the messages, recomputed. A document whose text does not match its
    ``sha256`` is refused, not flagged: the hash is what ties a document to
    the audit store's records, and a map that shows one text under another
    text's hash would mislead the reviewer who matches them. The spans are
    not covered by the hash (provenance is not hashed, see
    :attr:`Prompt.sha256`): a document shows the provenance as recorded.

    Raises:
        VeridicError: the spans or the hash do not fit the messages (the
            message names the span or the hashes).
    """

    messages: tuple[DocumentMessage, ...]
    spans: tuple[PromptSpan, ...]
    sha256: str

    def __post_init__(self) -> None:
        previous: PromptSpan | None = None
        for index, span in enumerate(self.spans):
            where = (
                f"PromptDocument: spans[{index}] (message {span.message}, {span.start}-{span.end})"
            )
            if not 0 <= span.message < len(self.messages):
                raise VeridicError(
                    f"{where} names message {span.message}, and the document has "
                    f"{len(self.messages)}: {_TO_DOCUMENT}"
                )
            message = self.messages[span.message]
            if span.role != message.role:
                raise VeridicError(
                    f"{where} has role {span.role!r}, and message {span.message} is a "
                    f"{message.role} message: {_TO_DOCUMENT}"
                )
            if not 0 <= span.start <= span.end <= len(message.content):
                raise VeridicError(
                    f"{where} lies outside the message's {len(message.content)} characters "
                    f"(a span is 0 <= start <= end <= length): {_TO_DOCUMENT}"
                )
            if previous is not None and (
                span.message < previous.message
                or (span.message == previous.message and span.start < previous.end)
            ):
                raise VeridicError(
                    f"{where} overlaps or precedes the span before it (message "
                    f"{previous.message}, {previous.start}-{previous.end}); spans come in "
                    f"message order, each after the last: {_TO_DOCUMENT}"
                )
            previous = span
        found = _digest(_pieces(self.messages))
        if found != self.sha256:
            raise VeridicError(
                f"PromptDocument: the messages hash to {found}, and the document says "
                f"{clip(self.sha256, 64)}: the text was changed after it was written (or the "
                f"document was written by another version); the document is refused, not "
                f"shown, since its hash is what ties it to the audit records: {_TO_DOCUMENT}"
            )

    @classmethod
    def from_json(cls, text: str | bytes) -> PromptDocument:
        """Read a document :meth:`Prompt.to_document` wrote, strictly.

        Every key is required and nothing else is allowed: an unknown key, a
        missing one or a value of the wrong JSON type is refused whole, named
        by its place (``messages[2].tool_calls[0].name``), and so are spans
        that do not fit their message and a text that does not match the
        ``sha256``. Nothing is skipped quietly.

        Raises:
            VeridicError: the text is not such a document (the message says
                where and what was found).
        """
        try:
            document: object = json.loads(text)
        except ValueError as error:
            shown = clip(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
            raise VeridicError(
                f"PromptDocument.from_json() got {shown}, which is not JSON ({error}): "
                f"{_TO_DOCUMENT}"
            ) from error
        where = "PromptDocument.from_json()"
        fields = _fields(document, where, "the document", _DOCUMENT_KEYS)
        if fields["format"] != DOCUMENT_FORMAT:
            raise VeridicError(
                f"{where}: the document's format is {clip(str(fields['format']))}, not "
                f"{DOCUMENT_FORMAT!r}: {_TO_DOCUMENT}"
            )
        sha256 = cast(str, fields["sha256"])
        if not _HEX64.fullmatch(sha256):
            raise VeridicError(
                f"{where}: 'sha256' is {clip(sha256)}, not 64 lowercase hex digits "
                f"(Prompt.sha256): {_TO_DOCUMENT}"
            )
        messages = tuple(
            _read_message(where, index, item)
            for index, item in enumerate(cast(list[object], fields["messages"]))
        )
        spans = tuple(
            _read_span(where, index, item)
            for index, item in enumerate(cast(list[object], fields["spans"]))
        )
        return cls(messages, spans, sha256)

    def to_json(self) -> str:
        """The JSON :meth:`Prompt.to_document` wrote: the same text for the same prompt."""
        return _document_json(self.sha256, self.messages, self.spans)

    def to_html(self, *, tools: Specs | None = None) -> str:
        """The provenance map of the document: the page :meth:`Prompt.to_html` gave.

        Raises:
            VeridicError: a spec in ``tools`` has no name.
        """
        return render(self, tools=tools)

    def _repr_html_(self) -> str:
        return render(self, document=False)


class _Hashed(Protocol):
    """What :attr:`Prompt.sha256` reads of a message (a :class:`Message` or a document's)."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_calls(self) -> tuple[ToolCall, ...]: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def reasoning(self) -> tuple[ReasoningItem, ...] | tuple[DocumentReasoning, ...]: ...
    @property
    def tool_error(self) -> bool: ...


def _pieces(messages: Sequence[_Hashed]) -> list[str]:
    """The pieces :attr:`Prompt.sha256` hashes (its docstring gives the encoding)."""
    pieces: list[str] = []
    for m in messages:
        pieces += (m.role, m.content, str(len(m.tool_calls)))
        for call in m.tool_calls:
            pieces += (call.id, call.name, call.arguments)
        pieces += (m.tool_call_id or "", str(len(m.reasoning)))
        for item in m.reasoning:
            pieces += (item.provider, item.json_text)
        if m.tool_error:
            pieces.append("tool-error")
    return pieces


def _document_json(sha256: str, messages: Sequence[_Hashed], spans: Sequence[PromptSpan]) -> str:
    document = {
        "format": DOCUMENT_FORMAT,
        "sha256": sha256,
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
                ],
                "tool_call_id": m.tool_call_id,
                "reasoning": [{"provider": i.provider, "json": i.json_text} for i in m.reasoning],
                "tool_error": m.tool_error,
            }
            for m in messages
        ],
        "spans": [
            {
                "message": s.message,
                "role": s.role,
                "start": s.start,
                "end": s.end,
                "kind": s.kind,
                "origin": s.origin,
            }
            for s in spans
        ],
    }
    for index, m in enumerate(messages):
        texts = [
            m.content,
            *(c.arguments for c in m.tool_calls),
            *(i.json_text for i in m.reasoning),
        ]
        if any(_PAIRED_SURROGATES.search(t) for t in texts):
            raise VeridicError(
                f"prompt {sha256[:12]}: message {index} holds a lone high surrogate directly "
                "before a lone low one, which JSON reads back as one character, so the "
                "document could not give the text back as it is; such text cannot be sent "
                "as UTF-8 either: find where it came from and decode it properly"
            )
    # ASCII only: printed, the JSON cannot carry a control sequence to a terminal.
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


_DOCUMENT_KEYS: Final[dict[str, type]] = {
    "format": str,
    "sha256": str,
    "messages": list,
    "spans": list,
}
_MESSAGE_KEYS: Final[dict[str, type | tuple[type, ...]]] = {
    "role": str,
    "content": str,
    "tool_calls": list,
    "tool_call_id": (str, type(None)),
    "reasoning": list,
    "tool_error": bool,
}
_CALL_KEYS: Final[dict[str, type]] = {"id": str, "name": str, "arguments": str}
_REASONING_KEYS: Final[dict[str, type]] = {"provider": str, "json": str}
_SPAN_KEYS: Final[dict[str, type]] = {
    "message": int,
    "role": str,
    "start": int,
    "end": int,
    "kind": str,
    "origin": str,
}


def _fields(
    value: object, where: str, place: str, keys: Mapping[str, type | tuple[type, ...]]
) -> dict[str, object]:
    """``value`` as an object with exactly ``keys``, each of its JSON type (bool is no int)."""
    if not isinstance(value, dict):
        raise VeridicError(
            f"{where}: {place} is {_json_type(value)}, not an object: {_TO_DOCUMENT}"
        )
    missing = [key for key in keys if key not in value]
    unknown = sorted(map(str, set(value) - set(keys)))
    if missing or unknown:
        raise VeridicError(
            f"{where}: {place} must hold exactly the keys {', '.join(keys)} (missing "
            f"{missing or 'none'}, unknown {unknown or 'none'}); nothing in a document is "
            f"ignored: {_TO_DOCUMENT}"
        )
    for key, expected in keys.items():
        allowed = expected if isinstance(expected, tuple) else (expected,)
        if type(value[key]) not in allowed:
            wanted = " or ".join(_JSON_NAMES[t] for t in allowed)
            raise VeridicError(
                f"{where}: {place}.{key} is {_json_type(value[key])}, not {wanted}: {_TO_DOCUMENT}"
            )
    return value


_JSON_NAMES: Final[dict[type, str]] = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
    float: "a number",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_NAMES.get(type(value), f"a {type(value).__name__}")


def _read_message(where: str, index: int, item: object) -> DocumentMessage:
    place = f"messages[{index}]"
    fields = _fields(item, where, place, _MESSAGE_KEYS)
    role = fields["role"]
    if role not in _ROLES:
        raise VeridicError(
            f"{where}: {place}.role is {clip(str(role))}, not a role ({', '.join(_ROLES)}): "
            f"{_TO_DOCUMENT}"
        )
    calls = []
    for number, call in enumerate(cast(list[object], fields["tool_calls"])):
        read = _fields(call, where, f"{place}.tool_calls[{number}]", _CALL_KEYS)
        calls.append(
            ToolCall(cast(str, read["id"]), cast(str, read["name"]), cast(str, read["arguments"]))
        )
    reasoning = []
    for number, entry in enumerate(cast(list[object], fields["reasoning"])):
        read = _fields(entry, where, f"{place}.reasoning[{number}]", _REASONING_KEYS)
        provider = read["provider"]
        if provider not in _PROVIDERS:
            raise VeridicError(
                f"{where}: {place}.reasoning[{number}].provider is {clip(str(provider))}, "
                f"not a provider of reasoning items ({', '.join(_PROVIDERS)}): {_TO_DOCUMENT}"
            )
        reasoning.append(DocumentReasoning(provider, cast(str, read["json"])))
    return DocumentMessage(
        role,
        cast(str, fields["content"]),
        tuple(calls),
        cast("str | None", fields["tool_call_id"]),
        tuple(reasoning),
        cast(bool, fields["tool_error"]),
    )


def _read_span(where: str, index: int, item: object) -> PromptSpan:
    place = f"spans[{index}]"
    fields = _fields(item, where, place, _SPAN_KEYS)
    role, kind = fields["role"], fields["kind"]
    if role not in _ROLES:
        raise VeridicError(
            f"{where}: {place}.role is {clip(str(role))}, not a role ({', '.join(_ROLES)}): "
            f"{_TO_DOCUMENT}"
        )
    if kind not in _KIND_NAMES:
        raise VeridicError(
            f"{where}: {place}.kind is {clip(str(kind))}, not a provenance kind "
            f"({', '.join(_KIND_NAMES)}): {_TO_DOCUMENT}"
        )
    return PromptSpan(
        cast(int, fields["message"]),
        role,
        cast(int, fields["start"]),
        cast(int, fields["end"]),
        kind,
        cast(str, fields["origin"]),
    )
