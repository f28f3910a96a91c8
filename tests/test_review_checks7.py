"""Reproducers of a seventh attacker review of the ``veridic`` command line.

These commands run in CI, where every line the job prints is read by the
runner: a line that starts (after spaces) with ``::`` is a workflow command
GitHub Actions obeys (``::add-mask::FINDING`` hides every later "FINDING" of
the log, ``::error file=...::`` forges an annotation), and an escape sequence
acts on the terminal of whoever reads the log. Each test failed on the code
before its fix.
"""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from veridic.cli import main

Write = Callable[[str], str]

FORGED = "boom\n::add-mask::FINDING\n::error file=app.py,line=1::all clean \x1b]52;c;aGk=\x07\x9b2J"
"""An error message that forges workflow commands on lines of their own, an OSC 52, a C1 CSI."""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Write]:
    """Write a module (unique name) into a project in ``tmp_path``; the cwd is that project."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr("veridic.config._current", None)
    written: list[str] = []

    def write(source: str) -> str:
        name = f"app_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def assert_inert(output: str) -> None:
    """No line a workflow command, no control character but the line breaks veridic wrote."""
    for line in output.splitlines():
        assert not line.lstrip().startswith("::"), line
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) < 0xA0 for c in output), output


# --- usage errors quote outside text: one line, every control shown ---------------------------


@pytest.mark.parametrize("command", ["lint", "check", "manifest"])
def test_a_usage_error_quoting_the_applications_exception_forges_no_log_line(
    app: Write, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    module = app(f"raise RuntimeError({FORGED!r})\n")
    extra = ["--check", "m.json"] if command == "manifest" else []
    assert main([command, f"{module}:registry", *extra]) == 2
    err = capsys.readouterr().err
    assert "raised RuntimeError: boom" in err
    assert "::add-mask::FINDING" in err  # still told, on the error's own line
    assert err.count("\n") == 1
    assert_inert(err)


def test_a_usage_error_of_veridic_audit_naming_the_store_forges_no_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file name is outside text too: a pull request may add one with a line break in it.
    store = tmp_path / "a\n::add-mask::FINDING\x1b[8m.db"
    store.write_bytes(b"not a database")
    assert main(["audit", str(store)]) == 2
    err = capsys.readouterr().err
    assert "cannot be read as an SQLite database" in err
    assert_inert(err)
