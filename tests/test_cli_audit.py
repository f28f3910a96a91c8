"""``veridic audit``: the store's questions answered for a reviewer, through the real command.

The databases are written by real runs (``ModelGateway`` with a
``ScriptedProvider``, and ``execute``), except two kinds of record no run can
write: an instruction-field write approved by an always rule (the gates refuse
it; the command must still find it in a store) and tool names with raw control
characters (``execute`` escapes them; a store written by other code may not).
"""

from __future__ import annotations

import contextvars
import json
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from pydantic import BaseModel

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AuditRecord,
    CallOutcome,
    Composer,
    InstructionField,
    ModelGateway,
    Registry,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    execute,
    guard_instruction_write,
    guard_irreversible,
    instruction,
)
from veridic.checks.audit_report import Selection, build_report, parse_time, shown
from veridic.checks.cli import main

SYSTEM = instruction("You maintain AI features, their prompts and their fixtures.")
NOON = 1714564800.0  # 2024-05-01T12:00:00Z
HOSTILE = (
    "\x1b[2J\x1b]0;owned\x07\u202eevil\u200b\n"
    "| x | [click](https://e.example) @everyone <img src=x>`"
)

MARKDOWN = "`[c](//e.x) @all <b>|</b>"
"""Short enough to be shown whole: a link, a mention, HTML, a cell break, a code span's end."""


class StoredPrompt(BaseModel):
    feature: str
    content: InstructionField


def build_view(spawned: list[threading.Thread]) -> ToolView:
    registry = Registry("prompt-store")
    prompts: dict[str, str] = {}

    @registry.tool(kind="write", writes=(StoredPrompt,))
    def edit_prompt(feature: str, content: str) -> str:
        """Save new content that becomes the feature's system prompt immediately.

        Args:
            feature: The AI feature.
            content: The new prompt text.
        """
        prompt = StoredPrompt.model_validate({"feature": feature, "content": content})
        guard_instruction_write(prompt)
        prompts[feature] = content
        return "saved"

    @registry.tool(kind="write")
    def save_note(text: str) -> str:
        """Save a note for the maintainers.

        Args:
            text: The note.
        """
        return "saved"

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; a hard delete that cannot be undone.

        Args:
            name: The fixture.
        """
        guard_irreversible("hard delete golden fixture")

        def later() -> None:
            try:
                guard_irreversible("hard delete golden fixture")
            except Exception:  # the refusal is what the follow-up records
                return

        thread = threading.Thread(target=contextvars.copy_context().run, args=(later,))
        spawned.append(thread)
        return "deleted"

    @registry.tool(kind="query")
    def list_features() -> list[str]:
        """List the AI features that have a system prompt."""
        return sorted(prompts)

    return registry.view()


def run(
    gateway_audit: SQLiteAuditSink,
    view: ToolView,
    script: Sequence[Mapping[str, object]],
    request_id: str,
    policy: ApprovalPolicy,
) -> None:
    gateway = ModelGateway(ScriptedProvider(script), audit=gateway_audit)
    composer = Composer().system(SYSTEM, view.capability_section()).user("Tidy up the features.")
    gateway.run(composer, view, policy=policy, request_id=request_id, confirm=lambda r: True)


def call(name: str, arguments: str, n: int = 1) -> dict[str, object]:
    return {
        "tool_calls": [(f"c{n}", name, arguments)],
        "usage": {"input_tokens": 120, "output_tokens": 9},
    }


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, float]:
    """A database of three requests; the time between the first and the second is returned."""
    path = tmp_path / "audit.db"
    audit = SQLiteAuditSink(path)
    spawned: list[threading.Thread] = []
    view = build_view(spawned)
    policy = ApprovalPolicy(view)
    run(
        audit,
        view,
        [
            call("edit_prompt", '{"feature": "search", "content": "Be brief."}'),
            call("wipe_everything", "{}", 2),  # unknown: refused, not asked
            call("list_features", "{}", 3),
            {"text": "Done."},
        ],
        "req-a",
        policy,
    )
    time.sleep(0.01)
    between = time.time()
    time.sleep(0.01)
    notes = ApprovalPolicy(view)
    notes.deny("save_note")
    run(
        audit,
        view,
        [
            call("save_note", '{"text": "x"}'),  # denied by the rule
            call("save_note", '{"text": "again"}', 2),  # the same door again
            {"text": "I could not save it."},
        ],
        "req-b",
        notes,
    )
    # req-c: a confirmed hard delete whose thread tries again after the call ended
    result = execute(
        view,
        "delete_golden",
        {"name": "golden-1"},
        policy=policy,
        audit=audit,
        request_id="req-c",
        prompt=Composer().system(SYSTEM).build(),
        confirm=lambda r: True,
    )
    assert result.ok
    for thread in spawned:
        thread.start()
        thread.join(5)
    audit.close()
    return path, between


def audit_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["audit", *args, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def tools_of(report: Mapping[str, object], key: str = "writes") -> list[str]:
    records = report[key]
    assert isinstance(records, list)
    return [r["tool"] for r in records]


# --- the answers --------------------------------------------------------------------------


def test_the_report_answers_each_question_for_the_whole_store(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = store
    code, report = audit_json(capsys, str(path))
    assert code == 0
    assert report["schema"] == 1
    assert report["exit_code"] == 0
    assert report["instruction_writes_under_always_rule"] == []
    with SQLiteAuditSink(path) as sink:
        assert report["writes_by_approval"] == {
            mode.value: n for mode, n in sink.writes_by_approval().items()
        }
        assert report["substitution_rate"] == sink.substitution_rate()
        follow_ups = [r for r in sink.records() if r.follow_up]
    assert report["writes_by_approval"] == {
        "not_required": 0,
        "always_rule": 0,
        "user_confirmed": 2,
        "denied": 2,
        "not_asked": 0,
    }
    assert tools_of(report) == ["edit_prompt", "save_note", "save_note", "delete_golden"]
    (first, second, last) = report["substitutions"]
    assert (first["stopped"]["tool"], first["next"]["tool"]) == ("wipe_everything", "list_features")
    assert (first["same_tool"], first["same_operation"]) == (False, False)
    assert first["stopped"]["approval"] == "not_asked"
    assert (second["stopped"]["tool"], second["next"]["tool"]) == ("save_note", "save_note")
    assert second["same_tool"]
    assert second["same_operation"]
    assert (last["stopped"]["tool"], last["next"]) == ("save_note", None)  # the request ended
    assert report["substitution_rate"] == 0.5
    assert len(follow_ups) == 1
    assert tools_of(report, "follow_ups") == ["delete_golden"]
    assert report["follow_ups"][0]["follow_up"] is True
    requests = report["requests"]
    assert isinstance(requests, list)
    assert [r["request_id"] for r in requests] == ["req-a", "req-b", "req-c"]
    a = requests[0]
    assert [c["tool"] for c in a["tool_calls"]] == [
        "edit_prompt",
        "wipe_everything",
        "list_features",
    ]
    assert len(a["model_calls"]) == 4
    model_call = a["model_calls"][0]
    assert model_call["model"] == "scripted"
    assert len(model_call["prompt_sha256"]) == 64
    assert {"delete_golden", "edit_prompt", "list_features", "save_note"} <= set(
        model_call["tools"]
    )
    assert model_call["reply"]["usage"] == {
        "input_tokens": 120,
        "output_tokens": 9,
        # not broken down: unknown, not "no cache read"
        "cache_read_input_tokens": None,
        "cache_creation_input_tokens": None,
        "reasoning_output_tokens": None,
    }
    assert model_call["reply"]["tool_calls"] == ["edit_prompt"]
    assert model_call["reply"]["latency"] >= 0
    assert requests[2]["model_calls"] == []  # execute() alone sends nothing to a model


def test_each_record_in_json_names_its_call_and_its_arguments_digest(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    # A reviewer matches a record to the model's call (the reply's tool call id, which a
    # resume checks) and tells two calls with the same arguments from two with other ones;
    # the JSON left both out.
    path, _ = store
    _, report = audit_json(capsys, str(path))
    requests = report["requests"]
    shown = [(c["call_id"], c["arguments_sha256"]) for r in requests for c in r["tool_calls"]]
    with SQLiteAuditSink(path) as sink:
        stored = [
            (record.call_id, record.arguments_sha256)
            for request in ("req-a", "req-b", "req-c")
            for record in sink.records(request)
        ]
    assert shown == stored
    assert any(call_id for call_id, _ in shown)  # the gateway's calls keep the model's ids
    assert all(len(digest) == 64 for _, digest in shown if digest)


def test_one_request_is_reported_alone(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = store
    code, report = audit_json(capsys, str(path), "--request", "req-b")
    assert code == 0
    assert [r["request_id"] for r in report["requests"]] == ["req-b"]
    assert tools_of(report) == ["save_note", "save_note"]
    assert report["writes_by_approval"]["denied"] == 2
    assert report["substitution_rate"] == 1.0
    assert report["follow_ups"] == []
    assert report["selection"]["request_ids"] == ["req-b"]


def test_several_requests_and_an_unknown_one_are_reported_with_a_note(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = store
    code, report = audit_json(
        capsys, str(path), "--request", "req-a", "--request", "req-c", "--request", "nope"
    )
    assert code == 0
    assert [r["request_id"] for r in report["requests"]] == ["req-a", "req-c"]
    assert report["unmatched_requests"] == ["nope"]
    assert tools_of(report, "follow_ups") == ["delete_golden"]


def test_a_time_range_selects_the_records_inside_it(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    path, between = store
    _, before = audit_json(capsys, str(path), "--until", repr(between))
    assert [r["request_id"] for r in before["requests"]] == ["req-a"]
    _, after = audit_json(capsys, str(path), "--since", repr(between))
    assert [r["request_id"] for r in after["requests"]] == ["req-b", "req-c"]
    assert after["selection"]["since"] == between
    assert before["counts"]["writes"] + after["counts"]["writes"] == 4


def hand_written(path: Path, *records: AuditRecord) -> Path:
    with SQLiteAuditSink(path) as sink:
        for record in records:
            sink.write(record)
    return path


def record(
    at: float,
    tool: str = "save_note",
    *,
    request_id: str = "req-1",
    approval: ApprovalMode = ApprovalMode.NOT_REQUIRED,
    instruction_write: bool = False,
    kind: str = "write",
) -> AuditRecord:
    refused = approval is ApprovalMode.NOT_ASKED
    denied = approval is ApprovalMode.DENIED
    return AuditRecord(
        time=at,
        request_id=request_id,
        tool=tool,
        kind=None if refused else kind,  # type: ignore[arg-type]
        risk=None if refused else (Risk.HIGH if instruction_write else Risk.MID),
        approval=approval,
        wrote_instruction_fields=instruction_write,
        irreversible=False,
        prompt_sha256="0" * 64,
        tools_sha256="f" * 64,
        outcome=CallOutcome.REFUSED
        if refused
        else CallOutcome.DENIED
        if denied
        else CallOutcome.OK,
    )


def test_iso_times_without_a_zone_are_utc_and_with_one_are_honoured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hand_written(
        tmp_path / "a.db",
        record(NOON - 3600, request_id="morning"),
        record(NOON, request_id="noon"),
        record(NOON + 3600, request_id="afternoon"),
    )
    for since, until in [
        ("2024-05-01T12:00:00", "2024-05-01T13:00:00"),
        ("2024-05-01T14:00:00+02:00", "2024-05-01T13:00:00Z"),
        (str(int(NOON)), str(NOON + 3600)),
    ]:
        _, report = audit_json(capsys, str(path), "--since", since, "--until", until)
        assert [r["request_id"] for r in report["requests"]] == ["noon"], (since, until)
    _, day = audit_json(capsys, str(path), "--since", "2024-05-01", "--until", "2024-05-02")
    assert day["counts"]["writes"] == 3


# --- exit codes and usage errors ------------------------------------------------------------


def test_an_instruction_write_under_an_always_rule_is_a_finding_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hand_written(
        tmp_path / "bad.db",
        record(NOON, "edit_prompt", approval=ApprovalMode.ALWAYS_RULE, instruction_write=True),
        record(NOON + 1, "save_note", request_id="req-2", approval=ApprovalMode.ALWAYS_RULE),
    )
    assert main(["audit", str(path)]) == 1
    text = capsys.readouterr().out
    assert "[1] FINDING: 1 instruction-field write approved by an always rule" in text
    assert text.rstrip().endswith("(exit 1)")
    code, report = audit_json(capsys, str(path))
    assert code == 1
    assert report["exit_code"] == 1
    assert tools_of(report, "instruction_writes_under_always_rule") == ["edit_prompt"]
    assert main(["audit", str(path), "--format", "markdown"]) == 1
    assert "**FINDING: 1 instruction-field write" in capsys.readouterr().out
    # the finding belongs to its request: the other one is clean
    assert main(["audit", str(path), "--request", "req-2"]) == 0


def test_a_missing_file_is_a_usage_error_and_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert main(["audit", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"veridic audit: {missing}: no such file" in err
    assert "never creates one" in err
    assert not missing.exists()
    assert main(["audit", str(tmp_path)]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_a_file_that_is_not_an_audit_store_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, just some words to fill a page " * 20)
    assert main(["audit", str(text)]) == 2
    assert "cannot be read as an SQLite database" in capsys.readouterr().err
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert main(["audit", str(empty)]) == 2
    assert "is empty (0 bytes), so it holds no audit store" in capsys.readouterr().err
    assert empty.read_bytes() == b""  # no table was added to it


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--since", "yesterday"], "--since 'yesterday' is not a time"),
        (["--until", "nan"], "--until"),
        (["--since", "2024-05-02", "--until", "2024-05-01"], "is not before --until"),
        (["--format", "yaml"], "invalid choice: 'yaml'"),
    ],
)
def test_bad_arguments_are_usage_errors(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    path, _ = store
    assert main(["audit", str(path), *args]) == 2
    assert said in capsys.readouterr().err


def test_an_empty_database_reports_nothing_and_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.db"
    SQLiteAuditSink(path).close()
    assert main(["audit", str(path)]) == 0
    text = capsys.readouterr().out
    assert "0 tool calls in 0 requests" in text
    assert "note: no record is selected" in text
    assert "[1] instruction-field writes approved by an always rule: none" in text
    code, report = audit_json(capsys, str(path))
    assert code == 0
    assert report["counts"] == {
        "records": 0,
        "calls": 0,
        "writes": 0,
        "follow_ups": 0,
        "requests": 0,
        "model_calls": 0,
        "substitutions": 0,
    }
    assert report["substitution_rate"] is None
    assert main(["audit", str(path), "--format", "markdown"]) == 0
    assert "**Result: clean (exit 0)**" in capsys.readouterr().out


# --- formats --------------------------------------------------------------------------------


def test_the_text_report_has_short_sections_and_aligned_columns(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = store
    assert main(["audit", str(path)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith(f"veridic audit {path}: 6 tool calls in 3 requests, 20")
    for title in (
        "[1] instruction-field writes approved by an always rule: none (as required)",
        "[2] writes by approval (4 write calls)",
        "[3] after a stopped call (substitutions)",
        "    3 stopped calls, 2 followed by another call; 1 of those tried the same "
        "operation again (rate 50%)",
        "[4] follow-ups (a guard fired after its call had ended): 1",
        "[5] requests (3)",
    ):
        assert title in lines
    head = next(line for line in lines if "request  tool" in line and "approval" in line)
    row = lines[lines.index(head) + 1]
    assert row.index("req-") == head.index("request")  # columns line up
    assert "{" not in text  # no JSON in the text report
    assert lines[-1] == "result: clean (exit 0)"
    assert "    user_confirmed  2" in lines


def test_the_markdown_report_is_tables_for_a_pull_request(
    store: tuple[Path, float], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = store
    assert main(["audit", str(path), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## veridic audit: `")
    assert "**Instruction-field writes approved by an always rule: none** (as required)." in md
    assert "| `user_confirmed` | 2 |" in md
    assert "#### Request `req-a`" in md
    assert "| time (UTC) | api | model | prompt |" in md
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.endswith("|")


def test_hostile_text_in_the_store_cannot_drive_a_terminal_or_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile.db"
    view = build_view([])
    with SQLiteAuditSink(path) as sink:
        execute(  # as a model would: execute escapes the name and records it refused
            view,
            HOSTILE,
            {},
            policy=ApprovalPolicy(view),
            audit=sink,
            request_id="req-h",
            prompt=Composer().system(SYSTEM).build(),
        )
        next_call = record(time.time() + 1, "save_note", request_id="req-h")
        sink.write(next_call)
        # as a store written by other code might hold it: raw control characters
        sink.write(record(time.time() + 2, HOSTILE, request_id=HOSTILE))
        sink.write(record(time.time() + 3, MARKDOWN, request_id=MARKDOWN))
    assert main(["audit", str(path)]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\u202e" not in text
    assert "\u200b" not in text
    assert "\\x1b[2J" in text
    assert "\\u202e" in text
    assert not any(line.startswith(("| x", "result: clean")) for line in text.splitlines()[:-1])

    assert main(["audit", str(path), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "\x1b" not in md
    assert "\u202e" not in md
    outside = "".join(md.split("`")[::2])  # what is not inside a code span
    assert "`\\x60[c](//e.x) @all <b>\\x7c</b>`" in md
    for forged in ("[c]", "@all", "<b>", "| x |", "[click]"):
        assert forged not in outside, forged
    assert_cells_line_up(md)

    code, report = audit_json(capsys, str(path))
    assert code == 0
    assert HOSTILE in tools_of(report, "writes")  # JSON keeps the exact value ...
    raw = subprocess.run(  # ... and is ASCII only
        [sys.executable, "-m", "veridic", "audit", str(path), "--format", "json"],
        capture_output=True,
        check=False,
    )
    assert raw.returncode == 0
    assert raw.stdout.isascii()
    assert b"\x1b" not in raw.stdout
    assert json.loads(raw.stdout) == report


def assert_cells_line_up(md: str) -> None:
    """Every row of every Markdown table has as many cells as its header (no pipe got in)."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            cells = lines[i - 1].count("|")
            for row in lines[i + 1 :]:
                if not row.startswith("|"):
                    break
                assert row.count("|") == cells, row


def test_shown_escapes_every_invisible_character_and_doubles_backslashes() -> None:
    assert shown("a\\x1b") == "a\\\\x1b"  # the four characters, told apart from ...
    assert shown("a\x1b") == "a\\x1b"  # ... the escape character
    assert shown("\x85\u2028\ufeff\U000e0041") == "\\x85\\u2028\\ufeff\\U000e0041"
    assert shown("é日本") == "é日本"


def test_parse_time_reads_seconds_and_iso_and_refuses_the_rest() -> None:
    assert parse_time("1714564800.5") == NOON + 0.5
    assert parse_time("2024-05-01T12:00:00Z") == NOON
    assert parse_time("2024-05-01 12:00") == NOON
    for bad in ("", "tomorrow", "inf", "2024-13-01"):
        with pytest.raises(ValueError, match="time"):
            parse_time(bad)


# --- a property: the counts are the store's own answers, for any selection -----------------

MODES = st.sampled_from(
    [
        ApprovalMode.NOT_REQUIRED,
        ApprovalMode.ALWAYS_RULE,
        ApprovalMode.USER_CONFIRMED,
        ApprovalMode.DENIED,
        ApprovalMode.NOT_ASKED,
    ]
)
RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["r1", "r2", "r3"]),
        MODES,
        st.booleans(),  # an instruction write (where the mode lets the call run)
        st.sampled_from(["query", "write"]),
        st.integers(0, 100),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=RECORDS,
    chosen=st.sets(st.sampled_from(["r1", "r2", "r3"])),
    since=st.none() | st.integers(0, 100),
)
def test_report_counts_equal_the_store_answers_restricted_to_the_selection(
    rows: list[tuple[str, ApprovalMode, bool, str, int]], chosen: set[str], since: int | None
) -> None:
    records = [
        record(
            NOON + at,
            "edit_prompt" if wrote else "save_note",
            request_id=request_id,
            approval=mode,
            instruction_write=wrote and mode not in (ApprovalMode.DENIED, ApprovalMode.NOT_ASKED),
            kind=kind,
        )
        for request_id, mode, wrote, kind, at in rows
    ]
    selection = Selection(
        request_ids=tuple(sorted(chosen)), since=None if since is None else NOON + since
    )
    with SQLiteAuditSink(":memory:") as whole, SQLiteAuditSink(":memory:") as part:
        for r in records:
            whole.write(r)
            if selection.holds(r.request_id, r.time):
                part.write(r)
        report = build_report(whole, selection, database=":memory:").to_json()
        assert report["writes_by_approval"] == {
            mode.value: n for mode, n in part.writes_by_approval().items()
        }
        always = report["instruction_writes_under_always_rule"]
        assert isinstance(always, list)
        assert [(r["request_id"], r["time"]) for r in always] == [
            (r.request_id, r.time) for r in part.instruction_writes_under_always_rule()
        ]
        assert report["exit_code"] == (1 if always else 0)
        if since is None:  # a request is whole: what followed each stop is in the part too
            assert report["substitution_rate"] == part.substitution_rate()


def test_the_database_under_review_is_never_written_not_even_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib
    import sqlite3

    path = tmp_path / "evidence.db"
    with sqlite3.connect(path) as db:  # a 0.1 store: user_version 0, the old approval check
        db.executescript(
            "CREATE TABLE veridic_audit (id INTEGER PRIMARY KEY, time REAL NOT NULL, "
            "request_id TEXT NOT NULL, tool TEXT NOT NULL, kind TEXT, risk TEXT, "
            "approval TEXT NOT NULL, wrote_instruction_fields INTEGER NOT NULL, "
            "irreversible INTEGER NOT NULL, prompt_sha256 TEXT NOT NULL, "
            "tools_sha256 TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL, "
            "operations TEXT NOT NULL);"
            "CREATE TABLE veridic_model_calls (id INTEGER PRIMARY KEY, time REAL NOT NULL, "
            "request_id TEXT NOT NULL, api TEXT NOT NULL, model TEXT NOT NULL, "
            "prompt_sha256 TEXT NOT NULL, tools_sha256 TEXT NOT NULL, tools TEXT NOT NULL, "
            "instruction_spans TEXT NOT NULL, streamed INTEGER NOT NULL);"
        )
        db.execute(
            "INSERT INTO veridic_audit VALUES (1, 1.0, 'req-1', 'refnud', NULL, NULL, 'denied', "
            "0, 0, ?, ?, 'refused', 'unknown: never registered', '[]')",
            ("a" * 64, "b" * 64),
        )
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert main(["audit", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["records"] == 1
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # byte for byte
    assert not (tmp_path / "evidence.db-wal").exists()


def test_a_time_no_date_can_show_is_null_in_json_and_said_in_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rule for every record: a hand-edited store's impossible time does not stop
    the report; JSON says ``null``, a table says the number and that it has no date."""
    far = 1e20  # past the last year a date can show
    path = hand_written(tmp_path / "a.db", record(far, request_id="far"), record(NOON))
    code, report = audit_json(capsys, str(path))
    assert code == 0
    by_request = {r["request_id"]: r["time_utc"] for r in report["writes"]}
    assert by_request == {"far": None, "req-1": "2024-05-01T12:00:00.000Z"}
    assert main(["audit", str(path)]) == 0
    text = capsys.readouterr().out
    assert "1e+20 (no date)" in text
    assert "2024-05-01T12:00:00.000Z" in text


def test_a_long_store_path_is_named_whole_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / ("runner-work-" + "d" * 90)
    folder.mkdir()
    path = folder / "audit.db"
    SQLiteAuditSink(path).close()
    assert main(["audit", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"veridic audit {path}: 0 tool calls")
    assert main(["audit", str(path), "--format", "markdown"]) == 0
    assert f"## veridic audit: `{path}`" in capsys.readouterr().out


def test_two_names_that_differ_within_64_characters_never_show_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name is shown whole up to 64 characters. The clip counted the escaped text, so a
    model-written name of 64 characters with a newline in it lost its end, and two names
    differing there showed as one (a clip could also cut ``\\\\`` or ``\\n`` in two and
    show a backslash and a newline alike)."""
    first = "x\n" + "y" * 61 + "A"
    second = "x\n" + "y" * 61 + "B"
    backslash, newline = "z" * 63 + "\\", "z" * 63 + "\n"
    path = hand_written(
        tmp_path / "a.db",
        *(record(NOON + n, name) for n, name in enumerate((first, second, backslash, newline))),
    )
    for form in ("text", "markdown"):
        assert main(["audit", str(path), "--format", form]) == 0
        out = capsys.readouterr().out
        for name in (first, second, backslash, newline):
            assert shown(name) in out, (form, name)
        assert "…" not in out, form


@given(st.text(max_size=64))
def test_a_text_within_the_limit_is_shown_whole(text: str) -> None:
    assert shown(text, 64) == shown(text)


@given(st.text(min_size=65, max_size=200))
def test_a_clipped_text_shows_its_first_characters_whole(text: str) -> None:
    assert shown(text, 64) == f"{shown(text[:64])}… ({len(text)} chars)"


@given(st.text(max_size=90), st.text(max_size=90), st.integers(min_value=0, max_value=70))
@example("x" * 64 + "… (100 chars)", "x" * 100, 64)
@example("\n" * 10 + "… (30 chars)", "\n" * 30, 10)
def test_no_text_can_show_as_a_clipped_one(first: str, second: str, limit: int) -> None:
    """The clip's suffix is written after the kept characters, unescaped, so a name could
    end with one of its own: it cannot pass for a clipped name, since a text as long as a
    clipped one's display is clipped too, and says its own length."""
    if first != second and shown(first, limit) == shown(second, limit):
        assert len(first) == len(second) > limit
        assert first[:limit] == second[:limit]


def test_a_name_padded_with_spaces_does_not_show_as_the_name_in_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GitHub strips one space from each end of a code span: ``` ` save_note ` ``` showed
    ``save_note``, the real tool, for a name the model padded (refused as unknown)."""
    path = hand_written(
        tmp_path / "a.db", record(NOON, "save_note"), record(NOON + 1, " save_note ")
    )
    assert main(["audit", str(path), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<code>save_note</code>" in html
    assert "<code> save_note </code>" in html


def test_an_empty_or_blank_value_shows_as_it_is_in_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty value (``--request ""``) was two literal backticks, not a span; a value of
    spaces only, which GitHub keeps whole in a span, got one more space at each end: one
    space showed three."""
    path = hand_written(tmp_path / "a.db", record(NOON))
    asked = ["--request", "", "--request", " ", "--request", "  "]
    assert main(["audit", str(path), *asked, "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    html = MarkdownIt("commonmark").render(md)
    assert "request <em>(empty)</em> has nothing on record" in html
    assert "request <code> </code> has nothing on record" in html
    assert "request <code>  </code> has nothing on record" in html
    assert "``" not in md


@pytest.mark.parametrize("limit", [-1, -64])
def test_a_negative_limit_is_refused(limit: int) -> None:
    """``text[:-1]`` kept all but the last character and said the text was clipped."""
    with pytest.raises(ValueError, match=f"limit {limit}"):
        shown("abc", limit)


@pytest.mark.parametrize(("limit", "expected"), [(0, "… (3 chars)"), (1, "a… (3 chars)")])
def test_a_limit_of_zero_or_one_still_says_the_length(limit: int, expected: str) -> None:
    assert shown("abc", limit) == expected
