"""``ScriptedProvider``: a provider that answers from a script, for tests (no SDK, no network).

An application tests its agent loop through the real :class:`~veridic.ModelGateway`
(the same checks, the same records) with answers written in the test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final

from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.providers._base import PARTS, Adapter, Completion, SpecFormat, attr, usage_of
from veridic.providers.openai import responses_request
from veridic.text.prompt import Prompt, ReasoningItem, ToolCall
from veridic.tools.tool import JsonObject

__all__ = ["ScriptedProvider"]

_DONE: Final = "done"


class ScriptedProvider(Adapter):
    """Answers each request with the next answer of ``script``, and keeps the requests.

    An answer is a mapping with ``"text"`` (default ``""``), ``"tool_calls"``
    (``(id, name, arguments)`` triples, arguments as JSON text or a mapping),
    ``"reasoning"`` (:class:`~veridic.ReasoningItem` s, the answer's reasoning),
    ``"usage"`` (``{"input_tokens": n, "output_tokens": m}``, the answer's tokens,
    with the :class:`~veridic.Usage` parts by their names if the test needs them)
    and ``"stop_reason"`` (default ``"tool_calls"`` when there are calls, else
    ``"stop"``). The request is rendered in ``spec_format``'s shape (the
    OpenAI chat or the Anthropic one; with ``responses=True``, the OpenAI
    Responses input that :class:`~veridic.OpenAIResponses` sends, the shape
    that carries OpenAI reasoning items), so a test can read what a provider
    would have been sent, and rendering refuses reasoning items that shape
    cannot carry, as the real adapter does. Streaming gives the text one word
    at a time. ``asynchronous=True`` answers as an SDK's async client does
    (for :meth:`~veridic.ModelGateway.asend`, ``astream``, ``arun`` and
    ``aresume``).

    >>> provider = ScriptedProvider([{"text": "Hello there"}])
    >>> provider.requests
    []

    Raises:
        VeridicError: ``responses=True`` with ``spec_format="anthropic"``; when
            asked to answer, the script has no answer left, or an answer's
            reasoning is not a sequence of ``ReasoningItem``.
    """

    api = "scripted"
    owned = frozenset({"messages", "tools", "system", "input", "instructions"})

    __slots__ = ("_answers", "_asynchronous", "_lock", "requests", "responses", "spec_format")

    def __init__(
        self,
        script: Iterable[Mapping[str, object]],
        *,
        model: str = "scripted",
        spec_format: SpecFormat = "openai",
        responses: bool = False,
        options: Mapping[str, object] | None = None,
        asynchronous: bool = False,
    ) -> None:
        if responses and spec_format != "openai":
            raise VeridicError(
                f"ScriptedProvider(spec_format={spec_format!r}, responses=True): the Responses "
                "shape is OpenAI's; pass spec_format='openai' with it, or drop responses=True "
                "for the Anthropic shape"
            )
        self._answers: list[Mapping[str, object]] = list(script)
        self._lock = threading.Lock()
        self.requests: list[JsonObject] = []
        """Every request sent, in order, as the provider would have received it."""
        self.spec_format = spec_format
        self.responses = responses
        self._asynchronous = asynchronous is True
        super().__init__(None, model, options)

    def method(self) -> Callable[..., object]:
        return self._async_answer if self._asynchronous else self._answer

    async def _async_answer(self, **request: object) -> object:
        answer = self._answer(**request)
        return _AsyncEvents(answer) if isinstance(answer, Iterator) else answer

    def render(self, prompt: Prompt, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        if self.spec_format == "anthropic":
            rendered = prompt.to_anthropic()
            return {"system": rendered["system"], "messages": rendered["messages"], "tools": specs}
        if self.responses:
            return responses_request(prompt, specs)
        return {"messages": prompt.to_openai(), "tools": specs}

    def parse(self, response: object) -> Completion:
        calls = tuple(_call(item) for item in _items(attr(response, "tool_calls")))
        text = attr(response, "text")
        stop = attr(response, "stop_reason")
        return Completion(
            text=text if isinstance(text, str) else "",
            tool_calls=calls,
            stop_reason=stop if isinstance(stop, str) else ("tool_calls" if calls else "stop"),
            response_id=f"scripted-{len(self.requests)}",
            model=self.model,
            reasoning=_reasoning(attr(response, "reasoning")),
            usage=usage_of(
                response,
                ("input_tokens",),
                ("output_tokens",),
                where=repr(self),
                parts={part: (part,) for part in PARTS},
            ),
        )

    def assembler(self) -> _ScriptedAssembler:
        return _ScriptedAssembler(self)

    def _answer(self, **request: object) -> object:
        stream = request.pop("stream", False)
        with self._lock:
            self.requests.append(request)
            if not self._answers:
                raise VeridicError(
                    f"ScriptedProvider was asked for answer {len(self.requests)}, and its "
                    "script has no more: add an answer to the script for every model call"
                )
            answer = self._answers.pop(0)
        if stream:
            return _events(answer)
        return answer


class _AsyncEvents:
    """A scripted stream as an async client gives it: ``async for`` the events."""

    def __init__(self, events: Iterator[object]) -> None:
        self._events = events

    def __aiter__(self) -> _AsyncEvents:
        return self

    async def __anext__(self) -> object:
        try:
            return next(self._events)
        except StopIteration:
            raise StopAsyncIteration from None


def _items(value: object) -> Iterable[object]:
    return value if isinstance(value, list | tuple) else ()


def _reasoning(value: object) -> tuple[ReasoningItem, ...]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        found = tuple(item for item in value if isinstance(item, ReasoningItem))
        if len(found) == len(value):
            return found
    raise VeridicError(
        "a scripted answer's reasoning must be a list of ReasoningItem, got "
        f"{clip(repr(value))}: write it as "
        '[ReasoningItem.of("anthropic", {"type": "thinking", ...})]'
    )


def _call(item: object) -> ToolCall:
    if not isinstance(item, list | tuple) or len(item) != 3:
        raise VeridicError(
            "a scripted tool call must be an (id, name, arguments) triple, got "
            f"{clip(repr(item))}: write it as "
            '("call-1", "get_weather", {"city": "Oslo"})'
        )
    call_id, name, arguments = item
    return ToolCall(str(call_id), str(name), _arguments_text(call_id, name, arguments))


def _arguments_text(call_id: object, name: object, arguments: object) -> str:
    """A scripted call's arguments as the JSON text a provider sends: a model's are JSON.

    Raises:
        VeridicError: they are not text and not JSON values (a set, a datetime).
    """
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise VeridicError(
            f"the arguments of scripted tool call {clip(str(call_id))} of tool "
            f"{clip(str(name))} are not JSON ({error}), got {clip(repr(arguments))}: "
            'write them as JSON values, {"city": "Oslo"}, or as JSON text'
        ) from error


def _events(answer: Mapping[str, object]) -> Iterator[object]:
    text = answer.get("text")
    if isinstance(text, str):
        words = text.split(" ")
        for index, word in enumerate(words):
            yield {"delta": word if index == len(words) - 1 else word + " "}
    yield {_DONE: answer}


class _ScriptedAssembler:
    def __init__(self, provider: ScriptedProvider) -> None:
        self._provider = provider
        self._final: object = None

    def feed(self, event: object) -> str:
        delta = attr(event, "delta")
        if isinstance(delta, str):
            return delta
        self._final = attr(event, _DONE)
        return ""

    def finish(self) -> Completion:
        if self._final is None:
            raise VeridicError("the scripted stream ended without its answer: a bug in the test")
        return self._provider.parse(self._final)
