"""``--format sarif``: ``veridic lint``, ``check`` and ``hatches`` as SARIF 2.1.0 for code scanning.

Each test writes a small application into a temporary project and runs
``veridic.cli.main`` in this process, from the project's root, as a CI step
does. Every log is validated against the official SARIF 2.1.0 schema
(tests/fixtures/sarif-schema-2.1.0.json, the OASIS errata01 schema, copied
unchanged from oasis-tcs/sarif-spec, sarif-2.1/schema/), and against what
GitHub's upload (github/codeql-action/upload-sarif) needs beyond the schema:
a physical location with a relative URI and a start line on every result.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from veridic.cli import main

SCHEMA = json.loads(
    (Path(__file__).parent / "fixtures" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")
)

APP = '''
from veridic import Registry

registry = Registry("app")

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "What to search for."}},
    "required": ["q"],
}


@registry.tool(kind="write")
def archive_ticket(ticket_id: int) -> str:
    """Move a support ticket out of the open queue so agents no longer see it.

    Args:
        ticket_id: The ticket to move.
    """
    return f"archived {ticket_id}"


@registry.tool(kind="write")
def close_ticket(ticket_id: int) -> str:
    """Move a support ticket out of the open queue so agents no longer see it anymore.

    Args:
        ticket_id: The ticket to move.
    """
    return f"closed {ticket_id}"


@registry.tool(kind="query")
def list_users(team: str) -> str:
    return team


@registry.tool(kind="write", irreversible=True)
def purge_user(user_id: int) -> None:
    """Remove a user and everything they own.

    Args:
        user_id: The user to remove.
    """


# A built-in handler: Python knows no file or line for this tool.
registry.external(
    name="web_search",
    description="",
    input_schema=SEARCH_SCHEMA,
    handler=dict,
    kind="query",
    source="mcp:search",
)
'''

CLEAN = '''
from veridic import Registry

registry = Registry("clean")


@registry.tool(kind="query")
def find_user(email: str) -> str:
    """Find a user by email address.

    Args:
        email: The address to look up.
    """
    return email
'''

Write = Callable[..., str]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project in ``tmp_path`` with its own pyproject.toml; the cwd is its root."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr("veridic.config._current", None)
    return tmp_path


@pytest.fixture
def app(project: Path) -> Iterator[Write]:
    """Write a module into the project (a unique name unless given) and return its name."""
    written: list[str] = []

    def write(source: str, name: str | None = None) -> str:
        module = name or f"app_{uuid.uuid4().hex[:12]}"
        (project / f"{module}.py").write_text(textwrap.dedent(source))
        sys.modules.pop(module, None)
        written.append(module)
        return module

    yield write
    for name in written:
        sys.modules.pop(name, None)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def sarif(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out = run(capsys, *args, "--format", "sarif")
    log = json.loads(out)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert_github_accepts(log)
    return code, log


def assert_github_accepts(log: dict[str, Any]) -> None:
    """What GitHub's code-scanning upload needs beyond the schema, checked field by field."""
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run_,) = log["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "veridic"
    assert driver["version"] == importlib.metadata.version("veridic")
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == sorted(set(rule_ids))
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"]
        assert rule["fullDescription"]["text"]
        assert rule["help"]["text"]
    assert run_["automationDetails"]["id"].startswith("veridic/")
    for result in run_["results"]:
        assert result["ruleId"] == rule_ids[result["ruleIndex"]]
        assert result["level"] in ("error", "warning", "note")
        assert result["message"]["text"]
        physical = result["locations"][0]["physicalLocation"]
        uri = physical["artifactLocation"]["uri"]
        assert "\\" not in uri
        assert not uri.startswith("/")
        assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert physical["region"]["startLine"] >= 1
        assert len(result["partialFingerprints"]["veridic/v1"]) == 64


def line_of(source: str, text: str) -> int:
    """The 1-based line of ``text`` in the dedented ``source`` as written to disk."""
    lines = textwrap.dedent(source).splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)


def results(log: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = log["runs"][0]["results"]
    return found


def where(result: dict[str, Any]) -> tuple[str, str, int]:
    physical = result["locations"][0]["physicalLocation"]
    return result["ruleId"], physical["artifactLocation"]["uri"], physical["region"]["startLine"]


def test_lint_sarif_puts_each_finding_at_the_line_of_its_tool(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(APP)
    code, log = sarif(capsys, "lint", f"{name}:registry")
    assert code == 1
    file = f"{name}.py"
    decorator = {
        tool: line_of(APP, f"def {tool}(") - 1 for tool in ("archive_ticket", "list_users")
    }
    found = {(r["ruleId"], r["properties"].get("tool")): where(r) for r in results(log)}
    assert found[("near-duplicate", "archive_ticket")] == (
        "near-duplicate",
        file,
        decorator["archive_ticket"],
    )
    assert found[("missing-description", "list_users")] == (
        "missing-description",
        file,
        decorator["list_users"],
    )
    assert found[("undocumented-parameter", "list_users")][2] == decorator["list_users"]
    assert textwrap.dedent(APP).splitlines()[decorator["list_users"] - 1].startswith("@registry")


def test_severity_maps_to_the_sarif_level(app: Write, capsys: pytest.CaptureFixture[str]) -> None:
    _, log = sarif(capsys, "lint", f"{app(APP)}:registry")
    levels = {r["ruleId"]: r["level"] for r in results(log)}
    assert levels["near-duplicate"] == "error"
    assert levels["missing-description"] == "error"
    assert levels["irreversibility-unstated"] == "warning"


def test_each_code_found_has_one_rule_that_says_how_to_fix_it(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    _, log = sarif(capsys, "lint", f"{app(APP)}:registry")
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == sorted({r["ruleId"] for r in results(log)})
    by_id = {rule["id"]: rule for rule in rules}
    assert "siblings" in by_id["near-duplicate"]["help"]["text"]
    assert "docstring" in by_id["missing-description"]["help"]["text"]


def test_a_finding_without_a_line_keeps_its_tool_and_is_placed_at_the_registry_module(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(APP)
    _, log = sarif(capsys, "lint", f"{name}:registry")
    external = [r for r in results(log) if r["properties"].get("tool") == "web_search"]
    assert {r["ruleId"] for r in external} == {"missing-description"}
    (result,) = external
    location = result["locations"][0]
    assert location["logicalLocations"][0]["name"] == "web_search"
    assert where(result) == ("missing-description", f"{name}.py", 1)
    assert "placed at the registry's module" in result["properties"]["anchored"]
    assert "mcp:search" in result["message"]["text"]


def test_same_findings_give_byte_identical_sarif(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(APP)
    first = run(capsys, "lint", f"{name}:registry", "--format", "sarif")
    sys.modules.pop(name, None)
    second = run(capsys, "lint", f"{name}:registry", "--format", "sarif")
    assert first == second
    assert first[1].endswith("}\n")


def test_fingerprints_survive_code_moving_down_the_file(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"app_{uuid.uuid4().hex[:12]}"
    app(APP, name)
    _, before = sarif(capsys, "lint", f"{name}:registry")
    app("# a comment\n\n\n" + textwrap.dedent(APP), name)
    _, after = sarif(capsys, "lint", f"{name}:registry")

    def prints(log: dict[str, Any]) -> dict[tuple[str, str], str]:
        return {
            (r["ruleId"], r["message"]["text"].split("(")[0]): r["partialFingerprints"][
                "veridic/v1"
            ]
            for r in results(log)
        }

    lines = {where(r)[2] for r in results(before)} - {1}
    moved = {where(r)[2] for r in results(after)} - {1}
    assert moved == {line + 3 for line in lines}
    assert prints(before) == prints(after)
    assert len(set(prints(before).values())) == len(results(before))


def test_check_sarif_points_drift_at_the_changed_line_of_the_committed_manifest(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(CLEAN)
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    committed = json.loads((project / "manifest.json").read_text())
    committed["tools"]["find_user"]["risk"] = "mid"
    committed["risk_counts"] = {"low": 0, "mid": 1, "high": 0}
    (project / "manifest.json").write_text(json.dumps(committed, indent=2, sort_keys=True) + "\n")
    code, log = sarif(capsys, "check", f"{name}:registry", "--manifest", "manifest.json")
    assert code == 1
    lines = (project / "manifest.json").read_text().splitlines()
    drift = {r["properties"]["field"]: r for r in results(log) if r["ruleId"] == "drift"}
    risk_line = where(drift["risk"])
    assert risk_line[:2] == ("drift", "manifest.json")
    assert lines[risk_line[2] - 1].strip() == '"risk": "mid",'
    counts_line = where(drift["risk_counts"])[2]
    assert lines[counts_line - 1].strip().startswith('"risk_counts"')
    assert drift["risk"]["locations"][0]["logicalLocations"][0]["name"] == "tool find_user"
    assert drift["risk"]["level"] == "error"


def _longest_text(value: object) -> int:
    """The longest text anywhere in a JSON value, a key or a value."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((max(len(k), _longest_text(v)) for k, v in value.items()), default=0)
    if isinstance(value, list):
        return max((_longest_text(item) for item in value), default=0)
    return 0


def test_drift_of_a_megabyte_value_keeps_each_property_to_2000_characters(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committed manifest (or an MCP server's description) holding a text of megabytes:
    the alert's message was cut at 2000 characters, its properties copied the drift's old
    and new values whole, keys and values, and one such finding could lose every other
    alert of the run."""
    name = app(CLEAN)
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    committed = json.loads((project / "manifest.json").read_text())
    huge = "\u202e[a](https://evil.example)" + "x" * 1_000_000
    committed["tools"]["find_user"]["description"] = huge
    committed["risk_counts"] = {huge: 1, "low": 0}
    (project / "manifest.json").write_text(json.dumps(committed, indent=2, sort_keys=True) + "\n")
    code, log = sarif(capsys, "check", f"{name}:registry", "--manifest", "manifest.json")
    assert code == 1
    found = [r["properties"] for r in results(log) if r["ruleId"] == "drift"]
    drift = {properties["field"]: properties for properties in found}
    assert drift["description"]["before"] == f"{huge[:2000]}… ({len(huge)} chars)"
    assert drift["description"]["after"] == "Find a user by email address."  # short: whole
    assert f"{huge[:2000]}… ({len(huge)} chars)" in drift["risk_counts"]["before"]
    assert drift["risk_counts"]["before"]["low"] == 0  # the value's shape is kept
    assert max(_longest_text(r["properties"]) for r in results(log)) <= 2000 + len(
        f"… ({len(huge)} chars)"
    )


def test_drift_of_a_tool_named_with_a_megabyte_keeps_its_logical_location_short(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A committed manifest naming a tool of a megabyte, which the registry lacks: the
    finding's properties were clipped, but its logical location (name and fully qualified
    name) still copied the tool's name whole, twice, a result of two megabytes."""
    name = app(CLEAN)
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    committed = json.loads((project / "manifest.json").read_text())
    huge = "gone_" + "x" * 1_000_000
    committed["tools"][huge] = committed["tools"]["find_user"]
    (project / "manifest.json").write_text(json.dumps(committed, indent=2, sort_keys=True) + "\n")
    code, log = sarif(capsys, "check", f"{name}:registry", "--manifest", "manifest.json")
    assert code == 1
    (removed,) = [r for r in results(log) if r["ruleId"] == "drift"]
    (logical,) = removed["locations"][0]["logicalLocations"]
    clipped = f"tool {huge[:1995]}… ({len(huge) + 5} chars)"
    assert logical == {"name": clipped, "fullyQualifiedName": clipped, "kind": "function"}
    assert len(json.dumps(removed)) < 10_000


HATCHES = """\
from typing import cast

from veridic import TrustedInstruction, TrustPolicy

legacy = TrustPolicy("legacy-prompts")


def load(text: str) -> TrustedInstruction:
    forged = cast(TrustedInstruction, text)
    vouched = legacy.vouch(text, reason="migrated prompt table")
    return forged or vouched
"""


def test_hatches_sarif_uses_forward_slash_paths_relative_to_the_root(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = project / "src" / "app" / "legacy.py"
    source.parent.mkdir(parents=True)
    source.write_text(HATCHES)
    code, log = sarif(capsys, "hatches", str(source))
    assert code == 1
    found = {r["ruleId"]: (where(r), r["level"]) for r in results(log)}
    assert found["cast-to-brand"] == (
        ("cast-to-brand", "src/app/legacy.py", line_of(HATCHES, "cast(")),
        "error",
    )
    assert found["vouch"] == (("vouch", "src/app/legacy.py", line_of(HATCHES, ".vouch(")), "note")
    assert found["trust-policy"][1] == "note"
    assert log["runs"][0]["automationDetails"]["id"] == "veridic/hatches/"


@pytest.mark.parametrize("form", ["text", "json", "sarif", "markdown"])
def test_the_exit_code_does_not_depend_on_the_format(
    app: Write, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    assert run(capsys, "lint", f"{app(APP)}:registry", "--format", form)[0] == 1
    assert run(capsys, "lint", f"{app(CLEAN)}:registry", "--format", form)[0] == 0
    assert run(capsys, "lint", "no_such_module:registry", "--format", form)[0] == 2
    assert run(capsys, "lint", f"{app(APP)}:registry", "--format", form, "--strict")[0] == 1


def test_a_clean_registry_is_a_valid_log_without_results(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    code, log = sarif(capsys, "lint", f"{app(CLEAN)}:registry")
    assert code == 0
    assert results(log) == []
    assert log["runs"][0]["tool"]["driver"]["rules"] == []


def test_mcp_pin_keeps_text_and_json_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "pin", "servers:TOOLS", "--check", "x.json", "--format", "sarif"]) == 2
    assert "invalid choice: 'sarif'" in capsys.readouterr().err


class _Finding:
    """A report item as the commands make them (the doctest of veridic.checks.sarif)."""

    severity, kind, file, line, subject, text, data = "error", "boot", "app.py", 3, "t", None, ()

    def __init__(self, message: str) -> None:
        self.message = message


@pytest.mark.parametrize("length", [2001, 1_000_000])
def test_a_message_past_2000_characters_is_clipped_and_says_its_length(length: int) -> None:
    """GitHub refuses a whole upload past 10 MB gzipped: a finding quoting a text of
    megabytes (an MCP server's description) put all of it in its alert's message, and one
    such finding could lose every other alert of the run. The alert's identity is still
    the whole message's."""
    from veridic.checks.sarif import render_sarif

    message = "[a](https://evil.example) " + "\U0001f600" * length
    (result,) = json.loads(render_sarif([_Finding(message)], command="lint"))["runs"][0]["results"]
    kept = message[:2000].replace("[", "\\[").replace("]", "\\]")
    assert result["message"]["text"] == f"{kept}… ({len(message)} chars)"
    other = json.loads(render_sarif([_Finding(message[:-1] + "x")], command="lint"))
    assert other["runs"][0]["results"][0]["message"] == result["message"]
    assert other["runs"][0]["results"][0]["partialFingerprints"] != (result["partialFingerprints"])


def test_a_message_of_2000_characters_is_kept_whole() -> None:
    from veridic.checks.sarif import render_sarif

    message = "x" * 2000
    (result,) = json.loads(render_sarif([_Finding(message)], command="lint"))["runs"][0]["results"]
    assert result["message"]["text"] == message
