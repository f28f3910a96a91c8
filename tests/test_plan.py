"""The plan normalizer: every removed step is recorded, its dependents invalidated."""

from __future__ import annotations

import graphlib
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    Deny,
    IncompletePlanError,
    NormalizedPlan,
    PlanError,
    PlanStep,
    Registry,
    VeridicError,
    normalize_plan,
)


def _build_registry() -> Registry:
    registry = Registry("build-with-ai")

    @registry.tool(kind="write")
    def create_webhook(name: str) -> str:
        """Create a webhook that receives a form's submissions.

        Args:
            name: The webhook's name.
        """
        return "hook-1"

    @registry.tool(kind="write")
    def assign_credential(webhook: str, credential: str) -> str:
        """Attach a stored credential to a webhook's deliveries.

        Args:
            webhook: The webhook id.
            credential: The credential id.
        """
        return "ok"

    @registry.tool(kind="write")
    def set_mapping(webhook: str, fields: dict[str, str]) -> str:
        """Map form fields onto the REST route's arguments.

        Args:
            webhook: The webhook id.
            fields: Form field name to REST argument name.
        """
        return "ok"

    @registry.tool(kind="query")
    def test_dispatch(webhook: str) -> str:
        """Send a test delivery and report the REST route's answer.

        Args:
            webhook: The webhook id.
        """
        return "201"

    @registry.tool(kind="write", roles=("admin",))
    def delete_webhook(webhook: str) -> str:
        """Delete a webhook; its delivery log is kept.

        Args:
            webhook: The webhook id.
        """
        return "ok"

    def version_gate() -> None:
        raise RuntimeError("Webhook Actions Pro needs the free plugin >= 2.3")

    pro = registry.component(
        "Webhook Actions Pro",
        boot=version_gate,
        hint="make sure Webhook Actions Pro is installed, up to date and licensed",
        provides="Code Glue snippets",
    )

    @pro.tool(kind="write")
    def create_snippet(code: str) -> str:
        """Create a Code Glue snippet that runs before a delivery.

        Args:
            code: The snippet's PHP source.
        """
        return "snippet-1"

    @pro.tool(kind="write")
    def assign_snippet(webhook: str, snippet: str) -> str:
        """Run a Code Glue snippet before each delivery of a webhook.

        Args:
            webhook: The webhook id.
            snippet: The snippet id.
        """
        return "ok"

    return registry


REGISTRY = _build_registry()
VIEW = REGISTRY.view()


def step(
    step_id: str, tool: str, depends_on: tuple[str, ...] = (), **arguments: object
) -> dict[str, object]:
    return {"id": step_id, "tool": tool, "arguments": arguments, "depends_on": list(depends_on)}


SEED_PLAN = [
    step("step_1", "create_webhook", name="cf7-users"),
    step("step_2", "assign_credential", ("step_1",), webhook="h", credential="c"),
    step("step_3", "set_mapping", ("step_1",), webhook="h", fields={"email": "email"}),
    step("step_4", "create_snippet", code="<?php return wp_generate_password();"),
    step("step_5", "assign_snippet", ("step_1", "step_4"), webhook="h", snippet="s"),
    step("step_6", "test_dispatch", ("step_3", "step_5"), webhook="h"),
]


def test_steps_of_a_component_that_did_not_start_are_dropped_and_the_user_is_told() -> None:
    plan = normalize_plan(SEED_PLAN, VIEW)
    assert [s.id for s in plan.steps] == ["step_1", "step_2", "step_3"]
    assert [(d.id, d.tool, d.reason) for d in plan.dropped] == [
        ("step_4", "create_snippet", "unavailable"),
        ("step_5", "assign_snippet", "unavailable"),
    ]
    assert [(i.id, i.tool, i.reason, i.because) for i in plan.invalidated] == [
        ("step_6", "test_dispatch", "depends_on_removed", ("step_4", "step_5"))
    ]
    assert not plan.complete
    first, *rest = plan.notice.splitlines()
    assert first == (
        "Some proposed steps were removed because this site cannot run them: "
        "create_snippet, assign_snippet. The remaining plan may be incomplete."
    )
    assert "component 'Webhook Actions Pro' did not start" in rest[0]
    assert "Make sure Webhook Actions Pro is installed, up to date and licensed." in rest[0]
    assert rest[-1] == (
        "Not run, because they depend on removed steps: "
        "test_dispatch (step step_6, needs step_4, step_5)."
    )


def test_a_hallucinated_tool_is_dropped_as_unknown_with_the_nearest_valid_names() -> None:
    plan = normalize_plan([step("s1", "create_webhok", name="x")], VIEW)
    (dropped,) = plan.dropped
    assert dropped.reason == "unknown"
    assert dropped.suggestions[0] == "create_webhook"
    assert len(dropped.suggestions) <= 3
    assert "create_webhok (step s1): no tool has this name here; did you mean create_webhook" in (
        plan.notice
    )


def test_a_tool_filtered_by_the_views_policy_is_dropped_as_denied() -> None:
    plan = normalize_plan([step("s1", "delete_webhook", webhook="h")], VIEW)
    (dropped,) = plan.dropped
    assert (dropped.reason, dropped.tool) == ("denied", "delete_webhook")
    assert "it requires one of the roles admin" in dropped.why
    # Hidden from the model: the notice, which a model may be given, reads as an unknown name.
    assert dropped.hidden
    assert "delete_webhook (step s1): no tool has this name here" in plan.notice
    assert "admin" not in plan.notice


def test_a_tool_on_the_views_deny_list_is_dropped_as_denied() -> None:
    view = REGISTRY.view(deny=[Deny({"set_mapping"}, reason="read-only session")])
    plan = normalize_plan([step("s1", "set_mapping", webhook="h", fields={})], view)
    assert [(d.reason, d.why) for d in plan.dropped] == [("denied", "read-only session")]


def test_invalid_arguments_reject_the_step_with_its_field_errors() -> None:
    plan = normalize_plan(
        [step("s1", "create_webhook", nmae="x"), step("s2", "test_dispatch", ("s1",), webhook="h")],
        VIEW,
    )
    (dropped,) = plan.dropped
    assert dropped.reason == "invalid_arguments"
    assert set(dropped.fields) == {"name", "nmae"}
    assert "create_webhook" in dropped.detail
    assert [i.id for i in plan.invalidated] == ["s2"]
    assert plan.notice.startswith(
        "Some proposed steps were removed because their arguments do not fit the tool's "
        "contract: create_webhook. The remaining plan may be incomplete."
    )


def test_a_complete_plan_keeps_every_step_in_order_and_has_no_notice() -> None:
    plan = normalize_plan(SEED_PLAN[:3], VIEW)
    assert plan.complete
    assert plan.notice == ""
    assert plan.steps == (
        PlanStep("step_1", "create_webhook", {"name": "cf7-users"}),
        PlanStep("step_2", "assign_credential", {"webhook": "h", "credential": "c"}, ("step_1",)),
        PlanStep(
            "step_3", "set_mapping", {"webhook": "h", "fields": {"email": "email"}}, ("step_1",)
        ),
    )


def test_plan_step_objects_and_json_arguments_are_accepted() -> None:
    plan = normalize_plan(
        [
            PlanStep("a", "create_webhook", {"name": "x"}),
            {"id": "b", "tool": "test_dispatch", "arguments": '{"webhook": "h"}'},
        ],
        VIEW,
    )
    assert plan.complete
    assert plan.steps[1].arguments == {"webhook": "h"}


def test_strict_mode_raises_instead_of_returning_an_incomplete_plan() -> None:
    with pytest.raises(IncompletePlanError) as caught:
        normalize_plan(SEED_PLAN, VIEW, strict=True)
    message = str(caught.value)
    assert "cannot run as proposed: 2 steps removed and 1 invalidated" in message
    assert "create_snippet, assign_snippet" in message
    assert "Re-plan with the tools this view lists" in message
    assert isinstance(caught.value.plan, NormalizedPlan)
    assert [s.id for s in caught.value.plan.steps] == ["step_1", "step_2", "step_3"]


def test_strict_mode_returns_a_complete_plan() -> None:
    assert normalize_plan(SEED_PLAN[:3], VIEW, strict=True).complete


def test_a_long_plan_gets_a_notice_a_user_can_read_and_every_step_stays_recorded() -> None:
    """4,000 dependent steps once made a 54 KB notice (and a 54 KB strict-mode error)."""
    chain = [step("s0", "create_snippet", code="x")] + [
        step(f"s{i}", "test_dispatch", (f"s{i - 1}",), webhook="h") for i in range(1, 4000)
    ]
    hallucinated = [step(f"h{i}", f"made_up_{i}") for i in range(30)]
    misfits: list[dict[str, object]] = [
        {"id": f"m{i}", "tool": "create_webhook", "arguments": {"name": "n", f"extra_{i}": 1}}
        for i in range(30)
    ]

    plan = normalize_plan(chain + hallucinated + misfits, VIEW)

    assert len(plan.dropped) == 61
    assert len(plan.invalidated) == 3999
    assert len(plan.notice) < 6000, len(plan.notice)
    assert "create_snippet, made_up_0, made_up_1" in plan.notice
    assert "made_up_18 and 11 more tools." in plan.notice  # the first line names 20 of 31
    assert "(steps h0, h1," in plan.notice
    assert "h19 and 10 more steps)" in plan.notice
    not_run = plan.notice.splitlines()[-1]
    assert not_run.startswith("Not run, because they depend on removed steps: test_dispatch")
    assert [f"step s{i}," in not_run for i in (1, 20, 21)] == [True, True, False]
    assert not_run.endswith("and 3979 more steps, each in .invalidated.")
    groups = [line for line in plan.notice.splitlines() if line.startswith("- ")]
    # One line per reason: create_snippet's, the made-up names', and the first 18 misfits,
    # each with its own field to check; then the count of the 12 misfits left.
    assert len(groups) == 21
    assert "check extra_17" in groups[-2]
    assert groups[-1] == "- and 12 more removed steps, each in .dropped with its reason."
    with pytest.raises(IncompletePlanError) as caught:
        normalize_plan(chain, VIEW, strict=True)
    assert len(str(caught.value)) < 2000


@pytest.mark.parametrize(
    ("steps", "what", "remedy"),
    [
        (
            [step("a", "create_webhook", name="x"), step("a", "test_dispatch", webhook="h")],
            "plan step id 'a' is used by more than one step",
            "give each step its own id",
        ),
        (
            [step("a", "create_webhook", ("ghost",), name="x")],
            "plan step 'a' depends on 'ghost', which no step of the plan has as its id (ids: 'a')",
            "depend only on steps of this plan",
        ),
        (
            [
                step("a", "create_webhook", ("c",), name="x"),
                step("b", "test_dispatch", ("a",), webhook="h"),
                step("c", "test_dispatch", ("b",), webhook="h"),
            ],
            "the plan's dependencies form a cycle: 'a' -> 'c' -> 'b' -> 'a'",
            "remove one of these dependencies",
        ),
        (
            [step("a", "create_webhook", ("a",), name="x")],
            "form a cycle: 'a' -> 'a'",
            "a step cannot wait for itself",
        ),
        (["create_webhook"], "plan step #0 is a str, not a step", 'write each step as {"id"'),
        (
            [{"tool": "create_webhook"}],
            "plan step #0 has id None",
            "every step needs a non-empty string id",
        ),
        (
            [{"id": "a", "arguments": {}}],
            "plan step #0 ('a') has tool None",
            "names the tool it calls",
        ),
        (
            [{"id": "a", "tool": "test_dispatch", "depends_on": "b"}],
            "plan step #0 ('a') has depends_on 'b'",
            "a list even for one id",
        ),
        (
            [{"id": "a", "tool": "test_dispatch", "arguments": "{not json"}],
            "plan step #0 ('a') has arguments that are not JSON",
            "send the arguments as an object",
        ),
        (
            [{"id": "a", "tool": "test_dispatch", "arguments": ["h"]}],
            "plan step #0 ('a') has arguments ['h']",
            "arguments are an object whose keys are the tool's parameter names",
        ),
    ],
)
def test_a_malformed_plan_fails_loudly_saying_what_where_and_what_to_do(
    steps: list[Any], what: str, remedy: str
) -> None:
    with pytest.raises(PlanError) as caught:
        normalize_plan(steps, VIEW)
    assert what in str(caught.value)
    assert remedy in str(caught.value)


def test_a_plan_that_is_one_step_instead_of_a_list_is_refused() -> None:
    with pytest.raises(PlanError, match=r"a plan is a list of steps, got a dict: pass a list"):
        normalize_plan(step("a", "test_dispatch", webhook="h"), VIEW)  # type: ignore[arg-type]  # under test


def test_normalizing_against_something_that_is_not_a_view_is_refused() -> None:
    with pytest.raises(VeridicError, match=r"needs the ToolView that produced the prompt"):
        normalize_plan([], REGISTRY)  # type: ignore[arg-type]  # the mistake under test


# --- properties -------------------------------------------------------------------------


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[dict[str, object]], set[str]]:
    """A DAG of steps in shuffled order, and the ids of the steps that name no tool."""
    size = draw(st.integers(1, 12))
    ids = [f"s{i}" for i in range(size)]
    needs = {
        ids[i]: draw(st.sets(st.sampled_from(ids[:i]), max_size=3)) if i else set()
        for i in range(size)
    }
    gone = draw(st.sets(st.sampled_from(ids)))
    steps = [
        step(
            i,
            f"missing_{i}" if i in gone else "test_dispatch",
            tuple(sorted(needs[i])),
            webhook="h",
        )
        for i in ids
    ]
    return draw(st.permutations(steps)), gone


def _reachable_from(start: str, users: dict[str, set[str]]) -> set[str]:
    found: set[str] = set()
    frontier = [start]
    while frontier:
        for user in users[frontier.pop()]:
            if user not in found:
                found.add(user)
                frontier.append(user)
    return found


@given(case=plans())
def test_exactly_the_transitive_dependents_of_dropped_steps_are_invalidated(
    case: tuple[list[dict[str, object]], set[str]],
) -> None:
    steps, gone = case
    users: dict[str, set[str]] = {str(s["id"]): set() for s in steps}
    for s in steps:
        for need in s["depends_on"]:  # type: ignore[attr-defined]  # built by plans() as a list
            users[need].add(str(s["id"]))
    ancestors = {i: {g for g in gone if i in _reachable_from(g, users)} for i in users}
    expected = {i for i in users if ancestors[i] and i not in gone}

    plan = normalize_plan(steps, VIEW)

    assert {d.id for d in plan.dropped} == gone
    assert {i.id for i in plan.invalidated} == expected
    assert {s.id for s in plan.steps} == set(users) - gone - expected
    order = [str(s["id"]) for s in steps]
    for invalid in plan.invalidated:  # every dropped ancestor, in plan order
        assert list(invalid.because) == [i for i in order if i in ancestors[invalid.id]]
    assert [s.id for s in plan.steps] == [
        s["id"] for s in steps if s["id"] in {k.id for k in plan.steps}
    ]
    for removed in plan.dropped:
        assert removed.tool in plan.notice
    for invalid in plan.invalidated:
        assert f"step {invalid.id}," in plan.notice
    assert plan.complete == (not gone)


@given(
    edges=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=14),
)
@settings(max_examples=150)
def test_a_plan_is_refused_exactly_when_its_dependencies_have_a_cycle(
    edges: list[tuple[int, int]],
) -> None:
    needs: dict[str, set[str]] = {f"s{i}": set() for i in range(7)}
    for user, need in edges:
        needs[f"s{user}"].add(f"s{need}")
    steps = [step(i, "test_dispatch", tuple(sorted(n)), webhook="h") for i, n in needs.items()]
    try:
        tuple(graphlib.TopologicalSorter(needs).static_order())
        acyclic = True
    except graphlib.CycleError:
        acyclic = False
    if acyclic:
        assert normalize_plan(steps, VIEW).complete
    else:
        with pytest.raises(PlanError, match="form a cycle") as raised:
            normalize_plan(steps, VIEW)
        # The cycle quoted is one: each step waits for the next, and it starts at the
        # first of its steps in plan order.
        quoted = str(raised.value).split("form a cycle: ")[1].split(";")[0]
        cycle = [name.strip("'") for name in quoted.split(" -> ")]
        assert cycle[0] == cycle[-1]
        assert all(later in needs[earlier] for earlier, later in itertools.pairwise(cycle))
        assert cycle[0] == min(cycle, key=lambda name: int(name[1:]))
