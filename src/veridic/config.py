"""Process-wide settings: enforcement mode and the allowed trust policies.

Two settings, both read where an application starts:

- ``mode``: ``"enforce"`` (the default) raises :class:`ProvenanceError` when
  text that is not trusted reaches an instruction position; ``"report"`` logs
  the violation on the ``veridic`` logger and lets it pass, for migrating an
  existing application one warning at a time. Report mode never mints: the
  text stays untrusted, so a later enforcing check still sees it.
- ``trust_policies``: the names :class:`TrustPolicy` may use. Unless set with
  :func:`configure`, it is read once from ``[tool.veridic] trust-policies`` of
  the nearest ``pyproject.toml`` above the working directory; ``None`` (no
  such key) allows any name.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from veridic.errors import VeridicError

__all__ = ["Mode", "Settings", "configure", "settings"]

Mode = Literal["enforce", "report"]
_MODES: Final = ("enforce", "report")


@dataclass(frozen=True, slots=True)
class Settings:
    """A snapshot of the settings; :func:`configure` returns the previous one."""

    mode: Mode = "enforce"
    trust_policies: frozenset[str] | None = None


class _Unset:
    pass


_UNSET: Final = _Unset()
_current: Settings | None = None


def settings() -> Settings:
    """The settings in force, reading ``pyproject.toml`` on first use."""
    global _current
    if _current is None:
        _current = Settings(trust_policies=_policies_from_pyproject(Path.cwd()))
    return _current


def configure(
    *,
    mode: Mode | _Unset = _UNSET,
    trust_policies: frozenset[str]
    | set[str]
    | list[str]
    | tuple[str, ...]
    | _Unset
    | None = _UNSET,
) -> Settings:
    """Change the settings for this process and return the previous ones.

    >>> previous = configure(mode="report")
    >>> settings().mode
    'report'
    >>> _ = configure(mode=previous.mode)
    """
    previous = settings()
    new_mode = previous.mode if isinstance(mode, _Unset) else mode
    if new_mode not in _MODES:
        raise VeridicError(
            f"configure(mode={new_mode!r}) is not a mode; "
            'use "enforce" (raise on untrusted instructions) or "report" (log and let pass)'
        )
    policies = previous.trust_policies
    if not isinstance(trust_policies, _Unset):
        policies = None if trust_policies is None else frozenset(trust_policies)
    global _current
    _current = Settings(mode=new_mode, trust_policies=policies)
    return previous


def _policies_from_pyproject(start: Path) -> frozenset[str] | None:
    candidate = find_pyproject(start)
    return None if candidate is None else _read_policies(candidate)


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` or above it, or ``None``."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def tool_section(path: Path) -> dict[str, object]:
    """The ``[tool.veridic]`` table of ``path`` (empty when absent).

    Raises:
        VeridicError: the file is not valid TOML, or the section is not a table.
    """
    with path.open("rb") as handle:
        try:
            document = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise VeridicError(
                f"{path} is not valid TOML ({error}); veridic reads [tool.veridic] from it: "
                "fix the file or call veridic.configure(trust_policies=...) before first use"
            ) from error
    section = document.get("tool", {}).get("veridic", {})
    if not isinstance(section, dict):
        raise VeridicError(
            f"[tool.veridic] in {path} must be a table, got {section!r}: "
            "write it as a [tool.veridic] section with one key per line"
        )
    return section


def _read_policies(path: Path) -> frozenset[str] | None:
    names = tool_section(path).get("trust-policies")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise VeridicError(
            f"[tool.veridic] trust-policies in {path} must be a list of strings, "
            f'got {names!r}: write it as trust-policies = ["legacy-prompts"]'
        )
    return frozenset(names)
