"""The examples re-enact the articles: each runs, deterministically, and shows what it must.

Each scenario is checked twice: through its parts (the registry, the scripted
model, the plan, the audit), and through what ``main()`` prints, since a
person reads that. ``veridic check`` runs on each example's registry against
its committed manifest, and ``make demo``'s command runs from the root.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from veridic import (
    AlwaysAllowRefused,
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    Composer,
    GuardDeniedError,
    Risk,
    RiskFloorError,
    SQLiteAuditSink,
    execute,
    instruction,
    normalize_plan,
    unfence,
)
from veridic.cli import main as veridic_cli

# The examples package lives at the repository root, as `python -m examples...` expects.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples import prompt_store, signup_agent
from examples.prompt_store.scenario import SCRIPT, user_answers
from examples.prompt_store.store import PromptStore
from examples.prompt_store.tools import build_registry as prompt_registry
from examples.signup_agent.model import ScriptedModel
from examples.signup_agent.scenario import converse, run_plan, silent_skip
from examples.signup_agent.wordpress import Site
from examples.signup_agent.wordpress import build_registry as site_registry

ROOT = Path(__file__).resolve().parents[1]


def _printed(main: object) -> str:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert callable(main)
        main()
    return buffer.getvalue()


def _flat(text: str) -> str:
    """The printed text as one line: indentation, quote gutters and wrapping removed."""
    return " ".join(re.sub(r"^\s*\|?\s*", "", line) for line in text.splitlines())


@pytest.fixture(scope="module")
def signup_output() -> str:
    return _printed(signup_agent.main)


@pytest.fixture(scope="module")
def store_output() -> str:
    return _printed(prompt_store.main)


# --- signup_agent -------------------------------------------------------------------------

UNAVAILABLE = (
    "Code snippets (Code Glue) are not available on this site: the Pro extension did not start "
    "(requires core >= 2.3)."
)


def test_capability_section_says_snippets_are_unavailable_and_why() -> None:
    view = site_registry(Site("2.2")).view()
    section = str(view.capability_section())
    assert UNAVAILABLE in section
    assert "Webhook Actions Pro is installed, up to date and licensed" in section
    assert not {"create_snippet", "assign_snippet"} & view.names()
    assert "- create_snippet (" not in section


def test_signup_output_shows_the_truthful_unavailable_line(signup_output: str) -> None:
    assert UNAVAILABLE in _flat(signup_output)


def test_model_reads_the_route_contract_with_the_schema_tool() -> None:
    view = site_registry(Site("2.2")).view()
    audit = SQLiteAuditSink(":memory:")
    talk = converse(view, ScriptedModel(), audit, "req-1")
    [(name, arguments, result)] = talk.calls
    assert (name, dict(arguments)) == ("get_tool_schema", {"name": "create_user"})
    assert isinstance(result.value, dict)
    assert result.value["required"] == ["username", "email", "password"]
    [record] = audit.records()
    assert record.approval is ApprovalMode.NOT_REQUIRED
    blocks = dict(block for m in talk.prompt.messages for block in unfence(m.content))
    assert '"password"' in blocks["tool:get_tool_schema"]


def test_signup_output_shows_the_contract_read(signup_output: str) -> None:
    flat = _flat(signup_output)
    assert "model -> get_tool_schema(name='create_user')" in flat
    assert "required: username, email, password" in flat


def test_plan_naming_snippet_steps_yields_notice_and_invalidated_dependents() -> None:
    view = site_registry(Site("2.2")).view()
    stale = converse(view, ScriptedModel(plans_from_memory=True), SQLiteAuditSink(), "req-1")
    plan = normalize_plan(stale.turn.plan, view)
    assert [s.id for s in plan.steps] == ["step_1", "step_2", "step_3"]
    assert [(d.id, d.tool, d.reason) for d in plan.dropped] == [
        ("step_4", "create_snippet", "unavailable"),
        ("step_5", "assign_snippet", "unavailable"),
    ]
    assert [(i.id, i.because) for i in plan.invalidated] == [("step_6", ("step_4", "step_5"))]
    assert plan.notice.startswith(
        "Some proposed steps were removed because this site cannot run them: create_snippet, "
        "assign_snippet. The remaining plan may be incomplete."
    )
    assert "requires core >= 2.3" in plan.notice


def test_signup_output_accounts_for_every_proposed_step(signup_output: str) -> None:
    flat = _flat(signup_output)
    assert "proposed 6 steps: 3 kept, 2 removed, 1 not run" in flat
    assert "Not run, because they depend on removed steps: test_dispatch" in flat


def test_the_silently_thinned_plan_fails_on_delivery_as_in_the_article() -> None:
    view = site_registry(Site("2.2")).view()
    stale = converse(view, ScriptedModel(plans_from_memory=True), SQLiteAuditSink(), "req-1")
    kept, answer = silent_skip(stale.turn.plan)
    assert kept == 4
    assert answer == "400 rest_missing_callback_param: Missing parameter(s): password"


def test_honest_plan_creates_the_webhook_disabled_and_says_why() -> None:
    view = site_registry(Site("2.2")).view()
    talk = converse(view, ScriptedModel(), SQLiteAuditSink(), "req-1")
    plan = normalize_plan(talk.turn.plan, view)
    assert plan.complete
    assert [s.tool for s in plan.steps] == ["create_webhook", "assign_credential", "set_mapping"]
    assert plan.steps[0].arguments["enabled"] is False
    assert "requires password" in talk.turn.text
    assert "Code snippets (Code Glue) are not available on this site" in talk.turn.text


def test_full_plan_runs_when_the_extension_boots() -> None:
    site = Site("2.3")
    view = site_registry(site).view()
    audit = SQLiteAuditSink(":memory:")
    talk = converse(view, ScriptedModel(), audit, "req-1")
    plan = normalize_plan(talk.turn.plan, view)
    assert plan.complete
    assert len(plan.steps) == 6
    results = run_plan(view, plan, talk.prompt, audit)
    assert all(result.ok for _, result in results)
    assert str(results[-1][1].value).startswith("201 Created: user #1 Ann Lee <ann@example.com>")
    assert [sorted(user) for user in site.users] == [["email", "name", "username"]]


def test_signup_output_shows_the_full_plan_running(signup_output: str) -> None:
    flat = _flat(signup_output)
    assert "plan: 6 steps, complete" in flat
    assert "201 Created: user #1 Ann Lee <ann@example.com>" in flat


# --- prompt_store -------------------------------------------------------------------------


def test_declaring_revert_mid_fails_at_start_up() -> None:
    registry = prompt_registry(PromptStore.seeded(), revert_risk="mid")
    with pytest.raises(RiskFloorError) as raised:
        registry.boot()
    message = str(raised.value)
    assert "tool 'revert_prompt'" in message
    assert "examples/prompt_store/tools.py:" in message
    assert "StoredPrompt.content" in message
    assert "declare risk=Risk.HIGH" in message


def test_edit_revert_and_delete_are_high_and_the_other_writes_mid() -> None:
    view = prompt_registry(PromptStore.seeded()).view()
    risks = {tool.name: tool.risk for tool in view.tools() if tool.kind == "write"}
    assert risks == {
        "edit_prompt": Risk.HIGH,
        "revert_prompt": Risk.HIGH,
        "delete_prompt": Risk.HIGH,
        "label_prompt": Risk.MID,
        "tidy_prompt": Risk.MID,
    }


@pytest.mark.parametrize("tool", ["edit_prompt", "revert_prompt", "delete_prompt"])
def test_always_allow_is_refused_for_high_risk_store_tools(tool: str) -> None:
    policy = ApprovalPolicy(prompt_registry(PromptStore.seeded()).view())
    with pytest.raises(AlwaysAllowRefused, match=f"'{tool}', which is high risk"):
        policy.allow_always(tool)
    assert policy.rule(tool) is None


def test_mid_tool_that_delegates_into_a_content_write_is_denied_by_the_guard() -> None:
    store = PromptStore.seeded()
    view = prompt_registry(store).view()
    policy = ApprovalPolicy(view)
    policy.allow_always("tidy_prompt")
    prompt = Composer().system(instruction("You maintain prompts.")).user("Tidy it.").build()
    result = execute(
        view,
        "tidy_prompt",
        {"name": "support-triage"},
        policy=policy,
        audit=SQLiteAuditSink(),
        request_id="req-1",
        prompt=prompt,
    )
    assert result.outcome is CallOutcome.BLOCKED
    assert isinstance(result.error, GuardDeniedError)
    assert "'tidy_prompt'" in str(result.error)
    assert [r.revision for r in store.revisions("support-triage")] == [1]


def test_audit_counts_no_instruction_write_approved_by_an_always_rule() -> None:
    store = PromptStore.seeded()
    view = prompt_registry(store).view()
    policy = ApprovalPolicy(view)
    policy.allow_always("label_prompt")
    policy.allow_always("tidy_prompt")
    audit = SQLiteAuditSink(":memory:")
    prompt = Composer().system(instruction("You maintain prompts.")).user("Go.").build()
    for call in SCRIPT:
        execute(
            view,
            call.name,
            call.arguments,
            policy=policy,
            audit=audit,
            request_id="req-1",
            prompt=prompt,
            confirm=user_answers,
        )
    wrote = [(r.tool, r.approval) for r in audit.records() if r.wrote_instruction_fields]
    assert wrote == [
        ("edit_prompt", ApprovalMode.USER_CONFIRMED),
        ("revert_prompt", ApprovalMode.USER_CONFIRMED),
    ]
    assert audit.writes_by_approval()[ApprovalMode.ALWAYS_RULE] == 2
    assert audit.instruction_writes_under_always_rule() == ()


def test_store_output_shows_each_decision(store_output: str) -> None:
    flat = _flat(store_output)
    # The visibility half: the undocumented handler is in no projection, and lint fails.
    assert "tool 'archive_prompt' (examples/prompt_store/undocumented.py:" in flat
    assert "In the capability section: no; in the provider's tool list: no" in flat
    assert "a call to it: refused (unavailable: it has no real description" in flat
    assert "missing-description (1)" in flat
    assert "exit status 1: the check is red" in flat
    assert 'build_registry(store, revert_risk="mid").boot() raised RiskFloorError' in flat
    assert "allow_always('edit_prompt') raised AlwaysAllowRefused" in flat
    assert "also refused: revert_prompt, delete_prompt" in flat
    assert "approval always_rule -> blocked: a guard refused" in flat
    assert "instruction-field writes approved by an always rule: 0" in flat
    assert "provenance field, origin StoredPrompt.content" in flat


# --- both ---------------------------------------------------------------------------------


def test_examples_print_the_same_thing_every_run(signup_output: str, store_output: str) -> None:
    assert _printed(signup_agent.main) == signup_output
    assert _printed(prompt_store.main) == store_output


@pytest.mark.parametrize(
    ("target", "manifest"),
    [
        ("examples.signup_agent.wordpress:registry", "examples/signup_agent/manifest.json"),
        ("examples.prompt_store.tools:registry", "examples/prompt_store/manifest.json"),
    ],
)
def test_veridic_check_passes_on_each_example_registry(
    target: str, manifest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = veridic_cli(["check", target, "--manifest", str(ROOT / manifest)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "matches the registry" in out


def test_demo_runs_both_scenarios_from_the_repository_root() -> None:
    done = subprocess.run(
        [sys.executable, "examples/demo.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Injected text in the system prompt: none" in done.stdout
    assert "signup_agent: a Contact Form 7 submission must become a WordPress user" in done.stdout
    assert "prompt_store: prompts that become another feature's system prompt" in done.stdout
    assert done.stderr == ""
