"""An attacker review of the MCP integration, seventh pass: answers the client cannot read,
and what veridic's own server tells a connecting client when its audit store fails."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.session import ClientRequestContext
from test_integration_mcp_server import Shop
from test_review_mcp3 import tools_server
from test_review_mcp4 import answering

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    CallOutcome,
    CallResult,
    Registry,
    SQLiteAuditSink,
    aexecute,
)
from veridic.errors import IntegrationError, VeridicError
from veridic.integrations.mcp import Declared, connect, http, list_tools, stdio
from veridic.integrations.mcp.server import mcp_server


@pytest.fixture
def audit() -> Iterator[SQLiteAuditSink]:
    sink = SQLiteAuditSink(":memory:")
    yield sink
    sink.close()


async def confirmed_call(registry: Registry, name: str, audit: SQLiteAuditSink) -> CallResult:
    view = registry.view()
    return await aexecute(
        view,
        name,
        {},
        policy=ApprovalPolicy(view),
        audit=audit,
        request_id="req-1",
        prompt_sha256="0" * 64,
        confirm=lambda request: True,
    )


# --- (1) an answer that breaks the tool's own output schema ------------------------------

MOVED: dict[str, object] = {
    "type": "object",
    "properties": {"moved": {"type": "integer"}},
    "required": ["moved"],
}


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_an_answer_that_breaks_its_own_output_schema_says_the_call_may_have_run(
    tmp_path: Path, audit: SQLiteAuditSink, protocol: str
) -> None:
    """A server that lists an ``outputSchema`` and answers with structured content that
    does not match it: the SDK refuses the answer after the call ran on the server, with
    a ``RuntimeError``, and the model was told "the tool failed (RuntimeError)", as if
    nothing had happened: a model (or a user) that reads "failed" runs the write again.
    The error now says the answer could not be read and that the call may have run,
    quoting what the SDK found wrong."""
    transfer = answering(
        "transfer",
        {
            "content": [{"type": "text", "text": "moved 100"}],
            "structuredContent": {"moved": "one hundred"},
        },
    )
    transfer["output_schema"] = MOVED
    server = tools_server(tmp_path, [transfer], protocol=protocol)
    registry = Registry()

    async def run() -> CallResult:
        async with connect(registry, server, declare={"transfer": Declared("write", "mid")}):
            return await confirmed_call(registry, "transfer", audit)

    result = asyncio.run(run())
    assert result.outcome is CallOutcome.FAILED
    assert isinstance(result.error, IntegrationError)
    told = str(result.told)
    assert "may have run" in told
    assert "check what it did before calling it again" in told
    assert "output schema" in told
    assert "'one hundred' is not of type 'integer'" in told  # the SDK's finding, quoted
    (record,) = audit.records()
    assert "may have run" in record.detail


def test_an_answer_that_matches_its_output_schema_is_passed_on(
    tmp_path: Path, audit: SQLiteAuditSink
) -> None:
    transfer = answering(
        "transfer",
        {"content": [{"type": "text", "text": "moved 100"}], "structuredContent": {"moved": 100}},
    )
    transfer["output_schema"] = MOVED
    server = tools_server(tmp_path, [transfer])
    registry = Registry()

    async def run() -> CallResult:
        async with connect(registry, server, declare={"transfer": Declared("write", "mid")}):
            return await confirmed_call(registry, "transfer", audit)

    result = asyncio.run(run())
    assert result.ok
    assert str(result.told) == "moved 100"


def test_an_error_answer_of_the_server_is_still_a_failure_that_did_not_run(
    tmp_path: Path, audit: SQLiteAuditSink
) -> None:
    # A JSON-RPC error is the server's answer that the call did not run: it is not told
    # "may have run" (which would have the model check for effects that never happened).
    refusing: dict[str, object] = {
        "name": "refuse",
        "description": "A tool.",
        "input_schema": {"type": "object"},
        "raise": {"code": -32602, "message": "bad arguments"},
    }
    server = tools_server(tmp_path, [refusing])
    registry = Registry()

    async def run() -> CallResult:
        async with connect(registry, server, declare={"refuse": Declared("query")}):
            return await confirmed_call(registry, "refuse", audit)

    result = asyncio.run(run())
    assert result.outcome is CallOutcome.FAILED
    assert "may have run" not in str(result.told)


# --- (2) veridic's server: what a client is told when the audit store fails --------------


def store_that_fails(tmp_path: Path) -> tuple[SQLiteAuditSink, str]:
    """A real store whose file lies in a directory the client must not learn of, closed
    (as a store the operator closed, or that lost its disk, would fail)."""
    secret = tmp_path / "ops-secret-volume"
    secret.mkdir()
    sink = SQLiteAuditSink(secret / "audit.db")
    sink.close()
    return sink, "ops-secret-volume"


def served_registry(ran: list[int]) -> Registry:
    registry = Registry()

    @registry.tool(kind="query")
    def find_order(order_id: int) -> str:
        """Find an order by its id.

        Args:
            order_id: The order's number.
        """
        ran.append(order_id)
        return f"order {order_id}"

    return registry


def test_a_client_is_told_a_call_ran_unrecorded_without_the_stores_internals(
    tmp_path: Path,
) -> None:
    """A call that ran but whose audit record could not be written: veridic's MCP server
    sent the executor's whole ``AuditWriteError`` to the client, with the store's own
    error in it (its file path here; a database driver's text, with host and user, for
    another store) and advice meant for the operator's code (".result, .result.record").
    The client, and the model behind it, now read that the call ran and was not
    recorded, and not to run it again; the operator's log keeps the whole error."""
    ran: list[int] = []
    registry = served_registry(ran)
    sink, secret = store_that_fails(tmp_path)
    server = mcp_server(lambda request: registry.view(), audit=sink)

    async def main() -> str:
        async with Client(server) as client:
            result = await client.call_tool("find_order", {"order_id": 7})
        assert result.is_error
        (content,) = result.content
        return str(getattr(content, "text", ""))

    told = asyncio.run(main())
    assert ran == [7]
    assert secret not in told
    assert "SQLiteAuditSink" not in told
    assert ".result" not in told
    assert "'find_order' ran" in told
    assert "not recorded" in told
    assert "do not run it again" in told


# --- (3) a secret in a server's URL ------------------------------------------------------


def closed_port() -> int:
    """A port on this machine nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_secret_in_a_servers_url_is_kept_out_of_its_repr_errors_and_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``http()`` takes no headers, so a hosted server's key travels in its URL
    (``?api_key=...``, or ``user:password@``); the URL was printed whole by the server's
    ``repr``, by the error of a server that does not answer (``list_tools``, ``veridic mcp
    pin``) and twice in the WARNING log of ``connect``. Each now shows the URL with the
    password and the query's values masked, the host, path and query keys kept so the
    operator can tell which server it was."""
    url = f"http://ops:hunter2-pw@127.0.0.1:{closed_port()}/mcp?api_key=sk-live-SECRET&v=2"
    server = http("remote", url, timeout=2)
    registry = Registry()

    async def run() -> None:
        async with connect(registry, server):
            pass

    with pytest.raises(IntegrationError) as refused:
        asyncio.run(list_tools(server))
    with caplog.at_level(logging.DEBUG, logger="veridic"):
        asyncio.run(run())
    logged = "\n".join(
        f"{record.getMessage()} {record.exc_info[1] if record.exc_info else ''}"
        for record in caplog.records
    )
    told = [repr(server), str(refused.value), logged]
    for text in told:
        assert "sk-live-SECRET" not in text
        assert "hunter2-pw" not in text
    for text in told[:2]:
        assert f"127.0.0.1:{url.split(':')[3].split('/')[0]}/mcp" in text
        assert "api_key=" in text
    assert server.url == url  # what is connected to is the whole URL


@settings(max_examples=60, deadline=None)
@given(
    secret=st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=12, max_size=24),
    where=st.sampled_from(["password", "user", "query", "query-only", "fragment", "bad-port"]),
)
def test_no_url_shows_its_secret_in_the_servers_repr(secret: str, where: str) -> None:
    url = {
        "password": f"https://ops:{secret}@mcp.example.com/mcp",
        "user": f"https://{secret}@mcp.example.com/mcp",
        "query": f"https://mcp.example.com/mcp?v=2&token={secret}",
        "query-only": f"https://mcp.example.com/mcp?{secret}",
        "fragment": f"https://mcp.example.com/mcp#{secret}",
        "bad-port": f"https://mcp.example.com:{secret}/mcp",
    }[where]
    shown = repr(http("remote", url))
    assert secret not in shown
    assert shown.startswith("McpServer('remote', 'https://")


# --- (4) a call that rounds forever --------------------------------------------------------


def test_a_server_that_asks_for_round_after_round_is_bounded_by_the_call_timeout(
    tmp_path: Path, audit: SQLiteAuditSink
) -> None:
    """On protocol 2026-07-28 a server may answer a call with an ``InputRequiredResult``,
    and the SDK retries the call (up to ten rounds, each with the whole ``timeout``): a
    server that answered each round just in time held a call for eleven times the
    server's ``timeout``, which the documentation says bounds each call, and each round
    was another ``tools/call`` of the tool. The whole call, every round, is now bounded
    by ``timeout``, and told as a call not answered in time (it may have run)."""
    rounds = {
        "name": "stall",
        "description": "A tool.",
        "input_schema": {"type": "object"},
        "input_required": True,
        "sleep": 0.4,
    }
    server = tools_server(tmp_path, [rounds], timeout=3.0)
    registry = Registry()

    async def run() -> CallResult:
        async with connect(registry, server, declare={"stall": Declared("query")}):
            return await confirmed_call(registry, "stall", audit)

    result = asyncio.run(run())
    assert result.outcome is CallOutcome.FAILED
    told = str(result.told)
    assert "did not answer the call of tool 'stall' within 3.0 s" in told
    assert "may have run" in told


# --- (5) veridic's server: an answer that comes too late -----------------------------------


async def late_yes(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    await anyio.sleep(0.2)  # past the question's time (shortened to 0.1 s)
    return types.ElicitResult(action="accept", content={"approve": True})


def test_an_approval_answered_after_the_question_expired_runs_nothing(
    audit: SQLiteAuditSink,
) -> None:
    """On protocol 2026-07-28 a question waits ten minutes for its answer; a later yes is
    no yes. On older revisions the question is an ``elicitation/create`` request, and the
    server waited for its answer without end: a client that answered days later ran an
    irreversible call approved against a view and arguments of that old moment (and
    until then held the call open). A question now has the same time on both; past it,
    the call does not run and is recorded denied, saying why. (The ten minutes are
    shortened here to a tenth of a second.)"""
    shop = Shop()
    server = mcp_server(shop.view, audit=audit, approval_timeout=0.1)

    async def main() -> types.CallToolResult:
        async with Client(server, mode="legacy", elicitation_callback=late_yes) as client:
            return await client.call_tool("delete_order", {"order_id": 42})

    result = anyio.run(main)
    assert result.is_error
    assert shop.deleted == []
    (record,) = audit.records()
    assert (record.approval, record.outcome) == (ApprovalMode.DENIED, CallOutcome.DENIED)
    (block,) = result.content
    assert "did not answer" in getattr(block, "text", "")


def test_a_late_answer_on_the_2026_protocol_is_asked_again_and_never_runs(
    audit: SQLiteAuditSink,
) -> None:
    # The rule the older revisions now follow: each late yes finds its question closed,
    # the question is asked again, and the SDK gives up after its rounds.
    shop = Shop()
    server = mcp_server(shop.view, audit=audit, approval_timeout=0.1)

    async def main() -> None:
        async with Client(server, elicitation_callback=late_yes) as client:
            await client.call_tool("delete_order", {"order_id": 42})

    with pytest.raises(BaseExceptionGroup) as gave_up:
        anyio.run(main)
    assert gave_up.group_contains(RuntimeError, match="InputRequiredResult for more than")
    assert shop.deleted == []
    assert not audit.records()  # a question never answered in time is no call


# --- (6) veridic's server: a client's error text in the server's log -----------------------


def test_a_clients_error_text_cannot_forge_a_line_of_the_servers_log(
    audit: SQLiteAuditSink, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that fails the approval form answers with an error of its own words;
    they were put raw into veridic's error, which the server logs with its traceback:
    a line break forged a log line of the server's ("ERROR veridic.executor: ...") and
    an escape sequence repainted the operator's terminal. They are quoted escaped and
    clipped now, as the client quotes a server's words."""
    forged = "the form would not open\nERROR veridic.executor: user alice approved\x1b[2J"

    async def failing(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return types.ErrorData(code=types.INTERNAL_ERROR, message=forged + "x" * 5000)

    shop = Shop()
    server = mcp_server(shop.view, audit=audit)

    async def main() -> types.CallToolResult:
        async with Client(server, mode="legacy", elicitation_callback=failing) as client:
            return await client.call_tool("delete_order", {"order_id": 42})

    with caplog.at_level(logging.DEBUG, logger="veridic"):
        result = anyio.run(main)
    assert result.is_error
    assert shop.deleted == []
    (block,) = result.content
    told = getattr(block, "text", "")
    assert "the form would not open\\nERROR" in told  # quoted, escaped
    assert "chars)" in told  # and clipped, its length said
    logged = caplog.text  # messages and tracebacks, as a handler writes them
    assert "\nERROR veridic.executor: user alice" not in logged
    assert "\x1b" not in logged


# --- (7) connecting again after the connection ended --------------------------------------


def test_connecting_again_to_the_same_registry_says_to_use_a_new_registry(
    tmp_path: Path, audit: SQLiteAuditSink, caplog: pytest.LogCaptureFixture
) -> None:
    """A server whose process died is "unavailable until the application connects to it
    again", the log and the errors said; connecting again to the same registry failed
    with "lists 'balance', already registered ...: rename the application's tool of that
    name", though the name was held by the server's own closed connection, and only
    after starting the server again. A registry cannot take tools back: the error now
    comes before the server is started, says the registry holds this server's earlier
    connection, and says to connect again with a new registry; the warning that
    promised a reconnect says so too."""
    server = tools_server(
        tmp_path,
        [
            {"name": "die", "description": "A tool.", "input_schema": {"type": "object"}},
            answering("balance", {"content": [{"type": "text", "text": "10"}]}),
        ],
    )
    spec = tmp_path / "tools.json"
    tools = json.loads(spec.read_text())
    tools[0]["exit"] = True
    spec.write_text(json.dumps(tools))
    registry = Registry()
    declare = {"balance": Declared("query"), "die": Declared("query")}

    async def run() -> tuple[CallResult, CallResult]:
        async with connect(registry, server, declare=declare):
            died = await confirmed_call(registry, "die", audit)
            after = await confirmed_call(registry, "balance", audit)
            return died, after

    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        died, _ = asyncio.run(run())
    assert "may have run" in str(died.told)
    assert "new registry" in caplog.text  # the warning that the server closed the connection
    before = registry.components()

    async def again() -> None:
        async with connect(registry, server, declare=declare):
            pass

    with pytest.raises(VeridicError) as refused:
        asyncio.run(again())
    message = str(refused.value)
    assert "'tools'" in message
    assert "earlier connection" in message
    assert "new registry" in message
    assert "rename the application's tool" not in message
    assert registry.components() == before


# --- (8) a server that never answers, on the default protocol ------------------------------

MUTE: Final = """
import json, sys
for line in sys.stdin:  # every request the client sends, never answered; ends on EOF
    with open(sys.argv[1], "a", encoding="utf-8") as seen:
        seen.write(json.loads(line).get("method", "?") + "\\n")
"""


def test_a_server_that_never_answers_is_given_up_after_its_timeout_on_the_default_protocol(
    tmp_path: Path,
) -> None:
    """With ``protocol="auto"`` (the default) the SDK first probes ``server/discover``
    with a wait of its own, ten seconds whatever the server's ``timeout``, then tries
    the ``initialize`` handshake for another ``timeout``: a server that never answers
    held ``connect`` (and the application's start) for over ten seconds with
    ``timeout=0.5``, where the documentation says the timeout bounds starting. Starting
    is now bounded by the timeout: the client gives up before the handshake's second
    try (the server sees only the probe) and the server's tools are unavailable, "did
    not answer in time"."""
    seen = tmp_path / "seen.txt"
    server = stdio("mute", sys.executable, "-c", MUTE, str(seen), timeout=0.5)
    registry = Registry()

    async def run() -> str:
        async with connect(registry, server):
            return str(registry.view().capability_section())

    section = asyncio.run(run())
    assert "did not answer in time" in section
    # The probe, if the server (a Python starting) read it in time; never the handshake.
    assert "initialize" not in (seen.read_text().split() if seen.exists() else [])

    async def body_after_a_failed_start() -> str:
        async with connect(Registry(), server):
            await asyncio.sleep(0)  # the caller's code runs on, not cancelled by the start
            return "ran"

    assert asyncio.run(body_after_a_failed_start()) == "ran"
