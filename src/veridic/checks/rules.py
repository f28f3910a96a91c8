"""What each finding code of the ``veridic`` command means and how to fix it: the CI formats' rules.

``--format sarif`` lists one rule per code found (its ``shortDescription``,
``fullDescription`` and ``help``), and ``--format markdown`` shows the fix in
its table, so a reviewer reading a pull request sees what to do without the
docs. The codes are those of :class:`veridic.checks.lint.LintFinding`
(:class:`veridic.GapCode` values among them), the ``kind`` of
:class:`veridic.checks.hatches.Hatch`, and the manifest's ``drift``; a code
not listed here still gets a rule, with a generic text.

:class:`ReportItem` is the shape both formats read: the command's report
items satisfy it, and so may a caller's own.

>>> rule_for("near-duplicate").summary
'Two tools described in nearly the same words'
>>> rule_for("something-new").help.startswith("Read the finding's message")
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol

__all__ = ["LEVELS", "RULES", "ReportItem", "Rule", "rule_for"]

Level = Literal["error", "warning", "note"]

LEVELS: Final[Mapping[str, Level]] = {"error": "error", "warning": "warning", "info": "note"}
"""A report item's severity as a SARIF level: findings fail, warnings warn, listed items note."""


class ReportItem(Protocol):
    """One line of a ``veridic`` report, as the SARIF and Markdown formats read it.

    ``severity`` is ``error`` (a finding: exit 1), ``warning`` (fails only
    with ``--strict``) or ``info`` (listed for review). ``kind`` is the code.
    ``file`` is relative to the working directory where the command ran (or
    absolute outside it) and ``line`` 1-based, each ``None`` when unknown;
    ``subject`` is the tool, ``text`` the source text (hatches), ``data`` the
    code's own fields (for ``drift``: ``subject``, ``change``, ``field``,
    ``before``, ``after``).
    """

    @property
    def severity(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def file(self) -> str | None: ...
    @property
    def line(self) -> int | None: ...
    @property
    def subject(self) -> str | None: ...
    @property
    def text(self) -> str | None: ...
    @property
    def data(self) -> tuple[tuple[str, object], ...]: ...


@dataclass(frozen=True, slots=True)
class Rule:
    """A finding code: ``summary`` (a line), ``description`` (what is wrong), ``help`` (the fix)."""

    id: str
    summary: str
    description: str
    help: str
    level: Level = "error"


def _rule(id: str, summary: str, description: str, help: str, level: Level = "error") -> Rule:
    return Rule(id, summary, description, help, level)


_NO_VIEW: Final = (
    "A tool without a real description is in no view: the model never sees it, and the "
    "application silently has one tool fewer."
)
_CATALOGUE: Final = (
    # --- doc gaps (veridic.GapCode) ---------------------------------------------------------
    _rule(
        "missing-description",
        "A tool without a description",
        f"The tool has no docstring, a blank one, or no prose before its sections. {_NO_VIEW}",
        "Write a docstring that says what the tool does, when to use it and what it changes, "
        "with an Args: entry per parameter.",
    ),
    _rule(
        "fstring-docstring",
        "An f-string where the docstring should be",
        f"Python does not keep an f-string as __doc__, so the tool has no description. {_NO_VIEW}",
        "Make the docstring a plain string literal; put computed text in the registration "
        "(description=...) instead.",
    ),
    _rule(
        "placeholder-description",
        "A placeholder description (TODO, TBD, FIXME)",
        f"A placeholder is not a description. {_NO_VIEW}",
        "Replace the placeholder with what the tool does, when to use it and what it changes.",
    ),
    _rule(
        "description-is-name",
        "A description that only repeats the tool's name",
        f"The model learns nothing from its own name read back. {_NO_VIEW}",
        "Describe what the tool does, when to use it rather than its neighbours, and what it "
        "changes.",
    ),
    _rule(
        "undocumented-parameter",
        "A parameter without a description",
        "The model must guess what to send for a parameter nobody described.",
        "Add an Args: entry for the parameter in the docstring, or annotate it with "
        "Annotated[..., Field(description=...)].",
    ),
    _rule(
        "unknown-parameter",
        "A description names a parameter the tool lacks",
        "A backticked name or an Args: entry that is not a parameter is usually a stale "
        "rename: the model is told to send an argument that does not exist.",
        "Rename it to the parameter's current name, or quote code that is not a parameter in "
        "double backticks.",
    ),
    # --- lint ----------------------------------------------------------------------------
    _rule(
        "near-duplicate",
        "Two tools described in nearly the same words",
        "The model must choose between two tools whose descriptions (with their names and "
        "parameters) are nearly identical, often apart from a word or two that carry the whole "
        "difference, so it may call one for the other.",
        "Say in each description when to use it rather than the other (the message names the "
        "words that tell them apart), or acknowledge the pair in [tool.veridic] siblings.",
    ),
    _rule(
        "near-duplicate-acknowledged",
        "Near-identical descriptions, acknowledged as siblings",
        "The pair is listed in [tool.veridic] siblings, so it is reported, not failed.",
        "Nothing to do while they are meant to be alike; remove the siblings entry when they "
        "are not.",
        "note",
    ),
    _rule(
        "risk-floor",
        "A tool declared below its risk floor",
        "An irreversible tool, or a write of instruction fields, declared below high risk "
        "could be approved by an always rule; the registry refuses to boot.",
        "Declare the tool risk=Risk.HIGH (or correct irreversible=/the instruction fields it "
        "writes) as the message says.",
    ),
    _rule(
        "irreversibility-unstated",
        "A high-risk tool that does not say what cannot be undone",
        "The model cannot warn the user before asking for approval when the description does "
        "not say what is permanent.",
        'Add a sentence to the description such as "This is a hard delete and cannot be undone."',
        "warning",
    ),
    _rule(
        "irreversibility-undeclared",
        "A write that says it cannot be undone, declared reversible",
        "Its description tells the model and the reviewer that the write is permanent, but "
        "the declaration decides the risk floor: declared reversible, it may sit at mid "
        "risk, where an always rule approves it.",
        "Declare the tool irreversible=True (its floor is then high), or, if it can be "
        "undone, say how in its description.",
        "warning",
    ),
    _rule(
        "unencodable-text",
        "A tool's text holds a character UTF-8 cannot encode",
        "A lone surrogate (an escape such as \\ud800 typed in a docstring) is a character "
        "Python holds but no UTF-8 text can: the manifest cannot be written and no "
        "provider's request can send the tool.",
        "Remove the character from the description or parameter text the message names, or "
        "write the character it was meant to be.",
    ),
    _rule(
        "unknown-sibling",
        "[tool.veridic] siblings names no registered tool",
        "A stale siblings entry would silently acknowledge a future tool of that name.",
        "Remove the name from [tool.veridic] siblings or correct its spelling.",
        "warning",
    ),
    _rule(
        "boot",
        "The registry does not import or boot",
        "Registering or booting the tools raised an error (a duplicate name, a risk below its "
        "floor, a signature that cannot be resolved), so the application would not start.",
        "Fix the error the message names at the line given, then run the command again.",
    ),
    _rule(
        "coupling",
        "The prompt's tool section and the dispatch table disagree",
        "The capability section, the provider tool specs and the dispatch table must name the "
        "same tools, or the prompt describes tools the model cannot call (or hides some).",
        "Build the prompt's tool section with view.capability_section() and the specs with "
        "view.tool_specs() of the view that dispatches.",
    ),
    _rule(
        "component-down",
        "A component did not start on this machine",
        "Its tools are in no projection here and the prompt says they are unavailable; the "
        "boot state is reported, never part of the manifest.",
        "Nothing to fix when this machine lacks the component's secrets or licence; otherwise "
        "fix the boot check's cause named in the message.",
        "note",
    ),
    # --- manifest ------------------------------------------------------------------------
    _rule(
        "drift",
        "The committed manifest differs from the registry",
        "A reworded description, a changed risk or schema, an added or removed tool: a "
        "behaviour change that looks like nothing in a code diff.",
        "Review the change; if it is intended, refresh the snapshot with veridic manifest "
        "MODULE:ATTR -o FILE and commit it with the change.",
    ),
    # --- hatches -------------------------------------------------------------------------
    _rule(
        "cast-to-brand",
        "typing.cast to a provenance brand",
        "The cast makes mypy believe the text is trusted while the composer still refuses it: "
        "the static and run-time checks disagree.",
        "Mint trusted text with instruction(), read it from an InstructionField, or vouch "
        'for it with TrustPolicy("name").vouch(text, reason=...).',
    ),
    _rule(
        "brand-call",
        "A brand's constructor called or passed on outside veridic",
        "TrustedInstruction(x) is the NewType's identity: it forges the static brand and mints "
        "no provenance. Passed on as a value (map(TrustedInstruction, texts), a TypeAdapter), "
        "each call made through it does the same where mypy sees no call to refuse.",
        "Mint trusted text with instruction(), or vouch for it with a listed TrustPolicy.",
    ),
    _rule(
        "trust-policy",
        "A TrustPolicy, listed for review (a finding when its name is not fixed or allowed)",
        "A trust policy mints trusted text from text that did not come from code; its name "
        "must be fixed in the module and listed in [tool.veridic] trust-policies.",
        "Use a literal policy name and list it in [tool.veridic] trust-policies after review.",
        "note",
    ),
    _rule(
        "vouch",
        "A vouch by a trust policy, listed with its reason",
        "Each vouch turns untrusted text into instructions; the listing keeps them reviewable.",
        "Review the reason; nothing to change when it holds.",
        "note",
    ),
    _rule(
        "type-ignore",
        "A type: ignore that silences veridic's checks",
        "A bare # type: ignore, or one naming a veridic-* code, switches a provenance check off "
        "for its line.",
        "Remove the comment and fix the provenance error, or narrow it to the one code after "
        "review.",
        "note",
    ),
    _rule(
        "unparsable",
        "A Python file veridic cannot read",
        "A file that is not valid Python (or not readable, nested deeper than Python's parser "
        "goes, or no regular file: a FIFO or a link to a device) is not scanned for escape "
        "hatches.",
        "Fix the syntax or encoding error at the line given; make a link to a device a real "
        "file, or leave it out of the paths.",
    ),
    _rule(
        "stub-shadows",
        "A module with a .pyi stub beside it, which mypy checks instead",
        "mypy reads the stub and checks none of the module's code, veridic's provenance checks "
        "included, unless the module is named on its command line.",
        "Delete the stub, or keep it after review and have mypy check the module by name.",
        "note",
    ),
    _rule(
        "inline-disable-code",
        "A # mypy: comment that disables a veridic check",
        "disable-error-code naming a veridic-* code turns that check off for the whole file.",
        "Remove the comment, or keep it after review for a legacy module.",
        "note",
    ),
    _rule(
        "inline-ignore-errors",
        "A # mypy: ignore-errors comment",
        "ignore-errors turns every check off for the file, veridic's included.",
        "Remove the comment, or keep it after review for a legacy module.",
        "note",
    ),
    _rule(
        "config-disable-code",
        "mypy configuration that disables a veridic check",
        "disable_error_code with a veridic-* code switches that check off, away from the code "
        "it guards.",
        "Remove the code from disable_error_code, or keep it after review and scope it to the "
        "modules that need it.",
        "note",
    ),
    _rule(
        "config-ignore-errors",
        "mypy configuration with ignore_errors = True",
        "ignore_errors turns every check off for the modules the section covers.",
        "Remove the setting, or keep it after review for a legacy package.",
        "note",
    ),
    _rule(
        "plugin-missing",
        "mypy runs without the veridic.mypy plugin",
        "Without the plugin no provenance check runs in mypy at all, and nobody decided that.",
        'Add plugins = ["veridic.mypy"] to the [mypy] section (or [tool.mypy]).',
    ),
    _rule(
        "config-unparsable",
        "A mypy configuration file mypy cannot parse",
        "mypy skips a file it cannot parse and reads the next one, so the intended settings "
        "(the plugin among them) may not apply.",
        "Fix the syntax error the message names (or make the file a regular file: a link to "
        "a device or a FIFO is never read to its end).",
    ),
)

RULES: Final[Mapping[str, Rule]] = {rule.id: rule for rule in _CATALOGUE}
"""Every code the ``veridic`` command reports, by id."""


def rule_for(code: str) -> Rule:
    """The rule of ``code``; for a code not listed, a generic one that points to the message."""
    known = RULES.get(code)
    if known is not None:
        return known
    return Rule(
        code,
        f"veridic finding {code}",
        f"A finding of kind {code} reported by the veridic command.",
        "Read the finding's message: it says what is wrong and what to do instead.",
    )
