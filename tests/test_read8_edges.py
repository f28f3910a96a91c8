"""A second read of the seventh review's MCP follow-ups: a stdio server's stderr, drained
by a thread of its own, must keep being drained whatever the logging setup does, must not
hold the event loop while it waits for the last lines, and must not break a character
that a long line's pieces split."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from veridic import Registry
from veridic.integrations.mcp import Declared, connect, stdio
from veridic.integrations.mcp._stderr import ServerStderr

REVIEW_SCRIPT = Path(__file__).with_name("_mcp_review_server.py")
STDERR_LOGGER = "veridic.integrations.mcp.stderr"


class _Broken(logging.Filter):
    """A logging filter with a bug, as an application's own filter may have one."""

    def filter(self, record: logging.LogRecord) -> bool:
        raise RuntimeError("the application's filter is broken")


def test_a_raising_log_filter_does_not_stop_the_stderr_drain_and_hang_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A filter on the stderr logger that raised killed the drain thread at the first
    line: the pipe was no longer read, a server writing more than the pipe holds blocked
    on its next write, and the connection hung until the timeout. The drain now goes on
    (the lines it could not log are dropped, once said on ``veridic.integrations.mcp``)."""
    caplog.set_level(logging.WARNING)
    broken = _Broken()
    logging.getLogger(STDERR_LOGGER).addFilter(broken)
    server = stdio(
        "noisy",
        sys.executable,
        str(REVIEW_SCRIPT),
        env={"VERIDIC_TEST_MCP_MODE": "stderr"},
        timeout=8,
    )

    async def run() -> list[str]:
        async with connect(Registry(), server, declare={"tool_0": Declared("query")}) as tools:
            return list(tools.tools)

    try:
        assert asyncio.run(run()) == ["tool_0"]
    finally:
        logging.getLogger(STDERR_LOGGER).removeFilter(broken)
    said = [r.getMessage() for r in caplog.records if r.name == "veridic.integrations.mcp"]
    assert len(said) == 1
    assert "MCP server 'noisy'" in said[0]
    assert "RuntimeError" in said[0]
    assert "the application's filter is broken" in said[0]


def test_closing_does_not_hold_the_event_loop_while_a_detached_child_keeps_stderr(
    tmp_path: Path,
) -> None:
    """A server that started a detached process (a daemon of its own) left that process
    holding its stderr: closing the connection then waited two seconds for an end of the
    pipe that never came, in the event loop's thread, so every other task of the
    application stood still. The wait no longer blocks the loop."""
    pid_file = tmp_path / "child.pid"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        "import os, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(20)'],"
        " start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        f"os.execv(sys.executable, [sys.executable, {str(REVIEW_SCRIPT)!r}])\n"
    )
    server = stdio("forks", sys.executable, str(wrapper), env={"VERIDIC_TEST_MCP_MODE": "stderr"})
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def run() -> None:
        async with connect(Registry(), server, declare={"tool_0": Declared("query")}):
            stop = asyncio.Event()
            ticking = asyncio.create_task(ticker(stop))
            await asyncio.sleep(0.05)
            gaps.clear()
        stop.set()
        await ticking

    logging.getLogger(STDERR_LOGGER).disabled = True
    try:
        asyncio.run(run())
    finally:
        logging.getLogger(STDERR_LOGGER).disabled = False
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert max(gaps) < 1.0


def test_a_long_line_cut_into_pieces_keeps_every_character_whole(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A line longer than one read is logged in pieces; a piece that ended inside a
    character's UTF-8 bytes logged them as escapes (``\\xc3``) and the next piece began
    with the rest. Pieces are now decoded as one stream."""
    caplog.set_level(logging.WARNING, logger=STDERR_LOGGER)
    errors = ServerStderr("wide")
    errors.file.write("a" + "é" * 9000 + "\n")
    errors.close()
    logged = [r.getMessage() for r in caplog.records if r.name == STDERR_LOGGER]
    assert len(logged) > 1
    assert not any("\\x" in line for line in logged)
