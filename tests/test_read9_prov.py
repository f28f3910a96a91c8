"""A second read of the eighth review's provider, gateway and adapter changes: what they
broke or missed on everyday traffic."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.exceptions import ModelError
from test_integration_langchain import World, turn
from test_integration_langchain import world as world
from test_providers import MESSAGE, chat_chunk
from test_review8_adapt import FullDisk
from test_review8_prov import _claude_stream, _claude_usage, _copy, _parts, _piece, _stream_chat

from veridic import AuditWriteError
from veridic.integrations.langchain import approval_middleware, structured_tools

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


# --- Anthropic usage: a delta's lower count does not replace the start's -------------------------


def test_an_anthropic_stream_whose_delta_says_0_tokens_read_keeps_the_starts_count() -> None:
    """SGLang's Messages endpoint (and proxies built like it) sends the prompt's count in
    ``message_start`` and ``"input_tokens": 0`` in ``message_delta``: read over the start's,
    as the eighth review made it, the stream counted 0 tokens read where the same answer
    sent counts 176, and ``Limits(tokens=...)`` let the run go on past its budget. The
    counts are cumulative: a later, lower one keeps the count held."""
    start = {"input_tokens": 176, "cache_read_input_tokens": 1024, "output_tokens": 1}
    delta: dict[str, Any] = {
        "input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 300,
    }
    sent = {**_copy(MESSAGE), "usage": {**start, "output_tokens": 300}}
    whole, piecewise = _claude_usage(("json", sent), ("sse", _claude_stream(start, delta)))
    assert _parts(whole) == (1200, 300, 1024, 0, 0)
    assert _parts(piecewise) == _parts(whole)


# --- LangChain: veridic's errors stay picklable when made non-retryable ---------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_error_raised_through_langchain_middleware_can_be_pickled(
    world: World, asynchronous: bool
) -> None:
    """The eighth review made every veridic error raised from a tool call a LangChain
    ``ModelError`` by swapping its class for one made at run time under the same name;
    ``pickle`` finds a class by its name, so the error could no longer cross a process
    boundary (a process pool, a task queue, a LangGraph server's error record): it raised
    ``PicklingError: it's not the same object as veridic.errors.AuditWriteError``."""
    world.policy.allow_always("save_note")
    tools = structured_tools(
        world.view, policy=world.policy, audit=FullDisk(), request_id="req-1", prompt=world.prompt
    )
    agent = world.agent(
        turn(("save_note", {"text": "milk"})),
        tools=tools,
        middleware=[
            ToolRetryMiddleware(max_retries=1, initial_delay=0),
            approval_middleware(tools),
        ],
    )
    start = {"messages": [{"role": "user", "content": "Note: milk."}]}

    def ask() -> object:
        if asynchronous:
            return asyncio.run(agent.graph.ainvoke(start, agent.config))
        return agent.graph.invoke(start, agent.config)

    with pytest.raises(AuditWriteError) as raised:
        ask()
    copied = pickle.loads(pickle.dumps(raised.value))
    assert isinstance(copied, AuditWriteError)
    assert isinstance(copied, ModelError)
    assert not copied.is_retryable
    assert str(copied) == str(raised.value)
    assert copied.result.value == "saved"


# --- a chat stream that says both that the model stopped and that it called ----------------------


@pytest.mark.parametrize("reasons", [("tool_calls", "stop"), ("stop", "tool_calls")])
def test_a_chat_stream_that_ends_with_tool_calls_and_stop_still_runs_its_call(
    reasons: tuple[str, str],
) -> None:
    """NVIDIA Dynamo and ChatMock (a Codex proxy) end a streamed call with a chunk saying
    ``tool_calls`` and one more saying ``stop``; both say the model ended the answer
    itself. The eighth review refused every second finish that differs, so these everyday
    answers failed; only a cut-off reason (``length``) that another would replace is
    what made a cut-off call run, and that is still refused."""
    chunks = [
        chat_chunk(
            _piece(
                id="call_A",
                type="function",
                function={"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            )
        ),
        *(chat_chunk({}, finish=reason) for reason in reasons),
    ]
    reply = _stream_chat(chunks)
    assert [(call.id, call.name) for call in reply.tool_calls] == [("call_A", "get_weather")]
    assert reply.stop_reason in reasons
