"""Similarity search that finds exactly what comparing everything finds, without doing it.

Two searches, one idea: a cheap bound rules most candidates out, and only
the rest are scored exactly, so the answer is the naive one (tested against
it), not an approximation such as MinHash.

**Sibling tools** (:func:`similar_pairs`, for the lint). Once the
description is the gate, it is also what the model reads to choose between
neighbours, so two tools described in nearly the same words get confused,
and the pairs that matter most differ by a word or two that carry the whole
difference ("the hotels in a city" and "the hotel names in a city"; "delete"
and "archive"). So the score weighs what differs as well as what is shared:

- a tool is a weighted set of features: the words of its description (split,
  case-folded, stop words and plurals out) and of its name, weight 1 each,
  and its parameter names, weight 0.5 (the same arguments make the wrong call
  easy to make);
- a sentence that :data:`_BOILERPLATE` descriptions or more repeat ("Only
  works within allowed directories.") is left out: it tells no tool apart;
- the score is the weighted Jaccard of two such sets, halved when the words
  that differ are opposites (add/remove, login/logout, star/unstar, names in
  reverse order such as ``gallon_to_liter``): a request names one of them;
- each pair says which words of each description the other lacks
  (:attr:`SimilarPair.first_only`, :attr:`SimilarPair.second_only`), for the
  finding to tell the author what to explain.

Measured by ``benchmarks/siblings.py`` on 79 labelled pairs of public tool
catalogs (``tests/fixtures/siblings/pairs.json``: MCP reference servers,
github-mcp-server, tau-bench, BFCL, LangChain; 36 siblings), precision /
recall: 0.73 / 0.53 at 0.5, **0.85 / 0.47 at 0.55** (the lint's default: the
best F1 with precision >= 0.8), 0.83 / 0.42 at 0.6, 1.00 / 0.31 at 0.7. The
Jaccard of word and word-pair sets of the descriptions alone, used before,
scored 0.50 / 0.28 at 0.7 and never reached 0.6 precision. It catches
copy-pasted descriptions (tau-bench's two flight searches, word for word),
one-word variants ("including sizes", "comment", "organization") and
long/short-term pairs; it misses siblings described in different words
("list" and "search" issues, a draft and a sent message) and flags one-word
differences a model would not confuse (payment and address of an order).

Comparing every pair is quadratic: 8 million comparisons for 4,000 tools.
:func:`similar_pairs` is an exact similarity join with prefix filtering
(Chaudhuri et al. 2006; Bayardo et al. 2007, "All-pairs"; Xiao et al. 2008,
"PPJoin"), on weighted sets: order each set's features from rarest to most
common; two sets whose weighted Jaccard is at least t must then share a
feature among the first ones of each, up to where the features left weigh
less than the overlap t needs. Only those prefix features are indexed, so the
rare ones pick the candidate pairs; a size filter drops sets too light or too
heavy to reach t, and a positional filter drops pairs whose shared feature
comes too late in either set. Each remaining candidate is scored exactly,
opposites included (they only lower a score), so the pairs and scores are
those of :func:`naive_similar_pairs`, which scores every pair.

>>> [pair] = similar_pairs(
...     {
...         "archive_ticket": "Archive a ticket so it leaves the open queue.",
...         "delete_ticket": "Delete a ticket so it leaves the open queue.",
...         "create_user": "Create a user account from a signup form.",
...     },
...     threshold=0.55,
... )
>>> pair.first, pair.second, round(pair.score, 2), pair.first_only, pair.second_only
('archive_ticket', 'delete_ticket', 0.6, ('Archive',), ('Delete',))

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

import dataclasses
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
    "ToolText",
    "naive_similar_pairs",
    "similar_pairs",
    "words",
]

_WORDS: Final = re.compile(r"[^\W_]+")
_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SENTENCE: Final = re.compile(r"(?<=[.!?])\s+")
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
        "can",
        "for",
        "from",
        "function",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "should",
        "that",
        "the",
        "this",
        "to",
        "tool",
        "use",
        "which",
        "will",
        "with",
        "you",
        "your",
    ]
)
_OPPOSITES: Final = frozenset(
    frozenset(pair)
    for pair in (
        ("accept", "reject"),
        ("add", "delete"),
        ("add", "remove"),
        ("allow", "deny"),
        ("approve", "reject"),
        ("attach", "detach"),
        ("buy", "sell"),
        ("create", "delete"),
        ("download", "upload"),
        ("enable", "disable"),
        ("encrypt", "decrypt"),
        ("export", "import"),
        ("first", "last"),
        ("grant", "revoke"),
        ("hide", "show"),
        ("include", "exclude"),
        ("increase", "decrease"),
        ("login", "logout"),
        ("max", "min"),
        ("maximum", "minimum"),
        ("open", "close"),
        ("private", "public"),
        ("pull", "push"),
        ("receive", "send"),
        ("start", "stop"),
    )
)
"""Word pairs a request names one of: a pair told apart by them is not confused."""
_NEGATING: Final = ("un", "de", "dis")
_PARAMETER_WEIGHT: Final = 0.5
"""Weight of a parameter name (a word of the description or of the name weighs 1): a power of
two, so every sum of weights is exact and the join and the reference agree to the last bit."""
_BOILERPLATE: Final = 3
"""A sentence in this many descriptions or more says nothing about which tool to pick."""
_EPSILON: Final = 1e-9


@dataclass(frozen=True, slots=True)
class ToolText:
    """What the model reads of a tool to choose it, besides its name: description, parameters."""

    description: str
    parameters: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, order=True)
class SimilarPair:
    """Two tools (``first < second``) that score ``score`` in [0, 1], and what tells them apart.

    ``first_only`` and ``second_only`` are the words of each description that
    the other lacks, in the order they are written (both empty: the
    descriptions say the same, only the names differ); ``opposites`` the two
    words, one from each tool, that made the score halve (``None``: none).
    """

    first: str
    second: str
    score: float
    first_only: tuple[str, ...] = ()
    second_only: tuple[str, ...] = ()
    opposites: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class _Record:
    """One tool's features (of weight 1, of weight 0.5), its words (stem, as written)."""

    def weight(self, feature: str) -> float:
        return _PARAMETER_WEIGHT if feature in self.half else 1.0

    name: str
    named: tuple[str, ...]
    bag: tuple[str, ...]
    whole: frozenset[str]
    half: frozenset[str]
    total: float
    words: tuple[tuple[str, str], ...]
    stems: frozenset[str]
    opposed: frozenset[str]


@functools.lru_cache(maxsize=65536)
def words(text: str) -> tuple[str, ...]:
    """The words of ``text`` that carry meaning: split at case changes and underscores,
    case-folded, stop words dropped, plurals reduced (``"directories"`` is ``"directory"``).

    >>> words("List the hotelNames in a city's directories")
    ('list', 'hotel', 'name', 'city', 's', 'directory')
    """
    return tuple(
        _stem(w) for w in _WORDS.findall(_CAMEL.sub("_", text).casefold()) if w not in _STOP
    )


@functools.lru_cache(maxsize=65536)
def _stem_of(surface: str) -> str:
    """The stem of a word as written, or ``""`` for a stop word."""
    folded = surface.casefold()
    return "" if folded in _STOP else _stem(folded)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace collapsed."""
    return [s for s in (" ".join(p.split()) for p in _SENTENCE.split(text)) if s]


def _records(tools: Mapping[str, str | ToolText]) -> list[_Record]:
    """Each tool's features: description words, name words and parameter names, weighted.

    A sentence found in :data:`_BOILERPLATE` descriptions or more is left out
    of each (unless it is all a description says): the same words in every
    tool say nothing about which one to pick.
    """
    texts = {
        name: text if isinstance(text, ToolText) else ToolText(text) for name, text in tools.items()
    }
    split = {name: _sentences(text.description) for name, text in texts.items()}
    seen: Counter[str] = Counter(
        s.casefold() for sentences in split.values() for s in set(sentences)
    )
    common = {s for s, count in seen.items() if count >= _BOILERPLATE}
    records: list[_Record] = []
    for name, text in texts.items():
        sentences = split[name]
        kept = [s for s in sentences if s.casefold() not in common] if common else sentences
        kept = kept or sentences
        source = text.description if len(kept) == len(sentences) else " ".join(kept)
        written = [
            (stem, surface) for surface in _WORDS.findall(source) if (stem := _stem_of(surface))
        ]
        named = words(name)
        described = frozenset(stem for stem, _ in written)
        whole = frozenset("d:" + stem for stem in described)
        half: frozenset[str] = frozenset()
        if whole:  # an empty description is never similar to anything
            whole |= frozenset("n:" + word for word in named)
            half = frozenset("p:" + "_".join(words(p)) for p in text.parameters)
        stems = described.union(named)
        records.append(
            _Record(
                name,
                named,
                tuple(sorted(named)),
                whole,
                half,
                len(whole) + _PARAMETER_WEIGHT * len(half),
                tuple(written),
                stems,
                frozenset(),
            )
        )
    # The opposites each record's words have among the words of the registry: almost always
    # none, so that most pairs are cleared of the opposites rule by one disjointness test.
    vocabulary = frozenset().union(*(record.stems for record in records))
    present = {word: found for word in vocabulary if (found := _partners(word) & vocabulary)}
    if not present:
        return records
    return [
        dataclasses.replace(
            record,
            opposed=frozenset(p for word in record.stems & present.keys() for p in present[word]),
        )
        for record in records
    ]


def _score(a: _Record, b: _Record) -> tuple[float, tuple[str, str] | None]:
    """Weighted Jaccard of the features, halved when the words only one side has are opposites."""
    if b.name < a.name:
        a, b = b, a
    shared = len(a.whole & b.whole) + _PARAMETER_WEIGHT * len(a.half & b.half)
    union = a.total + b.total - shared
    score = shared / union if union else 0.0
    if a.bag == b.bag and a.named != b.named:
        opposites: tuple[str, str] | None = (a.name, b.name)  # gallon_to_liter, liter_to_gallon
    else:
        opposites = None
        if not a.opposed.isdisjoint(b.stems):  # most pairs: no opposite in sight
            opposites = _opposites(a.stems - b.stems, b.stems - a.stems)
    return (score / 2 if opposites else score), opposites


def _opposites(first: frozenset[str], second: frozenset[str]) -> tuple[str, str] | None:
    """A word only ``first`` has and one only ``second`` has that are opposites (or ``None``).

    The first such pair in alphabetical order, so the join and the reference agree.

    >>> _opposites(frozenset({"star"}), frozenset({"unstar", "repo"}))
    ('star', 'unstar')
    """
    found = [(x, y) for x in first for y in _partners(x) & second]
    return min(found) if found else None


@functools.lru_cache(maxsize=65536)
def _partners(word: str) -> frozenset[str]:
    """The words that are ``word``'s opposite: the lexicon's, and ``un``-, ``de``-, ``dis``-."""
    found = {other for pair in _OPPOSITES if word in pair for other in pair if other != word}
    found.update(prefix + word for prefix in _NEGATING)
    found.update(word[len(p) :] for p in _NEGATING if word.startswith(p) and len(word) > len(p))
    return frozenset(found)


def _pair(a: _Record, b: _Record, score: float, opposites: tuple[str, str] | None) -> SimilarPair:
    if b.name < a.name:
        a, b = b, a
    return SimilarPair(a.name, b.name, score, _only(a, b), _only(b, a), opposites)


def _only(a: _Record, b: _Record) -> tuple[str, ...]:
    """The words of ``a``'s description that ``b``'s lacks, as written, in order, once each."""
    other = {stem for stem, _ in b.words}
    return tuple(dict.fromkeys(surface for stem, surface in a.words if stem not in other))


def similar_pairs(tools: Mapping[str, str | ToolText], *, threshold: float) -> list[SimilarPair]:
    """Every pair of tools that scores at least ``threshold`` (0 < t <= 1), with what differs.

    ``tools`` maps each name to its description, or to a :class:`ToolText`
    (description and parameter names). Sorted by score (highest first), then
    by names. An empty description is never similar to anything.

    Raises:
        ValueError: ``threshold`` is not in (0, 1].
    """
    return _join(tools, threshold)[0]


def _join(tools: Mapping[str, str | ToolText], threshold: float) -> tuple[list[SimilarPair], int]:
    """The pairs, and how many candidate pairs were scored exactly (for the benchmark).

    PPJoin (Xiao et al. 2008) on weighted sets: records are visited from the
    lightest to the heaviest; each probes the index with its probe prefix
    (the rarest features until those left weigh less than ``t*|x|``) and then
    indexes its own, shorter, index prefix (until those left weigh less than
    ``2t/(1+t)*|x|``: a record only meets heavier ones later). A candidate is
    dropped as soon as the overlap it could still reach, the weight seen so
    far plus the lighter of the two suffixes from the shared feature on, is
    below the overlap a weighted Jaccard of ``t`` needs. The opposites rule
    only ever lowers a score, so the bound on the Jaccard stays a bound.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    records = sorted((r for r in _records(tools) if r.whole), key=lambda r: (r.total, r.name))
    frequency: Counter[str] = Counter(
        token for r in records for features in (r.whole, r.half) for token in features
    )
    rank = {token: i for i, token in enumerate(sorted(frequency, key=lambda t: (frequency[t], t)))}
    # A posting is (record, the weight of its features from this one on, its total weight).
    index: defaultdict[str, list[tuple[int, float, float]]] = defaultdict(list)
    ratio = threshold / (1 + threshold)
    found: list[SimilarPair] = []
    scored = 0
    for x, record in enumerate(records):
        half = record.half
        ordered = sorted(record.whole | half, key=rank.__getitem__)
        weights = [_PARAMETER_WEIGHT if token in half else 1.0 for token in ordered]
        suffix = _suffix_sums(weights)
        total = record.total
        smallest = threshold * total - _EPSILON  # also where the probe prefix ends
        overlap: dict[int, float] = {}
        for i, token in enumerate(ordered):
            rest = suffix[i]
            if rest < smallest:
                break  # past the probe prefix: the rest cannot reach t * |x| alone
            for y, other_rest, other_total in index.get(token, ()):
                seen = overlap.get(y, 0.0)
                if seen < 0 or other_total < smallest:
                    continue
                reachable = seen + (rest if rest < other_rest else other_rest)
                if reachable >= ratio * (total + other_total) - _EPSILON:
                    overlap[y] = seen + weights[i]
                else:
                    overlap[y] = -1.0
        indexed = 2 * ratio * total - _EPSILON
        for j, token in enumerate(ordered):
            if suffix[j] < indexed:
                break
            index[token].append((x, suffix[j], total))
        for y, seen in overlap.items():
            if seen <= 0:
                continue
            scored += 1
            other = records[y]
            # The Jaccard first, in line: the opposites rule only lowers it, and most
            # candidates fall short of t before it is worth scoring them in full.
            shared = len(record.whole & other.whole) + _PARAMETER_WEIGHT * len(half & other.half)
            if shared / (total + other.total - shared) < threshold - _EPSILON:
                continue
            score, opposites = _score(record, other)
            if score >= threshold - _EPSILON:
                found.append(_pair(record, other, score, opposites))
    return sorted(found, key=lambda p: (-p.score, p.first, p.second)), scored


def _suffix_sums(weights: list[float]) -> list[float]:
    sums = [0.0] * (len(weights) + 1)
    for i in range(len(weights) - 1, -1, -1):
        sums[i] = sums[i + 1] + weights[i]
    return sums


def naive_similar_pairs(
    tools: Mapping[str, str | ToolText], *, threshold: float
) -> list[SimilarPair]:
    """The same pairs as :func:`similar_pairs`, by scoring every pair (the reference)."""
    records = sorted((r for r in _records(tools) if r.whole), key=lambda r: r.name)
    found: list[SimilarPair] = []
    for i, a in enumerate(records):
        for b in records[i + 1 :]:
            score, opposites = _score(a, b)
            if score >= threshold - _EPSILON:
                found.append(_pair(a, b, score, opposites))
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
