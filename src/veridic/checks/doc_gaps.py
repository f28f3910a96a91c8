"""``find_doc_gaps``: the lint that makes a missing description fail a test, not a demo.

For the model, a tool without a description does not exist: no view exposes
it. That makes silence the failure mode, so the gaps are listed here, for a
test (``assert find_doc_gaps(registry) == []``) and for ``veridic lint``:

- the tool has no real description (missing, blank, a placeholder, only its
  own name, or an f-string "docstring" that Python drops): the tool is in no
  view;
- a parameter has no description (docstring section or
  ``Annotated[..., Field(description=...)]``); a handler's ``ToolContext``
  parameter is not one the model sends, so it needs none (its entry may stay);
- a description names a parameter the tool does not have: in single
  backticks (`` `user_id` `` after a rename), or an entry of the docstring's
  parameter section. A backticked name of a registered tool is fine (a
  description may point to the query to run first); quote other code in
  double backticks.

>>> from veridic import Registry
>>> registry = Registry()
>>> @registry.tool(kind="query")
... def find_user(email: str) -> str:
...     '''TODO'''
...     return email
>>> [(gap.tool, gap.parameter, str(gap.code)) for gap in find_doc_gaps(registry)]
[('find_user', None, 'placeholder-description'), ('find_user', 'email', 'undocumented-parameter')]
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Final

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.tools._descriptions import GapCode, backticked_names, description_problem
from veridic.tools._written_doc import stripped_fix
from veridic.tools.registry import Registry
from veridic.tools.tool import SCHEMA_TOOL, Tool
from veridic.tools.view import ToolView

__all__ = ["DocGap", "GapCode", "find_doc_gaps"]

_LITERALS: Final = frozenset({"True", "False", "None", "true", "false", "null"})
_MISSING: Final = (GapCode.MISSING_DESCRIPTION, GapCode.PLACEHOLDER_DESCRIPTION)


@dataclass(frozen=True, slots=True)
class DocGap:
    """One documentation gap: which tool, which parameter (``None`` for the tool), what, and why.

    ``code`` is a :class:`GapCode` (a ``str``), stable for filtering;
    ``message`` says what is missing, where the tool is defined and what to write.
    """

    tool: str
    parameter: str | None
    code: GapCode
    message: str


def find_doc_gaps(source: Registry | ToolView) -> list[DocGap]:
    """Every documentation gap of the tools of a registry, or of a view.

    For a registry: every registered tool, components included, without
    booting anything. For a view: the tools it exposes and those it withholds
    for lack of a description.

    Raises:
        VeridicError: ``source`` is neither, or a tool's signature cannot be resolved.
    """
    if isinstance(source, Registry):
        tools = source.tools()
        known = {tool.name for tool in tools} | {SCHEMA_TOOL}
    elif isinstance(source, ToolView):
        withheld = [s.tool for s in source.withheld() if s.tool is not None]
        tools = (
            *source.tools(),
            *(s.tool for s in source.withheld() if s.cause == "description" and s.tool),
        )
        known = set(source.names()) | {tool.name for tool in withheld}
    else:
        raise VeridicError(
            f"find_doc_gaps() got {a_type(source)}: pass the Registry (every tool) "
            "or a ToolView (the tools of one request)"
        )
    return [gap for tool in tools for gap in _gaps(tool, known)]


def _gaps(tool: Tool, known: set[str]) -> list[DocGap]:
    gaps: list[DocGap] = []
    problem = description_problem(tool.name, tool.description)
    if problem is not None:
        gaps.append(_description_gap(tool, problem))
    for parameter in tool.parameters:
        text = tool.parameter_descriptions.get(parameter, "")
        # "email: Email" is poor but present; only missing and placeholder text count.
        if description_problem(parameter, text) in _MISSING:
            gaps.append(
                DocGap(
                    tool.name,
                    parameter,
                    GapCode.UNDOCUMENTED_PARAMETER,
                    f"parameter {parameter!r} of tool {tool.name!r} ({tool.origin}) has "
                    + (f"only {clip(text)} as description" if text.strip() else "no description")
                    + ", so the model guesses what to send: "
                    + _parameter_fix(tool, parameter, text),
                )
            )
    for name in sorted(tool.documented_elsewhere):
        gaps.append(
            DocGap(
                tool.name,
                name,
                GapCode.UNKNOWN_PARAMETER,
                f"the docstring of tool {tool.name!r} ({tool.origin}) documents a parameter "
                f"{name!r} that the function does not take (its parameters: "
                f"{_listed(tool.parameters)}): remove the entry or fix its name",
            )
        )
    texts = [tool.description, *tool.parameter_descriptions.values()]
    reported = set(tool.documented_elsewhere)
    for name in backticked_names(texts):
        if name in tool.parameters or name in known or name in _LITERALS or name in reported:
            continue
        reported.add(name)
        if tool.context is not None and name == tool.context.name:
            gaps.append(_context_named(tool, name))
            continue
        gaps.append(
            DocGap(
                tool.name,
                name,
                GapCode.UNKNOWN_PARAMETER,
                f"a description of tool {tool.name!r} ({tool.origin}) names `{name}`, which is "
                f"not one of its parameters ({_listed(tool.parameters)}) nor a registered tool: "
                "fix the name (a parameter renamed?), or quote other code in double backticks",
            )
        )
    return gaps


def _context_named(tool: Tool, name: str) -> DocGap:
    # The context parameter is the handler's, not an argument: its docstring entry is
    # optional and never shown, but naming it in text the model reads invites a call with it.
    return DocGap(
        tool.name,
        name,
        GapCode.UNKNOWN_PARAMETER,
        f"a description of tool {tool.name!r} ({tool.origin}) names `{name}`, its ToolContext "
        "parameter, which the model neither sees nor may send: describe what the tool does "
        "for the request without naming it (its Args entry, if any, is not shown)",
    )


def _description_gap(tool: Tool, problem: GapCode) -> DocGap:
    where = f"tool {tool.name!r} ({tool.origin})"
    if tool.external:
        fix = "the spec that provides it must describe it; until it does, the tool stays hidden"
    elif tool._stripped_fix:
        fix = tool._stripped_fix
    else:
        fix = (
            "write what it does and what it changes where it is defined: a docstring whose "
            "first paragraph says so, or description=..."
        )
    if problem is GapCode.MISSING_DESCRIPTION and _starts_with_fstring(tool):
        return DocGap(
            tool.name,
            None,
            GapCode.FSTRING_DOCSTRING,
            f"{where} starts with an f-string, which Python does not keep as a docstring, so "
            "it has no description and no view exposes it: use a plain string literal "
            "(or description=...)",
        )
    if problem is GapCode.MISSING_DESCRIPTION:
        what = "has no description" if tool.description == "" else "has a blank description"
        if tool.description_trust == "code" and (getattr(tool.handler, "__doc__", None) or ""):
            what = "has a docstring with no prose before its sections"
        summary = f"{where} {what}, so no view exposes it"
    elif problem is GapCode.PLACEHOLDER_DESCRIPTION:
        summary = (
            f"{where} has the placeholder description {clip(tool.description)}, "
            "so no view exposes it"
        )
    else:
        summary = (
            f"{where} has the description {clip(tool.description)}, which only repeats its "
            "name, so no view exposes it"
        )
    return DocGap(tool.name, None, problem, f"{summary}: {fix}")


def _parameter_fix(tool: Tool, parameter: str, text: str) -> str:
    """What to do about ``parameter`` described by ``text`` (none, or a placeholder): under
    ``-OO`` not a docstring Python strips, unless its text is a placeholder (given in code,
    which ``-OO`` does not touch) or its function has no docstring to strip."""
    if tool.external:
        return "the spec that provides the tool must describe its input properties"
    if not text.strip() and (fix := stripped_fix(tool.handler, described=False)):
        return fix
    return (
        f"describe {parameter!r} in the docstring's Args section, or annotate it "
        "Annotated[..., Field(description=...)]"
    )


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names) or "none"


def _starts_with_fstring(tool: Tool) -> bool:
    if tool.external:
        return False
    try:
        source = textwrap.dedent(inspect.getsource(tool.handler))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return False
    function = tree.body[0] if tree.body else None
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or not function.body:
        return False
    first = function.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.JoinedStr)
