"""``-o FILE``: the command line writes a new file and renames it into place.

``veridic show -o``, ``veridic manifest -o`` and ``veridic mcp pin -o`` checked the
path, then opened it for writing: a symbolic link there (planted, or swapped in
between the check and the write) was followed, and the view or the manifest went
into whatever file it named. Now the text is written to a new file beside the
target and renamed over the name, so no existing file is ever opened for writing;
a link at the name is refused rather than replaced. The commands also refuse the
files their output must never replace: an SQLite store's companion files, and the
Python source of the application a manifest is read from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from veridic import Composer, ModelGateway, Registry, ScriptedProvider, SQLiteAuditSink, instruction
from veridic.checks.cli import EXIT_CLEAN, EXIT_USAGE, main

FIXTURES = Path(__file__).parent / "cli_fixtures"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _document(folder: Path) -> Path:
    path = folder / "prompt.json"
    prompt = Composer().system(instruction("Be brief.")).user("Hi").build()
    path.write_text(prompt.to_document(), encoding="utf-8")
    return path


def _store(path: Path) -> Path:
    """An audit store a real gateway run wrote (in WAL mode, so it has companions)."""
    registry = Registry("weather")

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Tell the weather in a city.

        Args:
            city: The city.
        """
        return "sunny"

    sink = SQLiteAuditSink(path)
    gateway = ModelGateway(ScriptedProvider([{"text": "Sunny."}]), audit=sink)
    prompt = Composer().system(instruction("You report the weather.")).user("Oslo?").build()
    gateway.send(prompt, registry.view(), request_id="req-7")
    sink.close()
    return path


# --- a link at the output path is never written through ------------------------------------


def test_show_does_not_write_through_a_link_planted_at_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The link is what a swap between the check and the write leaves: the view went into
    # the file it named (a shell profile, a key), which the check never looked at.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    link = tmp_path / "view.html"
    link.symlink_to(victim)
    code, out, err = _run(capsys, "show", str(_document(tmp_path)), "-o", str(link))
    assert (code, out) == (EXIT_USAGE, "")
    assert "is a symbolic link" in err
    assert str(victim) in err  # where it points, so the user can name that file instead
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert link.is_symlink()


def test_manifest_does_not_write_through_a_link_at_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], app: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    link = tmp_path / "agent-manifest.json"
    link.symlink_to(victim)
    code, _, err = _run(capsys, "manifest", "clean_app:registry", "-o", str(link))
    assert code == EXIT_USAGE
    assert "is a symbolic link" in err
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_show_replaces_a_hard_linked_output_without_changing_the_other_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Writing into the file opened the inode both names share.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    output = tmp_path / "view.txt"
    os.link(victim, output)
    code, out, _ = _run(capsys, "show", str(_document(tmp_path)), "-o", str(output))
    assert (code, out) == (EXIT_CLEAN, f"wrote {output}, replacing the file that was there\n")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert "a prompt document" in output.read_text(encoding="utf-8")


def test_show_keeps_the_mode_of_the_file_it_replaces_and_leaves_no_temporary_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "view.txt"
    output.write_text("old\n", encoding="utf-8")
    output.chmod(0o600)
    document = _document(tmp_path)
    code, _, _ = _run(capsys, "show", str(document), "-o", str(output))
    assert code == EXIT_CLEAN
    assert output.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompt.json", "view.txt"]


def test_show_to_a_folder_says_it_is_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = _run(capsys, "show", str(_document(tmp_path)), "-o", str(folder))
    assert (code, out) == (EXIT_USAGE, "")
    assert "is a folder: name a file in it" in err
    assert "Traceback" not in err


def test_show_still_writes_to_a_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "show", str(_document(tmp_path)), "-o", os.devnull)
    assert (code, out) == (EXIT_CLEAN, f"wrote {os.devnull}\n")
    assert Path(os.devnull).exists()
    assert not Path(os.devnull).is_file()


# --- a store's companion files --------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_show_refuses_to_write_over_a_companion_of_the_store_it_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    # "veridic show audit.db -o audit.db-wal" replaced the store's write-ahead log: the
    # calls recorded since the last checkpoint were lost, or SQLite read the view as a log.
    store = _store(tmp_path / "audit.db")
    companion = tmp_path / f"audit.db{suffix}"
    code, out, err = _run(capsys, "show", str(store), "-o", str(companion))
    assert (code, out) == (EXIT_USAGE, "")
    assert "companion file" in err
    assert not companion.exists()


def test_show_refuses_a_companion_of_the_store_a_link_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # SQLite keeps the companions beside the file a link names, not beside the link.
    (tmp_path / "data").mkdir()
    store = _store(tmp_path / "data" / "audit.db")
    link = tmp_path / "current.db"
    link.symlink_to(store)
    code, _, err = _run(capsys, "show", str(link), "-o", str(store.parent / "audit.db-wal"))
    assert code == EXIT_USAGE
    assert "companion file" in err


def test_show_of_a_document_may_write_a_name_ending_in_wal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _document(tmp_path)
    output = tmp_path / "prompt.json-wal"
    code, _, _ = _run(capsys, "show", str(document), "-o", str(output))
    assert code == EXIT_CLEAN
    assert output.is_file()


# --- manifest -o never replaces the application's code ------------------------------------


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the clean application in a package-less folder, as the working directory."""
    source = tmp_path / "clean_app.py"
    shutil.copy(FIXTURES / "clean_app.py", source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr("veridic.config._current", None)
    sys.modules.pop("clean_app", None)
    yield source
    sys.modules.pop("clean_app", None)


def test_manifest_refuses_to_write_over_the_module_it_reads(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "veridic manifest app:registry -o app.py" (a slip for app.json) replaced the
    # application's source with JSON.
    before = app.read_text(encoding="utf-8")
    code, _, err = _run(capsys, "manifest", "clean_app:registry", "-o", str(app))
    assert code == EXIT_USAGE
    assert "is Python code" in err
    assert app.read_text(encoding="utf-8") == before


def test_manifest_refuses_any_python_source_as_its_output(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A module of the application that this target does not import is code all the same.
    other = app.parent / "settings.py"
    other.write_text("DEBUG = False\n", encoding="utf-8")
    code, _, err = _run(capsys, "manifest", "clean_app:registry", "-o", str(other))
    assert code == EXIT_USAGE
    assert "is Python code" in err
    assert other.read_text(encoding="utf-8") == "DEBUG = False\n"
    code, _, _ = _run(capsys, "manifest", "clean_app:registry", "-o", "new_module.py")
    assert code == EXIT_USAGE
    assert not (app.parent / "new_module.py").exists()


def test_manifest_refuses_a_module_file_it_imported_under_another_name(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A link with a harmless name to the module's source: the check follows it.
    alias = app.parent / "manifest.json"
    alias.symlink_to(app)
    before = app.read_text(encoding="utf-8")
    code, _, _ = _run(capsys, "manifest", "clean_app:registry", "-o", str(alias))
    assert code == EXIT_USAGE
    assert app.read_text(encoding="utf-8") == before


def test_manifest_writes_its_json_file(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "manifest", "clean_app:registry", "-o", "agent-manifest.json")
    assert code == EXIT_CLEAN
    assert "wrote agent-manifest.json" in out
    assert (app.parent / "agent-manifest.json").read_text(encoding="utf-8").startswith("{")


# --- mcp pin -o and --check ------------------------------------------------------------------


@pytest.fixture
def pin_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``safe_servers:TOOLS``: a real MCP server (a subprocess) declared in a module."""
    spec = tmp_path / "tools.json"
    tool = {
        "name": "search",
        "description": "Search the issues.",
        "input_schema": {"type": "object"},
    }
    spec.write_text(json.dumps([tool]), encoding="utf-8")
    script = Path(__file__).parent / "_mcp_tools_server.py"
    (tmp_path / "safe_servers.py").write_text(
        "import sys\n"
        "from veridic.integrations.mcp import stdio\n"
        f"TOOLS = stdio('tools', sys.executable, {str(script)!r}, "
        f"env={{'VERIDIC_TEST_MCP_SPEC': {str(spec)!r}}})\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "safe_servers:TOOLS"


def test_mcp_pin_does_not_write_through_a_link_and_reads_no_bytes_as_text(
    pin_target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    link = tmp_path / "pins.json"
    link.symlink_to(victim)
    code, _, err = _run(capsys, "mcp", "pin", pin_target, "-o", str(link))
    assert code == EXIT_USAGE
    assert "is a symbolic link" in err
    assert victim.read_text(encoding="utf-8") == "precious\n"
    # --check of pins saved in UTF-16 raised UnicodeDecodeError: a traceback, exit 1.
    pins = tmp_path / "utf16.json"
    pins.write_bytes('{"format": 1}'.encode("utf-16"))
    code, _, err = _run(capsys, "mcp", "pin", pin_target, "--check", str(pins))
    assert code == EXIT_USAGE
    assert "are not UTF-8" in err


# --- second read: names and pipes the first tests did not try --------------------------------


def test_show_writes_a_file_whose_name_is_as_long_as_the_system_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The new file beside the target was named ".NAME.<16 hex>.tmp": 22 characters longer
    # than NAME, so a name the folder accepts was refused as "File name too long".
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    output = tmp_path / ("v" * (longest - len(".txt")) + ".txt")
    code, out, err = _run(capsys, "show", str(_document(tmp_path)), "-o", str(output))
    assert (code, err) == (EXIT_CLEAN, "")
    assert out == f"wrote {output}\n"
    assert "a prompt document" in output.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["prompt.json", output.name])


def _veridic(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as a subprocess: one that waits forever fails the test (and is killed)
    instead of hanging the suite; no duration is asserted."""
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_show_to_a_pipe_no_program_reads_is_a_usage_error_not_a_wait(tmp_path: Path) -> None:
    # A FIFO at the name (planted, or left by a shell) was opened for writing, which waits
    # for a reader: with none, the command (a CI step) waited forever.
    fifo = tmp_path / "view.txt"
    os.mkfifo(fifo)
    link = tmp_path / "current.txt"
    link.symlink_to(fifo)
    document = _document(tmp_path)
    for output in (fifo, link):
        done = _veridic("show", str(document), "-o", str(output), cwd=tmp_path)
        assert (done.returncode, done.stdout) == (EXIT_USAGE, ""), done.stderr
        assert "no program reads" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_show_still_writes_into_a_pipe_a_program_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A shell's >(...) is such a pipe; the reader is opened first, as the shell does.
    fifo = tmp_path / "view.txt"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, out, _ = _run(capsys, "show", str(_document(tmp_path)), "-o", str(fifo))
        assert (code, out) == (EXIT_CLEAN, f"wrote {fifo}\n")
        assert b"a prompt document" in os.read(reader, 1 << 16)
    finally:
        os.close(reader)


SURROGATE_APP = '''
from veridic import Registry

registry = Registry("weather")


@registry.tool(kind="query")
def get_weather(city: str) -> str:
    """Tell the weather \\ud800 in a city.

    Args:
        city: The city.
    """
    return "sunny"
'''


def test_manifest_of_text_utf_8_cannot_hold_is_a_usage_error_naming_the_character(
    tmp_path: Path,
) -> None:
    # A lone surrogate in a description (an escape typed in a docstring) cannot be encoded:
    # UnicodeEncodeError was a traceback, exit 1, read by CI as findings.
    (tmp_path / "surrogate_app.py").write_text(SURROGATE_APP, encoding="utf-8")
    done = _veridic("manifest", "surrogate_app:registry", "-o", "manifest.json", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (EXIT_USAGE, ""), done.stderr
    assert "Traceback" not in done.stderr
    assert "U+D800" in done.stderr
    assert "nothing was written" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == [
        "surrogate_app.py"
    ]


# --- follow-ups: read-only targets, set-uid bits ---------------------------------------------


def test_show_refuses_to_replace_a_read_only_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The rename replaced a file its owner had made read-only (chmod 444): no write bit was
    # asked about, and even root's "cp" would have kept the old file's owner.
    output = tmp_path / "view.txt"
    output.write_text("keep me\n", encoding="utf-8")
    output.chmod(0o444)
    code, out, err = _run(capsys, "show", str(_document(tmp_path)), "-o", str(output))
    assert (code, out) == (EXIT_USAGE, "")
    assert "read-only" in err
    assert "chmod u+w" in err
    assert output.read_text(encoding="utf-8") == "keep me\n"
    assert output.stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompt.json", "view.txt"]


def test_show_drops_set_id_bits_of_the_file_it_replaces_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The new file belongs to whoever runs veridic: a set-uid bit kept would make the
    # report run as them (root in a CI container) if anyone ever executed it.
    output = tmp_path / "view.txt"
    output.write_text("old\n", encoding="utf-8")
    output.chmod(0o6750)
    code, _, _ = _run(capsys, "show", str(_document(tmp_path)), "-o", str(output))
    assert code == EXIT_CLEAN
    assert output.stat().st_mode & 0o7777 == 0o750


def test_the_chmod_a_read_only_refusal_suggests_runs_as_given_in_a_shell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The hint said "chmod u+w" and the path as it was: a name with a space made chmod
    # look for two files, and one with "$(...)" in it ran a command when pasted.
    output = tmp_path / "the view $(touch pwned).txt"
    output.write_text("keep me\n", encoding="utf-8")
    output.chmod(0o444)
    code, _, err = _run(capsys, "show", str(_document(tmp_path)), "-o", str(output))
    assert code == EXIT_USAGE
    suggested = err.split("(chmod ", 1)[1].split(") if it may be replaced", 1)[0]
    subprocess.run(["sh", "-c", f"chmod {suggested}"], cwd=tmp_path, check=True)
    assert output.stat().st_mode & 0o200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompt.json", output.name]
