"""The plan normalizer and the user's approval policy: a step the policy denies is removed.

A plan that keeps a step whose tool the user's deny rule refuses looks runnable until
that step is refused at run time, and the steps after it looked runnable too: the
seed's plan whose surviving steps build something broken.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    Composer,
    Deny,
    IncompletePlanError,
    Registry,
    Risk,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    execute,
    instruction,
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

    @registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)
    def purge_deliveries(webhook: str) -> str:
        """Delete a webhook's delivery log for good; it cannot be restored.

        Args:
            webhook: The webhook id.
        """
        return "purged"

    @registry.tool(kind="write", roles=("admin",))
    def delete_webhook(webhook: str) -> str:
        """Delete a webhook; its delivery log is kept.

        Args:
            webhook: The webhook id.
        """
        return "ok"

    return registry


REGISTRY = _build_registry()
VIEW = REGISTRY.view()
TOOLS = ("create_webhook", "set_mapping", "test_dispatch", "purge_deliveries")
ARGUMENTS: dict[str, dict[str, object]] = {
    "create_webhook": {"name": "cf7-users"},
    "set_mapping": {"webhook": "h", "fields": {"email": "email"}},
    "test_dispatch": {"webhook": "h"},
    "purge_deliveries": {"webhook": "h"},
}


def step(step_id: str, tool: str, depends_on: tuple[str, ...] = ()) -> dict[str, object]:
    arguments = ARGUMENTS.get(tool, {})
    return {"id": step_id, "tool": tool, "arguments": arguments, "depends_on": list(depends_on)}


PLAN = [
    step("s1", "create_webhook"),
    step("s2", "set_mapping", ("s1",)),
    step("s3", "test_dispatch", ("s2",)),
]


def _denying(*names: str, view: ToolView = VIEW) -> ApprovalPolicy:
    policy = ApprovalPolicy(view)
    for name in names:
        policy.deny(name)
    return policy


def test_a_step_the_users_policy_denies_is_dropped_and_its_dependents_invalidated() -> None:
    """The reproducer: both s2 (denied by the user's rule) and s3 (after it) were kept."""
    plan = normalize_plan(PLAN, VIEW, policy=_denying("set_mapping"))

    assert [s.id for s in plan.steps] == ["s1"]
    (dropped,) = plan.dropped
    assert (dropped.id, dropped.tool, dropped.reason) == ("s2", "set_mapping", "denied")
    assert dropped.cause == "approval_policy"
    assert not dropped.hidden
    assert "deny rule of the user's approval policy" in dropped.detail
    assert "set_mapping" in dropped.detail
    assert "re-plan without it" in dropped.hint
    assert [(i.id, i.because) for i in plan.invalidated] == [("s3", ("s2",))]
    assert not plan.complete


def test_the_notice_says_the_users_approval_policy_denied_the_step() -> None:
    plan = normalize_plan(PLAN, VIEW, policy=_denying("set_mapping"))

    lines = plan.notice.splitlines()
    assert lines[0] == (
        "Some proposed steps were removed because a deny rule of the user's approval policy "
        "refuses their tools: set_mapping. The remaining plan may be incomplete."
    )
    assert lines[1].startswith("- set_mapping (step s2): refused by a deny rule of the user's")
    assert "re-plan without it" in lines[1]
    assert lines[-1] == (
        "Not run, because they depend on removed steps: test_dispatch (step s3, needs s2)."
    )


def test_a_policy_deny_and_a_view_deny_are_told_apart_by_cause() -> None:
    view = REGISTRY.view(deny=[Deny({"set_mapping"}, reason="read-only session", tombstone=True)])
    by_view = normalize_plan(PLAN, view).dropped[0]
    by_policy = normalize_plan(PLAN, VIEW, policy=_denying("set_mapping")).dropped[0]

    assert by_view.reason == by_policy.reason == "denied"
    assert (by_view.cause, by_policy.cause) == ("deny", "approval_policy")
    assert by_view.why == "read-only session"
    assert by_policy.why != by_view.why


def test_a_plan_without_a_policy_is_checked_against_the_view_alone() -> None:
    assert normalize_plan(PLAN, VIEW).complete
    assert normalize_plan(PLAN, VIEW, policy=None).complete


def test_ask_rules_always_rules_and_high_risk_tools_are_kept_for_run_time() -> None:
    """They need a confirmation when they run, not a removal."""
    policy = ApprovalPolicy(VIEW)
    policy.ask("create_webhook")
    policy.ask("test_dispatch")
    policy.allow_always("set_mapping")
    steps = [*PLAN, step("s4", "purge_deliveries", ("s3",))]

    plan = normalize_plan(steps, VIEW, policy=policy)

    assert plan.complete
    assert [s.id for s in plan.steps] == ["s1", "s2", "s3", "s4"]


def test_a_denied_step_with_invalid_arguments_is_dropped_as_denied() -> None:
    """Fixing the arguments would not let it run: the rule is the reason to tell."""
    bad = {"id": "s1", "tool": "set_mapping", "arguments": {"webhok": "h"}}

    (dropped,) = normalize_plan([bad], VIEW, policy=_denying("set_mapping")).dropped

    assert (dropped.reason, dropped.cause, dropped.fields) == ("denied", "approval_policy", ())


def test_a_tool_the_view_hides_stays_hidden_when_the_policy_denies_it_too() -> None:
    policy = _denying("delete_webhook")

    plan = normalize_plan([step("s1", "delete_webhook")], VIEW, policy=policy)

    (dropped,) = plan.dropped
    assert (dropped.reason, dropped.cause, dropped.hidden) == ("denied", "role", True)
    assert "delete_webhook (step s1): no tool has this name here" in plan.notice
    assert "approval policy" not in plan.notice


def test_strict_mode_raises_for_a_step_the_policy_denies() -> None:
    with pytest.raises(IncompletePlanError) as caught:
        normalize_plan(PLAN, VIEW, strict=True, policy=_denying("set_mapping"))

    message = str(caught.value)
    assert "1 step removed and 1 invalidated" in message
    assert "deny rule of the user's approval policy" in message
    assert [s.id for s in caught.value.plan.steps] == ["s1"]


@pytest.mark.parametrize(
    "other",
    [REGISTRY.view(roles={"admin"}), _build_registry().view()],
    ids=["another view of the registry", "a view of another registry"],
)
def test_a_policy_built_for_another_view_is_refused(other: ToolView) -> None:
    with pytest.raises(VeridicError) as caught:
        normalize_plan(PLAN, VIEW, policy=_denying("set_mapping", view=other))

    message = str(caught.value)
    assert "normalize_plan() got a policy built for another view" in message
    assert "ApprovalPolicy(view, rules=policy.rules)" in message


def test_a_policy_carried_to_this_view_applies_its_deny_rules() -> None:
    earlier = _denying("set_mapping", view=REGISTRY.view(roles={"admin"}))

    plan = normalize_plan(PLAN, VIEW, policy=ApprovalPolicy(VIEW, rules=earlier.rules))

    assert [(d.id, d.cause) for d in plan.dropped] == [("s2", "approval_policy")]


def test_something_that_is_not_an_approval_policy_is_refused() -> None:
    with pytest.raises(VeridicError, match=r"normalize_plan\(\) got policy=dict"):
        normalize_plan(PLAN, VIEW, policy={"set_mapping": "deny"})  # type: ignore[arg-type]  # the mistake under test


def test_a_plan_step_dropped_by_the_policy_is_the_call_execute_records_denied() -> None:
    """The plan tells before anything runs what running the step would record."""
    policy = _denying("set_mapping")
    (dropped,) = normalize_plan(PLAN, VIEW, policy=policy).dropped
    prompt = Composer().system(instruction("You build webhooks.")).build()

    result = execute(
        VIEW,
        dropped.tool,
        ARGUMENTS[dropped.tool],
        policy=policy,
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=prompt,
    )

    assert result.record.approval is ApprovalMode.DENIED


def test_strict_mode_tells_to_replan_without_the_tools_the_users_rules_refuse() -> None:
    """The view lists a tool the user's rule refuses: re-planning "with the tools this view
    lists" could propose the same step again."""
    with pytest.raises(IncompletePlanError) as caught:
        normalize_plan(PLAN, VIEW, strict=True, policy=_denying("set_mapping"))

    message = str(caught.value)
    assert "with the tools this view lists" not in message
    assert message.endswith(
        "Re-plan without the tools the user's deny rules refuse (or ask the user to change "
        "those rules), or normalize without strict=True and show .notice before running the "
        "remaining steps"
    )


def test_strict_mode_for_a_view_deny_and_a_policy_deny_tells_both() -> None:
    view = REGISTRY.view(deny=[Deny({"test_dispatch"}, reason="read-only", tombstone=True)])
    policy = ApprovalPolicy(view)
    policy.deny("set_mapping")

    with pytest.raises(IncompletePlanError) as caught:
        normalize_plan(PLAN, view, strict=True, policy=policy)

    assert (
        "Re-plan with the tools this view lists and without those the user's deny rules "
        "refuse (or ask the user to change those rules), or normalize without strict=True"
    ) in str(caught.value)


def test_the_notice_for_view_denies_and_policy_denies_names_each_under_its_cause() -> None:
    view = REGISTRY.view(deny=[Deny({"test_dispatch"}, reason="read-only", tombstone=True)])
    policy = ApprovalPolicy(view)
    policy.deny("set_mapping")

    lines = normalize_plan(PLAN, view, policy=policy).notice.splitlines()

    assert lines[:2] == [
        "Some proposed steps were removed because this site cannot run them: test_dispatch.",
        "Some proposed steps were removed because a deny rule of the user's approval policy "
        "refuses their tools: set_mapping. The remaining plan may be incomplete.",
    ]
    assert lines[2].startswith("- set_mapping (step s2): refused by a deny rule")
    assert lines[3:] == ["- test_dispatch (step s3): not allowed in this session; read-only."]


class _AnswersOtherwise:
    """Something shaped like a policy whose answer about set_mapping is not an
    ApprovalPolicy's."""

    def __init__(self, view: ToolView, answer: dict[str, object]) -> None:
        self.view = view
        self._answer = answer

    def request(self, name: str, arguments: object = None) -> object:
        answer = self._answer if name == "set_mapping" else {"mode": None, "why": "asked"}
        return type("Answer", (), answer)()


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        ({"mode": "denied", "why": "a rule"}, "answered mode 'denied' (a str)"),
        ({"why": "a rule"}, "answered with no mode"),
    ],
    ids=["a mode in text", "no mode"],
)
def test_a_policy_answering_other_than_an_approval_mode_is_refused_not_read_as_allowed(
    answer: dict[str, object], told: str
) -> None:
    """``"denied"`` is not ``ApprovalMode.DENIED``, and no mode is not "ask the user": read
    as they come, either would keep a step the user's rule refused."""
    policy = _AnswersOtherwise(VIEW, answer)

    with pytest.raises(VeridicError) as caught:
        normalize_plan(PLAN, VIEW, policy=policy)  # type: ignore[arg-type]  # the mistake under test

    message = str(caught.value)
    assert f"_AnswersOtherwise.request('set_mapping') {told}" in message
    assert "cannot tell whether it denies step 's2'" in message
    assert "pass the user's ApprovalPolicy(view)" in message


class _RulesOffline(ApprovalPolicy):
    """A policy whose rules live elsewhere, and cannot be read now."""

    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> ApprovalRequest:
        if name == "set_mapping":
            raise ConnectionError("the rules store did not answer")
        return super().request(name, arguments)


def test_a_policy_that_raises_stops_the_normalizer_and_says_where() -> None:
    """Its error is not a decision: the step is neither kept nor dropped, and the note
    names the policy, the tool and the step it was asked for."""
    with pytest.raises(ConnectionError, match="the rules store did not answer") as caught:
        normalize_plan(PLAN, VIEW, policy=_RulesOffline(VIEW))

    assert caught.value.__notes__ == [
        "raised by _RulesOffline.request('set_mapping'), asked by normalize_plan() for step "
        "'s2': no plan was returned; make the policy answer, or normalize without policy= "
        "(every call is still approved when it runs)"
    ]


class _DeniesOnSecondThought(ApprovalPolicy):
    """A policy whose user adds a deny rule while the plan is being checked."""

    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> ApprovalRequest:
        answer = super().request(name, arguments)
        if name == "set_mapping" and self.rule(name) is None:
            self.deny(name)
        return answer


def test_every_step_of_one_tool_is_judged_by_one_answer_of_the_policy() -> None:
    """The policy is asked once per tool: a rule changed meanwhile cannot keep one step of
    a tool and drop another of the same tool."""
    steps = [step("s1", "set_mapping"), step("s2", "set_mapping")]
    policy = _DeniesOnSecondThought(VIEW)

    plan = normalize_plan(steps, VIEW, policy=policy)

    assert (plan.complete, policy.rule("set_mapping")) == (True, "deny")


def test_a_deny_rule_added_after_the_plan_was_normalized_still_refuses_the_call() -> None:
    """The plan reads the rules once; the policy still decides when each step runs."""
    policy = ApprovalPolicy(VIEW)
    plan = normalize_plan(PLAN, VIEW, policy=policy)
    policy.deny("set_mapping")

    (kept,) = [s for s in plan.ordered if s.tool == "set_mapping"]
    result = execute(
        VIEW,
        kept.tool,
        dict(kept.arguments),
        policy=policy,
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=Composer().system(instruction("You build webhooks.")).build(),
    )

    assert plan.complete
    assert result.record.approval is ApprovalMode.DENIED


def test_rules_carried_to_another_registrys_tools_deny_by_name_and_ask_for_a_changed_always() -> (
    None
):
    """A deny rule names a tool name, and refuses whatever tool has it; an always rule is
    bound to the tool it was granted for, so another tool of its name is asked about, and
    its step is kept for the user to confirm."""
    forms = Registry("forms")

    @forms.tool(kind="write")
    def create_webhook(name: str) -> str:
        """Create a form's webhook in the forms plug-in.

        Args:
            name: The webhook's name.
        """
        return "form-hook"

    @forms.tool(kind="write")
    def set_mapping(webhook: str, fields: dict[str, str]) -> str:
        """Map a form's fields in the forms plug-in.

        Args:
            webhook: The webhook id.
            fields: Form field name to stored field name.
        """
        return "ok"

    earlier = ApprovalPolicy(VIEW)
    earlier.deny("create_webhook")
    earlier.allow_always("set_mapping")
    view = forms.view()
    carried = ApprovalPolicy(view, rules=earlier.rules)

    plan = normalize_plan(PLAN[:2], view, policy=carried)

    assert [(d.id, d.cause) for d in plan.dropped] == [("s1", "approval_policy")]
    assert [i.id for i in plan.invalidated] == ["s2"]
    kept = normalize_plan([step("s2", "set_mapping")], view, policy=carried)
    assert kept.complete
    assert carried.request("set_mapping").pending


# --- properties -------------------------------------------------------------------------


@st.composite
def plans(draw: st.DrawFn) -> list[dict[str, object]]:
    """A DAG of steps over the registry's tools (one hidden, one unknown), shuffled."""
    size = draw(st.integers(1, 10))
    ids = [f"s{i}" for i in range(size)]
    names = st.sampled_from((*TOOLS, "delete_webhook", "made_up"))
    steps = [
        step(
            ids[i],
            draw(names),
            tuple(sorted(draw(st.sets(st.sampled_from(ids[:i]), max_size=3)))) if i else (),
        )
        for i in range(size)
    ]
    return draw(st.permutations(steps))


@st.composite
def policies(draw: st.DrawFn) -> ApprovalPolicy:
    """A policy of VIEW with any rule for each tool (no "always" for a high-risk one)."""
    policy = ApprovalPolicy(VIEW)
    for name in (*TOOLS, "delete_webhook"):
        rule = draw(st.sampled_from((None, "ask", "deny", "always")))
        if rule == "always" and name == "purge_deliveries":
            rule = "ask"
        if rule == "ask":
            policy.ask(name)
        elif rule == "deny":
            policy.deny(name)
        elif rule == "always":
            policy.allow_always(name)
    return policy


def _removed_or_after(steps: list[dict[str, object]], removed: set[str]) -> set[str]:
    """The removed ids and every id that depends on one of them, directly or transitively."""
    needs = {str(s["id"]): set(s["depends_on"]) for s in steps}  # type: ignore[call-overload]  # a list
    gone = set(removed)
    grew = True
    while grew:
        after = {i for i, n in needs.items() if i not in gone and n & gone}
        gone |= after
        grew = bool(after)
    return gone


@given(steps=plans(), policy=policies())
@settings(max_examples=150)
def test_no_kept_step_is_policy_denied_or_after_a_removed_step(
    steps: list[dict[str, object]], policy: ApprovalPolicy
) -> None:
    plan = normalize_plan(steps, VIEW, policy=policy)

    exposed = VIEW.names()
    denied = {
        str(s["id"])
        for s in steps
        if s["tool"] in exposed and policy.request(str(s["tool"])).mode is ApprovalMode.DENIED
    }
    by_view = {str(s["id"]) for s in steps if s["tool"] not in exposed}
    kept = {s.id for s in plan.steps}
    removed = {d.id for d in plan.dropped}
    assert {d.id for d in plan.dropped if d.cause == "approval_policy"} == denied
    assert removed == denied | by_view
    assert {i.id for i in plan.invalidated} == _removed_or_after(steps, removed) - removed
    assert kept == {str(s["id"]) for s in steps} - _removed_or_after(steps, removed)
    for kept_step in plan.steps:
        assert policy.request(kept_step.tool).mode is not ApprovalMode.DENIED
        assert not set(kept_step.depends_on) - kept
    for removed_step in plan.dropped:
        assert removed_step.tool in plan.notice or removed_step.hidden
    assert plan.complete == (not removed)
