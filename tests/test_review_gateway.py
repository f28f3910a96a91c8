"""Leaks an attacker review of the gateway's request/reply cycle found: each test failed before."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    Composer,
    Limits,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)
from veridic.gateway import ModelCallLog

SYSTEM = instruction("You tidy the user's files.")


def _registry(deleted: list[str]) -> Registry:
    registry = Registry()

    @registry.tool(kind="write")
    def delete_files(prefix: str) -> str:
        """Delete the user's files whose path starts with a prefix.

        Args:
            prefix: The path prefix, e.g. "/home/ann/tmp/".
        """
        deleted.append(prefix)
        return f"deleted {prefix}*"

    return registry


def _always(view: ToolView) -> ApprovalPolicy:
    policy = ApprovalPolicy(view)
    policy.allow_always("delete_files")
    return policy


# A write cut off at the output limit: "/home/ann/tmp/old-" lost its tail, and what is left
# is still a valid argument list, one that names more files.
_CUT = {
    "tool_calls": [("call-1", "delete_files", {"prefix": "/home/ann/"})],
    "stop_reason": "max_tokens",
}


@pytest.mark.parametrize(
    "stop",
    ["max_tokens", "length", "incomplete:max_output_tokens", "model_context_window_exceeded"],
)
def test_run_does_not_run_the_calls_of_an_answer_cut_off_at_the_output_limit(stop: str) -> None:
    deleted: list[str] = []
    view = _registry(deleted).view()
    audit = SQLiteAuditSink(":memory:")
    gateway = ModelGateway(ScriptedProvider([{**_CUT, "stop_reason": stop}]), audit=audit)
    composer = Composer().system(SYSTEM).user("Delete my old temp files.")
    policy = _always(view)
    with pytest.raises(VeridicError, match="cut off"):
        gateway.run(composer, view, policy=policy, request_id="req-1")
    assert deleted == []
    assert audit.records() == ()


def test_arun_does_not_run_the_calls_of_an_answer_cut_off_at_the_output_limit() -> None:
    deleted: list[str] = []
    view = _registry(deleted).view()
    gateway = ModelGateway(
        ScriptedProvider([_CUT], asynchronous=True), audit=SQLiteAuditSink(":memory:")
    )
    composer = Composer().system(SYSTEM).user("Delete my old temp files.")
    policy = _always(view)
    with pytest.raises(VeridicError, match="cut off"):
        asyncio.run(gateway.arun(composer, view, policy=policy, request_id="req-1"))
    assert deleted == []


def test_run_tools_refuses_the_calls_of_an_answer_cut_off_at_the_output_limit() -> None:
    deleted: list[str] = []
    view = _registry(deleted).view()
    gateway = ModelGateway(ScriptedProvider([_CUT]), audit=SQLiteAuditSink(":memory:"))
    prompt = Composer().system(SYSTEM).user("Delete my old temp files.").build()
    reply = gateway.send(prompt, view, request_id="req-1")
    policy = _always(view)
    with pytest.raises(VeridicError, match="cut off"):
        gateway.run_tools(reply, policy=policy)
    with pytest.raises(VeridicError, match="cut off"):
        asyncio.run(gateway.arun_tools(reply, policy=policy))
    assert deleted == []


def _with_async_query(deleted: list[str]) -> ToolView:
    registry = _registry(deleted)

    @registry.tool(kind="query")
    async def list_files(prefix: str) -> str:
        """List the user's files whose path starts with a prefix.

        Args:
            prefix: The path prefix.
        """
        return "none"

    return registry.view()


def test_sync_run_runs_no_call_of_a_reply_that_also_calls_an_async_tool() -> None:
    # The write ran, then the async tool raised, and the turn was never recorded: the
    # same request sent again (the composer as it was) ran the write a second time.
    deleted: list[str] = []
    view = _with_async_query(deleted)
    calls = [
        ("call-1", "delete_files", {"prefix": "/home/ann/tmp/"}),
        ("call-2", "list_files", {"prefix": "/home/ann/"}),
    ]
    audit = SQLiteAuditSink(":memory:")
    gateway = ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=audit)
    composer = Composer().system(SYSTEM).user("Delete my temp files, then list the rest.")
    with pytest.raises(VeridicError, match="is async"):
        gateway.run(composer, view, policy=_always(view), request_id="req-1")
    assert deleted == []
    assert audit.records() == ()


def test_run_tools_runs_no_call_of_a_reply_that_also_calls_an_async_tool() -> None:
    deleted: list[str] = []
    view = _with_async_query(deleted)
    calls = [
        ("call-1", "delete_files", {"prefix": "/home/ann/tmp/"}),
        ("call-2", "list_files", {"prefix": "/home/ann/"}),
    ]
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}]), audit=SQLiteAuditSink(":memory:")
    )
    prompt = Composer().system(SYSTEM).user("Delete my temp files, then list the rest.").build()
    reply = gateway.send(prompt, view, request_id="req-1")
    with pytest.raises(VeridicError, match="arun_tools"):
        gateway.run_tools(reply, policy=_always(view))
    assert deleted == []


# --- run and arun are twins: the same answers give the same records ----------------------

_TOOLS = ("get_time", "save_note", "nosuch")
_ANSWER = st.fixed_dictionaries(
    {
        "calls": st.lists(
            st.tuples(
                st.sampled_from(_TOOLS),
                st.sampled_from(['{"zone": "UTC"}', '{"text": "hi"}', "{}", "not json"]),
            ),
            max_size=3,
        ),
        "usage": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"input_tokens": st.integers(0, 50), "output_tokens": st.integers(0, 50)}
            ),
        ),
        "stop": st.sampled_from(["", "max_tokens"]),
    }
)


def _twin_registry() -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def get_time(zone: str) -> str:
        """The time now in a time zone.

        Args:
            zone: The zone, e.g. "UTC".
        """
        return f"noon in {zone}"

    @registry.tool(kind="write")
    def save_note(text: str) -> str:
        """Save a note for the user.

        Args:
            text: The note.
        """
        return "saved"

    return registry


def _script(answers: list[dict[str, object]]) -> list[dict[str, object]]:
    script: list[dict[str, object]] = []
    number = 0
    for answer in answers:
        calls = []
        for name, arguments in answer["calls"]:  # type: ignore[attr-defined]  # drawn above
            number += 1
            calls.append((f"call-{number}", name, arguments))
        step: dict[str, object] = {"text": "", "tool_calls": calls}
        if answer["usage"] is not None:
            step["usage"] = answer["usage"]
        if answer["stop"]:
            step["stop_reason"] = answer["stop"]
        script.append(step)
    script.append({"text": "All done."})
    return script


def _roadless(error: BaseException, *, asynchronous: bool) -> str:
    """``error``'s message with the method the caller used (``run()`` or ``resume()``, their
    ``a`` twins on the async road) read as a placeholder: an error names that method, and
    is otherwise the same on both roads. Only the road's own names are read so: an async
    error that says ``run()``, or a blocking one that says ``arun()``, stays unlike its
    twin's (``gateway.run(`` and ``ModelGateway.run(``, advice, are left as they are)."""
    own = r"(?<![\w.])a(run|resume)\(" if asynchronous else r"(?<![\w.])(run|resume)\("
    return re.sub(own, r"<road:\1>(", str(error))


def _drive(script: list[dict[str, object]], limits: Limits, asynchronous: bool) -> object:
    view = _twin_registry().view()
    policy = ApprovalPolicy(view)
    policy.allow_always("save_note")
    log = ModelCallLog()
    audit = SQLiteAuditSink(":memory:")
    provider = ScriptedProvider(script, asynchronous=asynchronous)
    gateway = ModelGateway(provider, audit=audit, calls=log, clock=lambda: 0.0)
    composer = Composer().system(SYSTEM).user("What time is it? Note it.")
    ending: object
    try:
        if asynchronous:
            result = asyncio.run(
                gateway.arun(composer, view, policy=policy, request_id="req", limits=limits)
            )
        else:
            result = gateway.run(composer, view, policy=policy, request_id="req", limits=limits)
        ending = (result.text, result.turns, result.usage, len(result.outcomes))
    except VeridicError as error:
        ending = (
            type(error).__name__,
            getattr(error, "limit", None),
            _roadless(error, asynchronous=asynchronous),
        )
    calls = [replace(record, time=0.0) for record in log.records()]
    replies = [replace(record, latency=0.0, call_id="") for record in log.replies()]
    tools = [
        (r.tool, r.outcome, r.approval, r.detail, r.arguments_sha256, r.prompt_sha256)
        for r in audit.records()
    ]
    return ending, calls, replies, tools, composer.conversation().to_json(), provider.requests


@settings(max_examples=60, deadline=None)
@given(
    answers=st.lists(_ANSWER, max_size=4),
    limits=st.builds(
        Limits,
        turns=st.integers(1, 5),  # Limits(turns=0) is refused: a run of no model call
        tool_calls=st.integers(0, 6),
        tokens=st.one_of(st.none(), st.integers(1, 150)),
    ),
)
def test_run_and_arun_make_the_same_records_of_the_same_answers(
    answers: list[dict[str, object]], limits: Limits
) -> None:
    script = _script(answers)
    assert _drive(script, limits, asynchronous=False) == _drive(script, limits, asynchronous=True)


def test_a_token_limit_is_not_dropped_when_the_provider_does_not_count_tokens() -> None:
    # A proxy (or an OpenAI-compatible server) that leaves usage out turned the budget off:
    # the run went on for as many turns as the model wanted, and nothing said so.
    view = _twin_registry().view()
    answers = [{"tool_calls": [(f"call-{n}", "get_time", {"zone": "UTC"})]} for n in range(1, 4)]
    gateway = ModelGateway(
        ScriptedProvider([*answers, {"text": "noon"}]), audit=SQLiteAuditSink(":memory:")
    )
    composer = Composer().system(SYSTEM).user("What time is it?")
    with pytest.raises(VeridicError, match="did not say how many tokens"):
        gateway.run(
            composer,
            view,
            policy=ApprovalPolicy(view),
            request_id="req-1",
            limits=Limits(tokens=10),
        )
