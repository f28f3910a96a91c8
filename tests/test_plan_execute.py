"""Running a checked plan: a step that does not succeed stops the plan, and what ran and what
did not is said, on the sync and the async road alike."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    Composer,
    IncompletePlanError,
    Registry,
    SQLiteAuditSink,
    ToolContext,
    ToolError,
    ToolView,
    VeridicError,
    instruction,
    normalize_plan,
)
from veridic.run.executor import PlanRun, aexecute_plan, execute_plan

PROMPT = Composer().system(instruction("You build webhooks from form submissions.")).build()


class Site:
    """A site whose tools remember what ran; ``fails`` names the steps' inputs that fail."""

    def __init__(self, fails: frozenset[str] = frozenset()) -> None:
        self.fails = fails
        self.ran: list[str] = []
        self.registry = Registry("site")

        @self.registry.tool(kind="write")
        def make(name: str) -> str:
            """Create a thing of the build (a snippet, a webhook, a mapping).

            Args:
                name: What to create.
            """
            return self._run(name)

        @self.registry.tool(kind="write")
        def interrupt(name: str) -> str:
            """Stand for a step the operator stops with Ctrl-C while it runs.

            Args:
                name: What it was creating.
            """
            raise KeyboardInterrupt

        self.view: ToolView = self.registry.view()

    def _run(self, name: str) -> str:
        self.ran.append(name)
        if name in self.fails:
            raise ToolError(f"could not create {name}")
        return f"made {name}"


def _steps(count: int, *, chain: bool = True) -> list[dict[str, object]]:
    return [
        {
            "id": f"s{index}",
            "tool": "make",
            "arguments": {"name": f"n{index}"},
            "depends_on": [f"s{index - 1}"] if chain and index else [],
        }
        for index in range(count)
    ]


def _run(
    site: Site, steps: list[dict[str, object]], audit: SQLiteAuditSink | None = None
) -> PlanRun:
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    return execute_plan(
        site.view,
        normalize_plan(steps, site.view),
        policy=policy,
        audit=audit or SQLiteAuditSink(":memory:"),
        request_id="req-plan",
        prompt=PROMPT,
    )


def test_a_step_that_fails_stops_the_plan_and_the_steps_after_it_do_not_run() -> None:
    # The seed: the snippet that injects the password fails, and the steps that need the
    # password ran anyway in the documented loop over plan.ordered.
    site = Site(fails=frozenset({"n1"}))
    run = _run(site, _steps(4))
    assert site.ran == ["n0", "n1"]
    assert [(step.id, result.outcome) for step, result in run.ran] == [
        ("s0", CallOutcome.OK),
        ("s1", CallOutcome.FAILED),
    ]
    assert [step.id for step in run.not_run] == ["s2", "s3"]
    assert run.stopped_at is not None
    assert run.stopped_at.id == "s1"
    assert not run.complete
    assert run.notice.splitlines() == [
        "The plan stopped at step s1 (make): it failed (ToolError: could not create n1).",
        "Ran: s0 (make), s1 (make).",
        "Not run: s2 (make), s3 (make).",
    ]


def test_a_failed_step_stops_steps_that_do_not_depend_on_it_too() -> None:
    # depends_on is the model's word, and a model leaves dependencies out: the user
    # reviewed the plan as a whole, so what remains after a failure is a different plan.
    site = Site(fails=frozenset({"n0"}))
    run = _run(site, _steps(3, chain=False))
    assert site.ran == ["n0"]
    assert [step.id for step in run.not_run] == ["s1", "s2"]


def test_a_step_the_user_refuses_stops_the_plan() -> None:
    site = Site()
    policy = ApprovalPolicy(site.view)  # "make" is asked about
    answers = iter([True, False])
    run = execute_plan(
        site.view,
        normalize_plan(_steps(3), site.view),
        policy=policy,
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-plan",
        prompt=PROMPT,
        confirm=lambda request: next(answers),
    )
    assert site.ran == ["n0"]
    assert [(s.id, r.outcome) for s, r in run.ran] == [
        ("s0", CallOutcome.OK),
        ("s1", CallOutcome.DENIED),
    ]
    assert [step.id for step in run.not_run] == ["s2"]
    assert run.notice.startswith("The plan stopped at step s1 (make): it was denied (")


def test_a_complete_plan_runs_every_step_in_dependency_order() -> None:
    site = Site()
    steps = _steps(3)
    steps.reverse()  # depends_on points forward: s2 is listed first
    run = _run(site, steps)
    assert site.ran == ["n0", "n1", "n2"]
    assert run.complete
    assert run.not_run == ()
    assert run.stopped_at is None
    assert run.notice == ""


def test_an_incomplete_plan_is_refused_before_anything_runs() -> None:
    site = Site()
    steps: list[dict[str, object]] = [
        *_steps(2),
        {"id": "s9", "tool": "create_snippet", "arguments": {}},
    ]
    plan = normalize_plan(steps, site.view)
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(IncompletePlanError) as raised:
        execute_plan(
            site.view, plan, policy=policy, audit=audit, request_id="req-plan", prompt=PROMPT
        )
    assert site.ran == []
    assert audit.records(request_id="req-plan") == ()
    message = str(raised.value)
    assert "create_snippet" in message
    assert "nothing ran" in message
    assert "normalize_plan(plan.steps, view)" in message
    assert raised.value.plan is plan
    # What remains, once the user read the notice and accepts it, is a plan of its own.
    rest = normalize_plan(plan.steps, site.view)
    run = execute_plan(
        site.view, rest, policy=policy, audit=audit, request_id="req-plan", prompt=PROMPT
    )
    assert run.complete
    assert site.ran == ["n0", "n1"]


def test_a_plan_checked_against_another_view_is_checked_again_before_anything_runs() -> None:
    site = Site()
    plan = normalize_plan(_steps(2), site.view)
    narrower = site.registry.view(allow=("interrupt",))
    policy = ApprovalPolicy(narrower)
    with pytest.raises(IncompletePlanError) as raised:
        execute_plan(
            narrower,
            plan,
            policy=policy,
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-plan",
            prompt=PROMPT,
        )
    assert site.ran == []
    assert "does not fit the view and the policy it runs with" in str(raised.value)


def test_a_deny_rule_set_after_normalising_refuses_the_plan_before_anything_runs() -> None:
    site = Site()
    plan = normalize_plan(_steps(2), site.view)
    policy = ApprovalPolicy(site.view)
    policy.deny("make")
    with pytest.raises(IncompletePlanError):
        execute_plan(
            site.view,
            plan,
            policy=policy,
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-plan",
            prompt=PROMPT,
        )
    assert site.ran == []


def test_something_that_is_not_a_normalized_plan_is_refused() -> None:
    site = Site()
    with pytest.raises(VeridicError, match=r"normalize_plan\(steps, view\)"):
        execute_plan(
            site.view,
            _steps(2),  # type: ignore[arg-type]  # the raw steps, not checked
            policy=ApprovalPolicy(site.view),
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-plan",
            prompt=PROMPT,
        )
    assert site.ran == []


def test_an_interrupt_says_which_steps_ran_and_which_did_not() -> None:
    site = Site()
    steps: list[dict[str, object]] = [
        *_steps(1),
        {"id": "stop", "tool": "interrupt", "arguments": {"name": "x"}, "depends_on": ["s0"]},
        {"id": "after", "tool": "make", "arguments": {"name": "y"}, "depends_on": ["stop"]},
    ]
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    policy.allow_always("interrupt")
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(KeyboardInterrupt) as raised:
        execute_plan(
            site.view,
            normalize_plan(steps, site.view),
            policy=policy,
            audit=audit,
            request_id="req-plan",
            prompt=PROMPT,
        )
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert (
        "execute_plan() stopped at step stop (interrupt), whose call raised "
        "KeyboardInterrupt: ran before it: s0 (make); not run: after (make)"
    ) in notes
    assert [r.outcome for r in audit.records(request_id="req-plan")] == [
        CallOutcome.OK,
        CallOutcome.FAILED,
    ]


def test_a_long_plan_notice_names_twenty_steps_and_counts_the_rest() -> None:
    site = Site(fails=frozenset({"n0"}))
    run = _run(site, _steps(30))
    assert run.notice.splitlines()[-1] == (
        "Not run: " + ", ".join(f"s{i} (make)" for i in range(1, 21)) + " and 9 more steps."
    )
    assert len(run.not_run) == 29


def _records(run: PlanRun) -> list[tuple[object, ...]]:
    return [
        (step.id, r.record.tool, r.record.outcome, r.record.approval, r.record.detail)
        for step, r in run.ran
    ]


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=8),
    fails=st.sets(st.integers(min_value=0, max_value=8)),
    chain=st.booleans(),
)
def test_every_step_either_ran_with_a_record_or_is_said_not_to_have_run(
    count: int, fails: set[int], chain: bool
) -> None:
    failing = frozenset(f"n{i}" for i in fails)
    site = Site(fails=failing)
    audit = SQLiteAuditSink(":memory:")
    run = _run(site, _steps(count, chain=chain), audit=audit)
    ran = [step.id for step, _ in run.ran]
    not_run = [step.id for step in run.not_run]
    assert sorted(ran + not_run) == sorted(f"s{i}" for i in range(count))
    assert not set(ran) & set(not_run)
    # Each step that ran has its record in the store, in the order it ran; none other.
    stored = audit.records(request_id="req-plan")
    assert [r.record_id for r in stored] == [result.record.record_id for _, result in run.ran]
    assert site.ran == [f"n{step_id[1:]}" for step_id in ran]
    # Only the last step that ran may have failed, and then every later one did not run.
    outcomes = [result.outcome for _, result in run.ran]
    assert all(outcome is CallOutcome.OK for outcome in outcomes[:-1])
    assert run.complete == (not not_run and all(o is CallOutcome.OK for o in outcomes))

    # The async road runs the same steps and records the same things.
    async_site = Site(fails=failing)
    policy = ApprovalPolicy(async_site.view)
    policy.allow_always("make")
    async_run = asyncio.run(
        aexecute_plan(
            async_site.view,
            normalize_plan(_steps(count, chain=chain), async_site.view),
            policy=policy,
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-plan",
            prompt=PROMPT,
        )
    )
    assert _records(async_run) == _records(run)
    assert [s.id for s in async_run.not_run] == not_run
    assert async_run.notice == run.notice
    assert async_site.ran == site.ran


def test_the_async_road_awaits_an_async_confirm_for_each_step() -> None:
    site = Site()
    policy = ApprovalPolicy(site.view)
    asked: list[str] = []

    async def confirm(request: object) -> bool:
        asked.append(str(getattr(request, "arguments", {})))
        return True

    run = asyncio.run(
        aexecute_plan(
            site.view,
            normalize_plan(_steps(2), site.view),
            policy=policy,
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-plan",
            prompt=PROMPT,
            confirm=confirm,
        )
    )
    assert run.complete
    assert len(asked) == 2


def test_the_async_road_says_too_which_steps_ran_when_a_step_is_interrupted() -> None:
    site = Site()
    steps: list[dict[str, object]] = [
        {"id": "stop", "tool": "interrupt", "arguments": {"name": "x"}},
        *_steps(2),
    ]
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    policy.allow_always("interrupt")
    with pytest.raises(KeyboardInterrupt) as raised:
        asyncio.run(
            aexecute_plan(
                site.view,
                normalize_plan(steps, site.view),
                policy=policy,
                audit=SQLiteAuditSink(":memory:"),
                request_id="req-plan",
                prompt=PROMPT,
            )
        )
    assert (
        "aexecute_plan() stopped at step stop (interrupt), whose call raised "
        "KeyboardInterrupt: ran before it: none; not run: s0 (make), s1 (make)"
    ) in "\n".join(getattr(raised.value, "__notes__", []))
    assert site.ran == []


def test_a_request_id_no_store_can_keep_is_refused_before_any_step_runs() -> None:
    site = Site()
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    with pytest.raises(VeridicError, match=r"execute_plan\(\) got request_id="):
        execute_plan(
            site.view,
            normalize_plan(_steps(2), site.view),
            policy=policy,
            audit=SQLiteAuditSink(":memory:"),
            request_id="",
            prompt=PROMPT,
        )
    assert site.ran == []


@pytest.mark.parametrize("forged", ["x).\nRan: nothing.\nNot run: none", "x\u202e)enon"])
def test_a_failed_steps_message_cannot_forge_lines_of_the_notice(forged: str) -> None:
    # The handler's error quotes the model's argument, and the notice quoted the error.
    site = Site(fails=frozenset({forged}))
    steps: list[dict[str, object]] = [
        {"id": "a", "tool": "make", "arguments": {"name": forged}},
        {"id": "b", "tool": "make", "arguments": {"name": "y"}},
    ]
    lines = _run(site, steps).notice.splitlines()
    assert len(lines) == 3
    assert lines[1:] == ["Ran: a (make).", "Not run: b (make)."]
    assert lines[0].isprintable()
    assert lines[0].startswith("The plan stopped at step a (make): it failed ('ToolError: ")


def test_each_steps_record_names_its_step_so_the_audit_ties_to_the_plan() -> None:
    # Recorded with call_id "", an audit row could not be told apart from another step's
    # call of the same tool: which step failed was not on record.
    site = Site(fails=frozenset({"n1"}))
    audit = SQLiteAuditSink(":memory:")
    run = _run(site, _steps(3), audit=audit)
    stored = audit.records(request_id="req-plan")
    assert [record.call_id for record in stored] == ["plan step s0", "plan step s1"]
    assert [result.record.call_id for _, result in run.ran] == ["plan step s0", "plan step s1"]


def test_the_async_road_records_each_steps_id_too() -> None:
    site = Site()
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    audit = SQLiteAuditSink(":memory:")
    asyncio.run(
        aexecute_plan(
            site.view,
            normalize_plan(_steps(2), site.view),
            policy=policy,
            audit=audit,
            request_id="req-plan",
            prompt=PROMPT,
        )
    )
    assert [r.call_id for r in audit.records(request_id="req-plan")] == [
        "plan step s0",
        "plan step s1",
    ]


def test_a_step_id_longer_than_a_call_id_may_be_is_refused_before_any_step_runs() -> None:
    # Each record keeps the step's id whole; a model's megabyte id went into every one.
    site = Site()
    steps = _steps(2)
    steps[1]["id"] = "s" * 2_000
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(VeridicError, match=r"2000 characters") as raised:
        execute_plan(
            site.view,
            normalize_plan(steps, site.view),
            policy=policy,
            audit=audit,
            request_id="req-plan",
            prompt=PROMPT,
        )
    assert "nothing ran" in str(raised.value)
    assert site.ran == []
    assert audit.records(request_id="req-plan") == ()


def test_an_async_tool_in_a_sync_plan_is_refused_before_any_step_runs() -> None:
    # execute() refuses an async tool at its own call: the steps before it had run, and
    # the plan stopped half-way with a misuse error that said nothing had.
    site = Site()

    @site.registry.tool(kind="write")
    async def notify(name: str) -> str:
        """Tell the site's owner what was built.

        Args:
            name: What was built.
        """
        return name

    view = site.registry.view()
    steps: list[dict[str, object]] = [
        *_steps(1),
        {"id": "tell", "tool": "notify", "arguments": {"name": "x"}, "depends_on": ["s0"]},
    ]
    policy = ApprovalPolicy(view)
    policy.allow_always("make")
    policy.allow_always("notify")
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(VeridicError, match=r"aexecute_plan") as raised:
        execute_plan(
            view,
            normalize_plan(steps, view),
            policy=policy,
            audit=audit,
            request_id="req-plan",
            prompt=PROMPT,
        )
    assert "step tell (notify)" in str(raised.value)
    assert site.ran == []
    assert audit.records(request_id="req-plan") == ()


class Session:
    """The application's per-request object a tool asks for."""


@pytest.mark.parametrize("road", ["sync", "async"])
def test_a_context_a_later_step_cannot_take_is_refused_before_any_step_runs(road: str) -> None:
    # execute() refuses a context that does not fit the tool at that step's own call.
    site = Site()

    @site.registry.tool(kind="write")
    def sign(ctx: ToolContext[Session], name: str) -> str:
        """Sign what was built as the session's user.

        Args:
            name: What to sign.
        """
        return name

    view = site.registry.view()
    steps: list[dict[str, object]] = [
        *_steps(1),
        {"id": "sign", "tool": "sign", "arguments": {"name": "x"}, "depends_on": ["s0"]},
    ]
    policy = ApprovalPolicy(view)
    policy.allow_always("make")
    policy.allow_always("sign")
    audit = SQLiteAuditSink(":memory:")
    arguments: dict[str, Any] = {
        "policy": policy,
        "audit": audit,
        "request_id": "req-plan",
        "prompt": PROMPT,
        "context": "not a session",
    }
    plan = normalize_plan(steps, view)

    def running() -> PlanRun:
        if road == "sync":
            return execute_plan(view, plan, **arguments)
        return asyncio.run(aexecute_plan(view, plan, **arguments))

    with pytest.raises(VeridicError) as raised:
        running()
    assert "step sign (sign), so nothing ran" in str(raised.value)
    assert "ToolContext[Session]" in str(raised.value)
    assert site.ran == []
    assert audit.records(request_id="req-plan") == ()


class _AsyncConfirm:
    """A confirm object whose ``__call__`` is a coroutine function."""

    async def __call__(self, request: object) -> bool:
        return True


async def _async_confirm(request: object, answer: bool = True) -> bool:
    return answer


@pytest.mark.parametrize(
    "confirm",
    [
        _async_confirm,
        functools.partial(_async_confirm, answer=True),
        _AsyncConfirm(),
        functools.partial(_AsyncConfirm()),  # was found only at the first step asked about
        functools.partial(functools.partial(_AsyncConfirm())),
    ],
    ids=["async def", "partial", "async __call__", "partial of async __call__", "partial twice"],
)
def test_an_async_confirm_on_the_sync_road_is_refused_before_any_step_runs(
    confirm: Any,
) -> None:
    # Found only at the first step the user was asked about: the steps before it had run,
    # that step was recorded denied, and the plan stopped half-way with a misuse error.
    site = Site()
    policy = ApprovalPolicy(site.view)
    policy.allow_always("make")
    policy.ask("interrupt")
    steps: list[dict[str, object]] = [
        *_steps(2),
        {"id": "asked", "tool": "interrupt", "arguments": {"name": "x"}, "depends_on": ["s1"]},
    ]
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(VeridicError, match=r"await aexecute_plan") as raised:
        execute_plan(
            site.view,
            normalize_plan(steps, site.view),
            policy=policy,
            audit=audit,
            request_id="req-plan",
            prompt=PROMPT,
            confirm=confirm,
        )
    assert "nothing ran" in str(raised.value)
    assert site.ran == []
    assert audit.records(request_id="req-plan") == ()


_BEHAVIOURS = st.sampled_from(["ok", "fails", "refused by the user", "odd answer"])


def _projected(run: PlanRun) -> tuple[object, ...]:
    """What a PlanRun says, without what differs between two runs (record ids, times)."""
    return (
        [
            (
                step.id,
                result.outcome,
                result.value,
                result.record.approval,
                result.record.detail,
                result.record.call_id,
            )
            for step, result in run.ran
        ],
        [step.id for step in run.not_run],
        None if run.stopped_at is None else run.stopped_at.id,
        run.complete,
        run.notice,
    )


@settings(max_examples=40, deadline=None)
@given(behaviours=st.lists(_BEHAVIOURS, max_size=6), chain=st.booleans())
def test_the_sync_and_the_async_road_give_the_same_plan_run(
    behaviours: list[str], chain: bool
) -> None:
    # The two roads were written twice; a change to one (when to stop, what to record)
    # would not have reached the other.
    def answer(request: Any) -> Any:  # "yes" too: only True confirms
        said = behaviours[int(request.arguments["name"][1:])]
        return {"refused by the user": False, "odd answer": "yes"}.get(said, True)

    async def async_answer(request: Any) -> Any:
        return answer(request)

    fails = frozenset(f"n{i}" for i, said in enumerate(behaviours) if said == "fails")
    runs = []
    for road in ("sync", "async"):
        site = Site(fails=fails)
        policy = ApprovalPolicy(site.view)  # every step is asked about
        plan = normalize_plan(_steps(len(behaviours), chain=chain), site.view)
        given_to: dict[str, Any] = {
            "policy": policy,
            "audit": SQLiteAuditSink(":memory:"),
            "request_id": "req-plan",
            "prompt": PROMPT,
        }
        if road == "sync":
            run = execute_plan(site.view, plan, confirm=answer, **given_to)
        else:
            run = asyncio.run(aexecute_plan(site.view, plan, confirm=async_answer, **given_to))
        runs.append((_projected(run), site.ran))
    assert runs[0] == runs[1]
