"""Read a file of the repository only when it is a regular file.

The checks read files a pull request controls: the code ``veridic hatches``
scans, mypy's configuration beside it, the committed manifest. Git keeps
symbolic links, so any of them may be a link to ``/dev/zero`` or
``/dev/urandom``, whose text never ends (the read took the runner's memory and
died with a ``MemoryError`` traceback), or a FIFO, whose open waits for a writer
that never comes. What is not a regular file is refused before a byte of it is
read, with :class:`NotRegularFileError`, an ``OSError`` that the callers already
turn into a finding or a usage error.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["NotRegularFileError", "not_regular", "open_regular", "read_regular"]

_KINDS: Final[tuple[tuple[Callable[[int], bool], str], ...]] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(OSError):
    """The path names a directory, a device, a FIFO or a socket (or a link to one)."""


def not_regular(name: str, mode: int) -> str:
    """Why ``name``, of ``st_mode`` ``mode``, is not read: what it is, not a guess (a
    folder was called "a device, a FIFO or a socket")."""
    kind = next((kind for test, kind in _KINDS if test(mode)), "no file of text")
    endless = "" if stat.S_ISDIR(mode) else ", whose text may never end"
    return (
        f"{name} is not a regular file but {kind} (or a symbolic link to one){endless}, "
        "so it is not read"
    )


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, refused unless it is a regular file.

    The check is made on what was opened (``fstat``), so a path swapped for a FIFO
    after a look is refused too; the open itself does not wait (``O_NONBLOCK``).

    Raises:
        NotRegularFileError: ``path`` is not a regular file.
        OSError: ``path`` cannot be opened.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(not_regular(os.fspath(path), mode))
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)  # a regular file's reads never wait anyway
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, refused unread unless it is a regular file (see
    :func:`open_regular`).

    Raises:
        NotRegularFileError: ``path`` is not a regular file.
        OSError: ``path`` cannot be opened or read.
    """
    with open_regular(path) as file:
        return file.read()
