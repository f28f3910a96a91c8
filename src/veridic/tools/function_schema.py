"""A function tool's input schema, read from its signature.

For a Python function the signature is the contract: each parameter's
annotation is its argument's type, its default makes it optional, and its
docstring entry describes it. This module turns that into what a tool needs
when it runs: the pydantic model that validates the model's arguments, the
JSON schema the model is shown, and the call of the handler with them
(positional-only parameters passed by position). What the decorator read is
kept as it was (:class:`FunctionText`), and its annotations are resolved when
the registry boots, so they may name classes defined after the tool.

Building a model and its schema is most of the cost of a boot, so tools with
the same signature share one. :func:`veridic.tools.tool.function_tool` makes
a :class:`~veridic.tools.tool.Tool` of what is built here; this module stays
below it and never imports it, and :class:`FunctionText` is also importable
from :mod:`veridic.tools.tool`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
import warnings
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Final

from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)
from pydantic.errors import PydanticUserError
from pydantic.fields import FieldInfo

from veridic._sample import clip
from veridic.errors import ProvenanceError, VeridicError
from veridic.text.fields import instruction_fields
from veridic.text.provenance import is_untrusted, refuse_untrusted, source_of
from veridic.tools._argument_kinds import kind_keeping_validation
from veridic.tools._external_schema import _mentions_instruction
from veridic.tools._written_doc import written_docstring
from veridic.tools.context import ContextParameter, read_context_parameter
from veridic.tools.input_schema import _ARGUMENT_NAME, JsonObject, _invalid, _not_an_object

__all__ = ["FunctionText"]


@dataclass(frozen=True, slots=True)
class FunctionText:
    """What a function tool shows the model, read once, when its decorator runs.

    The docstring (the description and the parameters' descriptions), the
    name and the signature (annotations unresolved) are read from the
    function at registration; a ``__doc__`` or ``__annotations__`` changed
    afterwards is not seen. Annotations are resolved at boot, so they may
    name classes defined after the tool.

    The docstring is the description the capability section prints as
    trusted text, so it is read only when it was written in the function's
    source (``veridic.tools._written_doc``): a ``__doc__`` assigned at run
    time, by a decorator, or a callable object's class docstring is refused,
    unless ``described`` (the tool has a ``description=`` written in code),
    when it is not read at all. A ``__doc__`` branded untrusted is refused
    either way, as ``description=`` refuses it.

    Raises:
        ProvenanceError: the docstring is ``UntrustedText``, or cannot be
            traced to the source and ``described`` is false.
    """

    name: str
    doc: str | None
    signature: inspect.Signature | None
    """``None`` when inspect can read no signature of the callable (boot raises then)."""

    @staticmethod
    def read(
        function: Callable[..., object], name: str | None = None, *, described: bool = False
    ) -> FunctionText:
        try:
            signature: inspect.Signature | None = inspect.signature(function)
        except (TypeError, ValueError):
            signature = None
        doc = getattr(function, "__doc__", None)
        named = name or str(getattr(function, "__name__", ""))
        refuse_untrusted(
            doc,
            f"the docstring of tool {named!r}",
            "write the docstring in code, or register a tool described from outside with "
            "registry.external(..., pin=...), which prints its text only once pinned",
        )
        written = written_docstring(
            function, doc if isinstance(doc, str) else None, named, described=described
        )
        return FunctionText(named, written, signature)


def _input_model(
    function: Callable[..., object],
    read: FunctionText,
    name: str,
    where: str,
    documented: Mapping[str, str],
    localns: Mapping[str, object] | None,
) -> tuple[type[BaseModel], JsonObject, tuple[str, ...], ContextParameter | None]:
    """The pydantic model of a function's arguments, its JSON schema, its positional-only
    names (the context parameter's included), and its context parameter.

    Building a pydantic model and its JSON schema costs about 2 ms, most of
    booting a registry; tools often share a signature (``record_id: int``
    with the same docstring entry), so a model and schema are built once per
    signature and shared (:func:`_shared_model`). Each tool's schema carries
    its own title.
    """
    try:
        if read.signature is None:
            raise TypeError(f"no signature can be read from {function!r}")
        signature = _resolved(read.signature, function, localns)
    except (NameError, SyntaxError, TypeError, ValueError) as error:
        raise VeridicError(
            f"tool {where}: cannot read its signature ({error}): define the types its "
            "annotations name before the registry boots, at module level or above the tool"
        ) from error
    fields: dict[str, tuple[object, object, str | None]] = {}
    positional: list[str] = []
    context: ContextParameter | None = None
    for parameter in signature.parameters.values():
        found = read_context_parameter(parameter, where)
        if found is not None and context is not None:
            raise VeridicError(
                f"tool {where} has two ToolContext parameters, {context.name!r} and "
                f"{found.name!r}: a call has one context; declare one parameter and read "
                "everything the handler needs from its deps"
            )
        if found is not None:
            context = found
        else:
            fields[parameter.name] = _field(parameter, where, documented.get(parameter.name))
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(parameter.name)
    model, shared = _shared_model(name, where, fields)
    schema = dict(shared)
    schema["title"] = name
    return model, schema, tuple(positional), context


def _shared_model(
    name: str, where: str, fields: dict[str, tuple[object, object, str | None]]
) -> tuple[type[BaseModel], JsonObject]:
    # Shared by signature, but not across instruction fields: validating one mints
    # text whose origin names the model's title, which must be this tool's.
    try:
        key: Hashable = tuple(
            (n, *_exactly(annotation), *_exactly(default), doc)
            for n, (annotation, default, doc) in fields.items()
        )
        hash(key)
    # A default such as a list (unhashable), or an int too long for repr: built for this
    # tool alone.
    except (TypeError, ValueError):
        key = None
    found = _MODELS.get(key) if key is not None else None
    if found is not None and not found[2]:
        return found[0], found[1]
    model = _build_model(name, where, fields)
    schema = _json_schema(model, where)
    if _holds_untrusted(schema):  # one quick pass; the path is found only for the message
        _refuse_untrusted_schema(schema, where, "")
    _refuse_untrusted_sources(model, where)
    # A model that mints is this tool's own: its minted text names the tool as its origin.
    # A dataclass or TypedDict field mints too; the schema marks it where the walk does not.
    mints = bool(instruction_fields(model)) or _mentions_instruction(schema, schema, frozenset())
    if key is not None and not mints:
        if len(_MODELS) >= _MODELS_KEPT:
            _MODELS.clear()
        _MODELS[key] = (model, schema, mints)
    return model, schema


def _exactly(value: object) -> tuple[type, object, str]:
    """``value`` as a key that tells apart what JSON and the handler tell apart: its
    type, itself and how Python writes it.

    Equal is not the same: ``1``, ``1.0`` and ``True`` are one key to a dict, and so are
    ``0.0`` and ``-0.0``, ``Decimal("1")`` and ``Decimal("1.0")``, and the annotations
    ``int | float`` and ``float | int`` (which pydantic tries in the order written). A
    tool whose default was ``1`` shared the model of one whose default was ``1.0``, so its
    schema showed the other's default and its handler got it. The type and the repr tell
    them apart, at any depth (a tuple's repr is its items'); two values are one key only
    when they are equal as well.
    """
    return (type(value), value, repr(value))


_MODELS: dict[Hashable, tuple[type[BaseModel], JsonObject, bool]] = {}
_MODELS_KEPT: Final = 4096


def _build_model(
    name: str, where: str, fields: dict[str, tuple[object, object, str | None]]
) -> type[BaseModel]:
    config = ConfigDict(extra="forbid", protected_namespaces=(), title=name)
    # Annotated metadata merges with a FieldInfo default, so both forms keep their constraints.
    typed = {
        n: (annotation if doc is None else Annotated[annotation, Field(description=doc)], default)
        for n, (annotation, default, doc) in fields.items()
    }
    try:
        with warnings.catch_warnings():
            # A parameter called ``json`` or ``copy`` shadows a BaseModel method on
            # the model class; values are read with getattr on the instance, which
            # finds the field, so the warning says nothing the caller must act on.
            warnings.filterwarnings("ignore", message="Field name .* shadows an attribute")
            model: type[BaseModel] = create_model(name, __config__=config, **typed)  # type: ignore[call-overload]  # fields are built at run time from a signature
        model.model_rebuild(raise_errors=True)
    except NameError as error:
        raise VeridicError(
            f"tool {where}: cannot resolve an annotation ({error}): define the types its "
            "annotations name before the registry boots, at module level or above the tool"
        ) from error
    except (PydanticUserError, TypeError, ValueError) as error:
        raise VeridicError(
            f"tool {where}: pydantic cannot validate its parameters ({error}): annotate each "
            "parameter with a type pydantic supports (str, int, a BaseModel, ...)"
        ) from error
    return model


def _argument_names(model: type[BaseModel], where: str) -> dict[str, str]:
    """Each parameter's argument name: what the schema lists and validation takes.

    A parameter's ``alias`` (``from_: Annotated[str, Field(alias="from")]``, the way
    to take an argument named like a Python keyword) renames its argument: the
    JSON schema lists the alias, and validation takes the alias only. What the
    capability section and ``get_tool_schema`` say is required must be those
    names, or the model that follows them is refused. An alias the schema cannot
    state (an ``AliasPath`` into a nested value, ``AliasChoices`` of several
    names) is refused, and so is one that is not a name providers accept, since
    the section prints it as trusted text.

    Raises:
        VeridicError: an alias is an ``AliasPath`` or ``AliasChoices``, is not
            1-64 letters, digits, ``_``, ``.`` and ``-``, or names another
            parameter's argument.
    """
    names: dict[str, str] = {}
    for field_name, info in model.model_fields.items():
        alias: object = info.validation_alias if info.validation_alias is not None else info.alias
        if isinstance(alias, AliasPath | AliasChoices):
            raise VeridicError(
                f"tool {where}: parameter {field_name!r} has validation_alias={alias!r}, which "
                "the input schema cannot state: it shows one plain name, while validation "
                + (
                    "wants a value nested under another name, so a call that follows the "
                    "schema is refused"
                    if isinstance(alias, AliasPath)
                    else "also takes names the schema never shows"
                )
                + '; give the parameter one name, alias="..." (e.g. Field(alias="from") for '
                "a parameter from_)"
            )
        if alias is None:
            argument = field_name
        elif isinstance(alias, str) and _ARGUMENT_NAME.fullmatch(alias):
            argument = alias
        else:
            raise VeridicError(
                f"tool {where}: parameter {field_name!r} has alias {alias!r}, which is not an "
                "argument name: the tool list and the capability section name the argument by "
                r"it, and providers accept [A-Za-z0-9_.-]{1,64}; give it such an alias, or "
                "drop the alias and name the parameter as the argument"
            )
        taken = next((n for n, a in names.items() if a == argument), None)
        if taken is not None:
            raise VeridicError(
                f"tool {where}: parameters {taken!r} and {field_name!r} both take the argument "
                f"{argument!r}: the model could send it once, for one of them; give each "
                "parameter an argument name of its own"
            )
        names[field_name] = argument
    return names


def _resolved(
    signature: inspect.Signature,
    function: Callable[..., object],
    localns: Mapping[str, object] | None,
) -> inspect.Signature:
    """``signature`` with its string annotations evaluated, as ``inspect.signature(eval_str=True)``
    would evaluate them, but on the annotations read at registration."""
    unwrapped = _unwrapped_function(function)
    globalns = getattr(unwrapped, "__globals__", None)
    if globalns is None:
        globalns = getattr(
            sys.modules.get(getattr(unwrapped, "__module__", "") or ""), "__dict__", {}
        )
    names = dict(localns or {})
    # An annotation the code wrote, evaluated as inspect.get_annotations(eval_str=True) does.
    parameters = [
        parameter.replace(annotation=eval(parameter.annotation, globalns, names))
        if isinstance(parameter.annotation, str)
        else parameter
        for parameter in signature.parameters.values()
    ]
    return signature.replace(parameters=parameters)


def _unwrapped_function(function: Callable[..., object]) -> object:
    """The function at the end of ``function``'s ``__wrapped__`` chain (``inspect.unwrap``):
    where a tool wrapped with ``functools.wraps`` was written, and whose globals its
    annotations are evaluated in.

    Raises:
        VeridicError: the chain loops, or each link makes a new one (an object whose
            ``__getattr__`` answers ``__wrapped__``), which ``inspect.unwrap`` reports as a
            bare ``ValueError``.
    """
    try:
        return inspect.unwrap(function)
    except ValueError as error:
        qualname = getattr(function, "__qualname__", None) or type(function).__qualname__
        module = getattr(function, "__module__", None) or type(function).__module__
        raise VeridicError(
            f"the tool function {module}.{qualname} has a __wrapped__ chain that never ends "
            "(it loops back, or each link makes a new one): veridic follows __wrapped__, which "
            "functools.wraps sets, to find where a wrapped tool was written and to evaluate "
            "its annotations; set __wrapped__ to the function the wrapper wraps, or delete it "
            "(del wrapper.__wrapped__)"
        ) from error


def _field(
    parameter: inspect.Parameter, where: str, documented: str | None
) -> tuple[object, object, str | None]:
    """The annotation, default and docstring description of a parameter (``None`` when its
    annotation or default describes it already, or nothing does)."""
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise VeridicError(
            f"tool {where} takes *{parameter.name} or **{parameter.name}, which has no schema: "
            "list every argument the model may send as a named, typed parameter"
        )
    if parameter.name.startswith("_") or parameter.name == "model_config":
        raise VeridicError(
            f"tool {where} has parameter {parameter.name!r}, a name pydantic reserves: rename it "
            "(no leading underscore, not model_config)"
        )
    if parameter.annotation is inspect.Parameter.empty:
        raise VeridicError(
            f"tool {where} has parameter {parameter.name!r} without a type annotation: annotate "
            "it, the model reads the argument's schema from the annotation"
        )
    annotation: object = parameter.annotation
    default: object = ... if parameter.default is inspect.Parameter.empty else parameter.default
    described = _annotated_description(annotation) or (
        isinstance(default, FieldInfo) and bool(default.description)
    )
    return annotation, default, None if not documented or described else documented


def _annotated_description(annotation: object) -> bool:
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in typing.get_args(annotation)[1:])


def _json_schema(model: type[BaseModel], where: str) -> JsonObject:
    try:
        return model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as error:
        raise VeridicError(
            f"tool {where}: its parameters have no JSON schema ({error}): use parameter types "
            "and defaults that JSON can express"
        ) from error


def _holds_untrusted(schema: object) -> bool:
    """Whether a key or a value anywhere in ``schema`` is ``UntrustedText``.

    Every function tool's schema is walked when it is built (5,000 of them in a
    ``veridic lint``), so this pass builds no path: most leaves are plain ``str``.
    """
    waiting = [schema]
    while waiting:
        value = waiting.pop()
        if type(value) is str:
            continue
        if isinstance(value, dict):
            for key in value:
                if type(key) is not str and is_untrusted(key):
                    return True
            waiting.extend(value.values())
        elif isinstance(value, list):
            waiting.extend(value)
        elif is_untrusted(value):
            return True
    return False


def _refuse_untrusted_schema(value: object, where: str, path: str) -> None:
    """Refuse text branded untrusted anywhere in a function tool's JSON schema.

    A function tool's schema is code, so the tool list sends it unmarked and the
    capability section prints its required names; only an external tool's is
    read as data. A ``Field(description=untrusted(...))``, a title, or a model
    made by ``create_model`` with a name from outside would reach the model as
    the application's own words. What pydantic copies on its way into the schema
    (examples, enum values, ``Literal`` values, defaults, ``json_schema_extra``,
    a nested class's docstring) loses its brand here, so
    :func:`_refuse_untrusted_sources` looks for it where pydantic read it;
    outside text belongs in an external tool.

    Raises:
        ProvenanceError: a key or a value of the schema is ``UntrustedText``.
    """
    if isinstance(value, dict):
        for key in value:
            _refuse_untrusted_text(key, where, f"{path}{key} (a key)")
        for key, item in value.items():
            _refuse_untrusted_schema(item, where, f"{path}{key}.")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_untrusted_schema(item, where, f"{path}{index}.")
    else:
        _refuse_untrusted_text(value, where, path.rstrip("."))


# What a pydantic core schema holds that is structure, not text the JSON schema is made of,
# and the keys that only nest (left out of the path a refusal shows).
_CORE_STRUCTURE: Final = frozenset({"type", "ref", "schema_ref", "model_name", "cls_name"})
_CORE_NESTING: Final = frozenset({"schema", "metadata", "fields", "members"})


def _refuse_untrusted_sources(model: type[BaseModel], where: str) -> None:
    """Refuse text branded untrusted in what pydantic writes a tool's JSON schema from.

    On its way into the JSON schema pydantic makes plain copies of some values,
    so :func:`_holds_untrusted` cannot see their brand: an ``Enum`` built from
    stored rows (its values, and its docstring), a ``Literal`` of outside
    values, a default (``tags: list[str] = [untrusted(...)]``, or a dataclass
    instance holding such text; a pydantic model instance's ``str`` fields were
    made plain ``str`` when it was validated, so their brand is gone), a field's
    ``examples`` or ``json_schema_extra``, and the docstring of a nested model
    or dataclass set after its class was made. Each of them reaches the
    provider's tool list as the application's own words, so each is looked for
    where pydantic read it: the model's core schema (every value in it, every
    class and enum member it names) and the fields of the classes it names.
    One quick pass without paths, as for the JSON schema; the path is found
    only for the message.

    Raises:
        ProvenanceError: one of them is ``UntrustedText``; the message says where.
    """
    if _untrusted_source(model, paths=False) is None:
        return
    found = _untrusted_source(model, paths=True)
    if found is not None:
        path, value = found
        _refuse_untrusted_text(value, where, path or "(a source of the schema)")


def _untrusted_source(model: type[BaseModel], *, paths: bool) -> tuple[str, object] | None:
    """The first ``UntrustedText`` in ``model``'s core schema and the classes it names, and
    where it sits (``""`` unless ``paths``)."""
    waiting: list[tuple[str, object]] = [("", model.__pydantic_core_schema__)]
    seen: set[int] = set()
    while waiting:
        path, value = waiting.pop()
        if type(value) is str or value is None or isinstance(value, int | float):
            continue
        if is_untrusted(value):
            return path.rstrip("."), value
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if is_untrusted(key):
                    return f"{path}{key} (a key)", key
                if key in _CORE_STRUCTURE:
                    continue
                waiting.append(
                    (f"{path}{key}." if paths and key not in _CORE_NESTING else path, item)
                )
        elif isinstance(value, list | tuple | set | frozenset):
            if paths:
                waiting.extend((f"{path}{index}.", item) for index, item in enumerate(value))
            else:
                waiting.extend(("", item) for item in value)
        elif isinstance(value, Enum):
            member = f"{path}{type(value).__qualname__}.{value.name} (an enum member's value)"
            waiting.append((member if paths else "", value.value))
        elif isinstance(value, type):
            waiting.extend(_class_sources(value, paths))
        else:
            # A default that is a model or dataclass instance: pydantic dumps its fields.
            waiting.extend(
                (f"{path}{key}." if paths else "", item) for key, item in _instance_fields(value)
            )
    return None


def _instance_fields(value: object) -> list[tuple[str, object]]:
    """The fields of a model or dataclass instance (a default pydantic dumps into the
    schema), or none for any other object."""
    if isinstance(value, BaseModel):
        return [*value.__dict__.items(), *(value.__pydantic_extra__ or {}).items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            (field.name, getattr(value, field.name, None)) for field in dataclasses.fields(value)
        ]
    return []


def _class_sources(cls: type, paths: bool) -> list[tuple[str, object]]:
    """What pydantic reads of a class named in a core schema: its docstring, and each of
    its fields' description, title, examples and ``json_schema_extra``.

    Only a branded docstring is refused here, not one set at run time as a tool's is
    (``_written_doc``): a class body's code is dropped once the class is made, so a
    docstring written there, ``__doc__ = text`` in the body, ``create_model(__doc__=...)``
    and ``Model.__doc__ = ...`` leave the same trace, ``__doc__`` in the class's dict."""
    name = cls.__qualname__ if paths else ""
    found: list[tuple[str, object]] = [(f"the docstring of {name}" if paths else "", cls.__doc__)]
    fields = cls.__dict__.get("__pydantic_fields__")
    if isinstance(fields, dict):
        for field_name, info in fields.items():
            if not isinstance(info, FieldInfo):
                continue
            for attribute in ("description", "title", "examples", "json_schema_extra"):
                where = f"{name}.{field_name} ({attribute})." if paths else ""
                found.append((where, getattr(info, attribute, None)))
    return found


def _refuse_untrusted_text(value: object, where: str, path: str) -> None:
    if is_untrusted(value):
        raise ProvenanceError(
            f"the input schema of tool {where} holds untrusted text at {path or '(root)'} "
            f"(source {source_of(value)!r}): {clip(value)}; a function tool's schema goes to "
            "the provider's tool list as the application's own words, and its required names "
            "into the capability section: write descriptions, titles, model names, enum and "
            "Literal values, defaults and examples in code, or register a tool described from "
            "outside with registry.external(..., pin=...), "
            "whose unpinned text the model is told to read as data"
        )


def _pydantic_validator(name: str, model: type[BaseModel]) -> Callable[[object], dict[str, object]]:
    """The check of the arguments the model wrote for tool ``name``: ``model``'s validation in
    pydantic's lax mode, less the coercions that change a value's kind
    (:mod:`veridic.tools._argument_kinds`)."""
    names = tuple(model.model_fields)
    validation = kind_keeping_validation(model)

    def validate(arguments: object) -> dict[str, object]:
        if not isinstance(arguments, Mapping):
            raise _not_an_object(name, arguments)
        try:
            instance = validation(dict(arguments))
        except ValidationError as error:
            problems = [
                (".".join(str(part) for part in item["loc"]) or "(arguments)", item["msg"])
                for item in error.errors(include_url=False, include_input=False)
            ]
            raise _invalid(name, problems) from None
        return {field: getattr(instance, field) for field in names}

    return validate


def _function_invoker(
    function: Callable[..., object], positional: tuple[str, ...]
) -> Callable[[Mapping[str, object]], object]:
    if not positional:
        return lambda arguments: function(**arguments)

    def invoke(arguments: Mapping[str, object]) -> object:
        args = [arguments[n] for n in positional]
        kwargs = {k: v for k, v in arguments.items() if k not in positional}
        return function(*args, **kwargs)

    return invoke
