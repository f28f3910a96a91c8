"""A fourth attacker review of the framework adapters (LangChain, pydantic-ai, the Agents SDK).

Each test drives the real framework (a ``create_agent`` agent on LangGraph with an in-memory
checkpointer, a pydantic-ai ``Agent`` on its test models, an Agents SDK ``Runner`` on a
scripted model) through veridic's public API, and failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from langchain.agents.middleware import ToolCallLimitMiddleware
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, GraphOutput
from test_integration_langchain import make_world, turn

from veridic import ApprovalMode, CallOutcome
from veridic.integrations.langchain import approval_middleware

# --- LangChain: one request's tools, two threads, one call id ------------------------------


def _thread(name: str) -> RunnableConfig:
    return RunnableConfig(configurable={"thread_id": name})


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_call_another_thread_reused_the_id_of_is_still_recorded_when_a_limit_blocks_it(
    tmp_path: Path, asynchronous: bool
) -> None:
    """Two threads of one request's tools, whose model numbers its calls from 0 each turn
    (scripted models and local servers do). A call-limit middleware answered t-1's query in
    the tool's place while t-1's write waited for the reviewer; thread t-2 then ran a query
    under the same id, which took t-1's blocked call off the list of calls to account for, so
    the query the model made and nothing ran was never recorded."""
    world = make_world(tmp_path)
    limit = ToolCallLimitMiddleware(run_limit=1, exit_behavior="continue")
    agent = world.agent(
        # t-1: a write (waits for the reviewer, per call) and a query (the limit answers it).
        turn(("save_note", {"text": "milk"}), ("get_weather", {"city": "Oslo"})),
        # t-2: one query, under the id of t-1's blocked query.
        AIMessage(
            "", tool_calls=[ToolCall(name="get_weather", args={"city": "Rome"}, id="call-1")]
        ),
        AIMessage("Sunny in Rome."),
        middleware=[limit, approval_middleware(world.tools, interrupt_mode="per_call")],
    )
    start = {"messages": [{"role": "user", "content": "Save milk, and the weather."}]}

    def invoke(given: object, thread: str) -> GraphOutput[Any]:
        if asynchronous:
            return asyncio.run(agent.graph.ainvoke(given, _thread(thread), version="v2"))
        return agent.graph.invoke(given, _thread(thread), version="v2")

    (waiting,) = invoke(start, "t-1").interrupts
    invoke(start, "t-2")
    invoke(Command(resume={waiting.id: {"type": "approve"}}), "t-1")

    assert world.notes.saved == ["milk"]
    rows = [(r.tool, r.call_id, r.outcome, r.approval) for r in world.audit.records("req-1")]
    assert sorted(rows) == [
        ("get_weather", "call-1", CallOutcome.DENIED, ApprovalMode.DENIED),
        ("get_weather", "call-1", CallOutcome.OK, ApprovalMode.NOT_REQUIRED),
        ("save_note", "call-0", CallOutcome.OK, ApprovalMode.USER_CONFIRMED),
    ]
