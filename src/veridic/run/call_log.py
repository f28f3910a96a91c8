"""Where the gateway records the model calls it makes, and what each one answered.

A model call is on record before its request leaves, and its answer when it
comes back, so the gateway needs a store it can write to from blocking code,
from async code, or both. These protocols say what such a store has: an audit
store with them keeps a request's model calls beside its tool calls, and
:class:`ModelCallLog` keeps them in memory where there is no store (tests,
short scripts). The gateway reads a store's writes once, when it is made, so
that its blocking methods refuse a store they could not await before anything
is sent, not at the first write.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from veridic._counted import counted
from veridic.errors import AuditRecordError, VeridicError
from veridic.run.records import ModelCallRecord, ModelReplyRecord

__all__ = [
    "AsyncModelCallSink",
    "AsyncModelReplySink",
    "ModelCallLog",
    "ModelCallSink",
    "ModelReplySink",
]


@runtime_checkable
class ModelCallSink(Protocol):
    """Where model-call records go. ``write_model_call`` must store durably or raise."""

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        """Store ``record``."""
        ...


@runtime_checkable
class ModelReplySink(Protocol):
    """A model-call sink that also keeps what each call answered (usage, latency, stop reason).

    The gateway writes a :class:`ModelReplyRecord` to its ``calls`` sink
    after each answer when the sink has ``write_model_reply``
    (:class:`ModelCallLog` and :class:`~veridic.SQLiteAuditSink` do).
    """

    def write_model_reply(self, record: ModelReplyRecord, /) -> None:
        """Store ``record``."""
        ...


@runtime_checkable
class AsyncModelCallSink(Protocol):
    """:class:`ModelCallSink` for async code: the gateway's async methods await it.

    A ``calls`` sink with only this (no ``write_model_call``) serves
    :meth:`ModelGateway.asend <veridic.ModelGateway.asend>`, ``astream``, ``arun``
    and ``aresume``; the blocking methods refuse it.
    """

    async def awrite_model_call(self, record: ModelCallRecord, /) -> None:
        """Store ``record`` durably, or raise."""
        ...


@runtime_checkable
class AsyncModelReplySink(Protocol):
    """:class:`ModelReplySink` for async code: the gateway's async methods await it."""

    async def awrite_model_reply(self, record: ModelReplyRecord, /) -> None:
        """Store ``record`` durably, or raise."""
        ...


_WriteCall = Callable[[ModelCallRecord], None]
_WriteReply = Callable[[ModelReplyRecord], None]
_AWriteCall = Callable[[ModelCallRecord], Awaitable[None]]
_AWriteReply = Callable[[ModelReplyRecord], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _CallRecords:
    """How the gateway reaches its ``calls`` sink, from blocking code and from the loop.

    Found once, when the gateway is made. Async code awaits the coroutine
    writes, or calls the blocking ones where the sink has no coroutine twin
    (as before there were any); blocking code needs the blocking ones.
    """

    sink: object
    call: _WriteCall | None
    reply: _WriteReply | None
    acall: _AWriteCall
    areply: _AWriteReply | None
    async_only: tuple[str, ...]
    """The blocking writes the sink lacks while it has their coroutine twins."""

    @classmethod
    def of(cls, sink: object) -> _CallRecords | None:
        """The writes of ``sink``; ``None`` when it cannot record model calls at all."""
        call: _WriteCall | None = None
        reply: _WriteReply | None = None
        acall: _AWriteCall | None = None
        areply: _AWriteReply | None = None
        if isinstance(sink, ModelCallSink) and not inspect.iscoroutinefunction(
            sink.write_model_call
        ):
            call = sink.write_model_call
        if isinstance(sink, ModelReplySink) and not inspect.iscoroutinefunction(
            sink.write_model_reply
        ):
            reply = sink.write_model_reply
        if isinstance(sink, AsyncModelCallSink) and inspect.iscoroutinefunction(
            sink.awrite_model_call
        ):
            acall = sink.awrite_model_call
        if isinstance(sink, AsyncModelReplySink) and inspect.iscoroutinefunction(
            sink.awrite_model_reply
        ):
            areply = sink.awrite_model_reply
        async_only = tuple(
            name
            for name, blocking, twin in (
                ("write_model_call", call, acall),
                ("write_model_reply", reply, areply),
            )
            if blocking is None and twin is not None
        )
        if acall is None:
            if call is None:
                return None
            acall = _awaitable(call)
        if areply is None and reply is not None:
            areply = _awaitable(reply)
        return cls(sink, call, reply, acall, areply, async_only)

    def blocking(self, where: str) -> tuple[_WriteCall, _WriteReply | None]:
        """The writes blocking code calls.

        Raises:
            VeridicError: the sink has only the coroutine twin of one of them,
                which blocking code cannot await (its records would be lost).
        """
        if self.async_only or self.call is None:
            names = " and ".join(f"a{name}()" for name in self.async_only)
            raise VeridicError(
                f"ModelGateway.{where}() cannot record model calls in {self.sink!r}: this "
                f"store is async-only (it has {names} but no blocking twin), and blocking code "
                "cannot await it; use the async gateway (await gateway.arun(...), asend, "
                "astream, arun_tools, aresume), or a store with blocking writes, such as "
                "PostgresAuditSink"
            )
        return self.call, self.reply


_R = TypeVar("_R")


def _awaitable(write: Callable[[_R], None]) -> Callable[[_R], Awaitable[None]]:
    """A blocking write, called where a coroutine write is awaited (as before they existed)."""

    async def written(record: _R) -> None:
        write(record)

    return written


class ModelCallLog:
    """Model-call records kept in memory, in order; safe to share between threads.

    For tests and short scripts. An application keeps its records in its
    audit store (pass a sink with ``write_model_call`` as ``calls``, or as
    ``audit`` when the store records both kinds).
    """

    def __init__(self) -> None:
        self._records: list[ModelCallRecord] = []
        self._replies: list[ModelReplyRecord] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ModelCallLog of {counted(len(self._records), 'record')}>"

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        """Keep ``record``.

        Raises:
            AuditRecordError: ``record`` is not a :class:`ModelCallRecord`.
        """
        if not isinstance(record, ModelCallRecord):
            raise AuditRecordError(
                f"{self!r}.write_model_call() got a {type(record).__name__}: pass a ModelCallRecord"
            )
        with self._lock:
            self._records.append(record)

    def records(self, request_id: str | None = None) -> tuple[ModelCallRecord, ...]:
        """Every record in the order written, or those of one request."""
        with self._lock:
            return tuple(r for r in self._records if request_id in (None, r.request_id))

    def write_model_reply(self, record: ModelReplyRecord, /) -> None:
        """Keep ``record``.

        Raises:
            AuditRecordError: ``record`` is not a :class:`ModelReplyRecord`.
        """
        if not isinstance(record, ModelReplyRecord):
            raise AuditRecordError(
                f"{self!r}.write_model_reply() got a {type(record).__name__}: pass a "
                "ModelReplyRecord"
            )
        with self._lock:
            self._replies.append(record)

    def replies(self, request_id: str | None = None) -> tuple[ModelReplyRecord, ...]:
        """Every answer's record in the order read, or those of one request."""
        with self._lock:
            return tuple(r for r in self._replies if request_id in (None, r.request_id))
