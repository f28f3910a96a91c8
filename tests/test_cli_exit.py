"""The CI gate cannot be stopped green: application code that exits is a usage error (exit 2).

``veridic lint``, ``manifest`` and ``check`` import the application and run
its boot checks. Code that calls ``sys.exit()`` there, with any code, would end
the command with that code: ``sys.exit(0)`` would be a green CI run that
checked nothing. Each test writes a small application into a temporary
directory and runs ``veridic.cli.main`` in this process, as a console script
does, so the exit status is what ``main`` returns.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from veridic.cli import main

REGISTRY = '''
from veridic import Registry

registry = Registry("app")


@registry.tool(kind="query")
def find_user(email: str) -> str:
    """Find a user by email address.

    Args:
        email: The address to look up.
    """
    return email
'''

Write = Callable[[str], str]


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


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def line_of(source: str, text: str) -> int:
    """The 1-based line of ``text`` in the dedented ``source`` as written to disk."""
    lines = textwrap.dedent(source).splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)


_EXITS = [
    ("sys.exit(0)", "sys.exit(0)"),
    ("sys.exit()", "sys.exit()"),
    ("sys.exit(None)", "sys.exit()"),
    ("sys.exit(1)", "sys.exit(1)"),
    ("sys.exit(3)", "sys.exit(3)"),
    ('sys.exit("configuration missing")', "sys.exit('configuration missing')"),
    ("raise SystemExit(0)", "sys.exit(0)"),
    ("exit(0)", "sys.exit(0)"),
]


@pytest.mark.parametrize("command", ["lint", "check", "manifest"])
@pytest.mark.parametrize(("call", "shown"), _EXITS, ids=[call for call, _ in _EXITS])
def test_sys_exit_at_import_is_a_usage_error_whatever_the_code(
    app: Write, capsys: pytest.CaptureFixture[str], command: str, call: str, shown: str
) -> None:
    source = REGISTRY + f"\nimport sys\n\n{call}\n"
    name = app(source)
    extra = ["-o", "manifest.json"] if command == "manifest" else []
    code, out, err = run(capsys, command, f"{name}:registry", *extra)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert f"importing module {name!r} called {shown} (raised SystemExit)" in err  # what
    assert f"at {name}.py:{line_of(source, call)}" in err  # where
    assert 'if __name__ == "__main__":' in err  # what to do
    assert not Path("manifest.json").exists()


def test_sys_exit_in_a_module_imported_by_the_target_names_both_lines(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    helper = app("import sys\n\nsys.exit(0)\n")
    target = app(REGISTRY + f"\nimport {helper}\n")
    code, _, err = run(capsys, "lint", f"{target}:registry")
    assert code == 2
    assert f"at {helper}.py:3 (reached from {target}.py:" in err


def test_argparse_at_import_reading_veridic_arguments_is_a_usage_error(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    # A script-style module parses the command line when imported: argparse exits
    # with 2 on veridic's own arguments, or with 0 after printing its help.
    source = REGISTRY + "\nimport argparse\n\nargs = argparse.ArgumentParser().parse_args(['-h'])\n"
    name = app(source)
    code, out, err = run(capsys, "check", f"{name}:registry")
    assert code == 2
    assert out == ""  # argparse's help went to stderr, with the application's other output
    assert "called sys.exit(0) (raised SystemExit) at " in err
    assert "argparse.py:" in err  # where it exited
    assert f"(reached from {name}.py:{line_of(source, 'parse_args')})" in err  # and why


def test_json_format_reports_nothing_on_stdout_when_the_import_exits(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(REGISTRY + "\nimport sys\nsys.exit(0)\n")
    code, out, err = run(capsys, "lint", f"{name}:registry", "--format", "json")
    assert (code, out) == (2, "")
    assert "called sys.exit(0)" in err


def test_module_getattr_that_exits_is_a_usage_error(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
    import sys


    def __getattr__(name: str) -> object:
        sys.exit(0)
    """
    name = app(source)
    code, out, err = run(capsys, "lint", f"{name}:registry")
    assert (code, out) == (2, "")
    assert f"reading 'registry' of {name} called sys.exit(0) (raised SystemExit)" in err
    assert f"at {name}.py:{line_of(source, 'sys.exit(0)')}" in err
    assert "could not reach the registry" in err


def test_dotted_attribute_whose_property_exits_is_a_usage_error(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(
        REGISTRY + "\nimport sys\n\n\nclass App:\n    @property\n    def tools(self) -> object:\n"
        "        sys.exit(1)\n\n\napp = App()\n"
    )
    code, _, err = run(capsys, "check", f"{name}:app.tools")
    assert code == 2
    assert f"reading 'tools' of {name}:app called sys.exit(1)" in err


@pytest.mark.parametrize("command", ["check", "manifest"])
def test_component_boot_check_that_exits_is_a_usage_error(
    app: Write, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    source = REGISTRY + textwrap.dedent(
        """
        import sys


        def _boot() -> None:
            sys.exit(0)


        pro = registry.component("Pro", boot=_boot, hint="Activate Pro.")
        """
    )
    name = app(source)
    extra = ["-o", "manifest.json"] if command == "manifest" else []
    code, out, err = run(capsys, command, f"{name}:registry", *extra)
    assert (code, out) == (2, "")
    assert "the application's code called sys.exit(0) (raised SystemExit)" in err  # what
    assert f"at {name}.py:{line_of(source, 'sys.exit(0)')}" in err  # where
    assert f"while veridic {command} ran it" in err
    assert "boot checks" in err  # what to do


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        ("GeneratorExit('stop')", "GeneratorExit"),
        ("asyncio.CancelledError()", "CancelledError"),
        ("Stop('custom')", "Stop"),
    ],
)
def test_other_base_exceptions_at_import_are_a_usage_error(
    app: Write, capsys: pytest.CaptureFixture[str], raised: str, kind: str
) -> None:
    stop = "class Stop(BaseException):\n    pass\n"
    name = app(REGISTRY + f"\nimport asyncio\n\n\n{stop}\n\nraise {raised}\n")
    code, out, err = run(capsys, "lint", f"{name}:registry")
    assert (code, out) == (2, "")
    assert f"importing module {name!r} raised {kind}" in err
    assert "Traceback" not in err


def test_keyboard_interrupt_at_import_still_interrupts(app: Write) -> None:
    name = app(REGISTRY + "\nraise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        main(["lint", f"{name}:registry"])


def test_what_the_application_prints_at_import_goes_to_stderr(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(REGISTRY + "\nprint('connecting to the database...')\n")
    code, out, err = run(capsys, "lint", f"{name}:registry", "--format", "json")
    assert code == 0
    assert json.loads(out)["exit_code"] == 0  # stdout is only the report
    assert "connecting to the database..." in err


def test_module_getattr_that_raises_is_a_usage_error_not_a_traceback(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
    def __getattr__(name: str) -> object:
        raise RuntimeError("registry not configured")
    """
    name = app(source)
    code, out, err = run(capsys, "lint", f"{name}:registry")
    assert (code, out) == (2, "")
    assert "Traceback" not in err
    assert f"reading 'registry' of {name} raised RuntimeError: registry not configured" in err
    assert f"at {name}.py:{line_of(source, 'raise RuntimeError')}" in err


_EMPTY = """
from veridic import Registry

registry = Registry("app")  # the tools are registered in app_tools.py, which this does not import
"""


@pytest.mark.parametrize(
    "args", [("lint",), ("check",), ("manifest", "-o", "agent-manifest.json")], ids=str
)
def test_a_registry_that_holds_no_tool_is_a_usage_error_not_a_clean_check(
    app: Write, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    """The usual layout registers tools in a module of their own, which the application
    imports and ``MODULE`` may not: veridic imports only ``MODULE``, saw an empty registry
    and reported "0 findings, clean (exit 0)" (and wrote, then matched, an empty manifest),
    having checked nothing. A check that read nothing does not pass."""
    module = app(_EMPTY)
    code, out, err = run(capsys, args[0], f"{module}:registry", *args[1:])
    assert code == 2, out
    assert f"{module}:registry holds no tool" in err  # what
    assert "imports only" in err  # why it may be so
    assert "import the modules that register the tools" in err  # what to do
    assert not Path("agent-manifest.json").exists()


def test_a_registry_whose_tools_come_with_a_component_is_still_checked(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tools a component registers when it boots are no tools before: lint, which boots
    nothing, still runs (and says nothing of them) rather than refuse the registry."""
    module = app(_EMPTY + '\nregistry.component("plugins", boot=lambda: None, hint="plugins")\n')
    code, _, err = run(capsys, "lint", f"{module}:registry")
    assert code == 0, err
