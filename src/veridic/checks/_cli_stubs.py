"""``veridic stubs``: the SDK overlay stubs, written where pyright's ``stubPath`` points.

It copies veridic's own data, so it needs neither configuration nor the
application. What is written, and what is refused, is decided by
``veridic.checks.stubs``; here only the command's output and exit code.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from veridic.checks._cli_report import EXIT_CLEAN, EXIT_USAGE, _say
from veridic.checks.stubs import write_stubs
from veridic.errors import VeridicError


def _run_stubs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``veridic stubs``: write the stubs (:mod:`veridic.checks.stubs`); a refusal is exit 2."""
    try:
        written = write_stubs(args.directory)
    except VeridicError as error:
        _say("stubs", error, err)
        return EXIT_USAGE
    for warning in written.warnings():
        _say("stubs", f"warning: {warning}", err)
    out.write(written.summary())
    return EXIT_CLEAN
