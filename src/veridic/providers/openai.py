"""Adapters for the ``openai`` SDK: chat completions and responses (extra ``veridic[openai]``).

Both take the SDK's client, sync (``openai.OpenAI``) or async
(``openai.AsyncOpenAI``); :class:`~veridic.ModelGateway` picks ``send`` or
``asend`` accordingly. Without a client, a sync ``openai.OpenAI()`` is built
(reading ``OPENAI_API_KEY`` as the SDK does).

- :class:`OpenAIChat` sends ``Prompt.to_openai()`` as ``messages`` and
  ``view.tool_specs("openai")`` as ``tools``.
- :class:`OpenAIResponses` sends the system message as ``instructions``, the
  conversation as ``input`` items (messages, ``function_call`` and
  ``function_call_output``), and the same tools in the Responses API's flat
  shape, each with ``"strict": false`` (the API's default is strict, which
  requires every property to be required; veridic's schemas mark optional
  arguments as optional).

Reasoning: the Responses adapter reads the answer's ``reasoning`` output
items (in a stream, the finished items of ``response.output_item.done``, else
those of the final response) as the reply's :class:`~veridic.ReasoningItem` s,
and sends an assistant turn's items back as input items in place, before
that turn's message and ``function_call`` items. Set
``options={"include": ["reasoning.encrypted_content"], ...}`` to have the
reasoning itself (``encrypted_content``) come back, as a stateless request
needs. Chat completions have no reasoning items; a prompt holding any is
refused by :class:`OpenAIChat`, as one holding Anthropic items is by
:class:`OpenAIResponses` (:func:`veridic.text.prompt.check_reasoning`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Final, Protocol

from veridic._extras import require
from veridic._sample import clip, quoted
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.providers._base import (
    Adapter,
    Completion,
    attr,
    found_in,
    items,
    listed,
    reasoning_item,
    refuse_error,
    refuse_lost_calls,
    refuse_no_answer,
    server_said,
    text_of,
    usage_of,
)
from veridic.providers._raw import raw_answer, raw_arguments, raw_create
from veridic.text.prompt import (
    Message,
    Prompt,
    ReasoningItem,
    ToolCall,
    _system_text,
    check_reasoning,
    check_rendered,
)
from veridic.tools.tool import JsonObject
from veridic.tools.view import _responses_specs

__all__ = [
    "OpenAIChat",
    "OpenAIChatClient",
    "OpenAIResponses",
    "OpenAIResponsesClient",
    "responses_request",
]


class OpenAIChatClient(Protocol):
    """What :class:`OpenAIChat` needs of ``openai.OpenAI`` or ``openai.AsyncOpenAI``.

    A protocol, not the SDK's classes: a type checker then never loads the
    SDK for a project that imports veridic (the SDK is large, and most
    projects use one provider or none). The client is checked when the
    adapter is built.
    """

    @property
    def chat(self) -> object: ...


class OpenAIResponsesClient(Protocol):
    """What :class:`OpenAIResponses` needs of an OpenAI client (see :class:`OpenAIChatClient`)."""

    @property
    def responses(self) -> object: ...


_EXTRA: Final = "openai"


def _client(client: object, needed_by: str) -> object:
    sdk = require("openai", _EXTRA, needed_by)
    if client is None:
        made: object = sdk.OpenAI()
        return made
    return client


def _resource_method(client: object, path: tuple[str, ...], adapter: str) -> Callable[..., object]:
    method = attr(client, *path)
    if not callable(method):
        raise VeridicError(
            f"{adapter} got {a_type(client)}, which has no {'.'.join(path)}(): "
            "pass an openai.OpenAI or openai.AsyncOpenAI client (from a version the "
            "'openai' extra allows)"
        )
    return method


class OpenAIChat(Adapter):
    """The chat completions API (``client.chat.completions.create``).

    ``options`` are request parameters sent with every call (``temperature``,
    ``max_completion_tokens``, ``tool_choice``, ...); the prompt, the tools,
    the model and streaming are the gateway's to set.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        VeridicError: the client is not an OpenAI client, or an option sets
            what the gateway sets.
    """

    api = "openai.chat.completions"
    spec_format = "openai"
    owned = frozenset({"messages", "tools", "functions", "function_call"})
    server_edits = MappingProxyType(
        {
            "web_search_options": "the model reads web pages the server fetches, outside "
            "the prompt and outside any data block",
        }
    )
    one_answer = MappingProxyType({"n": 1, "modalities": ["text"]})
    """``modalities`` with ``"audio"`` asks for a spoken answer (``message.audio``), which
    the adapter refuses when it comes."""

    __slots__ = ()

    def __init__(
        self,
        client: OpenAIChatClient | None = None,
        *,
        model: str,
        options: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(_client(client, "OpenAIChat"), model, options)

    def method(self) -> Callable[..., object]:
        return _resource_method(self.client, ("chat", "completions", "create"), "OpenAIChat")

    def render(self, prompt: Prompt, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        return {"messages": prompt.to_openai(), "tools": specs}

    def request(
        self, prompt: Prompt, specs: Sequence[Mapping[str, object]], options: Mapping[str, object]
    ) -> JsonObject:
        """The whole request; to OpenRouter, with ``transforms: []`` in ``extra_body``.

        OpenRouter compresses a prompt too long for a model of 8k tokens or less
        ("middle-out": turns dropped or cut from the middle) unless the request says
        ``transforms: []``; left to that default, the model read less than the prompt
        whose sha256 the model-call record names. Any other ``transforms`` is refused
        (:meth:`~veridic.providers.Adapter.check_options`), so this one is the only value
        the request can carry. Sent only to OpenRouter: the OpenAI API refuses a key it
        does not know. Through a proxy of your own in front of OpenRouter, pass
        ``options={"extra_body": {"transforms": []}}`` yourself.
        """
        request = super().request(prompt, specs, options)
        if _is_openrouter(self.client):
            body = request.get("extra_body")
            given = dict(body) if isinstance(body, Mapping) else {}
            request["extra_body"] = {**given, "transforms": []}
        return request

    def sender(self) -> Callable[..., object]:
        """``chat.completions.with_raw_response.create``, whose answer :meth:`parse` reads as
        the server wrote it (``chat.completions.create`` for a client without it), bound to the
        ``create`` the client has now, so a patch of it sees the request."""
        raw = raw_create(attr(self.client, "chat", "completions"))
        return raw if raw is not None else self.method()

    def parse(self, response: object) -> Completion:
        """Read an answer: the SDK's ``ChatCompletion``, or the raw answer :meth:`sender`
        gives, read from its own JSON text.

        Some OpenAI-compatible servers send a call's ``arguments`` as a JSON object, not
        text; the SDK reads it with ``json.loads``, which keeps the last value of a key
        given twice, so ``{"city": "Oslo", "city": "Bergen"}`` ran for Bergen with nothing
        said. Read from the answer's text, the arguments reach the dispatcher as written,
        and are refused there, as the same arguments sent as text are.
        """
        where = f"{self!r}"
        response = raw_answer(response, where)
        refuse_error(response, where)
        _refuse_searched(response, where)
        choices = attr(response, "choices")
        if not isinstance(choices, list) or not choices:
            raise VeridicError(
                f"{where}: the chat completion has no choices ({type(response).__name__}); "
                "the gateway reads the first choice: do not set n=0"
            )
        if len(choices) > 1:
            raise _void_choice(f"{len(choices)} choices", where)
        choice = choices[0]
        message = attr(choice, "message")
        if message is None:
            raise VeridicError(
                f"{where}: the chat completion's choice holds no message, so it is no "
                "answer; nothing of it was run: check what sits between you and the API"
            )
        text = _chat_text(message, where)
        calls = tuple(
            _chat_call(call, where) for call in listed(message, "tool_calls", where=where)
        )
        completion = Completion(
            text=text,
            tool_calls=calls,
            stop_reason=text_of(choice, "finish_reason", where=where, default=""),
            response_id=text_of(response, "id", where=where, default=""),
            model=text_of(response, "model", where=where, default=self.model),
            usage=usage_of(
                response,
                ("prompt_tokens",),
                ("completion_tokens",),
                where=where,
                parts=_CHAT_PARTS,
                total="total_tokens",
            ),
        )
        refuse_lost_calls(completion, _CALLED, where)
        return completion

    def assembler(self) -> _ChatAssembler:
        return _ChatAssembler(self)


_CALLED: Final = frozenset({"tool_calls", "function_call"})
"""The finish reasons of a chat answer that stopped to call tools (``function_call``: the
legacy shape, whose call :func:`_chat_text` refuses)."""

_OPENROUTER: Final = "openrouter.ai"


def _is_openrouter(client: object) -> bool:
    """Whether the client sends to OpenRouter (its ``base_url`` is on ``openrouter.ai``)."""
    host = attr(client, "base_url", "host")
    return isinstance(host, str) and (host == _OPENROUTER or host.endswith("." + _OPENROUTER))


_CHAT_PARTS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "cache_read_input_tokens": ("prompt_tokens_details", "cached_tokens"),
        "reasoning_output_tokens": ("completion_tokens_details", "reasoning_tokens"),
    }
)
"""Where a chat completion's usage breaks its counts down (:func:`usage_of`)."""

_RESPONSES_PARTS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "cache_read_input_tokens": ("input_tokens_details", "cached_tokens"),
        "reasoning_output_tokens": ("output_tokens_details", "reasoning_tokens"),
    }
)
"""Where a response's usage breaks its counts down (:func:`usage_of`)."""


def _void_choice(what: str, where: str) -> VeridicError:
    """An answer of more than one choice: the gateway records, shows and runs one.

    Read as its first choice, the others' calls vanished without a record, and a stream
    showed their text as it came while the reply held the first one's only.
    """
    return VeridicError(
        f"{where}: the chat completion holds {what}, but the gateway records, shows and "
        "runs one answer; nothing of it was run: do not set n (or ask for other choices "
        "with requests of their own), and check what sits between you and the API"
    )


def _chat_text(message: object, where: str) -> str:
    """The message's text: its ``content``, or its ``refusal`` when the model refused.

    The API sends one or the other. Both, and the reply would either drop the refusal
    without a word or show one text and record another; a legacy ``function_call`` (the
    shape before tools, which some compatible servers still answer in) or an answer in
    ``audio`` would vanish, and the reply read as a final answer. These are refused. A
    ``function_call`` that repeats one of the message's ``tool_calls`` (llama-cpp-python's
    server sends a single call both ways) loses nothing, and is read as that call.

    Raises:
        VeridicError: the message has both text and a refusal, a ``function_call`` that is
            not one of its ``tool_calls``, or ``audio``.
    """
    legacy = attr(message, "function_call")
    if legacy is not None and not _repeats_a_tool_call(legacy, message):
        raise VeridicError(
            f"{where}: the model's message holds a legacy function_call, which the gateway "
            "neither sends tools for nor reads (it reads tool_calls); nothing of it was run: "
            "use a server that answers with tool_calls, as the chat completions API does"
        )
    if attr(message, "audio") is not None:
        raise VeridicError(
            f"{where}: the model answered in audio (message.audio), which the gateway does "
            "not read, so the reply would read as saying nothing; nothing of it was run: do "
            "not ask for audio (modalities, audio) through options"
        )
    _refuse_citations(message, where)
    text = text_of(message, "content", where=where, default="")
    refusal = attr(message, "refusal")
    if not isinstance(refusal, str) or not refusal:
        return text
    if text:
        raise VeridicError(
            f"{where}: the model's message holds both text ({clip(text)}) and a refusal "
            f"({clip(refusal)}), which the API never sends together; the reply could keep "
            "only one of them, so nothing of it was run: send the request again, and check "
            "what sits between you and the API"
        )
    return refusal


def _repeats_a_tool_call(legacy: object, message: object) -> bool:
    """Whether the legacy ``function_call`` names a call of ``tool_calls``, name and
    arguments alike: then it is a copy, and the call runs and is recorded from there."""
    shown = (attr(legacy, "name"), attr(legacy, "arguments"))
    return any(
        (attr(call, "function", "name"), attr(call, "function", "arguments")) == shown
        for call in items(message, "tool_calls")
    )


def _refuse_citations(holder: object, where: str) -> None:
    """Refuse an answer that cites what the model read outside the prompt.

    Annotations (``url_citation``, ``file_citation``, ...) come only with search:
    a hosted tool, ``web_search_options``, or a model that searches on every request
    (``gpt-4o-search-preview``). The pages it read are in no data block and under no
    hash, so the model-call record would name a prompt the model did not read alone.

    Raises:
        VeridicError: naming the kinds of the annotations.
    """
    found = found_in(holder, "annotations")
    if not found:
        return
    kinds = sorted({clip(str(attr(note, "type"))) for note in found})
    raise VeridicError(
        f"{where}: the answer cites what the model read outside the prompt "
        f"({', '.join(kinds[:5])}): a model or tool that searches read text that is in no "
        "data block and under no hash of the model-call record; nothing of it was run: use "
        "a model that does not search by itself, and fetch pages with a registry tool, "
        "whose results come back fenced"
    )


_SEARCHED: Final = ("citations", "search_results")
"""Where a compatible server that searched by itself lists what it read, beside the choices
(Perplexity's models, xAI's with Live Search)."""


def _refuse_searched(completion: object, where: str) -> None:
    """Refuse a chat completion (or chunk) that lists what a search the server ran found.

    Perplexity's models search on every request, and xAI's with Live Search, and they list
    the pages beside the choices, not as the message's annotations
    (:func:`_refuse_citations`): the model read them outside the prompt.

    Raises:
        VeridicError: naming the key.
    """
    for key in _SEARCHED:
        if found_in(completion, key):
            raise VeridicError(
                f"{where}: the answer lists {key} of a search the server ran: the model read "
                "text outside the prompt, in no data block and under no hash of the "
                "model-call record; nothing of it was run: use a model that does not search "
                "by itself, and fetch pages with a registry tool, whose results come back "
                "fenced"
            )


def _chat_call(call: object, where: str) -> ToolCall:
    kind = attr(call, "type")
    if kind not in (None, "function"):
        raise VeridicError(
            f"{where}: the model made a tool call of type {quoted(kind)}, but the gateway "
            "sends only function tools from the view; nothing of it was run: do not add "
            "custom tools through options"
        )
    return ToolCall(
        text_of(call, "id", where=where),
        text_of(call, "function", "name", where=where),
        _paired(raw_arguments(attr(call, "function", "arguments"), where)),
    )


_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")
"""A high surrogate followed by a low one: two halves of one character, decoded apart."""


def _paired(text: str) -> str:
    """``text`` with each high and low surrogate that stand side by side joined into the one
    character they encode. The SDK decodes each streamed event alone, so a ``\\ud83d`` and
    ``\\ude00`` that arrived in two chunks are two lone surrogates, where the same answer
    sent whole is one emoji: without this the tool would get other text, and the audit
    another hash, than for the answer sent whole."""
    if _PAIR.search(text) is None:  # the usual case: one C-level scan, no copy
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


_UNFITTING: Final = (
    AssertionError,
    AttributeError,
    IndexError,
    KeyError,
    RuntimeError,
    TypeError,
    ValueError,
)
"""What the SDK's merge of chat chunks raises on chunks that do not fit together."""

_MODEL_ENDED: Final = frozenset({"stop", "tool_calls"})
"""The finish reasons of a chat answer the model ended itself: a choice that finishes with
one and then the other is one whole answer."""


def _refuse_streamed_object(arguments: object, call: str, where: str) -> None:
    """Refuse a streamed call whose ``arguments`` come as a JSON object, not text.

    Some OpenAI-compatible servers send a call's arguments as an object. Sent whole, the
    answer is read from its own text (:meth:`OpenAIChat.parse`), and a key given twice
    reaches the dispatcher, which refuses it. Streamed, the SDK reads each event with
    ``json.loads``, which keeps the last value of a key given twice, and merges a chat
    stream's pieces key by key, joining the values two pieces give one key: the call ran
    for ``{"city": "Bergen"}`` or ``{"city": "OsloBergen"}`` with nothing said. What the
    model wrote cannot be read back from the events.

    Raises:
        VeridicError: naming the call, and ``send()`` as the way to read such a server.
    """
    if arguments is None or isinstance(arguments, str):
        return
    raise VeridicError(
        f"{where}: {call} streams its arguments as a JSON object "
        f"({type(arguments).__name__}), not as text: the SDK reads a stream's objects with "
        "json.loads and merges their pieces key by key (keeping the last value of a key "
        "given twice, joining the values two pieces give one key), so what the model wrote "
        "cannot be read back; nothing of it was run: with this server, send the request "
        "with send(), which reads the answer's own text, not stream()"
    )


class _ChatAssembler:
    """Chat completion chunks, put together by the SDK's own ``ChatCompletionStreamState``.

    The SDK merges content, refusal and tool-call pieces by index; the snapshot
    it keeps is then read like a whole completion (:meth:`OpenAIChat.parse`),
    so a streamed answer and a sent one give the same :class:`Completion`. The
    snapshot, not ``get_final_completion()``: the latter raises on a
    ``length`` or ``content_filter`` finish, which a send reports as its
    stop reason.
    """

    def __init__(self, adapter: OpenAIChat) -> None:
        streaming = importlib.import_module("openai.lib.streaming.chat")
        self._adapter = adapter
        self._state = streaming.ChatCompletionStreamState()
        self._fed = False
        self._finished: dict[object, object] = {}
        """choice index -> the finish_reason it came with"""
        self._ids: dict[tuple[object, object], str] = {}
        self._names: dict[tuple[object, object], str] = {}
        """(choice, call index) -> the call's name as merged so far"""
        self._opened: set[tuple[object, object]] = set()
        """(choice, call index) of the calls an earlier piece began"""
        self._argued: set[tuple[object, object]] = set()
        """(choice, call index) of the calls whose argument text began"""
        self._types: dict[tuple[object, object], object] = {}
        """(choice, call index) -> the type its first piece gave"""

    def feed(self, event: object) -> str:
        _refuse_searched(event, repr(self._adapter))
        if self._check(event):
            event = self._unrepeated(event)
        try:
            self._state.handle_chunk(event)
        # RuntimeError: the SDK's merge of a call piece that has no index; AttributeError: a
        # choice whose delta is null; AssertionError: the SDK's own asserts on what it merged.
        except _UNFITTING as error:
            raise self._void(f"its chunks do not fit together ({type(error).__name__})") from error
        self._fed = True
        choices = attr(event, "choices")
        if not isinstance(choices, list) or not choices:
            return ""
        # What the reply's text will hold: the content, or the refusal (_chat_text).
        where = repr(self._adapter)
        delta = attr(choices[0], "delta")
        return text_of(delta, "content", where=where, default="") + text_of(
            delta, "refusal", where=where, default=""
        )

    def _check(self, event: object) -> bool:
        """Refuse what the SDK's merging would hide: a piece after a choice finished (a call
        appended after the stop would run), a second id for one tool-call index (two
        calls merged into one, under an id nobody sent), and a second choice (shown as it
        came, while the reply holds the first).

        Returns:
            Whether the chunk holds pieces of tool calls (the text chunks of the stream
            hold none, and need no more reading).
        """
        choices = attr(event, "choices")
        choices = choices if isinstance(choices, list) else []
        called = False
        for choice in choices:
            index = attr(choice, "index")
            if index not in (None, 0) or len(choices) > 1:
                shown = str(index) if isinstance(index, int) else clip(str(index))
                raise _void_choice(f"a chunk of choice {shown}", repr(self._adapter))
            delta = attr(choice, "delta")
            calls = attr(delta, "tool_calls")
            more = attr(delta, "content") or attr(delta, "refusal") or calls
            if index in self._finished and more:
                raise self._void(f"choice {index} went on after its finish_reason")
            called = called or bool(calls)
            for call in calls if isinstance(calls, list) else ():
                key = (index, attr(call, "index"))
                _refuse_streamed_object(
                    attr(call, "function", "arguments"),
                    f"tool call {clip(str(key[1]))} of choice {clip(str(key[0]))}",
                    repr(self._adapter),
                )
                self._check_type(key, attr(call, "type"))
                given = attr(call, "id")
                if isinstance(given, str) and given:
                    first = self._ids.setdefault(key, given)
                    if first != given:
                        raise self._void(
                            f"tool call {key[1]} of choice {index} got a second id "
                            f"({clip(given)} after {clip(first)})"
                        )
            reason = attr(choice, "finish_reason")
            if reason:
                ended = self._finished.setdefault(index, reason)
                if ended != reason and not {ended, reason} <= _MODEL_ENDED:
                    # The SDK keeps the last: a call cut off at "length" would run as whole.
                    # "tool_calls" and "stop" both say the model ended the answer itself
                    # (NVIDIA Dynamo and ChatMock send one after the other).
                    raise self._void(
                        f"choice {index} finished twice ({clip(str(ended))}, then "
                        f"{clip(str(reason))})"
                    )
        return called

    def _check_type(self, key: tuple[object, object], kind: object) -> None:
        """Refuse a piece that gives a call another ``type`` than an earlier piece gave it.

        The SDK keeps the last ``type`` it is given: a ``custom`` call (free-form input, a
        tool the view never sends) whose later piece said ``function`` ran as a function
        call, which :func:`_chat_call` refuses only for the type it reads.

        Raises:
            VeridicError: naming the call and both types.
        """
        if kind is None or kind == "":  # a later piece that gives no type
            return
        first = self._types.setdefault(key, kind)
        if first != kind:
            raise self._void(
                f"tool call {clip(str(key[1]))} of choice {clip(str(key[0]))} was of type "
                f"{clip(str(first))}, and a later piece gives it type {clip(str(kind))}"
            )

    def _unrepeated(self, event: object) -> object:
        """``event`` without the id and name a call's later piece repeats (a copy, when one
        does).

        The API sends a call's id and name once, in its first piece; some compatible
        servers send them again with every piece. The SDK joins every string it merges, so
        the call ran as ``get_weatherget_weather`` under an id nobody sent, where the same
        answer sent whole is ``get_weather``. A second id that differs is refused
        (:meth:`_check`). Which later name is the name again, and which a part of it, is
        told by :meth:`_name_piece`.
        """
        repeats: list[tuple[int, int, str]] = []
        for at, choice in enumerate(items(event, "choices")):
            for place, call in enumerate(items(choice, "delta", "tool_calls")):
                # One chunk may hold several pieces of one call: each after the first is a
                # later piece.
                key = (attr(choice, "index"), attr(call, "index"))
                later = key in self._opened
                self._opened.add(key)
                given = attr(call, "id")
                header = later and isinstance(given, str) and given == self._ids.get(key)
                if header:
                    repeats.append((at, place, "id"))
                name = attr(call, "function", "name")
                if isinstance(name, str) and name and self._name_piece(key, name, header=header):
                    repeats.append((at, place, "name"))
                arguments = attr(call, "function", "arguments")
                if isinstance(arguments, str) and arguments:
                    self._argued.add(key)
        if not repeats:
            return event
        copied: object = getattr(event, "model_copy")(deep=True)  # noqa: B009 - an SDK chunk
        for at, place, field in repeats:
            choice = items(copied, "choices")[at]
            call = items(choice, "delta", "tool_calls")[place]
            setattr(attr(call, "function") if field == "name" else call, field, None)
        return copied

    def _name_piece(self, key: tuple[object, object], name: str, *, header: bool) -> bool:
        """Take a piece of a call's name; whether it is the name sent again (to drop).

        A name's parts come before its arguments, and a server that sends a call's header
        again (its id: ids are never sent in parts, :meth:`_check`) sends all of it, the
        whole name included. So a name in a piece that gives the id again, or that comes
        after the call's argument text began, is the whole name again; any other is the
        next part of it, joined as the SDK joins it (``"get"`` and ``"get"`` are the
        call ``getget``).

        Raises:
            VeridicError: a piece that can only be the whole name again names another
                name than the call's so far: it renames a call already announced.
        """
        held = self._names.get(key)
        if held is None:
            self._names[key] = name
            return False
        if not (header or key in self._argued):
            self._names[key] = held + name
            return False
        if name != held:
            why = "gives the call's id again" if header else "comes after its arguments began"
            raise self._void(
                f"tool call {clip(str(key[1]))} of choice {clip(str(key[0]))} was announced "
                f"as {clip(held)}, and a later piece, which {why}, renames it {clip(name)}"
            )
        return True

    def _void(self, what: str) -> VeridicError:
        return VeridicError(
            f"{self._adapter!r}: the stream is not one answer: {what}; nothing of it was run: "
            "send the request again (a proxy between you and the API may be mangling chunks)"
        )

    def finish(self) -> Completion:
        snapshot = self._state.current_completion_snapshot if self._fed else None
        choices = attr(snapshot, "choices")
        if not isinstance(choices, list) or not choices or not attr(choices[0], "finish_reason"):
            raise VeridicError(
                f"{self._adapter!r}: the stream ended before the model finished (no finish_reason "
                "arrived); the answer is incomplete: send the request again"
            )
        self._check_begun(choices[0])
        return self._adapter.parse(snapshot)

    def _check_begun(self, choice: object) -> None:
        """Refuse a call the stream never began: the API sends a call's id and name in its
        first piece, so a call without them is pieces of a call no piece began (an index
        a proxy made up or renumbered), not an SDK that reads the answer otherwise.

        Raises:
            VeridicError: naming the call and what it lacks.
        """
        # Only choice 0 gets here: a chunk of another is refused (_check).
        for place, call in enumerate(items(choice, "message", "tool_calls")):
            index = attr(call, "index")
            shown = index if isinstance(index, int) else place
            given = (("id", attr(call, "id")), ("name", attr(call, "function", "name")))
            for field, value in given:
                if not isinstance(value, str) or not value:
                    raise self._void(
                        f"tool call {shown} of choice 0 has no {field}: its pieces belong to a "
                        "call no piece began"
                    )


class OpenAIResponses(Adapter):
    """The Responses API (``client.responses.create``), stateless: the prompt is sent whole.

    Options that make the server add context the prompt does not hold
    (``previous_response_id``, ``conversation``, a stored ``prompt``) are
    refused: the prompt's hash must describe everything the model read.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        VeridicError: the client has no Responses API, or an option sets what
            the gateway sets.
    """

    api = "openai.responses"
    spec_format = "openai"
    owned = frozenset(
        {"input", "instructions", "tools", "previous_response_id", "conversation", "prompt"}
    )
    server_edits = MappingProxyType(
        {
            "truncation": "the server drops input items from the middle of the conversation "
            "when it outgrows the context window (only 'disabled' drops none)",
            "context_management": "the server compacts earlier turns into text it writes itself",
            "multi_agent": "the server runs subagents of its own, with tools outside the view, "
            "and the model reads what they found (only enabled False runs none)",
        }
    )
    one_answer = MappingProxyType({"background": False})

    __slots__ = ()

    def __init__(
        self,
        client: OpenAIResponsesClient | None = None,
        *,
        model: str,
        options: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(_client(client, "OpenAIResponses"), model, options)

    def method(self) -> Callable[..., object]:
        return _resource_method(self.client, ("responses", "create"), "OpenAIResponses")

    def render(self, prompt: Prompt, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        return responses_request(prompt, specs)

    def sender(self) -> Callable[..., object]:
        """``responses.with_raw_response.create``, whose answer :meth:`parse` reads as the
        server wrote it (``responses.create`` for a client without it), bound to the
        ``create`` the client has now, so a patch of it sees the request."""
        raw = raw_create(attr(self.client, "responses"))
        return raw if raw is not None else self.method()

    def parse(self, response: object) -> Completion:
        """Read an answer: the SDK's ``Response``, or the raw answer :meth:`sender` gives,
        read from its own JSON text, so a call's ``arguments`` a compatible server sends as
        an object keep a key given twice for the dispatcher to refuse (as in
        :meth:`OpenAIChat.parse`)."""
        where = f"{self!r}"
        response = raw_answer(response, where)
        status = text_of(response, "status", where=where, default="")
        if status == "failed":
            message = attr(response, "error", "message")
            raise VeridicError(
                f"{where}: the response failed ({server_said(message, 'no reason given')}); "
                "nothing was answered: fix the request or send it again"
            )
        refuse_error(response, where)
        if status not in _FINISHED:
            raise VeridicError(
                f"{where}: the response has status {clip(status)}, not a finished answer "
                "(completed or incomplete); nothing of it was read or run: do not set "
                "background=True (the gateway reads the answer of the request it sends), and "
                "check what sits between you and the API"
            )
        refuse_no_answer(response, "output", where)
        if status != "incomplete":
            _refuse_unfinished_items(response, where)
        reason = attr(response, "incomplete_details", "reason")
        stop = f"{status}:{reason}" if status == "incomplete" and reason else status
        text: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[ReasoningItem] = []
        for item in items(response, "output"):
            kind = attr(item, "type")
            if kind == "reasoning":
                reasoning.append(reasoning_item("openai", item, where))
            elif kind == "message":
                text.extend(
                    _part_text(part, where) for part in listed(item, "content", where=where)
                )
            elif kind == "function_call":
                calls.append(
                    ToolCall(
                        text_of(item, "call_id", where=where),
                        text_of(item, "name", where=where),
                        raw_arguments(attr(item, "arguments"), where),
                    )
                )
            else:
                raise _foreign(f"a {clip(str(kind))} output item", where)
        _refuse_text_and_refusal(response, where)
        return Completion(
            text="".join(text),
            tool_calls=tuple(calls),
            stop_reason=stop,
            response_id=text_of(response, "id", where=where, default=""),
            model=text_of(response, "model", where=where, default=self.model),
            reasoning=tuple(reasoning),
            usage=usage_of(
                response,
                ("input_tokens",),
                ("output_tokens",),
                where=where,
                parts=_RESPONSES_PARTS,
                total="total_tokens",
            ),
        )

    def assembler(self) -> _ResponsesAssembler:
        return _ResponsesAssembler(self)


def _refuse_unfinished_items(response: object, where: str) -> None:
    """Refuse a response that says it is whole and holds an item that is not.

    The Responses API marks each output item's ``status`` too: a ``function_call`` item
    ``incomplete`` or ``in_progress`` was cut off while the model wrote it (its
    arguments may be cut short, and still be JSON), and a message item so marked holds
    part of the text. In a response of status ``completed`` (or of none, from a
    compatible server) such an item ran as a call the model finished writing. A
    response that is ``incomplete`` says so itself, and its calls do not run
    (:func:`veridic.run.reply._check_whole`).

    Raises:
        VeridicError: naming the item, its type and its status.
    """
    for index, item in enumerate(items(response, "output")):
        status = attr(item, "status")
        if status not in _UNFINISHED:
            continue
        raise VeridicError(
            f"{where}: the response says it is whole, but its output item {index} (a "
            f"{clip(str(attr(item, 'type')))} item) has status {clip(str(status))}: it was "
            "cut off while the model wrote it, so nothing of it was run: send the request "
            "again, and check what sits between you and the API"
        )


_UNFINISHED: Final = frozenset({"incomplete", "in_progress"})
"""The statuses of an output item the model did not finish writing."""

_FINISHED: Final = frozenset({"completed", "incomplete", ""})
"""Statuses of a response that holds its answer ("" for a compatible server that sends none;
``failed`` is refused with its reason)."""

_PART_TEXT: Final[Mapping[str, str]] = {"output_text": "text", "refusal": "refusal"}
"""The message parts the adapter reads, and where each holds its text."""


def _refuse_text_and_refusal(response: object, where: str) -> None:
    """Refuse a response whose messages hold both text and a refusal, as
    :func:`_chat_text` refuses a chat message that does.

    Joined into one text, the refusal read as part of the answer (or the answer as part
    of the refusal), and the same answer passed over the Responses API that is refused
    over chat completions.

    Raises:
        VeridicError: quoting the first of each.
    """
    said: dict[object, str] = {}
    for item in items(response, "output"):
        if attr(item, "type") != "message":
            continue
        for part in items(item, "content"):
            kind = attr(part, "type")
            found = attr(part, _PART_TEXT.get(str(kind), "text"))
            if isinstance(found, str) and found:
                said.setdefault(kind, found)
    if len(said) < len(_PART_TEXT):
        return
    raise VeridicError(
        f"{where}: the model's answer holds both text ({clip(said['output_text'])}) and a "
        f"refusal ({clip(said['refusal'])}), which the API never sends together; the reply "
        "could keep only one of them, so nothing of it was run: send the request again, and "
        "check what sits between you and the API"
    )


def _part_text(part: object, where: str) -> str:
    """The text of one part of a message item; a part of another kind is refused.

    Skipped, a newer kind of part (audio with a transcript, say) would leave the reply
    short of what the model said, without a word.

    Raises:
        VeridicError: the part is of a kind the adapter does not read.
    """
    kind = attr(part, "type")
    key = _PART_TEXT.get(kind) if isinstance(kind, str) else None
    if key is None:
        raise _foreign(f"a message part of type {clip(str(kind))}", where)
    _refuse_citations(part, where)
    return text_of(part, key, where=where)


def responses_request(prompt: Prompt, specs: Sequence[Mapping[str, object]]) -> JsonObject:
    """The Responses API's ``instructions``, ``input`` and ``tools`` for ``prompt``.

    The system message, sent as ``instructions``, is held to the rule
    :class:`~veridic.ModelGateway` holds it to (:func:`veridic.text.prompt.check_system`).

    Raises:
        ProvenanceError: a part of the system message is not trusted, or its parts do not
            make its text (in report mode: logged, and rendered).
        VeridicError: the prompt holds Anthropic reasoning items, which the
            Responses API cannot take (:func:`veridic.text.prompt.check_reasoning`).
    """
    check_reasoning(prompt, "openai", "the OpenAI Responses API (OpenAIResponses)")
    check_rendered(prompt, "OpenAIResponses")
    items: list[JsonObject] = []
    for message in prompt.messages:
        if message.role != "system":
            items.extend(_input_items(message))
    own = _responses_specs(specs)  # the view's own list: built once, coupled by identity
    tools = own if own is not None else [_flat_tool(spec) for spec in specs]
    request: JsonObject = {"input": items, "tools": tools}
    system = _system_text(prompt)  # checked above, by check_rendered()
    if system:
        request["instructions"] = system
    return request


def _input_items(message: Message) -> list[JsonObject]:
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id or "",
                "output": message.content,
            }
        ]
    # The turn's reasoning items first, each exactly as the model produced it.
    items: list[JsonObject] = [dict(item.block()) for item in message.reasoning]
    if message.content or not message.tool_calls:
        items.append({"role": message.role, "content": message.content})
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in message.tool_calls
    )
    return items


def _flat_tool(spec: Mapping[str, object]) -> JsonObject:
    function = spec.get("function")
    if not isinstance(function, Mapping):
        raise VeridicError(
            f"a chat-completions tool spec without a function ({sorted(spec)!r}) cannot be "
            "sent to the Responses API: pass view.tool_specs('openai') unchanged"
        )
    return {
        "type": "function",
        "name": function.get("name"),
        "description": function.get("description"),
        "parameters": function.get("parameters"),
        "strict": False,
    }


def _foreign(what: str, where: str) -> VeridicError:
    """An answer holding something other than text, reasoning and function calls.

    The gateway sends only function tools from the view, so a custom, hosted or
    server-side tool call is not an answer to its request; skipped, the call would
    leave no record and the model's next turn would build on what it did.
    """
    return VeridicError(
        f"{where}: the answer holds {what}, but the gateway sends only function tools "
        "from the view, and reads only text, reasoning and function calls; nothing of it was "
        "run: do not add tools through options, and check what sits between you and the API"
    )


class _ResponsesAssembler:
    """Responses API events: text deltas as they come, the whole response at the end.

    The user is shown the deltas; the reply is read from the final response, which
    is what is recorded, sent back to the model and run. The two are held to be one
    answer: each text or refusal part's deltas must spell the final response's text of
    that part (no part shown and left out, none recorded unshown), a call the stream
    finished (``response.output_item.done``) must be the final response's call of
    that item, and nothing may follow the final response. A stream that breaks one
    of these is refused whole: a server, or a proxy between it and the application,
    that streamed one answer and ended with another would have the user read one
    thing while another was recorded and run.
    """

    def __init__(self, adapter: OpenAIResponses) -> None:
        self._adapter = adapter
        self._final: object = None
        self._ended = ""
        """the type of the event that carried the final response, once it came"""
        self._reasoning: dict[int, ReasoningItem] = {}
        """output index -> the finished reasoning item of response.output_item.done"""
        self._shown: dict[tuple[object, object], list[str]] = {}
        """(item id, content index) -> the text deltas of that part, as shown"""
        self._calls: dict[object, tuple[object, object, object]] = {}
        """item id -> (call id, name, arguments) of a function call the stream finished"""

    def feed(self, event: object) -> str:
        kind = attr(event, "type")
        if self._ended:
            raise self._void(f"an event of type {clip(str(kind))} came after {self._ended}")
        if kind in _SHOWN_DELTAS:
            delta = text_of(event, "delta", where=repr(self._adapter), default="")
            part = (attr(event, "item_id"), attr(event, "content_index"))
            self._shown.setdefault(part, []).append(delta)
            return delta
        if kind == "response.output_item.done":
            self._item_done(event)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._final = attr(event, "response")
            self._ended = str(kind)
        elif kind == "error":
            raise VeridicError(
                f"{self._adapter!r}: the stream reported an error "
                f"({server_said(attr(event, 'message'), 'no message')}); nothing was answered: "
                "send the request again"
            )
        return ""

    def _item_done(self, event: object) -> None:
        """Keep a finished reasoning item (the one to send back) or function call (to check)."""
        item = attr(event, "item")
        item_kind = attr(item, "type")
        if item_kind == "reasoning":
            index = attr(event, "output_index")
            at = index if isinstance(index, int) else len(self._reasoning)
            self._reasoning[at] = reasoning_item("openai", item, repr(self._adapter))
        elif item_kind == "function_call":
            self._calls[attr(item, "id")] = _call_of(item)

    def _void(self, what: str) -> VeridicError:
        return VeridicError(
            f"{self._adapter!r}: the stream is not one answer: {what}; nothing of it was "
            "recorded or run: send the request again (a proxy between you and the API may be "
            "mangling events)"
        )

    def finish(self) -> Completion:
        if self._final is None:
            raise VeridicError(
                f"{self._adapter!r}: the stream ended before the response was complete (no "
                "response.completed event); the answer is incomplete: send the request again"
            )
        self._check_ending()
        for item in items(self._final, "output"):
            _refuse_streamed_object(attr(item, "arguments"), "a function call", repr(self._adapter))
        completion = self._adapter.parse(self._final)
        if self._ended == "response.incomplete" and not completion.stop_reason:
            # A response of no status (a compatible server's): the event says what it does not.
            completion = replace(completion, stop_reason="incomplete")
        self._check_text()
        self._check_calls()
        if self._reasoning:
            completion = replace(completion, reasoning=self._merged_reasoning())
        return completion

    def _check_ending(self) -> None:
        """Refuse a stream whose last event and the response it carries tell two endings.

        The event says how the answer ended; the adapter reads the response it carries.
        A ``response.failed`` or ``response.incomplete`` event whose response said
        ``completed`` (or said nothing, as a compatible server may) was read as a whole
        answer, and its calls ran, which the provider had said failed or were cut off.
        A ``response.completed`` whose response says it failed or was cut off is read as
        the response says: :meth:`OpenAIResponses.parse` refuses the one, and the calls
        of the other do not run. A ``response.incomplete`` whose response gives no status
        (a compatible server's) is read as incomplete (:meth:`finish`).

        Raises:
            VeridicError: the stream ended with ``response.failed``, or with
                ``response.incomplete`` and a response of another status.
        """
        status = attr(self._final, "status")
        if self._ended == "response.failed":
            message = attr(self._final, "error", "message")
            raise VeridicError(
                f"{self._adapter!r}: the stream ended with response.failed "
                f"({server_said(message, 'no reason given')}); nothing of it was recorded or "
                "run: fix the request or send it again"
            )
        if self._ended == "response.incomplete" and status not in _INCOMPLETE:
            raise self._void(
                f"it ended with response.incomplete, whose response has status {clip(str(status))}"
            )

    def _merged_reasoning(self) -> tuple[ReasoningItem, ...]:
        """The final response's reasoning items, each replaced by the stream's finished copy
        of its output index, and finished items the final response left out, in order.

        The API documents the finished item of ``output_item.done`` as the one to send
        back; the final response's copy is the fallback, item by item: a stream that
        finished fewer items than the final response holds would otherwise lose the
        others, and they would never be sent back.
        """
        where = repr(self._adapter)
        merged = {
            index: reasoning_item("openai", item, where)
            for index, item in enumerate(items(self._final, "output"))
            if attr(item, "type") == "reasoning"
        }
        merged.update(self._reasoning)
        return tuple(item for _, item in sorted(merged.items()))

    def _check_text(self) -> None:
        """Each text or refusal part the user was shown is the final response's part, and
        no other."""
        held: dict[tuple[object, object], str] = {}
        for item in items(self._final, "output"):
            if attr(item, "type") == "message":
                for index, part in enumerate(items(item, "content")):
                    held[(attr(item, "id"), index)] = _part_text(part, repr(self._adapter))
        for key in sorted(held.keys() | self._shown.keys(), key=repr):
            shown = "".join(self._shown.get(key, ()))
            if shown != held.get(key, ""):
                raise self._void(
                    f"item {clip(str(key[0]))} part {key[1]}: the stream showed {clip(shown)}, "
                    f"the final response holds {clip(held.get(key, ''))}"
                )

    def _check_calls(self) -> None:
        """Each call the stream finished is the final response's call of that item."""
        final = {
            attr(item, "id"): _call_of(item)
            for item in items(self._final, "output")
            if attr(item, "type") == "function_call"
        }
        for item_id, finished in self._calls.items():
            if final.get(item_id) != finished:
                raise self._void(
                    f"item {clip(str(item_id))} finished as a call {clip(str(finished))}, "
                    f"the final response holds {clip(str(final.get(item_id)))}"
                )


_INCOMPLETE: Final = frozenset({"incomplete", "", None})
"""The statuses of the response a ``response.incomplete`` event may carry: its own, or none."""

_SHOWN_DELTAS: Final = frozenset({"response.output_text.delta", "response.refusal.delta"})
"""The events whose deltas the user is shown: the text parts and the refusals the reply holds."""


def _call_of(item: object) -> tuple[object, object, object]:
    """What of a function call item decides what runs: its call id, name and arguments."""
    return (attr(item, "call_id"), attr(item, "name"), attr(item, "arguments"))
