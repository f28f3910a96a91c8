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
