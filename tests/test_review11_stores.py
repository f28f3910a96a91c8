"""Eleventh review of the audit stores and of the installer's cache: each test failed
before its fix. Postgres tests run on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import AsyncPostgresAuditSink, AuditRecordError, PostgresAuditSink
from veridic.checks.cli import main
from veridic.run._conninfo import conninfo_keywords

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
