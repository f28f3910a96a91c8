"""An answer read from its own JSON text, a key given twice kept.

The SDKs read an answer with ``json.loads``, which keeps the last value of a key given
twice: a call whose arguments arrive as a JSON object (Anthropic's ``tool_use`` input,
a chat call's ``arguments`` from an OpenAI-compatible server that sends an object)
would run for ``{"city": "Bergen"}`` where the model wrote ``{"city": "Oslo", "city":
"Bergen"}``, with nothing said. The adapters send through the SDK's
``with_raw_response`` and read the answer's text here, so such arguments reach the
dispatcher as written, and are refused there as arguments that read two ways.

The raw form is bound to the ``create`` the client has when the request is sent
(:func:`raw_create`), so a patch of ``create`` sees every request. A stream's events are
read the same way, each from its own text (:func:`raw_events`).

A key given twice anywhere else in the answer (a call's ``id`` or ``name``, a block's
``type``, a message's ``role``) refuses the whole answer: the adapter would read the
last value, as the SDK does, while a log, a proxy or another client that keeps the
first would see another call, another tool run.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Final, Generic, TypeVar, cast

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.providers._base import arguments_json, attr

__all__ = ["araw_events", "raw_answer", "raw_arguments", "raw_create", "raw_events"]


def raw_create(resource: object) -> Callable[..., object] | None:
    """``resource.with_raw_response.create``, calling the ``create`` the resource has now;
    ``None`` when the resource has no raw form (a client that is not the SDK's).

    The SDK binds ``with_raw_response`` to ``create`` when it is first read, and keeps it:
    a patch of ``create`` made later (on the client, or on its class: an observability
    library, a wrapper of the application's) saw no request sent whole, and one removed
    later was still called. When ``create`` is not the one the kept form calls, a raw
    form is made anew for this send (what the SDK does when it is first read), so the
    patch is called, as ``with_raw_response`` calls ``create``: with the SDK's
    raw-response header, giving back the SDK's raw response.

    Only a raw form of the SDK's (a class of :data:`_SDKS`) is made anew: a client of the
    application's whose raw ``create`` wraps another function (``functools.wraps``) is
    called as it is.
    """
    raw = attr(resource, "with_raw_response")
    create = attr(raw, "create")
    if not callable(create):
        return None
    kept = getattr(create, "__wrapped__", None)
    if kept is None or not type(raw).__module__.startswith(_SDKS):
        return create  # not a raw form the SDK made: called as it is
    now = attr(resource, "create")
    if type(kept) is type(now) and kept == now:
        return create  # the usual send: nothing was patched since the raw form was made
    # The SDK's raw forms are made of their resource alone (``type(raw)(resource)``).
    remake = cast("Callable[[object], object]", type(raw))
    fresh = attr(remake(resource), "create")
    return fresh if callable(fresh) else create


_SDKS: Final = ("openai.", "anthropic.")
"""The packages whose raw forms :func:`raw_create` makes anew: made of their resource
alone, their ``create`` bound to the resource's."""

_SDK_NAMES: Final = frozenset(name.rstrip(".") for name in _SDKS)
"""The SDKs' top modules, where their streams are re-exported from (``openai.Stream``)."""


def raw_answer(response: object, where: str) -> object:
    """The answer in ``response``: the SDK's ``Message`` as it is, or the JSON text of a raw
    answer (``with_raw_response``) read into dicts, a key given twice in a call's arguments
    kept (:class:`_Twice`) for the dispatcher to refuse.

    Raises:
        VeridicError: the raw answer's text is not a JSON object, or gives a key twice
            outside a call's arguments (naming the key and where).
    """
    http = attr(response, "http_response")
    body = attr(http, "text")
    if http is None or not isinstance(body, str):
        return response
    return _decoded(body, where)


def _decoded(body: str, where: str) -> object:
    """The JSON object ``body`` (an answer sent whole, or one event of a stream), a key
    given twice in a call's arguments kept (:class:`_Twice`).

    Raises:
        VeridicError: ``body`` is not a JSON object, or gives a key twice outside a call's
            arguments.
    """
    twice: list[_Twice] = []

    def pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
        if len({key for key, _ in pairs}) == len(pairs):
            return dict(pairs)
        made = _Twice(pairs)
        twice.append(made)
        return made

    try:
        decoded: object = json.loads(body, object_pairs_hook=pairs)
    except (ValueError, RecursionError) as error:
        raise VeridicError(
            f"{where}: the answer is not JSON ({clip(body, 80)}): {error}; nothing of it "
            "was run: check what sits between you and the API"
        ) from error
    if not isinstance(decoded, dict):
        raise VeridicError(
            f"{where}: the answer is JSON but not an object ({clip(body, 80)}); nothing of "
            "it was run: check what sits between you and the API"
        )
    if twice:  # the usual answer gives no key twice: nothing more to read
        _refuse_twice_outside_arguments(decoded, where)
    return decoded


def raw_events(events: Iterable[object], where: str) -> Iterable[object]:
    """``events``, the SDK's stream, with each event read from its own JSON text as an
    answer sent whole is (:func:`raw_answer`).

    The SDK reads each event with ``json.loads``, which keeps the last value of a key
    given twice: a streamed call's ``{"name": "delete_all", "name": "get_weather"}`` or
    a ``tool_use`` block's ``input`` of ``{"city": "Oslo", "city": "Bergen"}`` was read
    one way by the adapter and the other by a log or a proxy, with nothing said. Now a
    key given twice outside a call's arguments refuses the stream, and one inside them
    reaches the adapter as the arguments' text as written (the SDK's object gives it no
    other place), for the dispatcher to refuse, as it refuses the answer sent whole.

    The SDK's stream (of a class made of one of :data:`_SDKS`, an application's subclass
    too) has its decoder swapped, and is given back wrapped so that an item that did not
    come through the swapped decoder refuses the stream: an SDK version that reads its
    events another way is refused, never read unchecked. Any other iterable of events (a
    client or a wrapper of the application's own) is given back as it is, as the answer
    of such a client sent whole is read as it gives it.

    Raises:
        VeridicError: the SDK's stream keeps no decoder where this reads it, or the
            client gave an SDK's answer sent whole (a ``Message``, iterable over its
            fields) for a stream (the stream is closed first: an async one's by
            :func:`araw_events`).
    """
    refused = _unread(events, where)
    if refused is not None:
        close = getattr(events, "close", None)
        if callable(close):
            close()
        raise refused
    if not _of_sdk_stream(events):
        return events
    return _ReadStream(events, _swapped(events, where))


async def araw_events(events: AsyncIterable[object], where: str) -> AsyncIterable[object]:
    """:func:`raw_events` of the SDK's async stream: a stream refused is closed, awaited.

    Raises:
        VeridicError: as :func:`raw_events`.
    """
    refused = _unread(events, where)
    if refused is not None:
        close = getattr(events, "close", None)
        closing = close() if callable(close) else None
        if inspect.isawaitable(closing):
            await closing
        raise refused
    if not _of_sdk_stream(events):
        return events
    return _AsyncReadStream(events, _swapped(events, where))


def not_a_stream(events: object, where: str, *, kind: str) -> VeridicError:
    """Why ``events``, what the client gave a stream request, is no ``kind`` of events:
    an SDK's answer sent whole (a blocking wrapper's ``ChatCompletion`` in async code
    too) is told as such, not as an SDK version to check."""
    if _of_sdk_stream(events) and _of_model(events):
        return _sent_whole(events, where)
    return VeridicError(
        f"{where}: the SDK answered a streaming request with {a_type(events)}, not {kind} "
        "of events; check that the installed SDK version is one the extra allows"
    )


def _sent_whole(events: object, where: str) -> VeridicError:
    """The refusal of an SDK's answer sent whole, given for a stream request."""
    return VeridicError(
        f"{where}: the client answered a stream request with {type(events).__name__}, "
        "an answer sent whole, not a stream of events; nothing of it was read: give "
        "stream=True through to the SDK's create (a wrapper of create must give back "
        "the stream the SDK made), or send the request with send() instead"
    )


def _unread(events: object, where: str) -> VeridicError | None:
    """Why the SDK's stream ``events`` cannot be read from its events' own text (it is an
    answer sent whole, or keeps no decoder where :func:`_swapped` swaps it), or ``None``."""
    if not _of_sdk_stream(events):
        return None
    decoder = getattr(events, "_decoder", None)
    if all(callable(getattr(decoder, read, None)) for read in ("iter_bytes", "aiter_bytes")):
        return None
    if _of_model(events):
        return _sent_whole(events, where)
    return VeridicError(
        f"{where}: the SDK's stream ({type(events).__name__}) keeps no event decoder where "
        "veridic reads it (its _decoder), so its events could not be read from their own "
        "text and a key given twice would pass unseen; nothing of it was read: check that "
        "the installed SDK version is one the extra allows"
    )


def _swapped(events: object, where: str) -> _RawDecoder:
    """The decoder put in place of the SDK's stream's own (:func:`_unread` found it)."""
    swapped = _RawDecoder(getattr(events, "_decoder"), where)  # noqa: B009 - an SDK stream's
    setattr(events, "_decoder", swapped)  # noqa: B010 - an SDK stream's
    return swapped


def _of_model(events: object) -> bool:
    """Whether ``events`` is an SDK's model (a pydantic ``BaseModel``: a ``Message``, a
    ``ChatCompletion``), which iterates over its fields, not a stream. Named by class, as
    the core imports neither pydantic nor an SDK."""
    return any(
        (kind.__module__, kind.__name__) == ("pydantic.main", "BaseModel")
        for kind in type(events).__mro__
    )


def _of_sdk_stream(events: object) -> bool:
    """Whether ``events`` is of a class made of one of :data:`_SDKS`'s (an application's
    subclass of the SDK's ``Stream`` too)."""
    return any(_of_sdk(kind) for kind in type(events).__mro__)


def _of_sdk(kind: type) -> bool:
    """Whether ``kind`` is a class of one of :data:`_SDKS` (``openai.Stream`` is re-exported
    from the top module)."""
    module = kind.__module__
    return module in _SDK_NAMES or module.startswith(_SDKS)


_Stream = TypeVar("_Stream", Iterable[object], AsyncIterable[object])
"""The stream a :class:`_Closing` wraps: the SDK's sync stream or its async one."""


class _Closing(Generic[_Stream]):
    """The SDK's stream and the decoder swapped into it, closed as the stream closes (an
    async stream's ``close`` gives an awaitable, given back to be awaited)."""

    __slots__ = ("_decoder", "_stream")

    def __init__(self, stream: _Stream, decoder: _RawDecoder) -> None:
        self._stream: _Stream = stream
        self._decoder = decoder

    def close(self) -> object:
        close = getattr(self._stream, "close", None)
        return close() if callable(close) else None


class _ReadStream(_Closing[Iterable[object]]):
    """The SDK's stream, each item it gives checked to come from an event the swapped
    decoder read (:meth:`_RawDecoder.check`)."""

    __slots__ = ()

    def __iter__(self) -> Iterator[object]:
        for item in self._stream:
            self._decoder.check()
            yield item


class _AsyncReadStream(_Closing[AsyncIterable[object]]):
    """:class:`_ReadStream` of the SDK's async stream."""

    __slots__ = ()

    async def __aiter__(self) -> AsyncIterator[object]:
        async for item in self._stream:
            self._decoder.check()
            yield item


class _RawDecoder:
    """An SDK's server-sent-event decoder whose events read their JSON with :func:`_event_json`.

    It has only what the SDK's streams read of their decoder (``iter_bytes``,
    ``aiter_bytes``): anything else an SDK version reads of it is refused by name, not
    answered for the SDK's decoder.
    """

    __slots__ = ("_decoder", "_read", "_where")

    def __init__(self, decoder: object, where: str) -> None:
        self._decoder = decoder
        self._where = where
        self._read = False

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        raise VeridicError(
            f"{self._where}: the SDK's stream reads its event decoder's {clip(name)}, which "
            "veridic does not read for it, so its events could not be read from their own "
            "text: check that the installed SDK version is one the extra allows"
        )

    def check(self) -> None:
        """Refuse an item of the stream when no event came through this decoder: the SDK
        read its events another way, with ``json.loads``, and a key given twice would pass
        unseen.

        Raises:
            VeridicError: no event was read through this decoder.
        """
        if not self._read:
            raise VeridicError(
                f"{self._where}: the SDK's stream read its events past the decoder veridic "
                "gave it (with json.loads, where a key given twice passes unseen); nothing "
                "of it was run: check that the installed SDK version is one the extra allows"
            )

    def iter_bytes(self, chunks: Iterator[bytes]) -> Iterator[object]:
        for event in getattr(self._decoder, "iter_bytes")(chunks):  # noqa: B009 - the SDK's decoder
            self._read = True
            yield _RawEvent(event, self._where)

    async def aiter_bytes(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[object]:
        async for event in getattr(self._decoder, "aiter_bytes")(chunks):  # noqa: B009
            self._read = True
            yield _RawEvent(event, self._where)


class _RawEvent:
    """One server-sent event as the SDK's decoder gave it, its ``json()`` read as written."""

    __slots__ = ("_event", "_where")

    def __init__(self, event: object, where: str) -> None:
        self._event = event
        self._where = where

    def __getattr__(self, name: str) -> object:
        return getattr(self._event, name)

    def json(self) -> object:
        data = getattr(self._event, "data", None)
        if not isinstance(data, str):
            raise VeridicError(
                f"{self._where}: a streamed event holds no text ({type(data).__name__}); "
                "nothing of it was run: check that the installed SDK version is one the extra "
                "allows"
            )
        return _event_json(_decoded(data, self._where), self._where)


def _event_json(decoded: object, where: str) -> object:
    """``decoded`` with each ``tool_use`` input that gives a key twice as its text as written.

    The SDK builds its event object from what ``json()`` gives, and keeps the last value
    of a key given twice; the text keeps every one, and the Anthropic adapter reads an
    input's text as the model wrote it. A chat or Responses call's ``arguments`` that come
    as an object stay one: those adapters refuse a stream that sends them so
    (``veridic.providers.openai._refuse_streamed_object``), a key given twice or not.
    """
    todo = [decoded]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if key == _STREAMED_INPUT and _holds_twice(child):
                    value[key] = raw_arguments(child, where)
                else:
                    todo.append(child)
        elif isinstance(value, list):
            todo.extend(value)
    return decoded


_ARGUMENTS: Final = frozenset({"arguments", "input"})
"""The keys under which an answer gives a call's arguments (a chat or Responses call's
``arguments``, an Anthropic ``tool_use`` block's ``input``): a key given twice in them
reaches the dispatcher as written, which refuses the call by name."""


_STREAMED_INPUT: Final = "input"
"""The key under which a stream gives a call's arguments as an object that an adapter reads
(an Anthropic ``tool_use`` block's): :func:`_event_json` gives the SDK its text."""


def _refuse_twice_outside_arguments(decoded: object, where: str) -> None:
    """Refuse an answer that gives a key twice outside a call's arguments.

    Raises:
        VeridicError: naming the first such key and the path to its object.
    """
    todo: list[tuple[object, str]] = [(decoded, "")]
    while todo:
        value, path = todo.pop()
        if isinstance(value, _Twice):
            key = _repeated(value.pairs)
            raise VeridicError(
                f"{where}: the answer gives the key {clip(key)} twice (in the object at "
                f"{clip(path or 'the top', 80)}): the adapter would read its last value, a "
                "log, a proxy or another client that keeps the first would read another "
                "answer (another call id, another tool); nothing of it was run: check what "
                "sits between you and the API"
            )
        if isinstance(value, dict):
            todo.extend(
                (child, f"{path}.{key}" if path else key)
                for key, child in reversed(value.items())
                if key not in _ARGUMENTS
            )
        elif isinstance(value, list):
            todo.extend(
                (item, f"{path}[{index}]") for index, item in reversed(list(enumerate(value)))
            )


def _repeated(pairs: tuple[tuple[str, object], ...]) -> str:
    """The first key of ``pairs`` given a second time."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise ValueError("no key is given twice")  # a _Twice is made only of pairs that repeat one


class _Twice(dict[str, object]):
    """A JSON object that gives a key more than once: its last values, as ``json.loads``
    keeps them, and in ``pairs`` every key and value as written."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        super().__init__(pairs)
        self.pairs = tuple(pairs)


def raw_arguments(value: object, where: str) -> str:
    """A call's arguments given as an object (Anthropic's ``tool_use`` input, a chat call's
    ``arguments`` from a server that sends an object) as JSON text: canonical
    (:func:`~veridic.providers._base.arguments_json`), or as the model wrote it when it
    gives a key twice, for the dispatcher to refuse, as a streamed call's text is kept.

    Raises:
        VeridicError: the input nests too deep to be written again.
    """
    if not _holds_twice(value):
        return arguments_json(value)
    try:
        return _as_written(value)
    except RecursionError as error:
        raise VeridicError(
            f"{where}: a tool call's arguments give a key twice and nest too deep to be read; "
            "nothing of it was run: check what sits between you and the API"
        ) from error


def _holds_twice(value: object) -> bool:
    """Whether ``value`` is, or holds, a :class:`_Twice` (read without recursion)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, _Twice):
            return True
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def _as_written(value: object) -> str:
    """``value`` as JSON text, each key of a :class:`_Twice` written as often as given."""
    if isinstance(value, dict):
        pairs = value.pairs if isinstance(value, _Twice) else tuple(value.items())
        return (
            "{"
            + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_as_written(v)}" for k, v in pairs)
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_as_written(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)
