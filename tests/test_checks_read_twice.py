"""A second read of the checks CLI attacker review: the streamed audit report's pages of
requests, and the probe's ``api-version`` rule (a file reached twice by ``veridic
hatches``: tests/test_cli_paths_read.py).

The streamed report is held to the one built whole on stores the review's tests did not
make: request ids that differ by case, a trailing space or an escape, requests of no row
in the range, of more rows than a page and of exactly a page, SQLite with an old SQLite's
limit of 999 variables, and Postgres.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import ApprovalMode, PostgresAuditSink, Risk, SQLiteAuditSink
from veridic.checks import audit_report
from veridic.checks.audit_report import AuditReport, Selection, build_report, stream_report
from veridic.checks.choosers import EndpointChooser
from veridic.run.records import AuditRecord, CallOutcome, ModelCallRecord, ModelReplyRecord

if TYPE_CHECKING:
    from _postgres import PostgresServer

_Store = SQLiteAuditSink | PostgresAuditSink

_SHA = "0" * 64
_RECORD = AuditRecord(
    time=0.0,
    request_id="r",
    tool="refund",
    kind="write",
    risk=Risk.MID,
    approval=ApprovalMode.USER_CONFIRMED,
    wrote_instruction_fields=False,
    irreversible=False,
    prompt_sha256=_SHA,
    tools_sha256=_SHA,
    outcome=CallOutcome.OK,
)
_REQUEST_IDS = ["r1", "R1", "r1 ", "r%1", "a\x1b[31m", "ünï", "r?1", "'; --"]
"""Request ids an IN list and a grouping in Python must tell apart as ``=`` did."""

_Row = tuple[str, str, float]  # which table ("record", "call", "reply"), request id, time


@st.composite
def _stores(draw: st.DrawFn) -> list[_Row]:
    """Rows of a store: few requests, each of 0 to 9 rows, at times some ranges leave out."""
    rows = st.tuples(
        st.sampled_from(["record", "call", "reply"]),
        st.sampled_from(_REQUEST_IDS),
        st.sampled_from([1.0, 2.0, 3.0, 5.0]),
    )
    return draw(st.lists(rows, max_size=30))


def _written(store: _Store, rows: list[_Row]) -> None:
    for n, (table, request_id, time) in enumerate(rows):
        call = ModelCallRecord(time, request_id, "openai.chat", "gpt", _SHA, _SHA, (), (), False)
        if table == "record":
            record = dataclasses.replace(_RECORD, time=time, request_id=request_id, tool=f"t{n}")
            store.write(record)
        elif table == "call":
            store.write_model_call(call)
        else:
            reply = ModelReplyRecord(
                time, request_id, _SHA, f"resp-{n}", "gpt", "stop", (), None, 0.1, ""
            )
            store.write_model_reply(reply)


def _rendered(report: AuditReport) -> tuple[str, str, str, str]:
    return report.text(), report.markdown(), report.json(), "".join(report.json_chunks())


def _same_report(store: _Store, selection: Selection, page: int) -> None:
    whole = build_report(store, selection, database="audit.db")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit_report, "_PAGE", page)
        streamed = stream_report(store, selection, database="audit.db")
        assert _rendered(streamed)[:3] == _rendered(whole)[:3]
        assert _rendered(streamed)[3] == json.dumps(
            whole.to_json(), indent=2, sort_keys=True, ensure_ascii=True
        )
    assert len(streamed.requests) == len(whole.requests)


_RANGES = st.sampled_from([(None, None), (2.0, None), (None, 3.0), (2.0, 5.0), (4.0, 5.0)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_stores(), page=st.integers(1, 6), bounds=_RANGES)
def test_for_all_stores_the_streamed_report_is_the_one_built_whole(
    rows: list[_Row], page: int, bounds: tuple[float | None, float | None]
) -> None:
    with SQLiteAuditSink() as store:
        _written(store, rows)
        _same_report(store, Selection(since=bounds[0], until=bounds[1]), page)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_stores(), page=st.integers(1, 4), bounds=_RANGES)
def test_for_all_postgres_stores_the_streamed_report_is_the_one_built_whole(
    postgres_server: PostgresServer,
    rows: list[_Row],
    page: int,
    bounds: tuple[float | None, float | None],
) -> None:
    name = f"test_{uuid.uuid4().hex}"
    dsn = postgres_server.create_database(name)
    try:
        with PostgresAuditSink(dsn) as store:
            _written(store, rows)
            _same_report(store, Selection(since=bounds[0], until=bounds[1]), page)
    finally:
        postgres_server.drop_database(name)


@pytest.fixture
def old_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite connections limited to 999 variables a statement, as SQLite before 3.32 was."""
    connect = sqlite3.connect

    def limited(database: str | os.PathLike[str], **options: Any) -> sqlite3.Connection:
        db: sqlite3.Connection = connect(database, **options)
        db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        return db

    monkeypatch.setattr(sqlite3, "connect", limited)


def test_a_page_of_many_requests_stays_within_an_old_sqlites_999_variables(
    tmp_path: Path, old_sqlite: None
) -> None:
    """The real page: 500 requests of one row each, asked within a time range (502 values
    a statement), then a request of exactly a page of rows, then one of more."""
    with SQLiteAuditSink(tmp_path / "audit.db") as store:
        for n in range(1_200):
            store.write(dataclasses.replace(_RECORD, time=1.0 + n, request_id=f"req-{n}"))
        for n in range(500):
            store.write(dataclasses.replace(_RECORD, time=5_000.0 + n, request_id="a page"))
        for n in range(501):
            store.write(dataclasses.replace(_RECORD, time=6_000.0 + n, request_id="past a page"))
        store.write(dataclasses.replace(_RECORD, time=9_000.0, request_id="after"))
        selection = Selection(since=0.5, until=10_000.0)
        whole = build_report(store, selection, database="audit.db")
        streamed = stream_report(store, selection, database="audit.db")
        assert list(streamed.text_lines()) == whole.text().split("\n")
        assert [r.request_id for r in streamed.requests][-3:] == ["a page", "past a page", "after"]
        assert [len(r.tool_calls) for r in streamed.requests][-3:] == [500, 501, 1]


# --- the probe's api-version ----------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "2024-10-21",  # Azure OpenAI, generally available
        "2025-04-01-preview",  # Azure OpenAI, preview
        "2024-05-01-preview",  # Azure AI model inference
        "3.0",  # Azure Translator
        "v1",
        "preview",  # Azure OpenAI's v1 API
        "latest",
    ],
)
def test_the_api_versions_services_use_are_taken(value: str) -> None:
    chooser = EndpointChooser(f"https://x.openai.azure.com/openai?api-version={value}", "m")
    assert f" api-version={value} " in chooser.identity()


@pytest.mark.parametrize(
    "value",
    [
        "\u0662\u0660\u0662\u0664-\u0661\u0660-\u0660\u0661",  # Arabic-Indic digits
        "\uff12\uff10\uff12\uff14-\uff11\uff10-\uff10\uff11",  # full-width: looks like a date
        "v\u0661",
    ],
)
def test_an_api_version_of_digits_other_than_ascii_is_refused(value: str) -> None:
    """``\\d`` of a regular expression is any Unicode digit: the rule, and the test that
    checks the identity holds ASCII only, let these through."""
    with pytest.raises(ValueError, match="reads as no API version"):
        EndpointChooser(f"https://llm.example/v1?api-version={value}", "m")


@settings(max_examples=200, deadline=None)
@given(
    value=st.text(
        alphabet=st.characters(whitelist_categories=["Nd"]) | st.sampled_from("-.v"), max_size=12
    )
)
def test_whatever_digits_the_api_version_holds_the_identity_holds_ascii_only(value: str) -> None:
    try:
        identity = EndpointChooser(f"https://llm.example/v1?api-version={value}", "m").identity()
    except ValueError:
        return
    assert identity.isascii()
