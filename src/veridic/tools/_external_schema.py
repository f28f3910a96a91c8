"""An external tool's input schema: someone else's JSON schema, used as given.

An MCP server or an OpenAPI document describes a tool's arguments with a JSON
schema that veridic did not write, so it is not rebuilt but checked and used
as it is: it must be JSON describing an object (what providers accept as a
tool's input) and a valid JSON schema; the model's arguments are validated
against it with the optional ``jsonschema`` package (``pip install
'veridic[external]'``), refused in the same words as a function tool's; and
it is read for what it says of each argument: its description, and whether
it is marked as instruction text (``"x-veridic-instruction": true``, also
through a local ``$ref``), which raises a write's risk floor.

:func:`veridic.tools.tool.external_tool` makes a
:class:`~veridic.tools.tool.Tool` of what is read here; this module stays
below it and never imports it. The module is private: the tool is the API.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Final

from pydantic import BaseModel, PydanticUserError

from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.text.fields import instruction_fields
from veridic.tools.input_schema import JsonObject, _invalid, _not_an_object

__all__: list[str] = []

_INSTRUCTION_MARK: Final = "x-veridic-instruction"


def _plain_json(schema: object, where: str) -> JsonObject:
    try:
        copied = json.loads(json.dumps(schema))
    except (TypeError, ValueError) as error:
        raise VeridicError(
            f"external tool {where} has an input schema that is not JSON ({error}): pass the "
            "JSON schema as the spec gives it (dicts, lists, strings, numbers)"
        ) from error
    if not isinstance(copied, dict) or copied.get("type") != "object":
        raise VeridicError(
            f"external tool {where} has an input schema that does not describe an object: "
            f"{clip(json.dumps(copied))}; providers need a tool's input to be "
            '{"type": "object", "properties": {...}}'
        )
    result: JsonObject = copied
    return result


def _schema_validator(
    schema: JsonObject, where: str
) -> Callable[[str], Callable[[object], dict[str, object]]]:
    try:
        import jsonschema
        import jsonschema.exceptions
        import jsonschema.validators
    except ImportError as error:
        raise VeridicError(
            f"external tool {where} needs the jsonschema package to validate its arguments, "
            "which is not installed: pip install 'veridic[external]'"
        ) from error
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        raise VeridicError(
            f"external tool {where} has an invalid JSON schema ({error.message}): fix the "
            "schema where it is defined, or leave the tool unregistered"
        ) from error
    checker = cls(schema)

    def bind(name: str) -> Callable[[object], dict[str, object]]:
        def validate(arguments: object) -> dict[str, object]:
            if not isinstance(arguments, Mapping):
                raise _not_an_object(name, arguments)
            plain = dict(arguments)
            problems: list[tuple[str, str]] = []
            for error in sorted(checker.iter_errors(plain), key=lambda e: list(map(str, e.path))):
                problems.extend(_schema_problems(error))
            if problems:
                raise _invalid(name, problems)
            return plain

        return validate

    return bind


def _schema_problems(error: object) -> list[tuple[str, str]]:
    path = ".".join(str(part) for part in getattr(error, "absolute_path", ()))
    message = str(getattr(error, "message", error))
    validator = getattr(error, "validator", None)
    instance = getattr(error, "instance", None)
    value = getattr(error, "validator_value", None)
    if validator == "required" and isinstance(instance, dict) and isinstance(value, list):
        missing = [str(p) for p in value if p not in instance]
        return [(f"{path}.{p}" if path else p, "Field required") for p in missing]
    return [(path or "(arguments)", message)]


def _mentions_instruction(schema: object, root: JsonObject, seen: frozenset[str]) -> bool:
    # Whether text read as instruction sits anywhere under ``schema``, through local $refs.
    if isinstance(schema, list):
        return any(_mentions_instruction(v, root, seen) for v in schema)
    if not isinstance(schema, dict):
        return False
    if schema.get(_INSTRUCTION_MARK) is True:
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        target: object = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        if _mentions_instruction(target, root, seen | {ref}):
            return True
    return any(_mentions_instruction(v, root, seen) for k, v in schema.items() if k != "$defs")


def _marked_paths(node: object, root: JsonObject, path: str, seen: frozenset[str]) -> set[str]:
    """The dotted property paths under ``node`` that the schema marks as instruction text
    (through local references, items, unions and mapping values, which keep the path)."""
    if isinstance(node, list):
        return {p for item in node for p in _marked_paths(item, root, path, seen)}
    if not isinstance(node, dict):
        return set()
    found = {path} if path and node.get(_INSTRUCTION_MARK) is True else set()
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
        target: object = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        found |= _marked_paths(target, root, path, seen | {ref})
    for key, sub in node.items():
        if key == "properties" and isinstance(sub, dict):
            for name, inner in sub.items():
                found |= _marked_paths(inner, root, f"{path}.{name}" if path else name, seen)
        elif key not in ("$ref", "$defs"):
            found |= _marked_paths(sub, root, path, seen)
    return found


@functools.lru_cache(maxsize=1024)
def model_instruction_paths(model: type[BaseModel]) -> frozenset[str]:
    """The dotted paths of ``model``'s fields read as instruction, wherever pydantic mints one.

    :func:`~veridic.text.fields.instruction_fields` follows nested pydantic models;
    an ``InstructionField`` inside a dataclass or a ``TypedDict`` field mints too,
    and the model's JSON schema marks it: a field marked there that the walk missed
    is added by its name. A model JSON cannot describe is read by the walk alone.
    """
    found = instruction_fields(model)
    try:
        schema = model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError):  # no schema: the walk is all there is
        return found
    aliases = {name: info.alias or name for name, info in model.model_fields.items()}
    return _with_marked(found, schema, aliases)


def _with_marked(
    found: frozenset[str], schema: JsonObject, aliases: Mapping[str, str]
) -> frozenset[str]:
    """``found`` and the schema's marked paths of the top-level fields ``found`` misses
    (``aliases`` maps a field's name to the name the schema gives it)."""
    covered = {aliases.get(path.split(".")[0], path.split(".")[0]) for path in found}
    marked = _marked_paths(schema, schema, "", frozenset())
    return found | {path for path in marked if path.split(".")[0] not in covered}


def _schema_description(schema: object) -> str:
    if isinstance(schema, dict):
        text = schema.get("description")
        return text if isinstance(text, str) else ""
    return ""
