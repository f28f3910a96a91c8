"""``veridic audit`` of a whole store reads a page of requests with three statements.

``stream_report`` read each request's records, model calls and answers with a
statement each: on a store of many small requests, 3 statements a request made the
streamed report 2x the one built whole (``benchmarks/audit_report.py``). It now reads
a page of requests (their rows together a page at most) with three. Failed on the code
before the change (900 statements for 300 requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from veridic import ApprovalMode, Risk, SQLiteAuditSink
from veridic.checks import audit_report
from veridic.checks.audit_report import Selection, build_report, stream_report
from veridic.run.records import AuditRecord, CallOutcome, ModelCallRecord, ModelReplyRecord

_SHA = "0" * 64


def _record(n: int, request_id: str) -> AuditRecord:
    return AuditRecord(
        time=n + 0.2,
        request_id=request_id,
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


def _filled(path: Path, requests: int, *, big: int = 0) -> None:
    """``requests`` requests of a call, an answer and a record; request 7 holds ``big``
    records more."""
    with SQLiteAuditSink(path) as store:
        for n in range(requests):
            request_id = f"req-{n}"
            call = ModelCallRecord(n, request_id, "openai.chat", "gpt", _SHA, _SHA, (), (), False)
            store.write_model_call(call)
            store.write_model_reply(
                ModelReplyRecord(
                    n + 0.5, request_id, _SHA, "r", "gpt", "stop", (), None, 0.1, call.call_id
                )
            )
            store.write(_record(n, request_id))
            for _ in range(big if n == 7 else 0):
                store.write(_record(n, request_id))


def _statements_and_most(
    path: Path, monkeypatch: pytest.MonkeyPatch, selection: Selection
) -> tuple[int, int, str]:
    """How many statements the streamed report's request sections send, the most rows one
    of them makes, and the report's text (checked against the one built whole)."""
    with SQLiteAuditSink(path) as store:
        expected = build_report(store, selection, database="audit.db").text()
        report = stream_report(store, selection, database="audit.db")
        sent, most = 0, 0
        run = SQLiteAuditSink._run

        def counted(self: SQLiteAuditSink, statement: Any) -> Any:
            nonlocal sent, most
            answer = run(self, statement)
            sent += 1
            if isinstance(answer, tuple):
                most = max(most, len(answer))
            return answer

        monkeypatch.setattr(SQLiteAuditSink, "_run", counted)
        sections = list(report.requests)
        monkeypatch.undo()
        assert len(sections) > 0
        return sent, most, report.text() if report.text() == expected else "differs"


def test_a_page_of_small_requests_is_read_with_three_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.db"
    _filled(path, 300)
    monkeypatch.setattr(audit_report, "_PAGE", 60)  # 20 requests of 3 rows a page
    sent, most, text = _statements_and_most(path, monkeypatch, Selection())
    assert text != "differs"
    assert sent == 3 * 15
    assert most <= 60


def test_a_request_of_more_rows_than_a_page_is_read_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "audit.db"
    _filled(path, 30, big=100)
    monkeypatch.setattr(audit_report, "_PAGE", 60)
    sent, most, text = _statements_and_most(path, monkeypatch, Selection(since=1.0))
    assert text != "differs"
    # requests 1-6 (18 rows), 7 alone (103 rows), 8-27 (60 rows), 28-29: four pages
    assert sent == 3 * 4
    assert most == 101  # request 7's records: one page of its own
