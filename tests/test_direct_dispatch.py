"""Calling ``ToolView.dispatch`` directly cannot bypass the write-side guards."""

from __future__ import annotations

import asyncio

import pytest

from veridic import (
    GuardDeniedError,
    Registry,
    VeridicError,
    guard_instruction_write,
    guard_irreversible,
)

registry = Registry()
deleted: list[str] = []


@registry.tool(kind="write", irreversible=True)
def purge_fixture(name: str) -> str:
    """Permanently delete a golden fixture; this cannot be undone.

    Args:
        name: The fixture to delete.
    """
    guard_irreversible("hard delete golden fixture")
    deleted.append(name)
    return name


@registry.tool(kind="write")
def tidy_up(name: str) -> str:
    """Tidy the fixture store, which may rewrite a feature's system prompt.

    Args:
        name: The feature whose prompt is rewritten.
    """
    guard_instruction_write(["prompt.content"])
    return name


@registry.tool(kind="query")
async def slow_lookup(name: str) -> str:
    """Look a fixture up by name.

    Args:
        name: The fixture to look up.
    """
    return name


def test_direct_dispatch_of_a_high_risk_tool_counts_as_unconfirmed() -> None:
    with pytest.raises(GuardDeniedError, match="hard delete golden fixture"):
        registry.view().dispatch("purge_fixture", {"name": "f1"})
    assert deleted == []


def test_direct_dispatch_of_a_mid_tool_cannot_write_instruction_fields() -> None:
    with pytest.raises(GuardDeniedError, match=r"prompt\.content"):
        registry.view().dispatch("tidy_up", {"name": "triage"})


def test_direct_async_dispatch_is_guarded_too() -> None:
    with pytest.raises(GuardDeniedError):
        asyncio.run(registry.view().adispatch("purge_fixture", {"name": "f2"}))


def test_sync_dispatch_of_an_async_handler_is_refused() -> None:
    with pytest.raises(VeridicError, match=r"async handler.*use adispatch\(\)"):
        registry.view().dispatch("slow_lookup", {"name": "x"})
    assert asyncio.run(registry.view().adispatch("slow_lookup", {"name": "x"})) == "x"
