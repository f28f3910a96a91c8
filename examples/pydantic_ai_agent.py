"""A Pydantic AI agent with veridic underneath: truthful tools, deferred approvals, the audit.

A notes assistant runs on a pydantic-ai ``Agent`` with a scripted model
(``FunctionModel``: no network, the same run every time). Its tools come from
a veridic registry through :func:`veridic.integrations.pydantic_ai.capability`:

1. the sync service did not start, so ``sync_notes`` is in none of the lists
   the model gets, and the capability section says why;
2. the model lists the notes (a query: it runs), saves one (a write) and
   deletes one (irreversible, high risk): the two writes are deferred, and the
   run ends with ``DeferredToolRequests``;
3. the user approves the save, asks to "always allow" the delete (refused:
   it is high risk) and denies it;
4. the run resumes with the answers: the save runs, the delete never does,
   and the audit store holds one record per call with its approval mode.

Run from the repository root: ``python examples/pydantic_ai_agent.py`` or
``python -m examples.pydantic_ai_agent`` (needs ``veridic[pydantic-ai]``).
"""

from __future__ import annotations

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from veridic import (
    AlwaysAllowRefusedError,
    ApprovalPolicy,
    BootError,
    Registry,
    SQLiteAuditSink,
    instruction,
)
from veridic.integrations.pydantic_ai import capability

__all__ = ["build_registry", "main"]

SHOWN: list[AgentInfo] = []
"""What the model was given on each request: its tools and its instructions."""


def build_registry(notes: dict[str, str]) -> Registry:
    """The assistant's tools over ``notes``; the sync service never starts here."""
    registry = Registry("notes")

    @registry.tool(kind="query")
    def list_notes() -> list[str]:
        """List the titles of the user's notes, oldest first."""
        return list(notes)

    @registry.tool(kind="write")
    def save_note(title: str, text: str) -> str:
        """Save a note under a title, replacing a note of the same title.

        Args:
            title: The note's title.
            text: What the note says.
        """
        notes[title] = text
        return f"saved {title!r}"

    @registry.tool(kind="write", irreversible=True)
    def delete_note(title: str) -> str:
        """Delete a note for good; it cannot be restored.

        Args:
            title: The note to delete.
        """
        notes.pop(title, None)
        return f"deleted {title!r}"

    sync = registry.component(
        "sync service",
        boot=_sync_down,
        hint="Ask the administrator to start it.",
        provides="Note sync tools",
    )

    @sync.tool(kind="write")
    def sync_notes(device: str) -> str:
        """Copy every note to one of the user's other devices.

        Args:
            device: The device's name.
        """
        return f"synced to {device}"

    return registry


def _sync_down() -> None:
    raise BootError("the sync server is unreachable")


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: three calls in its first answer, a summary once it has their results."""
    SHOWN.append(info)
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("list_notes", {}, tool_call_id="call-1"),
                ToolCallPart(
                    "save_note", {"title": "groceries", "text": "milk, eggs"}, tool_call_id="call-2"
                ),
                ToolCallPart("delete_note", {"title": "old plans"}, tool_call_id="call-3"),
            ]
        )
    return ModelResponse(parts=[TextPart("Saved your groceries note; I left 'old plans' alone.")])


def main() -> list[tuple[str, str, str]]:
    """Run the scenario and print it; returns the audit rows (tool, approval, outcome)."""
    SHOWN.clear()
    notes = {"old plans": "move to Lisbon"}
    view = build_registry(notes).view()
    policy = ApprovalPolicy(view)
    audit = SQLiteAuditSink(":memory:")
    notes_agent = capability(
        view,
        policy=policy,
        audit=audit,
        request_id="req-1",
        instructions=instruction("You keep the user's notes."),
    )
    agent = Agent(FunctionModel(scripted_model), output_type=[str, DeferredToolRequests])
    first = agent.run_sync("Save my groceries list, drop my old plans.", capabilities=[notes_agent])

    print("[1] What the model was given")
    shown = SHOWN[0]
    print("    tools:", ", ".join(tool.name for tool in shown.function_tools))
    absent = [line for line in (shown.instructions or "").splitlines() if "sync" in line.lower()]
    print("    instructions say:", *absent)

    print("[2] The first run: the query ran, the writes wait for the user")
    requests = first.output
    if not isinstance(requests, DeferredToolRequests):
        raise RuntimeError(f"the first run should have deferred its writes, got {requests!r}")
    for call in requests.approvals:
        asked = requests.metadata[call.tool_call_id]
        print(f"    {call.tool_name} ({asked['risk']} risk) waits: {asked['why']}")

    print("[3] The user answers")
    try:
        policy.allow_always("delete_note")
    except AlwaysAllowRefusedError as error:
        print(f"    always allow delete_note: refused, it is {error.risk} risk")
    answers = requests.build_results(approvals={"call-2": True, "call-3": False})
    print("    save_note: approved; delete_note: denied")

    print("[4] The resumed run")
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=answers,
        capabilities=[notes_agent],
    )
    print("    model:", second.output)
    print("    notes:", ", ".join(sorted(notes)))

    print("[5] The audit store")
    rows = [
        (record.tool, record.approval.value, record.outcome.value)
        for record in audit.records("req-1")
    ]
    for tool, approval, outcome in rows:
        print(f"    {tool:<12} {approval:<15} {outcome}")
    return rows


if __name__ == "__main__":
    main()
