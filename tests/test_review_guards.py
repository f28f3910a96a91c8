"""An attacker review of risk, approvals, guards and leftover authority, through the public API.

Each test reproduces a leak found by the review: it failed on the code before its fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    PausedRun,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    instruction,
)

SYSTEM = instruction("You tidy the archive.")


def gateway(script: Sequence[Mapping[str, object]], audit: SQLiteAuditSink) -> ModelGateway:
    return ModelGateway(ScriptedProvider(script), audit=audit)


# --- a deferred approval shows the arguments that run ---------------------------------------


def clean_view(ran: list[dict[str, object]]) -> ToolView:
    """A mid-risk write whose dangerous part is a default the model may leave out."""
    registry = Registry()

    @registry.tool(kind="write")
    def clean(path: str, recursive: bool = True, keep_days: int = 0) -> str:
        """Remove old files under a folder of the archive.

        Args:
            path: The folder.
            recursive: Also remove what is in its sub-folders.
            keep_days: Keep files younger than this many days.
        """
        ran.append({"path": path, "recursive": recursive, "keep_days": keep_days})
        return "cleaned"

    return registry.view()


def paused_clean(arguments: str) -> PausedRun:
    view = clean_view([])
    composer = Composer().system(SYSTEM, view.capability_section()).user("Tidy /reports.")
    result = gateway([{"tool_calls": [("c1", "clean", arguments)]}], SQLiteAuditSink()).run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-1", defer=True
    )
    assert result.paused is not None
    return result.paused


def test_a_deferred_approval_shows_the_defaults_the_call_runs_with() -> None:
    paused = paused_clean('{"path": "/reports"}')
    (approval,) = paused.approvals
    # The user approves what the handler gets, not only the keys the model wrote:
    # shown {"path": "/reports"}, the call ran recursive=True without anyone seeing it.
    assert dict(approval.arguments) == {"path": "/reports", "recursive": True, "keep_days": 0}
    ran: list[dict[str, object]] = []
    view = clean_view(ran)
    result = gateway([{"text": "Done."}], SQLiteAuditSink()).resume(
        PausedRun.from_json(paused.to_json()),
        Composer().system(SYSTEM, view.capability_section()),
        view,
        policy=ApprovalPolicy(view),
        answers={approval.digest: True},
    )
    assert result.paused is None
    assert ran == [dict(approval.arguments)]


def test_a_deferred_approval_shows_arguments_as_validated() -> None:
    # pydantic's lax mode reads "7" as 7: the user is shown the value the handler gets.
    (approval,) = paused_clean('{"path": "/reports", "keep_days": "7"}').approvals
    assert dict(approval.arguments) == {"path": "/reports", "recursive": True, "keep_days": 7}


def test_a_default_changed_before_the_resume_makes_the_approval_stale() -> None:
    paused = paused_clean('{"path": "/reports"}')
    (approval,) = paused.approvals
    ran: list[str] = []
    registry = Registry()

    @registry.tool(kind="write")
    def clean(path: str, recursive: bool = True, keep_days: int = 30) -> str:
        """Remove old files under a folder of the archive.

        Args:
            path: The folder.
            recursive: Also remove what is in its sub-folders.
            keep_days: Keep files younger than this many days.
        """
        ran.append(path)
        return "cleaned"

    view = registry.view()
    result = gateway([], SQLiteAuditSink()).resume(
        PausedRun.from_json(paused.to_json()),
        Composer().system(SYSTEM, view.capability_section()),
        view,
        policy=ApprovalPolicy(view),
        answers={approval.digest: True},
    )
    assert ran == []
    assert result.paused is not None
    (again,) = result.pending
    assert "not the ones the user was shown" in again.why
    assert dict(again.arguments)["keep_days"] == 30


def test_json_of_a_paused_run_keeps_the_shown_arguments() -> None:
    paused = paused_clean('{"path": "/reports"}')
    document = json.loads(paused.to_json())
    assert document["approvals"][0]["arguments"] == {
        "path": "/reports",
        "recursive": True,
        "keep_days": 0,
    }
