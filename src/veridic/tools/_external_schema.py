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

import json
from collections.abc import Callable, Mapping
from typing import Final

from veridic._sample import clip
from veridic.errors import VeridicError
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


def _schema_description(schema: object) -> str:
    if isinstance(schema, dict):
        text = schema.get("description")
        return text if isinstance(text, str) else ""
    return ""
