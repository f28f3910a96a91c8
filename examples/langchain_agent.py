"""A LangChain agent on a veridic view: approvals at LangGraph interrupts, every call audited.

A notes assistant has three tools: ``get_weather`` (a query), ``save_note`` (a write)
and ``delete_notes`` (irreversible, so high risk). A fourth, ``sync_calendar``,
belongs to a component that did not start: the model is not given it, and the
system prompt says why. A scripted chat model (no network) asks for the weather,
saves a note and deletes every note in one turn; the agent pauses at LangChain's
human-in-the-loop interrupt for the two writes, the user approves the note with
an edit and rejects the deletion, and the audit store shows how each call came to
run or not.

Run from the repository root: ``python examples/langchain_agent.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain.agents import create_agent
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from veridic import ApprovalPolicy, BootError, Registry, SQLiteAuditSink, instruction
from veridic.integrations.langchain import approval_middleware, structured_tools, system_prompt

NOTES: list[str] = ["Buy milk."]


class ScriptedChatModel(GenericFakeChatModel):
    """A chat model that answers from a script and accepts the tools it is bound to."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        print("tools given to the model:", ", ".join(_name(tool) for tool in tools))
        return cast("Runnable[LanguageModelInput, AIMessage]", self)


def _name(tool: object) -> str:
    return tool.name if isinstance(tool, BaseTool) else str(tool)


def _calendar_down() -> None:
    raise BootError("the calendar service is unreachable")


def build_registry() -> Registry:
    """The assistant's tools, declared once: the prompt, the tool list and dispatch agree."""
    registry = Registry("notes")

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Current weather in a city.

        Args:
            city: City name, e.g. "Oslo".
        """
        return f"Sunny in {city}"

    @registry.tool(kind="write")
    def save_note(text: str) -> str:
        """Save a note for the user.

        Args:
            text: The note.
        """
        NOTES.append(text)
        return f"saved ({len(NOTES)} notes)"

    @registry.tool(kind="write", irreversible=True)
    def delete_notes() -> str:
        """Permanently delete every note; this cannot be undone."""
        NOTES.clear()
        return "deleted"

    calendar = registry.component("calendar", boot=_calendar_down, hint="start the calendar")

    @calendar.tool(kind="write")
    def sync_calendar() -> str:
        """Copy the notes with a date into the user's calendar."""
        return "synced"

    return registry


def main() -> None:
    """Run the scenario and print what the model, the reviewer and the audit store saw."""
    NOTES[:] = ["Buy milk."]
    registry = build_registry()
    registry.boot()
    view = registry.view()
    policy = ApprovalPolicy(view)
    audit = SQLiteAuditSink(":memory:")
    prompt = system_prompt(view, instruction("You keep the user's notes."))
    tools = structured_tools(view, policy=policy, audit=audit, request_id="run-1", prompt=prompt)

    turn = AIMessage(
        "",
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Oslo"}, "id": "call-1"},
            {"name": "save_note", "args": {"text": "Pack an umbrella"}, "id": "call-2"},
            {"name": "delete_notes", "args": {}, "id": "call-3"},
        ],
    )
    model = ScriptedChatModel(messages=iter([turn, AIMessage("Noted; nothing was deleted.")]))
    agent = create_agent(
        model,
        tools=tools,
        system_prompt=prompt.system,
        middleware=[approval_middleware(tools)],
        checkpointer=InMemorySaver(),
    )
    config = RunnableConfig(configurable={"thread_id": "notes-1"})
    section = next(line for line in prompt.system.splitlines() if "calendar" in line)
    print("the capability section says:", section.strip())

    paused = agent.invoke(
        {"messages": [{"role": "user", "content": "Weather in Oslo? Then tidy my notes."}]},
        config,
        version="v2",
    )
    (interrupt,) = paused.interrupts
    for action in interrupt.value["action_requests"]:
        print("asked to approve:", action["name"], action["args"])
    decisions = [
        {"type": "edit", "edited_action": {"name": "save_note", "args": {"text": "Umbrella!"}}},
        {"type": "reject", "message": "Keep my notes."},
    ]
    done = agent.invoke(Command(resume={"decisions": decisions}), config, version="v2")
    for message in done.value["messages"]:
        if isinstance(message, ToolMessage):
            print(f"tool message ({message.status}):", _one_line(message))
    print("notes:", NOTES)
    # LangGraph runs a turn's tool calls in parallel: the records' order is the threads',
    # so they are printed by tool.
    for record in sorted(audit.records("run-1"), key=lambda record: record.tool):
        print("audit:", record.tool, record.outcome.value, record.approval.value)


def _one_line(message: BaseMessage) -> str:
    """The message's data block on one line (after the note LangChain adds to an edited call)."""
    text = message.content if isinstance(message.content, str) else str(message.content)
    block = text[text.find("<data") :] if "<data" in text else text
    return " | ".join(line.strip() for line in block.splitlines())


if __name__ == "__main__":
    main()
