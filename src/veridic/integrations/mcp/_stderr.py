"""A stdio MCP server's stderr, read line by line and logged quoted, never passed on raw.

The server is someone else's program: what it writes to stderr went straight to
the operator's terminal, where an escape sequence repainted the screen and a
written line break forged a log line of veridic's own ("INFO veridic: approved").
Its stderr is a pipe instead, drained by a thread of its own (so a server that
writes a lot never blocks on a full pipe, whether or not anyone reads the log),
each line logged on ``veridic.integrations.mcp.stderr`` at ``WARNING`` (what an
unconfigured ``logging`` still prints) as ``MCP server 'name' (stderr): '...'``:
the line quoted, its control and invisible characters escaped, cut at
``LINE_SHOWN`` characters with its length said, and with no workflow command
GitHub Actions would obey in it (``##[error]`` shown as ``##⟦U+005B⟧error]``: an
application logging to stderr in CI puts the line in the job's log; see
:mod:`veridic._workflow_commands`). A longer line without a break
is logged in pieces, decoded as one stream (a character a cut splits is whole in
the next piece). A server may write as many lines as it likes: one connection logs
at most ``LOGGED_PER_WINDOW`` lines (or pieces) in ``WINDOW`` seconds, the rest
counted and said, through the cap its log messages share (``_log_cap``); the last
count is said when the pipe ends. A logging setup that raises (a broken
filter) does not stop the draining: a server whose pipe was no longer read
would block on its next write, and its connection with it; the failure is
said once on ``veridic.integrations.mcp``, and the lines are still read.
Closing waits for the last lines without holding the event loop: a process
the server left behind may keep the pipe open long after the server is gone.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import IO, Final, TextIO

from veridic._sample import clip
from veridic._workflow_commands import inert_line
from veridic.integrations.mcp._log_cap import LogCap

__all__ = ["LINE_SHOWN", "ServerStderr"]

LINE_SHOWN: Final = 2000
"""Characters of one stderr line a log record quotes (a longer one is clipped, its length said)."""

_READ: Final = 8192  # bytes read at most as one line: a server's endless line is read in pieces
_JOIN: Final = 2.0  # seconds close() waits for the reader to log what is still in the pipe
_log = logging.getLogger("veridic.integrations.mcp.stderr")
_said = logging.getLogger("veridic.integrations.mcp")


class ServerStderr:
    """The pipe a server's stderr is written to, and the thread that logs what it reads.

    ``file`` is handed to the SDK as ``errlog`` (the child gets its descriptor);
    :meth:`release` closes this process's copy once the child has it, so the
    reader sees the end when the server (and whatever it started) exits;
    :meth:`close` releases, then waits a moment for the last lines.
    """

    __slots__ = ("_cap", "_name", "_reader", "file")

    def __init__(self, name: str) -> None:
        read_end, write_end = os.pipe()
        self._name = name
        self._cap = LogCap(_log, name, "stderr line", "when its stderr ends")
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
        """Release, and wait up to two seconds for the reader to log the rest (blocking:
        for a caller with no event loop; :meth:`aclose` is the one a connection uses)."""
        self.release()
        self._reader.join(_JOIN)

    async def aclose(self) -> None:
        """Release, and wait up to two seconds for the reader to log the rest, in a worker
        thread: the event loop's other tasks go on meanwhile (a cancelled wait ends at once;
        the reader goes on logging what it still reads)."""
        import anyio

        self.release()
        if self._reader.is_alive():
            await anyio.to_thread.run_sync(self._reader.join, _JOIN, abandon_on_cancel=True)

    def _drain(self, source: IO[bytes]) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        failed = False
        with source:
            while piece := source.readline(_READ):
                failed = self._logged(decoder.decode(piece).rstrip("\r\n"), failed)
            if rest := decoder.decode(b"", final=True):  # a character cut off by the end
                failed = self._logged(rest, failed)
        self._guarded(self._cap.close, failed)  # the count of the last window, if any

    def _logged(self, text: str, failed: bool) -> bool:
        """Log one line (or piece), if the cap admits it; whether this server's logging
        has failed by now. A line the logger would not log counts toward no cap."""

        def log() -> None:
            if _log.isEnabledFor(logging.WARNING) and self._cap.admits():
                shown = inert_line(clip(text, LINE_SHOWN))
                _log.warning("MCP server %r (stderr): %s", self._name, shown)

        return self._guarded(log, failed)

    def _guarded(self, log: Callable[[], None], failed: bool) -> bool:
        """Run ``log``; whether this server's logging has failed by now (said the first
        time: the lines are drained all the same, or the server would block)."""
        try:
            log()
        except Exception as error:  # the application's logging: drained all the same
            if not failed:
                self._unlogged(error)
            return True
        return failed

    def _unlogged(self, error: Exception) -> None:
        """Say once that this server's stderr lines cannot be logged (they are read on)."""
        # That logging may be broken too: then there is nowhere left to say it.
        with contextlib.suppress(Exception):
            _said.error(
                "MCP server %r: its stderr lines cannot be logged on %r, whose logging "
                "raised %s: %s; they are read and dropped so the server is not blocked: "
                "fix the filter or handler of that logger",
                self._name,
                _log.name,
                type(error).__name__,
                clip(str(error)),
            )
