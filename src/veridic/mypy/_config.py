"""The ``[tool.veridic] trust-policies`` list, as mypy's run finds it.

The run time reads the nearest ``pyproject.toml`` above the working directory
(``veridic.config``). The plugin reads the nearest one above the mypy
configuration file in use (the directory mypy was started in when there is
none), which is the same file for a project whose ``mypy.ini`` or
``pyproject.toml`` sits at its root.

The file is found and read by ``veridic.config`` (one reader, one set of rules for
the run time, the command line and the plugin). A file that cannot be read is not
fatal to mypy: the problem is kept and reported where a ``TrustPolicy`` name
needed the list.

Like pydantic's plugin, this one also reads a section of mypy's own configuration
file: ``[veridic-mypy]`` in ``mypy.ini`` or ``setup.cfg`` (``trust_policies =
legacy-prompts, support``, comma- or line-separated) or ``[tool.veridic-mypy]`` in
``pyproject.toml`` (a list). It wins over ``[tool.veridic]`` for the plugin; but the
run time reads only ``[tool.veridic]``, so when both hold a list and the lists differ
that is a problem (the plugin would pass names the run time refuses), reported like an
unreadable file. A key the section does not know is a problem too (a typo would
leave the list unchecked without a word).
"""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mypy.options import Options


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """The allowed ``TrustPolicy`` names and where they were read."""

    names: frozenset[str] | None = None
    """``None``: no list configured, any literal name is allowed."""
    source: str | None = None
    problem: str | None = None
    """Why the list could not be read, for the message at each ``TrustPolicy``."""


SECTION: Final = "veridic-mypy"
_KEYS: Final = ("trust_policies", "trust-policies")


def read(options: Options) -> PolicySettings:
    """Read the settings for this mypy run, with the run time's own reader and rules."""
    config = Path(options.config_file).resolve() if options.config_file else None
    shared = _from_pyproject(config.parent if config is not None else Path.cwd())
    own = None if config is None else _from_mypy_config(config)
    if own is None:
        return shared
    if own.problem is not None:
        return own
    if shared.problem is None and shared.names is not None and shared.names != own.names:
        return PolicySettings(
            source=own.source,
            problem=(
                f"the trust-policies of [{SECTION}] in {own.source} ({_listed(own.names)}) and "
                f"of [tool.veridic] in {shared.source} ({_listed(shared.names)}) differ, and "
                "the run time reads only [tool.veridic]: keep one list, in [tool.veridic]"
            ),
        )
    return own


def _from_pyproject(start: Path) -> PolicySettings:
    from veridic.config import find_pyproject, tool_section, trust_policies_of
    from veridic.errors import VeridicError

    path = find_pyproject(start)
    if path is None:
        return PolicySettings()
    try:
        names = trust_policies_of(tool_section(path), path)
    except VeridicError as error:
        return PolicySettings(source=str(path), problem=str(error))
    return PolicySettings(names, str(path))


def _from_mypy_config(path: Path) -> PolicySettings | None:
    """The plugin's section of mypy's configuration file (``None``: there is none)."""
    try:
        if path.suffix == ".toml":
            tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {})
            section = tool.get(SECTION) if isinstance(tool, dict) else None
            if section is None:
                return None
            if not isinstance(section, dict):
                return _problem(path, f"[tool.{SECTION}] must be a table")
            values: dict[str, object] = dict(section)
        else:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(path, encoding="utf-8")
            if not parser.has_section(SECTION):
                return None
            values = {
                key: re.split(r"\s*[,\n]\s*", raw.strip()) for key, raw in parser.items(SECTION)
            }
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, configparser.Error) as error:
        return _problem(path, f"it cannot be read ({error})")
    unknown = sorted(set(values) - set(_KEYS))
    if unknown:
        return _problem(
            path, f"[{SECTION}] has no key {unknown[0]!r}: the one key is trust_policies"
        )
    names = next((values[key] for key in _KEYS if key in values), None)
    if not isinstance(names, list):
        return _problem(path, f"[{SECTION}] trust_policies must list policy names")
    unreadable = _unreadable(names)
    if unreadable is not None:
        return _problem(path, unreadable)
    return PolicySettings(frozenset(names), str(path))


def _unreadable(names: list[object]) -> str | None:
    """What is wrong with the section's names by the run time's rule
    (:func:`veridic.config.is_policy_name`), or ``None``: a name the plugin passed and
    the run time refused would be found only when the policy is made."""
    from veridic._sample import escaped
    from veridic.config import is_policy_name

    for index, name in enumerate(names, start=1):
        if not is_policy_name(name):
            return (
                f"[{SECTION}] trust_policies must list policy names a reviewer can read as "
                "they are (printable, with no space around them, no character drawn as "
                f"nothing, accents composed); item {index} is {escaped(name)}"
            )
    return None


def _problem(path: Path, what: str) -> PolicySettings:
    return PolicySettings(
        source=str(path),
        problem=f"{path}: {what}; write it as [{SECTION}] trust_policies = legacy-prompts, support",
    )


def _listed(names: frozenset[str] | None) -> str:
    return ", ".join(sorted(names or ())) or "none"
