"""Sibling tools: how well the lint tells confusable tool pairs from distinct ones, and how fast.

Run: ``.venv/bin/python benchmarks/siblings.py``. Two parts:

1. **Precision and recall** on the labelled pairs of
   ``tests/fixtures/siblings/pairs.json``: real tool descriptions from public
   catalogs (MCP reference servers, github-mcp-server, tau-bench, the
   Berkeley Function Calling Leaderboard's multi-turn function docs,
   LangChain's Gmail toolkit), each pair labelled ``siblings`` (a model
   reading only the two could reasonably call the wrong one) or ``distinct``.
   Each pair is scored inside the registry it ships in (the labelled tools of
   its catalog), since a sentence every tool of a catalog repeats is dropped
   as boilerplate. At each threshold: the share of flagged pairs that are
   siblings (precision) and the share of siblings flagged (recall), for the
   lint's similarity and for the one it replaced (Jaccard of word and
   word-pair sets of the descriptions alone). The default threshold is the
   one with the best F1 among those with precision of at least 0.8 (a
   finding fails CI, so most of them must be right).
2. **The join** at 1,000, 2,000 and 4,000 tools (the descriptions of
   ``benchmarks/lint.py``, with parameters): the prefix-filtered join the lint
   uses against the all-pairs reference (checked to find the same pairs and
   scores at 1,000; beyond, the reference's time is its cost per pair at
   1,000 times the number of pairs).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Final

import _harness as h
from lint import descriptions

from veridic.checks.lint import DEFAULT_THRESHOLD
from veridic.tools._similarity import ToolText, _join, naive_similar_pairs

PAIRS: Final = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "siblings" / "pairs.json"
)
THRESHOLDS: Final = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)
LEAST_PRECISION: Final = 0.8

Scorer = Callable[[Mapping[str, ToolText], str, str], float]


def labelled() -> tuple[
    list[tuple[dict[str, object], dict[str, object], bool]], dict[str, dict[str, ToolText]]
]:
    """The pairs (two tools and whether they are siblings) and each catalog's labelled tools."""
    data = json.loads(PAIRS.read_text(encoding="utf-8"))
    pairs: list[tuple[dict[str, object], dict[str, object], bool]] = []
    catalogs: dict[str, dict[str, ToolText]] = {}
    for pair in data["pairs"]:
        first, second = pair["tools"]
        pairs.append((first, second, pair["label"] == "siblings"))
        for tool in (first, second):
            catalog = catalogs.setdefault(f"{tool['repository']}:{tool['path']}", {})
            catalog[tool["name"]] = ToolText(tool["description"], tuple(tool["parameters"]))
    return pairs, catalogs


def _registry(
    tool: Mapping[str, object], catalogs: Mapping[str, dict[str, ToolText]]
) -> dict[str, ToolText]:
    return catalogs[f"{tool['repository']}:{tool['path']}"]


def lint_score(registry: Mapping[str, ToolText], first: str, second: str) -> float:
    """The lint's score of the pair in its registry (0.0 below the smallest threshold measured)."""
    wanted = tuple(sorted((first, second)))
    for pair in naive_similar_pairs(registry, threshold=min(THRESHOLDS)):
        if (pair.first, pair.second) == wanted:
            return pair.score
    return 0.0


_OLD_WORDS: Final = re.compile(r"[^\W_]+")
_OLD_STOP: Final = frozenset(
    re.findall(
        r"\w+", "a an and are as at be by for from in into is it its of on or that the this to with"
    )
)


def shingle_score(registry: Mapping[str, ToolText], first: str, second: str) -> float:
    """The score the lint used before: Jaccard of word and adjacent-word-pair sets."""

    def shingles(text: str) -> set[str]:
        words = [w for w in _OLD_WORDS.findall(text.casefold()) if w not in _OLD_STOP]
        return set(words) | {f"{a} {b}" for a, b in itertools.pairwise(words)}

    a, b = shingles(registry[first].description), shingles(registry[second].description)
    return len(a & b) / len(a | b) if a | b else 0.0


def counts(
    scores: Sequence[tuple[float, bool]], threshold: float
) -> tuple[float, float, float, int, int]:
    """Precision, recall, F1, and the flagged pairs that are siblings and that are not."""
    hits = sum(1 for score, siblings in scores if siblings and score >= threshold - 1e-9)
    wrong = sum(1 for score, siblings in scores if not siblings and score >= threshold - 1e-9)
    total = sum(1 for _, siblings in scores if siblings)
    precision = hits / (hits + wrong) if hits + wrong else 1.0
    recall = hits / total if total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, hits, wrong


def chosen(scores: Sequence[tuple[float, bool]]) -> float:
    """The threshold of best F1 among those of precision >= LEAST_PRECISION (highest on ties)."""
    best = max(
        (
            (counts(scores, t)[2], t)
            for t in THRESHOLDS
            if counts(scores, t)[0] >= LEAST_PRECISION and counts(scores, t)[3] > 0
        ),
        default=(0.0, max(THRESHOLDS)),
    )
    return best[1]


def quality(report: h.Report) -> None:
    pairs, catalogs = labelled()
    siblings = sum(1 for *_, label in pairs if label)
    section = report.section(
        f"precision and recall on {len(pairs)} labelled pairs ({siblings} siblings) of public "
        "catalogs",
        about=[
            "Flagged: score >= threshold. Precision: flagged pairs that are siblings; recall: "
            "siblings flagged.",
            f"The default is the best F1 with precision >= {LEAST_PRECISION} (a finding fails CI).",
        ],
        baselines=[],
    )
    scorers: list[tuple[str, Scorer]] = [("lint", lint_score), ("before (shingles)", shingle_score)]
    measured: dict[str, list[tuple[float, bool]]] = {}
    for label, scorer in scorers:
        measured[label] = [
            (
                scorer(
                    {**_registry(a, catalogs), **_registry(b, catalogs)},
                    str(a["name"]),
                    str(b["name"]),
                ),
                sibling,
            )
            for a, b, sibling in pairs
        ]
    for threshold in THRESHOLDS:
        for label, _ in scorers:
            precision, recall, f1, hits, wrong = counts(measured[label], threshold)
            section.add(
                h.Row(
                    f"{label}, threshold {threshold:.2f}",
                    precision,
                    unit="precision",
                    note=f"recall {recall:.2f}, F1 {f1:.2f} ({hits} siblings and {wrong} distinct "
                    "pairs flagged)",
                )
            )
    best = chosen(measured["lint"])
    section.notes.append(
        f"chosen from this measurement: {best:.2f}; DEFAULT_THRESHOLD is {DEFAULT_THRESHOLD:.2f}"
        + ("" if abs(best - DEFAULT_THRESHOLD) < 1e-9 else " (differs: update it and the README)")
    )
    scores = measured["lint"]
    missed = [
        f"{a['name']}/{b['name']}"
        for (a, b, sib), (s, _) in zip(pairs, scores, strict=True)
        if sib and s < DEFAULT_THRESHOLD - 1e-9
    ]
    mistaken = [
        f"{a['name']}/{b['name']}"
        for (a, b, sib), (s, _) in zip(pairs, scores, strict=True)
        if not sib and s >= DEFAULT_THRESHOLD - 1e-9
    ]
    section.notes.append(f"flagged at the default but distinct: {', '.join(mistaken) or 'none'}")
    section.notes.append(f"siblings missed at the default ({len(missed)}): {', '.join(missed)}")


def tools(count: int) -> dict[str, ToolText]:
    return {
        name: ToolText(text, ("record_id", "note") if index % 3 else ("record_id",))
        for index, (name, text) in enumerate(descriptions(count).items())
    }


def speed(report: h.Report) -> None:
    section = report.section(
        f"the sibling join (threshold {DEFAULT_THRESHOLD:g}): prefix-filtered join vs all pairs",
        about=[
            "CPU time, median of 3 rounds; the all-pairs reference is timed once at 1,000 (and "
            "checked to find the same pairs and scores), extrapolated beyond.",
        ],
        baselines=["all pairs"],
    )
    per_pair = 0.0
    for count in (1000, 2000, 4000):
        made = tools(count)
        join = h.measure([h.Contender("join", partial(_join, made, DEFAULT_THRESHOLD))], rounds=3)
        pairs, scored = _join(made, DEFAULT_THRESHOLD)
        every = count * (count - 1) // 2
        note = f"{len(pairs)} pairs found, {scored:,} of {every:,} pairs scored"
        if count == 1000:
            naive = h.measure(
                [
                    h.Contender(
                        "naive", partial(naive_similar_pairs, made, threshold=DEFAULT_THRESHOLD)
                    )
                ],
                rounds=1,
                calls=1,
            )["naive"].median
            if naive_similar_pairs(made, threshold=DEFAULT_THRESHOLD) != pairs:
                h.fail("the join and the all-pairs reference find different pairs")
            per_pair = naive / every
        else:
            naive = per_pair * every
            note += " (all pairs extrapolated)"
        section.timed(f"{count:,} tools: join", join["join"], against=(naive,), note=note)


def main(argv: Sequence[str] | None = None) -> None:
    report = h.Report("siblings.py")
    quality(report)
    speed(report)
    h.finish(report, argv)


if __name__ == "__main__":
    main()
