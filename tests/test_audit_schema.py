"""The SQLite store's schema version: 0.1 databases are migrated, later ones refused, none lost."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AsyncAuditStore,
    AuditRecord,
    AuditRecordError,
    AuditStore,
    AuditWriteError,
    CallOutcome,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    execute,
    instruction,
)

# The schema as veridic 0.1 wrote it (user_version left at 0), and rows it wrote.
SCHEMA_0_1 = """
CREATE TABLE veridic_audit (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    request_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT CHECK (kind IN ('query', 'write')),
    risk TEXT CHECK (risk IN ('low', 'mid', 'high')),
    approval TEXT NOT NULL
        CHECK (approval IN ('not_required', 'always_rule', 'user_confirmed', 'denied')),
    wrote_instruction_fields INTEGER NOT NULL CHECK (wrote_instruction_fields IN (0, 1)),
    irreversible INTEGER NOT NULL CHECK (irreversible IN (0, 1)),
    prompt_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    outcome TEXT NOT NULL
        CHECK (outcome IN ('ok', 'failed', 'denied', 'blocked', 'refused')),
    detail TEXT NOT NULL,
    operations TEXT NOT NULL
);
CREATE INDEX veridic_audit_request ON veridic_audit (request_id, id);
CREATE TABLE veridic_model_calls (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    request_id TEXT NOT NULL,
    api TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    tools TEXT NOT NULL,
    instruction_spans TEXT NOT NULL,
    streamed INTEGER NOT NULL CHECK (streamed IN (0, 1))
);
"""
HASH = "a" * 64
ROWS_0_1 = [
    # (tool, kind, risk, approval, outcome, detail)
    ("get_order", "query", "low", "not_required", "ok", ""),
    ("refund", "write", "mid", "denied", "denied", "the user refused"),
    ("refnud", None, None, "denied", "refused", "unknown: never registered"),
    ("refund", "write", "mid", "denied", "refused", "invalid_arguments: order_id"),
    ("refund", "write", "mid", "user_confirmed", "ok", ""),
]


def database_0_1(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA_0_1)
        for index, (tool, kind, risk, approval, outcome, detail) in enumerate(ROWS_0_1):
            db.execute(
                "INSERT INTO veridic_audit (time, request_id, tool, kind, risk, approval, "
                "wrote_instruction_fields, irreversible, prompt_sha256, tools_sha256, outcome, "
                "detail, operations) VALUES (?,?,?,?,?,?,0,0,?,?,?,?,'[]')",
                (float(index), "req-1", tool, kind, risk, approval, HASH, HASH, outcome, detail),
            )
        db.execute(
            "INSERT INTO veridic_model_calls (time, request_id, api, model, prompt_sha256, "
            "tools_sha256, tools, instruction_spans, streamed) VALUES (1, 'req-1', 'scripted', "
            "'m', ?, ?, '[]', '[]', 0)",
            (HASH, HASH),
        )


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


def test_a_0_1_database_is_migrated_and_its_refusals_are_no_longer_denials(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    database_0_1(path)
    with SQLiteAuditSink(path) as store:
        records = store.records("req-1")
        assert [(r.tool, r.approval, r.outcome) for r in records] == [
            ("get_order", ApprovalMode.NOT_REQUIRED, CallOutcome.OK),
            ("refund", ApprovalMode.DENIED, CallOutcome.DENIED),
            ("refnud", ApprovalMode.NOT_ASKED, CallOutcome.REFUSED),
            ("refund", ApprovalMode.NOT_ASKED, CallOutcome.REFUSED),
            ("refund", ApprovalMode.USER_CONFIRMED, CallOutcome.OK),
        ]
        assert [r.time for r in records] == [0.0, 1.0, 2.0, 3.0, 4.0]  # order and rows kept
        assert store.writes_by_approval()[ApprovalMode.DENIED] == 1  # only the user's refusal
        assert store.writes_by_approval()[ApprovalMode.NOT_ASKED] == 1
        assert len(store.model_calls("req-1")) == 1
        assert store.model_replies() == ()  # the tables 0.1 did not have are there
        assert store.conversation("nope") is None
    assert user_version(path) == 10
    with SQLiteAuditSink(path) as again:  # nothing left to do the second time
        assert len(again.records()) == 5


def test_a_fresh_database_is_created_at_the_latest_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteAuditSink(path).close()
    assert user_version(path) == 10
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {
        "veridic_audit",
        "veridic_model_calls",
        "veridic_model_replies",
        "veridic_conversations",
        "veridic_approval_rules",
        "veridic_paused_runs",
        "veridic_vouches",
        "veridic_release",
    }


def test_a_database_of_a_later_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    SQLiteAuditSink(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 11")
    with pytest.raises(AuditRecordError, match=r"schema version 11, written by a later veridic"):
        SQLiteAuditSink(path)
    assert user_version(path) == 11


def test_a_failed_migration_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    database_0_1(path)
    with sqlite3.connect(path) as db:  # a table in the way of step 2
        db.execute("CREATE TABLE veridic_audit_2 (x)")
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        SQLiteAuditSink(path)
    with sqlite3.connect(path) as db:
        approvals = [row[0] for row in db.execute("SELECT approval FROM veridic_audit")]
    assert approvals == [row[3] for row in ROWS_0_1]
    assert user_version(path) == 0


def _open_and_count(path: str) -> int:
    with SQLiteAuditSink(path) as store:
        return len(store.records())


def test_processes_opening_a_0_1_database_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    database_0_1(path)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        counts = pool.map(_open_and_count, [str(path)] * 8)
    assert counts == [5] * 8
    assert user_version(path) == 10


def test_every_record_has_its_own_id_and_a_retry_is_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    database_0_1(path)  # rows written before records had ids get one each
    with SQLiteAuditSink(path) as store:
        old = store.records()
        assert len({r.record_id for r in old}) == 5
        again = store.records()
        assert [r.record_id for r in again] == [r.record_id for r in old]  # stored, not made
        store.write(old[0])  # a retry: the same record, its id already stored
        copy = dataclasses.replace(old[0])
        assert copy == old[0]  # the same call
        assert copy.record_id != old[0].record_id  # but a new record
        store.write(copy)
        assert len(store.records()) == 6
        (call,) = store.model_calls()
        assert len(call.call_id) == 32
        store.write_model_call(call)  # a retried model-call record is stored once too
        assert len(store.model_calls()) == 1


def test_an_answers_record_names_the_model_call_it_answers() -> None:
    store = SQLiteAuditSink()
    view = Registry().view()
    gateway = ModelGateway(ScriptedProvider([{"text": "a"}, {"text": "b"}]), audit=store)
    prompt = Composer().system(instruction("You answer.")).user("Hi").build()
    for _ in range(2):  # the same prompt twice in one request: told apart by id, not order
        gateway.send(prompt, view, request_id="r")
    calls, replies = store.model_calls("r"), store.model_replies("r")
    assert [reply.call_id for reply in replies] == [call.call_id for call in calls]
    assert len({call.call_id for call in calls}) == 2


# --- the questions belong to the protocol ------------------------------------------------


def test_the_sqlite_store_is_an_audit_store_and_an_async_one() -> None:
    store: AuditStore = SQLiteAuditSink()
    astore: AsyncAuditStore = SQLiteAuditSink()
    assert isinstance(store, AuditStore)
    assert isinstance(astore, AsyncAuditStore)
    assert not isinstance(object(), AuditStore)


def test_the_async_twins_answer_as_the_sync_questions(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    database_0_1(path)
    store = SQLiteAuditSink(path)

    async def ask() -> tuple[object, ...]:
        extra = dataclasses.replace(store.records()[1])  # the same call again: a new record
        await store.awrite(extra)
        await store.awrite(extra)  # a retry of the same record is stored once
        return (
            await store.arecords("req-1"),
            await store.amodel_calls("req-1"),
            await store.awrites_by_approval(),
            await store.ainstruction_writes_under_always_rule(),
            await store.asubstitutions(),
            await store.asubstitution_rate(),
        )

    answers = asyncio.run(ask())
    assert answers == (
        store.records("req-1"),
        store.model_calls("req-1"),
        store.writes_by_approval(),
        store.instruction_writes_under_always_rule(),
        store.substitutions(),
        store.substitution_rate(),
    )
    assert len(store.records("req-1")) == 6


class _LostAck:
    """A store whose first write lands but whose answer is lost (a network store's failure)."""

    def __init__(self, store: SQLiteAuditSink) -> None:
        self.store = store
        self.failed = False

    def write(self, record: AuditRecord, /) -> None:
        self.store.write(record)
        if not self.failed:
            self.failed = True
            raise ConnectionError("the connection dropped before the commit was acknowledged")


def test_a_record_written_again_after_a_lost_acknowledgement_is_stored_once() -> None:
    store = SQLiteAuditSink()
    registry = Registry()

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look an order up.

        Args:
            order_id: The order.
        """
        return "lost"

    view = registry.view()
    flaky = _LostAck(store)
    prompt = Composer().system(instruction("You answer.")).user("Hi").build()
    with pytest.raises(AuditWriteError) as lost:
        execute(
            view,
            "get_order",
            {"order_id": 1},
            policy=ApprovalPolicy(view),
            audit=flaky,
            request_id="r",
            prompt=prompt,
        )
    record = lost.value.result.record
    assert isinstance(record, AuditRecord)
    flaky.write(record)  # what the error says to do
    assert len(store.records("r")) == 1


# --- approval state that outlives the process --------------------------------------------


def test_saved_rules_come_back_from_the_store_and_go_through_restore(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    registry = Registry()

    @registry.tool(kind="write")
    def add_note(text: str) -> str:
        """Add a note to the customer's file.

        Args:
            text: The note.
        """
        return "noted"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("add_note")
    with SQLiteAuditSink(path) as host_a:
        host_a.save_rules("user:ada", {**policy.rules, "old_tool": "always"})
        assert host_a.rules("user:bob") == {}
    with SQLiteAuditSink(path) as host_b:
        restored = ApprovalPolicy.restore(view, host_b.rules("user:ada"))
    assert dict(restored.rules) == {"add_note": "always"}
    assert [s.tool for s in restored.skipped] == ["old_tool"]


def _claim(path: str) -> bool:
    with SQLiteAuditSink(path) as store:
        return store.claim_paused("req-1") is not None


def test_a_paused_run_saved_on_one_host_is_claimed_by_exactly_one_other(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    registry = Registry()

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        return "refunded"

    view = registry.view()
    composer = Composer().system(instruction("You refund.")).user("Refund 42")
    with SQLiteAuditSink(path) as store:
        gateway = ModelGateway(
            ScriptedProvider([{"tool_calls": [("c1", "refund", '{"order_id": 42}')]}]),
            audit=store,
        )
        result = gateway.run(
            composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
        )
        assert result.paused is not None
        store.save_paused(result.paused)
        assert store.pending_runs() == ("req-1",)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        claimed = pool.map(_claim, [str(path)] * 8)
    assert claimed.count(True) == 1  # a double click resumes the run once
    with SQLiteAuditSink(path) as store:
        assert store.pending_runs() == ()
        assert store.claim_paused("req-1") is None
