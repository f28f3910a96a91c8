"""The run loop: send, run the calls, record, repeat; limits; structured output; concurrency."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

import pytest
from pydantic import BaseModel

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    Composer,
    Limits,
    ModelGateway,
    Registry,
    RunLimitError,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolContext,
    Usage,
    VeridicError,
    instruction,
    unfence,
)

SYSTEM = instruction("You answer questions about the weather.")


class Forecast(BaseModel):
    city: str
    sunny: bool


def make_registry(started: list[str] | None = None, barrier: bool = False) -> Registry:
    registry = Registry()
    arrived: dict[str, asyncio.Event] = {}

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """The current weather in a city.

        Args:
            city: The city.
        """
        return f"sunny in {city}"

    @registry.tool(kind="query")
    def slow_weather(city: str) -> str:
        """The weather in a city, from a slow station.

        Args:
            city: The city.
        """
        time.sleep(0.1)
        return f"sunny in {city}"

    @registry.tool(kind="query")
    async def get_wind(city: str) -> str:
        """The wind in a city, from the async station service.

        Args:
            city: The city.
        """
        if barrier:  # each call waits for the other: only concurrent calls both finish
            arrived.setdefault(city, asyncio.Event()).set()
            other = "Bergen" if city == "Oslo" else "Oslo"
            await asyncio.wait_for(arrived.setdefault(other, asyncio.Event()).wait(), 2)
        return f"calm in {city}"

    @registry.tool(kind="write")
    async def save_note(text: str) -> str:
        """Save a note for the user.

        Args:
            text: The note.
        """
        if started is not None:
            started.append(text)
        return "saved"

    return registry


def gateway(
    script: Sequence[Mapping[str, object]], *, asynchronous: bool = False
) -> tuple[ModelGateway, SQLiteAuditSink]:
    audit = SQLiteAuditSink(":memory:")
    provider = ScriptedProvider(script, asynchronous=asynchronous)
    return ModelGateway(provider, audit=audit), audit


def composer_for(registry: Registry) -> Composer:
    return Composer().system(SYSTEM, registry.view().capability_section()).user("Oslo?")


def test_a_run_sends_runs_the_calls_records_and_stops_at_the_answer() -> None:
    registry = make_registry()
    view = registry.view()
    script: list[dict[str, object]] = [
        {"tool_calls": [("c1", "get_weather", '{"city": "Oslo"}')]},
        {"text": "It is sunny in Oslo."},
    ]
    gw, audit = gateway(script)
    composer = composer_for(registry)
    result = gw.run(composer, view, policy=ApprovalPolicy(view), request_id="req-1")

    assert (result.text, result.turns, result.output) == ("It is sunny in Oslo.", 2, None)
    assert [outcome.result.value for outcome in result.outcomes] == ["sunny in Oslo"]
    prompt = composer.build()  # the whole conversation, the last answer included
    assert [m.role for m in prompt.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert unfence(prompt.messages[3].content) == [("tool:get_weather", "sunny in Oslo")]
    (record,) = audit.records("req-1")
    assert (record.tool, record.approval) == ("get_weather", ApprovalMode.NOT_REQUIRED)


def test_a_run_that_keeps_calling_tools_stops_at_its_turn_limit() -> None:
    registry = make_registry()
    view = registry.view()
    calls = [{"tool_calls": [(f"c{i}", "get_weather", '{"city": "Oslo"}')]} for i in range(5)]
    gw, audit = gateway(calls)
    with pytest.raises(RunLimitError) as caught:
        gw.run(
            composer_for(registry),
            view,
            policy=ApprovalPolicy(view),
            request_id="req-1",
            limits=Limits(turns=3),
        )
    error = caught.value
    assert (error.limit, error.allowed, error.reached) == ("turns", 3, 3)
    assert "limit of 3 model calls" in str(error)
    assert "Limits(turns=...)" in str(error)
    assert len(audit.records("req-1")) == 3  # what ran is recorded


def test_a_reply_asking_more_calls_than_the_limit_runs_none_of_them() -> None:
    started: list[str] = []
    registry = make_registry(started)
    view = registry.view()
    notes = [(f"c{i}", "save_note", f'{{"text": "n{i}"}}') for i in range(3)]
    gw, audit = gateway([{"tool_calls": notes}], asynchronous=True)
    policy = ApprovalPolicy(view)
    policy.allow_always("save_note")
    with pytest.raises(RunLimitError) as caught:
        asyncio.run(
            gw.arun(
                composer_for(registry),
                view,
                policy=policy,
                request_id="req-1",
                limits=Limits(tool_calls=2),
            )
        )
    assert (caught.value.limit, caught.value.reached) == ("tool_calls", 3)
    assert started == []
    assert audit.records("req-1") == ()


def test_a_wall_time_limit_is_checked_before_each_model_call() -> None:
    registry = make_registry()
    view = registry.view()
    script: list[dict[str, object]] = [
        {"tool_calls": [("c1", "slow_weather", '{"city": "Oslo"}')]},
        {"text": "Sunny."},
    ]
    gw, audit = gateway(script)
    with pytest.raises(RunLimitError) as caught:
        gw.run(
            composer_for(registry),
            view,
            policy=ApprovalPolicy(view),
            request_id="req-1",
            limits=Limits(seconds=0.05),
        )
    assert caught.value.limit == "seconds"
    assert caught.value.reached >= 0.05
    assert len(audit.records("req-1")) == 1  # the slow call ran; the next model call did not


def test_a_structured_answer_that_does_not_validate_is_sent_back_once_with_what_was_wrong() -> None:
    registry = make_registry()
    view = registry.view()
    script: list[dict[str, object]] = [
        {"text": '{"city": "Oslo"}'},
        {"text": '{"city": "Oslo", "sunny": true}'},
    ]
    gw, _ = gateway(script)
    composer = composer_for(registry)
    result = gw.run(
        composer, view, policy=ApprovalPolicy(view), request_id="req-1", output_type=Forecast
    )
    assert result.output == Forecast(city="Oslo", sunny=True)
    told = composer.build().messages[3]
    assert told.role == "user"
    assert "not a valid Forecast as JSON: sunny: Field required" in told.content

    gw, _ = gateway([{"text": "Sunny!"}, {"text": "Still sunny!"}])
    with pytest.raises(VeridicError, match=r"not a valid Forecast after 1 retry"):
        gw.run(
            composer_for(registry),
            view,
            policy=ApprovalPolicy(view),
            request_id="req-2",
            output_type=Forecast,
        )


def test_queries_run_concurrently_in_the_async_loop_and_keep_the_models_order() -> None:
    registry = make_registry(barrier=True)
    view = registry.view()
    script: list[dict[str, object]] = [
        {
            "tool_calls": [
                ("c1", "get_wind", '{"city": "Oslo"}'),
                ("c2", "get_wind", '{"city": "Bergen"}'),
            ]
        },
        {"text": "Calm in both."},
    ]
    gw, audit = gateway(script, asynchronous=True)
    result = asyncio.run(
        gw.arun(composer_for(registry), view, policy=ApprovalPolicy(view), request_id="req-1")
    )
    # Each handler waits for the other: run one after the other, the first would time out.
    assert [o.result.value for o in result.outcomes] == ["calm in Oslo", "calm in Bergen"]
    assert [o.call.id for o in result.outcomes] == ["c1", "c2"]
    assert len(audit.records("req-1")) == 2


def test_a_reply_with_a_write_runs_its_calls_in_order_and_the_user_is_asked() -> None:
    started: list[str] = []
    registry = make_registry(started)
    view = registry.view()
    script: list[dict[str, object]] = [
        {
            "tool_calls": [
                ("c1", "save_note", '{"text": "first"}'),
                ("c2", "save_note", '{"text": "second"}'),
            ]
        },
        {"text": "Saved both."},
    ]
    gw, audit = gateway(script, asynchronous=True)
    asked: list[str] = []

    async def confirm(request: object) -> bool:
        asked.append(getattr(request, "tool", ""))
        return True

    asyncio.run(
        gw.arun(
            composer_for(registry),
            view,
            policy=ApprovalPolicy(view),
            request_id="req-1",
            confirm=confirm,
        )
    )
    assert started == ["first", "second"]
    assert asked == ["save_note", "save_note"]
    assert [r.approval for r in audit.records("req-1")] == [ApprovalMode.USER_CONFIRMED] * 2


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"limits": "many"}, "Limits"),
        ({"output_type": dict}, "pass a pydantic model class"),
    ],
)
def test_a_run_that_cannot_mean_anything_is_refused_before_any_model_call(
    options: dict[str, object], fragment: str
) -> None:
    registry = make_registry()
    view = registry.view()
    gw, _ = gateway([])
    with pytest.raises(VeridicError, match=fragment):
        gw.run(  # type: ignore[call-overload]  # the wrong values are the point
            composer_for(registry),
            view,
            policy=ApprovalPolicy(view),
            request_id="req-1",
            **options,
        )


def test_limits_refuse_what_is_not_a_count() -> None:
    with pytest.raises(VeridicError, match=r"Limits\(turns=-1\)"):
        Limits(turns=-1)
    with pytest.raises(VeridicError, match=r"Limits\(seconds=0\)"):
        Limits(seconds=0)


def test_a_run_sums_the_tokens_of_its_calls_and_stops_at_its_token_limit() -> None:
    registry = make_registry()
    view = registry.view()
    weather = {"tool_calls": [("c1", "get_weather", '{"city": "Oslo"}')]}
    script: list[dict[str, object]] = [
        {**weather, "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "Sunny.", "usage": {"input_tokens": 150, "output_tokens": 5}},
    ]
    gw, _ = gateway(script)
    result = gw.run(composer_for(registry), view, policy=ApprovalPolicy(view), request_id="r")
    assert result.usage == Usage(250, 15)
    assert result.reply.usage == Usage(150, 5)

    gw, audit = gateway(script)
    with pytest.raises(RunLimitError) as caught:
        gw.run(
            composer_for(registry),
            view,
            policy=ApprovalPolicy(view),
            request_id="r",
            limits=Limits(tokens=100),
        )
    assert (caught.value.limit, caught.value.allowed, caught.value.reached) == ("tokens", 100, 110)
    assert audit.records("r") == ()  # the first answer's calls did not run


# --- the tool context --------------------------------------------------------------------


class Session:
    def __init__(self, user: str) -> None:
        self.user = user


def test_a_run_gives_its_context_to_the_handlers_that_ask_and_checks_it_first() -> None:
    registry = Registry()
    seen: list[tuple[str, str]] = []

    @registry.tool(kind="query")
    def my_orders(ctx: ToolContext[Session], status: str) -> str:
        """The orders of the user this request is for.

        Args:
            status: Only orders with this status.
        """
        seen.append((ctx.deps.user, ctx.request_id))
        return f"{ctx.deps.user}: none {status}"

    view = registry.view()
    script: list[dict[str, object]] = [
        {"tool_calls": [("c1", "my_orders", '{"status": "open"}')]},
        {"text": "You have no open orders."},
    ]
    gw, audit = gateway(script)
    result = gw.run(
        composer_for(registry),
        view,
        policy=ApprovalPolicy(view),
        request_id="r1",
        context=Session("ada"),
    )
    assert seen == [("ada", "r1")]
    assert result.outcomes[0].text == "ada: none open"
    assert audit.records("r1")[0].tool == "my_orders"

    # A run whose context a tool of the view cannot take is refused before any model call.
    gw2, audit2 = gateway(script)
    with pytest.raises(VeridicError, match=r"asks for a ToolContext\[Session\].*without one"):
        gw2.run(composer_for(registry), view, policy=ApprovalPolicy(view), request_id="r2")
    with pytest.raises(VeridicError, match="deps of type str"):
        asyncio.run(
            gateway(script, asynchronous=True)[0].arun(
                composer_for(registry),
                view,
                policy=ApprovalPolicy(view),
                request_id="r3",
                context="ada",
            )
        )
    assert audit2.model_calls() == ()
