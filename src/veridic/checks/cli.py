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
  (:func:`veridic.config.read_tool_config`); so is a misspelt table
  (``[tool.veridc]``, ``[tools.veridic]``) and a ``--config FILE`` without a
  ``[tool.veridic]`` table.
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

from veridic.checks._cli_config import _Config, _load_config
from veridic.checks._cli_parser import _parser
from veridic.checks._cli_report import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_USAGE,
    _emit,
    _InertLines,
    _Report,
    _say,
    _UsageError,
)
from veridic.checks._cli_target import _anchor, _guarded

# The exit codes are defined beside the verdict that picks them (_cli_report), which every
# command module imports, and are public here, with the command.
__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_USAGE", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (``veridic`` console script)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse reports usage errors (2) and --help (0) this way
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    # These three read no application and no config. Imported here, not at the top, so that
    # the registry commands CI runs most do not load the audit store's modules.
    if args.command == "audit":  # reads a store
        from veridic.checks._cli_audit import _run_audit

        return _run_audit(args, sys.stdout)
    if args.command == "show":  # reads a file or a store
        from veridic.checks._cli_show import _run_show

        return _run_show(args, sys.stdout)
    if args.command == "stubs":  # copies veridic's own data
        from veridic.checks._cli_stubs import _run_stubs

        return _run_stubs(args, sys.stdout, sys.stderr)
    command: Callable[[argparse.Namespace, _Config], _Report] = args.run
    try:
        config = _load_config(args.config)
        report = _quietly(command, args, config)
    except _UsageError as error:
        _say(args.command, error, sys.stderr)
        return EXIT_USAGE
    report.strict = bool(getattr(args, "strict", False))
    _emit(report, args.format, sys.stdout, anchor=_anchor(args))
    return report.exit_code()


def _quietly(
    command: Callable[[argparse.Namespace, _Config], _Report],
    args: argparse.Namespace,
    config: _Config,
) -> _Report:
    """Run a registry command with what the application prints on stderr, made inert.

    Its prints go to stderr, so stdout holds only the report (and ``--format json``
    stays parseable); they and veridic's log lines (a component that did not start,
    quoting its exception) pass through :class:`_InertLines`, so that no line of them
    is a workflow command in a CI log.
    """
    errors = _InertLines(sys.stderr)
    try:
        with contextlib.redirect_stdout(errors), contextlib.redirect_stderr(errors):
            return _guarded(command, args, config)
    finally:
        errors.finish()
