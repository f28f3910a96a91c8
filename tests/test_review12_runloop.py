"""The run loop attacked once more: a paused run resumed against a store that never saw it,
what an error raised part-way says of the answer it leaves, and errors of concurrent calls.

Reproducers of a review of :mod:`veridic.run.run_loop` and :mod:`veridic.run.deferred`,
each through the public API with the ScriptedProvider and real SQLite stores.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalPolicy,
    ApprovalRequest,
    AsyncPostgresAuditSink,
    Composer,
    Limits,
    ModelGateway,
    PausedRun,
    PostgresAuditSink,
    Registry,
    RunLimitError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    instruction,
)
from veridic.gateway import ModelCallLog
from veridic.run.audit import AuditSink

if TYPE_CHECKING:
    from _postgres import PostgresServer

SYSTEM = instruction("You are the support agent of Acme.")


def make_registry(ran: list[str]) -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(f"get_order {order_id}")
        return f"order {order_id}: lost"

    @registry.tool(kind="write")
    def refund(order_id: int) -> str:
        """Refund an order to the card it was paid with.

        Args:
            order_id: The order.
        """
        ran.append(f"refund {order_id}")
        return f"refunded {order_id}"

    return registry


def system_part(view: ToolView) -> Composer:
    return Composer().system(SYSTEM, view.capability_section())


ONLY_REFUND = {"tool_calls": [("c1", "refund", '{"order_id": 42}')]}
LOOK_THEN_REFUND = {
    "tool_calls": [
        ("c1", "get_order", '{"order_id": 42}'),
        ("c2", "refund", '{"order_id": 42}'),
    ]
}


def paused_in(
    audit: AuditSink, answer: Mapping[str, object], *, calls: ModelCallLog | None = None
) -> PausedRun:
    view = make_registry([]).view()
    gateway = ModelGateway(ScriptedProvider([answer]), audit=audit, calls=calls)
    result = gateway.run(
        system_part(view).user("Refund order 42."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert result.paused is not None
    return result.paused


def resume(
    paused: PausedRun,
    audit: AuditSink,
    ran: list[str],
    *,
    asynchronous: bool,
    calls: ModelCallLog | None = None,
) -> str:
    view = make_registry(ran).view()
    provider = ScriptedProvider([{"text": "Refunded."}], asynchronous=asynchronous)
    gateway = ModelGateway(provider, audit=audit, calls=calls)
    answers = {approval.digest: True for approval in paused.approvals}
    composer = system_part(view)
    if asynchronous:
        result = asyncio.run(
            gateway.aresume(paused, composer, view, policy=ApprovalPolicy(view), answers=answers)
        )
    else:
        result = gateway.resume(
            paused, composer, view, policy=ApprovalPolicy(view), answers=answers
        )
    return result.text


# --- a resume asks a store that never saw the run -------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("answer", [ONLY_REFUND, LOOK_THEN_REFUND], ids=["first", "second"])
def test_a_paused_run_resumed_on_a_store_that_never_saw_it_is_refused(
    asynchronous: bool, answer: Mapping[str, object]
) -> None:
    """A copy of a paused run resumed twice must not refund twice, whatever store is at hand.

    A resume is refused when the gateway's store holds a record of a waiting call; a store
    that is not the one the run wrote to (an in-memory ``SQLiteAuditSink()`` made per
    request, another database) holds none, so every copy ran the refund again. The run's
    own model call is on record in the store it wrote to: a store without it is refused.
    """
    saved = paused_in(SQLiteAuditSink(), answer).to_json()
    ran: list[str] = []
    for _ in range(2):
        with pytest.raises(VeridicError, match="holds no record of") as refused:
            resume(PausedRun.from_json(saved), SQLiteAuditSink(), ran, asynchronous=asynchronous)
        assert "req-1" in str(refused.value)
        assert "store the run wrote to" in str(refused.value)
    assert ran == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_paused_run_resumed_on_its_own_store_runs_once(asynchronous: bool) -> None:
    audit = SQLiteAuditSink()
    saved = paused_in(audit, LOOK_THEN_REFUND).to_json()
    ran: list[str] = []
    assert resume(PausedRun.from_json(saved), audit, ran, asynchronous=asynchronous) == "Refunded."
    assert ran == ["refund 42"]
    with pytest.raises(VeridicError, match="was resumed already"):
        resume(PausedRun.from_json(saved), audit, ran, asynchronous=asynchronous)
    assert ran == ["refund 42"]


def test_with_model_calls_kept_apart_the_calls_before_the_pause_tell_the_store() -> None:
    """Model calls kept in another sink (``calls=``) cannot say whether the audit store
    saw the run; the calls that ran before the pause, each recorded, still can."""
    paused = paused_in(SQLiteAuditSink(), LOOK_THEN_REFUND, calls=ModelCallLog())
    ran: list[str] = []
    with pytest.raises(VeridicError, match="holds no record of"):
        resume(paused, SQLiteAuditSink(), ran, asynchronous=False, calls=ModelCallLog())
    assert ran == []


# --- what a run stopped part-way says of the answer it leaves --------------------------------


def interrupted_view(ran: list[str]) -> ToolView:
    registry = Registry()

    @registry.tool(kind="query")
    def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        ran.append(f"get_order {order_id}")
        raise KeyboardInterrupt  # Ctrl-C while the lookup ran

    return registry.view()


def test_an_interrupted_answer_whose_calls_all_ran_says_the_composer_goes_on() -> None:
    """The note said "its 0 other calls are unanswered, so the gateway will not send it as
    it is: ... or start the request anew", while every call was answered (the interrupted
    one recorded failed) and the composer went on; started anew, the request runs its
    calls again."""
    ran: list[str] = []
    view = interrupted_view(ran)
    script: list[Mapping[str, object]] = [
        {"tool_calls": [("c1", "get_order", '{"order_id": 42}')]},
        {"text": "Sorry."},
    ]
    gateway = ModelGateway(ScriptedProvider(script), audit=SQLiteAuditSink())
    composer = system_part(view).user("Where is order 42?")
    with pytest.raises(KeyboardInterrupt) as stopped:
        gateway.run(composer, view, policy=ApprovalPolicy(view), request_id="req-1")
    (note,) = stopped.value.__notes__
    assert "unanswered" not in note
    assert "will not send" not in note
    assert "every call of it is answered" in note
    assert "would run its calls again" in note
    assert composer.build().pending_tool_calls == ()
    result = gateway.run(composer, view, policy=ApprovalPolicy(view), request_id="req-1")
    assert result.text == "Sorry."
    assert ran == ["get_order 42"]


def test_a_cancelled_run_whose_concurrent_calls_all_ended_says_the_composer_goes_on() -> None:
    registry = Registry()
    started: list[int] = []

    @registry.tool(kind="query")
    async def get_order(order_id: int) -> str:
        """Look up an order's status.

        Args:
            order_id: The order.
        """
        started.append(order_id)
        await asyncio.Event().wait()  # never set: the lookup hangs until cancelled
        return "lost"

    view = registry.view()
    calls = [("c1", "get_order", '{"order_id": 1}'), ("c2", "get_order", '{"order_id": 2}')]
    provider = ScriptedProvider([{"tool_calls": calls}], asynchronous=True)
    gateway = ModelGateway(provider, audit=SQLiteAuditSink())
    composer = system_part(view).user("Where are orders 1 and 2?")

    async def cancelled() -> asyncio.CancelledError:
        run = asyncio.create_task(
            gateway.arun(composer, view, policy=ApprovalPolicy(view), request_id="req-1")
        )
        while len(started) < 2:
            await asyncio.sleep(0)
        run.cancel()
        try:
            await run
        except asyncio.CancelledError as error:
            return error
        raise AssertionError("the run was not cancelled")

    error = asyncio.run(cancelled())
    (note,) = error.__notes__
    assert "will not send" not in note
    assert "every call of it is answered" in note
    assert composer.build().pending_tool_calls == ()


# --- concurrent calls that fail together --------------------------------------------------------


def test_every_error_of_concurrent_calls_is_told_not_only_the_first() -> None:
    """Queries of one answer run at once; when two of them raise (here the user's
    ``confirm`` broke for each), one error is raised and the other vanished, with the
    name of the call it stopped."""
    ran: list[str] = []
    view = make_registry(ran).view()
    policy = ApprovalPolicy(view)
    policy.ask("get_order")

    async def confirm(request: ApprovalRequest) -> bool:
        raise ValueError(f"the dialog for order {request.arguments['order_id']} broke")

    calls = [("c1", "get_order", '{"order_id": 1}'), ("c2", "get_order", '{"order_id": 2}')]
    provider = ScriptedProvider([{"tool_calls": calls}], asynchronous=True)
    gateway = ModelGateway(provider, audit=SQLiteAuditSink())
    composer = system_part(view).user("Where are orders 1 and 2?")
    with pytest.raises(ValueError, match="order 1 broke") as raised:
        asyncio.run(
            gateway.arun(composer, view, policy=policy, request_id="req-1", confirm=confirm)
        )
    notes = "\n".join(raised.value.__notes__)
    assert "c2" in notes
    assert "get_order" in notes
    assert "ValueError" in notes
    assert "order 2 broke" in notes
    assert ran == []


# --- the limit an invalid structured answer meets --------------------------------------------


class Resolution(BaseModel):
    order_id: int
    refunded: bool


def test_a_turn_limit_after_an_invalid_structured_answer_says_so() -> None:
    """The run stopped saying it reached its limit "of 1 model calls (1) before the model
    answered without tool calls": the model had answered without tool calls, in a form
    that is not the output type, and the retry that would say so was not sent."""
    view = make_registry([]).view()
    gateway = ModelGateway(ScriptedProvider([{"text": "Refunded!"}]), audit=SQLiteAuditSink())
    composer = system_part(view).user("Refund order 42.")
    with pytest.raises(RunLimitError) as stopped:
        gateway.run(
            composer,
            view,
            policy=ApprovalPolicy(view),
            request_id="req-1",
            output_type=Resolution,
            limits=Limits(turns=1),
        )
    message = str(stopped.value)
    assert "limit of 1 model call (1)" in message
    assert "before the model answered without tool calls" not in message
    assert "not a valid Resolution" in message
    assert composer.conversation().turns[-1].kind == "user"  # the retry, kept, not sent


# --- an answer over the token limit that the conversation cannot record ----------------------


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("usage", [{"input_tokens": 100, "output_tokens": 5}, None])
def test_an_answer_over_the_token_limit_that_cannot_be_recorded_leaves_no_half_turn(
    asynchronous: bool, usage: Mapping[str, int] | None
) -> None:
    """An answer past ``Limits(tokens=...)`` (or without usage under it) is kept on the
    composer with its calls unanswered; one that repeats an earlier turn's call id cannot
    be kept, and the composer raised its own error half-way through recording it: the
    assistant turn and the first call on the composer, the repeated call dropped, and the
    run's own error (none of the calls ran; send the request again) never said."""
    ran: list[str] = []
    view = make_registry(ran).view()
    first: dict[str, object] = {
        "tool_calls": [("c1", "get_order", '{"order_id": 1}')],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    second: dict[str, object] = {
        "text": "And the others.",
        "tool_calls": [
            ("c2", "get_order", '{"order_id": 2}'),
            ("c1", "get_order", '{"order_id": 3}'),  # the id of the first turn's call
        ],
    }
    if usage is not None:
        second["usage"] = usage
    provider = ScriptedProvider([first, second], asynchronous=asynchronous)
    gateway = ModelGateway(provider, audit=SQLiteAuditSink())
    composer = system_part(view).user("Where are my orders?")
    policy, limits = ApprovalPolicy(view), Limits(tokens=50)

    def run() -> object:
        if asynchronous:
            return asyncio.run(
                gateway.arun(composer, view, policy=policy, request_id="req-1", limits=limits)
            )
        return gateway.run(composer, view, policy=policy, request_id="req-1", limits=limits)

    with pytest.raises(VeridicError, match="which a call of an earlier turn has"):
        run()
    turns = [(turn.kind, turn.call_id) for turn in composer.conversation().turns]
    assert turns == [("user", ""), ("tool_call", "c1"), ("tool_result", "c1")]
    assert composer.build().pending_tool_calls == ()
    assert ran == ["get_order 1"]


# --- second read: the store check on every store kind, and with calls= apart -----------------


def test_a_paused_run_resumes_on_another_handle_of_its_sqlite_file_once(tmp_path: Path) -> None:
    """Another process opens the file the run wrote to: that is the run's store, not a stranger."""
    database = tmp_path / "audit.db"
    saved = paused_in(SQLiteAuditSink(database), LOOK_THEN_REFUND).to_json()
    ran: list[str] = []
    resumed = resume(PausedRun.from_json(saved), SQLiteAuditSink(database), ran, asynchronous=False)
    assert resumed == "Refunded."
    with pytest.raises(VeridicError, match="was resumed already"):
        resume(PausedRun.from_json(saved), SQLiteAuditSink(database), ran, asynchronous=False)
    with pytest.raises(VeridicError, match="holds no record of"):
        resume(
            PausedRun.from_json(saved),
            SQLiteAuditSink(tmp_path / "other.db"),
            ran,
            asynchronous=False,
        )
    assert ran == ["refund 42"]


@pytest.fixture
def other_postgres_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """A second empty database: a store the run never wrote to, on the same server."""
    name = f"test_{uuid.uuid4().hex}"
    yield postgres_server.create_database(name)
    postgres_server.drop_database(name)


def test_a_paused_run_resumes_once_on_its_postgres_store_and_never_on_another(
    postgres_dsn: str, other_postgres_dsn: str
) -> None:
    with PostgresAuditSink(postgres_dsn) as audit:
        saved = paused_in(audit, ONLY_REFUND).to_json()
    ran: list[str] = []
    with (
        PostgresAuditSink(other_postgres_dsn) as stranger,
        pytest.raises(VeridicError, match="holds no record of"),
    ):
        resume(PausedRun.from_json(saved), stranger, ran, asynchronous=False)
    with PostgresAuditSink(postgres_dsn) as audit:
        assert resume(PausedRun.from_json(saved), audit, ran, asynchronous=False) == "Refunded."
        with pytest.raises(VeridicError, match="was resumed already"):
            resume(PausedRun.from_json(saved), audit, ran, asynchronous=False)
    assert ran == ["refund 42"]


def test_a_paused_run_aresumes_once_on_its_async_postgres_store_and_never_on_another(
    postgres_dsn: str, other_postgres_dsn: str
) -> None:
    ran: list[str] = []

    async def scenario() -> None:
        view = make_registry([]).view()
        async with AsyncPostgresAuditSink(postgres_dsn) as audit:
            provider = ScriptedProvider([ONLY_REFUND], asynchronous=True)
            paused = (
                await ModelGateway(provider, audit=audit).arun(
                    system_part(view).user("Refund order 42."),
                    view,
                    policy=ApprovalPolicy(view),
                    request_id="req-1",
                    defer=True,
                )
            ).paused
        assert paused is not None
        saved = paused.to_json()

        async def aresume(store: AsyncPostgresAuditSink) -> str:
            view = make_registry(ran).view()
            provider = ScriptedProvider([{"text": "Refunded."}], asynchronous=True)
            copy = PausedRun.from_json(saved)
            result = await ModelGateway(provider, audit=store).aresume(
                copy,
                system_part(view),
                view,
                policy=ApprovalPolicy(view),
                answers={approval.digest: True for approval in copy.approvals},
            )
            return result.text

        async with AsyncPostgresAuditSink(other_postgres_dsn) as stranger:
            with pytest.raises(VeridicError, match="holds no record of"):
                await aresume(stranger)
        async with AsyncPostgresAuditSink(postgres_dsn) as audit:
            assert await aresume(audit) == "Refunded."
            with pytest.raises(VeridicError, match="was resumed already"):
                await aresume(audit)

    asyncio.run(scenario())
    assert ran == ["refund 42"]


def test_a_run_paused_with_model_calls_apart_resumes_on_its_store_keeping_them_there() -> None:
    """The run kept its model calls in ``calls=``; the host that resumes keeps them in the
    audit store (a deploy changed it meanwhile). The store holds the record of the call
    the run made before the pause: it is the run's store, and the resume was refused
    saying it is not."""
    audit = SQLiteAuditSink()
    saved = paused_in(audit, LOOK_THEN_REFUND, calls=ModelCallLog()).to_json()
    ran: list[str] = []
    assert resume(PausedRun.from_json(saved), audit, ran, asynchronous=False) == "Refunded."
    with pytest.raises(VeridicError, match="was resumed already"):
        resume(PausedRun.from_json(saved), audit, ran, asynchronous=False)
    assert ran == ["refund 42"]


def test_a_store_without_the_paused_model_call_is_refused_saying_where_model_calls_went() -> None:
    """Nothing of the run on record but its model call, which went to ``calls=``: the store
    cannot tell, and the error names the store it asked and both causes it may have."""
    saved = paused_in(SQLiteAuditSink(), ONLY_REFUND, calls=ModelCallLog()).to_json()
    ran: list[str] = []
    with pytest.raises(VeridicError, match="holds no record of") as refused:
        resume(PausedRun.from_json(saved), SQLiteAuditSink(), ran, asynchronous=False)
    message = str(refused.value)
    assert "SQLiteAuditSink(':memory:')" in message
    assert "calls=" in message
    assert ran == []


def test_the_refusal_clips_a_long_request_id() -> None:
    audit = SQLiteAuditSink()
    view = make_registry([]).view()
    long_id = "r" * 4000
    result = ModelGateway(ScriptedProvider([ONLY_REFUND]), audit=audit).run(
        system_part(view).user("Refund order 42."),
        view,
        policy=ApprovalPolicy(view),
        request_id=long_id,
        defer=True,
    )
    assert result.paused is not None
    with pytest.raises(VeridicError, match="holds no record of") as refused:
        resume(result.paused, SQLiteAuditSink(), [], asynchronous=False)
    assert long_id not in str(refused.value)


def test_records_of_another_run_under_the_same_request_id_do_not_vouch_for_a_store() -> None:
    """Request ids are the application's: another store may hold another run's records
    under ``req-1``. Any record of the request was taken for a trace of the paused run, and
    a copy resumed there ran the refund again; only a record of a call the paused run made
    tells its store."""
    saved = paused_in(SQLiteAuditSink(), LOOK_THEN_REFUND, calls=ModelCallLog()).to_json()
    stranger = SQLiteAuditSink()
    view = make_registry([]).view()
    other_run = {"tool_calls": [("x1", "get_order", '{"order_id": 7}')]}
    ModelGateway(
        ScriptedProvider([other_run, {"text": "Order 7 is lost."}]),
        audit=stranger,
        calls=ModelCallLog(),
    ).run(
        system_part(view).user("Where is order 7?"),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
    )
    ran: list[str] = []
    for _ in range(2):
        with pytest.raises(VeridicError, match="holds no record of"):
            resume(
                PausedRun.from_json(saved), stranger, ran, asynchronous=False, calls=ModelCallLog()
            )
    assert ran == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_tool_call_limit_met_by_the_answer_to_a_retry_does_not_say_the_retry_was_unsent(
    asynchronous: bool,
) -> None:
    """The answer to the retry of an invalid structured answer is checked against the tool
    call limit before it is counted; the limit's error said the answer was "not a valid
    Resolution" and the retry "not sent", of a retry the model had answered with calls."""
    ran: list[str] = []
    view = make_registry(ran).view()
    script: list[Mapping[str, object]] = [{"text": "Refunded!"}, LOOK_THEN_REFUND]
    provider = ScriptedProvider(script, asynchronous=asynchronous)
    gateway = ModelGateway(provider, audit=SQLiteAuditSink())
    composer = system_part(view).user("Refund order 42.")
    policy, limits = ApprovalPolicy(view), Limits(tool_calls=1)

    def run() -> object:
        if asynchronous:
            return asyncio.run(
                gateway.arun(
                    composer,
                    view,
                    policy=policy,
                    request_id="req-1",
                    output_type=Resolution,
                    limits=limits,
                )
            )
        return gateway.run(
            composer, view, policy=policy, request_id="req-1", output_type=Resolution, limits=limits
        )

    with pytest.raises(RunLimitError) as stopped:
        run()
    message = str(stopped.value)
    assert "limit of 1 tool call (2)" in message
    assert "not a valid" not in message
    assert "was not sent" not in message
    assert ran == []
