"""``veridic lint``, ``manifest`` and ``check``: the commands that read the application's registry.

They share a module because ``check`` is lint's checks plus the manifest's
comparison: one way to turn a lint finding into a report item, one way to
compare the committed snapshot, and one place that reports the components'
boot states beside the snapshot rather than in it.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import sys
from pathlib import Path

from veridic.checks._cli_config import _Config
from veridic.checks._cli_report import _Item, _Report, _UsageError
from veridic.checks._cli_target import _booting, _display, _load_target
from veridic.checks._cli_write import _write_output
from veridic.checks._regular import NotRegularFileError, read_regular
from veridic.checks.lint import LintFinding, check, lint, tools_of
from veridic.checks.manifest import (
    ManifestFormatError,
    build_manifest,
    component_states,
    diff_manifest,
    render_manifest,
)
from veridic.text.terminal_view import visible
from veridic.tools.registry import Registry
from veridic.tools.view import ToolView


def _run_lint(args: argparse.Namespace, config: _Config) -> _Report:
    report = _Report("lint", args.target)
    with _booting(report):
        target = _require_tools(_load_target(args.target), args.target)
        report.items.extend(_lint_items(target, config))
    return report


def _require_tools(target: Registry | ToolView, spec: str) -> Registry | ToolView:
    """``target``, refused when it holds no tool and no component: nothing would be checked.

    Tools are often registered in modules of their own, which the application imports
    and ``MODULE`` may not; veridic imports only ``MODULE``, found an empty registry and
    reported it clean (and wrote, then matched, an empty manifest). A component may
    register its tools when it boots, so a registry that declares one is checked.

    Raises:
        _UsageError: no tool is registered and no component declared.
    """
    components = (
        target.components() if isinstance(target, Registry) else target.unavailable_components()
    )
    if tools_of(target) or components:
        return target
    raise _UsageError(
        f"{spec} holds no tool, so nothing of it could be checked: veridic imports only "
        f"{spec.partition(':')[0]}, and tools registered in a module it does not import "
        "(app/tools.py, imported by the application's entry point) are not registered yet: "
        "import the modules that register the tools in that module, or name a module that "
        "does (veridic lint app.main:registry)"
    )


def _lint_items(target: Registry | ToolView, config: _Config) -> list[_Item]:
    found = lint(target, threshold=config.similarity_threshold, siblings=config.siblings)
    return [_lint_item(finding) for finding in found]


def _lint_item(finding: LintFinding) -> _Item:
    data: list[tuple[str, object]] = []
    if finding.score is not None:
        data = [("score", round(finding.score, 3)), ("other", finding.other)]
    return _Item(
        finding.severity,
        finding.code,
        finding.message,
        file=finding.file,
        line=finding.line,
        subject=finding.tool,
        data=tuple(data),
    )


def _run_manifest(args: argparse.Namespace, config: _Config) -> _Report:
    report = _Report("manifest", args.target)
    with _booting(report):
        target = _require_tools(_load_target(args.target), args.target)
        if args.output is not None:
            _write_manifest(target, args.output, report)
        else:
            _check_manifest(target, args.check, report)
        _boot_states(target, report, listed=True)
    return report


def _boot_states(target: Registry | ToolView, report: _Report, *, listed: bool) -> None:
    """Put each component's boot state in the report: it is not in the snapshot.

    Whether a component starts depends on the machine (secrets, licences, a
    server's version), so it is reported here, in the text and in the JSON
    ``components`` table, and never compared. ``listed`` adds a listed item per
    component that did not start (``check`` has them from its projections).
    """
    states = component_states(target)
    report.extra["components"] = states
    if states:
        report.notes.append(
            "components on this machine (reported, not in the snapshot): "
            + ", ".join(f"{name} {_started(state['started'])}" for name, state in states.items())
        )
    if not listed:
        return
    for name, state in states.items():
        if state["started"] is False:
            report.items.append(
                _Item(
                    "info",
                    "component-down",
                    f"component {name!r} did not start here ({state['reason']}); its boot "
                    "state is reported, not part of the snapshot, so this machine's secrets "
                    "and licences do not change the manifest",
                )
            )


def _started(started: object) -> str:
    if started is None:
        return "was not booted"
    return "started" if started else "did not start"


def _write_manifest(target: Registry | ToolView, path: Path, report: _Report) -> None:
    _refuse_code(path, report.target)
    _write_output(path, render_manifest(build_manifest(target)))
    report.notes.append(f"wrote {path}")
    report.extra["written"] = str(path)


def _refuse_code(path: Path, target: str) -> None:
    """Refuse ``-o`` naming Python code: a file with a module's suffix (``app.py`` typed
    for ``app.json``), or the file of any module imported so far, whatever its name or a
    link to it is called. The manifest written there replaced the application's source,
    maybe the very module it was read from, with JSON.
    """
    resolved = os.path.realpath(path)
    code = path.name.endswith(tuple(importlib.machinery.all_suffixes())) or (
        path.exists() and resolved in _module_files()
    )
    if code:
        raise _UsageError(
            f"-o {visible(str(path), None)} is Python code (a module's file), and the manifest "
            "is JSON that would replace it: write the manifest to a .json file beside the code "
            f"(veridic manifest {target} -o agent-manifest.json)"
        )


def _module_files() -> frozenset[str]:
    """The real paths of the files of every module imported so far (their source and
    compiled files)."""
    found: set[str] = set()
    for module in list(sys.modules.values()):
        for name in ("__file__", "__cached__"):
            file = getattr(module, name, None)
            if isinstance(file, str):
                found.add(os.path.realpath(file))
    return frozenset(found)


def _read_manifest(path: Path, target: str) -> str:
    """The committed manifest's text; a file that is missing, a folder, unreadable or not
    UTF-8 is a usage error saying how to write it (not decoding it was a traceback), and
    so is a FIFO or a link to a device (``/dev/zero`` was read until the memory ran out)."""
    shown = visible(str(path), None)
    regenerate = f"veridic manifest {target} -o {shown}"
    if path.is_dir():
        raise _UsageError(
            f"the manifest {shown} is a folder: name the committed manifest file in it "
            f"(write one with veridic manifest {target} -o {shown}/agent-manifest.json)"
        )
    try:
        return read_regular(path).decode("utf-8")
    except NotRegularFileError as error:
        raise _UsageError(
            f"the manifest {error}: name the committed manifest file itself (write one "
            f"with veridic manifest {target} -o agent-manifest.json)"
        ) from error
    except OSError as error:
        raise _UsageError(
            f"cannot read the manifest {shown}: {error.strerror or error}: write it first "
            f"with {regenerate}"
        ) from error
    except UnicodeDecodeError as error:
        raise _UsageError(
            f"the manifest {shown} is not UTF-8 ({error.reason} at byte {error.start}), so it "
            f"is no manifest veridic wrote: regenerate it with {regenerate}, review the diff "
            "and commit it"
        ) from error


def _check_manifest(target: Registry | ToolView, path: Path, report: _Report) -> None:
    committed = _read_manifest(path, report.target)
    try:
        changes = diff_manifest(committed, build_manifest(target))
    except ManifestFormatError as error:
        raise _UsageError(f"{path}: {error}") from error
    for change in changes:
        report.items.append(
            _Item(
                "error",
                "drift",
                change.text,
                file=_display(str(path)),
                data=(
                    ("subject", change.subject),
                    ("change", change.change),
                    ("field", change.field),
                    ("before", change.before),
                    ("after", change.after),
                ),
            )
        )
    report.extra["drift"] = [c.text for c in changes]
    if changes:
        report.notes.append(
            f"{path} differs from the registry: review each change below; if it is intended, "
            f"refresh the snapshot with veridic manifest {report.target} -o {path} "
            "and commit it with the change"
        )
    else:
        report.notes.append(f"{path} matches the registry")


def _run_check(args: argparse.Namespace, config: _Config) -> _Report:
    report = _Report("check", args.target)
    manifest: Path | None = args.manifest if args.manifest is not None else config.manifest
    with _booting(report):
        target = _require_tools(_load_target(args.target), args.target)
        found = check(target, threshold=config.similarity_threshold, siblings=config.siblings)
        report.items.extend(_lint_item(finding) for finding in found)
        if manifest is None:
            report.notes.append(
                "no manifest compared: pass --manifest FILE or set [tool.veridic] manifest"
            )
        elif not any(item.kind == "boot" or item.kind == "risk-floor" for item in report.items):
            _check_manifest(target, manifest, report)
        else:
            report.notes.append(f"{manifest} not compared: the registry does not boot")
        if not any(item.kind == "boot" or item.kind == "risk-floor" for item in report.items):
            _boot_states(target, report, listed=False)
    return report
