"""Tenth review of the audit stores (SQLite and Postgres) and of ``veridic audit``: each
test failed before its fix. Postgres tests run on the server the session starts
(tests/_postgres.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from test_postgres_store import _sessions_after_close, make

from veridic import AsyncPostgresAuditSink, PostgresAuditSink

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
        assert opened == [store, store]
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
