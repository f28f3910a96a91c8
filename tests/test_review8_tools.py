"""Eighth attacker review of the tools area: components, plans, views and approvals."""

from __future__ import annotations

import decimal
import threading
from collections.abc import Callable

import pytest
from _source_docstring import written_in_source
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import Deny, Registry, RiskFloorError, ToolView, instruction, normalize_plan


def _in_thread(work: Callable[[], object], seconds: float = 10.0) -> object:
    """``work()`` run in a daemon thread; fails the test (instead of hanging it) if it
    does not return in ``seconds``."""
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
    assert not thread.is_alive(), "the call hung (a thread waits for a lock it holds)"
    if failed:
        raise failed[0]
    return done[0]


def _core_and_pro(recheck: object = None) -> tuple[Registry, list[str]]:
    """A core tool, and a Pro component whose check asks the registry what it offers
    (the seed's own fix, "ask the executable catalog", written naively)."""
    registry = Registry("site")
    asked: list[str] = []

    def pro_check() -> bool:
        asked.append("check")
        return "create_webhook" in registry.view().names()

    pro = registry.component(
        "Pro",
        boot=pro_check,
        provides="Code snippets",
        hint="Update the free plugin.",
        recheck=recheck,  # type: ignore[arg-type]  # None or "view", as the tests pass
    )

    @registry.tool(kind="write")
    def create_webhook(url: str) -> str:
        """Create a webhook that receives form submissions.

        Args:
            url: Where submissions are sent.
        """
        return "created"

    @pro.tool(kind="write")
    def create_snippet(code: str) -> str:
        """Create a code snippet that runs before a webhook is dispatched.

        Args:
            code: The snippet's code.
        """
        return "snippet"

    return registry, asked


# --- a boot check that asks the registry for a view ----------------------------------------


def test_a_boot_check_that_asks_the_registry_for_a_view_does_not_hang_and_fails_closed() -> None:
    registry, asked = _core_and_pro()
    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert "create_webhook" in view.names()
    assert "create_snippet" not in view.names()
    status = view.status("create_snippet")
    assert (status.state, status.cause) == ("unavailable", "component")
    section = view.capability_section()
    assert "asked the registry for a view" in section
    assert "Update the free plugin." in section
    (state,) = registry.components()
    assert state.started is False
    assert "registry.names()" in state.detail  # what to do instead
    assert asked == ["check"]


def test_a_rechecked_boot_check_that_asks_for_a_view_does_not_hang() -> None:
    registry, _ = _core_and_pro(recheck="view")
    for _ in range(3):
        view = _in_thread(registry.view)
        assert isinstance(view, ToolView)
        assert "create_snippet" not in view.names()
    states = _in_thread(registry.recheck)
    assert isinstance(states, tuple)
    assert [state.started for state in states] == [False]


def test_a_boot_check_that_catches_the_refusal_still_does_not_start() -> None:
    registry = Registry("site")

    def pro_check() -> bool:
        try:
            registry.view()
        except Exception:
            return True  # "the registry is fine": but nothing was checked
        return True

    pro = registry.component("Pro", boot=pro_check)

    @pro.tool(kind="query")
    def sales(day: str) -> str:
        """The sales report of one day.

        Args:
            day: The day, as YYYY-MM-DD.
        """
        return "..."

    view = _in_thread(registry.view)
    assert isinstance(view, ToolView)
    assert "sales" not in view.names()


def test_a_boot_check_reading_registered_names_still_works() -> None:
    registry = Registry("site")
    pro = registry.component("Pro", boot=lambda: "create_webhook" in registry.names())

    @registry.tool(kind="write")
    def create_webhook(url: str) -> str:
        """Create a webhook that receives form submissions.

        Args:
            url: Where submissions are sent.
        """
        return "created"

    @pro.tool(kind="query")
    def sales(day: str) -> str:
        """The sales report of one day.

        Args:
            day: The day, as YYYY-MM-DD.
        """
        return "..."

    assert "sales" in registry.view().names()


# --- a plan of thousands of invented names ---------------------------------------------------


def _many_tools(count: int) -> ToolView:
    registry = Registry("big")
    for number in range(count):

        def handler(x: str) -> str:
            """(docstring written by written_in_source)"""
            return x

        handler.__name__ = f"report_{number}"
        written_in_source(handler, f"Build report number {number}.\n\nArgs:\n    x: The filter.\n")
        registry.tool(kind="query")(handler)
    return registry.view()


def test_a_plan_looks_for_nearest_names_of_a_bounded_number_of_invented_names() -> None:
    view = _many_tools(200)
    # 60 distinct typos, each one character from a real name; the first comes back last.
    typos = [f"report_{number}x" for number in range(100, 160)]
    steps = [{"id": f"s{i}", "tool": name} for i, name in enumerate([*typos, typos[0]])]
    plan = normalize_plan(steps, view)
    assert len(plan.dropped) == 61
    assert all(item.reason == "unknown" for item in plan.dropped)
    # The first 50 names get their nearest names, as view.status gives them ...
    for item in plan.dropped[:50]:
        assert item.suggestions == view.status(item.tool).suggestions[:3]
        assert item.tool.removesuffix("x") in item.suggestions
    # ... the later ones the listed names a name with none near gets, not a lookup each,
    listed = view.status("zzzzzzzz").suggestions[:3]
    for item in plan.dropped[50:60]:
        assert item.suggestions == listed
        assert "nearest valid names: " + ", ".join(view.status("zzzzzzzz").suggestions) in (
            item.detail
        )
    # ... and a name seen before keeps what it was told.
    assert plan.dropped[60].suggestions == plan.dropped[0].suggestions
    assert len(plan.notice.splitlines()) < 30


# --- a boot check that answers with a false value ------------------------------------------


def _component_with(answer: Callable[[], object]) -> Registry:
    registry = Registry("shop")
    pro = registry.component("Pro", boot=answer, provides="Refunds", hint="Renew the licence.")

    @pro.tool(kind="write")
    def refund(order: str) -> str:
        """Refund an order to the original payment method.

        Args:
            order: The order.
        """
        return "refunded"

    return registry


@given(answer=st.sampled_from([0, 0.0, "", [], {}, (), frozenset()]) | st.just(decimal.Decimal(0)))
@settings(max_examples=20)
def test_a_boot_check_answering_with_a_false_value_does_not_start(answer: object) -> None:
    # boot=lambda: os.environ.get("PRO_KEY", "") or boot=licence.days_left: "no" in its words.
    registry = _component_with(lambda: answer)
    view = registry.view()
    assert "refund" not in view.names()
    assert (view.status("refund").state, view.status("refund").cause) == (
        "unavailable",
        "component",
    )
    (state,) = registry.components()
    assert state.started is False
    assert state.reason == "its boot check returned a false value"
    assert state.reason in view.capability_section()
    assert "Renew the licence." in view.capability_section()


@given(answer=st.sampled_from([None, True, 1, "key-123", ["refunds"], object()]))
@settings(max_examples=20)
def test_a_boot_check_answering_none_or_a_true_value_starts(answer: object) -> None:
    registry = _component_with(lambda: answer)
    assert "refund" in registry.view().names()
    assert registry.components()[0].started is True


# --- a long deny list: the first filter that matches, found without asking every one ---------

_NAMES = [f"tool_{number}" for number in range(6)]
_REASONS = (
    instruction("filter 0"),
    instruction("filter 1"),
    instruction("filter 2"),
    instruction("filter 3"),
    instruction("filter 4"),
    instruction("filter 5"),
)


def _six_tools() -> Registry:
    registry = Registry("six")
    for name in _NAMES:

        def handler(x: str) -> str:
            """(docstring written by written_in_source)"""
            return x

        handler.__name__ = name
        written_in_source(handler, f"Run {name}.\n\nArgs:\n    x: The input.\n")
        registry.tool(kind="write")(handler)
    return registry


_FILTERS = st.lists(
    st.tuples(
        st.frozensets(st.sampled_from(_NAMES), max_size=3),
        st.none() | st.frozensets(st.sampled_from(_NAMES), max_size=3),
        st.booleans(),
    ),
    max_size=6,
)


@given(filters=_FILTERS, plain=st.lists(st.sampled_from(_NAMES), max_size=4))
@settings(max_examples=150, deadline=None)
def test_the_first_deny_filter_in_order_decides_how_a_tool_is_denied(
    filters: list[tuple[frozenset[str], frozenset[str] | None, bool]], plain: list[str]
) -> None:
    registry = _six_tools()
    asked: list[tuple[int, str]] = []

    def when(index: int, names: frozenset[str]) -> Callable[[object], bool]:
        def denies(tool: object) -> bool:
            name = str(getattr(tool, "name", ""))
            asked.append((index, name))
            return name in names

        return denies

    denials: list[str | Deny] = [
        Deny(
            names,
            reason=_REASONS[index],
            tombstone=tombstone,
            when=None if matched is None else when(index, matched),
        )
        for index, (names, matched, tombstone) in enumerate(filters)
    ]
    denials += plain  # plain names after the filters: "named in the view's deny list"
    view = registry.view(deny=denials)
    expected_asked: list[tuple[int, str]] = []
    for name in _NAMES:
        first: tuple[str, bool] | None = None
        for index, (names, matched, tombstone) in enumerate(filters):
            if name in names:
                first = (f"filter {index}", tombstone)
                break
            if matched is not None:
                expected_asked.append((index, name))
                if name in matched:
                    first = (f"filter {index}", tombstone)
                    break
        if first is None and name in plain:
            first = ("named in the view's deny list", False)
        status = view.status(name)
        if first is None:
            assert status.state == "exposed"
        else:
            assert (status.state, status.cause) == ("denied", "deny")
            assert (status.reason, status.tombstoned) == first
    assert asked == expected_asked  # each when asked where it was, in order, and only there


_BIG = _many_tools(120)


@given(
    picks=st.lists(
        st.integers(0, 119).map(lambda n: f"report_{n}y") | st.sampled_from(["zq", "report"]),
        min_size=1,
        max_size=120,
    )
)
@settings(max_examples=40, deadline=None)
def test_a_plans_invented_name_is_told_the_same_exposed_names_wherever_it_appears(
    picks: list[str],
) -> None:
    plan = normalize_plan([{"id": f"s{i}", "tool": name} for i, name in enumerate(picks)], _BIG)
    assert [item.id for item in plan.dropped] == [f"s{i}" for i in range(len(picks))]
    told: dict[str, tuple[str, ...]] = {}
    for item in plan.dropped:
        assert item.reason == "unknown"
        assert set(item.suggestions) <= _BIG.names()
        assert told.setdefault(item.tool, item.suggestions) == item.suggestions
        assert item.suggestions  # a name is never told "none": the listed names at least


# --- a component whose boot check registers its tools as it starts ---------------------------


def _plugin(registry: Registry, *, floor_breach: bool = False, recheck: object = None) -> None:
    """A plug-in that registers its abilities when it starts, as the seed's Pro plugin did
    through a filter at plugins_loaded."""
    started: list[bool] = []

    def pro_boot() -> bool:
        if started:
            return True
        started.append(True)

        @pro.tool(kind="write")
        def create_snippet(code: str) -> str:
            """Create a code snippet that runs before a webhook is dispatched.

            Args:
                code: The snippet's code.
            """
            return "snippet"

        if floor_breach:

            @pro.tool(kind="write", risk="mid", irreversible=True)
            def purge_snippets(confirm: bool) -> str:
                """Delete every snippet for good; this cannot be undone.

                Args:
                    confirm: Whether the caller means it.
                """
                return "purged"

        return True

    pro = registry.component(
        "Pro",
        boot=pro_boot,
        provides="Code snippets",
        recheck=recheck,  # type: ignore[arg-type]  # None or "view", as the tests pass
    )


def test_tools_a_boot_check_registers_are_in_the_view_it_boots() -> None:
    registry = Registry("site")
    _plugin(registry)
    view = registry.view()
    assert "create_snippet" in view.names()
    assert {spec["name"] for spec in view.tool_specs("anthropic")} == set(view.names())
    assert "create_snippet" in view.capability_section()
    assert view.dispatch("create_snippet", {"code": "x"}) == "snippet"
    assert view.status("create_snippet").tool is not None
    assert view.tool("create_snippet").component == "Pro"


def test_a_tool_a_boot_check_registers_below_its_floor_fails_the_boot() -> None:
    registry = Registry("site")
    _plugin(registry, floor_breach=True)
    with pytest.raises(RiskFloorError, match="purge_snippets"):
        registry.view()


def test_tools_a_rechecked_boot_check_registers_are_in_that_view() -> None:
    registry = Registry("site")
    flag = {"on": False}

    def beta_boot() -> bool:
        if flag["on"] and "beta_report" not in registry.names():

            @beta.tool(kind="query")
            def beta_report(day: str) -> str:
                """The beta report of one day.

                Args:
                    day: The day, as YYYY-MM-DD.
                """
                return "report"

        return flag["on"]

    beta = registry.component("Beta", boot=beta_boot, recheck="view")
    assert "beta_report" not in registry.view().names()
    flag["on"] = True
    view = registry.view()
    assert "beta_report" in view.names()
    assert view.status("beta_report").state == "exposed"
