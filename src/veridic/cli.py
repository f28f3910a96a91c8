"""The ``veridic`` command: the checks a project's CI runs, on the live registry.

``veridic lint``, ``manifest``, ``check`` and ``hatches`` turn the silent
failures of the articles (a missing description, a reworded tool, a hard
delete quietly demoted to mid risk, a new escape hatch) into a red run. The
registry commands import the application's object (``MODULE:ATTR``) instead of
reading source text, so they see exactly what the agent will see.

Exit codes: 0 clean, 1 findings, 2 usage error (bad arguments, a target that
cannot be imported or is not a ``Registry``/``ToolView``, bad configuration).
Warnings are shown but only fail with ``--strict``; items listed for review
(``hatches``) never fail. ``--format json`` gives the same report for
machines: ``findings``, ``warnings`` and ``listed`` arrays plus ``exit_code``.

Configuration is read from ``[tool.veridic]`` of the nearest
``pyproject.toml`` above the working directory (or ``--config FILE``):

.. code-block:: toml

    [tool.veridic]
    trust-policies = ["legacy-prompts"]     # hatches: the reviewed TrustPolicy names
    similarity-threshold = 0.7              # lint: near-duplicate descriptions at or above
    siblings = [["archive_ticket", "close_ticket"]]  # lint: pairs (or groups) meant to be alike
    manifest = "veridic-manifest.json"      # check: the committed snapshot

>>> main(["hatches", "--help"])  # doctest: +ELLIPSIS
usage: veridic hatches [-h] ...
0
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from veridic.config import configure, find_pyproject, tool_section
from veridic.errors import VeridicError
from veridic.hatches import find_hatches
from veridic.lint import DEFAULT_THRESHOLD, LintFinding, Severity, check, lint
from veridic.manifest import ManifestFormatError, build_manifest, diff_manifest, render_manifest
from veridic.registry import Registry
from veridic.view import ToolView

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_USAGE", "main"]

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2


class _UsageError(Exception):
    """The command cannot run as asked; the message says what to change (exit 2)."""


@dataclass(frozen=True, slots=True)
class _Item:
    """One line of a report: a finding (``error``), a ``warning`` or a listed ``info`` item."""

    severity: Severity
    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    subject: str | None = None
    text: str | None = None
    data: tuple[tuple[str, object], ...] = ()

    def where(self) -> str:
        """``file:line``, ``file``, or empty when the item has no place in the source."""
        if self.file is None:
            return ""
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "line": self.line,
        }
        if self.subject is not None:
            out["tool"] = self.subject
        if self.text is not None:
            out["text"] = self.text
        out.update(self.data)
        return out


@dataclass(slots=True)
class _Report:
    """What one command found, rendered as grouped text or JSON."""

    command: str
    target: str
    items: list[_Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)
    strict: bool = False

    def exit_code(self) -> int:
        failing = {"error", "warning"} if self.strict else {"error"}
        return EXIT_FINDINGS if any(i.severity in failing for i in self.items) else EXIT_CLEAN

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "command": self.command,
            "target": self.target,
            "exit_code": self.exit_code(),
            "findings": [i.to_json() for i in self.items if i.severity == "error"],
            "warnings": [i.to_json() for i in self.items if i.severity == "warning"],
            "listed": [i.to_json() for i in self.items if i.severity == "info"],
            "notes": list(self.notes),
        }
        out.update(self.extra)
        return out

    def render(self) -> str:
        counts = {s: sum(1 for i in self.items if i.severity == s) for s in _SECTIONS}
        parts = [f"{n} {_COUNT_WORDS[s]}" for s, n in counts.items() if n or s == "error"]
        lines = [f"veridic {self.command} {self.target}: {', '.join(parts)}"]
        lines.extend(f"  {note}" for note in self.notes)
        for severity, title in _SECTIONS.items():
            chosen = [i for i in self.items if i.severity == severity]
            if not chosen:
                continue
            lines.append("")
            lines.append(f"{title}:")
            kinds = sorted({i.kind for i in chosen})
            for kind in kinds:
                of_kind = [i for i in chosen if i.kind == kind]
                lines.append(f"  {kind} ({len(of_kind)})")
                for item in of_kind:
                    head = "  ".join(
                        part
                        for part in (item.where(), item.subject, item.text)
                        if part is not None and part != ""
                    )
                    if head:
                        lines.append(f"    {head}")
                        lines.append(f"      {item.message}")
                    else:
                        lines.append(f"    {item.message}")
        verdict = {
            EXIT_CLEAN: "clean" if not counts["warning"] else "clean (warnings do not fail)",
            EXIT_FINDINGS: "failed",
        }[self.exit_code()]
        if self.strict and counts["warning"] and not counts["error"]:
            verdict = "failed (--strict: warnings fail)"
        lines.append("")
        lines.append(f"result: {verdict} (exit {self.exit_code()})")
        return "\n".join(lines)


_SECTIONS: Final[dict[Severity, str]] = {
    "error": "findings (fail the check)",
    "warning": "warnings",
    "info": "listed for review (not findings)",
}
_COUNT_WORDS: Final[dict[Severity, str]] = {
    "error": "findings",
    "warning": "warnings",
    "info": "listed for review",
}


@dataclass(frozen=True, slots=True)
class _Config:
    """``[tool.veridic]`` as the commands use it, validated."""

    path: Path | None = None
    trust_policies: frozenset[str] | None = None
    similarity_threshold: float = DEFAULT_THRESHOLD
    siblings: tuple[frozenset[str], ...] = ()
    manifest: Path | None = None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (``veridic`` console script)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse reports usage errors (2) and --help (0) this way
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    command: Callable[[argparse.Namespace, _Config], _Report] = args.run
    try:
        config = _load_config(args.config)
        report = command(args, config)
    except _UsageError as error:
        print(f"veridic {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    report.strict = bool(getattr(args, "strict", False))
    _emit(report, args.format, sys.stdout)
    return report.exit_code()


def _emit(report: _Report, form: str, out: TextIO) -> None:
    if form == "json":
        out.write(json.dumps(report.to_json(), indent=2, sort_keys=True, default=str) + "\n")
    else:
        out.write(report.render() + "\n")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (grouped, for people; default) or json (for machines)",
    )
    common.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        default=None,
        help="pyproject.toml to read [tool.veridic] from (default: nearest above the cwd)",
    )
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="the application's Registry or ToolView, e.g. myapp.tools:registry",
    )
    strict = argparse.ArgumentParser(add_help=False)
    strict.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")

    parser = argparse.ArgumentParser(
        prog="veridic",
        description="CI checks: tool descriptions, risk floors, manifest drift, escape hatches.",
        epilog="exit codes: 0 clean, 1 findings, 2 usage error",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lint = commands.add_parser(
        "lint",
        parents=[common, target, strict],
        help="doc gaps, near-duplicate descriptions, risk floors, unstated irreversibility",
    )
    lint.set_defaults(run=_run_lint)

    manifest = commands.add_parser(
        "manifest",
        parents=[common, target],
        help="write the tool snapshot (-o FILE) or compare it (--check FILE)",
    )
    mode = manifest.add_mutually_exclusive_group(required=True)
    mode.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the snapshot")
    mode.add_argument("--check", metavar="FILE", type=Path, help="exit 1 if FILE has drifted")
    manifest.set_defaults(run=_run_manifest)

    check = commands.add_parser(
        "check",
        parents=[common, target, strict],
        help="boot, build a view, assert coupling, lint and check the manifest",
    )
    check.add_argument(
        "--manifest",
        metavar="FILE",
        type=Path,
        default=None,
        help="snapshot to compare (default: [tool.veridic] manifest)",
    )
    check.set_defaults(run=_run_check)

    hatches = commands.add_parser(
        "hatches",
        parents=[common],
        help="list casts to a brand, brand constructor calls, trust policies, ignores, "
        "and mypy settings that turn veridic's checks off",
    )
    hatches.add_argument("paths", metavar="PATH", nargs="+", type=Path)
    hatches.set_defaults(run=_run_hatches)
    return parser


# --- configuration -------------------------------------------------------------------------


def _load_config(path: Path | None) -> _Config:
    """Read and validate ``[tool.veridic]``; also applies ``trust-policies`` to this process.

    Raises:
        _UsageError: the file is missing or invalid, or a key has the wrong type.
    """
    if path is not None and not path.is_file():
        raise _UsageError(
            f"--config {path}: no such file: pass the pyproject.toml that holds [tool.veridic]"
        )
    found = path if path is not None else find_pyproject(Path.cwd())
    if found is None:
        return _Config()
    try:
        section = tool_section(found)
    except VeridicError as error:
        raise _UsageError(str(error)) from error
    policies = _string_list(section, "trust-policies", found)
    threshold = section.get("similarity-threshold", DEFAULT_THRESHOLD)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 < threshold <= 1
    ):
        raise _UsageError(
            f"[tool.veridic] similarity-threshold in {found} must be a number in (0, 1], "
            f"got {threshold!r}: e.g. similarity-threshold = 0.7"
        )
    siblings = section.get("siblings", [])
    if not isinstance(siblings, list) or not all(
        isinstance(group, list) and len(group) >= 2 and all(isinstance(n, str) for n in group)
        for group in siblings
    ):
        raise _UsageError(
            f"[tool.veridic] siblings in {found} must be a list of lists of two or more tool "
            f'names, got {siblings!r}: e.g. siblings = [["archive_ticket", "close_ticket"]]'
        )
    manifest = section.get("manifest")
    if manifest is not None and not isinstance(manifest, str):
        raise _UsageError(
            f"[tool.veridic] manifest in {found} must be a path string, got {manifest!r}: "
            'e.g. manifest = "veridic-manifest.json"'
        )
    if policies is not None:
        configure(trust_policies=policies)
    return _Config(
        path=found,
        trust_policies=policies,
        similarity_threshold=float(threshold),
        siblings=tuple(frozenset(group) for group in siblings),
        manifest=None if manifest is None else found.parent / manifest,
    )


def _string_list(section: dict[str, object], key: str, path: Path) -> frozenset[str] | None:
    names = section.get(key)
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _UsageError(
            f"[tool.veridic] {key} in {path} must be a list of strings, got {names!r}: "
            f'write it as {key} = ["legacy-prompts"]'
        )
    return frozenset(names)


# --- loading MODULE:ATTR -------------------------------------------------------------------


class _BootFailure(Exception):
    """Importing the target raised a ``VeridicError``: the registry itself is broken (exit 1)."""

    def __init__(self, error: VeridicError, where: tuple[str | None, int | None]) -> None:
        super().__init__(str(error))
        self.error = error
        self.where = where


def _load_target(spec: str) -> Registry | ToolView:
    """Import ``MODULE:ATTR`` (``ATTR`` may be dotted) and check it is a Registry or ToolView.

    The working directory is put on ``sys.path`` first, as ``python -m`` does,
    so ``veridic lint app.tools:registry`` works from a project's root.

    Raises:
        _UsageError: malformed spec, module or attribute not importable, wrong type.
        _BootFailure: the module raised a ``VeridicError`` while registering its tools
            (a duplicate name, a risk below its floor): a finding, not a usage error.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise _UsageError(
            f"target {spec!r} is not MODULE:ATTR: name the module and the object that holds "
            "the tools, e.g. veridic lint myapp.tools:registry"
        )
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    module = _import(module_name)
    obj: object = module
    walked = module_name
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise _UsageError(
                f"{walked} has no attribute {part!r} (module file "
                f"{_display(getattr(module, '__file__', None))}); "
                f"{_candidates(module, (Registry, ToolView))}"
            )
        obj = getattr(obj, part)
        walked = f"{walked}.{part}" if walked != module_name else f"{module_name}:{part}"
    if not isinstance(obj, Registry | ToolView):
        raise _UsageError(
            f"{spec} is a {type(obj).__name__}, not a veridic Registry or ToolView: "
            f"point at the object your tools are registered on; "
            f"{_candidates(module, (Registry, ToolView))}"
        )
    return obj


def _import(module_name: str) -> object:
    try:
        return importlib.import_module(module_name)
    except VeridicError as error:
        raise _BootFailure(error, _user_frame(error)) from error
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        if missing == module_name or module_name.startswith(f"{missing}."):
            raise _UsageError(
                f"cannot import module {module_name!r}: no module named {missing!r} "
                f"(searched from {os.getcwd()} and sys.path): check the spelling, run veridic "
                "from the project root, or install the package into this environment"
            ) from error
        return _import_failed(module_name, error)
    except Exception as error:  # anything the module raised: report it, do not crash
        return _import_failed(module_name, error)


def _import_failed(module_name: str, error: BaseException) -> object:
    file, line = _user_frame(error)
    where = f" at {file}:{line}" if file is not None else ""
    raise _UsageError(
        f"importing module {module_name!r} raised {type(error).__name__}: {error}{where}: "
        "fix the error (run `python -c 'import "
        f"{module_name}'` to see the traceback), or point veridic at a module that imports "
        "cleanly"
    ) from error


def _user_frame(error: BaseException) -> tuple[str | None, int | None]:
    """The innermost traceback frame outside veridic and importlib, where the error began."""
    if isinstance(error, SyntaxError) and error.filename:
        return _display(error.filename), error.lineno
    package = str(Path(__file__).resolve().parent)
    chosen: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename.startswith(package) or frame.filename.startswith("<frozen"):
            continue
        if "importlib" in frame.filename:
            continue
        chosen = (_display(frame.filename), frame.lineno)
    return chosen


def _candidates(module: object, kinds: tuple[type, ...]) -> str:
    names = sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, kinds) and not name.startswith("__")
    )
    if not names:
        return "that module defines no Registry or ToolView at its top level"
    return "Registry/ToolView objects there: " + ", ".join(names)


def _display(filename: str | None) -> str:
    if filename is None:
        return "<unknown>"
    with contextlib.suppress(ValueError):
        return Path(filename).resolve().relative_to(Path.cwd().resolve()).as_posix()
    return filename


def _boot_item(failure: _BootFailure) -> _Item:
    file, line = failure.where
    return _Item(
        "error",
        "boot",
        f"{type(failure.error).__name__}: {failure.error}",
        file=file,
        line=line,
    )


@contextlib.contextmanager
def _booting(report: _Report) -> Iterator[None]:
    """Turn a registry that fails to import or boot into a finding on ``report``."""
    try:
        yield
    except _BootFailure as failure:
        report.items.append(_boot_item(failure))
    except VeridicError as error:  # raised by the registry while resolving or booting
        report.items.append(_boot_item(_BootFailure(error, _user_frame(error))))


# --- commands ------------------------------------------------------------------------------


def _run_hatches(args: argparse.Namespace, config: _Config) -> _Report:
    paths: list[Path] = args.paths
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise _UsageError(
            f"{', '.join(map(str, missing))}: no such file or directory (looked from "
            f"{os.getcwd()}): pass paths of Python files or directories that hold them"
        )
    report = _Report("hatches", " ".join(map(str, paths)))
    for hatch in find_hatches(paths, trust_policies=config.trust_policies):
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


def _run_lint(args: argparse.Namespace, config: _Config) -> _Report:
    report = _Report("lint", args.target)
    with _booting(report):
        target = _load_target(args.target)
        report.items.extend(_lint_items(target, config))
    return report


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
        target = _load_target(args.target)
        if args.output is not None:
            _write_manifest(target, args.output, report)
        else:
            _check_manifest(target, args.check, report)
    return report


def _write_manifest(target: Registry | ToolView, path: Path, report: _Report) -> None:
    text = render_manifest(build_manifest(target))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise _UsageError(
            f"cannot write the manifest to {path}: {error}: choose a writable path with -o"
        ) from error
    report.notes.append(f"wrote {path}")
    report.extra["written"] = str(path)


def _check_manifest(target: Registry | ToolView, path: Path, report: _Report) -> None:
    try:
        committed = path.read_text(encoding="utf-8")
    except OSError as error:
        raise _UsageError(
            f"cannot read the manifest {path}: {error}: write it first with "
            f"veridic manifest {report.target} -o {path}"
        ) from error
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
        target = _load_target(args.target)
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
    return report
