"""The synthetic application the view and plan benchmarks share: ``count`` tools named
``tool_0``... (writes and queries in turn), every 50th in a component whose boot fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from _in_source import written_in_source

from veridic import Registry


def _handler(index: int) -> Callable[..., str]:
    def handler(user_id: int, note: str = "", dry_run: bool = False) -> str:
        """(docstring written by written_in_source)"""
        return f"{index}:{user_id}"

    handler.__name__ = handler.__qualname__ = f"tool_{index}"
    written_in_source(
        handler,
        f"""Apply change number {index} to a user's account.

    Args:
        user_id: The user to change.
        note: Why, for the audit log.
        dry_run: Report what would change without changing it.
    """,
    )
    return handler


def _fails() -> None:
    raise RuntimeError("requires core >= 2.3")


def registry_of(count: int, name: str) -> Registry:
    """The application's registry, not booted yet."""
    registry = Registry(name)
    pro = registry.component("Pro extension", boot=_fails, hint="Upgrade core.", provides="Extras")
    for index in range(count):
        owner = pro if index % 50 == 49 else registry
        kind: Literal["query", "write"] = "query" if index % 2 else "write"
        owner.tool(kind=kind)(_handler(index))
    return registry
