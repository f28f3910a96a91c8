"""What one line of a stdio MCP server costs once it is parsed, against a real server in a
subprocess: a message nested past the parser's depth, one of many tiny objects, one of
many tiny strings, and a result nested as deep as the parser reads.

The line limit (``_lines``) bounds the characters of one line; parsed, a line of empty
objects took 24 times its size in memory (a 10,000,000-character line, 240 MB) and
seconds of the event loop, and a line nested deeper than the SDK's JSON parser reads was
dropped by the SDK with a traceback while the request it answered waited its whole timeout
and was told only that the server "did not answer".
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic import ApprovalPolicy, CallResult, Registry, SQLiteAuditSink, aexecute
from veridic.errors import IntegrationError
from veridic.integrations.mcp import Declared, McpServer, connect, http, stdio
from veridic.integrations.mcp._lines import LongLines, registered
from veridic.integrations.mcp._results import RESULT_LIMIT
from veridic.integrations.mcp.client import DESCRIBE_LIMIT

SCRIPT: Final = Path(__file__).parent / "_mcp_tools_server.py"
QUERY: Final = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
LIMIT: Final = 100_000  # the line limit of a server whose result_limit and describe_limit are 1000
CONTAINERS: Final = 1000  # the objects and arrays one of its lines may hold: a hundredth of it
TIMEOUT: Final = 5.0
ANSWER_HEAD: Final = '{"jsonrpc":"2.0","id":ID,"result":'
RESULT_HEAD: Final = (
    ANSWER_HEAD + '{"resultType":"complete","content":[],"structuredContent":{"a":['
)
UNPARSED: Final = "the MCP server wrote a line that is not a JSON-RPC message the client can read"
CROWDED: Final = "the MCP server wrote a line of more objects and arrays than the client reads"


def _server(spec: Path, tools: list[dict[str, object]], *, roomy: bool = False) -> McpServer:
    """The test server serving ``tools``, with limits of 1000 characters (``roomy``: the
    default limits)."""
    described = [{"description": f"The {tool['name']} tool.", **tool} for tool in tools]
    spec.write_text(json.dumps(described))
    env = {"VERIDIC_TEST_MCP_SPEC": str(spec)}
    limit = RESULT_LIMIT if roomy else 1000
    return stdio(
        "tools",
        sys.executable,
        str(SCRIPT),
        env=env,
        timeout=TIMEOUT,
        result_limit=limit,
        describe_limit=DESCRIBE_LIMIT if roomy else limit,
    )


def _calls(
    tmp_path: Path, tools: list[dict[str, object]], *, roomy: bool = False
) -> list[CallResult]:
    """Each of ``tools`` called once, in order, on one connection."""
    server = _server(tmp_path / "tools.json", tools, roomy=roomy)
    declared = {str(tool["name"]): Declared("query") for tool in tools}

    async def run() -> list[CallResult]:
        registry = Registry()
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare=declared):
                called = []
                for name in declared:
                    view = registry.view()
                    called.append(
                        await aexecute(
                            view,
                            name,
                            {"q": "x"},
                            policy=ApprovalPolicy(view),
                            audit=sink,
                            request_id="req-1",
                            prompt_sha256="0" * 64,
                        )
                    )
                return called

    return asyncio.run(run())


def _nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("times", "said", "reason"),
    [
        (1000, "not a JSON-RPC message the client can read (nested deeper than 200", UNPARSED),
        (100_000, "more than 100,000 objects and arrays", CROWDED),
    ],
)
def test_a_call_answered_with_a_message_nested_past_the_parser_fails_saying_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, times: int, said: str, reason: str
) -> None:
    """A thousand ``[``: the SDK's parser refuses the line (it reads 200 levels at most),
    the client goes on reading, and the call is told what the server wrote, not "did not
    answer". A hundred thousand: the line holds more arrays than the client parses in one
    message (at the default limits), and is dropped before the SDK parses it."""
    deep = {"head": ANSWER_HEAD, "piece": "[", "times": times, "tail": ""}
    tools: list[dict[str, object]] = [
        {"name": "deep", "input_schema": QUERY, "wire": deep},
        {"name": "search", "input_schema": QUERY},
    ]
    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        deep_call, search = _calls(tmp_path, tools, roomy=True)
    error = deep_call.error
    assert isinstance(error, IntegrationError)
    message = str(error)
    assert message.startswith("the call may have run"), message
    assert said in message
    assert "did not answer" not in message
    assert error.reason == reason
    assert search.error is None  # the connection reads on
    assert str(search.value) == 'search: {"q": "x"}'
    warned = [r.getMessage() for r in caplog.records if r.name == "veridic.integrations.mcp"]
    assert len(warned) == 1
    assert "'tools'" in warned[0]


def test_a_line_of_more_objects_than_the_bound_is_dropped_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Parsed, an empty object takes 24 times its two characters: a line under the line
    limit made of them is dropped once it holds more objects and arrays than a hundredth
    of the limit, and the call says so and how to make room."""
    crowded = {"head": RESULT_HEAD, "piece": "{},", "times": CONTAINERS, "tail": "{}]}}}"}
    tools: list[dict[str, object]] = [
        {"name": "crowded", "input_schema": QUERY, "wire": crowded},
        {"name": "search", "input_schema": QUERY},
    ]
    with caplog.at_level(logging.WARNING, logger="veridic.integrations.mcp"):
        crowded_call, search = _calls(tmp_path, tools)
    error = crowded_call.error
    assert isinstance(error, IntegrationError)
    message = str(error)
    assert message.startswith("the call may have run"), message
    assert f"more than {CONTAINERS:,} objects and arrays" in message
    assert "result_limit" in message  # what to do when the server's answers are this large
    assert error.reason == CROWDED
    assert search.error is None
    warned = [r.getMessage() for r in caplog.records if "objects and arrays" in r.getMessage()]
    assert len(warned) == 1


def test_a_line_of_many_one_character_strings_under_the_limit_is_read_and_cut(
    tmp_path: Path,
) -> None:
    """Strings are not objects or arrays: a line of one-character strings up to the line
    limit is read (CPython shares each one-character string, so it costs a pointer) and
    the result is cut at ``result_limit`` as any other."""
    times = (LIMIT - len(RESULT_HEAD) - 20) // 4
    strings = {"head": RESULT_HEAD, "piece": '"x",', "times": times, "tail": '"x"]}}}'}
    tools: list[dict[str, object]] = [{"name": "strings", "input_schema": QUERY, "wire": strings}]
    (called,) = _calls(tmp_path, tools)
    assert called.error is None, called.error
    assert str(called.value).startswith('{"a": ["x", "x"')
    assert "veridic cut the result here" in str(called.value)


def test_a_result_and_a_schema_nested_as_deep_as_the_parser_reads_are_read(
    tmp_path: Path,
) -> None:
    """The SDK's parser reads 200 levels at most; veridic's own reading of what it parsed
    (a structured result written as JSON for the model, an input schema pinned, checked and
    listed) walks every level of it without running out of stack."""
    schema: dict[str, object] = {"type": "string"}
    for _ in range(90):  # two levels of JSON each, in a listing nested five deep
        schema = {"type": "object", "properties": {"a": schema}}
    deep_schema = {"type": "object", "properties": {"q": {"type": "string"}, "d": schema}}
    deep_result = {"content": [], "structuredContent": {"a": _nested(190)}}
    tools: list[dict[str, object]] = [
        {"name": "deepschema", "input_schema": deep_schema},
        {"name": "deepresult", "input_schema": QUERY, "result": deep_result},
    ]
    server = _server(tmp_path / "tools.json", tools, roomy=True)
    declared = {"deepschema": Declared("query"), "deepresult": Declared("query")}

    async def run() -> list[CallResult]:
        registry = Registry()
        with SQLiteAuditSink(tmp_path / "audit.db") as sink:
            async with connect(registry, server, declare=declared):
                view = registry.view()
                assert view.names() >= {"deepschema", "deepresult"}
                assert view.tool_specs("openai")
                return [
                    await aexecute(
                        view,
                        name,
                        {"q": "x"},
                        policy=ApprovalPolicy(view),
                        audit=sink,
                        request_id="req-1",
                        prompt_sha256="0" * 64,
                    )
                    for name in declared
                ]

    by_schema, by_result = asyncio.run(run())
    assert by_schema.error is None, by_schema.error
    assert by_result.error is None, by_result.error
    assert str(by_result.value) == json.dumps({"a": _nested(190)})


# JSON text a server could write: a string's brackets are no objects or arrays.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=30,
)


def _containers(value: object) -> int:
    if isinstance(value, list):
        return 1 + sum(map(_containers, value))
    if isinstance(value, dict):
        return 1 + sum(map(_containers, value.values()))
    return 0


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, bound=st.integers(0, 12))
def test_the_decoder_counts_objects_and_arrays_outside_strings_only(
    value: object, bound: int
) -> None:
    """For every JSON value, its line is passed on when it holds no more objects and
    arrays than the bound, however many brackets its strings hold, and dropped (counted)
    when it holds more."""
    line = json.dumps(value, ensure_ascii=False)
    kept = _containers(value) <= bound
    assert _decoded(line, bound) == ((f"{line}\n", 0) if kept else ("", 1))


def test_a_call_over_http_whose_answer_is_nested_past_the_parser_may_have_run(
    tmp_path: Path,
) -> None:
    """Over streamable HTTP the SDK answers a response it cannot parse with a JSON-RPC
    parse error of its own making: passed on as the server's error, it told the model the
    write did not run, when the server had run it and answered."""
    deep_result = {
        "content": [{"type": "text", "text": "t"}],
        "structuredContent": {"a": _nested(250)},
    }
    spec = tmp_path / "tools.json"
    spec.write_text(
        json.dumps(
            [
                {
                    "name": "deep",
                    "description": "The deep tool.",
                    "input_schema": QUERY,
                    "result": deep_result,
                }
            ]
        )
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"VERIDIC_TEST_MCP_SPEC": str(spec)}
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--http", str(port)], env=env)
    try:
        for _ in range(100):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        server = http("tools", f"http://127.0.0.1:{port}/mcp", timeout=TIMEOUT)

        async def run() -> CallResult:
            registry = Registry()
            with SQLiteAuditSink(tmp_path / "audit.db") as sink:
                async with connect(registry, server, declare={"deep": Declared("write")}):
                    view = registry.view()
                    policy = ApprovalPolicy(view)
                    policy.allow_always("deep")
                    return await aexecute(
                        view,
                        "deep",
                        {"q": "x"},
                        policy=policy,
                        audit=sink,
                        request_id="req-1",
                        prompt_sha256="0" * 64,
                    )

        called = asyncio.run(run())
    finally:
        process.terminate()
        process.wait(timeout=10)
    error = called.error
    assert isinstance(error, IntegrationError), repr(error)
    assert str(error).startswith("the call may have run, but its answer could not be read")
    assert "recursion limit exceeded" in str(error)  # what was wrong, quoted
    assert error.reason == "the MCP server's answer could not be read"


def _decoded(line: str, containers: int) -> tuple[str, int]:
    """``line`` through a connection's decoder: what it passed on, and how many it dropped."""
    counted = LongLines("tools", 10_000_000, containers=containers)
    with counted.reading():
        decoder = codecs.getincrementaldecoder(registered())("strict")
    out = decoder.decode(f"{line}\n".encode()) + decoder.decode(b"", final=True)
    return out, counted.dropped


def test_a_string_left_open_is_counted_in_one_pass_to_the_end_of_the_line() -> None:
    """A quote never closed, after many escaped quotes, then brackets: each escaped quote
    was taken for the start of another string, and the line was read once for each (a
    line of 200,000 of them held the client's event loop for minutes). The open string
    runs to the end of the line, so its brackets are text."""
    line = '{"a":"' + '\\"' * 200_000 + "[" * 2000
    assert _decoded(line, containers=1000) == (f"{line}\n", 0)
    closed = '{"a":"' + '\\"' * 200_000 + '"' + ",[]" * 2000 + "}"
    assert _decoded(closed, containers=1000) == ("", 1)
