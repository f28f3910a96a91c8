"""A prompt store's maintainer agent on the OpenAI Agents SDK, offline: veridic decides approvals.

The agent's tools are ``function_tools(view, ...)``: the view's own names,
descriptions and schemas, with the SDK's ``needs_approval`` driven by
veridic's policy. A scripted model (the SDK's ``Model`` interface: no
network, no API key) asks for a query, a rename under an "always" rule, a
prompt edit and a hard delete. :func:`main` prints:

1. the tools the model is given and the capability section: the Pro extension
   did not start, so ``create_snippet`` is in no list, and the section says why;
2. "always allow" refused for the high-risk ``edit_prompt``, set for ``rename_fixture``;
3. the run's interruptions (the two high-risk calls), with the policy's reasons;
4. the user's answers (yes to the edit, no to the delete) and the resumed run;
5. the audit store: one row per call, each with its approval mode.

Run it from the repository root: ``python examples/openai_agents_agent.py``
(needs ``pip install 'veridic[openai-agents]'``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence

import agents
from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    Runner,
    Tool,
    TResponseInputItem,
    Usage,
)
from agents.items import TResponseOutputItem, TResponseStreamEvent
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from pydantic import BaseModel

from veridic import (
    AlwaysAllowRefusedError,
    ApprovalPolicy,
    BootError,
    InstructionField,
    Registry,
    SQLiteAuditSink,
    guard_instruction_write,
    guard_irreversible,
    instruction,
)
from veridic.integrations.openai_agents import (
    answer,
    approval_request,
    function_tools,
    instructions,
)

__all__ = ["main"]

USER_SAYS_YES = {"edit_prompt": True, "delete_golden": False}
"""The user's answers to the confirmation dialog, by tool."""


class StoredPrompt(BaseModel):
    """A row of the prompt store: the owning feature reads ``content`` as its system prompt."""

    feature: str
    content: InstructionField


def build_registry(prompts: dict[str, str], fixtures: set[str]) -> Registry:
    """The store's tools: a query, a mid-risk write, two high-risk ones, a component that fails."""
    registry = Registry("prompt-store")

    @registry.tool(kind="query")
    def list_fixtures() -> list[str]:
        """List the golden fixtures, sorted by name."""
        return sorted(fixtures)

    @registry.tool(kind="write")
    def rename_fixture(name: str, new_name: str) -> str:
        """Rename a golden fixture; the old name stays as an alias.

        Args:
            name: The fixture.
            new_name: Its new name.
        """
        fixtures.discard(name)
        fixtures.add(new_name)
        return f"renamed {name} to {new_name}"

    @registry.tool(kind="write", writes=(StoredPrompt,))
    def edit_prompt(feature: str, content: str) -> str:
        """Save new content that becomes the feature's system prompt immediately.

        Args:
            feature: The AI feature.
            content: The new prompt text.
        """
        prompt = StoredPrompt.model_validate({"feature": feature, "content": content})
        guard_instruction_write(prompt)  # refuses unless the user confirmed this very call
        prompts[feature] = str(prompt.content)
        return "saved"

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; a hard delete that cannot be undone.

        Args:
            name: The fixture.
        """
        guard_irreversible("hard delete golden fixture")
        fixtures.discard(name)
        return "deleted"

    def old_core() -> None:
        raise BootError("requires core >= 2.3")

    pro = registry.component(
        "Pro extension",
        boot=old_core,
        provides="Prompt snippets",
        hint="Update the core to 2.3 or newer, then restart.",
    )

    @pro.tool(kind="write")
    def create_snippet(name: str, text: str) -> str:
        """Create a reusable prompt snippet.

        Args:
            name: The snippet's name.
            text: Its text.
        """
        return "created"

    return registry


class ScriptedModel(Model):
    """Answers each turn with the next scripted list of output items."""

    def __init__(self, *turns: Sequence[TResponseOutputItem]) -> None:
        self.turns = list(turns)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        return ModelResponse(output=list(self.turns.pop(0)), usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this example does not stream")


def _call(name: str, arguments: dict[str, str], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        name=name,
        arguments=json.dumps(arguments),
        call_id=call_id,
        id=f"fc_{call_id}",
        status="completed",
    )


def _say(text: str) -> ResponseOutputMessage:
    content: list[ResponseOutputText | ResponseOutputRefusal] = [
        ResponseOutputText(type="output_text", text=text, annotations=[])
    ]
    return ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed", content=content
    )


async def converse() -> None:
    """The scenario, printed section by section."""
    prompts = {"triage": "Answer calmly."}
    fixtures = {"golden-1", "golden-2"}
    registry = build_registry(prompts, fixtures)
    view = registry.view()
    policy = ApprovalPolicy(view)
    audit = SQLiteAuditSink(":memory:")
    tools = function_tools(view, policy=policy, audit=audit, request_id="req-1")
    system = instructions(view, instruction("You maintain AI features and their fixtures."))

    print("[1] The tools the model is given, and what the capability section says")
    print("    " + ", ".join(tool.name for tool in tools))
    withheld = sorted(status.name for status in view.withheld())
    print(f"    in no list: {', '.join(withheld)}")
    for line in str(view.capability_section()).splitlines():
        if "not available" in line:
            print(f"    | {line}")

    print("\n[2] Standing rules")
    try:
        policy.allow_always("edit_prompt")
    except AlwaysAllowRefusedError as refused:
        print(f"    always allow refused for {refused.tool}: it is high risk")
    policy.allow_always("rename_fixture")
    print("    always allow set for rename_fixture")

    model = ScriptedModel(
        [
            _call("list_fixtures", {}, "c1"),
            _call("rename_fixture", {"name": "golden-1", "new_name": "golden-a"}, "c2"),
            _call("edit_prompt", {"feature": "triage", "content": "Answer in lower case."}, "c3"),
            _call("delete_golden", {"name": "golden-2"}, "c4"),
        ],
        [_say("Renamed golden-1 and saved the triage prompt; golden-2 stays, you declined.")],
    )
    agent = Agent(name="maintainer", instructions=system, tools=tools, model=model)
    result = await Runner.run(agent, "Tidy the fixtures and lower-case the triage prompt.")

    print("\n[3] The run stops for the user")
    state = result.to_state()
    for item in result.interruptions:
        request = approval_request(item)
        print(f"    {request.tool} ({request.risk.value}): {request.why}")

    print("\n[4] The user answers, and the run resumes")
    for item in result.interruptions:
        approved = USER_SAYS_YES[approval_request(item).tool]
        print(f"    {item.tool_name}: {'yes' if approved else 'no'}")
        await answer(state, item, approved=approved)
    resumed = await Runner.run(agent, state)
    print(f"    model: {resumed.final_output}")
    print(f"    triage prompt: {prompts['triage']!r}; fixtures: {sorted(fixtures)}")

    print("\n[5] The audit store")
    for record in audit.records():
        print(f"    {record.tool:<18} {record.outcome.value:<8} {record.approval.value}")


def main() -> None:
    """Run the scenario offline: the model is scripted and the SDK's tracing is off."""
    agents.set_tracing_disabled(True)
    asyncio.run(converse())


if __name__ == "__main__":
    main()
