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
# Room for a server to start on a loaded machine (at 2 s, starts failed now and then); a
# request whose answer was dropped waits all of it.
TIMEOUT: Final = 5.0
WARNED: Final = "dropped up to its end"  # words of the one warning a connection logs
ENDLESS_AT_START: Final = (
    "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n"  # never answers initialize
)


def _server(spec: Path, tools: list[dict[str, object]], **options: object) -> McpServer:
    described = [{"description": f"The {tool['name']} tool.", **tool} for tool in tools]
    spec.write_text(json.dumps(described))
    env = {"VERIDIC_TEST_MCP_SPEC": str(spec)}
    limits: dict[str, object] = {"result_limit": 1000, "describe_limit": 1000, "timeout": TIMEOUT}
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
    server = _server(tmp_path / "tools.json", tools)
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
    server = _server(spec, [{"name": "search", "input_schema": QUERY}])

    async def run() -> None:
        async with connect(Registry(), server, declare={"search": Declared("query")}) as connection:
            _server(spec, [{"name": "search", "input_schema": QUERY, "description": "d" * LIMIT}])
            await connection.recheck()

    with pytest.raises(IntegrationError, match=f"{LIMIT:,} characters") as raised:
        asyncio.run(run())
    assert "tools/list got no answer in time" in str(raised.value)
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


# Text a server can write: a lone surrogate has no UTF-8 (hypothesis drew one now and then,
# and the test failed encoding its own input).
CHARACTERS = st.characters(exclude_characters="\n", codec="utf-8")
LINES = st.lists(st.text(alphabet=CHARACTERS, max_size=40))


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


NOT_UTF8: Final = "the MCP server wrote a line that is not UTF-8"
BYTE_LINES = st.lists(
    st.one_of(
        st.text(alphabet=CHARACTERS, max_size=20).map(str.encode),
        st.binary(max_size=20).map(lambda raw: raw.replace(b"\n", b"")),
    ),
    max_size=8,
)


def _utf8(line: bytes) -> str | None:
    try:
        return line.decode()
    except UnicodeDecodeError:
        return None


def _utf8_begun(piece: bytes) -> str | None:
    """``piece``, the start of a line, as text so far; ``None`` when it is not UTF-8."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(piece)
    except UnicodeDecodeError:
        return None


@settings(max_examples=300, deadline=None)
@given(
    lines=BYTE_LINES,
    unended=st.binary(max_size=6).map(lambda raw: raw.replace(b"\n", b"")),
    limit=st.integers(1, 30),
    cuts=st.lists(st.integers(0, 200), max_size=8),
)
def test_a_line_that_is_not_utf8_is_dropped_alone_and_counted(
    lines: list[bytes], unended: bytes, limit: int, cuts: list[int]
) -> None:
    """A line that is not UTF-8 (or ends inside a character) is dropped up to its end and
    counted, never raised out of the reader (the SDK's reader, failing, ate the rest of
    the server's stdout: every later request hung until its timeout); the lines around it
    are read as usual, and a last line the server never ended is no message, at the end
    of the stream as in the SDK, whatever its bytes."""
    data = b"".join(line + b"\n" for line in lines) + unended
    counted = LongLines("tools", limit)
    with counted.reading():
        decoder = codecs.getincrementaldecoder(registered())("strict")
    out: list[str] = []
    start = 0
    for end in [*sorted(cut for cut in cuts if cut < len(data)), len(data)]:
        out.append(decoder.decode(data[start:end]))
        start = max(start, end)
    out.append(decoder.decode(b"", final=True))
    texts = [_utf8(line) for line in lines]
    kept = [text for text in texts if text is not None and len(text) <= limit]
    assert "".join(out) == "".join(f"{text}\n" for text in kept)
    begun = _utf8_begun(unended)  # a line being read is dropped as soon as it cannot be one
    begun_dropped = begun is None or len(begun) > limit
    assert counted.dropped == len(lines) - len(kept) + begun_dropped


def test_a_call_answered_with_a_line_not_utf8_fails_saying_so_and_the_next_is_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools: list[dict[str, object]] = [
        {"name": "latin", "input_schema": QUERY, "latin1": "café"},
        {"name": "search", "input_schema": QUERY},
    ]
    server = _server(tmp_path / "tools.json", tools)
    declared = {"latin": Declared("query"), "search": Declared("query")}

    async def run() -> list[CallResult]:
        registry = Registry()
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare=declared):
                return [await _call(registry, name, sink) for name in declared]

    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        latin, search = asyncio.run(run())
    error = latin.error
    assert isinstance(error, IntegrationError)
    assert str(error).startswith("the call may have run")
    assert "MCP server 'tools'" in str(error)
    assert "not UTF-8" in str(error)
    assert "characters" not in str(error)  # no line limit was gone over: none is named
    assert error.reason == NOT_UTF8
    assert search.error is None  # the connection reads on
    assert str(search.value) == 'search: {"q": "x"}'
    (warned,) = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert "'tools'" in warned


def test_a_request_waiting_while_another_answer_is_dropped_is_not_told_its_answer_was(
    tmp_path: Path,
) -> None:
    """The client cannot tell which request a dropped line answered: a call that timed
    out while another's answer was dropped is told both, and that its answer may have
    been in the line, not that it was."""
    tools: list[dict[str, object]] = [
        {"name": "slow", "input_schema": QUERY, "sleep": 30},
        {"name": "long", "input_schema": QUERY, "result": {"content": [{"text": "y" * LIMIT}]}},
    ]
    server = _server(tmp_path / "tools.json", tools)
    declared = {"slow": Declared("query"), "long": Declared("query")}

    async def run() -> list[CallResult]:
        registry = Registry()
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare=declared):
                calls = (_call(registry, name, sink) for name in declared)
                return list(await asyncio.gather(*calls))

    slow, long = asyncio.run(run())
    for failed, name in ((slow, "slow"), (long, "long")):
        message = str(failed.error)
        assert message.startswith("the call may have run"), message
        assert f"the call of tool {name!r} got no answer in time" in message
        assert "may have been in that line" in message
        assert f"{LIMIT:,} characters" in message


def test_a_connection_opened_inside_another_reads_its_stdout_with_its_own_limit(
    tmp_path: Path,
) -> None:
    """The limit is the connection's own, not that of the connection whose body opened
    it (the context variable that tells a decoder its connection is set only while the
    transport is entered)."""
    answer = {"content": [{"type": "text", "text": "y" * (2 * LIMIT)}]}
    tools: list[dict[str, object]] = [{"name": "long", "input_schema": QUERY, "result": answer}]
    outer = _server(tmp_path / "outer.json", tools)  # its limit: LIMIT
    roomy = _server(tmp_path / "inner.json", tools, result_limit=10_000)
    inner = stdio("inner", *roomy.command, env=roomy.env, result_limit=10_000, timeout=TIMEOUT)

    async def run() -> tuple[CallResult, CallResult]:
        outer_registry, inner_registry = Registry(), Registry()
        declared = {"long": Declared("query")}
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(outer_registry, outer, declare=declared):
                async with connect(inner_registry, inner, declare=declared):
                    read = await _call(inner_registry, "long", sink)
                refused = await _call(outer_registry, "long", sink)
        return read, refused

    read, refused = asyncio.run(run())
    assert read.error is None
    assert f"{LIMIT:,} characters" in str(refused.error)
