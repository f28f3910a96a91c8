"""Audit store benchmark: 100,000 records from 4 threads, every one committed.

Run: ``.venv/bin/python benchmarks/audit.py``. Prints records per second and
ratios against alternatives measured in the same run, on a file in WAL mode
with ``synchronous=NORMAL`` (the store's default) in a temporary directory
(the alternatives write 10,000 records, to keep the run short):

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
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from veridic import ApprovalMode, AuditRecord, CallOutcome, Risk, SQLiteAuditSink
from veridic.audit import _INSERT, _SCHEMA, _to_row

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


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def sink_from_threads(path: str, threads: int, total: int) -> float:
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
        raise SystemExit(f"lost records: {sink.count()} of {each * threads}")
    sink.close()
    return elapsed


def plain(path: str, total: int, *, batch: bool) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)
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
        raise SystemExit(f"lost rows: {count} of {total}")
    db.close()
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        file = Path(directory)
        rows = [
            (
                f"SQLiteAuditSink, {THREADS} threads",
                TOTAL,
                sink_from_threads(str(file / "threads.db"), THREADS, TOTAL),
            ),
            (
                "SQLiteAuditSink, 1 thread",
                COMPARED,
                sink_from_threads(str(file / "one.db"), 1, COMPARED),
            ),
            (
                "plain sqlite3 loop, commit per row",
                COMPARED,
                plain(str(file / "loop.db"), COMPARED, batch=False),
            ),
            (
                "plain executemany, one transaction",
                TOTAL,
                plain(str(file / "batch.db"), TOTAL, batch=True),
            ),
            (
                f'SQLiteAuditSink(":memory:"), {THREADS} threads',
                COMPARED,
                sink_from_threads(":memory:", THREADS, COMPARED),
            ),
        ]
    rate = TOTAL / rows[0][2]
    print("audit store: WAL file, synchronous=NORMAL, every record committed unless noted")
    for label, count, seconds in rows:
        print(
            f"  {label:<40} {count:>7,} records {seconds:6.2f} s  "
            f"{count / seconds:>9,.0f} records/s  {count / seconds / rate:5.2f}x the 4-thread rate"
        )


if __name__ == "__main__":
    main()
