"""``[tool.veridic]`` is read strictly: a wrong value or an unknown key is a usage error (exit 2).

A setting that does not say what the team meant must stop the command with a
message (the key, the file, what was found, what to write), never run with a
default, and never end in a traceback with exit 1. Every test runs
``veridic.cli.main`` in this process with ``--config``, or with the file found
above the working directory.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.cli import main
from veridic.config import is_policy_name

FIXTURES = Path(__file__).parent / "cli_fixtures"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command may configure this process's trust policies and sys.path: undo it after."""
    monkeypatch.chdir(FIXTURES)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr("veridic.config._current", None)


def config_file(directory: Path, body: str) -> Path:
    path = directory / "pyproject.toml"
    path.write_text("[project]\nname = 'app'\n\n[tool.veridic]\n" + body + "\n", encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_usage_error(done: tuple[int, str, str], *parts: str) -> None:
    code, out, err = done
    assert code == 2, out + err
    assert out == ""
    assert "Traceback" not in err
    for part in parts:
        assert part in err, err


# --- every key, several wrong values ---------------------------------------------------------

_WRONG = [
    # (key, TOML value, what the message says was found)
    ("trust-policies", '"legacy-prompts"', "'legacy-prompts' (a string)"),
    ("trust-policies", "1", "1 (an integer)"),
    ("trust-policies", "true", "True (a boolean)"),
    ("trust-policies", '["a", 2]', "item 2 is 2 (an integer)"),
    ("trust-policies", '["a", ""]', "item 2 is an empty name"),
    ("trust-policies", '[["a"]]', "item 1 is ['a'] (an array)"),
    ("trust-policies", '{ name = "a" }', "{'name': 'a'} (a table)"),
    ("similarity-threshold", '"high"', "'high' (a string)"),
    ("similarity-threshold", "0", "0 (an integer)"),
    ("similarity-threshold", "1.5", "1.5 (a float)"),
    ("similarity-threshold", "-0.2", "-0.2 (a float)"),
    ("similarity-threshold", "nan", "nan (a float)"),
    ("similarity-threshold", "inf", "inf (a float)"),
    ("similarity-threshold", "true", "True (a boolean)"),
    ("similarity-threshold", "[0.7]", "[0.7] (an array)"),
    ("similarity-threshold", "1979-05-27", "(a date-time)"),
    ("siblings", '["archive_ticket", "close_ticket"]', "group 1 is 'archive_ticket' (a string)"),
    ("siblings", '"archive_ticket"', "'archive_ticket' (a string)"),
    ("siblings", '[["archive_ticket"]]', "group 1 names 1 different tool"),
    ("siblings", '[["a", "a"]]', "group 1 names 1 different tool"),
    ("siblings", '[["a", 3]]', "group 1 holds 3 (an integer)"),
    ("siblings", '[["a", ""]]', "group 1 holds an empty name"),
    ("siblings", '[["a", "b"], "c"]', "group 2 is 'c' (a string)"),
    ("siblings", '{ a = "b" }', "(a table)"),
    ("manifest", "1", "1 (an integer)"),
    ("manifest", '""', "'' (a string)"),
    ("manifest", '["veridic-manifest.json"]', "(an array)"),
    ("manifest", "false", "False (a boolean)"),
]
_FIXES = {
    "trust-policies": 'write it as trust-policies = ["legacy-prompts"]',
    "similarity-threshold": "write it as similarity-threshold = 0.7",
    "siblings": 'write it as siblings = [["archive_ticket", "close_ticket"]]',
    "manifest": 'write it as manifest = "veridic-manifest.json"',
}


@pytest.mark.parametrize(("key", "value", "found"), _WRONG, ids=[f"{k}={v}" for k, v, _ in _WRONG])
def test_wrong_value_of_each_key_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str, found: str
) -> None:
    path = config_file(tmp_path, f"{key} = {value}")
    assert_usage_error(
        run(capsys, "lint", "clean_app:registry", "--config", str(path)),
        f"[tool.veridic] {key} in {path} must be",  # what, and where
        f"got {found}" if not found.startswith(("item", "group", "(")) else found,  # found
        _FIXES[key],  # what to write instead
    )


@pytest.mark.parametrize("command", ["lint", "check", "manifest", "hatches"])
def test_every_command_refuses_a_malformed_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = config_file(tmp_path, 'similarity-threshold = "high"')
    args = {
        "lint": ["clean_app:registry"],
        "check": ["clean_app:registry"],
        "manifest": ["clean_app:registry", "-o", str(tmp_path / "m.json")],
        "hatches": ["clean_app.py"],
    }[command]
    assert_usage_error(
        run(capsys, command, *args, "--config", str(path)), "similarity-threshold", str(path)
    )
    assert not (tmp_path / "m.json").exists()


def test_malformed_configuration_found_above_the_working_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config_file(tmp_path, "trust-policies = 1")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path / "src")
    assert_usage_error(run(capsys, "hatches", "app.py"), f"[tool.veridic] trust-policies in {path}")


def test_malformed_working_directory_configuration_is_a_usage_error_beside_a_good_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # --config names a good file, but the run time's trust policies come from the
    # pyproject.toml above the working directory, which is malformed.
    (tmp_path / "good").mkdir()
    good = config_file(tmp_path / "good", 'trust-policies = ["legacy-prompts"]')
    broken = config_file(tmp_path, 'trust-policies = "legacy-prompts"')
    (tmp_path / "app.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert_usage_error(
        run(capsys, "hatches", "app.py", "--config", str(good)),
        f"[tool.veridic] trust-policies in {broken}",
        "write it as trust-policies",
    )


# --- unknown keys ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "guess"),
    [
        ("trust_policies", "did you mean 'trust-policies'?"),
        ("trust-policy", "did you mean 'trust-policies'?"),
        ("similarity_threshold", "did you mean 'similarity-threshold'?"),
        ("Similarity-Threshold", "did you mean 'similarity-threshold'?"),
        ("sibling", "did you mean 'siblings'?"),
        ("manifests", "did you mean 'manifest'?"),
        ("colour", ""),
    ],
)
def test_unknown_key_is_a_usage_error_that_suggests_the_known_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, guess: str
) -> None:
    path = config_file(tmp_path, f'{json.dumps(key)} = ["x"]')
    assert_usage_error(
        run(capsys, "hatches", "clean_app.py", "--config", str(path)),
        f"[tool.veridic] in {path} has an unknown key {key!r}",  # what, where
        guess,
        "veridic reads only trust-policies, similarity-threshold, siblings, manifest",
        "rename the key, or remove it",  # what to do
    )
    if not guess:
        assert "did you mean" not in capsys.readouterr().err


# --- the file and the table themselves -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.veridic\n", "is not valid TOML"),
        (b"[tool.veridic]\nmanifest = '\xff'\n", "is not valid TOML"),
        ("tool = 1\n", "tool in {path} must be a table, got 1 (an integer)"),
        ("[tool]\nveridic = 'yes'\n", "[tool.veridic] in {path} must be a table, got 'yes'"),
        ("[tool]\nveridic = [1]\n", "[tool.veridic] in {path} must be a table"),
    ],
    ids=["syntax", "not-utf-8", "tool-not-a-table", "section-a-string", "section-an-array"],
)
def test_file_or_section_that_cannot_be_read_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, message: str
) -> None:
    path = tmp_path / "pyproject.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    assert_usage_error(
        run(capsys, "hatches", "clean_app.py", "--config", str(path)),
        message.format(path=path) if "{path}" in message else f"{path} {message}",
    )


def test_directory_given_as_config_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error(
        run(capsys, "hatches", "clean_app.py", "--config", str(tmp_path)),
        "is a folder",  # it said "no such file"
        "pass the pyproject.toml that holds [tool.veridic]",
    )


# --- what is accepted ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "",
        "trust-policies = []",
        'trust-policies = ["legacy-prompts", "admin-prompts"]',
        "similarity-threshold = 1",
        "similarity-threshold = 0.05",
        "siblings = []",
        'siblings = [["archive_ticket", "close_ticket", "reopen_ticket"]]',
        'manifest = "snapshots/veridic.json"',
    ],
)
def test_well_formed_values_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    path = config_file(tmp_path, body)
    code, out, err = run(capsys, "lint", "clean_app:registry", "--config", str(path))
    assert code in (0, 1), err  # the lint's findings, if any: the configuration was read
    assert "Traceback" not in err
    assert out.startswith("veridic lint clean_app:registry:")


# --- for every value -----------------------------------------------------------------------

_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), inner, max_size=3)
    ),
    max_leaves=8,
)


def toml_value(value: object) -> str:
    """``value`` written as a TOML inline value (the test's own small writer)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"


def acceptable(key: str, value: object) -> bool:
    """What the documentation says each key takes."""
    if key == "trust-policies":  # names a reviewer reads as they are (docs/config)
        return isinstance(value, list) and all(is_policy_name(n) for n in value)
    if key == "similarity-threshold":
        return (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and not math.isnan(value)
            and 0 < value <= 1
        )
    if key == "siblings":
        return isinstance(value, list) and all(
            isinstance(g, list)
            and all(isinstance(n, str) and n.strip() for n in g)
            and len(set(g)) >= 2
            for g in value
        )
    return isinstance(value, str) and bool(value.strip())


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(["trust-policies", "similarity-threshold", "siblings", "manifest"]),
    value=_values,
)
def test_property_any_value_is_accepted_or_a_usage_error_naming_the_key(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: object
) -> None:
    directory = tmp_path_factory.mktemp("config")
    path = config_file(directory, f"{key} = {toml_value(value)}")
    (directory / "app.py").write_text("x = 1\n")
    out_err = _Capture()
    with out_err:
        code = main(["hatches", str(directory / "app.py"), "--config", str(path)])
    if acceptable(key, value):
        assert code == 0, out_err.err
    else:
        assert code == 2
        assert out_err.out == ""
        assert f"[tool.veridic] {key} in {path}" in out_err.err
        assert f"write it as {key} = " in out_err.err


class _Capture:
    """stdout and stderr of one call (capsys cannot be reset between hypothesis examples)."""

    def __enter__(self) -> _Capture:
        import contextlib
        import io

        self._out, self._err = io.StringIO(), io.StringIO()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(contextlib.redirect_stdout(self._out))
        self._stack.enter_context(contextlib.redirect_stderr(self._err))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self.out, self.err = self._out.getvalue(), self._err.getvalue()
