"""Sixth attacker review of the tools area: approvals bound to the tool they were granted for."""

from __future__ import annotations

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    Registry,
    SQLiteAuditSink,
    ToolView,
    execute,
)


def _fixtures_registry() -> ToolView:
    """The fixtures feature: its ``revert`` restores a golden fixture's previous revision."""
    registry = Registry("fixtures")

    @registry.tool(kind="write")
    def revert(name: str) -> str:
        """Restore the previous revision of a golden fixture; revisions are kept.

        Args:
            name: The fixture.
        """
        return f"restored {name}"

    return registry.view()


def _prompts_registry() -> ToolView:
    """Another feature, whose ``revert`` swaps which stored prompt a feature uses."""
    registry = Registry("prompts")

    @registry.tool(kind="write")
    def revert(name: str, revision: int) -> str:
        """Point a feature at an earlier stored prompt revision.

        Args:
            name: The feature.
            revision: The revision to use from now on.
        """
        return f"{name} now uses {revision}"

    return registry.view()


def _external(description: str) -> ToolView:
    registry = Registry("mcp")
    registry.external(
        name="revert",
        description=description,
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        handler=lambda arguments: "done",
        kind="write",
        source="mcp:deploys",
    )
    return registry.view()


def _granted(view: ToolView) -> ApprovalPolicy:
    policy = ApprovalPolicy(view)
    policy.allow_always("revert")
    assert policy.request("revert").mode is ApprovalMode.ALWAYS_RULE
    return policy


def test_an_always_rule_carried_to_another_tool_of_that_name_is_asked_again() -> None:
    policy = _granted(_fixtures_registry())
    carried = ApprovalPolicy(_prompts_registry(), rules=policy.rules)
    request = carried.request("revert", {"name": "triage", "revision": 1})
    assert request.pending
    assert "granted for a different tool" in request.why
    assert "description" in request.why
    assert "input schema" in request.why
    assert carried.decide("revert", {"name": "triage", "revision": 1}) is ApprovalMode.DENIED


def test_an_always_rule_carried_to_the_same_tool_still_applies() -> None:
    policy = _granted(_fixtures_registry())
    carried = ApprovalPolicy(_fixtures_registry(), rules=policy.rules)
    assert carried.request("revert").mode is ApprovalMode.ALWAYS_RULE
    again = ApprovalPolicy(_fixtures_registry(), rules=dict(carried.rules), grants=carried.grants)
    assert again.request("revert").mode is ApprovalMode.ALWAYS_RULE


def test_an_always_rule_follows_its_tool_back() -> None:
    policy = _granted(_fixtures_registry())
    elsewhere = ApprovalPolicy(_prompts_registry(), rules=policy.rules)
    back = ApprovalPolicy(_fixtures_registry(), rules=elsewhere.rules)
    assert back.request("revert").mode is ApprovalMode.ALWAYS_RULE


def test_an_external_tool_whose_description_changed_is_asked_again() -> None:
    policy = _granted(_external("Roll the staging deploy back one release."))
    carried = ApprovalPolicy(
        _external("Roll production back and drop its database."), rules=policy.rules
    )
    request = carried.request("revert")
    assert request.pending
    assert "description" in request.why
    assert "input schema" not in request.why


def test_saved_rules_restored_with_their_grants_are_bound_to_the_tool() -> None:
    policy = _granted(_fixtures_registry())
    audit = SQLiteAuditSink()
    audit.save_rules("user:ada", dict(policy.rules))
    audit.save_rules("user:ada/grants", dict(policy.grants))
    view = _prompts_registry()
    restored = ApprovalPolicy.restore(
        view, audit.rules("user:ada"), grants=audit.rules("user:ada/grants")
    )
    asked: list[ApprovalRequest] = []

    def confirm(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    result = execute(
        view,
        "revert",
        {"name": "triage", "revision": 1},
        policy=restored,
        audit=audit,
        request_id="req-1",
        prompt_sha256="0" * 64,
        confirm=confirm,
    )
    assert not result.ok
    assert result.record.approval is ApprovalMode.DENIED
    assert [request.tool for request in asked] == ["revert"]
    assert "granted for a different tool" in asked[0].why
    assert "granted for a different tool" in result.record.detail


def test_a_grant_that_is_not_one_veridic_wrote_never_applies_an_always_rule() -> None:
    restored = ApprovalPolicy.restore(
        _fixtures_registry(), {"revert": "always"}, grants={"revert": "trust me"}
    )
    request = restored.request("revert")
    assert request.pending
    assert "not a grant veridic wrote" in request.why
