"""``veridic manifest``: a committed snapshot of what the agent can do, so changes show in review.

A reworded description changes which tool the model picks; a hard delete
demoted to mid risk becomes eligible for "always allow". Both are behaviour
changes that look like nothing in a code diff. The manifest records, for every
registered tool, what the model and the approval loop see:

- ``name``, ``description``, ``kind``, ``risk``, ``irreversible``,
  ``writes_instruction_fields``, ``input_schema`` (``"sha256:..."`` of the
  canonical JSON schema: any change to the arguments shows) and ``component``;
- ``trust``: what of the tool the capability section prints as instruction:
  ``"code"`` (a tool written in code), ``"pinned description"`` or ``"pinned
  tool"`` (an external tool whose description, or description and schema, a
  pin in code vouches for), ``"unpinned"`` (an external tool whose text is only
  data), so a pin added, the review that lets outside text instruct the model,
  is a line in the diff;
- ``roles``: the roles whose views expose the tool (``[]``: every view), so a
  tool opened to everyone is a line in the diff;
- ``mcp_annotations``: what MCP clients are told of its behaviour
  (:func:`~veridic.tools.tool_specs.mcp_annotations`), since a client may stop
  asking before a write it is told is not destructive;
- each component as the code declares it: ``hint`` and ``provides`` (what the
  prompt says when it is down) and the names of its ``tools``;
- the number of tools at each risk level, and the names of the high-risk ones,
  so a change to the high-risk set is a line in the diff.

The snapshot holds only what the code declares, so that it is the same on
every machine: a tool of a component is recorded with its risk, description
and schema whether or not the component starts. Whether a component starts
is not in it: that depends on the machine (a secret, a licence, a server's
version), and a snapshot that recorded it would drift on a CI runner without
production secrets, or pass there and drift in production. The boot state is
reported instead (:func:`component_states`; ``veridic manifest`` and ``veridic
check`` print it and put it in their JSON). Format 1 recorded it, format 2
did not record roles and MCP annotations, format 3 did not record ``trust``;
a file of any of them is refused with a request to regenerate it.

It is JSON with sorted keys, two-space indentation and one item per line, so a
diff of the file reads like a list of changes; :func:`diff_manifest` says the
same in words ("tool delete_golden: risk changed from high to mid").

>>> from veridic import Registry
>>> registry = Registry()
>>> @registry.tool(kind="query")
... def find_user(email: str) -> str:
...     '''Find a user by email address.
...
...     Args:
...         email: The address to look up.
...     '''
...     return email
>>> snapshot = build_manifest(registry)
>>> snapshot["risk_counts"], snapshot["tools"]["find_user"]["risk"]
({'low': 1, 'mid': 0, 'high': 0}, 'low')
>>> diff_manifest(render_manifest(snapshot), snapshot)
[]
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from veridic import _json_object
from veridic._sample import clip
from veridic._words import a_type
from veridic.checks.lint import tools_of
from veridic.errors import VeridicError
from veridic.tools.registry import Registry
from veridic.tools.risk import Risk
from veridic.tools.tool import Tool
from veridic.tools.tool_specs import mcp_annotations
from veridic.tools.view import ToolView

__all__ = [
    "FORMAT",
    "Drift",
    "ManifestFormatError",
    "build_manifest",
    "component_states",
    "diff_manifest",
    "render_manifest",
]

FORMAT: Final = 4
"""The manifest format version, stored under ``veridic_manifest`` (4: what of a tool is trusted)."""

_TOOL_FIELDS: Final = (
    "description",
    "trust",
    "kind",
    "risk",
    "irreversible",
    "writes_instruction_fields",
    "input_schema",
    "component",
    "roles",
    "mcp_annotations",
)
_WORDS_SHOWN: Final = 6
_SHORT: Final = 80
_SPACING_CONTEXT: Final = 12


_OLD_FORMATS: Final = {
    1: " (format 1 recorded whether each component started, which depends on the machine; "
    "later formats do not)",
    2: " (format 2 did not record a tool's roles and MCP annotations, so a tool opened to "
    "every role or told to MCP clients as not destructive passed unseen)",
    3: " (format 3 did not record whether an external tool is pinned, so a pin added, which "
    "prints an outside description as instruction, passed unseen)",
}


class ManifestFormatError(VeridicError):
    """A committed manifest that is not a veridic manifest (not JSON, or another format)."""


@dataclass(frozen=True, slots=True)
class Drift:
    """One difference between a committed manifest and the registry.

    ``subject`` is ``"tool NAME"``, ``"component NAME"``, ``"risk counts"`` or
    ``"high-risk tools"``;
    ``change`` is ``"added"``, ``"removed"`` or ``"changed"``; ``field`` the
    changed field (``None`` for added and removed); ``before`` and ``after``
    the values (JSON values, ``None`` when absent); ``text`` the sentence.
    """

    subject: str
    change: Literal["added", "removed", "changed"]
    field: str | None
    before: object
    after: object
    text: str


def build_manifest(source: Registry | ToolView) -> dict[str, object]:
    """The snapshot of a registry or of a view: what the code declares, never the boot state.

    A registry is booted first, so one below its risk floors has no snapshot;
    its components' boot checks run then, but their outcome is not recorded
    (see :func:`component_states`). From a view, a component is known only by
    the tools that name it (a view does not hold the hint of a component that
    started), so its entry has ``tools`` only.

    Raises:
        RiskFloorError: the registry does not boot (a tool below its risk floor).
        VeridicError: a tool's signature cannot be resolved.
    """
    if isinstance(source, Registry):
        source.boot()
    tools = {tool.name: _tool_entry(tool) for tool in tools_of(source)}
    members: dict[str, list[str]] = {}
    for name, entry in sorted(tools.items()):
        if entry["component"] is not None:
            members.setdefault(str(entry["component"]), []).append(name)
    components: dict[str, dict[str, object]] = {
        name: {"tools": names} for name, names in members.items()
    }
    if isinstance(source, Registry):
        for state in source.components():
            components[state.name] = {
                "hint": str(state.hint),
                "provides": None if state.provides is None else str(state.provides),
                "tools": members.get(state.name, []),
            }
    counts = {risk.value: 0 for risk in Risk}
    for entry in tools.values():
        counts[str(entry["risk"])] += 1
    return {
        "veridic_manifest": FORMAT,
        "tools": tools,
        "components": components,
        "risk_counts": counts,
        "high_risk_tools": sorted(n for n, e in tools.items() if e["risk"] == Risk.HIGH.value),
    }


def component_states(source: Registry | ToolView) -> dict[str, dict[str, object]]:
    """Each component's boot state on this machine: ``{name: {"started": ..., "reason": ...}}``.

    For the report of ``veridic manifest`` and ``veridic check``, not for the
    snapshot. A registry is booted first (every component has a state); a view
    knows only the components that did not start.

    Raises:
        RiskFloorError: the registry does not boot.
    """
    if isinstance(source, Registry):
        source.boot()
        states = source.components()
    else:
        states = source.unavailable_components()
    return {state.name: {"started": state.started, "reason": state.reason} for state in states}


def render_manifest(manifest: Mapping[str, object]) -> str:
    """The stable text of a manifest: sorted keys, one item per line, a final newline."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def diff_manifest(committed: str, current: Mapping[str, object]) -> list[Drift]:
    """What changed from the ``committed`` manifest text to the ``current`` snapshot.

    Empty when nothing did. Formatting does not count, only content.

    Raises:
        ManifestFormatError: ``committed`` is not JSON or not a manifest of this format.
    """
    before = _parse(committed)
    changes: list[Drift] = []
    changes.extend(_diff_entries("tool", _table(before, "tools"), _table(current, "tools")))
    changes.extend(
        _diff_entries("component", _table(before, "components"), _table(current, "components"))
    )
    old_counts, new_counts = _table(before, "risk_counts"), _table(current, "risk_counts")
    if old_counts != new_counts:
        levels = [r.value for r in Risk]
        shown = ", ".join(
            f"{level} {old_counts.get(level, 0)} -> {new_counts.get(level, 0)}"
            for level in levels
            if old_counts.get(level, 0) != new_counts.get(level, 0)
        )
        changes.append(
            Drift(
                "risk counts",
                "changed",
                "risk_counts",
                dict(old_counts),
                dict(new_counts),
                f"tools per risk level changed: {shown}",
            )
        )
    changes.extend(_high_risk_drift(before, current))
    return changes


def _high_risk_drift(before: Mapping[str, object], current: Mapping[str, object]) -> list[Drift]:
    """The committed ``high_risk_tools`` list against the registry's, name by name.

    Reviewers read this list to see the high-risk set at a glance; one left
    unchanged while a tool's entry was demoted would tell them nothing moved.
    """
    old, new = _names(before, "high_risk_tools"), _names(current, "high_risk_tools")
    if old == new:
        return []
    moved = [f"+{n}" for n in sorted(set(new) - set(old))]
    moved += [f"-{n}" for n in sorted(set(old) - set(new))]
    shown = ", ".join(moved) if moved else f"{old} -> {new}"
    return [
        Drift(
            "high-risk tools",
            "changed",
            "high_risk_tools",
            old,
            new,
            f"the list of high-risk tools changed: {shown}",
        )
    ]


def _names(manifest: Mapping[str, object], key: str) -> list[str]:
    value = manifest.get(key, [])
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ManifestFormatError(
            f"the manifest's {key!r} is not a list of tool names: regenerate it with "
            "veridic manifest MODULE:ATTR -o FILE"
        )
    return value


def _tool_entry(tool: Tool) -> dict[str, object]:
    canonical = json.dumps(tool.input_schema, sort_keys=True, separators=(",", ":"))
    return {
        "description": tool.description,
        "trust": _trust(tool),
        "kind": tool.kind,
        "risk": tool.risk.value,
        "irreversible": tool.irreversible,
        "writes_instruction_fields": tool.writes_instruction_fields,
        "input_schema": "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        "component": tool.component,
        "roles": sorted(tool.roles),
        "mcp_annotations": dict(mcp_annotations(tool)),
    }


_PINNED: Final = {"": "unpinned", "description": "pinned description", "tool": "pinned tool"}


def _trust(tool: Tool) -> str:
    """What of ``tool`` the code vouches for: ``"code"``, or its pin's scope.

    Read from the declaration (the pin's scope), never from whether the pin still
    matches the text a server gives today, which depends on the machine (a description
    changed since its pin is withheld, and said so, by the view).
    """
    return "code" if not tool.external else _PINNED[tool.pin_scope]


def _parse(text: str) -> dict[str, object]:
    try:
        loaded: object = _json_object.loads(text)
    except _json_object.RepeatedKeyError as error:
        # JSON readers keep the last copy while a reviewer reads the first: a tool
        # entry written twice (high risk, then mid) would be checked as the one
        # nobody looked at.
        raise ManifestFormatError(
            f"the committed manifest gives the key {clip(error.key)} twice in one object, "
            "and JSON readers keep only one copy, so the file reads differently to a "
            "reviewer and to the check: regenerate it with veridic manifest MODULE:ATTR -o "
            "FILE (do not edit it by hand)"
        ) from error
    except ValueError as error:
        raise ManifestFormatError(
            f"the committed manifest is not JSON ({error}): regenerate it with veridic manifest "
            "MODULE:ATTR -o FILE (do not edit it by hand)"
        ) from error
    if not isinstance(loaded, dict) or loaded.get("veridic_manifest") != FORMAT:
        found = loaded.get("veridic_manifest") if isinstance(loaded, dict) else None
        why = _OLD_FORMATS.get(found, "") if isinstance(found, int) else ""
        raise ManifestFormatError(
            f"the committed file is not a veridic manifest of format {FORMAT} "
            f"(veridic_manifest: {found!r}){why}: regenerate it with "
            "veridic manifest MODULE:ATTR -o FILE, review the diff and commit it"
        )
    return loaded


def _table(manifest: Mapping[str, object], key: str) -> dict[str, object]:
    value = manifest.get(key, {})
    if not isinstance(value, dict):
        raise ManifestFormatError(
            f"the manifest's {key!r} is {a_type(value)}, not a table: regenerate it "
            "with veridic manifest MODULE:ATTR -o FILE"
        )
    return value


def _diff_entries(
    what: str, before: Mapping[str, object], after: Mapping[str, object]
) -> list[Drift]:
    changes: list[Drift] = []
    for name in sorted(before.keys() | after.keys()):
        subject = f"{what} {name}"
        old, new = before.get(name), after.get(name)
        if old is None:
            changes.append(Drift(subject, "added", None, None, new, f"{subject} added{_gist(new)}"))
        elif new is None:
            changes.append(
                Drift(subject, "removed", None, old, None, f"{subject} removed{_gist(old)}")
            )
        elif isinstance(old, dict) and isinstance(new, dict):
            for field in sorted(old.keys() | new.keys(), key=_field_order):
                was, now = old.get(field), new.get(field)
                if was != now:
                    text = f"{subject}: {field} changed {_change(field, was, now)}"
                    changes.append(Drift(subject, "changed", field, was, now, text))
        elif old != new:
            text = f"{subject} changed {_change('value', old, new)}"
            changes.append(Drift(subject, "changed", None, old, new, text))
    return changes


def _field_order(field: str) -> tuple[int, str]:
    return (_TOOL_FIELDS.index(field) if field in _TOOL_FIELDS else len(_TOOL_FIELDS), field)


def _gist(entry: object) -> str:
    if not isinstance(entry, dict):
        return ""
    if "risk" in entry:
        description = _short(str(entry.get("description")))
        return f" ({entry.get('kind')}, risk {entry.get('risk')}: {description})"
    if "tools" in entry:
        tools = entry.get("tools")
        listed = ", ".join(map(str, tools)) if isinstance(tools, list) and tools else "none"
        return f" (tools: {listed})"
    return ""


def _short(text: str) -> str:
    return text if len(text) <= _SHORT else text[: _SHORT - 1] + "…"


def _change(field: str, before: object, after: object) -> str:
    if field == "description" and isinstance(before, str) and isinstance(after, str):
        return f"({_word_diff(before, after)})"
    return f"from {json.dumps(before)} to {json.dumps(after)}"


def _spacing_diff(before: str, after: str) -> str:
    """``only the spacing changed: 'user. Use' to 'user.\\n\\nUse'``, a little around it."""
    head = next(
        (at for at, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    start = max(0, head - _SPACING_CONTEXT)

    def stretch(text: str) -> str:
        return clip(text[start : len(text) - tail + _SPACING_CONTEXT], _SHORT)

    return f"only the spacing changed: {stretch(before)} to {stretch(after)}"


def _word_diff(before: str, after: str) -> str:
    """The changed words as ``[-removed-]{+added+}``, with a little context around each change.

    Two texts of the same words differ in their spacing (a line break, a tab, a
    ``U+2028``), which can turn a clause into a paragraph of its own: the
    changed stretch is shown as JSON strings, since a word diff would show none.
    """
    old, new = before.split(), after.split()
    if old == new:
        return _spacing_diff(before, after)
    parts: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    opcodes = matcher.get_opcodes()
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            words = old[i1:i2]
            first, last = index == 0, index == len(opcodes) - 1
            if len(words) > 2 * _WORDS_SHOWN or ((first or last) and len(words) > _WORDS_SHOWN):
                head = [] if first else words[:_WORDS_SHOWN]
                tail = [] if last else words[-_WORDS_SHOWN:]
                parts.append(" ".join([*head, "…", *tail]).strip())
            else:
                parts.append(" ".join(words))
            continue
        if i2 > i1:
            parts.append("[-" + " ".join(old[i1:i2]) + "-]")
        if j2 > j1:
            parts.append("{+" + " ".join(new[j1:j2]) + "+}")
    return " ".join(p for p in parts if p)
