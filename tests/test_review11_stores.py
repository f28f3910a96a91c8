"""Eleventh review of the audit stores and of the installer's cache: each test failed
before its fix. Postgres tests run on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import AsyncPostgresAuditSink, AuditRecordError, PostgresAuditSink
from veridic.checks.cli import main
from veridic.run._conninfo import conninfo_keywords

from test_postgres_store import make  # isort: skip

# --- a NUL in a conninfo -------------------------------------------------------------------

_PIECES = st.sampled_from(["host=db", " dbname=app", " user=audit", "'", "\\", " ", "=", "x"])
_WITH_NUL = st.tuples(
    st.lists(_PIECES, max_size=4).map("".join), st.lists(_PIECES, max_size=4).map("".join)
).map("\0".join)


@given(_WITH_NUL)
def test_libpq_reads_a_connection_string_only_up_to_its_first_nul(text: str) -> None:
    # The oracle for the refusal below: what follows a NUL never reaches libpq (a C string).
    try:
        whole = psycopg.conninfo.conninfo_to_dict(text)
    except psycopg.ProgrammingError:
        with pytest.raises(psycopg.ProgrammingError):
            psycopg.conninfo.conninfo_to_dict(text.partition("\0")[0])
    else:
        assert whole == psycopg.conninfo.conninfo_to_dict(text.partition("\0")[0])


@given(_WITH_NUL)
def test_a_connection_string_holding_a_nul_is_refused(text: str) -> None:
    # conninfo_keywords read past the NUL: "host=db\0 dbname=app" gave host and dbname,
    # where libpq connects with host alone.
    with pytest.raises(AuditRecordError, match="NUL"):
        conninfo_keywords(text)


@pytest.mark.parametrize("store", [PostgresAuditSink, AsyncPostgresAuditSink])
def test_a_store_s_conninfo_holding_a_nul_is_refused_before_any_connection(
    store: type[PostgresAuditSink | AsyncPostgresAuditSink],
) -> None:
    # Given "host=db\0 password=..." libpq connected to db with no password and the rest
    # unread, while the store's repr named what veridic had read.
    conninfo = "host=/nonexistent dbname=app\0 password=s3cret dbname=other"
    with pytest.raises(AuditRecordError, match="NUL") as refused:
        store(conninfo)
    assert "s3cret" not in str(refused.value)
    assert "character 29" in str(refused.value)


def test_veridic_audit_refuses_a_conninfo_holding_a_nul(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit", "host=/nonexistent\0 dbname=app"]) == 2
    said = capsys.readouterr().err
    assert "NUL" in said
    assert "Traceback" not in said


# --- one async store opened from two threads, each with its own event loop -----------------


class _Gate:
    """A Unix socket in front of the test server that holds each connection it accepts
    until :meth:`release`: a store's open is held inside its first connection, and
    :attr:`accepted` says when it got there. A second connection while it holds releases
    it (someone else got through to the server: holding it too would only wait for its
    timeout). Connections after the release pass at once."""

    def __init__(self, server_socket_dir: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="vgate")  # sun_path holds 107 bytes
        self._server = f"{server_socket_dir}/.s.PGSQL.5432"
        self.accepted = threading.Event()
        self._released = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(f"{self.directory}/.s.PGSQL.5432")
        self._listener.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        self._released.set()
        self._listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            if self.accepted.is_set():
                self.release()
            self.accepted.set()
            threading.Thread(target=self._pass, args=(client,), daemon=True).start()

    def _pass(self, client: socket.socket) -> None:
        self._released.wait()
        server = socket.socket(socket.AF_UNIX)
        server.connect(self._server)
        for source, sink in ((client, server), (server, client)):
            threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass  # the other side hung up
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):  # already shut
                end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def gated_dsn(postgres_dsn: str) -> Iterator[tuple[str, _Gate]]:
    """``postgres_dsn`` reached through a :class:`_Gate`, and the gate."""
    gate = _Gate(str(psycopg.conninfo.conninfo_to_dict(postgres_dsn)["host"]))
    try:
        yield psycopg.conninfo.make_conninfo(postgres_dsn, host=gate.directory), gate
    finally:
        gate.close()


def test_a_store_being_opened_in_one_thread_s_loop_is_refused_to_another_s(
    gated_dsn: tuple[str, _Gate], postgres_dsn: str
) -> None:
    # Each thread's open saw no pool and an attempt of another loop, so it started its
    # own: two pools were built, and the second replaced the first, whose connections
    # were never closed. The second thread gets a clear error now, at once: the store
    # would serve the first thread's loop only, so there is nothing for it to wait for.
    conninfo, gate = gated_dsn
    store = AsyncPostgresAuditSink(conninfo, min_size=1, max_size=1, timeout=30)
    second_done = threading.Event()
    outcomes: dict[str, object] = {}

    async def first() -> None:
        async with store:
            await asyncio.to_thread(second_done.wait)
            await store.awrite(make())
            outcomes["first"] = len(await store.arecords())

    def in_thread(name: str, work: Callable[[], Coroutine[Any, Any, object]]) -> threading.Thread:
        def run() -> None:
            try:
                asyncio.run(work())
                outcomes.setdefault(name, "no error")
            except Exception as error:  # kept for the assertions below
                outcomes[name] = error
            finally:
                if name == "second":
                    second_done.set()
                    gate.release()  # whether it was refused or (before the fix) held too

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    first_thread = in_thread("first", first)
    gate.accepted.wait()  # the first open is under way, held in its first connection
    second_thread = in_thread("second", store.open)
    second_thread.join()
    first_thread.join()
    assert isinstance(outcomes["second"], AuditRecordError), outcomes
    assert "being opened in another event loop" in str(outcomes["second"])
    assert outcomes["first"] == 1


@pytest.mark.parametrize("store", [PostgresAuditSink, AsyncPostgresAuditSink])
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://audit:s3cret%00tail@/app",
        "postgresql://audit:s3cret@/app%00?sslmode=verify-full",
        "postgresql:///app?password=s3cret%00&sslmode=verify-full",
    ],
)
def test_a_percent_encoded_nul_in_a_url_is_refused_without_its_password(
    store: type[PostgresAuditSink | AsyncPostgresAuditSink], url: str
) -> None:
    # libpq decodes a URL's %XX, and refuses %00 itself ("forbidden value %00"), quoting
    # the value it was in: the store refuses it before any connection, the password hidden.
    with pytest.raises(AuditRecordError, match="%00") as refused:
        store(url)
    assert "s3cret" not in str(refused.value)


def test_an_open_left_pending_by_a_closed_loop_does_not_block_the_next_loop(
    postgres_dsn: str,
) -> None:
    # A loop closed (not collected) with the store's open attempt still pending: that
    # attempt can never finish, so an open in another loop is not refused for it.
    store = AsyncPostgresAuditSink(postgres_dsn, min_size=1, max_size=1)
    first = asyncio.new_event_loop()
    opener = first.create_task(store.open())
    first.run_until_complete(asyncio.sleep(0))  # open() has started its attempt
    first.close()  # the attempt and its loop are still referenced: not collected
    assert not opener.done()

    async def second() -> int:
        async with store:
            await store.awrite(make())
            return len(await store.arecords())

    assert asyncio.run(second()) == 1
    assert first.is_closed()  # still there (held above) when the second opened
