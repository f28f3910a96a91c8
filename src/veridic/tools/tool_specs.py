"""Provider tool specs: the tool list of OpenAI, Anthropic and MCP, as ``TypedDict`` s.

One of the three projections of a :class:`~veridic.ToolView` (see
:meth:`~veridic.ToolView.tool_specs`). The core never imports a provider SDK:
it emits the dicts each SDK accepts.

MCP annotations (:func:`mcp_annotations`) follow the protocol's reading of
each hint: ``readOnlyHint`` from the kind; for a write, ``destructiveHint``
unless it is declared additive (and is not high risk), ``idempotentHint`` only
where declared; ``openWorldHint`` and ``title`` only where declared
(:class:`~veridic.tools.tool.ToolHints`). A hint the protocol reads only for
writes is never sent for a query, and a hint left undeclared is left out, so
the client falls back to the protocol's default (destructive, not
idempotent, open world) rather than to a claim nobody made.

A spec is built once per tool and format and shared by every view and every
call: the dicts and lists handed out are read-only (:func:`frozen_json`), so
no caller can change what the next request sends (a write that goes around
their refusals is refused at the next send: see :class:`FrozenDict`). They are
``dict`` and ``list`` subclasses, so ``json.dumps`` and the SDKs take them as
they are; ``copy.copy``, ``copy.deepcopy`` and pickling give plain, writable
copies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final, Literal, NoReturn, NotRequired, TypedDict, cast

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
    """MCP ``ToolAnnotations``: the keys :func:`mcp_annotations` sends for a tool.

    ``readOnlyHint`` is always there; ``destructiveHint`` for every write;
    ``idempotentHint`` for a write that declared it; ``openWorldHint`` and
    ``title`` for a tool that declared them.
    """

    readOnlyHint: bool
    destructiveHint: NotRequired[bool]
    idempotentHint: NotRequired[bool]
    openWorldHint: NotRequired[bool]
    title: NotRequired[str]


class McpToolSpec(TypedDict):
    """One entry of an MCP ``tools/list`` result."""

    name: str
    description: str
    inputSchema: JsonObject
    annotations: McpToolAnnotations


def mcp_annotations(tool: Tool) -> McpToolAnnotations:
    """The MCP behaviour hints of ``tool``: its kind and risk, and what it declared.

    =====================  ==================================================
    key                    sent
    =====================  ==================================================
    ``readOnlyHint``       always: ``true`` for a query, ``false`` for a write
    ``destructiveHint``    for a write: ``false`` only when it is declared
                           ``additive`` and is not high risk, else ``true``
    ``idempotentHint``     for a write that declared ``idempotent``
    ``openWorldHint``      for a tool that declared ``open_world``
    ``title``              for a tool that declared a ``title``
    =====================  ==================================================

    The protocol reads ``destructiveHint`` and ``idempotentHint`` only when
    ``readOnlyHint`` is false, so a query carries neither. A high-risk write
    (irreversible, or writing text read as instruction) is destructive whatever
    it declared: hints never lower what veridic holds about a tool.

    >>> from veridic import Registry
    >>> from veridic.tools.tool import ToolHints
    >>> registry = Registry()
    >>> @registry.tool(kind="write", hints=ToolHints(additive=True, open_world=False))
    ... def add_note(text: str) -> str:
    ...     '''Append a note to the ticket; earlier notes are kept.
    ...
    ...     Args:
    ...         text: The note.
    ...     '''
    ...     return "added"
    >>> mcp_annotations(registry.view().tool("add_note"))
    {'readOnlyHint': False, 'destructiveHint': False, 'openWorldHint': False}
    """
    hints = tool.hints
    annotations: McpToolAnnotations = {"readOnlyHint": tool.kind == "query"}
    if tool.kind == "write":
        annotations["destructiveHint"] = not hints.additive or tool.risk >= Risk.HIGH
        if hints.idempotent is not None:
            annotations["idempotentHint"] = hints.idempotent
    if hints.open_world is not None:
        annotations["openWorldHint"] = hints.open_world
    if hints.title is not None:
        annotations["title"] = hints.title
    return annotations


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
    annotations = json.dumps(mcp_annotations(tool), ensure_ascii=False)
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
    return _specs(tool, format)[0]


def _plain_spec(tool: Tool, format: SpecFormat) -> dict[str, object]:
    """What :func:`frozen_spec` held when it was built, as plain dicts and lists.

    The read-only spec refuses every write made through its own methods, but not one
    that goes around them (``dict.__setitem__(spec, key, value)``, ``dict.update(spec,
    ...)``, C code writing to the dict): this copy is what :meth:`ToolView.assert_coupled
    <veridic.ToolView.assert_coupled>` compares the shared spec with, and what
    :meth:`ToolView.tools_sha256 <veridic.ToolView.tools_sha256>` digests. It is
    writable and shared, so it is private and never handed out: a caller writing to it
    would have the view's own specs refused at every send, and change the digest. It
    holds the spec's own leaves (names, descriptions, numbers), so the comparison reads
    a leaf only where it was replaced.
    """
    return _specs(tool, format)[1]


def _tagged_spec(tool: Tool, format: SpecFormat) -> dict[str, object]:
    """What :func:`frozen_spec` held when it was built, as a copy that ``==`` compares as
    JSON: the left operand of :meth:`ToolView.assert_coupled
    <veridic.ToolView.assert_coupled>`'s check that the shared specs are intact (see
    :func:`_tagged`). Built once per tool and format, of the plain copy; the schema's
    copy, and the copy of each text, are shared by the three formats (each copy is an
    object the garbage collector tracks: a lint of 5,000 tools makes them all)."""
    key = f"specs:tagged:{format}"
    made = tool._memo.get(key)
    if made is None:
        plain = _plain_spec(tool, format)
        schema = cast("tuple[object, object]", tool._memo["specs:schema"])[1]
        texts = cast("dict[str, _Text]", tool._memo.setdefault("specs:tagged:texts", {}))
        tagged_schema = tool._memo.get("specs:tagged:schema")
        if tagged_schema is None:
            tagged_schema = tool._memo["specs:tagged:schema"] = _tagged(schema, texts)
        made = tool._memo[key] = _tagged_around(plain, schema, tagged_schema, texts)
    return cast("dict[str, object]", made)


def _tagged_around(
    value: object, schema: object, tagged_schema: object, texts: dict[str, _Text]
) -> object:
    """:func:`_tagged` of a spec, with the copy of its ``schema`` object made already."""
    if value is schema:
        return tagged_schema
    if type(value) is dict:
        return _TaggedDict(
            {key: _tagged_around(item, schema, tagged_schema, texts) for key, item in value.items()}
        )
    return _tagged(value, texts)


class _TaggedDict(dict[str, object]):
    """A JSON object of :func:`_tagged`'s copies: a class of its own, so that the spec it is
    compared with (a :class:`FrozenDict`, a plain ``dict``, a subclass of either) never
    takes the comparison over (Python asks the right operand first when its class is a
    subclass of the left one's)."""

    __slots__ = ()


class _TaggedList(list[object]):
    """A JSON array of :func:`_tagged`'s copies, for the same reason as :class:`_TaggedDict`."""

    __slots__ = ()


class _Text(str):
    """A string of :func:`_tagged`'s copies: ``str``'s own ``==`` (in C), asked first, since
    no other class is a subclass of this one, so it compares the characters ``json.dumps``
    writes of a ``str`` subclass, whatever that subclass's ``__eq__`` says."""

    __slots__ = ()


class _Exact:
    """A number, boolean or null of :func:`_tagged`'s copies: equal only to a value of its
    very type (``True`` is not ``1``, ``1.0`` is not ``1``: JSON writes them apart), and a
    float only to one JSON writes alike (``json.dumps`` writes ``float.__repr__``: ``-0.0``
    is not ``0.0``, though ``==`` says so, and a ``NaN`` is any ``NaN``, though ``==`` says
    it is not even itself)."""

    __slots__ = ("text", "value")

    def __init__(self, value: object) -> None:
        self.value = value
        self.text = float.__repr__(value) if type(value) is float else None

    def __eq__(self, other: object) -> bool:
        if other is self.value:
            return True
        if type(other) is not type(self.value):
            return False
        if self.text is not None:
            return float.__repr__(cast(float, other)) == self.text
        return bool(other == self.value)

    __hash__ = None  # type: ignore[assignment]  # compared, never a key


_EXACT_SINGLETONS: Final = {value: _Exact(value) for value in (None, True, False)}
"""The copies of null, true and false, the most of a schema's leaves that are not text:
one each (each made copy is an object the garbage collector tracks)."""


def _tagged(value: object, texts: dict[str, _Text]) -> object:
    """A copy of the JSON value ``value`` that is ``==`` (as the left operand) only to a
    value JSON writes the same: ``_tagged(spec, {}) == sent`` holds when ``sent`` is
    ``spec`` as JSON, where ``spec == sent`` also held for ``True`` in place of ``1``,
    ``1.0`` in place of ``1``, or a ``str`` subclass whose ``__eq__`` says yes to anything.

    Strings are compared by ``str``'s own ``==`` in C, so the copy costs one comparison
    of characters a string; numbers, booleans and nulls (a few in a schema) by a check
    of their type too. ``texts`` holds the copies of the texts made so far, one a text.
    """
    if isinstance(value, str):
        made = texts.get(value)
        if made is None:
            made = texts[value] = _Text(value)
        return made
    if isinstance(value, dict):
        return _TaggedDict({key: _tagged(item, texts) for key, item in value.items()})
    if isinstance(value, list):
        return _TaggedList([_tagged(item, texts) for item in value])
    if value is None or isinstance(value, bool):
        return _EXACT_SINGLETONS[value]
    return _Exact(value)


def _specs(tool: Tool, format: SpecFormat) -> tuple[FrozenDict, dict[str, object]]:
    """The read-only spec of ``tool`` in ``format`` and its plain copy, built once."""
    key = f"specs:{format}"
    made = tool._memo.get(key)
    if made is not None:
        return cast("tuple[FrozenDict, dict[str, object]]", made)
    schemas = tool._memo.get("specs:schema")
    if schemas is None:
        plain_schema = json.loads(tool.schema_json)
        schemas = tool._memo["specs:schema"] = (_frozen(plain_schema), plain_schema)
    frozen_schema, plain_schema = cast("tuple[object, object]", schemas)
    annotations = mcp_annotations(tool) if format == "mcp" else None
    made = (
        cast(FrozenDict, _shaped(tool, format, frozen_schema, annotations, FrozenDict)),
        _shaped(tool, format, plain_schema, annotations, dict),
    )
    tool._memo[key] = made
    return made


def _shaped(
    tool: Tool,
    format: SpecFormat,
    schema: object,
    annotations: McpToolAnnotations | None,
    mapping: Callable[..., dict[str, object]],
) -> dict[str, object]:
    """The spec of ``tool`` in ``format`` around ``schema``, its objects made by ``mapping``."""
    if format == "openai":
        function = mapping(name=tool.name, description=tool.description, parameters=schema)
        return mapping(type="function", function=function)
    if format == "anthropic":
        return mapping(name=tool.name, description=tool.description, input_schema=schema)
    return mapping(
        name=tool.name,
        description=tool.description,
        inputSchema=schema,
        annotations=mapping(annotations or {}),
    )


def _refuse(*_: object, **__: object) -> NoReturn:
    raise TypeError(
        "tool specs are shared by every request of a view and cannot be changed: change the "
        "tool where it is registered, or work on a copy (copy.deepcopy(spec) gives plain "
        "dicts and lists)"
    )


class FrozenDict(dict[str, object]):
    """A read-only JSON object: what :meth:`ToolView.tool_specs <veridic.ToolView.tool_specs>`
    hands out.

    Its own methods refuse every write (``TypeError``). A ``dict`` subclass cannot refuse
    a write that goes around them (``dict.__setitem__(spec, key, value)``,
    ``dict.update(spec, ...)``, C code writing to the dict): such a write changes the spec
    every later request shares, and :meth:`ToolView.assert_coupled
    <veridic.ToolView.assert_coupled>` (which :class:`~veridic.ModelGateway` runs on every
    send) refuses it, comparing the specs as JSON with a copy made when they were built:
    a value equal in Python only (``True`` for ``1``, ``1.0`` for ``1``, ``0.0`` for
    ``-0.0``, a ``str`` subclass whose ``==`` says yes to anything in place of a text) is
    refused too.
    """

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
