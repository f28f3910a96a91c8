"""The built-in ``get_tool_schema`` query: a tool's contract, read instead of recalled.

Every view carries it unless it is built with ``schema_tool=False``. The
tool is defined once, from ``_get_tool_schema`` and the description in code beside it
(``python -OO`` strips docstrings); each :class:`~veridic.ToolView` binds its own
handler, which answers from that view alone, so asking for the schema of a
tool the view does not expose fails as calling it would. A view that leaves
the tool out reports it as denied, not unknown (``_SCHEMA_TOOL_LEFT_OUT``):
a model that learnt the name elsewhere is told where the contracts are
instead.
"""

from __future__ import annotations

from typing import Annotated, Final, TypedDict

from pydantic import Field

from veridic.errors import VeridicError
from veridic.tools.status import ToolStatus
from veridic.tools.tool import SCHEMA_TOOL, JsonObject, Tool, ToolOptions, function_tool

__all__ = ["ToolSchema"]


class ToolSchema(TypedDict):
    """What ``get_tool_schema`` returns: a tool's input contract, read from the registry."""

    name: str
    description: str
    required: list[str]
    input_schema: JsonObject


_SCHEMA_TOOL_LEFT_OUT: Final = ToolStatus(
    SCHEMA_TOOL,
    "denied",
    reason="this view leaves out the built-in schema tool",
    hint="read a tool's arguments from its input schema in the tool list",
    cause="deny",
)

_SCHEMA_TOOL_CACHE: list[Tool] = []


_DESCRIPTION: Final = (
    "Read a tool's input contract: its JSON schema and required fields, from the registry."
    "\n\nCall this before relying on what you remember about a tool's arguments."
)
"""What the model reads of ``get_tool_schema``: given in code, not as a docstring, which
``python -OO`` strips (the tool was then listed with no description at all)."""


def _get_tool_schema(
    name: Annotated[str, Field(description="The name of a tool listed in the capability section.")],
) -> ToolSchema:
    """The tool's signature; its description is :data:`_DESCRIPTION`, kept under -OO."""
    raise VeridicError(  # pragma: no cover - every view binds its own handler
        "get_tool_schema is answered by a ToolView: dispatch it through view.dispatch()"
    )


def _schema_tool() -> Tool:
    if not _SCHEMA_TOOL_CACHE:
        options = ToolOptions.check(
            SCHEMA_TOOL, "query", None, False, (), SCHEMA_TOOL, _DESCRIPTION, ()
        )
        _SCHEMA_TOOL_CACHE.append(function_tool(_get_tool_schema, options, None, builtin=True))
    return _SCHEMA_TOOL_CACHE[0]
