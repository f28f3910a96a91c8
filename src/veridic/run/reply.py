"""What a model call gives back: the answer, and what became of its tool calls.

A :class:`Reply` keeps, beside the model's text and calls, the hashes of its
model-call record and the view it was asked with, so its calls run against that
view and their audit records name the same prompt; a :class:`ToolOutcome` pairs
a call with its result, which is how the next turn answers it. The streams hand
the text out as it arrives and give the same :class:`Reply` once read to their
end, so code that streams and code that waits handle one kind of answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Self

from veridic._sample import clip, first_few
from veridic.errors import VeridicError
from veridic.providers._base import Assembler, Completion, Usage
from veridic.run import telemetry as _telemetry
from veridic.run.deferred import call_arguments
from veridic.run.executor import CallResult
from veridic.text.compose import Composer
from veridic.text.prompt import ReasoningItem, ToolCall
from veridic.text.provenance import UntrustedText
from veridic.tools.view import ToolView

__all__ = [
    "AsyncReplyStream",
    "Reply",
    "ReplyStream",
    "ToolOutcome",
]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """One tool call of a :class:`Reply` and what became of it (its audit record inside)."""

    call: ToolCall
    result: CallResult

    @property
    def text(self) -> UntrustedText:
        """What to tell the model: :attr:`CallResult.told <veridic.CallResult.told>`.

        Untrusted text (source ``tool:<name>``): a tool's output is data, and
        :meth:`Composer.tool_result` fences it.
        """
        return self.result.told


@dataclass(frozen=True, slots=True)
class Reply:
    """The model's answer to one gateway call, and what its tool calls are checked against.

    ``tool_calls`` keep the arguments as the JSON text the model wrote.
    ``reasoning`` holds the answer's reasoning items (Anthropic thinking
    blocks, OpenAI Responses reasoning items) in order, exactly as the API
    returned them; ``()`` for an API or a model without any.
    ``prompt_sha256`` and ``tools_sha256`` are those of the model-call record;
    :meth:`ModelGateway.run_tools <veridic.ModelGateway.run_tools>` writes them into every
    tool call's record.
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    stop_reason: str
    response_id: str
    model: str
    request_id: str
    prompt_sha256: str
    tools_sha256: str
    view: ToolView = field(repr=False, compare=False)
    reasoning: tuple[ReasoningItem, ...] = ()
    usage: Usage | None = None
    """The tokens the provider counted for this call (``None`` where it did not say: a
    stream asked without usage)."""
    latency: float = 0.0
    """Seconds from sending the request to the whole answer (a stream's last event)."""
    options_sha256: str = ""
    """SHA-256 of the canonical JSON of the request's options: what the model was given
    besides the prompt and the tool list (a structured-output schema, ``prediction``,
    sampling settings; docs/providers.md says which). A reply rebuilt from a
    :class:`~veridic.PausedRun` (a resume's, whose calls waited) carries the paused
    call's; ``""`` when the paused run is of format 4 or earlier, which did not keep it."""

    def record(self, composer: Composer, outcomes: Sequence[ToolOutcome] = ()) -> Composer:
        """Append this answer to ``composer``: the assistant turn, its calls, their results.

        The next prompt built from ``composer`` then answers every call it
        lists in ``outcomes`` (the gateway refuses a prompt with calls left
        unanswered). Arguments that are not a JSON object are recorded as
        ``{"_unparsed": <text>}``.

        Anthropic thinking blocks go on the turn: with extended thinking and
        tool use the Messages API refuses the next request without them (a
        prompt holding them goes to Anthropic only). OpenAI reasoning items
        stay on ``reasoning`` and are not put on the turn: the Responses
        API ties each to the ids of the output items that followed it, which
        a stateless replay of the turn does not send, and it refuses the pair
        half-sent, while it accepts a turn without its reasoning (the model
        reasons again). Put them on a turn yourself with
        ``composer.assistant(text, reasoning=...)`` where your setup replays
        them in full.
        """
        carried = tuple(item for item in self.reasoning if item.provider == "anthropic")
        if self.text or carried or not self.tool_calls:
            composer.assistant(self.text, reasoning=carried)
        for call in self.tool_calls:
            composer.tool_call(call.id, call.name, call_arguments(call))
        for outcome in outcomes:
            composer.tool_result(outcome.call.id, outcome.text, error=not outcome.result.ok)
        return composer


_CUT_OFF: Final = frozenset(
    {
        "length",  # OpenAI Chat: max_tokens / max_completion_tokens
        "content_filter",  # OpenAI Chat: the filter stopped the answer
        "max_tokens",  # Anthropic
        "model_context_window_exceeded",  # Anthropic: the answer filled the context window
        "refusal",  # Anthropic: a safety classifier stopped the answer mid-way
        "pause_turn",  # Anthropic: the server paused the turn before the model ended it
        # OpenAI-compatible servers:
        "insufficient_system_resource",  # DeepSeek: its servers could not finish the answer
        "model_length",  # Mistral: the answer filled the context window
        "error",  # OpenRouter, Mistral: the generation failed mid-way
        "abort",  # vLLM: the generation was aborted
        # Other providers, through an application's own adapter:
        "safety",  # Gemini: a safety filter stopped the answer
        "recitation",  # Gemini: the answer recited a source too closely
        "blocklist",  # Gemini: a blocked term stopped the answer
        "prohibited_content",  # Gemini
        "spii",  # Gemini: sensitive personal information stopped the answer
        "malformed_function_call",  # Gemini: the call the model wrote could not be read
        "unexpected_tool_call",  # Gemini: the model called a tool the request did not allow
        "too_many_tool_calls",  # Gemini: the model was stopped mid-way through its calls
        "language",  # Gemini: an unsupported language stopped the answer
        "image_safety",  # Gemini
        "image_prohibited_content",  # Gemini
        "guardrail_intervened",  # Bedrock Converse: a guardrail stopped the answer
        "content_filtered",  # Bedrock Converse
    }
)
"""Stop reasons of an answer the provider ended before the model did, in lower case (a
stop reason is matched in any case: Gemini and Cohere say ``MAX_TOKENS``); OpenAI
Responses says ``incomplete``, with or without a reason: see :func:`_check_whole`."""


_ENDED: Final = frozenset(
    {
        "stop",  # OpenAI Chat and the compatible servers; Gemini (STOP)
        "tool_calls",  # OpenAI Chat and the compatible servers
        "function_call",  # OpenAI Chat: the legacy call shape
        "completed",  # OpenAI Responses (its status)
        "end_turn",  # Anthropic, Bedrock Converse
        "tool_use",  # Anthropic, Bedrock Converse
        "stop_sequence",  # Anthropic, Bedrock Converse, Hugging Face TGI
        "eos_token",  # Hugging Face TGI: the model wrote its end-of-sequence token
        "complete",  # Cohere (COMPLETE)
        "tool_call",  # Cohere (TOOL_CALL)
    }
)
"""Stop reasons of an answer the model ended itself (or ended to ask for tools), in lower
case: the only ones whose calls run. Any other, an empty one included, may be an answer cut
off mid-call (a reason added by a provider after this list, an adapter's own word), so its
calls are refused as those of a cut-off answer are: the list fails closed. veridic's own
``paused`` is not on it (see :class:`_ResumedReply`): a provider may say that word too."""


@dataclass(frozen=True, slots=True)
class _ResumedReply(Reply):
    """The waiting calls of a paused run, as ``resume()`` takes them up (stop reason
    ``paused``).

    A :class:`~veridic.PausedRun` does not keep its answer's stop reason, which was checked
    when the run paused (a run pauses only after :func:`_check_whole` passed), so the reply
    rebuilt from it is told apart by its class, not by a word a provider could send too:
    a server that paused its answer before the model ended it may say ``paused``.
    """


def _check_whole(reply: Reply, where: str) -> None:
    """Refuse to run the calls of an answer unless its stop reason says the model ended it.

    A call cut off at the output limit may still be valid JSON: the provider
    closes what it had (Anthropic's ``tool_use`` input is parsed from the
    tokens that came), so a path, a filter or a list of ids cut short would
    run as a call the model never finished writing, often a wider one. A
    stop reason veridic does not know cannot say the answer is whole, so the
    calls run only for one of :data:`_ENDED` (in any case); a known cut-off
    reason (:data:`_CUT_OFF`, a Responses ``incomplete``) gets its own message.
    An answer without calls is not checked: its text is the model's to read; nor
    is a resumed run's :class:`_ResumedReply`, checked when the run paused.

    An application whose adapter (or server) says the model ended in another word
    maps it in the adapter: a subclass whose ``parse()`` (and, for streams, its
    assembler's ``finish()``) returns the :class:`~veridic.providers.Completion`
    with ``stop_reason`` set to one veridic knows. No parameter widens the list:
    a reason let through by mistake runs a cut-off call with nothing said.

    Raises:
        VeridicError: ``reply`` has tool calls and its stop reason says it was cut
            off, or is one veridic does not know (or empty); raised before any call runs.
    """
    if not reply.tool_calls or isinstance(reply, _ResumedReply):
        return
    said = reply.stop_reason.lower()
    if said in _ENDED:
        return
    names = first_few(sorted({call.name for call in reply.tool_calls}))
    request = clip(reply.request_id)
    if said in _CUT_OFF or said.split(":")[0] == "incomplete":
        raise VeridicError(
            f"{where}: the model's answer to request {request} was cut off "
            f"(stop reason {clip(reply.stop_reason)}) while it held calls of {names}, whose "
            "arguments may be cut short too: none of them ran (the model call is recorded); "
            "send the request again with a larger output limit (max_tokens, "
            "max_output_tokens) or ask for less at once (a filter or a refusal that stopped "
            "it: rephrase the request)"
        )
    stop = f"stop reason {clip(reply.stop_reason)}" if said else "no stop reason"
    raise VeridicError(
        f"{where}: the model's answer to request {request} came with {stop}, which is not one "
        f"veridic knows to mean the model ended its answer, while it held calls of {names}, "
        "which may be cut short: none of them ran (the model call is recorded); an adapter "
        "of your own (or a subclass of a built-in one for a server that says this) maps the "
        "reason in its parse() (and its assembler's finish()) to one that does, such as "
        "'stop' or 'tool_calls' (docs/providers.md lists them), or to 'length' when it "
        "means the output was cut off"
    )


class _Streamed:
    """What both stream kinds share: the whole answer, once the stream is read to its end."""

    _reply: Reply | None
    _loop: str
    _span: _telemetry.ChatSpan
    _assembler: Assembler

    @property
    def reply(self) -> Reply:
        """The whole answer.

        Raises:
            VeridicError: the stream has not been read to its end.
        """
        if self._reply is None:
            raise VeridicError(
                "the streamed reply is not complete: iterate the stream to its end "
                f"({self._loop}) before reading stream.reply"
            )
        return self._reply


class ReplyStream(_Streamed):
    """A streamed answer: iterate it for the text as it arrives; then read :attr:`reply`.

    Use it as a context manager (or call :meth:`close`) so the connection is
    released when the loop stops early.
    """

    _loop = "for text in stream: ..."

    def __init__(
        self,
        events: Iterator[object],
        close: Callable[[], object],
        assembler: Assembler,
        done: Callable[[Completion], Reply],
        *,
        span: _telemetry.ChatSpan = _telemetry.NO_CHAT,
    ) -> None:
        self._events = events
        self._close = close
        self._assembler = assembler
        self._done = done
        self._reply: Reply | None = None
        self._closed = False
        self._span = span
        span.held_by(self)

    def __iter__(self) -> Self:
        return self

    def _answered(self) -> Reply:
        """The whole answer, once the events have ended; the model call's span ends with it."""
        try:
            reply = self._done(self._assembler.finish())
        except BaseException as error:
            self._span.failed(error)
            raise
        return self._span.answered(reply)

    def __next__(self) -> str:
        while not self._closed:
            try:
                # An event that does not fit (the assembler raises) voids the answer as a
                # failed read does.
                text = self._assembler.feed(next(self._events))
            except StopIteration:
                self._release()
                self._reply = self._answered()
                raise
            except BaseException as error:
                self._span.failed(error)
                self.close()
                raise
            if text:
                return text
        raise StopIteration

    def close(self) -> None:
        """Release the connection (idempotent); the model call's span ends here at the latest."""
        self._span.closed()
        self._release()

    def _release(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncReplyStream(_Streamed):
    """:class:`ReplyStream` for async code: ``async for`` the text, then :attr:`reply`."""

    _loop = "async for text in stream: ..."

    def __init__(
        self,
        events: AsyncIterator[object],
        close: Callable[[], Awaitable[object]],
        assembler: Assembler,
        done: Callable[[Completion], Awaitable[Reply]],
        *,
        span: _telemetry.ChatSpan = _telemetry.NO_CHAT,
    ) -> None:
        self._events = events
        self._close = close
        self._assembler = assembler
        self._done = done
        self._reply: Reply | None = None
        self._closed = False
        self._span = span
        span.held_by(self)

    def __aiter__(self) -> Self:
        return self

    async def _answered(self) -> Reply:
        """The whole answer, its record awaited; the model call's span ends with it."""
        try:
            reply = await self._done(self._assembler.finish())
        except BaseException as error:
            self._span.failed(error)
            raise
        return self._span.answered(reply)

    async def __anext__(self) -> str:
        while not self._closed:
            try:
                # An event that does not fit (the assembler raises) voids the answer as a
                # failed read does.
                text = self._assembler.feed(await anext(self._events))
            except StopAsyncIteration:
                await self._release()
                self._reply = await self._answered()
                raise
            except BaseException as error:
                self._span.failed(error)
                await self.aclose()
                raise
            if text:
                return text
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Release the connection (idempotent); the model call's span ends here at the latest."""
        self._span.closed()
        await self._release()

    async def _release(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
