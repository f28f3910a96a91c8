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
``lint``, ``check``, ``hatches`` and ``manifest`` also take ``--format sarif``
(SARIF 2.1.0 for GitHub code scanning, :mod:`veridic.checks.sarif`) and
``--format markdown`` (a pull-request comment or ``$GITHUB_STEP_SUMMARY``,
with the manifest's drift as a table, :mod:`veridic.checks.markdown`); the
exit code is the same whatever the format.

``veridic audit PATH`` reads an audit store instead of a registry: it
answers the store's questions for some requests or a time range
(:mod:`veridic.checks.audit_report`), exits 1 when an always rule approved
an instruction-field write, and adds ``--format markdown``.

``veridic show SOURCE`` prints a prompt for a reviewer: a prompt document
(``prompt.to_document()`` saved as JSON) as the terminal view
(:mod:`veridic.text.terminal_view`), as its provenance map (``--format html
-o OUT.html``) or as the validated document (``--format json``); or an audit
store's model calls (``--call CALL_ID``: one call's recorded system-message
provenance; the store keeps spans and hashes, not text). It exits 0, or 2 on a
usage error (a missing file, a document that is not valid, an unknown call).

``veridic probe MODULE:ATTR`` asks a real model (``--endpoint URL --model
NAME``, an OpenAI-compatible API, or ``--gguf PATH``, a local model) to choose
a tool for requests made for each tool, with the view's real prompt, and
reports the confusion matrix; a pair the model mixes up at or above
``--threshold`` is a finding (``confused-pair``), and so, as a warning, is a
hidden tool the model replaces with another (:mod:`veridic.checks.probe`). A
model that cannot be loaded or asked is a usage error, exit 2.

``veridic stubs DIR`` writes the SDK overlay stubs that make pyright refuse an
untrusted system prompt into a folder for its ``stubPath``
(:mod:`veridic.checks.stubs`), says which SDK versions they describe and warns
when the installed ones differ; the rest of DIR is left alone. It exits 0, or 2
when DIR's ``openai/``, ``anthropic/`` or ``VERSIONS`` hold files an earlier
``veridic stubs`` did not write (nothing is changed then).

The gate cannot be passed by accident:

- Application code that stops the process while veridic runs it (at import,
  in a module ``__getattr__``, in a component's boot check) is a usage error,
  exit 2: ``sys.exit()`` with any code (``0``, ``None``, ``1``, a string), and
  any other ``BaseException`` but ``KeyboardInterrupt`` (which still
  interrupts). The message gives the exit code and the line (and the
  application's line that led there, e.g. an ``argparse`` call at import).
  What the application prints meanwhile goes to stderr; stdout holds only
  the report. Out of reach: code that ends the process itself
  (``os._exit``, a signal) or patches veridic; the gate guards against
  accidents in the code it checks, not against that code's sabotage.
- ``[tool.veridic]`` is validated whole: a wrong type or range, or a key
  veridic does not know (``trust_policies`` for ``trust-policies``), is a
  usage error naming the key, the file, what was found and what to write
  (:func:`veridic.config.read_tool_config`).
- The manifest snapshot holds what the code declares, never whether a
  component started (which depends on the machine's secrets and licences):
  the boot states are printed and in the JSON ``components`` table of
  ``manifest`` and ``check``, not compared, so ``check`` passes on a CI runner
  without production secrets (:mod:`veridic.checks.manifest`).
- ``hatches`` reads mypy's configuration with mypy's own parser when mypy is
  importable (``veridic.checks._mypy_settings``).

Configuration is read from ``[tool.veridic]`` of the nearest
``pyproject.toml`` above the working directory (or ``--config FILE``); these
four keys, and no other:

.. code-block:: toml

    [tool.veridic]
    trust-policies = ["legacy-prompts"]     # hatches: the reviewed TrustPolicy names
    similarity-threshold = 0.7              # lint: near-duplicates at or above (0 < t <= 1)
    siblings = [["archive_ticket", "close_ticket"]]  # lint: pairs (or groups) meant to be alike
    manifest = "veridic-manifest.json"      # check: the committed snapshot

>>> main(["hatches", "--help"])  # doctest: +ELLIPSIS
usage: veridic hatches [-h] ...
0
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from veridic.checks._cli_audit import _run_audit
from veridic.checks._cli_config import _Config, _load_config
from veridic.checks._cli_hatches import _run_hatches
from veridic.checks._cli_mcp import _run_mcp_pin
from veridic.checks._cli_probe import _run_probe
from veridic.checks._cli_registry import _run_check, _run_lint, _run_manifest
from veridic.checks._cli_report import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_USAGE,
    _emit,
    _Report,
    _UsageError,
)
from veridic.checks._cli_show import _SHOW_FORMATS, _run_show
from veridic.checks._cli_stubs import _run_stubs
from veridic.checks._cli_target import _anchor, _guarded
from veridic.checks.audit_report import FORMATS
from veridic.checks.probe import DEFAULT_CONFUSION_THRESHOLD

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_USAGE", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (``veridic`` console script)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse reports usage errors (2) and --help (0) this way
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if args.command == "audit":  # reads a store, not the application: no config, no import
        return _run_audit(args, sys.stdout)
    if args.command == "show":  # reads a file or a store: no config, no import
        return _run_show(args, sys.stdout)
    if args.command == "stubs":  # copies veridic's own data: no config, no import
        return _run_stubs(args, sys.stdout, sys.stderr)
    command: Callable[[argparse.Namespace, _Config], _Report] = args.run
    try:
        config = _load_config(args.config)
        # What the application prints while it is imported or booted goes to stderr,
        # so stdout holds only the report (and --format json stays parseable).
        with contextlib.redirect_stdout(sys.stderr):
            report = _guarded(command, args, config)
    except _UsageError as error:
        print(f"veridic {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    report.strict = bool(getattr(args, "strict", False))
    _emit(report, args.format, sys.stdout, anchor=_anchor(args))
    return report.exit_code()


_CI_FORMATS: Final = ("text", "json", "sarif", "markdown")


def _parser() -> argparse.ArgumentParser:
    ci_format = argparse.ArgumentParser(add_help=False)
    ci_format.add_argument(
        "--format",
        choices=_CI_FORMATS,
        default="text",
        help="text (grouped, for people; default), json (for machines), sarif (SARIF 2.1.0, "
        "for GitHub code scanning) or markdown (a pull-request comment, $GITHUB_STEP_SUMMARY)",
    )
    json_format = argparse.ArgumentParser(add_help=False)
    json_format.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (grouped, for people; default) or json (for machines)",
    )
    common = argparse.ArgumentParser(add_help=False)
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
        parents=[common, ci_format, target, strict],
        help="doc gaps, near-duplicate descriptions, risk floors, unstated irreversibility",
    )
    lint.set_defaults(run=_run_lint)

    manifest = commands.add_parser(
        "manifest",
        parents=[common, ci_format, target],
        help="write the tool snapshot (-o FILE) or compare it (--check FILE)",
    )
    mode = manifest.add_mutually_exclusive_group(required=True)
    mode.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the snapshot")
    mode.add_argument("--check", metavar="FILE", type=Path, help="exit 1 if FILE has drifted")
    manifest.set_defaults(run=_run_manifest)

    check = commands.add_parser(
        "check",
        parents=[common, ci_format, target, strict],
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

    probe_command = commands.add_parser(
        "probe",
        parents=[common, json_format, target, strict],
        help="ask a real model to choose a tool for requests made for each tool, and report "
        "the pairs it mixes up",
        description="For each tool of the view, ask a model to choose a tool for a few requests "
        "made for it (generated from its description and schema, or --requests FILE), with "
        "the view's capability section in the system message and its tool specs as the tool "
        "list. Reports the confusion matrix, the pairs the model mixes up (a finding at or "
        "above --threshold) and, for each tool the view's policy hides (or --hide), what the "
        "model calls instead (a warning at or above --threshold). Greedy, and cached: a rerun "
        "asks nothing twice.",
        epilog="exit codes: 0 clean, 1 findings (a confused pair; with --strict also a "
        "substitution), 2 usage error (bad arguments or requests file, a model that cannot "
        "be loaded or asked)",
    )
    model = probe_command.add_argument_group("model (one of)")
    model.add_argument("--endpoint", metavar="URL", help="an OpenAI-compatible base URL")
    model.add_argument("--model", metavar="NAME", help="the model name to send to --endpoint")
    model.add_argument(
        "--api-key-env",
        metavar="VAR",
        default="VERIDIC_PROBE_API_KEY",
        help="environment variable holding the endpoint's key (default %(default)s)",
    )
    model.add_argument(
        "--gguf",
        metavar="PATH",
        type=Path,
        help="a local GGUF chat model, run with llama-cpp-python (`python -m "
        "veridic.evaluation --install-only` installs the pinned one and prints its path)",
    )
    model.add_argument("--threads", type=int, default=2, help="--gguf CPU threads (default 2)")
    probe_command.add_argument(
        "--requests",
        metavar="FILE",
        type=Path,
        help='requests per tool, JSON {"tool": ["request", ...]} or TOML tool = [...] '
        "(tools left out get generated requests)",
    )
    probe_command.add_argument(
        "--per-tool",
        metavar="N",
        type=int,
        help="requests per tool (generated: N, default 3, at most 5; from --requests: the "
        "first N, default all)",
    )
    probe_command.add_argument(
        "--hide",
        metavar="TOOL",
        action="append",
        default=[],
        help="hide TOOL as a deny list would, ask for it anyway and report what the model "
        "calls instead (repeat for more; a Registry target only)",
    )
    probe_command.add_argument(
        "--threshold",
        metavar="T",
        type=float,
        default=DEFAULT_CONFUSION_THRESHOLD,
        help="confusion rate at which a pair fails, 0 < T <= 1 (default %(default)s)",
    )
    probe_command.add_argument(
        "--cache",
        metavar="DIR",
        type=Path,
        help="answer cache (default: probe/ under $VERIDIC_EVAL_CACHE or ~/.cache/veridic-eval)",
    )
    probe_command.add_argument(
        "--no-cache", action="store_true", help="ask the model every time, store nothing"
    )
    probe_command.set_defaults(run=_run_probe)

    hatches = commands.add_parser(
        "hatches",
        parents=[common, ci_format],
        help="list casts to a brand, brand constructor calls, trust policies, ignores, "
        "and mypy settings that turn veridic's checks off",
    )
    hatches.add_argument("paths", metavar="PATH", nargs="+", type=Path)
    hatches.set_defaults(run=_run_hatches)

    mcp = commands.add_parser("mcp", help="MCP servers: record and check their tools' pins")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", required=True, metavar="MCP_COMMAND")
    pin = mcp_commands.add_parser(
        "pin",
        parents=[common, json_format],
        help="record what a server's tools show (-o FILE) or compare it (--check FILE)",
    )
    pin.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="the server, as declared in code: e.g. myapp.mcp:GITHUB, "
        'where GITHUB = veridic.integrations.mcp.stdio("github", ...)',
    )
    pin_mode = pin.add_mutually_exclusive_group(required=True)
    pin_mode.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the pins")
    pin_mode.add_argument("--check", metavar="FILE", type=Path, help="exit 1 if FILE has drifted")
    pin.set_defaults(run=_run_mcp_pin)

    audit = commands.add_parser(
        "audit",
        help="answer the audit store's questions for requests or a time range",
        description="How each write was approved, instruction-field writes under an always "
        "rule (exit 1 if any), what the model called after a stopped call, follow-ups, and "
        "each request's model and tool calls. Times are seconds since the epoch or ISO 8601 "
        "(without a zone: UTC); --since is inclusive, --until exclusive.",
        epilog="exit codes: 0 clean, 1 an always rule approved an instruction-field write, "
        "2 usage error",
    )
    audit.add_argument(
        "database",
        metavar="STORE",
        help="the SQLite audit database (a path), or a Postgres one (a postgresql:// URL "
        "or a libpq conninfo with dbname=; opened read-only)",
    )
    audit.add_argument(
        "--request",
        metavar="ID",
        action="append",
        default=[],
        help="only this request (repeat for more)",
    )
    audit.add_argument("--since", metavar="T", help="records at or after T")
    audit.add_argument("--until", metavar="T", help="records before T")
    audit.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (for people; default), json (for machines) or markdown (a pull-request "
        "comment, $GITHUB_STEP_SUMMARY)",
    )

    show = commands.add_parser(
        "show",
        help="show a saved prompt's spans or provenance map, or an audit store's model calls",
        description="SOURCE is a prompt document (the JSON of prompt.to_document()) or an "
        "audit store. A document prints as one line per span, coloured by kind on a terminal "
        "(--format html writes its provenance map, --format json the validated document). "
        "A store lists its model calls; --call CALL_ID shows one call's recorded "
        "system-message provenance (the store keeps spans and hashes, not the prompt's text).",
        epilog="exit codes: 0 shown, 2 usage error",
    )
    show.add_argument(
        "source",
        metavar="SOURCE",
        help="a prompt document (FILE.json), or an audit store: the SQLite database (a path) "
        "or a Postgres one (a postgresql:// URL or a libpq conninfo with dbname=), opened "
        "read-only",
    )
    show.add_argument(
        "--call", metavar="CALL_ID", help="the model call of the store to show (see the list)"
    )
    show.add_argument(
        "--format",
        choices=_SHOW_FORMATS,
        default="text",
        help="text (the terminal view; default), html (the provenance map page; a document "
        "only) or json (the validated document, or the store's records)",
    )
    show.add_argument(
        "-o", "--output", metavar="FILE", type=Path, help="write to FILE instead of stdout"
    )
    show.add_argument(
        "--color",
        "--colour",
        dest="color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text by kind: auto (a terminal, and NO_COLOR unset; default), "
        "always or never",
    )
    show.add_argument(
        "--separators",
        action="store_true",
        help="list the composer's separators between system parts too (folded by default)",
    )

    stubs = commands.add_parser(
        "stubs",
        help="write the openai/anthropic stubs that make pyright refuse an untrusted "
        "system prompt, for its stubPath",
        description="Write veridic's overlay stubs of the openai and anthropic SDKs into DIR "
        "(created when missing). With stubPath pointing at DIR, pyright and basedpyright "
        "refuse an UntrustedText passed as a system prompt or instructions. The stubs describe "
        "the SDK versions they were generated for (DIR/VERSIONS); a warning says when the "
        "installed ones differ. Other files in DIR (stubs of other packages) are left alone; "
        "its openai/, anthropic/ and VERSIONS must be new or an earlier veridic stubs' "
        "output, which is replaced.",
        epilog="exit codes: 0 written, 2 usage error (DIR's openai/, anthropic/ or VERSIONS "
        "hold other files, or DIR is not a writable folder)",
    )
    stubs.add_argument(
        "directory",
        metavar="DIR",
        type=Path,
        help="the stub folder, e.g. typings (pyright's default stubPath)",
    )
    return parser
