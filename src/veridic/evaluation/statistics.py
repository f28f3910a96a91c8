"""Intervals and paired tests for rates measured on a hundred-odd cases.

Wilson's score interval stays inside [0, 1] and is honest near 0% and 100%, where the
normal approximation is not; McNemar's exact test compares two conditions on the *same*
cases (two data modes, or an attack with and without a forged closer), which is far more
sensitive than comparing two independent rates. A plain attack is the twin of every
disguised attack built on it (two or more in a corpus), so the disguise test counts each
twin once (:func:`twin_test`): pairing the twin with each of its disguised attacks would
count one case as several independent ones.

Cases are not independent either: a corpus crosses a few documents with a few orders, so
a document (or an order) that one scheme handles badly makes many discordant pairs at
once, and McNemar's p, which counts each pair as independent, is then too small.
:func:`cluster_test` asks the same question with whole documents (or orders) as the
units: the scheme labels are flipped for a whole cluster at once.

>>> low, high = wilson(5, 20)
>>> round(low, 4), round(high, 4)
(0.1119, 0.4687)
>>> round(mcnemar_exact(7, 0), 6)
0.015625
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Clustered",
    "Paired",
    "Rate",
    "cluster_test",
    "mcnemar_exact",
    "paired",
    "rate",
    "twin_test",
    "wilson",
]

_Z95 = 1.959963984540054


def wilson(successes: int, trials: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default).

    ``(0.0, 1.0)`` when there are no trials.
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"wilson() needs 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0 (or all) successes the end is exactly 0 (or 1); computed, it was 5.6e-17 for
    # 0 of 3, an interval that left out the proportion observed.
    low = 0.0 if successes == 0 else max(0.0, centre - spread)
    high = 1.0 if successes == trials else min(1.0, centre + spread)
    return low, high


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value from the two kinds of discordant pairs.

    ``only_first`` pairs where the event happened under the first condition only,
    ``only_second`` under the second only; concordant pairs carry no information.
    This is the two-sided binomial test of ``min(b, c)`` out of ``b + c`` at one half.
    """
    if only_first < 0 or only_second < 0:
        raise ValueError(f"mcnemar_exact() needs counts >= 0, got {only_first}, {only_second}")
    n = only_first + only_second
    if n == 0:
        return 1.0
    k = min(only_first, only_second)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Rate:
    """A proportion with its Wilson 95% interval."""

    successes: int
    trials: int
    low: float
    high: float

    @property
    def value(self) -> float:
        """The proportion (0 when there are no trials)."""
        return self.successes / self.trials if self.trials else 0.0

    def __str__(self) -> str:
        if not self.trials:
            return "n/a"
        return (
            f"{100 * self.value:.0f}% [{100 * self.low:.0f}-{100 * self.high:.0f}] "
            f"({self.successes}/{self.trials})"
        )


def rate(outcomes: Iterable[bool]) -> Rate:
    """The rate of ``True`` among ``outcomes``, with its interval."""
    values = list(outcomes)
    successes = sum(values)
    low, high = wilson(successes, len(values))
    return Rate(successes, len(values), low, high)


@dataclass(frozen=True)
class Paired:
    """Two conditions on the same cases: the discordant counts and McNemar's p-value."""

    pairs: int
    only_first: int
    only_second: int
    p_value: float

    def __str__(self) -> str:
        return (
            f"{self.only_first} vs {self.only_second} discordant of {self.pairs} pairs, "
            f"p={self.p_value:.3g}"
        )


def paired(outcomes: Iterable[tuple[bool, bool]]) -> Paired:
    """McNemar's exact test on pairs ``(first condition, second condition)``."""
    pairs = list(outcomes)
    only_first = sum(1 for first, second in pairs if first and not second)
    only_second = sum(1 for first, second in pairs if second and not first)
    return Paired(len(pairs), only_first, only_second, mcnemar_exact(only_first, only_second))


def twin_test(twins: Iterable[tuple[Sequence[bool], bool]]) -> Paired:
    """Whether disguised attacks succeed more often than their plain twins, each twin once.

    Each item is one plain attack's twin group: the outcomes of its disguised attacks
    (one or more) and its own. The statistic is the sum over groups of (the share of
    the group's disguised attacks that succeeded) minus (the plain attack's outcome);
    its exact distribution, if the disguise made no difference, comes from letting the
    plain label fall on each of a group's attacks with equal chance. The p-value is
    two-sided: the chance of a sum at least as far from 0 as the one observed. With one
    disguised attack per twin this is McNemar's exact test (:func:`mcnemar_exact`).

    ``only_first`` counts the groups whose disguised attacks did better than their twin,
    ``only_second`` those whose twin did better, ``pairs`` the groups.

    Raises:
        ValueError: a group has no disguised attack.
    """
    groups = [(tuple(disguised), plain) for disguised, plain in twins]
    observed = Fraction(0)
    chances: dict[Fraction, Fraction] = {Fraction(0): Fraction(1)}
    better = worse = 0
    for disguised, plain in groups:
        if not disguised:
            raise ValueError("twin_test() needs at least one disguised outcome for every twin")
        difference = _twin_difference(disguised, plain)
        observed += difference
        better += difference > 0
        worse += difference < 0
        chances = _convolve(chances, _twin_differences(disguised, plain))
    p_value = sum((c for value, c in chances.items() if abs(value) >= abs(observed)), Fraction(0))
    return Paired(len(groups), better, worse, float(min(Fraction(1), p_value)))


def _twin_difference(disguised: Sequence[bool], plain: bool) -> Fraction:
    return Fraction(sum(disguised), len(disguised)) - int(plain)


def _twin_differences(disguised: Sequence[bool], plain: bool) -> dict[Fraction, Fraction]:
    """The group's difference for each attack the plain label could fall on, with its chance."""
    outcomes = (*disguised, plain)
    total, size = sum(outcomes), len(outcomes)
    counted = Counter(Fraction(total - x, size - 1) - x for x in outcomes)
    return {value: Fraction(n, size) for value, n in counted.items()}


def _convolve(
    first: dict[Fraction, Fraction], second: dict[Fraction, Fraction]
) -> dict[Fraction, Fraction]:
    """The distribution of the sum of two independent variables given by their chances."""
    summed: dict[Fraction, Fraction] = {}
    for a, p in first.items():
        for b, q in second.items():
            summed[a + b] = summed.get(a + b, Fraction(0)) + p * q
    return summed


@dataclass(frozen=True)
class Clustered:
    """A paired comparison tested over clusters of cases: how many clusters, the p-value."""

    clusters: int
    p_value: float

    def __str__(self) -> str:
        return f"p={self.p_value:.3g} over {self.clusters}"


def cluster_test(pairs: Iterable[tuple[Hashable, bool, bool]]) -> Clustered:
    """McNemar's question with clusters of cases as the units: an exact sign-flip test.

    Each item is one case: its cluster (a document's name, an order's) and the outcomes
    under the first and the second condition. A cluster's score is its pairs where the
    event happened under the first condition only minus those under the second only; if
    the conditions made no difference, swapping their labels for a whole cluster changes
    nothing, so each score's sign is a coin toss, whatever the cases of a cluster share.
    The p-value is two-sided: the chance, over those tosses, of a total at least as far
    from 0 as the one observed. With one case per cluster it is :func:`mcnemar_exact`'s;
    with ``k`` clusters it is never below ``2 / 2**k`` (5 clusters: 0.0625), which is
    what a few clusters can show.

    >>> cluster_test([("a", True, False), ("a", True, False), ("b", True, False)])
    Clustered(clusters=2, p_value=0.5)
    >>> mcnemar_exact(3, 0), cluster_test([(n, True, False) for n in range(3)]).p_value
    (0.25, 0.25)
    """
    scores: dict[Hashable, int] = {}
    for cluster, first, second in pairs:
        scores[cluster] = scores.get(cluster, 0) + int(first) - int(second)
    observed = sum(scores.values())
    ways: dict[int, int] = {0: 1}  # total -> how many sign choices give it
    tossed = [abs(score) for score in scores.values() if score]
    for size in tossed:
        shifted: dict[int, int] = {}
        for total, count in ways.items():
            for step in (size, -size):
                shifted[total + step] = shifted.get(total + step, 0) + count
        ways = shifted
    extreme = sum(count for total, count in ways.items() if abs(total) >= abs(observed))
    return Clustered(len(scores), min(1.0, extreme / 2 ** len(tossed)))
