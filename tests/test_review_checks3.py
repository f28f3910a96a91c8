"""Reproducers of a third attacker review of the CI checks (hatches, manifest).

A pull-request author who wants a weakening past CI without a visible finding:
each test failed on the code before its fix, with the check passing (exit 0)
or crashing where it should have reported. The sources are strings, not
fixture files, because they are deliberately wrong and must not be
type-checked with the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veridic import Registry
from veridic.checks.hatches import Hatch, find_hatches, scan_source
from veridic.checks.manifest import (
    ManifestFormatError,
    build_manifest,
    diff_manifest,
    render_manifest,
)
from veridic.tools.tool import ToolHints

FORGE = (
    "from typing import cast\nfrom veridic import TrustedInstruction\n"
    "forged = cast(TrustedInstruction, raw)\n"
)


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def findings(found: tuple[Hatch, ...]) -> list[tuple[str, bool]]:
    return [(h.kind, h.finding) for h in found]


# --- hatches: a folder the walk skipped or did not enter --------------------------------------


@pytest.mark.parametrize("folder", ["build", "dist", "node_modules"])
def test_a_namespace_folder_named_like_build_output_inside_a_package_is_scanned(
    tmp_path: Path, folder: str
) -> None:
    # app/build/ without an __init__.py is still importable, as app.build.forge (PEP 420),
    # and mypy follows it there: its cast is the application's.
    (tmp_path / "app" / folder).mkdir(parents=True)
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / folder / "forge.py").write_text(FORGE)
    assert findings(find_hatches([tmp_path / "app"])) == [("cast-to-brand", True)]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_a_package_folder_that_is_a_symbolic_link_is_scanned(tmp_path: Path) -> None:
    # app/util is a link to a hidden folder: Python imports app.util.forge through it.
    (tmp_path / ".tools" / "util").mkdir(parents=True)
    (tmp_path / ".tools" / "util" / "forge.py").write_text(FORGE)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "util").symlink_to(tmp_path / ".tools" / "util", target_is_directory=True)
    (tmp_path / "app" / "loop").symlink_to(tmp_path / "app", target_is_directory=True)
    assert findings(find_hatches([tmp_path / "app"])) == [("cast-to-brand", True)]


# --- hatches: veridic's names re-exported by a module of the project --------------------------


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        (
            "from typing import cast\nfrom app.types import TrustedInstruction\n"
            "forged = cast(TrustedInstruction, raw)\n",
            "cast-to-brand",
        ),
        (
            "from typing import cast\nimport app.types as t\n"
            "forged = cast(t.TrustedInstruction, raw)\n",
            "cast-to-brand",
        ),
        (
            "from app.compat import cast\nfrom veridic import TrustedInstruction\n"
            "forged = cast(TrustedInstruction, raw)\n",
            "cast-to-brand",
        ),
        ("from app.types import UntrustedText\nforged = UntrustedText(raw)\n", "brand-call"),
        (
            'from app.security import TrustPolicy\nside_door = TrustPolicy("unreviewed")\n',
            "trust-policy",
        ),
    ],
    ids=["brand-imported", "brand-attribute", "cast-imported", "brand-call", "policy"],
)
def test_a_hatch_re_exported_by_a_module_of_the_project_is_a_finding(
    source: str, kind: str
) -> None:
    # app/types.py holds `from veridic import TrustedInstruction, TrustPolicy`; mypy
    # follows the re-export (its plugin reports the policy), the scan read one file.
    found = scan_source(source, "app/prompts.py", trust_policies=frozenset({"reviewed"}))
    assert findings(found) == [(kind, True)]


def test_a_re_exported_policy_fails_veridic_hatches(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.veridic]\ntrust-policies = ["reviewed"]\n')
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "security.py").write_text("from veridic import TrustPolicy\n")
    (tmp_path / "app" / "prompts.py").write_text(
        'from app.security import TrustPolicy\nside_door = TrustPolicy("unreviewed")\n'
    )
    done = run(tmp_path, "hatches", "--format", "json", "app")
    assert done.returncode == 1, done.stdout + done.stderr
    assert [f["kind"] for f in json.loads(done.stdout)["findings"]] == ["trust-policy"]


# --- hatches: a brand's constructor handed on as a value --------------------------------------

BRAND = "from veridic import TrustedInstruction, UntrustedText\n"


@pytest.mark.parametrize(
    "line",
    [
        "forged = list(map(TrustedInstruction, texts))",
        "forged = TypeAdapter(TrustedInstruction).validate_python(raw)",
        "forged = TypeAdapter(list[TrustedInstruction]).validate_python(raws)",
        "mint = functools.partial(TrustedInstruction)",
        'handlers = {"system": TrustedInstruction}',
        "handlers = [UntrustedText]",
        "def factory() -> Callable[[str], TrustedInstruction]:\n    return TrustedInstruction",
        "def make(mint: Callable[[str], TrustedInstruction] = TrustedInstruction) -> None: ...",
        "settings.mint = TrustedInstruction",
        "mint = (lambda: TrustedInstruction)()",
        "mint = TrustedInstruction if flag else str",
    ],
    ids=[
        "map",
        "type-adapter",
        "type-adapter-generic",
        "partial",
        "dict",
        "list",
        "return",
        "default",
        "attribute",
        "lambda",
        "conditional",
    ],
)
def test_a_brand_constructor_passed_as_a_value_is_a_finding(line: str) -> None:
    # The plugin refuses it (veridic-forge); hatches lists it too, for a project whose CI
    # runs the scan without the plugin, as docs/mypy.md says.
    found = scan_source(BRAND + line + "\n", "app.py")
    assert findings(found) == [("brand-call", True)], found
    assert "as a value" in found[0].why


@pytest.mark.parametrize(
    "line",
    [
        "def f(x: TrustedInstruction) -> list[TrustedInstruction | None]: ...",
        "x: TrustedInstruction = instruction('a')",
        "Mint = Callable[[str], TrustedInstruction]",
        "Prompt = Annotated[TrustedInstruction, 'system']",
        "T = TypeVar('T', bound=TrustedInstruction)",
        "Sub = NewType('Sub', TrustedInstruction)",
        "Trusted = TrustedInstruction",
        "name = TrustedInstruction.__name__",
        "ok = isinstance(x, UntrustedText)",
        "assert_type(instruction('a'), TrustedInstruction)",
    ],
    ids=[
        "annotations",
        "annotated-assignment",
        "callable-alias",
        "annotated-alias",
        "type-var",
        "new-type",
        "rename",
        "attribute-of",
        "isinstance",
        "assert-type",
    ],
)
def test_a_brand_named_as_a_type_is_not_a_hatch(line: str) -> None:
    assert scan_source(BRAND + line + "\n", "app.py") == ()


def test_a_brand_passed_as_a_value_inside_veridic_is_listed(tmp_path: Path) -> None:
    found = scan_source(
        BRAND + "forged = map(TrustedInstruction, t)\n", "x.py", inside_veridic=True
    )
    assert findings(found) == [("brand-call", False)]


def test_names_holding_a_brand_spelt_as_text_are_not_values() -> None:
    source = (
        'TRUSTED = "veridic.TrustedInstruction"\nUNTRUSTED = "veridic.UntrustedText"\n'
        "BRANDS = {TRUSTED, UNTRUSTED}\n"
    )
    assert scan_source(source, "app.py") == ()


@pytest.mark.parametrize(
    "binding",
    ['    T = ""', '    T = "veridic.TrustedInstruction"'],
    ids=["other-text", "brand-text"],
)
def test_a_brand_name_also_bound_to_text_elsewhere_is_still_a_value(binding: str) -> None:
    # A string bound to the same name in another scope made the name "spelt as text"
    # module-wide, and map(T, texts) of the imported brand passed with exit 0.
    source = (
        "from veridic import TrustedInstruction as T\n"
        f"def _unused() -> None:\n{binding}\n"
        "forged = list(map(T, texts))\n"
    )
    assert findings(scan_source(source, "app.py")) == [("brand-call", True)]


def test_one_display_holding_two_brands_is_one_finding() -> None:
    found = scan_source(BRAND + "mints = [TrustedInstruction, UntrustedText]\n", "app.py")
    assert findings(found) == [("brand-call", True)]


# --- hatches: a file the scan cannot read is reported, never a traceback ----------------------


@pytest.mark.parametrize(
    "line",
    [
        'LONE = "\\ud800"',
        'forged = cast("\\udc80", raw)',
        'def pick(mode: "\\ud800") -> None: ...',
    ],
    ids=["assigned", "cast-target", "annotation"],
)
def test_a_lone_surrogate_in_a_string_does_not_stop_the_scan(line: str) -> None:
    # Valid Python (mypy checks it); the scan raised UnicodeEncodeError, so CI showed a
    # traceback for the whole run and no hatch of any file was listed.
    source = FORGE + line + "\n"
    assert findings(scan_source(source, "app.py")) == [("cast-to-brand", True)]


def test_a_file_in_an_encoding_python_refuses_is_unparsable(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes(b"# -*- coding: rot13 -*-\nk = 1\n")
    (tmp_path / "b.py").write_text(FORGE)
    done = run(tmp_path, "hatches", "--format", "json", ".")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert sorted((f["kind"], f["file"]) for f in report["findings"]) == [
        ("cast-to-brand", "b.py"),
        ("unparsable", "a.py"),
    ]


# --- manifest: a tool shown to more people, or told to clients as harmless --------------------


def _export_registry(*, roles: tuple[str, ...], hints: ToolHints | None) -> Registry:
    registry = Registry()

    @registry.tool(kind="write", roles=roles, hints=hints)
    def export_customers(region: str) -> str:
        """Export every customer record of a region to a CSV file for download.

        Args:
            region: The region whose customers are exported.
        """
        return region

    return registry


def test_a_tool_opened_to_every_role_is_drift() -> None:
    # roles=("admin",) dropped: every request's view now offers the export, and the
    # manifest, which did not record roles, passed check.
    committed = render_manifest(build_manifest(_export_registry(roles=("admin",), hints=None)))
    changes = diff_manifest(committed, build_manifest(_export_registry(roles=(), hints=None)))
    assert [(c.subject, c.field, c.before, c.after) for c in changes] == [
        ("tool export_customers", "roles", ["admin"], [])
    ]


def test_a_write_told_to_mcp_clients_as_not_destructive_is_drift() -> None:
    # ToolHints(additive=True) makes destructiveHint false: a client that relaxes its
    # confirmation for such tools stops asking, and check passed.
    committed = render_manifest(build_manifest(_export_registry(roles=(), hints=None)))
    relaxed = build_manifest(_export_registry(roles=(), hints=ToolHints(additive=True)))
    changes = diff_manifest(committed, relaxed)
    assert [(c.subject, c.field) for c in changes] == [("tool export_customers", "mcp_annotations")]
    assert "destructiveHint" in changes[0].text


def test_a_manifest_of_the_format_before_roles_is_refused_with_the_reason() -> None:
    current = build_manifest(_export_registry(roles=("admin",), hints=None))
    older = json.loads(render_manifest(current))
    older["veridic_manifest"] = 2
    for entry in older["tools"].values():
        del entry["roles"], entry["mcp_annotations"]
    with pytest.raises(ManifestFormatError, match="format 2 did not record"):
        diff_manifest(json.dumps(older), current)
