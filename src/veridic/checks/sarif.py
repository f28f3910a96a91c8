"""``--format sarif``: a report as SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

``veridic lint``, ``check``, ``hatches`` and ``manifest`` write one run whose
driver is ``veridic`` (its installed version), with one rule per finding code
found (:mod:`veridic.checks.rules`: what is wrong and how to fix it) and one
result per report item:

- ``level``: a finding is ``error``, a warning ``warning``, an item listed
  for review ``note`` (the exit code is the command's, whatever the format);
- the location: the file (relative to the repository's root, the nearest
  folder above the working directory that holds ``.git``, or else to the
  working directory; forward slashes, ``uriBaseId`` ``%SRCROOT%``; a file
  outside it as a ``file:`` URI) and the line, so GitHub shows the finding at
  that line of the pull request, also when the command ran in a subfolder
  (a monorepo's ``working-directory: backend``). A
  manifest drift points at the changed entry's line of the committed file.
  The tool, when there is one, is a logical location too;
- an item Python gives no line for (a doc gap of an external tool, a coupling
  error, a component that did not start) is placed at line 1 of ``anchor``,
  the module that defines the registry, with the tool as its logical location.
  GitHub's upload refuses a whole file when one result has no physical
  location, so such an item is never left without one while an anchor is
  known; ``properties.anchored`` says it was placed so;
- ``partialFingerprints["veridic/v1"]``: a hash of the code, the tool, the
  file's path from the repository root, not percent-encoded (for an item
  without a tool), the source text and the message with line numbers taken
  out, so an alert keeps its identity when code above it moves;
- ``message.text`` is plain text with every ``\\``, ``[`` and ``]``
  backslash-escaped (SARIF 3.11.6), so outside text a message quotes (a
  drifted description's ``[text](url)``) is never shown as a link. Past 2000
  characters it is clipped, with its length (``… (N chars)``): GitHub refuses a
  whole upload past 10 MB gzipped, and one finding quoting a huge text could
  lose every alert of the run. The fingerprint is of the whole message. Every
  text in ``properties`` (a drift's old and new values, keys too, a hatch's
  source text) and the tool's name as a logical location (a committed
  manifest's, a server's) is clipped so too;
- ``automationDetails.id`` is ``veridic/COMMAND/``, so the runs of ``lint``
  and ``hatches`` uploaded for one commit are two categories, and neither
  replaces the other.

The output is deterministic: results sorted by file, line, code and message,
keys sorted, so the same findings give the same bytes. It is ASCII only (every
other character a JSON ``\\u`` escape), so a message quoting outside text (a
tool description's C1 control ``\\x9b`` or RTL override) is safe to print.

>>> class Item:
...     severity, kind, message = "error", "near-duplicate", "tools 'a' and 'b' look alike"
...     file, line, subject, text, data = "app/tools.py", 12, "a", None, ()
>>> log = json.loads(render_sarif([Item()], command="lint"))
>>> result = log["runs"][0]["results"][0]
>>> result["level"], result["locations"][0]["physicalLocation"]["region"]
('error', {'startLine': 12})
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Final, NamedTuple
from urllib.parse import quote

from veridic._sample import cut_short
from veridic.checks._ci_log import inert_json
from veridic.checks._regular import read_regular
from veridic.checks.rules import LEVELS, ReportItem, Rule, rule_for

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "render_sarif"]

SARIF_VERSION: Final = "2.1.0"
SARIF_SCHEMA: Final = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
"""The OASIS schema of SARIF 2.1.0 (with its errata), named in the log's ``$schema``."""

_SRCROOT: Final = "%SRCROOT%"
_FINGERPRINT: Final = "veridic/v1"
_LINE_NUMBERS: Final = re.compile(r"(\.py):\d+")
_MESSAGE_LIMIT: Final = 2000
"""Characters of a message kept in ``message.text``. GitHub's code scanning refuses a whole
upload past 10 MB gzipped (and a run past 25,000 results); it sets no limit of its own on
one message. A finding quoting a text of megabytes (an MCP server's description) put all of
it in its alert, and could lose every other alert of the run with it. The message is cut
by its own characters before it is escaped, so no escape is cut in two."""


def render_sarif(
    items: Iterable[ReportItem],
    *,
    command: str,
    anchor: str | None = None,
    root: str | os.PathLike[str] | None = None,
) -> str:
    """The SARIF log of one command's report items, as JSON text with a final newline.

    ``command`` names the run's category (``lint``, ``hatches``...). ``anchor``
    is the file an item without one is placed at (the registry's module). An
    item's relative path is taken from the working directory, where the command
    ran; its URI is relative to ``root`` (default: the repository the working
    directory is in, the nearest folder up that holds ``.git``), which is what
    code scanning resolves a ``%SRCROOT%`` URI against.
    """
    here = Path.cwd()
    base = _Paths(here, _repository_root(here) if root is None else Path(root).absolute())
    chosen = sorted(items, key=_order)
    rules = sorted({item.kind for item in chosen})
    index = {code: number for number, code in enumerate(rules)}
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "veridic",
                        "version": _version(),
                        "rules": [_rule_json(rule_for(code)) for code in rules],
                    }
                },
                "automationDetails": {"id": f"veridic/{command}/"},
                "results": [_result(item, index[item.kind], anchor, base) for item in chosen],
            }
        ],
    }
    # ASCII only: the log is often printed (a CI log, a terminal), and a message quotes
    # outside text, whose C1 controls and bidi overrides JSON leaves raw otherwise.
    written = json.dumps(log, indent=2, sort_keys=True, ensure_ascii=True, default=str)
    return inert_json(written) + "\n"  # printed in a CI log, obeying no ``##[`` command


class _Paths(NamedTuple):
    """Where an item's relative path starts (``cwd``) and what its URI is relative to (``root``)."""

    cwd: Path
    root: Path


def _repository_root(start: Path) -> Path:
    """The nearest folder from ``start`` up that holds ``.git`` (a folder, or a worktree's file).

    GitHub resolves a ``%SRCROOT%`` URI against the checkout, the repository's
    root. A path relative to the working directory put every finding of a
    command run in a subfolder at a file the repository does not have. Outside
    a repository, ``start`` itself.
    """
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def _version() -> str:
    try:
        return importlib.metadata.version("veridic")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        from veridic import __version__

        return __version__


def _order(item: ReportItem) -> tuple[str, int, str, str, str]:
    return (item.file or "", item.line or 0, item.kind, item.subject or "", item.message)


def _rule_json(rule: Rule) -> dict[str, object]:
    return {
        "id": rule.id,
        "name": "".join(part.capitalize() for part in rule.id.split("-")),
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.description},
        "help": {"text": rule.help, "markdown": f"**How to fix:** {rule.help}"},
        "defaultConfiguration": {"level": rule.level},
        "properties": {"tags": ["veridic"]},
    }


def _result(
    item: ReportItem, rule_index: int, anchor: str | None, root: _Paths
) -> dict[str, object]:
    data = dict(item.data)
    properties: dict[str, object] = {"severity": item.severity, **data}
    if item.subject is not None:
        properties["tool"] = item.subject
    if item.text is not None:
        properties["text"] = item.text
    properties = {key: _bounded(value) for key, value in properties.items()}
    location: dict[str, object] = {}
    logical = item.subject if item.subject is not None else _str_or_none(data.get("subject"))
    if logical is not None:
        logical = cut_short(logical, _MESSAGE_LIMIT)  # outside text: a manifest's tool
        location["logicalLocations"] = [
            {"name": logical, "fullyQualifiedName": logical, "kind": "function"}
        ]
    if item.file is not None:
        line = item.line if item.line is not None else _line_in(item, root)
        location["physicalLocation"] = _physical(item.file, line, root)
    elif anchor is not None:
        location["physicalLocation"] = _physical(anchor, 1, root)
        properties["anchored"] = "no source line is known: placed at the registry's module"
    return {
        "ruleId": item.kind,
        "ruleIndex": rule_index,
        "level": LEVELS.get(item.severity, "note"),
        "message": {"text": _plain(cut_short(item.message, _MESSAGE_LIMIT))},
        "locations": [location] if location else [],
        "partialFingerprints": {_FINGERPRINT: _fingerprint(item, root)},
        "properties": properties,
    }


def _bounded(value: object) -> object:
    """``value`` with every text in it, key or value, cut at :data:`_MESSAGE_LIMIT` as the
    message is (:func:`~veridic._sample.cut_short`), its shape kept.

    A drift's old and new values and a hatch's source text are outside text (a committed
    manifest, an MCP server's description): copied whole, one of megabytes put all of it
    in the alert, as a message did before it was cut. The fingerprint is still the whole
    item's, so two values alike in their first characters stay two alerts.
    """
    if isinstance(value, str):
        return cut_short(value, _MESSAGE_LIMIT)
    if isinstance(value, Mapping):
        return {
            cut_short(key, _MESSAGE_LIMIT) if isinstance(key, str) else key: _bounded(element)
            for key, element in value.items()
        }
    if isinstance(value, list | tuple):
        return [_bounded(element) for element in value]
    return value


def _plain(text: str) -> str:
    """``text`` as a SARIF plain-text message: every backslash and square bracket escaped.

    SARIF 2.1.0 (3.11.6) reads ``[words](target)`` in a message as an embedded
    link, which a viewer (a code-scanning alert) shows as one. A message quotes
    outside text (a drifted description, a tool's name, a path), so a link there
    would be the attacker's, shown on the alert as veridic's. No veridic message
    holds a link of its own. The backslash is escaped too: escaping only the
    brackets turns an outside ``\\[`` into ``\\\\[``, an escaped backslash
    followed by a bracket that opens a link again.
    """
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _physical(file: str, line: int, root: _Paths) -> dict[str, object]:
    return {"artifactLocation": _artifact(file, root), "region": {"startLine": max(line, 1)}}


def _artifact(file: str, root: _Paths) -> dict[str, str]:
    """A path under the root as a URI reference under ``%SRCROOT%``; a file outside it absolute."""
    relative = _relative(file, root)
    if relative is None:
        return {"uri": Path(os.path.normpath(root.cwd / file)).resolve().as_uri()}
    return {"uri": quote(relative, safe="/"), "uriBaseId": _SRCROOT}


def _relative(file: str, root: _Paths) -> str | None:
    """``file`` relative to the root, with forward slashes; ``None`` for a file outside it.

    Taken apart as written first (a file under a linked folder keeps the path the
    report gave), then with links resolved.
    """
    path = Path(os.path.normpath(root.cwd / file))
    for candidate, top in ((path, root.root), (path.resolve(), root.root.resolve())):
        try:
            return PurePath(candidate.relative_to(top)).as_posix()
        except ValueError:
            continue
    return None


def _fingerprint(item: ReportItem, root: _Paths) -> str:
    """The alert's identity: the path is hashed as the report names it, not percent-encoded.

    Run at the repository's root, that is the path the report gave, as before the
    URIs were taken from the root: an alert of a file in ``my app/`` keeps its
    identity. A file outside the root is hashed as the report gave it.
    """
    file = ""
    if item.subject is None and item.file is not None:
        file = _relative(item.file, root) or item.file
    parts: Sequence[str] = (
        item.kind,
        item.subject or "",
        file,
        item.text or "",
        _LINE_NUMBERS.sub(r"\1", item.message),
    )
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _line_in(item: ReportItem, root: _Paths) -> int:
    """For a manifest drift, the line of the changed entry in the committed file; else 1.

    The manifest is JSON with sorted keys and one item per line, so a tool's
    entry starts at the line ``"NAME": {`` and its field at the next line
    ``"FIELD":`` after it. An entry the file does not hold (an added tool) is
    placed at its table's line.
    """
    if item.kind != "drift" or item.file is None:
        return 1
    data = dict(item.data)
    subject, field = _str_or_none(data.get("subject")), _str_or_none(data.get("field"))
    if subject is None:
        return 1
    table, _, name = subject.partition(" ")
    keys = {"tool": "tools", "component": "components"}
    path = root.cwd / item.file
    try:
        lines = read_regular(path).decode("utf-8").splitlines()  # a link to /dev/zero never ends
    except (OSError, UnicodeDecodeError):
        return 1
    wanted = [f"{json.dumps(keys.get(table, 'risk_counts'))}:"]
    if table in keys:
        wanted.append(f"{json.dumps(name, ensure_ascii=False)}:")
    if field is not None and table in keys:
        wanted.append(f"{json.dumps(field)}:")
    found, start = 1, 0
    for key in wanted:
        for number in range(start, len(lines)):
            if lines[number].lstrip().startswith(key):
                found, start = number + 1, number + 1
                break
        else:
            break
    return found
