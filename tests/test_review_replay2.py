"""Attacker review: approvals resumed twice in the pydantic-ai and Agents SDK adapters.

A deferred call, or an interrupted run, is kept where the application can read it again
(a session, a queue that delivers twice, a double click on "approve"). Resuming it a
second time must not run the approved write again, nor turn a "no" into a "yes".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agents import Agent, RunState, ToolApprovalItem
from agents.exceptions import UserError
from pydantic_ai import DeferredToolResults, ToolDenied
from test_integration_openai_agents import (
    SYSTEM,
    App,
    ScriptedModel,
    answer_all,
    only_item,
    run,
    say,
)
from test_integration_openai_agents import _offline as _offline  # the autouse fixture
from test_integration_openai_agents import app as app
from test_integration_openai_agents import call as sdk_call
from test_integration_pydantic_ai import Script, agent, call, deferred, rows, setup

from veridic import (
    ApprovalDeniedError,
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    SQLiteAuditSink,
    VeridicError,
    instruction,
)
from veridic.integrations.openai_agents import answer, function_tools, instructions
from veridic.integrations.pydantic_ai import capability

# --- pydantic-ai: the same history and answers sent twice ---------------------------------


def test_pai_an_approved_write_resumed_twice_runs_once(tmp_path: Path) -> None:
    s = setup(tmp_path)
    script = Script([call("c1", "save_note", title="groceries", text="milk")], "Saved.", "Again.")
    run = agent(script)
    first = run.run_sync("Save a groceries note", capabilities=[s.veridic])
    history = first.all_messages()
    answers = deferred(first.output).build_results(approvals={"c1": True})
    second = run.run_sync(
        message_history=history, deferred_tool_results=answers, capabilities=[s.veridic]
    )
    assert second.output == "Saved."
    assert s.store.ran == ["save_note"]

    with pytest.raises(ApprovalDeniedError, match="on record already") as refused:
        run.run_sync(
            message_history=history, deferred_tool_results=answers, capabilities=[s.veridic]
        )
    assert "c1" in str(refused.value)
    assert "save_note" in str(refused.value)
    assert s.store.ran == ["save_note"]  # not a second time
    assert rows(s.audit) == [("save_note", ApprovalMode.USER_CONFIRMED, CallOutcome.OK)]


def test_pai_a_denied_call_approved_on_a_second_try_with_the_same_history_does_not_run(
    tmp_path: Path,
) -> None:
    s = setup(tmp_path)
    script = Script([call("c1", "delete_note", title="plans")], "Kept it.", "Deleted.")
    run = agent(script)
    first = run.run_sync("Delete my plans", capabilities=[s.veridic])
    history = first.all_messages()
    run.run_sync(
        message_history=history,
        deferred_tool_results=DeferredToolResults(approvals={"c1": ToolDenied("No.")}),
        capabilities=[s.veridic],
    )
    assert rows(s.audit) == [("delete_note", ApprovalMode.DENIED, CallOutcome.DENIED)]

    # Another process, the same audit store: a new capability, the same history, a "yes".
    again = setup(tmp_path)
    with pytest.raises(ApprovalDeniedError, match="on record already"):
        run.run_sync(
            message_history=history,
            deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
            capabilities=[again.veridic],
        )
    assert again.store.ran == []
    assert again.store.notes == {"plans": "move to Lisbon"}
    assert rows(again.audit) == [("delete_note", ApprovalMode.DENIED, CallOutcome.DENIED)]


def test_pai_a_call_id_the_model_repeats_in_a_later_turn_is_approved_and_runs() -> None:
    """No false refusal: the id is the same, what the model had read (the prompt hash) is not."""
    s = setup()
    script = Script(
        [call("c1", "save_note", title="a", text="1")],
        [call("c1", "save_note", title="b", text="2")],
        "Saved both.",
    )
    run = agent(script)
    first = run.run_sync("Save two notes", capabilities=[s.veridic])
    second = run.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=deferred(first.output).build_results(approvals={"c1": True}),
        capabilities=[s.veridic],
    )
    third = run.run_sync(
        message_history=second.all_messages(),
        deferred_tool_results=deferred(second.output).build_results(approvals={"c1": True}),
        capabilities=[s.veridic],
    )
    assert third.output == "Saved both."
    assert s.store.ran == ["save_note", "save_note"]
    assert [r.approval for r in s.audit.records("req-1")] == [ApprovalMode.USER_CONFIRMED] * 2


class _WriteOnly:
    """An audit sink that writes records but cannot be asked for them."""

    def __init__(self) -> None:
        self.written: list[object] = []

    def write(self, record: object) -> None:
        self.written.append(record)


def test_pai_an_approved_call_with_a_store_that_cannot_be_asked_is_refused() -> None:
    s = setup()
    sink = _WriteOnly()
    veridic = capability(s.view, policy=s.policy, audit=sink, request_id="req-1")
    script = Script([call("c1", "save_note", title="a", text="1")], "Saved.")
    run = agent(script)
    first = run.run_sync("Save", capabilities=[veridic])
    with pytest.raises(VeridicError, match=r"no records\(request_id\)") as refused:
        run.run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=deferred(first.output).build_results(approvals={"c1": True}),
            capabilities=[veridic],
        )
    # It names the function the store was given to, not the gateway this user never used.
    assert str(refused.value).startswith("capability() needs an audit store")
    assert "gateway" not in str(refused.value)
    assert s.store.ran == []
    assert sink.written == []


# --- Agents SDK: an interrupted run's state resumed twice ------------------------------------


RENAME = {"name": "golden-1", "new_name": "golden-a"}


def test_sdk_an_approved_write_resumed_twice_from_a_saved_state_runs_once(app: App) -> None:
    model = ScriptedModel([sdk_call("rename_fixture", RENAME, "c1")], [say("Renamed.")], [say("!")])
    agent = app.agent(model)
    state = answer_all(run(agent, "Rename golden-1 to golden-a."), True)
    saved = state.to_string()  # kept in a session, or a queue that delivers twice
    assert run(agent, state).final_output == "Renamed."
    assert app.store.ran == ["rename_fixture"]

    copy = asyncio.run(RunState.from_string(agent, saved))
    with pytest.raises(UserError) as failed:  # the SDK's wrapper of what a tool raised
        run(agent, copy)
    refused = failed.value.__cause__
    assert isinstance(refused, ApprovalDeniedError)
    assert "'c1'" in str(refused)
    assert "rename_fixture" in str(refused)
    assert "on record already" in str(refused)
    assert app.store.ran == ["rename_fixture"]  # not a second time
    assert app.rows() == [("rename_fixture", CallOutcome.OK, ApprovalMode.USER_CONFIRMED)]


def _next_process(
    app: App, tmp_path: Path, model: ScriptedModel
) -> tuple[Agent[None], SQLiteAuditSink]:
    """The next process: the same registry and audit file, a new view, new tools."""
    view = app.registry.view()
    audit = SQLiteAuditSink(tmp_path / "audit.db")
    tools = function_tools(view, policy=ApprovalPolicy(view), audit=audit, request_id="req-1")
    agent = Agent(
        name="maintainer", instructions=instructions(view, SYSTEM), tools=tools, model=model
    )
    return agent, audit


def test_sdk_a_rejected_call_approved_on_a_copy_of_the_state_does_not_run(
    app: App, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [sdk_call("delete_golden", {"name": "golden-1"}, "c1")], [say("Kept it.")], [say("!")]
    )
    result = run(app.agent(model), "Delete golden-1.")
    saved = result.to_state().to_string()  # the state before the answer, kept aside
    answer_all(result, False)
    assert app.rows() == [("delete_golden", CallOutcome.DENIED, ApprovalMode.DENIED)]

    agent, audit = _next_process(app, tmp_path, model)
    with audit:
        copy = asyncio.run(RunState.from_string(agent, saved))
        item = only_item_of(copy)
        with pytest.raises(ApprovalDeniedError, match="on record already"):
            asyncio.run(answer(copy, item, approved=True))
        # Approved in the SDK alone, past answer(): the call is refused when it would run.
        copy.approve(item)
        with pytest.raises(UserError) as failed:
            run(agent, copy)
        assert isinstance(failed.value.__cause__, ApprovalDeniedError)
    assert app.store.ran == []
    assert "golden-1" in app.store.fixtures
    assert app.rows() == [("delete_golden", CallOutcome.DENIED, ApprovalMode.DENIED)]


def only_item_of(state: RunState[None, Agent[None]]) -> ToolApprovalItem:
    (item,) = state.get_interruptions()
    return item


def test_sdk_a_call_id_another_request_used_is_approved_and_runs(app: App) -> None:
    """No false refusal: a provider that repeats call ids (``call_0``) in every request."""
    model = ScriptedModel(
        [sdk_call("rename_fixture", RENAME, "call_0")],
        [say("Renamed.")],
        [sdk_call("rename_fixture", RENAME, "call_0")],
        [say("Renamed again.")],
    )
    agent = app.agent(model)
    assert run(agent, answer_all(run(agent, "Rename golden-1."), True)).final_output == "Renamed."
    tools = function_tools(app.view, policy=app.policy, audit=app.audit, request_id="req-2")
    later = app.agent(model, tools)
    result = run(later, answer_all(run(later, "Rename golden-1 again."), True))
    assert result.final_output == "Renamed again."
    assert app.store.ran == ["rename_fixture", "rename_fixture"]
    assert [row[2] for row in app.rows()] == [ApprovalMode.USER_CONFIRMED] * 2


def test_sdk_an_approved_call_with_a_store_that_cannot_be_asked_is_refused(app: App) -> None:
    sink = _WriteOnly()
    tools = function_tools(app.view, policy=app.policy, audit=sink, request_id="req-1")
    model = ScriptedModel([sdk_call("rename_fixture", RENAME, "c1")], [say("Renamed.")])
    agent = app.agent(model, tools)
    result = run(agent, "Rename golden-1 to golden-a.")
    state = result.to_state()
    with pytest.raises(VeridicError, match=r"no records\(request_id\)"):
        asyncio.run(answer(state, only_item(result), approved=True))
    state.approve(only_item(result))
    with pytest.raises(UserError, match=r"no records\(request_id\)") as failed:
        run(agent, state)
    assert isinstance(failed.value.__cause__, VeridicError)
    assert app.store.ran == []
    assert sink.written == []


def test_pai_a_denial_resumed_twice_does_not_ask_the_model_again(tmp_path: Path) -> None:
    """A "no" sent again resumes the run again: the model, told no, goes on to other calls
    (here a write under an always rule), which would run a second time."""
    s = setup(tmp_path)
    s.policy.allow_always("save_note")
    script = Script(
        [call("c1", "delete_note", title="plans")],
        [call("c2", "save_note", title="plans", text="kept")],
        "Kept it.",
        [call("c3", "save_note", title="plans", text="kept")],
        "Kept it again.",
    )
    run = agent(script)
    first = run.run_sync("Delete my plans", capabilities=[s.veridic])
    history = first.all_messages()
    no = DeferredToolResults(approvals={"c1": False})
    second = run.run_sync(
        message_history=history, deferred_tool_results=no, capabilities=[s.veridic]
    )
    assert second.output == "Kept it."
    assert s.store.ran == ["save_note"]

    with pytest.raises(ApprovalDeniedError, match="on record already"):
        run.run_sync(message_history=history, deferred_tool_results=no, capabilities=[s.veridic])
    assert s.store.ran == ["save_note"]  # the model was not asked again, nothing ran again
    assert [r.approval for r in s.audit.records("req-1")] == [
        ApprovalMode.DENIED,
        ApprovalMode.ALWAYS_RULE,
    ]


def test_sdk_a_copy_resumed_under_an_agent_with_other_instructions_runs_once(
    app: App, tmp_path: Path
) -> None:
    """The docs say to restore a state against the next request's agent: its instructions (a
    per-request part, another view's section) give another prompt hash, not another call."""
    model = ScriptedModel([sdk_call("rename_fixture", RENAME, "c1")], [say("Renamed.")], [say("!")])
    agent = app.agent(model)
    state = answer_all(run(agent, "Rename golden-1 to golden-a."), True)
    saved = state.to_string()
    assert run(agent, state).final_output == "Renamed."

    view = app.registry.view()
    with SQLiteAuditSink(tmp_path / "audit.db") as audit:
        tools = function_tools(view, policy=ApprovalPolicy(view), audit=audit, request_id="req-1")
        today = instructions(view, SYSTEM, instruction("Today is Monday."))
        later = Agent(name="maintainer", instructions=today, tools=tools, model=model)
        copy = asyncio.run(RunState.from_string(later, saved))
        with pytest.raises(UserError) as failed:
            run(later, copy)
    assert isinstance(failed.value.__cause__, ApprovalDeniedError)
    assert app.store.ran == ["rename_fixture"]
