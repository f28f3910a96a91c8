"""mypy's settings as mypy reads them: ``# mypy:`` comments and configuration files.

``veridic hatches`` reports where mypy's configuration turns veridic's checks
off, so it must read that configuration the way mypy does, not the way it
looks: a setting mypy ignores (``disable-error-code`` with dashes in a
configuration file, ``Disable_Error_Code`` in ``pyproject.toml``, ``plugins``
in a per-module section, a section whose module pattern mypy refuses, a code
that ``enable_error_code`` turns back on) must not be listed as turning a
check off, and every setting mypy honours must be.

So when mypy is importable, mypy reads: :func:`read_config` hands each file
to ``mypy.config_parser.parse_config_file`` (and each section to its
``parse_section``), and :func:`inline_directives` hands each comment to
``parse_mypy_comments``, the functions mypy itself runs. What is taken from
this module's own reading is only where a setting is written (the section
header and the line of each key) and how it is spelt, for the report.

When mypy is not importable (a project that runs veridic without its
``mypy`` extra), a reader written by hand after mypy 2.4's ``config_parser``
and ``util.get_mypy_comments`` gives the same answers on every case the
tests put to both (tests/test_cli_hatches_mypy.py forces it); the one
difference known is a configuration file on which mypy itself crashes (a
``[tool.mypy]`` value of a type mypy does not expect, such as ``exclude =
1``): mypy's reading reports it as a file mypy cannot read, the hand reader
reads it. The file
search (:func:`config_candidates`) is this module's in both cases, in mypy's
order. This module only reads, and says nothing about what a setting means
for veridic (that is :mod:`veridic.checks.hatches`).
"""

from __future__ import annotations

import configparser
import io
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from veridic.checks._regular import NotRegularFileError, not_regular, open_regular

if TYPE_CHECKING:
    from mypy.options import Options

__all__ = [
    "CONFIG_NAMES",
    "INLINE",
    "ConfigError",
    "Directive",
    "Section",
    "config_candidates",
    "ignores_errors",
    "inline_directives",
    "inline_options",
    "mypy_reads",
    "read_config",
    "split_list",
]

INLINE: Final = "# mypy: "  # mypy.util.get_mypy_comments: at the start of a line, exactly so
CONFIG_NAMES: Final = ("mypy.ini", ".mypy.ini", "pyproject.toml", "setup.cfg")  # mypy's order
_SHARED_NAMES: Final = frozenset({"pyproject.toml", "setup.cfg"})
_REPOSITORY_ROOTS: Final = (".git", ".hg")
_BOOLEANS: Final = configparser.RawConfigParser.BOOLEAN_STATES
_IGNORE_KEYS: Final = ("ignore_errors", "no_ignore_errors")


def mypy_reads() -> bool:
    """Whether mypy's own parser is used (mypy is importable), or the hand-written reader."""
    return _mypy() is not None


def _mypy() -> ModuleType | None:
    """``mypy.config_parser``, imported on each call so that a test can hide it."""
    try:
        import mypy.config_parser
        import mypy.options
    except ImportError:
        return None
    return mypy.config_parser


def inline_options(text: str) -> dict[str, str] | None:
    """mypy's ``mypy_comments_to_config_map``: option name (``_``, lower case) to value.

    ``None`` when mypy crashes on the comment: two names that differ only in
    case (the same name twice is read as the last one), which mypy's
    ``configparser`` refuses as a duplicate option.
    """
    written: dict[str, str] = {}
    for entry in _split_directive(text):
        name, sep, value = entry.partition("=")
        written[name.strip().replace("-", "_")] = value.strip() if sep else "True"
    options = {name.lower(): value for name, value in written.items()}
    return options if len(options) == len(written) else None


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
    """One section of a mypy configuration: ``[mypy]`` or a per-module one.

    The first fields are the section as written; the last ones are what mypy
    makes of it, filled by :func:`read_config`: ``plugins`` (the global section's
    plugin list), ``disabled`` (the error codes this section turns off that
    stay off, in the order written), ``ignores`` (the key that leaves errors
    ignored, when mypy applies it) and ``scope`` (the module patterns for which
    this per-module section's settings hold; a pattern mypy refuses, or one a
    later section replaced, is not in it).
    """

    title: str
    modules: str | None  # None: the global section
    line: int
    options: Mapping[str, object]
    shown: Mapping[str, str]  # the value as written, for display
    lines: Mapping[str, int]
    names: tuple[str, ...] = ()  # mypy's section names: ("a,b",), or one per override module
    globs: tuple[str, ...] = ()  # the patterns mypy files the section under
    toml: bool = False
    plugins: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    ignores: str | None = None
    scope: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Directive:
    """One ``# mypy:`` comment line and what it does to its file, as mypy applies it.

    ``disabled``: the codes this line turns off that stay off (a later
    ``enable-error-code`` turns a code back on); ``ignores``: this line is the
    one that leaves the file's errors ignored (the last line setting it wins).
    """

    line: int
    text: str
    disabled: tuple[str, ...]
    ignores: bool


class ConfigError(Exception):
    """mypy would print this error and skip the file (``crashes``: mypy stops with a traceback)."""

    def __init__(
        self, message: str, line: int | None, *, crashes: bool = False, not_regular: bool = False
    ) -> None:
        super().__init__(message)
        self.line = line
        self.crashes = crashes
        self.not_regular = not_regular


def config_candidates(start: Path) -> Iterator[Path]:
    current = start
    while True:
        for name in CONFIG_NAMES:
            if (current / name).exists():
                yield current / name
        if any((current / root).exists() for root in _REPOSITORY_ROOTS):
            return
        if current.parent == current:
            return
        current = current.parent


def read_config(path: Path) -> tuple[Section, ...] | None:
    """The mypy sections of ``path`` as mypy applies them; ``None`` when mypy skips the file.

    mypy skips a shared file (``pyproject.toml``, ``setup.cfg``) without a mypy
    section, and a file it cannot parse (after printing why).

    Raises:
        ConfigError: mypy cannot parse the file (or crashes on it), so it skips it; or
            the file is no regular file (``not_regular``), and is not read at all.
    """
    _require_regular(path)
    if _mypy() is None:
        sections = _structure(path)
        return None if sections is None else _by_hand(sections)
    options = _mypy_options(path)
    if options is None:
        return None
    try:
        sections = _structure(path)
    except ConfigError:  # mypy reads what the hand reader refuses: keep mypy's word
        sections = None
    if sections is None:
        sections = _sections_of(options)
    return _with_mypy(options, sections)


def _require_regular(path: Path) -> None:
    """Refuse a configuration that is a FIFO or a link to a device before mypy's reader or
    this module's opens it: a ``mypy.ini`` linked to ``/dev/zero`` (git keeps the link)
    was read until the memory ran out, and a FIFO waited for ever.

    Raises:
        ConfigError: ``path`` is not a regular file.
    """
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise ConfigError(f"{type(error).__name__}: {error}", None) from error
    if not stat.S_ISREG(mode):
        raise ConfigError(not_regular(path.name, mode), None, not_regular=True)


def _structure(path: Path) -> tuple[Section, ...] | None:
    """The sections of ``path`` as written (where each key is), read by hand.

    The file is opened by ``open_regular``, which judges
    what was opened: one swapped for a FIFO or a device after ``_require_regular``
    looked is refused unread too.

    Raises:
        ConfigError: the file cannot be read or parsed, or is no regular file once opened.
    """
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8") as file:
            text = file.read()
    except NotRegularFileError as error:
        raise ConfigError(str(error), None, not_regular=True) from error
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
                names=() if name == "mypy" else (name.removeprefix("mypy-"),),
                globs=() if name == "mypy" else _globs(name.removeprefix("mypy-")),
            )
        )
    return tuple(sections)


def _globs(modules: str) -> tuple[str, ...]:
    """mypy's ``parse_config_file``: split at commas (no stripping), slashes read as dots."""
    found: list[str] = []
    for glob in modules.split(","):
        glob = glob.replace(os.sep, ".")
        if os.altsep:
            glob = glob.replace(os.altsep, ".")
        found.append(glob)
    return tuple(found)


def _valid_glob(glob: str) -> bool:
    """mypy's test of a per-module pattern (it prints an error and drops the section)."""
    return not (
        any(c in glob for c in "?[]!") or any("*" in x and x != "*" for x in glob.split("."))
    )


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
            raise ConfigError(  # mypy's words
                "toml config file contains a [[tool.mypy.overrides]] section, but no module "
                "to override was specified (module = a string or a list of strings)",
                line,
            )
        modules = [module] if isinstance(module, str) else [str(m) for m in module]
        options = {str(k): v for k, v in override.items() if k != "module"}
        for name in modules:
            earlier = merged.setdefault(name, {})
            for key, value in options.items():
                if key in earlier and earlier[key] != value:  # mypy refuses the file
                    raise ConfigError(  # mypy's words
                        "toml config file contains [[tool.mypy.overrides]] sections with "
                        f"conflicting values. Module '{name}' has two different values for "
                        f"'{key}'",
                        line,
                    )
                earlier[key] = value
        title = f"[[tool.mypy.overrides]] module = {json.dumps(module, default=str)}"
        section = _toml_section(title, ", ".join(modules), index, options, headers, keys)
        globs = tuple(glob for name in modules for glob in _globs(name))
        sections.append(replace(section, names=tuple(modules), globs=globs))
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
        toml=True,
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


# --- what the settings do: one model, read by mypy or by hand ---------------------------------


@dataclass(frozen=True, slots=True)
class _Effect:
    """What one group of settings asks for, read as mypy reads it."""

    disable: tuple[str, ...] = ()
    enable: tuple[str, ...] = ()
    ignore: bool | None = None  # None: not set
    plugins: tuple[str, ...] = ()

    def disabled(self) -> tuple[str, ...]:
        """The codes turned off and not turned back on (mypy: enabling overrides disabling)."""
        return tuple(dict.fromkeys(c for c in self.disable if c and c not in self.enable))


def _annotate(
    sections: tuple[Section, ...],
    overall: _Effect,
    claim: Callable[[Section], _Effect],
    effect: Callable[[str], _Effect | None],
) -> tuple[Section, ...]:
    """Fill what mypy makes of each section.

    ``overall`` is the global section's effect; ``claim(section)`` what a
    per-module section asks for on its own; ``effect(glob)`` what mypy applies
    to the modules matching ``glob`` (``None``: nothing, the pattern was
    dropped). A per-module section's setting holds for ``glob`` when mypy's
    setting for ``glob`` is the section's (a later INI section naming the same
    pattern replaces it).
    """
    done: list[Section] = []
    for section in sections:
        if section.modules is None:
            done.append(
                replace(
                    section,
                    plugins=overall.plugins,
                    disabled=overall.disabled(),
                    ignores=_ignore_key(section) if overall.ignore else None,
                )
            )
            continue
        asked = claim(section)
        codes: dict[str, None] = {}
        scope: dict[str, None] = {}
        ignored = False
        for glob in section.globs:
            applied = effect(glob)
            if applied is None:
                continue
            if asked.disable and applied.disable == asked.disable:
                held = [c for c in asked.disable if c and c not in applied.enable]
                codes.update(dict.fromkeys(held))
                if held:
                    scope[glob] = None
            if asked.ignore and applied.ignore:
                ignored = True
                scope[glob] = None
        done.append(
            replace(
                section,
                disabled=tuple(codes),
                ignores=_ignore_key(section) if ignored else None,
                scope=tuple(scope),
            )
        )
    return tuple(done)


def _ignore_key(section: Section) -> str:
    """The key written for ``ignore_errors``: the last ``ignore_errors`` or ``no_ignore_errors``."""
    key = ignores_errors(section.options)
    if key is not None:
        return key
    written = [k for k in section.options if k in _IGNORE_KEYS]
    return written[-1] if written else "ignore_errors"


# --- mypy reads -------------------------------------------------------------------------------


def _mypy_options(path: Path) -> Options | None:
    """mypy's ``parse_config_file`` on ``path``: its Options, or ``None`` when it skips the file.

    mypy prints its problems instead of raising; a file it skips with a
    message is a :class:`ConfigError` with that message. mypy's side effect on
    the environment (``MYPY_CONFIG_FILE_DIR``) is undone.

    Raises:
        ConfigError: mypy cannot parse the file, or crashes on it.
    """
    from mypy.config_parser import parse_config_file
    from mypy.options import Options

    options = Options()
    errors = io.StringIO()
    saved = os.environ.get("MYPY_CONFIG_FILE_DIR")
    try:
        parse_config_file(options, lambda: None, str(path), stdout=io.StringIO(), stderr=errors)
    except Exception as error:  # mypy's reader lets some malformed files crash it
        raise ConfigError(
            f"{type(error).__name__}: {error}", _line_of(path), crashes=True
        ) from error
    finally:
        if saved is None:
            os.environ.pop("MYPY_CONFIG_FILE_DIR", None)
        else:
            os.environ["MYPY_CONFIG_FILE_DIR"] = saved
    if options.config_file is None:
        said = errors.getvalue().strip()
        if said:
            raise ConfigError(said.removeprefix(f"{path}: "), _line_of(path, said))
        return None
    return options


def _line_of(path: Path, message: str = "") -> int | None:
    """The line of the problem in a file mypy skips: the hand reader's, or the message's."""
    try:
        _structure(path)
    except ConfigError as error:
        if error.line is not None:
            return error.line
    at = re.search(r"line (\d+)", message)
    return int(at.group(1)) if at else None


def _with_mypy(options: Options, sections: tuple[Section, ...]) -> tuple[Section, ...]:
    from mypy.config_parser import ini_config_types, parse_section, toml_config_types
    from mypy.options import PER_MODULE_OPTIONS, Options

    def of(settings: Mapping[str, object]) -> _Effect:
        ignore = settings.get("ignore_errors")
        return _Effect(
            disable=_strings(settings.get("disable_error_code")),
            enable=_strings(settings.get("enable_error_code")),
            ignore=ignore if isinstance(ignore, bool) else None,
        )

    def claim(section: Section) -> _Effect:
        types = toml_config_types if section.toml else ini_config_types
        try:
            updates, _ = parse_section(
                "", Options(), lambda: None, dict(section.options), types, io.StringIO()
            )
        except Exception:  # crashed here, but not on the whole file: it asks for nothing
            return _Effect()
        return of({k: v for k, v in updates.items() if k in PER_MODULE_OPTIONS})

    def effect(glob: str) -> _Effect | None:
        applied = options.per_module_options.get(glob)
        return None if applied is None else of(applied)

    overall = _Effect(
        disable=_strings(options.disable_error_code),
        enable=_strings(options.enable_error_code),
        ignore=options.ignore_errors,
        plugins=_strings(options.plugins),
    )
    return _annotate(sections, overall, claim, effect)


def _sections_of(options: Options) -> tuple[Section, ...]:
    """Sections rebuilt from mypy's reading alone, for a file the hand reader refuses."""
    found = [Section("[mypy]", None, 1, {}, {}, {})]
    for glob, settings in options.per_module_options.items():
        written = {
            k: v for k, v in settings.items() if k in ("disable_error_code", "ignore_errors")
        }
        shown = {k: json.dumps(v, default=str) for k, v in written.items()}
        found.append(Section(f"[mypy-{glob}]", glob, 1, written, shown, {}, globs=(glob,)))
    return tuple(found)


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


# --- the hand reader ----------------------------------------------------------------------------


def _by_hand(sections: tuple[Section, ...]) -> tuple[Section, ...]:
    """What mypy makes of ``sections``, by hand: mypy 2.4's rules, for when it is not importable."""
    main = next((s for s in sections if s.modules is None), None)
    # mypy files each section under a name (the TOML overrides of one module string are
    # merged into one, a conflict was refused), then each name's comma-separated patterns
    # in order: a later name with the same pattern replaces the earlier one.
    named: dict[str, dict[str, object]] = {}
    for section in sections:
        for name in section.names:
            named.setdefault(name, {}).update(section.options)
    merged: dict[str, dict[str, object]] = {}
    for name, options in named.items():
        for glob in _globs(name):
            if _valid_glob(glob):
                merged[glob] = options
    overall = _hand_effect(main.options if main is not None else {})
    plugins = split_list(main.options.get("plugins", "")) if main is not None else ()
    overall = replace(overall, plugins=tuple(p for p in plugins or () if p))

    def effect(glob: str) -> _Effect | None:
        return _hand_effect(merged[glob]) if glob in merged else None

    return _annotate(sections, overall, lambda s: _hand_effect(s.options), effect)


def _hand_effect(options: Mapping[str, object]) -> _Effect:
    return _Effect(
        disable=_codes(options.get("disable_error_code")),
        enable=_codes(options.get("enable_error_code")),
        ignore=ignore_setting(options),
    )


def _codes(value: object) -> tuple[str, ...]:
    """A list of codes as mypy's ``split_commas`` and ``try_split`` give it."""
    if value is None:
        return ()
    parts = split_list(value)
    if parts is None:
        return ()
    if isinstance(value, str) and parts and parts[-1] == "":
        parts = parts[:-1]  # a trailing comma
    return parts


def ignore_setting(options: Mapping[str, object]) -> bool | None:
    """``ignore_errors`` as ``options`` set it (last key wins, ``no_`` inverts); ``None``: unset."""
    chosen: bool | None = None
    for key, value in options.items():
        if key in _IGNORE_KEYS:
            on = _as_bool(value)
            if on is not None:
                chosen = on == (key == "ignore_errors")
    return chosen


# --- inline comments ------------------------------------------------------------------------------


def inline_directives(source: str) -> tuple[Directive, ...]:
    """Every ``# mypy:`` comment line of ``source``, with what it does to the file.

    mypy reads the comments of a file together: the codes they disable are
    added up, the codes they enable are taken back out, and the last one that
    sets ``ignore_errors`` decides it. With mypy importable, each line is read
    by mypy's ``parse_mypy_comments``; a line on which mypy crashes turns
    nothing off here (mypy stops on that file with an internal error).
    """
    by_mypy = _mypy() is not None
    comments = _comments(source)
    read: list[_Effect] = []
    for number, text in comments:
        if not by_mypy:
            options = inline_options(text)
            read.append(_Effect() if options is None else _hand_effect(options))
            continue
        from mypy.config_parser import mypy_comments_to_config_map, parse_mypy_comments
        from mypy.options import Options

        try:
            changes, _ = parse_mypy_comments([(number, text)], Options())
            written, _ = mypy_comments_to_config_map(text, Options())
        except Exception:  # mypy crashes on this comment (e.g. a key written twice)
            read.append(_Effect())
            continue
        ignore = changes.get("ignore_errors")
        read.append(
            _Effect(
                disable=_in_order(written, _strings(changes.get("disable_error_code"))),
                enable=_strings(changes.get("enable_error_code")),
                ignore=ignore if isinstance(ignore, bool) else None,
            )
        )
    enabled = {code for effect in read for code in effect.enable}
    last = next((i for i in reversed(range(len(read))) if read[i].ignore is not None), None)
    ignored = last is not None and read[last].ignore is True
    return tuple(
        Directive(
            number,
            INLINE + text,
            tuple(dict.fromkeys(c for c in effect.disable if c and c not in enabled)),
            ignored and index == last,
        )
        for index, ((number, text), effect) in enumerate(zip(comments, read, strict=True))
    )


def _comments(source: str) -> list[tuple[int, str]]:
    """mypy's ``get_mypy_comments``: lines starting with exactly ``# mypy: ``, anywhere."""
    if INLINE not in source:
        return []
    return [
        (number, line[len(INLINE) :])
        for number, line in enumerate(source.split("\n"), start=1)
        if line.startswith(INLINE)
    ]


def _in_order(written: Mapping[str, str], codes: tuple[str, ...]) -> tuple[str, ...]:
    """``codes`` (mypy sorts them) in the order the comment's value writes them."""
    value = next((v for k, v in written.items() if k.lower() == "disable_error_code"), "")
    order = [part.strip() for part in value.split(",")]
    position = {code: index for index, code in reversed(list(enumerate(order)))}
    return tuple(sorted(codes, key=lambda code: (position.get(code, len(order)), code)))
