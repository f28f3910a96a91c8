"""Adapter for the ``anthropic`` SDK: the Messages API (``pip install 'veridic[anthropic]'``).

:class:`AnthropicMessages` sends ``Prompt.to_anthropic()`` (its ``system``
text, left out when empty, and its ``messages``) with
``view.tool_specs("anthropic")`` as ``tools``; an answer sent whole is read from
its own JSON text (``messages.with_raw_response.create``), so a key given twice
in a call's input is not lost as the SDK's ``Message`` loses it. It takes the SDK's client,
sync (``anthropic.Anthropic``) or async (``anthropic.AsyncAnthropic``);
without one, a sync ``anthropic.Anthropic()`` is built (reading
``ANTHROPIC_API_KEY`` as the SDK does).

With extended thinking (``options={"thinking": {...}}``), the answer's
``thinking`` and ``redacted_thinking`` blocks come back as the reply's
:class:`~veridic.ReasoningItem` s, exactly as sent (a stream's
``thinking_delta`` events joined, the ``signature_delta`` event's signature
set, as the SDK's own accumulator does);
recorded on the assistant turn, they go back first in that turn's content,
which the API requires when the model used tools while thinking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final, Protocol

from veridic import _json_object
from veridic._counted import counted
from veridic._extras import require
from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.providers._base import (
    Adapter,
    Completion,
    Usage,
    _count,
    arguments_json,
    attr,
    found_in,
    given_options,
    items,
    plain_block,
    reasoning_item,
    refuse_error,
    refuse_lost_calls,
    refuse_no_answer,
    server_said,
    text_of,
    usage_of,
)
from veridic.providers._raw import raw_answer, raw_arguments, raw_create
from veridic.text.prompt import Prompt, ReasoningItem, ToolCall
from veridic.tools.tool import JsonObject

__all__ = ["AnthropicClient", "AnthropicMessages"]


class AnthropicClient(Protocol):
    """What :class:`AnthropicMessages` needs of ``anthropic.Anthropic`` or ``AsyncAnthropic``.

    A protocol, not the SDK's classes: a type checker then never loads the
    SDK for a project that imports veridic. The client is checked when the
    adapter is built.
    """

    @property
    def messages(self) -> object: ...


_EXTRA: Final = "anthropic"
_CALLED: Final = frozenset({"tool_use"})
"""The stop reason of an answer that stopped to call tools."""
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})
_DELTA_INTO: Final[Mapping[str, frozenset[str]]] = {
    "text_delta": frozenset({"text"}),
    "citations_delta": frozenset({"text"}),
    "input_json_delta": frozenset({"tool_use", "server_tool_use", "mcp_tool_use"}),
    "thinking_delta": frozenset({"thinking"}),
    "signature_delta": frozenset({"thinking"}),
}
"""The blocks each kind of delta the API sends may go into; a delta of another kind is
refused (:meth:`_MessagesAssembler._check_delta`)."""


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
    owned = frozenset({"system", "messages", "tools", "mcp_servers"})
    """What the gateway sets, and ``mcp_servers``: the API would call those servers' tools
    itself, outside the view (no pin, guard, approval or record)."""
    server_edits = MappingProxyType(
        {
            "context_management": "the server clears earlier tool results and thinking "
            "from what the model reads",
            "thread": "the server holds the conversation and resumes it, so the model reads "
            "the turns of an earlier request before the prompt (a thread it creates is "
            "there only for a later request to resume)",
            "container": "the server loads a code-execution container for the model: the "
            "names and descriptions of its skills are put before the model beside the "
            "system prompt, and a container id reuses files earlier requests left there, "
            "which the server's own tools read outside the view",
            "compaction": "the server summarises the conversation in text it writes itself, "
            "which later requests send in place of the turns it summarises",
        }
    )

    __slots__ = ()

    def __init__(
        self,
        client: AnthropicClient | None = None,
        *,
        model: str,
        max_tokens: int,
        options: Mapping[str, object] | None = None,
    ) -> None:
        sdk = require("anthropic", _EXTRA, "AnthropicMessages")
        if type(max_tokens) is not int or max_tokens < 1:
            raise VeridicError(
                f"AnthropicMessages() got max_tokens={max_tokens!r}; the Messages API needs "
                "a positive number of output tokens: pass e.g. max_tokens=1024"
            )
        made: object = sdk.Anthropic() if client is None else client
        given = given_options("AnthropicMessages", options, "options")
        super().__init__(made, model, {"max_tokens": max_tokens, **given})

    def method(self) -> Callable[..., object]:
        method = attr(self.client, "messages", "create")
        if not callable(method):
            raise VeridicError(
                f"AnthropicMessages got {a_type(self.client)}, which has no "
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

    def sender(self) -> Callable[..., object]:
        """``messages.with_raw_response.create``, whose answer :meth:`parse` reads as the API
        wrote it (``messages.create`` for a client without it), bound to the ``create`` the
        client has now, so a patch of it sees the request."""
        raw = raw_create(attr(self.client, "messages"))
        return raw if raw is not None else self.method()

    def parse(self, response: object) -> Completion:
        """Read an answer: the SDK's ``Message``, or the raw answer :meth:`sender` gives.

        The raw answer is read from its own JSON text: the SDK reads it with
        ``json.loads``, which keeps the last value of a key given twice, so a call's
        ``{"city": "Oslo", "city": "Bergen"}`` ran for Bergen with nothing said, where
        the same call streamed reaches the dispatcher as written and is refused there.
        """
        where = f"{self!r}"
        return self._read(raw_answer(response, where), where)

    def _read(self, response: object, where: str) -> Completion:
        refuse_error(response, where)
        refuse_no_answer(response, "content", where)
        text: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[ReasoningItem] = []
        for block in items(response, "content"):
            kind = attr(block, "type")
            if kind in _THINKING:
                reasoning.append(reasoning_item("anthropic", block, where))
            elif kind == "text":
                _refuse_citations(found_in(block, "citations"), where)
                text.append(text_of(block, "text", where=where))
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        text_of(block, "id", where=where),
                        text_of(block, "name", where=where),
                        raw_arguments(attr(block, "input"), where),
                    )
                )
            else:
                raise _foreign(kind, where)
        completion = Completion(
            text="".join(text),
            tool_calls=tuple(calls),
            stop_reason=text_of(response, "stop_reason", where=where, default=""),
            response_id=text_of(response, "id", where=where, default=""),
            model=text_of(response, "model", where=where, default=self.model),
            reasoning=tuple(reasoning),
            usage=usage_of(response, _READ, _WROTE, where=where, parts=_PARTS),
        )
        refuse_lost_calls(completion, _CALLED, where)
        return completion

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
        self._counts: dict[tuple[str, ...], int] = {}
        """the usage's counts so far: message_start's, each overwritten by message_delta's"""
        self._thinking: dict[int, dict[str, object]] = {}
        """index -> a thinking block as it started, its deltas appended"""
        self._inputs: dict[int, str] = {}
        """index -> the input a tool_use block started with, when not empty (JSON text)"""

    def feed(self, event: object) -> str:
        kind = attr(event, "type")
        if self._done and kind != "ping":
            # The SDK reads on to the end of the connection: a call a proxy appended after
            # the answer ended would run, its stop reason and counts replacing the answer's.
            raise VeridicError(
                f"{self._where}: the stream sent an event of type {clip(str(kind))} after "
                "message_stop, so it is not one answer; nothing of it was run: send the "
                "request again (a proxy between you and the API may be mangling events)"
            )
        if kind == "message_start":
            message = attr(event, "message")
            if items(message, "content"):
                # The API starts with none: blocks come as their own events, and these would
                # be dropped (a call never run, never recorded).
                raise VeridicError(
                    f"{self._where}: the stream's message_start already holds content "
                    f"({counted(len(items(message, 'content')), 'block')}), which the API sends "
                    "only as "
                    "content_block events; read as sent, it would be dropped: nothing of it was "
                    "run: send the request again (a proxy between you and the API may be "
                    "mangling events)"
                )
            self._count(attr(message, "usage"))
            self._id = text_of(event, "message", "id", where=self._where, default="")
            self._model = text_of(event, "message", "model", where=self._where, default=self._model)
        elif kind == "content_block_start":
            block = attr(event, "content_block")
            block_kind = text_of(block, "type", where=self._where)
            index = self._opened(event)
            if block_kind in _THINKING:
                # Checked when the block is complete: a thinking block starts unsigned.
                self._thinking[index] = plain_block("anthropic", block, self._where)
            elif block_kind == "tool_use":
                self._blocks[index] = [
                    block_kind,
                    "",
                    text_of(block, "id", where=self._where),
                    text_of(block, "name", where=self._where),
                ]
                started = attr(block, "input")
                if started is not None and started != {}:
                    self._inputs[index] = arguments_json(started)
            elif block_kind == "text":
                _refuse_citations(found_in(block, "citations"), self._where)
                start = text_of(block, "text", where=self._where, default="")
                self._blocks[index] = [block_kind, start, "", ""]
                return start
            else:
                raise _foreign(block_kind, self._where)
        elif kind == "content_block_delta":
            return self._delta(event)
        elif kind == "message_delta":
            stop = text_of(event, "delta", "stop_reason", where=self._where, default="")
            if self._stop and stop and stop != self._stop:
                # The last would be read: a call cut off at max_tokens would run as whole.
                raise VeridicError(
                    f"{self._where}: the stream's message stopped twice ({clip(self._stop)}, "
                    f"then {clip(stop)}), so it is not one answer; nothing of it was run: send "
                    "the request again (a proxy between you and the API may be mangling events)"
                )
            self._stop = stop or self._stop
            self._count(attr(event, "usage"))
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            said = server_said(attr(event, "error", "message"), "no message")
            raise VeridicError(
                f"{self._where}: the stream reported an error ({said}); nothing was answered: "
                "send the request again"
            )
        return ""

    def _opened(self, event: object) -> int:
        """The index of a block that starts; one that started already is refused: the
        second start would replace the first block, text the user was shown included. So is
        one whose index is below a block started before it: the API starts blocks in the
        order of their index, and the reply is assembled in that order, so the user was
        shown the text in one order and the reply recorded it in another."""
        index = self._index(event)
        started = self._blocks.keys() | self._thinking.keys()
        if index in started:
            raise VeridicError(
                f"{self._where}: the stream started content block {index} twice; the answer "
                "cannot be told apart from what was streamed, so nothing was answered: send "
                "the request again (a proxy between you and the API may be mangling events)"
            )
        if started and index < max(started):
            raise VeridicError(
                f"{self._where}: the stream started content block {index} after block "
                f"{max(started)}; the reply is assembled in the order of the blocks, so it "
                "would hold another answer than the one streamed: nothing was answered: send "
                "the request again (a proxy between you and the API may be mangling events)"
            )
        return index

    def _index(self, event: object) -> int:
        index = attr(event, "index")
        return index if isinstance(index, int) else len(self._blocks) + len(self._thinking)

    def _delta(self, event: object) -> str:
        delta = attr(event, "delta")
        delta_kind = attr(delta, "type")
        index = self._index(event)
        self._check_delta(index, delta_kind)
        thinking = self._thinking.get(index)
        if thinking is not None:
            if delta_kind == "thinking_delta":
                self._refuse_unsigned(index, thinking)
                so_far = thinking.get("thinking")
                piece = text_of(delta, "thinking", where=self._where, default="")
                thinking["thinking"] = (so_far if isinstance(so_far, str) else "") + piece
            elif delta_kind == "signature_delta":
                # The whole signature, in one event just before the block stops
                # (the SDK's own accumulator sets it, too).
                self._refuse_signed_twice(index, thinking)
                thinking["signature"] = text_of(delta, "signature", where=self._where)
            return ""
        block = self._blocks[index]
        if delta_kind == "citations_delta":
            _refuse_citations([attr(delta, "citation")], self._where)
        if delta_kind == "text_delta":
            text = text_of(delta, "text", where=self._where, default="")
            block[1] += text
            return text
        if delta_kind == "input_json_delta":
            block[1] += text_of(delta, "partial_json", where=self._where, default="")
        return ""

    def _refuse_unsigned(self, index: int, thinking: Mapping[str, object]) -> None:
        """Refuse thinking streamed into a block already signed.

        The signature covers the thinking before it: joined to the block, later thinking
        would be sent back unsigned, and the API refuse that turn with an error naming
        neither this stream nor the block. The API signs a block last; a proxy that mangles
        events is the only source.
        """
        if not thinking.get("signature"):
            return
        raise VeridicError(
            f"{self._where}: the stream sent a thinking_delta for content block {index} after "
            "its signature, which covers only the thinking before it: sent back, the block "
            "would be refused by the API, so nothing was answered: send the request again (a "
            "proxy between you and the API may be mangling events)"
        )

    def _refuse_signed_twice(self, index: int, thinking: Mapping[str, object]) -> None:
        """Refuse a second signature for a block already signed.

        The API signs a block once, whole: a second signature replaced the first (a piece
        of one left the block signed with the last piece only), and the block sent back was
        refused by the API with an error naming neither this stream nor the block.
        """
        if not thinking.get("signature"):
            return
        raise VeridicError(
            f"{self._where}: the stream sent a second signature_delta for content block "
            f"{index}, which was signed already; a block has one signature, so which covers "
            "its thinking cannot be told and nothing was answered: send the request again (a "
            "proxy between you and the API may be mangling events)"
        )

    def _check_delta(self, index: int, delta_kind: object) -> None:
        """Refuse a delta for a block that never started, for a block of another kind, or of a
        kind the adapter does not read.

        The user is shown a ``text_delta`` as it arrives, while the reply on record is
        assembled by block: a ``text_delta`` into a ``tool_use`` block was shown as text and
        made part of the tool's arguments, an ``input_json_delta`` into a text block was
        recorded (and sent back to the model) as text nobody was shown, and a delta for a
        block that never started was shown and recorded nowhere. The API sends none of
        these; a proxy that mangles events is the only source. A delta of a kind the
        adapter does not read was dropped, neither shown nor recorded: the text of a kind
        the API adds later would vanish without a word.
        """
        thinking = self._thinking.get(index)
        block = self._blocks.get(index)
        kind = attr(thinking, "type") if thinking is not None else None
        if block is not None:
            kind = block[0]
        if kind is None:
            where = "which never started"
        elif delta_kind not in _DELTA_INTO:
            where = "a kind of delta the adapter does not read (neither shown nor recorded)"
        elif kind not in _DELTA_INTO[str(delta_kind)]:
            where = f"a block of type {clip(str(kind))}"
        else:
            return
        raise VeridicError(
            f"{self._where}: the stream sent a delta of type {clip(str(delta_kind))} for "
            f"content block {index}, {where}; what was shown could not be told apart from "
            "what would be recorded, so nothing was answered: send the request again (a proxy "
            "between you and the API may be mangling events)"
        )

    def finish(self) -> Completion:
        if not self._done:
            raise VeridicError(
                f"{self._where}: the stream ended before message_stop; the answer is "
                "incomplete: send the request again"
            )
        text: list[str] = []
        calls: list[ToolCall] = []
        for index, (kind, body, call_id, name) in sorted(self._blocks.items()):
            if kind == "text":
                text.append(body)
            elif kind == "tool_use":
                calls.append(ToolCall(call_id, name, _canonical(self._input(index, body))))
        reasoning = tuple(
            reasoning_item("anthropic", block, self._where)
            for _, block in sorted(self._thinking.items())
        )
        completion = Completion(
            "".join(text), tuple(calls), self._stop, self._id, self._model, reasoning, self._usage()
        )
        refuse_lost_calls(completion, _CALLED, self._where)
        return completion

    def _input(self, index: int, streamed: str) -> str:
        """A ``tool_use`` block's input: its ``input_json_delta`` s, or the input its start
        held when none came (the API starts a block with ``{}``, and a proxy that streams a
        finished message again starts it whole, as the SDK's own stream reads it).

        Raises:
            VeridicError: the block started with input and streamed other input too: two
                inputs for one call, and the one that ran would be a guess.
        """
        started = self._inputs.get(index)
        if started is None:
            return streamed or "{}"
        if not streamed:
            return started
        raise VeridicError(
            f"{self._where}: the stream's tool_use block {index} started with input "
            f"{clip(started)} and then streamed input {clip(streamed)}; one call cannot have "
            "two, so nothing was answered: send the request again (a proxy between you and "
            "the API may be mangling events)"
        )

    def _count(self, usage: object) -> None:
        """Take the counts ``usage`` gives over those held, as the SDK's own accumulator
        does: message_delta's are cumulative, the answer's final counts (the tokens read
        too: a proxy that counts the prompt only at the end starts with 0), and one it
        leaves out keeps message_start's.

        Cumulative counts do not shrink, so a lower one keeps the count held: SGLang's
        Messages endpoint sends the prompt's count at the start and ``"input_tokens": 0``
        in the delta, which read over the start's counted 0 tokens read, and
        ``Limits(tokens=...)`` let the run go past its budget.

        Raises:
            VeridicError: a count that is no count (negative, a fraction), in
                message_start as in message_delta: one in message_start was replaced by the
                delta's without a word, where the same count sent whole is refused.
        """
        for path in _COUNTED:
            found = attr(usage, *path)
            if found is None:
                continue
            counted = _count(path[-1], found, self._where)
            held = self._counts.get(path)
            if held is None or counted >= held:
                self._counts[path] = counted

    def _usage(self) -> Usage | None:
        """The answer's usage, read from the counts held as a sent answer's is.

        ``None`` unless the tokens read and written are both given, as
        :func:`~veridic.providers._base.usage_of` reads a sent answer: a count left out and
        read as 0 would pass ``Limits(tokens=...)``.
        """
        usage: dict[str, object] = {}
        for path, value in self._counts.items():
            *heads, key = path
            into = usage
            for head in heads:
                nested = into.setdefault(head, {})
                into = nested if isinstance(nested, dict) else {}
            into[key] = value
        if not usage:
            return None
        return usage_of({"usage": usage}, _READ, _WROTE, where=self._where, parts=_PARTS)


_READ: Final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
"""Every token the model read: Anthropic counts cache writes and reads apart."""

_WROTE: Final = ("output_tokens",)
"""Every token the model wrote (thinking included)."""

_PARTS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        **{part: (part,) for part in ("cache_read_input_tokens", "cache_creation_input_tokens")},
        "reasoning_output_tokens": ("output_tokens_details", "thinking_tokens"),
    }
)
"""The parts of :class:`Usage` Anthropic counts: its cache reads and writes under the same
names, and the tokens written that were thinking (``thinking_tokens``, of
``output_tokens``)."""

_COUNTED: Final = tuple(dict.fromkeys([*((key,) for key in _READ), _WROTE, *_PARTS.values()]))
"""Every count of a usage a stream's events carry: the paths :func:`usage_of` reads."""


def _foreign(kind: object, where: str) -> VeridicError:
    """An answer holding a block other than text, thinking and ``tool_use``.

    The gateway sends only the view's tools, so a server tool's or an MCP tool's block
    is not an answer to its request; skipped, the call would leave no record and the
    model's next turn would build on what it did.
    """
    return VeridicError(
        f"{where}: the answer holds a {clip(str(kind))} content block, but the gateway sends "
        "only function tools from the view, and reads only text, thinking and tool_use "
        "blocks; nothing of it was run: do not add tools through options, and check what "
        "sits between you and the API"
    )


def _refuse_citations(citations: list[object], where: str) -> None:
    """Refuse an answer whose text cites documents or search results.

    The gateway sends neither (the prompt's turns are text, its tool results text, and
    server tools are refused), so a citation cites text something between the
    application and the model added: the model-call record would name a prompt the model
    did not read alone. The OpenAI adapters refuse their annotations the same way.

    Raises:
        VeridicError: naming the kinds of the citations.
    """
    if not citations:
        return
    kinds = sorted({clip(str(attr(citation, "type"))) for citation in citations})
    raise VeridicError(
        f"{where}: the answer cites what the model read outside the prompt "
        f"({', '.join(kinds[:5])}): the gateway sends no documents and no search tool, so "
        "they are text in no data block and under no hash of the model-call record; nothing "
        "of it was run: check what sits between you and the API, and pass outside text "
        "with Composer.data()"
    )


def _canonical(arguments: str) -> str:
    """The same JSON text for the same arguments, streamed or not (as :func:`arguments_json`).

    Text that is not JSON, or that gives a key twice, is kept as the model wrote it, for
    the dispatcher to refuse: read again, ``{"path": "/tmp", "path": "/etc"}`` kept its
    last value without a word, where the same call over Chat Completions is refused.
    """
    try:
        decoded: object = _json_object.loads(arguments)
    except ValueError:
        return arguments
    return arguments_json(decoded)
