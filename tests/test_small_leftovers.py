"""Small leftovers of the fifteenth session's reviews, each where a reader met it.

A scripted provider's error quoted a whole scripted item; a pydantic-ai toolset used
without its capability kept a table per run for ever.
"""

from __future__ import annotations

import pytest

from veridic import (
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
    instruction,
)
from veridic.gateway import ModelCallLog

_LONG = "n" * 100_000


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: The city's name.
        """
        return f"Sunny in {city}"

    return registry


# --- the scripted provider quotes a scripted item clipped ----------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {"tool_calls": [("call-1", _LONG)]},  # not a triple
        {"reasoning": [_LONG]},  # not a ReasoningItem
    ],
    ids=["tool call", "reasoning"],
)
def test_a_scripted_item_is_quoted_clipped_in_its_error(answer: dict[str, object]) -> None:
    view = _registry().view()
    gateway = ModelGateway(
        ScriptedProvider([answer]), audit=SQLiteAuditSink(":memory:"), calls=ModelCallLog()
    )
    prompt = (
        Composer()
        .system(instruction("You tell the weather."), view.capability_section())
        .user("Oslo?")
        .build()
    )
    with pytest.raises(VeridicError) as raised:
        gateway.send(prompt, view, request_id="req-1")
    message = str(raised.value)
    assert _LONG not in message
    assert len(message) < 1000
    assert "chars)" in message  # says how long the item was
