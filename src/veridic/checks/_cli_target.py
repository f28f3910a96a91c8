"""The application's code as the commands run it: ``MODULE:ATTR`` imported, its failures told apart.

A target that raises a ``VeridicError`` while it registers or boots its tools
is a finding (``boot``, exit 1): the registry itself is broken. Anything else
that stops it (a module that is not there, a wrong attribute, ``sys.exit()`` at
import or in a boot check) is a usage error (exit 2) that names the
application's line, never a pass: a CI gate must not go green because the code
it checks ended the process. Every path into the application's code needs that
same distinction, so it lives in one place.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from veridic._words import a_type
from veridic.checks._cli_config import _Config
from veridic.checks._cli_report import _Item, _Report, _UsageError
from veridic.errors import VeridicError
from veridic.text.provenance import is_trusted, provenance
from veridic.tools.registry import Registry
from veridic.tools.view import ToolView


def _guarded(
    command: Callable[[argparse.Namespace, _Config], _Report],
    args: argparse.Namespace,
    config: _Config,
) -> _Report:
    """Run ``command``; the application's code stopping the process is a usage error, not a pass.

    The registry commands run the application's code: its import (handled in
    :func:`_import`, which names the module), then whatever the checks call
    (a component's boot check, a module ``__getattr__``, an annotation).
    ``sys.exit()`` there, with any code, would end the command with that code
    (``sys.exit(0)``: a green CI run that checked nothing), so it is caught and
    reported with exit 2, as is any other ``BaseException`` that is not an
    ``Exception``. ``KeyboardInterrupt`` still interrupts.
    """
    try:
        return command(args, config)
    except (Exception, KeyboardInterrupt):
        raise
    except SystemExit as stop:
        raise _UsageError(
            f"the application's code {_exit_call(stop)}{_where(stop)} while veridic "
            f"{args.command} ran it (a component's boot check, a module __getattr__, an "
            f"annotation), so nothing was checked and the command cannot pass: "
            f"{_NO_SIDE_EFFECTS}"
        ) from stop
    except BaseException as error:  # GeneratorExit, CancelledError, a BaseException of its own
        raise _UsageError(
            f"the application's code raised {type(error).__name__}: {error}{_where(error)} "
            f"while veridic {args.command} ran it, so nothing was checked: fix the code, or "
            "point veridic at a module that only defines the registry"
        ) from error


_NO_SIDE_EFFECTS: Final = (
    "keep side effects out of import time and boot checks (put a script's work under "
    'if __name__ == "__main__":, and report a failed boot by raising an Exception), or '
    "point veridic at a module that only defines the registry"
)


def _exit_call(stop: SystemExit) -> str:
    """``called sys.exit(0)``, ``called sys.exit()``: what the code did, with its exit code."""
    shown = "" if stop.code is None else repr(stop.code)
    return f"called sys.exit({shown}) (raised SystemExit)"


def _anchor(args: argparse.Namespace) -> str | None:
    """The file of the target's module (imported by now), where SARIF places an item without one.

    ``None`` for ``hatches`` (every hatch has its file) and when the module has no file.
    """
    spec = getattr(args, "target", None)
    if not isinstance(spec, str) or ":" not in spec:
        return None
    module = sys.modules.get(spec.partition(":")[0])
    filename = getattr(module, "__file__", None)
    return _display(filename) if isinstance(filename, str) else None


class _BootFailure(Exception):
    """Importing the target raised a ``VeridicError``: the registry itself is broken (exit 1)."""

    def __init__(self, error: VeridicError, where: tuple[str | None, int | None]) -> None:
        super().__init__(str(error))
        self.error = error
        self.where = where


def _load_target(spec: str) -> Registry | ToolView:
    """Import ``MODULE:ATTR`` (``ATTR`` may be dotted) and check it is a Registry or ToolView.

    The working directory is put on ``sys.path`` first, as ``python -m`` does,
    so ``veridic lint app.tools:registry`` works from a project's root.

    Raises:
        _UsageError: malformed spec, module or attribute not importable, wrong type.
        _BootFailure: the module raised a ``VeridicError`` while registering its tools
            (a duplicate name, a risk below its floor): a finding, not a usage error.
    """
    module_name, sep, attr_path = spec.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if not sep or not module_name or not attr_path:
        raise _UsageError(f"target {spec!r} is not MODULE:ATTR: {_what_to_name(module_name)}")
    module = _import(module_name)
    obj: object = module
    walked = module_name
    for part in attr_path.split("."):
        try:
            found = hasattr(obj, part)
            if found:
                obj = getattr(obj, part)
        except SystemExit as stop:  # a module __getattr__ or a property that exits
            raise _UsageError(
                f"reading {part!r} of {walked} {_exit_call(stop)}{_where(stop)}, so veridic "
                f"could not reach the registry and the command cannot pass: {_NO_SIDE_EFFECTS}"
            ) from stop
        except VeridicError as error:  # a registry built on first access, refusing a tool
            raise _BootFailure(error, _user_frame(error)) from error
        except Exception as error:  # a module __getattr__ or a property that fails
            raise _UsageError(
                f"reading {part!r} of {walked} raised {type(error).__name__}: {error}"
                f"{_where(error)}: fix the code that computes it, or point veridic at an "
                "object defined at the module's top level"
            ) from error
        if not found:
            raise _UsageError(
                f"{walked} has no attribute {part!r} (module file "
                f"{_display(getattr(module, '__file__', None))}); "
                f"{_candidates(module)}"
            )
        walked = f"{walked}.{part}" if walked != module_name else f"{module_name}:{part}"
    if not isinstance(obj, Registry | ToolView):
        raise _UsageError(
            f"{spec} is {_kind(obj)}, not a veridic Registry or ToolView: "
            f"point at the object your tools are registered on; "
            f"{_candidates(module)}"
        )
    return obj


@dataclass(frozen=True, slots=True)
class _Targets:
    """What a command's target names: the types it takes, and how to tell the user so."""

    types: tuple[type, ...]
    holder: str
    """What is written after the colon, as a message names it."""
    example: str
    """A whole command with a target, for the general advice."""

    @property
    def described(self) -> str:
        """The types by name: ``Registry or ToolView``."""
        return " or ".join(kind.__name__ for kind in self.types)


_REGISTRIES: Final = _Targets(
    (Registry, ToolView), "the object that holds the tools", "veridic lint myapp.tools:registry"
)
"""The targets of the registry commands (lint, manifest, check, show)."""


def _what_to_name(written: str, targets: _Targets = _REGISTRIES) -> str:
    """What to write for a target without ``:ATTR``: the targets of the module it names.

    ``pkg.mod`` that is a module gets its objects of ``targets``' types as targets;
    ``pkg.mod.registry`` (a dot where the colon goes) gets those of ``pkg.mod``. The
    module is imported as the command would import it, so its failures are reported as
    the command reports them. A name that is no module keeps the general advice.
    """
    general = f"name the module and {targets.holder}, e.g. {targets.example}"
    parent, _, tail = written.rpartition(".")
    for name in (written, parent):
        if not all(part.isidentifier() for part in name.split(".")):
            continue
        module = _module_or_missing(name)
        if isinstance(module, ModuleNotFoundError):
            continue
        names = _target_names(module, targets)
        if not names:
            return f"{general}; module {name} defines no {targets.described} at its top level"
        meant = [tail] if name == parent and tail in names else names
        shown = " or ".join(f"{name}:{attr}" for attr in meant)
        return f"write {targets.holder} after a colon: {shown}"
    return general


def _target_names(module: object, targets: _Targets = _REGISTRIES) -> list[str]:
    """The names of the module's top-level objects of ``targets``' types, sorted."""
    return sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, targets.types) and not name.startswith("__")
    )


def _kind(obj: object) -> str:
    """The type of ``obj`` as the user wrote it, with its article: a brand by its public name."""
    if isinstance(obj, str) and type(obj) is not str:
        if is_trusted(obj):
            return "a TrustedInstruction (a str)"
        if provenance(obj).kind == "untrusted":
            return "an UntrustedText (a str)"
    return a_type(obj)


def _import(module_name: str) -> object:
    module = _module_or_missing(module_name)
    if isinstance(module, ModuleNotFoundError):
        missing = module.name or module_name
        raise _UsageError(
            f"cannot import module {module_name!r}: no module named {missing!r} "
            f"(searched from {os.getcwd()} and sys.path): check the spelling, run veridic "
            "from the project root, or install the package into this environment"
        ) from module
    return module


def _module_or_missing(module_name: str) -> object:
    """The module imported, or the ``ModuleNotFoundError`` saying it (or a package above it)
    is not there; anything else its import raises is reported as :func:`_import` says."""
    try:
        return importlib.import_module(module_name)
    except VeridicError as error:
        raise _BootFailure(error, _user_frame(error)) from error
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        if missing == module_name or module_name.startswith(f"{missing}."):
            return error
        return _import_failed(module_name, error)
    except SystemExit as stop:  # sys.exit() at import, any code: never a pass
        raise _UsageError(
            f"importing module {module_name!r} {_exit_call(stop)}{_where(stop)}, so veridic "
            "could not check its tools (stopping with that code would pass CI without any "
            f"check): {_NO_SIDE_EFFECTS}"
        ) from stop
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # anything else the module raised: report it, do not crash
        return _import_failed(module_name, error)


def _import_failed(module_name: str, error: BaseException) -> object:
    raise _UsageError(
        f"importing module {module_name!r} raised {type(error).__name__}: {error}"
        f"{_where(error)}: "
        "fix the error (run `python -c 'import "
        f"{module_name}'` to see the traceback), or point veridic at a module that imports "
        "cleanly"
    ) from error


def _user_frame(error: BaseException) -> tuple[str | None, int | None]:
    """The innermost traceback frame outside veridic and importlib, where the error began."""
    if isinstance(error, SyntaxError) and error.filename:
        return _display(error.filename), error.lineno
    frames = _outside_frames(error)
    return frames[-1] if frames else (None, None)


def _where(error: BaseException) -> str:
    """`` at file:line`` where ``error`` began, and the application's line that led there.

    When the error began in another file than the one veridic's call entered
    (``argparse`` parsing veridic's own arguments at import, a helper module),
    the entry line is named too: ``at argparse.py:2630 (reached from app.py:7)``.
    """
    file, line = _user_frame(error)
    if file is None:
        return ""
    frames = _outside_frames(error)
    first = frames[0] if frames else (file, line)
    reached = f" (reached from {first[0]}:{first[1]})" if first != (file, line) else ""
    return f" at {file}:{line}{reached}"


def _outside_frames(error: BaseException) -> list[tuple[str, int | None]]:
    """The traceback's frames outside veridic and importlib, outermost first."""
    package = str(Path(__file__).resolve().parent.parent)  # veridic, not just its checks
    return [
        (_display(frame.filename), frame.lineno)
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(package)
        and not frame.filename.startswith("<frozen")
        and "importlib" not in frame.filename
    ]


def _candidates(module: object) -> str:
    names = _target_names(module)
    if not names:
        return "that module defines no Registry or ToolView at its top level"
    return "Registry/ToolView objects there: " + ", ".join(names)


def _display(filename: str | None) -> str:
    if filename is None:
        return "<unknown>"
    with contextlib.suppress(ValueError):
        return Path(filename).resolve().relative_to(Path.cwd().resolve()).as_posix()
    return filename


def _boot_item(failure: _BootFailure) -> _Item:
    file, line = failure.where
    return _Item(
        "error",
        "boot",
        f"{type(failure.error).__name__}: {failure.error}",
        file=file,
        line=line,
    )


@contextlib.contextmanager
def _booting(report: _Report) -> Iterator[None]:
    """Turn a registry that fails to import or boot into a finding on ``report``."""
    try:
        yield
    except _BootFailure as failure:
        report.items.append(_boot_item(failure))
    except VeridicError as error:  # raised by the registry while resolving or booting
        report.items.append(_boot_item(_BootFailure(error, _user_frame(error))))
