"""The MCP SDK's own log records of veridic's connections, each made one inert line.

The SDK logs what a server sent in its own words, on its own loggers: at ``DEBUG`` every
message read over streamable HTTP (``mcp.client.streamable_http``: "SSE message: ..."),
a response to an id nobody asked (``mcp.shared.jsonrpc_dispatcher``, the server's id
quoted), and at ``ERROR``, with a traceback, a stdio line it could not parse
(``mcp.client.stdio``: pydantic's error, which quotes the line's start and end). Quoted
with ``repr`` at best, an id or a line holding ``##[error]`` was obeyed by GitHub
Actions as a workflow command when the application logged to stderr in CI
(``logging.basicConfig(level=logging.DEBUG)`` is enough), and a message written with
``%s`` or an f-string passed a line break or an escape sequence on raw.

So when veridic opens a connection it installs a filter (once per process) on each of the
SDK's client loggers, :data:`SDK_LOGGERS`. A record logged within a veridic
connection (in a task the connection started, or while veridic awaits the SDK for it:
:func:`speaking`) is rewritten as one line: its control, bidi and invisible characters
escaped, cut at :data:`SHOWN` characters with its length said, and with nothing a CI
runner would obey (:func:`~veridic._workflow_commands.inert_line`); its traceback is
veridic's rendering of it (frames as Python gives them, each error's class and message
escaped the same way). Nothing is dropped and no level is
changed: an application that wants the SDK quieter raises those loggers' levels (the
guide lists them). Records of the application's own use of the SDK, outside veridic's
connections, are left as they are.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from veridic._sample import class_named, cut_short, error_message, traceback_shown
from veridic._workflow_commands import inert_line

__all__ = ["SDK_LOGGERS", "SHOWN", "speaking"]

SDK_LOGGERS: Final = (
    "client",  # mcp.client.session logs on a logger of this bare name
    "mcp.client.auth.oauth2",
    "mcp.client.caching",
    "mcp.client.client",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.os.posix.utilities",
    "mcp.shared.direct_dispatcher",
    "mcp.shared.dispatcher",
    "mcp.shared.jsonrpc_dispatcher",
    "mcp.shared.tool_name_validation",
)
"""The loggers the MCP SDK's client side logs on (``mcp`` 2.3), each given the filter."""

SHOWN: Final = 2000
"""Characters of one SDK record's message kept; the rest is cut, its length said."""

_SPEAKING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "veridic_mcp_sdk_speaking", default=False
)
_installing = threading.Lock()


@contextmanager
def speaking() -> Iterator[None]:
    """Within it, and in every task started within it, the SDK's records are made inert.

    Entered around opening a connection (the SDK's reading and dispatching tasks start
    then, and keep the context) and around each request veridic awaits.
    """
    _install()
    token = _SPEAKING.set(True)
    try:
        yield
    finally:
        _SPEAKING.reset(token)


class _Inert(logging.Filter):
    """Rewrites a record of a veridic connection as one inert line; lets every record by."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _SPEAKING.get():
            return True
        try:
            _rewrite(record)
        except Exception as failure:  # a filter that raised would fail the SDK's own code
            record.msg = (
                f"a log record of the MCP SDK that veridic could not make inert "
                f"({class_named(failure)}): its text is not shown"
            )
            record.args = None
            record.exc_info = record.exc_text = None
        return True


_FILTER: Final = _Inert()


def _install() -> None:
    """Give each of :data:`SDK_LOGGERS` the filter, once for the process."""
    with _installing:
        for name in SDK_LOGGERS:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)


def _rewrite(record: logging.LogRecord) -> None:
    record.msg = _one_line(record.getMessage())
    record.args = None
    error = record.exc_info[1] if record.exc_info else None
    if error is not None:
        record.exc_text = _traceback(error)
    record.exc_info = None


def _one_line(text: str) -> str:
    """``text`` as one line with nothing in it a terminal or a CI runner would obey."""
    escaped = text if text.isprintable() else repr(text)[1:-1]
    return inert_line(cut_short(escaped, SHOWN))


def _traceback(error: BaseException) -> str:
    """What ``exc_info`` would print of ``error`` and the errors that led to it, each
    error's message one inert line (pydantic's quotes the server's line; its own lines
    are kept, escaped, rather than cut to a sample)."""
    return traceback_shown(error, lambda each: _one_line(error_message(each)))
