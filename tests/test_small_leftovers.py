"""Small leftovers of the fifteenth session's reviews, each where a reader met it.

A scripted provider's error quoted a whole scripted item; a pydantic-ai toolset used
without its capability kept a table per run for ever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from veridic import (
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
    instruction,
)
from veridic.gateway import ModelCallLog

_LONG = "n" * 100_000


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: The city's name.
        """
        return f"Sunny in {city}"

    return registry


# --- the scripted provider quotes a scripted item clipped ----------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"tool_calls": [("call-1", _LONG)]},  # not a triple
        {"reasoning": [_LONG]},  # not a ReasoningItem
    ],
    ids=["tool call", "reasoning"],
)
def test_a_scripted_item_is_quoted_clipped_in_its_error(answer: dict[str, object]) -> None:
    view = _registry().view()
    gateway = ModelGateway(
        ScriptedProvider([answer]), audit=SQLiteAuditSink(":memory:"), calls=ModelCallLog()
    )
    prompt = (
        Composer()
        .system(instruction("You tell the weather."), view.capability_section())
        .user("Oslo?")
        .build()
    )
    with pytest.raises(VeridicError) as raised:
        gateway.send(prompt, view, request_id="req-1")
    message = str(raised.value)
    assert _LONG not in message
    assert len(message) < 1000
    assert "chars)" in message  # says how long the item was


def test_a_scripted_tool_call_whose_arguments_are_not_json_is_refused_naming_them() -> None:
    # json.dumps raised its own TypeError from inside the provider's parse: no word of
    # which scripted call, nor what to write instead.
    view = _registry().view()
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": [("call-1", "get_weather", {"city": {_LONG}})]}]),
        audit=SQLiteAuditSink(":memory:"),
        calls=ModelCallLog(),
    )
    prompt = (
        Composer()
        .system(instruction("You tell the weather."), view.capability_section())
        .user("Oslo?")
        .build()
    )
    with pytest.raises(VeridicError) as raised:
        gateway.send(prompt, view, request_id="req-1")
    message = str(raised.value)
    assert "'call-1'" in message
    assert "get_weather" in message
    assert "set" in message  # what is not JSON
    assert _LONG not in message
    assert len(message) < 1000


# --- a pydantic-ai toolset used without its capability --------------------------------------


def test_the_pydantic_ai_toolset_without_its_capability_is_refused_before_a_call_runs() -> None:
    # The toolset keeps what it told the model of each run, for the capability to compare
    # and drop when the run ends (wrap_run). Given to an agent alone, no run ever ended
    # for it: each run's table was kept for ever, and nothing recorded pydantic-ai's own
    # answers (a denial, an unknown name) or checked the tool list the model was sent.
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from veridic import ApprovalPolicy
    from veridic.integrations.pydantic_ai import capability, instructions

    ran: list[str] = []
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: The city's name.
        """
        ran.append(city)
        return f"Sunny in {city}"

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Oslo"}, "c1")])
        return ModelResponse(parts=[TextPart("Sunny.")])

    view = registry.view()
    with SQLiteAuditSink(":memory:") as audit:
        tools = capability(view, policy=ApprovalPolicy(view), audit=audit, request_id="req-1")
        agent = Agent(
            FunctionModel(model), toolsets=[tools.toolset], instructions=instructions(view)
        )
        for _ in range(2):
            with pytest.raises(VeridicError) as refused:
                agent.run_sync("Oslo?")
            message = str(refused.value)
            assert "without its capability" in message
            assert "capabilities=[" in message  # what to do instead
        assert ran == []
        assert not audit.records()
        # Given as the capability, the same toolset runs the call and records it.
        result = Agent(FunctionModel(model)).run_sync("Oslo?", capabilities=[tools])
        assert result.output == "Sunny."
        assert ran == ["Oslo"]
        assert len(audit.records()) == 1


@pytest.mark.parametrize("way", ["run_sync", "iter", "run_stream", "run_stream_events"])
def test_every_way_of_running_an_agent_with_the_capability_runs_its_calls(way: str) -> None:
    # The refusal of a run the capability did not start must not catch a run it did:
    # each way pydantic-ai runs an agent goes through the capability's wrap_run.
    import anyio
    from pydantic_ai import Agent, AgentRunResultEvent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    from veridic import ApprovalPolicy
    from veridic.integrations.pydantic_ai import capability

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Oslo"}, "c1")])
        return ModelResponse(parts=[TextPart("Sunny.")])

    async def streamed(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        if len(messages) == 1:
            yield {0: DeltaToolCall("get_weather", '{"city": "Oslo"}', tool_call_id="c1")}
        else:
            yield "Sunny."

    view = _registry().view()
    with SQLiteAuditSink(":memory:") as audit:
        tools = capability(view, policy=ApprovalPolicy(view), audit=audit, request_id="req-1")
        agent = Agent(FunctionModel(model, stream_function=streamed), capabilities=[tools])

        async def run() -> object:
            if way == "iter":
                async with agent.iter("Oslo?") as running:
                    async for _ in running:
                        pass
                assert running.result is not None
                return running.result.output
            if way == "run_stream":
                async with agent.run_stream("Oslo?") as streaming:
                    return await streaming.get_output()
            async with agent.run_stream_events("Oslo?") as events:
                ended = [event async for event in events][-1]
            assert isinstance(ended, AgentRunResultEvent)
            return ended.result.output

        output = agent.run_sync("Oslo?").output if way == "run_sync" else anyio.run(run)
        assert output == "Sunny."
        [record] = audit.records()
        assert record.tool == "get_weather"
