"""A second read of the seventh review's text, template and show follow-ups."""

from __future__ import annotations

import pprint
from typing import TypedDict

import pytest
from pydantic import BaseModel

from veridic import InstructionField, Templates, unfence
from veridic.templates import TemplateSandboxError


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
