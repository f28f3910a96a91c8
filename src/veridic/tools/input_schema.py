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


def _invalid(name: str, problems: list[tuple[str, str]]) -> InvalidArgumentsError:
    listed = "; ".join(f"{path}: {message}" for path, message in problems)
    return InvalidArgumentsError(
        f"tool {name!r} got invalid arguments from the model's call: {listed}; send arguments "
        f"that match its input schema (read it with {SCHEMA_TOOL}(name={name!r}))",
        tool=name,
        fields=tuple(dict.fromkeys(path for path, _ in problems)),
    )
