"""``Tool``: one registered tool, resolved once: its contract, its risk, its handler.

A registry keeps what was declared (cheap, at import time) and resolves each
declaration into a :class:`Tool` when it boots: the input schema from the
signature through pydantic, the descriptions from the docstring, the risk
from its kind and floors. Views, specs, dispatch and the lint all read these
values; none of them looks at the function again.

Two sources of tools:

- a typed Python function (:func:`function_tool`): its description is written
  in code, so it is trusted;
- a spec written by someone else (:func:`external_tool`), an MCP server or an
  OpenAPI document: its description is untrusted unless the code pins it by
  hash, and its arguments are validated against its JSON schema with the
  optional ``jsonschema`` package (``pip install 'veridic[external]'``).

A function tool's handler may ask for its request's :class:`~veridic.ToolContext`
(the user, a DB session) with one parameter annotated ``ToolContext[Deps]``: that
parameter is not an argument (not in the schema, the required list or
``Tool.parameters``; see :mod:`veridic.tools.context`), and
:attr:`Tool.context` names it.

Parts of a tool have modules of their own, whose names import from here too:
:mod:`veridic.tools.input_schema` (what every input schema shares, and how a call
that breaks one is refused), :mod:`veridic.tools.pins` (how code vouches for
an external tool's text by hash), :mod:`veridic.tools.function_schema` (a
function tool's input schema, read from its signature) and
``veridic.tools._external_schema`` (an external tool's input schema, used as
its spec gives it). What stays here is what every tool is and shares: the
:class:`Tool` value and its declaration, its name, its risk floors, and the
two resolvers that make a :class:`Tool` of a function or of a spec.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final

from pydantic import BaseModel

from veridic._sample import clip
from veridic.errors import VeridicError
from veridic.text.fields import instruction_fields
from veridic.text.provenance import (
    TrustedText,
    _display_path,
    is_untrusted,
    refuse_untrusted,
)
from veridic.tools._descriptions import GapCode, description_problem
from veridic.tools._docstrings import parse_docstring
from veridic.tools._external_schema import (
    _mentions_instruction,
    _plain_json,
    _schema_description,
    _schema_validator,
    _with_marked,
    model_instruction_paths,
)
from veridic.tools._written_doc import stripped_fix
from veridic.tools.context import ContextParameter, ToolContext
from veridic.tools.function_schema import (
    FunctionText,
    _argument_names,
    _function_invoker,
    _input_model,
    _pydantic_validator,
    _unwrapped_function,
)
from veridic.tools.guards import (
    _delegate_done,
    _delegated,
    _validating,
    _veridic_frame,
    current_dispatch,
)
from veridic.tools.input_schema import _ARGUMENT_NAME, SCHEMA_TOOL, JsonObject
from veridic.tools.pins import (
    DescriptionTrust,
    PinScope,
    _pin_state,
    _tool_pin,
    description_pin,
    tool_pin,
)
from veridic.tools.risk import (
    INSTRUCTION_ARGUMENTS,
    INSTRUCTION_WRITES,
    IRREVERSIBLE,
    FloorRule,
    FloorViolation,
    Risk,
    RiskLike,
    ToolKind,
    resolve_risk,
)

__all__ = [
    "SCHEMA_TOOL",
    "DescriptionTrust",
    "FunctionText",
    "JsonObject",
    "PinScope",
    "Tool",
    "ToolHints",
    "ToolOptions",
    "check_tool_name",
    "description_pin",
    "external_tool",
    "floor_rules",
    "floor_violations",
    "function_tool",
    "tool_pin",
    "with_handler",
]

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TITLE_LIMIT: Final = 100


@dataclass(frozen=True, slots=True)
class ToolHints:
    """What a tool tells MCP clients about its behaviour beyond veridic's contract.

    MCP's tool annotations say more than a tool's kind, risk and
    irreversibility: whether a write only adds (``destructiveHint``), whether
    repeating a call changes nothing more (``idempotentHint``), whether the
    tool reaches an open world of outside entities (``openWorldHint``), and a
    title for people. Only the registrant knows these, so a tool declares them
    with ``hints=ToolHints(...)`` (on ``@registry.tool``, ``component.tool``,
    ``registry.external`` and ``component.external``), and
    :func:`~veridic.tools.tool_specs.mcp_annotations` reads them.

    One value object rather than four keywords: these are claims made to an
    MCP client, not veridic's contract, so they travel together and apart from
    ``kind``/``risk``/``irreversible``, and a hint the protocol adds later does
    not widen four signatures.

    Hints never lower veridic's risk, and never change an approval: risk comes
    from the kind and the floors alone. A high-risk write is advertised as
    destructive even when declared ``additive=True``, because veridic confirms
    each of its calls, and a client that relaxes its own confirmation for
    additive tools must not relax it for these.

    - ``additive``: a write that only adds (creates a record, appends to a log)
      and never overwrites or deletes; ``destructiveHint`` is ``false`` for it
      (unless it is high risk). Left ``False``, a write is destructive, as the
      protocol assumes.
    - ``idempotent``: a write whose repeated call with the same arguments has no
      further effect; ``None`` (undeclared) leaves the hint out.
    - ``open_world``: ``True`` when the tool reaches outside entities (the web,
      other people's inboxes), ``False`` for a closed domain (its own store);
      ``None`` leaves the hint out (the protocol then assumes an open world).
    - ``title``: a short name for people, one printable line written in code.

    A query is read-only, so ``additive`` and ``idempotent`` (meaningful only
    for writes) are refused on one when the tool is declared.

    >>> ToolHints(additive=True, open_world=False, title="Create webhook")
    ToolHints(additive=True, idempotent=None, open_world=False, title='Create webhook')

    Raises:
        VeridicError: a flag that is not a bool, or a title that is not one short
            printable line.
        ProvenanceError: the title is untrusted text.
    """

    additive: bool = False
    idempotent: bool | None = None
    open_world: bool | None = None
    title: TrustedText | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.additive, bool):
            raise VeridicError(
                f"ToolHints(additive={self.additive!r}) is not a bool: pass True for a write "
                "that only adds, or leave it out"
            )
        for name, value in (("idempotent", self.idempotent), ("open_world", self.open_world)):
            if value is not None and not isinstance(value, bool):
                raise VeridicError(
                    f"ToolHints({name}={value!r}) is not a bool: pass True or False, or leave it "
                    "out to say nothing"
                )
        title = self.title
        if title is None:
            return
        refuse_untrusted(title, "ToolHints(title=...)", "write the title in code")
        if (
            not isinstance(title, str)
            or not title.strip()
            or len(title) > _TITLE_LIMIT
            or not title.isprintable()
        ):
            shown = clip(title) if isinstance(title, str) else repr(title)
            raise VeridicError(
                f"ToolHints(title={shown}) is not a title: MCP clients show it to people, so "
                f"give one printable line of 1-{_TITLE_LIMIT} characters, e.g. "
                'title="Create webhook"'
            )


_NO_HINTS: Final = ToolHints()


@dataclass(frozen=True, slots=True, eq=False)
class Tool:
    """A resolved tool: what every projection and the dispatcher read.

    ``risk`` is the risk the tool runs at (declared, or the default of its
    kind raised to its floors). ``instruction_arguments`` are the dotted
    paths of arguments that are read as instruction (``InstructionField``);
    ``instruction_writes`` the ``Model.field`` paths of instruction fields in
    the models it declares in ``writes``. ``input_model`` is the pydantic
    model of a function tool's arguments (``None`` for an external tool).
    ``description_gap`` is why the description is not a real one (``None``
    when it is): such a tool is in no view. ``documented_elsewhere`` holds
    docstring entries for parameters the function does not take.
    ``pin_scope`` says what an external tool's pin covers (see :data:`PinScope`);
    the capability section prints of an external tool only what its pin covers.
    ``parameters`` and ``required`` are the arguments the model sends, named
    as the input schema names them (a parameter's alias is its argument's
    name; ``parameter_descriptions`` is keyed the same way): a handler's
    ``ToolContext`` parameter (:attr:`context`) is not one of them.
    """

    name: str
    kind: ToolKind
    risk: Risk
    irreversible: bool
    description: str
    description_trust: DescriptionTrust
    pin: str | None
    pin_scope: PinScope
    component: str | None
    roles: frozenset[str]
    parameters: tuple[str, ...]
    required: tuple[str, ...]
    parameter_descriptions: Mapping[str, str]
    documented_elsewhere: frozenset[str]
    instruction_arguments: frozenset[str]
    instruction_writes: frozenset[str]
    writes: tuple[type[BaseModel], ...]
    input_model: type[BaseModel] | None
    origin: str
    handler: Callable[..., object]
    is_async: bool
    description_gap: GapCode | None
    schema_json: str = field(repr=False)
    _validate: Callable[[object], dict[str, object]] = field(repr=False)
    _invoke: Callable[[Mapping[str, object]], object] = field(repr=False)
    _memo: dict[str, object] = field(default_factory=dict, repr=False)
    withheld: str = ""
    """Why the registrant keeps this known tool out of every view (an external tool whose
    source no longer shows what was pinned); ``""`` for a tool that may be offered."""
    hints: ToolHints = _NO_HINTS
    """What the tool declared for MCP clients (:class:`ToolHints`); never part of its risk."""
    context: ContextParameter | None = None
    """The parameter through which the handler asks for its call's :class:`~veridic.ToolContext`
    (``None``: it asks for none; always ``None`` for an external tool)."""
    _stripped_fix: str = field(default="", repr=False)
    """What to do about a missing description that ``-OO`` is part of (its docstring
    stripped, or one it lacks no help): :func:`~veridic.tools._written_doc.stripped_fix`,
    told in place of "write a docstring"; ``""`` for the usual fix."""

    @property
    def external(self) -> bool:
        """Whether the tool was registered from someone else's spec."""
        return self.description_trust != "code"

    @property
    def schema_trusted(self) -> bool:
        """Whether the input schema's text (its argument names) may be printed as instruction.

        True for a function tool (its signature is code) and for an external
        tool pinned with :func:`tool_pin`; a description-only pin does not
        cover the schema.
        """
        return self.description_trust == "code" or (
            self.description_trust == "pinned" and self.pin_scope == "tool"
        )

    @property
    def writes_instruction_fields(self) -> bool:
        """Whether it is a write whose effect is text another feature reads as instruction."""
        return self.kind == "write" and bool(self.instruction_arguments or self.instruction_writes)

    @property
    def input_schema(self) -> JsonObject:
        """The JSON schema of the tool's arguments (a fresh copy: mutate it freely)."""
        loaded: JsonObject = json.loads(self.schema_json)
        return loaded

    def validate(self, arguments: object) -> dict[str, object]:
        """Check ``arguments`` against the input schema; give the keyword arguments to call with.

        A function tool's values come back as pydantic validated them (nested
        models as model instances, instruction fields minted); an external
        tool's come back as sent.

        Raises:
            InvalidArgumentsError: not a JSON object, or a field is missing,
                unknown or of the wrong type (``.fields`` names them).
            GuardDeniedError: a validator of an argument model attempted a guarded
                operation: validation runs before the call is approved, outside its
                dispatch, so the guards refuse every such operation there.
        """
        with _validating(self.name):
            return self._validate(arguments)

    def invoke(
        self, arguments: Mapping[str, object], context: ToolContext[object] | None = None
    ) -> object:
        """Call the handler with arguments that :meth:`validate` returned.

        ``context`` goes to the handler's context parameter (:attr:`context`);
        a tool that asks for none ignores it. Build it with
        :meth:`ContextParameter.bind <veridic.tools.context.ContextParameter.bind>`,
        which checks the deps (or let :meth:`PreparedCall.with_context
        <veridic.PreparedCall.with_context>` do it).
        For an ``async`` handler this returns the coroutine for the caller to await.

        Called by a handler inside a dispatch (``view.tool("purge").invoke(...)``),
        it runs another tool as surely as :meth:`ToolView.dispatch
        <veridic.ToolView.dispatch>` does, so it is judged and recorded as that
        dispatch is (``"delegation:<tool>"``, see :mod:`veridic.tools.guards`): a
        tool the call's approval policy denies, a high-risk tool in a call the user
        did not confirm, a write in a query, are refused before the handler runs,
        and what the tool declares doing (``irreversible``, a write of instruction
        fields) is in the call's record once it returned (for an ``async`` handler,
        once its coroutine is awaited).

        Raises:
            VeridicError: the tool asks for a context and ``context`` is not one.
            GuardDeniedError: called by a handler inside a dispatch that may not run
                this tool; the handler did not run.
        """
        # The context is checked first: a delegation judged allowed is recorded at once,
        # and a call refused for its context after that was in the record as run.
        given = self._given(arguments, context)
        if current_dispatch() is None or _veridic_frame(sys._getframe(1)):
            # Outside any dispatch (the application's own code), or veridic's dispatch,
            # which judged the call before it got here.
            return self._invoke(given)
        if not _delegated(self.name, self.risk, self.kind):
            return self._invoke(given)
        result = self._invoke(given)
        if inspect.isawaitable(result):
            return self._done_once_awaited(result)
        self._done()
        return result

    def _given(
        self, arguments: Mapping[str, object], context: ToolContext[object] | None
    ) -> Mapping[str, object]:
        """What the handler is called with: ``arguments``, and ``context`` where it asks for
        one (refused when it is not a :class:`ToolContext`)."""
        parameter = self.context
        if parameter is None:
            return arguments
        if not isinstance(context, ToolContext):
            raise VeridicError(
                f"tool {self.name!r} ({self.origin}) asks for a {parameter.expects} (parameter "
                f"{parameter.name!r}) and was invoked with {type(context).__name__}: pass the "
                "application's object as context= to execute(), aexecute() or view.dispatch()"
            )
        return {**arguments, parameter.name: context}

    def _done(self) -> None:
        """Record in the calls around it what this tool, run by a handler, declares it did."""
        writes = self.writes_instruction_fields
        _delegate_done(self.name, self.irreversible, writes, self.instruction_writes)

    async def _done_once_awaited(self, pending: Awaitable[object]) -> object:
        """``pending`` awaited, then recorded as done: an ``async`` handler's effects
        happen when its coroutine runs, not when it is made."""
        value = await pending
        self._done()
        return value


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What a registration declared, checked when it was declared."""

    kind: ToolKind
    risk: Risk | None
    irreversible: bool
    writes: tuple[type[BaseModel], ...]
    name: str | None
    description: str | None
    roles: frozenset[str]
    hints: ToolHints = _NO_HINTS

    @staticmethod
    def check(
        where: str,
        kind: object,
        risk: RiskLike | None,
        irreversible: bool,
        writes: Iterable[type[BaseModel]],
        name: str | None,
        description: str | None,
        roles: Iterable[str],
        hints: ToolHints | None = None,
    ) -> ToolOptions:
        """Refuse declarations that cannot mean anything, at the decorator.

        Raises:
            VeridicError: an unknown kind or risk, a query declared
                irreversible or writing models, ``writes`` holding
                something other than pydantic models, ``hints`` that is not
                a :class:`ToolHints`, or a query declaring the hints of a
                write (``additive``, ``idempotent``).
            ProvenanceError: ``description`` is untrusted text.
        """
        if kind not in ("query", "write"):
            raise VeridicError(
                f"tool {where} declares kind={kind!r}: a tool is a query (reads, changes "
                'nothing) or a write (changes something): pass kind="query" or kind="write"'
            )
        resolved_kind: ToolKind = "query" if kind == "query" else "write"
        written = tuple(writes)
        if resolved_kind == "query" and (irreversible or written):
            raise VeridicError(
                f'tool {where} is declared kind="query" with an effect '
                f"(irreversible={irreversible}, writes={_model_names(written)}): a query changes "
                'nothing; declare kind="write"'
            )
        for model in written:
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise VeridicError(
                    f"tool {where} declares writes=({model!r},), which is not a pydantic model: "
                    "list the pydantic models the tool writes, so their instruction fields count"
                )
        if description is not None:
            _refuse_untrusted_description(where, description)
        return ToolOptions(
            resolved_kind,
            _risk(where, risk),
            bool(irreversible),
            written,
            name,
            description,
            frozenset((roles,) if isinstance(roles, str) else roles),
            _hints(where, resolved_kind, hints),
        )


def check_tool_name(name: object, where: str, *, builtin: bool = False) -> str:
    """Refuse a name that a provider would reject (OpenAI and Anthropic: ``[A-Za-z0-9_-]{1,64}``).

    Raises:
        VeridicError: the name is not such a string, or is the built-in schema tool's name.
    """
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        # The name may be a server's (an MCP listing): quoted escaped and clipped.
        shown = clip(name) if isinstance(name, str) else repr(name)
        raise VeridicError(
            f"tool name {shown} ({where}) is not a valid tool name: providers accept 1-64 "
            "letters, digits, _ and -; pass name=... with such a name"
        )
    if name == SCHEMA_TOOL and not builtin:
        raise VeridicError(
            f"tool name {name!r} ({where}) is reserved: every view carries the built-in "
            f"{SCHEMA_TOOL} query; give your tool another name"
        )
    return name


def function_tool(
    function: Callable[..., object],
    options: ToolOptions,
    component: str | None,
    localns: Mapping[str, object] | None = None,
    *,
    text: FunctionText | None = None,
    builtin: bool = False,
) -> Tool:
    """Resolve a typed function into a tool: schema, descriptions, risk.

    ``text`` is what the registry read from the function when it was
    registered (:class:`FunctionText`; read now when not given). ``localns``
    holds the names visible where the function was decorated, so annotations
    that name a class defined in a function body resolve.

    A parameter annotated ``ToolContext[X]`` is the handler's context, not
    an argument (see :mod:`veridic.tools.context`).

    Raises:
        VeridicError: an annotation is missing or cannot be resolved, a
            parameter is ``*args``/``**kwargs`` or starts with ``_``,
            pydantic cannot build a JSON schema for a parameter type, a
            query takes an ``InstructionField`` argument, or the context
            parameter is malformed (two of them, a default, a bare
            ``ToolContext``, a ``ToolContext`` inside another type).
    """
    origin = _origin_of(function)
    read = text or FunctionText.read(
        function, options.name, described=options.description is not None
    )
    name = check_tool_name(options.name or read.name, origin, builtin=builtin)
    where = f"{name!r} ({origin})"
    docstring = parse_docstring(read.doc)
    description = options.description if options.description is not None else docstring.summary
    model, schema, positional, context = _input_model(
        function, read, name, where, docstring.parameters, localns
    )
    # The arguments the model sends are named as the schema names them (an alias renames one).
    argument_names = _argument_names(model, where)
    parameters = tuple(argument_names.values())
    arguments = _instruction_arguments(model, schema, argument_names)
    if options.kind == "query" and arguments:
        raise VeridicError(
            f"tool {where} is a query but takes instruction text ({', '.join(sorted(arguments))} "
            "is an InstructionField): validating the model's arguments would mint its own "
            "output as trusted instruction text, and a query is low risk and may be always "
            'allowed; declare it kind="write" (instruction-field writes are high risk, each '
            "call confirmed by the user), or type the parameter str"
        )
    writes = frozenset(
        f"{written.__name__}.{path}"
        for written in options.writes
        for path in sorted(model_instruction_paths(written))
    )
    rules = floor_rules(options.kind, options.irreversible, arguments, writes, options.writes)
    gap = description_problem(name, description)
    return Tool(
        name=name,
        kind=options.kind,
        risk=resolve_risk(options.kind, options.risk, *rules).risk,
        irreversible=options.irreversible,
        description=description,
        description_trust="code",
        pin=None,
        pin_scope="",
        component=component,
        roles=options.roles,
        parameters=parameters,
        required=tuple(
            argument_names[n] for n, info in model.model_fields.items() if info.is_required()
        ),
        parameter_descriptions=MappingProxyType(
            {argument_names[n]: info.description or "" for n, info in model.model_fields.items()}
        ),
        # The context parameter's entry may stay: it documents the handler, not an argument.
        # A docstring documents a parameter by its Python name, whatever its alias.
        documented_elsewhere=frozenset(docstring.parameters)
        - set(argument_names)
        - set(parameters)
        - ({context.name} if context is not None else set()),
        instruction_arguments=arguments,
        instruction_writes=writes,
        writes=options.writes,
        input_model=model,
        origin=origin,
        handler=function,
        is_async=inspect.iscoroutinefunction(function),
        description_gap=gap,
        schema_json=json.dumps(schema, ensure_ascii=False),
        _validate=_pydantic_validator(name, model),
        _invoke=_function_invoker(function, positional),
        hints=options.hints,
        context=context,
        _stripped_fix=stripped_fix(function, described=options.description is not None)
        if gap is GapCode.MISSING_DESCRIPTION
        else "",
    )


def external_tool(
    *,
    name: str,
    description: str,
    input_schema: Mapping[str, object],
    handler: Callable[[dict[str, object]], object],
    options: ToolOptions,
    pin: str | None,
    source: str,
    component: str | None,
    withheld: str = "",
) -> Tool:
    """Resolve a tool described by someone else's spec.

    Raises:
        VeridicError: the name, schema, pin or handler is malformed, a tool
            pin vouches for a required name that is not an argument name (the
            section would print it), or the ``jsonschema`` package (extra
            ``external``) is not installed.
    """
    _check_source(source, clip(name) if isinstance(name, str) else repr(name))
    origin = source.strip() or "an external spec"
    check_tool_name(name, origin)
    where = f"{name!r} ({origin})"
    if not isinstance(description, str):
        raise VeridicError(
            f"external tool {where} has a description of type {type(description).__name__}: "
            "pass the description text the spec gives (a str)"
        )
    if not callable(handler):
        raise VeridicError(
            f"external tool {where} has handler {handler!r}, which is not callable: pass the "
            "function that forwards a call to the tool (it receives the arguments as a dict)"
        )
    schema = _plain_json(input_schema, where)
    validator = _schema_validator(schema, where)
    trust, scope = _pin_state(name, description, schema, pin, where)
    if is_untrusted(name) and not (trust == "pinned" and scope == "tool"):
        # The section prints the name as trusted text: from code, or vouched for by a
        # tool pin (which covers it); outside text a pin does not cover is refused.
        refuse_untrusted(
            name,
            f"registry.external(name=...) of {where}",
            "write the name in code, or review the tool and write in code the tool pin that "
            "veridic.tools.tool.tool_pin(name, description, input_schema) gives for it, "
            + _pin_to_write(name, description, schema),
        )
    name = str(name)  # the brand ends here: the pin vouched for the text
    properties = schema.get("properties")
    props: dict[str, object] = dict(properties) if isinstance(properties, dict) else {}
    required = schema.get("required")
    if trust == "pinned" and scope == "tool":
        _check_printed_names(required, where)
    arguments = frozenset(
        p for p, sub in props.items() if _mentions_instruction(sub, schema, frozenset())
    )
    rules = floor_rules(options.kind, options.irreversible, arguments, frozenset(), ())
    return Tool(
        name=name,
        kind=options.kind,
        risk=resolve_risk(options.kind, options.risk, *rules).risk,
        irreversible=options.irreversible,
        description=description,
        description_trust=trust,
        pin=pin,
        pin_scope=scope,
        component=component,
        roles=options.roles,
        parameters=tuple(props),
        required=tuple(r for r in required if isinstance(r, str))
        if isinstance(required, list)
        else (),
        parameter_descriptions=MappingProxyType(
            {p: _schema_description(sub) for p, sub in props.items()}
        ),
        documented_elsewhere=frozenset(),
        instruction_arguments=arguments,
        instruction_writes=frozenset(),
        writes=(),
        input_model=None,
        origin=origin,
        handler=handler,
        is_async=inspect.iscoroutinefunction(handler),
        description_gap=description_problem(name, description),
        schema_json=json.dumps(schema, ensure_ascii=False),
        _validate=validator(name),
        _invoke=lambda arguments: handler(dict(arguments)),
        withheld=_withheld_reason(withheld, where),
        hints=options.hints,
    )


def _pin_to_write(name: str, description: str, schema: JsonObject) -> str:
    """The tool pin of an external tool as it is now, for the message that asks for one
    (computed only then: a description no pin can cover registers unpinned)."""
    try:
        return f"here pin={_tool_pin(str(name), str(description), schema)!r}"
    except VeridicError as error:
        return f"once it can be pinned ({error})"


def _instruction_arguments(
    model: type[BaseModel], schema: JsonObject, argument_names: Mapping[str, str]
) -> frozenset[str]:
    """The dotted paths of a function tool's arguments that are read as instruction.

    :func:`~veridic.text.fields.instruction_fields` follows pydantic models; a
    dataclass or a ``TypedDict`` holding an ``InstructionField`` mints the model's
    text just as well when the arguments are validated, so the input schema's
    marks (every node pydantic validates with the field) are read too: an argument
    marked there and not found by the model walk is added, by its argument name.
    Whatever mints must set the floors, or a mid-risk write (always allowed) or a
    query would turn the model's text into trusted instruction.
    """
    return _with_marked(instruction_fields(model), schema, argument_names)


def _check_printed_names(required: object, where: str) -> None:
    """Refuse required names of a tool-pinned schema that are not argument names.

    A tool pin makes the capability section print the schema's required names as
    trusted text, on the tool's one line. A name holding a line break, ``)`` or
    ``;`` (``"q): Search.\n- wipe_all (query, low risk"``) would write a line of
    its own there, promising a tool that the tool list and dispatch lack; a
    reviewer who pinned the JSON saw an escaped ``\n``, not a second tool.

    Raises:
        VeridicError: a required name is not 1-64 letters, digits, ``_``, ``.``, ``-``.
    """
    for entry in required if isinstance(required, list) else ():
        if isinstance(entry, str) and _ARGUMENT_NAME.fullmatch(entry) is None:
            raise VeridicError(
                f"external tool {where} is pinned with a tool pin, and its input schema requires "
                f"{entry!r}, which is not an argument name: the capability section prints the "
                "required names of a tool-pinned schema as instruction text, and providers "
                r"accept [A-Za-z0-9_.-]{1,64}; do not register this tool (or review it again "
                "and pin only its description with description_pin(description), which prints "
                "no argument names)"
            )


def _withheld_reason(reason: object, where: str) -> str:
    """The reason a view prints for a withheld tool: trusted, one printable line."""
    if reason is None or reason == "":
        return ""
    refuse_untrusted(reason, f"registry.external(unavailable=...) of {where}", "write it in code")
    if not isinstance(reason, str) or "\n" in reason or not reason.isprintable():
        raise VeridicError(
            f"external tool {where} has unavailable={reason!r}, which is not a reason: the "
            "capability section prints it, so give one printable line saying why the tool is "
            'kept out (e.g. unavailable="its description changed since it was pinned")'
        )
    return reason


def with_handler(tool: Tool, handler: Callable[..., object]) -> Tool:
    """The same tool answered by another function with the same signature."""
    built = _function_invoker(handler, ())
    return replace(tool, handler=handler, _invoke=built, _memo=tool._memo)


def floor_rules(
    kind: ToolKind,
    irreversible: bool,
    arguments: frozenset[str],
    writes: frozenset[str],
    models: tuple[type[BaseModel], ...],
) -> tuple[tuple[FloorRule, ...], tuple[str, ...]]:
    """The risk floors a tool's effects set, and why each applies: where they are chosen.

    ``arguments`` are its instruction-field argument paths, ``writes`` the
    ``Model.field`` paths of the instruction fields of ``models`` (what it
    declares it writes). The one place the rules are picked: resolving a
    tool's risk uses them, and :func:`floor_violations` (what the registry
    refuses at boot and what the lint reports) reads them back from the tool.

    >>> rules, why = floor_rules("write", True, frozenset(), frozenset(), ())
    >>> [rule.code for rule in rules], why
    (['irreversible'], ('it is declared irreversible=True',))
    """
    rules: list[FloorRule] = []
    details: list[str] = []
    if irreversible:
        rules.append(IRREVERSIBLE)
        details.append("it is declared irreversible=True")
    if kind == "write" and arguments:
        rules.append(INSTRUCTION_ARGUMENTS)
        details.append(
            "its arguments hold instruction fields (" + ", ".join(sorted(arguments)) + ")"
        )
    if kind == "write" and writes:
        rules.append(INSTRUCTION_WRITES)
        details.append(
            f"it declares writes={_model_names(models)}, whose instruction fields "
            f"({', '.join(sorted(writes))}) are read as instruction"
        )
    return tuple(rules), tuple(details)


def floor_violations(tool: Tool) -> tuple[FloorViolation, ...]:
    """The floors ``tool``'s declared risk is below (empty when it declared none, or enough).

    What :meth:`veridic.Registry.boot` refuses with :class:`~veridic.RiskFloorError`
    and what the lint reports tool by tool: one function, so they cannot disagree.
    A tool that declared no risk runs at its floors, so it never violates one.
    """
    rules = floor_rules(
        tool.kind,
        tool.irreversible,
        tool.instruction_arguments,
        tool.instruction_writes,
        tool.writes,
    )
    return resolve_risk(tool.kind, tool.risk, *rules).violations


# --- declarations ---------------------------------------------------------------


def _risk(where: str, risk: object) -> Risk | None:
    if risk is None or isinstance(risk, Risk):
        return risk
    if isinstance(risk, str) and risk in ("low", "mid", "high"):
        return Risk(risk)
    raise VeridicError(
        f"tool {where} declares risk={risk!r}: use Risk.LOW, Risk.MID or Risk.HIGH "
        "(or leave it unset: queries default to low, writes to mid)"
    )


def _hints(where: str, kind: ToolKind, hints: object) -> ToolHints:
    if hints is None:
        return _NO_HINTS
    if not isinstance(hints, ToolHints):
        raise VeridicError(
            f"tool {where} declares hints={hints!r}, which is not a ToolHints: pass "
            "hints=ToolHints(additive=..., idempotent=..., open_world=..., title=...)"
        )
    if kind == "query" and (hints.additive or hints.idempotent is not None):
        raise VeridicError(
            f'tool {where} is declared kind="query" with the hints of a write '
            f"(additive={hints.additive}, idempotent={hints.idempotent}): a query is read-only, "
            "and MCP reads those hints only for tools that change something; leave them out "
            '(open_world and title apply to a query), or declare kind="write"'
        )
    return hints


def _refuse_untrusted_description(where: str, description: object) -> None:
    if not isinstance(description, str):
        raise VeridicError(
            f"tool {where} has description={description!r}, which is not text: write the "
            "description as a string literal where the tool is defined"
        )
    refuse_untrusted(
        description,
        f"the description of tool {where}",
        "write it in code, or register the tool with registry.external(..., pin=...) to pin "
        "text from outside by hash",
    )


def _model_names(models: tuple[type[BaseModel], ...]) -> str:
    names = [getattr(m, "__name__", repr(m)) for m in models]
    return f"({names[0]},)" if len(names) == 1 else "(" + ", ".join(names) + ")"


def _origin_of(function: Callable[..., object]) -> str:
    code = getattr(_unwrapped_function(function), "__code__", None)
    if code is not None:
        return f"{_display_path(code.co_filename)}:{code.co_firstlineno}"
    qualname = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{getattr(function, '__module__', None) or type(function).__module__}.{qualname}"


# --- external tools ---------------------------------------------------------------


def _check_source(source: object, where: str) -> None:
    """The ``source`` label is printed in the capability section: one short line, from code."""
    refuse_untrusted(source, f"registry.external(source=...) of {where}", "write it in code")
    if not isinstance(source, str) or len(source) > 100 or not source.isprintable():
        shown = clip(source) if isinstance(source, str) else repr(source)
        raise VeridicError(
            f"external tool {where} has source={shown}, "
            "which is not a label: the capability section prints it, so give one printable line "
            'of at most 100 characters saying where the spec came from, e.g. source="mcp:github"'
        )
