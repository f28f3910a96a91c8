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
from pathlib import Path
from typing import Final

__all__ = ["NOT_REGULAR", "NotRegularFileError", "read_regular"]

NOT_REGULAR: Final = (
    "is not a regular file (a device, a FIFO or a socket, or a symbolic link to one), "
    "whose text may never end, so it is not read"
)


class NotRegularFileError(OSError):
    """The path names a device, a FIFO or a socket (or a link to one), not a file of text."""


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, refused unread unless it is a regular file.

    The check is made on what was opened (``fstat``), so a path swapped for a FIFO
    after a look is refused too; the open itself does not wait (``O_NONBLOCK``).

    Raises:
        NotRegularFileError: ``path`` is not a regular file.
        OSError: ``path`` cannot be opened or read.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotRegularFileError(f"{os.fspath(path)} {NOT_REGULAR}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)  # a regular file's reads never wait anyway
        file = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    with file:
        return file.read()
