"""SDK calls outside the gateway, checked by the type checkers: the cases in tests/typecheck/sdk/.

The cases call the real ``openai`` and ``anthropic`` packages. Marks as in
tests/test_typecheck.py: ``# E: [code] fragment`` for a mypy error (with the
``veridic.mypy`` plugin), ``# P: [rule]`` for a pyright error with the overlay
stubs (src/veridic/_sdk_stubs/, what ``veridic stubs DIR`` writes) on its
``stubPath``; a line without a mark must get no error;
a mark on a comment line of its own is for the next line of code.

All cases go through one mypy run, with a cache kept in
``.mypy_cache/sdk-typecheck-tests`` (the SDKs are large: a cold run takes
tens of seconds, a warm one a few), and one pyright run.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest
from mypy import api as mypy_api
from mypy import errorcodes as mypy_codes

from veridic.mypy import errorcodes
from veridic.mypy._sdk import target

pytest.importorskip("openai")
pytest.importorskip("anthropic")

ROOT: Final = Path(__file__).resolve().parents[1]
CASES: Final = ROOT / "tests" / "typecheck" / "sdk"
STUBS: Final = ROOT / "src" / "veridic" / "_sdk_stubs"
CACHE: Final = (
    Path(os.environ["VERIDIC_TYPECHECK_CACHE"]).with_name("sdk-typecheck-tests")
    if os.environ.get("VERIDIC_TYPECHECK_CACHE")
    else ROOT / ".mypy_cache" / "sdk-typecheck-tests"
)
"""mypy's cache (next to ``VERIDIC_TYPECHECK_CACHE`` when that is set, as in test_typecheck)."""

_MARK: Final = re.compile(r"#\s*([EP]):\s*\[([\w-]+)\]\s*([^#]*)")
_REPORTED: Final = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+): error: (?P<message>.*?)  \[(?P<code>[\w-]+)\]$"
)


@dataclass(frozen=True, slots=True)
class Mark:
    line: int
    code: str
    fragment: str


@dataclass(frozen=True, slots=True)
class Reported:
    path: Path
    line: int
    code: str
    message: str


def marks(path: Path, tool: str) -> list[Mark]:
    found: list[Mark] = []
    pending: list[tuple[str, str, str]] = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        on_line = _MARK.findall(text)
        if text.strip().startswith("#"):
            pending += on_line
            continue
        if not text.strip():
            continue
        found += [
            Mark(number, code, fragment.strip())
            for kind, code, fragment in [*pending, *on_line]
            if kind == tool
        ]
        pending = []
    return found


def case_files() -> list[Path]:
    return sorted(p for p in CASES.glob("*.py") if not p.name.startswith("_"))


@pytest.fixture(scope="session")
def mypy_run(tmp_path_factory: pytest.TempPathFactory) -> list[Reported]:
    config = tmp_path_factory.mktemp("sdk-mypy") / "mypy.ini"
    config.write_text(
        "[mypy]\n"
        "strict = True\n"
        "python_version = 3.11\n"
        "plugins = veridic.mypy\n"
        f"mypy_path = {ROOT / 'src'}\n"
        "warn_unused_ignores = True\n"
        "enable_error_code = ignore-without-code\n"
    )
    out, err, _status = mypy_api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(CACHE),
            "--show-absolute-path",
            "--no-pretty",
            "--no-error-summary",
            *map(str, case_files()),
            str(CASES / "_support.py"),
        ]
    )
    assert not err, err
    reported = []
    for text in out.splitlines():
        match = _REPORTED.match(text)
        if match is None:
            assert ": note: " in text, f"unexpected mypy output: {text}"
            continue
        reported.append(
            Reported(
                Path(match["path"]).resolve(), int(match["line"]), match["code"], match["message"]
            )
        )
    return reported


@pytest.mark.parametrize("case", case_files(), ids=lambda p: p.stem)
def test_mypy_reports_exactly_the_marked_errors(case: Path, mypy_run: list[Reported]) -> None:
    expected = marks(case, "E")
    mine = [r for r in mypy_run if r.path == case.resolve()]
    got = Counter((r.line, r.code) for r in mine)
    want = Counter((m.line, m.code) for m in expected)
    assert got == want, "\n".join(
        [f"{case.name}: mypy and the # E: marks disagree", *map(str, mine)]
    )
    for mark in expected:
        messages = [r.message for r in mine if (r.line, r.code) == (mark.line, mark.code)]
        assert any(mark.fragment in m for m in messages), (case.name, mark, messages)


def test_support_module_has_no_errors(mypy_run: list[Reported]) -> None:
    assert [r for r in mypy_run if r.path == (CASES / "_support.py").resolve()] == []


def test_every_sdk_message_says_what_was_wrong_and_what_to_do(mypy_run: list[Reported]) -> None:
    # Where: mypy puts file:line in front and the message names the SDK method.
    # What: the offending expression and its type. What to do: mint, or use the gateway.
    sdk = [r for r in mypy_run if r.code == errorcodes.SDK.code]
    assert sdk
    for reported in sdk:
        assert re.match(r"(anthropic|openai) [\w.]+\(\) got ", reported.message), reported
        assert re.search(r'of type "[^"]+', reported.message), reported
        assert "mint it with instruction()" in reported.message, reported
        assert "veridic.ModelGateway" in reported.message, reported


def test_sdk_error_code_is_registered_with_mypy_and_documented() -> None:
    code = errorcodes.SDK
    assert mypy_codes.error_codes[code.code] is code
    assert code.code == "veridic-sdk"
    assert code.description
    assert "``veridic-sdk``" in (errorcodes.__doc__ or "")


# The fullnames mypy gives the SDK methods the rule covers, as the installed SDKs define them.
COVERED: Final = [
    ("anthropic.resources.messages.messages", "Messages", "create"),
    ("anthropic.resources.messages.messages", "AsyncMessages", "create"),
    ("anthropic.resources.messages.messages", "Messages", "stream"),
    ("anthropic.resources.messages.messages", "MessagesWithRawResponse", "create"),
    ("anthropic.resources.messages.messages", "AsyncMessagesWithStreamingResponse", "create"),
    ("anthropic.resources.beta.messages.messages", "Messages", "create"),
    ("anthropic.resources.beta.messages.messages", "AsyncMessages", "tool_runner"),
    ("openai.resources.responses.responses", "Responses", "create"),
    ("openai.resources.responses.responses", "AsyncResponses", "stream"),
    ("openai.resources.responses.responses", "ResponsesWithRawResponse", "create"),
    ("openai.resources.beta.responses.responses", "Responses", "create"),
    ("openai.resources.chat.completions.completions", "Completions", "create"),
    ("openai.resources.chat.completions.completions", "AsyncCompletions", "parse"),
]
NOT_COVERED: Final = [
    ("anthropic.resources.messages.messages", "Messages", "count_tokens"),
    ("anthropic.resources.messages.batches", "Batches", "create"),
    ("openai.resources.chat.completions.completions", "Completions", "retrieve"),
    ("openai.resources.beta.assistants", "Assistants", "create"),
]


def _has(module: str, cls: str, method: str) -> bool:
    found = importlib.import_module(module)
    owner = getattr(found, cls, None)
    if owner is None:
        return False
    if method in vars(owner):
        return True
    # The raw and streaming wrappers bind their methods in __init__.
    init = vars(owner).get("__init__")
    return init is not None and f"self.{method} =" in _source(found)


def _source(module: ModuleType) -> str:
    return Path(str(module.__file__)).read_text()


@pytest.mark.parametrize(("module", "cls", "method"), COVERED)
def test_the_rule_covers_the_sdk_methods_that_send_a_prompt(
    module: str, cls: str, method: str
) -> None:
    assert _has(module, cls, method), f"{module}.{cls}.{method} is not in the installed SDK"
    assert target(f"{module}.{cls}.{method}") is not None


@pytest.mark.parametrize(("module", "cls", "method"), NOT_COVERED)
def test_the_rule_leaves_other_sdk_methods_alone(module: str, cls: str, method: str) -> None:
    assert target(f"{module}.{cls}.{method}") is None


# --- pyright with the overlay stubs ---------------------------------------------------------


@pytest.fixture(scope="session")
def pyright_run(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Counter[tuple[int, str]]]:
    binary = Path(sys.executable).parent / "basedpyright"
    if not shutil.which(str(binary)):
        pytest.skip("basedpyright is not installed: pip install -e . --group dev")
    config = tmp_path_factory.mktemp("sdk-pyright") / "pyrightconfig.json"
    config.write_text(
        json.dumps(
            {
                "typeCheckingMode": "standard",
                "pythonVersion": "3.11",
                "stubPath": str(STUBS),
                "extraPaths": [str(CASES), str(ROOT / "src")],
            }
        )
    )
    result = subprocess.run(
        [
            str(binary),
            "--outputjson",
            "--pythonpath",
            sys.executable,
            "--project",
            str(config),
            *map(str, case_files()),
            str(CASES / "_support.py"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    found: dict[Path, Counter[tuple[int, str]]] = {}
    for diagnostic in json.loads(result.stdout)["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            path = Path(diagnostic["file"]).resolve()
            line = diagnostic["range"]["start"]["line"] + 1
            found.setdefault(path, Counter())[(line, diagnostic.get("rule", "error"))] += 1
    return found


@pytest.mark.parametrize("case", [*case_files(), CASES / "_support.py"], ids=lambda p: p.stem)
def test_pyright_with_the_stubs_reports_exactly_its_marked_lines(
    case: Path, pyright_run: dict[Path, Counter[tuple[int, str]]]
) -> None:
    # pyright checks a dict literal against the narrowed message type as a whole, so it
    # reports the list argument's line; it has no rule for Any, and a variable typed with
    # the SDK's (narrowed) message union was checked where it was built.
    want = Counter((m.line, m.code) for m in marks(case, "P"))
    assert pyright_run.get(case.resolve(), Counter()) == want


# --- the stubs are generated from the installed SDKs -----------------------------------------


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_stubs", ROOT / "scripts" / "generate_stubs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_stubs", module)
    spec.loader.exec_module(module)
    return module


def test_stubs_are_generated_from_the_installed_sdk_versions() -> None:
    problems = _generator().stale(STUBS)
    assert problems == [], (
        "src/veridic/_sdk_stubs/ does not match the installed SDKs ("
        + ", ".join(problems[:5])
        + "): run python scripts/generate_stubs.py and commit src/veridic/_sdk_stubs/"
    )


def test_stale_stubs_are_reported(tmp_path: Path) -> None:
    generator = _generator()
    shutil.copytree(STUBS, tmp_path / "stubs")
    versions = tmp_path / "stubs" / "VERSIONS"
    versions.write_text(versions.read_text().replace("==", "==0.0.0+"))
    (tmp_path / "stubs" / "openai" / "extra.pyi").write_text("")
    assert generator.stale(tmp_path / "stubs") == [
        "not generated: openai/extra.pyi",
        "differs: VERSIONS",
    ]
