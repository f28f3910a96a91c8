"""A second read of ``Usage.stated``: what an application's own adapter may give, and what a
paused run keeps of it. Each test failed before its fix."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from _paused_formats import as_format_4
from test_providers import VIEW, first_prompt
from test_review_resume6 import make_registry, paused_run, resume, system_part

from veridic import (
    ModelCallRecord,
    ModelGateway,
    PausedRun,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
)
from veridic.providers import Completion, Usage

_PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")


class _CallsOnly:
    """A model-call sink that keeps the calls, not the answers: no record checks the usage."""

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        del record


def _stating(stated: object) -> type[ScriptedProvider]:
    class OwnAdapter(ScriptedProvider):
        """An application's own adapter that fills ``stated`` wrong."""

        def parse(self, response: object) -> Completion:
            completion = super().parse(response)
            usage = Usage(100, 5, stated=stated)  # type: ignore[arg-type]  # the adapter's bug
            return dataclasses.replace(completion, usage=usage)

    return OwnAdapter


_BAD_STATED = [
    ["cache_read_input_tokens"],
    "cache_read_input_tokens",
    frozenset({"input_tokens"}),
    {"cache_read_input_tokens"},
]


@pytest.mark.parametrize("stated", _BAD_STATED, ids=repr)
@pytest.mark.parametrize("answers", ["recorded", "not recorded"])
def test_the_gateway_refuses_an_own_adapters_stated_that_is_not_a_frozenset_of_part_names(
    stated: object, answers: str
) -> None:
    audit = SQLiteAuditSink(":memory:")
    provider = _stating(stated)([{"text": "ok"}])
    gateway = (
        ModelGateway(provider, audit=audit)
        if answers == "recorded"
        else ModelGateway(provider, audit=audit, calls=_CallsOnly())
    )
    with pytest.raises(VeridicError) as refused:
        gateway.send(first_prompt(), VIEW, request_id="req-1")
    said = str(refused.value)
    assert said.startswith("the answer to request 'req-1' gives a usage whose stated is ")
    assert "an adapter of your own must give None or a frozenset of" in said
    if answers == "recorded":  # the answer is on record, without its usage, as for a bad count
        (answer,) = audit.model_replies("req-1")
        assert answer.usage is None


# --- a paused run keeps a stated 0 --------------------------------------------------------------

_STATED_ZERO = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0}


def test_a_resumed_run_states_the_cache_reads_its_answers_stated_as_0_before_the_pause() -> None:
    # PausedRun.to_json wrote a usage whose stated parts were all 0 as its two totals, read
    # back as stating no part: the resumed run's sum then stated none, the cache reads of
    # every answer after the resume lost too.
    audit = SQLiteAuditSink(":memory:")
    view = make_registry([]).view()
    paused = paused_run(audit, usage=_STATED_ZERO)
    assert paused.usage is not None
    assert paused.usage.part("cache_read_input_tokens") == 0
    stored = PausedRun.from_json(paused.to_json())
    assert stored.usage is not None
    assert stored.usage.part("cache_read_input_tokens") == 0
    after = {"text": "Done.", "usage": {**_STATED_ZERO, "cache_read_input_tokens": 8}}
    result = resume(
        ModelGateway(ScriptedProvider([after]), audit=audit),
        stored,
        system_part(view),
        view,
        {"c2": True, "c3": True},
    )
    assert result.usage == Usage(20, 10)
    assert result.usage is not None
    assert result.usage.part("cache_read_input_tokens") == 8


def test_a_paused_run_of_a_usage_without_parts_still_stores_its_two_totals() -> None:
    paused = paused_run(SQLiteAuditSink(":memory:"), usage={"input_tokens": 10, "output_tokens": 5})
    as_written = as_format_4(json.loads(paused.to_json()))  # as earlier releases write it
    assert as_written["usage"] == [10, 5]
    stored = PausedRun.from_json(json.dumps(as_written))
    assert stored.usage is not None
    assert [stored.usage.part(part) for part in _PARTS] == [None, None, None]


# --- a writer of schema 8 still running after the migration ------------------------------------

_SCHEMA_8_INSERT_CALL = (  # veridic_model_calls as a veridic of audit schema 8 writes it
    "INSERT INTO veridic_model_calls (time, request_id, api, model, prompt_sha256, "
    "tools_sha256, tools, instruction_spans, streamed, call_id) VALUES (?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (call_id) DO NOTHING"
)


def test_a_call_a_schema_8_writer_adds_to_a_migrated_file_reads_back_as_not_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    SQLiteAuditSink(path).close()  # made (or migrated) to schema 9
    row = (5.0, "req-8", "openai.chat", "gpt-test", "0" * 64, "1" * 64, "[]", "[]", 0, "8" * 32)
    with sqlite3.connect(path) as db:
        db.execute(_SCHEMA_8_INSERT_CALL, row)
    db.close()
    with SQLiteAuditSink(path) as store:
        (call,) = store.model_calls("req-8")
    assert call.options_sha256 == ""
    assert call.call_id == "8" * 32
