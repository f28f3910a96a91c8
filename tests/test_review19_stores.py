"""Nineteenth review of the audit stores: a claim of a paused run whose answer was lost, and
two hosts writing one unlinked answer at once. Each test failed before its fix. Postgres
tests run on the server the session starts (tests/_postgres.py); a lost answer there is a
real one, a proxy in front of the server that drops the connection once the claim has
committed."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from veridic import (
    AsyncPostgresAuditSink,
    AuditRecordError,
    PostgresAuditSink,
    SQLiteAuditSink,
    __version__,
)
from veridic.checks.cli import main
from veridic.providers import Usage
from veridic.run.deferred import PausedRun
from veridic.run.records import ModelReplyRecord

from test_postgres_store import SHA, _paused  # isort: skip

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


# --- a proxy that loses the answer of a committed claim -------------------------------------


class _LosesTheClaimsAnswer:
    """A Unix-socket proxy in front of the test server that drops one connection: the one
    that sent the claim, once the server has committed it and before its answer arrives.

    The server commits an autocommit statement before it sends ``ReadyForQuery`` (``Z``),
    so the proxy holds back what the server answers after the claim until that message is
    whole, then closes both sides: the claim is committed, and the store reads no answer.
    Every other connection, and every later one, is passed through as it is.
    """

    _CLAIM = b"UPDATE veridic_paused_runs"

    def __init__(self, dsn: str) -> None:
        given = conninfo_to_dict(dsn)
        self._server = f"{given['host']}/.s.PGSQL.{given['port']}"
        self._directory = tempfile.mkdtemp(prefix="pgx", dir="/tmp")  # sun_path is short
        self.dsn = make_conninfo(dsn, host=self._directory)
        self.dropped = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(f"{self._directory}/.s.PGSQL.{given['port']}")
        self._listener.listen()
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> _LosesTheClaimsAnswer:
        return self

    def __exit__(self, *exc: object) -> None:
        for open_socket in self._sockets:
            open_socket.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._server)
            self._sockets += [client, server]
            claimed = threading.Event()
            threading.Thread(target=self._up, args=(client, server, claimed), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, claimed), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, claimed: threading.Event) -> None:
        """What the store sends, passed on; a claim, the first time, arms the drop."""
        while data := _received(client):
            if self._CLAIM in data and not self.dropped.is_set():
                claimed.set()
            try:
                server.sendall(data)
            except OSError:
                return
        _close(server)

    def _down(self, server: socket.socket, client: socket.socket, claimed: threading.Event) -> None:
        """What the server answers, passed on, but the answer of an armed claim."""
        held = b""
        while data := _received(server):
            if not claimed.is_set():
                try:
                    client.sendall(data)
                except OSError:
                    return
                continue
            held += data
            if _ready_for_query(held):  # committed: lose the answer
                self.dropped.set()
                _close(client)
                _close(server)
                return
        _close(client)


def _received(from_socket: socket.socket) -> bytes:
    try:
        return from_socket.recv(65536)
    except OSError:
        return b""


def _close(open_socket: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the other side may have closed it already
        open_socket.shutdown(socket.SHUT_RDWR)


def _ready_for_query(held: bytes) -> bool:
    """Whether ``held``, the server's messages from a boundary on, holds a whole ``Z``."""
    at = 0
    while len(held) - at >= 5:
        size = int.from_bytes(held[at + 1 : at + 5], "big")
        if len(held) - at < 1 + size:
            return False
        if held[at : at + 1] == b"Z":
            return True
        at += 1 + size
    return False


def _claimed_rows(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as db:
        return db.execute(
            "SELECT request_id FROM veridic_paused_runs WHERE claimed IS NOT NULL"
        ).fetchall()


def test_a_claim_whose_answer_the_connection_lost_is_sent_again_and_hands_out_the_run(
    postgres_dsn: str,
) -> None:
    # Was: the claim committed, its answer was lost with the connection, and the store
    # raised without sending it again (a second try would have found the run taken): the
    # paused approvals were nobody's, and pending_runs() no longer listed them.
    with PostgresAuditSink(postgres_dsn) as direct:
        paused = _paused(direct)
        direct.save_paused(paused)
    with _LosesTheClaimsAnswer(postgres_dsn) as proxy, PostgresAuditSink(proxy.dsn) as store:
        claimed = store.claim_paused("req-9")
        assert proxy.dropped.is_set()  # the first answer was lost, after the commit
    assert claimed == paused
    assert _claimed_rows(postgres_dsn) == [("req-9",)]
    with PostgresAuditSink(postgres_dsn) as other:  # another claimer: nothing
        assert other.claim_paused("req-9") is None
        assert other.pending_runs() == ()


def test_an_async_claim_whose_answer_the_connection_lost_hands_out_the_run(
    postgres_dsn: str,
) -> None:
    with PostgresAuditSink(postgres_dsn) as direct:
        paused = _paused(direct)
        direct.save_paused(paused)

    async def claim(dsn: str) -> PausedRun | None:
        async with AsyncPostgresAuditSink(dsn) as store:
            return await store.aclaim_paused("req-9")

    with _LosesTheClaimsAnswer(postgres_dsn) as proxy:
        assert asyncio.run(claim(proxy.dsn)) == paused
        assert proxy.dropped.is_set()
    assert asyncio.run(claim(postgres_dsn)) is None


# --- a claim token: the caller's own retry gets the run back, nobody else does ------------------


def test_a_claim_sent_again_with_its_token_gets_the_same_run_and_another_gets_none(
    store: Store,
) -> None:
    paused = _paused(store)
    store.save_paused(paused)
    token = secrets.token_hex(16)
    assert store.claim_paused("req-9", token=token) == paused
    assert store.claim_paused("req-9", token=token) == paused  # the caller's retry
    assert store.claim_paused("req-9", token=secrets.token_hex(16)) is None
    assert store.claim_paused("req-9") is None
    assert store.pending_runs() == ()
    # Saved again after the claim (a resume that paused again), it waits for a new claim;
    # the first claim's retry still gets what that claim took, not the new save.
    again = PausedRun.from_json(paused.to_json().replace('"c1"', '"c2"'))
    store.save_paused(again)
    assert store.claim_paused("req-9", token=token) == paused
    assert store.claim_paused("req-9", token="x" * 32) == again
    assert store.claim_paused("req-9", token="x" * 32) == again
    assert store.claim_paused("req-9", token=token) == paused


def test_a_claim_sha256_no_store_can_keep_is_refused(store: Store) -> None:
    store.save_paused(_paused(store))
    for token in ("", "  ", "a\x00b", 42):
        with pytest.raises(AuditRecordError, match=r"claim_paused\(\) got the token"):
            store.claim_paused("req-9", token=token)  # type: ignore[arg-type]  # 42: refused
    assert store.pending_runs() == ("req-9",)  # nothing was claimed


def test_an_async_claim_cancelled_after_it_committed_is_claimed_again_with_its_token(
    tmp_path: Path,
) -> None:
    # A real answer lost on SQLite: the web framework cancels the handler (the client went
    # away) while the claim runs on its worker thread; the claim commits, and its answer
    # reaches no one. The client's retry brings the same token and gets the run.
    with SQLiteAuditSink(tmp_path / "audit.db") as store:
        paused = _paused(store)
        store.save_paused(paused)
        token = secrets.token_hex(16)

        async def cancelled() -> None:
            task = asyncio.ensure_future(store.aclaim_paused("req-9", token=token))
            await asyncio.sleep(0)  # the claim is on its worker thread
            # The loop is held here, so the claim's answer cannot reach the task before
            # it is cancelled: wait (without awaiting) until the claim has committed.
            while store.pending_runs():
                time.sleep(0.001)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled())
        assert store.pending_runs() == ()
        assert store.claim_paused("req-9", token=token) == paused
        assert store.claim_paused("req-9") is None


# --- the schema that keeps the token --------------------------------------------------------


def _sqlite_at_9(path: Path) -> PausedRun:
    """A file as the veridic of schema 9 left it (what 10 added taken away), with a paused run
    claimed and one waiting."""
    with SQLiteAuditSink(path) as store:
        paused = _paused(store)
        store.save_paused(paused)
        store.claim_paused("req-9")
        store.save_paused(paused)
        store.write_model_reply(_unlinked())
    with sqlite3.connect(path) as db:
        db.execute("DROP INDEX veridic_model_replies_unlinked")
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")
        # Two copies of one unlinked answer (a copy run twice by an earlier release).
        db.execute(
            "INSERT INTO veridic_model_replies (time, request_id, prompt_sha256, response_id, "
            "model, stop_reason, tool_calls, input_tokens, output_tokens, latency) "
            "SELECT time, request_id, prompt_sha256, response_id, model, stop_reason, "
            "tool_calls, input_tokens, output_tokens, latency FROM veridic_model_replies "
            "WHERE call_id IS NULL"
        )
        db.execute("UPDATE veridic_release SET release = 'veridic 0.9 (schema 9)'")
        db.execute("PRAGMA user_version = 9")
    db.close()
    return paused


def test_a_schema_9_sqlite_file_migrates_to_10_and_its_waiting_run_is_claimed_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    paused = _sqlite_at_9(path)
    with SQLiteAuditSink(path) as store:
        assert store.model_replies("req-1") == (_unlinked(), _unlinked())  # none dropped
        store.write_model_reply(_unlinked())  # the same answer again: never a third copy
        store.write_model_reply(_unlinked(latency=0.25))  # another: kept
        assert len(store.model_replies("req-1")) == 3
        assert store.pending_runs() == ("req-9",)
        token = secrets.token_hex(16)
        assert store.claim_paused("req-9", token=token) == paused
        assert store.claim_paused("req-9", token=token) == paused
        assert store.claim_paused("req-9") is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (10,)
        assert db.execute("SELECT release FROM veridic_release").fetchall() == [
            (f"veridic {__version__} (schema 10)",)
        ]
    db.close()


def _postgres_at_9(dsn: str) -> PausedRun:
    """A database as the veridic of schema 9 left it (what 10 added taken away), with a paused
    run claimed and one waiting, and an unlinked answer."""
    with PostgresAuditSink(dsn) as store:
        paused = _paused(store)
        store.save_paused(paused)
        store.claim_paused("req-9")
        store.save_paused(paused)
        store.write_model_reply(_unlinked())
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")
        db.execute("UPDATE veridic_schema SET version = 9")
        db.execute("COMMENT ON TABLE veridic_schema IS 'veridic 0.9 (schema 9)'")
    return paused


def test_veridic_audit_of_a_schema_9_store_says_in_words_what_it_lacks(
    tmp_path: Path, postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    _sqlite_at_9(path)
    _postgres_at_9(postgres_dsn)
    assert main(["audit", str(path)]) == 0
    assert (
        "its copy was migrated to version 10 for this review (the file itself is never "
        "written), so the records written before: their paused runs claimed before have no "
        "claim token (which no review reads)"
    ) in " ".join(capsys.readouterr().out.split())
    assert main(["audit", postgres_dsn]) == 0
    assert (
        "not migrated to version 10 (a review never writes it): its paused runs claimed "
        "before have no claim token, and its answers that name no call have no key"
    ) in " ".join(capsys.readouterr().out.split())


def test_a_schema_9_postgres_database_migrates_to_10_and_its_waiting_run_is_claimed_once(
    postgres_dsn: str,
) -> None:
    paused = _postgres_at_9(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        # An earlier release's two copies of one unlinked answer (a race it lost).
        db.execute(
            "INSERT INTO veridic_model_replies (time, request_id, prompt_sha256, response_id, "
            "model, stop_reason, tool_calls, input_tokens, output_tokens, latency) "
            "SELECT time, request_id, prompt_sha256, response_id, model, stop_reason, "
            "tool_calls, input_tokens, output_tokens, latency FROM veridic_model_replies "
            "WHERE call_id IS NULL"
        )
    with PostgresAuditSink(postgres_dsn, read_only=True) as review:
        assert review.schema_version == 9
        assert len(review.model_replies("req-1")) == 2
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.schema_version == 10
        assert len(store.model_replies("req-1")) == 2  # a migration drops no row
        store.write_model_reply(_unlinked())  # the same answer again: never a third copy
        assert len(store.model_replies("req-1")) == 2
        token = secrets.token_hex(16)
        assert store.claim_paused("req-9", token=token) == paused
        assert store.claim_paused("req-9", token=token) == paused
        assert store.claim_paused("req-9") is None


# --- two hosts writing one unlinked answer at once ------------------------------------------


def _unlinked(latency: float = 0.5) -> ModelReplyRecord:
    """An answer as a store of an earlier release reads it back: no ``call_id``."""
    return ModelReplyRecord(
        6.0, "req-1", SHA, "resp-1", "gpt", "stop", ("a",), Usage(10, 5), latency
    )


_BARRIER: int = 0x76657269  # the advisory lock the trigger below waits for
_HOLD_INSERTS = f"""
CREATE FUNCTION held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock_shared({_BARRIER});
    PERFORM pg_advisory_unlock_shared({_BARRIER});
    RETURN NEW;
END $$;
CREATE TRIGGER held BEFORE INSERT ON veridic_model_replies FOR EACH ROW EXECUTE FUNCTION held();
"""
"""Hold every insert of an answer, once its statement has begun, until the test lets go: a
barrier both writers reach before either inserts."""


def _waiting_at_the_barrier(db: psycopg.Connection[Any]) -> int:
    row = db.execute(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    ).fetchone()
    return 0 if row is None else int(row[0])


def test_one_unlinked_answer_written_by_two_hosts_at_once_is_kept_once(postgres_dsn: str) -> None:
    # Was: INSERT ... WHERE NOT EXISTS, under READ COMMITTED: each writer's statement looked
    # for the answer before the other's row was committed, found none, and both inserted,
    # so a review counted its tokens twice.
    answer = _unlinked()
    with (
        PostgresAuditSink(postgres_dsn) as first,
        PostgresAuditSink(postgres_dsn) as second,
        psycopg.connect(postgres_dsn, autocommit=True) as barrier,
    ):
        barrier.execute(_HOLD_INSERTS)
        barrier.execute("SELECT pg_advisory_lock(%s)", (_BARRIER,))
        failed: list[BaseException] = []

        def write(store: PostgresAuditSink) -> None:
            try:
                store.write_model_reply(answer)
            except BaseException as error:  # reported by the assertion below
                failed.append(error)

        writers = [threading.Thread(target=write, args=(s,)) for s in (first, second)]
        for writer in writers:
            writer.start()
        while _waiting_at_the_barrier(barrier) < 2:
            time.sleep(0.005)
        barrier.execute("SELECT pg_advisory_unlock(%s)", (_BARRIER,))
        for writer in writers:
            writer.join()
        assert failed == []
        assert first.model_replies() == (answer,)
        other = _unlinked(latency=0.25)  # another answer, though it names no call either
        second.write_model_reply(other)
        assert sorted(first.model_replies(), key=repr) == sorted([answer, other], key=repr)


# --- the key of an answer kept before schema 10 is the key its insert gives -----------------

_texts = st.text(alphabet=st.sampled_from("aé\x00\ud800\n'\"\\ ✓"), max_size=12)
_seconds = st.floats(min_value=0, max_value=1e10, allow_nan=False, allow_infinity=False)
_counts = st.none() | st.integers(min_value=0, max_value=2**40)


@st.composite
def _unlinked_answers(draw: st.DrawFn) -> ModelReplyRecord:
    usage = draw(st.none() | st.builds(Usage, st.integers(0, 2**40), st.integers(0, 2**40)))
    return ModelReplyRecord(
        draw(_seconds),
        draw(_texts.filter(str.strip)),
        SHA,
        draw(_texts),
        draw(_texts),
        draw(_texts),
        tuple(draw(st.lists(_texts, max_size=3))),
        usage,
        draw(_seconds),
    )


@settings(max_examples=40, deadline=None)
@given(answer=_unlinked_answers())
def test_an_unlinked_answer_kept_before_schema_10_is_kept_once_after_the_migration(
    answer: ModelReplyRecord,
) -> None:
    # For all answers: the migration keys the row as the insert keys the answer (text
    # escaped as stored, floats exactly), so the same answer written after it is a retry.
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "audit.db"
        with SQLiteAuditSink(path) as store:
            store.write_model_reply(answer)
            (kept,) = store.model_replies()
        with sqlite3.connect(path) as db:
            db.execute("DROP INDEX veridic_model_replies_unlinked")
            db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")
            db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")
            db.execute("PRAGMA user_version = 9")
        db.close()
        with SQLiteAuditSink(path) as store:
            store.write_model_reply(answer)
            store.write_model_reply(kept)  # read back and written again: the same answer
            assert store.model_replies() == (kept,)


def test_the_postgres_migration_keys_an_answer_by_its_exact_times(postgres_dsn: str) -> None:
    # Read as text where extra_float_digits is 0, 0.1 + 0.2 is 0.3: keyed so, the answer
    # would not be found by its own insert, and would be kept twice.
    answer = dataclasses.replace(_unlinked(latency=1 / 3), time=0.1 + 0.2)
    with PostgresAuditSink(postgres_dsn) as store:
        store.write_model_reply(answer)
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")
        db.execute("UPDATE veridic_schema SET version = 9")
        name = db.execute("SELECT current_database()").fetchone()
        assert name is not None
        db.execute(f'ALTER DATABASE "{name[0]}" SET extra_float_digits = 0')
    with PostgresAuditSink(postgres_dsn) as store:
        store.write_model_reply(answer)
        assert len(store.model_replies()) == 1  # (read back as text here: 0.3, rounded)
