"""``ToolContext``: what a handler is given of its request, besides the model's arguments.

A handler often needs what the model must neither see nor choose: the user
the request is for, a database session, a tenant. Kept in globals, these leak
across requests; sent as arguments, the model would pick them. So a handler
asks for them by declaring one parameter annotated ``ToolContext[Deps]``
(any name, any position), and the application passes its object when it runs
the call: ``execute(..., context=deps)``, ``aexecute(..., context=deps)`` or
``view.dispatch(..., context=deps)``. veridic builds the :class:`ToolContext`:
``ctx.deps`` is exactly the object passed, ``ctx.request_id`` the request the
call belongs to, ``ctx.tool`` the name of the tool being called.

>>> from dataclasses import dataclass
>>> from veridic import Registry, ToolContext
>>> @dataclass
... class Shop:
...     user: str
>>> registry = Registry()
>>> @registry.tool(kind="query")
... def greet(ctx: ToolContext[Shop], greeting: str) -> str:
...     '''Greet the user this request is for.
...
...     Args:
...         greeting: The word to greet with, e.g. "Hello".
...     '''
...     return f"{greeting}, {ctx.deps.user} ({ctx.tool}, {ctx.request_id})"
>>> view = registry.view()
>>> view.dispatch("greet", {"greeting": "Hello"}, context=Shop("ada"), request_id="req-7")
'Hello, ada (greet, req-7)'
>>> list(view.tool("greet").input_schema["properties"])
['greeting']

The rules:

- **The model never sees it.** The parameter is left out of the tool's input
  schema and its required list (so of every provider's tool list, the
  capability section, ``get_tool_schema``'s answer and the manifest's schema
  hash), and out of ``Tool.parameters``. Its
  docstring entry is optional and never shown; :func:`veridic.find_doc_gaps`
  does not ask for one. A model that sends an argument of that name gets the
  usual invalid-arguments refusal (an unknown field): what it sends never
  reaches the context. The audit record and the approval request keep the
  model's arguments only.
- **One, typed, without a default.** Two context parameters, a default, a
  ``*args``/``**kwargs`` of it, a bare ``ToolContext`` (deps of type ``Any``,
  unchecked by mypy and at run time) or a context inside another type
  (``ToolContext[Shop] | None``) fail when the registry boots, naming the tool.
  Write ``ToolContext[object]`` to accept anything, ``ToolContext[None]`` for a
  handler that only wants the request id.
- **Checked before anything runs.** ``context=None`` (the default) means no
  deps were given. When a tool asks for ``ToolContext[X]`` and the deps are not
  an ``X`` (``None`` included, unless ``X`` admits it: ``None``,
  ``X | None``, ``object``, ``Any``), the call is misuse by the application,
  not a failure of the tool: :class:`~veridic.VeridicError` is raised, naming
  the tool, where it is defined, the expected and the given type, where
  ``execute()`` refuses an async tool: after the call was checked against the
  view, before approval, without an audit record (as for any misuse). ``X`` is
  checked with ``isinstance`` where it can be: a class, a generic alias's class
  (``list[int]`` as ``list``), ``None``, a union of these, ``Annotated`` of one,
  a runtime-checkable protocol; other forms (a type variable, a plain protocol,
  a string forward reference) are left to mypy, and accept any object but
  ``None``. A tool that does not ask for a context ignores it; an external
  tool (its handler takes the arguments as a dict) never gets one.
- **Only veridic builds it.** ``ToolContext(...)`` raises: its ``tool`` and
  ``request_id`` are the call's own. To test a handler, dispatch it:
  ``view.dispatch(name, arguments, context=deps, request_id="test-1")``. A
  handler that delegates to another tool passes ``context=ctx.deps`` (a
  ``ToolContext`` given as deps is refused); the nested call's request id is
  then the enclosing call's.
- **The request id of a direct dispatch**: ``view.dispatch(...,
  request_id=...)`` when given; else the id of the call it runs inside (a
  handler delegating within :func:`veridic.execute`); else a fresh
  ``"dispatch-<32 hex digits>"``, unique to that call.

Its ``repr`` names the deps' type, not their value (a session or a user
object may hold secrets that would reach a log through a traceback).
"""

from __future__ import annotations

import inspect
import types
import typing
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Final, Generic, Literal, TypeVar, Union, final

from veridic._sample import clip, quoted
from veridic.errors import VeridicError

__all__ = ["ContextParameter", "ToolContext", "read_context_parameter"]

DepsT = TypeVar("DepsT", covariant=True)

_DISPATCH_PREFIX: Final = "dispatch-"


@final
@dataclass(frozen=True, slots=True, init=False)
class ToolContext(Generic[DepsT]):
    """What a handler that asks for it is given of its call: the application's deps, the
    request id, the tool's name. Built by veridic only (see the module's docstring).

    Raises:
        VeridicError: constructed directly.
    """

    deps: DepsT
    """What the application passed as ``context=``, the same object."""
    request_id: str
    """The request the call belongs to: ``execute()``'s ``request_id``, as its audit record says."""
    tool: str
    """The name of the tool being called."""

    def __init__(self, deps: DepsT, request_id: str, tool: str) -> None:
        raise VeridicError(
            f"ToolContext(...) was constructed directly (tool {quoted(tool)}): veridic builds a "
            "tool's context for each call, so its request id and tool name are the call's own; "
            "pass the application's object as context= to execute(), aexecute() or "
            "view.dispatch() (to test a handler, dispatch it through a view)"
        )

    def __repr__(self) -> str:
        return (
            f"ToolContext(deps=<{type(self.deps).__qualname__}>, "
            f"request_id={clip(self.request_id)}, tool={clip(self.tool)})"
        )


def _built(deps: object, request_id: str, tool: str) -> ToolContext[object]:
    made: ToolContext[object] = object.__new__(ToolContext)
    object.__setattr__(made, "deps", deps)
    object.__setattr__(made, "request_id", request_id)
    object.__setattr__(made, "tool", tool)
    return made


@dataclass(frozen=True, slots=True)
class ContextParameter:
    """The parameter through which a function tool's handler receives its :class:`ToolContext`.

    ``name`` is the parameter's name; ``deps_type`` the ``X`` of its
    ``ToolContext[X]`` annotation, as written (resolved).
    """

    name: str
    deps_type: object

    @property
    def expects(self) -> str:
        """The annotation as a reader wrote it, e.g. ``ToolContext[Shop]``."""
        return f"ToolContext[{_type_name(self.deps_type)}]"

    def bind(
        self, deps: object, *, tool: str, origin: str, request_id: str | None
    ) -> ToolContext[object]:
        """The context of one call of ``tool`` with ``deps``, checked against ``deps_type``.

        ``request_id`` ``None`` takes the enclosing dispatch's id, or a fresh one.

        Raises:
            VeridicError: ``deps`` is a ``ToolContext``, or not what the parameter
                declares (``None``: no deps were given), or ``request_id`` is not a
                non-empty string.
        """
        where = f"tool {tool!r} ({origin})"
        if isinstance(deps, ToolContext):
            raise VeridicError(
                f"{where} was given a ToolContext (of tool {deps.tool!r}) as its deps: pass "
                "the application's object itself, context=ctx.deps; veridic builds each "
                "call's own context"
            )
        if not _admits(self.deps_type, deps):
            if deps is None:
                raise VeridicError(
                    f"{where} asks for a {self.expects} (parameter {self.name!r}) and was called "
                    "without one: pass the application's object as context=... to execute(), "
                    "aexecute() or view.dispatch(); the handler reads it as "
                    f"{self.name}.deps"
                )
            raise VeridicError(
                f"{where} asks for a {self.expects} (parameter {self.name!r}) but was given "
                f"deps of type {_type_name(type(deps))}, not {_type_name(self.deps_type)}: pass "
                f"what it declares ({_type_name(self.deps_type)}) as context=..., or declare "
                "the type the application passes"
            )
        return _built(deps, _request_id(request_id, where), tool)


def read_context_parameter(parameter: inspect.Parameter, where: str) -> ContextParameter | None:
    """The context parameter ``parameter`` declares (its annotation resolved), or ``None``.

    Raises:
        VeridicError: the annotation is a bare ``ToolContext``, holds one inside
            another type, or the parameter has a default or is ``*args``/``**kwargs``.
    """
    annotation: object = parameter.annotation
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation is ToolContext:
        raise VeridicError(
            f"tool {where} has parameter {parameter.name!r} annotated ToolContext without its "
            "deps type, which would reach the handler as Any: write ToolContext[YourDeps] "
            "(ToolContext[object] accepts anything, ToolContext[None] only the request id)"
        )
    if typing.get_origin(annotation) is not ToolContext:
        if _mentions_context(annotation):
            raise VeridicError(
                f"tool {where} has parameter {parameter.name!r} annotated "
                f"{_type_name(annotation)}, a ToolContext inside another type: annotate the "
                "parameter ToolContext[X] itself (veridic gives one to every call of a tool "
                "that asks for it)"
            )
        return None
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise VeridicError(
            f"tool {where} takes *{parameter.name} or **{parameter.name} as its ToolContext: "
            f"declare one named parameter, {parameter.name}: {_type_name(annotation)}"
        )
    if parameter.default is not inspect.Parameter.empty:
        raise VeridicError(
            f"tool {where} gives its ToolContext parameter {parameter.name!r} a default: remove "
            "it; veridic passes the context on every call (and refuses a call without one)"
        )
    (deps_type,) = typing.get_args(annotation)
    return ContextParameter(parameter.name, deps_type)


def _mentions_context(annotation: object) -> bool:
    if annotation is ToolContext or typing.get_origin(annotation) is ToolContext:
        return True
    return any(_mentions_context(arg) for arg in typing.get_args(annotation))


def _admits(declared: object, deps: object) -> bool:
    """Whether ``deps`` may be a ``ToolContext[declared]``'s deps, as far as run time can tell."""
    if declared is Any or declared is object:
        return True
    if declared is None or declared is type(None):
        return deps is None
    origin = typing.get_origin(declared)
    if origin is Annotated:
        return _admits(typing.get_args(declared)[0], deps)
    if origin is Union or origin is types.UnionType:
        return any(_admits(member, deps) for member in typing.get_args(declared))
    if origin is Literal:
        return deps in typing.get_args(declared)
    supertype = getattr(declared, "__supertype__", None)  # a typing.NewType
    if supertype is not None and not isinstance(declared, type):
        return _admits(supertype, deps)
    checked = origin if isinstance(origin, type) else declared
    if not isinstance(checked, type):
        return deps is not None  # a type variable, a forward reference: mypy's to check
    try:
        return isinstance(deps, checked)
    except TypeError:  # a protocol that is not runtime_checkable
        return deps is not None


def _type_name(declared: object) -> str:
    if declared is None or declared is type(None):
        return "None"
    if isinstance(declared, type) and typing.get_origin(declared) is None:
        return declared.__qualname__
    return repr(declared).replace("typing.", "")


def _request_id(given: str | None, where: str) -> str:
    if given is not None:
        if not isinstance(given, str) or not given.strip():
            raise VeridicError(
                f"{where} got request_id={quoted(given)}: a call's request id is a non-empty "
                "string, the id its audit records carry; pass one, or leave it out"
            )
        return given
    # Imported here: ``import veridic.tools`` re-exports ToolContext, and stays light.
    from veridic.tools.guards import current_dispatch

    enclosing = current_dispatch()
    if enclosing is not None and enclosing.request_id:
        return enclosing.request_id
    return f"{_DISPATCH_PREFIX}{uuid.uuid4().hex}"
