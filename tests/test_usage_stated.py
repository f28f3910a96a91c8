"""A usage says which of its parts the provider stated: a part of 0 it gave ("no cache
read") is not one it left out ("not broken down"). Each test failed before
``Usage.stated``. Postgres tests run on the server the session starts (tests/_postgres.py)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _sdk_server import FakeServer, http_module
from hypothesis import given
from hypothesis import strategies as st
from test_postgres_store import SHA
from test_providers import VIEW, first_prompt
from test_review9_prov import _chat_answer

from veridic import (
    AuditRecordError,
    ModelGateway,
    OpenAIChat,
    PostgresAuditSink,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
)
from veridic.checks.audit_report import Selection, build_report
from veridic.providers import Usage
from veridic.run.records import ModelCallRecord, ModelReplyRecord

Store = SQLiteAuditSink | PostgresAuditSink

_PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _parts(usage: Usage | None) -> tuple[int | None, ...] | None:
    return None if usage is None else tuple(usage.part(p) for p in _PARTS)


# --- 1. the adapters state the parts the answer gave ----------------------------------------


def test_a_part_the_answer_gave_as_0_is_stated_and_one_it_left_out_is_not() -> None:
    answer = {"text": "Hi.", "usage": {"input_tokens": 100, "output_tokens": 5, **_zero_cache()}}
    gateway = ModelGateway(ScriptedProvider([answer]), audit=SQLiteAuditSink(":memory:"))
    reply = gateway.send(first_prompt(), VIEW, request_id="req-1")
    assert reply.usage is not None
    assert _parts(reply.usage) == (0, None, None)
    assert reply.usage.cache_creation_input_tokens == 0  # the counts read as they did


def _zero_cache() -> dict[str, int]:
    return {"cache_read_input_tokens": 0}


def test_openai_chat_states_a_cache_read_of_0_and_not_the_reasoning_it_did_not_break_down() -> None:
    answer = _chat_answer()
    answer["usage"]["prompt_tokens_details"] = {"cached_tokens": 0}
    openai = pytest.importorskip("openai")
    server = FakeServer(http_module("openai"), [("json", answer)])
    adapter = OpenAIChat(server.client(openai, "OpenAI"), model="gpt-test")
    reply = ModelGateway(adapter, audit=SQLiteAuditSink(":memory:")).send(
        first_prompt(), VIEW, request_id="req-1"
    )
    assert _parts(reply.usage) == (0, None, None)


# --- 2. a usage built by hand reads as before; part() names what it is asked ----------------


def test_a_usage_built_without_stated_reads_as_before() -> None:
    assert _parts(Usage(10, 5)) == (None, None, None)  # every part 0: not broken down
    assert _parts(Usage(10, 5, reasoning_output_tokens=2)) == (0, 0, 2)
    assert Usage(10, 5, stated=frozenset()) == Usage(10, 5)  # not compared


def test_part_refuses_a_name_that_is_not_a_part() -> None:
    with pytest.raises(VeridicError, match=r"input_tokens.*not a part of a usage"):
        Usage(10, 5).part("input_tokens")


_USAGES = st.builds(
    lambda counts, stated: Usage(
        counts[0],
        counts[1],
        cache_read_input_tokens=counts[2],
        cache_creation_input_tokens=counts[3],
        reasoning_output_tokens=counts[4],
        stated=stated,
    ),
    st.tuples(*[st.integers(0, 2**40)] * 5),
    st.none() | st.frozensets(st.sampled_from(_PARTS)),
)


@given(_USAGES, _USAGES)
def test_a_sum_states_the_parts_stated_on_both_sides_and_adds_every_count(
    a: Usage, b: Usage
) -> None:
    total = a + b
    assert total.total_tokens == a.total_tokens + b.total_tokens
    for part in _PARTS:
        assert getattr(total, part) == getattr(a, part) + getattr(b, part)
        # The zero Usage() adds nothing, not even what it does not state (test_usage_carried).
        neither_zero = _exact(Usage()) not in (_exact(a), _exact(b))
        if (a.stated is not None or b.stated is not None) and neither_zero:
            stated_both = a.part(part) is not None and b.part(part) is not None
            assert (total.part(part) is not None) == stated_both


def _exact(usage: Usage) -> tuple[object, ...]:
    """Every field of ``usage`` (``==`` compares the totals only)."""
    return dataclasses.astuple(usage)


# --- 3. the stores keep each part on its own: NULL where it was not stated --------------------


def _write(store: Store, usage: Usage) -> ModelReplyRecord:
    call = ModelCallRecord(5.0, "req-1", "openai.chat", "gpt-test", SHA, SHA, (), (), False)
    store.write_model_call(call)
    store.write_model_reply(
        ModelReplyRecord(6.0, "req-1", SHA, "r1", "gpt-test", "stop", (), usage, 0.5, call.call_id)
    )
    (read,) = store.model_replies("req-1")
    return read


_STATED = Usage(
    100,
    5,
    reasoning_output_tokens=3,
    stated=frozenset({"cache_read_input_tokens", "reasoning_output_tokens"}),
)


def test_a_store_keeps_a_stated_0_and_nulls_only_the_parts_not_stated(store: Store) -> None:
    # Was: stored all-or-nothing, (0, 0, 3): a cache write nobody reported read back as 0.
    read = _write(store, _STATED)
    assert _parts(read.usage) == (0, None, 3)


def test_the_sqlite_row_holds_null_for_each_part_not_stated(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        _write(store, _STATED)
    with sqlite3.connect(path) as db:
        row = db.execute(f"SELECT {', '.join(_PARTS)} FROM veridic_model_replies").fetchone()
    db.close()
    assert row == (0, None, 3)


@pytest.mark.parametrize("stated", [frozenset({"input_tokens"}), ["cache_read_input_tokens"]])
def test_a_reply_record_whose_stated_parts_are_not_part_names_is_refused(stated: Any) -> None:
    usage = Usage(100, 5, stated=stated)
    with pytest.raises(AuditRecordError, match="usage's stated must be None or a frozenset"):
        ModelReplyRecord(6.0, "req-1", SHA, "r1", "gpt-test", "stop", (), usage, 0.5, "")


# --- 4. the audit report shows a stated 0 -----------------------------------------------------


def test_the_audit_report_shows_a_stated_0_and_nothing_of_a_part_not_stated(store: Store) -> None:
    _write(store, _STATED)
    report = build_report(store, Selection(), database="audit.db")
    assert "100/5 (cache read 0, reasoning 3)" in report.text()
    (request,) = json.loads(json.dumps(report.to_json()))["requests"]
    assert request["model_calls"][0]["reply"]["usage"] == {
        "input_tokens": 100,
        "output_tokens": 5,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": None,
        "reasoning_output_tokens": 3,
    }
