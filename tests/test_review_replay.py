"""Attacker review: a paused run resumed twice, and what the stores keep of each call.

A paused run kept in a session cookie, a queue that delivers twice, or a double click
on "approve" resumed the same waiting calls twice: an approved refund ran twice, and a
"no" could be replayed as a "yes". Each call's record now keeps the model's call id, and
a resume refuses a paused run whose waiting calls are on record. Each test failed before
its fix.
"""

from __future__ import annotations

import asyncio
import sqlite3
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_deferred import CALLS, make_registry, system_part

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AsyncPostgresAuditSink,
    AuditRecord,
    AuditRecordError,
    CallOutcome,
    ModelGateway,
    PausedRun,
    PostgresAuditSink,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
    VouchRecord,
    execute,
)

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _gateway(
    script: Sequence[Mapping[str, object]], audit: object, *, asynchronous: bool = False
) -> ModelGateway:
    return ModelGateway(
        ScriptedProvider(script, asynchronous=asynchronous),
        audit=audit,  # type: ignore[arg-type]  # a store of the fixture, or a bare sink
    )


def _paused(
    store: object,
    ran: list[str],
    script: Sequence[Mapping[str, object]] = (CALLS,),
    ask: str = "My parcel 42 is lost, refund it.",
    request_id: str = "req-1",
) -> PausedRun:
    view = make_registry(ran=ran).view()
    composer = system_part(view).user(ask)
    result = _gateway(script, store).run(
        composer, view, policy=ApprovalPolicy(view), request_id=request_id, defer=True
    )
    assert result.paused is not None
    return result.paused


def _resume(store: object, paused: PausedRun, ran: list[str], answer: bool) -> None:
    view = make_registry(ran=ran).view()
    answers = {approval.digest: answer for approval in paused.approvals}
    _gateway([{"text": "Done."}], store).resume(
        paused, system_part(view), view, policy=ApprovalPolicy(view), answers=answers
    )


# --- the main gap: a paused run resumed twice ------------------------------------------------


def test_a_paused_run_resumed_twice_runs_its_approved_write_once(store: Store) -> None:
    ran: list[str] = []
    paused = _paused(store, ran)
    kept = paused.to_json()  # a session cookie, a queue message
    _resume(store, PausedRun.from_json(kept), ran, True)
    assert ran.count("refund 42") == 1
    with pytest.raises(VeridicError, match=r"resumed already.*call 'c2'.*nothing was run"):
        _resume(store, PausedRun.from_json(kept), ran, True)
    assert ran.count("refund 42") == 1
    assert ran.count("note refunded") == 1


def test_a_paused_run_resumed_twice_from_async_code_runs_its_write_once(store: Store) -> None:
    ran: list[str] = []
    paused = _paused(store, ran)

    async def resume() -> None:
        view = make_registry(ran=ran).view()
        answers = {approval.digest: True for approval in paused.approvals}
        await _gateway([{"text": "Done."}], store, asynchronous=True).aresume(
            paused, system_part(view), view, policy=ApprovalPolicy(view), answers=answers
        )

    asyncio.run(resume())
    with pytest.raises(VeridicError, match="resumed already"):
        asyncio.run(resume())
    assert ran.count("refund 42") == 1


def test_an_async_only_store_refuses_a_second_aresume(postgres_dsn: str) -> None:
    ran: list[str] = []

    async def both() -> None:
        async with AsyncPostgresAuditSink(postgres_dsn) as store:
            view = make_registry(ran=ran).view()
            composer = system_part(view).user("Refund 42.")
            result = await _gateway([CALLS], store, asynchronous=True).arun(
                composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
            )
            paused = result.paused
            assert paused is not None
            answers = {approval.digest: True for approval in paused.approvals}
            for _ in range(2):
                view = make_registry(ran=ran).view()
                await _gateway([{"text": "Done."}], store, asynchronous=True).aresume(
                    paused, system_part(view), view, policy=ApprovalPolicy(view), answers=answers
                )

    with pytest.raises(VeridicError, match="resumed already"):
        asyncio.run(both())
    assert ran.count("refund 42") == 1


def test_a_no_cannot_be_replayed_as_a_yes(store: Store) -> None:
    ran: list[str] = []
    paused = _paused(store, ran)
    _resume(store, paused, ran, False)  # the user said no: recorded denied
    assert "refund 42" not in ran
    with pytest.raises(VeridicError, match=r"resumed already.*outcome denied"):
        _resume(store, paused, ran, True)  # the same paused run, with a forged yes
    assert "refund 42" not in ran


def test_a_resume_that_paused_again_leaves_only_the_new_paused_run_to_resume() -> None:
    store = SQLiteAuditSink()
    ran: list[str] = []
    two = {"tool_calls": [("c1", "refund", '{"order_id": 1}'), ("c2", "refund", '{"order_id": 2}')]}
    first = _paused(store, ran, [two], "Refund 1 and 2.", "req-2")
    c1 = next(a for a in first.approvals if a.call_id == "c1")
    view = make_registry(ran=ran).view()
    again = (
        _gateway([], store)
        .resume(  # only c1 answered: c2 waits again
            first, system_part(view), view, policy=ApprovalPolicy(view), answers={c1.digest: True}
        )
        .paused
    )
    assert again is not None
    assert ran == ["refund 1"]
    with pytest.raises(VeridicError, match="resumed already"):
        _resume(store, first, ran, True)
    _resume(store, again, ran, True)
    assert ran == ["refund 1", "refund 2"]


def test_a_failed_resume_that_ran_nothing_can_be_resumed() -> None:
    store = SQLiteAuditSink()
    ran: list[str] = []
    paused = _paused(store, ran)
    view = make_registry(ran=ran).view()
    with pytest.raises(VeridicError, match="no approval of the paused run"):
        _gateway([], store).resume(
            paused, system_part(view), view, policy=ApprovalPolicy(view), answers={"c9": True}
        )
    _resume(store, paused, ran, True)
    assert ran.count("refund 42") == 1


def test_an_earlier_turn_whose_call_id_the_provider_repeats_is_not_a_resume() -> None:
    # Some servers number calls per reply ("call_0" every turn): an earlier turn's call of
    # the same id ran under another prompt, and does not make the paused run resumed.
    store = SQLiteAuditSink()
    ran: list[str] = []
    script = [
        {"tool_calls": [("call_0", "get_order", '{"order_id": 42}')]},
        {"tool_calls": [("call_1", "refund", '{"order_id": 42}')]},
    ]
    paused = _paused(store, ran, script, "Refund 42.", "req-3")
    _resume(store, paused, ran, True)
    assert ran == ["get_order 42", "refund 42"]


class _WriteOnly:
    """A sink that stores and cannot be asked: it could not tell a resumed run."""

    def __init__(self) -> None:
        self.kept: list[AuditRecord] = []

    def write(self, record: AuditRecord, /) -> None:
        self.kept.append(record)

    def write_model_call(self, record: object, /) -> None:
        pass


def test_a_resume_with_an_audit_sink_that_cannot_be_asked_is_refused_before_anything_runs() -> None:
    sink = _WriteOnly()
    ran: list[str] = []
    paused = _paused(sink, ran)
    with pytest.raises(VeridicError, match=r"has no records\(request_id\).*nothing was run"):
        _resume(sink, paused, ran, True)
    assert "refund 42" not in ran


# --- every record of a model's call keeps its id ----------------------------------------------


def test_each_record_of_a_run_keeps_the_models_call_id(store: Store) -> None:
    ran: list[str] = []
    paused = _paused(store, ran)
    _resume(store, paused, ran, True)
    assert [(r.call_id, r.tool) for r in store.records("req-1")] == [
        ("c1", "get_order"),
        ("c2", "refund"),
        ("c3", "get_order"),
        ("c4", "add_note"),
    ]


def test_a_call_id_no_store_keeps_is_recorded_escaped_and_found_again(store: Store) -> None:
    view = make_registry().view()
    result = execute(
        view,
        "get_order",
        {"order_id": 1},
        policy=ApprovalPolicy(view),
        audit=store,
        request_id="req-4",
        prompt_sha256="0" * 64,
        call_id="c\x00\ud800",
    )
    assert result.record.call_id == "c\\x00\\ud800"
    assert store.records("req-4")[0].call_id == "c\\x00\\ud800"


def test_a_record_holding_a_call_id_no_store_keeps_is_refused() -> None:
    with pytest.raises(AuditRecordError, match="call_id holds a NUL"):
        AuditRecord(
            time=1.0,
            request_id="r",
            tool="t",
            kind="query",
            risk=Risk.LOW,
            approval=ApprovalMode.NOT_REQUIRED,
            wrote_instruction_fields=False,
            irreversible=False,
            prompt_sha256="0" * 64,
            tools_sha256="0" * 64,
            outcome=CallOutcome.OK,
            call_id="c\x00",
        )


# --- a database of the schema before call ids ----------------------------------------------


_V5_ROW = (
    "INSERT INTO veridic_audit (time, request_id, tool, kind, risk, approval, "
    "wrote_instruction_fields, irreversible, prompt_sha256, tools_sha256, outcome, detail, "
    "operations, duration, arguments_sha256, record_id) VALUES "
    "(1.0, 'old', 'refund', 'write', 'mid', 'user_confirmed', {false}, {false}, "
    f"'{'0' * 64}', '{'0' * 64}', 'ok', '', '[]', 0.5, '', '{'a' * 32}')"
)


def test_a_sqlite_database_of_schema_5_is_migrated_and_its_records_have_no_call_id(
    tmp_path: Path,
) -> None:
    from veridic.run import _sqlite_schema

    path = tmp_path / "v5.db"
    db = sqlite3.connect(path, isolation_level=None)
    for step in _sqlite_schema._STEPS[:5]:  # the schema veridic wrote at version 5
        step(db)
    db.execute("PRAGMA user_version = 5")
    db.execute(_V5_ROW.format(false=0))
    db.close()
    with SQLiteAuditSink(path) as store:
        (old,) = store.records("old")
        assert (old.tool, old.call_id, old.record_id) == ("refund", "", "a" * 32)
        ran: list[str] = []
        _resume(store, _paused(store, ran), ran, True)
        assert [r.call_id for r in store.records("req-1")] == ["c1", "c2", "c3", "c4"]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == _sqlite_schema.VERSION


def test_a_postgres_database_of_schema_5_is_migrated_and_its_records_have_no_call_id(
    postgres_dsn: str,
) -> None:
    import psycopg

    from veridic.run import _postgres_schema

    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        for statement in _postgres_schema._VERSION_5:  # the schema veridic wrote at 5
            db.execute(statement)
        db.execute(_V5_ROW.format(false="false"))
    with PostgresAuditSink(postgres_dsn) as store:
        (old,) = store.records("old")
        assert (old.tool, old.call_id, old.record_id) == ("refund", "", "a" * 32)
        ran: list[str] = []
        paused = _paused(store, ran)
        _resume(store, paused, ran, True)
        with pytest.raises(VeridicError, match="resumed already"):
            _resume(store, paused, ran, True)
        assert ran.count("refund 42") == 1
    with psycopg.connect(postgres_dsn) as db:
        row = db.execute("SELECT version FROM veridic_schema").fetchone()
        assert row == (_postgres_schema.VERSION,)


# --- stored rows edited, or a backup restored: they must not change meaning ------------------


def _edit(store: Store, sql: str) -> None:
    """Run ``sql`` on the store's database, as a hand edit or a restored backup would."""
    if isinstance(store, SQLiteAuditSink):
        with sqlite3.connect(store._path) as db:
            db.execute(sql)
    else:
        with store._pool.connection() as db:
            db.execute(sql)


def test_rules_stored_with_a_tool_given_twice_are_refused(store: Store) -> None:
    store.save_rules("team", {"refund": "deny"})
    # Read by a reviewer (or json.tool): "deny"; json.loads kept the last value, "always".
    _edit(
        store,
        "UPDATE veridic_approval_rules SET document = "
        """'{"refund": "deny", "refund": "always"}'""",
    )
    with pytest.raises(AuditRecordError, match="'refund' is given twice"):
        store.rules("team")


def test_rules_stored_as_other_values_than_text_are_refused(store: Store) -> None:
    store.save_rules("team", {"refund": "deny"})
    _edit(store, """UPDATE veridic_approval_rules SET document = '{"refund": ["deny"]}'""")
    with pytest.raises(AuditRecordError, match="not a JSON object of tool names to rules"):
        store.rules("team")


def test_a_claimed_paused_run_of_another_request_is_refused(store: Store) -> None:
    ran: list[str] = []
    store.save_paused(_paused(store, ran))  # request req-1
    _edit(store, "UPDATE veridic_paused_runs SET request_id = 'req-bob'")
    with pytest.raises(AuditRecordError, match="holds the paused run of request 'req-1'"):
        store.claim_paused("req-bob")


# --- numbers both stores give back alike -----------------------------------------------------


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def test_a_time_of_minus_zero_is_read_back_alike_from_both_stores(store: Store) -> None:
    """SQLite read 0.0 back (it writes a whole REAL as an integer); Postgres kept -0.0."""
    record = AuditRecord(
        time=-0.0,
        request_id="r",
        tool="t",
        kind="query",
        risk=Risk.LOW,
        approval=ApprovalMode.NOT_REQUIRED,
        wrote_instruction_fields=False,
        irreversible=False,
        prompt_sha256="0" * 64,
        tools_sha256="0" * 64,
        outcome=CallOutcome.OK,
        duration=-0.0,
    )
    store.write(record)
    store.write_vouch(VouchRecord("p", "r", "c", "s", -0.0))
    (read,) = store.records()
    (vouch,) = store.vouches()
    assert [_bits(t) for t in (read.time, read.duration, vouch.time)] == [_bits(0.0)] * 3


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seconds=st.floats(min_value=-0.0, allow_nan=False, allow_infinity=False))
@example(seconds=-0.0)
@example(seconds=5e-324)
def test_every_time_a_record_holds_is_read_back_as_written_plus_zero(
    store: Store, seconds: float
) -> None:
    record = AuditRecord(
        time=seconds,
        request_id=f"r{uuid.uuid4().hex}",
        tool="t",
        kind="query",
        risk=Risk.LOW,
        approval=ApprovalMode.NOT_REQUIRED,
        wrote_instruction_fields=False,
        irreversible=False,
        prompt_sha256="0" * 64,
        tools_sha256="0" * 64,
        outcome=CallOutcome.OK,
        duration=seconds,
    )
    store.write(record)
    (read,) = store.records(record.request_id)
    assert (_bits(read.time), _bits(read.duration)) == (_bits(seconds + 0.0),) * 2


# --- a stored list read as what it says --------------------------------------------------------

_LISTS: dict[str, tuple[str, Callable[[Store], object]]] = {
    # A JSON object read as its keys: the reviewer sees "false", veridic the operation.
    "audit operations": (
        "UPDATE veridic_audit SET operations = '{\"instruction_write:Prompt.content\": false}'",
        lambda s: s.records(),
    ),
    # A JSON string read as its characters.
    "model call tools": (
        "UPDATE veridic_model_calls SET tools = '\"purge\"'",
        lambda s: s.model_calls(),
    ),
    "answer tool calls": (
        "UPDATE veridic_model_replies SET tool_calls = '{\"purge\": 1}'",
        lambda s: s.model_replies(),
    ),
}


@pytest.mark.parametrize("case", sorted(_LISTS))
def test_a_stored_list_that_is_not_a_list_of_names_is_refused(store: Store, case: str) -> None:
    view = make_registry().view()
    composer = system_part(view).user("Where is 42?")
    script: list[Mapping[str, object]] = [
        {"tool_calls": [("c1", "get_order", '{"order_id": 42}')]},
        {"text": "Lost."},
    ]
    _gateway(script, store).run(composer, view, policy=ApprovalPolicy(view), request_id="req-l")
    sql, read = _LISTS[case]
    _edit(store, sql)
    with pytest.raises(AuditRecordError, match="not a JSON list of text"):
        read(store)
