"""Names a reader cannot tell apart are shown so they can: a plan's notice and a plan run's
notice escape every character of a model-written name outside ASCII."""

from __future__ import annotations

import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    Composer,
    PlanError,
    Registry,
    SQLiteAuditSink,
    ToolError,
    ToolView,
    instruction,
    normalize_plan,
)
from veridic.run.executor import execute_plan

CYRILLIC_ES = "\u0441"  # looks like a Latin "c"
CYRILLIC_DZE = "\u0455"  # looks like a Latin "s"


def _view() -> ToolView:
    registry = Registry("site")

    @registry.tool(kind="write")
    def create_webhook(name: str) -> str:
        """Create a webhook that receives form submissions.

        Args:
            name: The webhook's name.
        """
        if name == "fail":
            raise ToolError("the webhook could not be created")
        return "hook-1"

    return registry.view()


def test_a_look_alike_tool_name_is_escaped_in_the_notice() -> None:
    look_alike = f"{CYRILLIC_ES}reate_webhook"
    plan = normalize_plan([{"id": "a", "tool": look_alike, "arguments": {"name": "x"}}], _view())
    first = plan.notice.splitlines()[1]
    # Shown as is, it read like "did you mean create_webhook?" of the same name.
    assert first.startswith("- '\\u0441reate_webhook' (step a): no tool has this name here")
    assert look_alike not in plan.notice


def test_a_look_alike_step_id_is_escaped_in_the_notice() -> None:
    # Two ids a reader sees as one: the notice must say which of them was removed.
    steps = [
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "x"}},
        {"id": f"{CYRILLIC_DZE}1", "tool": "create_snippet", "arguments": {}},
        {
            "id": "s2",
            "tool": "create_webhook",
            "arguments": {"name": "y"},
            "depends_on": [f"{CYRILLIC_DZE}1"],
        },
    ]
    plan = normalize_plan(steps, _view())
    assert "(step '\\u04551')" in plan.notice
    assert "needs '\\u04551'" in plan.notice
    assert f"{CYRILLIC_DZE}1" not in plan.notice


def test_a_look_alike_step_id_is_escaped_in_a_plan_runs_notice() -> None:
    view = _view()
    policy = ApprovalPolicy(view)
    policy.allow_always("create_webhook")
    steps = [
        {"id": f"{CYRILLIC_DZE}1", "tool": "create_webhook", "arguments": {"name": "fail"}},
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "y"}},
    ]
    run = execute_plan(
        view,
        normalize_plan(steps, view),
        policy=policy,
        audit=SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=Composer().system(instruction("You build webhooks.")).build(),
    )
    assert run.notice.startswith("The plan stopped at step '\\u04551' (create_webhook)")


# --- a clipped name ends where an escape ends ------------------------------------------------

_ESCAPED = st.text(
    alphabet=st.sampled_from(["a", "Z", "_", "'", '"', "\\", "\n", "\x80", "é", CYRILLIC_ES, "😀"]),
    min_size=44,  # long enough to be clipped
    max_size=80,
)
_CLIPPED = re.compile(r"- (['\"])(.*?)…\1 \((\d+) chars\) \(step a\)")


@settings(max_examples=300, deadline=None)
@given(tail=_ESCAPED)
def test_a_clipped_name_in_the_notice_never_ends_in_half_an_escape(tail: str) -> None:
    # Clipped by its escaped text, 'x\u0441\u04…' showed an escape cut in two (and a name
    # quoted with " was closed with ').
    name = f"x{CYRILLIC_ES}{tail}"
    plan = normalize_plan([{"id": "a", "tool": name, "arguments": {}}], _view())
    line = plan.notice.splitlines()[1]
    clipped = _CLIPPED.match(line)
    assert clipped is not None, line
    quote, body, length = clipped.groups()
    shown = ast.literal_eval(quote + body + quote)
    assert name.startswith(shown)
    assert int(length) == len(name)


# --- ids a reader cannot tell apart ------------------------------------------------------------

_INVISIBLE = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad", "\ufe0f", "\u034f", "\U000e0041"]


@settings(max_examples=100, deadline=None)
@given(
    step_id=st.text(alphabet="abcxyz_019 ", min_size=1, max_size=10).filter(str.strip),
    at=st.integers(min_value=0, max_value=10),
    change=st.sampled_from([*_INVISIBLE, "fullwidth", "case", "space"]),
)
def test_an_id_a_reader_sees_as_another_refuses_the_plan(
    step_id: str, at: int, change: str
) -> None:
    if change == "fullwidth":
        twin = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in step_id)
    elif change == "case":
        twin = step_id.swapcase()
    elif change == "space":
        twin = step_id.replace(" ", "  ") if " " in step_id.strip() else f" {step_id}"
    else:
        at = min(at, len(step_id))
        twin = step_id[:at] + change + step_id[at:]
    if twin == step_id:
        return
    steps = [
        {"id": step_id, "tool": "create_webhook", "arguments": {"name": "x"}},
        {"id": twin, "tool": "create_webhook", "arguments": {"name": "y"}},
    ]
    told = "holds the invisible character" if change in _INVISIBLE else "cannot tell them apart"
    with pytest.raises(PlanError, match=told):
        normalize_plan(steps, _view())


def test_a_placeholder_naming_a_step_with_an_invisible_character_is_refused() -> None:
    steps = [
        {"id": "step_4", "tool": "create_webhook", "arguments": {"name": "x"}},
        {
            "id": "step_6",
            "tool": "create_webhook",
            "arguments": {"name": "{{ step_\u200b4.output }}"},
        },
    ]
    with pytest.raises(PlanError, match="refers to the output of step 'step_4'"):
        normalize_plan(steps, _view())


def test_ids_in_other_scripts_that_differ_plainly_are_kept() -> None:
    # Only a confusables table tells "s1" from a Cyrillic "\u04551" (kept, and shown
    # escaped); ids that differ in letters of one script are different ids.
    steps = [
        {"id": "\u0448\u0430\u0433_\u0430", "tool": "create_webhook", "arguments": {"name": "x"}},
        {"id": "\u0448\u0430\u0433_\u0431", "tool": "create_webhook", "arguments": {"name": "y"}},
        {"id": f"{CYRILLIC_DZE}1", "tool": "create_webhook", "arguments": {"name": "v"}},
        {"id": "s1", "tool": "create_webhook", "arguments": {"name": "u"}},
        {"id": "café", "tool": "create_webhook", "arguments": {"name": "z"}},
        {"id": "cafe", "tool": "create_webhook", "arguments": {"name": "w"}},
    ]
    assert normalize_plan(steps, _view()).complete


# Default_Ignorable_Code_Point in DerivedCoreProperties-14.0.0.txt, as the file lists it (and
# as tests/test_attack_fences.py holds the fences to it).
DEFAULT_IGNORABLE_14 = (
    "00AD 034F 061C 115F..1160 17B4..17B5 180B..180D 180E 180F 200B..200F 202A..202E "
    "2060..2064 2065 2066..206F 3164 FE00..FE0F FEFF FFA0 FFF0..FFF8 1BCA0..1BCA3 "
    "1D173..1D17A E0000 E0001 E0002..E001F E0020..E007F E0080..E00FF E0100..E01EF "
    "E01F0..E0FFF"
)


def test_every_default_ignorable_character_in_an_id_refuses_the_plan() -> None:
    points: list[str] = []
    for item in DEFAULT_IGNORABLE_14.split():
        first, _, last = item.partition("..")
        points.extend(chr(p) for p in range(int(first, 16), int(last or first, 16) + 1))
    view = _view()
    for point in points:
        steps = [{"id": f"s{point}1", "tool": "create_webhook", "arguments": {"name": "y"}}]
        with pytest.raises(PlanError, match=f"invisible character U\\+{ord(point):04X}"):
            normalize_plan(steps, view)


# --- invisible characters in ids and in placeholders -------------------------------------------


@pytest.mark.parametrize("invisible", [*_INVISIBLE, "\u202e", "\u2066"])
def test_an_id_holding_an_invisible_character_refuses_the_plan(invisible: str) -> None:
    # A reader of the plan saw "step_1"; the id the other steps must name was another (and
    # an id of invisible characters alone read as an empty one).
    for step_id in (f"step_{invisible}1", invisible):
        steps = [{"id": step_id, "tool": "create_webhook", "arguments": {"name": "x"}}]
        with pytest.raises(PlanError, match="invisible") as raised:
            normalize_plan(steps, _view())
        message = str(raised.value)
        assert ascii(step_id) in message
        assert f"U+{ord(invisible):04X}" in message
        assert "write the id without" in message


def test_a_dependency_holding_an_invisible_character_is_shown_escaped() -> None:
    # The dependency names no step; shown raw, the message read "depends on 'step_1', which
    # no step has (ids: 'step_1')".
    steps = [
        {"id": "step_1", "tool": "create_webhook", "arguments": {"name": "x"}},
        {
            "id": "step_2",
            "tool": "create_webhook",
            "arguments": {"name": "y"},
            "depends_on": ["step_\ufe0f1"],
        },
    ]
    with pytest.raises(PlanError, match=re.escape("'step_\\ufe0f1'")):
        normalize_plan(steps, _view())


@pytest.mark.parametrize(
    "placeholder",
    [
        "$\u200b{step_4}",
        "{step_4\u200b.output}",
        "<step_4\u2060.id>",
        "$step_4\u200d.output",
        "$\ufeffstep_4.output",
        "%\u200b(step_4)s",
        "{\u200b{ step_4.output }\u200b}",
        "$\U000e0041step_4.output",
    ],
)
def test_a_placeholder_with_an_invisible_character_in_it_is_refused(placeholder: str) -> None:
    # A reviewer saw "${step_4}" or "$step_4.output"; the search read the invisible
    # character as text between the dollar and the path, and the tool got the placeholder.
    steps = [
        {"id": "step_4", "tool": "create_webhook", "arguments": {"name": "x"}},
        {"id": "step_6", "tool": "create_webhook", "arguments": {"name": placeholder}},
    ]
    with pytest.raises(PlanError, match="refers to the output of step 'step_4'") as raised:
        normalize_plan(steps, _view())
    assert "invisible" in str(raised.value)


def test_invisible_characters_in_text_without_a_placeholder_are_kept() -> None:
    # A zero-width joiner inside an emoji, a non-joiner in Persian: text, kept as written.
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
    names = [family, persian]
    steps = [
        {"id": f"s{index}", "tool": "create_webhook", "arguments": {"name": name}}
        for index, name in enumerate(names)
    ]
    plan = normalize_plan(steps, _view())
    assert [step.arguments["name"] for step in plan.steps] == names
