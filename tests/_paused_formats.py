"""A paused run of format 7 rewritten as an earlier veridic wrote it, for the tests that read
the earlier formats (``PausedRun.from_json`` still reads 6, 5, 4, 3 and 2)."""

from __future__ import annotations

import json
from typing import Any

from veridic import Composer, PausedRun
from veridic.run.deferred import waiting_sha256

_PARTS = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")


def as_format_6(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (what ``PausedRun.to_json()`` writes, as JSON) as format 6 has it: each
    approval's digest of the calls that wait made without the hashes of the model call that
    asked (``veridic-waiting/3``). Changed in place, and returned."""
    paused = PausedRun.from_json(json.dumps(document))
    waiting = Composer().restore(paused.conversation).build().pending_tool_calls
    dated = waiting_sha256(paused.request_id, waiting, paused.paused_at)
    for approval in document["approvals"]:
        approval["waiting_sha256"] = dated
    document["format"] = "veridic-paused-run/6"
    return document


def as_format_5(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (what ``PausedRun.to_json()`` writes, as JSON) as format 5 has it:
    without the time it paused, each approval's digest of the calls that wait made without
    it too (``veridic-waiting/2``). Changed in place, and returned."""
    paused = PausedRun.from_json(json.dumps(document))
    waiting = Composer().restore(paused.conversation).build().pending_tool_calls
    undated = waiting_sha256(paused.request_id, waiting)
    for approval in document["approvals"]:
        approval["waiting_sha256"] = undated
    del document["paused_at"]
    document["format"] = "veridic-paused-run/5"
    return document


def as_format_4(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (what ``PausedRun.to_json()`` writes, as JSON) as format 4 has it:
    without the time it paused, the options digest, the seconds and the release, and its
    usage as counts (two, or five when a part was stated). Changed in place, and returned."""
    as_format_5(document)
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
