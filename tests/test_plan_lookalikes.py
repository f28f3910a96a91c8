"""Names a reader cannot tell apart are shown so they can: a plan's notice and a plan run's
notice escape every character of a model-written name outside ASCII."""

from __future__ import annotations

from veridic import (
    ApprovalPolicy,
    Composer,
    Registry,
    SQLiteAuditSink,
    ToolError,
    ToolView,
    instruction,
    normalize_plan,
)
from veridic.run.executor import execute_plan

CYRILLIC_ES = "\u0441"  # looks like a Latin "c"
CYRILLIC_DZE = "\u0455"  # looks like a Latin "s"


def _view() -> ToolView:
    registry = Registry("site")

    @registry.tool(kind="write")
    def create_webhook(name: str) -> str:
        """Create a webhook that receives form submissions.

        Args:
            name: The webhook's name.
        """
        if name == "fail":
            raise ToolError("the webhook could not be created")
        return "hook-1"

    return registry.view()


def test_a_look_alike_tool_name_is_escaped_in_the_notice() -> None:
    look_alike = f"{CYRILLIC_ES}reate_webhook"
    plan = normalize_plan([{"id": "a", "tool": look_alike, "arguments": {"name": "x"}}], _view())
    first = plan.notice.splitlines()[1]
    # Shown as is, it read like "did you mean create_webhook?" of the same name.
    assert first.startswith("- '\\u0441reate_webhook' (step a): no tool has this name here")
    assert look_alike not in plan.notice


def test_a_look_alike_step_id_is_escaped_in_the_notice() -> None:
    # Two ids a reader sees as one: the notice must say which of them was removed.
    steps = [
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "x"}},
        {"id": f"{CYRILLIC_DZE}1", "tool": "create_snippet", "arguments": {}},
        {
            "id": "s2",
            "tool": "create_webhook",
            "arguments": {"name": "y"},
            "depends_on": [f"{CYRILLIC_DZE}1"],
        },
    ]
    plan = normalize_plan(steps, _view())
    assert "(step '\\u04551')" in plan.notice
    assert "needs '\\u04551'" in plan.notice
    assert f"{CYRILLIC_DZE}1" not in plan.notice


def test_a_look_alike_step_id_is_escaped_in_a_plan_runs_notice() -> None:
    view = _view()
    policy = ApprovalPolicy(view)
    policy.allow_always("create_webhook")
    steps = [
        {"id": f"{CYRILLIC_DZE}1", "tool": "create_webhook", "arguments": {"name": "fail"}},
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "y"}},
    ]
    run = execute_plan(
        view,
        normalize_plan(steps, view),
        policy=policy,
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=Composer().system(instruction("You build webhooks.")).build(),
    )
    assert run.notice.startswith("The plan stopped at step '\\u04551' (create_webhook)")
