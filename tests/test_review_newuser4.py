"""A new user's second week, a fourth time: wiring veridic into production, and its slips.

The production app is the day-one app grown up: the run loop on a real SDK over
a fake transport, a refund that waits for a person across two requests (the
paused run and the "always" rules kept in SQLite, the second request in a fresh
interpreter), spans in an in-memory exporter, and a framework adapter. Each test
is a place where the second week stalled: a slip veridic let through to surface
a request later, an error that named a type instead of the fix, a page that
said one thing while the code did another.
"""

from __future__ import annotations

import ast
import doctest
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    Registry,
    Risk,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    instruction,
)
from veridic.integrations.langchain import approval_middleware, structured_tools, system_prompt

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = instruction("You are Acme's support assistant. Be brief.")


def _registry() -> Registry:
    registry = Registry("support")

    @registry.tool(kind="write")
    def add_note(order_id: str, note: str) -> str:
        """Add an internal note to an order.

        Args:
            order_id: The order's id.
            note: The note's text.
        """
        return f"noted on {order_id}"

    @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
    def refund_order(order_id: str, reason: str = "customer request") -> str:
        """Refund an order in full. The money cannot be taken back.

        Args:
            order_id: The order's id.
            reason: Why the refund is made.
        """
        return f"refunded {order_id}"

    return registry


# --- an approval used as the key of its answer ---------------------------------------


def _paused_refund() -> tuple[ModelGateway, Registry, RunResult[None]]:
    registry = _registry()
    view = registry.view()
    provider = ScriptedProvider(
        [{"tool_calls": [("c1", "refund_order", {"order_id": "A-1"})]}, {"text": "Refunded."}]
    )
    gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
    composer = Composer().system(SYSTEM, view.capability_section()).user("Refund A-1.")
    result = gateway.run(composer, view, policy=ApprovalPolicy(view), request_id="r1", defer=True)
    assert result.paused is not None
    return gateway, registry, result


def test_an_approval_used_as_the_key_of_its_answer_says_to_key_it_by_its_digest() -> None:
    # answers={approval: True for approval in result.pending} failed with
    # "unhashable type: 'mappingproxy'", naming a type the app never made.
    _, _, result = _paused_refund()
    pending = result.pending
    with pytest.raises(TypeError) as raised:
        {approval: True for approval in pending}  # noqa: C420  # the slip, as it is written
    message = str(raised.value)
    assert "mappingproxy" not in message
    assert "approval.digest" in message
    assert "refund_order" in message


def test_the_answer_keyed_by_the_digest_still_resumes() -> None:
    gateway, registry, result = _paused_refund()
    view = registry.view()
    paused = result.paused
    assert paused is not None
    done = gateway.resume(
        paused,
        Composer().system(SYSTEM, view.capability_section()),
        view,
        policy=ApprovalPolicy(view),
        answers={approval.digest: True for approval in result.pending},
    )
    assert done.text == "Refunded."


# --- a restored "always" rule that does not apply, and is not in .skipped ------------


def test_the_page_shows_a_rule_granted_for_another_tool_is_kept_out_of_skipped() -> None:
    # The pages said restore() "applies those that still hold and reports the stale
    # ones in .skipped"; after a tool's description changed, .skipped was empty, the
    # rule was in policy.rules, and yet every call was asked about. The page now
    # shows it, as a doctest that must keep running.
    page = (ROOT / "docs" / "plans-and-approvals.md").read_text(encoding="utf-8")
    blocks = [
        block
        for block in re.findall(r"^```python\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
        if ">>> restored = ApprovalPolicy.restore(" in block
    ]
    assert len(blocks) == 1, "the page shows no restore() of a rule granted for another tool"
    test = doctest.DocTestParser().get_doctest(
        blocks[0],
        {"ApprovalPolicy": ApprovalPolicy, "Registry": Registry},
        "plans-and-approvals.md",
        "docs/plans-and-approvals.md",
        0,
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    assert "restored.skipped" in blocks[0]
    assert "print(asked.why)" in blocks[0]


# --- LangChain: the reviewer approves the arguments the handler will get -------------


class _ScriptedChatModel(GenericFakeChatModel):
    """Answers from a script and accepts the tools it is bound to, as the example's."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return cast("Runnable[LanguageModelInput, AIMessage]", self)


def test_the_langchain_reviewer_sees_the_defaults_the_model_left_out() -> None:
    # The gateway's dialog shows the arguments "as the handler will get them, defaults
    # filled in, so the user approves what runs"; the LangChain review of the same
    # refund showed only {"order_id": "A-1"}, and the refund ran with a reason the
    # reviewer never saw.
    view = _registry().view()
    policy = ApprovalPolicy(view)
    audit = SQLiteAuditSink(":memory:")
    prompt = system_prompt(view, SYSTEM)
    tools = structured_tools(view, policy=policy, audit=audit, request_id="r1", prompt=prompt)
    call = {"name": "refund_order", "args": {"order_id": "A-1"}, "id": "c1"}
    model = _ScriptedChatModel(
        messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="Done.")])
    )
    agent = create_agent(
        model,
        tools=tools,
        system_prompt=prompt.system,
        middleware=[approval_middleware(tools)],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "r1"}}
    paused = agent.invoke(
        {"messages": [{"role": "user", "content": "Refund A-1."}]}, config, version="v2"
    )
    (action,) = paused.interrupts[0].value["action_requests"]
    assert action["args"] == {"order_id": "A-1"}  # the model's own, for an edit
    shown = action["description"].rsplit("\nArguments: ", 1)[1]
    assert json.loads(shown) == {"order_id": "A-1", "reason": "customer request"}
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, version="v2")
    (record,) = audit.records("r1")
    assert (record.tool, record.approval.value, record.outcome.value) == (
        "refund_order",
        "user_confirmed",
        "ok",
    )


def test_the_langchain_reviewer_sees_invalid_arguments_as_the_model_wrote_them() -> None:
    view = _registry().view()
    policy = ApprovalPolicy(view)
    prompt = system_prompt(view, SYSTEM)
    tools = structured_tools(
        view, policy=policy, audit=SQLiteAuditSink(":memory:"), request_id="r1", prompt=prompt
    )
    call = {"name": "refund_order", "args": {"order_id": 7, "amount": "all"}, "id": "c1"}
    model = _ScriptedChatModel(messages=iter([AIMessage(content="", tool_calls=[call])]))
    agent = create_agent(
        model,
        tools=tools,
        system_prompt=prompt.system,
        middleware=[approval_middleware(tools)],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "r1"}}
    paused = agent.invoke(
        {"messages": [{"role": "user", "content": "Refund A-1."}]}, config, version="v2"
    )
    (action,) = paused.interrupts[0].value["action_requests"]
    shown = action["description"].rsplit("\nArguments: ", 1)[1]
    assert json.loads(shown) == {"amount": "all", "order_id": 7}


# --- the Agents SDK: a paused state restored in the next request ---------------------


def test_the_agents_pages_await_the_sdks_run_state_restore() -> None:
    # The page and answer()'s docstring wrote RunState.from_string(new_agent, ...)
    # without await: in the SDK it is a coroutine, so the next request got a
    # coroutine object where it expected the paused state, and no interruptions.
    import inspect

    from agents import RunState

    from veridic.integrations import openai_agents

    assert inspect.iscoroutinefunction(RunState.from_string)
    page = (ROOT / "docs" / "integrations" / "openai_agents.md").read_text(encoding="utf-8")
    docstring = " ".join((openai_agents.answer.__doc__ or "").split())
    for text in (" ".join(page.split()), docstring):
        assert "RunState.from_string(" in text
        assert len(re.findall(r"(?<!await )RunState\.from_string\(", text)) == 0


def test_the_langchain_pages_config_is_a_runnable_config_mypy_accepts() -> None:
    # Copied into a project checked with mypy --strict, the page's
    # config = {"configurable": {...}} was a dict[str, dict[str, str]], which no
    # overload of agent.invoke(...) takes ([call-overload], for both invokes), where
    # examples/langchain_agent.py builds a RunnableConfig.
    page = (ROOT / "docs" / "integrations" / "langchain.md").read_text(encoding="utf-8")
    (example,) = [
        block
        for block in re.findall(r"^```python\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
        if "create_agent(" in block and "agent.invoke(" in block
    ]
    tree = ast.parse(example)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert "RunnableConfig" in imported
    (config,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(target, ast.Name) and target.id == "config"
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    if isinstance(config, ast.AnnAssign):
        assert ast.unparse(config.annotation) == "RunnableConfig"
    else:
        assert isinstance(config.value, ast.Call)
        assert ast.unparse(config.value.func) == "RunnableConfig"
