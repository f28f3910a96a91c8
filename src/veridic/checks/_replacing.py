"""Replace a file by renaming a new one over its name, never by writing into it.

Opening an existing name for writing follows a symbolic link put there (before,
or between a check and the write) and writes into the file it names, and writes
into a file another hard link shares. Here the data goes into a file created new
(``O_EXCL``: it cannot be a link, nor another's file) in the same folder, and
``os.replace`` renames it over the name: that replaces the name's entry, whatever
it held, and never writes into it. What to refuse at the name (a link, a folder,
a read-only file) is the caller's decision; this module only writes.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Final

_NEW: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
_NAME_KEPT: Final = 32
"""Characters of the target's name the new file's name holds: enough to tell what it
was for, short enough that a name as long as the folder allows still has room."""


def _replace(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to a new file in ``path``'s folder and rename it to ``path``.

    The new file takes ``mode``, or is created as any new file is (``0o666`` less
    the umask); it is removed if anything fails, and the ``OSError`` is raised.
    """
    temporary = path.with_name(f".{path.name[:_NAME_KEPT]}.{secrets.token_hex(8)}.tmp")
    descriptor = os.open(temporary, _NEW, 0o666)
    try:
        try:
            if mode is not None and os.chmod in os.supports_fd:
                os.chmod(descriptor, mode)
            _write_all(descriptor, data)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_all(descriptor: int, data: bytes) -> None:
    """Write all of ``data``: one ``os.write`` may take only part of it (a pipe, a signal)."""
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]
