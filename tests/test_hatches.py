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
import tempfile
import textwrap
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import veridic
from veridic.hatches import Hatch, HatchKind, find_hatches, scan_mypy_config, scan_source


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
    provenance_module = Path(veridic.__file__).parent / "text" / "provenance.py"
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
    assert "1 finding, 1 listed for review" in done.stdout
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


_REACHED_OTHERWISE = {
    "__import__": "__import__('veridic').TrustPolicy('evil').vouch(s, reason='r')\n",
    "import_module": "import importlib\n"
    "importlib.import_module('veridic').TrustPolicy('evil').vouch(s, reason='r')\n",
    "getattr": "import veridic\ngetattr(veridic, 'TrustPolicy')('evil').vouch(s, reason='r')\n",
    "getattr-joined": "import veridic\ngetattr(veridic, 'Trust' + 'Policy')('evil')\n",
    "getattr-constant": "import veridic\nNAME = 'TrustPolicy'\ngetattr(veridic, NAME)('evil')\n",
    "getattr-renamed": "import veridic\nP = getattr(veridic, 'TrustPolicy')\nP('evil')\n",
    "vars": "import veridic\nvars(veridic)['TrustPolicy']('evil')\n",
    "__dict__": "import veridic\nveridic.__dict__['TrustPolicy']('evil')\n",
    "relative-alias": "from .compat import TrustPolicy as P\nP('evil')\n",
    "class-attribute": "from veridic import TrustPolicy\n"
    "class K:\n    P = TrustPolicy\nK.P('evil')\n",
}


@pytest.mark.parametrize("source", _REACHED_OTHERWISE.values(), ids=_REACHED_OTHERWISE.keys())
def test_trust_policy_reached_another_way_is_still_checked(source: str) -> None:
    """mypy follows each of these to ``TrustPolicy`` (or types it ``Any``), and the run
    time mints through it; the scan saw no ``TrustPolicy(...)`` call, so the new door was
    neither listed nor checked against the configured names, and the check passed."""
    found = scan_source(source, "app/prompts.py", trust_policies=frozenset({"legacy"}))
    policies = [h for h in found if h.kind == "trust-policy"]
    assert [(h.line, h.finding, h.policy) for h in policies] == [(source.count("\n"), True, "evil")]
    assert "'evil' is not in [tool.veridic] trust-policies" in policies[0].why


_PASSED_ON = {
    "walrus": "import veridic\n(P := veridic.TrustPolicy)\nP(name)\n",
    "loop": "import veridic\nfor P in [veridic.TrustPolicy]:\n    P(name)\n",
    "default": "from veridic import TrustPolicy\ndef f(P=TrustPolicy):\n    return P(name)\n",
    "partial": "import functools\nfrom veridic import TrustPolicy\n"
    "P = functools.partial(TrustPolicy, 'evil')\n",
    "unpacked": "from veridic import TrustPolicy, instruction\nP, i = TrustPolicy, instruction\n",
}


@pytest.mark.parametrize("source", _PASSED_ON.values(), ids=_PASSED_ON.keys())
def test_trust_policy_passed_on_as_a_value_is_a_finding(source: str) -> None:
    """Each policy made through the value is one whose name the scan cannot read."""
    found = scan_source(source, "app.py", trust_policies=frozenset({"legacy"}))
    assert [(h.kind, h.finding) for h in found] == [("trust-policy", True)]
    assert "passed on as a value" in found[0].why
    assert 'TrustPolicy("' in found[0].why  # what to do


def test_veridic_names_reached_by_a_computed_name_are_a_finding() -> None:
    source = "import os\nimport veridic\ngetattr(veridic, os.environ['DOOR'])('evil')\n"
    [hatch] = scan_source(source, "app.py")
    assert (hatch.line, hatch.kind, hatch.finding) == (3, "trust-policy", True)
    assert "computed name" in hatch.why


@pytest.mark.parametrize(
    "source",
    [
        "from .types import TrustedInstruction as T\nT(text)\n",
        "import veridic\ngetattr(veridic, 'TrustedInstruction')(text)\n",
        "__import__('veridic').UntrustedText(text)\n",
    ],
    ids=["relative-alias", "getattr", "__import__"],
)
def test_brand_call_reached_another_way_is_a_finding(source: str) -> None:
    found = scan_source(source, "app.py")
    assert [(h.kind, h.line, h.finding) for h in found] == [
        ("brand-call", source.count("\n"), True)
    ]


def test_getattr_of_other_names_and_policy_type_uses_are_not_listed() -> None:
    source = """\
        import veridic
        from veridic import TrustPolicy
        kind = getattr(veridic, "Risk")
        policy: TrustPolicy | None = None
        def f(p: TrustPolicy) -> list[TrustPolicy]:
            return [p] if isinstance(p, TrustPolicy) else []
        TrustPolicy.records()
    """
    assert scan_source(textwrap.dedent(source), "app.py") == ()


_INSPECTED = {
    "isinstance-tuple": "isinstance(p, (TrustPolicy, str))\n",
    "issubclass-tuple": "issubclass(k, (TrustPolicy,))\n",
    "membership": "k in (TrustPolicy, Registry)\n",
    "getattr-of-it": "getattr(TrustPolicy, 'vouch')\n",
    "hasattr-of-it": "hasattr(TrustPolicy, 'records')\n",
    "patch-object": "from unittest import mock\nmock.patch.object(TrustPolicy, 'vouch')\n",
    "monkeypatch": "def test(monkeypatch):\n    monkeypatch.setattr(TrustPolicy, 'vouch', f)\n",
    "signature": "import inspect\ninspect.signature(TrustPolicy)\n",
    "print": "print(TrustPolicy)\n",
    "local-variable": "def f():\n    TrustPolicy = load()\n    return TrustPolicy\n",
    "parameter": "def f(TrustPolicy):\n    return [TrustPolicy]\n",
}


@pytest.mark.parametrize("source", _INSPECTED.values(), ids=_INSPECTED.keys())
def test_trust_policy_looked_at_not_handed_on_is_not_a_finding(source: str) -> None:
    """Ordinary code that tests for, patches or prints the class, or a name of its own
    spelt TrustPolicy: no policy is made through it, and a finding failed the team's CI."""
    imported = "" if source.startswith("def f(") else "from veridic import TrustPolicy\n"
    assert scan_source(imported + source, "app.py", trust_policies=frozenset({"x"})) == ()


@pytest.mark.parametrize(
    "call",
    ["setattr(app, 'factory', TrustPolicy)", "type('P', (TrustPolicy,), {})"],
    ids=["setattr-value", "type-subclass"],
)
def test_trust_policy_handed_on_beside_the_calls_that_look_is_still_a_finding(
    call: str,
) -> None:
    """Only the object whose attribute is read or set is looked at: the value set is
    handed on, to be called where its name is not written; ``type`` of three arguments
    makes a subclass that makes policies."""
    [hatch] = scan_source(f"from veridic import TrustPolicy\n{call}\n", "app.py")
    assert (hatch.kind, hatch.finding) == ("trust-policy", True)


def test_subclass_of_trust_policy_is_checked_as_trust_policy() -> None:
    """``class P(TrustPolicy)`` makes policies as TrustPolicy does (the run time lets a
    subclass be made), so ``P("evil")`` is a policy whose name is checked."""
    source = "from veridic import TrustPolicy\nclass P(TrustPolicy):\n    pass\nP('evil')\n"
    found = scan_source(source, "app.py", trust_policies=frozenset({"legacy"}))
    assert [(h.line, h.kind, h.finding, h.policy) for h in found] == [
        (4, "trust-policy", True, "evil")
    ]


@pytest.mark.parametrize(
    "source",
    [
        "import veridic\nvars(veridic)[name]('evil')\n",
        "import veridic\nveridic.__dict__[name]('evil')\n",
    ],
    ids=["vars", "__dict__"],
)
def test_veridic_names_read_from_its_namespace_by_a_computed_key_are_a_finding(
    source: str,
) -> None:
    """The same door as ``getattr(veridic, name)``, spelt as a lookup in its namespace."""
    [hatch] = scan_source(source, "app.py")
    assert (hatch.line, hatch.kind, hatch.finding) == (2, "trust-policy", True)
    assert "computed name" in hatch.why


@pytest.mark.parametrize(
    "comment",
    [
        "# type: ignore [veridic-forge]",
        "# type: ignore\t[ veridic-forge ]",
        "#type:ignore [veridic-forge]",
    ],
)
def test_type_ignore_with_space_before_its_codes_is_read_as_mypy_reads_it(comment: str) -> None:
    """mypy allows spaces between ``ignore`` and ``[codes]`` and silences only those codes;
    the scan listed the comment as a bare ignore that silences every check, and said to
    name the code that was named."""
    [hatch] = scan_source(f"x = 1  {comment}\n", "app.py")
    assert (hatch.kind, hatch.codes) == ("type-ignore", ("veridic-forge",))
    assert "silences the veridic check veridic-forge" in hatch.why


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
        assert hatch.kind in set(get_args(HatchKind)) - _CONFIG_FILE_KINDS


# --- mypy's configuration: inline comments and configuration files -------------------------
#
# The inline comments below are built on one line ("x = 1\n" + "# mypy: ..."): a line of
# this file that starts with the comment would configure mypy for this test module itself.

_CONFIG_FILE_KINDS = {
    "config-disable-code",
    "config-ignore-errors",
    "plugin-missing",
    "config-unparsable",
}
_MYPY_INI_OK = "[mypy]\nplugins = veridic.mypy\n"


def inline(comment: str) -> str:
    return "import os\n" + comment + "\nx = 1\n"


def repository(tmp_path: Path, files: dict[str, str]) -> Path:
    """A repository root (``.git``, so mypy's search stops here) holding ``files``."""
    (tmp_path / ".git").mkdir(parents=True)
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def summary(hatches: tuple[Hatch, ...]) -> list[tuple[str, str, int, tuple[str, ...]]]:
    return [(h.kind, Path(h.file).name, h.line, h.codes) for h in hatches]


@pytest.mark.parametrize(
    ("comment", "codes"),
    [
        ('# mypy: disable-error-code="veridic-literal"', ("veridic-literal",)),
        (
            '# mypy: disable-error-code="veridic-any, misc,veridic-forge"',
            ("veridic-any", "veridic-forge"),
        ),
        ("# mypy: disable-error-code=veridic-policy", ("veridic-policy",)),
        ("# mypy: Disable_Error_Code = veridic-sdk", ("veridic-sdk",)),
        ('# mypy: warn-unreachable, disable-error-code="veridic-any"', ("veridic-any",)),
    ],
    ids=["quoted", "quoted-list", "unquoted", "underscores-and-case", "among-other-options"],
)
def test_inline_disable_of_a_veridic_code_is_listed(comment: str, codes: tuple[str, ...]) -> None:
    [hatch] = scan_source(inline(comment), "app.py")
    assert (hatch.kind, hatch.line, hatch.finding, hatch.codes) == (
        "inline-disable-code",
        2,
        False,
        codes,
    )
    assert hatch.text == comment
    assert f"turns off the veridic check{'s' if len(codes) > 1 else ''} {', '.join(codes)}" in (
        hatch.why
    )  # what
    assert "for every line of this file" in hatch.why  # where it acts


def test_inline_unquoted_list_disables_only_its_first_code_as_mypy_reads_it() -> None:
    # mypy splits the comment at the comma: veridic-forge becomes an unknown option.
    source = inline("# mypy: disable-error-code=veridic-literal,veridic-forge")
    assert [h.codes for h in scan_source(source, "app.py")] == [("veridic-literal",)]


@pytest.mark.parametrize(
    "comment",
    [
        '# mypy: disable-error-code="misc, truthy-bool"',
        '# mypy: enable-error-code="veridic-any"',
        '#  mypy: disable-error-code="veridic-any"',
        '    # mypy: disable-error-code="veridic-any"',
        'x = 2  # mypy: disable-error-code="veridic-any"',
        '# mypy: disable-error-code="veridic-any',
    ],
    ids=["other-codes", "enable", "two-spaces", "indented", "after-code", "unterminated-quote"],
)
def test_inline_comment_mypy_does_not_read_as_a_veridic_disable_is_not_listed(
    comment: str,
) -> None:
    assert scan_source(inline(comment), "app.py") == ()


@pytest.mark.parametrize(
    "comment",
    [
        "# mypy: ignore-errors",
        "# mypy: ignore_errors=True",
        "# mypy: ignore-errors = yes",
        "# mypy: no-ignore-errors=False",
    ],
)
def test_inline_ignore_errors_is_listed(comment: str) -> None:
    [hatch] = scan_source(inline(comment), "app.py")
    assert (hatch.kind, hatch.line, hatch.finding) == ("inline-ignore-errors", 2, False)
    assert "silences every mypy error in this file, veridic's checks included" in hatch.why


@pytest.mark.parametrize(
    "comment",
    ["# mypy: ignore-errors=False", "# mypy: no-ignore-errors", "# mypy: ignore-errors=maybe"],
)
def test_inline_ignore_errors_turned_off_or_invalid_is_not_listed(comment: str) -> None:
    assert scan_source(inline(comment), "app.py") == ()


_veridic_codes = st.one_of(
    st.sampled_from(["veridic-literal", "veridic-forge", "veridic-any", "veridic-policy"]),
    st.from_regex(r"veridic-[a-z]{1,8}", fullmatch=True),
)
_other_codes = st.from_regex(r"[a-uw-z][a-z-]{0,12}", fullmatch=True)  # never veridic-*
_codes = st.lists(
    st.one_of(st.tuples(st.just(True), _veridic_codes), st.tuples(st.just(False), _other_codes)),
    min_size=1,
    max_size=6,
)
_separators = st.sampled_from([",", ", ", " , ", ",  "])


def _expected(codes: list[tuple[bool, str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(code for ours, code in codes if ours))


@given(codes=_codes, separator=_separators)
def test_property_inline_disable_reports_exactly_the_veridic_codes(
    codes: list[tuple[bool, str]], separator: str
) -> None:
    written = separator.join(code for _, code in codes)
    found = scan_source(inline(f'# mypy: disable-error-code="{written}"'), "app.py")
    expected = _expected(codes)
    assert [h.codes for h in found] == ([expected] if expected else [])


@pytest.mark.parametrize(
    ("name", "config", "lines"),
    [
        (
            "mypy.ini",
            """\
            [mypy]
            plugins = veridic.mypy
            disable_error_code = misc, veridic-any

            [mypy-legacy.*]
            disable_error_code =
                veridic-forge,
                truthy-bool
            """,
            (3, 6),
        ),
        (
            "pyproject.toml",
            """\
            [tool.mypy]
            plugins = ["veridic.mypy"]
            disable_error_code = ["misc", "veridic-any"]

            [[tool.mypy.overrides]]
            module = "other"
            strict = true

            [[tool.mypy.overrides]]
            module = ["legacy.*"]
            disable_error_code = "veridic-forge, truthy-bool"
            """,
            (3, 11),
        ),
    ],
    ids=["mypy.ini", "pyproject.toml"],
)
def test_config_disable_of_a_veridic_code_is_listed_with_its_section(
    tmp_path: Path, name: str, config: str, lines: tuple[int, int]
) -> None:
    found = scan_mypy_config(repository(tmp_path, {name: config}))
    assert summary(found) == [
        ("config-disable-code", name, lines[0], ("veridic-any",)),
        ("config-disable-code", name, lines[1], ("veridic-forge",)),
    ]
    glob, legacy = found
    assert not any(h.finding for h in found)
    assert "turns off the veridic check veridic-any for every module mypy checks" in glob.why
    assert "for the modules matching legacy.*" in legacy.why  # where it acts
    assert "legacy.*" in legacy.text


@pytest.mark.parametrize(
    ("name", "config", "line", "setting"),
    [
        (
            "mypy.ini",
            "[mypy]\nplugins = veridic.mypy\n[mypy-gen.*]\nignore_errors = True\n",
            4,
            "[mypy-gen.*] ignore_errors = True",
        ),
        (
            "setup.cfg",
            "[mypy]\nplugins = veridic.mypy\nignore_errors = yes\n",
            3,
            "[mypy] ignore_errors = yes",
        ),
        (
            "pyproject.toml",
            '[tool.mypy]\nplugins = ["veridic.mypy"]\n[[tool.mypy.overrides]]\nmodule = "gen.*"\n'
            "ignore_errors = true\n",
            5,
            '[[tool.mypy.overrides]] module = "gen.*" ignore_errors = true',
        ),
    ],
    ids=["per-module-ini", "global-setup.cfg", "override-toml"],
)
def test_config_ignore_errors_is_listed(
    tmp_path: Path, name: str, config: str, line: int, setting: str
) -> None:
    [hatch] = scan_mypy_config(repository(tmp_path, {name: config}))
    assert (hatch.kind, Path(hatch.file).name, hatch.line, hatch.finding) == (
        "config-ignore-errors",
        name,
        line,
        False,
    )
    assert hatch.text == setting
    assert "silences every mypy error in" in hatch.why  # what
    assert "veridic's checks included" in hatch.why


def test_config_ignore_errors_false_is_not_listed(tmp_path: Path) -> None:
    config = _MYPY_INI_OK + "ignore_errors = False\n[mypy-a]\nignore_errors = off\n"
    assert scan_mypy_config(repository(tmp_path, {"mypy.ini": config})) == ()


@pytest.mark.parametrize(
    ("name", "config", "line", "plugins"),
    [
        ("mypy.ini", "[mypy]\nstrict = True\n", 1, "no plugins"),
        (
            "mypy.ini",
            "[mypy]\nstrict = True\nplugins = pydantic.mypy\n",
            3,
            "the plugins pydantic.mypy",
        ),
        (
            "pyproject.toml",
            '[tool.mypy]\nplugins = ["pydantic.mypy"]\n',
            2,
            "the plugins pydantic.mypy",
        ),
        ("setup.cfg", "[metadata]\nname = app\n\n[mypy]\nstrict = True\n", 4, "no plugins"),
    ],
    ids=["ini-no-plugins", "ini-other-plugin", "toml-other-plugin", "setup.cfg-no-plugins"],
)
def test_configuration_without_the_veridic_plugin_is_a_finding(
    tmp_path: Path, name: str, config: str, line: int, plugins: str
) -> None:
    [hatch] = scan_mypy_config(repository(tmp_path, {name: config}))
    assert (hatch.kind, Path(hatch.file).name, hatch.line, hatch.finding) == (
        "plugin-missing",
        name,
        line,
        True,
    )
    assert f"loads {plugins}, not veridic.mypy" in hatch.why  # what
    assert "none of veridic's static checks" in hatch.why
    example = 'plugins = ["veridic.mypy"]' if name.endswith(".toml") else "plugins = veridic.mypy"
    assert f"add {example} to" in hatch.why  # what to do


def test_mypy_ini_without_a_mypy_section_is_a_missing_plugin(tmp_path: Path) -> None:
    [hatch] = scan_mypy_config(repository(tmp_path, {"mypy.ini": "[mypy-app]\nstrict = True\n"}))
    assert hatch.kind == "plugin-missing"
    assert "has no [mypy] section, so mypy loads no plugin" in hatch.why
    assert "add plugins = veridic.mypy to [mypy]" in hatch.why


@pytest.mark.parametrize(
    "plugins",
    ["pydantic.mypy, veridic.mypy", "veridic.mypy:plugin", '["pydantic.mypy", "veridic.mypy"]'],
)
def test_plugin_listed_among_others_is_not_a_finding(tmp_path: Path, plugins: str) -> None:
    if plugins.startswith("["):
        files = {"pyproject.toml": f"[tool.mypy]\nplugins = {plugins}\n"}
    else:
        files = {"mypy.ini": f"[mypy]\nplugins = {plugins}\n"}
    assert scan_mypy_config(repository(tmp_path, files)) == ()


_BAD = "[mypy]\nplugins = pydantic.mypy\n"  # a finding wherever mypy reads it


@pytest.mark.parametrize(
    ("files", "read"),
    [
        ({"mypy.ini": _BAD, ".mypy.ini": _MYPY_INI_OK, "setup.cfg": _MYPY_INI_OK}, "mypy.ini"),
        ({".mypy.ini": _BAD, "pyproject.toml": '[tool.mypy]\nplugins = ["x"]\n'}, ".mypy.ini"),
        ({"pyproject.toml": "[project]\nname = 'app'\n", "setup.cfg": _BAD}, "setup.cfg"),
        ({"setup.cfg": "[metadata]\nname = app\n", "../mypy.ini": _BAD}, "mypy.ini"),
    ],
    ids=["mypy.ini-first", "then-.mypy.ini", "pyproject-without-tool.mypy-skipped", "parent"],
)
def test_the_configuration_read_is_the_one_mypy_finds(
    tmp_path: Path, files: dict[str, str], read: str
) -> None:
    root = repository(tmp_path, {f"src/{name}": text for name, text in files.items()})
    found = scan_mypy_config(root / "src")
    assert [(h.kind, Path(h.file).name) for h in found] == [("plugin-missing", read)]


def test_the_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text(_BAD)
    inner = repository(tmp_path / "project", {"src/app.py": "x = 1\n"})
    assert scan_mypy_config(inner / "src") == ()


@pytest.mark.parametrize(
    ("name", "config", "line", "error"),
    [
        ("mypy.ini", "[mypy]\nplugins = veridic.mypy\nplugins = other\n", 3, "already exists"),
        ("mypy.ini", "plugins = veridic.mypy\n", 1, "no section headers"),
        ("pyproject.toml", "[project]\nname = 'a'\n[tool.mypy\n", 3, "Expected ']'"),
        ("pyproject.toml", "[tool.mypy]\noverrides = 1\n", 1, "must be an array"),
        (
            "pyproject.toml",
            "[[tool.mypy.overrides]]\nstrict = true\n",
            1,
            "no module to override was specified",
        ),
        (
            "pyproject.toml",
            '[[tool.mypy.overrides]]\nmodule = "a"\nstrict = true\n'
            '[[tool.mypy.overrides]]\nmodule = ["a"]\nstrict = false\n',
            4,
            "conflicting values. Module 'a' has two different values for 'strict'",
        ),
    ],
    ids=["duplicate-key", "no-header", "toml-syntax", "overrides-table", "no-module", "conflict"],
)
def test_configuration_mypy_cannot_parse_is_a_finding_and_the_search_goes_on(
    tmp_path: Path, name: str, config: str, line: int, error: str
) -> None:
    files = {name: config, "setup.cfg": "[mypy]\nignore_errors = True\n"}
    found = scan_mypy_config(repository(tmp_path, files))
    assert summary(found) == [
        ("config-unparsable", name, line, ()),
        ("plugin-missing", "setup.cfg", 1, ()),  # mypy reads the next one
        ("config-ignore-errors", "setup.cfg", 2, ()),
    ]
    broken = found[0]
    assert broken.finding
    assert error in broken.why  # what is wrong
    assert "mypy cannot parse this configuration file" in broken.why
    assert "fix the file so that mypy reads it" in broken.why  # what to do


@given(codes=_codes, separator=_separators)
def test_property_config_disable_reports_exactly_the_veridic_codes(
    codes: list[tuple[bool, str]], separator: str
) -> None:
    written = separator.join(code for _, code in codes)
    with tempfile.TemporaryDirectory() as root:
        files = {"mypy.ini": f"{_MYPY_INI_OK}[mypy-app.*]\ndisable_error_code = {written}\n"}
        found = scan_mypy_config(repository(Path(root), files))
    expected = _expected(codes)
    assert [h.codes for h in found] == ([expected] if expected else [])


@given(
    name=st.sampled_from(["mypy.ini", "pyproject.toml", "setup.cfg"]), text=st.text(max_size=200)
)
def test_property_any_configuration_text_is_reported_instead_of_raising(
    name: str, text: str
) -> None:
    with tempfile.TemporaryDirectory() as root:
        found = scan_mypy_config(repository(Path(root), {name: text}))
    for hatch in found:
        assert hatch.kind in _CONFIG_FILE_KINDS
        assert hatch.finding
        assert hatch.line >= 1


def test_configuration_found_from_several_directories_is_reported_once(tmp_path: Path) -> None:
    root = repository(tmp_path, {"mypy.ini": _BAD, "a/x.py": "x = 1\n", "b/y.py": "y = 2\n"})
    found = find_hatches([root / "a", root / "b"])
    assert [(h.kind, Path(h.file).name) for h in found] == [("plugin-missing", "mypy.ini")]


def test_repository_own_mypy_configuration_is_not_a_finding() -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / "mypy.ini").is_file()
    for directory in (root, root / "src", root / "tests", root / "tests" / "cli_fixtures"):
        assert scan_mypy_config(directory) == ()


def test_cli_lists_configuration_hatches_for_review_in_text_and_json(tmp_path: Path) -> None:
    root = repository(
        tmp_path,
        {
            "mypy.ini": "[mypy]\nplugins = veridic.mypy\n\n[mypy-legacy.*]\n"
            "disable_error_code = veridic-any\n",
            "legacy/app.py": inline("# mypy: ignore-errors"),
        },
    )
    done = run(root, "hatches", ".")
    assert done.returncode == 0
    listed = done.stdout.split("listed for review (not findings):")[1]
    assert "config-disable-code (1)" in listed
    assert "mypy.ini:5  [mypy-legacy.*] disable_error_code = veridic-any" in listed
    assert "inline-ignore-errors (1)" in listed
    assert "legacy/app.py:2  # mypy: ignore-errors" in listed
    assert "0 findings, 2 listed for review" in done.stdout
    code, report = hatches_json(root, ".")
    assert code == 0
    assert report["findings"] == []
    assert [(f["kind"], f["file"], f["line"]) for f in report["listed"]] == [
        ("inline-ignore-errors", "legacy/app.py", 2),
        ("config-disable-code", "mypy.ini", 5),
    ]
    assert report["listed"][1]["codes"] == ["veridic-any"]
    assert "codes" not in report["listed"][0]


def test_cli_on_a_file_reads_no_configuration_file(tmp_path: Path) -> None:
    root = repository(tmp_path, {"mypy.ini": _BAD, "app.py": "x = 1\n"})
    code, report = hatches_json(root, "app.py")
    assert (code, report["findings"]) == (0, [])
    code, report = hatches_json(root, ".")
    assert (code, [f["kind"] for f in report["findings"]]) == (1, ["plugin-missing"])
