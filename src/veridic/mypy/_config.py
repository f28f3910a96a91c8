"""The ``[tool.veridic] trust-policies`` list, as mypy's run finds it.

The run time reads the nearest ``pyproject.toml`` above the working directory
(``veridic.config``). The plugin reads the nearest one above the mypy
configuration file in use (the directory mypy was started in when there is
none), which is the same file for a project whose ``mypy.ini`` or
``pyproject.toml`` sits at its root.

A file that cannot be read is not fatal to mypy: the problem is kept and
reported where a ``TrustPolicy`` name needed the list.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from mypy.options import Options


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """The allowed ``TrustPolicy`` names and where they were read."""

    names: frozenset[str] | None = None
    """``None``: no list configured, any literal name is allowed."""
    source: str | None = None
    problem: str | None = None
    """Why the list could not be read, for the message at each ``TrustPolicy``."""


def read(options: Options) -> PolicySettings:
    """Read the settings for this mypy run."""
    start = Path(options.config_file).resolve().parent if options.config_file else Path.cwd()
    path = _nearest_pyproject(start)
    if path is None:
        return PolicySettings()
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        return PolicySettings(source=str(path), problem=f"{path} cannot be read as TOML ({error})")
    tool = document.get("tool", {})
    section = tool.get("veridic", {}) if isinstance(tool, dict) else {}
    names = section.get("trust-policies") if isinstance(section, dict) else None
    if names is None:
        return PolicySettings(source=str(path))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return PolicySettings(
            source=str(path),
            problem=(
                f"[tool.veridic] trust-policies in {path} must be a list of strings, "
                f'got {names!r}: write it as trust-policies = ["legacy-prompts"]'
            ),
        )
    return PolicySettings(frozenset(names), str(path))


def _nearest_pyproject(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None
