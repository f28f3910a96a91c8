"""A second read of the eighth review's provider, gateway and adapter changes: what they
broke or missed on everyday traffic."""

from __future__ import annotations

from typing import Any

import pytest
from test_review8_prov import _claude_stream, _claude_usage, _copy, _parts


openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


# --- Anthropic usage: a delta's lower count does not replace the start's -------------------------


def test_an_anthropic_stream_whose_delta_says_0_tokens_read_keeps_the_starts_count() -> None:
    """SGLang's Messages endpoint (and proxies built like it) sends the prompt's count in
    ``message_start`` and ``"input_tokens": 0`` in ``message_delta``: read over the start's,
    as the eighth review made it, the stream counted 0 tokens read where the same answer
    sent counts 176, and ``Limits(tokens=...)`` let the run go on past its budget. The
    counts are cumulative: a later, lower one keeps the count held."""
    from test_review8_prov import MESSAGE

    start = {"input_tokens": 176, "cache_read_input_tokens": 1024, "output_tokens": 1}
    delta: dict[str, Any] = {
        "input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 300,
    }
    sent = {**_copy(MESSAGE), "usage": {**start, "output_tokens": 300}}
    whole, piecewise = _claude_usage(("json", sent), ("sse", _claude_stream(start, delta)))
    assert _parts(whole) == (1200, 300, 1024, 0, 0)
    assert _parts(piecewise) == _parts(whole)
