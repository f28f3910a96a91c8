"""An MCP server's tools as external tools of a registry component.

The server is the component: :func:`connect` starts or reaches it (a command
over stdio, or a URL over streamable HTTP, with the ``mcp`` SDK), lists its
tools and registers each as an external tool of a component named after the
server. A server that does not start or answer within its timeout is a
component whose boot failed: its pinned tools (without pins, the tools ``declare=``
names) are registered unavailable with the reason, as for any component. So is a
connection that ends: when ``connect`` is left, or when the server closes it (its
process ended), the next view tells the server's tools unavailable, "the connection to the MCP
server is closed", and a call cut off by it says it may have run.

What the model is shown comes from the server, so it is checked against the pins
(``veridic.integrations.mcp._pins``): a tool that matches its pin is registered with
it (its description and required arguments may enter the capability section; pins made
at run time from a listing, which :func:`list_tools` gives branded untrusted, are
refused: nobody reviewed them); a changed or vanished tool is kept out of every view
with a reason naming what changed; a tool the pins do not record is not registered at
all (nobody reviewed even its name, and the capability section names every tool it
says is unavailable), only logged and kept in ``connection.changes``; one that
``declare=`` names is refused at connect, before the server is started (the pins must
cover every tool the application uses). Without pins only the tools ``declare=`` names
are registered, unpinned: listed by that name (written in code), the description
marked unverified; the others are not registered (their names, the server's own
choice, would reach the capability section unreviewed), only logged and kept in
``connection.undeclared``, and a connect that declares none of a non-empty listing is
refused. An unpinned tool whose description and input schema take more than the
server's ``describe_limit`` (20,000 characters by default) is registered unavailable,
saying why (its text would be in every request's tool list).

A listing that names a tool twice is refused (:class:`~veridic.errors.IntegrationError`
naming the tool and the server): kept to one copy, the reviewed copy could be
compared while the other is registered. Connecting is all or nothing: every
tool is checked against a registry of its own first, so a connect that fails
leaves the application's registry as it was, without the server's component
or any of its tools. A listing still giving a next cursor after 100 pages is
refused the same way, never kept in part.

Before every call the tool's current listing is compared with the one
registered (through the SDK's response cache where the server allows
caching), so a server that changes a tool mid-run is refused at the next
call, not trusted; a ``tools/list_changed`` notification is logged and checks
at once. Calls go through :func:`veridic.aexecute` like any tool: approvals,
audit, guards. The server's results are :class:`~veridic.UntrustedText`: their
content as text, cut at the server's ``result_limit`` (100,000 characters by
default) with a note of what was cut (``veridic.integrations.mcp._results``). A stdio
server's stdout is read a whole line (one message) at a time, each line held to a hundred
times the larger of the server's ``result_limit`` and ``describe_limit``: a longer one is
dropped up to its end, never held whole, and the request it answered fails saying so
(``veridic.integrations.mcp._lines``); so is a line of more objects and arrays than the
larger of the two limits (parsed, each takes many times its characters), and a request
left unanswered by a line the SDK could not parse (nested deeper than its parser's 200
levels, or not JSON-RPC) is told so too. The SDK's own log records of a connection are
written one inert line each (``veridic.integrations.mcp._sdk_logs``).

The client grants no sampling, elicitation or roots: on protocol 2026-07-28 a call
whose server asks for one fails, saying what it asked for; on the handshake
protocols the server is refused and its call ends as the server decides (the SDK
tells its client nothing of the request). A server's ``instructions`` reach no
prompt: ``connection.instructions`` keeps them branded untrusted (cut at the
server's ``describe_limit``), for the application to place as data, and the log says
they were sent. A stdio server's stderr is not passed
on raw: each line is logged quoted on ``veridic.integrations.mcp.stderr``
(``veridic.integrations.mcp._stderr``); its log messages (``notifications/message``)
are logged quoted on ``veridic.integrations.mcp.server_log``, never above ``WARNING``.
Each of the two is logged at most 100 a minute for one connection: the rest are
counted, one ``WARNING`` says so with the first of them and one how many were not
logged (``veridic.integrations.mcp._log_cap``).

Risk is the application's: ``declare={"search": Declared("query")}``. The
server's annotations are hints the spec calls untrusted; they may raise
nothing and lower nothing, except that an undeclared pinned tool is a write of
high risk unless its *pinned* annotations say ``destructiveHint: false``,
which makes it a write of mid risk. Pinned means reviewed: pins were given
and the tool matches its record. For a tool that changed, the annotations
are the server's word about itself and lower nothing (else a server could
make its own tool mid risk, which ``allow_always`` accepts).
``readOnlyHint`` never makes a tool a query, pinned or not.
"""

from __future__ import annotations

import json
import logging
import math
import os
import reprlib
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from veridic._counted import counted
from veridic._exception_groups import leaves as _leaves
from veridic._extras import require
from veridic._sample import clip
from veridic._urls import cut_short_reason, shown_url, user_part_cut_short
from veridic._words import a_type
from veridic._workflow_commands import inert_line
from veridic.errors import (
    IntegrationError,
    MissingExtraError,
    ProvenanceError,
    ToolUnavailableError,
    VeridicError,
)
from veridic.integrations.mcp._lines import CROWDED as _CROWDED
from veridic.integrations.mcp._lines import NOT_UTF8 as _NOT_UTF8
from veridic.integrations.mcp._lines import REASON as _LINE_REASON
from veridic.integrations.mcp._lines import UNPARSED as _UNPARSED
from veridic.integrations.mcp._lines import LongLines, container_limit, line_limit
from veridic.integrations.mcp._lines import registered as _bounded_lines
from veridic.integrations.mcp._pins import PinChange, PinnedTool, Pins, _canonical, _twice
from veridic.integrations.mcp._results import RESULT_LIMIT, bounded, result_text
from veridic.integrations.mcp._sdk_logs import speaking as _sdk_speaking
from veridic.integrations.mcp._server_log import ServerLog
from veridic.integrations.mcp._stderr import ServerStderr
from veridic.text.provenance import (
    TrustedInstruction,
    TrustedText,
    UntrustedText,
    instruction,
    is_untrusted,
    refuse_untrusted,
    source_of,
    untrusted,
)
from veridic.tools._similarity import NameIndex
from veridic.tools.registry import BootError, Registry, _folded
from veridic.tools.risk import RiskLike, ToolKind
from veridic.tools.tool import SCHEMA_TOOL, check_tool_name

__all__ = ["Declared", "McpConnection", "McpServer", "connect", "http", "list_tools", "stdio"]

_log = logging.getLogger("veridic.integrations.mcp")
_EXTRA: Final = "mcp"
_PAGES: Final = 100
_ERROR_SHOWN: Final = 2000  # characters of a server's error text an error quotes
_REQUEST_TIMEOUT: Final = -32001  # mcp_types.REQUEST_TIMEOUT: a request that got no answer
_CONNECTION_CLOSED: Final = -32000  # mcp_types.CONNECTION_CLOSED: the connection ended
_PARSE_ERROR: Final = -32700  # mcp_types.PARSE_ERROR: a message that could not be parsed
_INVALID_REQUEST: Final = -32600  # mcp_types.INVALID_REQUEST: how the SDK refuses a request
# The SDK's refusal of each request a client grants only with a callback (mcp.client.session):
# the method the server sent, and what it asked for, in words the model can act on.
_REFUSED: Final = {
    "Sampling not supported": (
        "sampling/createMessage",
        "sampling (to have the client's model write a message)",
    ),
    "Elicitation not supported": (
        "elicitation/create",
        "elicitation (to put a question to the client's user)",
    ),
    "List roots not supported": ("roots/list", "roots (the directories the client works in)"),
}
_CLOSED: Final = instruction("the connection to the MCP server is closed")
# What the capability section says of a server whose start got no answer after a line of
# it was dropped (``_lines``), by the reason of the line.
_DROPPED: Final = {
    _LINE_REASON: instruction(_LINE_REASON),
    _CROWDED: instruction(_CROWDED),
    _NOT_UTF8: instruction(_NOT_UTF8),
    _UNPARSED: instruction(_UNPARSED),
}

DESCRIBE_LIMIT: Final = 20_000
"""Characters of one unpinned tool's description and input schema (as compact JSON),
together, that a server may send (``describe_limit=``)."""

_TOO_LONG: Final = instruction(
    "its MCP server describes it at more length (description and input schema) than the "
    "server's describe_limit allows: review it and pin it (veridic mcp pin), or raise "
    "describe_limit= where the server is declared"
)


@dataclass(frozen=True, slots=True)
class McpServer:
    """Where an MCP server runs; ``name`` is its component's name (printed: written in code)."""

    name: TrustedText
    command: tuple[str, ...] = ()
    url: str = ""
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    timeout: float = 10.0
    protocol: Literal["auto", "legacy"] = "auto"
    result_limit: int = RESULT_LIMIT
    describe_limit: int = DESCRIBE_LIMIT

    def __post_init__(self) -> None:
        """Check every field with a limit, however the value was made.

        :func:`stdio` and :func:`http` are not the only way to make one:
        ``dataclasses.replace(server, describe_limit=0)`` or a direct ``McpServer(...)``
        skipped their checks, and a limit of 0 or below (or a timeout that is not a
        positive finite number of seconds) left descriptions and results unbounded, or
        every call timed out at once.

        Raises:
            ProvenanceError: the name is text branded untrusted.
            VeridicError: the name is not one printable line, the server has both a
                ``command`` and a ``url`` or neither, ``url`` is not an HTTP
                URL or a ``/``, ``?`` or ``#`` in its user part ends its host early (the
                client would connect to a server named by the token's head and send it
                the rest: :func:`~veridic._urls.user_part_cut_short`), ``protocol`` is
                not ``"auto"`` or ``"legacy"``, ``result_limit`` or ``describe_limit``
                is not a positive number of characters, or ``timeout`` is not a
                positive, finite number of seconds.
        """
        _check_name(self.name)
        if self.url and (
            not isinstance(self.url, str) or not self.url.startswith(("http://", "https://"))
        ):
            raise VeridicError(
                f"MCP server {self.name!r} got url={_shown_url(self.url)}: give the server's "
                "streamable HTTP endpoint, e.g. 'http://localhost:8000/mcp'"
            )
        if self.url and user_part_cut_short(self.url):
            raise VeridicError(f"MCP server {self.name!r} got url={cut_short_reason(self.url)}")
        if bool(self.url) == bool(self.command):
            raise VeridicError(
                f"MCP server {self.name!r} got command={self.command!r} and "
                f"url={_shown_url(self.url)}: give a command or a url, not both (the url would "
                "run and the command be dropped) and not neither; make it with "
                "stdio(name, command, ...) or http(name, url, ...)"
            )
        if self.protocol not in ("auto", "legacy"):
            raise VeridicError(
                f"MCP server {self.name!r} got protocol={self.protocol!r}: give 'auto' (find "
                "out) or 'legacy' (the initialize handshake of servers before 2026)"
            )
        _check_limits(self.name, self.result_limit, self.describe_limit)
        timeout: object = self.timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise VeridicError(
                f"MCP server {self.name!r} got timeout={timeout!r}: give the seconds starting, "
                "each listing and each call may take, a positive finite number, e.g. "
                "timeout=10.0"
            )

    def __repr__(self) -> str:
        return f"McpServer({self.name!r}, {self._where!r})"

    @property
    def _where(self) -> str:
        """The command line, or the URL with its password and query values masked.

        What messages and the log print of the server: :func:`http` takes no headers,
        so a hosted server's key travels in its URL (``?api_key=...``,
        ``user:password@``), and a URL printed whole put it in every log line and
        error about the server.
        """
        return shown_url(self.url) if self.url else " ".join(self.command)


def stdio(
    name: TrustedText,
    command: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 10.0,
    protocol: Literal["auto", "legacy"] = "auto",
    result_limit: int = RESULT_LIMIT,
    describe_limit: int = DESCRIBE_LIMIT,
) -> McpServer:
    """A server started as ``command *args``, spoken to over its stdin and stdout.

    ``env`` replaces the child's environment when given (the SDK passes a safe
    default otherwise); ``timeout`` bounds starting, each listing and each call, in
    seconds (a call not answered in time may still have run, and its error says so);
    ``protocol="legacy"`` forces the initialize handshake of servers before 2026
    (``"auto"`` finds out); ``result_limit`` is how many characters of one tool
    result the model is given (100,000 by default): a longer result is cut there,
    and the model and the log are told how much was cut; ``describe_limit`` is how
    many characters one tool's description and input schema (as compact JSON) may
    take together when no pin vouches for them (20,000 by default): a longer tool
    would be in the provider's tool list of every request, so it is registered
    unavailable, saying why, and the log gives its size. A tool that matches its pin
    is not bounded: its size was reviewed with it. The server's instructions
    (``connection.instructions``) are cut at ``describe_limit`` too, saying so. One
    line of the server's stdout (one message) may take a hundred times the larger of
    the two limits, and hold as many objects and arrays as the larger: a longer or fuller
    one is dropped, and the request it answered fails saying so.

    Raises:
        ProvenanceError: the name is text branded untrusted (it is printed in the
            capability section: write it in code).
        VeridicError: the name is not one printable line, ``result_limit`` or
            ``describe_limit`` is not a positive number of characters, or ``timeout``
            is not a positive, finite number of seconds (the same checks hold for an
            ``McpServer`` made otherwise: ``dataclasses.replace(server, ...)``).
    """
    return McpServer(
        name,
        (command, *args),
        env=env,
        cwd=_path(cwd),
        timeout=timeout,
        protocol=protocol,
        result_limit=result_limit,
        describe_limit=describe_limit,
    )


def http(
    name: TrustedText,
    url: str,
    *,
    timeout: float = 10.0,
    protocol: Literal["auto", "legacy"] = "auto",
    result_limit: int = RESULT_LIMIT,
    describe_limit: int = DESCRIBE_LIMIT,
) -> McpServer:
    """A server reached over streamable HTTP at ``url`` (``http://host:port/mcp``).

    ``timeout``, ``protocol``, ``result_limit`` and ``describe_limit`` mean what they
    mean for :func:`stdio`.

    Raises:
        VeridicError: as :func:`stdio`, or ``url`` is empty, not HTTP, or a ``/``, ``?``
            or ``#`` in its user part (a base64 token not written with ``%2F``) ends its
            host early: the client would connect to a server named by the token's head.
    """
    if not url:
        raise VeridicError(
            f"MCP server {name!r} got url={url!r}: give the server's streamable HTTP endpoint, "
            "e.g. 'http://localhost:8000/mcp'"
        )
    return McpServer(
        name,
        url=url,
        timeout=timeout,
        protocol=protocol,
        result_limit=result_limit,
        describe_limit=describe_limit,
    )


@dataclass(frozen=True, slots=True)
class Declared:
    """What the application declares about one of a server's tools (its risk is yours).

    ``kind`` is ``"query"`` or ``"write"``, ``risk`` as for ``@registry.tool``
    (``None``: the kind's default, raised to its floors).
    """

    kind: ToolKind
    risk: RiskLike | None = None
    irreversible: bool = False


async def list_tools(server: McpServer) -> tuple[PinnedTool, ...]:
    """Every tool ``server`` lists now (what ``veridic mcp pin`` records).

    Each description is the server's, branded :class:`~veridic.UntrustedText`
    (source ``mcp:<server>``): :class:`Pins` made of it in the same run are refused by
    :func:`connect`, since nobody reviewed them; write them to a file
    (``Pins.dump()``, what ``veridic mcp pin -o`` does), review it, and connect with it.

    Raises:
        IntegrationError: the server did not start or answer in time, it
            listed a tool name twice (or two names that differ only in case or
            in ``-`` and ``_``), or its listing did not end (a next cursor
            after 100 pages).
        MissingExtraError: the ``mcp`` package is not installed.
    """
    lines = _long_lines(server)
    with _plain_errors():
        async with AsyncExitStack() as stack:
            try:
                client = await _open(server, stack, None, lines)
                listed = await _listing(client, server, refresh=True)
            except (MissingExtraError, _RefusedListing):
                raise
            except Exception as error:
                raise _unreachable(server, error, lines) from error
    _by_name(server, listed)
    _refuse_alike(server, listed)
    return listed


@asynccontextmanager
async def connect(
    registry: Registry,
    server: McpServer,
    *,
    pins: Pins | str | os.PathLike[str] | None = None,
    declare: Mapping[str, Declared] | None = None,
    hint: TrustedText = (
        "check that the MCP server starts and answers (its log says why not), then restart"
    ),
) -> AsyncIterator[McpConnection]:
    """Register ``server``'s tools in ``registry`` and keep the connection open for their calls.

    Connect once, when the application starts, and build views inside the
    ``async with`` (the registry boots again with the new component on its
    next view). Leaving it closes the connection: later calls of its tools
    fail with :class:`~veridic.ToolUnavailableError`.

    All or nothing: when entering it raises, ``registry`` holds nothing of
    the server (no component, no tool), as before the call.

    Raises:
        IntegrationError: the server listed a tool name twice (or two names
            that differ only in case or in ``-`` and ``_``), or its listing did
            not end (a next cursor after 100 pages).
        ProvenanceError: the pins were made at run time from a listing
            (``Pins.of(name, await list_tools(server))``), not read from a
            reviewed pins file: nothing is started or registered.
        VeridicError: the pins are of another server; with pins, ``declare`` names
            a tool the pins do not record (refused before the server is started: the
            pins cover the tools in use); without pins, ``declare`` names a tool the
            server does not list, or none of the tools it lists; a ``declare`` key is
            not a string; a component of that name exists; a tool name is
            registered already.
        MissingExtraError: the ``mcp`` package is not installed.
    """
    recorded = Pins.load(pins) if isinstance(pins, str | os.PathLike) else pins
    if recorded is not None:
        _refuse_unreviewed(recorded, server)
    if recorded is not None and recorded.server != server.name:
        raise VeridicError(
            f"MCP pins of server {recorded.server!r} were given for server {server.name!r}: "
            "pass the pins recorded for this server (veridic mcp pin names them after it)"
        )
    declared = _declared(declare)
    if recorded is not None:
        _refuse_unpinned_declared(server, declared, recorded)
    _refuse_reconnect(registry, server)
    anyio = require("anyio", _EXTRA, "veridic.integrations.mcp")
    with _plain_errors():
        async with AsyncExitStack() as stack:
            connection = McpConnection(server, recorded)
            connection._tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(connection._tasks.cancel_scope.cancel)
            try:
                connection._client = await _open(
                    server, stack, connection._notified, connection._lines
                )
                listed = await _listing(connection._client, server, refresh=True)
            except (MissingExtraError, _RefusedListing):
                raise
            except Exception as error:
                failure = _unreachable(server, error, connection._lines)
                _log.warning("%s", failure)
                reason = _reason(error, connection._lines)
                connection._register_unreachable(registry, hint, declared, failure, reason)
            else:
                _by_name(server, listed)
                _refuse_alike(server, listed)
                known = [t.name for t in listed] + list(recorded.tools if recorded else ())
                _check_declared(server, declared, known)
                connection._register(registry, hint, declared, listed)
                connection._keep_instructions()
                connection._tasks.start_soon(connection._listen)
            try:
                yield connection
            finally:
                connection._close()


def _cut_instructions(told: str, server: McpServer) -> str:
    """A server's ``told`` instructions, cut at its ``describe_limit``, saying where.

    The guide has them placed in a prompt, as data; a server's descriptions are bounded
    by ``describe_limit`` and its results by ``result_limit``, and its instructions, text
    of the same kind as its descriptions, were bounded by nothing."""
    limit = server.describe_limit
    if len(told) <= limit:
        return told
    _log.warning(
        "MCP server %r sent instructions of %s characters, over its describe_limit of %s: "
        "connection.instructions holds the first %s and says the rest was cut",
        server.name,
        f"{len(told):,}",
        f"{limit:,}",
        f"{limit:,}",
    )
    return (
        f"{told[:limit]}\n[veridic cut the instructions here: the MCP server sent "
        f"{len(told):,} characters, over the limit of {limit:,}, so the last "
        f"{len(told) - limit:,} are not shown]"
    )


@dataclass(eq=False)
class McpConnection:
    """A live connection to one server, and what its tools' calls check against.

    ``changes`` are the differences from the pins found at connect and since
    (a changed tool found at a call, a ``tools/list_changed`` re-check).
    ``undeclared`` are the tools an unpinned server listed at connect that were
    not registered, because ``declare=`` does not name them. ``instructions`` are
    what the server told the client at the start to follow (``None`` when it told
    nothing), branded :class:`~veridic.UntrustedText` (source
    ``mcp:<server>/instructions``) and cut at the server's ``describe_limit``, saying
    so: veridic places them in no prompt, since they are the server's words and not the
    application's; to have the model read them, place them as data
    (``Composer().data("mcp:<server> instructions", ...)``).
    """

    server: McpServer
    pins: Pins | None
    changes: tuple[PinChange, ...] = ()
    undeclared: tuple[str, ...] = ()
    instructions: UntrustedText | None = None
    _client: object = field(default=None, repr=False)
    _tasks: Any = field(default=None, repr=False)
    _registered: dict[str, PinnedTool] = field(default_factory=dict, repr=False)
    _withheld: dict[str, str] = field(default_factory=dict, repr=False)
    _registry: Registry | None = field(default=None, repr=False)
    _lost: bool = field(default=False, repr=False)
    _checking: bool = field(default=False, repr=False)
    _again: bool = field(default=False, repr=False)
    _lines: LongLines = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._lines = _long_lines(self.server)

    @property
    def tools(self) -> tuple[str, ...]:
        """The names this connection registered (available or not)."""
        return tuple(self._registered)

    async def recheck(self) -> tuple[PinChange, ...]:
        """List the server's tools again and withhold every registered one that changed.

        Returns the new differences (also added to ``changes``).

        Raises:
            ToolUnavailableError: the connection is closed.
            IntegrationError: the server did not answer, listed a tool name twice, or
                its listing did not end.
        """
        client = self._live()
        since = self._lines.dropped
        try:
            listed = await _listing(client, self.server, refresh=True)
        except Exception as error:
            if self._dropped_since(since, error):
                raise self._lines.error("tools/list got no answer in time") from error
            raise
        return self._withhold_changed(_by_name(self.server, listed))

    # --- registering ---------------------------------------------------------------

    def _register(
        self,
        registry: Registry,
        hint: TrustedText,
        declared: Mapping[str, Declared],
        listed: Sequence[PinnedTool],
    ) -> None:
        if self.pins is None:
            # Unpinned, a tool's name would reach the capability section (trusted text)
            # straight from the server: only a name the application declared in code may.
            exposed = [t for t in listed if t.name in declared]
            undeclared = tuple(t.name for t in listed if t.name not in declared)
            if undeclared and not exposed:
                raise _nothing_declared(self.server, undeclared)
            unpinned = [_entry(t, declared, unavailable=self._too_long(t)) for t in exposed]
            self._install(registry, hint, self._alive, unpinned)
            self.undeclared = undeclared
            if undeclared:
                _log.warning(
                    "MCP server %r lists %s neither declared nor pinned, not registered "
                    "(their names would reach the system prompt unreviewed): %s; declare them "
                    "in code (declare=) or record the server's pins (veridic mcp pin)",
                    self.server.name,
                    counted(len(undeclared), "tool"),
                    _names_shown(undeclared),
                )
            return
        changes = self.pins.compare(listed)
        changed = {change.tool: change for change in changes}
        entries: list[_Entry] = []
        for tool in listed:
            change = changed.get(tool.name)
            if change is None:
                # Its record, not the listing: the pin is the reviewed one, so a listing
                # that differs from it shows as changed rather than vouching for itself.
                entries.append(_entry(tool, declared, recorded=self.pins.tools[tool.name]))
            elif change.kind != "new":
                entries.append(_entry(tool, declared, unavailable=change.reason))
            # A tool the pins do not record is not registered: nobody reviewed even its
            # name, and the capability section, read as instruction, names every tool it
            # says is unavailable. It is in ``changes`` and on the log.
        renamed = {_folded(tool.name) for tool in listed if tool.name in self.pins.tools}
        for change in changes:
            # A pinned tool the server now lists renamed only in case or in - and _ ('fail'
            # as 'Fail') is not registered beside it, which the registry would refuse: the
            # listed one, unavailable until the pins are recorded again, stands for both.
            gone = change.old if change.kind == "gone" else None
            if gone is not None and _folded(gone.name) not in renamed:
                entries.append(_entry(gone, declared, unavailable=change.reason))
        self._install(registry, hint, self._alive, entries)
        self.changes = changes
        for change in changes:
            _log.warning(
                "MCP server %r: tool %r is unavailable: %s",
                self.server.name,
                change.tool,
                change.reason,
            )

    def _keep_instructions(self) -> None:
        """Keep what the server told the client to follow, branded untrusted, and say so.

        The SDK holds a server's ``instructions`` (of ``initialize``, or of
        ``server/discover``) and veridic read nothing of them: an application that
        expected its model to follow them was not told they went unused, and had no
        veridic value to place as data. The log gives their length, not their words.
        """
        told = getattr(self._client, "instructions", None)
        if not isinstance(told, str) or not told:
            return
        kept = _cut_instructions(told, self.server)
        self.instructions = untrusted(kept, source=f"mcp:{self.server.name}/instructions")
        _log.info(
            "MCP server %r sent instructions (%s): veridic places them in no prompt (they are "
            "the server's words, not the application's); connection.instructions holds them "
            "as untrusted text, to place with Composer.data() if the model should read them",
            self.server.name,
            counted(len(told), "character"),
        )

    def _too_long(self, tool: PinnedTool) -> TrustedInstruction | None:
        """Why an unpinned ``tool`` is kept out: described at more length than the
        server's ``describe_limit`` (its text would be in every request's tool list)."""
        size = len(tool.description) + len(_canonical(tool.input_schema))
        if size <= self.server.describe_limit:
            return None
        _log.warning(
            "MCP server %r describes tool %r in %s characters (description and input schema), "
            "over its describe_limit of %s: the tool is registered unavailable, in no tool "
            "list; review and pin it (veridic mcp pin), or raise describe_limit=",
            self.server.name,
            tool.name,
            f"{size:,}",
            f"{self.server.describe_limit:,}",
        )
        return _TOO_LONG

    def _register_unreachable(
        self,
        registry: Registry,
        hint: TrustedText,
        declared: Mapping[str, Declared],
        failure: IntegrationError,
        reason: TrustedInstruction,
    ) -> None:
        def boot() -> None:
            raise BootError(reason) from failure

        if self.pins is not None:
            entries = [_entry(t, declared, recorded=t) for t in self.pins.tools.values()]
        else:
            # The declared names are the tools the application expects, written in code: a
            # call or a plan step naming one is told the server did not start, never that
            # nobody registered the name (the section names no tool of a failed component).
            entries = [_entry(_unlisted(name), declared) for name in declared]
        self._install(registry, hint, boot, entries)

    def _install(
        self,
        registry: Registry,
        hint: TrustedText,
        boot: Callable[[], None] | None,
        entries: Sequence[_Entry],
    ) -> None:
        """Register the server's component and every entry, or raise having registered none.

        A registry cannot take a tool back, so what registering could refuse (a
        schema or a pin it will not take, a name twice) is met first on a
        registry of its own, and a name the application's registry holds
        already is looked for; only then is the real one changed, under the
        registry's lock, so that no other thread takes a name in between.
        """
        rehearsal = Registry(registry.name)
        self._add_all(rehearsal, hint, boot, entries)
        names = {entry.tool.name for entry in entries}
        with registry._alone():  # the registry's lock, lent for this batch
            taken = registry._taken(names)
            if taken:
                shown = ", ".join(
                    clip(name) if name == held else f"{clip(name)} (registered as {clip(held)})"
                    for name, held in taken[:5]
                )
                raise VeridicError(
                    f"MCP server {self.server.name!r} lists {shown}, already registered in "
                    f"{registry!r} (or differing from a registered name only in case or in - "
                    "and _): tool names are unique in a registry, so nothing of the "
                    "server was registered; connect it to a registry of its own, or rename the "
                    "application's tool of that name"
                )
            self._add_all(registry, hint, boot, entries)
        self._registered = {entry.tool.name: entry.tool for entry in entries}
        # Registered unavailable (changed or gone at connect, too long): said then, and not
        # looked for again, or the first call found it "changed after it was registered".
        self._withheld = {e.tool.name: e.unavailable for e in entries if e.unavailable}
        self._registry = registry

    # --- the connection's life -------------------------------------------------------

    def _alive(self) -> None:
        """The component's boot check: the connection is open (run again when it closes).

        Without it, the views made after the server died or ``connect`` was left
        still offered its tools, each call refused only when it was made.
        """
        if self._client is None or self._lost:
            raise BootError(_CLOSED)

    def _close(self) -> None:
        """Leaving ``connect``: the next view tells the server's tools unavailable.

        A close the application chose is logged at INFO (an application may connect
        per request); a connection the server lost was a WARNING when it was found.
        """
        self._client = None
        if self._registry is not None:
            self._registry._closed(self.server.name)

    def _went_down(self) -> None:
        if self._registry is not None:
            self._registry.recheck(self.server.name)

    async def _lost_connection(self, client: object, error: BaseException) -> bool:
        """Whether ``error`` is the connection's end (the server's process ended, the
        network failed), and if so mark it lost and take the server's tools out of the
        next view. A server that answers a call with the JSON-RPC code of a closed
        connection is asked once more (a listing) before it is believed."""
        if not _closed(error) or await _answers(client, self.server):
            return False
        if not self._lost:
            self._lost = True
            _log.warning(
                "MCP server %r closed the connection: its tools are unavailable until the "
                "application connects again, with a new registry (this one cannot take the "
                "server's tools back) (%s)",
                self.server.name,
                _quoted(error),
            )
            self._went_down()
        return True

    def _add_all(
        self,
        registry: Registry,
        hint: TrustedText,
        boot: Callable[[], None] | None,
        entries: Sequence[_Entry],
    ) -> None:
        component = registry.component(self.server.name, boot=boot, hint=hint)  # type: ignore[veridic-literal]  # McpServer.name is TrustedText, checked where it was declared
        for entry in entries:
            component.external(
                name=entry.tool.name,
                description=entry.tool.description,
                input_schema=entry.tool.input_schema,
                handler=self._handler(entry.tool.name),
                kind=entry.declaration.kind,
                risk=entry.declaration.risk,
                irreversible=entry.declaration.irreversible,
                pin=entry.pin,
                source=self.server.name,  # type: ignore[veridic-literal]  # McpServer.name is TrustedText, checked where it was declared
                unavailable=entry.unavailable,
            )

    def _handler(self, name: str) -> Callable[[dict[str, object]], Awaitable[UntrustedText]]:
        async def call(arguments: dict[str, object]) -> UntrustedText:
            return await self._call(name, arguments)

        return call

    # --- calling -------------------------------------------------------------------

    async def _call(self, name: str, arguments: dict[str, object]) -> UntrustedText:
        reason = self._withheld.get(name)
        if reason is not None:
            raise self._unavailable(name, reason)
        client = self._live()
        since = self._lines.dropped
        try:
            listed = _by_name(self.server, await _listing(client, self.server, refresh=False))
        except Exception as error:
            if self._dropped_since(since, error):
                lost = f"tools/list got no answer in time, so tool {name!r} was not called"
                raise self._lines.error(lost) from error
            if await self._lost_connection(client, error):
                raise self._live_error() from error
            raise
        self._withhold_changed(listed)
        reason = self._withheld.get(name)
        if reason is not None:
            raise self._unavailable(name, reason)
        anyio = require("anyio", _EXTRA, "veridic.integrations.mcp")
        try:
            # The whole call, not each request of it: on 2026-07-28 the SDK retries a call
            # answered with an InputRequiredResult, up to ten rounds of a timeout each.
            with anyio.fail_after(self.server.timeout), _sdk_speaking():
                result = await client.call_tool(name, arguments)  # type: ignore[attr-defined]  # an mcp.Client
        except Exception as error:
            if self._dropped_since(since, error):
                lost = f"the call of tool {name!r} got no answer in time"
                raise self._lines.error(lost, ran=True) from error
            if _timed_out(error):
                raise _unanswered(self.server, name) from error
            if await self._lost_connection(client, error):
                raise _cut_off(self.server, name) from error
            asked = _not_granted(error)
            if asked is not None:
                raise _asked_for(self.server, name, *asked) from error
            if _parse_error(error):
                raise _unreadable(self.server, name, error) from error
            if _error_answer(error):
                raise  # the server's JSON-RPC error: it says the call did not run
            raise _unreadable(self.server, name, error) from error
        text = result_text(result, self.server.name, name)
        if getattr(result, "is_error", False):
            raise _answered_error(self.server, name, text)  # quoted clipped, its length said
        text = bounded(text, self.server.result_limit, self.server.name, name)
        return untrusted(text, source=f"mcp:{self.server.name}/{name}")

    def _dropped_since(self, since: int, error: BaseException) -> bool:
        """Whether ``error`` is a request left unanswered while the server wrote a line
        that was dropped (over the line limit, or not UTF-8): its answer may have been in
        it, or in none (another request's answer may have been)."""
        return self._lines.dropped > since and any(_timed_out(leaf) for leaf in _leaves(error))

    def _withhold_changed(self, listed: Mapping[str, PinnedTool]) -> tuple[PinChange, ...]:
        found: list[PinChange] = []
        for name, registered in self._registered.items():
            if name in self._withheld:
                continue
            now = listed.get(name)
            comparison = Pins.of(self.server.name, [registered]).compare([now] if now else [])
            for change in comparison:
                reason = change.reason if self.pins is not None else change.since_registered
                self._withheld[name] = reason
                if self._registry is not None:  # and out of the views made from now on
                    self._registry._withhold(name, reason)
                found.append(change)
                _log.warning(
                    "MCP server %r changed tool %r after it was registered: %s",
                    self.server.name,
                    name,
                    reason,
                )
        self.changes = (*self.changes, *found)
        return tuple(found)

    async def _notified(self, message: object) -> None:
        # Called from the SDK's receive loop: a listing awaited here would wait for the
        # loop itself, so the re-check runs as a task of the connection.
        if type(message).__name__ == "ToolListChangedNotification":
            self._notice()

    def _notice(self) -> None:
        """Start a re-check, or, while one runs, have it list the tools once more after.

        One listing at a time, whatever the number of notices: a server that sends
        thousands (a bug, or a hostile one) would otherwise have the client open as
        many tasks and ask for its listing as many times. A notice that comes during
        a check may describe a change the check's listing missed, so one more follows.
        """
        if self._checking:
            self._again = True
        elif self._tasks is not None:
            self._checking = True
            try:
                self._tasks.start_soon(self._changed_notice)
            except BaseException:
                # Not started (the connection is shutting down): left set, the flag took
                # every later notice for one to fold into a check that never ran.
                self._checking = False
                raise

    async def _listen(self) -> None:
        """On a 2026 connection, change notices come through a ``subscriptions/listen``
        stream; a server without one is checked at every call all the same."""
        client = self._client
        try:
            with _sdk_speaking():
                async with client.listen(tools_list_changed=True) as subscription:  # type: ignore[attr-defined]  # an mcp.Client
                    async for _event in subscription:
                        self._notice()
        except Exception as error:  # not offered, or the stream ended: calls still check
            _log.debug("MCP server %r: no change notices (%s)", self.server.name, _quoted(error))

    async def _changed_notice(self) -> None:
        """The re-checks a notice asks for. One whose listing finds the connection closed
        (the server died after its notice) marks it lost as a call does: only logged,
        every view until the next call still offered tools no call could reach."""
        try:
            self._again = True
            while self._again:
                self._again = False
                _log.info("MCP server %r says its tool list changed: checking", self.server.name)
                client = self._client
                try:
                    await self.recheck()
                except Exception as error:
                    if client is not None and await self._lost_connection(client, error):
                        return  # warned, and the server's tools leave the next view
                    # Else the next call checks again, and fails loudly.
                    _log.warning(
                        "MCP server %r: re-check failed: %s", self.server.name, _quoted(error)
                    )
        finally:
            self._checking = False

    def _live(self) -> object:
        if self._client is None or self._lost:
            raise self._live_error()
        return self._client

    def _live_error(self) -> ToolUnavailableError:
        if self._lost:
            return ToolUnavailableError(
                f"MCP server {self.server.name!r} closed the connection (its process ended, or "
                "the network failed): its tools are unavailable until the application "
                "connects to it again, with a new registry (this one cannot take the server's "
                "tools back)",
                reason=str(_CLOSED),
                component=self.server.name,
            )
        return ToolUnavailableError(
            f"the connection to MCP server {self.server.name!r} is closed: call its tools "
            "inside the async with connect(...) block that registered them",
            reason="its MCP connection is closed",
            component=self.server.name,
        )

    def _unavailable(self, name: str, reason: str) -> ToolUnavailableError:
        return ToolUnavailableError(
            f"tool {name!r} of MCP server {self.server.name!r} is unavailable: {reason}",
            name=name,
            reason=reason,
            hint="veridic mcp pin --check shows what changed",
            component=self.server.name,
        )


# --- the SDK ---------------------------------------------------------------------------


def _long_lines(server: McpServer) -> LongLines:
    """The line limit of ``server``'s stdout (``_lines``: a hundred times the larger of its
    result and describe limits), the objects and arrays a line may hold (the larger of the
    two), and the lines dropped over them."""
    return LongLines(
        server.name,
        line_limit(server.result_limit, server.describe_limit),
        containers=container_limit(server.result_limit, server.describe_limit),
    )


async def _open(
    server: McpServer,
    stack: AsyncExitStack,
    on_message: Callable[[object], Awaitable[None]] | None,
    lines: LongLines,
) -> object:
    mcp = require("mcp", _EXTRA, "veridic.integrations.mcp")
    target: object
    errors: ServerStderr | None = None
    if server.url:
        target = server.url
    else:
        parameters = mcp.StdioServerParameters(
            command=server.command[0],
            args=list(server.command[1:]),
            env=dict(server.env) if server.env is not None else None,
            cwd=server.cwd,
            # Each line of its stdout held to the line limit: the SDK's own reading holds a
            # line whole, however long (``_lines``).
            encoding=_bounded_lines(),
        )
        # The server's stderr is its own text: logged line by line, quoted and capped per
        # window (``_stderr``), never written raw to the operator's terminal. Read until
        # the server is gone; the count of the last window is said when the pipe ends.
        errors = ServerStderr(server.name)
        stack.push_async_callback(errors.aclose)
        target = lines.transport(mcp.stdio_client(parameters, errlog=errors.file))
    # Its log messages are logged quoted, capped per window (``_server_log``); the count of
    # those not logged in the last window is said when the connection closes.
    logged = ServerLog(server.name)
    stack.callback(logged.close)
    options: dict[str, object] = {
        "read_timeout_seconds": server.timeout,
        "mode": server.protocol,
        "logging_callback": logged,
    }
    options["message_handler"] = _counting_unparsed(lines, on_message)
    client = mcp.Client(target, **options)
    try:
        with _sdk_speaking():  # the SDK's tasks start here, and keep the context
            await _held_open(client, server, stack)
    finally:
        if errors is not None:
            errors.release()  # the child holds its own copy by now, or never will
    return client


def _counting_unparsed(
    lines: LongLines, on_message: Callable[[object], Awaitable[None]] | None
) -> Callable[[object], Awaitable[None]]:
    """The SDK's ``message_handler``: a line it could not parse is counted in ``lines``,
    every other message passed on to ``on_message`` (when there is one).

    The SDK hands the session the error of a line it could not parse (not JSON, not
    JSON-RPC, nested deeper than its parser reads) and drops the line; the request the
    line answered waited its whole timeout and was told the server "did not answer".
    Counted, it is told what the server wrote, as for a line dropped by ``_lines``.
    """

    async def handle(message: object) -> None:
        if isinstance(message, Exception):
            lines.not_parsed(message)
        elif on_message is not None:
            await on_message(message)

    return handle


async def _held_open(client: Any, server: McpServer, stack: AsyncExitStack) -> None:
    """Enter ``client`` within the server's ``timeout``, and keep it open until ``stack``
    closes.

    A cancel scope cannot be put around entering the client in this task (the client's
    own tasks outlive the scope), and the SDK's requests each have a timeout of their
    own: with ``protocol="auto"`` a ``server/discover`` probe that waits ten seconds,
    whatever ``timeout`` says, then the ``initialize`` handshake. So a task of its own
    enters the client and holds it; this one waits at most ``timeout`` for it, and a
    server that has not answered by then is cancelled, its process ended, and reported
    as not answering in time.
    """
    anyio = require("anyio", _EXTRA, "veridic.integrations.mcp")
    entered, leave = anyio.Event(), anyio.Event()
    failed: list[Exception] = []

    async def hold() -> None:
        try:
            async with client:
                entered.set()
                await leave.wait()
        except Exception as error:  # raised below, in the task that opened it
            if not entered.is_set():
                failed.append(error)
                entered.set()
                return
            raise

    # A stack of its own, closed here when the client did not open: left open in
    # ``stack``, the cancelled task group would cancel whatever the caller runs next.
    held = AsyncExitStack()
    tasks = await held.enter_async_context(anyio.create_task_group())
    held.callback(leave.set)  # leaving: the client closes in its own task, then the group
    tasks.start_soon(hold)
    try:
        with anyio.fail_after(server.timeout):
            await entered.wait()
    except BaseException:
        # Timed out, or the caller's own scope cancelled the start: the handshake still
        # waits, so the server is stopped and the group closed here (its exit waits for
        # the client's shielded shutdown, which ends the process); left entered, the
        # group put the caller's cancel scopes out of order.
        tasks.cancel_scope.cancel()
        await held.aclose()
        raise
    if failed:
        await held.aclose()
        raise failed[0]
    stack.push_async_exit(held)


async def _listing(client: object, server: McpServer, *, refresh: bool) -> tuple[PinnedTool, ...]:
    anyio = require("anyio", _EXTRA, "veridic.integrations.mcp")
    tools: list[PinnedTool] = []
    cursor: str | None = None
    with anyio.fail_after(server.timeout), _sdk_speaking():
        for _ in range(_PAGES):
            page = await client.list_tools(  # type: ignore[attr-defined]  # an mcp.Client
                cursor=cursor, cache_mode="refresh" if refresh else "use"
            )
            for tool in page.tools:
                if getattr(tool, "name", None) == SCHEMA_TOOL:
                    # Every view carries veridic's own get_tool_schema (a server served by
                    # veridic lists it too): the server's is not registered, and not pinned.
                    _log.info("MCP server %r: its %s is veridic's own", server.name, SCHEMA_TOOL)
                    continue
                tools.append(_pinned(tool, server))
            cursor = page.next_cursor
            if cursor is None:
                return tuple(tools)
    raise _endless(server)


class _RefusedListing(IntegrationError):
    """A listing the server gave and the client refuses: not a server that is down, so
    ``connect`` raises it (registering nothing) rather than make it a boot failure."""


def _endless(server: McpServer) -> _RefusedListing:
    """A listing still going after ``_PAGES`` pages: refused, never kept in part.

    Kept, its first pages were recorded by ``veridic mcp pin`` and registered by
    ``connect`` as the server's whole listing, and what the later pages held was
    dropped without a word.
    """
    return _RefusedListing(
        f"MCP server {server.name!r} was still listing tools after {_PAGES} pages of "
        "tools/list (every page gave a next cursor): a listing cut short would be "
        "recorded and registered as if it were whole, so it is refused and nothing of it "
        "is used; fix the server, or do not connect to it",
        reason="the MCP server's tool list did not end",
    )


def _pinned(tool: object, server: McpServer) -> PinnedTool:
    name = getattr(tool, "name", None)
    description = getattr(tool, "description", None) or ""
    schema = getattr(tool, "input_schema", None)
    annotations = getattr(tool, "annotations", None)
    if not isinstance(name, str) or not isinstance(schema, dict):
        raise IntegrationError(
            f"MCP server {server.name!r} listed a tool without a name or an input schema "
            f"({tool!r}): the server does not follow the protocol",
            reason="the MCP server listed a malformed tool",
        )
    try:
        check_tool_name(name, f"MCP server {server.name!r}")
    except VeridicError as error:
        raise _RefusedListing(
            f"MCP server {server.name!r} listed tool {clip(name)}, a name providers refuse "
            "(they accept 1-64 letters, digits, _ and -), so no model can be offered it under "
            "that name, and a name changed by veridic would no longer be the one the server "
            "answers to: nothing of the server is used; ask its maintainers to rename the "
            "tool, or connect a server whose tool names providers accept",
            reason="the MCP server listed a tool name providers refuse",
        ) from error
    hints: dict[str, object] = {}
    if annotations is not None:
        dumped = annotations.model_dump(by_alias=True, exclude_none=True)
        hints = {str(key): value for key, value in dict(dumped).items()}
    # The description is the server's: branded untrusted, so pins made of this listing at
    # run time (Pins.of(name, await list_tools(server))) vouch for nothing (see connect).
    told = untrusted(description, source=f"mcp:{server.name}")
    return PinnedTool(name, told, json.loads(json.dumps(schema)), hints)


def _unanswered(server: McpServer, name: str) -> IntegrationError:
    """The error of a call the server did not answer within its timeout.

    Not a failure that did nothing: MCP cannot take a call back (the SDK's
    cancel is a courtesy the server may ignore), so the call may have run, and
    a model or a user that reads "failed" runs it again. The message says so
    first, where the audit record's clipped detail keeps it.
    """
    return IntegrationError(
        f"the call may have run (MCP cannot take it back): MCP server {server.name!r} did "
        f"not answer the call of tool {name!r} within {server.timeout} s; check what it did "
        "before calling it again",
        reason="the MCP server did not answer the call in time",
    )


async def _answers(client: object, server: McpServer) -> bool:
    """Whether the connection still carries a request (a fresh ``tools/list``; ping is
    gone from the 2026 protocol): only the closed connection's own error says no."""
    try:
        await _listing(client, server, refresh=True)
    except Exception as error:
        return not _closed(error)
    return True


def _closed(error: BaseException) -> bool:
    """Whether ``error`` is the SDK's (or a server's) "connection closed" (-32000)."""
    return any(
        getattr(getattr(leaf, "error", None), "code", None) == _CONNECTION_CLOSED
        for leaf in _leaves(error)
    )


def _cut_off(server: McpServer, name: str) -> IntegrationError:
    """The error of a call whose connection ended before its answer: it may have run,
    as a call not answered in time may (:func:`_unanswered`)."""
    return IntegrationError(
        f"the call may have run: MCP server {server.name!r} closed the connection during the "
        f"call of tool {name!r} (its process ended, or the network failed); check what it did "
        "before calling it again, once the application has connected to the server again",
        reason="the MCP server closed the connection during the call",
    )


def _parse_error(error: BaseException) -> bool:
    """Whether ``error`` is a JSON-RPC parse error (-32700): over streamable HTTP, how the
    SDK answers a call whose response it could not parse (nested deeper than its parser
    reads, not JSON), in place of the response the server sent. Read as the server's
    error, it said the call did not run; a server that sends one itself is read the same
    way, which at worst asks the user to check a call that did not run."""
    return getattr(getattr(error, "error", None), "code", None) == _PARSE_ERROR


def _error_answer(error: BaseException) -> bool:
    """Whether ``error`` is a JSON-RPC error (an ``MCPError`` with its code), not a failure
    of the client to read an answer."""
    return isinstance(getattr(getattr(error, "error", None), "code", None), int)


def _not_granted(error: BaseException) -> tuple[str, str] | None:
    """What the server asked this client for, when ``error`` is the SDK's refusal of it.

    veridic passes the SDK no sampling, elicitation or roots callback (passing one
    declares the capability to the server), so the SDK refuses such a request with
    fixed words, code ``INVALID_REQUEST``; on protocol 2026-07-28 the refusal is
    raised here, in the client, and the call is left unfinished. A server could send
    the same words as an error of its own: it then reads as the same refusal, in
    veridic's words, which quote nothing of the server's.
    """
    data = getattr(error, "error", None)
    if getattr(data, "code", None) != _INVALID_REQUEST:
        return None
    message = getattr(data, "message", None)
    return _REFUSED.get(message) if isinstance(message, str) else None


def _asked_for(server: McpServer, name: str, method: str, what: str) -> IntegrationError:
    """The error of a call whose server asked for something no veridic client grants."""
    return IntegrationError(
        f"MCP server {server.name!r}: during the call of tool {name!r} the server asked this "
        f"client for {what} ({method}); veridic's MCP client grants no sampling, elicitation or "
        "roots to any server, so it refused and the call did not finish (the tool may have "
        "done part of its work before asking): check what it did, and use a tool that does "
        "not ask for these, or run this one from a client that grants them",
        reason="the MCP server asked for something veridic's MCP client does not grant",
    )


def _unreadable(server: McpServer, name: str, error: BaseException) -> IntegrationError:
    """The error of a call whose answer the SDK could not read: it may have run.

    The SDK checks a result after the server sent it: structured content that does
    not match the tool's own ``outputSchema``, or a result the protocol does not
    allow, is raised as a ``RuntimeError`` or a validation error once the call has
    run on the server. Told "the tool failed (RuntimeError)", a model or a user ran
    the write again; the message says it may have run first (where the audit record's
    clipped detail keeps it), then quotes what was wrong (the server's text in it
    escaped and clipped).
    """
    return IntegrationError(
        "the call may have run, but its answer could not be read: MCP server "
        f"{server.name!r}, tool {name!r}; check what it did before calling it again (a "
        "structured result that does not match the tool's own output schema is the "
        f"server's to fix): {_quoted(error)}",
        reason="the MCP server's answer could not be read",
    )


def _answered_error(server: McpServer, name: str, text: str) -> IntegrationError:
    """The error of an ``isError`` result, quoting the server's text as a sample.

    The text is the server's, not veridic's: quoted raw, its line breaks forged
    log lines, its escape sequences repainted the terminal of whoever read the
    log or the audit, and it read as part of veridic's own message. ``clip``
    quotes it escaped, cut to ``_ERROR_SHOWN`` characters with its length.
    """
    return IntegrationError(
        f"MCP server {server.name!r}: tool {name!r} answered with an error: "
        f"{clip(text, _ERROR_SHOWN)} (the server's own words, quoted)",
        reason="the tool answered with an error",
    )


# --- checks ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """One tool as the connection registers it: what it is, its risk, pin and reason out."""

    tool: PinnedTool
    declaration: Declared
    pin: str | None
    unavailable: TrustedInstruction | None


def _entry(
    tool: PinnedTool,
    declared: Mapping[str, Declared],
    *,
    recorded: PinnedTool | None = None,
    unavailable: TrustedInstruction | None = None,
) -> _Entry:
    """``tool`` as registered: ``recorded`` is its pin's record when it matched it."""
    declaration = declared.get(tool.name) or _default_declaration(recorded)
    return _Entry(tool, declaration, None if recorded is None else recorded.pin, unavailable)


def _unlisted(name: str) -> PinnedTool:
    """A declared tool of a server that did not start: its name, from code, and nothing of
    the server's (it listed nothing), registered with the failed component."""
    return PinnedTool(name, _UNLISTED, {"type": "object"}, {})


_UNLISTED: Final = (
    "A tool declared in code for this MCP server, which did not start, so it never "
    "described the tool."
)


def _default_declaration(recorded: PinnedTool | None) -> Declared:
    """An undeclared tool: a write of high risk, or of mid risk when its *recorded*
    annotations (reviewed with its pin) say ``destructiveHint: false``.

    Annotations the pins do not vouch for (a tool that changed) are
    the server's word about its own tool: they lower nothing, or a server could
    make its tool mid risk, which ``allow_always`` accepts. ``readOnlyHint``
    never makes a query: a server wrong about it would run a write unasked.
    """
    if recorded is not None and recorded.annotations.get("destructiveHint") is False:
        return Declared("write", "mid")
    return Declared("write", "high")


def _by_name(server: McpServer, listed: Sequence[PinnedTool]) -> dict[str, PinnedTool]:
    """The listing by name; a listing that names a tool twice is refused, never reduced
    to one copy (the reviewed copy compared, the other one registered)."""
    twice = _twice(listed)
    if twice is not None:
        raise IntegrationError(
            f"MCP server {server.name!r} listed tool {clip(twice)} twice in one tools/list: "
            "tool names are unique in the protocol and which copy a client would use cannot "
            "be told, so the listing is refused (nothing of it is registered or called); fix "
            "the server, or do not connect to it until it lists each tool once",
            reason="the MCP server listed a tool twice",
        )
    return {tool.name: tool for tool in listed}


_SHOWN_NAMES: Final = 10  # names of a server's tools an error or log line lists


def _names_shown(names: Sequence[str]) -> str:
    """Up to ten of a server's tool names, each quoted and clipped (they come from it)."""
    shown = ", ".join(clip(name, 64) for name in names[:_SHOWN_NAMES])
    more = len(names) - _SHOWN_NAMES
    return f"{shown} and {more} more" if more > 0 else shown


def _valid_name(name: str) -> bool:
    try:
        check_tool_name(name, "an example")
    except VeridicError:
        return False
    return True


def _nothing_declared(server: McpServer, undeclared: Sequence[str]) -> VeridicError:
    """Connecting an unpinned server whose tools ``declare=`` names none of.

    Each tool's name is printed in the capability section, which the model reads as
    the application's own instruction (I9); without pins nobody reviewed these names,
    so only the ones the application writes in code are registered. A connect that
    would register none of them is a mistake to say, not an empty server to accept.
    """
    example = next((name for name in undeclared if _valid_name(name)), "search")
    return VeridicError(
        f"MCP server {server.name!r} lists {counted(len(undeclared), 'tool')} "
        f"({_names_shown(undeclared)}) "
        "and none is declared or pinned: a tool's name is printed in the system prompt's "
        "capability section, and these names come from the server, unreviewed, so nothing of "
        "the server was registered; declare in code the tools to expose, e.g. "
        f"declare={{{example!r}: Declared('query')}}, or record the server's pins "
        "(veridic mcp pin) and pass pins="
    )


def _refuse_alike(server: McpServer, listed: Sequence[PinnedTool]) -> None:
    """Refuse a listing to be registered (``connect``, or recorded by ``list_tools``) that
    holds two names the registry would refuse side by side, as the server's to fix.

    Not looked for before each call: a look-alike the server adds later is not
    registered, and the tools that are stay callable.
    """
    alike = _alike(tool.name for tool in listed)
    if alike is not None:
        first, second = alike
        pair = (
            f"tool {clip(second)} beside veridic's own {first!r}"
            if first == SCHEMA_TOOL
            else f"tools {clip(first)} and {clip(second)}"
        )
        raise IntegrationError(
            f"MCP server {server.name!r} listed {pair}, "
            "names that differ only in case or in - and _: the capability section, the tool "
            "list and an approval question would show two names a reader cannot tell apart, "
            "and a name changed by veridic would no longer be the one the server answers to, "
            "so the listing is refused (nothing of it is registered or called); ask its "
            "maintainers to rename one of them, or do not connect to it",
            reason="the MCP server listed two tool names a reader cannot tell apart",
        )


def _alike(names: Iterable[str]) -> tuple[str, str] | None:
    """The first two of ``names`` (or one and veridic's ``get_tool_schema``) that the
    registry would refuse side by side as look-alikes, or ``None``."""
    seen = {_folded(SCHEMA_TOOL): SCHEMA_TOOL}
    for name in names:
        other = seen.setdefault(_folded(name), name)
        if other != name:
            return other, name
    return None


def _check_declared(
    server: McpServer, declared: Mapping[str, Declared], names: Sequence[str]
) -> None:
    """Every declared name is one the server lists or its pins record (a typo fails here)."""
    for name in declared:
        if name not in names:
            nearest = ", ".join(_nearest(name, names)) or "none"
            raise VeridicError(
                f"declare= names {name!r}, which MCP server {server.name!r} does not list "
                f"(nearest: {nearest}): declare the tools by the names the server gives them"
            )
        if not isinstance(declared[name], Declared):
            raise VeridicError(
                f"declare={{{name!r}: ...}} got {declared[name]!r}: pass "
                'Declared("query") or Declared("write", risk="mid")'
            )


def _refuse_unpinned_declared(
    server: McpServer, declared: Mapping[str, Declared], recorded: Pins
) -> None:
    """Refuse, before the server is started, a declared tool the pins do not record.

    A declared tool is one the application means to use, and pins are given to cover
    the tools in use. Connected anyway, the server's new tool was left out (nobody
    reviewed it) and only logged, or not even that when the server did not start; the
    application's first call of it read "unknown tool", in production.
    """
    for name in declared:
        if name not in recorded.tools:
            nearest = ", ".join(_nearest(name, list(recorded.tools)))
            raise VeridicError(
                f"declare= names {clip(name)}, which the pins of MCP server {server.name!r} "
                f"do not record{f' (nearest recorded: {nearest})' if nearest else ''}: a "
                "declared tool is one the application uses, and the pins must cover every "
                "tool in use, so nothing was started or registered; review the server's "
                "tools (veridic mcp pin MODULE:SERVER --check FILE), record the pins again "
                "(veridic mcp pin MODULE:SERVER -o FILE), review and commit the file, or take "
                f"{clip(name)} out of declare="
            )


def _declared(declare: Mapping[str, Declared] | None) -> dict[str, Declared]:
    """``declare=`` as a dict, each key checked to be a name before anything is started.

    A key that is not a string (the annotation says ``str``, but a mapping may be built
    from anything) failed deep in the name matching ("object of type 'int' has no
    len()"), a message that said nothing of ``declare=``.
    """
    declared = dict(declare or {})
    for name in declared:
        if not isinstance(name, str):
            raise VeridicError(
                f"declare= names {reprlib.repr(name)} ({a_type(name)}, not a tool name): "
                "declare= by the names the server gives its tools, as strings "
                '(declare={"search": Declared("query")})'
            )
    return declared


def _nearest(name: str, names: Sequence[str]) -> list[str]:
    """The names nearest ``name``: first those that differ only in case or in ``-`` and
    ``_`` (the similarity below does not fold case, so ``SEARCH`` found no ``search``),
    then the closest in spelling."""
    alike = list(dict.fromkeys(other for other in names if _folded(other) == _folded(name)))
    close = NameIndex(names).close_matches(name, 3, 0.6)
    return (alike + [other for other in close if other not in alike])[:3]


@contextmanager
def _plain_errors() -> Iterator[None]:
    """One error out as itself: the SDK's task groups wrap every error in an
    ``ExceptionGroup``, the caller's own raised inside ``async with`` included."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) != 1:
            raise
        leaves[0].__suppress_context__ = True  # the group said nothing the error does not
        raise leaves[0] from leaves[0].__cause__


def _reason(error: BaseException, lines: LongLines) -> TrustedInstruction:
    """What the capability section says of a server that failed (never the error's text)."""
    if lines.dropped and any(_timed_out(leaf) for leaf in _leaves(error)):
        return _DROPPED[lines.reason]
    if any(_timed_out(leaf) for leaf in _leaves(error)):
        return instruction("the MCP server did not answer in time")
    return instruction("the MCP server did not start")


def _timed_out(error: BaseException) -> bool:
    # The SDK reports a request that got no answer as an MCPError with code -32001
    # (REQUEST_TIMEOUT); anyio and asyncio raise TimeoutError.
    code = getattr(getattr(error, "error", None), "code", None)
    return isinstance(error, TimeoutError) or code == _REQUEST_TIMEOUT


def _unreachable(server: McpServer, error: BaseException, lines: LongLines) -> IntegrationError:
    reason = str(_reason(error, lines))
    if lines.dropped and reason == lines.reason:
        return lines.error(
            f"MCP server {server.name!r} ({server._where}) did not answer its start in time, "
            "and its tools are unavailable until it does"
        )
    told = "; ".join(_quoted(leaf) for leaf in _leaves(error))
    return IntegrationError(
        f"MCP server {server.name!r} ({server._where}): {reason} "
        f"({told}); its tools are unavailable until it does",
        reason=reason,
    )


def _quoted(error: BaseException) -> str:
    """An error of the SDK or the server for a log line or a message of veridic's.

    Its text may be the server's own (a JSON-RPC error's message): written raw,
    a line break in it forged a log line of its own and an escape sequence
    repainted the operator's terminal. ``clip`` quotes it escaped and cut, and
    ``inert_line`` takes from it what a CI log would obey as a workflow command.
    """
    return f"{type(error).__name__}: {inert_line(clip(str(error), _ERROR_SHOWN))}"


def _refuse_unreviewed(recorded: Pins, server: McpServer) -> None:
    """Refuse pins made at run time from a server's listing, before the server is started.

    :func:`list_tools` brands each description untrusted; pins made of it in the
    same run (``Pins.of(name, await list_tools(server))``, the shortcut to expose
    every tool undeclared) match whatever the server says and reviewed nothing, so
    its descriptions reached the capability section as the application's own
    instruction. Pins read from a file (``veridic mcp pin -o``) hold plain text.
    """
    listed = next((t for t in recorded.tools.values() if is_untrusted(t.description)), None)
    if listed is not None:
        raise ProvenanceError(
            f"the pins given for MCP server {server.name!r} were made from a listing of a "
            f"server at run time (tool {clip(listed.name)}, its description branded untrusted, "
            f"source {source_of(listed.description)!r}): pins nobody reviewed match whatever "
            "the server says and vouch for nothing, and a pinned description is printed in "
            "the capability section as instruction; record the pins with veridic mcp pin "
            "MODULE:SERVER -o FILE, review and commit the file, and pass its path (pins=FILE), "
            "or declare the tools to expose in code (declare=)"
        )


def _refuse_reconnect(registry: Registry, server: McpServer) -> None:
    """Refuse, before the server is started, a registry that holds a component of the
    server's name: most often the server's earlier connection, left or lost.

    A registry cannot take tools back, so its tools hold their names for good; the
    refusal came only after starting the server again, and blamed "the application's
    tool of that name".
    """
    if any(state.name == server.name for state in registry.components()):
        raise VeridicError(
            f"{registry!r} holds a component named {server.name!r} already, most likely the "
            "earlier connection to this MCP server (left, or lost when the server's process "
            "ended): a registry cannot take tools back, so nothing was started or registered; "
            "connect again with a new registry (build the application's registry again and "
            "connect there), or give this server another name"
        )


def _check_name(name: object) -> None:
    """Refuse a server name that is not one printable line written in code.

    The name is printed in the capability section (the component's name) and in every
    tool result's source, so text branded untrusted is refused here, where the server is
    declared, and not only when a registry is connected to it.
    """
    refuse_untrusted(
        name,
        "MCP server name",
        'write the server\'s name in code, e.g. stdio("github", "github-mcp-server")',
    )
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise VeridicError(
            f"MCP server name {name!r} is not a name: give one printable line written in code, "
            'e.g. stdio("github", "github-mcp-server")'
        )


def _check_limits(name: object, result_limit: int, describe_limit: int) -> None:
    for keyword, limit, what, default in (
        ("result_limit", result_limit, "of one tool result the model may be given", RESULT_LIMIT),
        (
            "describe_limit",
            describe_limit,
            "an unpinned tool's description and input schema may take together",
            DESCRIBE_LIMIT,
        ),
    ):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise VeridicError(
                f"MCP server {name!r} got {keyword}={limit!r}: give the number of characters "
                f"{what}, e.g. {keyword}={default}"
            )


def _shown_url(url: object) -> str:
    """A ``url=`` value for an error: a string masked (:func:`shown_url`), else its repr."""
    return repr(shown_url(url)) if isinstance(url, str) else repr(url)


def _path(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)
