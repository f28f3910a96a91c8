"""A stdio MCP server's line that never ends: the client's memory stays bounded and the
request fails saying so, against a real server in a subprocess.

The SDK's stdio client held a line until its newline, with no bound: a server writing
one endless line grew the client's memory (178 MB after 25 s, still climbing after the
call timed out). Memory is measured with ``tracemalloc`` and the decoder's own count of
what it holds, never with time.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import sys
import tracemalloc
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import ApprovalPolicy, CallResult, Registry, SQLiteAuditSink, aexecute
from veridic.errors import IntegrationError
from veridic.integrations.mcp import Declared, McpServer, connect, list_tools, stdio
from veridic.integrations.mcp._lines import ENCODING, LongLines, line_limit, registered

SCRIPT: Final = Path(__file__).parent / "_mcp_tools_server.py"
QUERY: Final = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
LIMIT: Final = 100_000  # the line limit of a server whose result_limit and describe_limit are 1000
WARNED: Final = "dropped up to its end"  # words of the one warning a connection logs
ENDLESS_AT_START: Final = (
    "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n"  # never answers initialize
)


def _server(spec: Path, tools: list[dict[str, object]], **options: object) -> McpServer:
    described = [{"description": f"The {tool['name']} tool.", **tool} for tool in tools]
    spec.write_text(json.dumps(described))
    env = {"VERIDIC_TEST_MCP_SPEC": str(spec)}
    limits: dict[str, object] = {"result_limit": 1000, "describe_limit": 1000, "timeout": 3.0}
    return stdio("tools", sys.executable, str(SCRIPT), env=env, **(limits | options))  # type: ignore[arg-type]


async def _call(registry: Registry, name: str, sink: SQLiteAuditSink) -> CallResult:
    view = registry.view()
    return await aexecute(
        view,
        name,
        {"q": "x"},
        policy=ApprovalPolicy(view),
        audit=sink,
        request_id="req-1",
        prompt_sha256="0" * 64,
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if WARNED in r.getMessage()]


def test_the_line_limit_is_a_hundred_times_the_larger_of_the_servers_limits() -> None:
    assert line_limit(1000, 1000) == LIMIT
    assert line_limit(100_000, 20_000) == 10_000_000  # the defaults
    assert line_limit(1000, 50_000) == 5_000_000


def test_a_call_answered_with_an_endless_line_fails_naming_the_limit_in_bounded_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools: list[dict[str, object]] = [
        {"name": "endless", "input_schema": QUERY, "endless": True},
        {"name": "search", "input_schema": QUERY},
    ]
    server = _server(tmp_path / "tools.json", tools)
    declared = {"endless": Declared("query"), "search": Declared("query")}
    registry = Registry()

    async def run() -> tuple[CallResult, int]:
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare=declared):
                tracemalloc.start()  # what the call allocates, at its peak
                try:
                    called = await _call(registry, "endless", sink)
                    return called, tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()

    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        called, grew = asyncio.run(run())
    assert grew < 8_000_000, f"the client grew by {grew:,} bytes during the call"
    error = called.error
    assert isinstance(error, IntegrationError)
    message = str(error)
    assert message.startswith("the call may have run")
    assert "MCP server 'tools'" in message
    assert f"{LIMIT:,} characters" in message
    assert "result_limit" in message  # what to do when the server's answers are this long
    assert error.reason == "the MCP server wrote a line over the client's line limit"
    (warned,) = _warnings(caplog)  # once for the connection, not once per piece read
    assert "'tools'" in warned
    assert f"{LIMIT:,}" in warned


def test_a_line_over_the_limit_is_dropped_whole_and_the_next_message_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A long line that ends is dropped up to its newline: the next call is answered, and
    one under the limit but over ``result_limit`` is cut for the model as before."""

    def answer(size: int) -> dict[str, object]:
        return {"content": [{"type": "text", "text": "y" * size}]}

    tools: list[dict[str, object]] = [
        {"name": "long", "input_schema": QUERY, "result": answer(LIMIT + 1)},
        {"name": "longer", "input_schema": QUERY, "result": answer(3 * LIMIT)},
        {"name": "cut", "input_schema": QUERY, "result": answer(LIMIT // 2)},
        {"name": "search", "input_schema": QUERY},
    ]
    server = _server(tmp_path / "tools.json", tools, timeout=2.0)
    declared = {name: Declared("query") for name in ("long", "longer", "cut", "search")}

    async def run() -> list[CallResult]:
        registry = Registry()
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare=declared):
                return [await _call(registry, name, sink) for name in declared]

    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        long, longer, cut, search = asyncio.run(run())
    for dropped in (long, longer):
        assert isinstance(dropped.error, IntegrationError)
        assert f"{LIMIT:,} characters" in str(dropped.error)
    assert cut.error is None
    assert str(cut.value).startswith("y" * 1000)
    assert f"the last {LIMIT // 2 - 1000:,} are not shown" in str(cut.value)
    assert search.error is None
    assert str(search.value) == 'search: {"q": "x"}'
    assert len(_warnings(caplog)) == 1  # two lines dropped, one warning for the connection


def test_a_listing_over_the_limit_fails_its_recheck_naming_the_limit(tmp_path: Path) -> None:
    spec = tmp_path / "tools.json"
    server = _server(spec, [{"name": "search", "input_schema": QUERY}], timeout=2.0)

    async def run() -> None:
        async with connect(Registry(), server, declare={"search": Declared("query")}) as connection:
            _server(spec, [{"name": "search", "input_schema": QUERY, "description": "d" * LIMIT}])
            await connection.recheck()

    with pytest.raises(IntegrationError, match=f"{LIMIT:,} characters") as raised:
        asyncio.run(run())
    assert "its answer to tools/list was lost" in str(raised.value)
    assert raised.value.reason == "the MCP server wrote a line over the client's line limit"


def test_a_server_whose_first_line_never_ends_is_a_boot_failure_naming_the_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = stdio(
        "tools",
        sys.executable,
        "-c",
        ENDLESS_AT_START,
        timeout=2.0,
        result_limit=1000,
        describe_limit=1000,
    )
    registry = Registry()

    async def run() -> None:
        async with connect(registry, server, declare={"search": Declared("query")}):
            pass

    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        asyncio.run(run())
    registry.boot()
    (state,) = registry.components()
    assert (state.started, state.reason) == (
        False,
        "the MCP server wrote a line over the client's line limit",
    )
    assert f"{LIMIT:,} characters" in state.detail
    assert len(_warnings(caplog)) == 1
    with pytest.raises(IntegrationError, match=f"MCP server 'tools'.*{LIMIT:,} characters"):
        asyncio.run(list_tools(server))


LINES = st.lists(st.text(alphabet=st.characters(exclude_characters="\n"), max_size=40))


@settings(max_examples=200, deadline=None)
@given(lines=LINES, limit=st.integers(1, 30), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_the_decoder_passes_whole_lines_within_the_limit_and_holds_no_more(
    lines: list[str], limit: int, cuts: list[int]
) -> None:
    """For every text and every way the pipe splits its bytes (a character's bytes
    included), the lines within the limit come out whole and in order, the others not
    at all, and the decoder never holds more than the limit."""
    data = "".join(f"{line}\n" for line in lines).encode()
    with LongLines("tools", limit).reading():  # as a connection's stdout is read
        decoder = codecs.getincrementaldecoder(registered())("strict")
    out: list[str] = []
    start = 0
    for end in [*sorted(cut for cut in cuts if cut < len(data)), len(data)]:
        out.append(decoder.decode(data[start:end]))
        assert decoder.held <= limit  # type: ignore[attr-defined]  # the decoder's own count
        start = max(start, end)
    out.append(decoder.decode(b"", final=True))
    assert "".join(out) == "".join(f"{line}\n" for line in lines if len(line) <= limit)


def test_the_encoding_is_found_by_name_and_other_encodings_are_as_they_were() -> None:
    assert registered() == registered() == ENCODING
    found = codecs.lookup(ENCODING)
    assert found.name == ENCODING
    assert "naïve\n".encode(ENCODING) == "naïve\n".encode()
    assert codecs.lookup("utf-8") is codecs.lookup("utf_8")
    assert type(codecs.getincrementaldecoder("utf-8")()).__module__ == "encodings.utf_8"
    assert codecs.getincrementaldecoder("latin-1")().decode(b"\xe9\n") == "é\n"
