"""Pins: how code vouches for an external tool's text, and what a pin covers.

An external tool's description and input schema are written by someone else
(an MCP server, an OpenAPI document), so they are untrusted: the model must
not read them as instruction. A pin, written in code after a person reviewed
the tool, makes that text trusted for as long as it is the text reviewed: the
pin is computed again from what the spec says when the tool is resolved, and
a tool whose text changed is withheld (``description_trust`` ``"changed"``)
rather than trusted. A :func:`description_pin` covers the description; a
:func:`tool_pin` covers all the model is shown of the tool (its name,
description and input schema).

Code outside the registry computes pins too (a reviewer pinning a tool, the
MCP client's pin file), so they have a module of their own, below
:mod:`veridic.tools.tool`; every name here is also importable from there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Final, Literal

from veridic._sample import clip
from veridic.errors import ProvenanceError, VeridicError
from veridic.text.provenance import is_untrusted, source_of
from veridic.tools.input_schema import JsonObject

__all__ = ["DescriptionTrust", "PinScope", "description_pin", "tool_pin"]

DescriptionTrust = Literal["code", "pinned", "unpinned", "changed"]
"""Where a tool's description comes from: code (trusted), an external spec
pinned by hash in code (trusted), an external spec not pinned (untrusted), or
an external spec whose text no longer matches its pin (withheld)."""

PinScope = Literal["", "description", "tool"]
"""What an external tool's pin covers: nothing (no pin), its description only
(:func:`description_pin`), or everything the model is shown of it: name,
description and input schema (:func:`tool_pin`). A pin that no longer matches
keeps its scope, and the tool's ``description_trust`` is ``"changed"``."""

_PIN: Final = re.compile(r"sha256:[0-9a-f]{64}")
_TOOL_PIN: Final = re.compile(r"tool-sha256:[0-9a-f]{64}")


def description_pin(description: str) -> str:
    """The pin of an external description: ``"sha256:"`` + hex digest of its UTF-8 bytes.

    A pin says a person reviewed the text: compute it once from the reviewed text and
    write the result in code (or record it in a pins file).

    >>> pin = description_pin("Search the web.")
    >>> pin[:7], len(pin)
    ('sha256:', 71)

    Raises:
        ProvenanceError: ``description`` is branded untrusted: a pin computed at run
            time from outside text matches whatever the text is, and vouches for nothing.
        VeridicError: the text is not valid Unicode.
    """
    _refuse_unreviewed("description_pin()", description)
    return _description_pin(description)


def _description_pin(description: str) -> str:
    try:
        encoded = description.encode("utf-8")
    except UnicodeEncodeError as error:
        raise VeridicError(
            f"description {clip(description)} is not valid Unicode text ({error.reason} at "
            f"character {error.start}), so it cannot be pinned or sent to a provider: "
            "repair the text where the tool is described (a lone surrogate is the usual cause)"
        ) from error
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _refuse_unreviewed(where: str, *texts: object) -> None:
    """Refuse to pin text branded untrusted (a pin of it, made at run time, vouches for
    whatever it says: the trap of ``pin=tool_pin(name, ...)`` written beside the spec)."""
    for text in texts:
        if is_untrusted(text):
            raise ProvenanceError(
                f"{where} got text branded untrusted (source {source_of(text)!r}): "
                f"{clip(text)}; a pin says a person reviewed the text, and one computed at "
                "run time from outside text matches whatever it says: review the tool once, "
                "then write the pin that its reviewed text gives in code (or record it in a "
                "pins file with veridic mcp pin)"
            )


def tool_pin(name: str, description: str, input_schema: Mapping[str, object]) -> str:
    """The pin of all an external tool shows the model: its name, description and input schema.

    ``"tool-sha256:"`` + the hex digest of the UTF-8 bytes of the canonical
    JSON object ``{"description": ..., "input_schema": ..., "name": ...}``
    (keys sorted at every level, no spaces, non-ASCII kept). Pinned with it,
    an external tool's capability line shows its required arguments and its
    description; a change to any of the three makes it unavailable. (A
    :func:`description_pin` covers the description only.)

    >>> pin = tool_pin("search", "Search the web.", {"type": "object", "properties": {}})
    >>> pin[:12], len(pin)
    ('tool-sha256:', 76)

    Raises:
        ProvenanceError: ``name`` or ``description`` is branded untrusted (see
            :func:`description_pin`).
        VeridicError: the schema is not JSON, or the text is not valid Unicode.
    """
    _refuse_unreviewed("tool_pin()", name, description)
    return _tool_pin(name, description, input_schema)


def _tool_pin(name: str, description: str, input_schema: Mapping[str, object]) -> str:
    try:
        canonical = json.dumps(
            {"description": description, "input_schema": input_schema, "name": name},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (TypeError, ValueError) as error:
        raise VeridicError(
            f"tool {name!r}: its input schema is not JSON ({error}), so it cannot be pinned: "
            "pass the schema as the spec gives it (dicts, lists, strings, numbers)"
        ) from error
    return "tool-" + _description_pin(canonical)


def _pin_state(
    name: str, description: str, schema: JsonObject, pin: str | None, where: str
) -> tuple[DescriptionTrust, PinScope]:
    if pin is None:
        return "unpinned", ""
    if isinstance(pin, str) and _TOOL_PIN.fullmatch(pin):
        return (
            ("pinned", "tool")
            if pin == _tool_pin(name, description, schema)
            else ("changed", "tool")
        )
    if isinstance(pin, str) and _PIN.fullmatch(pin):
        return (
            ("pinned", "description")
            if pin == _description_pin(description)
            else ("changed", "description")
        )
    raise VeridicError(
        f"external tool {where} has pin={pin!r}, which is not a pin: pass what "
        "veridic.tools.tool.tool_pin(name, description, input_schema) gives after reviewing the "
        f"tool, e.g. pin={_tool_pin(name, description, schema)!r} (or what "
        "veridic.tools.tool.description_pin(description) gives, which covers the description "
        "only)"
    )
