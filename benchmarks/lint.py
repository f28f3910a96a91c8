"""Lint and manifest benchmark: ``veridic lint`` and ``veridic manifest`` at 1,000 tools.

Run: ``.venv/bin/python benchmarks/lint.py``. Prints timings (best of
repeated runs) and ratios against alternatives measured in the same run:

- resolving 1,000 tools (pydantic schemas; once per process, not part of the target);
- ``lint()`` (doc gaps, near-duplicates, risk floors, irreversibility) plus
  ``build_manifest()`` and ``render_manifest()`` on the resolved registry;
  target: under 1 s for both together;
- near-duplicate detection at 1k, 2k and 4k descriptions: the prefix-filtered
  join against the naive all-pairs comparison, with the number of pairs each
  scores exactly. The naive join is timed at 1k and 2k; at 4k its time is
  extrapolated from 2k (quadratic), its pair count is exact;
- the same for templated descriptions that differ in one word (the worst case
  for token-based candidate selection).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from functools import partial
from typing import Literal

from veridic import Registry
from veridic._similarity import _join, naive_similar_pairs
from veridic.lint import lint
from veridic.manifest import build_manifest, render_manifest

THRESHOLD = 0.7
VERBS = ("read", "list", "find", "create", "update", "archive", "close", "delete", "export")
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fe", "gi", "ho", "ju")
COMMON = ("with", "its", "current", "status", "for", "the", "given", "so", "and", "can", "later")


def descriptions(count: int, seed: int = 7) -> dict[str, str]:
    """Tool descriptions as an application grows them.

    Tools come in feature areas of about 40 (an application with more tools has
    more areas, each with its own entities and vocabulary): a verb, one of the
    area's 8 entities, 6-14 of its 25 words and 2-6 common words. About 3% are
    near-copies of an earlier description with one word changed.
    """
    rng = random.Random(seed)
    areas = max(1, count // 40)
    needed = areas * 33
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < needed:
        word = "".join(rng.choice(SYLLABLES) for _ in range(4))
        if word not in seen:
            seen.add(word)
            words.append(word)
    out: dict[str, str] = {}
    for index in range(count):
        if out and rng.random() < 0.03:
            chosen = rng.choice(list(out.values())).split()
            chosen[rng.randrange(len(chosen))] = rng.choice(COMMON)
        else:
            area = words[(index % areas) * 33 : (index % areas + 1) * 33]
            entities, vocabulary = area[:8], area[8:]
            chosen = [rng.choice(VERBS), "a", rng.choice(entities)]
            chosen += rng.sample(vocabulary, rng.randint(6, 14))
            chosen += rng.sample(COMMON, rng.randint(2, 6))
        out[f"tool_{index}"] = " ".join(chosen).capitalize() + "."
    return out


def templated(count: int) -> dict[str, str]:
    return {f"tool_{i}": f"Apply change number {i} to a user's account." for i in range(count)}


def _handler(index: int, description: str) -> Callable[..., str]:
    def handler(record_id: int, note: str = "") -> str:
        return f"{index}:{record_id}:{note}"

    handler.__name__ = f"tool_{index}"
    handler.__doc__ = f"""{description}

    Args:
        record_id: The record to act on.
        note: Why, for the audit log.
    """
    return handler


def build(count: int) -> Registry:
    registry = Registry(f"lint-bench-{count}")
    pro = registry.component("Pro extension", boot=_fails, hint="Upgrade core.", provides="Extras")
    for index, text in enumerate(descriptions(count).values()):
        owner = pro if index % 50 == 49 else registry
        kind: Literal["query", "write"] = "query" if index % 2 else "write"
        owner.tool(kind=kind)(_handler(index, text))
    return registry


def _fails() -> None:
    raise RuntimeError("requires core >= 2.3")


def best_s(action: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs: the least disturbed by other work on the machine."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return min(samples)


def once_s(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def lint_and_manifest(registry: Registry) -> None:
    lint(registry, threshold=THRESHOLD)
    render_manifest(build_manifest(registry))


def main() -> None:
    logging.getLogger("veridic").setLevel(logging.ERROR)  # the failing component logs a warning
    registry = build(1000)
    resolve = once_s(registry.tools)
    print(f"resolve 1,000 tools (first time, pydantic): {resolve * 1000:8.1f} ms")
    lint_only = best_s(lambda: lint(registry, threshold=THRESHOLD), 5)
    manifest_only = best_s(lambda: render_manifest(build_manifest(registry)), 5)
    both = best_s(lambda: lint_and_manifest(registry), 5)
    findings = lint(registry, threshold=THRESHOLD)
    print(f"lint 1,000 tools:                           {lint_only * 1000:8.1f} ms")
    print(f"manifest 1,000 tools (build + render):      {manifest_only * 1000:8.1f} ms")
    verdict = "meets" if both < 1 else "MISSES"
    print(
        f"lint + manifest, 1,000 tools:               {both * 1000:8.1f} ms "
        f"({verdict} the 1 s target; {len(findings)} findings)"
    )

    print("\nnear-duplicate detection (threshold 0.7): prefix-filtered join vs naive all-pairs")
    print(
        f"{'set':>10} {'n':>5} {'pairs':>6} {'scored':>9} {'all pairs':>10} "
        f"{'join ms':>8} {'naive ms':>10} {'naive/join':>10}"
    )
    for label, make in (("realistic", descriptions), ("templated", templated)):
        per_pair = 0.0
        for count in (1000, 2000, 4000):
            texts = make(count)
            join_time = best_s(partial(_join, texts, THRESHOLD), 3)
            pairs, scored = _join(texts, THRESHOLD)
            all_pairs = count * (count - 1) // 2
            if count == 1000:
                start = time.perf_counter()
                naive = naive_similar_pairs(texts, threshold=THRESHOLD)
                naive_time = time.perf_counter() - start
                per_pair = naive_time / all_pairs
                shown = f"{naive_time * 1000:10.0f}"
                if naive != pairs:
                    raise SystemExit("the join and the naive comparison disagree")
            else:
                naive_time = per_pair * all_pairs
                shown = f"~{naive_time * 1000:9.0f}"
            print(
                f"{label:>10} {count:>5} {len(pairs):>6} {scored:>9} {all_pairs:>10} "
                f"{join_time * 1000:8.1f} {shown} {naive_time / join_time:9.0f}x"
            )
    print(
        "(~: the naive join's cost per pair measured at 1k, times the number of pairs; "
        "timing it at 4k would take about a minute)"
    )


if __name__ == "__main__":
    main()
