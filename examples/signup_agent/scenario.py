"""The first article, re-enacted: a plug-in fails to boot, and the prompt says so.

"Create a new user from a CF7 submission, use the WP REST API." The REST
route requires a password the form lacks; the snippet tools that could
generate one belong to a paid extension whose version check fails at start-up
on a site running core 2.2. :func:`main` prints, section by section:

1. start-up: the extension's boot check fails, and the registry records why;
2. the capability section (the prompt's account of the tools) says snippets
   are unavailable and why: it is a projection of the same view that
   dispatches, so it cannot claim them;
3. the model reads the route's contract with the built-in ``get_tool_schema``
   instead of recalling it, and finds that ``password`` has no source;
4. a plan that still names the snippet steps is normalized against the view:
   two steps removed, their dependent invalidated, a notice for the user;
   nothing vanishes, and the silently thinned plan of the article is shown
   failing the way it did, with a 400 on delivery;
5. the same model, reading the truthful prompt, proposes the honest plan;
6. with core 2.3 the extension boots and the full plan runs, every call
   approved and recorded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from examples._console import heading, quote, say, section, table
from examples.signup_agent.model import ModelTurn, ScriptedModel
from examples.signup_agent.wordpress import FORM, SUBMISSION, Site, build_registry
from veridic import (
    ApprovalPolicy,
    CallResult,
    Composer,
    NormalizedPlan,
    PlanStep,
    Prompt,
    SQLiteAuditSink,
    ToolView,
    execute,
    instruction,
    normalize_plan,
    untrusted,
)
from veridic.run.executor import execute_plan

__all__ = ["Conversation", "converse", "main"]

REQUEST = "Create a new user from a CF7 submission, use the WP REST API."
RULES = instruction(
    "You build integrations on this WordPress site with the tools listed below. Propose the "
    "build as a plan of steps; the user reviews the plan before anything runs."
)
READ_FIRST = instruction(
    "Before planning a build that calls a REST route, read the route's contract with "
    "get_tool_schema; do not rely on what you remember about the API."
)


@dataclass(frozen=True)
class Conversation:
    """One request to the model: the prompt it last saw, its answer, the calls it made."""

    prompt: Prompt
    turn: ModelTurn
    calls: tuple[tuple[str, Mapping[str, object], CallResult], ...]


def converse(
    view: ToolView, model: ScriptedModel, audit: SQLiteAuditSink, request_id: str
) -> Conversation:
    """Ask the model until it answers without tool calls; run its calls through ``execute``.

    The system message is code plus the view's capability section; the form
    submission is a fenced data block; tool results go back fenced, as data.
    """
    policy = ApprovalPolicy(view)
    composer = (
        Composer()
        .system(RULES, READ_FIRST, view.capability_section())
        .data(f"cf7:{FORM}", untrusted(json.dumps(SUBMISSION), source=f"cf7:{FORM}/submission-118"))
        .user(REQUEST)
    )
    calls: list[tuple[str, Mapping[str, object], CallResult]] = []
    prompt = composer.build()
    turn = model.respond(prompt)
    while turn.calls:
        for call in turn.calls:
            composer.tool_call(call.id, call.name, call.arguments)
        for call in turn.calls:
            result = execute(
                view,
                call.name,
                call.arguments,
                policy=policy,
                audit=audit,
                request_id=request_id,
                prompt=prompt,
            )
            calls.append((call.name, call.arguments, result))
            answer = json.dumps(result.value if result.ok else str(result.error))
            composer.tool_result(call.id, untrusted(answer, source=f"tool:{call.name}"))
        prompt = composer.build()
        turn = model.respond(prompt)
    return Conversation(prompt, turn, tuple(calls))


@contextmanager
def start_up_log() -> Iterator[list[str]]:
    """Collect what the registry logs while it boots, to print it in its section."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("veridic.registry")
    handler = Collect(logging.INFO)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def main() -> None:
    heading(
        "signup_agent: a Contact Form 7 submission must become a WordPress user",
        'The first article, "When Your AI Agent\'s Prompt Lies About Its Tools", re-enacted.',
    )
    audit = SQLiteAuditSink(":memory:")
    old = Site("2.2")
    registry = build_registry(old)

    section(1, "Start-up on a site running core 2.2, with Webhook Actions Pro installed")
    with start_up_log() as log:
        registry.boot()
    view = registry.view()
    for line in log:
        say(f"log: {line}")
    say(f"the agent can call: {', '.join(tool.name for tool in view.tools())}")
    withheld: dict[str, list[str]] = {}
    for status in view.withheld():
        withheld.setdefault(status.reason, []).append(status.name)
    for reason, names in withheld.items():
        say(f"withheld: {', '.join(names)}: {reason}")

    section(2, "What the system prompt says about snippets (its capability section)")
    capability = str(view.capability_section())
    quote(capability[capability.index("Not available here") :])
    specs = view.tool_specs("openai")
    view.assert_coupled(specs)
    say(
        f"The section, the {len(specs)} tool specs sent to the provider and the dispatch table "
        "come from one view: the same names, and no snippet tool in any of them."
    )

    section(3, "The model reads the route's contract instead of recalling it")
    talk = converse(view, ScriptedModel(), audit, "req-free-tier")
    for name, arguments, result in talk.calls:
        say(f"model -> {name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
        contract = result.value if isinstance(result.value, dict) else {}
        required = [str(r) for r in contract.get("required", [])]
        schema = contract.get("input_schema", {})
        optional = sorted(set(schema.get("properties", {})) - set(required))
        say(f"<- required: {', '.join(required)}   (optional: {', '.join(optional)})")
    say(f"the form provides: {', '.join(sorted(SUBMISSION))}: nothing for password")

    section(4, "A plan that still names the snippet steps (a model planning from memory)")
    stale = converse(view, ScriptedModel(plans_from_memory=True), audit, "req-from-memory")
    plan = normalize_plan(stale.turn.plan, view)
    show_plan(stale.turn.plan, plan)
    say("Shown to the user before anything runs:")
    quote(plan.notice, indent=2)
    thinned = silent_skip(stale.turn.plan)
    say(
        f"What the article's silent skip did instead: kept {thinned[0]} of "
        f"{len(stale.turn.plan)} steps, all green, and the live delivery answers:"
    )
    quote(thinned[1], indent=2)

    section(5, "The honest free-tier plan: the same model, reading the truthful prompt")
    say(f'model: "{talk.turn.text}"')
    honest = normalize_plan(talk.turn.plan, view)
    steps = " -> ".join(_step_label(step.tool, step.arguments) for step in honest.steps)
    say(
        f"plan: {steps}   ({len(honest.steps)} steps, "
        f"{'complete: nothing dropped, nothing promised' if honest.complete else 'INCOMPLETE'})"
    )

    section(6, "Core updated to 2.3: the extension boots, and the full plan runs")
    new = Site("2.3")
    upgraded = build_registry(new).view()
    added = sorted(upgraded.names() - view.names())
    say(f"the capability section now lists {', '.join(added)}; nothing is unavailable")
    full = converse(upgraded, ScriptedModel(), audit, "req-pro")
    say(f'model: "{full.turn.text}"')
    complete = normalize_plan(full.turn.plan, upgraded)
    say(f"plan: {len(complete.steps)} steps, {'complete' if complete.complete else 'INCOMPLETE'}")
    results = run_plan(upgraded, complete, full.prompt, audit)
    table(
        (
            step.id,
            step.tool,
            f"{result.outcome.value}, {result.record.approval.value}: {result.value}",
        )
        for step, result in results
    )
    modes: dict[str, int] = {}
    for record in audit.records():
        modes[record.approval.value] = modes.get(record.approval.value, 0) + 1
    summary = ", ".join(f"{count} {mode}" for mode, count in modes.items())
    say(f"audit: {len(audit.records())} calls recorded across the three requests ({summary})")


def show_plan(proposed: tuple[Mapping[str, object], ...], plan: NormalizedPlan) -> None:
    """One line per proposed step: kept, removed (and why) or not run (and because of what)."""
    dropped = {d.id: d for d in plan.dropped}
    invalid = {i.id: i for i in plan.invalidated}
    say(
        f"proposed {len(proposed)} steps: {len(plan.steps)} kept, {len(dropped)} removed, "
        f"{len(invalid)} not run; every one accounted for"
    )
    rows = []
    for step in proposed:
        step_id, tool = str(step["id"]), str(step["tool"])
        if step_id in dropped:
            fate = f"removed: {dropped[step_id].reason}"
        elif step_id in invalid:
            fate = f"not run: depends on {', '.join(invalid[step_id].because)}"
        else:
            fate = "kept"
        rows.append((step_id, tool, fate))
    table(rows, indent=2)


def silent_skip(proposed: tuple[Mapping[str, object], ...]) -> tuple[int, str]:
    """The article's normalizer on a fresh 2.2 site: skip unknown steps, run the rest.

    Returns how many steps it kept and what the last one (the test delivery) answered.
    """
    with start_up_log():
        view = build_registry(Site("2.2")).view()
    kept = [step for step in proposed if step["tool"] in view.names()]
    answer: object = None
    for step in kept:
        arguments = step.get("arguments")
        answer = view.dispatch(
            str(step["tool"]), arguments if isinstance(arguments, Mapping) else {}
        )
    return len(kept), str(answer)


def run_plan(
    view: ToolView, plan: NormalizedPlan, prompt: Prompt, audit: SQLiteAuditSink
) -> list[tuple[PlanStep, CallResult]]:
    """Run the plan through ``execute_plan``: the user approved the plan as shown.

    Each step runs after the steps it depends on, and the first that does not succeed
    stops the plan (``.notice`` says what ran and what did not): the snippet that sets
    the password failing must not leave a user created without one.
    """
    policy = ApprovalPolicy(view)
    run = execute_plan(
        view,
        plan,
        policy=policy,
        audit=audit,
        request_id="req-pro",
        prompt=prompt,
        confirm=lambda request: True,
    )
    return list(run.ran)


def _step_label(tool: str, arguments: Mapping[str, object]) -> str:
    return f"{tool} (disabled)" if arguments.get("enabled") is False else tool
