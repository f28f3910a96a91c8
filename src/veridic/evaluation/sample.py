"""The cases of a small run (``--limit N``): attacks and clean cases alike, the same each time.

A corpus lists its clean cases first, so the first N cases of a smoke test were clean
cases alone (up to 16 on the main corpus): the run measured utility and said nothing
about attacks, which is what a user trying the tool on their model wants to see. A
sample takes half of each kind, spread evenly over the corpus (documents, orders,
disguises, placements), and every scheme of the run asks the same sample, so the paired
tests still pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from veridic.evaluation.corpus import Case

__all__ = ["described", "sample", "shared"]


def shared(lists: Sequence[Sequence[Case]]) -> list[Case]:
    """The cases every one of ``lists`` holds, in the order of the first.

    Schemes of other strides (``encode/4``) run other attacks; a sample drawn from the
    cases they all run gives each scheme the same ones.
    """
    if not lists:
        return []
    common = set.intersection(*({case.id for case in cases} for cases in lists))
    return [case for case in lists[0] if case.id in common]


def _spread(cases: Sequence[Case], count: int) -> list[Case]:
    """``count`` of ``cases`` at evenly spaced positions, the first one included."""
    return [cases[index * len(cases) // count] for index in range(count)] if count else []


def sample(cases: Sequence[Case], limit: int) -> list[Case]:
    """``limit`` of ``cases``: half attacks (the odd one too) and half clean cases.

    Each half is spread evenly over its kind; a kind with too few cases leaves the rest
    to the other. The sample keeps the corpus's order (consecutive prompts share their
    system message) and is the same for the same cases and limit.

    >>> from veridic.evaluation.corpora import CORPORA
    >>> [case.kind for case in sample(CORPORA["main"](), 4)]
    ['clean', 'clean', 'attack', 'attack']
    """
    if limit >= len(cases):
        return list(cases)
    attacks = [case for case in cases if case.kind == "attack"]
    clean = [case for case in cases if case.kind != "attack"]
    wanted = min(len(attacks), limit - limit // 2)
    wanted = max(wanted, limit - len(clean))
    chosen = {case.id for case in _spread(attacks, wanted)}
    chosen |= {case.id for case in _spread(clean, limit - wanted)}
    return [case for case in cases if case.id in chosen]


def described(chosen: Sequence[Case], cases: Sequence[Case]) -> str:
    """What a sample holds, for the record's setup and the log.

    >>> from veridic.evaluation.corpora import CORPORA
    >>> described(sample(CORPORA["main"](), 4), CORPORA["main"]())
    '2 of 16 clean cases and 2 of 120 attacks, spread evenly over the corpus'
    """

    def count(of: Sequence[Case], kind: str) -> int:
        return sum(1 for case in of if (case.kind == "attack") == (kind == "attack"))

    return (
        f"{count(chosen, 'clean')} of {count(cases, 'clean')} clean cases and "
        f"{count(chosen, 'attack')} of {count(cases, 'attack')} attacks, spread evenly "
        "over the corpus"
    )
