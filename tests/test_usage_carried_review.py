"""A second read of what a usage carries through a sum and a pause (test_usage_carried.py).

Attacks on the sum from ``Usage()``, on a paused run of format ``veridic-paused-run/5``
edited where it was kept or built by hand, and on both stores' paused-run paths. The
tests marked "Was:" failed on the code before their fix; the others pin properties the
first tests left open.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_review_resume6 import make_registry, system_part
from test_usage_carried import _ANSWERED, _exactly, _paused, _with

from veridic import (
    ApprovalPolicy,
    ModelGateway,
    PausedRun,
    PostgresAuditSink,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
)
from veridic.providers import Completion, Usage

PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")

# --- 1. the sum: an identity for usages only, commutative and associative -----------------

_NEAR_ZERO = st.builds(  # small counts, so that the zero Usage() and usages of 0 tokens come up
    lambda counts, stated: Usage(
        counts[0],
        counts[1],
        cache_read_input_tokens=counts[2],
        cache_creation_input_tokens=counts[3],
        reasoning_output_tokens=counts[4],
        stated=stated,
    ),
    st.tuples(*[st.integers(0, 2)] * 5),
    st.none() | st.frozensets(st.sampled_from(PARTS)),
)
_SUMMANDS = st.just(Usage()) | _NEAR_ZERO


@given(_SUMMANDS, _SUMMANDS, _SUMMANDS)
def test_a_sum_is_the_same_whatever_the_order_and_grouping_stated_included(
    a: Usage, b: Usage, c: Usage
) -> None:
    # test_usage_carried compares the counts and what each part reads; this compares
    # ``stated`` too (None or the frozenset), which a paused run of format 5 keeps as it is.
    assert _exactly(a + b) == _exactly(b + a)
    assert _exactly((a + b) + c) == _exactly(a + (b + c))


@pytest.mark.parametrize("other", [None, 5, 0.0, "12"])
def test_a_usage_added_to_what_is_not_a_usage_is_a_type_error(other: object) -> None:
    # Was: the zero Usage() gave back whatever it was added to, so Usage() + None was None
    # and sum([None], Usage()) None without a word; Usage(1, 1) + None an AttributeError.
    with pytest.raises(TypeError, match="unsupported operand"):
        Usage() + other  # type: ignore[operator]  # the attack: a sum of what is no usage
    with pytest.raises(TypeError, match="unsupported operand"):
        Usage(1, 1) + other  # type: ignore[operator]  # the attack, as above
    with pytest.raises(TypeError, match="unsupported operand"):
        sum([other], Usage())  # type: ignore[type-var]  # the attack, as above


def test_an_answers_usage_of_no_token_that_states_its_parts_is_not_the_zero_usage() -> None:
    # An answer's usage says which parts it stated, even when it counts no token (the
    # docstring of Usage.__add__): a sum keeps that, and states only what every answer did.
    cached = Usage(10, 5, cache_read_input_tokens=8, stated=frozenset({PARTS[0]}))
    said_none = Usage(0, 0, stated=frozenset())
    assert (said_none + cached).part(PARTS[0]) is None
    assert (cached + said_none).part(PARTS[0]) is None
    assert (Usage(0, 0, stated=frozenset(PARTS)) + cached).part(PARTS[0]) == 8


# --- 2. a resumed run sums its usage as a run that did not pause ----------------------------

_CALLS = [("c1", "get_order", '{"order_id": 1}'), ("c2", "refund", '{"order_id": 2}')]


class _Using(ScriptedProvider):
    """An application's own adapter: its answers carry the given usages, in turn."""

    def __init__(self, script: list[dict[str, object]], usages: Sequence[Usage]) -> None:
        super().__init__(script)
        self._usages = list(usages)

    def parse(self, response: object) -> Completion:
        return dataclasses.replace(super().parse(response), usage=self._usages.pop(0))


def _not_paused(usages: Sequence[Usage]) -> RunResult[None]:
    view = make_registry([]).view()
    script: list[dict[str, object]] = [{"tool_calls": _CALLS}, {"text": "Refunded."}]
    return ModelGateway(_Using(script, usages), audit=SQLiteAuditSink(":memory:")).run(
        system_part(view).user("Refund 2."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        confirm=lambda request: True,
    )


def _paused_then_resumed(usages: Sequence[Usage]) -> RunResult[None]:
    audit = SQLiteAuditSink(":memory:")
    view = make_registry([]).view()
    first = ModelGateway(_Using([{"tool_calls": _CALLS}], usages[:1]), audit=audit).run(
        system_part(view).user("Refund 2."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert first.paused is not None
    kept = PausedRun.from_json(first.paused.to_json())
    provider = _Using([{"text": "Refunded."}], usages[1:])
    return ModelGateway(provider, audit=audit).resume(
        kept, system_part(view), view, policy=ApprovalPolicy(view), answers={"c2": True}
    )


@settings(max_examples=40)
@given(_ANSWERED, _ANSWERED)
def test_a_resumed_runs_usage_is_exactly_that_of_the_run_had_it_not_paused(
    before: Usage, after: Usage
) -> None:
    # Usages built without ``stated`` too (an adapter of one's own): format 4 read them
    # back as counts, and the resumed sum stated what the run that did not pause did not.
    unpaused, resumed = _not_paused([before, after]), _paused_then_resumed([before, after])
    assert unpaused.usage is not None
    assert resumed.usage is not None
    assert _exactly(resumed.usage) == _exactly(unpaused.usage)


# --- 3. a paused run edited where it was kept, or built by hand -----------------------------


def _with_raw(text: str, key: str, raw: str) -> str:
    """``text`` with ``key``'s value written as ``raw`` (JSON that Python would not write)."""
    document = json.loads(text)
    document[key] = "@@raw@@"
    return json.dumps(document).replace('"@@raw@@"', raw)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("1" + "0" * 400, "'1000"),  # was: an OverflowError, not a refusal
        ("NaN", "'NaN'"),
        ("-Infinity", "'-Infinity'"),
        ("1e400", "'Infinity'"),
        ("-0.5", "'-0.5'"),
        ('"5"', "'\"5\"'"),
        ("[]", "'[]'"),
    ],
)
def test_a_paused_run_whose_seconds_were_edited_is_refused_naming_the_key(
    raw: str, shown: str
) -> None:
    text = _with_raw(_paused(SQLiteAuditSink(":memory:")).to_json(), "seconds", raw)
    with pytest.raises(VeridicError, match=re.escape(f"'seconds' is {shown}")):
        PausedRun.from_json(text)


@pytest.mark.parametrize("value", ["A" * 64, "a" * 63, "a" * 65, " " + "a" * 63, 5, None])
def test_a_paused_run_whose_options_digest_was_edited_is_refused_naming_the_key(
    value: object,
) -> None:
    text = _with(_paused(SQLiteAuditSink(":memory:")).to_json(), options_sha256=value)
    with pytest.raises(VeridicError, match="'options_sha256' is"):
        PausedRun.from_json(text)


@pytest.mark.parametrize(
    "changed",
    [
        {"seconds": math.nan},  # was: kept; a resume then never stopped for its seconds
        {"seconds": -30.0},  # was: kept; a resume then had 30 seconds more
        {"seconds": math.inf},
        {"seconds": True},
        {"seconds": "12"},  # was: kept; a resume then failed with a TypeError
        {"options_sha256": "not a digest"},  # was: kept, and carried by the resumed reply
        {"options_sha256": "A" * 64},
    ],
)
def test_a_paused_run_built_with_what_from_json_refuses_is_refused_when_built(
    changed: dict[str, object],
) -> None:
    # A paused run is kept as text: one that to_json() writes and from_json() refuses
    # could be saved and claimed, and then never resumed.
    (key,) = changed
    paused = _paused(SQLiteAuditSink(":memory:"))
    with pytest.raises(VeridicError, match=re.escape(f"PausedRun({key}=")):
        dataclasses.replace(paused, **changed)  # type: ignore[arg-type]  # the attack


@given(st.none() | st.floats() | st.integers(-(2**1100), 2**1100))
def test_a_paused_run_is_built_only_with_seconds_it_reads_back_exactly(seconds: object) -> None:
    try:
        built = dataclasses.replace(_one_paused(), seconds=seconds)  # type: ignore[arg-type]
    except VeridicError:
        assert seconds is not None
        return
    read = PausedRun.from_json(built.to_json()).seconds
    assert read == (None if seconds is None else float(cast(float, seconds)))


@functools.cache
def _one_paused() -> PausedRun:
    return _paused(SQLiteAuditSink(":memory:"))


def test_a_paused_run_whose_summed_usage_passes_64_bits_reads_back() -> None:
    # Was: each answer's count fits in 64 bits (the gateway checks it), but format 5 read
    # the run's sum only up to 2**63 - 1, so such a run paused and could not be resumed.
    big = {"input_tokens": 2**62 + 2**61, "output_tokens": 1}
    view = make_registry([]).view()
    script: list[dict[str, object]] = [
        {"tool_calls": [_CALLS[0]], "usage": big},
        {"tool_calls": [_CALLS[1]], "usage": big},
    ]
    result = ModelGateway(ScriptedProvider(script), audit=SQLiteAuditSink(":memory:")).run(
        system_part(view).user("Refund 2."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert result.paused is not None
    kept = PausedRun.from_json(result.paused.to_json())
    assert kept.usage is not None
    assert kept.usage.input_tokens == 2 * (2**62 + 2**61) > 2**63 - 1


# --- 4. both stores keep what format 5 added ---------------------------------------------------

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _parts(usage: Usage | None) -> tuple[object, ...]:
    assert usage is not None
    return _exactly(usage)


def test_a_paused_run_claimed_from_either_store_keeps_its_digest_seconds_and_stated_parts(
    store: Store,
) -> None:
    # PausedRun's == reads a usage's two counts only: compare what it states, part by part.
    reasoned: Mapping[str, int] = {"input_tokens": 10, "output_tokens": 5, PARTS[2]: 0}
    paused = dataclasses.replace(_paused(SQLiteAuditSink(":memory:"), usage=reasoned), seconds=2.5)
    store.save_paused(paused)
    claimed = store.claim_paused(paused.request_id)
    assert claimed is not None
    assert len(claimed.options_sha256) == 64
    assert claimed.options_sha256 == paused.options_sha256
    assert claimed.seconds == 2.5
    assert _parts(claimed.usage) == _parts(paused.usage)
    assert claimed.usage is not None
    assert [claimed.usage.part(part) for part in PARTS] == [None, None, 0]
