"""``veridic lint``: what the model will misread about the tools, found before it does.

Five kinds of finding, each naming the tool and the file and line where it is
defined:

- **doc gaps** (:func:`veridic.find_doc_gaps`): a tool without a real
  description is invisible to the model; an undocumented parameter is a
  guess; a backticked name that is not a parameter is a stale rename;
- **near-duplicate descriptions** (sibling tools): two tools the model must
  choose between, described in nearly the same words, often apart from a word
  or two that carry the whole difference. Each pair gets a similarity score
  (a weighted Jaccard of description words, name words and parameter names,
  halved when the words that differ are opposites such as add/remove; see
  ``veridic.tools._similarity.similar_pairs``); pairs at or above the
  threshold fail unless they are acknowledged as intended siblings, and the
  finding names the words that tell the two apart;
- **risk floors**: an irreversible tool or a write of instruction fields
  declared below high risk (the registry refuses to boot);
- **unstated irreversibility** (a warning): a high-risk tool whose description
  does not tell the model what cannot be undone, so it cannot warn the user
  before asking for approval;
- **text UTF-8 cannot encode** (``unencodable-text``): a lone surrogate in the
  description or the input schema, which no manifest or request can carry.

:func:`check_projections` adds what ``veridic check`` asserts on top: the
registry boots, and a view's capability section, tool specs and dispatch table
name the same tools.

>>> from veridic import Registry
>>> registry = Registry()
>>> @registry.tool(kind="write", irreversible=True)
... def purge_user(user_id: int) -> None:
...     '''Remove a user and everything they own.
...
...     Args:
...         user_id: The user to remove.
...     '''
>>> [(f.code, f.severity, f.tool) for f in lint(registry)]
[('irreversibility-unstated', 'warning', 'purge_user')]
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from veridic._sample import clip
from veridic._words import a_type
from veridic.checks.doc_gaps import find_doc_gaps
from veridic.errors import RiskFloorError, ToolCouplingError, VeridicError
from veridic.text.provenance import _display_path
from veridic.text.terminal_view import visible
from veridic.tools._descriptions import description_problem
from veridic.tools._similarity import SimilarPair, ToolText, similar_pairs
from veridic.tools.registry import Registry
from veridic.tools.risk import Risk
from veridic.tools.tool import SCHEMA_TOOL, Tool, floor_violations
from veridic.tools.view import ComponentState, ToolView

__all__ = [
    "DEFAULT_THRESHOLD",
    "LintFinding",
    "Severity",
    "check",
    "check_projections",
    "lint",
    "tool_location",
    "tools_of",
]

Severity = Literal["error", "warning", "info"]

DEFAULT_THRESHOLD: Final = 0.55
"""Near-duplicate threshold when ``[tool.veridic] similarity-threshold`` is not set.

Chosen by ``benchmarks/siblings.py`` on 79 labelled pairs of public tool
catalogs (36 siblings): the best F1 among thresholds whose precision is at
least 0.8, since a finding fails CI. At 0.55, 85% of the flagged pairs are
siblings and 47% of the siblings are flagged; at 0.7 (the default before),
100% and 31%."""

_UNDOING: Final = re.compile(
    r"\b(irreversibl\w*|permanent\w*"
    r"|(cannot|can\s+not|can[\u2019']t)\s+be\s+"
    r"(undone|reversed|reverted|recovered|restored|taken\s+back)"
    r"|no\s+undo|not\s+reversible"
    r"|hard[\s-]delete\w*|unrecoverabl\w*|forever|for\s+good|final)\b",
    re.IGNORECASE,
)
_SAYS_PERMANENT: Final = re.compile(
    r"\b(irreversibl\w*|permanent(ly)?"
    r"|(cannot|can\s+not|can[\u2019']t)\s+be\s+(undone|reversed|reverted|recovered|restored)"
    r"|no\s+undo|hard[\s-]delete\w*|unrecoverabl\w*)\b",
    re.IGNORECASE,
)
"""What a description says of a write that cannot be undone, in words that leave no doubt
(``final`` or ``forever`` say other things too: "the final report")."""
_DENIED_BEFORE: Final = re.compile(
    r"\b(not|never|no|nothing|n[\u2019']t)\b[^.;:]{0,30}$", re.IGNORECASE
)
"""A negation just before those words, in the same clause: "nothing is deleted permanently"."""
_INSTRUCTION_EFFECT: Final = re.compile(
    r"\b(system\s+prompts?|instructions?|verbatim)\b", re.IGNORECASE
)
_FLOOR_BOOT: Final = "the registry does not boot (risk floors)"
_SECTION_LINE: Final = re.compile(r"^- ([A-Za-z0-9_-]{1,64}) \((?:query|write), ", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One thing to fix (``error``), to consider (``warning``) or that was acknowledged (``info``).

    ``code`` is stable for filtering: a :class:`veridic.GapCode` value for doc
    gaps, ``near-duplicate``, ``near-duplicate-acknowledged``, ``risk-floor``,
    ``irreversibility-unstated``, ``irreversibility-undeclared``, ``unknown-sibling``,
    ``unencodable-text``, or for
    :func:`check_projections` ``boot`` and ``coupling``. ``file`` and ``line``
    are where the tool is defined (``None`` when Python does not know, e.g. an
    external tool with a built-in handler). For a near-duplicate, ``other`` is
    the second tool and ``score`` the pair's similarity.
    """

    code: str
    severity: Severity
    tool: str | None
    file: str | None
    line: int | None
    message: str
    score: float | None = None
    other: str | None = None


def lint(
    source: Registry | ToolView,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    siblings: Iterable[Iterable[str]] = (),
) -> tuple[LintFinding, ...]:
    """Every lint finding of a registry (all its tools) or a view (the tools it exposes).

    ``threshold`` (0 < t <= 1) is the similarity at which two descriptions are
    near-duplicates; ``siblings`` are groups of tool names meant to be alike:
    a pair inside one group is listed as acknowledged instead of failing.
    Does not boot the registry: no component boot check runs.

    Raises:
        VeridicError: ``source`` is neither a Registry nor a ToolView, or a tool's
            signature cannot be resolved (the message names the tool).
    """
    if not 0 < threshold <= 1:
        raise VeridicError(
            f"lint() got threshold={threshold!r}: the similarity threshold is a number in "
            f"(0, 1], e.g. {DEFAULT_THRESHOLD}; set it with [tool.veridic] similarity-threshold"
        )
    tools = tools_of(source)
    by_name = {tool.name: tool for tool in tools}
    findings: list[LintFinding] = []
    for gap in find_doc_gaps(source):
        findings.append(_finding(by_name.get(gap.tool), gap.tool, str(gap.code), gap.message))
    for tool in tools:
        findings.extend(_floor_findings(tool))
        findings.extend(_irreversibility_findings(tool))
        findings.extend(_undeclared_irreversibility(tool))
        findings.extend(_unencodable_text(tool))
    exposed = tools if isinstance(source, Registry) else source.tools()
    findings.extend(_near_duplicates(exposed, threshold, siblings, by_name))
    return tuple(findings)


def check(
    source: Registry | ToolView,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    siblings: Iterable[Iterable[str]] = (),
) -> tuple[LintFinding, ...]:
    """:func:`check_projections` then :func:`lint`: what ``veridic check`` runs before the manifest.

    A ``RiskFloorError`` at boot is reported once per tool by the lint (with
    its file and line), so the boot error that lists them all is dropped then.
    """
    projections = check_projections(source)
    linted = lint(source, threshold=threshold, siblings=siblings)
    if any(f.code == "risk-floor" for f in linted):
        projections = tuple(f for f in projections if not f.message.startswith(_FLOOR_BOOT))
    return (*projections, *linted)


def tools_of(source: Registry | ToolView) -> tuple[Tool, ...]:
    """The registered tools the lint and the manifest look at (never the built-in schema tool).

    A registry gives all its tools; a view gives those it exposes and those it
    withholds (filtered, not booted, undocumented), since all are registered.
    """
    if isinstance(source, Registry):
        return source.tools()
    if isinstance(source, ToolView):
        exposed = [tool for tool in source.tools() if tool.name != SCHEMA_TOOL]
        withheld = [status.tool for status in source.withheld() if status.tool is not None]
        return (*exposed, *withheld)
    raise VeridicError(
        f"veridic lint got {a_type(source)}: pass the application's Registry "
        "(every tool) or a ToolView (the tools of one request)"
    )


def tool_location(tool: Tool) -> tuple[str | None, int | None]:
    """The file and line where ``tool`` is defined: its handler's first line (its decorator).

    For an external tool this is where its handler is defined; the registration
    site is not recorded by the registry.
    """
    handler: object = inspect.unwrap(tool.handler)
    if isinstance(handler, functools.partial):
        handler = handler.func
    code = getattr(handler, "__code__", None)
    if code is None:  # an instance with __call__, a bound method
        code = getattr(getattr(handler, "__func__", None), "__code__", None)
    if code is None:
        code = getattr(vars(type(handler)).get("__call__"), "__code__", None)
    if code is None:
        return None, None
    return _display_path(code.co_filename), code.co_firstlineno


def check_projections(source: Registry | ToolView) -> tuple[LintFinding, ...]:
    """Boot a registry and check one view's three projections name the same tools.

    For a registry: :meth:`~veridic.Registry.boot` (risk floors, signatures),
    then a view with no filters. For a view: the view itself. The tool specs
    of every provider format are checked against the dispatch table with
    :meth:`~veridic.ToolView.assert_coupled`, and the tool lines of the
    capability section against both. Components that did not start are listed
    as ``info``: they are the truthful "not available" lines of the prompt.
    """
    findings: list[LintFinding] = []
    if isinstance(source, Registry):
        try:
            source.boot()
            view = source.view()
        except VeridicError as error:
            what = (
                _FLOOR_BOOT if isinstance(error, RiskFloorError) else "the registry does not boot"
            )
            return (_boot_finding(error, what),)
    else:
        view = source
    for fmt in ("openai", "anthropic", "mcp"):
        try:
            view.assert_coupled(view.tool_specs(fmt))
        except ToolCouplingError as error:
            findings.append(
                LintFinding("coupling", "error", None, None, None, f"{fmt} specs: {error}")
            )
    section = str(view.capability_section())
    listed = _SECTION_LINE.findall(section)
    names = view.names()
    twice = sorted({name for name in listed if listed.count(name) > 1})
    extra = sorted(set(listed) - names)
    missing = sorted(names - set(listed))
    if twice or extra or missing:
        problems = "; ".join(
            f"{label}: {', '.join(found)}"
            for label, found in (
                ("listed but not dispatchable", extra),
                ("dispatchable but not listed", missing),
                ("listed more than once", twice),
            )
            if found
        )
        findings.append(
            LintFinding(
                "coupling",
                "error",
                None,
                None,
                None,
                f"the capability section and the dispatch table disagree ({problems}): build "
                "the prompt's tool section with view.capability_section() of the view that "
                "dispatches",
            )
        )
    for state in view.unavailable_components():
        findings.append(
            LintFinding(
                "component-down",
                "info",
                None,
                None,
                None,
                f"component {state.name!r} did not start here ({_boot_account(state)}); "
                "the prompt says so and its tools are in no projection",
            )
        )
    return tuple(findings)


# --- the checks -------------------------------------------------------------------


def _finding(
    tool: Tool | None,
    name: str,
    code: str,
    message: str,
    severity: Severity = "error",
    *,
    score: float | None = None,
    other: str | None = None,
) -> LintFinding:
    file, line = tool_location(tool) if tool is not None else (None, None)
    return LintFinding(code, severity, name, file, line, message, score, other)


def _boot_account(state: ComponentState) -> str:
    """What the prompt says of a failed boot, and the withheld message when there is one."""
    if state.detail and state.reason not in state.detail:
        return f"{state.reason}; its message, withheld from the prompt: {clip(state.detail)}"
    return state.reason


def _floor_findings(tool: Tool) -> list[LintFinding]:
    # The registry's own boot check (floor_violations), one finding per broken
    # floor with the tool's file and line, where boot lists them all in one error.
    return [
        _finding(
            tool,
            tool.name,
            "risk-floor",
            f"tool {tool.name!r} ({tool.origin}) declares risk {violation.declared.value}, but "
            f"{violation.detail} (rule: {violation.rule.rule}); the registry refuses to boot: "
            f"{violation.rule.fix}",
        )
        for violation in floor_violations(tool)
    ]


def _irreversibility_findings(tool: Tool) -> list[LintFinding]:
    if tool.risk is not Risk.HIGH or description_problem(tool.name, tool.description) is not None:
        return []
    text = tool.description
    if tool.irreversible or not tool.writes_instruction_fields:
        if _UNDOING.search(text):
            return []
        what = "what cannot be undone"
        example = '"This is a hard delete and cannot be undone."'
    else:
        if _INSTRUCTION_EFFECT.search(text) or _UNDOING.search(text):
            return []
        what = "that what it writes becomes another feature's instructions"
        example = '"The owning feature uses this content verbatim as its system prompt."'
    return [
        _finding(
            tool,
            tool.name,
            "irreversibility-unstated",
            f"high-risk tool {tool.name!r} ({tool.origin}) does not say {what}, so the model "
            "cannot warn the user before asking for approval: add a sentence to its "
            f"description such as {example}",
            "warning",
        )
    ]


def _undeclared_irreversibility(tool: Tool) -> list[LintFinding]:
    """A write whose description says it cannot be undone, declared reversible.

    The declaration decides the risk floor: a write declared reversible may sit at mid
    risk, where an always rule approves it, while its description tells the model (and
    the reviewer) that it is permanent. Only a warning: the words are a heuristic.
    """
    if tool.kind != "write" or tool.irreversible or tool.risk is Risk.HIGH:
        return []
    said = next(
        (
            found
            for found in _SAYS_PERMANENT.finditer(tool.description)
            if not _DENIED_BEFORE.search(tool.description[: found.start()])
        ),
        None,
    )
    if said is None:
        return []
    return [
        _finding(
            tool,
            tool.name,
            "irreversibility-undeclared",
            f"write tool {tool.name!r} ({tool.origin}) says {said.group(0)!r} in its "
            f"description but is declared reversible at risk {tool.risk.value}, where an "
            "always rule can approve it: declare it irreversible=True (its floor is then "
            "high), or, if it can be undone, say how in its description",
            "warning",
        )
    ]


def _unencodable_text(tool: Tool) -> list[LintFinding]:
    """A character of the tool's description or input schema that UTF-8 cannot encode.

    A lone surrogate (from an escape such as ``\\ud800`` typed in a docstring) is a
    ``str`` character Python holds but no UTF-8 text can: ``veridic manifest`` cannot
    write the tool, and a provider's request that sends it fails to encode. Found here,
    it fails the lint with the tool's place instead of a later command or a run.
    """
    return [
        _finding(
            tool,
            tool.name,
            "unencodable-text",
            f"tool {tool.name!r} ({tool.origin}): {place} holds {visible(text[index], None)} "
            f"(character {index}), which UTF-8 cannot encode (a lone surrogate, typed as an "
            "escape such as \\ud800), so the manifest cannot be written and no provider's "
            "request can send the tool: remove it, or write the character itself",
        )
        for place, text in _texts(tool)
        if (index := _unencodable_at(text)) is not None
    ]


def _texts(tool: Tool) -> Iterator[tuple[str, str]]:
    """Every text of the tool the model is sent, with where it is (``properties.x.description``)."""
    yield "its description", tool.description
    pending: list[tuple[str, object]] = [("", tool.input_schema)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            yield f"its input schema at {path or 'the top'}", value
        elif isinstance(value, dict):
            for key, item in value.items():
                inner = f"{path}.{key}" if path else str(key)
                yield f"a key of its input schema ({inner})", str(key)
                pending.append((inner, item))
        elif isinstance(value, list | tuple):
            pending.extend((f"{path}[{index}]", item) for index, item in enumerate(value))


def _unencodable_at(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def _near_duplicates(
    tools: Iterable[Tool],
    threshold: float,
    siblings: Iterable[Iterable[str]],
    by_name: dict[str, Tool],
) -> list[LintFinding]:
    texts = {
        tool.name: ToolText(tool.description, tool.parameters)
        for tool in tools
        if tool.name != SCHEMA_TOOL and description_problem(tool.name, tool.description) is None
    }
    groups = [frozenset(group) for group in siblings]
    findings: list[LintFinding] = []
    for group in groups:
        for name in sorted(group - set(by_name)):
            findings.append(
                LintFinding(
                    "unknown-sibling",
                    "warning",
                    name,
                    None,
                    None,
                    f"[tool.veridic] siblings names {name!r}, which no tool is registered under "
                    f"(group: {', '.join(sorted(group))}): remove it or fix the name, a stale "
                    "entry would silently acknowledge a future tool",
                )
            )
    for pair in similar_pairs(texts, threshold=threshold):
        first = by_name.get(pair.first)
        acknowledged = any(pair.first in g and pair.second in g for g in groups)
        tools_named = (
            f"tools {_at(pair.first, first)} and {_at(pair.second, by_name.get(pair.second))}"
        )
        if acknowledged:
            message = (
                f"{tools_named} have near-identical descriptions (similarity {pair.score:.2f}; "
                f"{_apart(pair)}), acknowledged as siblings in [tool.veridic] siblings"
            )
        else:
            message = (
                f"{tools_named} have near-identical descriptions (similarity {pair.score:.2f} >= "
                f"{threshold:g}), so the model may call one for the other; {_apart(pair)}: say in "
                "each description when to use it rather than the other (what it changes, what "
                "it returns), or acknowledge them as intended siblings in [tool.veridic] "
                f'siblings = [["{pair.first}", "{pair.second}"]]'
            )
        findings.append(
            _finding(
                first,
                pair.first,
                "near-duplicate-acknowledged" if acknowledged else "near-duplicate",
                message,
                "info" if acknowledged else "error",
                score=pair.score,
                other=pair.second,
            )
        )
    return findings


def _at(name: str, tool: Tool | None) -> str:
    """``'name' (file:line)``, or the name alone when Python does not know where it is defined."""
    file, line = tool_location(tool) if tool is not None else (None, None)
    return f"{name!r} ({file}:{line})" if file is not None else repr(name)


_SHOWN_WORDS: Final = 8


def _apart(pair: SimilarPair) -> str:
    """What tells the two tools apart, in words a reviewer can act on."""
    if not pair.first_only and not pair.second_only:
        return "their descriptions say the same: only the names tell them apart"
    sides = []
    for name, words in ((pair.first, pair.first_only), (pair.second, pair.second_only)):
        if words:
            shown = ", ".join(f'"{word}"' for word in words[:_SHOWN_WORDS])
            more = ", ..." if len(words) > _SHOWN_WORDS else ""
            sides.append(f"{shown}{more} ({name} only)")
    return f"only these words tell them apart: {'; '.join(sides)}"


def _boot_finding(error: VeridicError, what: str) -> LintFinding:
    return LintFinding("boot", "error", None, None, None, f"{what}: {error}")
