"""``veridic hatches`` (and ``show``) on paths that hold no code, the same code twice, or a
link that loops.

A directory with no Python file in it (a package renamed, a typo'd folder that
exists) was reported "0 findings ... clean (exit 0)": the check passed having read
nothing. A file reached twice (given twice, or through a symbolic link beside it)
had each of its hatches listed and counted twice. A symbolic link that loops was
said to be "no such file or directory". Failed on the code before the fix.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from veridic.checks.cli import EXIT_FINDINGS, EXIT_USAGE, main
from veridic.hatches import find_hatches

_CAST = (
    "from typing import cast\n"
    "from veridic import TrustedInstruction\n"
    "forged = cast(TrustedInstruction, 'z')\n"
)


def test_a_directory_holding_no_python_file_is_a_usage_error_not_a_clean_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "README.md").write_text("renamed to src/\n")
    assert main(["hatches", "app"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "'app' holds no Python file" in err


def test_one_empty_directory_among_others_is_still_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1\n")
    (tmp_path / "empty").mkdir()
    assert main(["hatches", "src", "empty"]) == EXIT_USAGE
    assert "empty" in capsys.readouterr().err


def test_a_file_reached_twice_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(_CAST)
    (tmp_path / "link.py").symlink_to(tmp_path / "pkg" / "bad.py")
    assert len(find_hatches([tmp_path])) == 1
    assert len(find_hatches(["pkg", "pkg/bad.py"])) == 1


def test_the_report_counts_a_linked_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(_CAST)
    (tmp_path / "link.py").symlink_to(tmp_path / "pkg" / "bad.py")
    assert main(["hatches", ".", "--format", "json"]) == EXIT_FINDINGS
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [finding["file"] for finding in findings] == ["pkg/bad.py"]


def test_a_symbolic_link_that_loops_is_said_to_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")
    assert main(["hatches", "one"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no such file" not in err
    assert "symbolic link" in err


def test_veridic_show_of_a_looping_link_says_it_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``veridic show`` said "no such file" of a link that loops, where ``veridic audit``
    of the same path says what it is."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.json").symlink_to(tmp_path / "two.json")
    (tmp_path / "two.json").symlink_to(tmp_path / "one.json")
    assert main(["show", "one.json"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no such file" not in err
    assert "symbolic link" in err


def test_a_file_reached_through_a_hard_link_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hard link is the same real file as a symbolic link names, but it resolves to
    itself: told apart by path, its hatches were listed and counted twice."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(_CAST)
    os.link(tmp_path / "pkg" / "bad.py", tmp_path / "copy.py")
    assert [hatch.file for hatch in find_hatches(["."])] == ["copy.py"]
    assert [hatch.file for hatch in find_hatches(["pkg", "copy.py"])] == ["pkg/bad.py"]


def test_two_files_of_the_same_text_are_both_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read once means the same file, not the same content: a copy is code of its own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.py").write_text(_CAST)
    (tmp_path / "two.py").write_text(_CAST)
    assert [hatch.file for hatch in find_hatches(["."])] == ["one.py", "two.py"]


def test_a_broken_link_among_the_files_is_still_a_finding_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``.py`` link whose target is gone, inside a folder walked, is a file that could not
    be read (a finding), as it was before files were told apart."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("x = 1\n")
    (tmp_path / "gone.py").symlink_to(tmp_path / "nowhere.py")
    assert [(hatch.file, hatch.kind) for hatch in find_hatches(["."])] == [
        ("nowhere.py", "unparsable")
    ]


# --- what no file of code is: a FIFO, a device, a link to one --------------------------------
#
# Git keeps symbolic links, so a pull request can commit ``app/zero.py -> /dev/zero`` or a
# ``mypy.ini`` or manifest linked there. Read as text, a device never ends: ``veridic
# hatches`` and ``manifest --check`` took the runner's memory and died with a MemoryError
# traceback (a FIFO: waited for ever). Run in a child with a memory cap and a timeout, so
# the code before the fix fails the test instead of the machine.


def _veridic(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _python(cwd, "-m", "veridic", *args)


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    def _capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        preexec_fn=_capped,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs a device that never ends")
def test_a_python_file_linked_to_a_device_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "ok.py").write_text("x = 1\n")
    (tmp_path / "app" / "zero.py").symlink_to("/dev/zero")
    done = _veridic(tmp_path, "hatches", "app", "--format", "json")
    assert "Traceback" not in done.stderr
    assert done.returncode == EXIT_FINDINGS
    [finding] = json.loads(done.stdout)["findings"]
    assert (finding["kind"], finding["file"]) == ("unparsable", "app/zero.py")
    assert "not a regular file" in str(finding["text"])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_python_name_that_is_a_fifo_is_a_finding_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "ok.py").write_text("x = 1\n")
    os.mkfifo(tmp_path / "app" / "pipe.py")
    done = _veridic(tmp_path, "hatches", "app", "--format", "json")
    assert done.returncode == EXIT_FINDINGS
    [finding] = json.loads(done.stdout)["findings"]
    assert (finding["kind"], finding["file"]) == ("unparsable", "app/pipe.py")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs a device that never ends")
def test_a_mypy_configuration_linked_to_a_device_is_a_finding_not_a_crash(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "app.py").write_text("x = 1\n")
    (tmp_path / "mypy.ini").symlink_to("/dev/zero")
    done = _veridic(tmp_path, "hatches", ".", "--format", "json")
    assert "Traceback" not in done.stderr
    assert done.returncode == EXIT_FINDINGS
    [finding] = json.loads(done.stdout)["findings"]
    assert finding["kind"] == "config-unparsable"
    assert str(finding["file"]).endswith("mypy.ini")
    assert "not a regular file" in str(finding["text"])


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs a device that never ends")
def test_a_committed_manifest_linked_to_a_device_is_a_usage_error_not_a_crash(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(
        "from veridic import Registry\nregistry = Registry()\n"
        "@registry.tool(kind='query')\ndef find_user(email: str) -> str:\n"
        "    '''Find a user by email address.\n\n    Args:\n"
        "        email: The address to look up.\n    '''\n    return email\n"
    )
    (tmp_path / "agent-manifest.json").symlink_to("/dev/zero")
    done = _veridic(tmp_path, "manifest", "app:registry", "--check", "agent-manifest.json")
    assert "Traceback" not in done.stderr
    assert done.returncode == EXIT_USAGE
    assert "not a regular file" in done.stderr
    assert "veridic manifest app:registry -o agent-manifest.json" in done.stderr
    assert "-o /dev/zero" not in done.stderr  # no advice to write it over the device


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs a device that never ends")
def test_sarif_of_a_drift_in_a_manifest_linked_to_a_device_is_placed_at_line_one(
    tmp_path: Path,
) -> None:
    """SARIF reads the committed manifest again to place a drift at its line: a report
    naming a manifest that is a link to ``/dev/zero`` was read until the memory ran out."""
    (tmp_path / "agent-manifest.json").symlink_to("/dev/zero")
    child = (
        "import json\n"
        "from veridic.checks.sarif import render_sarif\n"
        "class Drift:\n"
        "    severity, kind, message = 'error', 'drift', 'tool x: risk changed'\n"
        "    file, line, subject, text = 'agent-manifest.json', None, 'x', None\n"
        "    data = (('subject', 'tool x'), ('field', 'risk'))\n"
        "log = json.loads(render_sarif([Drift()], command='check', root='.'))\n"
        "print(log['runs'][0]['results'][0]['locations'][0]['physicalLocation']['region'])\n"
    )
    done = _python(tmp_path, "-c", child)
    assert "Traceback" not in done.stderr
    assert done.stdout.strip() == "{'startLine': 1}"


def test_source_nested_deeper_than_the_parser_goes_is_a_finding_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's parser gives up on a deep expression with a RecursionError, which was no
    SyntaxError the scan caught: a traceback, whose exit code 1 reads as "findings"."""
    monkeypatch.chdir(tmp_path)
    deep = "+".join(["'a'"] * 50_000)
    (tmp_path / "app.py").write_text(f"from veridic import TrustPolicy\nP = TrustPolicy({deep})\n")
    assert main(["hatches", "app.py", "--format", "json"]) == EXIT_FINDINGS
    [finding] = json.loads(capsys.readouterr().out)["findings"]
    assert (finding["kind"], finding["file"]) == ("unparsable", "app.py")
    assert "nested too deeply" in str(finding["message"])


# --- stubs: mypy reads a .pyi, and then not the .py beside it -------------------------------


def test_a_stub_in_a_directory_walked_is_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mypy reads ``.pyi`` files as it reads ``.py`` ones; the walk took only ``.py``, so a
    stub given by name was scanned and the same stub inside a folder was not."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "legacy.pyi").write_text("def load() -> str: ...  # type: ignore\n")
    assert [(h.file, h.kind) for h in find_hatches(["app"])] == [("app/legacy.pyi", "type-ignore")]


def test_a_module_shadowed_by_a_stub_beside_it_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mypy app`` with ``prompts.pyi`` beside ``prompts.py`` reads the stub and checks
    none of ``prompts.py`` ("Success"), veridic's checks included: one added file turned
    every static check of the module off, and ``veridic hatches`` listed nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "prompts.py").write_text(
        "from veridic import Composer\ndef build(text: str) -> object:\n"
        "    return Composer().system(text)\n"
    )
    (tmp_path / "app" / "prompts.pyi").write_text("def build(text: str) -> object: ...\n")
    assert main(["hatches", "app", "--format", "json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)["listed"]
    assert (listed["kind"], listed["file"], listed["line"]) == ("stub-shadows", "app/prompts.py", 1)
    assert "app/prompts.pyi" in str(listed["message"])  # where
    assert "checks none of" in str(listed["message"])  # what it means
