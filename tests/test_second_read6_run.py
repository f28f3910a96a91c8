"""A second read of the sixth review's run and tools changes, through the public API.

Each test failed on the merged code before its fix.
"""

from __future__ import annotations

import pytest

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    GuardDeniedError,
    Registry,
    RiskFloorError,
    SQLiteAuditSink,
    ToolView,
    execute,
)
from veridic.run.effects import check_declared_risk, run_observed


def _run(view: ToolView, name: str, policy: ApprovalPolicy, confirm: bool | None) -> CallResult:
    return execute(
        view,
        name,
        {"env": "prod"},
        policy=policy,
        audit=SQLiteAuditSink(),
        request_id="req-1",
        prompt_sha256="0" * 64,
        confirm=None if confirm is None else (lambda request: confirm),
    )


# --- a nested dispatch is judged by the tool it runs, not by its name ---------------------


class _Deploys:
    """A mid-risk ``deploy`` the agent calls, which forwards to the release team's
    ``deploy`` of another registry: a high-risk write with no guard in its code."""

    def __init__(self) -> None:
        self.fired: list[str] = []
        release = Registry("release")

        @release.tool(kind="write", risk="high")
        def deploy(env: str) -> str:
            """Deploy the current build to an environment; a deployment cannot be undone.

            Args:
                env: The environment.
            """
            self.fired.append(env)
            return "deployed"

        inner = release.view()
        agent = Registry("agent")

        @agent.tool(kind="write", name="deploy")
        def request_deploy(env: str) -> str:
            """Ask for a deployment of the current build to an environment.

            Args:
                env: The environment.
            """
            return str(inner.dispatch("deploy", {"env": env}))

        self.view = agent.view()


def test_a_tool_cannot_run_a_riskier_tool_of_its_own_name_through_another_view() -> None:
    deploys = _Deploys()
    policy = ApprovalPolicy(deploys.view)
    policy.allow_always("deploy")
    result = _run(deploys.view, "deploy", policy, None)
    assert deploys.fired == []
    assert result.record.approval is ApprovalMode.ALWAYS_RULE
    assert result.record.outcome is CallOutcome.BLOCKED
    assert result.record.operations == ("delegation:deploy",)
    assert isinstance(result.error, GuardDeniedError)
    assert "high-risk tool 'deploy'" in str(result.error)


def test_a_tool_that_forwards_to_its_own_name_at_the_same_risk_still_runs() -> None:
    registry = Registry("shop")
    added: list[str] = []

    @registry.tool(kind="write")
    def add(env: str) -> str:
        """Add an environment to the list, or forward it once to the list itself.

        Args:
            env: The environment.
        """
        if env == "prod":
            return str(view.dispatch("add", {"env": "prod-copy"}))
        added.append(env)
        return "added"

    view = registry.view()
    policy = ApprovalPolicy(view)
    policy.allow_always("add")
    result = _run(view, "add", policy, None)
    assert result.ok and added == ["prod-copy"]
    assert result.record.operations == ()


# --- observing: a high-risk query may read another high-risk query ------------------------


def _payroll(declared: str) -> ToolView:
    registry = Registry("payroll")

    @registry.tool(kind="query", risk="high")
    def salary(person: str) -> str:
        """Read a person's salary, which is personal data.

        Args:
            person: The person.
        """
        return "100"

    @registry.tool(kind="query", risk=declared)
    def payslip(person: str) -> str:
        """Read a person's payslip, with the salary on it.

        Args:
            person: The person.
        """
        return f"payslip: {view.dispatch('salary', {'person': person})}"

    view = registry.view()
    return view


def test_a_high_risk_query_reading_a_high_risk_query_is_not_understated() -> None:
    observation = run_observed(_payroll("high"), "payslip", {"person": "ada"})
    assert observation.operations == ("delegation:salary",)
    assert not observation.understated
    check_declared_risk([observation])


def test_a_lower_query_reading_a_high_risk_query_is_told_to_declare_high_risk() -> None:
    observation = run_observed(_payroll("low"), "payslip", {"person": "ada"})
    assert observation.understated
    with pytest.raises(RiskFloorError) as raised:
        check_declared_risk([observation])
    message = str(raised.value)
    assert "risk=Risk.HIGH" in message
    assert "a dispatch of tool 'salary'" in message
