"""``veridic show``: a saved prompt document, or an audit store's model calls, for a reviewer.

The store is written by a real run (``ModelGateway`` with a ``ScriptedProvider``
and an ``SQLiteAuditSink``); the documents by ``Prompt.to_document()``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tracemalloc
from pathlib import Path

import pytest
from test_provenance_map import without_recorded_notice

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Prompt,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    instruction,
    untrusted,
)
from veridic.checks.cli import EXIT_CLEAN, EXIT_USAGE, main
from veridic.text.terminal_view import KIND_SGR

HOSTILE = "\x1b[2J\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\u202eevil"


def build_view() -> ToolView:
    registry = Registry("weather")

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Tell the weather in a city.

        Args:
            city: The city.
        """
        return "sunny"

    return registry.view()


def ticket_prompt(view: ToolView | None = None) -> Prompt:
    composer = Composer().system(
        instruction("You report the weather."),
        *(() if view is None else (view.capability_section(),)),
    )
    return composer.data("ticket:7", untrusted(HOSTILE, source="ticket:7")).build()


@pytest.fixture
def document(tmp_path: Path) -> Path:
    path = tmp_path / "prompt.json"
    path.write_text(ticket_prompt().to_document(), encoding="utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Prompt, str]:
    """An audit store a real gateway run wrote: the path, the prompt sent and the call's id."""
    path = tmp_path / "audit.sqlite3"
    view = build_view()
    sink = SQLiteAuditSink(path)
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": [("c1", "get_weather", '{"city": "Oslo"}')]}]),
        audit=sink,
    )
    prompt = ticket_prompt(view)
    reply = gateway.send(prompt, view, request_id="req-7")
    gateway.run_tools(reply, policy=ApprovalPolicy(view))
    (call,) = sink.model_calls("req-7")
    sink.close()
    return path, prompt, call.call_id


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- a prompt document ---------------------------------------------------------------------


def test_show_prints_a_document_s_span_view(
    document: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["show", str(document)], capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    assert "a prompt document (veridic-prompt/1); its text matches its sha256" in out
    assert "provenance as recorded in the document, not verified by veridic" in out
    assert f"prompt sha256 {ticket_prompt().sha256}" in out
    assert "    UNTRUSTED untrusted ticket:7" in out
    assert "veridic.compose" not in out  # separators folded
    assert "\x1b" not in out  # not a terminal: no colour, and the ticket's ESC is escaped
    assert "\u202e" not in out


def test_show_colours_when_forced_and_lists_separators_when_asked(
    document: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["show", str(document), "--color", "always", "--separators"], capsys)
    assert code == EXIT_CLEAN
    assert KIND_SGR["untrusted"] in out
    assert "veridic.compose" in out
    assert "\x1b[2J" not in out
    code, out, _ = run(["show", str(document), "--colour", "never"], capsys)
    assert "\x1b" not in out


def test_show_writes_the_provenance_map(
    document: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "out" / "map.html"
    code, out, err = run(["show", str(document), "--format", "html", "-o", str(page)], capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    assert out == f"wrote {page}\n"
    written = page.read_text(encoding="utf-8")
    assert without_recorded_notice(written) == ticket_prompt().to_html()
    assert "as recorded, not verified by veridic" in written
    code, out, _ = run(["show", str(document), "--format", "html"], capsys)
    assert without_recorded_notice(out) == ticket_prompt().to_html()


def test_show_prints_the_validated_document_as_json(
    document: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["show", str(document), "--format", "json"], capsys)
    assert code == EXIT_CLEAN
    assert out == ticket_prompt().to_document() + "\n"
    assert out.isascii()


# --- an audit store ------------------------------------------------------------------------


def test_show_lists_a_store_s_model_calls(
    store: tuple[Path, Prompt, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, prompt, call_id = store
    code, out, err = run(["show", str(path)], capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    assert "1 model call, in the order sent" in out
    (row,) = [line for line in out.splitlines() if call_id in line]
    for cell in ("req-7", "scripted", prompt.sha256):
        assert cell in row
    assert f"veridic show {path} --call CALL_ID" in out
    code, out, _ = run(["show", str(path), "--format", "json"], capsys)
    (listed,) = json.loads(out)["model_calls"]
    assert (listed["call_id"], listed["prompt_sha256"]) == (call_id, prompt.sha256)


def test_show_and_audit_write_a_model_call_in_one_shape(
    store: tuple[Path, Prompt, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # A script that reads one command's JSON reads the other's: the same keys and values,
    # the audit report adding only the answer read back.
    path, _, call_id = store
    code, out, _ = run(["show", str(path), "--call", call_id, "--format", "json"], capsys)
    assert code == EXIT_CLEAN
    shown = json.loads(out)["model_call"]
    code, out, _ = run(["audit", str(path), "--format", "json"], capsys)
    assert code == EXIT_CLEAN
    (request,) = json.loads(out)["requests"]
    (audited,) = request["model_calls"]
    assert audited.pop("reply")["model"] == shown["model"] == "scripted"
    assert audited == shown
    assert shown["call_id"] == call_id
    assert shown["time_utc"].endswith("Z")


def test_show_gives_a_call_s_recorded_provenance_and_says_the_text_is_not_stored(
    store: tuple[Path, Prompt, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, prompt, call_id = store
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    code, out, err = run(["show", str(path), "--call", call_id], capsys)
    assert (code, err) == (EXIT_CLEAN, "")
    system = [s for s in prompt.spans if s.role == "system"]
    assert f"system message provenance: {len(system)} spans," in out
    first = system[0]
    assert f"chars 0-{first.end} ({first.end} chars)" in out
    assert "    trusted   registry  Registry('weather').view() chars " in out
    assert "The prompt's text is not stored in the audit store" in out
    assert "save prompt.to_document()" in out
    assert prompt.sha256 in out
    code, out, _ = run(["show", str(path), "--call", call_id, "--format", "json"], capsys)
    shown = json.loads(out)
    assert shown["text_stored"] is False
    assert [(s["start"], s["end"], s["kind"]) for s in shown["instruction_spans"]] == [
        (s.start, s.end, s.kind) for s in system
    ]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # read-only


def test_a_store_has_no_map_to_write(
    store: tuple[Path, Prompt, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, call_id = store
    code, out, err = run(["show", str(path), "--call", call_id, "--format", "html"], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert "not the prompt's text" in err
    assert "prompt.to_document()" in err


# --- usage errors --------------------------------------------------------------------------


def test_an_unknown_call_id_is_a_usage_error(
    store: tuple[Path, Prompt, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = store
    code, out, err = run(["show", str(path), "--call", "f" * 32], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert f"has no model call {'f' * 32} (1 recorded)" in err
    assert f"veridic show {path}" in err


def test_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["show", str(tmp_path / "nope.json")], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert "no such file" in err
    code, _, err = run(["show", str(tmp_path)], capsys)
    assert code == EXIT_USAGE
    assert "is not a file" in err


def test_an_sqlite_file_that_is_not_an_audit_store_is_refused_and_left_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    db.close()
    before = other.read_bytes()
    code, out, err = run(["show", str(other)], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert "without a veridic_audit table" in err
    assert "veridic reads a store and never adds one" in err  # not "veridic audit": show read it
    assert other.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "is not JSON"),
        ('{"format": "veridic-prompt/1"}', "must hold exactly the keys"),
        (json.dumps({"format": "veridic-conversation/1", "turns": []}), "must hold exactly"),
    ],
)
def test_a_file_that_is_no_document_is_a_usage_error(
    text: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(["show", str(path)], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert err.startswith(f"veridic show: {path}: PromptDocument")
    assert expected in err


def test_a_file_larger_than_any_document_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The whole file was read into memory, then parsed: a multi-gigabyte log passed by
    # mistake took the machine's memory (a CI runner killed the step) instead of a message.
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.write(b"{")
        file.truncate(256 * 1024 * 1024 + 1)  # sparse: no disk, no memory to make it
    code, out, err = run(["show", str(path)], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert f"{path} is 268,435,457 bytes" in err
    assert "larger than the 256 MiB" in err
    assert "prompt.to_document()" in err


def test_a_small_document_is_read_without_reserving_the_cap(
    document: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cap was read as "read(256 MiB + 1)", which allocates that much for any file, a
    # 2 KB document too: a CI runner with a memory limit (ulimit -v, a Windows commit
    # charge) failed every "veridic show" with a MemoryError.
    tracemalloc.start()
    try:
        code, out, _ = run(["show", str(document)], capsys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == EXIT_CLEAN
    assert out
    assert peak < 32 * 1024 * 1024, f"{peak:,} bytes at most, for a document of a few KB"


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="no /proc (Linux only)")
def test_a_file_whose_size_says_nothing_is_read_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A /proc file says 0 bytes and holds more: read past the size it gave, it is named
    # for what it holds (no JSON), not said to be empty.
    code, _, err = run(["show", "/proc/self/status"], capsys)
    assert code == EXIT_USAGE
    assert "is empty" not in err
    assert "Umask" in err  # its second line: more than the one byte past "0" was read


def test_a_tampered_document_is_refused(document: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(document.read_text(encoding="utf-8"))
    data["messages"][0]["content"] = data["messages"][0]["content"].replace("weather", "secrets")
    document.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = run(["show", str(document)], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert "refused" in err


def test_call_with_a_document_is_a_usage_error(
    document: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["show", str(document), "--call", "abc"], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert "is a prompt document, not an audit store" in err


def test_a_hostile_recorded_origin_cannot_drive_the_terminal(
    document: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(document.read_text(encoding="utf-8"))
    data["spans"][0]["origin"] = HOSTILE
    document.write_text(json.dumps(data), encoding="utf-8")
    code, out, _ = run(["show", str(document), "--color", "always"], capsys)
    assert code == EXIT_CLEAN
    assert "\x1b[2J" not in out
    assert "\x1b]8" not in out
    assert "⟦U+001B⟧[2J" in out
