"""An MCP server's log messages (``notifications/message``), logged quoted and capped.

The SDK's ``logging_callback``: without one the SDK drops them without a word, and
what a server says of a call (a write it did in part, a token that expired) was
lost. Each is logged on ``veridic.integrations.mcp.server_log`` as the server's
stderr lines are (``_stderr``): its data and logger name quoted, escaped and
clipped, its level said, at ``DEBUG`` or ``INFO`` for those levels and ``WARNING``
for the rest (the server's word, never one of the application's errors). A message
whose level is not logged is not written out at all (its data not encoded).

The server is someone else's program, and it may send as many as it likes: logged
each, a hostile server filled the application's log (and the disk under it). One
connection logs at most ``LOGGED_PER_WINDOW`` messages in ``WINDOW`` seconds; the
rest of that window are counted, not logged: one ``WARNING`` says so with the
first of them, and one says how many when the window is over (with the next message
after it, or when the connection closes). A connection never closed (a process that
ends without leaving its ``connect``) never says the last count, but the first
``WARNING`` has said that some were dropped.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Final

from veridic._counted import counted
from veridic._sample import clip
from veridic.integrations.mcp._stderr import LINE_SHOWN

__all__ = ["LOGGED_PER_WINDOW", "WINDOW", "ServerLog"]

LOGGED_PER_WINDOW: Final = 100
"""Log messages of one server connection logged in one window; the rest are counted."""

WINDOW: Final = 60.0
"""Seconds of one window: the first message after it opens the next."""

_log = logging.getLogger("veridic.integrations.mcp.server_log")
# A server's log levels, as levels of the application's log: never above WARNING, so that
# a server's own "emergency" cannot read (or page) as one of the application's.
_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO}


class ServerLog:
    """The log messages of one connection to the server ``name``: logged, up to the cap."""

    __slots__ = ("_logged", "_name", "_opened", "_over")

    def __init__(self, name: str) -> None:
        self._name = name
        self._opened = 0.0  # when the current window began (time.monotonic())
        self._logged = 0  # messages logged in it
        self._over = 0  # messages of it counted, not logged

    async def __call__(self, params: object) -> None:
        """The SDK's ``logging_callback``."""
        level = getattr(params, "level", None)
        levelno = _LEVELS.get(str(level), logging.WARNING)
        if not _log.isEnabledFor(levelno):
            return  # written as JSON only to be read: a server may send many, and large
        now = time.monotonic()
        if now - self._opened >= WINDOW:
            self.close()
            self._opened = now
        if self._logged >= LOGGED_PER_WINDOW:
            self._over += 1
            if self._over == 1:
                self._capped()
            return
        self._logged += 1
        data = getattr(params, "data", None)
        logger = getattr(params, "logger", None)
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        _log.log(
            levelno,
            "MCP server %r (log message, level %s%s): %s",
            self._name,
            clip(str(level), 16),
            f", logger {clip(logger, 64)}" if isinstance(logger, str) else "",
            clip(text, LINE_SHOWN),
        )

    def _capped(self) -> None:
        """Say that this window's messages are no longer logged, with the first one not
        logged: the count comes only when the window is over, and a server that fell
        silent on a connection held open (or a process that ended without closing it)
        left no word that any were dropped."""
        _log.warning(
            "MCP server %r sent %d log messages in under %g seconds, the most one connection "
            "logs: the rest of this window are counted, not logged, and their number said when "
            "it is over (with the server's next message after it, or when the connection closes)",
            self._name,
            LOGGED_PER_WINDOW,
            WINDOW,
        )

    def close(self) -> None:
        """End the current window: say how many of its messages were not logged, if any."""
        over, self._over, self._logged = self._over, 0, 0
        if over:
            _log.warning(
                "MCP server %r sent %s more than the %d one connection logs in %g seconds: "
                "counted, not logged (a server may send as many as it likes; its own log "
                "may keep them)",
                self._name,
                counted(over, "log message"),
                LOGGED_PER_WINDOW,
                WINDOW,
            )
