"""Leaks an attacker review of the gateway's request/reply cycle found: each test failed before."""

from __future__ import annotations

import asyncio

import pytest

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)

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
