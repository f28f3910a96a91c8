"""``veridic probe``: which sibling tools a real model confuses, asked with the real prompt.

The lint reads descriptions; the probe asks a model. For each tool a view
exposes it takes a few requests a user could make for it (generated from the
tool's description and schema by :func:`generate_requests`, or written by the
team in a file, :func:`read_requests`), sends each one with the prompt the
application sends (the view's capability section in the system message,
built with :class:`~veridic.Composer`, and the view's OpenAI tool specs as
the tool list) and records the tool the model called. The result is a
confusion matrix (which tool was chosen for which; ``none`` when the model
called nothing, or a name the view does not have) and the pairs the model
mixes up, with their rate. A pair at or above the threshold is a finding of
the same shape as the lint's (:class:`~veridic.checks.lint.LintFinding`,
code ``confused-pair``).

**Denied versus absent.** For each tool a policy hides (a view's deny list,
roles, allow list or predicates, or ``hide=``), the probe asks for it with its
own requests through the view that hides it, and reports what the model
called instead: the substitution rate, measured before deployment, that the
audit store counts after a refusal (:meth:`veridic.run.audit.SQLiteAuditSink.substitutions`).

The models are in :mod:`veridic.checks.choosers`. A model may call the
built-in ``get_tool_schema`` first to read a tool's arguments, as the
capability section invites it to: that counts as choosing the tool it names.

>>> from veridic import Registry
>>> from veridic.checks.choosers import ScriptedChooser
>>> registry = Registry()
>>> @registry.tool(kind="query")
... def search_hotels(city: str) -> str:
...     '''Search the hotels in a city, with prices and free rooms.
...
...     Args:
...         city: The city to search.
...     '''
...     return city
>>> generate_requests(registry.view().tool("search_hotels"), 1)
('Search the hotels in Lisbon, with prices and free rooms.',)
>>> result = probe(registry, ScriptedChooser({}, default="search_hotels"), per_tool=2)
>>> result.matrix()
{'search_hotels': {'search_hotels': 2}}
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

from veridic._sample import clip
from veridic._words import a_type
from veridic.checks._regular import read_regular
from veridic.checks.choosers import Choice, ToolChooser
from veridic.checks.lint import LintFinding, Severity, tool_location
from veridic.errors import VeridicError
from veridic.text.compose import Composer
from veridic.text.provenance import TrustedInstruction, instruction
from veridic.tools._descriptions import one_line
from veridic.tools.registry import Registry
from veridic.tools.tool import SCHEMA_TOOL, Tool
from veridic.tools.view import ToolView

__all__ = [
    "DEFAULT_CONFUSION_THRESHOLD",
    "DEFAULT_PER_TOOL",
    "NONE",
    "Asked",
    "ConfusedPair",
    "HiddenReach",
    "ProbeError",
    "ProbeResult",
    "findings",
    "generate_requests",
    "probe",
    "probe_messages",
    "read_requests",
]

DEFAULT_CONFUSION_THRESHOLD: Final = 0.2
"""A pair fails when at least this share of the requests for either tool went to the other."""
DEFAULT_PER_TOOL: Final = 3
"""Generated requests per tool when not told otherwise (at most five are generated)."""
NONE: Final = "none"
"""The matrix column of a request the model answered without calling a tool of the view."""

PROBE_INSTRUCTION: Final[TrustedInstruction] = instruction(
    "You are an assistant that acts through tools. For the user's request, call the one "
    "tool that does what they ask. If no tool fits, say so without calling one."
)
"""The system message's first part; the view's capability section follows it."""


class ProbeError(VeridicError):
    """The probe cannot run as asked: a bad requests file, an unknown tool, a bad setting."""


# --- requests ---------------------------------------------------------------------------


def generate_requests(tool: Tool, count: int = DEFAULT_PER_TOOL) -> tuple[str, ...]:
    """Up to ``count`` (at most five) requests a user could make for ``tool``, deterministic.

    Built from the first sentence of its description, turned into an
    imperative ("Searches the hotels" becomes "search the hotels"), and
    example values for its required arguments, chosen from their names and
    types. They are a start: requests written the way users talk
    (:func:`read_requests`) make a sharper probe.
    """
    act = _imperative(_first_sentence(tool.description) or tool.name.replace("_", " "))
    values = _example_values(tool)
    filled, left = _fill(act, values)
    tail = "".join(f"; the {name.replace('_', ' ')} is {value}" for name, value in left)
    first = values[0] if values else None
    described = tool.parameter_descriptions.get(first[0], "") if first else ""
    candidates = [
        f"{filled[:1].upper()}{filled[1:]}{tail}.",
        f"Please {filled}{tail}.",
        f"Can you {act}? {described.rstrip('.')}: {first[1]}."
        if first and described
        else f"Can you {filled}{tail}?",
        f"I want to {filled}{tail}.",
        f"{act[:1].upper()}{act[1:]}, please.",
    ]
    unique = list(dict.fromkeys(candidates))
    return tuple(unique[: max(0, count)])


_STOPWORDS: Final = frozenset(
    ("in", "on", "of", "for", "to", "with", "from", "by", "and", "or", "so", "that", "which")
)


def _fill(act: str, values: Sequence[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
    """``act`` with "a city" made "Lisbon" and "a draft post" made "the draft post A-1042"
    where an argument's name appears with an article; the arguments not placed so."""
    left = []
    for name, value in values:
        words = name.lower().split("_")
        if words[-1] == "id" and len(words) > 1:
            stem = " ".join(words[:-1])
            found = re.search(rf"\b(?:a|an|the|one|given) ({re.escape(stem)})(?: (\w+))?\b", act)
            if found:
                noun = found.group(1)
                if found.group(2) and found.group(2).lower() not in _STOPWORDS:
                    noun = f"{noun} {found.group(2)}"
                    end = found.end(2)
                else:
                    end = found.end(1)
                act = f"{act[: found.start()]}the {noun} {value}{act[end:]}"
                continue
        else:
            phrase = " ".join(words)
            found = re.search(rf"\b(?:a|an|the|one|given) {re.escape(phrase)}\b", act)
            if found:
                act = f"{act[: found.start()]}{value}{act[found.end() :]}"
                continue
        left.append((name, value))
    return act, left


_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s")
_NOUN_START: Final = frozenset({"the", "a", "an", "all", "every", "each", "one", "this", "your"})
_GETTING: Final = frozenset({"return", "returns", "fetch", "fetches", "retrieve", "retrieves"})


def _first_sentence(description: str) -> str:
    text = one_line(description)
    return _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".!? ")


def _imperative(sentence: str) -> str:
    """``sentence`` as a thing to ask for, lower-cased: "Lists the drafts" -> "list the drafts"."""
    word, _, rest = sentence.partition(" ")
    lower = word.lower()
    if lower in _NOUN_START:
        return f"show me {lower} {rest}".strip()
    if lower in _GETTING:
        verb = "get"
    elif lower.endswith("ies") and len(lower) > 4:
        verb = lower[:-3] + "y"
    elif lower.endswith(("ches", "shes", "sses", "xes", "zes")):
        verb = lower[:-2]
    elif lower.endswith("s") and not lower.endswith(("ss", "us", "is")) and len(lower) > 3:
        verb = lower[:-1]
    else:
        verb = lower if word[1:].islower() or len(word) == 1 else word
    return f"{verb} {rest}".strip()


_STRING_EXAMPLES: Final = (
    ("email", "ada@example.com"),
    ("city", "Lisbon"),
    ("country", "Portugal"),
    ("date", "2025-06-14"),
    ("url", "https://example.com/page"),
    ("query", "quiet rooms near the sea"),
    ("search", "quiet rooms near the sea"),
    ("title", "Spring offers"),
    ("language", "English"),
    ("name", "Ada Lovelace"),
    ("id", "A-1042"),
)


def _example_values(tool: Tool) -> list[tuple[str, str]]:
    properties = tool.input_schema.get("properties")
    schema = properties if isinstance(properties, dict) else {}
    values = []
    for name in tool.required[:2]:
        spec = schema.get(name)
        values.append((name, _example(name, spec if isinstance(spec, dict) else {})))
    return values


def _example(name: str, spec: Mapping[str, object]) -> str:
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        return str(enum[0])
    kind = spec.get("type")
    words = name.lower().split("_")
    if kind == "integer":
        return "1042" if "id" in words else "3"
    if kind == "number":
        return "2.5"
    if kind == "boolean":
        return "yes"
    for key, example in _STRING_EXAMPLES:
        if key in words or name.lower() == key:
            return example
    return f"example {name.replace('_', ' ')}"


def read_requests(path: Path) -> dict[str, tuple[str, ...]]:
    """The requests a team wrote for its tools: ``{tool: [request, ...]}`` as JSON or TOML.

    JSON (``.json``): ``{"search_hotels": ["Any rooms in Porto under 90 euros?"]}``;
    TOML (``.toml``): ``search_hotels = ["Any rooms in Porto under 90 euros?"]``.
    Whether the names are the registry's is checked by :func:`probe`.

    Raises:
        ProbeError: the file is missing or unreadable, not valid JSON/TOML, not a
            table of tool names to lists of non-empty strings (the message says
            which entry, and what to write instead).
    """
    if path.suffix not in (".json", ".toml"):
        raise ProbeError(
            f"requests file {path}: the name ends in {path.suffix or 'nothing'!r}, so its "
            'format is unknown: write JSON ({"tool": ["request", ...]}) in a .json file or '
            'TOML (tool = ["request", ...]) in a .toml file'
        )
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ProbeError(
            f"requests file {path}: cannot be read ({error}): pass the path of a UTF-8 "
            "JSON or TOML file, relative to the working directory"
        ) from error
    try:
        data: object = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except json.JSONDecodeError as error:
        raise ProbeError(
            f"requests file {path}:{error.lineno}:{error.colno}: not valid JSON ({error.msg}): "
            'write an object of tool names to lists of requests, {"tool": ["request", ...]}'
        ) from error
    except tomllib.TOMLDecodeError as error:
        raise ProbeError(
            f"requests file {path}: not valid TOML ({error}): write one line per tool, "
            'tool = ["request", ...]'
        ) from error
    if not isinstance(data, dict):
        raise ProbeError(
            f"requests file {path}: the top level is {_json_type(data)}, not an object of "
            'tool names to lists of requests: write {"tool": ["request", ...]}'
        )
    read: dict[str, tuple[str, ...]] = {}
    for name, value in data.items():
        if not isinstance(value, list) or not value:
            raise ProbeError(
                f"requests file {path}, entry {name!r}: {_json_type(value)} "
                f"({clip(repr(value), 60)}), where a non-empty list of requests is expected: "
                f'write {name} = ["a request a user could make for it", ...]'
            )
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise ProbeError(
                    f"requests file {path}, entry {name!r}, request {index + 1}: "
                    f"{clip(item, 60) if isinstance(item, str) else repr(item)} is not a "
                    "non-empty string: write each request as the text a user would send"
                )
        read[name] = tuple(item.strip() for item in value)
    return read


def _json_type(value: object) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, int | float) else a_type(value)


# --- the prompt ---------------------------------------------------------------------------


def probe_messages(
    view: ToolView, request: str
) -> tuple[list[dict[str, str]], list[Mapping[str, object]]]:
    """What the model is sent for ``request``: OpenAI chat messages and the view's tool specs.

    The system message is ``PROBE_INSTRUCTION`` then the view's capability
    section, composed by :class:`~veridic.Composer` as an application's prompt
    is; the request is the user turn; the tools are ``view.tool_specs("openai")``.
    """
    prompt = Composer().system(PROBE_INSTRUCTION, view.capability_section()).user(request).build()
    messages = [
        {"role": str(message["role"]), "content": str(message["content"])}
        for message in prompt.to_openai()
    ]
    return messages, list(view.tool_specs("openai"))


# --- the measurement ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Asked:
    """One request and the model's answer.

    ``tool`` is the tool the request is for; ``chosen`` the tool of the view
    the model called (through ``get_tool_schema`` too), :data:`NONE`, or, for
    a hidden tool, its own name when the model asked for it anyway (the view
    would refuse the call). ``called`` is the name as the model wrote it.
    """

    tool: str
    request: str
    chosen: str
    called: str | None
    arguments: str
    hidden: bool
    source: str

    def to_json(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "request": self.request,
            "chosen": self.chosen,
            "called": self.called,
            "arguments": self.arguments,
            "hidden": self.hidden,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class ConfusedPair:
    """Two tools the model mixed up: how often each one's requests went to the other."""

    first: str
    second: str
    first_as_second: int
    second_as_first: int
    first_asked: int
    second_asked: int

    @property
    def rate(self) -> float:
        """The larger of the two shares: of the requests for one tool, those that went to the
        other (a pair is as confused as its worse direction: ``delete`` always taken for
        ``archive`` is a failing pair even when ``archive`` is never taken for ``delete``)."""
        return max(
            self.first_as_second / max(self.first_asked, 1),
            self.second_as_first / max(self.second_asked, 1),
        )

    @property
    def overall(self) -> float:
        """Of the requests for either tool, the share that went to the other one."""
        asked = self.first_asked + self.second_asked
        return (self.first_as_second + self.second_as_first) / asked if asked else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "tools": [self.first, self.second],
            "rate": round(self.rate, 3),
            "overall": round(self.overall, 3),
            f"{self.first} as {self.second}": f"{self.first_as_second}/{self.first_asked}",
            f"{self.second} as {self.first}": f"{self.second_as_first}/{self.second_asked}",
        }


@dataclass(frozen=True, slots=True)
class HiddenReach:
    """What the model called when asked for a tool the view hides."""

    tool: str
    asked: int
    substitutes: tuple[tuple[str, int], ...]
    itself: int
    nothing: int

    @property
    def substituted(self) -> int:
        return sum(n for _, n in self.substitutes)

    @property
    def rate(self) -> float:
        """Of the requests for the hidden tool, the share answered with another tool."""
        return self.substituted / self.asked if self.asked else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "asked": self.asked,
            "substitution_rate": round(self.rate, 3),
            "substitutes": dict(self.substitutes),
            "called_itself": self.itself,
            "called_nothing": self.nothing,
        }


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Every request asked and its answer, with the matrix and pairs read from them."""

    tools: tuple[str, ...]
    hidden_tools: tuple[str, ...]
    asked: tuple[Asked, ...]
    model: tuple[tuple[str, str], ...]
    locations: Mapping[str, tuple[str | None, int | None]] = field(repr=False)

    def matrix(self, *, hidden: bool = False) -> dict[str, dict[str, int]]:
        """``{tool a request was for: {tool chosen: count}}``, rows in view order, counts > 0."""
        rows: dict[str, Counter[str]] = {
            name: Counter() for name in (self.hidden_tools if hidden else self.tools)
        }
        for asked in self.asked:
            if asked.hidden == hidden:
                rows[asked.tool][asked.chosen] += 1
        return {name: dict(sorted(row.items(), key=_column)) for name, row in rows.items()}

    def pairs(self) -> tuple[ConfusedPair, ...]:
        """The pairs of probed tools the model mixed up at least once, most confused first."""
        matrix = self.matrix()
        asked = {name: sum(row.values()) for name, row in matrix.items()}
        found = []
        for i, first in enumerate(self.tools):
            for second in self.tools[i + 1 :]:
                a, b = matrix[first].get(second, 0), matrix[second].get(first, 0)
                if not (a or b):
                    continue
                if b / max(asked[second], 1) > a / max(asked[first], 1):
                    first_, second_, a, b = second, first, b, a  # the more confused one first
                else:
                    first_, second_ = first, second
                found.append(ConfusedPair(first_, second_, a, b, asked[first_], asked[second_]))
        return tuple(sorted(found, key=lambda p: (-p.rate, p.first, p.second)))

    def reaches(self) -> tuple[HiddenReach, ...]:
        """For each hidden tool, what the model called instead, most frequent first."""
        out = []
        for name, row in self.matrix(hidden=True).items():
            substitutes = tuple(
                sorted(
                    ((k, n) for k, n in row.items() if k not in (name, NONE)),
                    key=lambda item: (-item[1], item[0]),
                )
            )
            out.append(
                HiddenReach(
                    name, sum(row.values()), substitutes, row.get(name, 0), row.get(NONE, 0)
                )
            )
        return tuple(out)

    def to_json(self) -> dict[str, object]:
        return {
            "model": dict(self.model),
            "matrix": self.matrix(),
            "pairs": [pair.to_json() for pair in self.pairs()],
            "hidden": [reach.to_json() for reach in self.reaches()],
            "requests": [asked.to_json() for asked in self.asked],
        }

    def summary(self) -> list[str]:
        """The matrix, the pairs and the hidden tools as lines of text, for people."""
        lines = ["confusion (the tool each request was for: what the model called):"]
        for name, row in self.matrix().items():
            total = sum(row.values())
            chosen = ", ".join(f"{k} {n}" for k, n in row.items()) or "nothing asked"
            lines.append(f"  {name} ({total}): {chosen}")
        pairs = self.pairs()
        lines.append("confused pairs:" if pairs else "confused pairs: none")
        for pair in pairs:
            lines.append(
                f"  {pair.first} / {pair.second}: rate {pair.rate:.2f} ({pair.first} as "
                f"{pair.second} {pair.first_as_second}/{pair.first_asked}, {pair.second} as "
                f"{pair.first} {pair.second_as_first}/{pair.second_asked})"
            )
        reaches = self.reaches()
        if reaches:
            lines.append("hidden by the view's policy (asked for anyway: what the model called):")
        for reach in reaches:
            instead = ", ".join(f"{k} {n}" for k, n in reach.substitutes) or "no other tool"
            lines.append(
                f"  {reach.tool} ({reach.asked}): substitution rate {reach.rate:.2f} "
                f"({instead}; called it anyway {reach.itself}, nothing {reach.nothing})"
            )
        return lines


def _column(item: tuple[str, int]) -> tuple[int, int, str]:
    return (item[0] == NONE, -item[1], item[0])


def probe(
    source: Registry | ToolView,
    chooser: ToolChooser,
    *,
    requests: Mapping[str, Sequence[str]] | None = None,
    requests_source: str = "requests",
    per_tool: int | None = None,
    hide: Iterable[str] = (),
) -> ProbeResult:
    """Ask ``chooser`` to pick a tool for each request, with the view's real prompt.

    ``source``: a registry (probed through ``registry.view()``) or one
    request's view. ``requests``: per tool, the requests to ask (tools left
    out get generated ones); ``requests_source`` names where they came from,
    for messages. ``per_tool``: how many requests per tool (generated: that
    many, default three; given: the first that many, default all). ``hide``:
    tools to hide as a deny list would (a registry only); every tool the view
    denies (roles, allow list, deny list, predicates) is probed as hidden.

    Raises:
        ProbeError: ``requests`` or ``hide`` name a tool the registry does not
            have, ``hide`` is given with a view, or ``per_tool`` is below 1.
        ProbeModelError: the model could not be asked (from the chooser).
        VeridicError: the registry does not boot (from ``registry.view()``).
    """
    if per_tool is not None and per_tool < 1:
        raise ProbeError(f"per_tool={per_tool}: ask at least one request per tool")
    view, denying = _views(source, tuple(hide))
    probed = [tool for tool in view.tools() if tool.name != SCHEMA_TOOL]
    hidden = [
        status.tool
        for status in denying.withheld()
        if status.state == "denied" and status.tool is not None and status.name != SCHEMA_TOOL
    ]
    given = dict(requests or {})
    known = {tool.name for tool in (*probed, *hidden)}
    _check_names(given, known, source, requests_source)
    asked: list[Asked] = []
    for tools, target, is_hidden in ((probed, view, False), (hidden, denying, True)):
        for tool in tools:
            if tool.name in given:
                texts = tuple(given[tool.name])[:per_tool]
                origin = requests_source
            else:
                texts = generate_requests(tool, per_tool or DEFAULT_PER_TOOL)
                origin = "generated"
            for text in texts:
                messages, specs = probe_messages(target, text)
                choice = chooser.choose(messages, specs)
                chosen = _label(choice, target, tool.name if is_hidden else None)
                asked.append(
                    Asked(
                        tool.name,
                        text,
                        chosen,
                        choice.name,
                        choice.arguments,
                        is_hidden,
                        origin,
                    )
                )
    locations = {tool.name: tool_location(tool) for tool in (*probed, *hidden)}
    return ProbeResult(
        tools=tuple(tool.name for tool in probed),
        hidden_tools=tuple(tool.name for tool in hidden),
        asked=tuple(asked),
        model=tuple(chooser.describe().items()),
        locations=MappingProxyType(locations),
    )


def _views(source: Registry | ToolView, hide: tuple[str, ...]) -> tuple[ToolView, ToolView]:
    """The view to probe and the view whose denied tools are probed as hidden."""
    if isinstance(source, ToolView):
        if hide:
            raise ProbeError(
                f"hide={list(hide)!r} with a ToolView: a view cannot be rebuilt without a tool; "
                "probe the Registry with --hide, or build the view with deny=[...] and probe it "
                "(its denied tools are probed as hidden)"
            )
        return source, source
    if not isinstance(source, Registry):
        raise ProbeError(
            f"veridic probe got {a_type(source)}: pass the application's Registry or a ToolView"
        )
    view = source.view()
    if not hide:
        return view, view
    registered = {tool.name for tool in source.tools()}
    unknown = [name for name in hide if name not in registered]
    if unknown:
        raise ProbeError(
            f"--hide names {', '.join(map(repr, unknown))}, which no tool of the registry is "
            f"registered under{_nearest(unknown[0], registered)}: hide a registered tool"
        )
    return view, source.view(deny=hide)


def _check_names(
    given: Mapping[str, Sequence[str]], known: set[str], source: object, where: str
) -> None:
    unknown = [name for name in given if name not in known]
    if unknown:
        raise ProbeError(
            f"{where}: requests for {', '.join(map(repr, unknown))}, which the "
            f"{type(source).__name__} neither exposes nor hides{_nearest(unknown[0], known)}: "
            "key each list by a tool name of the registry (the probed tools: "
            f"{', '.join(sorted(known)) or 'none'})"
        )


def _nearest(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _label(choice: Choice, view: ToolView, hidden: str | None) -> str:
    """The matrix column of ``choice``: a tool of the view, the hidden tool itself, or none."""
    name = choice.name
    if name == SCHEMA_TOOL and SCHEMA_TOOL in view.names():
        named = _schema_target(choice.arguments)
        if named is not None and (named in view.names() or named == hidden):
            return named
    if name is not None and (name in view.names() or name == hidden):
        return name
    return NONE


def _schema_target(arguments: str) -> str | None:
    try:
        decoded = json.loads(arguments) if arguments else None
    except ValueError:
        return None
    if isinstance(decoded, dict) and isinstance(decoded.get("name"), str):
        return str(decoded["name"])
    return None


# --- findings ------------------------------------------------------------------------------


def findings(
    result: ProbeResult,
    *,
    threshold: float = DEFAULT_CONFUSION_THRESHOLD,
    siblings: Iterable[Iterable[str]] = (),
) -> tuple[LintFinding, ...]:
    """The result's findings, shaped as the lint's.

    - ``confused-pair`` (error): a pair whose rate is at or above ``threshold``;
      ``tool`` is the more confused tool (``file``/``line`` where it is
      defined), ``other`` the tool it was taken for, ``score`` the rate;
    - ``confused-pair-acknowledged`` (info): the same, for a pair in one
      ``siblings`` group;
    - ``substitution`` (warning): a hidden tool the model replaced with another
      at or above ``threshold``; ``other`` is its most frequent substitute.

    Raises:
        ProbeError: ``threshold`` is not in (0, 1].
    """
    if not 0 < threshold <= 1:
        raise ProbeError(
            f"threshold={threshold!r}: the confusion threshold is a share of requests in "
            "(0, 1], e.g. 0.2"
        )
    groups = [frozenset(group) for group in siblings]
    found: list[LintFinding] = []
    severity: Severity
    for pair in result.pairs():
        if pair.rate < threshold:
            continue
        file, line = result.locations.get(pair.first, (None, None))
        counts = (
            f"{pair.first_as_second} of {pair.first_asked} requests for {pair.first!r} went to "
            f"{pair.second!r} and {pair.second_as_first} of {pair.second_asked} for "
            f"{pair.second!r} went to {pair.first!r}"
        )
        if any(pair.first in g and pair.second in g for g in groups):
            code, severity = "confused-pair-acknowledged", "info"
            message = (
                f"the model mixes up {pair.first!r} and {pair.second!r} ({counts}; rate "
                f"{pair.rate:.2f}), acknowledged as siblings in [tool.veridic] siblings"
            )
        else:
            code, severity = "confused-pair", "error"
            message = (
                f"the model mixes up {pair.first!r} and {pair.second!r}: {counts} (rate "
                f"{pair.rate:.2f} >= {threshold:g}): say in each description when to use it "
                "and when to use the other (what it changes, what it returns), or acknowledge "
                f'them in [tool.veridic] siblings = [["{pair.first}", "{pair.second}"]]'
            )
        found.append(
            LintFinding(code, severity, pair.first, file, line, message, pair.rate, pair.second)
        )
    for reach in result.reaches():
        if not reach.substitutes or reach.rate < threshold:
            continue
        top, n = reach.substitutes[0]
        file, line = result.locations.get(reach.tool, (None, None))
        found.append(
            LintFinding(
                "substitution",
                "warning",
                reach.tool,
                file,
                line,
                f"asked for {reach.tool!r}, which the view hides, the model called another tool "
                f"for {reach.substituted} of {reach.asked} requests (rate {reach.rate:.2f} >= "
                f"{threshold:g}; {top!r} {n} times): check that {top!r} cannot do what the "
                f"policy denies {reach.tool!r} for (deny it too, or guard the operation), and "
                f"say in its description what it must not be used for",
                reach.rate,
                top,
            )
        )
    return tuple(found)
