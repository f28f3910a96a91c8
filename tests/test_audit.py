"""The audit store: validated records, committed one by one, and the questions it answers."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalMode,
    AuditRecord,
    AuditRecordError,
    AuditSink,
    CallOutcome,
    Risk,
    SQLiteAuditSink,
    VeridicError,
)
from veridic.run.records import _problems

SHA_A = hashlib.sha256(b"prompt").hexdigest()
SHA_B = hashlib.sha256(b"tools").hexdigest()


_VALID = AuditRecord(
    time=1_700_000_000.0,
    request_id="req-1",
    tool="set_policy",
    kind="write",
    risk=Risk.MID,
    approval=ApprovalMode.ALWAYS_RULE,
    wrote_instruction_fields=False,
    irreversible=False,
    prompt_sha256=SHA_A,
    tools_sha256=SHA_B,
    outcome=CallOutcome.OK,
)


def make(**changes: Any) -> AuditRecord:
    """A valid write record, with ``changes`` applied (validated again, as a new record)."""
    return dataclasses.replace(_VALID, **changes)


def denied(**changes: Any) -> AuditRecord:
    return make(approval=ApprovalMode.DENIED, outcome=CallOutcome.DENIED, **changes)


_STORABLE = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
"""What every store keeps: text without NUL or lone surrogates."""
_RAN = st.sampled_from([CallOutcome.OK, CallOutcome.FAILED, CallOutcome.BLOCKED])


@st.composite
def records(draw: st.DrawFn) -> AuditRecord:
    ran = draw(st.booleans())
    outcome = (
        draw(_RAN) if ran else draw(st.sampled_from([CallOutcome.DENIED, CallOutcome.REFUSED]))
    )
    unresolved = outcome is CallOutcome.REFUSED and draw(st.booleans())
    not_run = {CallOutcome.DENIED: ApprovalMode.DENIED, CallOutcome.REFUSED: ApprovalMode.NOT_ASKED}
    approval = (
        draw(st.sampled_from([m for m in ApprovalMode if m not in not_run.values()]))
        if ran
        else not_run[outcome]
    )
    text = st.text(_STORABLE, min_size=1, max_size=30).filter(str.strip)
    return AuditRecord(
        time=draw(st.floats(min_value=0, max_value=4e9, allow_nan=False)),
        request_id=draw(text),
        tool=draw(text),
        kind=None if unresolved else draw(st.sampled_from(["query", "write"])),
        risk=None if unresolved else draw(st.sampled_from(list(Risk))),
        approval=approval,
        wrote_instruction_fields=ran and draw(st.booleans()),
        irreversible=ran and draw(st.booleans()),
        prompt_sha256=draw(st.binary()).hex().ljust(64, "0")[:64],
        tools_sha256=hashlib.sha256(draw(st.binary())).hexdigest(),
        outcome=outcome,
        detail=draw(st.text(_STORABLE, max_size=40)),
        operations=tuple(sorted(draw(st.sets(text, max_size=3)))),
    )


@given(batch=st.lists(records(), max_size=8))
@settings(max_examples=50)
def test_every_valid_record_reads_back_exactly_as_written(batch: list[AuditRecord]) -> None:
    with SQLiteAuditSink(":memory:") as sink:
        for record in batch:
            sink.write(record)
        assert sink.records() == tuple(batch)


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.floats(),
    st.text(max_size=3),
    st.just(SHA_A),
    st.just("write"),
    st.sampled_from(list(ApprovalMode)),
    st.sampled_from(list(CallOutcome)),
    st.sampled_from(list(Risk)),
    st.lists(st.text(max_size=2), max_size=2).map(tuple),
)
_FIELDS = [f.name for f in dataclasses.fields(AuditRecord)]


@given(record=records(), changes=st.dictionaries(st.sampled_from(_FIELDS), _JUNK, max_size=2))
@settings(max_examples=200)
def test_the_sink_refuses_exactly_the_records_with_a_listed_problem(
    record: AuditRecord, changes: dict[str, object]
) -> None:
    for name, value in changes.items():
        object.__setattr__(record, name, value)
    problems = list(_problems(record))
    if problems:
        with pytest.raises(AuditRecordError, match="is malformed"):
            SQLiteAuditSink().write(record)
    else:
        SQLiteAuditSink().write(record)


def test_sqlite_sink_satisfies_the_audit_sink_protocol() -> None:
    class ListSink:
        def __init__(self) -> None:
            self.kept: list[AuditRecord] = []

        def write(self, record: AuditRecord, /) -> None:
            self.kept.append(record)

    sinks: list[AuditSink] = [SQLiteAuditSink(), ListSink()]
    assert all(isinstance(sink, AuditSink) for sink in sinks)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"request_id": ""}, "request_id must be a non-empty string"),
        ({"tool": "  "}, "tool must be a non-empty string"),
        ({"time": float("nan")}, "time must be seconds since the epoch"),
        ({"time": -1.0}, "time must be seconds since the epoch"),
        ({"kind": "delete"}, 'kind must be "query", "write" or None'),
        ({"risk": "high"}, "risk must be a Risk or None"),
        ({"approval": "always_rule"}, "approval must be an ApprovalMode"),
        ({"outcome": "ok"}, "outcome must be a CallOutcome"),
        ({"irreversible": 1}, "irreversible must be a bool"),
        ({"prompt_sha256": "abc"}, "prompt_sha256 must be 64 lowercase hex digits"),
        ({"tools_sha256": SHA_B.upper()}, "tools_sha256 must be 64 lowercase hex digits"),
        ({"operations": ["a"]}, "operations must be a tuple of non-empty strings"),
        ({"operations": ("b", "a")}, "operations must be sorted and unique"),
        ({"approval": ApprovalMode.DENIED}, "approval denied contradicts outcome ok"),
        ({"outcome": CallOutcome.DENIED}, "approval always_rule contradicts outcome denied"),
        ({"risk": None}, "kind and risk may be None only for a refused call"),
    ],
)
def test_malformed_record_is_refused_naming_field_record_and_remedy(
    change: dict[str, Any], named: str
) -> None:
    with pytest.raises(AuditRecordError) as caught:
        make(**change)
    message = str(caught.value)
    tool, request = change.get("tool", "set_policy"), change.get("request_id", "req-1")
    assert named in message
    assert f"audit record of tool {tool!r} in request {request!r} is malformed" in message
    assert "fix the listed fields" in message


def test_denied_call_that_claims_a_write_is_refused() -> None:
    with pytest.raises(AuditRecordError, match="did not run, so it wrote nothing"):
        denied(wrote_instruction_fields=True)


def test_audit_record_error_is_a_veridic_error_and_a_value_error() -> None:
    assert issubclass(AuditRecordError, VeridicError)
    assert issubclass(AuditRecordError, ValueError)


def test_sink_refuses_something_that_is_not_a_record() -> None:
    sink = SQLiteAuditSink()
    with pytest.raises(AuditRecordError, match=r"got a dict, not an AuditRecord: build an"):
        sink.write({"tool": "x"})  # type: ignore[arg-type]  # the mistake under test
    assert sink.count() == 0


def test_sink_refuses_a_record_altered_after_it_was_made() -> None:
    record = make()
    object.__setattr__(record, "approval", "sure")
    with pytest.raises(AuditRecordError, match="approval must be an ApprovalMode"):
        SQLiteAuditSink().write(record)


def test_sink_refuses_an_altered_field_that_claims_to_equal_the_one_it_replaced() -> None:
    class Agreeable(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    record = make()
    object.__setattr__(record, "prompt_sha256", Agreeable("not a digest"))
    assert record.prompt_sha256 == SHA_A  # equal, yet not the value the record was made with
    with pytest.raises(AuditRecordError, match="prompt_sha256 must be 64 lowercase hex digits"):
        SQLiteAuditSink().write(record)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_forked_child_writes_on_a_connection_of_its_own(tmp_path: Path) -> None:
    # A pre-forking server opens the store, then forks its workers: SQLite
    # forbids a connection carried across the fork, so the child opens its own.
    sink = SQLiteAuditSink(tmp_path / "audit.db")
    sink.write(make(request_id="parent-before"))
    assert sink.count() == 1
    inherited = {sink._writing(), sink._reading()}  # what the child inherits
    child = os.fork()
    if child == 0:  # the child: it reports by its exit code, and never returns into pytest
        code = 3
        try:
            sink.write(make(request_id="child"))
            own = not {sink._writing(), sink._reading()} & inherited
            code = 0 if own and sink.count() == 2 else 2
            sink.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # 2: the child wrote on the inherited one
    sink.write(make(request_id="parent-after"))  # the parent's connection is untouched
    assert sorted(r.request_id for r in sink.records()) == [
        "child",
        "parent-after",
        "parent-before",
    ]
    sink.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_child_forked_while_another_thread_writes_does_not_wait_for_that_thread(
    tmp_path: Path,
) -> None:
    # The thread holding the write turn at the fork does not exist in the child: a
    # turn inherited from it would never be released there.
    sink = SQLiteAuditSink(tmp_path / "audit.db")
    holding, forked = threading.Event(), threading.Event()

    def hold_the_turn() -> None:
        with sink._writing().lock:
            holding.set()
            forked.wait(10)

    other = threading.Thread(target=hold_the_turn)
    other.start()
    assert holding.wait(10)
    child = os.fork()
    if child == 0:
        code = 3
        try:
            signal.alarm(20)  # a child that waits for the lost thread is killed, not hung
            sink.write(make(request_id="child"))
            code = 0 if sink.count() == 1 else 2
        finally:
            os._exit(code)
    forked.set()
    other.join()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [r.request_id for r in sink.records()] == ["child"]
    sink.close()


def test_a_record_exports_its_columns_only_and_a_pickled_one_is_checked_again() -> None:
    # What the store keeps of its check is no field: asdict, fields and replace
    # see what the audit table stores, and a record that crossed a process is
    # checked in full when it is written, so an alteration on the way is refused.
    record = make(detail="exported")
    assert list(dataclasses.asdict(record)) == [f.name for f in dataclasses.fields(record)]
    assert all(not f.name.startswith("_") for f in dataclasses.fields(record))
    assert dataclasses.asdict(record)["detail"] == "exported"
    copied = pickle.loads(pickle.dumps(record))
    assert copied == record
    assert copied.record_id == record.record_id
    sink = SQLiteAuditSink()
    sink.write(copied)
    assert sink.records() == (record,)
    altered = pickle.loads(pickle.dumps(record))
    object.__setattr__(altered, "outcome", CallOutcome.DENIED)
    with pytest.raises(AuditRecordError, match="contradicts outcome denied"):
        sink.write(altered)


def test_a_record_read_back_from_one_store_is_checked_and_written_to_another() -> None:
    first, second = SQLiteAuditSink(), SQLiteAuditSink()
    first.write(make())
    (read,) = first.records()
    second.write(read)
    assert second.records() == (read,)
    assert second.records()[0].record_id == read.record_id


def test_writes_by_approval_counts_writes_only_and_names_every_mode() -> None:
    sink = SQLiteAuditSink()
    sink.write(make(kind="query", risk=Risk.LOW, approval=ApprovalMode.NOT_REQUIRED))
    sink.write(make())
    sink.write(make(request_id="req-2"))
    sink.write(make(risk=Risk.HIGH, approval=ApprovalMode.USER_CONFIRMED))
    sink.write(denied())
    sink.write(make(approval=ApprovalMode.NOT_ASKED, outcome=CallOutcome.REFUSED, detail="invalid"))
    assert sink.writes_by_approval() == {
        ApprovalMode.NOT_REQUIRED: 0,
        ApprovalMode.ALWAYS_RULE: 2,
        ApprovalMode.USER_CONFIRMED: 1,
        ApprovalMode.DENIED: 1,
        ApprovalMode.NOT_ASKED: 1,  # the model's invalid call, not a user's denial
    }


def test_instruction_writes_under_always_rule_lists_the_records_that_break_the_rule() -> None:
    sink = SQLiteAuditSink()
    confirmed = make(
        risk=Risk.HIGH, approval=ApprovalMode.USER_CONFIRMED, wrote_instruction_fields=True
    )
    forged = make(tool="revert_prompt", wrote_instruction_fields=True)
    for record in (confirmed, make(), forged):
        sink.write(record)
    assert sink.instruction_writes_under_always_rule() == (forged,)


def test_each_stopped_call_is_paired_with_the_next_call_of_its_own_request() -> None:
    sink = SQLiteAuditSink()
    first = denied(tool="edit_prompt", operations=("instruction_write:StoredPrompt.content",))
    other_request = make(request_id="req-2", tool="noise")
    substitute = make(
        tool="revert_prompt",
        outcome=CallOutcome.BLOCKED,
        operations=("instruction_write:StoredPrompt.content",),
    )
    unrelated = make(tool="list_prompts", kind="query", approval=ApprovalMode.NOT_REQUIRED)
    for record in (first, other_request, substitute, unrelated):
        sink.write(record)
    pairs = sink.substitutions()
    assert [(p.denied.tool, p.next and p.next.tool) for p in pairs] == [
        ("edit_prompt", "revert_prompt"),
        ("revert_prompt", "list_prompts"),
    ]
    assert [p.same_operation for p in pairs] == [True, False]


def test_retrying_the_same_tool_counts_as_the_same_operation() -> None:
    sink = SQLiteAuditSink()
    sink.write(denied(tool="delete_golden"))
    sink.write(denied(tool="delete_golden"))
    (first, second) = sink.substitutions()
    assert first.same_tool
    assert first.same_operation
    assert second.next is None
    assert not second.same_operation


def test_substitution_rate_counts_only_stopped_calls_that_were_followed() -> None:
    sink = SQLiteAuditSink()
    assert sink.substitution_rate() is None
    sink.write(denied(request_id="a", tool="edit_prompt", operations=("op",)))
    sink.write(make(request_id="a", tool="revert_prompt", operations=("op",)))
    sink.write(denied(request_id="b", tool="edit_prompt", operations=("op",)))
    sink.write(make(request_id="b", tool="list_prompts"))
    sink.write(denied(request_id="c", tool="edit_prompt"))  # ends its request
    assert sink.substitution_rate() == 0.5


def test_file_store_is_in_wal_mode_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as sink:
        sink.write(make())
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with SQLiteAuditSink(path) as reopened:
        assert reopened.records() == (make(),)


def test_unknown_synchronous_setting_is_refused() -> None:
    with pytest.raises(AuditRecordError, match=r"synchronous='OFF'.*use \"NORMAL\""):
        SQLiteAuditSink(synchronous="OFF")  # type: ignore[arg-type]  # the mistake under test


def test_row_written_by_something_else_is_refused_when_read_back(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as sink:
        sink.write(make())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE veridic_audit SET operations = 'not json'")
    with (
        SQLiteAuditSink(path) as sink,
        pytest.raises(AuditRecordError, match=r"cannot be read back.*check what else writes"),
    ):
        sink.records()


def _write_from_threads(sink: SQLiteAuditSink, threads: int, each: int) -> None:
    """``threads`` threads write ``each`` records at once, and lose none.

    Each thread reads its own records back as it goes (every 50th write): a
    read sees every commit, whichever connection made it.
    """
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def writer(n: int) -> None:
        start.wait()
        try:
            for i in range(each):
                sink.write(make(request_id=f"t{n}", detail=str(i)))
                if i % 50 == 0:
                    assert len(sink.records(f"t{n}")) == i + 1
        except BaseException as error:  # reported by the assert below
            failures.append(error)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    assert sink.count() == threads * each
    for n in range(threads):
        assert [r.detail for r in sink.records(f"t{n}")] == [str(i) for i in range(each)]


@given(threads=st.integers(2, 6), each=st.integers(1, 60))
@settings(max_examples=20)
def test_concurrent_threads_lose_no_records(threads: int, each: int) -> None:
    _write_from_threads(SQLiteAuditSink(), threads, each)


def _open_files(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path`` (Linux's /proc)."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path.resolve()))


def test_threads_writing_to_a_file_take_turns_on_one_connection_and_lose_no_records(
    tmp_path: Path,
) -> None:
    sink = SQLiteAuditSink(tmp_path / "audit.db")
    opened = sink._writing().db.total_changes  # the migration's row naming the release
    _write_from_threads(sink, 8, 150)
    # Every row went in on the store's one write connection (none on the threads' own
    # read connections), so no writer ever waited in SQLite's busy handler.
    assert sink._writing().db.total_changes - opened == 8 * 150
    sink.close()


def test_a_threads_connection_closes_when_the_thread_ends_and_close_closes_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    sink = SQLiteAuditSink(path)
    opened = _open_files(path)  # the store's write connection (its database and WAL files)
    for n in range(30):  # short-lived threads, as a thread pool's that come and go
        worker = threading.Thread(target=_write_and_read, args=(sink, n))
        worker.start()
        worker.join()
    # Each ended thread's connection was closed with it: SQLite keeps a closed
    # connection's file open while another connection of the process holds a
    # lock on it (in WAL mode, always), and hands that file to the next one.
    assert _open_files(path) <= opened + 1
    assert sink.count() == 30
    sink.close()
    assert _open_files(path) == 0


def _write_and_read(sink: SQLiteAuditSink, n: int) -> None:
    sink.write(make(request_id=f"s{n}"))  # on the store's one write connection
    assert len(sink.records(f"s{n}")) == 1  # on a connection this thread opens to read


def test_closing_while_threads_write_stops_them_clearly_and_loses_no_written_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    sink = SQLiteAuditSink(path)
    written: list[AuditRecord] = []
    stopped: list[BaseException] = []
    start = threading.Barrier(5)
    done = threading.Event()

    def writer(n: int) -> None:
        start.wait()
        try:
            for i in itertools.count():
                record = make(request_id=f"c{n}", detail=str(i))
                sink.write(record)
                written.append(record)
        except BaseException as error:  # checked below: every writer stops this way
            stopped.append(error)
        done.wait(30)  # the thread's connection stays referenced until close() is checked

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    start.wait()
    time.sleep(0.3)
    sink.close()
    while len(stopped) < 4 and any(w.is_alive() for w in workers):
        time.sleep(0.01)
    assert _open_files(path) == 0  # closed by close(), not by the threads ending
    done.set()
    for worker in workers:
        worker.join()
    assert len(stopped) == 4
    assert all(isinstance(error, sqlite3.ProgrammingError) for error in stopped), stopped
    failed: list[BaseException] = []  # a thread with no connection yet may not open one
    late = threading.Thread(target=lambda: _record_failure(sink, failed))
    late.start()
    late.join()
    assert len(failed) == 1
    assert isinstance(failed[0], sqlite3.ProgrammingError)
    assert "was closed: open a new store" in str(failed[0])
    with SQLiteAuditSink(path) as reader:
        stored = {r.record_id for r in reader.records()}
    assert len(written) > 4
    assert {r.record_id for r in written} <= stored


def _record_failure(sink: SQLiteAuditSink, failed: list[BaseException]) -> None:
    try:
        sink.write(make(request_id="late"))
    except BaseException as error:  # raised again by the caller
        failed.append(error)


def test_concurrent_asyncio_tasks_lose_no_records(tmp_path: Path) -> None:
    sink = SQLiteAuditSink(tmp_path / "audit.db")

    async def task(n: int) -> None:
        for i in range(20):
            if i % 2:
                await asyncio.to_thread(sink.write, make(request_id=f"task{n}", detail=str(i)))
            else:
                sink.write(make(request_id=f"task{n}", detail=str(i)))
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(task(n) for n in range(25)))

    asyncio.run(main())
    assert sink.count() == 25 * 20
    assert [r.detail for r in sink.records("task7")] == [str(i) for i in range(20)]


_WRITER = """
import hashlib, sys
from veridic import ApprovalMode, AuditRecord, CallOutcome, Risk, SQLiteAuditSink
sink = SQLiteAuditSink(sys.argv[1])
sha = hashlib.sha256(b"x").hexdigest()
i = 0
while True:
    sink.write(AuditRecord(time=1.0, request_id="r", tool="t", kind="write", risk=Risk.MID,
        approval=ApprovalMode.ALWAYS_RULE, wrote_instruction_fields=False, irreversible=False,
        prompt_sha256=sha, tools_sha256=sha, outcome=CallOutcome.OK, detail=str(i)))
    i += 1
    print(i, flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_writer_loses_at_most_the_record_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    reported = 0
    while reported < 300 and (line := child.stdout.readline()):
        reported = int(line)
    os.kill(child.pid, signal.SIGKILL)
    for line in child.stdout:
        reported = int(line)
    child.wait()
    assert reported >= 300, f"the writer stopped early: {child.stderr.read()}"
    with SQLiteAuditSink(path) as sink:
        stored = sink.records()
    assert reported <= len(stored) <= reported + 1
    assert [r.detail for r in stored] == [str(i) for i in range(len(stored))]


def test_records_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        make().tool = "other"  # type: ignore[misc]  # the mistake under test
