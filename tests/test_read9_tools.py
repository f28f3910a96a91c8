"""A second read of the eighth review's tools changes: boot checks, views and paused runs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest
from _source_docstring import written_in_source
from hypothesis import given, settings
from hypothesis import strategies as st

import veridic
from veridic import PausedRun, Registry, SQLiteAuditSink

# --- a paused run resumed by another process -----------------------------------------------

_APP = '''
"""The application: its tools, a pause when run as a script, a resume when imported."""
import sys
from typing import Annotated

from pydantic import BaseModel, Field

from veridic import (
    ApprovalPolicy, Composer, InstructionField, ModelGateway, PausedRun, Registry,
    ScriptedProvider, SQLiteAuditSink, instruction,
)

SYSTEM = instruction("You are the maintenance agent.")


class StoredPrompt(BaseModel):
    feature: str
    content: InstructionField


def registry(ran: list[str], saves: str = "Save new content for a feature's prompt") -> Registry:
    tools = Registry("maint")

    @tools.tool(kind="write")
    def revert(target: str) -> str:
        """Revert a golden test fixture to its last committed version.

        Args:
            target: The fixture's path.
        """
        ran.append(f"revert {target}")
        return "reverted"

    def edit_prompt(
        feature: Annotated[str, Field(description="The AI feature.")],
        content: Annotated[str, Field(description="The new prompt text.")],
    ) -> str:
        ran.append(f"edit {feature}")
        return "saved"

    tools.tool(
        kind="write",
        writes=(StoredPrompt,),
        description=saves + "; the feature uses it as its system prompt.",
    )(edit_prompt)
    return tools


def pause(tool: str, arguments: str, db: str) -> str:
    view = registry([]).view()
    result = ModelGateway(
        ScriptedProvider([{"tool_calls": [("c1", tool, arguments)]}]), audit=SQLiteAuditSink(db)
    ).run(
        Composer().system(SYSTEM, view.capability_section()).user("Go."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert result.paused is not None
    return result.paused.to_json()


if __name__ == "__main__":
    sys.stdout.write(pause(sys.argv[1], sys.argv[2], sys.argv[3]))
'''

_SYSTEM = veridic.instruction("You are the maintenance agent.")  # the app's SYSTEM
_CALLS = {
    "revert": ('{"target": "checkout"}', "revert checkout"),
    "edit_prompt": ('{"feature": "support", "content": "Be brief."}', "edit support"),
}


def _app(tmp_path: Path) -> tuple[Path, ModuleType]:
    """The application's module, written to ``tmp_path`` and imported as ``maint_app``."""
    path = tmp_path / "maint_app.py"
    path.write_text(_APP, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("maint_app", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["maint_app"] = module  # pydantic resolves the models' annotations by module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["maint_app"]
    return path, module


def _paused_by_the_script(path: Path, tool: str, db: Path) -> str:
    """The paused run of ``python maint_app.py`` (the module as ``__main__``), as stored."""
    source = Path(veridic.__file__).parents[1]  # this tree's veridic, not an installed one
    done = subprocess.run(
        [sys.executable, str(path), tool, _CALLS[tool][0], str(db)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(source), "PATH": ""},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _resume(app: ModuleType, stored: str, db: Path, **changes: str) -> tuple[list[str], list[str]]:
    ran: list[str] = []
    registry: Registry = app.registry(ran, **changes)
    view = registry.view()
    paused = PausedRun.from_json(stored)
    result = veridic.ModelGateway(
        veridic.ScriptedProvider([{"content": "Done."}]), audit=SQLiteAuditSink(str(db))
    ).resume(
        paused,
        veridic.Composer().system(_SYSTEM, view.capability_section()),
        view,
        policy=veridic.ApprovalPolicy(view),
        answers={approval.digest: True for approval in paused.approvals},
    )
    return ran, [approval.why for approval in result.pending]


@pytest.mark.parametrize("tool", ["revert", "edit_prompt"])
def test_a_yes_given_to_a_script_runs_the_same_tool_in_a_process_that_imports_it(
    tmp_path: Path, tool: str
) -> None:
    # The handler and the model it writes are defined in __main__ when paused and in
    # maint_app when resumed: the same tool, which the user said yes to.
    path, app = _app(tmp_path)
    stored = _paused_by_the_script(path, tool, tmp_path / "audit.db")
    assert json.loads(stored)["approvals"][0]["tool"] == tool
    assert _resume(app, stored, tmp_path / "audit.db") == ([_CALLS[tool][1]], [])


def test_a_tool_whose_description_changed_since_the_pause_is_asked_about_again(
    tmp_path: Path,
) -> None:
    path, app = _app(tmp_path)
    stored = _paused_by_the_script(path, "edit_prompt", tmp_path / "audit.db")
    ran, why = _resume(app, stored, tmp_path / "audit.db", saves="Delete a feature's prompt")
    assert ran == []
    (asked,) = why
    assert asked.endswith(
        "asked again: the tool named 'edit_prompt' now is not the one the user was asked "
        "about (its description)"
    )


# --- what a boot check returns ---------------------------------------------------------------


class _Array:
    """A NumPy array (or a pandas frame) as a warm-up returns it: no truth value."""

    def __bool__(self) -> bool:
        raise ValueError("The truth value of an array with more than one element is ambiguous")


class _Client:
    """A client object as a check that connects returns it (no ``__bool__``, no ``__len__``)."""


def _pro(answer: object) -> Registry:
    registry = Registry("shop")
    pro = registry.component("Pro", boot=lambda: answer, hint="Renew the licence.")

    @pro.tool(kind="query")
    def forecast(days: int) -> str:
        """Forecast the sales of the coming days with the Pro model.

        Args:
            days: How many days ahead.
        """
        return "up"

    return registry


@pytest.mark.parametrize(
    "answer",
    [_Array(), _Client(), "2.4.1", {"status": "ok"}, b"PONG"],
    ids=["array", "client", "version", "dict", "bytes"],
)
def test_a_boot_check_that_returns_what_it_started_starts_the_component(answer: object) -> None:
    # boot=lambda: model.predict(sample) warms a model up and returns its prediction (a
    # NumPy array, whose truth value raises); the others are what connecting returns.
    registry = _pro(answer)
    assert "forecast" in registry.view().names()
    (state,) = registry.components()
    assert (state.started, state.reason) == (True, "")


# --- a boot check running in one thread while another asks for a view ----------------------


@pytest.mark.parametrize("recheck", [None, "view"])
def test_a_view_asked_for_while_another_thread_runs_the_boot_check_is_built(
    recheck: str | None,
) -> None:
    # The refusal of a view inside a boot check is for the check's own thread: a request
    # served by another thread meanwhile waits for the check and gets the view.
    registry = Registry("shop")
    entered, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def check() -> bool:
        runs.append(threading.current_thread().name)
        if len(runs) == 1:
            entered.set()
            release.wait(5)
        return True

    pro = registry.component("Pro", boot=check, recheck=recheck)  # type: ignore[arg-type]  # None or "view"

    @pro.tool(kind="query")
    def forecast(days: int) -> str:
        """Forecast the sales of the coming days with the Pro model.

        Args:
            days: How many days ahead.
        """
        return "up"

    views: dict[str, frozenset[str]] = {}
    failed: list[BaseException] = []

    def ask(name: str) -> None:
        try:
            views[name] = registry.view().names()
        except BaseException as error:  # handed to the test below
            failed.append(error)

    first = threading.Thread(target=ask, args=("first",), name="first")
    first.start()
    assert entered.wait(5)
    second = threading.Thread(target=ask, args=("second",), name="second")
    second.start()
    second.join(0.1)  # it waits for the check that runs
    release.set()
    first.join(5)
    second.join(5)
    assert failed == []
    assert "forecast" in views["first"]
    assert "forecast" in views["second"]
    assert registry.components()[0].started is True


# --- a deny filter of the application's own class -------------------------------------------


class _DenyDeletes(veridic.Deny):
    """An application's deny filter that decides in ``matches`` itself."""

    def matches(self, tool: veridic.Tool) -> bool:
        return tool.name.startswith("delete_") or super().matches(tool)


def test_a_deny_filter_that_overrides_matches_still_denies_what_it_matches() -> None:
    registry = Registry("admin")
    for name in ("delete_user", "list_users", "export_users"):

        def handler(user: str) -> str:
            """(docstring written by written_in_source)"""
            return user

        handler.__name__ = name
        written_in_source(
            handler, f"Run {name} on one user account.\n\nArgs:\n    user: The user.\n"
        )
        registry.tool(kind="write")(handler)
    deny = _DenyDeletes({"export_users"}, reason=veridic.instruction("read-only session"))
    view = registry.view(deny=[deny, "list_users"])
    assert "delete_user" not in view.names()
    assert (view.status("delete_user").reason, view.status("delete_user").cause) == (
        "read-only session",
        "deny",
    )
    assert view.status("export_users").reason == "read-only session"
    assert view.status("list_users").reason == "named in the view's deny list"


# --- a plan of fewer than 50 refused names is told what it was told before -------------------


def _plan_view() -> veridic.ToolView:
    registry = Registry("plans")
    for number in range(40):

        def handler(x: str) -> str:
            """(docstring written by written_in_source)"""
            return x

        handler.__name__ = f"report_{number}"
        written_in_source(handler, f"Build report number {number}.\n\nArgs:\n    x: The filter.\n")
        registry.tool(kind="query", roles=("admin",) if number % 7 == 0 else ())(handler)
    return registry.view(
        deny=[
            veridic.Deny({"report_3", "report_5"}),
            veridic.Deny({"report_4"}, reason=veridic.instruction("paused"), tombstone=True),
        ]
    )


_PLAN_VIEW = _plan_view()
_REFUSED = st.sampled_from(["report_0", "report_3", "report_4", "report_5", "report_14"]) | (
    st.integers(0, 60).map(lambda n: f"report_{n}x")
)


@given(picks=st.lists(_REFUSED, min_size=8, max_size=60).filter(lambda p: len(set(p)) <= 50))
@settings(max_examples=40, deadline=None)
def test_a_plans_refused_names_are_told_what_view_status_tells_them(picks: list[str]) -> None:
    # Up to 50 distinct names: each told, word for word, what the plan told it before the
    # bounded lookup (view.status, and a hidden tool as view.unknown tells it).
    view = _PLAN_VIEW
    steps = [{"id": f"s{index}", "tool": name} for index, name in enumerate(picks)]
    plan = veridic.normalize_plan(steps, view)
    assert [item.tool for item in plan.dropped] == picks
    for item in plan.dropped:
        status = view.status(item.tool)
        told = view.unknown(item.tool) if status.hidden else status
        error = status.error()
        assert item.detail == (str(error) if error is not None else status.reason)
        assert item.suggestions == (told.suggestions[:3] if told.state == "unknown" else ())
