"""The ``veridic`` command line: targets, configuration, exit codes and output formats.

Every test runs the command as a subprocess (``python -m veridic``) in
tests/cli_fixtures, the way a project's CI runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "cli_fixtures"


def run(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def assert_usage_error(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    for part in parts:
        assert part in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("lint", "clean_app:registry"),
        ("check", "clean_app:registry"),
        ("lint", "clean_app:support_view"),
        ("check", "clean_app:support_view"),
        ("hatches", "clean_app.py"),
    ],
    ids=" ".join,
)
def test_clean_application_exits_zero(args: tuple[str, ...]) -> None:
    done = run(*args)
    assert done.returncode == 0, done.stdout
    assert "0 findings" in done.stdout
    assert "result: clean (exit 0)" in done.stdout


def test_target_without_colon_is_a_usage_error() -> None:
    done = run("lint", "clean_app.registry")
    assert_usage_error(
        done,
        "'clean_app.registry' is not MODULE:ATTR",  # what
        "after a colon: clean_app:registry\n",  # what to write instead
    )


def test_missing_module_is_a_usage_error() -> None:
    done = run("lint", "no_such_app:registry")
    assert_usage_error(
        done,
        "cannot import module 'no_such_app'",  # what
        str(FIXTURES),  # where it searched
        "run veridic from the project root",  # what to do
    )


def test_module_that_raises_on_import_is_a_usage_error_with_its_location() -> None:
    done = run("lint", "broken_import_app:registry")
    assert_usage_error(
        done,
        "raised ModuleNotFoundError: No module named 'a_dependency_that_is_not_installed'",
        "at broken_import_app.py:10",  # where
        "python -c 'import broken_import_app'",  # what to do
    )


def test_missing_attribute_is_a_usage_error_listing_the_registries_there() -> None:
    done = run("lint", "clean_app:registyr")
    assert_usage_error(
        done,
        "clean_app has no attribute 'registyr'",  # what
        "clean_app.py",  # where
        "Registry/ToolView objects there: registry",  # what to do instead
    )


def test_attribute_that_is_not_a_registry_is_a_usage_error() -> None:
    done = run("manifest", "clean_app:not_a_registry", "-o", "unused.json")
    assert_usage_error(
        done,
        "clean_app:not_a_registry is an int, not a veridic Registry or ToolView",
        "point at the object your tools are registered on",
    )
    assert not (FIXTURES / "unused.json").exists()


def test_dotted_attribute_reaches_a_registry_inside_an_object(tmp_path: Path) -> None:
    (tmp_path / "nested_app.py").write_text(
        "import types\nimport clean_app\napp = types.SimpleNamespace(tools=clean_app.registry)\n"
    )
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'nested'\n")
    done = subprocess.run(
        [sys.executable, "-m", "veridic", "lint", "nested_app:app.tools"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(FIXTURES), "PATH": ""},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_registration_error_at_import_is_a_finding_not_a_usage_error() -> None:
    done = run("lint", "duplicate_names_app:registry", "--format", "json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    [finding] = report["findings"]
    assert finding["kind"] == "boot"
    assert (finding["file"], finding["line"]) == ("duplicate_names_app.py", 20)
    assert "'find_user' is registered twice" in finding["message"]


def test_unknown_command_is_a_usage_error() -> None:
    done = run("frobnicate")
    assert done.returncode == 2
    assert "invalid choice: 'frobnicate'" in done.stderr


def test_help_lists_every_command_and_exits_zero() -> None:
    done = run("--help")
    assert done.returncode == 0
    for command in ("lint", "manifest", "check", "hatches"):
        assert command in done.stdout
    assert "0 clean, 1 findings, 2 usage error" in done.stdout


def test_json_report_separates_findings_warnings_and_listed_items() -> None:
    done = run("lint", "unstated_app:registry", "--format", "json")
    report = json.loads(done.stdout)
    assert report["exit_code"] == done.returncode == 0
    assert report["findings"] == []
    assert [w["kind"] for w in report["warnings"]] == ["irreversibility-unstated"]
    assert report["listed"] == []
    assert (report["command"], report["target"]) == ("lint", "unstated_app:registry")


def test_strict_makes_warnings_fail() -> None:
    done = run("lint", "unstated_app:registry", "--strict")
    assert done.returncode == 1
    assert "failed (--strict: warnings fail)" in done.stdout


def test_configuration_with_a_wrong_type_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.veridic]\nsimilarity-threshold = "high"\n')
    done = run("lint", "clean_app:registry", "--config", str(config))
    assert_usage_error(
        done,
        "similarity-threshold",  # what
        str(config),  # where
        "write it as similarity-threshold = 0.7",  # what to do
    )


def test_configuration_that_is_not_toml_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.veridic\n")
    done = run("hatches", "clean_app.py", "--config", str(config))
    assert_usage_error(done, f"{config} is not valid TOML", "fix the file")


def test_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    done = run("lint", "clean_app:registry", "--config", str(tmp_path / "nope.toml"))
    assert_usage_error(done, "no such file", "pass the pyproject.toml that holds [tool.veridic]")


def test_malformed_siblings_are_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.veridic]\nsiblings = ["archive_ticket", "close_ticket"]\n')
    done = run("lint", "clean_app:registry", "--config", str(config))
    assert_usage_error(
        done,
        "siblings",
        str(config),
        'siblings = [["archive_ticket", "close_ticket"]]',
    )


def test_console_script_entry_point_is_declared() -> None:
    from importlib.metadata import entry_points

    [script] = [e for e in entry_points(group="console_scripts") if e.name == "veridic"]
    assert script.value == "veridic.cli:main"
