"""``veridic hatches PATH...``: every escape hatch listed, the dangerous ones failing.

Each test writes a small module into a temporary project and runs the command
as a subprocess, the way CI does. The sources are strings, not fixture files,
because they are deliberately wrong (casts, forged brands, ignores) and must
not be type-checked or linted with the rest of the suite.
"""

from __future__ import annotations

import json
import keyword
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import veridic
from veridic.hatches import scan_source


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def project(tmp_path: Path, source: str, pyproject: str = "") -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject or "[project]\nname = 'app'\n")
    (tmp_path / "app.py").write_text(textwrap.dedent(source))
    return tmp_path


def hatches_json(cwd: Path, *paths: str) -> tuple[int, dict[str, list[dict[str, object]]]]:
    done = run(cwd, "hatches", "--format", "json", *paths)
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(
    "source",
    [
        "from typing import cast\nfrom veridic import TrustedInstruction\n"
        "x = cast(TrustedInstruction, y)\n",
        "import typing\nimport veridic\nx = typing.cast(veridic.TrustedInstruction, y)\n",
        "import typing as t\nx = t.cast('TrustedInstruction', y)\n",
        "from typing import cast as c\nfrom veridic import UntrustedText as U\nx = c(U, y)\n",
        "from typing import cast\nx = cast('list[veridic.TrustedInstruction]', y)\n",
        "from typing_extensions import cast\nx = cast(dict[str, UntrustedText], y)\n",
    ],
    ids=["name", "attribute", "string", "aliases", "string-generic", "generic"],
)
def test_cast_to_a_brand_is_a_finding(tmp_path: Path, source: str) -> None:
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 1
    last_line = source.count("\n")
    assert [(f["kind"], f["line"]) for f in report["findings"]] == [("cast-to-brand", last_line)]


def test_cast_to_another_type_is_not_listed(tmp_path: Path) -> None:
    source = "from typing import cast\nx = cast(str, y)\nz = cast('list[int]', y)\n"
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert (code, report["findings"], report["listed"]) == (0, [], [])


@pytest.mark.parametrize(
    ("source", "brand"),
    [
        ("from veridic import TrustedInstruction\nx = TrustedInstruction(y)\n", "Trusted"),
        ("import veridic\nx = veridic.UntrustedText(y)\n", "Untrusted"),
        ("from veridic.provenance import TrustedInstruction as TI\nx = TI(y)\n", "Trusted"),
    ],
)
def test_brand_constructor_call_outside_veridic_is_a_finding(
    tmp_path: Path, source: str, brand: str
) -> None:
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 1
    [finding] = report["findings"]
    assert (finding["kind"], finding["line"], finding["file"]) == ("brand-call", 2, "app.py")
    message = str(finding["message"])
    assert "identity function" in message  # what is wrong
    assert "untrusted(text, source=...)" in message or "instruction()" in message  # instead
    assert brand in message


def test_brand_constructor_inside_veridic_is_listed_not_a_finding(tmp_path: Path) -> None:
    provenance_module = Path(veridic.__file__).parent / "provenance.py"
    code, report = hatches_json(tmp_path, str(provenance_module))
    assert code == 0
    assert report["findings"] == []
    assert {item["kind"] for item in report["listed"]} == {"brand-call"}


def test_trust_policies_and_vouch_reasons_are_listed_not_findings(tmp_path: Path) -> None:
    source = """\
        from veridic import TrustPolicy
        legacy = TrustPolicy("legacy-prompts")
        text = legacy.vouch(raw, reason="migrated from the v1 prompt table")
    """
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 0
    assert report["findings"] == []
    listed = [(i["kind"], i["line"], i["policy"], i["reason"]) for i in report["listed"]]
    assert listed == [
        ("trust-policy", 2, "legacy-prompts", None),
        ("vouch", 3, "legacy-prompts", "migrated from the v1 prompt table"),
    ]


def test_text_output_separates_findings_from_listed_items(tmp_path: Path) -> None:
    source = """\
        from typing import cast
        from veridic import TrustPolicy, TrustedInstruction
        legacy = TrustPolicy("legacy-prompts")
        forged = cast(TrustedInstruction, raw)
    """
    done = run(project(tmp_path, source), "hatches", "app.py")
    assert done.returncode == 1
    findings, listed = done.stdout.split("listed for review (not findings):")
    assert "app.py:4  cast(TrustedInstruction, raw)" in findings
    assert "app.py:3  TrustPolicy('legacy-prompts')" in listed
    assert "1 findings, 1 listed for review" in done.stdout
    assert "result: failed (exit 1)" in done.stdout


def test_policy_not_in_configured_trust_policies_is_a_finding(tmp_path: Path) -> None:
    source = 'from veridic import TrustPolicy\nTrustPolicy("shadow-door")\nTrustPolicy("legacy")\n'
    config = '[tool.veridic]\ntrust-policies = ["legacy"]\n'
    code, report = hatches_json(project(tmp_path, source, config), "app.py")
    assert code == 1
    [finding] = report["findings"]
    message = str(finding["message"])
    assert finding["line"] == 2
    assert "'shadow-door' is not in [tool.veridic] trust-policies" in message  # what
    assert "listed: legacy" in message  # where the rule comes from
    assert "add it there" in message  # what to do
    assert [i["policy"] for i in report["listed"]] == ["legacy"]


def test_policy_with_a_computed_name_is_a_finding(tmp_path: Path) -> None:
    source = "from veridic import TrustPolicy\nTrustPolicy(name_from_settings)\n"
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 1
    [finding] = report["findings"]
    assert finding["kind"] == "trust-policy"
    assert "not written in code" in str(finding["message"])
    assert 'TrustPolicy("admin-' in str(finding["message"])


def test_policy_names_fixed_in_the_module_are_resolved(tmp_path: Path) -> None:
    source = """\
        from typing import Final, Literal
        from veridic import TrustPolicy
        ADMIN: Final = "admin-prompts"
        TrustPolicy(ADMIN)
        TrustPolicy("legacy-" + "prompts")
        def make(which: Literal["legacy-prompts", "admin-prompts"]) -> TrustPolicy:
            return TrustPolicy(which)
    """
    config = '[tool.veridic]\ntrust-policies = ["legacy-prompts", "admin-prompts"]\n'
    code, report = hatches_json(project(tmp_path, source, config), "app.py")
    assert code == 0
    assert [(i["line"], i["policy"]) for i in report["listed"]] == [
        (4, "admin-prompts"),
        (5, "legacy-prompts"),
        (7, "admin-prompts | legacy-prompts"),
    ]


def test_policy_that_may_take_an_unlisted_name_is_a_finding(tmp_path: Path) -> None:
    source = """\
        from veridic import TrustPolicy
        def make(flag: bool) -> TrustPolicy:
            return TrustPolicy("legacy-prompts" if flag else "other")
    """
    config = '[tool.veridic]\ntrust-policies = ["legacy-prompts"]\n'
    code, report = hatches_json(project(tmp_path, source, config), "app.py")
    assert code == 1
    [finding] = report["findings"]
    assert "trust policy 'other' is not in [tool.veridic] trust-policies" in str(finding["message"])


def test_policy_with_an_empty_name_is_a_finding(tmp_path: Path) -> None:
    source = 'from veridic import TrustPolicy\nTrustPolicy("")\n'
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 1
    [finding] = report["findings"]
    assert "name is empty" in str(finding["message"])


def test_policy_named_by_an_imported_constant_says_why_it_cannot_be_read(
    tmp_path: Path,
) -> None:
    source = "from settings import POLICY\nfrom veridic import TrustPolicy\nTrustPolicy(POLICY)\n"
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 1
    [finding] = report["findings"]
    message = str(finding["message"])
    assert "POLICY is imported from settings" in message  # what and where
    assert "write the name here" in message  # what to do


def test_type_ignore_on_a_veridic_code_is_listed(tmp_path: Path) -> None:
    source = "x = 1  # type: ignore[veridic-forge, misc]\ny = 2  # type: ignore[misc]\n"
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 0
    [item] = report["listed"]
    assert (item["kind"], item["line"]) == ("type-ignore", 1)
    assert "veridic-forge" in str(item["message"])
    assert "misc" not in str(item["message"])


def test_a_bare_type_ignore_is_listed_because_it_silences_veridic_too(tmp_path: Path) -> None:
    source = "x = 1  # type: ignore\ny = 2  # type: ignore[misc]\nz = 3  # type: ignored\n"
    code, report = hatches_json(project(tmp_path, source), "app.py")
    assert code == 0
    [item] = report["listed"]
    assert (item["kind"], item["line"]) == ("type-ignore", 1)
    assert "silences every check on this line" in str(item["message"])
    assert "name the error code" in str(item["message"])


def test_file_that_is_not_python_is_a_finding(tmp_path: Path) -> None:
    code, report = hatches_json(project(tmp_path, "def broken(:\n"), "app.py")
    assert code == 1
    [finding] = report["findings"]
    assert finding["kind"] == "unparsable"
    assert "fix the file or leave it out" in str(finding["message"])


def test_directories_are_walked_skipping_hidden_and_cache_directories(tmp_path: Path) -> None:
    bad = "from veridic import TrustedInstruction\nTrustedInstruction(x)\n"
    for relative in ("pkg/sub/mod.py", ".venv/lib/mod.py", "pkg/__pycache__/mod.py"):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(bad)
    code, report = hatches_json(tmp_path, ".")
    assert code == 1
    assert [f["file"] for f in report["findings"]] == ["pkg/sub/mod.py"]


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    done = run(tmp_path, "hatches", "nowhere.py")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "nowhere.py: no such file or directory" in done.stderr  # what
    assert str(tmp_path) in done.stderr  # where it looked
    assert "pass paths of Python files" in done.stderr  # what to do


def test_hatches_without_paths_is_a_usage_error(tmp_path: Path) -> None:
    done = run(tmp_path, "hatches")
    assert done.returncode == 2
    assert "PATH" in done.stderr


_identifiers = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and name not in {"cast", "typing", "veridic"}
)


@given(cast_alias=_identifiers, brand_alias=_identifiers)
def test_property_cast_is_found_whatever_the_aliases(cast_alias: str, brand_alias: str) -> None:
    assume(cast_alias != brand_alias)
    source = (
        f"from typing import cast as {cast_alias}\n"
        f"from veridic import TrustedInstruction as {brand_alias}\n"
        f"x = {cast_alias}({brand_alias}, y)\n"
    )
    found = scan_source(source, "app.py")
    assert [(h.kind, h.line, h.finding) for h in found] == [("cast-to-brand", 3, True)]


@given(st.text(max_size=300))
def test_property_scanning_any_text_reports_instead_of_raising(source: str) -> None:
    for hatch in scan_source(source, "app.py"):
        assert hatch.line >= 1
        assert hatch.kind in {"cast-to-brand", "brand-call", "trust-policy", "vouch"} | {
            "type-ignore",
            "unparsable",
        }
