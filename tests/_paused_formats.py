"""A paused run of format 5 rewritten as an earlier veridic wrote it, for the tests that read
the earlier formats (``PausedRun.from_json`` still reads 4, 3 and 2)."""

from __future__ import annotations

from typing import Any

_PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")


def as_format_4(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (what ``PausedRun.to_json()`` writes, as JSON) as format 4 has it:
    without the options digest, the seconds and the release, and its usage as counts (two,
    or five when a part was stated). Changed in place, and returned."""
    for key in ("options_sha256", "seconds", "release"):
        del document[key]
    document["format"] = "veridic-paused-run/4"
    usage = document["usage"]
    if isinstance(usage, dict):
        counts = [usage["input_tokens"], usage["output_tokens"]]
        stated = usage["stated"]
        parts = [usage[part] for part in _PARTS]
        broken_down = any(parts) if stated is None else bool(stated)
        document["usage"] = counts + parts if broken_down else counts
    return document
