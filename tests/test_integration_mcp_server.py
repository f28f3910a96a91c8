"""A view served over MCP: its own tool list, every call through the executor, approval asked.

Each test is a whole run against the real ``mcp`` SDK, without a network: an
in-process ``mcp.Client(server)`` for most (on the 2026-07-28 protocol, where a
question rides an ``InputRequiredResult``, and on the handshake protocol,
``mode="legacy"``, where it is an ``elicitation/create`` request during the
call), and the example application as a real subprocess over stdio.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import cast

import anyio
import mcp_types as types
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import ClientRequestContext, ElicitationFnT

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    BootError,
    CallOutcome,
    MissingExtraError,
    ProvenanceError,
    Registry,
    Risk,
    SQLiteAuditSink,
    ToolView,
    VeridicError,
    untrusted,
)
from veridic.integrations.mcp.server import (
    APPROVAL_INPUT,
    PROMPT_SHA256_META,
    REQUEST_ID_META,
    UNSEEN_PROMPT_SHA256,
    McpRequest,
    mcp_server,
)
from veridic.tools.tool import ToolHints
from veridic.tools.tool_specs import mcp_annotations

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the examples package lives at the repository root

from examples.mcp_server_app import Notes, build_registry  # noqa: E402

MODES = ("auto", "legacy")  # 2026-07-28 (InputRequiredResult), and the handshake protocol


class Shop:
    """A registry of each kind of tool, and what its handlers did."""

    def __init__(self) -> None:
        self.deleted: list[int] = []
        self.registry = registry = Registry("shop")

        @registry.tool(kind="query", hints=ToolHints(open_world=False, title="Find an order"))
        def find_order(order_id: int) -> dict[str, object]:
            """Look an order up by its number.

            Args:
                order_id: The order's number.
            """
            return {"id": order_id, "status": "shipped"}

        @registry.tool(kind="write", hints=ToolHints(additive=True))
        def add_note(order_id: int, text: str) -> str:
            """Add a note to an order; earlier notes are kept.

            Args:
                order_id: The order's number.
                text: The note.
            """
            return f"noted on {order_id}"

        @registry.tool(kind="write", hints=ToolHints(idempotent=True, open_world=True))
        def set_address(order_id: int, address: str) -> str:
            """Replace the delivery address of an order.

            Args:
                order_id: The order's number.
                address: The new address.
            """
            return f"{order_id} ships to {address}"

        @registry.tool(kind="write", irreversible=True, hints=ToolHints(additive=True))
        def delete_order(order_id: int) -> str:
            """Permanently delete an order; this cannot be undone.

            Args:
                order_id: The order to delete.
            """
            self.deleted.append(order_id)
            return f"deleted {order_id}"

        @registry.tool(kind="query")
        def broken_report(day: str) -> str:
            """Build the sales report of a day.

            Args:
                day: The day, as YYYY-MM-DD.
            """
            raise RuntimeError(f"no sales data for {day}")

        def licence() -> None:
            raise BootError("the refunds licence expired")

        pro = registry.component("Refunds", boot=licence, hint="Renew the licence.")

        @pro.tool(kind="write")
        def refund(order_id: int) -> str:
            """Refund an order to the original payment method.

            Args:
                order_id: The order to refund.
            """
            return "refunded"

    def view(self, request: McpRequest | None = None) -> ToolView:
        return self.registry.view()


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


def answering(approve: bool | None, asked: list[types.ElicitRequestFormParams]) -> ElicitationFnT:
    """An elicitation callback: accepts with ``approve`` (declines when ``None``), notes each."""

    async def callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params)
        if approve is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


# --- the tool list ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_tool_list_is_the_views_mcp_specs(
    shop: Shop, audit: SQLiteAuditSink, mode: str
) -> None:
    view = shop.view()
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode=mode) as client:
            listed = await client.list_tools()
        sent = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
        assert sent == copy.deepcopy(view.tool_specs("mcp"))
        assert {tool["name"] for tool in sent} == set(view.names())

    run(main)
    assert "refund" not in view.names()  # its component did not start: in no list
    assert "refund" in view.capability_section()  # the section says so instead


def test_the_annotations_follow_the_protocol(shop: Shop, audit: SQLiteAuditSink) -> None:
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server) as client:
            listed = await client.list_tools()
        annotations = {
            t.name: t.annotations.model_dump(by_alias=True, exclude_none=True)
            for t in listed.tools
            if t.annotations is not None
        }
        assert annotations == {
            "get_tool_schema": {"readOnlyHint": True},
            "find_order": {"readOnlyHint": True, "openWorldHint": False, "title": "Find an order"},
            # Declared additive: only adds, so not destructive.
            "add_note": {"readOnlyHint": False, "destructiveHint": False},
            # Not declared additive: destructive, as the protocol assumes; idempotent as declared.
            "set_address": {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": True,
                "openWorldHint": True,
            },
            # High risk: destructive whatever it declared.
            "delete_order": {"readOnlyHint": False, "destructiveHint": True},
            "broken_report": {"readOnlyHint": True},
        }

    run(main)


# --- calls -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_query_runs_and_its_value_comes_back_as_text_and_structured_content(
    shop: Shop, audit: SQLiteAuditSink, mode: str
) -> None:
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode=mode) as client:
            found = await client.call_tool("find_order", {"order_id": 7})
            noted = await client.call_tool("get_tool_schema", {"name": "add_note"})
        assert not found.is_error
        assert found.structured_content == {"id": 7, "status": "shipped"}
        assert text_of(found) == '{"id": 7, "status": "shipped"}'
        assert not noted.is_error
        assert noted.structured_content is not None
        assert noted.structured_content["required"] == ["order_id", "text"]

    run(main)
    first, second = audit.records()
    assert (first.tool, first.approval, first.outcome) == (
        "find_order",
        ApprovalMode.NOT_REQUIRED,
        CallOutcome.OK,
    )
    assert first.tools_sha256 == shop.view().tools_sha256()
    assert first.prompt_sha256 == UNSEEN_PROMPT_SHA256  # the server never saw the prompt
    assert first.request_id != second.request_id  # each call its own request, unless told


@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_user_approves_through_elicitation_runs_recorded_user_confirmed(
    shop: Shop, audit: SQLiteAuditSink, mode: str
) -> None:
    asked: list[types.ElicitRequestFormParams] = []
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode=mode, elicitation_callback=answering(True, asked)) as c:
            result = await c.call_tool("delete_order", {"order_id": 42})
        assert not result.is_error
        assert text_of(result) == "deleted 42"

    run(main)
    assert shop.deleted == [42]
    (question,) = asked
    assert "'delete_order'" in question.message
    assert "risk high" in question.message
    assert "irreversible" in question.message  # why it needs approval
    assert '{"order_id": 42}' in question.message  # what is approved
    schema = question.requested_schema
    assert list(schema["properties"]) == ["approve"]  # yes or no: no "always allow"
    assert schema["properties"]["approve"]["type"] == "boolean"
    (record,) = audit.records()
    assert (record.tool, record.approval, record.outcome) == (
        "delete_order",
        ApprovalMode.USER_CONFIRMED,
        CallOutcome.OK,
    )
    assert record.irreversible


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("approve", [False, None], ids=["answers-no", "declines"])
def test_a_call_the_user_refuses_does_not_run_and_is_recorded_denied(
    shop: Shop, audit: SQLiteAuditSink, mode: str, approve: bool | None
) -> None:
    asked: list[types.ElicitRequestFormParams] = []
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        callback = answering(approve, asked)
        async with Client(server, mode=mode, elicitation_callback=callback) as client:
            result = await client.call_tool("delete_order", {"order_id": 42})
        assert result.is_error
        assert "not approved" in text_of(result)
        assert "the user refused" in text_of(result)

    run(main)
    assert shop.deleted == []
    assert len(asked) == 1
    (record,) = audit.records()
    assert (record.tool, record.approval, record.outcome) == (
        "delete_order",
        ApprovalMode.DENIED,
        CallOutcome.DENIED,
    )


def test_an_elicitation_the_client_fails_is_an_error_recorded_denied(
    shop: Shop, audit: SQLiteAuditSink
) -> None:
    async def failing(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="the form would not open")

    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode="legacy", elicitation_callback=failing) as client:
            result = await client.call_tool("delete_order", {"order_id": 42})
            found = await client.call_tool("find_order", {"order_id": 7})
        assert result.is_error
        assert "could not put the call of tool 'delete_order' to the user" in text_of(result)
        assert "the form would not open" in text_of(result)
        assert not found.is_error  # the server serves on

    run(main)
    assert shop.deleted == []
    first, _ = audit.records()
    assert (first.approval, first.outcome) == (ApprovalMode.DENIED, CallOutcome.DENIED)
    assert first.detail.endswith("confirm raised")


@pytest.mark.parametrize("mode", MODES)
def test_a_client_without_elicitation_is_refused_with_what_it_lacks(
    shop: Shop, audit: SQLiteAuditSink, mode: str
) -> None:
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("delete_order", {"order_id": 42})
        assert result.is_error
        message = text_of(result)
        assert "needs the user's approval" in message
        assert "did not declare the elicitation capability" in message
        assert "did not run" in message

    run(main)
    assert shop.deleted == []
    (record,) = audit.records()
    assert (record.approval, record.outcome) == (ApprovalMode.DENIED, CallOutcome.DENIED)
    assert record.detail.endswith(
        "the MCP client could not be asked: it did not declare the elicitation capability"
    )


def test_a_standing_rule_from_the_policy_factory_decides_without_asking(
    shop: Shop, audit: SQLiteAuditSink
) -> None:
    asked: list[types.ElicitRequestFormParams] = []

    def policy(view: ToolView) -> ApprovalPolicy:
        return ApprovalPolicy(view, rules={"add_note": "always", "set_address": "deny"})

    server = mcp_server(shop.view, audit=audit, policy=policy)

    async def main() -> None:
        async with Client(server, elicitation_callback=answering(True, asked)) as client:
            added = await client.call_tool("add_note", {"order_id": 1, "text": "fragile"})
            moved = await client.call_tool("set_address", {"order_id": 1, "address": "x"})
        assert text_of(added) == "noted on 1"
        assert moved.is_error
        assert "a deny rule for 'set_address'" in text_of(moved)

    run(main)
    assert asked == []
    approvals = [(r.tool, r.approval) for r in audit.records()]
    assert approvals == [
        ("add_note", ApprovalMode.ALWAYS_RULE),
        ("set_address", ApprovalMode.DENIED),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_name_fails_with_veridics_message_and_is_recorded(
    shop: Shop, audit: SQLiteAuditSink, mode: str
) -> None:
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("find_ordr", {"order_id": 1})
        assert result.is_error
        assert text_of(result).startswith("no tool is named 'find_ordr'")
        assert "find_order" in text_of(result)  # the nearest valid name

    run(main)
    (record,) = audit.records()
    assert (record.tool, record.outcome, record.kind) == ("find_ordr", CallOutcome.REFUSED, None)


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_whose_component_did_not_boot_is_not_listed_and_fails_with_the_reason(
    shop: Shop, audit: SQLiteAuditSink, mode: str
) -> None:
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server, mode=mode) as client:
            listed = await client.list_tools()
            result = await client.call_tool("refund", {"order_id": 1})
        assert "refund" not in {tool.name for tool in listed.tools}
        assert result.is_error
        assert "component 'Refunds' did not start" in text_of(result)
        assert "the refunds licence expired" in text_of(result)

    run(main)
    (record,) = audit.records()
    assert (record.tool, record.outcome) == ("refund", CallOutcome.REFUSED)
    assert "unavailable" in record.detail


def test_a_failing_handler_and_invalid_arguments_are_errors_and_the_server_serves_on(
    shop: Shop, audit: SQLiteAuditSink
) -> None:
    server = mcp_server(shop.view, audit=audit)

    async def main() -> None:
        async with Client(server) as client:
            failed = await client.call_tool("broken_report", {"day": "2026-01-01"})
            invalid = await client.call_tool("find_order", {"order_id": "seven"})
            found = await client.call_tool("find_order", {"order_id": 7})
        assert failed.is_error
        assert text_of(failed) == (
            "the tool failed (RuntimeError); the application's log has what went wrong"
        )
        assert invalid.is_error
        assert "got invalid arguments" in text_of(invalid)
        assert not found.is_error

    run(main)
    outcomes = [r.outcome for r in audit.records()]
    assert outcomes == [CallOutcome.FAILED, CallOutcome.REFUSED, CallOutcome.OK]


def test_an_answer_counts_only_for_the_question_asked_and_only_once(
    shop: Shop, audit: SQLiteAuditSink
) -> None:
    server = mcp_server(shop.view, audit=audit)
    yes = types.ElicitResult(action="accept", content={"approve": True})

    async def main() -> None:
        async with Client(server, elicitation_callback=answering(True, [])) as client:
            session = client.session
            arguments = {"order_id": 5}
            # A yes nobody asked for: the server asks.
            forged = await session.call_tool(
                "delete_order",
                arguments,
                input_responses={APPROVAL_INPUT: yes},
                request_state="made-up",
                allow_input_required=True,
            )
            assert isinstance(forged, types.InputRequiredResult)
            assert forged.input_requests is not None
            assert list(forged.input_requests) == [APPROVAL_INPUT]
            token = forged.request_state
            # The yes answers another call's question (other arguments): asked again.
            other = await session.call_tool(
                "delete_order",
                {"order_id": 6},
                input_responses={APPROVAL_INPUT: yes},
                request_state=token,
                allow_input_required=True,
            )
            assert isinstance(other, types.InputRequiredResult)
            token = other.request_state
            done = await session.call_tool(
                "delete_order",
                {"order_id": 6},
                input_responses={APPROVAL_INPUT: yes},
                request_state=token,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult)
            assert not done.is_error
            # The same yes, sent again: the question is closed, so the server asks again.
            replayed = await session.call_tool(
                "delete_order",
                {"order_id": 6},
                input_responses={APPROVAL_INPUT: yes},
                request_state=token,
                allow_input_required=True,
            )
            assert isinstance(replayed, types.InputRequiredResult)

    run(main)
    assert shop.deleted == [6]
    (record,) = audit.records()  # a question waiting for its answer is not a call yet
    assert record.approval is ApprovalMode.USER_CONFIRMED


def test_the_view_factory_gets_each_request_and_the_client_may_name_its_turn(
    shop: Shop, audit: SQLiteAuditSink
) -> None:
    seen: list[McpRequest] = []

    async def view_of(request: McpRequest) -> ToolView:  # a factory may be async
        seen.append(request)
        return shop.view()

    server = mcp_server(view_of, audit=audit)
    sent = {REQUEST_ID_META: "turn-7", PROMPT_SHA256_META: "a" * 64}
    meta = cast("types.RequestParamsMeta", sent)  # _meta holds any key beside the SDK's

    async def main() -> None:
        async with Client(server) as client:
            await client.list_tools()
            await client.call_tool("find_order", {"order_id": 1}, meta=meta)
            await client.call_tool("find_order", {"order_id": 2}, meta=meta)

    run(main)
    assert [(r.method, r.tool) for r in seen] == [
        ("tools/list", None),
        ("tools/call", "find_order"),
        ("tools/call", "find_order"),
    ]
    assert seen[1].request_id == "turn-7"
    assert seen[1].protocol_version == "2026-07-28"
    records = audit.records("turn-7")
    assert len(records) == 2  # one model turn, two calls: the audit keeps them together
    assert {r.prompt_sha256 for r in records} == {"a" * 64}


def test_a_view_factory_that_raises_is_an_error_of_the_call_not_of_the_server(
    audit: SQLiteAuditSink,
) -> None:
    def view_of(request: McpRequest) -> ToolView:
        raise LookupError("tenant database is down")

    server = mcp_server(view_of, audit=audit)

    async def main() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError, match="could not build the tool view"):
                await client.list_tools()
            result = await client.call_tool("find_order", {"order_id": 1})
            again = await client.call_tool("find_order", {"order_id": 1})
        assert result.is_error
        assert "could not build the tool view for this request (LookupError)" in text_of(result)
        assert "tenant database" not in text_of(result)  # the log has it, the client not
        assert again.is_error

    run(main)
    assert audit.records() == ()  # no view, nothing dispatched


def test_without_the_sdk_the_entry_point_names_the_extra(
    shop: Shop, audit: SQLiteAuditSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'veridic\[mcp\]'"):
        mcp_server(shop.view, audit=audit)


def test_a_policy_or_an_audit_that_cannot_work_is_refused_when_the_server_is_built(
    shop: Shop,
) -> None:
    with pytest.raises(VeridicError, match="has no write"):
        mcp_server(shop.view, audit=object())  # type: ignore[arg-type]  # the misuse under test


# --- a real subprocess over stdio ------------------------------------------------------


def test_the_example_serves_its_registry_over_stdio(tmp_path: Path) -> None:
    stored = tmp_path / "audit.sqlite3"
    expected = build_registry(Notes()).view()
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "examples" / "mcp_server_app.py"), "--audit", str(stored)],
        cwd=str(ROOT),
    )
    asked: list[types.ElicitRequestFormParams] = []

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(params, elicitation_callback=answering(True, asked)) as client:
                listed = await client.list_tools()
                added = await client.call_tool("add_note", {"text": "buy milk"})
                deleted = await client.call_tool("delete_note", {"number": 1})
                notes = await client.call_tool("list_notes", {})
                search = await client.call_tool("search_notes", {"query": "milk"})
        sent = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
        assert sent == copy.deepcopy(expected.tool_specs("mcp"))
        assert added.structured_content == {"number": 1, "text": "buy milk"}
        assert text_of(deleted) == "note 1 deleted"
        assert notes.structured_content == {}
        assert search.is_error
        assert "the search index is not built" in text_of(search)

    run(main)
    (question,) = asked  # only the irreversible call was put to the user
    assert "'delete_note'" in question.message
    with SQLiteAuditSink(stored) as sink:
        rows = [(r.tool, r.approval, r.outcome) for r in sink.records()]
    assert rows == [
        ("add_note", ApprovalMode.ALWAYS_RULE, CallOutcome.OK),
        ("delete_note", ApprovalMode.USER_CONFIRMED, CallOutcome.OK),
        ("list_notes", ApprovalMode.NOT_REQUIRED, CallOutcome.OK),
        ("search_notes", ApprovalMode.NOT_ASKED, CallOutcome.REFUSED),
    ]


# --- the annotation rule, for every declaration ------------------------------------------


@st.composite
def declarations(draw: st.DrawFn) -> tuple[str, Risk | None, bool, ToolHints]:
    kind = draw(st.sampled_from(["query", "write"]))
    irreversible = kind == "write" and draw(st.booleans())
    # A declared risk under a floor fails at boot: irreversible is high.
    risk = draw(st.sampled_from([None, Risk.HIGH] if irreversible else [None, *Risk]))
    write = kind == "write"
    hints = ToolHints(
        additive=write and draw(st.booleans()),
        idempotent=draw(st.sampled_from([None, True, False])) if write else None,
        open_world=draw(st.sampled_from([None, True, False])),
    )
    if draw(st.booleans()):
        hints = dataclasses.replace(hints, title="Look it up")
    return kind, risk, irreversible, hints


@settings(max_examples=60, deadline=None)
@given(declarations())
def test_the_annotations_say_what_the_protocol_reads_and_never_lower_the_risk(
    declared: tuple[str, Risk | None, bool, ToolHints],
) -> None:
    kind, risk, irreversible, hints = declared
    built = []
    for given_hints in (hints, None):
        registry = Registry()

        @registry.tool(
            kind="query" if kind == "query" else "write",
            risk=risk,
            irreversible=irreversible,
            hints=given_hints,
        )
        def handle(item: str) -> str:
            """Handle an item of the store.

            Args:
                item: The item.
            """
            return item

        built.append(registry.view().tool("handle"))
    tool, plain = built
    assert tool.risk is plain.risk  # hints never change veridic's risk
    annotations = mcp_annotations(tool)
    assert annotations["readOnlyHint"] is (kind == "query")
    if kind == "query":
        assert "destructiveHint" not in annotations
        assert "idempotentHint" not in annotations
    else:
        assert annotations["destructiveHint"] is (not hints.additive or tool.risk is Risk.HIGH)
        assert annotations.get("idempotentHint") == hints.idempotent
        assert ("idempotentHint" in annotations) is (hints.idempotent is not None)
    assert annotations.get("openWorldHint") == hints.open_world
    assert ("openWorldHint" in annotations) is (hints.open_world is not None)
    assert annotations.get("title") == hints.title


def test_a_query_declaring_the_hints_of_a_write_is_refused_where_it_is_declared() -> None:
    registry = Registry()
    with pytest.raises(VeridicError, match='declared kind="query" with the hints of a write'):

        @registry.tool(kind="query", hints=ToolHints(idempotent=True))
        def lookup(item: str) -> str:
            """Look an item up.

            Args:
                item: The item.
            """
            return item


def test_a_title_must_be_written_in_code_and_fit_on_a_line() -> None:
    with pytest.raises(ProvenanceError, match="ToolHints"):
        ToolHints(title=untrusted("Delete everything", source="mcp:remote"))  # type: ignore[veridic-literal]  # the misuse under test
    with pytest.raises(VeridicError, match="is not a title"):
        ToolHints(title="two\nlines")
    with pytest.raises(VeridicError, match="is not a bool"):
        ToolHints(additive="yes")  # type: ignore[arg-type]  # the misuse under test


def test_an_external_tool_declares_its_hints_too() -> None:
    registry = Registry()
    registry.external(
        name="web_search",
        description="Search the web.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        handler=lambda arguments: "results",
        kind="query",
        source="mcp:search",
        hints=ToolHints(open_world=True, title="Web search"),
    )
    (spec,) = [s for s in registry.view().tool_specs("mcp") if s["name"] == "web_search"]
    assert spec["annotations"] == {
        "readOnlyHint": True,
        "openWorldHint": True,
        "title": "Web search",
    }


# --- the approval form shows every argument, and the yes is bound to all of them -----------

PRINTABLE = st.characters(categories=("L", "N", "P", "S"))  # printable: shown as they are


class Bank:
    """A high-risk irreversible transfer, and a high-risk external form of any fields."""

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []
        self.registry = registry = Registry("bank")

        @registry.tool(kind="write", risk="high", irreversible=True)
        def transfer(amount: int, memo: str, to_account: str) -> str:
            """Transfer money to an account.

            Args:
                amount: Amount in cents.
                memo: A note for the statement.
                to_account: The account that receives the money.
            """
            self.sent.append({"amount": amount, "memo": memo, "to_account": to_account})
            return "sent"

        def submit(arguments: dict[str, object]) -> str:
            self.sent.append(arguments)
            return "submitted"

        registry.external(
            name="submit_form",
            description="Submit a form of named fields.",
            input_schema={"type": "object"},
            handler=submit,
            kind="write",
            risk="high",
            source="the tests",
        )

    def view(self, request: McpRequest | None = None) -> ToolView:
        return self.registry.view()


def shown_json(value: object) -> str:
    """One value as the form shows it: its JSON, clipped alone at 160 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 160 else f"{text[:160]}… ({len(text)} chars)"


@pytest.mark.parametrize("mode", MODES)
def test_a_long_argument_cannot_hide_another_from_the_user(
    audit: SQLiteAuditSink, mode: str
) -> None:
    """The form used to clip the arguments' whole JSON at 500 characters: a memo (which
    sorts first) padded to that length hid the account the money went to, and the user's
    yes sent it there."""
    bank = Bank()
    asked: list[types.ElicitRequestFormParams] = []
    memo = "Monthly rent for flat 3B, as agreed with the landlord. " * 90
    arguments = {"amount": 120000, "memo": memo, "to_account": "ATTACKER-IBAN-666"}

    async def main() -> None:
        async with Client(
            mcp_server(bank.view, audit=audit),
            mode=mode,
            elicitation_callback=answering(False, asked),
        ) as client:
            result = await client.call_tool("transfer", arguments)
        assert result.is_error  # the user, who saw the account, said no

    run(main)
    (question,) = asked
    assert '"to_account": "ATTACKER-IBAN-666"' in question.message
    assert '"amount": 120000' in question.message
    assert f'"memo": {shown_json(memo)}, ' in question.message
    assert f"… ({len(memo) + 2} chars)" in question.message  # clipped alone, its length said
    assert len(question.message) < 1000
    assert bank.sent == []
    (record,) = audit.records()
    assert (record.approval, record.outcome) == (ApprovalMode.DENIED, CallOutcome.DENIED)


def test_the_yes_is_bound_to_the_whole_arguments_not_to_the_text_shown(
    audit: SQLiteAuditSink,
) -> None:
    """The question's digest covered only the message, so a retry that changed a part of a
    value past what the message shows carried the yes given to the other call."""
    bank = Bank()
    yes = types.ElicitResult(action="accept", content={"approve": True})
    memo = "Rent. " * 200
    seen = {"amount": 100, "memo": memo + "pay the landlord", "to_account": "DE00-LANDLORD"}
    swapped = {**seen, "memo": memo + "pay the attacker"}

    async def main() -> None:
        server = mcp_server(bank.view, audit=audit)
        async with Client(server, elicitation_callback=answering(True, [])) as client:
            session = client.session
            first = await session.call_tool("transfer", seen, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            retried = await session.call_tool(
                "transfer",
                swapped,
                input_responses={APPROVAL_INPUT: yes},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(retried, types.InputRequiredResult)  # asked again, not run
            assert first.input_requests is not None
            assert retried.input_requests is not None
            one = first.input_requests[APPROVAL_INPUT].params
            other = retried.input_requests[APPROVAL_INPUT].params
            assert isinstance(one, types.ElicitRequestFormParams)
            assert isinstance(other, types.ElicitRequestFormParams)
            assert one.message == other.message  # the change is in what the form clips
            done = await session.call_tool(
                "transfer",
                swapped,
                input_responses={APPROVAL_INPUT: yes},
                request_state=retried.request_state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult)
            assert not done.is_error

    run(main)
    assert bank.sent == [swapped]  # only with the yes to its own question


@pytest.mark.parametrize("mode", MODES)
def test_arguments_too_long_to_show_whole_are_refused_unasked_and_recorded_denied(
    audit: SQLiteAuditSink, mode: str
) -> None:
    bank = Bank()
    asked: list[types.ElicitRequestFormParams] = []
    fields: dict[str, object] = {f"field_{index:03}": "x" * 40 for index in range(60)}

    async def main() -> None:
        async with Client(
            mcp_server(bank.view, audit=audit),
            mode=mode,
            elicitation_callback=answering(True, asked),
        ) as client:
            result = await client.call_tool("submit_form", fields)
        assert result.is_error
        message = text_of(result)
        assert "the call of tool 'submit_form' needs the user's approval" in message
        assert "do not fit one question the user can read" in message
        assert "did not run: pass fewer or flatter arguments" in message

    run(main)
    assert asked == []  # not asked about a part of it
    assert bank.sent == []
    (record,) = audit.records()
    assert (record.approval, record.outcome) == (ApprovalMode.DENIED, CallOutcome.DENIED)
    assert record.detail.startswith("not asked: its arguments do not fit an approval question")


@settings(max_examples=60, deadline=None)
@given(
    arguments=st.integers(0, 40).flatmap(
        lambda size: st.dictionaries(
            st.text(PRINTABLE, min_size=1, max_size=40),
            st.one_of(
                st.integers(),
                st.text(PRINTABLE, max_size=200),
                st.text(PRINTABLE, min_size=150, max_size=600),  # clipped
            ),
            min_size=size,
            max_size=size,
        )
    )
)
def test_every_key_and_short_value_is_shown_or_nobody_is_asked(
    arguments: dict[str, object],
) -> None:
    """For all arguments: the user reads every key and each value (a long one clipped
    alone), and a yes runs exactly what was shown; or the call is refused unasked."""
    bank = Bank()
    audit = SQLiteAuditSink(":memory:")
    asked: list[types.ElicitRequestFormParams] = []
    results: list[types.CallToolResult] = []

    async def main() -> None:
        async with Client(
            mcp_server(bank.view, audit=audit), elicitation_callback=answering(True, asked)
        ) as client:
            results.append(await client.call_tool("submit_form", arguments))

    run(main)
    shown = (
        "{"
        + ", ".join(
            f"{json.dumps(key, ensure_ascii=False)}: {shown_json(arguments[key])}"
            for key in sorted(arguments)
        )
        + "}"
    )
    (record,) = audit.records()
    event("asked" if len(shown) <= 2000 else "refused unasked")
    if len(shown) <= 2000:
        (question,) = asked
        assert f"Arguments: {shown}. " in question.message
        assert bank.sent == [arguments]
        assert record.approval is ApprovalMode.USER_CONFIRMED
    else:
        assert asked == []
        assert bank.sent == []
        assert results[0].is_error
        assert record.approval is ApprovalMode.DENIED
    audit.close()
