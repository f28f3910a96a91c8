"""What a usage carries through a sum, a span and a pause: which parts the provider stated.

Three leftovers of ``Usage.stated``. Each test failed before its fix:

1. the zero ``Usage()`` stated no part, so ``sum(usages, Usage())`` lost every stated part;
2. a chat or agent span left out a part the provider stated as 0 (``veridic audit``
   shows it);
3. a paused run (format ``veridic-paused-run/4``) kept neither the request options digest
   nor which parts of its usage were stated, and a resume counted ``Limits(seconds=...)``
   from 0.
"""

from __future__ import annotations

from functools import reduce

from hypothesis import example, given
from hypothesis import strategies as st
from test_usage_stated import _USAGES

from veridic.providers import Usage

PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")

# --- 1. the zero Usage() is the identity of + ------------------------------------------------


def _exactly(usage: Usage) -> tuple[object, ...]:
    """Every field of ``usage`` and each part as it reads (``==`` compares the totals only)."""
    counts = (usage.input_tokens, usage.output_tokens, *(getattr(usage, p) for p in PARTS))
    return (*counts, usage.stated, *(usage.part(p) for p in PARTS))


def test_a_sum_of_usages_from_the_zero_usage_keeps_the_parts_they_stated() -> None:
    # Was: Usage() stated no part, and the sum stated none of the cache reads.
    stated = frozenset({"cache_read_input_tokens"})
    usages = [Usage(100, 5, stated=stated), Usage(50, 5, cache_read_input_tokens=8, stated=stated)]
    total = sum(usages, Usage())
    assert total.part("cache_read_input_tokens") == 8
    assert total.part("reasoning_output_tokens") is None


@given(_USAGES)
def test_the_zero_usage_added_on_either_side_gives_the_usage_exactly(usage: Usage) -> None:
    assert _exactly(Usage() + usage) == _exactly(usage)
    assert _exactly(usage + Usage()) == _exactly(usage)


@given(_USAGES, _USAGES, _USAGES)
@example(  # two usages built by hand, one broken down: their sum read as if both were
    Usage(1, 1),
    Usage(1, 1, cache_read_input_tokens=1),
    Usage(1, 1, stated=frozenset(PARTS)),
)
def test_a_sum_states_the_same_parts_however_it_is_grouped(a: Usage, b: Usage, c: Usage) -> None:
    left, right = (a + b) + c, a + (b + c)
    assert [left.part(p) for p in PARTS] == [right.part(p) for p in PARTS]
    assert _exactly(left)[:5] == _exactly(right)[:5]


@given(st.lists(_USAGES, max_size=5))
def test_a_sum_from_the_zero_usage_states_what_every_usage_stated(usages: list[Usage]) -> None:
    total = sum(usages, Usage())
    if usages:
        assert _exactly(total) == _exactly(reduce(Usage.__add__, usages))
    counted = [usage for usage in usages if _exactly(usage) != _exactly(Usage())]
    for part in PARTS:
        stated_by_all = all(usage.part(part) is not None for usage in counted)
        assert (total.part(part) is not None) == (stated_by_all and bool(counted))
