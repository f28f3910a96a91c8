"""Eighteenth review of the audit stores, as an attacker with write access to a row and as
an operator: each test failed before its fix. Postgres tests run on the server the session
starts (tests/_postgres.py)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from veridic import SQLiteAuditSink

from test_postgres_store import make  # isort: skip

# --- SQLite: a store opened while another connection writes the file ----------------------


def test_a_store_opens_while_another_connection_writes_the_file_in_rollback_mode(
    tmp_path: Path,
) -> None:
    # A new file is in rollback mode until its first store switches it to WAL. SQLite
    # refuses that switch at once ("database is locked"), without waiting as a write does,
    # while another connection holds the write lock: workers that opened one new file at
    # once (a server's processes starting together) failed now and then, though several
    # processes may write to one file. The store waits for the lock, as a write does.
    path = tmp_path / "audit.db"
    SQLiteAuditSink(path).close()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA journal_mode=DELETE")  # as the file was before its first store's switch
    other.execute("BEGIN IMMEDIATE")  # another store's write under way
    released = threading.Timer(0.2, other.execute, ("COMMIT",))
    released.start()
    try:
        with SQLiteAuditSink(path) as store:
            store.write(make())
            assert store.count() == 1
    finally:
        released.join()
        other.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_stores_opened_at_once_on_a_new_file_all_open(tmp_path: Path) -> None:
    # The race the test above sets up by hand, run for real: eight stores opening one new
    # file at once, forty times. Before the fix one open in a hundred or two failed.
    failures: list[BaseException] = []
    for attempt in range(40):
        path = tmp_path / f"audit-{attempt}.db"
        start = threading.Barrier(8)

        def open_and_write(path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                with SQLiteAuditSink(path) as store:
                    store.write(make())
            except BaseException as error:  # collected, and failed on below
                failures.append(error)

        threads = [threading.Thread(target=open_and_write) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with SQLiteAuditSink(path) as store:
            assert store.count() == 8
    assert failures == []
