"""A stdio MCP server's stdout read a whole line at a time, each line bounded.

The SDK's stdio client (``mcp.client.stdio``) joins what it reads into one line until a
newline comes, bounded by nothing: a server that wrote one endless line, by a bug or on
purpose, grew the client's memory and CPU for as long as it wrote (178 MB after 25 s,
still climbing after the call had timed out). The SDK takes no line limit, but it decodes
the server's stdout with ``codecs.getincrementaldecoder(parameters.encoding)`` (anyio's
``TextReceiveStream``), so the bound is a codec of veridic's own, :data:`ENCODING`: it
decodes UTF-8 (the protocol's encoding on stdio) and passes on whole lines only. A line
longer than the connection's limit is never held beyond it: what was held is let go and
the rest is dropped up to the line's newline, after which the next line is read as
usual. A line that is not UTF-8 is dropped the same way, alone: the bytes are split at
each newline before they are decoded, where the SDK's reader, failing on such a line, ate
the rest of the server's stdout and left every later request to hang until its timeout.
The message in a dropped line is lost, so the request it answered gets no answer: a
request that times out after a line was dropped says what the server wrote (which limit
it went over, or that it was not UTF-8) in place of "did not answer in time", and that
its answer may have been in that line, never that it was: the client cannot tell which
request a dropped line answered (:meth:`LongLines.error`). The connection logs one
warning for each cause, not one per piece read (an endless line is read in thousands of
them). A last line the server never ended is no message, as in the SDK.

The limit (:func:`line_limit`) is a hundred times the larger of the server's
``result_limit`` and ``describe_limit``: 10,000,000 characters by default. Those two bound
what the model is shown once a message has arrived, and a server may rightly send more:
a result is cut at ``result_limit`` only after it is read, JSON may write a character
outside ASCII as an escape of up to twelve characters, a result may carry its text twice
(its content and its structured content), and one page of a listing holds many tools, a
pinned one bounded by no ``describe_limit``. A hundred times leaves room for all of that
and still bounds a line to tens of megabytes; a server whose answers are rightly longer
is given more room by raising its ``result_limit``.

What a line under the limit costs once parsed is bounded too. The SDK parses a line with
pydantic's JSON parser, whose objects cost more than the characters that wrote them: an
empty object (two characters) takes about 64 bytes and a small one with a key 180, so a
line of the full limit made of them took 240 MB and seconds of the event loop. A line is
therefore also dropped (counted, and its request told so, as above) when it holds more
objects and arrays than a hundredth of the line limit (:func:`container_limit`: the
larger of ``result_limit`` and ``describe_limit``, 100,000 by default), counted outside
its strings. Numbers and strings are left to the line limit: each costs at most about ten
bytes a character once parsed (a one-character string is shared by CPython and costs a
pointer), so a line of the full default limit takes at most about 100 MB parsed, and its
parse about a second. The parser reads 200 levels of nesting at most (pydantic's own
limit, not one veridic sets): a deeper line is refused by the SDK, which logs it and
hands the error to the session; the connection counts it (:meth:`LongLines.not_parsed`)
and the request that got no answer is told so in the same way. veridic's own reading of
what was parsed (a structured result written as JSON for the model, an input schema
pinned and checked) walks those 200 levels within Python's default recursion limit.

The codec is found by one search function, registered once per process (under a lock,
and only when the name is not found already); it answers to :data:`ENCODING` alone, so
every other encoding, ``utf-8`` included, is found as before, for veridic and for the
SDK's other callers. Which connection a decoder reads for is told by a context variable
set while the transport is entered (:meth:`LongLines.transport`): the SDK starts its
reading task then, and the task keeps that context. Text is encoded (the client's
requests) as UTF-8, unchanged. The server's stderr is read apart, as before (``_stderr``).
"""

from __future__ import annotations

import codecs
import contextvars
import logging
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Final, TypeVar

from veridic.errors import IntegrationError
from veridic.integrations.mcp._results import RESULT_LIMIT

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = [
    "CROWDED",
    "ENCODING",
    "NOT_UTF8",
    "REASON",
    "UNPARSED",
    "LongLines",
    "container_limit",
    "line_limit",
    "registered",
]

ENCODING: Final = "veridic_mcp_bounded_lines"
"""The name of the codec, given to the SDK as ``StdioServerParameters.encoding``."""

REASON: Final = "the MCP server wrote a line over the client's line limit"
"""The reason of an error (and of a failed start) after a line over the limit was dropped."""

NOT_UTF8: Final = "the MCP server wrote a line that is not UTF-8"
"""The reason of an error (and of a failed start) after a line not UTF-8 was dropped."""

CROWDED: Final = "the MCP server wrote a line of more objects and arrays than the client reads"
"""The reason of an error after a line of more objects and arrays than the bound was dropped."""

UNPARSED: Final = "the MCP server wrote a line that is not a JSON-RPC message the client can read"
"""The reason of an error after the SDK could not parse a line (not JSON, not JSON-RPC, or
nested deeper than its parser reads) and dropped it."""

_DEPTH: Final = 200  # levels of nesting pydantic's JSON parser reads (its own limit)
_TIMES: Final = 100  # the line limit, in times the larger of result_limit and describe_limit
_log = logging.getLogger("veridic.integrations.mcp")
_READING: contextvars.ContextVar[LongLines | None] = contextvars.ContextVar(
    "veridic_mcp_long_lines", default=None
)
_registering = threading.Lock()
# A JSON string, escapes and all: its brackets are text, no object or array. One never
# closed runs to the end of the line: matched only when closed, each escaped quote after
# its opening was taken for the start of another string, and the line read again from
# there (a line of 200,000 of them held the event loop for minutes).
_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?$)')
_T = TypeVar("_T")


def line_limit(result_limit: int, describe_limit: int) -> int:
    """Characters one line (one message) of a server with these limits may take."""
    return _TIMES * max(result_limit, describe_limit)


def container_limit(result_limit: int, describe_limit: int) -> int:
    """Objects and arrays one line of a server with these limits may hold: a hundredth of
    its :func:`line_limit`."""
    return max(result_limit, describe_limit)


def registered() -> str:
    """:data:`ENCODING`, its search function registered first if this process has not yet."""
    with _registering:
        try:
            codecs.lookup(ENCODING)
        except LookupError:
            codecs.register(_search)
    return ENCODING


class LongLines:
    """One connection's line limit, and the lines its server wrote that were dropped.

    ``long`` counts those over the limit, ``crowded`` those of more objects and arrays
    than ``containers`` (:func:`container_limit`; when not given, as many as the line
    limit, which no line within it can go over), ``not_utf8`` those that
    are not UTF-8 (the protocol's encoding: the SDK's reader, failing on one, ate the rest
    of the server's stdout, and every later request hung until its timeout), and
    ``unparsed`` those the SDK could not parse as a JSON-RPC message (``deep``: one of them
    was nested deeper than its parser reads). A request that fails after any grew is told
    so by :meth:`error`: its answer may have been in such a line (the client cannot tell
    which request a dropped line answered, so it never says it was).
    """

    __slots__ = (
        "_server",
        "containers",
        "crowded",
        "deep",
        "limit",
        "long",
        "not_utf8",
        "unparsed",
    )

    def __init__(self, server: str, limit: int, *, containers: int | None = None) -> None:
        self._server = server
        self.limit = limit
        self.containers = limit if containers is None else containers
        self.long = 0
        self.crowded = 0
        self.not_utf8 = 0
        self.unparsed = 0
        self.deep = False

    @property
    def dropped(self) -> int:
        """The lines dropped so far, for whatever cause."""
        return self.long + self.crowded + self.not_utf8 + self.unparsed

    @property
    def reason(self) -> str:
        """The reason of a failure after lines were dropped, of the first cause counted of
        :data:`REASON`, :data:`CROWDED`, :data:`NOT_UTF8` and :data:`UNPARSED`."""
        if self.long:
            return REASON
        if self.crowded:
            return CROWDED
        return NOT_UTF8 if self.not_utf8 else UNPARSED

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Within it, a decoder of :data:`ENCODING` that is made reads for this connection."""
        token = _READING.set(self)
        try:
            yield
        finally:
            _READING.reset(token)

    @asynccontextmanager
    async def transport(self, opened: AbstractAsyncContextManager[_T]) -> AsyncIterator[_T]:
        """The SDK's ``opened`` transport, entered :meth:`reading` (its reading task starts
        then, and keeps the context), and left as it is."""
        async with AsyncExitStack() as stack:
            with self.reading():
                streams = await stack.enter_async_context(opened)
            yield streams

    def over(self) -> None:
        """Count a line over the limit; the connection's first is logged, the rest only
        counted (an endless line is read in thousands of pieces, and a server may write
        any number of such lines)."""
        self.long += 1
        if self.long == 1:
            _log.warning(
                "MCP server %r wrote a line of more than %s characters to its stdout, over "
                "the client's line limit: the line is dropped up to its end (the request it "
                "answered gets no answer, and fails saying so), and later lines over the limit "
                "are dropped without another warning; fix the server, or raise its "
                "result_limit= if its messages are rightly this long",
                self._server,
                f"{self.limit:,}",
            )

    def too_many(self) -> None:
        """Count a line of more objects and arrays than ``containers``; the connection's
        first is logged, the rest only counted."""
        self.crowded += 1
        if self.crowded == 1:
            _log.warning(
                "MCP server %r wrote a line of more than %s objects and arrays to its stdout, "
                "more than the client parses in one message (each takes many times its "
                "characters in memory once parsed): the line is dropped (the request it "
                "answered gets no answer, and fails saying so), and later such lines are "
                "dropped without another warning; fix the server, or raise its result_limit= "
                "if its messages are rightly this large",
                self._server,
                f"{self.containers:,}",
            )

    def unreadable(self) -> None:
        """Count a line that is not UTF-8; the connection's first is logged, the rest
        only counted."""
        self.not_utf8 += 1
        if self.not_utf8 == 1:
            _log.warning(
                "MCP server %r wrote a line to its stdout that is not UTF-8, the protocol's "
                "encoding: the line is dropped (the request it answered gets no answer, and "
                "fails saying so), and later such lines are dropped without another warning; "
                "fix the server",
                self._server,
            )

    def not_parsed(self, error: Exception) -> None:
        """Count a line the SDK could not parse (``error``, which it handed the session);
        the connection's first is logged, the rest only counted.

        The SDK logs the error itself, with the start and end of the line in it (on
        ``mcp.client.stdio``, made inert by ``_sdk_logs``); this says what it means for
        the connection, in veridic's words only.
        """
        self.unparsed += 1
        self.deep = self.deep or _too_deep(error)
        if self.unparsed == 1:
            _log.warning(
                "MCP server %r wrote a line to its stdout that is not a JSON-RPC message the "
                "client can read (%s): the SDK dropped it (the request it answered gets no "
                "answer, and fails saying so), and later such lines are dropped without "
                "another warning; fix the server",
                self._server,
                _unparsed_kind(error),
            )

    def said(self) -> str:
        """What the server did, for an error of a request it may have left unanswered."""
        wrote = []
        if self.long:
            wrote.append(
                f"a line of more than {self.limit:,} characters to its stdout, over the "
                "client's line limit (a hundred times the server's result_limit or "
                "describe_limit, whichever is larger)"
            )
        if self.crowded:
            wrote.append(
                f"a line of more than {self.containers:,} objects and arrays to its stdout, "
                "more than the client parses in one message (the server's result_limit or "
                "describe_limit, whichever is larger)"
            )
        if self.not_utf8:
            wrote.append("a line to its stdout that is not UTF-8, the protocol's encoding")
        if self.unparsed:
            kind = f"nested deeper than {_DEPTH} levels" if self.deep else "not JSON-RPC"
            wrote.append(
                f"a line to its stdout that is not a JSON-RPC message the client can read ({kind})"
            )
        return (
            f"MCP server {self._server!r} wrote {' and '.join(wrote)}, and the client "
            "dropped it rather than read it"
        )

    def error(self, lost: str, *, ran: bool = False) -> IntegrationError:
        """The error of a request that got no answer (``lost``: words saying which, and
        what followed) while the server wrote a line that was dropped; ``ran``: a call,
        which may have run all the same (said first, where an audit record's clipped
        detail keeps it)."""
        first = "the call may have run: " if ran else ""
        check = "check what the call did before calling it again, and " if ran else ""
        room = (
            ", or, if its messages are rightly this large, raise result_limit= where the "
            "server is declared"
            if self.long or self.crowded
            else ""
        )
        return IntegrationError(
            f"{first}{lost}; while it waited, {self.said()}: its answer may have been in "
            f"that line (the client cannot tell which request a dropped line answered); "
            f"{check}fix the server{room}",
            reason=self.reason,
        )


def _too_deep(error: Exception) -> bool:
    """Whether ``error`` (pydantic's ``ValidationError``, of the SDK's parse) is its
    parser's depth limit: read from its errors' messages, pydantic's own words, never from
    the error's text, which quotes the server's line."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return False
    return any(
        isinstance(found, dict) and "recursion limit exceeded" in str(found.get("msg", ""))
        for found in errors(include_input=False, include_url=False)
    )


def _unparsed_kind(error: Exception) -> str:
    """What was wrong with a line the SDK could not parse, in veridic's words."""
    return f"nested deeper than {_DEPTH} levels" if _too_deep(error) else "not JSON-RPC"


_UNCONNECTED: Final = LongLines(
    "(not a veridic connection)",
    line_limit(RESULT_LIMIT, 1),
    containers=container_limit(RESULT_LIMIT, 1),
)
"""What a decoder made outside :meth:`LongLines.reading` reads for: the default limit."""


class _BoundedLines(codecs.IncrementalDecoder):
    """UTF-8, passed on a whole line at a time; a line over the limit, or not UTF-8,
    dropped up to its end.

    The bytes are split at each newline before they are decoded (a newline byte is never
    part of another character in UTF-8), so a line that is not UTF-8 is dropped alone and
    the reading goes on. ``held`` is how many characters of the line not yet ended it
    holds: never more than the limit. A last line the server never ended is no message:
    at the end of the stream (``final``) it is let go, as the SDK lets go of its own.
    """

    def __init__(self, errors: str = "strict") -> None:
        super().__init__(errors)
        self._text = codecs.getincrementaldecoder("utf-8")(errors)
        self._lines = _READING.get() or _UNCONNECTED
        self._pieces: list[str] = []
        self._dropping = False
        self.held = 0

    def decode(self, input: ReadableBuffer, final: bool = False) -> str:
        *ends, rest = bytes(input).split(b"\n")
        whole = [line for line in map(self._ended, ends) if line is not None]
        if final:
            self.reset()
        else:
            self._hold(rest)
        return "".join(f"{line}\n" for line in whole)

    def reset(self) -> None:
        self._text.reset()
        self._let_go()
        self._dropping = False

    def _ended(self, tail: bytes) -> str | None:
        """The line ``tail`` ends, whole; ``None`` when the line is dropped."""
        text = None if self._dropping else self._decoded(tail, final=True)
        line = None if text is None else self._within(text)
        self.reset()  # the next line is read afresh
        return line

    def _within(self, tail: str) -> str | None:
        """The held line ended by ``tail``; ``None`` (counted) when it is over the limit,
        or holds more objects and arrays than the connection parses in one message."""
        if self.held + len(tail) > self._lines.limit:
            self._lines.over()
            return None
        line = "".join([*self._pieces, tail])
        if _crowded(line, self._lines.containers):
            self._lines.too_many()
            return None
        return line

    def _hold(self, piece: bytes) -> None:
        """Hold ``piece`` of a line not yet ended, or start dropping the line when it
        is not UTF-8 or would go over the limit."""
        if self._dropping or not piece:
            return
        text = self._decoded(piece, final=False)
        if text is not None and self.held + len(text) > self._lines.limit:
            self._lines.over()
            text = None
        if text is None:
            self._let_go()
            self._dropping = True
            return
        self._pieces.append(text)
        self.held += len(text)

    def _decoded(self, piece: bytes, *, final: bool) -> str | None:
        """``piece`` of a line as text; ``None`` (counted) when it is not UTF-8."""
        try:
            return self._text.decode(piece, final)
        except UnicodeDecodeError:
            self._lines.unreadable()
            return None

    def _let_go(self) -> None:
        self._pieces = []
        self.held = 0


def _crowded(line: str, containers: int) -> bool:
    """Whether ``line`` opens more than ``containers`` objects and arrays outside its strings.

    Counted at C speed: every ``{`` and ``[`` first, and only when they are too many, again
    with the strings taken out (a result's text may hold any number of brackets).
    """
    if line.count("{") + line.count("[") <= containers:
        return False
    outside = _STRING.sub("", line)
    return outside.count("{") + outside.count("[") > containers


def _search(name: str) -> codecs.CodecInfo | None:
    """The codec of :data:`ENCODING`; ``None`` for every other name (found as before)."""
    if name != ENCODING:
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(
        utf8.encode,
        utf8.decode,  # bytes decoded at once are in memory already: bounded by the caller
        streamreader=utf8.streamreader,
        streamwriter=utf8.streamwriter,
        incrementalencoder=utf8.incrementalencoder,
        incrementaldecoder=_BoundedLines,
        name=ENCODING,
    )
