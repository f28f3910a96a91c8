"""Plan normalisation, attacked through the public API (a second review).

Each test is a leak the review found: a checked plan that changes after the
check, a step's arguments whose audit digest is not theirs, a deeply nested
argument that escapes as a bare ``RecursionError``, a malformed plan whose
error quotes megabytes of model-written ids, and a plan the model makes long
whose dependents cost far more than the plan's size.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_plan import VIEW, step

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    Composer,
    PlanError,
    PlanStep,
    Registry,
    SQLiteAuditSink,
    execute,
    instruction,
    normalize_plan,
)
from veridic.run.records import arguments_sha256

# --- the checked plan is the plan that runs ----------------------------------------------


def test_a_normalized_plan_does_not_change_when_the_proposed_steps_do() -> None:
    """The plan kept the caller's nested dicts and lists: changing them after the check
    changed the arguments that ran (here to ones the tool's contract refuses)."""
    fields = {"email": "email"}
    proposed = [step("a", "set_mapping", webhook="h", fields=fields)]
    objects = [PlanStep("b", "set_mapping", {"webhook": "h", "fields": fields})]

    plan = normalize_plan(proposed, VIEW)
    from_objects = normalize_plan(objects, VIEW)
    fields["email"] = {"not": "a string"}  # type: ignore[assignment]  # the change under test
    fields["extra"] = "x"

    assert plan.complete
    assert from_objects.complete
    assert plan.steps[0].arguments == {"webhook": "h", "fields": {"email": "email"}}
    assert from_objects.steps[0].arguments == {"webhook": "h", "fields": {"email": "email"}}


def _payload_view() -> Registry:
    registry = Registry("payloads")

    @registry.tool(kind="write")
    def store(payload: dict[str, object]) -> str:
        """Store a JSON document as it is.

        Args:
            payload: The document.
        """
        return "stored"

    return registry


PAYLOAD_VIEW = _payload_view().view()
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


def _containers(value: object) -> list[object]:
    """Every dict and list in ``value``, ``value`` included."""
    if isinstance(value, dict):
        return [value, *(c for item in value.values() for c in _containers(item))]
    if isinstance(value, list):
        return [value, *(c for item in value for c in _containers(item))]
    return []


@given(payload=st.dictionaries(st.text(max_size=3), _JSON, max_size=3))
def test_a_kept_steps_arguments_equal_the_proposed_ones_share_nothing_and_hash_alike(
    payload: dict[str, object],
) -> None:
    arguments: dict[str, object] = {"payload": payload}

    kept = normalize_plan(
        [{"id": "a", "tool": "store", "arguments": arguments}], PAYLOAD_VIEW
    ).steps

    assert kept[0].arguments == arguments
    theirs = {id(c) for c in _containers(arguments)}
    assert not theirs & {id(c) for c in _containers(dict(kept[0].arguments))}
    assert arguments_sha256(kept[0].arguments) == arguments_sha256(arguments)


def test_a_plan_step_run_through_execute_is_recorded_with_its_arguments_digest() -> None:
    """A kept step's arguments are read-only (a mappingproxy), and the audit digest of
    such arguments was the SHA-256 of their Python repr: not canonical JSON, so it
    depended on key order and matched no digest of the arguments the plan held."""
    plan = normalize_plan(
        [{"id": "a", "tool": "assign_credential", "arguments": '{"webhook":"h","credential":"c"}'}],
        VIEW,
    )
    kept = plan.steps[0]
    prompt = Composer().system(instruction("You build forms."), VIEW.capability_section()).build()

    result = execute(
        VIEW,
        kept.tool,
        kept.arguments,
        policy=ApprovalPolicy(VIEW),
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-plan",
        prompt=prompt,
        confirm=lambda request: True,
    )

    assert result.record.outcome is CallOutcome.OK
    assert result.record.arguments_sha256 == arguments_sha256({"credential": "c", "webhook": "h"})


# --- deeply nested arguments ---------------------------------------------------------------

_DEEP = '{"webhook": "h", "fields": ' + "[" * 100_000 + "]" * 100_000 + "}"


def test_arguments_nested_too_deep_to_read_are_a_plan_error() -> None:
    """JSON text nested 100,000 deep raised a bare RecursionError out of normalize_plan."""
    with pytest.raises(PlanError, match=r"plan step #0 \('a'\) has arguments that are not JSON"):
        normalize_plan([{"id": "a", "tool": "set_mapping", "arguments": _DEEP}], VIEW)


def test_a_call_with_arguments_nested_too_deep_to_read_is_refused_and_recorded() -> None:
    """The executor raised the same bare RecursionError: the call left no record."""
    audit = SQLiteAuditSink(":memory:")
    prompt = Composer().system(instruction("You build forms."), VIEW.capability_section()).build()

    result = execute(
        VIEW,
        "set_mapping",
        _DEEP,
        policy=ApprovalPolicy(VIEW),
        audit=audit,
        request_id="req-deep",
        prompt=prompt,
    )

    assert result.record.outcome is CallOutcome.REFUSED
    assert "nested" in str(result.error)


def test_python_arguments_nested_too_deep_to_copy_are_a_plan_error() -> None:
    nested: dict[str, object] = {}
    inner = nested
    for _ in range(100_000):
        inner["k"] = inner = {}
    with pytest.raises(PlanError, match=r"plan step #0 \('a'\) has arguments nested deeper"):
        normalize_plan([step("a", "set_mapping", webhook="h", fields=nested)], VIEW)


# --- errors a person can read --------------------------------------------------------------


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [step("a" * 100_000, "create_webhook", name="x")] * 2,
            id="a duplicated id of 100,000 characters",
        ),
        pytest.param(
            [step("a", "create_webhook", tuple(f"ghost_{i}" for i in range(50_000)), name="x")],
            id="50,000 dependencies on no step",
        ),
        pytest.param(
            [step(f"s{i}", "test_dispatch", (f"s{(i + 1) % 20_000}",)) for i in range(20_000)],
            id="a cycle of 20,000 steps",
        ),
        pytest.param(
            [{"id": "b" * 100_000, "tool": "test_dispatch", "depends_on": "s1"}],
            id="a long id in a step's error",
        ),
    ],
)
def test_a_malformed_plan_the_model_made_long_gets_an_error_a_person_can_read(
    steps: list[Any],
) -> None:
    """Each of these PlanErrors quoted every id whole: 100 KB to 1.2 MB of message."""
    with pytest.raises(PlanError) as caught:
        normalize_plan(steps, VIEW)
    assert len(str(caught.value)) < 2_000, len(str(caught.value))


def test_a_long_cycle_is_quoted_by_its_ends_and_its_length() -> None:
    ring = [step(f"s{i}", "test_dispatch", (f"s{(i + 1) % 100}",)) for i in range(100)]
    with pytest.raises(PlanError) as caught:
        normalize_plan(ring, VIEW)
    message = str(caught.value)
    assert "form a cycle of 100 steps: 's0' -> 's1' -> " in message
    assert " -> 's99' -> 's0';" in message


# --- a plan the model makes long -----------------------------------------------------------


def _peak_mib(steps: list[dict[str, object]]) -> float:
    tracemalloc.start()
    try:
        normalize_plan(steps, VIEW)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_many_steps_after_one_chain_of_dropped_steps_cost_memory_in_proportion() -> None:
    """2,000 chained steps naming a tool that cannot run, then 2,000 steps each needing the
    last of them: every invalidated step's ``because`` is the same 2,000 ids, and the
    normaliser built 2,000 copies of them (4 million entries), one bit at a time."""
    chain = [
        step(f"s{i}", "create_snippet", (f"s{i - 1}",) if i else (), code="x") for i in range(2_000)
    ]
    after = [step(f"k{i}", "test_dispatch", ("s1999",), webhook="h") for i in range(2_000)]

    peak = _peak_mib(chain + after)

    assert peak < 16, f"{peak:.1f} MiB"


def test_a_plan_longer_than_a_person_can_review_is_refused() -> None:
    """Its invalidated steps alone can take quadratic memory: a chain of dropped steps
    with one kept step after each has ``because`` lists of n²/2 ids in all."""
    chain = [
        step(f"s{i}", "test_dispatch", (f"s{i - 1}",) if i else (), webhook="h")
        for i in range(5_001)
    ]
    with pytest.raises(
        PlanError, match=r"a plan of 5001 steps is more than veridic normalises \(at most 5000\)"
    ):
        normalize_plan(chain, VIEW)
    with pytest.raises(PlanError, match=r"a plan of more than 5000 steps is more than"):
        normalize_plan(iter(chain), VIEW)
    assert normalize_plan(chain[:5_000], VIEW).complete
