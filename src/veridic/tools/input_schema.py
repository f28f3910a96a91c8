"""What a tool's input schema is to every tool, wherever the schema came from.

The model sends a tool's arguments as a JSON object, and the tool's input
schema is one too (:data:`JsonObject`). A function tool's schema is read from
its signature and checked with pydantic, an external tool's is taken from its
spec and checked with ``jsonschema``; either way a call that does not match is
refused in the same words, which name the fields and point the model at
:data:`SCHEMA_TOOL`, the built-in query that reads a tool's schema, so that it
reads the contract instead of guessing again.

These live below :mod:`veridic.tools.tool` and the modules that build
schemas, so each can import them without a cycle; every name here is also
importable from :mod:`veridic.tools.tool`.
"""

from __future__ import annotations

import re
from typing import Final

from veridic._counted import counted
from veridic._sample import clip
from veridic.errors import InvalidArgumentsError

__all__ = ["SCHEMA_TOOL", "JsonObject"]

JsonObject = dict[str, object]
"""A JSON object as Python sees it after ``json.loads``."""

SCHEMA_TOOL: Final = "get_tool_schema"
"""The built-in query every view carries: read a tool's contract, don't recall it."""

_ARGUMENT_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What providers accept as a property of a tool's input schema (Anthropic's pattern), and
so what the capability section prints as a required argument's name."""


def _not_an_object(name: str, arguments: object) -> InvalidArgumentsError:
    return InvalidArgumentsError(
        f"tool {name!r} got arguments of type {type(arguments).__name__}, not a JSON object: "
        f"send an object whose keys are its parameters (read them with {SCHEMA_TOOL})",
        tool=name,
        fields=("(arguments)",),
    )


_PLAIN_PATH: Final = re.compile(r"[A-Za-z0-9_.-]{1,80}|\(arguments\)")
"""A path quoted as it is: dotted names and list indices a schema could have written."""

_LISTED: Final = 10
"""How many problems a refusal lists: enough to fix a call, not one per key of a flood."""

_MESSAGE_LIMIT: Final = 200
"""How much of a validator's message is quoted: ``jsonschema``'s quote the value whole."""


def _shown_path(path: str) -> str:
    """``path`` as a refusal quotes it: a plain path as it is, any other escaped and clipped.

    The path holds the names the caller sent (an argument the schema does not have is
    named by its key), and the caller may be a model or an MCP client: quoted raw, a name
    with a terminal escape or a line break ran in an operator's terminal and forged a line
    of the audit's detail, and a name of a megabyte came back whole."""
    return path if _PLAIN_PATH.fullmatch(path) else clip(path)


def _shown_message(message: str) -> str:
    """A validator's ``message`` as a refusal quotes it: printable and short as it is,
    any other escaped and clipped (a ``jsonschema`` message quotes the value it refused)."""
    if message.isprintable() and len(message) <= _MESSAGE_LIMIT:
        return message
    return clip(message, _MESSAGE_LIMIT)


def _invalid(name: str, problems: list[tuple[str, str]]) -> InvalidArgumentsError:
    """The refusal of arguments that do not match tool ``name``'s schema, listing the first
    :data:`_LISTED` ``problems`` (path, message) quoted safely (:func:`_shown_path`).

    ``fields`` holds the same quoted paths as the message, so whoever joins them into an
    audit detail or a plan's note quotes them as safely, and as few."""
    shown = [(_shown_path(path), _shown_message(message)) for path, message in problems]
    listed = "; ".join(f"{path}: {message}" for path, message in shown[:_LISTED])
    if len(shown) > _LISTED:
        listed += f"; and {counted(len(shown) - _LISTED, 'more problem')}"
    return InvalidArgumentsError(
        f"tool {name!r} got invalid arguments from the model's call: {listed}; send arguments "
        f"that match its input schema (read it with {SCHEMA_TOOL}(name={name!r}))",
        tool=name,
        fields=tuple(dict.fromkeys(path for path, _ in shown[:_LISTED])),
    )
