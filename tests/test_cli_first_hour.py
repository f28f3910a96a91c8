"""The ``veridic`` command as a new user meets it, and as a CI log reads it.

The commands run as a subprocess (``python -m veridic``), the way CI runs them, so
what reaches standard error is what the runner's log holds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic._workflow_commands import inert_line
from veridic.checks.cli import EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, main

FORGED = "licence server said: ##[error]all clear\n::error file=app.py,line=1::all clear"

HOSTILE_BOOT_APP = f'''
from veridic import Registry

registry = Registry("billing")


def _boot() -> None:
    raise RuntimeError({FORGED!r})


billing = registry.component("billing", boot=_boot, hint="Billing needs its licence.")


@billing.tool(kind="query")
def get_invoice(invoice_id: int) -> str:
    """Read one invoice by its number, with the lines billed and the amount due.

    Args:
        invoice_id: The number of the invoice.
    """
    return "invoice"


def _noisy() -> None:
    print("imported ##[warning]from the application")
    print("::error file=app.py,line=2::printed by the application")


_noisy()
'''


def _veridic(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def _workflow_commands(text: str) -> list[str]:
    """The lines of ``text`` GitHub's runner would obey: ``::`` first, or ``##[`` anywhere."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::") or "##[" in line]


@pytest.mark.parametrize("command", ["lint", "check", "manifest"])
def test_a_boot_failure_s_message_forges_no_workflow_command_in_the_ci_log(
    tmp_path: Path, command: str
) -> None:
    # The log line "component 'billing' did not start: ..." quotes the exception, which may
    # quote a server's answer: its "##[error]" was obeyed by the runner reading stderr.
    (tmp_path / "billing_app.py").write_text(HOSTILE_BOOT_APP, encoding="utf-8")
    extra = ["-o", "manifest.json"] if command == "manifest" else []
    done = _veridic(command, "billing_app:registry", *extra, cwd=tmp_path)
    assert done.returncode in (EXIT_CLEAN, EXIT_FINDINGS), done.stderr
    if command != "lint":  # lint reads descriptions; it boots no component
        assert "did not start" in done.stderr  # still said, as text
    assert "printed by the application" in done.stderr
    assert _workflow_commands(done.stderr) == []
    assert _workflow_commands(done.stdout) == []


_RUNNER_SPACES = (
    "\t\v\f \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
"""What the runner's ``TrimStart()`` strips before it looks for ``::`` (.NET's
``Char.IsWhiteSpace``), less the line breaks that end a line before it is read."""


@given(
    st.text(
        st.sampled_from([":", "#", "[", "]", "x", "\u27e6", "\ufeff", *_RUNNER_SPACES]),
        max_size=12,
    )
)
def test_property_an_inert_line_holds_nothing_the_runner_parses_as_a_command(
    line: str,
) -> None:
    # GitHub's runner parses a line as "::command::" after TrimStart(), whatever the space
    # (U+3000 too), and as "##[command]" anywhere; a line with neither is left as it was.
    shown = inert_line(line)
    assert "##[" not in shown
    assert not shown.lstrip(_RUNNER_SPACES).startswith("::")
    if "##[" not in line and not line.lstrip(_RUNNER_SPACES).startswith("::"):
        assert shown == line
    assert inert_line(shown) == shown


# --- hatches of a file that is not Python ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mypy.ini", "[mypy]\nstrict = True\ndisable_error_code = veridic-provenance\n"),
        ("README.md", "# The agent\n"),
        ("pyproject.toml", "[tool.mypy]\nstrict = true\n"),
        # No suffix and no Python #! line: read as Python all the same, "3.12" parsed.
        (".python-version", "3.12\n"),
        ("VERSION", "1.0\n"),
        ("run", "#!/bin/sh\nexec python -m app\n"),
        # A #! line that names "python" somewhere but runs something else was read as
        # Python: a shell from a folder so named, Jython's Python 2, IPython's magics.
        ("deploy", "#!/opt/python-tools/bin/bash\necho [python]\n"),
        ("legacy", "#!/usr/bin/env jython\nfrom java.lang import System\n"),
        ("notebook", "#!/usr/bin/env ipython\n%pip list\n"),
    ],
)
def test_hatches_of_a_file_that_is_not_python_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    # The file was parsed as Python ("[mypy]" is a list, "a = veridic-provenance" a
    # subtraction) and the check passed, exit 0, having read nothing it was meant to.
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    code = main(["hatches", str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "is not a Python file" in err
    assert str(tmp_path) in err or name in err


def test_hatches_of_a_mypy_configuration_says_to_pass_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mypy.ini"
    path.write_text("[mypy]\nstrict = True\n", encoding="utf-8")
    assert main(["hatches", str(path)]) == EXIT_USAGE
    assert "pass its folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "shebang"),
    [
        ("app.py", "#!/usr/bin/env python3"),
        ("types.pyi", "#!/usr/bin/env python3"),
        ("manage", "#!/usr/bin/env python3"),
        ("hook.cgi", "#!/usr/bin/env python3"),
        ("tool", "#! /usr/local/bin/python3.12 -u"),
        ("serve", "#!/usr/bin/env -S python3 -X dev"),
        ("task", "#!/usr/bin/python"),
        ("win", '#!"C:\\Program Files\\Python312\\python.exe"'),
        ("winexe", "#!C:\\Python312\\python.exe"),
    ],
)
def test_hatches_still_reads_python_files_and_scripts_given_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, shebang: str
) -> None:
    # pre-commit's "types: [python]" passes a script of any suffix with a Python #! line.
    path = tmp_path / name
    path.write_text(
        f"{shebang}\n"
        "from typing import cast\nfrom veridic import TrustedInstruction\n"
        "x = cast(TrustedInstruction, input())\n",
        encoding="utf-8",
    )
    assert main(["hatches", str(path)]) == EXIT_FINDINGS
    assert "cast-to-brand" in capsys.readouterr().out


# --- audit of an empty file ------------------------------------------------------------------


def test_audit_of_an_empty_file_says_it_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "is an SQLite database without a veridic_audit table": SQLite reads an empty
    # file as an empty database, but the user holds an empty file, maybe the wrong path.
    path = tmp_path / "audit.db"
    path.write_bytes(b"")
    assert main(["audit", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is empty (0 bytes)" in err
    assert "SQLite database without" not in err


# --- a committed manifest or a configuration that cannot be read ---------------------------


@pytest.fixture
def clean_app(tmp_path: Path) -> Path:
    """A folder holding the clean application, to run the command in."""
    fixtures = Path(__file__).parent / "cli_fixtures"
    (tmp_path / "clean_app.py").write_text(
        (fixtures / "clean_app.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return tmp_path


@pytest.mark.parametrize("command", ["manifest", "check"])
def test_a_manifest_that_is_not_utf_8_is_a_usage_error(clean_app: Path, command: str) -> None:
    # A UTF-16 file (an editor's "Unicode"), or bytes that are no text, raised
    # UnicodeDecodeError: a traceback and exit 1, read in CI as findings.
    (clean_app / "agent-manifest.json").write_bytes('{"veridic_manifest": 3}'.encode("utf-16"))
    flag = "--check" if command == "manifest" else "--manifest"
    done = _veridic(command, "clean_app:registry", flag, "agent-manifest.json", cwd=clean_app)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Traceback" not in done.stderr
    assert "is not UTF-8" in done.stderr
    assert "veridic manifest clean_app:registry -o agent-manifest.json" in done.stderr


def test_a_manifest_path_that_is_a_folder_says_so(clean_app: Path) -> None:
    # It said "write it first with veridic manifest ... -o ." : a folder cannot be written.
    (clean_app / "manifests").mkdir()
    done = _veridic("manifest", "clean_app:registry", "--check", "manifests", cwd=clean_app)
    assert done.returncode == EXIT_USAGE
    assert "the manifest manifests is a folder" in done.stderr
    assert "-o manifests/agent-manifest.json" in done.stderr  # a file, not the folder


def test_a_config_path_that_is_a_folder_says_so(
    clean_app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "--config .: no such file".
    assert main(["lint", "clean_app:registry", "--config", str(clean_app)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "is a folder" in err
    assert "no such file" not in err


# --- second read: what the application writes while it is imported ---------------------------

BYTES_APP = """
import sys

from veridic import Registry

sys.stdout.buffer.write(b"banner from bytes\\n::error file=app.py,line=1::forged in bytes\\n")
sys.stdout.buffer.write("caf\\u00e9 ".encode("utf-8")[:-2])  # a character split over two writes
sys.stdout.buffer.write("caf\\u00e9 ".encode("utf-8")[-2:] + b"##[error]split\\n")
sys.stdout.buffer.flush()
print("loading", end="")  # an unended line: the next writer starts a line of its own
registry = Registry("banner")


@registry.tool(kind="query")
def find_user(email: str) -> str:
    '''Find a user by email address.

    Args:
        email: The address to look up.
    '''
    return email
"""


@pytest.mark.parametrize("command", ["lint", "check", "manifest"])
def test_an_application_writing_bytes_at_import_is_read_and_made_inert(
    tmp_path: Path, command: str
) -> None:
    # While the application was imported, sys.stdout had no .buffer: an application that
    # writes bytes there (a banner) failed to import, exit 2, nothing checked.
    (tmp_path / "bytes_app.py").write_text(BYTES_APP, encoding="utf-8")
    extra = ["-o", "manifest.json"] if command == "manifest" else []
    done = _veridic(command, "bytes_app:registry", *extra, cwd=tmp_path)
    assert done.returncode == EXIT_CLEAN, done.stderr
    assert "banner from bytes" in done.stderr
    assert "forged in bytes" in done.stderr
    assert "caf\u00e9 ##" in done.stderr
    assert _workflow_commands(done.stderr) == []
    assert _workflow_commands(done.stdout) == []
    assert done.stderr.endswith("loading\n")


THREADED_APP = """
import sys
import threading

from veridic import Registry

def _say(tag: str) -> None:
    for number in range(20000):
        print(f"{tag}{number}", end="")
        print()

sys.setswitchinterval(1e-6)  # switch threads as often as possible
threads = [threading.Thread(target=_say, args=(tag,)) for tag in "ab"]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
registry = Registry("threads")


@registry.tool(kind="query")
def find_user(email: str) -> str:
    '''Find a user by email address.

    Args:
        email: The address to look up.
    '''
    return email
"""


def test_what_threads_print_at_import_reaches_stderr_once(tmp_path: Path) -> None:
    # Two threads writing at once (the application's, or an MCP server's stderr reader)
    # both read the unended line before either stored it: text was written twice or lost.
    (tmp_path / "threaded_app.py").write_text(THREADED_APP, encoding="utf-8")
    done = _veridic("lint", "threaded_app:registry", cwd=tmp_path)
    assert done.returncode == EXIT_CLEAN, done.stderr
    # Lines of two threads may interleave, as on any shared stream; no character may be
    # lost or doubled. (A race: the old code failed this often, not every run.)
    said = "".join(done.stderr.split())
    printed = "".join(f"{tag}{number}" for tag in "ab" for number in range(20000))
    assert sorted(said) == sorted(printed)


# --- what the application writes past the filter, by the descriptor ---------------------------

DESCRIPTOR_APPS = {
    "a child process": """
import subprocess
import sys

from veridic import Registry

subprocess.run(
    [sys.executable, "-c", "print('##[error]from a child process')"],
    stdout=sys.stdout,
    check=True,
)
registry = Registry("child")
""",
    "os.write": """
import os
import sys

from veridic import Registry

os.write(sys.stderr.fileno(), b"##[error]from os.write\\n")
registry = Registry("raw")
""",
}


@pytest.mark.parametrize("writer", sorted(DESCRIPTOR_APPS))
def test_a_descriptor_of_the_inert_stream_is_refused_so_no_raw_write_reaches_the_log(
    tmp_path: Path, writer: str
) -> None:
    # fileno() handed out stderr's real descriptor: a child process given sys.stdout, or
    # os.write, wrote "##[error]..." to the CI log past the filter.
    (tmp_path / "raw_app.py").write_text(DESCRIPTOR_APPS[writer], encoding="utf-8")
    done = _veridic("lint", "raw_app:registry", cwd=tmp_path)
    assert _workflow_commands(done.stderr) == []
    assert _workflow_commands(done.stdout) == []
    # Refused loudly, with what to do instead: nothing checked is no pass.
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "UnsupportedOperation" in done.stderr
    assert "no file descriptor" in done.stderr
    assert "subprocess.PIPE" in done.stderr
