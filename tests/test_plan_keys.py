"""A plan step with a key veridic does not know is refused, never read as absent.

``{"id": "s2", "tool": "x", "dependsOn": ["s1"]}`` read with the unknown key
ignored is a step with no dependencies: it would run before the step it
needs. Nothing the model writes is ignored silently (invariant I10).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import PlanError, PlanStep, Registry, normalize_plan

KNOWN = ("id", "tool", "arguments", "depends_on")


def _registry() -> Registry:
    registry = Registry("webhooks")

    @registry.tool(kind="write")
    def create_webhook(name: str) -> str:
        """Create a webhook that receives a form's submissions.

        Args:
            name: The webhook's name.
        """
        return "hook-1"

    @registry.tool(kind="query")
    def test_dispatch(webhook: str) -> str:
        """Send a test delivery and report the REST route's answer.

        Args:
            webhook: The webhook id.
        """
        return "201"

    return registry


VIEW = _registry().view()
FIRST = {"id": "s1", "tool": "create_webhook", "arguments": {"name": "cf7"}}


@pytest.mark.parametrize(
    ("key", "nearest"),
    [
        ("dependsOn", "depends_on"),
        ("depends_on ", "depends_on"),
        ("Depends-On", "depends_on"),
        ("needs", "depends_on"),
        ("requires", "depends_on"),
        ("args", "arguments"),
        ("tools", "tool"),
        ("ID", "id"),
        ("why", None),
    ],
)
def test_a_step_with_an_unknown_key_is_refused_naming_step_key_nearest_and_allowed(
    key: str, nearest: str | None
) -> None:
    plan = [
        FIRST,
        {"id": "s2", "tool": "test_dispatch", "arguments": {"webhook": "h"}, key: ["s1"]},
    ]
    with pytest.raises(PlanError) as caught:
        normalize_plan(plan, VIEW)
    message = str(caught.value)
    assert message.startswith(f"plan step #1 ('s2') has a key veridic does not know: {key!r}")
    if nearest is None:
        assert "did you mean" not in message
    else:
        assert f"{key!r} (did you mean {nearest!r}?)" in message
    assert "would run it with no dependencies" in message
    assert "a step's keys are id, tool, arguments, depends_on; rename or remove the others" in (
        message
    )


def test_every_unknown_key_of_a_step_is_named_at_once() -> None:
    step: dict[object, object] = {"id": "s1", "tool": "test_dispatch", "needs": [], 7: 1}
    step["why"] = "x"
    with pytest.raises(PlanError, match=r"has keys veridic does not know: 'needs' .*; 7; 'why'"):
        normalize_plan([step], VIEW)  # type: ignore[list-item]  # a non-string key, under test


def test_an_unknown_key_is_refused_even_when_the_id_is_missing() -> None:
    with pytest.raises(PlanError, match=r"^plan step #0 has a key .*'Id' \(did you mean 'id'\?\)"):
        normalize_plan([{"Id": "s1", "tool": "test_dispatch"}], VIEW)


def test_a_very_long_unknown_key_is_clipped_in_the_message() -> None:
    key = "x" * 100_000
    with pytest.raises(PlanError) as caught:
        normalize_plan([{"id": "s1", "tool": "test_dispatch", key: 1}], VIEW)
    assert "(100000 chars)" in str(caught.value)
    assert len(str(caught.value)) < 1_000


def test_the_known_keys_and_plan_step_objects_still_read_as_before() -> None:
    plan = normalize_plan(
        [
            FIRST,
            PlanStep("s2", "test_dispatch", {"webhook": "h"}, ("s1",)),
            {
                "id": "s3",
                "tool": "test_dispatch",
                "arguments": '{"webhook": "h"}',
                "depends_on": None,
            },
        ],
        VIEW,
    )
    assert [s.depends_on for s in plan.steps] == [(), ("s1",), ()]
    assert not plan.dropped


_EXTRA_KEYS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["dependsOn", "depends_on ", " id", "Tool", "needs", "arguments\u200b"]),
    st.integers(),
    st.none(),
    st.booleans(),
    st.tuples(st.text(max_size=3)),
).filter(lambda key: key not in KNOWN)


@given(
    extra=_EXTRA_KEYS,
    value=st.one_of(st.none(), st.text(max_size=5), st.lists(st.text(max_size=3), max_size=2)),
    with_arguments=st.booleans(),
    with_needs=st.booleans(),
)
def test_every_step_with_a_key_outside_the_known_set_is_refused(
    extra: object, value: object, with_arguments: bool, with_needs: bool
) -> None:
    step: dict[object, object] = {"id": "s2", "tool": "test_dispatch"}
    if with_arguments:
        step["arguments"] = {"webhook": "h"}
    if with_needs:
        step["depends_on"] = ["s1"]
    step[extra] = value
    with pytest.raises(PlanError, match="veridic does not know"):
        normalize_plan([FIRST, step], VIEW)  # type: ignore[list-item]  # keys under test


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("caf\u00e9", "cafe\u0301"),  # one precomposed, one with a combining accent
        ("S1", "s1"),
        ("s1", "s1 "),
        ("\uff53\uff11", "s1"),  # fullwidth
    ],
)
def test_step_ids_that_only_look_the_same_are_refused_escaped(first: str, second: str) -> None:
    """A reader of the notice could not tell which step was dropped and which one runs."""
    view = _registry().view()
    steps = [
        {"id": first, "tool": "create_webhook", "arguments": {"name": "a"}},
        {"id": second, "tool": "test_dispatch", "arguments": {"webhook": "b"}},
    ]
    with pytest.raises(PlanError, match="differ only in case, spacing or Unicode form") as caught:
        normalize_plan(steps, view)
    assert ascii(second) in str(caught.value)


class _Claiming(str):
    """An id, a tool name or a key that says it equals every string, and hashes as one."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash(_Claiming.hashed_as)

    def __str__(self) -> str:
        return _Claiming.hashed_as

    hashed_as = "s1"


def test_an_id_that_says_it_equals_another_is_read_as_its_characters() -> None:
    # "s9" said it was "s1": the dependency on a step no plan has resolved to s1, and s2
    # ran after a step it never named.
    steps = [
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "a"}},
        {
            "id": "s2",
            "tool": "create_webhook",
            "arguments": {"name": "b"},
            "depends_on": [_Claiming("s9")],
        },
    ]
    with pytest.raises(PlanError, match="depends on 's9', which no step"):
        normalize_plan(steps, _registry().view())


def test_the_ids_and_the_tool_a_plan_holds_are_plain_strings() -> None:
    steps = [
        {"id": _Claiming("s1"), "tool": _Claiming("create_webhook"), "arguments": {"name": "a"}},
        {
            "id": "s2",
            "tool": "create_webhook",
            "arguments": {"name": "b"},
            "depends_on": [_Claiming("s1")],
        },
    ]
    plan = normalize_plan(steps, _registry().view())
    held = [plan.steps[0].id, plan.steps[0].tool, *plan.steps[1].depends_on]
    assert [(type(text), text) for text in held] == [
        (str, "s1"),
        (str, "create_webhook"),
        (str, "s1"),
    ]


def test_a_key_that_says_it_is_a_known_key_is_refused_by_its_characters() -> None:
    # "dependsOn" said it was "depends_on": the step passed the check of its keys, was
    # read with no dependencies, and ran before the step it needs.
    steps = [
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "a"}},
        {
            "id": "s2",
            "tool": "create_webhook",
            "arguments": {"name": "b"},
            _Claiming("dependsOn"): ["s1"],
        },
    ]
    with pytest.raises(PlanError, match="'dependsOn'"):
        normalize_plan(steps, _registry().view())
