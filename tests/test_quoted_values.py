"""Messages quote an application's or an outsider's value clipped, with its length.

A request id may be 4096 characters, an agent's name or a provider's stop reason as long
as their writer likes: quoted whole (``{value!r}``) one of them buries the message it is
in, and cut by a format spec (``{value!r:.80}``) it ends mid-quote with no mark, so a
reader cannot tell a long value from a short one. One test per family of modules
(integrations, tools, run, evaluation), each of which failed on the code before.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
from pathlib import Path

import pytest
from agents import Agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_integration_openai_agents import SYSTEM as AGENT_SYSTEM
from test_integration_openai_agents import App, ScriptedModel, run, say
from test_integration_openai_agents import _offline as _offline  # the autouse fixture
from test_integration_openai_agents import app as app

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    Composer,
    GuardDeniedError,
    ModelGateway,
    ProvenanceError,
    Registry,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    guard_irreversible,
    instruction,
)
from veridic.evaluation.report import read_json
from veridic.integrations.openai_agents import function_tools, instructions
from veridic.tools.guards import dispatching

LONG_ID = "req-" + "x" * 4092
"""A request id of 4,096 characters, the longest a request may have."""


def _clipped(message: str, value: str) -> None:
    """``message`` quotes ``value`` cut, with a mark and its length, and never whole."""
    assert value not in message
    assert value[:100] not in message
    assert f"…' ({len(value)} chars)" in message


# --- integrations ---------------------------------------------------------------------------


def test_an_agent_refused_for_a_stored_prompt_is_named_clipped_with_its_request(
    app: App,
) -> None:
    """The Agents SDK refusal quoted the agent's name and the request id whole."""
    name = "maintainer-" + "n" * 4989
    tools = function_tools(app.view, policy=app.policy, audit=app.audit, request_id=LONG_ID)
    model = ScriptedModel([say("Unreachable.")])
    agent = Agent(
        name=name,
        instructions=instructions(app.view, AGENT_SYSTEM),
        prompt={"id": "pmpt_123"},
        tools=tools,
        model=model,
    )
    with pytest.raises(ProvenanceError, match="names a prompt stored") as caught:
        run(agent, "Hi")
    _clipped(str(caught.value), LONG_ID)
    _clipped(str(caught.value), name)
    assert model.seen == []


# --- tools ----------------------------------------------------------------------------------


def test_a_late_guard_quotes_its_request_clipped_in_the_error_and_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A guard reached after its call ended said the request id whole, twice: in the
    refusal and in the warning logged for want of a reporter."""
    with dispatching("purge", Risk.HIGH, ApprovalMode.USER_CONFIRMED, request_id=LONG_ID):
        later = contextvars.copy_context()
    with (
        caplog.at_level(logging.WARNING, logger="veridic.guards"),
        pytest.raises(GuardDeniedError, match="had ended") as caught,
    ):
        later.run(guard_irreversible, "purge the archive")
    _clipped(str(caught.value), LONG_ID)
    (logged,) = [r for r in caplog.records if r.name == "veridic.guards"]
    _clipped(logged.getMessage(), LONG_ID)


def test_a_dispatch_of_a_blank_tool_name_says_how_long_the_blank_was() -> None:
    """``{call.tool!r}`` quoted a name of 5,000 spaces whole: a screen of nothing."""
    with (
        pytest.raises(VeridicError, match="needs the tool's name") as caught,
        dispatching(" " * 5000, Risk.LOW, ApprovalMode.NOT_REQUIRED),
    ):
        pass
    assert "…' (5000 chars)" in str(caught.value)
    assert " " * 100 not in str(caught.value)


# --- run ------------------------------------------------------------------------------------

SYSTEM = instruction("You tidy the user's files.")


def _files_view() -> ToolView:
    registry = Registry()

    @registry.tool(kind="write")
    def delete_files(prefix: str) -> str:
        """Delete the user's files whose path starts with a prefix.

        Args:
            prefix: The path prefix, e.g. "/home/ann/tmp/".
        """
        return f"deleted {prefix}*"

    return registry.view()


def _cut_off(request_id: str, stop: str = "max_tokens", calls: int = 1) -> str:
    """The refusal of an answer cut off at the output limit while it held ``calls`` calls
    of invented tools with long names, for ``request_id``."""
    view = _files_view()
    invented = [
        (f"call-{index}", f"tool_{index}_" + "t" * 200, {"prefix": "/home/ann/"})
        for index in range(calls)
    ]
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": invented, "stop_reason": stop}]),
        audit=SQLiteAuditSink(":memory:"),
    )
    composer = Composer().system(SYSTEM).user("Delete my old temp files.")
    with pytest.raises(VeridicError, match="cut off") as caught:
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id=request_id)
    return str(caught.value)


def test_an_answer_cut_off_is_refused_with_its_request_stop_reason_and_names_clipped() -> None:
    """The refusal quoted the request id and the provider's stop reason whole, and listed
    every name the model wrote, unquoted, however many and long."""
    stop = "incomplete:" + "z" * 4989
    message = _cut_off(LONG_ID, stop, calls=40)
    _clipped(message, LONG_ID)
    _clipped(message, stop)
    shown = re.findall(r"'tool_\d+_t+…' \(20\d chars\)", message)
    assert len(shown) == 3
    assert "t" * 100 not in message
    assert ", …, whose arguments" in message


# A NUL or a lone surrogate is refused by the gateway itself (see the test at the end).
_ID_CHARACTERS = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
REQUEST_IDS = st.one_of(
    st.text(_ID_CHARACTERS, min_size=1, max_size=60),
    st.text(_ID_CHARACTERS, min_size=61, max_size=600),
).filter(str.strip)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_id=REQUEST_IDS)
def test_every_request_id_is_quoted_whole_when_short_and_clipped_with_its_length_when_long(
    request_id: str,
) -> None:
    message = _cut_off(request_id)
    if len(request_id) <= 60:
        assert repr(request_id) in message
    else:
        assert repr(request_id) not in message
        assert f"({len(request_id)} chars)" in message


# --- evaluation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("scheme", ["s" * 5000]),
        ("followed", "no" * 2500),
    ],
)
def test_a_results_file_of_the_wrong_type_quotes_the_value_cut_with_a_mark(
    tmp_path: Path, field: str, value: object
) -> None:
    """``{value!r:.60}`` cut a foreign file's value mid-quote, with no mark that it was
    cut nor how long it was."""
    record: dict[str, object] = {
        "scheme": "plain",
        "case": "c1",
        "prompt_id": "p",
        "output": "",
        "followed": None,
        "canary": None,
        "correct": True,
        "prompt_tokens": None,
        "completion_tokens": None,
    }
    record[field] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"cases": [record]}), encoding="utf-8")
    with pytest.raises(VeridicError, match="of the wrong type") as caught:
        read_json(path)
    message = str(caught.value)
    assert f"… ({len(repr(value))} chars)" in message or "…' (5000 chars)" in message
    assert repr(value)[:100] not in message


@pytest.mark.parametrize("request_id", ["req\x00-1", "req-\ud800"])
def test_a_request_id_no_store_can_keep_is_refused_before_the_model_is_called(
    request_id: str,
) -> None:
    """A request id holding a NUL or a lone surrogate passed ModelGateway and failed in the
    model call's record, whose message advised building the record "as ModelGateway does"
    (the gateway was the one that built it), after the model had answered."""
    provider = ScriptedProvider([{"text": "Done."}])
    gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
    view = _files_view()
    composer = Composer().system(SYSTEM).user("Hi")
    with pytest.raises(VeridicError, match="without NUL or lone surrogates"):
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id=request_id)
    assert provider.requests == []
