"""Process-wide settings, and the ``[tool.veridic]`` table they and the CI command read.

Two settings, both read where an application starts:

- ``mode``: ``"enforce"`` (the default) raises :class:`~veridic.errors.ProvenanceError` when
  text that is not trusted reaches an instruction position; ``"report"`` logs
  the violation on the ``veridic`` logger and lets it pass, for migrating an
  existing application one warning at a time. Report mode never mints: the
  text stays untrusted, so a later enforcing check still sees it.
- ``trust_policies``: the names :class:`~veridic.TrustPolicy` may use. Unless set with
  :func:`configure`, it is read once from ``[tool.veridic] trust-policies`` of
  the nearest ``pyproject.toml`` above the working directory; ``None`` (no
  such key) allows any name. A policy's name is checked when it is made and at
  every vouch, against the list in force then. The mode is never read from a file.

:func:`tool_section` is the one reader of ``[tool.veridic]`` in this package
(the mypy plugin uses it too, from the file nearest to mypy's
configuration). :func:`read_tool_config` validates the whole
table for the ``veridic`` command: every key has one type, and a key veridic
does not know is an error, because a typo (``trust_policies``,
``similarity_threshold``) would otherwise leave its setting at the default
without a word, and a check the team believes configured would pass. The run
time reads only ``trust-policies`` and does not judge the other keys: a typo
in a CI setting fails CI, not the application's start.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
import unicodedata
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Final, Literal, cast

from veridic._counted import counted
from veridic._sample import escaped
from veridic.errors import VeridicError

__all__ = [
    "KEYS",
    "Mode",
    "Settings",
    "ToolConfig",
    "configure",
    "configured",
    "find_pyproject",
    "is_policy_name",
    "mode_in_force",
    "read_tool_config",
    "settings",
    "tool_section",
    "trust_policies_of",
]

Mode = Literal["enforce", "report"]
_MODES: Final = ("enforce", "report")

KEYS: Final = ("trust-policies", "similarity-threshold", "siblings", "manifest")
"""The keys of ``[tool.veridic]``; any other key is refused by :func:`read_tool_config`."""

_EXAMPLES: Final = {
    "trust-policies": 'trust-policies = ["legacy-prompts"]',
    "similarity-threshold": "similarity-threshold = 0.7",
    "siblings": 'siblings = [["archive_ticket", "close_ticket"]]',
    "manifest": 'manifest = "veridic-manifest.json"',
}
_SHOWN: Final = 80
_POLICY_RULE: Final = (
    "must be a list of strings, each a policy name (printable, with no space around it, "
    "no character drawn as nothing, accents composed)"
)
# Printable to Python and drawn as nothing: the members of Default_Ignorable_Code_Point
# that isprintable() lets through and the blank glyphs (the fence's list of them,
# veridic.text.fence, which this bottom module cannot import).
_INVISIBLE_IN_NAME: Final = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef\u2800\U00016fe4\U0001d159]"
)


@dataclass(frozen=True, slots=True)
class Settings:
    """A snapshot of the settings; :func:`configure` returns the previous one."""

    mode: Mode = "enforce"
    trust_policies: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """``[tool.veridic]`` of one ``pyproject.toml``, validated (``None``: the key is absent).

    ``siblings`` holds each group as a set of two or more tool names;
    ``manifest`` is resolved against the directory of ``path``. ``table`` is
    whether ``path`` has a ``[tool.veridic]`` table at all (an empty one counts).
    """

    path: Path
    table: bool = True
    trust_policies: frozenset[str] | None = None
    similarity_threshold: float | None = None
    siblings: tuple[frozenset[str], ...] = ()
    manifest: Path | None = None


class _Unset:
    pass


_UNSET: Final = _Unset()
_current: Settings | None = None
_scoped: Final[ContextVar[Settings | None]] = ContextVar("veridic_settings", default=None)

_Policies = frozenset[str] | set[str] | list[str] | tuple[str, ...] | None


def settings() -> Settings:
    """The settings in force: a :func:`configured` block's, else the process's (read from
    ``pyproject.toml`` on first use)."""
    scoped = _scoped.get()
    return _process_settings() if scoped is None else scoped


def configure(
    *,
    mode: Mode | _Unset = _UNSET,
    trust_policies: _Policies | _Unset = _UNSET,
) -> Settings:
    """Change the settings for this process and return the previous ones.

    Inside a :func:`configured` block the block's settings stay in force; the change
    applies to the process once the block ends.

    >>> previous = configure(mode="report")
    >>> settings().mode
    'report'
    >>> _ = configure(mode=previous.mode)

    Raises:
        VeridicError: ``mode`` is not a mode; ``trust_policies`` is not a list (or
            set, or tuple) of policy names (:func:`is_policy_name`); or, on first use,
            the ``pyproject.toml`` read for the previous settings is malformed, or the
            working directory it is looked for from is gone.
    """
    global _current
    previous = _process_settings()
    _current = _changed(previous, mode, trust_policies, "configure")
    return previous


@contextmanager
def configured(
    *,
    mode: Mode | _Unset = _UNSET,
    trust_policies: _Policies | _Unset = _UNSET,
) -> Iterator[Settings]:
    """Settings for the code inside the ``with`` block only, and yield them.

    For tests and for processes that serve several tenants: the settings live in a
    context variable, so they hold in this thread and in the asyncio tasks started
    inside the block (tasks copy the context), not in other threads (a thread starts
    with an empty context: it sees the process's settings), and a block inside a
    block wins until it ends. A task started inside keeps the block's settings after
    the block ends. A block held open across a ``yield`` of a generator is in force for
    the code that consumes it until the generator resumes and leaves the block (a
    generator runs in its caller's context): a pytest fixture does this on purpose;
    elsewhere, enter the block around the code it is for.

    >>> with configured(mode="report"):
    ...     settings().mode
    'report'
    >>> settings().mode
    'enforce'

    Raises:
        VeridicError: ``mode`` is not a mode; ``trust_policies`` is not a list (or
            set, or tuple) of policy names (:func:`is_policy_name`).
    """
    token = _scoped.set(_changed(settings(), mode, trust_policies, "configured"))
    try:
        yield settings()
    finally:
        _scoped.reset(token)


def mode_in_force() -> Mode:
    """The mode in force, read without ``pyproject.toml`` (which sets no mode).

    For the check at every instruction position: its refusal must be the
    :class:`~veridic.errors.ProvenanceError` it is, not an error about a malformed
    ``pyproject.toml`` in the working directory, or about a working directory deleted
    under a running service.
    """
    scoped = _scoped.get()
    if scoped is not None:
        return scoped.mode
    return "enforce" if _current is None else _current.mode


def _process_settings() -> Settings:
    global _current
    if _current is None:
        _current = Settings(trust_policies=_policies_from_pyproject(_working_directory()))
    return _current


def _working_directory() -> Path:
    try:
        return Path.cwd()
    except OSError as error:
        raise VeridicError(
            f"cannot read the working directory ({error}; a deploy may have removed it "
            "under the running process): veridic reads [tool.veridic] trust-policies from "
            "the nearest pyproject.toml above it: set the list at start with "
            "veridic.configure(trust_policies=[...]) (None allows any name), from a "
            "working directory that exists"
        ) from error


def _changed(
    previous: Settings, mode: Mode | _Unset, trust_policies: _Policies | _Unset, where: str
) -> Settings:
    new_mode = previous.mode if isinstance(mode, _Unset) else mode
    if new_mode not in _MODES:
        raise VeridicError(
            f"{where}(mode={new_mode!r}) is not a mode; "
            'use "enforce" (raise on untrusted instructions) or "report" (log and let pass)'
        )
    policies = previous.trust_policies
    if not isinstance(trust_policies, _Unset):
        policies = None if trust_policies is None else _policies_in_code(trust_policies, where)
    return Settings(mode=new_mode, trust_policies=policies)


def _policies_in_code(names: object, where: str) -> frozenset[str]:
    """``names`` given to :func:`configure` or :func:`configured`, checked as the
    ``pyproject.toml`` list is: a string was read as the set of its characters, so
    ``TrustPolicy("l")`` was allowed and the policy the string named was refused."""
    problem = (
        _policy_problem(names)
        if isinstance(names, list | tuple | set | frozenset)
        else f", got {_found(names)}"
    )
    if problem is not None:
        raise VeridicError(
            f"{where}(trust_policies=...) {_POLICY_RULE}{problem}: pass the allowed names "
            f'as a list, e.g. {where}(trust_policies=["legacy-prompts"]), or None to '
            "allow any name"
        )
    return frozenset(cast("frozenset[str]", names))


def _policies_from_pyproject(start: Path) -> frozenset[str] | None:
    candidate = find_pyproject(start)
    if candidate is None:
        return None
    return trust_policies_of(tool_section(candidate), candidate)


def trust_policies_of(section: dict[str, object], path: Path) -> frozenset[str] | None:
    """The ``trust-policies`` list of a ``[tool.veridic]`` table read from ``path``
    (``None``: no such key, any name is allowed).

    Raises:
        VeridicError: the value is not a list of policy names (:func:`is_policy_name`).
    """
    names = section.get("trust-policies")
    if names is None:
        return None
    if not isinstance(names, list):
        raise _wrong("trust-policies", path, _POLICY_RULE, names)
    problem = _policy_problem(names)
    if problem is not None:
        raise _wrong("trust-policies", path, _POLICY_RULE, names, problem)
    return frozenset(names)


def _policy_problem(names: Collection[object]) -> str | None:
    """What is wrong with a list of policy names (``None``: nothing), as the end of a message.

    A name a reviewer cannot read as it is (an invisible or control character, a space
    around it) would allow a door that looks like another in every list of them.
    """
    ordered = names if isinstance(names, list | tuple) else sorted(names, key=repr)
    for index, name in enumerate(ordered, start=1):
        if not is_policy_name(name):
            what = "an empty name" if name == "" else _name_found(name)
            return f"; item {index} is {what}"
    return None


def is_policy_name(name: object) -> bool:
    """Whether ``name`` may name a :class:`~veridic.TrustPolicy`: non-empty printable text
    with no space around it, read the same by a reviewer and by ``==``.

    So no character a reader does not see (one Python calls printable too: a Hangul
    filler, a variation selector) and no decomposed accent (``"cafe\u0301"`` reads as
    ``"café"`` and is not equal to it): either names a door that reads as another.
    """
    return (
        type(name) is str
        and name != ""
        and name.isprintable()
        and name == name.strip()
        and _INVISIBLE_IN_NAME.search(name) is None
        and unicodedata.is_normalized("NFC", name)
    )


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` or above it, or ``None``."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def tool_section(path: Path) -> dict[str, object]:
    """The ``[tool.veridic]`` table of ``path`` (empty when absent), its values unchecked.

    Raises:
        VeridicError: the file cannot be read or is not valid TOML, or ``tool``
            or ``tool.veridic`` is not a table.
    """
    return _section_of(_document(path), path)


def _document(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise VeridicError(
            f"{path} is not valid TOML ({error}); veridic reads [tool.veridic] from it: "
            "fix the file"
        ) from error
    except OSError as error:
        raise VeridicError(
            f"cannot read {path} ({error}); veridic reads [tool.veridic] from it: make it "
            "readable, or pass another file with --config"
        ) from error


def _section_of(document: dict[str, object], path: Path) -> dict[str, object]:
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise VeridicError(
            f"tool in {path} must be a table, got {_found(tool)}: write the settings as a "
            "[tool.veridic] section with one key per line"
        )
    section = tool.get("veridic", {})
    if not isinstance(section, dict):
        raise VeridicError(
            f"[tool.veridic] in {path} must be a table, got {_found(section)}: "
            "write it as a [tool.veridic] section with one key per line"
        )
    return section


def read_tool_config(path: Path) -> ToolConfig:
    """Read and validate every key of ``[tool.veridic]`` in ``path``.

    Raises:
        VeridicError: the file is unreadable or not TOML, a key is unknown (the
            message suggests the known key it is closest to), or a value has
            the wrong type or range (the message names the key, the file, what
            was found and what to write instead).
    """
    document = _document(path)
    section = _section_of(document, path)
    misplaced = None if "veridic" in _table_of(document, "tool") else _misplaced(document)
    if misplaced is not None:
        raise VeridicError(
            f"{path} has no [tool.veridic] table but has [{misplaced}]: veridic reads its "
            f"settings only from [tool.veridic], so the ones under [{misplaced}] would be "
            "left at their defaults without a word (no trust-policies check, no manifest): "
            "rename the table to [tool.veridic]"
        )
    for key in section:
        if key not in KEYS:
            raise VeridicError(_unknown_key(key, path))
    threshold = section.get("similarity-threshold")
    manifest = _manifest(section.get("manifest"), path)
    return ToolConfig(
        path=path,
        table="veridic" in _table_of(document, "tool"),
        trust_policies=trust_policies_of(section, path),
        similarity_threshold=None if threshold is None else _threshold(threshold, path),
        siblings=_siblings(section.get("siblings", []), path),
        manifest=None if manifest is None else path.parent / manifest,
    )


def _table_of(document: dict[str, object], key: str) -> dict[str, object]:
    table = document.get(key)
    return table if isinstance(table, dict) else {}


def _misplaced(document: dict[str, object]) -> str | None:
    """The table a ``[tool.veridic]`` was meant to be, misspelt or misplaced, or ``None``.

    ``[tool.veridc]``, ``[tool.Veridic]``, ``[tools.veridic]``, a top-level
    ``[veridic]``: each reads as the settings to a person and as nothing to
    veridic. ``[tool.veridic-mypy]`` (the mypy plugin's) is not one.
    """
    for name in _table_of(document, "tool"):
        if name.lower().startswith(("veridic-", "veridic_")):
            continue
        if difflib.get_close_matches(name.lower(), ["veridic"], n=1, cutoff=0.8):
            return f"tool.{name}"
    for name, value in document.items():
        if name == "tool" or not isinstance(value, dict):
            continue
        if difflib.get_close_matches(name.lower(), ["veridic"], n=1, cutoff=0.8):
            return name
        if not difflib.get_close_matches(name.lower(), ["tool"], n=1, cutoff=0.75):
            continue
        for inner in value:
            if difflib.get_close_matches(str(inner).lower(), ["veridic"], n=1, cutoff=0.8):
                return f"{name}.{inner}"
    return None


# --- one validator per key ----------------------------------------------------------------


def _threshold(value: object, path: Path) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or not 0 < value <= 1
    ):
        raise _wrong("similarity-threshold", path, "must be a number above 0 and at most 1", value)
    return float(value)


def _siblings(groups: object, path: Path) -> tuple[frozenset[str], ...]:
    rule = "must be a list of groups, each a list of two or more different tool names"
    if not isinstance(groups, list):
        raise _wrong("siblings", path, rule, groups)
    found: list[frozenset[str]] = []
    for index, group in enumerate(groups, start=1):
        if not isinstance(group, list):
            raise _wrong("siblings", path, rule, groups, f"; group {index} is {_found(group)}")
        bad = next((n for n in group if not isinstance(n, str) or not n.strip()), None)
        if bad is not None:
            what = "an empty name" if isinstance(bad, str) else _found(bad)
            raise _wrong("siblings", path, rule, groups, f"; group {index} holds {what}")
        if len(set(group)) < 2:
            raise _wrong(
                "siblings",
                path,
                rule,
                groups,
                f"; group {index} names {counted(len(set(group)), 'different tool')}",
            )
        found.append(frozenset(group))
    return tuple(found)


def _manifest(value: object, path: Path) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _wrong(
            "manifest", path, "must be the path of the committed snapshot, a string", value
        )
    return value


def _wrong(key: str, path: Path, rule: str, value: object, detail: str = "") -> VeridicError:
    return VeridicError(
        f"[tool.veridic] {key} in {path} {rule}, got {_found(value)}{detail}: "
        f"write it as {_EXAMPLES[key]}"
    )


def _unknown_key(key: str, path: Path) -> str:
    close = difflib.get_close_matches(key.replace("_", "-").lower(), KEYS, n=1, cutoff=0.6)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"[tool.veridic] in {path} has an unknown key {key!r}: {guess}veridic reads only "
        f"{', '.join(KEYS)}, and an unread key would leave its setting at the default "
        "without a word: rename the key, or remove it"
    )


def _found(value: object) -> str:
    """A clipped ``repr`` of a TOML value with its TOML type, e.g. ``'high' (a string)``."""
    shown = repr(value)
    if len(shown) > _SHOWN:
        shown = shown[: _SHOWN - 1] + "…"
    return f"{shown} ({_toml_type(value)})"


def _name_found(name: object) -> str:
    """A refused policy name as :func:`_found` gives it, with a character outside ASCII
    written as its code: ``repr`` writes a Hangul filler as itself, drawn as nothing."""
    if not isinstance(name, str):
        return _found(name)
    return f"{escaped(name, _SHOWN)} ({_toml_type(name)})"


def _toml_type(value: object) -> str:
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (list, "an array"),
        (dict, "a table"),
        ((datetime, date, time), "a date-time"),
    )
    return next((word for kind, word in kinds if isinstance(value, kind)), type(value).__name__)
