"""What the model is told of an MCP server's ``CallToolResult``: text, bounded.

A result is the server's and may be anything the protocol allows: many
megabytes of text, images, audio, links, embedded resources. The model reads
text, so each content block becomes text: text as it is, an embedded text
resource as its address and its text, a resource link as its name and
address; binary content (an image, audio, a blob) cannot be read as text, so
it is described (type, MIME type, size) and said not to be passed on, never
dropped without a word. ``structuredContent`` is the model's only when the
result has no content blocks (the protocol's content is its text form).

A block annotated ``audience: ["user"]`` (an audience without ``"assistant"``) is,
in the protocol's words, for the user and not the model: it is not passed on to the
model, which reads in its place that content for the user (its type and size) was
not passed on, one note for blocks that come together, in veridic's words only (a
MIME type named only from ``mimetypes``' table); the log says so too (INFO).
Read by the model, it let a server address the model in text it labelled the
user's. veridic shows nothing to the user itself, so such content reaches nobody;
``priority`` changes nothing (neither the order nor what is passed on).

The whole text is cut at the connection's ``result_limit``, and the cut is
said in the text the model reads and in a warning on the log: a result of
megabytes would be refused by the provider, billed, or bury the conversation.
"""

from __future__ import annotations

import functools
import json
import logging
import mimetypes
from typing import Final

from veridic._counted import counted

__all__ = ["RESULT_LIMIT", "bounded", "result_text"]

RESULT_LIMIT: Final = 100_000
"""Characters of one tool result the model is given by default (``result_limit=``)."""

_log = logging.getLogger("veridic.integrations.mcp")


def result_text(result: object, server: str, tool: str) -> str:
    """Every content block of ``result`` as text, one after another, whole (not yet cut),
    the blocks marked for the user alone each said withheld in their place."""
    blocks = list(getattr(result, "content", None) or ())
    parts: list[str] = []
    run: list[object] = []  # blocks for the user alone, one after another
    for block in blocks:
        if _for_user_alone(block):
            run.append(block)
            continue
        if run:
            parts.append(_withheld(run))
            run = []
        parts.append(_block(block))
    if run:
        parts.append(_withheld(run))
    withheld = sum(1 for block in blocks if _for_user_alone(block))
    if withheld:
        _log.info(
            "MCP server %r: tool %r answered with %s marked for the user, not the model "
            "(annotations.audience): not passed on to the model, which is told so",
            server,
            tool,
            counted(withheld, "content block"),
        )
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


def _for_user_alone(block: object) -> bool:
    """Whether ``block`` is annotated with an audience that leaves the model out.

    No annotations, no audience, or an empty one (which names nobody in particular)
    leave the block the model's, as before audiences were read.
    """
    audience = getattr(getattr(block, "annotations", None), "audience", None)
    return isinstance(audience, list) and bool(audience) and "assistant" not in audience


def _withheld(blocks: list[object]) -> str:
    """The note the model reads in place of blocks marked for the user alone: what they
    were and how large, never their content (the server's words)."""
    shown = "; ".join(_described(block) for block in blocks[:_DESCRIBED])
    more = len(blocks) - _DESCRIBED
    if more > 0:
        shown += f"; and {more} more"
    return (
        f"[the MCP server marked {counted(len(blocks), 'content block')} for the user, not "
        f"the model (annotations.audience): {shown}; not passed on to the model]"
    )


_DESCRIBED: Final = 5  # blocks one note describes; past that, it counts them


def _described(block: object) -> str:
    """A block's type and size, in veridic's words."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return f"text, {_length(getattr(block, 'text', ''))}"
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", None)
        data = getattr(block, "data", "")
        kind_of = f"{_known_mime(mime)}, " if isinstance(mime, str) else ""
        return f"{kind} ({kind_of}{_length(data)} of base64)"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        inner = getattr(resource, "text", None)
        if isinstance(inner, str):
            return f"an embedded resource, {_length(inner)}"
        return f"an embedded resource, {_length(getattr(resource, 'blob', ''))} of base64"
    if kind == "resource_link":
        return "a resource link"
    return "content of another type"


@functools.cache
def _mime_table() -> mimetypes.MimeTypes:
    """Python's own table of MIME types, without the machine's files.

    ``mimetypes.guess_extension`` reads the global table, which ``/etc/mime.types``
    and the application's ``add_type`` calls extend: the same result would then be told
    to the model in other words on another machine, and an audit hash would differ.
    """
    return mimetypes.MimeTypes(filenames=())


def _known_mime(mime: str) -> str:
    """``mime``'s type when it is one veridic's table (Python's built-in ``mimetypes``
    table) knows, its parameters left out; else that it is unknown.

    The note stands for content the server meant for the user, and tells the model it
    was not passed on: a MIME type quoted as the server gave it passed on the server's
    words after all (``image/png; the user approved ...``). One of the table's names
    is none of the server's words.
    """
    named = mime.partition(";")[0].strip().lower()
    if _mime_table().guess_extension(named) is None:
        return "a MIME type veridic does not know"
    return named


def _length(text: object) -> str:
    return counted(len(text), "character") if isinstance(text, str) else "of unknown length"


def _binary(what: str, mime: object, data: object) -> str:
    size = f"{len(data):,} characters of base64" if isinstance(data, str) else "binary"
    kind = f"{mime}, " if isinstance(mime, str) and mime else ""
    return f"[{what} ({kind}{size}): binary, not passed on]"
