"""Where one call's audit records go: a store's blocking ``write`` or its coroutine ``awrite``;
and what a resume reads back of them (:func:`recorded`, :func:`arecorded`).

A call's record must be written whatever happens, by whichever code holds it:
``execute`` (blocking), ``aexecute`` (the event loop, which must never wait on
a store) and a guard that fired after its call ended, in a plain function on
some thread or task. :class:`Sink` gives each of them the one way that works
for the store at hand, and a record that cannot be written is logged with
its whole content on ``veridic.executor``, never dropped in silence.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Final, Protocol, runtime_checkable

from veridic._counted import counted
from veridic._sample import class_named, clip, message_shown, traceback_shown
from veridic.errors import VeridicError
from veridic.run.audit import AsyncAuditSink, AuditSink
from veridic.run.records import AuditRecord, ModelCallRecord, _storable

__all__ = [
    "Sink",
    "amodel_calls_kept",
    "arecorded",
    "model_calls_kept",
    "of_call",
    "recorded",
    "settled",
    "writes",
]

_log = logging.getLogger("veridic.executor")
_LATE_WAIT: Final = 30.0
"""Seconds a thread waits for its follow-up record to reach an async-only store."""

_in_flight: set[asyncio.Future[None]] = set()
"""Writes left running on a loop (see :func:`_to_the_end`): held so none is collected unfinished."""


_Write = Callable[[AuditRecord], None]
_AWrite = Callable[[AuditRecord], Coroutine[object, object, None]]


def writes(audit: object, where: str, *, sync: bool) -> tuple[_Write | None, _AWrite | None]:
    """``audit``'s blocking ``write`` and coroutine ``awrite`` (``None`` where it has none).

    Checked before anything runs: a sink that turns out unwritable after the
    handler ran would lose the call's effects from the audit.

    Raises:
        VeridicError: ``audit`` has neither; its ``write`` is a coroutine
            function (calling it would drop the record unawaited); or ``sync``
            and it has only ``awrite`` (blocking code cannot await it).
    """
    write = audit.write if isinstance(audit, AuditSink) else None
    if write is not None and inspect.iscoroutinefunction(write):
        raise VeridicError(
            f"{where}() got an audit sink whose write() is a coroutine function ({audit!r}): "
            "calling it would leave the record unwritten, in a coroutine nobody awaits; name "
            "the coroutine awrite() (veridic.AsyncAuditSink) and give write() a blocking body, "
            "or drop it"
        )
    awrite = audit.awrite if isinstance(audit, AsyncAuditSink) else None
    if awrite is not None and not inspect.iscoroutinefunction(awrite):
        awrite = None  # an awrite that is not a coroutine function is not the async twin
    if write is None and awrite is None:
        raise VeridicError(
            f"{where}() got audit={audit!r}, which has no write(record) and no async "
            "awrite(record): pass an audit store (SQLiteAuditSink, PostgresAuditSink, "
            "AsyncPostgresAuditSink for async code)"
        )
    if sync and write is None:
        raise VeridicError(
            f"{where}() got an async-only audit store ({audit!r}: it has awrite() but no "
            "write()), which blocking code cannot await: this store is async-only; use await "
            "aexecute(...) or the async gateway (ModelGateway.arun, arun_tools, aresume), or a "
            "store with a blocking write(), such as PostgresAuditSink"
        )
    return write, awrite


@runtime_checkable
class _Records(Protocol):
    """A store that answers :meth:`AuditStore.records <veridic.run.audit.AuditStore.records>`."""

    def records(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]: ...


@runtime_checkable
class _ARecords(Protocol):
    """A store that answers :meth:`AsyncAuditStore.arecords
    <veridic.run.audit.AsyncAuditStore.arecords>`."""

    async def arecords(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]: ...


def recorded(audit: object, request_id: str, where: str) -> tuple[AuditRecord, ...]:
    """The records ``audit`` holds of request ``request_id``, from blocking code.

    A resume reads them before anything runs, to see whether the paused run's
    waiting calls are on record already (resumed before). A store that cannot
    be asked could not tell, and a copy of a paused run resumed twice would
    run its calls twice: it is refused, not trusted.

    Raises:
        VeridicError: ``audit`` has no ``records(request_id)``, or answers
            something that is not audit records.
    """
    if not isinstance(audit, _Records):
        raise _unasked(audit, where)
    return _checked(audit, audit.records(request_id), where)


async def arecorded(audit: object, request_id: str, where: str) -> tuple[AuditRecord, ...]:
    """:func:`recorded` for async code: ``arecords`` awaited where the store has it.

    Raises:
        VeridicError: ``audit`` has neither ``arecords`` nor ``records``, or
            answers something that is not audit records.
    """
    if isinstance(audit, _ARecords) and inspect.iscoroutinefunction(audit.arecords):
        return _checked(audit, await audit.arecords(request_id), where)
    return recorded(audit, request_id, where)


@runtime_checkable
class _ModelCalls(Protocol):
    """A store that answers :meth:`AuditStore.model_calls
    <veridic.run.audit.AuditStore.model_calls>`."""

    def model_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]: ...


@runtime_checkable
class _AModelCalls(Protocol):
    """A store that answers :meth:`AsyncAuditStore.amodel_calls
    <veridic.run.audit.AsyncAuditStore.amodel_calls>`."""

    async def amodel_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]: ...


def model_calls_kept(
    audit: object, request_id: str, where: str
) -> tuple[ModelCallRecord, ...] | None:
    """The model calls ``audit`` holds of request ``request_id``; ``None`` when it cannot say.

    A resume reads them to tell the store the run wrote to from one that never saw it
    (see ``veridic.run.deferred.check_store_saw``); the caller asks only a store the
    gateway writes its model calls to. A store without ``model_calls`` cannot say.

    Raises:
        VeridicError: the store answers something that is not model-call records.
    """
    if not isinstance(audit, _ModelCalls):
        return None
    return _model_calls_answer(audit, audit.model_calls(request_id), where)


async def amodel_calls_kept(
    audit: object, request_id: str, where: str
) -> tuple[ModelCallRecord, ...] | None:
    """:func:`model_calls_kept` for async code: ``amodel_calls`` awaited where the store has it."""
    if isinstance(audit, _AModelCalls) and inspect.iscoroutinefunction(audit.amodel_calls):
        return _model_calls_answer(audit, await audit.amodel_calls(request_id), where)
    return model_calls_kept(audit, request_id, where)


def _model_calls_answer(audit: object, answer: object, where: str) -> tuple[ModelCallRecord, ...]:
    if isinstance(answer, tuple | list) and all(isinstance(r, ModelCallRecord) for r in answer):
        return tuple(answer)
    raise VeridicError(
        f"{where}() asked the audit store {audit!r} for the request's model calls and got "
        f"{type(answer).__name__}, not a tuple of ModelCallRecord: its model_calls(request_id) "
        "must answer as AuditStore.model_calls does; nothing was run"
    )


def of_call(
    records: Sequence[AuditRecord],
    call_id: str | None,
    *,
    tool: str | None = None,
    arguments_sha256: str | None = None,
    prompt_sha256: str | None = None,
) -> list[AuditRecord]:
    """The records of the model's call ``call_id`` (``[]`` for no id), matched as stored.

    A call id is stored escaped (a NUL, a lone surrogate), so it is compared so; the
    other keywords, when given, must match too: what tells a replay of this call from a
    later turn's call that reuses its id differs by framework.
    """
    if not call_id:
        return []
    stored = _storable(call_id)
    return [
        record
        for record in records
        if record.call_id == stored
        and (tool is None or record.tool == tool)
        and (arguments_sha256 is None or record.arguments_sha256 == arguments_sha256)
        and (prompt_sha256 is None or record.prompt_sha256 == prompt_sha256)
    ]


def _checked(audit: object, answer: object, where: str) -> tuple[AuditRecord, ...]:
    if isinstance(answer, tuple | list) and all(isinstance(r, AuditRecord) for r in answer):
        return tuple(answer)
    raise VeridicError(
        f"{where}() asked the audit store {audit!r} for the request's records and got "
        f"{type(answer).__name__}, not a tuple of AuditRecord: its records(request_id) must "
        "answer as AuditStore.records does"
    )


def _unasked(audit: object, where: str) -> VeridicError:
    return VeridicError(
        f"{where}() needs an audit store it can ask for a request's records, and {audit!r} has "
        "no records(request_id): a resume reads them first, to refuse a paused run whose "
        "waiting calls already ran (a copy resumed twice would run a write twice); nothing "
        "was run. Use an audit store that answers it (SQLiteAuditSink, PostgresAuditSink, "
        "AsyncPostgresAuditSink), or add records(request_id) to yours (veridic.AuditStore)"
    )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread
        return None


class Sink:
    """One call's audit sink, as the code that writes each record can reach it.

    ``aexecute`` awaits ``awrite`` when the sink has it, so the loop never
    waits on the store; everything else calls ``write``. A follow-up record
    is written by the thread or task whose guard fired late, in a plain
    function that cannot await: it calls ``write`` when the sink has one
    (from a task, that holds the loop for one write: the price of work a
    handler left behind). For an async-only sink it hands ``awrite`` to the
    loop the call ran on: from a task on that loop, as a task of its own
    (nothing may wait there), whose failure is logged on
    ``veridic.executor`` with the whole record, since the guard has raised
    by then; from another thread, which waits for it (up to
    :data:`_LATE_WAIT` seconds), so a failure reaches the guard's refusal as
    for a blocking sink. Either way a record that cannot be written is
    logged, never dropped in silence.
    """

    __slots__ = ("awaited", "blocking", "loop")

    def __init__(self, audit: object, where: str, *, sync: bool) -> None:
        self.blocking, self.awaited = writes(audit, where, sync=sync)
        self.loop = None if sync or self.blocking is not None else _running_loop()

    def write(self, record: AuditRecord) -> None:
        """Write ``record`` from blocking code (``execute``, a late guard's reporter)."""
        if self.blocking is not None:
            self.blocking(record)
        else:
            self._schedule(record)

    async def awrite(self, record: AuditRecord) -> None:
        """Write ``record`` from the loop: ``awrite`` awaited to its end, or ``write``."""
        if self.awaited is None:
            self.write(record)
        else:
            await _to_the_end(self.awaited(record), record)

    def _schedule(self, record: AuditRecord) -> None:
        """Hand a follow-up to an async-only sink from a plain function (see the class)."""
        awaited, loop = self.awaited, self.loop
        if awaited is None or loop is None or not loop.is_running():
            raise VeridicError(
                f"the follow-up record {record.record_id} of tool {record.tool!r} (request "
                f"{record.request_id!r}) cannot be written: the audit store is async-only and the "
                "event loop the call ran on is not running any more; the record is in this "
                "error's message: store it elsewhere, and finish background work inside the "
                f"handler. Record: {record!r}"
            )
        if _running_loop() is loop:
            task = loop.create_task(awaited(record))
            _in_flight.add(task)
            task.add_done_callback(partial(_written_later, record))
            return
        future = asyncio.run_coroutine_threadsafe(awaited(record), loop)
        try:
            future.result(timeout=_LATE_WAIT)
        except TimeoutError as waited:
            future.add_done_callback(partial(_written_later, record))
            raise VeridicError(
                f"the follow-up record {record.record_id} of tool {clip(record.tool)} (request "
                f"{clip(record.request_id)}) was not confirmed written within {_LATE_WAIT:g} s: "
                "the event loop the call ran on is busy or blocked; it may still be written (its "
                "failure is logged on veridic.executor)"
            ) from waited


async def _to_the_end(write: Coroutine[object, object, None], record: AuditRecord) -> None:
    """Await ``write``; if the awaiting task is cancelled, the write still ends.

    A cancellation reaching ``aexecute`` while the record of a call that ran
    is on its way would otherwise abort the write and lose the record; the
    caller still gets its ``CancelledError`` at once, and a failure of the
    write left running is logged with the record.
    """
    task = asyncio.ensure_future(write)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            _in_flight.add(task)
            task.add_done_callback(partial(_written_later, record))
        raise


async def settled(within: float, who: str) -> None:
    """Wait until every write left running on this loop (:func:`_to_the_end`) has ended,
    for ``within`` seconds at most.

    A call cancelled while its record was on its way leaves the write running, and
    ``asyncio.run`` cancels whatever still runs when its coroutine returns: a server that
    ends because its client left (stdin closed while a question about a call waited)
    stopped its loop under the call's ``DENIED`` record, which was logged as not written
    (and, for a store that writes over the network, was not). Await this before returning
    from the coroutine the loop runs. A write that fails is logged as before, with its
    record; none is waited for twice.

    The wait is bounded: a store that never answers would keep the process running, its
    client gone, without a word. Past ``within`` the writes still running are said on
    ``veridic.executor`` (``who`` names what stops); when the loop stops, each is cancelled
    and logged with its record (:func:`_written_later`).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while mine := [task for task in _in_flight if task.get_loop() is loop and not task.done()]:
        left = deadline - loop.time()
        if left <= 0:
            _log.warning(
                "%s: %s still being written after %g seconds; it returns, and each record "
                "still on its way is logged as not written, with its content, when the event "
                "loop stops: check the audit store",
                who,
                counted(len(mine), "audit record"),
                within,
            )
            return
        await asyncio.wait(mine, timeout=left)


def _written_later(
    record: AuditRecord, future: asyncio.Future[None] | concurrent.futures.Future[None]
) -> None:
    """Log a write nobody awaits any more when it fails: the record is in the log."""
    if isinstance(future, asyncio.Future):
        _in_flight.discard(future)
    failure: BaseException | None = (
        asyncio.CancelledError("the event loop stopped first") if future.cancelled() else None
    )
    if failure is None:
        failure = future.exception()
    if failure is not None:
        _log.error(
            "the audit record %s of tool %r (request %r, outcome %s) could not be written "
            "(%s: %s); store it elsewhere: %r\n%s",
            record.record_id,
            record.tool,
            record.request_id,
            record.outcome.value,
            class_named(failure),
            message_shown(failure),
            record,
            traceback_shown(failure),
        )
