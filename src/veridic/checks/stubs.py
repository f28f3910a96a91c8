"""``veridic stubs DIR``: the SDK overlay stubs for pyright, written where its ``stubPath`` points.

pyright and basedpyright run no plugins, so the ``veridic-sdk`` rule of the
mypy plugin cannot reach them. The package ships, as data (not modules),
overlay stubs of the ``openai`` and ``anthropic`` SDKs in which the parameters
and message types that give the model instructions take a
``TrustedInstruction`` (scripts/generate_stubs.py makes them from pinned SDK
versions). :func:`write_stubs` copies them into a folder of their own; with
``"stubPath": "DIR"`` pyright then reads them instead of the SDK modules they
cover, and an ``UntrustedText`` passed as a system prompt is an error there.

What a caller must know:

- The stubs describe one version of each SDK (``VERSIONS``, read back as
  ``StubsWritten.sdks``); another installed version keeps its own
  signatures only in the modules the stubs do not cover, so the CLI warns
  when they differ.
- The folder may hold other stubs (``typings/`` usually does): only its
  ``openai/`` and ``anthropic/`` trees and ``VERSIONS`` are veridic's, and
  those must be new or what an earlier ``veridic stubs`` wrote (recognised by
  the generator's first line). A file of someone else's there is refused with
  :class:`StubFolderError` and nothing is changed; an earlier run's files the
  new stubs no longer have are removed.

>>> import tempfile
>>> from pathlib import Path
>>> with tempfile.TemporaryDirectory() as tmp:
...     written = write_stubs(Path(tmp) / "typings")
...     again = write_stubs(written.directory)  # its own earlier output: replaced
...     [sdk.name for sdk in again.sdks], (written.directory / "openai").is_dir()
(['anthropic', 'openai'], True)
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import Final

from veridic._counted import counted
from veridic.checks._replacing import _replace
from veridic.errors import VeridicError

__all__ = ["SDKS", "SdkVersion", "StubFolderError", "StubsWritten", "shipped_stubs", "write_stubs"]

SDKS: Final = ("anthropic", "openai")
"""The SDKs the stubs overlay, each a top-level folder of the stubs."""

VERSIONS_FILE: Final = "VERSIONS"
_SHIPPED: Final = "_sdk_stubs"
_GENERATOR: Final = "scripts/generate_stubs.py"
"""Named on the first line of every file the generator writes: how earlier output is known."""
_SHOWN: Final = 5


class StubFolderError(VeridicError):
    """The folder cannot take the stubs: it holds files veridic did not write, or is no folder."""


@dataclass(frozen=True, slots=True)
class SdkVersion:
    """One SDK: the version its stubs were generated from, and the one installed (or ``None``)."""

    name: str
    generated: str
    installed: str | None

    @property
    def differs(self) -> bool:
        """Whether an installed SDK is another version than the stubs describe."""
        return self.installed is not None and self.installed != self.generated


@dataclass(frozen=True, slots=True)
class StubsWritten:
    """What :func:`write_stubs` did: the files written and removed, relative to ``directory``."""

    directory: Path
    written: tuple[PurePosixPath, ...]
    removed: tuple[PurePosixPath, ...]
    sdks: tuple[SdkVersion, ...]

    def summary(self) -> str:
        """What was written, for which SDK versions, and the ``stubPath`` line to add."""
        generated = " and ".join(f"{sdk.name} {sdk.generated}" for sdk in self.sdks)
        installed = ", ".join(f"{sdk.name} {sdk.installed or 'not installed'}" for sdk in self.sdks)
        lines = [
            f"wrote {counted(len(self.written), 'file')} to {self.directory}: the overlay stubs of "
            f"{generated} (the SDK versions they were generated for; installed here: "
            f"{installed})"
        ]
        if self.removed:
            lines.append(
                f"removed {counted(len(self.removed), 'file')} of an earlier veridic stubs: "
                + ", ".join(map(str, self.removed))
            )
        folder = json.dumps(str(self.directory))
        default = (
            " (typings is pyright's default: needed only if the configuration sets another)"
            if self.directory == Path("typings")
            else ""
        )
        lines.append(
            f'point pyright at them: "stubPath": {folder} in pyrightconfig.json, or '
            f"stubPath = {folder} in [tool.pyright] (or [tool.basedpyright]) of "
            f"pyproject.toml{default}"
        )
        return "\n".join(lines) + "\n"

    def warnings(self) -> list[str]:
        """One sentence per installed SDK of another version than its stubs describe."""
        return [
            f"{sdk.name} {sdk.installed} is installed, but its stubs were generated for "
            f"{sdk.name} {sdk.generated}: pyright reads the stubs instead of the modules they "
            f"cover, so it may misjudge or miss what changed in between; install "
            f"{sdk.name}=={sdk.generated}, or generate stubs for {sdk.installed} from a veridic "
            "checkout (python scripts/generate_stubs.py --out DIR)"
            for sdk in self.sdks
            if sdk.differs
        ]


def shipped_stubs() -> dict[PurePosixPath, str]:
    """Every file of the shipped stubs (the ``.pyi`` files and ``VERSIONS``), by relative path."""
    found: dict[PurePosixPath, str] = {}
    shipped = files("veridic") / _SHIPPED
    if shipped.is_dir():
        _collect(shipped, PurePosixPath(), found)
    if PurePosixPath(VERSIONS_FILE) not in found:
        raise VeridicError(
            f"veridic's package data has no {_SHIPPED}/{VERSIONS_FILE} (package at "
            f"{files('veridic')}): the installation is incomplete; reinstall veridic"
        )
    return found


def _collect(node: Traversable, relative: PurePosixPath, found: dict[PurePosixPath, str]) -> None:
    for child in node.iterdir():
        path = relative / child.name
        if child.is_dir():
            _collect(child, path, found)
        elif child.name == VERSIONS_FILE or child.name.endswith(".pyi"):
            found[path] = child.read_text(encoding="utf-8")


def _generated_versions(versions_text: str) -> dict[str, str]:
    pairs = (line.partition("==") for line in versions_text.splitlines())
    return {name.strip(): version.strip() for name, sep, version in pairs if sep}


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def write_stubs(directory: Path) -> StubsWritten:
    """Write the shipped SDK stubs into ``directory``, creating it, replacing an earlier run's.

    Each stub is written to a new file renamed over its name, never into the file
    there: a link planted after the folder was looked at is replaced, not followed,
    and another hard link to an earlier stub keeps its content.

    Raises:
        StubFolderError: ``directory`` is not a folder, holds files an earlier
            ``veridic stubs`` did not write (nothing is changed then), or
            cannot be written.
    """
    stubs = shipped_stubs()
    if directory.exists() and not directory.is_dir():
        raise StubFolderError(
            f"{directory} is not a folder: pass a folder for the stubs (it is created when "
            "missing), and point pyright's stubPath at it"
        )
    ours, foreign = _survey(directory) if directory.is_dir() else ([], [])
    if foreign:
        listed = ", ".join(str(directory / path) for path in foreign[:_SHOWN])
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        raise StubFolderError(
            f"{directory} holds {counted(len(foreign), 'file')} veridic stubs did not write where "
            f"its stubs go ({listed}{more}), and the stubs would replace them: move those files "
            f"out of {directory}, or write the stubs into a folder of their own (veridic "
            f"stubs {directory}-veridic, say) and point stubPath at it; nothing was changed"
        )
    removed = tuple(sorted(path for path in ours if path not in stubs))
    try:
        for path in removed:
            (directory / path).unlink()
        _prune(directory)
        for path, text in sorted(stubs.items()):
            target = directory / path
            target.parent.mkdir(parents=True, exist_ok=True)
            _replace(target, text.encode("utf-8"))
    except OSError as error:
        raise StubFolderError(
            f"cannot write the stubs into {directory}: {error}: choose a folder you can write"
        ) from error
    generated = _generated_versions(stubs[PurePosixPath(VERSIONS_FILE)])
    return StubsWritten(
        directory=directory,
        written=tuple(sorted(stubs)),
        removed=removed,
        sdks=tuple(
            SdkVersion(name, generated.get(name, "unknown"), _installed(name)) for name in SDKS
        ),
    )


def _survey(directory: Path) -> tuple[list[PurePosixPath], list[PurePosixPath]]:
    """The files where the stubs go: an earlier run's, and the others (links count as others).

    Only ``VERSIONS`` and the SDKs' trees are looked at: the rest of the folder is
    the user's (stubs of other packages) and is left alone.
    """
    ours: list[PurePosixPath] = []
    foreign: list[PurePosixPath] = []
    versions = directory / VERSIONS_FILE
    if versions.exists() or versions.is_symlink():
        path = PurePosixPath(VERSIONS_FILE)
        (ours if _is_ours(versions, path) else foreign).append(path)
    for sdk in SDKS:
        top = directory / sdk
        if top.is_symlink() or (top.exists() and not top.is_dir()):
            foreign.append(PurePosixPath(sdk))
        elif top.is_dir():
            _survey_tree(directory, top, ours, foreign)
    return sorted(ours), sorted(foreign)


def _survey_tree(
    directory: Path, top: Path, ours: list[PurePosixPath], foreign: list[PurePosixPath]
) -> None:
    for root, folders, names in os.walk(top):
        here = Path(root)
        for name in sorted(names):
            path = PurePosixPath((here / name).relative_to(directory).as_posix())
            (ours if _is_ours(here / name, path) else foreign).append(path)
        for name in sorted(folders):
            if (here / name).is_symlink():
                foreign.append(PurePosixPath((here / name).relative_to(directory).as_posix()))


def _is_ours(file: Path, path: PurePosixPath) -> bool:
    """Whether ``file`` is a stub or ``VERSIONS`` file that scripts/generate_stubs.py wrote."""
    if file.is_symlink() or not file.is_file():
        return False
    if path != PurePosixPath(VERSIONS_FILE) and not (
        path.parts[0] in SDKS and path.suffix == ".pyi"
    ):
        return False
    try:
        with file.open(encoding="utf-8") as opened:
            first = opened.readline(300)
    except (OSError, UnicodeDecodeError):
        return False
    return first.startswith("# ") and _GENERATOR in first


def _prune(directory: Path) -> None:
    """Remove the SDK folders an earlier run left empty (the stubs of a module now gone)."""
    for sdk in SDKS:
        top = directory / sdk
        if not top.is_dir():
            continue
        for root, _folders, _names in os.walk(top, topdown=False):
            folder = Path(root)
            if folder != top and not any(folder.iterdir()):
                folder.rmdir()
