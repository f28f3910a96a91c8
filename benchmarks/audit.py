"""Audit store benchmark: 100,000 records from 4 threads, every one committed.

Run: ``.venv/bin/python benchmarks/audit.py``. Prints records per CPU second
(``time.process_time``: every thread of the process; the wall-clock rate is in
the note, since a commit may wait on the disk) and ratios against alternatives
measured in the same run, in 2 interleaved rounds, on a file in WAL mode with
``synchronous=NORMAL`` (the store's default) in a temporary directory (the
alternatives write 10,000 records a round, to keep the run short):

- ``SQLiteAuditSink`` from 4 threads (validation, one lock, one committed
  transaction per record): the figure asked for;
- the same sink from 1 thread, to show what the lock costs;
- a plain ``sqlite3`` loop inserting the same rows with a commit per row
  (the same durability, no validation);
- a plain ``executemany`` in one transaction (the upper bound, and what an
  audit log must not do: a crash loses the whole batch);
- ``SQLiteAuditSink(":memory:")`` from 4 threads (no file at all).

Every contender is checked afterwards: the table holds exactly the records written.
"""

from __future__ import annotations

import hashlib
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import _harness as h

from veridic import ApprovalMode, AuditRecord, CallOutcome, Risk, SQLiteAuditSink
from veridic.run._sqlite_schema import prepare
from veridic.run.audit import _INSERT, _to_row

TOTAL = 100_000
COMPARED = 10_000  # the alternatives write fewer records: their rate is per record
THREADS = 4
SHA = hashlib.sha256(b"bench").hexdigest()


def record(thread: int, index: int) -> AuditRecord:
    return AuditRecord(
        time=time.time(),
        request_id=f"req-{thread}-{index // 10}",
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


def timed(action: Callable[[], None]) -> tuple[float, float]:
    """CPU seconds (every thread of this process) and wall seconds of ``action``."""
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    return time.process_time() - cpu, time.perf_counter() - wall


def sink_from_threads(path: str, threads: int, total: int) -> tuple[float, float]:
    sink = SQLiteAuditSink(path)
    each = total // threads
    batches = [[record(t, i) for i in range(each)] for t in range(threads)]
    start = threading.Barrier(threads + 1)

    def writer(batch: list[AuditRecord]) -> None:
        start.wait()
        for item in batch:
            sink.write(item)

    workers = [threading.Thread(target=writer, args=(batch,)) for batch in batches]
    for worker in workers:
        worker.start()

    def run() -> None:
        start.wait()
        for worker in workers:
            worker.join()

    elapsed = timed(run)
    if sink.count() != each * threads:
        h.fail(f"lost records: {sink.count()} of {each * threads}")
    sink.close()
    return elapsed


def plain(path: str, total: int, *, batch: bool) -> tuple[float, float]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    prepare(db, path)  # the store's own schema, at its version
    rows = [_to_row(record(0, i)) for i in range(total)]

    def loop() -> None:
        for row in rows:
            db.execute(_INSERT, row)

    def many() -> None:
        db.execute("BEGIN")
        db.executemany(_INSERT, rows)
        db.execute("COMMIT")

    elapsed = timed(many if batch else loop)
    (count,) = db.execute("SELECT COUNT(*) FROM veridic_audit").fetchone()
    if count != total:
        h.fail(f"lost rows: {count} of {total}")
    db.close()
    return elapsed


def main(argv: Sequence[str] | None = None) -> None:
    rounds = 1 if h.QUICK else 2
    each = TOTAL // rounds
    runs: list[tuple[str, int, Callable[[Path], tuple[float, float]]]] = [
        (
            f"SQLiteAuditSink, {THREADS} threads",
            each,
            lambda d: sink_from_threads(str(d / "threads.db"), THREADS, each),
        ),
        (
            "SQLiteAuditSink, 1 thread",
            COMPARED,
            lambda d: sink_from_threads(str(d / "one.db"), 1, COMPARED),
        ),
        (
            "plain sqlite3 loop, commit per row",
            COMPARED,
            lambda d: plain(str(d / "loop.db"), COMPARED, batch=False),
        ),
        (
            "plain executemany, one transaction",
            each,
            lambda d: plain(str(d / "batch.db"), each, batch=True),
        ),
        (
            f'SQLiteAuditSink(":memory:"), {THREADS} threads',
            COMPARED,
            lambda d: sink_from_threads(":memory:", THREADS, COMPARED),
        ),
    ]
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    wall: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for index in range(rounds):
        with tempfile.TemporaryDirectory() as directory:
            for name, count, run in runs[index % len(runs) :] + runs[: index % len(runs)]:
                spent, waited = run(Path(directory))
                cpu[name].append(count / spent)
                wall[name].append(count / waited)
    report = h.Report("audit.py")
    section = report.section(
        "8. audit store: records per CPU second, every record committed unless noted",
        about=[
            f"WAL file, synchronous=NORMAL; {TOTAL:,} records from {THREADS} threads in "
            f"{rounds} interleaved round(s), the others {COMPARED:,} a round."
        ],
        baselines=["plain loop"],
    )
    base = statistics.median(cpu["plain sqlite3 loop, commit per row"])
    for name, _, _ in runs:
        rate = statistics.median(cpu[name])
        low, high = min(cpu[name]), max(cpu[name])
        section.add(
            h.Row(
                name,
                rate,
                low=low,
                high=high,
                unit="/s",
                ratios=[rate / base],
                note=f"wall: {statistics.median(wall[name]):,.0f}/s",
            )
        )
    h.finish(report, argv)


if __name__ == "__main__":
    main()
