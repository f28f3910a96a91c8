"""mypy's settings as mypy reads them: ``# mypy:`` comments and configuration files.

``veridic hatches`` reports where mypy's configuration turns veridic's checks
off, so it must read that configuration the way mypy does, not the way it
looks: the same file search, the same comma and quote rules in inline
comments, the same boolean spellings, the same refusals of a broken file.
The reading follows mypy 2.4's ``config_parser`` and
``util.get_mypy_comments``; this module only reads, and says nothing about
what a setting means for veridic (that is :mod:`veridic.hatches`).
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "INLINE",
    "ConfigError",
    "Section",
    "config_candidates",
    "ignores_errors",
    "inline_options",
    "read_config",
    "split_list",
]

INLINE: Final = "# mypy: "  # mypy.util.get_mypy_comments: at the start of a line, exactly so
_CONFIG_NAMES: Final = ("mypy.ini", ".mypy.ini", "pyproject.toml", "setup.cfg")  # mypy's order
_SHARED_NAMES: Final = frozenset({"pyproject.toml", "setup.cfg"})
_REPOSITORY_ROOTS: Final = (".git", ".hg")
_BOOLEANS: Final = configparser.RawConfigParser.BOOLEAN_STATES


def inline_options(text: str) -> dict[str, str]:
    """mypy's ``mypy_comments_to_config_map``: option name (``_``, lower case) to value."""
    options: dict[str, str] = {}
    for entry in _split_directive(text):
        name, sep, value = entry.partition("=")
        options[name.strip().replace("-", "_").lower()] = value.strip() if sep else "True"
    return options


def _split_directive(text: str) -> list[str]:
    """mypy's ``split_directive``: split at commas, except inside double quotes."""
    parts: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == ",":
            parts.append("".join(current).strip())
            current = []
        elif char == '"':
            index += 1
            while index < len(text) and text[index] != '"':
                current.append(text[index])
                index += 1
            if index == len(text):  # unterminated quote: mypy drops the value
                current.clear()
        else:
            current.append(char)
        index += 1
    if current:
        parts.append("".join(current).strip())
    return parts


def split_list(value: object) -> tuple[str, ...] | None:
    """A list option as mypy reads it: ``"a, b"`` or (TOML) ``["a", "b"]``; ``None`` if invalid."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(","))
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return tuple(str(part).strip() for part in value)
    return None


def _as_bool(value: object) -> bool | None:
    """A boolean option as mypy reads it (``True``, ``yes``, ``1``, ``on``...); ``None`` if not."""
    if isinstance(value, bool):
        return value
    return _BOOLEANS.get(str(value).lower())


def ignores_errors(options: Mapping[str, object]) -> str | None:
    """The key (``ignore_errors`` or ``no_ignore_errors``) that leaves errors ignored, if any.

    mypy reads the keys in order, so the last one wins; ``no_`` inverts.
    """
    chosen: str | None = None
    for key, value in options.items():
        if key in ("ignore_errors", "no_ignore_errors"):
            on = _as_bool(value)
            if on is not None:
                chosen = key if on == (key == "ignore_errors") else None
    return chosen


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a mypy configuration: ``[mypy]`` or a per-module one."""

    title: str
    modules: str | None  # None: the global section
    line: int
    options: Mapping[str, object]
    shown: Mapping[str, str]  # the value as written, for display
    lines: Mapping[str, int]


class ConfigError(Exception):
    """mypy would print this error and skip the file."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def config_candidates(start: Path) -> Iterator[Path]:
    current = start
    while True:
        for name in _CONFIG_NAMES:
            if (current / name).exists():
                yield current / name
        if any((current / root).exists() for root in _REPOSITORY_ROOTS):
            return
        if current.parent == current:
            return
        current = current.parent


def read_config(path: Path) -> tuple[Section, ...] | None:
    """The mypy sections of ``path``; ``None`` when a shared file has none (mypy skips it).

    Raises:
        ConfigError: the file cannot be read or parsed, so mypy would skip it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{type(error).__name__}: {error}", None) from error
    if path.name.lower().endswith(".toml"):
        return _read_toml(text)
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=path.name)
    except configparser.Error as error:
        raise ConfigError(f"{type(error).__name__}: {error}", _error_line(error)) from error
    if path.name in _SHARED_NAMES and not parser.has_section("mypy"):
        return None
    headers, keys = _ini_lines(text)
    sections: list[Section] = []
    for name in parser.sections():
        if name != "mypy" and not name.startswith("mypy-"):
            continue
        options = dict(parser.items(name))
        sections.append(
            Section(
                f"[{name}]",
                None if name == "mypy" else name.removeprefix("mypy-"),
                headers.get(name, 1),
                options,
                {key: " ".join(value.split()) for key, value in options.items()},
                {key: keys.get((name, key), headers.get(name, 1)) for key in options},
            )
        )
    return tuple(sections)


def _error_line(error: configparser.Error) -> int | None:
    line = getattr(error, "lineno", None)
    if isinstance(line, int):
        return line
    errors = getattr(error, "errors", None)
    if isinstance(errors, list) and errors and isinstance(errors[0][0], int):
        return errors[0][0]
    return None


def _ini_lines(text: str) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """Where each section header and each ``key =`` of an INI file is (first occurrence)."""
    headers: dict[str, int] = {}
    keys: dict[tuple[str, str], int] = {}
    section: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped[0] in "#;" or raw[0].isspace():
            continue  # blank, comment, or a continuation line
        header = re.match(r"\[(.+)\]", stripped)
        if header is not None:
            section = header.group(1)
            headers.setdefault(section, number)
            continue
        key = re.match(r"(.*?)\s*[=:]", stripped)
        if key is not None and section is not None:
            keys.setdefault((section, key.group(1).strip().lower()), number)
    return headers, keys


def _read_toml(text: str) -> tuple[Section, ...] | None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        at = re.search(r"line (\d+)", str(error))
        raise ConfigError(f"TOMLDecodeError: {error}", int(at.group(1)) if at else None) from error
    tool = data.get("tool")
    if not isinstance(tool, dict) or "mypy" not in tool:
        return None
    table = tool["mypy"]
    headers, keys = _toml_lines(text)
    if not isinstance(table, dict):
        raise ConfigError("[tool.mypy] is not a table", headers.get("mypy"))
    overrides = table.get("overrides", [])
    if not isinstance(overrides, list):  # mypy's own words
        raise ConfigError(
            "tool.mypy.overrides sections must be an array. Please make sure you are using "
            "double brackets like so: [[tool.mypy.overrides]]",
            headers.get("mypy"),
        )
    sections = [_toml_section("[tool.mypy]", None, "mypy", table, headers, keys)]
    merged: dict[str, dict[str, object]] = {}
    for index, override in enumerate(overrides):
        line = headers.get(index)
        module = override.get("module") if isinstance(override, dict) else None
        if not isinstance(override, dict) or not isinstance(module, str | list):
            raise ConfigError(
                "a [[tool.mypy.overrides]] section has no module = ... (a string or a list "
                "of strings), so mypy does not know which modules it is for",
                line,
            )
        modules = [module] if isinstance(module, str) else [str(m) for m in module]
        options = {str(k): v for k, v in override.items() if k != "module"}
        for name in modules:
            earlier = merged.setdefault(name, {})
            for key, value in options.items():
                if key in earlier and earlier[key] != value:  # mypy refuses the file
                    raise ConfigError(
                        "[[tool.mypy.overrides]] sections with conflicting values: module "
                        f"{name!r} has two different values for {key!r}",
                        line,
                    )
                earlier[key] = value
        title = f"[[tool.mypy.overrides]] module = {json.dumps(module, default=str)}"
        sections.append(_toml_section(title, ", ".join(modules), index, options, headers, keys))
    return tuple(sections)


def _toml_section(
    title: str,
    modules: str | None,
    table: str | int,
    options: Mapping[str, object],
    headers: Mapping[str | int, int],
    keys: Mapping[tuple[str | int, str], int],
) -> Section:
    header = headers.get(table, headers.get("mypy", 1))
    options = {key: value for key, value in options.items() if key != "overrides"}
    return Section(
        title,
        modules,
        header,
        options,
        {key: json.dumps(value, default=str) for key, value in options.items()},
        {key: keys.get((table, key), header) for key in options},
    )


def _toml_lines(text: str) -> tuple[dict[str | int, int], dict[tuple[str | int, str], int]]:
    """Where ``[tool.mypy]``, each ``[[tool.mypy.overrides]]`` (by index) and their keys are.

    A cheap line scan, not a TOML parser: a dotted key or an inline table
    falls back to the table's header line (or line 1).
    """
    headers: dict[str | int, int] = {}
    keys: dict[tuple[str | int, str], int] = {}
    table: str | int | None = None
    overrides = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        header = re.match(r"\s*(\[\[?)([^\]]+)\]", raw)
        if header is not None:
            name = re.sub(r"[\s\"']", "", header.group(2))
            if header.group(1) == "[[" and name == "tool.mypy.overrides":
                table = overrides
                overrides += 1
            elif header.group(1) == "[" and name == "tool.mypy":
                table = "mypy"
            else:
                table = None
            if table is not None:
                headers.setdefault(table, number)
            continue
        key = re.match(r"\s*([A-Za-z0-9_-]+)\s*=", raw)
        if key is not None and table is not None:
            keys.setdefault((table, key.group(1)), number)
    return headers, keys
