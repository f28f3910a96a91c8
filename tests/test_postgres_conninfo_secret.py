"""A Postgres store never shows the password of the conninfo it was given.

libpq quotes a URL it cannot parse, password included, in its error; an
application logs what the constructor raises (with its chained cause), so
the library, not only ``veridic audit``, must leave the password out.
"""

from __future__ import annotations

import traceback
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("psycopg")

from veridic import AsyncPostgresAuditSink, AuditRecordError, PostgresAuditSink

BAD_URLS = [
    ("postgresql://audit:s3cret-pw@[::1/app", "s3cret-pw"),
    ("postgresql://audit:s3cret%40pw@[::1/app", "s3cret%40pw"),
    ("postgres://audit@[::1/app?password=s3cret-pw", "s3cret-pw"),
    ("host=db password='s3cret pw' dbname='app", "s3cret pw"),
]


def _everything_shown(error: BaseException) -> str:
    """What a logger shows of ``error``: the traceback with its causes and notes."""
    return "".join(traceback.format_exception(error))


@pytest.mark.parametrize("store", [PostgresAuditSink, AsyncPostgresAuditSink])
@pytest.mark.parametrize(("url", "password"), BAD_URLS)
def test_a_conninfo_libpq_cannot_parse_is_refused_without_its_password(
    store: type[PostgresAuditSink] | type[AsyncPostgresAuditSink], url: str, password: str
) -> None:
    with pytest.raises(AuditRecordError, match="the Postgres conninfo is not valid") as caught:
        store(url)
    shown = _everything_shown(caught.value)
    assert password not in shown
    assert "s3cret@pw" not in shown
    if url.startswith("postgres"):  # libpq quotes a URL: still quoted, so one sees which
        assert "****" in str(caught.value)
    assert "\n" not in str(caught.value)  # libpq ends its message with a line break


_PASSWORDS = st.text(st.characters(codec="ascii", categories=["L", "N", "P", "S"]), min_size=6)
"""Printable ASCII; each drawn password starts ``Zx9``, a stretch no message of veridic,
libpq or Python's traceback holds, so finding it in the output is a leak, never a word."""


@settings(max_examples=40, deadline=None)
@given(password=_PASSWORDS.map(lambda drawn: f"Zx9{drawn}"))
def test_no_password_of_an_unparsable_url_is_shown(password: str) -> None:
    spellings = {password, quote(password, safe="")}
    for url in (
        f"postgresql://audit:{quote(password, safe='')}@[::1/app",
        f"postgresql://audit@[::1/app?password={quote(password, safe='')}",
    ):
        with pytest.raises(AuditRecordError) as caught:
            PostgresAuditSink(url)
        shown = _everything_shown(caught.value)
        assert not any(spelling in shown for spelling in spellings), shown
