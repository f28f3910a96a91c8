"""Lines with nothing in them that GitHub Actions would obey as a workflow command.

The runner reads a line of a job's output that starts, after spaces, with ``::``
as a workflow command (``::error file=app.py::...`` forges an annotation,
``::add-mask::`` hides text, ``::stop-commands::`` mutes the commands that
follow), and, failing that, the legacy ``##[command]data`` anywhere in the line.
Whatever veridic prints or logs may quote outside text (a path a pull request
named, a licence server's answer, an MCP server's stderr), and an application
that logs to stderr in CI puts its log lines in the job's output. So the
``veridic`` command's reports and veridic's log lines that quote outside text
pass through :func:`inert_line`, one rule for both.

The bottom of the package: imports nothing of veridic.
"""

from __future__ import annotations

__all__ = ["inert_line"]


def inert_line(line: str) -> str:
    """``line``, with its leading ``::`` and every ``##[`` written as ``visible`` writes a
    character it escapes: the first colon as ``⟦U+003A⟧``, the bracket as ``⟦U+005B⟧``.

    ``line`` must be one line already: a line break in it would start a line this
    never looked at the start of.

    >>> inert_line("  ::error file=a.py::all clear ##[warning]x")
    '  ⟦U+003A⟧:error file=a.py::all clear ##⟦U+005B⟧warning]x'
    >>> inert_line("nothing to obey")
    'nothing to obey'
    """
    line = line.replace("##[", "##\u27e6U+005B\u27e7")
    body = line.lstrip()
    if body.startswith("::"):
        return f"{line[: len(line) - len(body)]}\u27e6U+003A\u27e7{body[1:]}"
    return line
