"""``veridic show`` of an audit store prints nothing a GitHub Actions log would obey.

A request id may be an HTTP client's request-id header; ``veridic show STORE``
listed it raw, so ``##[error]...`` forged an annotation and ``##[add-mask]...``
hid text in the job's log, where ``veridic audit`` of the same store writes it
inert. Failed on the code before the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veridic import (
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    instruction,
)
from veridic.checks.cli import EXIT_CLEAN, main

FORGED = "##[error]forged-annotation"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    registry = Registry("weather")

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Tell the weather in a city.

        Args:
            city: The city.
        """
        return "sunny"

    view = registry.view()
    path = tmp_path / "audit.sqlite3"
    sink = SQLiteAuditSink(path)
    gateway = ModelGateway(ScriptedProvider([{"text": "hi"}]), audit=sink)
    prompt = Composer().system(instruction("You report the weather."), view.capability_section())
    gateway.send(prompt.build(), view, request_id=FORGED)
    sink.close()
    return path


def test_a_stores_call_list_shows_a_request_id_inert_in_a_ci_log(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(store)]) == EXIT_CLEAN
    out = capsys.readouterr().out
    assert "forged-annotation" in out
    assert "##[" not in out


def test_a_stores_call_list_as_json_is_inert_and_reads_back_the_same(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(store), "--format", "json"]) == EXIT_CLEAN
    out = capsys.readouterr().out
    assert "##[" not in out
    assert [call["request_id"] for call in json.loads(out)["model_calls"]] == [FORGED]
