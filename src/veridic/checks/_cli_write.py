"""How ``-o FILE`` writes: a new file beside the target, renamed over its name.

Checking a path and then opening it for writing leaves a gap: a symbolic link put
there in between (or before, in a folder others can write) is followed, and the
report goes into whatever file it names. So no existing file is opened for
writing here. The text goes into a file created new (``O_EXCL``: it cannot be a
link, nor another's file) in the target's folder, and ``os.replace`` renames it
over the name, which replaces the name's entry and never writes into the file it
held (another hard link to that file keeps its content). The new file takes the
replaced file's permissions, less its set-uid and set-gid bits; a file its owner
cannot write (``chmod 444``) is refused rather than replaced, since the rename
asks only the folder.

A link at the name is refused rather than replaced: the user who made it meant
the file it names, and replacing the link would quietly change their layout.
A device or a pipe (``/dev/null``, ``/dev/stdout``, a shell's ``>(...)``) is
written into, since nothing there can be replaced: it is opened without creating
anything, and refused if what was opened is a regular file after all. A pipe no
program reads is refused too: opening it for writing would wait for a reader
forever.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from pathlib import Path
from typing import Final

from veridic.checks._cli_report import _UsageError
from veridic.checks._replacing import _replace, _write_all
from veridic.text.terminal_view import visible

_EXISTING: Final = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
"""Without waiting: a pipe with no reader fails (``ENXIO``) rather than blocks."""


def _write_output(path: Path, text: str) -> bool:
    """Write ``text`` (UTF-8) to ``path`` as ``-o`` asks; return whether a file was replaced.

    Raises :class:`_UsageError` for a link or a folder at ``path``, and for any
    path that cannot be written, naming it and saying what to pass instead.
    """
    shown = visible(str(path), None)
    data = _encoded(text, shown)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    except OSError as error:
        raise _cannot(shown, error) from error
    if found is not None and stat.S_ISLNK(found.st_mode):
        _write_through_link_to_a_stream(path, shown, data)
        return False
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise _UsageError(
            f"cannot write {shown}: it is a folder: name a file in it "
            f"(-o {shlex.quote(f'{shown}/NAME')})"
        )
    if found is not None and not stat.S_ISREG(found.st_mode):
        _write_stream(path, shown, data)
        return False
    mode = None if found is None else _kept_mode(found.st_mode, shown)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace(path, data, mode)
    except OSError as error:
        raise _cannot(shown, error) from error
    return found is not None


def _kept_mode(found: int, shown: str) -> int:
    """The permissions the new file takes from the file it replaces, which must be writable.

    A file whose owner has no write bit (``chmod 444``) was made read-only on purpose;
    the rename needs only the folder's write permission, so it was replaced without a
    word. The set-uid and set-gid bits are dropped, as ``cp`` drops them on a file it
    creates: the new file belongs to whoever runs veridic (root in many CI containers),
    so a set-uid bit kept would let anyone who can run the report run it as them.
    """
    if not found & stat.S_IWUSR:
        raise _UsageError(
            f"-o {shown} is read-only (mode {stat.filemode(found)}), so veridic does not "
            f"replace it: make it writable first (chmod u+w {shlex.quote(shown)}) if it may be "
            "replaced, or choose another file with -o"
        )
    return stat.S_IMODE(found) & ~(stat.S_ISUID | stat.S_ISGID)


def _write_through_link_to_a_stream(path: Path, shown: str, data: bytes) -> None:
    """A link to a device or a pipe (``/dev/stdout``, ``/dev/fd/63``) is written into;
    a link to a file, a folder or nothing is refused (see the module's docstring)."""
    try:
        named = os.stat(path)
    except OSError:
        named = None
    if named is not None and not stat.S_ISREG(named.st_mode) and not stat.S_ISDIR(named.st_mode):
        _write_stream(path, shown, data)
        return
    try:
        target = visible(os.readlink(path), None)
    except OSError:  # removed or replaced meanwhile: still not a file to write through
        target = "a path that changed while veridic looked"
    raise _UsageError(
        f"-o {shown} is a symbolic link (to {target}): veridic does not write through a "
        "link, which may name another file by the time it writes: pass the file itself "
        f"(-o {shlex.quote(visible(os.path.realpath(path), None))}), or remove the link"
    )


def _write_stream(path: Path, shown: str, data: bytes) -> None:
    """Write into a device or a pipe that exists; never create, never write a regular file."""
    try:
        descriptor = os.open(path, _EXISTING)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise _UsageError(
                f"-o {shown} is a pipe no program reads, so writing it would wait forever: "
                "start the program that reads it first, or choose a file with -o"
            ) from error
        raise _cannot(shown, error) from error
    try:
        os.set_blocking(descriptor, True)  # a full pipe is waited on, not an error
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise _UsageError(
                f"-o {shown} became a regular file while veridic opened it, so nothing was "
                "written: run the command again"
            )
        _write_all(descriptor, data)
    except OSError as error:
        raise _cannot(shown, error) from error
    finally:
        os.close(descriptor)


def _encoded(text: str, shown: str) -> bytes:
    """``text`` in UTF-8, before anything is opened; a character UTF-8 cannot hold (a lone
    surrogate, from an escape such as ``\\ud800`` in a docstring) is a usage error naming
    it, not a traceback."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise _UsageError(
            f"cannot write {shown}: the text holds {visible(error.object[error.start], None)} "
            f"(character {error.start}), which UTF-8 cannot encode ({error.reason}), so nothing "
            "was written: remove it from the text it comes from (a tool's description, a "
            "document's message)"
        ) from error


def _cannot(shown: str, error: OSError) -> _UsageError:
    reason = error.strerror or str(error)
    return _UsageError(f"cannot write {shown}: {reason}: choose a writable path with -o")
