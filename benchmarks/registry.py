"""Registry benchmark: views, projections and the lint at 1,000 tools.

Run: ``.venv/bin/python benchmarks/registry.py``. Prints timings (median of
repeated runs) and ratios against alternatives measured in the same run:

- building a view (boot state and filters applied) after the first build;
  target: under 5 ms per 1,000 tools;
- rendering the capability section, against a naive hand-written f-string
  rendering of the same lines (what an application writes without a
  registry: no filtering, no provenance, no unavailable lines);
- rendering the tool specs (fresh dicts on every call), against a naive
  list comprehension over the same tools;
- linting 1,000 tools with ``find_doc_gaps``;
- ``view.status(name)`` for names the view does not expose (what an agent
  that hallucinates tool names costs), against plain
  ``difflib.get_close_matches`` over the same names, which it must equal;
- a scaling series (10, 100, 1,000 tools) to show the cost is linear.
"""

from __future__ import annotations

import difflib
import logging
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Literal

from veridic import Deny, Registry, Tool, ToolView, find_doc_gaps
from veridic._similarity import NameIndex, _name_tokens


def _handler(index: int, documented: bool) -> Callable[..., str]:
    def handler(user_id: int, note: str = "", dry_run: bool = False) -> str:
        return f"{index}:{user_id}"

    handler.__name__ = f"tool_{index}"
    if documented:
        handler.__doc__ = f"""Apply change number {index} to a user's account.

        Args:
            user_id: The user to change.
            note: Why, for the audit log.
            dry_run: Report what would change without changing it.
        """
    return handler


def build(count: int, *, documented_ratio: float = 1.0) -> Registry:
    registry = Registry(f"bench-{count}")
    pro = registry.component("Pro extension", boot=_fails, hint="Upgrade core.", provides="Extras")
    for index in range(count):
        documented = index < count * documented_ratio
        owner = pro if index % 50 == 49 else registry
        kind: Literal["query", "write"] = "query" if index % 2 else "write"
        owner.tool(kind=kind)(_handler(index, documented))
    return registry


def _fails() -> None:
    raise RuntimeError("requires core >= 2.3")


def median_ms(action: Callable[[], object], repeat: int = 30) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def naive_section(tools: tuple[Tool, ...]) -> str:
    lines = ["Tools you can call:"]
    for tool in tools:
        lines.append(f"- {tool.name} ({tool.kind}, {tool.risk.value} risk): {tool.description}")
    return "\n".join(lines)


def naive_specs(tools: tuple[Tool, ...]) -> list[dict[str, object]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def main() -> None:
    # Every registry here has a component that fails to boot on purpose; its
    # warning would be printed once per registry.
    logging.getLogger("veridic.registry").setLevel(logging.ERROR)
    count = 1_000
    start = time.perf_counter()
    registry = build(count)
    registered = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    registry.boot()
    booted = (time.perf_counter() - start) * 1000
    print(f"registry of {count:,} tools: register {registered:.1f} ms, first boot {booted:.0f} ms")
    print("  (boot builds each tool's pydantic model once; everything below reuses it)")

    deny = [Deny({"tool_3", "tool_4"}, reason="read-only session", tombstone=True)]
    view_ms = median_ms(lambda: registry.view(deny=deny))
    print(f"\nview of {count:,} tools (filters applied): {view_ms:.2f} ms  (target < 5 ms)")

    view = registry.view(deny=deny)
    tools = view.tools()
    section_ms = median_ms(lambda: registry.view(deny=deny).capability_section())
    naive_ms = median_ms(lambda: naive_section(tools))
    print(
        f"view + capability section: {section_ms:.2f} ms; naive f-string section "
        f"{naive_ms:.2f} ms; ratio {section_ms / naive_ms:.1f}x "
        "(the view also filters, and lists what is unavailable)"
    )
    cached_ms = median_ms(lambda: view.capability_section(), repeat=200)
    print(f"capability section again on the same view (cached): {cached_ms * 1000:.1f} us")

    openai_ms = median_ms(partial(view.tool_specs, "openai"))
    naive = median_ms(partial(naive_specs, tools))
    print(
        f"tool_specs('openai'): {openai_ms:.2f} ms (fresh dicts); naive comprehension over "
        f"the same tools {naive:.2f} ms; ratio {openai_ms / naive:.2f}x"
    )
    print(f"tool_specs('anthropic'): {median_ms(partial(view.tool_specs, 'anthropic')):.2f} ms")
    print(f"tool_specs('mcp'): {median_ms(partial(view.tool_specs, 'mcp')):.2f} ms")

    half = build(count, documented_ratio=0.5)
    half.tools()
    lint_clean = median_ms(lambda: find_doc_gaps(registry), repeat=10)
    lint_half = median_ms(lambda: find_doc_gaps(half), repeat=10)
    gaps = len(find_doc_gaps(half))
    print(
        f"\nfind_doc_gaps, {count:,} documented tools: {lint_clean:.2f} ms; "
        f"half undocumented ({gaps:,} gaps): {lint_half:.2f} ms"
    )

    unknown_names(registry, deny)

    print("\nscaling (after the first build), cost per tool should stay flat:")
    print(f"{'tools':>7} {'view ms':>9} {'us/tool':>8} {'section ms':>11} {'specs ms':>9}")
    for size in (10, 100, 1_000):
        sized = build(size)
        sized.boot()
        v = median_ms(sized.view)
        s_ms = median_ms(partial(_section_of_new_view, sized))
        sp = median_ms(partial(sized.view().tool_specs, "anthropic"))
        print(f"{size:>7,} {v:>9.3f} {v * 1000 / size:>8.2f} {s_ms:>11.3f} {sp:>9.3f}")


# A typo of a real name, one that shares its prefix with every name, one near
# the built-in tool, and hallucinations near nothing.
_UNKNOWN = ("tool_5O0", "tool_1234", "tool_", "get_tool_schem", "send_email", "fetch_weather")


def unknown_names(registry: Registry, deny: list[Deny]) -> None:
    view = registry.view(deny=deny)
    names = list(view.names())
    for word in _UNKNOWN:
        expected = difflib.get_close_matches(word, names, n=3, cutoff=0.6)
        if view.status(word).suggestions != tuple(expected or sorted(names)[:10]):
            raise AssertionError(f"suggestions for {word!r} differ from difflib's")
    print(f"\nstatus() of a name the view does not expose, {len(names):,} exposed names:")
    print(f"{'name':>15} {'difflib ms':>11} {'status ms':>10} {'ratio':>6}  suggestions")
    plain_total = warm_total = 0.0
    for word in _UNKNOWN:
        plain = median_ms(partial(difflib.get_close_matches, word, names, 3, 0.6), repeat=10)
        warm = median_ms(partial(view.status, word), repeat=50)
        plain_total += plain
        warm_total += warm
        shown = ", ".join(view.status(word).suggestions[:3])
        print(f"{word:>15} {plain:>11.2f} {warm:>10.3f} {plain / warm:>5.0f}x  {shown}")
    print(
        f"{'all':>15} {plain_total:>11.2f} {warm_total:>10.3f} {plain_total / warm_total:>5.0f}x"
        "  (the same view: its name index is built on the first unknown name)"
    )
    first = median_ms(lambda: registry.view(deny=deny).status("tool_1234"), repeat=10)
    print(
        f"first unknown name of a fresh view (view, index and status): {first:.2f} ms; "
        f"building the view alone {median_ms(lambda: registry.view(deny=deny)):.2f} ms"
    )
    cold = median_ms(partial(_first_index_of_the_process, view), repeat=10)
    print(
        f"first index of the process (each name's characters tokenised once, then cached): "
        f"{cold:.2f} ms"
    )


def _first_index_of_the_process(view: ToolView) -> NameIndex:
    _name_tokens.cache_clear()
    return NameIndex(view.names())


def _section_of_new_view(registry: Registry) -> str:
    view: ToolView = registry.view()
    return view.capability_section()


if __name__ == "__main__":
    main()
