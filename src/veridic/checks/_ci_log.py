"""JSON that GitHub's runner prints as it is, obeying none of it.

The runner reads the legacy workflow command ``##[command]data`` anywhere in a
line of a job's log (``##[add-mask]`` hides text, ``##[error]`` forges an
annotation), and a report veridic prints there quotes outside text: a path, a
description, an audit record. The JSON reports (``--format json``) and the SARIF
log both write theirs through :func:`inert_json`; the text report makes its lines
inert in :mod:`veridic.checks._cli_report`.
"""

from __future__ import annotations

__all__ = ["inert_json"]


def inert_json(text: str) -> str:
    """JSON ``text`` with every ``##[`` written ``##\\u005b``: the same document, read back.

    ``##[`` stands only inside a JSON string (no token of JSON starts with ``#``),
    where ``\\u005b`` is the same bracket.

    >>> inert_json('{"file": "##[error]x.py"}')
    '{"file": "##\\\\u005berror]x.py"}'
    """
    return text.replace("##[", "##\\u005b")
