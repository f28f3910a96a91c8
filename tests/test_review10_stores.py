"""Tenth review of the audit stores (SQLite and Postgres) and of ``veridic audit``: each
test failed before its fix. Postgres tests run on the server the session starts
(tests/_postgres.py)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg import sql
from test_postgres_store import _sessions_after_close, make

from veridic import AsyncPostgresAuditSink, PostgresAuditSink, SQLiteAuditSink
from veridic.checks.cli import main
from veridic.run._conninfo import LIBPQ_KEYWORDS, conninfo_keywords

# --- opening the async store -------------------------------------------------------------


@pytest.fixture
def limited_role(postgres_dsn: str) -> Iterator[str]:
    """The conninfo of a role allowed 3 sessions at once, as a managed database's user may be,
    with the rights a store's writer needs on tables an owner made."""
    with PostgresAuditSink(postgres_dsn):  # the tables, made by their owner
        pass
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        database = db.execute("SELECT current_database()").fetchone()
        assert database is not None
        name = f"{database[0]}_limited"
        role = sql.Identifier(name)
        db.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 3").format(role))
        db.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {}").format(
                role
            )
        )
        try:
            yield psycopg.conninfo.make_conninfo(
                postgres_dsn, user=name, application_name="limited"
            )
        finally:
            db.execute(sql.SQL("DROP OWNED BY {}").format(role))
            db.execute(sql.SQL("DROP ROLE {}").format(role))


def test_two_concurrent_opens_of_an_async_store_build_one_pool(
    postgres_dsn: str, limited_role: str
) -> None:
    # Each open awaited its migration check before it looked at the pool again: both
    # built one, and the second replaced the first without closing it. A role allowed
    # max_size sessions and one more could not open the store from two tasks at once:
    # the second pool waited for the connections the first held, until its timeout.
    store = AsyncPostgresAuditSink(limited_role, min_size=2, max_size=2, timeout=5)

    async def scenario() -> None:
        opened = await asyncio.gather(store.open(), store.open())
        assert [o is store for o in opened] == [True, True]
        await store.awrite(make())
        assert len(await store.arecords()) == 1
        await store.close()
        # Counted while the loop runs: the end of asyncio.run cancels a lost pool's tasks.
        assert await asyncio.to_thread(_sessions_after_close, postgres_dsn, "limited") == 0

    asyncio.run(scenario())


def test_an_async_store_closed_in_one_loop_is_opened_by_two_tasks_in_the_next(
    postgres_dsn: str,
) -> None:
    store = AsyncPostgresAuditSink(postgres_dsn, min_size=1, max_size=2)

    async def scenario() -> int:
        await asyncio.gather(store.open(), store.open())
        await store.awrite(make(detail=f"{len(await store.arecords())}"))
        count = len(await store.arecords())
        await store.close()
        return count

    assert asyncio.run(scenario()) == 1
    assert asyncio.run(scenario()) == 2  # another loop: the first one's lock serves it not


# --- what veridic audit takes for a Postgres database ------------------------------------


def _written(path: Path) -> Path:
    with SQLiteAuditSink(path) as store:
        store.write(make(request_id="req-file"))
    return path


def test_a_conninfo_without_dbname_is_read_as_a_postgres_database(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was taken for a path ("no such file"), since it held no "dbname=".
    with PostgresAuditSink(postgres_dsn) as store:
        store.write(make(request_id="req-pg"))
    parts = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    monkeypatch.setenv("PGDATABASE", str(parts.pop("dbname")))
    without_dbname = psycopg.conninfo.make_conninfo("", **parts)
    assert main(["audit", without_dbname, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [w["request_id"] for w in report["writes"]] == ["req-pg"]


def test_an_sqlite_path_holding_dbname_is_read_as_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was taken for a Postgres conninfo, and refused as one that is not valid.
    folder = tmp_path / "dbname=prod"
    folder.mkdir()
    path = _written(folder / "audit.db")
    assert main(["audit", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [w["request_id"] for w in report["writes"]] == ["req-file"]
    assert main(["show", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: no model calls recorded\n"


def test_a_file_named_like_a_conninfo_is_refused_as_ambiguous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _written(tmp_path / "host=db")
    assert main(["audit", "host=db"]) == 2
    said = capsys.readouterr().err
    assert "both an existing file and a libpq connection string" in said
    assert "./host=db" in said
    assert main(["audit", "./host=db", "--format", "json"]) == 0
    assert "req-file" in capsys.readouterr().out


def test_an_argument_that_is_neither_a_file_nor_a_conninfo_names_the_keyword(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "host=db dbnme=app"]) == 2
    said = capsys.readouterr().err
    assert "no such file" in said
    assert "1 keyword libpq does not know ('dbnme')" in said
    assert os.listdir(tmp_path) == []  # nothing was created


_WORDS = st.sampled_from(["host", "dbname", "user", "nope", "/srv/x", ""])
_PAIRS = st.tuples(
    _WORDS, st.sampled_from(["=", " = ", "\t=", " ", ""]), st.text("a'\\ =\té", max_size=6)
).map("".join)
_CONNINFO_LIKE = st.tuples(st.lists(_PAIRS, max_size=4), st.sampled_from([" ", "", "\n"])).map(
    lambda pairs_and_gap: pairs_and_gap[1].join(pairs_and_gap[0])
)
"""Text shaped like a connection string, and often not quite: a keyword libpq does not
know, a word without "=", a quote left open, a backslash before a space or a quote."""


@given(_CONNINFO_LIKE)
def test_a_connection_string_s_keywords_are_read_as_libpq_reads_them(text: str) -> None:
    try:
        parsed = psycopg.conninfo.conninfo_to_dict(text)
    except psycopg.ProgrammingError:
        found = conninfo_keywords(text)
        assert found is None or not set(found) <= LIBPQ_KEYWORDS
    else:
        found = conninfo_keywords(text)
        if not text.strip():
            assert found is None  # names nothing: not a connection string
        else:
            assert found is not None
            assert set(found) == set(parsed)


def test_the_keywords_veridic_knows_are_every_one_the_installed_libpq_knows() -> None:
    # A keyword of a newer libpq missing from the list makes its connection strings
    # "neither a file nor a connection string": add it to LIBPQ_KEYWORDS.
    installed = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
    assert installed <= LIBPQ_KEYWORDS
