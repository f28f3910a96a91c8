"""Second read of audit schema 10 (claim tokens, keyed unlinked answers), as an attacker:
where a claim's token is kept, claims that race on Postgres, and the notes a review of an
older schema prints. Postgres tests run on the server the session starts
(tests/_postgres.py)."""

from __future__ import annotations

import dataclasses
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from veridic import AuditRecordError, PostgresAuditSink, SQLiteAuditSink
from veridic.providers import Usage
from veridic.run import _postgres_schema, _sqlite_schema
from veridic.run.deferred import PausedRun
from veridic.run.records import ModelReplyRecord

from test_postgres_store import SHA, _paused  # isort: skip
from test_review19_stores import _close, _LosesTheClaimsAnswer, _received  # isort: skip

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _paused_rows(store: Store, dsn: str | None, path: Path) -> list[tuple[Any, ...]]:
    """Every column of every paused run's row, as whoever reads the database sees it."""
    query = "SELECT * FROM veridic_paused_runs"
    if isinstance(store, PostgresAuditSink):
        assert dsn is not None
        with psycopg.connect(dsn) as db:
            return db.execute(query).fetchall()
    with sqlite3.connect(path / "audit.db") as sqlite:
        rows = sqlite.execute(query).fetchall()
    sqlite.close()
    return rows


def test_a_claim_token_is_kept_only_as_its_digest(
    store: Store, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Was: the token was kept as given, and whoever reads the database (a reviewer's
    # read-only role, a backup) could bring it again, as the caller's retry does, and be
    # handed the run a second time: a client's idempotency key was a claim on the run.
    paused = _paused(store)
    store.save_paused(paused)
    token = "idempotency-key-" + secrets.token_hex(16)
    assert store.claim_paused("req-9", token=token) == paused
    dsn = request.getfixturevalue("postgres_dsn") if isinstance(store, PostgresAuditSink) else None
    kept = _paused_rows(store, dsn, tmp_path)
    assert kept
    assert not [value for row in kept for value in row if token in str(value)]
    assert store.claim_paused("req-9", token=token) == paused  # its retry still gets it
    assert store.claim_paused("req-9", token=token[:-1]) is None


# --- claims that race on Postgres ------------------------------------------------------------

_BARRIER: int = 0x76657272  # the advisory lock the trigger below waits for
_HOLD_CLAIMS = f"""
CREATE FUNCTION held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock_shared({_BARRIER});
    PERFORM pg_advisory_unlock_shared({_BARRIER});
    RETURN NULL;
END $$;
CREATE TRIGGER held BEFORE UPDATE ON veridic_paused_runs
    FOR EACH STATEMENT EXECUTE FUNCTION held();
"""
"""Hold every claim, once its statement has its snapshot and before it reads a row, until the
test lets go: each claimer saw every save unclaimed."""


def _waiting_at_the_barrier(db: psycopg.Connection[Any]) -> int:
    row = db.execute(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
    ).fetchone()
    return 0 if row is None else int(row[0])


def _claimed_at_once(dsn: str, tokens: list[str | None]) -> list[PausedRun | None]:
    """What each of ``len(tokens)`` stores, claiming ``req-9`` at once with its token, got."""
    stores = [PostgresAuditSink(dsn) for _ in tokens]
    got: list[PausedRun | None] = [None] * len(tokens)
    failed: list[BaseException] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as barrier:
            barrier.execute(_HOLD_CLAIMS)
            barrier.execute("SELECT pg_advisory_lock(%s)", (_BARRIER,))

            def claim(at: int) -> None:
                try:
                    got[at] = stores[at].claim_paused("req-9", token=tokens[at])
                except BaseException as error:  # reported by the assertion below
                    failed.append(error)

            claimers = [threading.Thread(target=claim, args=(at,)) for at in range(len(tokens))]
            for claimer in claimers:
                claimer.start()
            while _waiting_at_the_barrier(barrier) < len(tokens):
                time.sleep(0.005)
            barrier.execute("SELECT pg_advisory_unlock(%s)", (_BARRIER,))
            for claimer in claimers:
                claimer.join()
            barrier.execute("DROP TRIGGER held ON veridic_paused_runs")
            barrier.execute("DROP FUNCTION held()")
    finally:
        for opened in stores:
            opened.close()
    assert failed == []
    return got


def test_claims_with_their_own_tokens_at_once_hand_a_run_saved_twice_to_one(
    postgres_dsn: str,
) -> None:
    # Each claim saw both saves unclaimed; the one that took them first gets the run, and
    # each other, finding the rows taken under another token when it reaches them, nothing.
    with PostgresAuditSink(postgres_dsn) as store:
        paused = _paused(store)
        store.save_paused(paused)
        store.save_paused(PausedRun.from_json(paused.to_json().replace('"c1"', '"c2"')))
    tokens: list[str | None] = [secrets.token_hex(16) for _ in range(3)] + [None]
    got = _claimed_at_once(postgres_dsn, tokens)
    assert len([run for run in got if run is not None]) == 1
    (winner,) = [token for token, run in zip(tokens, got, strict=True) if run is not None]
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.pending_runs() == ()
        for token in tokens:
            if token is not None and token != winner:
                assert store.claim_paused("req-9", token=token) is None


def test_two_claims_at_once_that_bring_one_token_get_the_same_answer(postgres_dsn: str) -> None:
    # What the docstring warns of: one token is one claim, however often it is sent.
    with PostgresAuditSink(postgres_dsn) as store:
        paused = _paused(store)
        store.save_paused(paused)
    token = secrets.token_hex(16)
    first, again, other = _claimed_at_once(postgres_dsn, [token, token, secrets.token_hex(16)])
    # Whichever came first: the two claims with one token, or the other one.
    assert (first, again, other) in [(paused, paused, None), (None, None, paused)]


# --- what a review of an older schema says it lacks -------------------------------------------


def test_a_review_of_each_older_schema_says_what_its_records_lack() -> None:
    # The notes end "...: {lacks}": a version without words would print a bare ": ".
    for version in range(1, _sqlite_schema.VERSION):
        assert _sqlite_schema.lacks(version).strip(), version
    for version in range(_postgres_schema._FIRST, _postgres_schema.VERSION):
        assert _postgres_schema.lacks(version).strip(), version


class _SaysItIsAnything(str):
    """A token whose own methods say it is plain: equal to anything, never blank."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return True

    def strip(self, chars: str | None = None) -> str:
        return "token"


def test_a_claim_token_of_a_str_subclass_is_checked_as_the_text_it_holds(store: Store) -> None:
    # Was: its own __eq__ passed the check, and a lone surrogate failed the claim with a
    # UnicodeEncodeError instead of saying what was wrong with the token.
    store.save_paused(_paused(store))
    for text in ("a\ud800b", "a\x00b", "   "):
        with pytest.raises(AuditRecordError, match=r"claim_paused\(\) got the token"):
            store.claim_paused("req-9", token=_SaysItIsAnything(text))
    assert store.pending_runs() == ("req-9",)
    token = _SaysItIsAnything(secrets.token_hex(16))
    assert store.claim_paused("req-9", token=token) is not None
    assert store.claim_paused("req-9", token=str.__str__(token)) is not None  # the same token


# --- a claim whose every try lost its answer ----------------------------------------------------


class _LosesEveryClaimsAnswer(_LosesTheClaimsAnswer):
    """The proxy of test_review19_stores, dropping the answer of every claim, the store's
    own retry's too: the claim is committed, and the store never reads that it was."""

    def _up(self, client: socket.socket, server: socket.socket, claimed: threading.Event) -> None:
        while data := _received(client):
            if self._CLAIM in data:
                claimed.set()
            try:
                server.sendall(data)
            except OSError:
                return
        _close(server)


def test_a_claim_that_never_got_its_answer_says_how_to_claim_again(postgres_dsn: str) -> None:
    # Was: the note said "claim again with the same token", to a caller who passed none
    # (the store's own token is nobody's): it may have taken the run for nobody.
    with PostgresAuditSink(postgres_dsn) as direct:
        direct.save_paused(_paused(direct))
    with (
        _LosesEveryClaimsAnswer(postgres_dsn) as proxy,
        PostgresAuditSink(proxy.dsn) as store,
        pytest.raises(psycopg.OperationalError) as raised,
    ):
        store.claim_paused("req-9")
    note = " ".join(" ".join(raised.value.__notes__).split())
    assert "could not reach the server" in note
    assert "a claim made without token= cannot be sent again" in note
    token = secrets.token_hex(16)
    with _LosesEveryClaimsAnswer(postgres_dsn) as proxy, PostgresAuditSink(proxy.dsn) as store:
        store.save_paused(_paused(store))
        with pytest.raises(psycopg.OperationalError):
            store.claim_paused("req-9", token=token)
    with PostgresAuditSink(postgres_dsn) as store:  # the server is back
        assert store.claim_paused("req-9", token=token) is not None  # as the note says


# --- the migration keys every answer as its insert does, on Postgres too ----------------------


def _edges() -> list[ModelReplyRecord]:
    """Unlinked answers at the edges of what a store keeps: times a text form would round,
    the least and greatest floats, counts at their limits and unknown, text a store escapes
    (NUL, a lone surrogate), a request id far past a B-tree entry, and answers that differ
    only where NULL, "" and 0 might be taken for one another."""
    times = [0.1 + 0.2, 1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.0]
    base = ModelReplyRecord(6.0, "req-1", SHA, "resp-1", "gpt", "stop", ("a",), Usage(10, 5), 0.5)
    answers = [dataclasses.replace(base, time=at, latency=at) for at in times]
    answers += [
        dataclasses.replace(base, usage=None),
        dataclasses.replace(base, usage=Usage(0, 0)),
        dataclasses.replace(base, usage=Usage(2**63 - 1, 2**63 - 1, cache_read_input_tokens=0)),
        dataclasses.replace(
            base, usage=Usage(10, 5, stated=frozenset({"reasoning_output_tokens"}))
        ),
        dataclasses.replace(base, response_id="", model="", stop_reason=""),
        dataclasses.replace(base, response_id="0", model="0", stop_reason="0"),
        dataclasses.replace(base, tool_calls=()),
        dataclasses.replace(base, tool_calls=("",)),
        dataclasses.replace(base, request_id="r\x00\ud800é✓" + "x" * 20_000),
        dataclasses.replace(base, model="a\x00b\udfff"),
    ]
    return answers


def test_the_postgres_migration_keys_each_answer_as_its_insert_does(postgres_dsn: str) -> None:
    answers = _edges()
    with PostgresAuditSink(postgres_dsn) as store:
        for answer in answers:
            store.write_model_reply(answer)
        kept = store.model_replies()
    assert len(kept) == len(answers)  # no two of them taken for one
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("ALTER TABLE veridic_model_replies DROP COLUMN unlinked_sha256")
        db.execute("ALTER TABLE veridic_paused_runs DROP COLUMN claim_sha256")
        db.execute("UPDATE veridic_schema SET version = 9")
    with PostgresAuditSink(postgres_dsn) as store:
        assert store.schema_version == 10
        for answer in [*answers, *kept]:  # as written, and as read back: the same answers
            store.write_model_reply(answer)
        assert store.model_replies() == kept
