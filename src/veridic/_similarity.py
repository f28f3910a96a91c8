"""Near-duplicate descriptions: every pair above a Jaccard threshold, without all pairs.

Once the description is the gate, it is also what the model reads to choose
between neighbours, so two tools described in nearly the same words get
confused. The score of a pair is the Jaccard similarity of the descriptions'
shingle sets (words, minus a few stop words, and adjacent word pairs), so word
order matters a little and shared filler words do not.

Comparing every pair is quadratic: 8 million comparisons for 4,000 tools.
:func:`similar_pairs` is an exact similarity join with prefix filtering
(Chaudhuri et al. 2006; Bayardo et al. 2007, "All-pairs"; Xiao et al. 2008,
"PPJoin"): order each set's tokens from rarest to most common; two sets with
Jaccard >= t must then share a token among the first ``|x| - ceil(t*|x|) + 1``
tokens of each. Only those prefix tokens are indexed, so the rare tokens pick
the candidate pairs; a size filter drops sets too small or too large to reach
t, and a positional filter drops pairs whose shared token comes too late in
either set (which matters for templated descriptions that differ in one
word). Each remaining candidate is scored exactly. The result is the same set
of pairs as the naive join (tested), not an approximation such as MinHash.

>>> pairs = similar_pairs(
...     {
...         "archive_ticket": "Archive a ticket so it leaves the open queue.",
...         "close_ticket": "Close a ticket so it leaves the open queue.",
...         "create_user": "Create a user account from a signup form.",
...     },
...     threshold=0.5,
... )
>>> [(p.first, p.second, round(p.score, 2)) for p in pairs]
[('archive_ticket', 'close_ticket', 0.69)]
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["SimilarPair", "jaccard", "naive_similar_pairs", "shingles", "similar_pairs"]

_WORDS: Final = re.compile(r"[^\W_]+")
_STOP: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
    ]
)
_EPSILON: Final = 1e-9


@dataclass(frozen=True, slots=True, order=True)
class SimilarPair:
    """Two tools (``first < second``) whose descriptions score ``score`` in [0, 1]."""

    first: str
    second: str
    score: float


def shingles(text: str) -> frozenset[str]:
    """The words of ``text`` (case-folded, stop words dropped) and its adjacent word pairs.

    >>> sorted(shingles("Delete the user's account"))
    ['account', 'delete', 'delete user', 's', 's account', 'user', 'user s']
    """
    words = [w for w in _WORDS.findall(text.casefold()) if w not in _STOP]
    return frozenset(words) | frozenset(f"{a} {b}" for a, b in itertools.pairwise(words))


def jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    """``|first & second| / |first | second|`` (0.0 when both are empty)."""
    union = len(first | second)
    return len(first & second) / union if union else 0.0


def similar_pairs(descriptions: Mapping[str, str], *, threshold: float) -> list[SimilarPair]:
    """Every pair of names whose descriptions score at least ``threshold`` (0 < t <= 1).

    Sorted by score (highest first), then by names. Empty descriptions are never
    similar to anything.
    """
    return _join(descriptions, threshold)[0]


def _join(descriptions: Mapping[str, str], threshold: float) -> tuple[list[SimilarPair], int]:
    """The pairs, and how many candidate pairs were scored exactly (for the benchmark).

    PPJoin (Xiao et al. 2008): sets are visited from smallest to largest; each
    probes the index with its probe prefix and then indexes its own, shorter,
    index prefix (a set only meets larger ones later). A candidate is dropped
    as soon as the overlap it could still reach, counted from the positions of
    the shared token in both sets, is below the overlap Jaccard >= t needs.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    sets = {name: shingles(text) for name, text in descriptions.items()}
    frequency: Counter[str] = Counter(token for tokens in sets.values() for token in tokens)
    names = sorted((n for n in sets if sets[n]), key=lambda n: (len(sets[n]), n))
    sizes = [len(sets[n]) for n in names]
    index: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
    ratio = threshold / (1 + threshold)
    found: list[SimilarPair] = []
    scored = 0
    for x, name in enumerate(names):
        tokens = sets[name]
        size = sizes[x]
        ordered = sorted(tokens, key=lambda t: (frequency[t], t))
        probe = size - math.ceil(threshold * size - _EPSILON) + 1
        smallest = threshold * size - _EPSILON
        overlap: dict[int, int] = {}
        for i, token in enumerate(ordered[:probe]):
            for y, j in index.get(token, ()):
                seen = overlap.get(y, 0)
                if seen < 0 or sizes[y] < smallest:
                    continue
                needed = math.ceil(ratio * (size + sizes[y]) - _EPSILON)
                if seen + min(size - i, sizes[y] - j) >= needed:
                    overlap[y] = seen + 1
                else:
                    overlap[y] = -1
        indexed = size - math.ceil(2 * ratio * size - _EPSILON) + 1
        for j, token in enumerate(ordered[:indexed]):
            index[token].append((x, j))
        candidates = [y for y, seen in overlap.items() if seen > 0]
        scored += len(candidates)
        for y in candidates:
            score = jaccard(tokens, sets[names[y]])
            if score >= threshold - _EPSILON:
                first, second = sorted((name, names[y]))
                found.append(SimilarPair(first, second, score))
    return sorted(found, key=lambda p: (-p.score, p.first, p.second)), scored


def naive_similar_pairs(descriptions: Mapping[str, str], *, threshold: float) -> list[SimilarPair]:
    """The same pairs as :func:`similar_pairs`, by comparing every pair (the reference)."""
    sets = {name: shingles(text) for name, text in descriptions.items()}
    names = sorted(sets)
    found = [
        SimilarPair(a, b, score)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if sets[a] and sets[b] and (score := jaccard(sets[a], sets[b])) >= threshold - _EPSILON
    ]
    return sorted(found, key=lambda p: (-p.score, p.first, p.second))
