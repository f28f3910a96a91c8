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
usual. The message in that line is lost, so the request it answered gets no answer: that
request's error says which limit the server went over (:meth:`LongLines.error`) in place
of "did not answer in time", and the connection logs one warning, not one per piece read
(an endless line is read in thousands of them).

The limit (:func:`line_limit`) is a hundred times the larger of the server's
``result_limit`` and ``describe_limit``: 10,000,000 characters by default. Those two bound
what the model is shown once a message has arrived, and a server may rightly send more:
a result is cut at ``result_limit`` only after it is read, JSON may write a character
outside ASCII as an escape of up to twelve characters, a result may carry its text twice
(its content and its structured content), and one page of a listing holds many tools, a
pinned one bounded by no ``describe_limit``. A hundred times leaves room for all of that
and still bounds a line to tens of megabytes; a server whose answers are rightly longer
is given more room by raising its ``result_limit``.

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

__all__ = ["ENCODING", "REASON", "LongLines", "line_limit", "registered"]

ENCODING: Final = "veridic_mcp_bounded_lines"
"""The name of the codec, given to the SDK as ``StdioServerParameters.encoding``."""

REASON: Final = "the MCP server wrote a line over the client's line limit"
"""The reason of an error (and of a failed start) caused by a line that was dropped."""

_TIMES: Final = 100  # the line limit, in times the larger of result_limit and describe_limit
_log = logging.getLogger("veridic.integrations.mcp")
_READING: contextvars.ContextVar[LongLines | None] = contextvars.ContextVar(
    "veridic_mcp_long_lines", default=None
)
_registering = threading.Lock()
_T = TypeVar("_T")


def line_limit(result_limit: int, describe_limit: int) -> int:
    """Characters one line (one message) of a server with these limits may take."""
    return _TIMES * max(result_limit, describe_limit)


def registered() -> str:
    """:data:`ENCODING`, its search function registered first if this process has not yet."""
    with _registering:
        try:
            codecs.lookup(ENCODING)
        except LookupError:
            codecs.register(_search)
    return ENCODING


class LongLines:
    """One connection's line limit, and how many lines its server wrote over it.

    ``dropped`` counts them: a request that fails after it grew (its answer was in a
    dropped line, most likely) is told so by :meth:`error`.
    """

    __slots__ = ("_server", "dropped", "limit")

    def __init__(self, server: str, limit: int) -> None:
        self._server = server
        self.limit = limit
        self.dropped = 0

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
        self.dropped += 1
        if self.dropped == 1:
            _log.warning(
                "MCP server %r wrote a line of more than %s characters to its stdout, over "
                "the client's line limit: the line is dropped up to its end (the request it "
                "answered gets no answer, and fails saying so), and later lines over the limit "
                "are dropped without another warning; fix the server, or raise its "
                "result_limit= if its messages are rightly this long",
                self._server,
                f"{self.limit:,}",
            )

    def said(self) -> str:
        """What the server did, for an error of a request it left unanswered."""
        return (
            f"MCP server {self._server!r} wrote a line of more than {self.limit:,} characters "
            "to its stdout, over the client's line limit (a hundred times the server's "
            "result_limit or describe_limit, whichever is larger), and the client dropped "
            "it rather than hold it in memory"
        )

    def error(self, lost: str, *, ran: bool = False) -> IntegrationError:
        """The error of a request whose answer was ``lost`` (words saying what was lost)
        in a dropped line; ``ran``: a call, which may have run all the same (said first,
        where an audit record's clipped detail keeps it)."""
        first = "the call may have run: " if ran else ""
        return IntegrationError(
            f"{first}{self.said()}, so {lost}; fix the server, or, if its messages are "
            "rightly this long, raise result_limit= where the server is declared",
            reason=REASON,
        )


_UNCONNECTED: Final = LongLines("(not a veridic connection)", line_limit(RESULT_LIMIT, 1))
"""What a decoder made outside :meth:`LongLines.reading` reads for: the default limit."""


class _BoundedLines(codecs.IncrementalDecoder):
    """UTF-8, passed on a whole line at a time; a line over the limit dropped up to its end.

    ``held`` is how many characters of the line not yet ended it holds: never more than
    the limit.
    """

    def __init__(self, errors: str = "strict") -> None:
        super().__init__(errors)
        self._text = codecs.getincrementaldecoder("utf-8")(errors)
        self._lines = _READING.get() or _UNCONNECTED
        self._pieces: list[str] = []
        self._dropping = False
        self.held = 0

    def decode(self, input: ReadableBuffer, final: bool = False) -> str:
        *ends, rest = self._text.decode(input, final).split("\n")
        whole = [line for line in map(self._ended, ends) if line is not None]
        self._hold(rest)
        return "".join(f"{line}\n" for line in whole)

    def reset(self) -> None:
        self._text.reset()
        self._let_go()
        self._dropping = False

    def _ended(self, tail: str) -> str | None:
        """The line ``tail`` ends, whole; ``None`` when the line is dropped."""
        if self._dropping:
            self._dropping = False  # the dropped line's end: the next one is read
            return None
        if self.held + len(tail) > self._lines.limit:
            self._let_go()
            self._lines.over()
            return None
        line = "".join([*self._pieces, tail])
        self._let_go()
        return line

    def _hold(self, piece: str) -> None:
        """Hold ``piece`` of a line not yet ended, or start dropping the line when it
        would go over the limit."""
        if self._dropping or not piece:
            return
        if self.held + len(piece) > self._lines.limit:
            self._let_go()
            self._dropping = True
            self._lines.over()
            return
        self._pieces.append(piece)
        self.held += len(piece)

    def _let_go(self) -> None:
        self._pieces = []
        self.held = 0


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
