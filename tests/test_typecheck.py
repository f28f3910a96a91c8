"""The mypy plugin's rules, pinned by the cases in tests/typecheck/ (data, one file per rule).

A case file is a Python module. Each line that must get an error says so at its end,
with the exact error code and a fragment of the message::

    instruction(name)  # E: [veridic-literal] the parameter "name"

Every other line must get no error, so the accepted forms in the same files are
checked too. ``# P: [rule]`` marks the same for pyright (see
``test_pyright_reports_exactly_its_marked_lines``). ``# N: [code] fragment`` marks a
note of the plugin's, printed right below the error with that code on that line. A
mark on a comment line of its own is for the next line of code. Files starting with ``_`` are
support modules that cases import; ``no_policy_list/`` is checked with no
``trust-policies`` list configured.

All cases go through one mypy run (a second for ``no_policy_list/``) with a cache
kept in ``.mypy_cache/typecheck-tests``, so a warm run takes a second or two.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from mypy import api as mypy_api
from mypy import errorcodes as mypy_codes
from mypy.options import Options

from veridic.mypy import errorcodes
from veridic.mypy._config import read as read_policy_settings

ROOT: Final = Path(__file__).resolve().parents[1]
CASES: Final = ROOT / "tests" / "typecheck"
NO_LIST: Final = CASES / "no_policy_list"
CACHE: Final = Path(
    os.environ.get("VERIDIC_TYPECHECK_CACHE") or ROOT / ".mypy_cache" / "typecheck-tests"
)
"""mypy's cache for these runs (``VERIDIC_TYPECHECK_CACHE`` moves it, e.g. for parallel runs)."""
POLICIES: Final = ("legacy-prompts", "admin-prompts")

_MARK: Final = re.compile(r"#\s*([EPN]):\s*\[([\w-]+)\]\s*([^#]*)")
_REPORTED: Final = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+): error: (?P<message>.*?)  \[(?P<code>[\w-]+)\]$"
)
_NOTE: Final = re.compile(r"^(?P<path>.+?):(?P<line>\d+): note: (?P<message>.*)$")


@dataclass(frozen=True, slots=True)
class Expected:
    line: int
    code: str
    fragment: str


@dataclass(frozen=True, slots=True)
class Reported:
    path: Path
    line: int
    code: str
    message: str


def expectations(path: Path, tool: str) -> list[Expected]:
    """The ``# E:`` (mypy), ``# N:`` (mypy's notes) or ``# P:`` (pyright) marks of one case file.

    A mark at the end of a line is for that line; a mark on a line of its own is for
    the next line of code.
    """
    found = []
    pending: list[tuple[str, str, str]] = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        marks = _MARK.findall(text)
        if text.strip().startswith("#"):
            pending += marks
            continue
        if not text.strip():
            continue
        for kind, code, fragment in [*pending, *marks]:
            if kind == tool:
                found.append(Expected(number, code, fragment.strip()))
        pending = []
    return found


def case_files(directory: Path = CASES) -> list[Path]:
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))


def write_config(directory: Path, policies: tuple[str, ...] | None) -> Path:
    """A mypy.ini with the plugin, next to a pyproject.toml with (or without) a policy list."""
    directory.mkdir(parents=True, exist_ok=True)
    ini = directory / "mypy.ini"
    ini.write_text(
        "[mypy]\n"
        "strict = True\n"
        "python_version = 3.11\n"
        "plugins = veridic.mypy\n"
        f"mypy_path = {ROOT / 'src'}\n"
        "warn_unused_ignores = True\n"
        "enable_error_code = ignore-without-code\n"
        "\n[mypy-codes_disabled]\n"
        "disable_error_code = veridic-any\n"
        # veridic's own errors are make typecheck's business, and the provider SDKs it
        # names for typing only are thousands of modules the cases do not need.
        "\n[mypy-veridic.*]\n"
        "follow_imports = silent\n"
        "\n[mypy-anthropic.*,openai.*]\n"
        "follow_imports = skip\n"
    )
    listed = "" if policies is None else f"trust-policies = {json.dumps(list(policies))}\n"
    (directory / "pyproject.toml").write_text(f"[tool.veridic]\n{listed}")
    return ini


def run_mypy(
    files: list[Path], config: Path, *, log: list[str] | None = None, cache: Path = CACHE
) -> tuple[list[Reported], str]:
    """Run mypy (in this process) and parse its errors; also return its raw output.

    With ``log``, mypy runs verbosely and its log lines are appended to it.
    """
    verbose = ["-v"] if log is not None else []
    out, err, _status = mypy_api.run(
        [
            *verbose,
            "--config-file",
            str(config),
            "--cache-dir",
            str(cache),
            "--show-absolute-path",
            "--no-pretty",
            "--no-error-summary",
            *map(str, files),
        ]
    )
    if log is not None:
        log.extend(err.splitlines())
    else:
        assert not err, err
    reported = []
    for text in out.splitlines():
        match = _REPORTED.match(text)
        if match:
            reported.append(
                Reported(
                    Path(match["path"]).resolve(),
                    int(match["line"]),
                    match["code"],
                    match["message"],
                )
            )
        else:
            assert ": note: " in text, f"unexpected mypy output: {text}"
    return reported, out


@pytest.fixture(scope="session")
def main_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_config(tmp_path_factory.mktemp("listed"), POLICIES)


@pytest.fixture(scope="session")
def mypy_run(main_config: Path) -> tuple[list[Reported], str]:
    return run_mypy(case_files(), main_config)


@pytest.fixture(scope="session")
def no_list_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Reported], str]:
    return run_mypy(case_files(NO_LIST), write_config(tmp_path_factory.mktemp("unlisted"), None))


@dataclass(frozen=True, slots=True)
class Note:
    path: Path
    line: int
    message: str
    follows: str | None
    """The code of the error printed just before it on the same line, if any."""


def notes_of(out: str) -> list[Note]:
    """The notes in mypy's output, each with the error it follows."""
    found = []
    last: tuple[Path, int, str] | None = None
    for text in out.splitlines():
        error = _REPORTED.match(text)
        if error:
            last = (Path(error["path"]).resolve(), int(error["line"]), error["code"])
            continue
        note = _NOTE.match(text)
        if note:
            path, line = Path(note["path"]).resolve(), int(note["line"])
            follows = last[2] if last is not None and last[:2] == (path, line) else None
            found.append(Note(path, line, note["message"], follows))
    return found


def assert_notes(path: Path, out: str) -> None:
    """Every ``# N:`` mark of ``path`` is a note below the marked error."""
    mine = [n for n in notes_of(out) if n.path == path.resolve()]
    for mark in expectations(path, "N"):
        assert any(
            n.line == mark.line and n.follows == mark.code and mark.fragment in n.message
            for n in mine
        ), f"{path.name}:{mark.line}: no note below [{mark.code}] with {mark.fragment!r}: {mine}"


def assert_matches(path: Path, reported: list[Reported]) -> None:
    expected = expectations(path, "E")
    mine = [r for r in reported if r.path == path.resolve()]
    got = Counter((r.line, r.code) for r in mine)
    want = Counter((e.line, e.code) for e in expected)
    assert got == want, "\n".join(
        [f"{path.name}: mypy and the # E: marks disagree", *(f"  {r}" for r in mine)]
    )
    for mark in expected:
        messages = [r.message for r in mine if (r.line, r.code) == (mark.line, mark.code)]
        assert any(mark.fragment in m for m in messages), (
            f"{path.name}:{mark.line}: no [{mark.code}] message contains {mark.fragment!r}: "
            f"{messages}"
        )


@pytest.mark.parametrize("case", case_files(), ids=lambda p: p.stem)
def test_mypy_reports_exactly_the_marked_errors(
    case: Path, mypy_run: tuple[list[Reported], str]
) -> None:
    assert_matches(case, mypy_run[0])
    assert_notes(case, mypy_run[1])


def test_without_a_policy_list_any_literal_policy_name_passes(
    no_list_run: tuple[list[Reported], str],
) -> None:
    for case in case_files(NO_LIST):
        assert_matches(case, no_list_run[0])


def test_support_modules_have_no_errors(mypy_run: tuple[list[Reported], str]) -> None:
    support = {p.resolve() for p in CASES.glob("_*.py")}
    assert [r for r in mypy_run[0] if r.path in support] == []


def test_every_error_code_has_a_case() -> None:
    marked = {e.code for case in case_files() for e in expectations(case, "E")}
    assert {code.code for code in errorcodes.CODES} <= marked


def test_definitions_read_back_from_the_cache_are_still_checked(
    main_config: Path, tmp_path: Path
) -> None:
    # A first run caches _helpers and _constants (in a cache of this test's own, so
    # no other run can make them stale). A new module is checked against those
    # cached definitions: the LiteralString mark on rule()'s parameter and the
    # values of the Final constants must survive mypy's cache.
    cache = tmp_path / "cache"
    run_mypy([CASES / "_helpers.py", CASES / "_constants.py"], main_config, cache=cache)
    caller = tmp_path / "cached_caller.py"
    caller.write_text(
        # New content each time, so that mypy checks this module instead of replaying
        # the errors it cached for it (under the path of an earlier run).
        f"# run {uuid.uuid4()}\n"
        "from _constants import DECLARED, GREETING\n"
        "from _helpers import rule\n"
        "from veridic import instruction\n"
        "\n"
        "\n"
        "def use(name: str) -> None:\n"
        '    rule("written in code")\n'
        "    instruction(GREETING + DECLARED)\n"
        "    rule(name)  # E: [veridic-literal] rule() takes text written in code\n"
    )
    log: list[str] = []
    reported, _ = run_mypy(
        [caller, CASES / "_helpers.py", CASES / "_constants.py"], main_config, log=log, cache=cache
    )
    cached = [line for line in log if "_helpers" in line or "_constants" in line]
    assert any("Metadata fresh for _helpers" in line for line in cached), cached
    assert any("Metadata fresh for _constants" in line for line in cached), cached
    assert_matches(caller, reported)


def test_private_imports_are_reported_when_a_cached_module_is_checked_again(
    main_config: Path, tmp_path: Path
) -> None:
    # mypy reads the cached metadata of a module (and skips get_additional_deps for
    # it), then checks it again because a module it imports changed. Its private
    # imports must be reported again, not lost and then cached as clean.
    cache = tmp_path / "cache"
    helper = tmp_path / "cached_helper.py"
    caller = tmp_path / "cached_forger.py"
    helper.write_text("def size() -> int:\n    return 1\n")
    caller.write_text(
        "from cached_helper import size\n"
        "from veridic.text.provenance import mint  # E: [veridic-forge] an import outside veridic\n"
        "\n"
        "\n"
        "def use() -> object:\n"
        "    return size()\n"
    )
    first, _ = run_mypy([caller, helper], main_config, cache=cache)
    assert_matches(caller, first)
    helper.write_text("def size() -> str:\n    return ''\n")  # a new interface
    log: list[str] = []
    again, _ = run_mypy([caller, helper], main_config, log=log, cache=cache)
    assert any("Metadata fresh for cached_forger" in line for line in log) or any(
        "cached_forger" in line and "stale" in line.lower() for line in log
    ), [line for line in log if "cached_forger" in line]
    assert_matches(caller, again)


def test_error_codes_are_registered_with_mypy_and_documented() -> None:
    for code in errorcodes.CODES:
        assert mypy_codes.error_codes[code.code] is code
        assert code.code.startswith("veridic-")
        assert code.description
        assert f"``{code.code}``" in (errorcodes.__doc__ or "")


_ADVICE: Final = re.compile(
    r"[;:] .*\b(write|place|mint|pass|brand|name|add|give|vouch|use)\b", re.IGNORECASE
)


def test_every_message_says_what_was_wrong_and_what_to_do(
    mypy_run: tuple[list[Reported], str],
) -> None:
    # Where: mypy puts file:line in front. What: the offending expression or name.
    # What to do instead: an imperative clause after the first ";" or ":".
    veridic = [r for r in mypy_run[0] if r.code.startswith("veridic-")]
    assert {r.code for r in veridic} == {c.code for c in errorcodes.CODES}
    for reported in veridic:
        assert re.search(r"\bgot\b|\(\.\.\.\)|trust policy \"", reported.message), reported
        assert _ADVICE.search(reported.message), reported


def _options(config_file: Path) -> Options:
    options = Options()
    options.config_file = str(config_file)
    return options


def test_policy_list_is_read_next_to_the_mypy_config(tmp_path: Path) -> None:
    write_config(tmp_path, ("one", "two"))
    settings = read_policy_settings(_options(tmp_path / "mypy.ini"))
    assert settings.names == frozenset({"one", "two"})
    assert settings.source == str(tmp_path / "pyproject.toml")
    assert settings.problem is None


def test_policy_list_is_found_in_a_parent_directory(tmp_path: Path) -> None:
    write_config(tmp_path, ("one",))
    nested = tmp_path / "config"
    nested.mkdir()
    (nested / "mypy.ini").write_text("[mypy]\n")
    assert read_policy_settings(_options(nested / "mypy.ini")).names == frozenset({"one"})


def test_missing_policy_list_allows_any_name(tmp_path: Path) -> None:
    write_config(tmp_path, None)
    assert read_policy_settings(_options(tmp_path / "mypy.ini")).names is None


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("[tool.veridic]\ntrust-policies = 'one'\n", "must be a list of strings"),
        ("[tool.veridic\n", "is not valid TOML"),
    ],
)
def test_unreadable_policy_list_is_a_problem_not_a_crash(
    tmp_path: Path, content: str, fragment: str
) -> None:
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    (tmp_path / "pyproject.toml").write_text(content)
    settings = read_policy_settings(_options(tmp_path / "mypy.ini"))
    assert settings.problem is not None
    assert fragment in settings.problem
    assert str(tmp_path / "pyproject.toml") in settings.problem


# --- pyright ----------------------------------------------------------------------------


def _pyright() -> list[str] | None:
    """The command that runs basedpyright (pyright's PyPI build with node bundled), if any."""
    if shutil.which("basedpyright", path=str(Path(sys.executable).parent)):
        return [str(Path(sys.executable).parent / "basedpyright")]
    return None


@pytest.fixture(scope="session")
def pyright_run(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Counter[tuple[int, str]]]:
    command = _pyright()
    if command is None:
        pytest.skip("basedpyright is not installed: pip install -e . --group dev")
    directory = tmp_path_factory.mktemp("pyright")
    config = directory / "pyrightconfig.json"
    config.write_text(
        json.dumps(
            {
                # pyright's own defaults: basedpyright is stricter out of the box.
                "typeCheckingMode": "standard",
                "pythonVersion": "3.11",
                "extraPaths": [str(CASES), str(ROOT / "src")],
            }
        )
    )
    files = [*case_files(), *case_files(NO_LIST)]
    result = subprocess.run(
        [*command, "--outputjson", "--project", str(config), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    report = json.loads(result.stdout)
    found: dict[Path, Counter[tuple[int, str]]] = {}
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] != "error":
            continue
        path = Path(diagnostic["file"]).resolve()
        line = diagnostic["range"]["start"]["line"] + 1
        found.setdefault(path, Counter())[(line, diagnostic.get("rule", "error"))] += 1
    return found


@pytest.mark.parametrize("case", [*case_files(), *case_files(NO_LIST)], ids=lambda p: p.stem)
def test_pyright_reports_exactly_its_marked_lines(
    case: Path, pyright_run: dict[Path, Counter[tuple[int, str]]]
) -> None:
    # Pins what pyright enforces natively (docs/mypy.md): a line marked only "# E:" is a
    # rule that needs the mypy plugin; "# P:" without "# E:" is where pyright disagrees.
    want = Counter((e.line, e.code) for e in expectations(case, "P"))
    assert pyright_run.get(case.resolve(), Counter()) == want


# --- [veridic-mypy] in mypy's own configuration --------------------------------------


def _ini(directory: Path, section: str) -> Path:
    ini = directory / "mypy.ini"
    ini.write_text(f"[mypy]\nplugins = veridic.mypy\n\n[veridic-mypy]\n{section}")
    return ini


def test_the_mypy_config_section_gives_the_list_when_pyproject_has_none(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.veridic]\n")
    ini = _ini(tmp_path, "trust_policies = legacy-prompts,\n    support\n")
    settings = read_policy_settings(_options(ini))
    assert settings.names == frozenset({"legacy-prompts", "support"})
    assert settings.source == str(ini)
    assert settings.problem is None


def test_the_same_list_in_both_places_is_fine(tmp_path: Path) -> None:
    write_config(tmp_path, ("one", "two"))
    ini = _ini(tmp_path, "trust_policies = two, one\n")
    assert read_policy_settings(_options(ini)).names == frozenset({"one", "two"})


def test_lists_that_differ_are_a_problem_since_the_run_time_reads_only_tool_veridic(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, ("one",))
    settings = read_policy_settings(_options(_ini(tmp_path, "trust_policies = one, two\n")))
    assert settings.problem is not None
    assert "(one, two)" in settings.problem
    assert "(one)" in settings.problem
    assert "keep one list, in [tool.veridic]" in settings.problem


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        ("trust_polices = one\n", "has no key 'trust_polices'"),
        ("trust_policies = ,\n", "must list policy names"),
        # The run time's rule (veridic.config.is_policy_name): the plugin took any name
        # that was not blank, so it passed a name the run time refuses.
        ("trust_policies = admin\u3164, one\n", "item 1 is 'admin\\u3164'"),
        ("trust_policies = one, ad\u200bmin\n", "item 2 is 'ad\\u200bmin'"),
    ],
)
def test_a_wrong_mypy_config_section_is_a_problem(
    tmp_path: Path, section: str, fragment: str
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.veridic]\n")
    settings = read_policy_settings(_options(_ini(tmp_path, section)))
    assert settings.problem is not None
    assert fragment in settings.problem


def test_tool_veridic_mypy_in_a_pyproject_used_as_mypy_config(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[tool.mypy]\nplugins = ["veridic.mypy"]\n\n[tool.veridic-mypy]\ntrust-policies = ["one"]\n'
    )
    assert read_policy_settings(_options(pyproject)).names == frozenset({"one"})


def test_the_section_is_used_by_a_real_mypy_run(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.veridic]\n")
    ini = tmp_path / "mypy.ini"
    ini.write_text(
        f"[mypy]\nstrict = True\nplugins = veridic.mypy\nmypy_path = {ROOT / 'src'}\n"
        "\n[mypy-veridic.*]\nfollow_imports = silent\n"
        "\n[mypy-anthropic.*,openai.*]\nfollow_imports = skip\n"
        "\n[veridic-mypy]\ntrust_policies = legacy\n"
    )
    module = tmp_path / "uses_policies.py"
    module.write_text(
        "from veridic import TrustPolicy\n"
        "\n"
        'TrustPolicy("legacy")\n'
        'TrustPolicy("other")  # E: [veridic-policy]\n'
    )
    reported, _ = run_mypy([module], ini, cache=tmp_path / "cache")
    assert_matches(module, reported)
