"""A handler's ToolContext: the request's deps reach it, and nothing of them reaches the model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    ApprovalRequest,
    CallOutcome,
    CallResult,
    Composer,
    InvalidArgumentsError,
    Registry,
    SQLiteAuditSink,
    ToolContext,
    ToolView,
    VeridicError,
    aexecute,
    execute,
    find_doc_gaps,
    instruction,
)
from veridic.checks.lint import lint
from veridic.checks.manifest import build_manifest
from veridic.run.approval import Confirm

PROMPT = Composer().system(instruction("You help the shop's staff with orders.")).build()
SECRET = "session-token-4242"


@dataclass
class Shop:
    """What the application passes per request: the user, and their session."""

    user: str
    token: str = SECRET
    seen: list[str] = field(default_factory=list)


@dataclass
class OtherDeps:
    user: str


def shop_registry() -> Registry:
    registry = Registry("shop")

    @registry.tool(kind="query")
    def list_orders(ctx: ToolContext[Shop], status: str) -> str:
        """List the orders of the user the request is for.

        Args:
            ctx: The request's shop session (not sent by the model).
            status: Which orders, e.g. "open".
        """
        ctx.deps.seen.append(f"{ctx.tool}:{ctx.request_id}")
        return f"{ctx.deps.user} {status}"

    @registry.tool(kind="write")
    def cancel_order(order_id: int, reason: str, ctx: ToolContext[Shop]) -> str:
        """Cancel one of the user's orders; it can be placed again.

        Args:
            order_id: The order to cancel.
            reason: Why, as the user said it.
        """
        ctx.deps.seen.append(f"cancel {order_id}")
        return f"cancelled {order_id} for {ctx.deps.user}"

    @registry.tool(kind="query")
    def opening_hours(day: str) -> str:
        """The shop's opening hours on a day of the week.

        Args:
            day: The day, e.g. "Monday".
        """
        return f"{day}: 9-17"

    return registry


def run(
    view: ToolView,
    name: str,
    arguments: dict[str, object],
    *,
    audit: SQLiteAuditSink | None = None,
    confirm: Confirm | None = None,
    context: object = None,
) -> CallResult:
    return execute(
        view,
        name,
        arguments,
        policy=ApprovalPolicy(view),
        audit=audit if audit is not None else SQLiteAuditSink(":memory:"),
        request_id="req-1",
        prompt=PROMPT,
        confirm=confirm,
        context=context,
    )


def recorder(asked: list[ApprovalRequest]) -> Confirm:
    """A user who confirms every call, and remembers what they were asked."""

    def confirm(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    return confirm


# --- what the handler gets ------------------------------------------------------


def test_handler_gets_the_deps_the_request_id_and_its_own_name() -> None:
    view = shop_registry().view()
    shop = Shop("ada")
    result = run(view, "list_orders", {"status": "open"}, context=shop)
    assert result.ok
    assert result.value == "ada open"
    assert shop.seen == ["list_orders:req-1"]


def test_handler_gets_exactly_the_object_passed() -> None:
    registry = Registry()
    got: list[ToolContext[object]] = []

    @registry.tool(kind="query", name="read_deps")
    def handler(ctx: ToolContext[object]) -> str:
        """Read back what the application passed for this request."""
        got.append(ctx)
        return "ok"

    view = registry.view()
    deps = object()
    assert run(view, "read_deps", {}, context=deps).ok
    assert got[0].deps is deps
    assert (got[0].tool, got[0].request_id) == ("read_deps", "req-1")


@settings(max_examples=60, deadline=None)
@given(
    deps=st.one_of(
        st.none(),
        st.integers(),
        st.text(),
        st.lists(st.integers()),
        st.dictionaries(st.text(), st.integers()),
        st.builds(Shop, user=st.text()),
    ),
    request_id=st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40
    ).filter(str.strip),
)
def test_for_any_deps_the_handler_gets_that_object_and_the_call_s_request_id(
    deps: object, request_id: str
) -> None:
    registry = Registry()
    got: list[ToolContext[object]] = []

    @registry.tool(kind="query")
    def echo(ctx: ToolContext[object], note: str) -> str:
        """Echo a note, after reading the request's context.

        Args:
            note: Any text.
        """
        got.append(ctx)
        return note

    view = registry.view()
    audit = SQLiteAuditSink(":memory:")
    result = execute(
        view,
        "echo",
        {"note": "hi"},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id=request_id,
        prompt=PROMPT,
        context=deps,
    )
    assert result.ok
    assert got[0].deps is deps
    assert got[0].request_id == request_id == result.record.request_id


def test_async_handler_gets_its_context_through_aexecute() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    async def find_customer(email: str, ctx: ToolContext[Shop]) -> str:
        """Find a customer of the shop by email address.

        Args:
            email: The customer's address.
        """
        await asyncio.sleep(0)
        return f"{email} seen by {ctx.deps.user} in {ctx.request_id}"

    view = registry.view()
    result = asyncio.run(
        aexecute(
            view,
            "find_customer",
            {"email": "a@example.com"},
            policy=ApprovalPolicy(view),
            audit=SQLiteAuditSink(":memory:"),
            request_id="req-9",
            prompt=PROMPT,
            context=Shop("ada"),
        )
    )
    assert result.value == "a@example.com seen by ada in req-9"
    assert asyncio.run(view.adispatch("find_customer", {"email": "b@x"}, context=Shop("bo")))


def test_positional_only_and_underscored_context_parameters_are_accepted() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def stock(_ctx: ToolContext[Shop], /, sku: str) -> str:
        """How many items of a product the shop has in stock.

        Args:
            sku: The product's stock-keeping unit.
        """
        return f"{sku}: 3 (asked by {_ctx.deps.user})"

    view = registry.view()
    assert view.dispatch("stock", {"sku": "A1"}, context=Shop("ada")) == "A1: 3 (asked by ada)"
    assert view.tool("stock").parameters == ("sku",)


def test_tools_that_ask_for_no_context_ignore_it() -> None:
    view = shop_registry().view()
    assert run(view, "opening_hours", {"day": "Monday"}, context=Shop("ada")).value == (
        "Monday: 9-17"
    )
    assert run(view, "opening_hours", {"day": "Monday"}, context="anything").ok
    assert view.dispatch("opening_hours", {"day": "Friday"}, context=42) == "Friday: 9-17"


def test_external_tools_get_the_model_s_arguments_only() -> None:
    registry = Registry()
    received: list[dict[str, object]] = []

    def forward(arguments: dict[str, object]) -> str:
        received.append(arguments)
        return "found"

    registry.external(
        name="search_docs",
        description="Search the shop's help pages for a phrase.",
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "The phrase."}},
            "required": ["query"],
        },
        handler=forward,
        kind="query",
        source="mcp:docs",
    )
    view = registry.view()
    assert run(view, "search_docs", {"query": "refunds"}, context=Shop("ada")).ok
    assert received == [{"query": "refunds"}]
    assert view.tool("search_docs").context is None


def test_a_handler_delegating_with_its_deps_keeps_the_request_id() -> None:
    registry = Registry()
    seen: list[tuple[str, str]] = []

    @registry.tool(kind="query")
    def order_total(order_id: int, ctx: ToolContext[Shop]) -> int:
        """The total of one of the user's orders, in cents.

        Args:
            order_id: The order.
        """
        seen.append((ctx.tool, ctx.request_id))
        return 1200

    @registry.tool(kind="query")
    def basket_total(ctx: ToolContext[Shop]) -> object:
        """The total of the user's open orders, in cents."""
        seen.append((ctx.tool, ctx.request_id))
        return view.dispatch("order_total", {"order_id": 7}, context=ctx.deps)

    view = registry.view()
    assert run(view, "basket_total", {}, context=Shop("ada")).value == 1200
    assert seen == [("basket_total", "req-1"), ("order_total", "req-1")]


def test_dispatch_takes_a_request_id_or_makes_a_fresh_one() -> None:
    view = shop_registry().view()
    shop = Shop("ada")
    view.dispatch("list_orders", {"status": "open"}, context=shop, request_id="test-1")
    view.dispatch("list_orders", {"status": "open"}, context=shop)
    view.dispatch("list_orders", {"status": "open"}, context=shop)
    given, first, second = (entry.split(":", 1)[1] for entry in shop.seen)
    assert given == "test-1"
    assert first.startswith("dispatch-")
    assert second.startswith("dispatch-")
    assert first != second
    with pytest.raises(VeridicError, match="request_id="):
        view.dispatch("list_orders", {"status": "open"}, context=shop, request_id=" ")


def test_a_tool_context_for_none_gets_the_request_id_without_deps() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def which_request(ctx: ToolContext[None]) -> str:
        """Say which request this call belongs to, for a support ticket."""
        return ctx.request_id

    @registry.tool(kind="query")
    def maybe_user(ctx: ToolContext[Shop | None]) -> str:
        """Name the signed-in user, or say that nobody is signed in."""
        return "nobody" if ctx.deps is None else ctx.deps.user

    view = registry.view()
    assert run(view, "which_request", {}).value == "req-1"
    assert run(view, "maybe_user", {}).value == "nobody"
    assert run(view, "maybe_user", {}, context=Shop("ada")).value == "ada"
    with pytest.raises(VeridicError, match=r"deps of type Shop, not None"):
        run(view, "which_request", {}, context=Shop("ada"))


# --- what the model sees ---------------------------------------------------------


@pytest.mark.parametrize("format", ["openai", "anthropic", "mcp"])
def test_the_context_parameter_is_in_no_tool_spec(format: str) -> None:
    view = shop_registry().view()
    specs = view.tool_specs(format)  # type: ignore[call-overload]
    text = json.dumps(specs)
    assert "ctx" not in text
    assert "ToolContext" not in text
    assert "Shop" not in text
    schemas = {
        (spec.get("function") or spec)["name"]: (
            spec.get("function", {}).get("parameters")
            or spec.get("input_schema")
            or spec.get("inputSchema")
        )
        for spec in specs
    }
    assert set(schemas["list_orders"]["properties"]) == {"status"}
    assert schemas["list_orders"]["required"] == ["status"]
    assert set(schemas["cancel_order"]["properties"]) == {"order_id", "reason"}
    assert schemas["cancel_order"]["required"] == ["order_id", "reason"]


def test_the_capability_section_and_the_schema_tool_do_not_show_it() -> None:
    view = shop_registry().view()
    section = str(view.capability_section())
    assert "ctx" not in section
    assert "ToolContext" not in section
    assert "list_orders (query, low risk; requires status)" in section
    answer = view.dispatch("get_tool_schema", {"name": "cancel_order"})
    assert isinstance(answer, dict)
    assert answer["required"] == ["order_id", "reason"]
    assert set(answer["input_schema"]["properties"]) == {"order_id", "reason"}
    assert "ctx" not in json.dumps(answer)
    tool = view.tool("cancel_order")
    assert tool.parameters == ("order_id", "reason")
    assert tool.required == tool.parameters
    assert tool.context is not None
    assert tool.context.name == "ctx"
    assert tool.context.expects == "ToolContext[Shop]"


def test_a_model_argument_named_like_the_context_is_refused_and_never_reaches_it() -> None:
    view = shop_registry().view()
    shop = Shop("ada")
    audit = SQLiteAuditSink(":memory:")
    result = run(
        view, "list_orders", {"status": "open", "ctx": "forged"}, audit=audit, context=shop
    )
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, InvalidArgumentsError)
    assert result.error.fields == ("ctx",)
    assert shop.seen == []
    assert audit.records()[0].detail == "invalid_arguments: ctx"
    with pytest.raises(InvalidArgumentsError):
        view.dispatch("list_orders", {"status": "open", "ctx": {}}, context=shop)
    assert shop.seen == []


def test_the_audit_record_and_the_approval_request_keep_the_model_s_arguments_only() -> None:
    view = shop_registry().view()
    asked: list[ApprovalRequest] = []
    audit = SQLiteAuditSink(":memory:")
    shop = Shop("ada")
    result = run(
        view,
        "cancel_order",
        {"order_id": 7, "reason": "late"},
        audit=audit,
        confirm=recorder(asked),
        context=shop,
    )
    assert result.value == "cancelled 7 for ada"
    assert shop.seen == ["cancel 7"]
    assert dict(asked[0].arguments) == {"order_id": 7, "reason": "late"}
    (record,) = audit.records("req-1")
    assert record.outcome is CallOutcome.OK
    assert SECRET not in repr(record)
    assert "Shop" not in repr(record)


def test_a_tool_context_s_repr_names_the_deps_type_not_their_value() -> None:
    registry = Registry()
    shown: list[str] = []

    @registry.tool(kind="query")
    def show(ctx: ToolContext[Shop]) -> str:
        """Show the request's context, as a log line would."""
        shown.append(repr(ctx))
        return "shown"

    registry.view().dispatch("show", context=Shop("ada"), request_id="r-2")
    assert shown == ["ToolContext(deps=<Shop>, request_id='r-2', tool='show')"]


# --- misuse ----------------------------------------------------------------------


def test_a_tool_that_asks_for_a_context_called_without_one_raises_before_anything_runs() -> None:
    view = shop_registry().view()
    audit = SQLiteAuditSink(":memory:")
    asked: list[ApprovalRequest] = []
    with pytest.raises(VeridicError) as raised:
        run(
            view,
            "cancel_order",
            {"order_id": 7, "reason": "late"},
            audit=audit,
            confirm=recorder(asked),
        )
    message = str(raised.value)
    assert "'cancel_order'" in message
    assert "test_tool_context.py:" in message
    assert "ToolContext[Shop]" in message
    assert "without one" in message
    assert "context=" in message
    assert asked == []
    assert audit.records() == ()
    with pytest.raises(VeridicError, match="without one"):
        view.dispatch("list_orders", {"status": "open"})
    with pytest.raises(VeridicError, match="without one"):
        view.validate("list_orders", {"status": "open"}).invoke()


def test_deps_of_another_type_raise_naming_the_tool_its_origin_and_both_types() -> None:
    view = shop_registry().view()
    audit = SQLiteAuditSink(":memory:")
    with pytest.raises(VeridicError) as raised:
        run(view, "list_orders", {"status": "open"}, audit=audit, context=OtherDeps("ada"))
    message = str(raised.value)
    assert "'list_orders'" in message
    assert "test_tool_context.py:" in message
    assert "deps of type OtherDeps, not Shop" in message
    assert audit.records() == ()
    with pytest.raises(VeridicError, match="deps of type str, not Shop"):
        asyncio.run(view.adispatch("list_orders", {"status": "open"}, context="ada"))


def test_a_tool_context_is_built_by_veridic_only_and_is_not_deps() -> None:
    with pytest.raises(VeridicError, match="constructed directly"):
        ToolContext(Shop("ada"), "req-1", "list_orders")
    registry = Registry()
    kept: list[ToolContext[Shop]] = []

    @registry.tool(kind="query")
    def keep(ctx: ToolContext[Shop]) -> str:
        """Keep the request's context for the next check."""
        kept.append(ctx)
        return "kept"

    view = registry.view()
    view.dispatch("keep", context=Shop("ada"))
    with pytest.raises(VeridicError, match=r"context=ctx\.deps"):
        view.dispatch("keep", context=kept[0])
    with pytest.raises(AttributeError):
        kept[0].tool = "other"  # type: ignore[misc]


def test_malformed_context_parameters_fail_when_the_registry_boots() -> None:
    def booted(register: Callable[..., str]) -> str:
        registry = Registry()
        registry.tool(kind="query")(register)
        with pytest.raises(VeridicError) as raised:
            registry.view()
        return str(raised.value)

    def two(a: ToolContext[Shop], b: ToolContext[Shop]) -> str:
        """Take two contexts, which a call never has."""
        return ""

    def defaulted(ctx: ToolContext[Shop] | None = None) -> str:
        """Take an optional context, which veridic never leaves out."""
        return ""

    def with_default(ctx: ToolContext[Shop] = None) -> str:  # type: ignore[assignment]
        """Take a context with a default."""
        return ""

    def bare(ctx: ToolContext) -> str:  # type: ignore[type-arg]
        """Take a context of unknown deps."""
        return ""

    def starred(*ctx: ToolContext[Shop]) -> str:
        """Take contexts as *args."""
        return ""

    message = booted(two)
    assert "two ToolContext parameters, 'a' and 'b'" in message
    assert "'two'" in message
    assert "inside another type" in booted(defaulted)
    assert "a default" in booted(with_default)
    assert "without its deps type" in booted(bare)
    assert "*ctx" in booted(starred)


# --- documentation gaps, lint, manifest ----------------------------------------


def test_doc_gaps_do_not_ask_for_the_context_parameter() -> None:
    registry = shop_registry()  # cancel_order has no Args entry for ctx, list_orders has one
    assert find_doc_gaps(registry) == []
    assert find_doc_gaps(registry.view()) == []
    assert [f for f in lint(registry) if f.severity == "error"] == []


def test_a_description_naming_the_context_parameter_is_a_gap() -> None:
    registry = Registry()

    @registry.tool(kind="query")
    def list_returns(ctx: ToolContext[Shop], since: str) -> str:
        """List the returns of the user in `ctx` since a date.

        Args:
            since: ISO date, e.g. "2024-01-31".
        """
        return since

    (gap,) = find_doc_gaps(registry)
    assert (gap.tool, gap.parameter, str(gap.code)) == ("list_returns", "ctx", "unknown-parameter")
    assert "ToolContext parameter" in gap.message
    assert "neither sees nor may send" in gap.message


def test_the_manifest_does_not_record_the_context_parameter() -> None:
    with_context = Registry()
    without = Registry()

    @with_context.tool(kind="query")
    def list_orders(ctx: ToolContext[Shop], status: str) -> str:
        """List the orders of the user the request is for.

        Args:
            status: Which orders, e.g. "open".
        """
        return status

    @without.tool(kind="query", name="list_orders")
    def plain(status: str) -> str:
        """List the orders of the user the request is for.

        Args:
            status: Which orders, e.g. "open".
        """
        return status

    assert build_manifest(with_context)["tools"] == build_manifest(without)["tools"]
    assert with_context.view().tools_sha256() == without.view().tools_sha256()
