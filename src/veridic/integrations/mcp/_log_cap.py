"""The cap on what one MCP server connection may write to the application's log.

A server is someone else's program, and it may send as many log messages, and write as
many stderr lines, as it likes: logged each, a hostile server filled the application's
log (and the disk under it). One connection logs at most ``LOGGED_PER_WINDOW`` of each in
``WINDOW`` seconds; the rest of that window are counted, not logged: one ``WARNING`` says
so with the first of them, and one says how many when the window is over (with the next
one after it, or when the source ends). A source that never ends (a connection never
closed, a pipe a server's leftover process holds open) never says the last count, but the
first ``WARNING`` has said that some were dropped.

One class for the log messages (``_server_log``) and the stderr lines (``_stderr``), so
the two are capped alike and said alike.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from veridic._counted import counted

__all__ = ["LOGGED_PER_WINDOW", "WINDOW", "LogCap"]

LOGGED_PER_WINDOW: Final = 100
"""Log messages (or stderr lines) of one server connection logged in one window."""

WINDOW: Final = 60.0
"""Seconds of one window: the first message after it opens the next."""


class LogCap:
    """How many of one connection's ``noun`` (``"log message"``, ``"stderr line"``) the
    current window has logged, and how many it counted instead; ``ends`` says when the
    source ends, for the warning that promises the count (``"when the connection
    closes"``).

    Not thread-safe: each source asks from one thread (the event loop for log messages,
    the reader thread for stderr lines).
    """

    __slots__ = ("_ends", "_log", "_logged", "_name", "_noun", "_opened", "_over")

    def __init__(self, log: logging.Logger, name: str, noun: str, ends: str) -> None:
        self._log = log
        self._name = name
        self._noun = noun
        self._ends = ends
        self._opened = 0.0  # when the current window began (time.monotonic())
        self._logged = 0  # logged in it
        self._over = 0  # counted in it, not logged

    def admits(self) -> bool:
        """Whether the next one is logged; one that is not is counted (and the first of
        them said). The first one after a window is over opens the next, saying the
        count of the last."""
        now = time.monotonic()
        if now - self._opened >= WINDOW:
            self.close()
            self._opened = now
        if self._logged >= LOGGED_PER_WINDOW:
            self._over += 1
            if self._over == 1:
                self._capped()
            return False
        self._logged += 1
        return True

    def _capped(self) -> None:
        """Say that this window's are no longer logged, with the first one not logged: the
        count comes only when the window is over, and a server that fell silent on a
        connection held open (or a process that ended without closing it) left no word
        that any were dropped."""
        self._log.warning(
            "MCP server %r sent %s in under %g seconds, the most one connection logs: the "
            "rest of this window are counted, not logged, and their number said when it is "
            "over (with the server's next %s after it, or %s)",
            self._name,
            counted(LOGGED_PER_WINDOW, self._noun),
            WINDOW,
            self._noun,
            self._ends,
        )

    def close(self) -> None:
        """End the current window: say how many of its were not logged, if any."""
        over, self._over, self._logged = self._over, 0, 0
        if over:
            self._log.warning(
                "MCP server %r sent %s more than the %d one connection logs in %g seconds: "
                "counted, not logged (a server may send as many as it likes; its own log "
                "may keep them)",
                self._name,
                counted(over, self._noun),
                LOGGED_PER_WINDOW,
                WINDOW,
            )
