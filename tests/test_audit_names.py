"""Any tool name the model writes is refused and recorded, and the recording never raises.

Quotes, angle brackets, newlines, NUL, lone surrogates (which UTF-8 cannot
encode), 100 KB of text, nothing at all: each is an unknown tool, the call
does not run, and the audit store gets exactly one record, which keeps the
name escaped and clipped and says so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AuditRecord,
    AuditRecordError,
    CallOutcome,
    Composer,
    ModelCallRecord,
    ModelGateway,
    Registry,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    UnknownToolError,
    VeridicError,
    aexecute,
    execute,
    instruction,
)
from veridic.gateway import ModelCallLog

PROMPT = Composer().system(instruction("You look up orders.")).build()


def _registry() -> Registry:
    registry = Registry("orders")

    @registry.tool(kind="query")
    def find_order(number: str) -> str:
        """Find an order by its number.

        Args:
            number: The order number.
        """
        return f"order {number}"

    @registry.tool(kind="query")
    def explain(topic: str) -> str:
        """Explain a topic, quoting the question back.

        Args:
            topic: The topic.
        """
        raise ValueError(f"no article about {topic}")

    return registry


VIEW = _registry().view()
POLICY = ApprovalPolicy(VIEW)

NASTY = [
    "",
    " ",
    "find_order ",
    "find_order\n",
    '"; DROP TABLE veridic_audit; --',
    "<tool>find_order</tool>",
    "find\x00order",
    "\ud800",
    "find_order\udfff",
    "x" * 100_000,
    "\u202efind_order",
]


def call(name: str, sink: SQLiteAuditSink, request_id: str = "req-1") -> Any:
    return execute(VIEW, name, {}, policy=POLICY, audit=sink, request_id=request_id, prompt=PROMPT)


def plain(name: str) -> bool:
    return 0 < len(name) <= 200 and name.isprintable() and name == name.strip()


def check_recorded(name: str, sink: SQLiteAuditSink, result: Any) -> None:
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, UnknownToolError)
    (record,) = sink.records()
    assert record == result.record
    assert (record.kind, record.risk, record.approval) == (None, None, ApprovalMode.NOT_ASKED)
    assert record.detail.startswith("unknown: never registered")
    if plain(name):
        assert record.tool == name
        assert "recorded escaped" not in record.detail
    else:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        assert record.tool.startswith(repr(name)[:100])
        assert f"({len(name)} chars, sha256 {digest})" in record.detail
        assert ("escaped and clipped" in record.detail) == (len(name) > 200)
        assert len(record.tool) < 300


@pytest.mark.parametrize("name", NASTY, ids=lambda name: repr(name)[:30])
def test_a_nasty_tool_name_is_refused_and_recorded_escaped(name: str) -> None:
    sink = SQLiteAuditSink()
    result = call(name, sink)
    check_recorded(name, sink, result)
    message = str(result.error)
    assert len(message) < 1_000
    assert "call one of the tools this view lists" in message
    message.encode("utf-8")  # no lone surrogate goes back to the model either


@pytest.mark.parametrize("name", ["\ud800", "x" * 100_000, ""], ids=["surrogate", "long", "empty"])
def test_aexecute_records_a_nasty_name_the_same_way(name: str) -> None:
    sink = SQLiteAuditSink()
    result = asyncio.run(
        aexecute(VIEW, name, {}, policy=POLICY, audit=sink, request_id="req-1", prompt=PROMPT)
    )
    check_recorded(name, sink, result)


@given(name=st.text(st.characters(exclude_categories=()), max_size=300))
@settings(max_examples=200)
def test_every_name_outside_the_view_is_refused_with_exactly_one_record(name: str) -> None:
    assume(name not in VIEW.names())
    with SQLiteAuditSink() as sink:
        result = call(name, sink)
        check_recorded(name, sink, result)


def test_the_same_nasty_name_is_recognisable_across_records() -> None:
    sink = SQLiteAuditSink()
    first = call("find_order\n" * 50, sink).record
    second = call("find_order\n" * 50, sink).record
    assert (first.tool, first.detail) == (second.tool, second.detail)
    (substitution, retried) = sink.substitutions()
    assert substitution.same_tool
    assert retried.next is None


def test_a_name_that_is_not_text_is_refused_and_recorded() -> None:
    sink = SQLiteAuditSink()
    result = call(None, sink)  # type: ignore[arg-type]  # a provider adapter's bug, under test
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, UnknownToolError)
    assert "is a NoneType" in str(result.error)
    (record,) = sink.records()
    assert record.tool == "<NoneType None>"
    assert "tool name is not text" in record.detail


def test_a_handler_error_quoting_a_lone_surrogate_is_recorded_escaped() -> None:
    sink = SQLiteAuditSink()
    result = execute(
        VIEW,
        "explain",
        {"topic": "refunds \ud83d"},
        policy=POLICY,
        audit=sink,
        request_id="req-1",
        prompt=PROMPT,
    )
    assert result.outcome is CallOutcome.FAILED
    (record,) = sink.records()
    assert record.detail == "ValueError: no article about refunds \\ud83d"


def test_run_tools_records_every_nasty_name_of_a_reply() -> None:
    sink = SQLiteAuditSink()
    names = ["find_order", "\ud800", "<b>", "x" * 100_000, ""]
    calls = [(f"c{n}", name, "{}" if n else '{"number": "7"}') for n, name in enumerate(names)]
    gateway = ModelGateway(
        ScriptedProvider([{"tool_calls": calls}]), audit=sink, calls=ModelCallLog()
    )
    reply = gateway.send(Composer().user("Find order 7.").build(), VIEW, request_id="req-7")
    outcomes = gateway.run_tools(reply, policy=POLICY)
    assert [o.result.outcome for o in outcomes] == [CallOutcome.OK] + [CallOutcome.REFUSED] * 4
    assert len(sink.records("req-7")) == len(names)


# --- the records themselves ---------------------------------------------------------------


_VALID = AuditRecord(
    time=1.0,
    request_id="req-1",
    tool="find_order",
    kind="query",
    risk=Risk.LOW,
    approval=ApprovalMode.NOT_REQUIRED,
    wrote_instruction_fields=False,
    irreversible=False,
    prompt_sha256="0" * 64,
    tools_sha256="f" * 64,
    outcome=CallOutcome.OK,
)


def record(**changes: Any) -> AuditRecord:
    return dataclasses.replace(_VALID, **changes)


@pytest.mark.parametrize("field", ["request_id", "tool", "detail"])
def test_a_record_holding_a_lone_surrogate_is_refused_before_any_store_fails(field: str) -> None:
    with pytest.raises(AuditRecordError) as caught:
        record(**{field: "a\ud800b"})
    message = str(caught.value)
    assert f"{field} holds a NUL or a lone surrogate" in message
    assert "UTF-8 cannot encode a lone surrogate" in message
    assert "as veridic.execute does" in message


@pytest.mark.parametrize("field", ["request_id", "tool", "detail"])
def test_a_record_holding_nul_is_refused_by_every_store_alike(field: str) -> None:
    with pytest.raises(AuditRecordError, match=f"{field} holds a NUL or a lone surrogate"):
        record(**{field: "a\x00b"})


def test_a_record_with_a_surrogate_in_an_operation_is_refused() -> None:
    with pytest.raises(AuditRecordError, match="operations holds a NUL or a lone surrogate"):
        record(operations=("irreversible:\udc80",))


def test_escaped_nul_newlines_and_quotes_in_a_record_read_back_exactly() -> None:
    written = record(tool="'a\\x00b'", detail='x\\x00y\n"<z>"', operations=("irreversible:a",))
    with SQLiteAuditSink() as sink:
        sink.write(written)
        assert sink.records() == (written,)


def test_a_model_call_record_refuses_a_lone_surrogate() -> None:
    with pytest.raises(AuditRecordError, match="model holds a NUL or a lone surrogate"):
        ModelCallRecord(1.0, "req-1", "scripted", "m\ud800", "0" * 64, "0" * 64, (), ())


def test_execute_refuses_a_request_id_no_store_can_keep_before_anything_runs() -> None:
    sink = SQLiteAuditSink()
    for bad in ("", "req-\ud800"):
        with pytest.raises(VeridicError, match=r"execute\(\) got request_id=.*pass one"):
            execute(
                VIEW,
                "find_order",
                {"number": "7"},
                policy=POLICY,
                audit=sink,
                request_id=bad,
                prompt=PROMPT,
            )
    with pytest.raises(VeridicError, match=r"not a Prompt's sha256"):
        execute(
            VIEW,
            "find_order",
            {"number": "7"},
            policy=POLICY,
            audit=sink,
            request_id="req-1",
            prompt_sha256="not a digest",
        )
    assert sink.count() == 0


def test_a_model_call_span_with_an_unknown_kind_is_refused_when_read_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as sink:
        sink.write_model_call(
            ModelCallRecord(1.0, "req-1", "scripted", "m", "0" * 64, "0" * 64, (), ())
        )
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE veridic_model_calls SET instruction_spans = ?",
            ('[[0, "system", 0, 4, "trusted-by-me", "x"]]',),
        )
    with (
        SQLiteAuditSink(path) as sink,
        pytest.raises(AuditRecordError, match=r"span .* cannot be read back.*check what else"),
    ):
        sink.model_calls()
