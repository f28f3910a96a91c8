"""Views and their projections at 10, 50 and 1,000 tools, each against what it costs by hand.

Run: ``.venv/bin/python benchmarks/views.py``. Each registry has the tools of
``build`` (one in 50 belongs to a component that fails to boot) and a deny
filter that tombstones two tools. Per call, rounds interleaved, CPU time:

- ``registry.view(deny=...)`` a second time with the same filters over an
  unchanged registry (issue 21: O(1), cached by filter key and registry
  version), against ``registry.view(deny=..., predicates=[...])``, which is
  built anew on every call (a predicate may answer differently each time);
- ``view.capability_section()``, against the same text written by hand
  (f-strings and ``str.join`` from plain rows, checked identical);
- ``view.tool_specs("openai")``, against fresh spec dicts built by hand from
  the same plain rows (checked equal);
- ``view.tools_sha256()``, against ``json.dumps`` of the MCP specs (keys
  sorted, no spaces) and ``hashlib.sha256`` by hand (checked identical);
- the nearest names of names the view does not expose (what a model that
  hallucinates a tool costs), at 1,000 tools: ``view.status(name)`` against
  ``difflib.get_close_matches`` over the same names, whose ranking veridic's
  index reproduces exactly (checked).

The ratio column divides each row by its own floor, named in the row.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Final

import _harness as h
from _synthetic import registry_of

from veridic import Deny, Registry
from veridic.tools._similarity import NameIndex

SIZES: Final = (10, 50, 1_000)


def build(count: int) -> Registry:
    registry = registry_of(count, f"bench-views-{count}")
    registry.boot()
    return registry


def _deny() -> list[Deny]:
    return [Deny({"tool_3", "tool_4"}, reason="read-only session", tombstone=True)]


def _everything(tool: object) -> bool:
    return True


def hand_section(intro: str, rows: list[dict[str, object]], tail: str) -> str:
    lines = [intro]
    for row in rows:
        required = row["required"]
        assert isinstance(required, tuple)
        requires = f"; requires {', '.join(required)}" if required else ""
        lines.append(
            f"- {row['name']} ({row['kind']}, {row['risk']} risk{requires}): "
            f"{' '.join(str(row['description']).split())}"  # one line per tool, as veridic's
        )
    return "\n".join(lines) + tail


def hand_specs(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [
        {
            "type": "function",
            "function": {
                "name": row["name"],
                "description": row["description"],
                "parameters": row["schema"],
            },
        }
        for row in rows
    ]


def hand_hash(mcp: list[dict[str, object]]) -> str:
    text = json.dumps(mcp, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sized(count: int, section: h.Section) -> None:
    registry = build(count)
    view = registry.view(deny=_deny())
    if registry.view(deny=_deny()) is not view:
        section.notes.append(
            f"{count} tools: a second view() with the same filters is a new object (not cached)"
        )
    rows = [
        {
            "name": tool.name,
            "kind": tool.kind,
            "risk": tool.risk.value,
            "required": tool.required,
            "description": tool.description,
            "schema": json.loads(json.dumps(tool.input_schema)),
        }
        for tool in view.tools()
    ]
    mcp = json.loads(json.dumps(view.tool_specs("mcp")))
    section_text = str(view.capability_section())
    first = f"\n- {rows[0]['name']} "
    intro = section_text.split(first)[0]
    tail_at = section_text.index("\n\n", len(intro)) if "\n\n" in section_text else None
    tail = section_text[tail_at:] if tail_at is not None else ""
    # The unavailable lines (a component, two tombstones) are copied as they are: what a
    # hand-written wrapper would print for them is its own business.
    checks: list[tuple[str, object, object]] = [
        ("section", section_text, hand_section(intro, rows, tail)),
        ("specs", view.tool_specs("openai"), hand_specs(rows)),
        ("tools_sha256", view.tools_sha256(), hand_hash(mcp)),
    ]
    for what, expected, got in checks:
        if not h.same_bytes(expected, got):
            h.fail(f"{count} tools: the {what} by hand differs {h.first_difference(expected, got)}")
    deny = _deny()
    contenders = [
        h.Contender("view() again", lambda: registry.view(deny=deny)),
        h.Contender(
            "view() with a predicate", lambda: registry.view(deny=deny, predicates=[_everything])
        ),
        h.Contender("capability_section()", view.capability_section),
        h.Contender("section by hand", lambda: hand_section(intro, rows, tail)),
        h.Contender('tool_specs("openai")', lambda: view.tool_specs("openai")),
        h.Contender("specs by hand", lambda: hand_specs(rows)),
        h.Contender("tools_sha256()", view.tools_sha256),
        h.Contender("hash by hand", lambda: hand_hash(mcp)),
    ]
    timings = h.measure(contenders, rounds=15, budget=0.01)
    floors = {
        "view() again": "view() with a predicate",
        "capability_section()": "section by hand",
        'tool_specs("openai")': "specs by hand",
        "tools_sha256()": "hash by hand",
    }
    exposed = len(view.names())
    for contender in contenders:
        floor = floors.get(contender.name)
        stats = timings[contender.name]
        per_tool = stats.median / exposed * 1e9
        note = f"{per_tool:,.0f} ns/tool" + (f"; floor: {floor}" if floor else "")
        section.timed(
            f"{count:>5,} tools: {contender.name}",
            stats,
            against=(timings[floor].median if floor else None,),
            note=note,
        )


# A typo of a real name, one that shares its prefix with every name, one near
# the built-in tool, and hallucinations near nothing.
UNKNOWN: Final = ("tool_5O0", "tool_1234", "tool_", "get_tool_schem", "send_email", "fetch_weather")


def unknown_names(section: h.Section) -> None:
    registry = build(1_000)
    view = registry.view(deny=_deny())
    names = list(view.names())
    index = NameIndex(names)
    for word in UNKNOWN:
        expected = difflib.get_close_matches(word, names, n=3, cutoff=0.6)
        if list(index.close_matches(word, 3, 0.6)) != expected:
            h.fail(f"the nearest names of {word!r} differ from difflib's")
    view.status(UNKNOWN[0])  # the view's index is built on its first unknown name
    contenders = [
        h.Contender(
            "difflib.get_close_matches",
            lambda: [difflib.get_close_matches(w, names, n=3, cutoff=0.6) for w in UNKNOWN],
        ),
        h.Contender("view.status(), same view", lambda: [view.status(w) for w in UNKNOWN]),
        h.Contender(
            "view.status(), fresh view",
            lambda: [
                registry.view(deny=_deny(), predicates=[_everything]).status(w) for w in UNKNOWN
            ],
        ),
        h.Contender(
            "fresh view alone",
            lambda: registry.view(deny=_deny(), predicates=[_everything]),
        ),
    ]
    timings = h.measure(contenders, rounds=9, budget=0.05)
    base = timings["difflib.get_close_matches"].median
    for contender in contenders:
        section.timed(contender.name, timings[contender.name], against=(base,))


def main(argv: Sequence[str] | None = None) -> None:
    logging.getLogger("veridic").setLevel(logging.ERROR)  # the failing component warns
    report = h.Report("views.py")
    section = report.section(
        "3. views and projections, per call",
        about=[
            "Each row against its own floor (named in the note); by-hand floors checked "
            "identical to veridic's output first.",
            "A fresh view (predicate) shares its tool set's specs and digest with earlier "
            "views of the same tools.",
        ],
        baselines=["its floor"],
    )
    for count in SIZES:
        sized(count, section)
    names = report.section(
        f"3b. nearest names of {len(UNKNOWN)} unknown tool names, 1,000 tools",
        about=[
            "view.status() ranks as difflib.get_close_matches does (checked); then drops "
            "suggestions that would steer towards more risk."
        ],
        baselines=["difflib"],
    )
    unknown_names(names)
    h.finish(report, argv)


if __name__ == "__main__":
    main()
