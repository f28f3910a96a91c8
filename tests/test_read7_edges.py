"""Second read of the seventh review's edges: Postgres conninfo secrets, SARIF, MCP.

Each test failed on the code the review merged and passes with the fix beside it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Final
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.cli import main

# -- Postgres conninfo: no password shown, and nothing but the password hidden --------


def _shown_by(conninfo: str) -> tuple[str, str]:
    """The message of the store's refusal of ``conninfo``, and all a logger would show."""
    pytest.importorskip("psycopg")
    from veridic import AuditRecordError, PostgresAuditSink

    with pytest.raises(AuditRecordError, match="the Postgres conninfo is not valid") as caught:
        PostgresAuditSink(conninfo)
    return str(caught.value), "".join(traceback.format_exception(caught.value))


def test_an_unquoted_password_with_spaces_in_a_conninfo_is_not_shown() -> None:
    # libpq reads 'secret' as the next keyword and quotes it: missing "=" after "secret"
    message, shown = _shown_by("host=db password=Zx9my Zx9secret port=5432")
    assert "Zx9secret" not in shown
    assert "Zx9my" not in shown
    assert "****" in message


def test_a_url_password_parameter_with_spaces_is_not_shown() -> None:
    # libpq quotes the whole value: unexpected spaces found in "my secret"
    for url in (
        "postgresql://audit@db/app?password=Zx9my Zx9secret",
        "postgresql://audit@db/app?password=Zx9my Zx9secret&sslmode=require",
    ):
        message, shown = _shown_by(url)
        assert "Zx9secret" not in shown, url
        assert "Zx9my" not in shown, url
        assert "****" in message


_WORDS = st.lists(
    st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=8).map(
        lambda drawn: f"Zx9{drawn}"
    ),
    min_size=2,
    max_size=4,
)
"""Each word starts ``Zx9``, a stretch no message of veridic or libpq holds."""


@settings(max_examples=30, deadline=None)
@given(words=_WORDS, url=st.booleans())
def test_no_word_of_a_password_written_with_spaces_is_shown(words: list[str], url: bool) -> None:
    password = " ".join(words)
    conninfo = (
        f"postgresql://audit@db/app?password={password}"
        if url
        else f"host=db password={password} dbname=app"
    )
    _, shown = _shown_by(conninfo)
    assert not any(word in shown for word in words), shown


@pytest.mark.parametrize("password", ["a", "e", "5", "ing", "look"])
def test_a_short_or_common_password_hides_only_itself(password: str) -> None:
    """A password is hidden where it stands as a word, not inside every word of libpq's text.

    A password equal to a whole word the message holds is hidden there too: the
    store cannot tell the two apart, and it errs on the side of the secret.
    """
    message, shown = _shown_by(f"postgresql://audit:{password}@[::1/app")
    assert "postgresql://audit:****@[::1/app" in message
    assert "when looking for matching" in message
    assert "in IPv6 host address" in message
    assert f":{password}@" not in shown


# -- SARIF: an alert of a command run at the repository root keeps its identity ---------


FORGE = (
    "from typing import cast\nfrom veridic import TrustedInstruction\n"
    "forged = cast(TrustedInstruction, raw)\n"
)


@pytest.mark.parametrize("folder", ["my app", "données", "app"])
def test_sarif_fingerprint_at_the_repository_root_is_the_one_before_the_uri_change(
    folder: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The fingerprint hashes the path as the report names it, not its percent-encoded URI.

    Code scanning matches an alert across runs by its fingerprint: the SARIF URIs
    moved to the repository root, but for a command run at the root (the usual
    job) a path with a space or a non-ASCII letter hashed as ``my%20app/...`` and
    every such alert was closed and opened anew.
    """
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "forge.py").write_text(FORGE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("veridic.config._current", None)
    main(["hatches", folder, "--format", "sarif"])
    (result,) = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    main(["hatches", folder, "--format", "json"])
    (item,) = json.loads(capsys.readouterr().out)["findings"]
    assert item["file"] == f"{folder}/forge.py"
    # the recipe of veridic/v1 (sarif.py's docstring): code, tool, file, source text, message
    parts = (item["kind"], "", item["file"], item["text"], item["message"])
    expected = hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()
    assert result["partialFingerprints"]["veridic/v1"] == expected
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location["uri"] == quote(f"{folder}/forge.py")


# -- MCP: a start the caller cancels leaves no task, no scope and no process ----------------

PID_THEN_MUTE = """
import os, sys
with open(sys.argv[1], "w", encoding="utf-8") as told:
    told.write(str(os.getpid()))
for line in sys.stdin:  # every request the client sends, never answered; ends on EOF
    pass
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is no zombie (Linux: its /proc status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_start_cancelled_by_the_callers_own_scope_ends_the_server_and_the_caller_runs_on(
    tmp_path: Path,
) -> None:
    """The caller's ``move_on_after`` around a start still waiting for the server: the
    start's task group was left entered (never closed), the server's process ran on
    after the caller gave up, and the cancel scopes of the caller's task were left
    out of order."""
    pytest.importorskip("mcp")
    import anyio

    from veridic import Registry
    from veridic.integrations.mcp import connect, stdio

    told = tmp_path / "pid.txt"
    server = stdio("slow", sys.executable, "-c", PID_THEN_MUTE, str(told), timeout=30)

    async def run() -> str:
        with anyio.move_on_after(1.5) as scope:
            async with connect(Registry(), server):
                return "connected"  # never: the server does not answer
        assert scope.cancelled_caught
        await anyio.sleep(0.01)  # the caller's code runs on after its own scope
        return "ran on"

    assert anyio.run(run) == "ran on"
    assert told.exists(), "the server did not start within the caller's scope"
    pid = int(told.read_text())
    for _ in range(20):
        if not _running(pid):
            break
        time.sleep(0.1)
    assert not _running(pid), f"server process {pid} still runs after the start was cancelled"


# -- The runner's legacy workflow commands: ``##[name]`` anywhere in a line ------------------

LEGACY: Final = "##[add-mask]FINDING"
"""GitHub's runner reads ``##[command]data`` anywhere in a line of the job's log (the V1
syntax, tried after ``::command::``), so a line need not start with it to be obeyed."""


def test_a_usage_error_quoting_a_legacy_workflow_command_is_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    module = f"app_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(f"raise RuntimeError({LEGACY!r})\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr("veridic.config._current", None)
    try:
        assert main(["lint", f"{module}:registry"]) == 2
    finally:
        sys.modules.pop(module, None)
    err = capsys.readouterr().err
    assert "raised RuntimeError" in err
    assert "add-mask]FINDING" in err  # still told
    assert "##[" not in err


@pytest.mark.parametrize("form", ["text", "json"])
@pytest.mark.parametrize("folder", ["##[error]all clear", "x ##[stop-commands]tok"])
def test_a_path_holding_a_legacy_workflow_command_is_inert_in_the_report(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    folder: str,
    form: str,
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "forge.py").write_text(FORGE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("veridic.config._current", None)
    assert main(["hatches", ".", "--format", form]) == 1
    out = capsys.readouterr().out
    assert "##[" not in out
    if form == "json":  # the same path, read back
        (item,) = json.loads(out)["findings"]
        assert item["file"] == f"{folder}/forge.py"
    else:
        assert folder.partition("##[")[2] in out


@pytest.mark.parametrize("form", ["text", "json"])
def test_veridic_audit_shows_a_recorded_legacy_workflow_command_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    """A record's detail quotes what a tool raised: a server's or a page's words."""
    from veridic import SQLiteAuditSink
    from veridic.run.audit import AuditRecord, CallOutcome
    from veridic.tools.risk import ApprovalMode, Risk

    with SQLiteAuditSink(tmp_path / "audit.db") as store:
        store.write(
            AuditRecord(
                time=1.0, request_id="req-1", tool="save_note", kind="write", risk=Risk.MID,
                approval=ApprovalMode.NOT_REQUIRED, wrote_instruction_fields=False,
                irreversible=False, prompt_sha256="0" * 64, tools_sha256="f" * 64,
                outcome=CallOutcome.FAILED, detail=f"RuntimeError: {LEGACY} ::error::x",
            )
        )  # fmt: skip
    main(["audit", str(tmp_path / "audit.db"), "--format", form])
    out = capsys.readouterr().out
    assert "add-mask]FINDING" in out  # still told
    assert "##[" not in out
    for line in out.splitlines():
        assert not line.lstrip().startswith("::"), line


def test_a_sarif_log_quoting_a_legacy_workflow_command_is_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/ci.md: the SARIF log is safe in a CI log; a result's source text is outside text."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    (tmp_path / "forge.py").write_text(
        "from typing import cast\nfrom veridic import TrustedInstruction\n"
        f"forged = cast(TrustedInstruction, {LEGACY!r})\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("veridic.config._current", None)
    assert main(["hatches", ".", "--format", "sarif"]) == 1
    out = capsys.readouterr().out
    assert "##[" not in out
    (result,) = json.loads(out)["runs"][0]["results"]
    assert LEGACY in result["properties"]["text"]  # the same log, read back
