"""An MCP server's log messages (``notifications/message``), logged quoted and capped.

The SDK's ``logging_callback``: without one the SDK drops them without a word, and
what a server says of a call (a write it did in part, a token that expired) was
lost. Each is logged on ``veridic.integrations.mcp.server_log`` as the server's
stderr lines are (``_stderr``): its data and logger name quoted, escaped and
clipped, with no workflow command GitHub Actions would obey in them (the server's
``##[error]`` shown as ``##⟦U+005B⟧error]``: see :mod:`veridic._workflow_commands`),
its level said, at ``DEBUG`` or ``INFO`` for those levels and ``WARNING``
for the rest (the server's word, never one of the application's errors). A message
whose level is not logged is not written out at all (its data not encoded).

The server is someone else's program, and it may send as many as it likes: one
connection logs at most ``LOGGED_PER_WINDOW`` in ``WINDOW`` seconds, the rest counted and
said (``_log_cap``, the cap its stderr lines share).
"""

from __future__ import annotations

import json
import logging
from typing import Final

from veridic._sample import clip
from veridic._workflow_commands import inert_line
from veridic.integrations.mcp._log_cap import LOGGED_PER_WINDOW, WINDOW, LogCap
from veridic.integrations.mcp._stderr import LINE_SHOWN

__all__ = ["LOGGED_PER_WINDOW", "WINDOW", "ServerLog"]

_log = logging.getLogger("veridic.integrations.mcp.server_log")
# A server's log levels, as levels of the application's log: never above WARNING, so that
# a server's own "emergency" cannot read (or page) as one of the application's.
_LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO}


class ServerLog:
    """The log messages of one connection to the server ``name``: logged, up to the cap."""

    __slots__ = ("_cap", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._cap = LogCap(_log, name, "log message", "when the connection closes")

    async def __call__(self, params: object) -> None:
        """The SDK's ``logging_callback``."""
        level = getattr(params, "level", None)
        levelno = _LEVELS.get(str(level), logging.WARNING)
        if not _log.isEnabledFor(levelno):
            return  # written as JSON only to be read: a server may send many, and large
        if not self._cap.admits():
            return
        data = getattr(params, "data", None)
        logger = getattr(params, "logger", None)
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        _log.log(
            levelno,
            "MCP server %r (log message, level %s%s): %s",
            self._name,
            inert_line(clip(str(level), 16)),
            f", logger {inert_line(clip(logger, 64))}" if isinstance(logger, str) else "",
            inert_line(clip(text, LINE_SHOWN)),
        )

    def close(self) -> None:
        """End the current window: say how many of its messages were not logged, if any."""
        self._cap.close()
