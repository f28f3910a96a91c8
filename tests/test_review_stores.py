"""Attacker review of the stores, records and the run's persistence: each test failed before
its fix (a stored paused run, conversation or record an outsider could bend)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_deferred import gateway, make_registry, paused_run, system_part

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AuditRecord,
    AuditRecordError,
    CallOutcome,
    Composer,
    ModelGateway,
    PausedRun,
    PostgresAuditSink,
    Risk,
    ScriptedProvider,
    SQLiteAuditSink,
    Usage,
    VeridicError,
    VouchRecord,
    untrusted,
)
from veridic.run.records import ModelCallRecord, ModelReplyRecord


def _second_approval(saved: str, arguments: dict[str, object]) -> str:
    """``saved`` with call c2's arguments changed in the conversation, the approval the user
    was shown left as it was, and a copy of it for the new arguments appended after it."""
    document = json.loads(saved)
    for turn in document["conversation"]["turns"]:
        if turn.get("tool_call") == "c2":
            turn["arguments"] = arguments
    shown = next(a for a in document["approvals"] if a["call_id"] == "c2")
    document["approvals"].append({**shown, "arguments": arguments})
    return json.dumps(document)


def test_a_digest_answer_does_not_approve_a_second_approval_of_the_same_call() -> None:
    audit = SQLiteAuditSink()
    shown = paused_run([], audit)
    answers = {approval.digest: True for approval in shown.approvals}  # what the dialog showed
    saved = _second_approval(shown.to_json(), {"order_id": 999})
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    with pytest.raises(VeridicError, match="two approvals for call 'c2'"):
        gateway([{"text": "Done."}], audit).resume(
            PausedRun.from_json(saved),
            system_part(view),
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
        )
    assert "refund 999" not in ran


# --- text a store must keep: a lone surrogate the model or a document wrote ------------------

_SURROGATE_NOTE = {"tool_calls": [("c1", "add_note", '{"text": "see \\ud800 and \\udcff"}')]}
"""A call whose arguments spell lone surrogates as JSON escapes: valid JSON a model can write."""


Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _gateway(script: Sequence[Mapping[str, object]], store: Store) -> ModelGateway:
    return ModelGateway(ScriptedProvider(script), audit=store)


def test_a_paused_run_whose_arguments_hold_a_lone_surrogate_is_kept_and_resumed(
    store: Store,
) -> None:
    ran: list[str] = []
    view = make_registry(ran=ran).view()
    composer = system_part(view).user("Note it.")
    result = _gateway([_SURROGATE_NOTE], store).run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-s", defer=True
    )
    assert result.paused is not None
    shown = result.paused.approvals[0]
    saved = result.paused.to_json()
    saved.encode("utf-8")  # a session, a queue or a file can keep it
    store.save_paused(result.paused)
    claimed = store.claim_paused("req-s")
    assert claimed == result.paused
    assert claimed is not None
    view = make_registry(ran=ran).view()
    _gateway([{"text": "Noted."}], store).resume(
        claimed, system_part(view), view, policy=ApprovalPolicy(view), answers={shown.digest: True}
    )
    assert ran == ["note see \ud800 and \udcff"]


def test_a_conversation_holding_a_lone_surrogate_is_saved_and_read_back_exactly(
    store: Store,
) -> None:
    text = "page \udc80\udcff end \ud800"  # bytes decoded with surrogateescape, and worse
    conversation = (
        Composer().user("Summarise.").data("page", untrusted(text, source="web")).conversation()
    )
    conversation.to_json().encode("utf-8")
    store.save_conversation("chat-1", conversation)
    assert store.conversation("chat-1") == conversation


# --- numbers both stores keep alike ----------------------------------------------------------

_SHA = "0" * 64


_CALL = ModelCallRecord(
    time=1.0,
    request_id="r",
    api="openai.responses",
    model="m",
    prompt_sha256=_SHA,
    tools_sha256=_SHA,
    tools=(),
    instruction_spans=(),
)
_REPLY = ModelReplyRecord(
    time=1.0,
    request_id="r",
    prompt_sha256=_SHA,
    response_id="",
    model="m",
    stop_reason="stop",
    tool_calls=(),
    usage=None,
    latency=1.0,
)
_AUDIT = AuditRecord(
    time=1.0,
    request_id="r",
    tool="t",
    kind="write",
    risk=Risk.MID,
    approval=ApprovalMode.ALWAYS_RULE,
    wrote_instruction_fields=False,
    irreversible=False,
    prompt_sha256=_SHA,
    tools_sha256=_SHA,
    outcome=CallOutcome.OK,
)


def _call(**changes: Any) -> ModelCallRecord:
    return dataclasses.replace(_CALL, **changes)


def _reply(**changes: Any) -> ModelReplyRecord:
    return dataclasses.replace(_REPLY, **changes)


def _audit(**changes: Any) -> AuditRecord:
    return dataclasses.replace(_AUDIT, **changes)


_ODD: dict[str, Callable[[Store], object]] = {
    # SQLite stored NaN as NULL and refused it (IntegrityError); Postgres kept NaN.
    "model call at NaN": lambda s: s.write_model_call(_call(time=math.nan)),
    "model answer at NaN": lambda s: s.write_model_reply(_reply(time=math.nan)),
    "vouch at NaN": lambda s: s.write_vouch(VouchRecord("p", "r", "c", "s", math.nan)),
    "conversation at NaN": lambda s: s.save_conversation(
        "k", Composer().user("x").conversation(), time=math.nan
    ),
    # SQLite kept the text in a REAL column; Postgres refused it (InvalidTextRepresentation).
    "model call at a word": lambda s: s.write_model_call(_call(time="yesterday")),
    "vouch at a word": lambda s: s.write_vouch(VouchRecord("p", "r", "c", "s", "x")),  # type: ignore[arg-type]  # the point
    "conversation at a word": lambda s: s.save_conversation(
        "k",
        Composer().user("x").conversation(),
        time="abc",  # type: ignore[arg-type]  # the point
    ),
    # Each refused with its own error (OverflowError, NumericValueOutOfRange), or kept -5.
    "more tokens than a count holds": lambda s: s.write_model_reply(_reply(usage=Usage(2**63, 1))),
    "negative tokens": lambda s: s.write_model_reply(_reply(usage=Usage(-5, 1))),
    "a time no float holds": lambda s: s.write(_audit(time=10**400)),
}


@pytest.mark.parametrize("case", sorted(_ODD))
def test_a_value_one_store_would_refuse_and_the_other_keep_is_refused_by_both(
    store: Store, case: str
) -> None:
    with pytest.raises(AuditRecordError):
        _ODD[case](store)
    assert store.model_calls() == ()
    assert store.model_replies() == ()
    assert store.vouches() == ()
    assert store.records() == ()
    assert store.conversation("k") is None


def test_a_time_given_as_a_large_int_is_kept_as_seconds_by_both(store: Store) -> None:
    """SQLite refused 10**30 (OverflowError: no INTEGER holds it); Postgres kept 1e30."""
    store.write(_audit(time=10**30))
    assert [r.time for r in store.records()] == [1e30]


# --- keys and bounds both stores are asked alike ---------------------------------------------

_ASKED: dict[str, Callable[[Store, str], object]] = {
    "conversation": lambda s, key: s.conversation(key),
    "rules": lambda s, key: s.rules(key),
    "claim_paused": lambda s, key: s.claim_paused(key),
    "records": lambda s, key: s.records(key),
    "model_calls": lambda s, key: s.model_calls(key),
    "model_replies": lambda s, key: s.model_replies(key),
    "vouches": lambda s, key: s.vouches(key),
}


@pytest.mark.parametrize("key", ["chat\x00", "chat\ud800"])
@pytest.mark.parametrize("method", sorted(_ASKED))
def test_a_key_no_store_keeps_is_refused_alike_when_asked_for(
    store: Store, method: str, key: str
) -> None:
    """SQLite found nothing for a NUL (None, "already claimed") and Postgres raised
    DataError; a lone surrogate was a bare UnicodeEncodeError from both."""
    with pytest.raises(AuditRecordError, match=r"NUL or (a )?lone surrogate"):
        _ASKED[method](store, key)


def test_a_paused_run_is_never_saved_where_its_own_request_id_cannot_claim_it(
    store: Store,
) -> None:
    """The id was stored escaped (req\\x00 as six characters), so claim_paused(request_id)
    answered None, as for a run already claimed, and the run was lost."""
    paused = PausedRun(
        request_id="req\x00",
        conversation=Composer().user("Refund it.").conversation(),
        approvals=(),
        prompt_sha256=_SHA,
        tools_sha256=_SHA,
    )
    with pytest.raises(AuditRecordError, match="save_paused"):
        store.save_paused(paused)
    assert store.pending_runs() == ()


@pytest.mark.parametrize(
    "bound",
    [
        {"until": math.nan},
        {"since": math.nan},
        {"until": "tomorrow"},
        {"since": True},
        {"until": 10**400},
    ],
    ids=["until NaN", "since NaN", "until a word", "since True", "until past a float"],
)
def test_a_time_range_bound_that_is_not_seconds_is_refused_by_both(
    store: Store, bound: dict[str, Any]
) -> None:
    """until=nan: SQLite found no record and Postgres every one (NaN is above every number)."""
    store.write(_AUDIT)
    with pytest.raises(AuditRecordError, match="pass seconds since the epoch"):
        store.records(**bound)
    assert store.records(until=math.inf) == store.records(until=10**30) == (_AUDIT,)
