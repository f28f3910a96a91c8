"""A second read of the seventh review's text, template and show follow-ups."""

from __future__ import annotations

import pprint
from collections.abc import Iterator
from typing import TypedDict

import pytest
from pydantic import BaseModel

from veridic import (
    Composer,
    Conversation,
    InstructionField,
    Templates,
    VeridicError,
    instruction,
    unfence,
)
from veridic.templates import TemplateSandboxError
from veridic.templates._bounds import _walked
from veridic.text.conversation import Turn

SYSTEM = instruction("You report the weather.")


class _Stored(BaseModel):
    """A row of a prompt store: its template is read as instruction."""

    content: InstructionField


# --- |pprint of long texts -----------------------------------------------------------------


class _Record(TypedDict):
    record: dict[str, str]


def test_pprint_of_a_record_of_long_texts_renders_in_a_stored_template() -> None:
    # Ten fields of 150,000 characters of prose: pformat takes a few hundredths of a
    # second (a text is split in C, then walked word by word), and the follow-up charged
    # each character as a loop iteration, refusing it as "more than 1,000,000".
    record = {f"field{i}": "lorem ipsum dolor " * 8_334 for i in range(10)}
    source = _Stored(content="{{ record|pprint }}").content
    template = Templates().data_from_source(source, params=_Record)
    [(_, text)] = unfence(template.render({"record": record}))
    assert text == pprint.pformat(record)


class _Rows(TypedDict):
    rows: list[list[int]]


def test_pprint_is_still_charged_each_item_it_walks() -> None:
    rows = [list(range(1_000))] * 1_001
    source = _Stored(content="{{ rows|pprint|length }}").content
    template = Templates().data_from_source(source, params=_Rows)
    with pytest.raises(TemplateSandboxError, match="more than 1,000,000 loop iterations"):
        template.render({"rows": rows})


class _Words(TypedDict):
    words: list[str]


def test_pprint_of_many_short_texts_is_charged_each_of_them() -> None:
    # A million one-character texts: each is an item pformat walks in Python (half a
    # second), though their characters are few.
    source = _Stored(content="{{ words|pprint|length }}").content
    template = Templates().data_from_source(source, params=_Words)
    with pytest.raises(TemplateSandboxError, match="more than 1,000,000 loop iterations"):
        template.render({"words": ["a"] * 1_000_001})


# --- a conversation stored with a turn between calls and their results ----------------------


def _stored_with_a_turn_between() -> Conversation:
    """A conversation stored before the composer refused the order: call, user, result."""
    call = Turn("tool_call", '{"city": "Oslo"}', "get_weather", call_id="c1")
    result = Turn("tool_result", "Sunny", source="tool:get_weather", mode="datamark", call_id="c1")
    return Conversation((Turn("user", "Oslo?"), call, Turn("user", "and Bergen?"), result))


def test_restoring_a_turn_stored_between_calls_and_results_says_how_to_mend_the_record() -> None:
    stored = _stored_with_a_turn_between()
    with pytest.raises(VeridicError) as caught:
        Composer().system(SYSTEM).restore(stored)
    message = str(caught.value)
    assert "turn 2 (user)" in message
    # Where the results are, and what to do with the stored record (not with the composer).
    assert "at turn 3: move it before turn 2" in message
    # Done as it says, the record restores.
    turns = stored.turns
    mended = Conversation((turns[0], turns[1], turns[3], turns[2]))
    prompt = Composer().system(SYSTEM).restore(mended).build()
    assert prompt.pending_tool_calls == ()


def test_restoring_a_call_never_answered_before_a_turn_says_to_add_its_result() -> None:
    call = Turn("tool_call", "{}", "get_weather", call_id="c1")
    stored = Conversation((Turn("user", "Oslo?"), call, Turn("user", "and Bergen?")))
    with pytest.raises(VeridicError, match=r"No result of .*c1.* is stored.*before turn 2"):
        Composer().system(SYSTEM).restore(stored)


class _Counted(list[int]):
    """A list that counts the items handed out by iterating it (what a walk of it costs)."""

    handed = 0

    def __iter__(self) -> Iterator[int]:
        for item in super().__iter__():
            _Counted.handed += 1
            yield item


def test_the_pprint_charge_stops_walking_a_huge_value_once_it_is_over_the_bound() -> None:
    # The render's budget sizes a value once and stops at its bounds; the |pprint charge
    # walked the whole value again (in Python), however large, before refusing it.
    numbers = _Counted([0] * 3_000_000)
    _Counted.handed = 0
    assert _walked(numbers) > 1_000_000
    assert _Counted.handed <= 1_000_001
