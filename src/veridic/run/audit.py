"""The audit store: one record per tool call, and the questions it must answer.

Invariant I8 says every write records how it was approved; the seeds add two
numbers an operator must be able to check rather than assume:

- instruction-field writes approved by an "always" rule: the gates make this
  zero (an always rule is refused for high-risk tools, and a guard denies an
  instruction write unless the directly dispatched tool is high and its call
  was confirmed), so the query exists to prove it;
- the substitution rate: after a call is denied, does the model's next call in
  the same request attempt the same blocked operation through another door?

:class:`AuditSink` is the one method a store needs; :class:`AuditStore`
adds the questions, :class:`AsyncAuditStore` their coroutine twins.
:class:`SQLiteAuditSink` is the default (standard library only);
:class:`~veridic.run.postgres.PostgresAuditSink` serves many hosts with the
same schema and the same answers (the statements are shared:
``veridic.run._store``). Every record is validated before it
is stored (:class:`AuditRecordError`), and committed before ``write`` returns,
so a crash loses at most the record in flight.

Two kinds of text need care, because a model writes them:

- a tool name may be anything (quotes, newlines, NUL, 100 KB, empty):
  :func:`veridic.execute` records a name that is not a plain one escaped
  (``repr``) and clipped, and says so in the record's ``detail`` with the
  original length and a SHA-256 prefix, so repeated attempts stay
  recognisable;
- text with a lone surrogate (``"\\ud800"``) cannot be encoded as UTF-8,
  and Postgres text cannot hold NUL, so a record holding either is refused
  (:class:`AuditRecordError`) by every store alike, and the executor
  escapes both (``\\ud800``, ``\\x00``) in what it records.

A guard that fires after its call's record was written (in a task or thread
the call started) gets a *follow-up* record: same request and tool, outcome
``BLOCKED``, a ``detail`` beginning ``"after the call ended: "``
(:attr:`AuditRecord.follow_up`). A follow-up is not a call: the per-call
queries (:meth:`SQLiteAuditSink.writes_by_approval`,
:meth:`SQLiteAuditSink.substitutions`) skip it.

>>> sink = SQLiteAuditSink(":memory:")
>>> sink.write(AuditRecord(
...     time=1.0, request_id="req-1", tool="delete_golden", kind="write", risk=Risk.HIGH,
...     approval=ApprovalMode.USER_CONFIRMED, wrote_instruction_fields=False, irreversible=True,
...     prompt_sha256="0" * 64, tools_sha256="f" * 64, outcome=CallOutcome.OK))
>>> sink.writes_by_approval()[ApprovalMode.USER_CONFIRMED]
1
>>> sink.instruction_writes_under_always_rule()
()
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import weakref
from typing import Final, Literal, Protocol, runtime_checkable

from veridic._sample import clip
from veridic.errors import AuditRecordError
from veridic.run._sql_store import AsyncSQLStore, SQLStore
from veridic.run._sqlite_schema import busy, prepare
from veridic.run._store import (
    INSERT,
    KEYED_AUDIT,
    Statement,
    T,
    check_kept,
    checked_row,
    nothing,
)
from veridic.run._turns import Turns
from veridic.run.approval import ApprovalMode
from veridic.run.records import (
    AuditRecord,
    CallOutcome,
    ModelCallRecord,
    ModelReplyRecord,
    Substitution,
    arguments_sha256,
    new_id,
)

__all__ = [
    "AsyncAuditSink",
    "AsyncAuditStore",
    "AuditRecord",
    "AuditSink",
    "AuditStore",
    "CallOutcome",
    "ModelCallRecord",
    "ModelReplyRecord",
    "SQLiteAuditSink",
    "Substitution",
    "arguments_sha256",
    "new_id",
]


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go. ``write`` must store the record durably or raise."""

    def write(self, record: AuditRecord, /) -> None:
        """Store ``record``; raise :class:`AuditRecordError` for a malformed one."""
        ...


@runtime_checkable
class AsyncAuditSink(Protocol):
    """Where async code sends audit records. ``awrite`` must store the record durably or raise.

    :func:`~veridic.aexecute` awaits it instead of calling ``write``, so the event
    loop never waits on the store. A sink with ``awrite`` and no ``write``
    (:class:`~veridic.AsyncPostgresAuditSink`) serves :func:`~veridic.aexecute` and
    the async gateway only: blocking code cannot await it.
    """

    async def awrite(self, record: AuditRecord, /) -> None:
        """Store ``record``; raise :class:`~veridic.AuditRecordError` for a malformed one."""
        ...


@runtime_checkable
class AuditStore(AuditSink, Protocol):
    """An audit sink that answers the questions the store exists for, whatever it runs on.

    A compliance reviewer asks them of the store, not of one host's file: how
    was each write approved (:meth:`writes_by_approval`), did an always rule
    ever approve an instruction-field write
    (:meth:`instruction_writes_under_always_rule`, which must be empty), what
    did the model call after a refusal (:meth:`substitutions`,
    :meth:`substitution_rate`), and what happened in one request
    (:meth:`records`, :meth:`model_calls`). :class:`SQLiteAuditSink` is one;
    a store on a server implements the same, with the same answers.
    """

    def records(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        """Every call's record in the order written, or those of one request, or of a time
        range (``since`` inclusive, ``until`` exclusive, seconds since the epoch)."""
        ...

    def model_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]:
        """Every model call in the order sent, or those of one request."""
        ...

    def model_replies(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelReplyRecord, ...]:
        """Every model answer in the order read (usage, latency), narrowed as :meth:`records`."""
        ...

    def writes_by_approval(self) -> dict[ApprovalMode, int]:
        """How many write calls were recorded under each approval mode (every mode present)."""
        ...

    def instruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """Instruction-field writes approved by an always rule: must be empty."""
        ...

    def substitutions(self) -> tuple[Substitution, ...]:
        """Each stopped call and the next call of its request (or ``None``)."""
        ...

    def substitution_rate(self) -> float | None:
        """Of the stopped calls followed by another, the share that tried the same operation."""
        ...


@runtime_checkable
class AsyncAuditStore(Protocol):
    """:class:`AuditStore` for async code: every method a coroutine, none blocks the loop."""

    async def awrite(self, record: AuditRecord, /) -> None:
        """Store ``record`` durably, or raise."""
        ...

    async def arecords(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        """As :meth:`AuditStore.records`."""
        ...

    async def amodel_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]:
        """As :meth:`AuditStore.model_calls`."""
        ...

    async def amodel_replies(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelReplyRecord, ...]:
        """As :meth:`AuditStore.model_replies`."""
        ...

    async def awrites_by_approval(self) -> dict[ApprovalMode, int]:
        """As :meth:`AuditStore.writes_by_approval`."""
        ...

    async def ainstruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """As :meth:`AuditStore.instruction_writes_under_always_rule`."""
        ...

    async def asubstitutions(self) -> tuple[Substitution, ...]:
        """As :meth:`AuditStore.substitutions`."""
        ...

    async def asubstitution_rate(self) -> float | None:
        """As :meth:`AuditStore.substitution_rate`."""
        ...


class SQLiteAuditSink(SQLStore, AsyncSQLStore):
    """The default audit store: one SQLite file, one committed transaction per record.

    ``path`` is a file (opened in WAL mode, so readers never block the
    writer) or ``":memory:"``; the empty path (SQLite's temporary database, deleted
    when it closes) is refused, as is a ``file:`` URI that names a database in memory
    or a VFS without WAL mode (a SQLite built with ``SQLITE_USE_URI`` reads one). The
    store keeps its schema version in SQLite's
    ``user_version``: it may share the application's own database when that
    application does not use ``user_version`` (an ORM's migrations keep theirs
    in a table), but a database whose ``user_version`` another application set
    is refused, not written. Any number of threads may call :meth:`write`.
    Every statement that writes goes to one connection of the store, which the
    writing threads take in turn (a writer that has waited 30 ms gets it
    next, after any that waited longer: one busy thread cannot keep it); on a
    file each thread reads on a connection of its own, opened on its first
    query, so a reviewer's long query never holds up a write. ``":memory:"``
    is one database on one connection, for reads and writes alike.
    asyncio tasks may call it directly (a write holds the loop for tens of
    microseconds) or await :meth:`awrite` and the other ``a``-twins, which run
    on a worker thread. Each record is its own transaction, committed before
    ``write`` returns: a crash loses at most the record in flight. Several
    processes may write to one file: SQLite takes their stores in turn.

    A process made by ``fork()`` from one that holds the store (a pre-forking
    server such as gunicorn with ``--preload``, multiprocessing's ``fork``) may
    go on using it: on a file it opens connections of its own, and never uses
    or closes those it inherited, which SQLite forbids across a fork. A forked
    child keeps its own copy of a ``":memory:"`` database.

    ``synchronous`` is SQLite's setting: ``"NORMAL"`` (the default) survives
    a crash of the process; ``"FULL"`` also survives power loss, at the price
    of an fsync per record.

    Raises:
        AuditRecordError: ``path`` is empty, or names no file SQLite can keep in WAL
            mode; the file is another application's database (a ``user_version`` it
            set), or of a later veridic's schema;
            :meth:`write` got something that is not a valid :class:`AuditRecord`;
            a query met a row whose text is not UTF-8 (written by other code).
        sqlite3.Error: the database cannot be opened or written (``sqlite3.
            ProgrammingError`` after :meth:`close`).
    """

    # Why one write connection taken in turns: with a connection per writing
    # thread, SQLite's own lock decides who writes next, and its busy handler
    # sleeps a millisecond, then longer and longer, each time a writer finds the
    # file locked: with 16 threads that wrote 0.6-0.9x the records a second of
    # one connection behind a lock, and one writer waited half a second and more
    # (benchmarks/audit.py, the longest single write). One connection behind a
    # threading.Lock writes fast, but that lock is unfair and kept a writer
    # waiting hundreds of milliseconds too. Turns lets the writer that has the
    # connection write again until another has waited 30 ms, then hands it over
    # in order: in the benchmark, 0.8-0.9x the shared connection's rate with 16
    # threads, and no write waited more than 35 ms.

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise AuditRecordError(
                f"SQLiteAuditSink(synchronous={synchronous!r}) is not a setting; "
                'use "NORMAL" (survives a process crash) or "FULL" (survives power loss)'
            )
        self._path = os.fspath(path)
        if not self._path:
            # SQLite opens "" as a temporary database of each connection's own, deleted
            # when it closes: writes returned, reads found no table, close() lost them all.
            raise AuditRecordError(
                'SQLiteAuditSink("") would keep records in a temporary database of each '
                "connection's own, which SQLite deletes when it closes: the store's reads "
                "would not see its writes, and every record would be lost; pass the path of "
                'a file (check the setting it came from), or ":memory:" for a store that '
                "lives as long as the process"
            )
        self._synchronous = synchronous
        self._opened: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._local = threading.local()
        self._closed = False
        self._memory = self._path == ":memory:"
        writer = self._open(Turns())
        self._writer: _Connection | None = writer
        with writer.lock:
            try:
                # Checked (and migrated) first: a file refused (another application's, a
                # later veridic's) is left as it was, and WAL mode is written into its header.
                prepare(writer.db, repr(self))
                if not self._memory:
                    _write_ahead(writer.db, self)
            except BaseException:
                writer.db.close()  # a store refused holds nothing open
                raise
        self._opening = threading.Lock()  # a forked child opens its writer under it
        if not self._memory:
            _ON_FILES.add(self)

    def _open(self, lock: Turns | threading.Lock) -> _Connection:
        # isolation_level=None: autocommit, so each INSERT is its own committed
        # transaction. check_same_thread=False: close() closes it from its own thread.
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA synchronous={self._synchronous}")
        connection = _Connection(db, lock)
        self._opened.add(connection)
        if self._closed:  # close() ran meanwhile, and may not have seen this one
            db.close()
            raise sqlite3.ProgrammingError(f"{self!r} was closed: open a new store")
        return connection

    def _leave_inherited(self) -> None:
        """In a forked child: set the parent's connections aside, for good (see the class)."""
        _INHERITED.extend(self._opened)
        self._opened = weakref.WeakSet()
        self._local = threading.local()
        self._writer = None
        self._opening = threading.Lock()  # another thread of the parent may have held it

    def _writing(self) -> _Connection:
        """The connection every write goes to (opened again in a forked child)."""
        writer = self._writer
        if writer is None:
            with self._opening:
                writer = self._writer
                if writer is None:
                    writer = self._writer = self._open(Turns())
        return writer

    def _reading(self) -> _Connection:
        """This thread's connection for queries (the writer's, on ``":memory:"``)."""
        if self._memory:
            return self._writing()
        try:
            mine: _Connection = self._local.connection
        except AttributeError:
            mine = self._local.connection = self._open(threading.Lock())
            # dropped (and closed) when the thread ends
        return mine

    def __repr__(self) -> str:
        return f"SQLiteAuditSink({self._path!r})"

    def __enter__(self) -> SQLiteAuditSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection; every record written so far is already committed."""
        self._closed = True
        _ON_FILES.discard(self)
        for connection in list(self._opened):
            with connection.lock:
                connection.db.close()

    def _run(self, statement: Statement[T]) -> T:
        connection = self._writing() if statement.writes else self._reading()
        with connection.lock:
            self._check_open()
            try:
                cursor = connection.db.execute(statement.sql, statement.params)
                rows = cursor.fetchall() if cursor.description is not None else []
                added = cursor.rowcount
            except sqlite3.OperationalError as error:
                if not str(error).startswith(_NOT_UTF8):
                    raise
                raise AuditRecordError(
                    f"{self!r} holds a row whose text is not UTF-8 ({clip(str(error), 120)}): "
                    "veridic writes UTF-8 only, so the row was written by other code or the "
                    "file is damaged; nothing was read: check what else writes to the file, "
                    "and PRAGMA integrity_check"
                ) from error
        if statement.keyed is not None and added == 0:  # a retry, or another record
            check_kept(self, statement, self._run(statement.keyed.stored(statement.params)))
        return statement.answer(rows)

    def _check_open(self) -> None:
        if self._closed:
            raise sqlite3.ProgrammingError(f"{self!r} was closed: open a new store")

    def write(self, record: AuditRecord, /) -> None:
        """Validate ``record`` and commit it before returning (as every store's ``write``).

        Raises:
            AuditRecordError: ``record`` is not a valid :class:`AuditRecord`, or the
                store holds another record under its id (:meth:`SQLStore.write`).
        """
        writer = self._writing()
        # Checked in its turn: a writer that builds its row while another writes
        # takes the GIL from it, and both wait (measured: 4 threads wrote a fifth
        # more records a second with the check inside).
        with writer.lock:
            self._check_open()
            row = checked_row(self, record)
            added = writer.db.execute(INSERT, row).rowcount
        if added == 0:  # a retry, or another record under its id
            statement = Statement(INSERT, row, nothing, keyed=KEYED_AUDIT, record=record)
            check_kept(self, statement, self._run(KEYED_AUDIT.stored(row)))

    async def _arun(self, statement: Statement[T]) -> T:
        return await asyncio.to_thread(self._run, statement)


_BUSY_WAIT: Final = 5.0
"""Seconds a store waits for another connection's write lock: ``sqlite3.connect``'s own."""


def _write_ahead(db: sqlite3.Connection, store: object) -> None:
    """Put the file behind ``db`` in WAL mode, waiting for another connection's write as a
    write waits.

    A file is in rollback mode until its first store switches it, and SQLite refuses the
    switch at once ("database is locked"), without the busy handler a write waits in,
    while another connection holds the write lock: stores opened on one new file at once
    (a server's worker processes starting together) failed now and then, the one that
    lost the race at its first line. A file in WAL mode already is left as it is.

    Raises:
        AuditRecordError: SQLite answered the switch with another mode (see
            :func:`_not_write_ahead`): that answer went unread, and the store opened all
            the same.
        sqlite3.OperationalError: another connection kept the file locked longer than
            :data:`_BUSY_WAIT` (noted with the store and what to do), or the file cannot
            be written.
    """
    deadline = time.monotonic() + _BUSY_WAIT
    while True:
        try:
            (mode,) = db.execute("PRAGMA journal_mode=WAL").fetchone()
            break
        except sqlite3.OperationalError as error:
            if not busy(error):
                raise
            if time.monotonic() >= deadline:
                error.add_note(
                    f"{store!r} could not switch the file to WAL mode: another connection kept "
                    f"it locked (a write, or a read in rollback mode) for {_BUSY_WAIT:g} "
                    "seconds; no record was written: open the store again once that "
                    "connection is done"
                )
                raise
        time.sleep(0.01)
    if mode != "wal":
        raise _not_write_ahead(store, str(mode))


def _not_write_ahead(store: object, mode: str) -> AuditRecordError:
    """The refusal of a database SQLite left in ``mode``, not WAL mode, when asked to switch.

    A SQLite built to read a path that begins with ``file:`` as a URI (Debian's is, though
    ``sqlite3.connect`` is not asked to) opens ``file::memory:`` or ``file:x?mode=memory``
    as a database in memory, answering ``"memory"``: each connection of the store had its
    own, as the empty path's, and every record was lost. A VFS without shared memory
    (``file:x?vfs=unix-none``) cannot use WAL mode and answers the mode it stays in.
    """
    if mode == "memory":
        return AuditRecordError(
            f"{store!r} names a database in memory, not a file (SQLite reads a path that "
            "begins with file: as a URI, and answered the switch to WAL mode with 'memory'): "
            "the store reads on a connection of each thread, which would not see its "
            'writes, and every record would be lost; pass the path of a file, or ":memory:" '
            "for a store that lives as long as the process"
        )
    return AuditRecordError(
        f"{store!r} could not switch the file to WAL mode: SQLite left it in {clip(mode)} "
        "mode (a VFS without shared memory, chosen by a file: URI or by the application), "
        "in which the store's readers would block its writer; no record was written: open "
        "the store on a file of a local file system, with SQLite's default VFS"
    )


_NOT_UTF8 = "Could not decode to UTF-8"
"""How Python's sqlite3 begins the error for a text value that is not UTF-8."""

_ON_FILES: weakref.WeakSet[SQLiteAuditSink] = weakref.WeakSet()
"""Every open store on a file: what a forked child must give connections of its own."""

_INHERITED: list[_Connection] = []
"""A forked child's inherited connections, kept so that nothing closes them there.

SQLite forbids using a connection in a forked child, and closing is a use: it
can release the POSIX locks that the child's own connections to the same file
hold (such locks belong to the process, not to the connection).
"""


def _after_fork_in_child() -> None:
    for store in list(_ON_FILES):
        store._leave_inherited()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Connection:
    """One SQLite connection of a store, and the lock that its statements and ``close()`` take."""

    __slots__ = ("__weakref__", "db", "lock")

    def __init__(self, db: sqlite3.Connection, lock: Turns | threading.Lock) -> None:
        self.db = db
        self.lock = lock

    def __del__(self) -> None:
        # When its thread ends (a thread's reading connection) or its store is
        # dropped (the writer). Not left to the connection's own finalizer: a
        # sqlite3.Connection is in a reference cycle with its statement cache, so
        # it would wait for the cyclic collector, holding its file open (SQLite
        # reuses such a file for the next connection only once it is closed).
        self.db.close()
