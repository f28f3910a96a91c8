"""Attacker review of the stores, records and the run's persistence: each test failed before
its fix (a stored paused run, conversation or record an outsider could bend)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from test_deferred import gateway, make_registry, paused_run, system_part

from veridic import (
    ApprovalPolicy,
    Composer,
    ModelGateway,
    PausedRun,
    PostgresAuditSink,
    ScriptedProvider,
    SQLiteAuditSink,
    VeridicError,
    untrusted,
)


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
    with pytest.raises(VeridicError, match="two approvals for call .c2."):
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
    conversation = Composer().user("Summarise.").data("page", untrusted(text, source="web")).conversation()
    conversation.to_json().encode("utf-8")
    store.save_conversation("chat-1", conversation)
    assert store.conversation("chat-1") == conversation
