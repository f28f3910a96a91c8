"""The ``veridic`` command line's arguments: a subcommand each, with its options and help.

Most of the command's text is here, and it changes with every option while the
dispatch in ``cli.main`` does not. A report command's parser names the function
that runs it (its ``run`` default), which is how ``main`` finds it without a
table of its own.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from veridic.checks.probe import DEFAULT_CONFUSION_THRESHOLD

if TYPE_CHECKING:
    from veridic.checks._cli_config import _Config
    from veridic.checks._cli_report import _Report

_CI_FORMATS: Final = ("text", "json", "sarif", "markdown")
_AUDIT_FORMATS: Final = ("text", "json", "markdown")
"""What ``veridic audit`` writes: ``AuditReport.text()``, ``.to_json()``, ``.markdown()``."""
_SHOW_FORMATS: Final = ("text", "html", "json")
_EXIT_CODES_FINDINGS: Final = (
    "exit codes: 0 clean (warnings do not fail), 1 findings (with --strict, warnings too; a "
    "registry that does not boot is a finding), 2 usage error (bad arguments or "
    "configuration, a target that cannot be imported or is not a Registry or ToolView)"
)

_Runner = Callable[[argparse.Namespace, "_Config"], "_Report"]


def _lazy(module: str, name: str) -> _Runner:
    """The function that runs a command, imported when that command runs.

    ``veridic lint`` runs in every CI job: it should not pay for importing the
    MCP client, the probe's model loaders or the hatch scanner (~0.1 s a process).
    """

    def run(args: argparse.Namespace, config: _Config) -> _Report:
        runner = cast(_Runner, getattr(importlib.import_module(module), name))
        return runner(args, config)

    return run


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
        description="Import MODULE:ATTR (a Registry or ToolView), boot it and report what the "
        "model would be misled by: tools and parameters without a real description, "
        "near-duplicate descriptions, risks below their floor, irreversibility a description "
        "does not state.",
        epilog=_EXIT_CODES_FINDINGS,
    )
    lint.set_defaults(run=_lazy("veridic.checks._cli_registry", "_run_lint"))

    manifest = commands.add_parser(
        "manifest",
        parents=[common, ci_format, target],
        help="write the tool snapshot (-o FILE) or compare it (--check FILE)",
        description="Write what MODULE:ATTR declares of each tool (description, kind, risk, "
        "schema hash, roles, component) as a JSON snapshot to commit (-o FILE), or compare "
        "the committed one with the registry (--check FILE) and report each change.",
        epilog="exit codes: 0 written or no drift, 1 drift (or a registry that does not "
        "boot), 2 usage error (bad arguments, a target that cannot be imported, a FILE that "
        "cannot be read or written or is not a manifest)",
    )
    mode = manifest.add_mutually_exclusive_group(required=True)
    mode.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the snapshot")
    mode.add_argument("--check", metavar="FILE", type=Path, help="exit 1 if FILE has drifted")
    manifest.set_defaults(run=_lazy("veridic.checks._cli_registry", "_run_manifest"))

    check = commands.add_parser(
        "check",
        parents=[common, ci_format, target, strict],
        help="boot, build a view, assert coupling, lint and check the manifest",
        description="Boot MODULE:ATTR, build a view and assert that its capability section, "
        "tool specs and dispatch table name the same tools, run lint's checks, and compare "
        "the committed manifest (--manifest FILE or [tool.veridic] manifest) when there is "
        "one.",
        epilog=_EXIT_CODES_FINDINGS,
    )
    check.add_argument(
        "--manifest",
        metavar="FILE",
        type=Path,
        default=None,
        help="snapshot to compare (default: [tool.veridic] manifest)",
    )
    check.set_defaults(run=_lazy("veridic.checks._cli_registry", "_run_check"))

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
    probe_command.set_defaults(run=_lazy("veridic.checks._cli_probe", "_run_probe"))

    hatches = commands.add_parser(
        "hatches",
        parents=[common, ci_format],
        help="list casts to a brand, brand constructor calls, trust policies, ignores, "
        "and mypy settings that turn veridic's checks off",
        description="Scan the Python files under each PATH for ways around the provenance "
        "types: a cast to a brand, a brand's constructor called outside veridic and a "
        "TrustPolicy not in [tool.veridic] trust-policies are findings; ignore comments, "
        "vouches and mypy settings that turn veridic's checks off are listed for review.",
        epilog="exit codes: 0 clean (items listed for review never fail), 1 findings, "
        "2 usage error (bad arguments or configuration, a PATH that is not there)",
    )
    hatches.add_argument("paths", metavar="PATH", nargs="+", type=Path)
    hatches.set_defaults(run=_lazy("veridic.checks._cli_hatches", "_run_hatches"))

    mcp = commands.add_parser("mcp", help="MCP servers: record and check their tools' pins")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", required=True, metavar="MCP_COMMAND")
    pin = mcp_commands.add_parser(
        "pin",
        parents=[common, json_format],
        help="record what a server's tools show (-o FILE) or compare it (--check FILE)",
        description="Start the MCP server declared at MODULE:ATTR, list its tools and write "
        "their pins (-o FILE), or compare the recorded pins with what it shows now "
        "(--check FILE).",
        epilog="exit codes: 0 written or no drift, 1 drift, 2 usage error (bad arguments, a "
        "server that cannot be started, a FILE that cannot be read or written)",
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
    pin.set_defaults(run=_lazy("veridic.checks._cli_mcp", "_run_mcp_pin"))

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
        help="the SQLite audit database (a path), or a Postgres one (a postgresql:// or "
        "postgres:// URL, or a libpq connection string whose every keyword is libpq's, "
        "such as 'host=db dbname=app'; opened read-only)",
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
        choices=_AUDIT_FORMATS,
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
        "or a Postgres one (a postgresql:// or postgres:// URL, or a libpq connection "
        "string whose every keyword is libpq's, such as 'host=db dbname=app'), opened "
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
