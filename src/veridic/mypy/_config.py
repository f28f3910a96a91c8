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
"""

from __future__ import annotations

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
    """Read the settings for this mypy run, with the run time's own reader and rules."""
    from veridic.config import find_pyproject, tool_section, trust_policies_of
    from veridic.errors import VeridicError

    start = Path(options.config_file).resolve().parent if options.config_file else Path.cwd()
    path = find_pyproject(start)
    if path is None:
        return PolicySettings()
    try:
        names = trust_policies_of(tool_section(path), path)
    except VeridicError as error:
        return PolicySettings(source=str(path), problem=str(error))
    return PolicySettings(names, str(path))
