"""The "parts within their totals" rule of a usage is one predicate, told two ways.

A record's check lists every part past its total (``ModelReplyRecord``); the gateway
refuses the first at send time. Their messages stayed word for word what they were
when the rule was written twice; these pin them.
"""

from __future__ import annotations

from typing import TypedDict

import pytest
from test_providers import VIEW, first_prompt

from veridic import (
    AuditRecordError,
    ModelCallRecord,
    ModelGateway,
    ModelReplyRecord,
    ScriptedProvider,
    SQLiteAuditSink,
    Usage,
    VeridicError,
)

SHA = "0" * 64
_CALL = ModelCallRecord(5.0, "req-1", "openai.chat", "gpt-test", SHA, SHA, (), (), False)

_CACHE_900 = (
    "cache_read_input_tokens=900 and cache_creation_input_tokens=0 are more than the "
    "input_tokens=100 they are part of"
)
_REASONING_6 = "reasoning_output_tokens=6 is more than the output_tokens=5 it is part of"
_SENT = (
    ", more than the {total} they are part of: one of the two counts is wrong, so the tokens "
    "the answer cost cannot be known, and nothing of the answer was run: check what sits "
    "between you and the API (an adapter of your own must give parts within their totals, "
    "reasoning included in output_tokens)"
)


class _Parts(TypedDict, total=False):
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    reasoning_output_tokens: int


CASES: dict[str, tuple[_Parts, list[str], str]] = {
    "cache-read": (
        {"cache_read_input_tokens": 900},
        [_CACHE_900],
        "cache_read_input_tokens=900" + _SENT.format(total="input_tokens=100"),
    ),
    "cache-read-and-written": (
        {"cache_read_input_tokens": 90, "cache_creation_input_tokens": 20},
        [
            "cache_read_input_tokens=90 and cache_creation_input_tokens=20 are more than the "
            "input_tokens=100 they are part of"
        ],
        "cache_read_input_tokens=90 and cache_creation_input_tokens=20"
        + _SENT.format(total="input_tokens=100"),
    ),
    "cache-written": (
        {"cache_creation_input_tokens": 120},
        [
            "cache_read_input_tokens=0 and cache_creation_input_tokens=120 are more than the "
            "input_tokens=100 they are part of"
        ],
        "cache_read_input_tokens=0 and cache_creation_input_tokens=120"
        + _SENT.format(total="input_tokens=100"),
    ),
    "reasoning": (
        {"reasoning_output_tokens": 6},
        [_REASONING_6],
        "reasoning_output_tokens=6" + _SENT.format(total="output_tokens=5"),
    ),
    "both": (
        {"cache_read_input_tokens": 900, "reasoning_output_tokens": 6},
        [_CACHE_900, _REASONING_6],
        "cache_read_input_tokens=900" + _SENT.format(total="input_tokens=100"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_record_lists_every_part_past_its_total(case: str) -> None:
    parts, listed, _ = CASES[case]
    with pytest.raises(AuditRecordError) as refused:
        ModelReplyRecord(
            6.0,
            "req-1",
            SHA,
            "r1",
            "gpt-test",
            "stop",
            (),
            Usage(100, 5, **parts),
            0.5,
            _CALL.call_id,
        )
    said = "; ".join(f"usage's {problem}" for problem in listed)
    assert str(refused.value) == (
        f"model-reply record of request 'req-1' is malformed: {said}; build it from the "
        "answer as read (ModelGateway does)"
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_gateway_refuses_the_first_part_past_its_total(case: str) -> None:
    parts, _, refused_with = CASES[case]
    usage = {"input_tokens": 100, "output_tokens": 5, **parts}
    gateway = ModelGateway(
        ScriptedProvider([{"text": "ok", "usage": usage}]), audit=SQLiteAuditSink(":memory:")
    )
    with pytest.raises(VeridicError) as refused:
        gateway.send(first_prompt(), VIEW, request_id="req-1")
    assert str(refused.value) == f"the answer to request 'req-1' gives {refused_with}"
