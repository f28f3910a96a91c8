"""Approval rules: always, ask, deny; "always" is refused for high-risk tools."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    AlwaysAllowRefused,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    InstructionField,
    Registry,
    Risk,
    ToolDeniedError,
    UnknownToolError,
    VeridicError,
)


class StoredPrompt(BaseModel):
    feature: str
    content: InstructionField


def _registry() -> Registry:
    registry = Registry("approvals")

    @registry.tool(kind="query")
    def list_prompts(feature: str) -> list[str]:
        """List the revisions of a feature's prompt, newest first.

        Args:
            feature: The AI feature.
        """
        return []

    @registry.tool(kind="query", risk="high")
    def read_secrets(vault: str) -> str:
        """Read every credential stored in a vault.

        Args:
            vault: The vault.
        """
        return ""

    @registry.tool(kind="write")
    def set_policy(feature: str, policy: str) -> str:
        """Append a revision of a feature's retry policy; revisions can be restored.

        Args:
            feature: The AI feature.
            policy: The new policy.
        """
        return "ok"

    @registry.tool(kind="write", risk="low")
    def star_fixture(name: str) -> str:
        """Star a golden fixture so it shows first; unstar to undo.

        Args:
            name: The fixture.
        """
        return "ok"

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; this is a hard delete and cannot be undone.

        Args:
            name: The fixture.
        """
        return "deleted"

    @registry.tool(kind="write", writes=(StoredPrompt,))
    def edit_prompt(feature: str, content: str) -> str:
        """Save new content for a feature's prompt; the feature uses it as its system prompt.

        Args:
            feature: The AI feature.
            content: The new prompt text.
        """
        return "ok"

    @registry.tool(kind="write", roles=("admin",))
    def drop_feature(feature: str) -> str:
        """Archive an AI feature; it can be restored from the archive.

        Args:
            feature: The AI feature.
        """
        return "ok"

    return registry


VIEW = _registry().view()
HIGH_TOOLS = ("read_secrets", "delete_golden", "edit_prompt")


@pytest.mark.parametrize(
    ("name", "because"),
    [
        ("delete_golden", "irreversible"),
        ("edit_prompt", "it writes text read as instruction"),
        ("read_secrets", "declared high"),
    ],
)
def test_always_allow_is_refused_for_a_high_risk_tool(name: str, because: str) -> None:
    policy = ApprovalPolicy(VIEW)
    with pytest.raises(AlwaysAllowRefused) as caught:
        policy.allow_always(name)
    message = str(caught.value)
    assert f'"always allow" was asked for tool {name!r}, which is high risk ({because};' in message
    assert "declared at tests/test_approval.py:" in message
    assert "keep the default (ask), or deny it" in message
    assert "a single call can still be confirmed by the user" in message
    assert policy.rule(name) is None


def test_rules_for_a_name_never_registered_fail_loudly() -> None:
    with pytest.raises(
        UnknownToolError, match=r"'delete_goldn'.*nearest valid names: delete_golden"
    ):
        ApprovalPolicy(VIEW).allow_always("delete_goldn")


def test_rules_may_be_set_for_a_tool_this_view_filters_out() -> None:
    policy = ApprovalPolicy(VIEW)
    policy.allow_always("drop_feature")
    assert policy.rule("drop_feature") == "always"
    with pytest.raises(ToolDeniedError):
        policy.decide("drop_feature")


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(
        VeridicError, match=r"rule 'sometimes' for tool 'set_policy'.*use \"always\""
    ):
        ApprovalPolicy(VIEW, rules={"set_policy": "sometimes"})  # type: ignore[dict-item]  # under test


def test_rules_carried_to_another_view_are_checked_again() -> None:
    policy = ApprovalPolicy(VIEW)
    policy.allow_always("set_policy")
    policy.deny("delete_golden")
    carried = ApprovalPolicy(_registry().view(), rules=policy.rules)
    assert dict(carried.rules) == {"set_policy": "always", "delete_golden": "deny"}
    with pytest.raises(AlwaysAllowRefused):
        ApprovalPolicy(VIEW, rules={"edit_prompt": "always"})


def test_the_rules_mapping_is_a_read_only_copy() -> None:
    policy = ApprovalPolicy(VIEW)
    policy.ask("set_policy")
    rules = policy.rules
    with pytest.raises(TypeError):
        rules["set_policy"] = "always"  # type: ignore[index]  # the mistake under test
    policy.allow_always("set_policy")
    assert rules["set_policy"] == "ask"


def _expected(
    name: str, rule: Literal["always", "ask", "deny"] | None, answer: bool | None
) -> tuple[ApprovalMode, bool]:
    """The decision table of ApprovalPolicy, written out: (mode, whether the user is asked)."""
    tool = VIEW.tool(name)
    if rule == "deny":
        return ApprovalMode.DENIED, False
    asked = tool.risk is Risk.HIGH or rule == "ask" or (tool.kind == "write" and rule != "always")
    if not asked:
        return (
            ApprovalMode.NOT_REQUIRED if tool.kind == "query" else ApprovalMode.ALWAYS_RULE
        ), False
    return (ApprovalMode.USER_CONFIRMED if answer else ApprovalMode.DENIED), answer is not None


@given(
    name=st.sampled_from(
        [
            "list_prompts",
            "read_secrets",
            "set_policy",
            "star_fixture",
            "delete_golden",
            "edit_prompt",
        ]
    ),
    rule=st.sampled_from([None, "always", "ask", "deny"]),
    answer=st.sampled_from([None, True, False]),
)
def test_every_call_gets_the_mode_of_the_decision_table(
    name: str, rule: Literal["always", "ask", "deny"] | None, answer: bool | None
) -> None:
    policy = ApprovalPolicy(VIEW)
    if rule is not None:
        if rule == "always" and name in HIGH_TOOLS:
            with pytest.raises(AlwaysAllowRefused):
                policy.allow_always(name)
            rule = None
        else:
            {"always": policy.allow_always, "ask": policy.ask, "deny": policy.deny}[rule](name)
    asked: list[ApprovalRequest] = []

    def confirm(request: ApprovalRequest) -> bool:
        asked.append(request)
        return bool(answer)

    mode = policy.decide(name, {"feature": "f"}, confirm=None if answer is None else confirm)
    expected_mode, expected_asked = _expected(name, rule, answer)
    assert mode is expected_mode
    assert bool(asked) == expected_asked
    if asked:
        assert asked[0].tool == name
        assert asked[0].arguments == {"feature": "f"}


@pytest.mark.parametrize("name", HIGH_TOOLS)
def test_a_single_call_of_a_high_risk_tool_can_always_be_confirmed(name: str) -> None:
    policy = ApprovalPolicy(VIEW)
    policy.ask(name)
    assert policy.decide(name, confirm=lambda request: True) is ApprovalMode.USER_CONFIRMED


def test_a_pending_call_with_nobody_to_ask_is_denied() -> None:
    request = ApprovalPolicy(VIEW).request("set_policy")
    assert request.pending
    assert request.why == "'set_policy' is a write without an always rule"
    assert ApprovalPolicy(VIEW).decide("set_policy") is ApprovalMode.DENIED


def test_only_an_answer_of_exactly_true_confirms() -> None:
    policy = ApprovalPolicy(VIEW)
    truthy: object = "yes"
    assert policy.decide("set_policy", confirm=lambda r: True) is ApprovalMode.USER_CONFIRMED
    assert policy.decide("set_policy", confirm=lambda r: truthy) is ApprovalMode.DENIED  # type: ignore[arg-type, return-value]  # a truthy non-bool under test


def test_answering_a_request_the_policy_decided_is_refused() -> None:
    request = ApprovalPolicy(VIEW).request("list_prompts")
    assert request.mode is ApprovalMode.NOT_REQUIRED
    with pytest.raises(VeridicError, match=r"not waiting for the user.*record that mode instead"):
        request.answer(True)


def test_a_policy_needs_a_view() -> None:
    with pytest.raises(VeridicError, match=r"needs the request's ToolView, got Registry: pass"):
        ApprovalPolicy(_registry())  # type: ignore[arg-type]  # the mistake under test
