"""A second read of the sixth review's run and tools changes, through the public API.

Each test failed on the merged code before its fix.
"""

from __future__ import annotations

import asyncio

import pytest

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    Composer,
    GuardDeniedError,
    ModelGateway,
    Registry,
    Risk,
    RiskFloorError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    execute,
    instruction,
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
    assert result.ok
    assert added == ["prod-copy"]
    assert result.record.operations == ()


# --- observing: a high-risk query may read another high-risk query ------------------------


def _payroll(declared: Risk) -> ToolView:
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
    observation = run_observed(_payroll(Risk.HIGH), "payslip", {"person": "ada"})
    assert observation.operations == ("delegation:salary",)
    assert not observation.understated
    check_declared_risk([observation])


def test_a_lower_query_reading_a_high_risk_query_is_told_to_declare_high_risk() -> None:
    observation = run_observed(_payroll(Risk.LOW), "payslip", {"person": "ada"})
    assert observation.understated
    with pytest.raises(RiskFloorError) as raised:
        check_declared_risk([observation])
    message = str(raised.value)
    assert "risk=Risk.HIGH" in message
    assert "a dispatch of tool 'salary'" in message


# --- resume: an answer behind an unanswered approval is refused, whatever that approval ---


def _shop(ran: list[str], refund_risk: Risk) -> ToolView:
    registry = Registry("shop")

    @registry.tool(kind="write", risk=refund_risk)
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(f"refund {order_id}")
        return "refunded"

    @registry.tool(kind="write")
    def credit(order_id: int) -> str:
        """Give store credit for an order.

        Args:
            order_id: The order.
        """
        ran.append(f"credit {order_id}")
        return "credited"

    return registry.view()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_answer_behind_an_unanswered_approval_that_changed_is_refused_not_dropped(
    asynchronous: bool,
) -> None:
    # The user answered the credit and not the refund before it, and the refund became
    # riskier meanwhile: the credit's answer was dropped without a word, and the next
    # dialog asked for it again.
    audit = SQLiteAuditSink()
    system = instruction("You are the support agent of Acme.")
    first = _shop([], Risk.MID)
    calls = [("c1", "refund", '{"order_id": 1}'), ("c2", "credit", '{"order_id": 2}')]
    paused = (
        ModelGateway(ScriptedProvider([{"tool_calls": calls}]), audit=audit)
        .run(
            Composer().system(system, first.capability_section()).user("Make it right."),
            first,
            policy=ApprovalPolicy(first),
            request_id="req-1",
            defer=True,
        )
        .paused
    )
    assert paused is not None
    ran: list[str] = []
    view = _shop(ran, Risk.HIGH)
    gateway = ModelGateway(
        ScriptedProvider([{"text": "Done."}], asynchronous=asynchronous), audit=audit
    )
    composer = Composer().system(system, view.capability_section())
    answers = {paused.approvals[1].digest: True}
    policy = ApprovalPolicy(view)

    def resume() -> object:
        if asynchronous:
            return asyncio.run(
                gateway.aresume(paused, composer, view, policy=policy, answers=answers)
            )
        return gateway.resume(paused, composer, view, policy=policy, answers=answers)

    with pytest.raises(VeridicError, match="and no answer for 'c1', which the model asked"):
        resume()
    assert ran == []
    assert composer.conversation().turns == ()
