"""``veridic manifest``: a stable snapshot, and drift that fails with a readable diff.

The commands run as subprocesses in tests/cli_fixtures; the snapshot's
stability is also checked in-process for any registration order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _source_docstring import written_in_source
from hypothesis import given
from hypothesis import strategies as st

from veridic import Registry
from veridic.manifest import build_manifest, diff_manifest, render_manifest

FIXTURES = Path(__file__).parent / "cli_fixtures"
Manifest = dict[str, Any]  # a loaded manifest, edited by hand in the drift tests


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        check=False,
    )


def snapshot(tmp_path: Path, target: str = "clean_app:registry") -> Path:
    path = tmp_path / "manifest.json"
    done = run("manifest", target, "-o", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return path


def edit(path: Path, change: Callable[[Manifest], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def test_manifest_records_each_tool_component_and_risk_count(tmp_path: Path) -> None:
    data = json.loads(snapshot(tmp_path).read_text())
    assert data["veridic_manifest"] == 4
    assert data["risk_counts"] == {"low": 1, "mid": 2, "high": 2}
    assert data["high_risk_tools"] == ["delete_golden", "edit_prompt"]
    assert data["components"] == {
        "Billing extension": {"hint": "", "provides": "Refunds", "tools": ["refund_order"]}
    }
    edit_prompt = data["tools"]["edit_prompt"]
    assert edit_prompt["risk"] == "high"
    assert edit_prompt["writes_instruction_fields"] is True
    assert edit_prompt["kind"] == "write"
    assert str(edit_prompt["input_schema"]).startswith("sha256:")
    assert data["tools"]["refund_order"]["component"] == "Billing extension"
    assert data["tools"]["delete_golden"]["irreversible"] is True


def test_manifest_text_is_sorted_with_one_item_per_line(tmp_path: Path) -> None:
    text = snapshot(tmp_path).read_text()
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert list(data["tools"]) == sorted(data["tools"])


def test_manifest_records_a_component_that_did_not_start_as_declared_not_its_boot_state(
    tmp_path: Path,
) -> None:
    data = json.loads(snapshot(tmp_path, "component_app:registry").read_text())
    assert data["components"] == {
        "Pro extension": {
            "hint": "Update the core plugin, then reactivate Pro.",
            "provides": "Code snippets",
            "tools": ["create_snippet"],
        }
    }
    assert data["tools"]["create_snippet"]["risk"] == "mid"  # recorded although it is down


def test_boot_state_is_in_the_report_not_in_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    done = run("manifest", "component_app:registry", "-o", str(path), "--format", "json")
    assert done.returncode == 0
    report = json.loads(done.stdout)
    assert report["components"]["Pro extension"]["started"] is False
    assert report["components"]["Pro extension"]["reason"]
    [down] = report["listed"]
    assert down["kind"] == "component-down"
    assert "its boot state is reported, not part of the snapshot" in down["message"]
    assert "started" not in path.read_text()


def test_unchanged_registry_passes_the_check(tmp_path: Path) -> None:
    path = snapshot(tmp_path)
    done = run("manifest", "clean_app:registry", "--check", str(path))
    assert done.returncode == 0
    assert "matches the registry" in done.stdout


def test_committed_fixture_manifest_is_checked_by_veridic_check() -> None:
    done = run("check", "clean_app:registry", "--config", "check.toml")
    assert done.returncode == 0, done.stdout
    assert "clean_app.manifest.json matches the registry" in done.stdout


def test_demoted_risk_is_drift_with_before_and_after(tmp_path: Path) -> None:
    path = snapshot(tmp_path)
    edit(path, lambda d: d["tools"]["delete_golden"].update(risk="mid"))
    done = run("manifest", "clean_app:registry", "--check", str(path))
    assert done.returncode == 1
    assert 'tool delete_golden: risk changed from "mid" to "high"' in done.stdout
    assert f"veridic manifest clean_app:registry -o {path}" in done.stdout  # what to do


def test_reworded_description_shows_a_word_diff(tmp_path: Path) -> None:
    path = snapshot(tmp_path)
    edit(
        path,
        lambda d: d["tools"]["close_ticket"].update(
            description="Close a ticket; a closed ticket is gone for good."
        ),
    )
    done = run("manifest", "clean_app:registry", "--check", str(path), "--format", "json")
    assert done.returncode == 1
    [finding] = json.loads(done.stdout)["findings"]
    assert finding["field"] == "description"
    assert finding["before"] == "Close a ticket; a closed ticket is gone for good."
    assert "[-is gone for good.-] {+can be reopened later from the archive.+}" in str(
        finding["message"]
    )


def test_added_and_removed_tools_and_counts_are_drift(tmp_path: Path) -> None:
    path = snapshot(tmp_path)

    def change(data: Manifest) -> None:
        data["tools"]["old_tool"] = data["tools"].pop("delete_golden")
        data["risk_counts"]["high"] = 1
        data["risk_counts"]["low"] = 2

    edit(path, change)
    done = run("manifest", "clean_app:registry", "--check", str(path), "--format", "json")
    assert done.returncode == 1
    drift = json.loads(done.stdout)["drift"]
    assert drift[0].startswith("tool delete_golden added (write, risk high: Permanently delete")
    assert drift[1].startswith("tool old_tool removed (write, risk high:")
    assert drift[2] == "tools per risk level changed: low 2 -> 1, high 1 -> 2"


def test_component_hint_change_is_drift(tmp_path: Path) -> None:
    path = snapshot(tmp_path, "component_app:registry")
    edit(path, lambda d: d["components"]["Pro extension"].update(hint="Reinstall Pro."))
    done = run("manifest", "component_app:registry", "--check", str(path))
    assert done.returncode == 1
    assert 'component Pro extension: hint changed from "Reinstall Pro." to "Update the core' in (
        done.stdout
    )


def test_check_command_compares_the_manifest(tmp_path: Path) -> None:
    path = snapshot(tmp_path)
    edit(path, lambda d: d["tools"]["find_ticket"].update(kind="write"))
    done = run("check", "clean_app:registry", "--manifest", str(path))
    assert done.returncode == 1
    assert 'tool find_ticket: kind changed from "write" to "query"' in done.stdout


def test_file_that_is_not_a_manifest_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{"tools": {}}')
    done = run("manifest", "clean_app:registry", "--check", str(path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not a veridic manifest of format 4" in done.stderr  # what
    assert str(path) in done.stderr  # where
    assert "regenerate it with veridic manifest" in done.stderr  # what to do


def test_manifest_of_format_1_is_refused_with_why(tmp_path: Path) -> None:
    path = snapshot(tmp_path)
    edit(path, lambda d: d.update(veridic_manifest=1))
    done = run("manifest", "clean_app:registry", "--check", str(path))
    assert done.returncode == 2
    assert "(veridic_manifest: 1)" in done.stderr
    assert "format 1 recorded whether each component started" in done.stderr  # why
    assert "regenerate it with veridic manifest MODULE:ATTR -o FILE" in done.stderr


def test_missing_manifest_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    done = run("manifest", "clean_app:registry", "--check", str(path))
    assert done.returncode == 2
    assert f"cannot read the manifest {path}" in done.stderr
    assert f"write it first with veridic manifest clean_app:registry -o {path}" in done.stderr


def test_manifest_needs_output_or_check() -> None:
    done = run("manifest", "clean_app:registry")
    assert done.returncode == 2
    assert "one of the arguments -o/--output --check is required" in done.stderr


def test_registry_that_does_not_boot_writes_no_manifest(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    done = run("manifest", "floor_app:registry", "-o", str(path))
    assert done.returncode == 1
    assert "RiskFloorError" in done.stdout
    assert not path.exists()


def _query(number: int) -> Callable[[str], str]:
    def handler(text: str) -> str:
        """(docstring written by written_in_source)"""
        return text

    handler.__name__ = f"tool_{number}"
    written_in_source(
        handler, f"Look up record kind {number} by its text.\n\nArgs:\n    text: The key."
    )
    return handler


@given(st.permutations(range(6)))
def test_property_manifest_text_does_not_depend_on_registration_order(order: list[int]) -> None:
    reference, shuffled = Registry("a"), Registry("b")
    for number in range(6):
        reference.tool(kind="query")(_query(number))
    for number in order:
        shuffled.tool(kind="query")(_query(number))
    text = render_manifest(build_manifest(shuffled))
    assert text == render_manifest(build_manifest(reference))
    assert diff_manifest(text, build_manifest(reference)) == []


# --- what of an external tool the prompt prints as instruction ------------------------------

_OUTSIDE = "Search the knowledge base for articles that match the query."
_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to look for."}},
    "required": ["query"],
}


def _search_registry(pin: str | None) -> Registry:
    registry = Registry()
    registry.external(
        name="search_kb",
        description=_OUTSIDE,
        input_schema=_SCHEMA,
        handler=lambda arguments: "",
        kind="query",
        pin=pin,
    )
    return registry


def test_a_pin_added_to_an_external_tool_is_drift() -> None:
    """A pin is the review that turns an MCP server's description into instruction text
    in the capability section. The manifest held the same entry with or without it, so
    a pull request adding one (or a tool pin that also prints the schema's names) passed
    ``manifest --check`` with no line of the snapshot changed."""
    from veridic.tools.pins import description_pin, tool_pin

    unpinned = render_manifest(build_manifest(_search_registry(None)))
    pinned = build_manifest(_search_registry(description_pin(_OUTSIDE)))
    [change] = diff_manifest(unpinned, pinned)
    assert (change.subject, change.field) == ("tool search_kb", "trust")
    assert (change.before, change.after) == ("unpinned", "pinned description")
    whole = build_manifest(_search_registry(tool_pin("search_kb", _OUTSIDE, _SCHEMA)))
    [change] = diff_manifest(render_manifest(pinned), whole)
    assert (change.field, change.after) == ("trust", "pinned tool")


def test_a_tool_written_in_code_is_recorded_as_code() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def find_user(email: str) -> str:
        """Find a user by email address.

        Args:
            email: The address to look up.
        """
        return email

    tools = build_manifest(registry)["tools"]
    assert isinstance(tools, dict)
    assert tools["find_user"]["trust"] == "code"
