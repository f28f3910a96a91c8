"""A count and its noun in agreement, for every report veridic prints.

One helper, so that no report says ``1 warnings`` or hedges with ``call(s)``:
a reviewer reads a count beside the rows it counts, and a noun that does not
agree with it is one more thing to doubt.
"""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun singular for exactly one: ``1 warning``, ``0 warnings``.

    ``plural`` is the plural when adding ``s`` does not make it (``"entries"``),
    as for a phrase whose head noun comes first
    (``counted(n, "call of a tool", "calls of a tool")``); ``"write call"`` needs none.

    >>> counted(1, "warning"), counted(0, "finding"), counted(2, "entry", "entries")
    ('1 warning', '0 findings', '2 entries')
    """
    return f"{count} {noun if count == 1 else noun + 's' if plural is None else plural}"
