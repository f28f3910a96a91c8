"""``veridic hatches``: every escape from veridic's type checks, read from source files.

The one report command that imports nothing of the application: it parses the
paths it is given (``veridic.checks.hatches``), so it runs where the
application cannot start, and lists each hatch for review; only those the
scan marks as findings fail it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from veridic.checks._cli_config import _Config
from veridic.checks._cli_report import _Item, _Report, _UsageError
from veridic.checks._cli_target import _display
from veridic.checks.hatches import find_hatches
from veridic.errors import VeridicError


def _run_hatches(args: argparse.Namespace, config: _Config) -> _Report:
    paths: list[Path] = args.paths
    dangling = [p for p in paths if p.is_symlink() and not p.exists()]
    if dangling:
        raise _UsageError(
            f"{', '.join(map(str, dangling))}: a symbolic link that leads to no file or "
            f"directory (it loops, or what it names is gone; looked from {os.getcwd()}): "
            "pass the path of the code itself"
        )
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise _UsageError(
            f"{', '.join(map(str, missing))}: no such file or directory (looked from "
            f"{os.getcwd()}): pass paths of Python files or directories that hold them"
        )
    report = _Report("hatches", " ".join(map(str, paths)))
    try:
        hatches = find_hatches(paths, trust_policies=config.trust_policies)
    except VeridicError as error:  # a directory that holds no Python file
        raise _UsageError(str(error).removeprefix("veridic hatches: ")) from error
    for hatch in hatches:
        data: list[tuple[str, object]] = []
        if hatch.kind in ("trust-policy", "vouch"):
            data = [("policy", hatch.policy), ("reason", hatch.reason)]
        if hatch.codes:
            data = [("codes", list(hatch.codes))]
        report.items.append(
            _Item(
                "error" if hatch.finding else "info",
                hatch.kind,
                hatch.why,
                file=hatch.file,
                line=hatch.line,
                text=hatch.text,
                data=tuple(data),
            )
        )
    if config.trust_policies is not None:
        report.notes.append(
            "trust-policies listed in "
            f"{_display(str(config.path))}: {', '.join(sorted(config.trust_policies)) or 'none'}"
        )
    return report
