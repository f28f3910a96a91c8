"""Every corpus of the evaluation by the name ``--corpus`` takes, in one place.

A record names its corpus (its ``meta``), and :func:`~veridic.evaluation.report.read_json`
finds its cases here, so a corpus added here is known to the command line and the
report alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from veridic.evaluation.corpus import Case, build_corpus
from veridic.evaluation.held_out import held_out_corpus
from veridic.evaluation.held_out_2 import second_held_out_corpus
from veridic.evaluation.held_out_3 import third_held_out_corpus
from veridic.evaluation.held_out_4 import fourth_held_out_corpus
from veridic.evaluation.held_out_5 import fifth_held_out_corpus
from veridic.evaluation.held_out_6 import sixth_held_out_corpus
from veridic.evaluation.held_out_7 import seventh_held_out_corpus

__all__ = ["CORPORA", "every_case"]

CORPORA: Final[Mapping[str, Callable[[], tuple[Case, ...]]]] = {
    "main": build_corpus,
    "held-out": held_out_corpus,
    "held-out-2": second_held_out_corpus,
    "held-out-3": third_held_out_corpus,
    "held-out-4": fourth_held_out_corpus,
    "held-out-5": fifth_held_out_corpus,
    "held-out-6": sixth_held_out_corpus,
    "held-out-7": seventh_held_out_corpus,
}
"""``main`` was read while the modes were designed; ``held-out`` judged that design
once and has been read since; ``held-out-2`` judged it again and has been read since
(two candidates were tried on it); ``held-out-3`` judged the default and a candidate, and
has been read since (the candidates of 2026-12-06 were tried on it); ``held-out-4`` judged
the default and the candidate chosen then, and has been read since; ``held-out-5``,
written to hold the kinds of order this model obeys, judged the default and that
candidate again, and has been read since; ``held-out-6``, built like the fifth, judged
once whether that candidate protects better than the default it would replace (not by
the margin its rule asked: 12 against 4 discordant pairs, p = 0.077), and has been read
since; ``held-out-7``, written after a stricter rule was committed (p < 0.025), asked that
question a second and last time on this model (27 against 1, p = 2.2e-07: the
candidate became the default), and has been read since."""


def every_case() -> dict[str, Case]:
    """Every case of every corpus by its id (ids are unique across corpora)."""
    return {case.id: case for corpus in CORPORA.values() for case in corpus()}
