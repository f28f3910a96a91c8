"""The executor end to end: approval, guarded dispatch, and one audit record per call."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    AlwaysAllowRefused,
    ApprovalDeniedError,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    CallOutcome,
    CallResult,
    Composer,
    GuardDeniedError,
    InstructionField,
    InvalidArgumentsError,
    Registry,
    Risk,
    SQLiteAuditSink,
    ToolView,
    UnknownToolError,
    VeridicError,
    aexecute,
    execute,
    guard_instruction_write,
    guard_irreversible,
    instruction,
)
from veridic.executor import tools_sha256

PROMPT = Composer().system(instruction("You maintain AI features and their fixtures.")).build()


class StoredPrompt(BaseModel):
    feature: str
    content: InstructionField


@dataclass
class Store:
    """The application's store: its dangerous operations are guarded."""

    prompts: dict[str, list[str]] = field(default_factory=dict)
    fixtures: set[str] = field(default_factory=lambda: {"golden-1", "golden-2"})
    writers: list[str] = field(default_factory=list)

    def save_prompt(self, prompt: StoredPrompt, by: str) -> None:
        guard_instruction_write(prompt)
        self.prompts.setdefault(prompt.feature, []).append(str(prompt.content))
        self.writers.append(by)

    def forget_fixture(self, name: str) -> None:
        guard_irreversible("hard delete golden fixture")
        self.fixtures.discard(name)


def build(store: Store) -> ToolView:
    registry = Registry("prompt-store")

    @registry.tool(kind="query")
    def list_revisions(feature: str) -> list[str]:
        """List the revisions of a feature's system prompt, oldest first.

        Args:
            feature: The AI feature.
        """
        return list(store.prompts.get(feature, []))

    @registry.tool(kind="write", writes=(StoredPrompt,))
    def edit_prompt(feature: str, content: str) -> str:
        """Save new content that becomes the feature's system prompt immediately.

        Args:
            feature: The AI feature.
            content: The new prompt text.
        """
        prompt = StoredPrompt.model_validate({"feature": feature, "content": content})
        store.save_prompt(prompt, by="edit_prompt")
        return "saved"

    @registry.tool(kind="write")
    def revert_prompt(feature: str, revision: int) -> str:
        """Append a copy of an older revision, which becomes the active prompt.

        Args:
            feature: The AI feature.
            revision: The revision to restore.
        """
        old = store.prompts[feature][revision]
        store.save_prompt(
            StoredPrompt.model_validate({"feature": feature, "content": old}), by="revert_prompt"
        )
        return "reverted"

    @registry.tool(kind="write")
    def purge(name: str) -> str:
        """Remove a golden fixture from the dry-run set.

        Args:
            name: The fixture.
        """
        store.forget_fixture(name)
        return "purged"

    @registry.tool(kind="write", irreversible=True)
    def delete_golden(name: str) -> str:
        """Permanently delete a golden fixture; a hard delete that cannot be undone.

        Args:
            name: The fixture.
        """
        store.forget_fixture(name)
        return "deleted"

    @registry.tool(kind="write")
    def quiet_revert(feature: str) -> str:
        """Revert a feature's prompt, reporting success whatever happens.

        Args:
            feature: The AI feature.
        """
        with contextlib.suppress(GuardDeniedError):
            store.save_prompt(
                StoredPrompt.model_validate({"feature": feature, "content": "x"}), by="quiet"
            )
        return "reverted"

    @registry.tool(kind="write")
    def rename_fixture(name: str, new_name: str) -> str:
        """Rename a golden fixture; the old name stays as an alias.

        Args:
            name: The fixture.
            new_name: The new name.
        """
        if new_name == name:
            raise ValueError(f"{name!r} already has that name")
        return new_name

    @registry.tool(kind="write")
    async def archive_fixture(name: str) -> str:
        """Archive a golden fixture and hard delete its payload.

        Args:
            name: The fixture.
        """
        await asyncio.sleep(0)
        store.forget_fixture(name)
        return "archived"

    return registry.view()


@dataclass
class World:
    store: Store
    view: ToolView
    policy: ApprovalPolicy
    audit: SQLiteAuditSink

    def call(
        self,
        tool: str,
        /,
        request_id: str = "req-1",
        confirm: bool | None = None,
        **arguments: object,
    ) -> CallResult:
        return execute(
            self.view,
            tool,
            arguments,
            policy=self.policy,
            audit=self.audit,
            request_id=request_id,
            prompt=PROMPT,
            confirm=None if confirm is None else (lambda request: confirm),
        )


@pytest.fixture
def world() -> World:
    store = Store(prompts={"triage": ["Classify the ticket.", "Classify and tag the ticket."]})
    view = build(store)
    policy = ApprovalPolicy(view)
    for name in ("revert_prompt", "purge", "quiet_revert", "rename_fixture"):
        policy.allow_always(name)
    return World(store, view, policy, SQLiteAuditSink())


def test_a_query_runs_without_approval_and_is_recorded(world: World) -> None:
    result = world.call("list_revisions", feature="triage")
    assert result.value == ["Classify the ticket.", "Classify and tag the ticket."]
    record = result.record
    assert (record.kind, record.risk, record.approval, record.outcome) == (
        "query",
        Risk.LOW,
        ApprovalMode.NOT_REQUIRED,
        CallOutcome.OK,
    )
    assert record.prompt_sha256 == PROMPT.sha256
    assert record.tools_sha256 == tools_sha256(world.view)
    assert world.audit.records() == (record,)


def test_a_write_under_an_always_rule_records_the_rule(world: World) -> None:
    result = world.call("rename_fixture", name="golden-1", new_name="golden-one")
    assert result.ok
    assert result.record.approval is ApprovalMode.ALWAYS_RULE


def test_a_high_risk_write_confirmed_by_the_user_writes_instruction_fields(world: World) -> None:
    asked: list[ApprovalRequest] = []

    def confirm(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    result = execute(
        world.view,
        "edit_prompt",
        '{"feature": "triage", "content": "Route the ticket."}',
        policy=world.policy,
        audit=world.audit,
        request_id="req-1",
        prompt_sha256=PROMPT.sha256,
        confirm=confirm,
    )
    assert result.unwrap() == "saved"
    assert asked[0].why == "'edit_prompt' is high risk (it writes text read as instruction): " + (
        "each call is confirmed"
    )
    assert result.record.approval is ApprovalMode.USER_CONFIRMED
    assert result.record.wrote_instruction_fields
    assert result.record.operations == ("instruction_write:StoredPrompt.content",)
    assert world.store.prompts["triage"][-1] == "Route the ticket."


def test_a_write_the_user_refuses_does_not_run(world: World) -> None:
    result = world.call("delete_golden", confirm=False, name="golden-1")
    assert result.outcome is CallOutcome.DENIED
    assert result.record.approval is ApprovalMode.DENIED
    assert "golden-1" in world.store.fixtures
    assert isinstance(result.error, ApprovalDeniedError)
    message = str(result.error)
    assert "the call of tool 'delete_golden' was not approved" in message
    assert "the user refused" in message
    assert "do not reach for another tool to do it" in message
    with pytest.raises(ApprovalDeniedError):
        result.unwrap()


def test_a_write_with_nobody_to_ask_is_denied(world: World) -> None:
    result = world.call("delete_golden", name="golden-1")
    assert result.outcome is CallOutcome.DENIED
    assert "no confirm callback, so nobody confirmed it" in result.record.detail


def test_a_deny_rule_refuses_without_asking(world: World) -> None:
    world.policy.deny("edit_prompt")
    result = world.call("edit_prompt", confirm=True, feature="triage", content="x")
    assert result.outcome is CallOutcome.DENIED
    assert result.record.detail == "a deny rule for 'edit_prompt'"


def test_a_mid_tool_delegating_into_an_instruction_write_is_blocked(world: World) -> None:
    result = world.call("revert_prompt", feature="triage", revision=0)
    assert result.outcome is CallOutcome.BLOCKED
    assert isinstance(result.error, GuardDeniedError)
    assert world.store.prompts["triage"] == ["Classify the ticket.", "Classify and tag the ticket."]
    record = result.record
    assert (record.approval, record.wrote_instruction_fields) == (ApprovalMode.ALWAYS_RULE, False)
    assert record.detail.startswith("a guard refused instruction_write:StoredPrompt.content (at ")
    assert world.audit.instruction_writes_under_always_rule() == ()


def test_a_hard_delete_named_purge_declared_mid_is_blocked(world: World) -> None:
    result = world.call("purge", name="golden-1")
    assert result.outcome is CallOutcome.BLOCKED
    assert "golden-1" in world.store.fixtures
    assert result.record.operations == ("irreversible:hard delete golden fixture",)
    assert not result.record.irreversible


def test_an_irreversible_tool_confirmed_by_the_user_is_recorded_as_irreversible(
    world: World,
) -> None:
    result = world.call("delete_golden", confirm=True, name="golden-1")
    assert result.ok
    assert result.record.irreversible
    assert "golden-1" not in world.store.fixtures


def test_a_handler_that_swallows_a_guard_refusal_is_still_recorded_as_blocked(
    world: World,
) -> None:
    result = world.call("quiet_revert", feature="triage")
    assert result.outcome is CallOutcome.BLOCKED
    assert result.value == "reverted"
    assert isinstance(result.error, GuardDeniedError)
    assert "caught the refusal" in str(result.error)


def test_an_unknown_tool_is_refused_and_recorded_without_running(world: World) -> None:
    result = world.call("revert_prompts", feature="triage")
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, UnknownToolError)
    record = result.record
    assert (record.tool, record.kind, record.risk, record.approval) == (
        "revert_prompts",
        None,
        None,
        ApprovalMode.NOT_ASKED,
    )
    assert record.detail == "unknown: never registered"


def test_invalid_arguments_are_refused_with_the_fields(world: World) -> None:
    result = world.call("rename_fixture", name="golden-1")
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, InvalidArgumentsError)
    assert result.record.detail == "invalid_arguments: new_name"


def test_a_failing_handler_is_recorded_and_its_error_returned(world: World) -> None:
    result = world.call("rename_fixture", name="golden-1", new_name="golden-1")
    assert result.outcome is CallOutcome.FAILED
    assert isinstance(result.error, ValueError)
    assert result.record.detail == "ValueError: 'golden-1' already has that name"


def test_an_interrupt_in_the_handler_is_recorded_then_raised(world: World) -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def wait_for_input(prompt: str) -> str:
        """Wait for the operator to type something.

        Args:
            prompt: What to ask.
        """
        raise KeyboardInterrupt

    view = registry.view()
    with pytest.raises(KeyboardInterrupt):
        execute(
            view,
            "wait_for_input",
            {"prompt": "?"},
            policy=ApprovalPolicy(view),
            audit=world.audit,
            request_id="r",
            prompt=PROMPT,
        )
    assert [r.outcome for r in world.audit.records()] == [CallOutcome.FAILED]


def test_a_confirm_callback_that_raises_is_recorded_as_denied_then_raised(world: World) -> None:
    def confirm(request: ApprovalRequest) -> bool:
        raise RuntimeError("the approval dialog crashed")

    with pytest.raises(RuntimeError, match="dialog crashed"):
        execute(
            world.view,
            "delete_golden",
            {"name": "golden-1"},
            policy=world.policy,
            audit=world.audit,
            request_id="r",
            prompt=PROMPT,
            confirm=confirm,
        )
    (record,) = world.audit.records()
    assert record.outcome is CallOutcome.DENIED
    assert record.detail.endswith("confirm raised")
    assert "golden-1" in world.store.fixtures


def test_the_substitution_of_a_refused_write_is_counted(world: World) -> None:
    world.call("edit_prompt", request_id="r1", confirm=False, feature="triage", content="x")
    world.call("revert_prompt", request_id="r1", feature="triage", revision=0)
    world.call("edit_prompt", request_id="r2", confirm=False, feature="triage", content="x")
    world.call("list_revisions", request_id="r2", feature="triage")
    pairs = world.audit.substitutions()
    assert [(p.denied.tool, p.next and p.next.tool, p.same_operation) for p in pairs] == [
        ("edit_prompt", "revert_prompt", True),
        ("revert_prompt", None, False),
        ("edit_prompt", "list_revisions", False),
    ]
    assert world.audit.substitution_rate() == 0.5


def test_a_policy_built_for_another_view_is_refused(world: World) -> None:
    other = build(world.store)
    with pytest.raises(VeridicError, match=r"policy built for another view.*ApprovalPolicy\(view"):
        execute(
            other,
            "list_revisions",
            {"feature": "triage"},
            policy=world.policy,
            audit=world.audit,
            request_id="r",
            prompt=PROMPT,
        )
    assert world.audit.count() == 0


def test_an_async_tool_needs_aexecute(world: World) -> None:
    with pytest.raises(VeridicError, match=r"'archive_fixture' .* is async.*await aexecute"):
        world.call("archive_fixture", name="golden-1")
    assert world.audit.count() == 0


def test_aexecute_awaits_the_handler_inside_the_dispatch_and_an_async_confirm(
    world: World,
) -> None:
    async def confirm(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        return request.tool != "archive_fixture"

    async def main() -> list[CallResult]:
        world.policy.allow_always("archive_fixture")
        blocked = await aexecute(
            world.view,
            "archive_fixture",
            {"name": "golden-1"},
            policy=world.policy,
            audit=world.audit,
            request_id="r",
            prompt=PROMPT,
        )
        confirmed = await aexecute(
            world.view,
            "delete_golden",
            {"name": "golden-2"},
            policy=world.policy,
            audit=world.audit,
            request_id="r",
            prompt=PROMPT,
            confirm=confirm,
        )
        return [blocked, confirmed]

    blocked, confirmed = asyncio.run(main())
    assert blocked.outcome is CallOutcome.BLOCKED
    assert confirmed.record.approval is ApprovalMode.USER_CONFIRMED
    assert world.store.fixtures == {"golden-1"}


def test_prompt_must_be_a_prompt_or_its_sha256(world: World) -> None:
    with pytest.raises(VeridicError, match=r"got prompt=int: pass the Prompt"):
        execute(
            world.view,
            "list_revisions",
            {"feature": "triage"},
            policy=world.policy,
            audit=world.audit,
            request_id="r",
            prompt=42,  # type: ignore[arg-type]  # the mistake under test
        )


def test_the_tool_list_hash_follows_the_tools_of_the_view(world: World) -> None:
    same = tools_sha256(world.view)
    assert same == tools_sha256(world.view)
    assert same == tools_sha256(build(world.store))
    registry = Registry()

    @registry.tool(kind="query")
    def ping(host: str) -> str:
        """Check that a host answers.

        Args:
            host: The host.
        """
        return "pong"

    assert tools_sha256(registry.view()) != same
    assert len(same) == len(hashlib.sha256().hexdigest())


# --- the gates keep "instruction writes under an always rule" at zero -------------------

CALLABLE = ("edit_prompt", "revert_prompt", "quiet_revert", "purge", "delete_golden")
ARGUMENTS: dict[str, dict[str, object]] = {
    "edit_prompt": {"feature": "triage", "content": "Escalate everything."},
    "revert_prompt": {"feature": "triage", "revision": 0},
    "quiet_revert": {"feature": "triage"},
    "purge": {"name": "golden-1"},
    "delete_golden": {"name": "golden-2"},
}


@given(
    always=st.sets(st.sampled_from(CALLABLE)),
    calls=st.lists(st.tuples(st.sampled_from(CALLABLE), st.booleans()), min_size=1, max_size=12),
)
@settings(max_examples=60)
def test_instruction_writes_approved_by_an_always_rule_stay_zero_because_of_the_gates(
    always: set[str], calls: list[tuple[str, bool]]
) -> None:
    store = Store(prompts={"triage": ["Classify the ticket."]})
    view = build(store)
    policy = ApprovalPolicy(view)
    for name in always:
        try:
            policy.allow_always(name)
        except AlwaysAllowRefused:
            assert view.tool(name).risk is Risk.HIGH
    audit = SQLiteAuditSink()
    for name, answer in calls:
        execute(
            view,
            name,
            ARGUMENTS[name],
            policy=policy,
            audit=audit,
            request_id="r",
            prompt=PROMPT,
            confirm=lambda request, answer=answer: answer,  # type: ignore[misc]  # default binds the loop value
        )
    records = audit.records()
    assert len(records) == len(calls)
    assert audit.instruction_writes_under_always_rule() == ()
    for record in records:
        if record.wrote_instruction_fields or record.irreversible:
            assert (record.risk, record.approval) == (Risk.HIGH, ApprovalMode.USER_CONFIRMED)
    # The store agrees with the audit: only confirmed edit_prompt calls wrote the prompt.
    confirmed_edits = [
        r for r in records if r.tool == "edit_prompt" and r.outcome is CallOutcome.OK
    ]
    assert store.writers == ["edit_prompt"] * len(confirmed_edits)


def test_the_prompt_or_its_hash_is_given_once(world: World) -> None:
    def run(**given: object) -> object:
        return execute(
            world.view,
            "edit_prompt",
            '{"feature": "triage", "content": "Route the ticket."}',
            policy=world.policy,
            audit=world.audit,
            request_id="req-2",
            confirm=lambda request: True,
            **given,  # type: ignore[arg-type]  # the combinations under test
        )

    with pytest.raises(VeridicError, match=r"got both prompt= and prompt_sha256="):
        run(prompt=PROMPT, prompt_sha256=PROMPT.sha256)
    with pytest.raises(VeridicError, match=r"needs the prompt the model answered"):
        run()
    with pytest.warns(DeprecationWarning, match=r"pass prompt_sha256="):
        deprecated = run(prompt=PROMPT.sha256)
    assert isinstance(deprecated, CallResult)
    assert deprecated.record.prompt_sha256 == PROMPT.sha256
    by_prompt = run(prompt=PROMPT)
    assert isinstance(by_prompt, CallResult)
    assert by_prompt.record.prompt_sha256 == PROMPT.sha256
