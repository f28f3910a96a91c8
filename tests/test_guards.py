"""Guards in store code: only a high-risk, user-confirmed direct dispatch may do harm."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    ApprovalMode,
    GuardDeniedError,
    InstructionField,
    Risk,
    VeridicError,
    guard_instruction_write,
    guard_irreversible,
)
from veridic.guards import current_dispatch, dispatching


class StoredPrompt(BaseModel):
    name: str
    content: InstructionField


class Fixture(BaseModel):
    name: str
    payload: str


CONFIRMED_HIGH = (Risk.HIGH, ApprovalMode.USER_CONFIRMED)


def test_guards_do_nothing_outside_any_dispatch() -> None:
    guard_irreversible("hard delete golden fixture")
    guard_instruction_write(StoredPrompt)
    assert current_dispatch() is None


@given(risk=st.sampled_from(list(Risk)), approval=st.sampled_from(list(ApprovalMode)))
def test_a_guard_allows_exactly_a_high_risk_user_confirmed_dispatch(
    risk: Risk, approval: ApprovalMode
) -> None:
    allowed = risk is Risk.HIGH and approval is ApprovalMode.USER_CONFIRMED

    def irreversible() -> None:
        guard_irreversible("hard delete golden fixture")

    def instruction_write() -> None:
        guard_instruction_write(StoredPrompt)

    for guard in (irreversible, instruction_write):
        with dispatching("tool", risk, approval) as scope:
            if allowed:
                guard()
            else:
                with pytest.raises(GuardDeniedError):
                    guard()
        assert [event.allowed for event in scope.events] == [allowed]


def test_refused_irreversible_operation_says_what_where_and_what_to_do() -> None:
    with (
        dispatching("purge", Risk.MID, ApprovalMode.ALWAYS_RULE),
        pytest.raises(GuardDeniedError) as caught,
    ):
        guard_irreversible("hard delete golden fixture")
    message = str(caught.value)
    assert "irreversible operation 'hard delete golden fixture'" in message
    assert "(at tests/test_guards.py:" in message
    assert "dispatched directly is 'purge', risk mid, approval always_rule" in message
    assert "declare 'purge' high risk" in message


def test_refused_instruction_write_names_the_fields() -> None:
    with (
        dispatching("revert_prompt", Risk.MID, ApprovalMode.ALWAYS_RULE) as scope,
        pytest.raises(GuardDeniedError, match=r"write of instruction fields StoredPrompt\.content"),
    ):
        guard_instruction_write(StoredPrompt.model_validate({"name": "t", "content": "Classify."}))
    (event,) = scope.events
    assert event.operations == ("instruction_write:StoredPrompt.content",)
    assert event.kind == "instruction_write"
    assert event.direct.tool == "revert_prompt"


def test_guard_denied_error_is_a_veridic_permission_error() -> None:
    assert issubclass(GuardDeniedError, VeridicError)
    assert issubclass(GuardDeniedError, PermissionError)


def test_a_model_without_instruction_fields_needs_no_guard() -> None:
    with dispatching("save_fixture", Risk.MID, ApprovalMode.ALWAYS_RULE) as scope:
        guard_instruction_write(Fixture)
    assert scope.events == ()


def test_field_names_may_be_given_instead_of_a_model() -> None:
    with dispatching("edit", *CONFIRMED_HIGH) as scope:
        guard_instruction_write(["Feature.system_prompt", "StoredPrompt.content"])
        guard_instruction_write("StoredPrompt.content")
    assert [event.operations for event in scope.events] == [
        ("instruction_write:Feature.system_prompt", "instruction_write:StoredPrompt.content"),
        ("instruction_write:StoredPrompt.content",),
    ]


@pytest.mark.parametrize("target", ["", [], ["  "]])
def test_instruction_guard_without_a_field_is_a_mistake(target: str | list[str]) -> None:
    with pytest.raises(
        VeridicError, match=r"needs a pydantic model or field names.*pass the model"
    ):
        guard_instruction_write(target)


def test_irreversible_guard_without_an_operation_name_is_a_mistake() -> None:
    with pytest.raises(
        VeridicError, match=r"needs the operation's name.*name what cannot be undone"
    ):
        guard_irreversible(" ")


def test_delegating_into_a_confirmed_high_dispatch_does_not_launder_a_mid_call() -> None:
    with (
        dispatching("revert_prompt", Risk.MID, ApprovalMode.ALWAYS_RULE) as outer,
        dispatching("edit_prompt", *CONFIRMED_HIGH) as inner,
    ):
        assert current_dispatch() == outer.call
        with pytest.raises(GuardDeniedError, match="delegated through 'edit_prompt'"):
            guard_instruction_write(StoredPrompt)
        assert inner.direct == outer.call
    assert [e.allowed for e in outer.events] == [False]
    assert outer.events == inner.events


def test_a_nested_scope_cannot_name_itself_the_direct_call() -> None:
    """A mid handler that enters a confirmed-high scope of its own and makes it the direct
    call would be judged as the confirmed call: the scope's calls are read-only."""
    with (
        dispatching("revert_prompt", Risk.MID, ApprovalMode.ALWAYS_RULE) as outer,
        dispatching("edit_prompt", *CONFIRMED_HIGH) as inner,
    ):
        with pytest.raises(AttributeError):
            inner.direct = inner.call  # type: ignore[misc]  # the attempt the test refuses
        with pytest.raises(AttributeError):
            outer.call = inner.call  # type: ignore[misc]  # the same, through the outer scope
        with pytest.raises(GuardDeniedError, match="delegated through 'edit_prompt'"):
            guard_instruction_write(StoredPrompt)


def test_a_confirmed_high_dispatch_may_delegate_to_helpers() -> None:
    def helper() -> None:
        guard_irreversible("hard delete golden fixture")

    with dispatching("delete_golden", *CONFIRMED_HIGH) as scope:
        helper()
    assert scope.blocked == ()
    assert scope.events[0].operations == ("irreversible:hard delete golden fixture",)


def test_dispatch_with_a_risk_that_is_not_a_risk_is_refused() -> None:
    with (
        pytest.raises(VeridicError, match="pass the tool's declared Risk"),
        dispatching("tool", "high", ApprovalMode.USER_CONFIRMED),  # type: ignore[arg-type]  # under test
    ):
        pass


def test_each_asyncio_task_is_judged_by_its_own_dispatch() -> None:
    async def call(tool: str, risk: Risk, approval: ApprovalMode) -> bool:
        with dispatching(tool, risk, approval):
            await asyncio.sleep(0)
            try:
                guard_irreversible("hard delete")
            except GuardDeniedError:
                return False
            await asyncio.sleep(0)
            dispatch = current_dispatch()
            return dispatch is not None and dispatch.tool == tool

    async def main() -> list[bool]:
        calls = [
            call(f"t{n}", *(CONFIRMED_HIGH if n % 2 else (Risk.MID, ApprovalMode.ALWAYS_RULE)))
            for n in range(40)
        ]
        return await asyncio.gather(*calls)

    assert asyncio.run(main()) == [n % 2 == 1 for n in range(40)]


def test_asyncio_to_thread_carries_the_dispatch_into_the_worker_thread() -> None:
    async def main() -> None:
        with (
            dispatching("purge", Risk.MID, ApprovalMode.ALWAYS_RULE),
            pytest.raises(GuardDeniedError),
        ):
            await asyncio.to_thread(guard_irreversible, "hard delete")

    asyncio.run(main())


def test_a_dispatch_in_one_thread_does_not_leak_into_another() -> None:
    entered, checked = threading.Event(), threading.Event()
    seen: list[object] = []

    def dispatcher() -> None:
        with dispatching("purge", Risk.MID, ApprovalMode.ALWAYS_RULE):
            entered.set()
            checked.wait(5)

    worker = threading.Thread(target=dispatcher)
    worker.start()
    entered.wait(5)
    seen.append(current_dispatch())
    guard_irreversible("admin script hard delete")  # this thread is outside any dispatch
    checked.set()
    worker.join()
    assert seen == [None]
