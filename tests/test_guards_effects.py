"""The effects harness: a tool's risk is judged by the guards it fired, not by its name."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalMode,
    GuardDeniedError,
    InstructionField,
    Registry,
    Risk,
    RiskFloorError,
    ToolView,
    VeridicError,
    guard_instruction_write,
    guard_irreversible,
)
from veridic.effects import arun_observed, check_declared_risk, observe, run_observed
from veridic.guards import dispatching


class StoredPrompt(BaseModel):
    name: str
    content: InstructionField


FIXTURES = {"golden-1": "payload"}


def purge(name: str) -> None:
    """A hard delete with an innocent name."""
    guard_irreversible("hard delete golden fixture")
    FIXTURES.pop(name, None)


def revert_prompt() -> None:
    guard_instruction_write(StoredPrompt)


def rename_fixture() -> None:
    """A restorable write: no guard fires."""


def test_a_hard_delete_named_purge_declared_mid_is_caught_by_what_it_did() -> None:
    FIXTURES["golden-1"] = "payload"
    with observe("purge", Risk.MID) as seen:
        purge("golden-1")
    with pytest.raises(RiskFloorError) as caught:
        check_declared_risk([seen.observation])
    message = str(caught.value)
    assert "tool 'purge' declares risk mid" in message
    assert "irreversible operation 'hard delete golden fixture' (at tests/" in message
    assert "declare risk=Risk.HIGH" in message


def test_observed_guards_record_instead_of_refusing_so_every_effect_is_seen() -> None:
    def both() -> None:
        revert_prompt()
        purge("golden-2")

    with observe("cleanup", Risk.LOW) as seen:
        both()
    assert seen.observation.operations == (
        "instruction_write:StoredPrompt.content",
        "irreversible:hard delete golden fixture",
    )
    assert [e.allowed for e in seen.observation.events] == [False, False]


def test_a_tool_declared_high_passes_the_check() -> None:
    with observe("purge", Risk.HIGH) as seen:
        purge("golden-1")
    check_declared_risk([seen.observation])
    assert seen.observation.required is Risk.HIGH


def test_a_tool_whose_guards_never_fire_needs_nothing_more() -> None:
    with observe("rename_fixture", Risk.MID) as seen:
        rename_fixture()
    assert seen.observation.required is None
    check_declared_risk([seen.observation])


def test_the_check_names_every_understated_tool_at_once() -> None:
    observations = []
    with observe("purge", Risk.MID) as seen:
        purge("x")
    observations.append(seen.observation)
    with observe("revert_prompt", Risk.MID) as seen:
        revert_prompt()
    observations.append(seen.observation)
    with pytest.raises(RiskFloorError, match=r"'purge'.*; tool 'revert_prompt'.*StoredPrompt"):
        check_declared_risk(observations)


def test_observing_does_not_switch_off_guards_outside_the_observed_block() -> None:
    with observe("purge", Risk.MID):
        purge("x")
    with (
        dispatching("purge", Risk.MID, ApprovalMode.ALWAYS_RULE),
        pytest.raises(GuardDeniedError),
    ):
        purge("x")


def _shop() -> ToolView:
    registry = Registry("fixtures")

    @registry.tool(kind="write")
    def purge_fixture(name: str) -> str:
        """Remove a golden fixture from the dry-run set.

        Args:
            name: The fixture.
        """
        purge(name)
        return "purged"

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; a hard delete that cannot be undone.

        Args:
            name: The fixture.
        """
        purge(name)
        return "deleted"

    @registry.tool(kind="write")
    async def archive_fixture(name: str) -> str:
        """Archive a golden fixture and drop its payload for good.

        Args:
            name: The fixture.
        """
        purge(name)
        return "archived"

    return registry.view()


def test_running_tools_through_a_view_checks_each_declared_risk() -> None:
    view = _shop()
    observations = [
        run_observed(view, "delete_golden", {"name": "golden-1"}),
        run_observed(view, "purge_fixture", {"name": "golden-1"}),
        asyncio.run(arun_observed(view, "archive_fixture", {"name": "golden-1"})),
    ]
    assert [(o.tool, o.declared, o.understated) for o in observations] == [
        ("delete_golden", Risk.HIGH, False),
        ("purge_fixture", Risk.MID, True),
        ("archive_fixture", Risk.MID, True),
    ]
    with pytest.raises(RiskFloorError, match=r"'purge_fixture'.*; tool 'archive_fixture'"):
        check_declared_risk(observations)


def test_an_async_tool_is_observed_with_arun_observed() -> None:
    with pytest.raises(VeridicError, match=r"'archive_fixture' .* is async: observe it with await"):
        run_observed(_shop(), "archive_fixture", {"name": "x"})


def test_observing_inside_a_real_dispatch_does_not_switch_the_guards_off() -> None:
    with (
        dispatching("purge", Risk.MID, ApprovalMode.ALWAYS_RULE),
        observe("purge", Risk.HIGH),
        pytest.raises(GuardDeniedError, match=r"'purge'.*risk mid"),
    ):
        purge("x")
