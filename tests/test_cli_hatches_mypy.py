"""``veridic hatches`` reads mypy's configuration with mypy's own parser, and agrees without it.

A setting mypy ignores must not be listed as turning a check off, and every
setting mypy honours must be. With mypy importable, mypy's ``config_parser``
reads; without it, a reader written by hand after it. Each case here runs
both ways (the ``reader`` fixture hides ``mypy.config_parser`` for the hand
reader) and expects the same answer, and the properties generate
configurations and comments on which the two must agree.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.checks import _mypy_settings
from veridic.cli import main
from veridic.hatches import Hatch, scan_mypy_config, scan_source

_HIDDEN = ("mypy.config_parser",)


@contextlib.contextmanager
def hand_reader() -> Iterator[None]:
    """Make ``import mypy.config_parser`` fail, as in an environment without mypy."""
    saved = {name: sys.modules.get(name) for name in _HIDDEN}
    for name in _HIDDEN:
        sys.modules[name] = None  # type: ignore[assignment]  # the import machinery's "absent"
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@pytest.fixture(params=["mypy", "hand"])
def reader(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "mypy":
        assert _mypy_settings.mypy_reads()
        yield "mypy"
        return
    with hand_reader():
        assert not _mypy_settings.mypy_reads()
        yield "hand"


def project(root: Path, files: dict[str, str]) -> Path:
    (root / ".git").mkdir()
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def hatches(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, root: Path
) -> tuple[int, list[dict[str, object]]]:
    monkeypatch.chdir(root)
    monkeypatch.setattr("veridic.config._current", None)
    code = main(["hatches", ".", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    return code, [*report["findings"], *report["listed"]]


def listed(items: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(i["kind"], i["file"], i["line"], tuple(i.get("codes", ()))) for i in items]  # type: ignore[arg-type]


_INI = "[mypy]\nplugins = veridic.mypy\n"
_TOML = '[tool.mypy]\nplugins = ["veridic.mypy"]\n'

# (configuration files, what is listed: (kind, file, line, codes))
_CONFIG_CASES = {
    "ini-key-in-any-case-is-read": (
        {"mypy.ini": _INI + "Disable_Error_Code = veridic-any\n"},
        [("config-disable-code", "mypy.ini", 3, ("veridic-any",))],
    ),
    "ini-key-with-dashes-is-not-read": (
        {"mypy.ini": _INI + "disable-error-code = veridic-any\n"},
        [],
    ),
    "toml-key-in-another-case-is-not-read": (
        {"pyproject.toml": _TOML + 'Disable_Error_Code = ["veridic-any"]\n'},
        [],
    ),
    "toml-key-with-dashes-is-not-read": (
        {"pyproject.toml": _TOML + 'disable-error-code = ["veridic-any"]\n'},
        [],
    ),
    "toml-ignore-errors-in-another-case-is-not-read": (
        {
            "pyproject.toml": _TOML
            + '[[tool.mypy.overrides]]\nmodule = "gen.*"\nIgnore_Errors = true\n'
        },
        [],
    ),
    "enable-in-the-same-section-wins": (
        {"mypy.ini": _INI + "disable_error_code = veridic-any\nenable_error_code = veridic-any\n"},
        [],
    ),
    "enable-of-another-code-leaves-the-disable": (
        {
            "mypy.ini": _INI + "[mypy-legacy]\ndisable_error_code = veridic-any, veridic-forge\n"
            "enable_error_code = veridic-forge\n"
        },
        [("config-disable-code", "mypy.ini", 4, ("veridic-any",))],
    ),
    "pattern-mypy-refuses-is-dropped": (
        {"mypy.ini": _INI + "[mypy-legacy?]\nignore_errors = True\n"},
        [],
    ),
    "pattern-with-a-star-inside-a-part-is-dropped": (
        {"mypy.ini": _INI + "[mypy-leg*cy]\ndisable_error_code = veridic-any\n"},
        [],
    ),
    "later-ini-section-replaces-a-pattern": (
        {
            "mypy.ini": _INI + "[mypy-a,b]\ndisable_error_code = veridic-any\n"
            "[mypy-b]\nwarn_return_any = True\n"
        },
        [("config-disable-code", "mypy.ini", 4, ("veridic-any",))],
    ),
    "toml-overrides-of-one-module-merge": (
        {
            "pyproject.toml": _TOML
            + '[[tool.mypy.overrides]]\nmodule = "legacy"\ndisable_error_code = ["veridic-any"]\n'
            '[[tool.mypy.overrides]]\nmodule = ["legacy"]\nenable_error_code = ["veridic-any"]\n'
        },
        [],
    ),
    "plugins-in-a-per-module-section-do-not-load": (
        {"mypy.ini": "[mypy]\nstrict = True\n[mypy-app]\nplugins = veridic.mypy\n"},
        [("plugin-missing", "mypy.ini", 1, ())],
    ),
    "section-header-in-another-case-is-not-mypys": (
        {"mypy.ini": "[MYPY]\nplugins = veridic.mypy\n"},
        [("plugin-missing", "mypy.ini", 1, ())],
    ),
    "no-ignore-errors-false-ignores": (
        {"mypy.ini": _INI + "[mypy-gen.*]\nno_ignore_errors = False\n"},
        [("config-ignore-errors", "mypy.ini", 4, ())],
    ),
    "toml-ignore-errors-as-a-string": (
        {"pyproject.toml": _TOML + 'ignore_errors = "yes"\n'},
        [("config-ignore-errors", "pyproject.toml", 3, ())],
    ),
    "value-mypy-refuses-is-skipped": (
        {"mypy.ini": _INI + "ignore_errors = maybe\n"},
        [],
    ),
    "toml-codes-that-are-not-a-list-of-strings": (
        {"pyproject.toml": _TOML + 'disable_error_code = ["veridic-any", 1]\n'},
        [],
    ),
}


@pytest.mark.parametrize(
    ("files", "expected"), list(_CONFIG_CASES.values()), ids=list(_CONFIG_CASES)
)
def test_configuration_is_read_as_mypy_reads_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    reader: str,
    files: dict[str, str],
    expected: list[tuple[object, ...]],
) -> None:
    code, items = hatches(capsys, monkeypatch, project(tmp_path, files))
    assert listed(items) == expected
    assert code == (1 if any(kind == "plugin-missing" for kind, *_ in expected) else 0)


def test_scope_names_only_the_patterns_the_setting_still_holds_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    files = _CONFIG_CASES["later-ini-section-replaces-a-pattern"][0]
    _, [item] = hatches(capsys, monkeypatch, project(tmp_path, files))
    assert "for the modules matching a" in str(item["message"])
    assert "matching a, b" not in str(item["message"])


def inline(*comments: str) -> str:
    return "import os\n" + "\n".join(comments) + "\nx = 1\n"


# (comment lines, what is listed: (kind, line, codes)); the comments start on line 2
_INLINE_CASES = {
    "name-in-any-case-is-read": (
        ['# mypy: Disable_Error_Code="veridic-any"'],
        [("inline-disable-code", 2, ("veridic-any",))],
    ),
    "unquoted-list-stops-at-the-comma": (
        ["# mypy: disable-error-code=veridic-literal,veridic-forge"],
        [("inline-disable-code", 2, ("veridic-literal",))],
    ),
    "codes-in-the-order-written": (
        ['# mypy: disable-error-code="veridic-policy, veridic-any"'],
        [("inline-disable-code", 2, ("veridic-policy", "veridic-any"))],
    ),
    "enable-on-a-later-line-turns-it-back-on": (
        [
            '# mypy: disable-error-code="veridic-any, veridic-forge"',
            '# mypy: enable-error-code="veridic-any"',
        ],
        [("inline-disable-code", 2, ("veridic-forge",))],
    ),
    "enable-on-an-earlier-line-wins-too": (
        ['# mypy: enable-error-code="veridic-any"', '# mypy: disable-error-code="veridic-any"'],
        [],
    ),
    "last-ignore-errors-wins-off": (
        ["# mypy: ignore-errors", "# mypy: ignore-errors=False"],
        [],
    ),
    "last-ignore-errors-wins-on": (
        ["# mypy: no-ignore-errors", "# mypy: ignore_errors = yes"],
        [("inline-ignore-errors", 3, ())],
    ),
    "invalid-boolean-is-skipped": (["# mypy: ignore-errors=maybe"], []),
    "unterminated-quote": (['# mypy: disable-error-code="veridic-any'], []),
    "not-at-the-start-of-the-line": (['  # mypy: disable-error-code="veridic-any"'], []),
}


@pytest.mark.parametrize(
    ("comments", "expected"), list(_INLINE_CASES.values()), ids=list(_INLINE_CASES)
)
def test_inline_comments_are_read_as_mypy_reads_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    reader: str,
    comments: list[str],
    expected: list[tuple[object, ...]],
) -> None:
    root = project(tmp_path, {"mypy.ini": _INI, "app.py": inline(*comments)})
    code, items = hatches(capsys, monkeypatch, root)
    assert code == 0
    assert [(i["kind"], i["line"], tuple(i.get("codes", ()))) for i in items] == expected  # type: ignore[arg-type]


# --- the two readers agree, for generated configurations and comments ---------------------------

_keys = st.sampled_from(
    [
        "disable_error_code",
        "Disable_Error_Code",
        "disable-error-code",
        "enable_error_code",
        "ignore_errors",
        "no_ignore_errors",
        "plugins",
    ]
)
_code_lists = st.lists(
    st.sampled_from(["veridic-any", "veridic-forge", "veridic-literal", "misc", ""]), max_size=3
)
_booleans = st.sampled_from(["True", "false", "yes", "0", "on", "maybe"])
_toml_booleans = st.sampled_from(["true", "false", '"yes"', "1"])
_patterns = st.sampled_from(["app", "legacy.*", "a,b", "b", "gen?", "le*gacy", "*.tests"])


@st.composite
def ini_configs(draw: st.DrawFn) -> str:
    lines = ["[mypy]"]
    for title in [None, *draw(st.lists(_patterns, max_size=3, unique=True))]:
        if title is not None:
            lines.append(f"[mypy-{title}]")
        for key in draw(st.lists(_keys, max_size=3, unique_by=str.lower)):
            is_list = "code" in key.lower() or key == "plugins"
            value = ", ".join(draw(_code_lists)) if is_list else draw(_booleans)
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


@st.composite
def toml_configs(draw: st.DrawFn) -> str:
    def table() -> list[str]:
        found = []
        for key in draw(st.lists(_keys, max_size=3, unique=True)):
            if "code" in key.lower():
                found.append(f"{key} = {json.dumps(draw(_code_lists))}")
            elif key != "plugins":
                found.append(f"{key} = {draw(_toml_booleans)}")
        return found

    lines = ["[tool.mypy]", 'plugins = ["veridic.mypy"]', *table()]
    for module in draw(st.lists(_patterns, max_size=3)):
        lines += ["[[tool.mypy.overrides]]", f"module = {json.dumps(module)}", *table()]
    return "\n".join(lines) + "\n"


def _both(scan: object) -> tuple[object, object]:
    assert callable(scan)
    by_mypy = scan()
    with hand_reader():
        by_hand = scan()
    return by_mypy, by_hand


def _config_summary(root: Path) -> list[tuple[str, int, tuple[str, ...], str]]:
    """What is listed; for a file mypy cannot parse, not the parser's own words."""
    return [
        (h.kind, h.line, h.codes, "" if h.kind == "config-unparsable" else h.why)
        for h in scan_mypy_config(root)
    ]


@settings(max_examples=80, deadline=None)
@given(
    config=st.one_of(
        ini_configs().map(lambda t: ("mypy.ini", t)),
        toml_configs().map(lambda t: ("pyproject.toml", t)),
    )
)
def test_property_both_readers_list_the_same_configuration_hatches(
    config: tuple[str, str],
) -> None:
    name, text = config
    with tempfile.TemporaryDirectory() as directory:
        root = project(Path(directory), {name: text})
        by_mypy, by_hand = _both(lambda: _config_summary(root))
    assert by_mypy == by_hand, text


_entries = st.one_of(
    st.builds(
        lambda key, codes, quoted: f"{key}=" + (f'"{codes}"' if quoted else codes),
        st.sampled_from(["disable-error-code", "Disable_Error_Code", "enable-error-code"]),
        _code_lists.map(", ".join),
        st.booleans(),
    ),
    st.builds(
        lambda key, value: key if value is None else f"{key}={value}",
        st.sampled_from(["ignore-errors", "no-ignore-errors", "IGNORE_ERRORS"]),
        st.one_of(st.none(), _booleans),
    ),
    st.sampled_from(["warn-unreachable", "strict", "python_version=3.8"]),
)
_comment_lines = st.lists(_entries, min_size=1, max_size=3).map(
    lambda parts: "# mypy: " + ", ".join(parts)
)


def _source_summary(source: str) -> list[Hatch]:
    return list(scan_source(source, "app.py"))


@settings(max_examples=150, deadline=None)
@given(comments=st.lists(_comment_lines, min_size=1, max_size=3))
def test_property_both_readers_list_the_same_inline_hatches(comments: list[str]) -> None:
    source = inline(*comments)
    by_mypy, by_hand = _both(lambda: _source_summary(source))
    assert by_mypy == by_hand, source


def test_configuration_mypy_crashes_on_is_a_finding_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one documented difference: mypy's parser raises TypeError on this value.
    root = project(tmp_path, {"pyproject.toml": _TOML + "exclude = 1\n"})
    code, items = hatches(capsys, monkeypatch, root)
    assert code == 1
    [item] = items
    assert (item["kind"], item["file"]) == ("config-unparsable", "pyproject.toml")
    assert "mypy's configuration parser crashes on this file (TypeError:" in str(item["message"])
    assert "mypy stops before checking anything" in str(item["message"])
    with hand_reader():
        code, items = hatches(capsys, monkeypatch, root)
    assert (code, items) == (0, [])
