"""Audit report benchmark: ``stream_report`` (what ``veridic audit`` runs) against ``build_report``.

Run: ``.venv/bin/python benchmarks/audit_report.py``. ``build_report`` reads a whole
store at once; ``stream_report`` reads it a page at a time, so that a report of a
large store holds a page of its rows, not all of them. The question is what the
pages cost: the same report, text rendered line by line, from the same SQLite
store, measured in the same rounds (CPU time of this process, which runs SQLite
too; see ``_harness``).

The store is the worst case for reading by page: many requests of one tool-call
record, one model call and one answer each, so that each request's section is
nearly all of the report and its rows are few (the per-request reads are the
whole cost). Both contenders produce the same text, checked before timing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Final

import _harness as h

from veridic import ApprovalMode, Risk, SQLiteAuditSink
from veridic.checks.audit_report import Selection, build_report, stream_report
from veridic.run.records import AuditRecord, CallOutcome, ModelCallRecord, ModelReplyRecord

REQUESTS: Final = 300 if h.QUICK else 3_000
_SHA: Final = "0" * 64


def _filled(path: Path, requests: int) -> None:
    """A store of ``requests`` requests, each of one record, one model call and one answer."""
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
            store.write(
                AuditRecord(
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
            )


def main() -> None:
    report = h.Report("audit_report.py")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "audit.db"
        _filled(path, REQUESTS)
        with SQLiteAuditSink(path) as store:

            def whole() -> str:
                return build_report(store, Selection(), database="audit.db").text()

            def streamed() -> str:
                lines = stream_report(store, Selection(), database="audit.db").text_lines()
                return "\n".join(lines)

            if not h.same_bytes(whole(), streamed()):
                h.fail(f"the reports differ: {h.first_difference(whole(), streamed())}")
            stats = h.measure(
                [h.Contender("build_report", whole), h.Contender("stream_report", streamed)],
                rounds=7,
                calls=1,
            )
    section = report.section(
        f"veridic audit of a whole SQLite store ({REQUESTS:,} requests of 3 rows each)",
        about=["the text report, rendered whole; CPU time of this process (SQLite included)"],
        baselines=["build_report"],
    )
    base = stats["build_report"].median
    section.timed("build_report (every row at once)", stats["build_report"], against=[base])
    section.timed("stream_report (a page at a time)", stats["stream_report"], against=[base])
    h.finish(report)


if __name__ == "__main__":
    main()
