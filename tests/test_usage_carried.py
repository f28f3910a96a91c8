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

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_providers import VIEW, first_prompt
from test_review_resume6 import make_registry, paused_run, resume, system_part
from test_usage_stated import _USAGES

import veridic
from veridic import (
    ApprovalPolicy,
    Composer,
    Limits,
    ModelGateway,
    PausedRun,
    RunLimitError,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
    instruction,
)
from veridic.gateway import ModelCallRecord
from veridic.providers import Completion, Usage
from veridic.run.telemetry import instrumented

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


# --- 2. a span shows a part stated as 0, and leaves out a part not stated --------------------

_SPAN_PARTS = {
    "cache_read_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_creation_input_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_output_tokens": "gen_ai.usage.reasoning.output_tokens",
}
_STATED_ZERO = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    with instrumented(tracing):
        yield exporter


def _shown_parts(span: ReadableSpan) -> dict[str, object]:
    attributes = dict(span.attributes or {})
    return {part: attributes[name] for part, name in _SPAN_PARTS.items() if name in attributes}


def test_a_chat_span_shows_a_cache_read_stated_as_0_and_no_part_left_unstated(
    spans: InMemorySpanExporter,
) -> None:
    # Was: a part of 0 was left out, though the provider said no token came from the cache.
    answers = ScriptedProvider([{"text": "Hi.", "usage": _STATED_ZERO}])
    gateway = ModelGateway(answers, audit=SQLiteAuditSink(":memory:"))
    gateway.send(first_prompt(), VIEW, request_id="req-1")
    (chat,) = spans.get_finished_spans()
    assert _shown_parts(chat) == {"cache_read_input_tokens": 0}


def test_a_run_span_shows_the_parts_every_answer_stated_0_included(
    spans: InMemorySpanExporter,
) -> None:
    script: list[dict[str, object]] = [
        {"tool_calls": [("c1", "get_weather", {"city": "Oslo"})], "usage": _STATED_ZERO},
        {"text": "Sunny.", "usage": {**_STATED_ZERO, "reasoning_output_tokens": 0}},
    ]
    composer = Composer().system(instruction("You report the weather.")).user("Oslo?")
    ModelGateway(ScriptedProvider(script), audit=SQLiteAuditSink(":memory:")).run(
        composer, VIEW, policy=ApprovalPolicy(VIEW), request_id="req-1"
    )
    (agent,) = (span for span in spans.get_finished_spans() if span.name == "invoke_agent")
    assert _shown_parts(agent) == {"cache_read_input_tokens": 0}


_ANSWERED = st.builds(  # a usage an answer may give: no part past its total
    lambda parts, more, stated: Usage(
        parts[0] + parts[1] + more[0],
        parts[2] + more[1],
        cache_read_input_tokens=parts[0],
        cache_creation_input_tokens=parts[1],
        reasoning_output_tokens=parts[2],
        stated=stated,
    ),
    st.tuples(*[st.integers(0, 2**20)] * 3),
    st.tuples(*[st.integers(0, 2**20)] * 2),
    st.none() | st.frozensets(st.sampled_from(PARTS)),
)


@given(_ANSWERED)
def test_a_span_shows_exactly_the_parts_a_usage_states(usage: Usage) -> None:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    provider = _Answering(
        [{"text": "Hi.", "usage": {"input_tokens": 1, "output_tokens": 1}}], usage=usage
    )
    with instrumented(tracing):
        gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
        gateway.send(first_prompt(), VIEW, request_id="req-1")
    (chat,) = exporter.get_finished_spans()
    stated = {part: usage.part(part) for part in PARTS if usage.part(part) is not None}
    assert _shown_parts(chat) == stated


class _Answering(ScriptedProvider):
    """An application's own adapter: its answers carry the usage it was given."""

    def __init__(self, script: list[dict[str, object]], *, usage: Usage) -> None:
        super().__init__(script)
        self._usage = usage

    def parse(self, response: object) -> Completion:
        return dataclasses.replace(super().parse(response), usage=self._usage)


def test_a_resumed_runs_span_shows_the_parts_of_its_own_answers_as_stated(
    spans: InMemorySpanExporter,
) -> None:
    # Was: the resume's span rebuilt its own usage without ``stated``, so a cache read of
    # 8 made it show a cache write and reasoning of 0 that no answer stated.
    audit = SQLiteAuditSink(":memory:")
    view = make_registry([]).view()
    paused = paused_run(audit, usage=_STATED_ZERO)
    after = {"text": "Done.", "usage": {**_STATED_ZERO, "cache_read_input_tokens": 8}}
    resume(
        ModelGateway(ScriptedProvider([after]), audit=audit),
        paused,
        system_part(view),
        view,
        {"c2": True, "c3": True},
    )
    first, then = (span for span in spans.get_finished_spans() if span.name == "invoke_agent")
    assert _shown_parts(first) == {"cache_read_input_tokens": 0}
    assert _shown_parts(then) == {"cache_read_input_tokens": 8}


# --- 3. a paused run keeps the options digest, the stated parts and the seconds spent ---------

_CALLS = [
    ("c1", "get_order", '{"order_id": 1}'),
    ("c2", "refund", '{"order_id": 2}'),
    ("c3", "refund", '{"order_id": 3}'),
]
_REASONED = {"input_tokens": 10, "output_tokens": 5, "reasoning_output_tokens": 3}
_CACHED = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 8}
_OPTIONS = {"temperature": 0.2}


def _paused(
    audit: SQLiteAuditSink, *, limits: Limits | None = None, usage: Mapping[str, int] = _REASONED
) -> PausedRun:
    """A run paused for the refunds, sent with options, kept as text and read back."""
    view = make_registry([]).view()
    result = ModelGateway(
        ScriptedProvider([{"tool_calls": _CALLS, "usage": usage}], options=_OPTIONS), audit=audit
    ).run(
        system_part(view).user("Refund 2 and 3."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
        limits=limits or Limits(),
    )
    assert result.paused is not None
    return PausedRun.from_json(result.paused.to_json())


def _resumed(
    audit: SQLiteAuditSink,
    paused: PausedRun,
    answers: Mapping[str, bool],
    script: list[dict[str, object]] | None = None,
    ran: list[str] | None = None,
) -> RunResult[None]:
    view = make_registry([] if ran is None else ran).view()
    provider = ScriptedProvider(script or [], options=_OPTIONS)
    return ModelGateway(provider, audit=audit).resume(
        paused, system_part(view), view, policy=ApprovalPolicy(view), answers=answers
    )


def _parts_of(usage: Usage | None) -> list[int | None]:
    assert usage is not None
    return [usage.part(part) for part in PARTS]


def test_a_resumed_run_states_the_parts_its_recorded_answers_all_stated() -> None:
    # Was: format 4 kept the counts, not which parts were stated: the first answer's
    # reasoning of 3 read back as every part stated, and the resumed run's sum stated the
    # cache read of the answer after the pause, which the first answer never stated.
    audit = SQLiteAuditSink(":memory:")
    result = _resumed(
        audit,
        _paused(audit),
        {"c2": True, "c3": True},
        [{"text": "Refunded.", "usage": {**_CACHED, "reasoning_output_tokens": 1}}],
    )
    recorded = [reply.usage for reply in audit.model_replies("req-1")]
    assert None not in recorded
    as_if_not_paused = sum((usage for usage in recorded if usage is not None), Usage())
    assert _parts_of(result.usage) == _parts_of(as_if_not_paused) == [None, None, 4]


def test_a_resume_that_pauses_again_keeps_the_options_digest_of_the_call_that_paused() -> None:
    # Was: the resumed reply's options_sha256 was "", and so was the second paused run's.
    audit = SQLiteAuditSink(":memory:")
    paused = _paused(audit)
    (call,) = audit.model_calls("req-1")
    assert len(call.options_sha256) == 64
    assert paused.options_sha256 == call.options_sha256
    again = _resumed(audit, paused, {"c2": True})  # c3 left unanswered: it waits again
    assert again.paused is not None
    assert again.reply.options_sha256 == call.options_sha256
    kept = PausedRun.from_json(again.paused.to_json())
    assert kept.options_sha256 == call.options_sha256
    assert kept.usage is not None
    assert _parts_of(kept.usage) == _parts_of(paused.usage)


def test_a_resume_counts_the_seconds_the_run_spent_before_it_paused() -> None:
    # Was: the seconds limit counted from the resume, so a run that had spent its minute
    # before the pause got another one after it.
    audit = SQLiteAuditSink(":memory:")
    paused = _paused(audit, limits=Limits(seconds=60))
    assert paused.seconds is not None
    assert paused.seconds >= 0
    spent = PausedRun.from_json(_with(paused.to_json(), seconds=61.5))
    ran: list[str] = []
    with pytest.raises(RunLimitError) as stopped:
        _resumed(audit, spent, {"c2": True, "c3": True}, [{"text": "Refunded."}], ran)
    assert stopped.value.limit == "seconds"
    assert stopped.value.reached >= 61.5
    assert ran == ["refund 2", "refund 3"]  # approved before the limit: they ran, as unpaused


def test_a_run_that_pauses_twice_counts_the_seconds_of_both_parts() -> None:
    audit = SQLiteAuditSink(":memory:")
    spent = PausedRun.from_json(_with(_paused(audit).to_json(), seconds=30.0))
    again = _resumed(audit, spent, {"c2": True})
    assert again.paused is not None
    assert again.paused.seconds is not None
    assert again.paused.seconds >= 30.0


def _with(text: str, **changed: object) -> str:
    document = json.loads(text)
    document.update(changed)
    return json.dumps(document)


# --- format 4 still reads; a later format is refused naming the release that wrote it ---------

_FORMAT_4 = Path(__file__).parent / "fixtures" / "paused-run-4.json"
"""A paused run as veridic 0.1.0 wrote it in format 4 (before this change), from a request
sent with ``temperature=0.2`` whose answer stated its reasoning of 3 only."""


def test_a_paused_run_of_format_4_still_resumes_with_what_it_did_not_keep_absent() -> None:
    paused = PausedRun.from_json(_FORMAT_4.read_text(encoding="utf-8"))
    assert paused.options_sha256 == ""  # not kept
    assert paused.seconds is None  # not kept: the seconds limit counts from the resume
    assert paused.paused_at is None  # not kept: the caller who knows dates it
    assert paused.usage == Usage(10, 5)
    paused = dataclasses.replace(paused, paused_at=datetime.now(UTC))
    audit = SQLiteAuditSink(":memory:")
    # The store the run wrote to holds the model call that paused (a resume asks for it).
    audit.write_model_call(
        ModelCallRecord(
            time=1.0,
            request_id=paused.request_id,
            api="scripted",
            model=paused.model,
            prompt_sha256=paused.prompt_sha256,
            tools_sha256=paused.tools_sha256,
            tools=("refund",),
            instruction_spans=(),
            streamed=False,
        )
    )
    ran: list[str] = []
    # Answered by the digests the dialog showed then: made without a time, they still hold.
    answers = {approval.digest: True for approval in paused.approvals}
    result = _resumed(audit, paused, answers, [{"text": "Refunded."}], ran)
    assert ran == ["refund 2", "refund 3"]
    assert result.text == "Refunded."


def test_a_paused_run_of_format_4_on_a_store_without_its_trace_is_refused_with_advice() -> None:
    """A paused run an earlier release wrote resumes on the store it wrote to; one with no
    trace of it (neither the model call that paused nor its call c1's record) is refused,
    naming the store, before anything runs, and the error says where to resume instead."""
    paused = PausedRun.from_json(_FORMAT_4.read_text(encoding="utf-8"))
    ran: list[str] = []
    with pytest.raises(VeridicError, match="holds no record of") as refused:
        _resumed(SQLiteAuditSink(":memory:"), paused, {"c2": True, "c3": True}, ran=ran)
    message = str(refused.value)
    assert "SQLiteAuditSink(':memory:')" in message
    assert "nor of the 1 tool call it made before them" in message
    assert "calls=" in message
    assert "ask the user anew" in message
    assert ran == []


def test_a_paused_run_of_a_later_format_is_refused_naming_the_release_that_wrote_it() -> None:
    document = json.loads(_paused(SQLiteAuditSink(":memory:")).to_json())
    assert document["format"] == "veridic-paused-run/7"
    assert document["release"] == f"veridic {veridic.__version__}"
    document.update(format="veridic-paused-run/8", release="veridic 9.1.0")
    with pytest.raises(VeridicError) as refused:
        PausedRun.from_json(json.dumps(document))
    said = str(refused.value)
    assert "written by a later veridic ('veridic 9.1.0')" in said
    assert f"this process runs veridic {veridic.__version__}" in said
    del document["release"]  # a writer that did not say
    with pytest.raises(VeridicError, match=r"a later veridic \(it did not say which\)"):
        PausedRun.from_json(json.dumps(document))


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("options_sha256", "abc", "'options_sha256' is 'abc', not a sha256"),
        ("seconds", -1, "'seconds' is '-1', not a number of seconds"),
        ("seconds", True, "'seconds' is 'true', not a number of seconds"),
        ("usage", [10, 5], "'usage' is a list"),
        (
            "usage",
            {"input_tokens": 10, "output_tokens": 5, "stated": ["input_tokens"]},
            "'usage'",
        ),
    ],
)
def test_a_format_5_document_edited_where_it_was_kept_is_refused(
    key: str, value: object, says: str
) -> None:
    text = _with(_paused(SQLiteAuditSink(":memory:")).to_json(), **{key: value})
    with pytest.raises(VeridicError, match=re.escape(says)):
        PausedRun.from_json(text)
