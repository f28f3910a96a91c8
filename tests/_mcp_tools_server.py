"""A real MCP server for the client tests, run as a subprocess (stdio or streamable HTTP).

Its tools are read from the JSON file named by ``VERIDIC_TEST_MCP_SPEC`` at every
listing, so a test can change a description or a schema between two runs (or during
one) the way a server that rug-pulls would. Every tool answers with its name and
arguments; ``fail`` answers with an error; ``notify`` sends ``tools/list_changed`` (as
many times as its entry's ``"notices"`` says). Every ``tools/list`` adds a line to the
file named as the spec with ``.listings`` after it: how many listings were under way
as it began, itself included (a tool's ``"list_delay"`` makes each take that many
seconds, so that listings asked for together overlap). A
tool whose entry holds ``"result"`` answers with that ``CallToolResult`` (JSON, any
content), after ``"sleep"`` seconds when it holds that too: what a hostile or slow
server sends back (an entry's ``"output_schema"`` is listed as the tool's
``outputSchema``). One holding ``"input_required": true`` answers every round of
the call with an ``InputRequiredResult`` that asks for nothing but another round
(after its ``"sleep"``). One holding ``"exit": true`` ends the server's process instead, and
one holding ``"raise": {"code": ..., "message": ...}`` answers with that JSON-RPC
error. A file holding ``{"list_error": text}`` instead of a list makes every
``tools/list`` a JSON-RPC error with that message, and one holding
``{"list_exit": true}`` ends the server's process at the next ``tools/list`` (after
0.1 s, so that an answer already on its way gets out). A tool whose entry holds
``"rewrite"`` writes that to the spec file when called, before its notices: a server
that changes (or dies) right after telling the client so. One holding ``"log"``, a list
of ``[level, data, logger]``, sends each as a log message (``notifications/message``)
during the call, before it answers. ``VERIDIC_TEST_MCP_INSTRUCTIONS``, when set, is
the server's ``instructions`` (what it tells a client at the start to follow). One
holding ``"endless": true`` writes one line to stdout that never ends (no newline, ever)
instead of answering: what a hostile server does to a client that holds a line until
its end. One holding ``"latin1": text`` answers with a line whose result is that text
written in Latin-1, not UTF-8 (the protocol's encoding), and then never answers again.
One holding ``"wire": {"head": ..., "piece": ..., "times": n, "tail": ...}`` writes the
line ``head + piece * n + tail`` (``ID`` in the head replaced by the request's id, as
JSON) instead of answering, and then never answers again: a message nested thousands
deep, or of millions of tiny values, built on the server's side.

    python tests/_mcp_tools_server.py            # stdio
    python tests/_mcp_tools_server.py --http PORT
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

SPEC = os.environ["VERIDIC_TEST_MCP_SPEC"]
_WIRE = os.dup(1)  # the client's pipe: while serving, the SDK points fd 1 at stderr


def _tools() -> list[types.Tool]:
    with open(SPEC, encoding="utf-8") as file:
        listed = json.load(file)
    return [
        types.Tool(
            name=tool["name"],
            description=tool.get("description"),
            input_schema=tool["input_schema"],
            output_schema=tool.get("output_schema"),
            annotations=types.ToolAnnotations(**tool["annotations"])
            if tool.get("annotations")
            else None,
        )
        for tool in listed
    ]


_listing = 0
"""How many ``tools/list`` requests the server is answering at this moment."""


async def _list(ctx: Any, params: Any) -> types.ListToolsResult:
    global _listing
    with open(SPEC, encoding="utf-8") as file:
        listed = json.load(file)
    _listing += 1
    try:
        with open(f"{SPEC}.listings", "a", encoding="utf-8") as counted:
            counted.write(f"{_listing}\n")  # the listings under way, this one included
        delay = (
            max((t.get("list_delay", 0) for t in listed), default=0)
            if isinstance(listed, list)
            else 0
        )
        await anyio.sleep(delay)  # a slow listing, so that requests that overlap do
    finally:
        _listing -= 1
    if isinstance(listed, dict) and listed.get("list_exit"):
        await anyio.sleep(0.1)
        os._exit(3)  # a server that dies when asked for its listing
    if isinstance(listed, dict):
        raise MCPError(code=types.INTERNAL_ERROR, message=listed["list_error"])
    return types.ListToolsResult(tools=_tools())


def _entry(name: str) -> dict[str, Any]:
    with open(SPEC, encoding="utf-8") as file:
        listed: list[dict[str, Any]] = json.load(file)
    return next((tool for tool in listed if tool["name"] == name), {})


async def _call(
    ctx: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    entry = _entry(params.name)
    if "sleep" in entry:
        await anyio.sleep(entry["sleep"])
    if entry.get("exit"):
        os._exit(3)  # a server that dies in the middle of a call
    if entry.get("endless"):
        _endless_line()
    if "latin1" in entry:
        await _latin1_answer(ctx.request_id, entry["latin1"])
    if "wire" in entry:
        await _wire_answer(ctx.request_id, entry["wire"])
    if "raise" in entry:
        raise MCPError(code=entry["raise"]["code"], message=entry["raise"]["message"])
    if "input_required" in entry:
        # Asks for nothing but another round, forever (2026-07-28 protocol only).
        return types.InputRequiredResult(request_state="again")
    if "result" in entry:
        return types.CallToolResult.model_validate(entry["result"])
    for level, data, logger in entry.get("log", ()):
        await ctx.session.send_log_message(level, data, logger, related_request_id=ctx.request_id)
    if "rewrite" in entry:
        with open(SPEC, "w", encoding="utf-8") as file:
            json.dump(entry["rewrite"], file)
    if params.name == "notify":
        for _ in range(entry.get("notices", 1)):
            await ctx.session.send_tool_list_changed()
    text = f"{params.name}: {json.dumps(params.arguments, sort_keys=True)}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=params.name == "fail"
    )


def _endless_line() -> None:
    """Write one line to stdout that never ends, until the client closes the pipe."""
    piece = b'{"jsonrpc": "2.0", "padding": "' + b"x" * 65536
    while True:
        os.write(_WIRE, piece)
        piece = b"x" * 65536


async def _latin1_answer(request_id: object, text: str) -> None:
    """Answer with ``text`` in Latin-1 (a line that is not UTF-8), and never again."""
    result = {"content": [{"type": "text", "text": text}]}
    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
    os.write(_WIRE, json.dumps(answer, ensure_ascii=False).encode("latin-1") + b"\n")
    await anyio.sleep_forever()


async def _wire_answer(request_id: object, wire: dict[str, Any]) -> None:
    """Write the line ``wire`` describes (its head's ``ID`` the request's id), and never
    answer again."""
    head = wire["head"].replace("ID", json.dumps(request_id))
    line = head + wire["piece"] * wire["times"] + wire["tail"]
    os.write(_WIRE, line.encode("utf-8") + b"\n")
    await anyio.sleep_forever()


SERVER: Server[Any] = Server(
    "veridic-test-tools",
    on_list_tools=_list,
    on_call_tool=_call,
    instructions=os.environ.get("VERIDIC_TEST_MCP_INSTRUCTIONS"),
)


async def _stdio() -> None:
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


def _http(port: int) -> None:
    import contextlib

    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(app=SERVER)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        async with manager.run():
            yield

    app = Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        _http(int(sys.argv[2]))
    else:
        anyio.run(_stdio)
