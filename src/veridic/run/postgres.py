"""The audit store on a Postgres server, for applications that run on many hosts.

One request's calls may land on different app servers; the questions the
store answers (how was each write approved, what did the model call after a
refusal) are about the request, not the host. So every host writes to one
database, with the schema, statements and answers of the SQLite store
(``veridic.run._store``), and the approval state too: a run paused on one
host is claimed, once, on another.

Two classes, one per kind of caller:

- :class:`PostgresAuditSink` for blocking code (threads, processes), with a
  ``psycopg_pool.ConnectionPool``; its ``a``-twins run on a worker thread,
  so it also serves ``aexecute`` and the async gateway without holding the
  loop;
- :class:`AsyncPostgresAuditSink` for asyncio applications, with an
  ``AsyncConnectionPool``: ``async with AsyncPostgresAuditSink(dsn) as store``.

Each statement runs on a connection in autocommit mode: a record is
committed when its write returns. A statement whose connection is lost (the
server restarted, a proxy dropped an idle connection, perhaps after the
commit) is sent once more on a fresh connection, since sending any twice is
harmless: every record carries its own id, and the store keeps one row per
id; a paused run waiting is kept once however often it is saved; and a claim
brings its token again, which hands out the run the first try took. When the
server stays away longer than ``timeout``, the statement raises ``psycopg``'s
``OperationalError`` with a note that names the store and what to do. A
statement the server refuses (a limit, a statement timeout) is never sent again:
it is raised at once, with a note saying the server refused it. The
executor turns that into :class:`~veridic.AuditWriteError`, which keeps the
record to write again.

The tables live in the connection's ``search_path`` (``public`` unless the
conninfo says otherwise: ``options=-csearch_path=audit``). Opening a store
creates or migrates them (``veridic.run._postgres_schema``). A migration that
changes a table waits a few seconds at most for the sessions using it (another
host's long query): past that it changes nothing and raises
:class:`~veridic.AuditRecordError`, saying what to do, rather than hold up every
host's writes behind it. During a rolling upgrade, a host of the older release
that starts after the migration refuses the database, naming the release that
wrote it.

Needs the ``postgres`` extra: ``pip install 'veridic[postgres]'``.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from veridic._extras import require
from veridic.errors import AuditRecordError
from veridic.run import _postgres_schema
from veridic.run._conninfo import misread_password, refuse_nul, without_passwords
from veridic.run._sql_store import AsyncSQLStore, SQLStore
from veridic.run._store import INSERT, KEYED_AUDIT, Keyed, Rows, Statement, T, check_kept

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["AsyncPostgresAuditSink", "PostgresAuditSink"]

_SHOWN_KEYS: Final = ("host", "port", "dbname", "user")
"""What a store's ``repr`` shows of its conninfo: never the password."""


class PostgresAuditSink(SQLStore, AsyncSQLStore):
    """The audit store on a Postgres server, from blocking code: a pool of connections.

    ``conninfo`` is a libpq connection string or URL
    (``"postgresql://audit@db.internal/app"``). ``max_size`` connections at
    most are open at once (more writer threads than that take turns: give
    it at least as many as the threads that write at once); a write waits
    up to ``timeout`` seconds for one (while the server is away, the pool
    keeps trying to reconnect, waiting longer after each failure: 1, 2, 4
    seconds..., so a write just after the server returns may wait a few
    seconds), then raises. Any number of
    threads may write at once; each process opens its own store (a forked
    worker too, after the fork: a pool's threads and connections do not
    survive one).

    Between writes the store keeps the connections it used, idle, instead of
    handing each back to the pool (that costs a third of a write): at most one
    per writer that ran at once. One goes back to the pool whenever a writer
    waits for a connection, after a minute out of it (so the pool's lifetime
    and health checks still see it), when a write fails, and on ``close()``.

    ``read_only=True`` opens a store for review (``veridic audit`` does):
    the server refuses every write on its connections, and the schema is
    neither created nor migrated: a database of an older version this
    veridic can read is read as it is (:attr:`schema_version` says which),
    any other is refused.

    Raises:
        MissingExtraError: psycopg or psycopg-pool is not installed.
        AuditRecordError: the database holds a schema of a later veridic (or,
            read-only, of a version this one cannot read, or none), or its migration
            waited too long for a lock (another session is using its tables), or
            ``conninfo`` is a URL whose password holds a raw ``/`` or ``@`` (percent-encode
            them: ``%2F``, ``%40``) or holds a NUL character (libpq would read it only up
            to there), refused before any connection is tried.
        psycopg.OperationalError: the server refuses the first connection, or does not
            answer it within ``timeout``: raised at once, with libpq's words (host and
            port) and a note naming the store.
    """

    def __init__(
        self,
        conninfo: str,
        /,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        read_only: bool = False,
    ) -> None:
        pools = require("psycopg_pool", "postgres", "PostgresAuditSink")
        self._psycopg = require("psycopg", "postgres", "PostgresAuditSink")
        _check_sizes("PostgresAuditSink", min_size, max_size, timeout)
        self._shown = _shown(self._psycopg, conninfo)
        connection: dict[str, object] = {"autocommit": True}
        if read_only:
            # Enforced by the server for every statement, not by this class's good manners;
            # added to the conninfo's own options (its search_path), which it would replace.
            given = _options(self._psycopg, conninfo)
            connection["options"] = f"{given} -c default_transaction_read_only=on".lstrip()
        self._schema = _postgres_schema.VERSION
        with _connected(self._psycopg, conninfo, connection, timeout, self) as db:
            if read_only:
                self._schema = _postgres_schema.check(db, repr(self))
            else:
                _postgres_schema.prepare(db, repr(self))
        self._pool: psycopg_pool.ConnectionPool[Any] = pools.ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs=connection,
            open=False,
            name=self._shown,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except BaseException:
            self._pool.close()  # its workers would go on connecting, and warning, for ever
            raise
        self._kept: dict[int, _Kept] = {}  # by the thread that used it last
        self._waiting = 0  # writers that found no idle connection and the pool empty
        self._out = 0  # connections taken from the pool (or being waited for)
        self._max_size = max_size
        self._closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresAuditSink({self._shown!r})"

    @property
    def schema_version(self) -> int:
        """The audit schema version of the database, as the store reads it.

        A writable store migrates the database to this veridic's version when
        it opens it; a ``read_only`` one reads an older version it knows as it
        is (records of version 5 have no :attr:`~veridic.AuditRecord.call_id`:
        read as ``""``; answers before version 8 have no usage parts: read as
        0, "not broken down"; model calls before version 9 have no
        :attr:`~veridic.ModelCallRecord.options_sha256`: read as
        ``""``, not recorded), and this says which it read.
        """
        return self._schema

    def __enter__(self) -> PostgresAuditSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pool; every record written so far is already committed."""
        self._closed = True
        self._give_back_kept()
        self._pool.close()

    def _run(self, statement: Statement[T]) -> T:
        sql = _placeholders(statement.sql)
        if self._schema != _postgres_schema.VERSION:  # a review of an older database
            sql = _postgres_schema.columns(sql, self._schema)
        rows, added = self._sent(sql, statement.params)
        if statement.keyed is not None and added == 0:  # a retry, or another record
            self._check_kept(statement.keyed, statement)
        return statement.answer(rows)

    def _insert(self, statement: Statement[None]) -> None:
        _, added = self._sent(_INSERT, statement.params, rows=False)
        if added == 0:  # a retry, or another record under its id
            self._check_kept(KEYED_AUDIT, statement)

    def _check_kept(self, keyed: Keyed, statement: Statement[Any]) -> None:
        """Refuse ``statement``'s record unless the row under its id is the same
        (:func:`~veridic.run._store.check_kept`).

        The row is read in binary. As text, a ``DOUBLE PRECISION`` is printed with 15
        digits where the session's ``extra_float_digits`` is 0 (the default before
        PostgreSQL 12; a database, a role or a connection may still set it): a record's
        time read back rounded, and a record sent again after a lost connection was
        refused as another one.
        """
        read = keyed.stored(statement.params)
        rows, _ = self._sent(_placeholders(read.sql), read.params, binary=True)
        check_kept(self, statement, rows)

    def _sent(
        self,
        sql: str,
        params: tuple[object, ...],
        *,
        rows: bool = True,
        binary: bool = False,
    ) -> tuple[Rows, int]:
        """The rows of ``sql`` (``%s`` placeholders) and its rowcount, sent again if the
        connection was lost.

        ``rows=False`` (a write with no answer) sends it on the connection's kept
        cursor; a statement with rows gets a cursor of its own, so that no kept
        cursor holds a large answer after it was read. ``binary`` asks for the rows
        in binary (a float exactly: see :meth:`_check_kept`).
        """
        try:
            return self._send(sql, params, rows, binary)
        except self._psycopg.OperationalError as error:
            if _answered(error):  # the server is there, and refused the statement
                raise _refused(error, self) from None
            # The server may have gone (a restart drops every connection): the kept
            # ones go back to the pool, which checks what it hands out next.
            self._give_back_kept()
            if self._closed:
                error.add_note(f"{self!r} was closed: open a new store to write to it")
                raise
            if _waited(error):
                raise _noted(error, self) from None
            # What ended this connection (a restart, a failover, the server ending idle
            # sessions) ended the pool's idle ones too: the next ones taken, the retry's
            # first, were as dead, so the writes after a restart failed one by one.
            self._pool.check()
        # The connection was lost (the pool discarded it): once more, on a fresh one. Every
        # statement is harmless to send twice (see veridic.run._store), a claim too.
        try:
            return self._send(sql, params, rows, binary)
        except self._psycopg.OperationalError as error:
            if _answered(error):  # reached this time, and refused: as the first try's
                raise _refused(error, self) from None
            raise _noted(error, self) from None

    def _send(
        self, sql: str, params: tuple[object, ...], rows: bool, binary: bool
    ) -> tuple[Rows, int]:
        me = threading.get_ident()
        kept = self._kept.pop(me, None) or self._lease()
        try:
            if rows:
                cursor = kept.connection.execute(sql, params, binary=binary)
                answer = cursor.fetchall() if cursor.description is not None else []
                added = cursor.rowcount
            else:
                added = kept.cursor.execute(sql, params).rowcount
                answer = []
        except BaseException:
            self._give_back(kept)  # the pool discards a broken connection, never reuses it
            raise
        self._keep(me, kept)
        return answer, added

    # A write holds a connection for a round trip; taking it from the pool and
    # giving it back costs a third of that again (psycopg_pool's getconn and
    # putconn, measured: 65 against 47 microseconds a write), and a new cursor
    # for each statement (what Connection.execute makes) a sixth. So the store
    # keeps the connections it used, idle, each with a cursor for inserts, for
    # its next writes, under the thread that used it last, which takes it again
    # (handed from thread to thread, a connection cost up to 30 microseconds
    # more a write with 4 threads, in noisy measurements). A thread with none
    # takes one from the pool, or another's idle one once the pool has lent all
    # it has. One goes back to the pool whenever a writer waits for one, after
    # _HOLD seconds out of it (so the pool's max_lifetime and checks still
    # apply), on an error and on close(). There are never more kept than max_size.
    #
    # The common case (a thread takes its own kept connection and keeps it
    # again) takes no lock: with several threads, every lock and line of Python
    # between two round trips is paid again in waiting for the GIL (measured
    # with 4 threads: the store's few microseconds of bookkeeping cost 15 more
    # of CPU a write). What makes that safe: each step on _kept is one dict
    # operation, atomic, so a kept connection has exactly one taker (a writer's
    # pop, another writer's popitem, or close()'s popitem); a writer that keeps
    # one checks _waiting and _closed again after putting it in _kept, and
    # takes it out again if they changed meanwhile (close() sets _closed before
    # it empties _kept, so between the two of them one gives it back).

    def _lease(self) -> _Kept:
        """A connection for a thread that has none kept: another's idle one, or the pool's."""
        with self._lock:
            if self._kept and self._out >= self._max_size:
                try:
                    return self._kept.popitem()[1]  # the pool has none left: another's idle one
                except KeyError:
                    pass  # its owner took it back meanwhile
            self._out += 1
            full = self._out > self._max_size
            if full:
                self._waiting += 1  # from here on, every connection used goes back to the pool
        try:
            # getconn/putconn, not `with pool.connection()`: its exit commits, a round
            # trip for nothing in autocommit (a fifth of a plain insert's time, measured).
            fresh: psycopg.Connection[Any] = self._pool.getconn()
        except BaseException:
            with self._lock:
                self._out -= 1
                self._waiting -= full
            raise
        kept = _Kept(fresh, fresh.cursor(), time.monotonic())
        with self._lock:
            self._waiting -= full
        return kept

    def _keep(self, me: int, kept: _Kept) -> None:
        # Called after a statement succeeded in autocommit mode: the connection
        # is open and idle, with no transaction (none of the store's statements
        # opens one), as the pool would check.
        if (
            self._waiting
            or self._closed
            or me in self._kept
            or time.monotonic() - kept.since >= _HOLD
        ):
            self._give_back(kept)
            return
        self._kept[me] = kept
        if self._waiting or self._closed:  # changed meanwhile: see above
            mine = self._kept.pop(me, None)
            if mine is not None:
                self._give_back(mine)

    def _give_back(self, kept: _Kept) -> None:
        kept.cursor.close()
        with self._lock:
            self._out -= 1
        self._pool.putconn(kept.connection)

    def _give_back_kept(self) -> None:
        while True:
            try:
                _, kept = self._kept.popitem()
            except KeyError:
                return
            self._give_back(kept)

    async def _arun(self, statement: Statement[T]) -> T:
        return await asyncio.to_thread(self._run, statement)


class AsyncPostgresAuditSink(AsyncSQLStore):
    """The audit store on a Postgres server, for asyncio code: an async pool of connections.

    Open it before use, in the event loop that will use it::

        async with AsyncPostgresAuditSink("postgresql://audit@db.internal/app") as store:
            result = await gateway.arun(..., sink=store)

    ``min_size``, ``max_size`` and ``timeout`` are those of :class:`PostgresAuditSink`.
    Every method is a coroutine (``awrite``, ``arecords``, ...), the async
    twin of the blocking store's.

    Raises:
        MissingExtraError: psycopg or psycopg-pool is not installed.
        AuditRecordError: ``conninfo`` holds a NUL character or is otherwise refused, as by
            :class:`PostgresAuditSink`, before any connection is tried.
    """

    def __init__(
        self, conninfo: str, /, *, min_size: int = 1, max_size: int = 8, timeout: float = 30.0
    ) -> None:
        self._pools = require("psycopg_pool", "postgres", "AsyncPostgresAuditSink")
        self._psycopg = require("psycopg", "postgres", "AsyncPostgresAuditSink")
        _check_sizes("AsyncPostgresAuditSink", min_size, max_size, timeout)
        self._conninfo = conninfo
        self._sizes = (min_size, max_size, timeout)
        self._shown = _shown(self._psycopg, conninfo)
        self._pool: psycopg_pool.AsyncConnectionPool[Any] | None = None
        self._opening: asyncio.Task[None] | None = None
        """The last attempt to open the store, shared by the opens that await it; the loop
        it ran in is the one the pool serves."""
        self._claim = threading.Lock()
        """Held while an open decides which loop the store serves and starts its attempt:
        opens in two threads' loops each saw no attempt of their own loop, and each built
        a pool."""

    def __repr__(self) -> str:
        return f"AsyncPostgresAuditSink({self._shown!r})"

    async def open(self) -> AsyncPostgresAuditSink:
        """Connect, and create or migrate the tables; returns the store.

        Tasks may await it at once (each one opening the store it was handed): they share
        one attempt, and each gets the store it opened or the error it met; a server that
        does not answer is waited for once, not once per task. Opened already, it returns
        at once. A store serves the event loop that opened it until it is closed there; a
        store closed in one ``asyncio.run`` may be opened again in the next. An open from
        another loop (another thread's) while it is open, or while an open is under way,
        is refused at once rather than kept waiting: the store would serve the first
        loop only. Each thread with a loop of its own opens a store of its own.

        Raises:
            AuditRecordError: the database holds a schema of a later veridic, or the store
                is open, or being opened, in another event loop.
            psycopg.OperationalError: the server refuses the first connection, or does not
                answer it within ``timeout`` (as :class:`PostgresAuditSink`).
        """
        loop = asyncio.get_running_loop()
        with self._claim:  # no await inside: it is held for a few dict reads, never a loop turn
            self._its_loop(loop)
            attempt = None
            if self._pool is None:
                # Each open awaiting its own migration built a pool, and the second replaced
                # the first without closing it; behind a lock, each one waited for the one
                # before it to fail before it tried: N tasks, N times the timeout.
                attempt = self._opening
                if attempt is None or attempt.done() or attempt.get_loop() is not loop:
                    attempt = self._opening = loop.create_task(self._new_pool())
        if attempt is not None:
            # Shielded: an opener that is cancelled leaves the attempt to the others.
            await asyncio.shield(attempt)
        return self

    def _its_loop(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Check that ``loop`` (the running one) is the one the store serves, if any does.

        A store serves the loop of its last open attempt while that attempt runs and, once
        it has succeeded, until the store is closed.

        Raises:
            AuditRecordError: the store is open, or being opened, in another event loop.
                Its pool's tasks and connections belong to that loop: open() returned as if
                it were ready, and close() failed with "Event loop is closed" once it had
                forgotten the pool; an open in a second thread's loop built a second pool.
        """
        loop = asyncio.get_running_loop() if loop is None else loop
        attempt = self._opening
        if attempt is None or attempt.get_loop() is loop:
            return
        opened_in = attempt.get_loop()
        if self._pool is None:
            if attempt.done() or opened_in.is_closed():
                return  # it failed, or was left by a loop that ended: it can never finish
            raise AuditRecordError(
                f"{self!r} is being opened in another event loop (another thread's), which "
                "its connections will serve: use the store from that loop, or give each "
                "thread that runs its own event loop a store of its own "
                "(AsyncPostgresAuditSink(conninfo) there)"
            )
        if opened_in.is_closed():
            raise AuditRecordError(
                f"{self!r} was opened in an event loop that has ended without closing it, "
                "so its connections cannot be used or closed from this one: use a new store "
                "here, and close a store in the loop that opened it (`async with store:` "
                "inside one asyncio.run)"
            )
        raise AuditRecordError(
            f"{self!r} is open in another event loop, whose tasks its connections serve: "
            "use it from that loop, or close it there (`await store.close()`) and open it "
            "in this one"
        )

    async def _new_pool(self) -> None:
        """The tables prepared, and an open pool of connections to them made the store's."""
        min_size, max_size, timeout = self._sizes
        # The migration is a few statements once per process: a blocking connection of
        # its own keeps the schema code in one (sync) form, and is the first one tried.
        await asyncio.to_thread(self._prepare, timeout)
        pool: psycopg_pool.AsyncConnectionPool[Any] = self._pools.AsyncConnectionPool(
            self._conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True},
            open=False,
            name=self._shown,
        )
        try:
            await pool.open(wait=True, timeout=timeout)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    def _prepare(self, timeout: float) -> None:
        with _connected(self._psycopg, self._conninfo, {"autocommit": True}, timeout, self) as db:
            _postgres_schema.prepare(db, repr(self))

    async def close(self) -> None:
        """Close the pool; every record written so far is already committed.

        An open under way is waited for, and what it opened is closed: close() returned
        while it ran, and the store held its connections after it.

        Raises:
            AuditRecordError: the store is open, or being opened, in another event loop
                (see :meth:`open`).
        """
        loop = asyncio.get_running_loop()
        self._its_loop(loop)
        attempt = self._opening
        if attempt is not None and not attempt.done() and attempt.get_loop() is loop:
            await asyncio.wait([attempt])  # its error, if any, is for its openers
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> AsyncPostgresAuditSink:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _arun(self, statement: Statement[T]) -> T:
        self._its_loop()
        pool = self._pool
        if pool is None:
            raise AuditRecordError(
                f"{self!r} is not open: use `async with {self!r} as store:` "
                "or `await store.open()` first"
            )
        sql = _placeholders(statement.sql)
        rows, added = await self._asent(pool, sql, statement.params)
        if statement.keyed is not None and added == 0:  # a retry, or another record
            read = statement.keyed.stored(statement.params)
            # In binary, as the blocking store's _check_kept says: a float exactly.
            stored, _ = await self._asent(pool, _placeholders(read.sql), read.params, binary=True)
            check_kept(self, statement, stored)
        return statement.answer(rows)

    async def _asent(
        self,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        sql: str,
        params: tuple[object, ...],
        *,
        binary: bool = False,
    ) -> tuple[Rows, int]:
        """The rows of ``sql`` (``%s`` placeholders) and its rowcount, sent again if the
        connection was lost (as :meth:`PostgresAuditSink._sent`)."""
        lost: psycopg.OperationalError | None = None
        for _ in range(2):
            try:
                db = await pool.getconn()  # as the blocking store: no commit on return
                try:
                    cursor = await db.execute(sql, params, binary=binary)
                    rows = await cursor.fetchall() if cursor.description is not None else []
                    return rows, cursor.rowcount
                finally:
                    await pool.putconn(db)
            except self._psycopg.OperationalError as error:
                if _answered(error):
                    raise _refused(error, self) from None
                if _waited(error):
                    raise _noted(error, self) from None
                await pool.check()  # its idle connections died with this one (as above)
                lost = error
        assert lost is not None  # the loop ran and every try failed
        raise _noted(lost, self) from None


@dataclass(frozen=True, slots=True)
class _Kept:
    """A connection out of the pool, kept between writes, with its cursor for inserts."""

    connection: psycopg.Connection[Any]
    cursor: psycopg.Cursor[Any]
    since: float
    """``time.monotonic()`` when it left the pool: it goes back :data:`_HOLD` seconds later."""


@lru_cache(maxsize=64)
def _placeholders(sql: str) -> str:
    """The shared statements' ``?`` as psycopg's ``%s`` (they hold no other ``?`` or ``%``).

    A read of a time range is ordered by ``+id`` for SQLite, whose planner has no
    statistics (see :func:`veridic.run._store.select`); Postgres's has, and chooses
    between the key's order and the index on time itself: a range of most rows is
    read in key order, without sorting millions of rows.
    """
    return sql.replace("?", "%s").replace(" ORDER BY +id", " ORDER BY id")


_INSERT: Final = _placeholders(INSERT)
_HOLD: Final = 60.0
"""Seconds a connection stays out of the pool, kept by a store between its writes."""


def _waited(error: Exception) -> bool:
    """Whether ``error`` is the pool giving up after ``timeout``: trying again would wait again."""
    return type(error).__name__ == "PoolTimeout"


_CANCELED: Final = "57014"
"""The SQLSTATE of a statement cancelled (``statement_timeout``): the one of class 57
(operator intervention) that does not end the session."""


def _answered(error: Exception) -> bool:
    """Whether ``error`` is the server's own refusal of a statement, not a lost connection.

    psycopg raises ``OperationalError`` for both: a dropped connection (no SQLSTATE,
    or class 08) and a limit the statement broke (``ProgramLimitExceeded``, 54000: a key
    too long for an index; ``QueryCanceled``, 57014: a statement timeout). Sent again,
    the second kind is refused again: it was retried on a fresh connection and then
    reported as the server being away ("write the record again once the server is
    back"), which it never was.
    """
    state = getattr(error, "sqlstate", None)
    if not isinstance(state, str) or state.startswith("08"):  # no answer, or class 08
        return False
    # Class 57 ends the session (a shutdown, a crash, idle_session_timeout), but for a
    # cancelled statement.
    return not state.startswith("57") or state == _CANCELED


def _refused(error: psycopg.OperationalError, store: object) -> Exception:
    """``error`` with a note that says the server refused the statement, and what that means."""
    error.add_note(
        f"{store!r}: the server refused the statement (SQLSTATE {getattr(error, 'sqlstate', '')}"
        f", {type(error).__name__}); it was not sent again, since it would be refused again: "
        "the server was reachable; see the message above for what it refused"
    )
    return error


def _noted(error: psycopg.OperationalError, store: object) -> Exception:
    """``error`` with a note that says which store failed and what to do about it."""
    error.add_note(
        f"{store!r} could not reach the server ({type(error).__name__}): the statement may "
        "or may not have been committed; sending it again is safe (a record's id makes a "
        "second copy impossible, and a claim of a paused run brought again with its token "
        "hands out the run it took): write the record again, or claim again with the token= "
        "you passed, once the server is back (a claim made without token= cannot be sent "
        "again: its token was the store's own, and it may have taken the run for nobody; "
        "pending_runs() no longer lists such a run: pass token= to claims you may send again)"
    )
    return error


def _shown(psycopg: Any, conninfo: str) -> str:
    """``conninfo`` without its password, for a ``repr`` and the pool's name.

    A URL whose password libpq would misread (a raw ``/`` or ``@``) is refused here,
    before any connection is tried: libpq would take pieces of the password for the
    host, port and database, which every message about the connection then shows. So
    is one holding a NUL (:func:`~veridic.run._conninfo.refuse_nul`), of which libpq
    would read only what comes before it.
    """
    refuse_nul(conninfo)
    if misread_password(conninfo):
        raise AuditRecordError(
            "the Postgres URL's password holds a '/' or '@' that is not percent-encoded: "
            "libpq ends the password there and reads the rest as host, port or database "
            "name (and shows them in its messages); percent-encode '/' in the password as "
            "%2F and '@' as %40 (urllib.parse.quote(password, safe='')), or pass a "
            "libpq connection string with password='...'"
        )
    try:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as error:
        # libpq's message quotes a URL as written, password and all; raised outside
        # the handler, the error has no context that a logged traceback would show.
        refused = without_passwords(str(error).strip(), conninfo)
    else:
        shown = (f"{key}={parts[key]}" for key in _SHOWN_KEYS if parts.get(key))
        return " ".join(shown) or "default"
    raise AuditRecordError(
        f"the Postgres conninfo is not valid ({refused}): pass a libpq connection string "
        "('host=db dbname=app user=audit') or URL ('postgresql://audit@db/app')"
    )


def _connected(
    driver: Any, conninfo: str, settings: dict[str, object], timeout: float, store: object
) -> psycopg.Connection[Any]:
    """A connection made directly, the first a store opens (for its schema), or the error.

    Asked of the pool, a refused connection was tried again and again for the whole
    ``timeout`` (30 s by default), each failure a warning in the log, and then reported
    as ``PoolTimeout``, naming neither the host nor the port. Made here, it fails at
    once with libpq's own words (which name the host and port, never the password).
    ``timeout`` bounds the attempt (libpq's ``connect_timeout``, in whole seconds, 2 at
    least), unless the conninfo (or ``PGCONNECT_TIMEOUT``) sets its own.
    """
    given = driver.conninfo.conninfo_to_dict(conninfo).get("connect_timeout")
    own = given or os.environ.get("PGCONNECT_TIMEOUT")
    wait = {} if own else {"connect_timeout": max(2, math.ceil(timeout))}
    try:
        connection: psycopg.Connection[Any] = driver.connect(conninfo, **settings, **wait)
    except driver.OperationalError as error:
        error.add_note(
            f"{store!r} could not connect to the server when it opened (nothing was written): "
            "check the host and port named above, that the server is up and accepts this "
            "user, then open the store again"
        )
        raise
    return connection


def _options(psycopg: Any, conninfo: str) -> str:
    """The ``options`` ``conninfo`` gives the server (``-csearch_path=audit``), or ``""``."""
    given = psycopg.conninfo.conninfo_to_dict(conninfo).get("options")
    return given if isinstance(given, str) else ""


def _check_sizes(where: str, min_size: int, max_size: int, timeout: float) -> None:
    if not (
        type(min_size) is int and type(max_size) is int and 0 <= min_size <= max_size >= 1
    ) or not (isinstance(timeout, int | float) and timeout > 0):
        raise AuditRecordError(
            f"{where}(min_size={min_size!r}, max_size={max_size!r}, timeout={timeout!r}): "
            "the pool needs 0 <= min_size <= max_size, max_size >= 1 and a timeout in "
            "seconds above 0"
        )
