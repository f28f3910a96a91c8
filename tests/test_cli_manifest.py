"""The committed manifest does not depend on the machine: no boot state in the snapshot.

A component's boot needs secrets and licences that a CI runner does not have.
Its tools (risk, description, schema) are in the snapshot whatever happens at
boot; whether it started is reported, never compared. Each test runs
``veridic.cli.main`` in this process on tests/cli_fixtures/secret_app.py, with
the secret set (production) or not (CI).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from veridic.cli import main

FIXTURES = Path(__file__).parent / "cli_fixtures"
SECRET = "BILLING_API_KEY"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each command imports (and boots) the application anew, as a CI run does."""
    monkeypatch.chdir(FIXTURES)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr("veridic.config._current", None)
    sys.modules.pop("secret_app", None)
    yield
    sys.modules.pop("secret_app", None)


def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, secret: bool, *args: str
) -> tuple[int, str]:
    if secret:
        monkeypatch.setenv(SECRET, "sk-live-0000")
    else:
        monkeypatch.delenv(SECRET, raising=False)
    sys.modules.pop("secret_app", None)
    code = main(list(args))
    return code, capsys.readouterr().out


@pytest.mark.parametrize("target", ["secret_app:registry", "secret_app:support_view"])
def test_snapshot_is_the_same_with_and_without_the_secret(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    production, ci = tmp_path / "production.json", tmp_path / "ci.json"
    assert run(capsys, monkeypatch, True, "manifest", target, "-o", str(production))[0] == 0
    assert run(capsys, monkeypatch, False, "manifest", target, "-o", str(ci))[0] == 0
    assert production.read_text() == ci.read_text()
    tools = json.loads(ci.read_text())["tools"]
    refund = tools["refund_order"]  # the down component's tool is still recorded, in full
    assert (refund["risk"], refund["irreversible"], refund["component"]) == (
        "high",
        True,
        "Billing extension",
    )
    assert refund["description"].startswith("Refund part or all of an order")
    assert str(refund["input_schema"]).startswith("sha256:")


@pytest.mark.parametrize("command", ["check", "manifest"])
def test_ci_without_the_secret_passes_against_the_production_snapshot(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    committed = tmp_path / "manifest.json"
    run(capsys, monkeypatch, True, "manifest", "secret_app:registry", "-o", str(committed))
    flag = "--manifest" if command == "check" else "--check"
    code, out = run(
        capsys, monkeypatch, False, command, "secret_app:registry", flag, str(committed)
    )
    assert code == 0, out
    assert f"{committed} matches the registry" in out
    assert "component-down" in out  # reported, for the reader of the CI log
    assert "'Billing extension' did not start here" in out


def test_json_report_carries_the_boot_state_of_each_component(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = tmp_path / "manifest.json"
    run(capsys, monkeypatch, True, "manifest", "secret_app:registry", "-o", str(committed))
    for secret, started in ((True, True), (False, False)):
        code, out = run(
            capsys,
            monkeypatch,
            secret,
            "check",
            "secret_app:registry",
            "--manifest",
            str(committed),
            "--format",
            "json",
        )
        report = json.loads(out)
        assert (code, report["drift"]) == (0, [])
        assert report["components"]["Billing extension"]["started"] is started
        if not started:
            assert report["components"]["Billing extension"]["reason"]


def test_a_changed_tool_of_a_down_component_is_still_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = tmp_path / "manifest.json"
    run(capsys, monkeypatch, True, "manifest", "secret_app:registry", "-o", str(committed))
    data = json.loads(committed.read_text())
    data["tools"]["refund_order"]["risk"] = "mid"
    committed.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    code, out = run(
        capsys, monkeypatch, False, "manifest", "secret_app:registry", "--check", str(committed)
    )
    assert code == 1
    assert 'tool refund_order: risk changed from "mid" to "high"' in out
