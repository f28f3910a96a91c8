"""Ninth attacker review of the run area: boot checks across threads, the executor, the run loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from veridic import BootError, Registry, ToolView


def _in_thread(work: Callable[[], object], seconds: float = 20.0) -> object:
    """``work()`` run in a daemon thread; fails the test (instead of hanging it) if it
    does not return in ``seconds``. The wait bounds the suite, it is not asserted on."""
    done: list[object] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as error:  # handed to the test below
            failed.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call hung (a boot check waits for a thread that waits)"
    if failed:
        raise failed[0]
    return done[0]


# --- a boot check that hands registry.view() to another thread ------------------------------


def _joined_thread(work: Callable[[], object], got: list[object]) -> None:
    def run() -> None:
        try:
            got.append(work())
        except BaseException as error:  # what the check's helper thread met
            got.append(error)

    helper = threading.Thread(target=run, daemon=True)
    helper.start()
    helper.join(15)  # bounds the suite only; the assertion is on what the helper met


def _pool(work: Callable[[], object], got: list[object]) -> None:
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(work)
        try:
            got.append(future.result(15))
        except BaseException as error:
            got.append(error)


def _to_thread(work: Callable[[], object], got: list[object]) -> None:
    async def main() -> None:
        try:
            got.append(await asyncio.wait_for(asyncio.to_thread(work), 15))
        except BaseException as error:
            got.append(error)

    asyncio.run(main())


_HANDOFFS = {"thread": _joined_thread, "pool": _pool, "to_thread": _to_thread}


def _plugin_registry(
    handoff: Callable[[Callable[[], object], list[object]], None],
    ask: Callable[[Registry], object],
    recheck: str | None,
) -> tuple[Registry, list[object]]:
    registry = Registry("site")
    got: list[object] = []

    @registry.tool(kind="query")
    def create_webhook(url: str) -> str:
        """Create a webhook that posts to a URL.

        Args:
            url: Where to post.
        """
        return "ok"

    def check() -> bool:
        handoff(lambda: ask(registry), got)
        return True

    pro = registry.component("Pro", boot=check, recheck=recheck)  # type: ignore[arg-type]  # None or "view"

    @pro.tool(kind="query")
    def create_snippet(text: str) -> str:
        """Create a code snippet.

        Args:
            text: The snippet's code.
        """
        return "snippet"

    return registry, got


@pytest.mark.parametrize("handoff", sorted(_HANDOFFS))
@pytest.mark.parametrize("recheck", [None, "view"])
def test_a_boot_check_that_asks_another_thread_for_a_view_fails_closed_instead_of_hanging(
    handoff: str, recheck: str | None
) -> None:
    registry, got = _plugin_registry(_HANDOFFS[handoff], lambda r: r.view().names(), recheck)
    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert "create_webhook" in view.names()
    assert "create_snippet" not in view.names()
    assert got, "the check's helper thread never ran"
    for error in got:  # recheck="view": the check ran at boot and again for the view
        assert isinstance(error, BootError), error
        assert "another thread" in str(error)
    assert "registry.names()" in str(error)  # what to do instead
    (state,) = registry.components()
    assert state.started is False
    assert "asked the registry for a view" in state.reason


@pytest.mark.parametrize("handoff", sorted(_HANDOFFS))
def test_a_boot_check_that_asks_another_thread_for_the_names_gets_them(handoff: str) -> None:
    # registry.names() is what the refusal tells a check to read instead: from any thread.
    registry, got = _plugin_registry(_HANDOFFS[handoff], lambda r: r.names(), None)
    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert got == [frozenset({"create_webhook", "create_snippet"})]
    assert "create_snippet" in view.names()


def test_a_recheck_asked_of_another_thread_by_a_check_fails_closed_instead_of_hanging() -> None:
    registry = Registry("site")
    got: list[object] = []
    handing = [False]

    def check() -> bool:
        if handing[0]:
            _joined_thread(lambda: registry.recheck("Pro"), got)
        return True

    registry.component("Pro", boot=check)
    assert [state.started for state in registry.recheck()] == [True]
    handing[0] = True
    states = _in_thread(registry.recheck)
    assert isinstance(states, tuple)
    assert [state.started for state in states] == [False]
    (error,) = got
    assert isinstance(error, BootError), error
