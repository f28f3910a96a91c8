"""Provider tool specs: the tool list of OpenAI, Anthropic and MCP, as ``TypedDict`` s.

One of the three projections of a :class:`~veridic.ToolView` (see
:meth:`~veridic.ToolView.tool_specs`). The core never imports a provider SDK:
it emits the dicts each SDK accepts.

MCP annotations are derived, never declared twice: ``readOnlyHint`` from the
kind (a query), ``destructiveHint`` from irreversibility or high risk (a write
that can overwrite what another feature relies on), ``idempotentHint`` from
the kind (a query changes nothing, so repeating it changes nothing; nothing
is claimed about writes).

A spec is built once per tool and format and shared by every view and every
call: the dicts and lists handed out are read-only (:func:`frozen_json`), so
no caller can change what the next request sends. They are ``dict`` and
``list`` subclasses, so ``json.dumps`` and the SDKs take them as they are;
``copy.copy``, ``copy.deepcopy`` and pickling give plain, writable copies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal, NoReturn, TypedDict, cast

from veridic.tools.risk import Risk
from veridic.tools.tool import JsonObject, Tool

__all__ = [
    "AnthropicToolSpec",
    "FrozenDict",
    "FrozenList",
    "McpToolAnnotations",
    "McpToolSpec",
    "OpenAIFunctionSpec",
    "OpenAIToolSpec",
    "SpecFormat",
    "frozen_json",
    "frozen_list",
    "frozen_spec",
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


def frozen_spec(tool: Tool, format: SpecFormat) -> FrozenDict:
    """``json.loads(spec_json(tool, format))``, read-only, built once per tool and format.

    Built without parsing the spec text again: the tool's schema is frozen once and
    shared by its three formats (it is read-only, so sharing is safe); a ``veridic
    lint`` of 5,000 tools builds 15,000 specs.
    """
    key = f"frozen:{format}"
    made = tool._memo.get(key)
    if made is not None:
        return cast(FrozenDict, made)
    schema = tool._memo.get("frozen:schema")
    if schema is None:
        schema = tool._memo["frozen:schema"] = frozen_json(tool.schema_json)
    if format == "openai":
        function = FrozenDict(name=tool.name, description=tool.description, parameters=schema)
        made = FrozenDict(type="function", function=function)
    elif format == "anthropic":
        made = FrozenDict(name=tool.name, description=tool.description, input_schema=schema)
    else:
        made = FrozenDict(
            name=tool.name,
            description=tool.description,
            inputSchema=schema,
            annotations=FrozenDict(mcp_annotations(tool)),
        )
    tool._memo[key] = made
    return made


def _refuse(*_: object, **__: object) -> NoReturn:
    raise TypeError(
        "tool specs are shared by every request of a view and cannot be changed: change the "
        "tool where it is registered, or work on a copy (copy.deepcopy(spec) gives plain "
        "dicts and lists)"
    )


class FrozenDict(dict[str, object]):
    """A read-only JSON object: what :meth:`ToolView.tool_specs <veridic.ToolView.tool_specs>`
    hands out."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, object]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, object]) -> dict[str, object]:
        return cast("dict[str, object]", _thawed(self))

    def __reduce__(self) -> tuple[type[dict[str, object]], tuple[dict[str, object]]]:
        return (dict, (cast("dict[str, object]", _thawed(self)),))


class FrozenList(list[object]):
    """A read-only JSON array, for the same reason as :class:`FrozenDict`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[object]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, object]) -> list[object]:
        return cast("list[object]", _thawed(self))

    def __reduce__(self) -> tuple[type[list[object]], tuple[list[object]]]:
        return (list, (cast("list[object]", _thawed(self)),))


def frozen_json(text: str) -> object:
    """The JSON value of ``text`` with every object and array read-only."""
    return _frozen(json.loads(text))


def frozen_list(items: Iterable[object]) -> FrozenList:
    """A read-only list of already frozen values."""
    made = FrozenList()
    list.extend(made, items)
    return made


def _frozen(value: object) -> object:
    if isinstance(value, dict):
        return FrozenDict((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list):
        return frozen_list(_frozen(item) for item in value)
    return value


def _thawed(value: object) -> object:
    if isinstance(value, dict):
        return {key: _thawed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_thawed(item) for item in value]
    return value
