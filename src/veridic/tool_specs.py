"""Provider tool specs: the tool list of OpenAI, Anthropic and MCP, as ``TypedDict`` s.

One of the three projections of a :class:`~veridic.ToolView` (see
:meth:`~veridic.ToolView.tool_specs`). The core never imports a provider SDK:
it emits the dicts each SDK accepts.

MCP annotations are derived, never declared twice: ``readOnlyHint`` from the
kind (a query), ``destructiveHint`` from irreversibility or high risk (a write
that can overwrite what another feature relies on), ``idempotentHint`` from
the kind (a query changes nothing, so repeating it changes nothing; nothing
is claimed about writes).
"""

from __future__ import annotations

import json
from typing import Literal, TypedDict

from veridic.risk import Risk
from veridic.tool import JsonObject, Tool

__all__ = [
    "AnthropicToolSpec",
    "McpToolAnnotations",
    "McpToolSpec",
    "OpenAIFunctionSpec",
    "OpenAIToolSpec",
    "SpecFormat",
    "mcp_annotations",
    "spec_json",
]

SpecFormat = Literal["openai", "anthropic", "mcp"]


class OpenAIFunctionSpec(TypedDict):
    name: str
    description: str
    parameters: JsonObject


class OpenAIToolSpec(TypedDict):
    """One entry of chat-completions ``tools``."""

    type: Literal["function"]
    function: OpenAIFunctionSpec


class AnthropicToolSpec(TypedDict):
    """One entry of the Messages API ``tools``."""

    name: str
    description: str
    input_schema: JsonObject


class McpToolAnnotations(TypedDict):
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool


class McpToolSpec(TypedDict):
    """One entry of an MCP ``tools/list`` result."""

    name: str
    description: str
    inputSchema: JsonObject
    annotations: McpToolAnnotations


def mcp_annotations(tool: Tool) -> McpToolAnnotations:
    """The MCP behaviour hints of ``tool``, derived from its kind, risk and irreversibility."""
    query = tool.kind == "query"
    return {
        "readOnlyHint": query,
        "destructiveHint": not query and (tool.irreversible or tool.risk >= Risk.HIGH),
        "idempotentHint": query,
    }


def spec_json(tool: Tool, format: SpecFormat) -> str:
    """The spec of ``tool`` in ``format`` as JSON text; the schema text is spliced in as is."""
    name = json.dumps(tool.name)
    description = json.dumps(tool.description, ensure_ascii=False)
    if format == "openai":
        return (
            f'{{"type":"function","function":{{"name":{name},"description":{description},'
            f'"parameters":{tool.schema_json}}}}}'
        )
    if format == "anthropic":
        return f'{{"name":{name},"description":{description},"input_schema":{tool.schema_json}}}'
    annotations = json.dumps(mcp_annotations(tool))
    return (
        f'{{"name":{name},"description":{description},"inputSchema":{tool.schema_json},'
        f'"annotations":{annotations}}}'
    )
