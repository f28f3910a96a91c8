"""Adapter benchmark: what veridic's check of a model call costs on a long conversation.

Run: ``.venv/bin/python benchmarks/adapters.py``. LangChain's ``create_agent`` hands each
model call through veridic's ``approval_middleware`` (its ``wrap_model_call``), which
checks the system prompt and the tools, and keeps every tool message that is a data block
veridic wrote for its call, fencing anything else. The conversation here holds 200 tool
answers of 2 KB of JSON each (brackets and tags in it, written as codes in the block).

Contenders, each one model call on the same request:

- the plain pass-through (the model's handler alone): the floor;
- veridic's check, the answers written by these tools in this process: each one is known
  by the digest of the block veridic wrote (``_Written``), with no render;
- veridic's check, the same answers as another process wrote them (a checkpoint read
  back, a worker restarted): each block is read and rendered again to compare, which was
  the cost of every model call before (6.6 ms, against 1.4 ms by digest, on 2026-12-07).

The messages sent on are checked identical in every contender before anything is timed.

The Agents SDK's check of a replayed history, the same 200 answers as the items of a run of
these tools (``result.to_input_list()``), for an agent of 30 tools: the SDK asks each tool's
``is_enabled`` on every turn, with the same input, and veridic's reads every input item
there, each tool result known by digest (the tools that wrote it) or rendered again (another
process's tools). One tool's check is the floor; a turn asks all 30, the first of them reads
the input and the others find it unchanged (a turn cost 30 checks before, 2026-12-08). Every
timed call gets an input no check saw (the next turn's), and every contender must let the
run's own history through before anything is timed.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import _harness as h

from veridic import ApprovalPolicy, Registry, SQLiteAuditSink, instruction

ANSWERS = 200
SIZE = 2_000
TOOLS = 30


def _document(query: str) -> str:
    """About 2 KB of JSON, as a search tool answers: brackets, quotes and a tag or two."""
    rows = [
        {"id": f"{query}-{n}", "title": f"Result {n} for {query}", "tags": ["doc", "kb"]}
        for n in range(40)
    ]
    return (json.dumps(rows) + " <b>end</b>")[:SIZE]


def search(query: str) -> str:
    """Search the knowledge base.

    Args:
        query: What to look for.
    """
    return _document(query)


def main(argv: Sequence[str] | None = None) -> None:
    logging.getLogger("veridic").setLevel(logging.ERROR)
    report = h.Report("adapters.py")
    if importlib.util.find_spec("langchain") is None:
        section = report.section("10. adapters", about=[], baselines=[])
        section.notes.append("langchain is not installed: nothing measured (extra langchain)")
        h.finish(report, argv)
        return
    with tempfile.TemporaryDirectory() as folder:
        _langchain(report, Path(folder))
    if importlib.util.find_spec("agents") is None:
        section = report.section("10. adapters, Agents SDK", about=[], baselines=[])
        section.notes.append("openai-agents is not installed: nothing measured (extra)")
    else:
        with tempfile.TemporaryDirectory() as folder:
            _openai_agents(report, Path(folder))
    h.finish(report, argv)


def _langchain(report: h.Report, folder: Path) -> None:
    from langchain.agents.middleware import ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolCall

    from veridic.integrations.langchain import approval_middleware, structured_tools, system_prompt

    registry = Registry("bench-adapters")
    registry.tool(kind="query")(search)
    view = registry.view()
    prompt = system_prompt(view, instruction("You answer from the knowledge base."))
    with SQLiteAuditSink(folder / "audit.db") as audit:
        tools = structured_tools(
            view, policy=ApprovalPolicy(view), audit=audit, request_id="bench", prompt=prompt
        )
        middleware = approval_middleware(tools)
        # The same request's tools in another process (a worker restarted, a checkpoint read
        # back): they never wrote these answers, so they render each one again to compare.
        restarted = structured_tools(
            view, policy=ApprovalPolicy(view), audit=audit, request_id="bench", prompt=prompt
        )
        elsewhere = approval_middleware(restarted)
        (searching,) = [tool for tool in tools if tool.name == "search"]
        messages: list[Any] = [HumanMessage("Find everything.")]
        for n in range(ANSWERS):
            call = ToolCall(name="search", args={"query": f"q{n}"}, id=f"c{n}", type="tool_call")
            messages += [AIMessage("", tool_calls=[call]), searching.invoke(call)]
    answer = ModelResponse(result=[AIMessage("Done.")])
    seen: list[Any] = []

    def _execute_model_sync(request: Any) -> Any:  # the name create_agent's handler has
        seen.append(request.messages)
        return answer

    def asked(offered: list[Any]) -> Any:
        return ModelRequest(
            model=None,  # type: ignore[arg-type]  # the handler never calls a model
            messages=messages,
            system_message=SystemMessage(prompt.system),
            tools=offered,
            tool_choice=None,
            response_format=None,
            state={"messages": messages},
            runtime=None,  # no hook of this benchmark reads it
            model_settings={},
        )

    own, other = asked(list(tools)), asked(list(restarted))
    middleware.wrap_model_call(own, _execute_model_sync)
    elsewhere.wrap_model_call(other, _execute_model_sync)
    if not (seen[0] == seen[1] == messages):
        h.fail("veridic's check changed a tool message veridic wrote")
    contenders = [
        h.Contender("plain pass-through (the handler)", lambda: _execute_model_sync(own)),
        h.Contender(
            "veridic, answers written here (by digest)",
            lambda: middleware.wrap_model_call(own, _execute_model_sync),
        ),
        h.Contender(
            "veridic, answers another process wrote (rendered)",
            lambda: elsewhere.wrap_model_call(other, _execute_model_sync),
        ),
    ]
    timings = h.measure(contenders, rounds=15)
    section = report.section(
        f"10. LangChain model call: {ANSWERS} tool answers of {SIZE:,} bytes, per call",
        about=[
            "The pass-through is the floor; veridic checks the system prompt and the tools, "
            "and keeps each answer that is its own block for the call."
        ],
        baselines=["pass-through"],
    )
    floor = timings["plain pass-through (the handler)"].median
    for contender in contenders:
        section.timed(contender.name, timings[contender.name], against=(floor,))


def _openai_agents(report: h.Report, folder: Path) -> None:
    """The Agents SDK's check of a replayed history: each tool's ``is_enabled`` reads every
    item of the run's input (the SDK asks it of every tool on every turn), a
    ``function_call_output`` by the digest of the block these tools wrote, or rendered again
    when another process wrote it. Each timed call is given an input no check saw before (the
    next turn's: a user item more), so the input is read, not known from an earlier call."""
    from agents import Agent

    told, tools, restarted, items = _agents_history(folder, TOOLS)
    agent = Agent(name="bench", instructions=told, tools=list(tools))
    other = Agent(name="bench", instructions=told, tools=list(restarted))
    own, elsewhere = _check_of(tools), _check_of(restarted)
    contenders = [
        h.Contender(
            "one tool, answers written here (by digest)",
            lambda: own(_turn(items), agent),
            batch=_turns(items, lambda given: own(given, agent)),
        ),
        h.Contender(
            "one tool, answers another process wrote (rendered)",
            lambda: elsewhere(_turn(items), other),
            batch=_turns(items, lambda given: elsewhere(given, other)),
        ),
        h.Contender(
            f"a turn of {TOOLS} tools, by digest",
            lambda: _every(tools, _turn(items), agent),
            batch=_turns(items, lambda given: _every(tools, given, agent)),
        ),
        h.Contender(
            f"a turn of {TOOLS} tools, rendered",
            lambda: _every(restarted, _turn(items), other),
            batch=_turns(items, lambda given: _every(restarted, given, other)),
        ),
    ]
    for contender in contenders:
        if contender.run() is not True:
            h.fail(f"{contender.name}: the check refused the run's own history")
    timings = h.measure(contenders, rounds=15)
    section = report.section(
        f"10. Agents SDK input check: {ANSWERS} replayed tool answers of {SIZE:,} bytes, "
        f"an agent of {TOOLS} tools",
        about=[
            "The SDK asks each tool's is_enabled on every turn; it checks the agent and every "
            "input item; a tool result must be one block of these tools, known by digest or "
            "rendered to compare. A turn asks every tool, with the same input."
        ],
        baselines=["one tool (by digest)", "one tool (rendered)"],
    )
    floors = (
        timings["one tool, answers written here (by digest)"].median,
        timings["one tool, answers another process wrote (rendered)"].median,
    )
    for contender in contenders:
        section.timed(contender.name, timings[contender.name], against=floors)


def _agents_history(folder: Path, count: int) -> tuple[Any, list[Any], list[Any], list[Any]]:
    """For a view of ``count`` tools (``search`` and the built-in ``get_tool_schema`` among
    them): its instructions, the tools
    that ran ``ANSWERS`` calls of ``search``, the same request's tools in another process
    (a worker restarted: they never wrote these answers), and the input of the next turn
    (``result.to_input_list()`` and a user item)."""
    import asyncio

    from _synthetic import registry_of
    from agents import Agent, Runner

    from veridic.integrations.openai_agents import function_tools, instructions

    registry = registry_of(count - 2, "bench-agents")  # and search, and get_tool_schema
    registry.tool(kind="query")(search)
    view = registry.view()
    if len(view.names()) != count:
        h.fail(f"the view has {len(view.names())} tools, not {count}")
    told = instructions(view, instruction("You answer from the knowledge base."))
    with SQLiteAuditSink(folder / "audit.db") as audit:
        tools = function_tools(view, policy=ApprovalPolicy(view), audit=audit, request_id="bench")
        restarted = function_tools(
            view, policy=ApprovalPolicy(view), audit=audit, request_id="bench"
        )
        agent = Agent(name="bench", instructions=told, tools=list(tools), model=_calling(ANSWERS))
        result = asyncio.run(Runner.run(agent, "Find everything.", max_turns=3))
    items: list[Any] = [*result.to_input_list(), {"role": "user", "content": "And now?"}]
    outputs = [item for item in items if item.get("type") == "function_call_output"]
    if len(outputs) != ANSWERS:
        h.fail(f"the run answered {len(outputs)} calls, not {ANSWERS}")
    return told, tools, restarted, items


_TURNS: Final = itertools.count()
"""Numbers no turn had: a batch numbered its turns from 0, so a batch of one turn was given
the input the same contender's last batch passed, and was timed unread (the tools of a
contender remember the input they passed last, whatever ran in between on other tools)."""


def _turn(items: list[Any]) -> Any:
    """The run's context on a new turn: the history and a user item no turn had."""
    from agents import RunContextWrapper

    given = [*items, {"role": "user", "content": f"And the next one, {next(_TURNS)}?"}]
    return RunContextWrapper(context=None, turn_input=given)


def _turns(items: list[Any], check: Callable[[Any], object]) -> Callable[[int], h.Call]:
    """A batch of ``number`` turns, each with an input of its own, made before the timing."""

    def prepared(number: int) -> h.Call:
        contexts = iter([_turn(items) for _ in range(number)])
        return lambda: check(next(contexts))

    return prepared


def _every(tools: Sequence[Any], context: Any, agent: Any) -> bool:
    """One turn as the SDK asks it: every tool's ``is_enabled``, with the turn's input."""
    return all(tool.is_enabled(context, agent) is True for tool in tools)


def _check_of(tools: Sequence[object]) -> Callable[..., object]:
    """The ``is_enabled`` of the ``search`` tool among ``tools``: veridic's check of the run."""
    from agents import FunctionTool

    (tool,) = [t for t in tools if isinstance(t, FunctionTool) and t.name == "search"]
    check = tool.is_enabled
    if not callable(check):
        h.fail("the search tool has no is_enabled check of veridic's")
    return check


def _calling(count: int) -> Any:
    """A scripted model of the Agents SDK: ``count`` calls of ``search`` in one turn, then
    an answer (no network)."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    calls = [
        ResponseFunctionToolCall(
            type="function_call",
            name="search",
            arguments=json.dumps({"query": f"q{n}"}),
            call_id=f"c{n}",
            id=f"fc_{n}",
            status="completed",
        )
        for n in range(count)
    ]
    done = ResponseOutputMessage(
        type="message",
        id="msg_1",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="Done.", annotations=[])],
    )

    class Calling(Model):
        def __init__(self) -> None:
            self.steps: list[list[Any]] = [list(calls), [done]]

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=self.steps.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark runs without streaming")

    return Calling()


if __name__ == "__main__":
    main()
