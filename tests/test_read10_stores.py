"""Second read of the tenth store review (tests/test_review10_stores.py): one pool per
async store, and what ``veridic audit`` and ``veridic show`` take for a Postgres database.
Each test failed before its fix, or pins a property the review's tests left open.
Postgres tests run on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_postgres_store import _sessions_after_close, make

from veridic import AsyncPostgresAuditSink, AuditRecordError
from veridic.checks.cli import main
from veridic.run._conninfo import LIBPQ_KEYWORDS, conninfo_keywords

# --- opening and closing the async store -------------------------------------------------


class _SilentServer:
    """A TCP listener that takes connections and never answers: a Postgres host that is
    down behind a firewall that does not refuse. It counts the connections it was offered."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=16)
        self.port: int = self._listener.getsockname()[1]
        self._taken: list[socket.socket] = []
        threading.Thread(target=self._take, daemon=True).start()

    def _take(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self._taken.append(connection)

    @property
    def offered(self) -> int:
        return len(self._taken)

    def close(self) -> None:
        self._listener.close()
        for connection in self._taken:
            connection.close()


@pytest.fixture
def silent_server() -> Iterator[_SilentServer]:
    server = _SilentServer()
    yield server
    server.close()


def test_tasks_that_open_a_store_whose_server_does_not_answer_share_one_attempt(
    silent_server: _SilentServer,
) -> None:
    # Behind a lock, each open waited for the one before it to time out and then tried
    # again itself: the last of N tasks failed after N times the timeout (100 request
    # handlers and the default 30 s: 50 minutes). They now share one attempt, and each
    # of them gets its error.
    store = AsyncPostgresAuditSink(
        f"host=127.0.0.1 port={silent_server.port} dbname=app user=audit", timeout=2
    )

    async def scenario() -> list[BaseException | AsyncPostgresAuditSink]:
        return await asyncio.gather(*(store.open() for _ in range(3)), return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert [isinstance(o, psycopg.OperationalError) for o in outcomes] == [True, True, True]
    assert silent_server.offered == 1


def test_an_opener_that_is_cancelled_leaves_the_shared_open_to_the_others(
    postgres_dsn: str,
) -> None:
    store = AsyncPostgresAuditSink(postgres_dsn, min_size=1, max_size=2)

    async def scenario() -> int:
        given_up, waiting = (asyncio.create_task(store.open()) for _ in range(2))
        await asyncio.sleep(0)  # both wait for the one attempt
        given_up.cancel()
        assert await waiting is store
        await store.awrite(make())
        count = await store.acount()
        await store.close()
        return count

    assert asyncio.run(scenario()) == 1


def test_close_while_an_open_is_under_way_closes_what_it_opens(postgres_dsn: str) -> None:
    # close() saw no pool yet and returned; the open then finished, and the store held
    # its connections after close() had returned, until the process ended.
    name = "veridic-read10-close"
    store = AsyncPostgresAuditSink(
        psycopg.conninfo.make_conninfo(postgres_dsn, application_name=name), min_size=2
    )

    async def scenario() -> None:
        opening = asyncio.create_task(store.open())
        await asyncio.sleep(0)  # the open has started: it waits for the server
        assert not opening.done()
        await store.close()
        assert await opening is store
        with pytest.raises(AuditRecordError, match="is not open"):
            await store.awrite(make())
        assert await asyncio.to_thread(_sessions_after_close, postgres_dsn, name) == 0

    asyncio.run(scenario())


def test_a_store_left_open_by_an_ended_loop_says_so_in_the_next(postgres_dsn: str) -> None:
    # open() in the next loop returned at once, as if the store were ready; close() there
    # failed with "RuntimeError: Event loop is closed" after it had forgotten the pool.
    store = AsyncPostgresAuditSink(postgres_dsn, min_size=1, max_size=2)

    async def left_open() -> None:
        await store.open()
        await store.awrite(make())

    asyncio.run(left_open())

    async def next_loop() -> list[str]:
        said = []
        for step in (store.open(), store.awrite(make()), store.close()):
            with pytest.raises(AuditRecordError) as refused:
                await step
            said.append(str(refused.value))
        return said

    for message in asyncio.run(next_loop()):
        assert "opened in an event loop that has ended without closing it" in message
        assert "async with" in message


def test_a_store_open_in_a_running_loop_of_another_thread_is_refused_in_this_one(
    postgres_dsn: str,
) -> None:
    store = AsyncPostgresAuditSink(postgres_dsn, min_size=1, max_size=2)
    other = asyncio.new_event_loop()
    runner = threading.Thread(target=other.run_forever, daemon=True)
    runner.start()
    try:
        asyncio.run_coroutine_threadsafe(store.open(), other).result()

        async def here() -> None:
            with pytest.raises(AuditRecordError, match="is open in another event loop"):
                await store.awrite(make())

        asyncio.run(here())
        asyncio.run_coroutine_threadsafe(store.close(), other).result()
    finally:
        other.call_soon_threadsafe(other.stop)
        runner.join()
        other.close()


# --- what veridic audit and veridic show take for a Postgres database --------------------

_SECRET = "hunter2-s3cret"


@pytest.mark.parametrize("command", ["audit", "show"])
@pytest.mark.parametrize(
    "argument",
    [
        f"host=db password={_SECRET} dbnme=app",  # a keyword libpq does not know
        f"host=db password={_SECRET} user",  # a word without "=": read as a path
        f"host=db password='{_SECRET}' user",
        f"PostgreSQL://audit:{_SECRET}@db/app?sslmode=require",  # not a URL for libpq
        f"POSTGRESQL://audit:{_SECRET}@db/app",
    ],
)
def test_no_usage_error_shows_the_password_of_the_argument(
    command: str,
    argument: str,
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The argument was quoted whole in "no such file" and "not a libpq connection string
    # either" (and its URL-like keyword again): a CI log showed the password.
    monkeypatch.chdir(str(tmp_path))
    assert main([command, argument]) == 2
    said = capsys.readouterr().err
    assert _SECRET not in said
    assert "****" in said


@pytest.mark.parametrize("scheme", ["PostgreSQL://", "POSTGRES://", "Postgres://"])
def test_a_url_whose_scheme_is_not_in_lower_case_is_refused_saying_so(
    scheme: str,
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # libpq reads a URL only by its scheme in lower case ...
    with pytest.raises(psycopg.ProgrammingError):
        psycopg.conninfo.conninfo_to_dict(f"{scheme}audit@db/app")
    # ... and veridic audit called it "no such file" (with a keyword libpq does not
    # know when it had a query), which sent the reader looking for a file.
    monkeypatch.chdir(str(tmp_path))
    for argument in (f"{scheme}audit@db/app", f"{scheme}audit@db/app?sslmode=require"):
        assert main(["audit", argument]) == 2
        said = capsys.readouterr().err
        assert "lower case" in said
        assert "no such file" not in said


_C_SPACE = " \t\n\v\f\r"
_NOT_C_SPACE = "\x85\xa0\u2003\x1c\u3000"
"""White space to Python (``str.isspace``) and none to libpq, which reads bytes with C's
``isspace``: inside a value they are part of it, and they end no keyword."""
_VALUES = st.text(alphabet=_C_SPACE + _NOT_C_SPACE + "a'\\=", max_size=6)
_GAPS = st.text(alphabet=_C_SPACE + _NOT_C_SPACE, max_size=2)
_KEYS = st.sampled_from(["host", "dbname", "options", "nope", "a\xa0b", ""])
_SPACED = st.lists(st.tuples(_GAPS, _KEYS, _GAPS, st.just("="), _GAPS, _VALUES), max_size=3).map(
    lambda pairs: "".join("".join(pair) for pair in pairs)
)


@given(_SPACED)
def test_only_c_white_space_separates_a_connection_string_s_words(text: str) -> None:
    # The review's property drew its white space from " " and "\t": a parser that took
    # Python's str.isspace for libpq's passed it, and read "host=a\xa0b" as two words.
    try:
        parsed = psycopg.conninfo.conninfo_to_dict(text)
    except psycopg.ProgrammingError:
        found = conninfo_keywords(text)
        assert found is None or not set(found) <= LIBPQ_KEYWORDS
    else:
        found = conninfo_keywords(text)
        assert found is None if not text.strip(_C_SPACE) else set(found or ()) == set(parsed)
