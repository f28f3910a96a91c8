"""Ids that the writer of a record makes, so a retry carries the same one."""

from __future__ import annotations

import os
import re
from typing import Final

__all__ = ["ID", "new_id"]

ID: Final = re.compile(r"[0-9a-f]{32}")
"""What :func:`new_id` makes, to check an id a record was given back or altered to hold."""


def new_id() -> str:
    """A record's own id: 128 random bits as 32 hex digits, made by the writer, not the store.

    Made when the record is, so the record keeps it through a retry, and any
    store (one file, a server several hosts write to) can refuse a second
    copy without asking the others.
    """
    return os.urandom(16).hex()
