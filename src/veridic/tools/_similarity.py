"""Similarity search that finds exactly what comparing everything finds, without doing it.

Two searches, one idea: a cheap bound rules most candidates out, and only
the rest are scored exactly, so the answer is the naive one (tested against
it), not an approximation such as MinHash.

**Near-duplicate descriptions** (:func:`similar_pairs`, for the lint). Once
the description is the gate, it is also what the model reads to choose
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
word). Each remaining candidate is scored exactly.

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

**Nearest names** (:class:`NameIndex`, for the "nearest valid names" of an
unknown tool). A model that hallucinates a tool name gets the closest real
ones, as :func:`difflib.get_close_matches` ranks them; scoring every name with
difflib costs ~20 ms at 1,000 tools, on every hallucinated call. difflib's
score of a pair is ``2*M/T`` (``M`` characters in its matching blocks, ``T``
the two lengths), and ``M`` is at most the number of characters the two share
as multisets and at most their longest common subsequence. So the index
keeps names by length (a length too far off cannot reach the cutoff: difflib's
``real_quick_ratio``), counts the shared characters with one C-level set
intersection per name (difflib's ``quick_ratio``; a size and count filter, as
in the join above), visits the survivors best bound first, bounds each again
by a bit-parallel LCS, and lets difflib score only what can still enter the
top ``n``. The answer is difflib's, names and order.

>>> NameIndex(["get_weather", "get_forecast", "set_alarm"]).close_matches("get_wether")
['get_weather']
"""

from __future__ import annotations

import difflib
import functools
import heapq
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "NameIndex",
    "SimilarPair",
    "jaccard",
    "naive_similar_pairs",
    "shingles",
    "similar_pairs",
]

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


# --- nearest names ----------------------------------------------------------------


class NameIndex:
    """Distinct names, kept for :meth:`close_matches` queries; immutable once built.

    Building costs a pass over the names (each name's character tokens are
    cached, so views of the same tools share that work); a query costs one
    C-level set intersection per name of a plausible length, then difflib's
    exact score for the few candidates whose bounds can still reach the answer.
    """

    __slots__ = ("_groups", "_longest")

    def __init__(self, names: Iterable[str]) -> None:
        distinct = sorted(dict.fromkeys(names), key=len)
        self._groups = tuple(
            _Group(length, members, tuple(map(_name_tokens, members)))
            for length, members in (
                (length, tuple(group)) for length, group in itertools.groupby(distinct, key=len)
            )
        )
        self._longest = len(distinct[-1]) if distinct else 0

    def close_matches(self, word: str, n: int = 3, cutoff: float = 0.6) -> list[str]:
        """``difflib.get_close_matches(word, names, n, cutoff)``, the same names in the same order.

        A name given twice counts once (difflib would list it twice).

        Raises:
            ValueError: ``n`` is not positive or ``cutoff`` is not in (0, 1].
        """
        if n <= 0:
            raise ValueError(f"n must be > 0, got {n!r}")
        if not 0.0 < cutoff <= 1.0:
            raise ValueError(f"cutoff must be in (0, 1], got {cutoff!r}")
        classes = self._classes(word, cutoff)
        if not classes:
            return []
        # Best bound first: once the n-th best score beats every bound left,
        # nothing after it can enter the answer (an equal score ties on the name).
        classes.sort(key=lambda c: c[0], reverse=True)
        size = len(word)
        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(word)  # the orientation get_close_matches uses: ratio() is not symmetric
        masks = _position_masks(word)
        best: list[tuple[float, str]] = []
        for bound, names in classes:
            if bound < (best[0][0] if len(best) == n else cutoff):
                break
            for name in names:
                floor = best[0][0] if len(best) == n else cutoff
                if _ratio(_lcs_length(name, masks, size), size + len(name)) < floor:
                    continue
                matcher.set_seq1(name)
                score = matcher.ratio()
                if score < cutoff:
                    continue
                if len(best) < n:
                    heapq.heappush(best, (score, name))
                elif (score, name) > best[0]:
                    heapq.heapreplace(best, (score, name))
        return [name for _, name in sorted(best, reverse=True)]

    def _classes(self, word: str, cutoff: float) -> list[tuple[float, Iterable[str]]]:
        """The names that may reach ``cutoff``, in classes that share one upper bound.

        The bound of a name is difflib's ``quick_ratio``: the characters it
        shares with the word as multisets, counted by one set intersection.
        """
        size = len(word)
        tokens: frozenset[str] | None = None
        classes: list[tuple[float, Iterable[str]]] = []
        for group in self._groups:
            total = size + group.length
            needed = _least_matches(min(size, group.length), total, cutoff)
            if needed is None:
                continue  # difflib's real_quick_ratio: the lengths alone rule the group out
            if tokens is None:
                tokens = _tokens(word, self._longest)
            shared = list(map(len, map(tokens.intersection, group.tokens)))
            for count in set(shared):
                if count >= needed:
                    picked = itertools.compress(group.names, map(count.__eq__, shared))
                    classes.append((_ratio(count, total), picked))
        return classes


@dataclass(frozen=True, slots=True)
class _Group:
    """The names of one length and their character tokens."""

    length: int
    names: tuple[str, ...]
    tokens: tuple[frozenset[str], ...]


def _ratio(matches: int, total: int) -> float:
    # difflib's own formula (_calculate_ratio): the bounds compare with its scores exactly.
    return 2.0 * matches / total if total else 1.0


def _least_matches(most: int, total: int, cutoff: float) -> int | None:
    """The fewest matches ``m <= most`` with ``_ratio(m, total) >= cutoff`` (``None``: none)."""
    matches = max(0, math.floor(cutoff * total / 2) - 1)
    while matches <= most:
        if _ratio(matches, total) >= cutoff:
            return matches
        matches += 1
    return None


def _tokens(text: str, most: int) -> frozenset[str]:
    """The characters of ``text`` as a set: its ``k``-th ``c`` is the token ``c * k``.

    Two texts share ``len(a & b)`` tokens exactly when they share that many
    characters as multisets (difflib's ``quick_ratio`` count), which turns
    the multiset count into a set intersection, as PPJoin does for shingles.
    Repeats past ``most`` are left out: no name to compare with holds that many.

    >>> sorted(_tokens("tool", 64))
    ['l', 'o', 'oo', 't']
    """
    chars = frozenset(text)
    if len(chars) == len(text):
        return chars
    repeated = [
        char * k
        for char in chars
        if (count := min(text.count(char), most)) > 1
        for k in range(2, count + 1)
    ]
    return chars.union(repeated)


@functools.lru_cache(maxsize=8192)
def _name_tokens(name: str) -> frozenset[str]:
    # Cached per name: the views of one registry hold the same names.
    return _tokens(name, len(name))


def _position_masks(word: str) -> dict[str, int]:
    masks: dict[str, int] = {}
    for position, char in enumerate(word):
        masks[char] = masks.get(char, 0) | 1 << position
    return masks


def _lcs_length(text: str, masks: Mapping[str, int], size: int) -> int:
    """The longest common subsequence of ``text`` and the word of ``masks`` (``size`` long).

    Bit-parallel (Allison and Dix 1986; Hyyro 2004): one addition per
    character of ``text``. difflib's matching blocks form a common
    subsequence, so its ``M`` is never more than this.

    >>> _lcs_length("search_report", _position_masks("fetch_weather"), 13)
    6
    """
    row = (1 << size) - 1
    for char in text:
        matched = row & masks.get(char, 0)
        row = (row + matched) | (row - matched)
    return size - (row & ((1 << size) - 1)).bit_count()
