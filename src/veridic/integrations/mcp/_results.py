"""What the model is told of an MCP server's ``CallToolResult``: text, bounded.

A result is the server's and may be anything the protocol allows: many
megabytes of text, images, audio, links, embedded resources. The model reads
text, so each content block becomes text: text as it is, an embedded text
resource as its address and its text, a resource link as its name and
address; binary content (an image, audio, a blob) cannot be read as text, so
it is described (type, MIME type, size) and said not to be passed on, never
dropped without a word. ``structuredContent`` is the model's only when the
result has no content blocks (the protocol's content is its text form).

The whole text is cut at the connection's ``result_limit``, and the cut is
said in the text the model reads and in a warning on the log: a result of
megabytes would be refused by the provider, billed, or bury the conversation.
"""

from __future__ import annotations

import json
import logging
from typing import Final

__all__ = ["RESULT_LIMIT", "bounded", "result_text"]

RESULT_LIMIT: Final = 100_000
"""Characters of one tool result the model is given by default (``result_limit=``)."""

_log = logging.getLogger("veridic.integrations.mcp")


def result_text(result: object) -> str:
    """Every content block of ``result`` as text, one after another, whole (not yet cut)."""
    parts = [_block(block) for block in getattr(result, "content", None) or ()]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


def bounded(text: str, limit: int, server: str, tool: str) -> str:
    """``text`` cut at ``limit`` characters, saying where and how much was cut.

    The note names what the server sent and the limit, so neither the model nor
    the operator (warned on ``veridic.integrations.mcp``) takes the start of a
    result for all of it.
    """
    if len(text) <= limit:
        return text
    _log.warning(
        "MCP server %r: the result of tool %r is %s characters, over the limit of %s: "
        "the model is given the first %s and told the rest was cut",
        server,
        tool,
        f"{len(text):,}",
        f"{limit:,}",
        f"{limit:,}",
    )
    return (
        f"{text[:limit]}\n[veridic cut the result here: the MCP server sent {len(text):,} "
        f"characters, over the limit of {limit:,}, so the last {len(text) - limit:,} are not "
        "shown; ask the tool for less (a narrower query, one page)]"
    )


def _block(block: object) -> str:
    kind = getattr(block, "type", None)
    text = getattr(block, "text", None)
    if kind == "text" and isinstance(text, str):
        return text
    if kind == "resource":
        resource = getattr(block, "resource", None)
        uri = getattr(resource, "uri", "")
        inner = getattr(resource, "text", None)
        if isinstance(inner, str):
            return f"[resource {uri}]\n{inner}"
        blob = getattr(resource, "blob", "")
        return _binary(f"resource {uri}", getattr(resource, "mime_type", None), blob)
    if kind == "resource_link":
        name = getattr(block, "name", "")
        mime = getattr(block, "mime_type", None)
        return f"[resource link {name}: {getattr(block, 'uri', '')}{f' ({mime})' if mime else ''}]"
    if kind in ("image", "audio"):
        return _binary(str(kind), getattr(block, "mime_type", None), getattr(block, "data", ""))
    return f"[{kind or 'unknown'} content: not passed on, veridic passes text only]"


def _binary(what: str, mime: object, data: object) -> str:
    size = f"{len(data):,} characters of base64" if isinstance(data, str) else "binary"
    kind = f"{mime}, " if isinstance(mime, str) and mime else ""
    return f"[{what} ({kind}{size}): binary, not passed on]"
