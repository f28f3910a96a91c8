"""The second article, re-enacted: a prompt store whose revert could swap another feature's brain.

The store's ``content`` is read as instruction by the feature that owns the
prompt. The article has two halves. Visibility: handlers registered without a
description were invisible to the agent, and nobody noticed. Risk: ``edit`` was
high risk, but ``revert`` (which appends a copy of an older revision that then
becomes the active prompt) was mid, so "always allow" on revert let the agent
change another feature's instructions without asking. :func:`main` prints,
section by section:

1. a handler without a description: in no view, logged at start-up, and
   ``veridic lint`` fails on it (``examples.prompt_store.undocumented``);
2. declaring revert mid fails at start-up (``RiskFloorError``);
3. the risks the registry resolved, and why each is what it is;
4. "always allow" is refused for the high-risk tools (``AlwaysAllowRefused``);
5. a scripted model's calls, each approved and recorded: edits confirmed by
   the user, a mid tool that delegates into a content write refused by the
   store's guard, the hard delete asked for (and declined);
6. what the effects harness says about that mid tool, as a test would;
7. the audit queried: instruction-field writes approved by an always rule: 0;
8. the owning feature reads the active revision into its system slot.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from examples._console import clip, heading, quote, say, section, table
from examples.prompt_store.store import PromptStore
from examples.prompt_store.tools import build_registry
from examples.prompt_store.undocumented import build_registry as build_undocumented
from veridic import (
    AlwaysAllowRefused,
    ApprovalPolicy,
    ApprovalRequest,
    CallResult,
    Composer,
    Prompt,
    RiskFloorError,
    SQLiteAuditSink,
    Tool,
    ToolView,
    execute,
    instruction,
    provenance,
)
from veridic.run.effects import check_declared_risk, run_observed

__all__ = ["Call", "main"]

REQUEST = (
    "Make the support-triage prompt answer in lower case. Then put the previous wording back, "
    "label it stable, tidy its whitespace, and remove the old draft."
)


@dataclass(frozen=True)
class Call:
    """A tool call of the scripted model."""

    name: str
    arguments: Mapping[str, object]


SCRIPT = (
    Call("get_prompt", {"name": "support-triage"}),
    Call(
        "edit_prompt",
        {
            "name": "support-triage",
            "content": "You triage support tickets. Classify each ticket as billing, bug or "
            "question, and answer with the category only, in lower case.",
        },
    ),
    Call("revert_prompt", {"name": "support-triage", "revision": 1}),
    Call("label_prompt", {"name": "support-triage", "label": "stable"}),
    Call("tidy_prompt", {"name": "support-triage"}),
    Call("delete_prompt", {"name": "old-draft"}),
)
"""What the model calls, in order, for :data:`REQUEST`."""


def user_answers(request: ApprovalRequest) -> bool:
    """The person at the keyboard: confirms the prompt edits, declines the hard delete."""
    return request.tool != "delete_prompt"


def main() -> None:
    heading(
        "prompt_store: prompts that become another feature's system prompt",
        'The second article, "Undocumented handlers don\'t exist to the agent", re-enacted: '
        "its visibility half, then its risk half.",
    )

    section(1, "A handler without a description does not exist to the agent, and lint says so")
    _undocumented()

    section(2, "Declaring revert mid (the article's original mistake) fails at start-up")
    try:
        build_registry(PromptStore.seeded(), revert_risk="mid").boot()
    except RiskFloorError as error:
        say('build_registry(store, revert_risk="mid").boot() raised RiskFloorError:')
        quote(str(error), indent=2)
    else:  # pragma: no cover - the floor is the point of the section
        say("NO ERROR: revert was accepted at mid risk")

    store = PromptStore.seeded()
    view = build_registry(store).view()
    section(3, "The risks, as the registry resolved them (nobody typed 'high')")
    table(
        (t.name, t.kind, t.risk.value, _why(t)) for t in view.tools() if t.name != "get_tool_schema"
    )

    section(4, '"Always allow" is a permission, not a mood')
    policy = ApprovalPolicy(view)
    refused: list[str] = []
    for tool in view.tools():
        if tool.kind != "write":
            continue
        try:
            policy.allow_always(tool.name)
        except AlwaysAllowRefused as error:
            refused.append(tool.name)
            if len(refused) == 1:
                say(f"allow_always({tool.name!r}) raised AlwaysAllowRefused:")
                quote(str(error), indent=2)
        else:
            say(f"allow_always({tool.name!r}): accepted, it is a {tool.risk.value}-risk write")
    say(f"also refused: {', '.join(refused[1:])}")

    section(5, "The agent's calls: each approved, guarded and recorded")
    audit = SQLiteAuditSink(":memory:")
    prompt = (
        Composer()
        .system(
            instruction("You maintain the prompt store with the tools below."),
            view.capability_section(),
        )
        .user(REQUEST)
        .build()
    )
    results = [run(view, policy, audit, prompt, call) for call in SCRIPT]
    for number, (call, result) in enumerate(zip(SCRIPT, results, strict=True), 1):
        say(f"{number}. {_shown(call)}")
        say(f"approval {result.record.approval.value} -> {_result(result)}", indent=2)
    blocked = next(r for r in results if r.record.outcome.value == "blocked")
    say("The guard's refusal of tidy_prompt, as the model reads it:")
    quote(f"{type(blocked.error).__name__}: {blocked.error}", indent=2)
    active = store.active("support-triage")
    say(
        f"support-triage is still at revision {active.revision} (the copy of revision 1): "
        "the refused write never happened."
    )

    section(6, "What a test would have caught: the effects harness watches what tidy_prompt does")
    scratch = build_registry(PromptStore.seeded()).view()
    observed = run_observed(scratch, "tidy_prompt", {"name": "support-triage"})
    try:
        check_declared_risk([observed])
    except RiskFloorError as error:
        say("check_declared_risk([run_observed(view, 'tidy_prompt', ...)]) raised RiskFloorError:")
        quote(str(error), indent=2)

    section(7, "The audit, queried")
    counts = audit.writes_by_approval()
    say("writes by approval: " + ", ".join(f"{mode.value} {n}" for mode, n in counts.items()))
    wrote = [r for r in audit.records() if r.wrote_instruction_fields]
    say(
        f"writes of instruction fields: {len(wrote)} "
        f"({', '.join(f'{r.tool} {r.approval.value}' for r in wrote)})"
    )
    always = audit.instruction_writes_under_always_rule()
    say(f"instruction-field writes approved by an always rule: {len(always)}")

    section(8, "The owning feature reads the active revision as its system prompt")
    content = store.active("support-triage").content
    system = Composer().system(content).user("Ticket: my invoice is wrong.").build()
    origin = provenance(content)
    say(
        f"Composer().system(store.active('support-triage').content): provenance {origin.kind}, "
        f"origin {origin.origin}"
    )
    quote(system.system, indent=2)


LINT_TARGET: Final = "examples.prompt_store.undocumented:registry"
ROOT: Final = Path(__file__).resolve().parents[2]


def _undocumented() -> None:
    say(
        'archive_prompt is registered with @registry.tool(kind="write") and no docstring '
        "(examples/prompt_store/undocumented.py), as a handler added in a hurry would be."
    )
    with _logged("veridic.registry") as logged:
        view = build_undocumented(PromptStore.seeded()).view()
    say("Start-up logged:")
    for line in logged:
        quote(line, indent=2)
    in_section = "archive_prompt" in view.capability_section()
    in_specs = any(s["function"]["name"] == "archive_prompt" for s in view.tool_specs("openai"))
    prompt = Composer().system(instruction("You maintain the prompt store.")).build()
    called = execute(
        view,
        "archive_prompt",
        {"name": "old-draft"},
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-0",
        prompt=prompt,
    )
    say(
        f"In the capability section: {_yes(in_section)}; in the provider's tool list: "
        f"{_yes(in_specs)}; a call to it: {called.record.outcome.value} "
        f"({clip(called.record.detail, 70)})."
    )
    say("Where it is caught before it ships, in CI:")
    linted = subprocess.run(
        [sys.executable, "-m", "veridic", "lint", LINT_TARGET],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    quote(f"$ veridic lint {LINT_TARGET}", indent=2)
    quote(linted.stdout.rstrip(), indent=2)
    say(f"exit status {linted.returncode}: the check is red until archive_prompt says what it does")


@contextmanager
def _logged(name: str) -> Iterator[list[str]]:
    """The messages ``name`` logs inside the block (kept from the terminal, shown by the demo)."""
    kept = _Kept()
    logger = logging.getLogger(name)
    logger.addHandler(kept)
    try:
        yield kept.lines
    finally:
        logger.removeHandler(kept)


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _yes(found: bool) -> str:
    return "yes" if found else "no"


def run(
    view: ToolView, policy: ApprovalPolicy, audit: SQLiteAuditSink, prompt: Prompt, call: Call
) -> CallResult:
    """One model call through ``execute``: the view checks it, the policy or the user approves."""
    return execute(
        view,
        call.name,
        call.arguments,
        policy=policy,
        audit=audit,
        request_id="req-1",
        prompt=prompt,
        confirm=user_answers,
    )


def _why(tool: Tool) -> str:
    if tool.irreversible:
        return "irreversible (a hard delete)"
    if tool.instruction_arguments:
        return (
            f"its argument {', '.join(sorted(tool.instruction_arguments))} is read as instruction"
        )
    if tool.instruction_writes:
        return f"it writes {', '.join(sorted(tool.instruction_writes))}, read as instruction"
    return "the default of a query" if tool.kind == "query" else "the default of a write"


def _shown(call: Call) -> str:
    arguments = ", ".join(f"{k}={clip(repr(v), 40)}" for k, v in call.arguments.items())
    return f"{call.name}({arguments})"


def _result(result: CallResult) -> str:
    outcome = result.record.outcome.value
    if result.ok:
        return f"{outcome}: {clip(str(result.value), 60)}"
    if outcome == "blocked":
        return f"{outcome}: a guard refused {', '.join(result.record.operations)}"
    if outcome == "denied":
        return f"not run: {result.record.detail}"
    return f"{outcome}: {result.error}"
