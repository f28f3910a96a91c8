"""Plan normalizer benchmark: a 50-step plan against a 1,000-tool view.

Run: ``.venv/bin/python benchmarks/plans.py``. Prints the median CPU time per
plan (interleaved rounds) and ratios against alternatives measured in the same
run:

- the seed's silent skip (keep the steps whose name is in the catalog): the
  floor of any normalizer, and exactly what let two steps vanish;
- validating each step's arguments with ``view.validate`` in a plain loop:
  the part of the work that is the tool's schema, without the graph checks,
  the invalidation or the notice;
- ``normalize_plan`` on a complete plan, and on the same plan where four
  steps name tools the view cannot run (unknown, unavailable, denied, bad
  arguments), so six dependents are invalidated and a notice written; then
  without the unknown name, and the view's lookup of that name alone (its
  nearest valid names are what a hallucinated name costs).

A second table is a plan the model makes long: 4,000 steps, each naming a tool
the view does not have and needing the step before it, against the silent skip
of the same plan. Finding each kept step's dropped ancestors once walked
everything downstream of every dropped step (quadratic: 4.25 s on 2026-12-06);
it is one pass now (0.74 s), and what is left is the nearest valid names of each
unknown name (~0.18 ms each against 1,000 tools), linear in the plan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

import _harness as h
from _synthetic import registry_of

from veridic import Deny, ToolView, normalize_plan

TOOLS = 1_000
STEPS = 50


def build() -> ToolView:
    registry = registry_of(TOOLS, "bench-plans")
    return registry.view(deny=[Deny({"tool_10"}, reason="read-only session")])


def plan(broken: bool, *, hallucinated: bool = True) -> list[dict[str, object]]:
    steps: list[dict[str, object]] = []
    for index in range(STEPS):
        needs = [f"s{index - 1}"] if index else []
        if index % 7 == 3:
            needs.append(f"s{index - 3}")
        steps.append(
            {
                "id": f"s{index}",
                "tool": f"tool_{index * 20}",
                "arguments": {"user_id": index, "note": "bench"},
                "depends_on": needs,
            }
        )
    if broken:
        steps[40]["tool"] = "tool_49"  # its component did not start
        if hallucinated:
            steps[42]["tool"] = "tool_1OOO"  # hallucinated
        steps[44]["tool"] = "tool_10"  # denied
        steps[46]["arguments"] = {"user_id": "not a number"}
    return steps


def main(argv: Sequence[str] | None = None) -> None:
    logging.getLogger("veridic").setLevel(logging.ERROR)
    view = build()
    complete, broken = plan(broken=False), plan(broken=True)
    names = view.names()

    def silent_skip() -> object:
        return [step for step in broken if step["tool"] in names]

    def validate_loop() -> object:
        kept = []
        for step in complete:
            arguments = cast(dict[str, object], step["arguments"])
            kept.append(view.validate(str(step["tool"]), arguments))
        return kept

    result = normalize_plan(broken, view)
    if (len(result.dropped), len(result.invalidated)) != (4, 6):
        h.fail(f"unexpected normalization:\n{result.notice}")
    if not normalize_plan(complete, view).complete:
        h.fail("the complete plan lost steps")

    known = plan(broken=True, hallucinated=False)
    contenders = [
        h.Contender("silent skip (the seed's bug)", silent_skip),
        h.Contender("view.validate() loop, no graph", validate_loop),
        h.Contender("normalize_plan, complete plan", lambda: normalize_plan(complete, view)),
        h.Contender(
            "normalize_plan, 4 dropped, 6 invalidated", lambda: normalize_plan(broken, view)
        ),
        h.Contender("  the same, no hallucinated name", lambda: normalize_plan(known, view)),
        h.Contender("view.status() of a hallucinated name", lambda: view.status("tool_1OOO")),
    ]
    timings = h.measure(contenders, rounds=15)
    report = h.Report("plans.py")
    section = report.section(
        f"7. plan normalizer: a {STEPS}-step plan against a {TOOLS:,}-tool view, per plan",
        about=[
            "The silent skip is the floor of any normalizer, and exactly what let steps "
            "vanish; the validate loop is the schema part alone."
        ],
        baselines=["silent skip", "validate loop"],
    )
    against = (
        timings["silent skip (the seed's bug)"].median,
        timings["view.validate() loop, no graph"].median,
    )
    for contender in contenders:
        section.timed(contender.name, timings[contender.name], against=against)

    chain = chained(CHAIN)
    if len(normalize_plan(chain, view).dropped) != CHAIN:
        h.fail("the chained plan did not drop every step")
    long = [
        h.Contender("silent skip of the chain", lambda: [s for s in chain if s["tool"] in names]),
        h.Contender(
            f"normalize_plan, {CHAIN:,} chained dropped steps", lambda: normalize_plan(chain, view)
        ),
    ]
    chain_timings = h.measure(long, rounds=5)
    chained_section = report.section(
        f"7b. plan normalizer: {CHAIN:,} chained steps, each naming an unknown tool",
        about=[
            "Linear in the plan: every step dropped, each with the nearest valid names of "
            "its unknown tool, each listed once in the notice."
        ],
        baselines=["silent skip"],
    )
    for contender in long:
        chained_section.timed(
            contender.name,
            chain_timings[contender.name],
            against=(chain_timings["silent skip of the chain"].median,),
        )
    h.finish(report, argv)


CHAIN = 4_000


def chained(count: int) -> list[dict[str, object]]:
    """Steps that each name a tool the view does not have and need the step before."""
    return [
        {
            "id": f"c{i}",
            "tool": f"gone_{i}",
            "arguments": {},
            "depends_on": [f"c{i - 1}"] if i else [],
        }
        for i in range(count)
    ]


if __name__ == "__main__":
    main()
