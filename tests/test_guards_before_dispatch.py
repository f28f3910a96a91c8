"""What a call runs before its dispatch (validating its arguments) and what a handler runs
by hand (``view.tool(x).invoke(...)``): no effect of either escapes the guards.

Validating a call's arguments runs the application's code (a ``model_validator``, a
``field_validator`` of an argument model) before the call is approved, outside any
dispatch, where the guards did nothing: an irreversible delete in a validator ran for a
call the policy denied, and for a plan step that was only normalized.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import pytest
from pydantic import BaseModel, computed_field, field_validator, model_validator

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    Composer,
    GuardDeniedError,
    Registry,
    SQLiteAuditSink,
    ToolView,
    aexecute,
    execute,
    guard_instruction_write,
    guard_irreversible,
    instruction,
    normalize_plan,
)
from veridic.run.effects import run_observed
from veridic.tools.guards import current_dispatch

PROMPT = Composer().system(instruction("You tidy reports.")).build()

Road = Literal["execute", "aexecute"]
ROADS: tuple[Road, ...] = ("execute", "aexecute")


@dataclass
class Store:
    """What the application's code did, and whether it ran inside a dispatch."""

    deleted: list[tuple[str, bool]] = field(default_factory=list)

    def hard_delete(self, name: str) -> None:
        guard_irreversible("hard delete report")
        self.deleted.append((name, current_dispatch() is not None))


STORE = Store()


class Purging(BaseModel):
    """An argument model whose validator deletes: it runs before the call is approved."""

    name: str

    @model_validator(mode="after")
    def _purge(self) -> Purging:
        STORE.hard_delete(self.name)
        return self


class Rewriting(BaseModel):
    """An argument model whose field validator writes a system prompt."""

    name: str

    @field_validator("name")
    @classmethod
    def _rewrite(cls, name: str) -> str:
        guard_instruction_write("SystemPrompt.text")
        STORE.deleted.append((name, current_dispatch() is not None))
        return name


def _view(argument: type[BaseModel]) -> ToolView:
    registry = Registry()

    @registry.tool(kind="write", risk="high", irreversible=True)
    def tidy(target: argument) -> str:  # type: ignore[valid-type]  # a model per test
        """Tidy a report.

        Args:
            target: The report.
        """
        return "tidied"

    return registry.view()


def _run(
    view: ToolView,
    road: Road,
    policy: ApprovalPolicy,
    *,
    confirm: bool,
    arguments: dict[str, object],
    audit: SQLiteAuditSink | None = None,
) -> CallResult:
    """One call of ``tidy`` through ``road``, ``confirm`` the user's answer if asked.

    ``aexecute``'s result is handed back through a list, not as the coroutine's own
    result: on Python 3.11 ``asyncio.run`` writes the ``repr`` of its main task (and so of
    the value it returned) while it restores the SIGINT handler, which would render the
    call's value again, outside the call.
    """
    options = {
        "policy": policy,
        "audit": SQLiteAuditSink(":memory:") if audit is None else audit,
        "request_id": "req-1",
        "prompt": PROMPT,
        "confirm": lambda request: confirm,
    }
    if road == "execute":
        return execute(view, "tidy", arguments, **options)  # type: ignore[arg-type]
    got: list[CallResult] = []

    async def call() -> None:
        got.append(await aexecute(view, "tidy", arguments, **options))  # type: ignore[arg-type]

    asyncio.run(call())
    return got[0]


@pytest.mark.parametrize("road", ROADS)
@pytest.mark.parametrize("argument", [Purging, Rewriting])
@pytest.mark.parametrize("rule", ["deny", "ask"])
def test_a_guarded_operation_in_an_argument_validator_is_refused_before_approval(
    road: Road, argument: type[BaseModel], rule: str
) -> None:
    """Denied by a rule, or put to the user: the validator ran before either, so its
    guarded operation was approved by nobody. It is refused, and the error, the
    application's to fix, is raised out of the call saying where the operation belongs."""
    STORE.deleted.clear()
    view = _view(argument)
    policy = ApprovalPolicy(view)
    getattr(policy, rule)("tidy")
    with pytest.raises(GuardDeniedError) as raised:
        _run(view, road, policy, confirm=True, arguments={"target": {"name": "q3"}})
    assert STORE.deleted == [], "a validator's effect ran before the call was approved"
    message = str(raised.value)
    assert "while the arguments of tool 'tidy' were validated" in message
    assert "move it into the handler" in message


@pytest.mark.parametrize("road", ROADS)
def test_a_call_refused_for_its_validators_guarded_operation_is_recorded_refused(
    road: Road,
) -> None:
    """The refusal is raised out of the call (the application's to fix), and the call is
    recorded all the same: refused, and it did not run. It escaped with no record, so the
    audit trail held nothing of a call the model made."""
    STORE.deleted.clear()
    view = _view(Purging)
    policy = ApprovalPolicy(view)
    policy.ask("tidy")
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(GuardDeniedError, match="were validated"):
        _run(view, road, policy, confirm=True, arguments={"target": {"name": "q3"}}, audit=audit)
    (record,) = audit.records()
    assert record.tool == "tidy"
    assert record.outcome is CallOutcome.REFUSED
    assert "validator" in record.detail
    assert "hard delete report" in record.detail
    assert STORE.deleted == []


def test_normalizing_a_plan_runs_no_guarded_operation_of_its_arguments() -> None:
    STORE.deleted.clear()
    view = _view(Purging)
    step = {"id": "a", "tool": "tidy", "arguments": {"target": {"name": "q3"}}}
    with pytest.raises(GuardDeniedError, match="were validated"):
        normalize_plan([step], view)
    assert STORE.deleted == []


def test_the_effects_harness_refuses_a_validators_guarded_operation_too() -> None:
    STORE.deleted.clear()
    view = _view(Purging)
    with pytest.raises(GuardDeniedError, match="were validated"):
        run_observed(view, "tidy", {"target": {"name": "q3"}})
    assert STORE.deleted == []


def test_a_validator_without_guarded_operations_runs_as_before() -> None:
    class Plain(BaseModel):
        name: str

        @field_validator("name")
        @classmethod
        def _strip(cls, name: str) -> str:
            return name.strip()

    view = _view(Plain)
    policy = ApprovalPolicy(view)
    policy.ask("tidy")
    result = _run(view, "execute", policy, confirm=True, arguments={"target": {"name": " q3 "}})
    assert result.outcome is CallOutcome.OK


def test_guards_outside_any_dispatch_and_any_validation_still_do_nothing() -> None:
    STORE.deleted.clear()
    STORE.hard_delete("by an admin script")
    assert STORE.deleted == [("by an admin script", False)]


# --- a handler that runs another tool by hand ------------------------------------------------


Returned = Literal["generator", "async generator", "model"]


class Summary(BaseModel):
    """A result whose computed field deletes when it is rendered."""

    name: str

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use
    @property
    def purged(self) -> int:
        STORE.hard_delete(self.name)
        return 1


def _delegating_view(returned: Returned, *, risk: Literal["mid", "high"]) -> ToolView:
    """``tidy`` (a write of ``risk``) returns what ``export`` (a query) gives, run by hand."""
    registry = Registry()
    views: list[ToolView] = []

    def generator() -> Iterator[int]:
        STORE.hard_delete("q3")
        yield 1

    async def async_generator() -> AsyncIterator[int]:
        STORE.hard_delete("q3")
        yield 1

    made: dict[Returned, Callable[[], object]] = {
        "generator": generator,
        "async generator": async_generator,
        "model": lambda: Summary(name="q3"),
    }

    @registry.tool(kind="query")
    def export(name: str) -> object:
        """Export a report.

        Args:
            name: The report.
        """
        return made[returned]()

    @registry.tool(kind="write", risk=risk, irreversible=risk == "high")
    def tidy(name: str) -> object:
        """Tidy a report.

        Args:
            name: The report.
        """
        return views[0].tool("export").invoke({"name": name})

    views.append(registry.view())
    return views[0]


@pytest.mark.parametrize("road", ROADS)
@pytest.mark.parametrize("returned", ["generator", "async generator", "model"])
def test_a_lazy_or_rendered_result_of_a_tool_invoked_by_hand_runs_under_the_guards(
    road: Road, returned: Returned
) -> None:
    """A mid write that returns what it ran by hand: a generator is refused and closed
    (nothing of it runs), a model's computed field is rendered inside the dispatch, where
    its guard refuses it as the mid call's."""
    STORE.deleted.clear()
    view = _delegating_view(returned, risk="mid")
    policy = ApprovalPolicy(view)
    policy.allow_always("tidy")
    result = _run(view, road, policy, confirm=False, arguments={"name": "q3"})
    assert STORE.deleted == []
    assert result.outcome is not CallOutcome.OK
    if returned == "model":
        assert isinstance(result.error, GuardDeniedError)
    else:
        assert f"returned an {returned}" in str(result.error) or (
            f"returned a {returned}" in str(result.error)
        )


@pytest.mark.parametrize("road", ROADS)
def test_a_computed_field_of_a_confirmed_calls_result_runs_once_inside_its_dispatch(
    road: Road,
) -> None:
    """Rendered for the model and the audit inside the call; reading what the call told
    the model afterwards runs nothing again."""
    STORE.deleted.clear()
    view = _delegating_view("model", risk="high")
    policy = ApprovalPolicy(view)
    result = _run(view, road, policy, confirm=True, arguments={"name": "q3"})
    assert result.outcome is CallOutcome.OK, result.error
    assert STORE.deleted == [("q3", True)]
    assert str(result.told) == '{"name": "q3", "purged": 1}'
    assert result.json_value == {"name": "q3", "purged": 1}
    assert STORE.deleted == [("q3", True)]
