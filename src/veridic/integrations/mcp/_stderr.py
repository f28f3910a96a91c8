"""A stdio MCP server's stderr, read line by line and logged quoted, never passed on raw.

The server is someone else's program: what it writes to stderr went straight to
the operator's terminal, where an escape sequence repainted the screen and a
written line break forged a log line of veridic's own ("INFO veridic: approved").
Its stderr is a pipe instead, drained by a thread of its own (so a server that
writes a lot never blocks on a full pipe, whether or not anyone reads the log),
each line logged on ``veridic.integrations.mcp.stderr`` at ``WARNING`` (what an
unconfigured ``logging`` still prints) as ``MCP server 'name' (stderr): '...'``:
the line quoted, its control and invisible characters escaped, cut at
``LINE_SHOWN`` characters with its length said. A longer line without a break
is logged in pieces, none dropped.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import IO, Final, TextIO

from veridic._sample import clip

__all__ = ["LINE_SHOWN", "ServerStderr"]

LINE_SHOWN: Final = 2000
"""Characters of one stderr line a log record quotes (a longer one is clipped, its length said)."""

_READ: Final = 8192  # bytes read at most as one line: a server's endless line is read in pieces
_JOIN: Final = 2.0  # seconds close() waits for the reader to log what is still in the pipe
_log = logging.getLogger("veridic.integrations.mcp.stderr")


class ServerStderr:
    """The pipe a server's stderr is written to, and the thread that logs what it reads.

    ``file`` is handed to the SDK as ``errlog`` (the child gets its descriptor);
    :meth:`release` closes this process's copy once the child has it, so the
    reader sees the end when the server (and whatever it started) exits;
    :meth:`close` releases, then waits a moment for the last lines.
    """

    __slots__ = ("_name", "_reader", "file")

    def __init__(self, name: str) -> None:
        read_end, write_end = os.pipe()
        self._name = name
        self.file: TextIO = os.fdopen(write_end, "w", encoding="utf-8")
        source = os.fdopen(read_end, "rb")
        self._reader = threading.Thread(
            target=self._drain, args=(source,), name=f"mcp-stderr:{name}", daemon=True
        )
        self._reader.start()

    def release(self) -> None:
        """Close this process's end for writing (the child keeps its own)."""
        if not self.file.closed:
            self.file.close()

    def close(self) -> None:
        """Release, and wait up to two seconds for the reader to log the rest."""
        self.release()
        self._reader.join(_JOIN)

    def _drain(self, source: IO[bytes]) -> None:
        with source:
            while line := source.readline(_READ):
                text = line.decode("utf-8", "backslashreplace").rstrip("\r\n")
                _log.warning("MCP server %r (stderr): %s", self._name, clip(text, LINE_SHOWN))
