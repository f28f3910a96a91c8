"""Reproducers of an attacker review of the command line and its configuration.

Each test failed on the code before its fix: a CI gate that passed (exit 0) on
something it exists to fail on. The sources are strings, not fixture files,
because they are deliberately wrong and must not be type-checked with the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from veridic import Registry
from veridic.checks.manifest import (
    ManifestFormatError,
    build_manifest,
    diff_manifest,
    render_manifest,
)
from veridic.hatches import find_hatches, scan_source


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


# --- hatches: a hatch under another name is the same hatch ------------------------------------


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        (
            "from veridic import TrustPolicy\nPolicy = TrustPolicy\n"
            'legacy = Policy("unreviewed")\ntext = legacy.vouch(raw, reason="r")\n',
            "trust-policy",
        ),
        (
            "from veridic import TrustedInstruction\nForge = TrustedInstruction\n"
            "forged = Forge(raw)\n",
            "brand-call",
        ),
        (
            "from typing import cast\nfrom veridic import TrustedInstruction\n"
            "Trusted = TrustedInstruction\nforged = cast(Trusted, raw)\n",
            "cast-to-brand",
        ),
        (
            "from typing import TypeAlias, cast\nimport veridic\n"
            "Trusted: TypeAlias = 'veridic.TrustedInstruction'\nforged = cast(Trusted, raw)\n",
            "cast-to-brand",
        ),
        (
            "import typing\nfrom veridic import TrustedInstruction\n"
            "convert = as_is = typing.cast\nforged = as_is(TrustedInstruction, raw)\n",
            "cast-to-brand",
        ),
        (
            "from veridic import TrustPolicy\ndef make():\n    P = TrustPolicy\n"
            '    return P("unreviewed")\n',
            "trust-policy",
        ),
    ],
    ids=["policy-class", "brand", "cast-target", "type-alias-string", "cast-chain", "local"],
)
def test_a_hatch_renamed_by_assignment_is_still_a_finding(source: str, kind: str) -> None:
    found = scan_source(source, "app.py", trust_policies=frozenset({"reviewed"}))
    assert [(h.kind, h.finding) for h in found if h.kind == kind] == [(kind, True)]


def test_a_renamed_unlisted_policy_fails_veridic_hatches(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.veridic]\ntrust-policies = ["reviewed"]\n')
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """\
            from veridic import TrustPolicy

            Policy = TrustPolicy
            side_door = Policy("unreviewed")
            """
        )
    )
    done = run(tmp_path, "hatches", "--format", "json", "app.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert [f["kind"] for f in json.loads(done.stdout)["findings"]] == ["trust-policy"]


def test_an_unrelated_assignment_is_not_a_hatch() -> None:
    source = "import os\njoin = os.path.join\nwhere = join('a', 'b')\nText = str\nt = Text(1)\n"
    assert scan_source(source, "app.py") == ()


# --- hatches: a package named like a build folder is scanned ----------------------------------


@pytest.mark.parametrize("folder", ["build", "dist"])
def test_a_package_named_build_or_dist_is_scanned(tmp_path: Path, folder: str) -> None:
    package = tmp_path / "src" / "app" / folder
    package.mkdir(parents=True)
    (tmp_path / "src" / "app" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "prompts.py").write_text(
        "from typing import cast\nfrom veridic import TrustedInstruction\n"
        "forged = cast(TrustedInstruction, raw)\n"
    )
    found = find_hatches([tmp_path / "src"])
    assert [(h.kind, h.finding) for h in found] == [("cast-to-brand", True)]


def test_a_build_folder_of_copies_is_still_skipped(tmp_path: Path) -> None:
    copy = tmp_path / "build" / "lib" / "app"
    copy.mkdir(parents=True)
    (copy / "__init__.py").write_text("")
    (copy / "prompts.py").write_text(
        "from typing import cast\nfrom veridic import TrustedInstruction\n"
        "forged = cast(TrustedInstruction, raw)\n"
    )
    # The project's own code beside it (a folder of nothing but copies is refused as
    # holding no Python file: tests/test_cli_paths_read.py).
    (tmp_path / "app.py").write_text("x = 1\n")
    assert find_hatches([tmp_path]) == ()


# --- configuration: settings the team wrote are read, or the command says why not -------------

APP = 'from veridic import TrustPolicy\nside_door = TrustPolicy("unreviewed")\n'


@pytest.mark.parametrize(
    ("table", "shown"),
    [
        ("[tool.veridc]", "[tool.veridc]"),
        ("[tool.Veridic]", "[tool.Veridic]"),
        ("[tools.veridic]", "[tools.veridic]"),
        ("[veridic]", "[veridic]"),
    ],
)
def test_a_misspelt_tool_veridic_table_is_a_usage_error(
    tmp_path: Path, table: str, shown: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f"[project]\nname = 'app'\n\n{table}\ntrust-policies = [\"reviewed\"]\n"
    )
    (tmp_path / "app.py").write_text(APP)
    done = run(tmp_path, "hatches", "app.py")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"has no [tool.veridic] table but has {shown}" in done.stderr
    assert "rename the table to [tool.veridic]" in done.stderr


def test_the_mypy_plugins_table_is_not_taken_for_a_misspelling(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'app'\n\n[tool.veridic-mypy]\ntrust_policies = [\"reviewed\"]\n"
    )
    (tmp_path / "app.py").write_text("x = 1\n")
    done = run(tmp_path, "hatches", "app.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_config_naming_a_file_without_the_table_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.veridic]\ntrust-policies = ["reviewed"]\n')
    (tmp_path / "ruff.toml").write_text("line-length = 99\n")
    (tmp_path / "app.py").write_text(APP)
    done = run(tmp_path, "hatches", "--config", "ruff.toml", "app.py")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--config ruff.toml has no [tool.veridic] table" in done.stderr


def test_config_naming_a_file_with_an_empty_table_is_read(tmp_path: Path) -> None:
    (tmp_path / "settings.toml").write_text("[tool.veridic]\n")
    (tmp_path / "app.py").write_text(APP)
    done = run(tmp_path, "hatches", "--config", "settings.toml", "app.py")
    assert done.returncode == 0, done.stdout + done.stderr


# --- manifest: the committed file reads one way to a reviewer and to the check ------------------


def _demoted_registry() -> Registry:
    registry = Registry()

    @registry.tool(kind="write", risk="mid")
    def delete_records(ids: list[str]) -> str:
        """Delete records by id; they can be restored from the trash for 30 days.

        Args:
            ids: The ids of the records to delete.
        """
        return ", ".join(ids)

    return registry


def test_a_manifest_giving_a_tool_twice_is_refused() -> None:
    current = build_manifest(_demoted_registry())
    tools = current["tools"]
    assert isinstance(tools, dict)
    reviewed = json.dumps({**tools["delete_records"], "risk": "high"})
    committed = render_manifest(current).replace(
        '"tools": {', '"tools": {\n    "delete_records": ' + reviewed + ",", 1
    )
    with pytest.raises(ManifestFormatError, match="gives the key 'delete_records' twice"):
        diff_manifest(committed, current)


def test_a_stale_high_risk_list_is_drift() -> None:
    current = build_manifest(_demoted_registry())
    committed = json.loads(render_manifest(current))
    committed["high_risk_tools"] = ["delete_records"]
    changes = diff_manifest(json.dumps(committed), current)
    assert [(c.subject, c.field, c.before, c.after) for c in changes] == [
        ("high-risk tools", "high_risk_tools", ["delete_records"], [])
    ]
    assert changes[0].text == "the list of high-risk tools changed: -delete_records"
