"""``ToolView``: one request's tools, and the three projections that cannot disagree.

A view is what :meth:`veridic.Registry.view` returns after applying the boot
state and the filters of one request (roles, allow and deny lists,
predicates). It is the only source of:

- the **capability section** of the prompt (:meth:`ToolView.capability_section`),
- the **tool specs** sent to the provider (:meth:`ToolView.tool_specs`),
- the **dispatch table** (:meth:`ToolView.dispatch`),

so a tool that did not boot, is filtered by policy, or has no description is
absent from all three at once (invariant I4), and the section says
truthfully what is unavailable and why.

A name the view does not expose fails loudly, and says which case it is:
:class:`~veridic.UnknownToolError` (never registered, with the nearest valid
names), :class:`~veridic.ToolUnavailableError` (registered, but cannot run
here: its component did not start, it has no description, or its pinned
description changed), :class:`~veridic.ToolDeniedError` (filtered by this
view's policy). :meth:`ToolView.status` gives the same answer without raising.

Every view carries the built-in ``get_tool_schema`` query, so the model can
read a tool's contract instead of recalling it, unless it is built with
``schema_tool=False`` (where the model has the tool list and nothing to gain
from a second copy of it): then the schema tool is absent from the section,
the specs and dispatch at once, and no line of the section names it. The
section's wording (its first line, the heading of what is unavailable, the
line of a component that did not start) is a
:class:`~veridic.tools.wording.CapabilityWording`.

Parts of the view have modules of their own, whose names import from here
too: :mod:`veridic.tools.status` (what a view says about a name, and about a
component that did not start), :mod:`veridic.tools.filters` (which registered
tools a view withholds, and why) and :mod:`veridic.tools.schema_tool` (the
built-in ``get_tool_schema``). The capability section's text is written in
``veridic.tools._section``; the view mints it.

>>> from veridic import Registry
>>> registry = Registry()
>>> @registry.tool(kind="query")
... def get_weather(city: str) -> str:
...     '''Current weather in a city.
...
...     Args:
...         city: City name, e.g. "Oslo".
...     '''
...     return f"Sunny in {city}"
>>> view = registry.view()
>>> sorted(view.names())
['get_tool_schema', 'get_weather']
>>> view.dispatch("get_weather", {"city": "Oslo"})
'Sunny in Oslo'
>>> view.status("get_wether").suggestions
('get_weather',)
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import inspect
import json
import operator
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal, cast, overload
from weakref import WeakValueDictionary

from veridic import _json_object
from veridic._counted import counted
from veridic._sample import clip, quoted
from veridic._words import a_type
from veridic.errors import (
    InvalidArgumentsError,
    ToolCouplingError,
    UnknownToolError,
    VeridicError,
)
from veridic.text.provenance import TrustedInstruction, mint
from veridic.tools._section import _DEFAULT_WORDING, _memo, _render_section
from veridic.tools._similarity import NameIndex
from veridic.tools.context import ToolContext
from veridic.tools.filters import (
    Deny,
    Predicate,
    _Denials,
    _denied,
    _pin_changed,
    _unavailable,
    _withheld,
)
from veridic.tools.guards import (
    _claimed,
    _delegate_done,
    _delegated,
    _finished,
    current_dispatch,
    dispatching,
)
from veridic.tools.risk import ApprovalMode, Risk
from veridic.tools.schema_tool import _SCHEMA_TOOL_LEFT_OUT, ToolSchema, _schema_tool
from veridic.tools.status import (
    ComponentState,
    StatusCause,
    StatusState,
    ToolStatus,
    _hidden_error,
)
from veridic.tools.tool import (
    SCHEMA_TOOL,
    Tool,
    with_handler,
)
from veridic.tools.tool_specs import (
    AnthropicToolSpec,
    FrozenDict,
    FrozenList,
    McpToolSpec,
    OpenAIToolSpec,
    SpecFormat,
    _plain_spec,
    _tagged,
    _tagged_spec,
    _TaggedDict,
    _TaggedList,
    frozen_list,
    frozen_spec,
)
from veridic.tools.wording import CapabilityWording

__all__ = [
    "ComponentState",
    "Deny",
    "Predicate",
    "PreparedCall",
    "StatusCause",
    "StatusState",
    "ToolSchema",
    "ToolStatus",
    "ToolView",
    "build_view",
    "check_view_options",
]

_FORMATS: Final = ("openai", "anthropic", "mcp")
_SUGGESTED: Final = 3  # nearest names of an unknown one: difflib.get_close_matches(n=3, cutoff=0.6)
_CUTOFF: Final = 0.6
_LISTED: Final = 10  # names listed instead when none is near
_BUILD_KEY: Final = object()
_FOLD: Final = re.compile(r"[_-]")
_TOOL_SETS_KEPT: Final = 256


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call whose tool is exposed and whose arguments are valid: ready to run.

    :meth:`ToolView.validate` makes it without running anything, so a plan
    or an approval step can check a call first and run it later.
    ``arguments`` are the model's, as validated; a handler's
    :class:`~veridic.ToolContext` is never one of them, it is bound apart
    (:meth:`with_context`).
    """

    tool: Tool
    arguments: Mapping[str, object]
    context: ToolContext[object] | None = None
    """What the handler's context parameter gets (bound by :meth:`with_context`); ``None``
    until one is bound, and for a tool that asks for none."""

    def with_context(self, deps: object, *, request_id: str | None = None) -> PreparedCall:
        """This call with its request's context bound, checked before anything runs.

        For a tool whose handler asks for a ``ToolContext[X]``, the handler
        will get ``ToolContext(deps, request_id, tool name)``; ``request_id``
        ``None`` takes the id of the dispatch this runs inside (a handler
        delegating), or else a fresh ``"dispatch-<hex>"``. A tool that asks
        for no context gets the same call back, ``deps`` ignored. Calling
        :meth:`invoke` without binding first binds ``None`` (no deps): enough
        for a ``ToolContext[None]``, refused for most.

        Raises:
            VeridicError: the tool asks for a context and ``deps`` is not what
                it declares (``None``: none was given), or a ``ToolContext``
                itself (pass its ``.deps``), or ``request_id`` is not a
                non-empty string. The message names the tool, where it is
                defined, and the expected and given types.
        """
        parameter = self.tool.context
        if parameter is None:
            return self
        bound = parameter.bind(
            deps, tool=self.tool.name, origin=self.tool.origin, request_id=request_id
        )
        return dataclasses.replace(self, context=bound)

    def _bound(self) -> ToolContext[object] | None:
        if self.tool.context is None or self.context is not None:
            return self.context
        return self.with_context(None).context

    def invoke(self) -> object:
        """Run the handler as a dispatch of this tool, so the write-side guards judge it.

        Called outside :func:`veridic.execute` (which records how the call
        was approved), the call counts as approved by no one: a guarded
        operation (irreversible, or a write of instruction fields) inside it
        is refused. Inside another dispatch, that outer call stays the one
        judged, so delegating never gains authority.

        The result must be finished when the handler returns, because every
        effect of a call happens inside its dispatch (invariant I10). A
        *lazy* result is refused inside the dispatch: a generator, a
        coroutine or any other awaitable (from a sync wrapper), an async
        generator, and any iterator or async iterator (``map``, ``filter``,
        ``zip``, ``itertools``, ``iter(...)``; a file object is an iterator
        too, and is refused: return what you read from it), and a callback (a
        function, a ``functools.partial``, a bound method or another callable
        object that is not a class or a type hint such as ``list[int]``). Generators and
        coroutines are closed, so none of their code runs later and no
        "never awaited" warning leaks; an asyncio future is cancelled; other
        iterators are left to their owner. A lazy value inside the result
        is refused the same way (``{"deleted": (delete(i) for i in ids)}``),
        since rendering the result for the model would run it: in mappings
        (keys and values), lists, tuples, sets, deques, dict views, a
        ``UserList``, a ``ChainMap``'s maps, dataclass fields and pydantic
        model fields, at any depth; a ``MappingProxyType``, ``UserDict`` or
        ``UserList`` is judged by the object it wraps, so a mapping refused
        alone is refused inside one too. So is an iterable whose class iterates
        with Python code of its own (an ``__iter__`` or ``__getitem__``
        written in Python, an ``__aiter__``; a list subclass that overrides
        ``__iter__``, ``__getitem__``, ``keys``, ``values`` or ``items``):
        its items may be made, and the call's work done, only when the
        application iterates it, after the dispatch; return ``list(...)`` of
        it. The standard containers (a list, a dict, a ``range``, a dict
        view, a ``namedtuple``, a ``Counter``), pydantic models, flags,
        ``ipaddress`` networks, and classes that iterate with C code only (a
        NumPy array, an ``array.array``) are finished values; so is an object
        that cannot be iterated, rendered for the model by its ``__str__``
        inside the call.

        Raises:
            VeridicError: the handler is ``async``: its coroutine would run
                after the guards were gone; use :meth:`ainvoke`. Or it
                returned a lazy value. Or it asks for a context and none
                that fits was bound (see :meth:`with_context`); nothing ran.
        """
        if self.tool.is_async:
            raise VeridicError(
                f"tool {self.tool.name!r} has an async handler; dispatch() would hand back a "
                "coroutine that runs outside the dispatch's guards: use adispatch() or "
                "ainvoke() and await it"
            )
        context = self._bound()
        with _direct_dispatch(self.tool, context):
            result = self.tool.invoke(self.arguments, context)
            return _finished(result, self.tool.name, self.tool.origin, awaited=False)

    async def ainvoke(self) -> object:
        """Run the handler (sync or async) as a dispatch of this tool and await its result.

        An awaitable result (an ``async def`` handler's coroutine, or one a
        sync wrapper returns) is awaited once, inside the dispatch. What it
        gives must be finished, as for :meth:`invoke`: a generator, an async
        generator, an iterator or another awaitable is refused.

        Raises:
            VeridicError: the (awaited) result is lazy, or the handler asks for
                a context and none that fits was bound; nothing ran then.
        """
        context = self._bound()
        with _direct_dispatch(self.tool, context):
            result = self.tool.invoke(self.arguments, context)
            if inspect.isawaitable(result):
                return _finished(await result, self.tool.name, self.tool.origin, awaited=True)
            return _finished(result, self.tool.name, self.tool.origin, awaited=False)


class ToolView:
    """The tools one request may use, and the three projections of them.

    Build it with :meth:`veridic.Registry.view`; it is immutable. The
    capability section and the spec texts are computed once per view.
    """

    __slots__ = (
        "_cache",
        "_components",
        "_exposed",
        "_names",
        "_nearest",
        "_origin",
        "_tool_set",
        "_tools",
        "_withheld",
        "_wording",
    )

    _exposed: Mapping[str, Tool]
    _names: frozenset[str]
    _withheld: Mapping[str, ToolStatus]
    _components: tuple[ComponentState, ...]
    _origin: str
    _cache: dict[str, str]
    _nearest: tuple[NameIndex, tuple[str, ...]] | None
    _tool_set: _ToolSet
    _tools: tuple[Tool, ...]
    _wording: CapabilityWording

    def __init__(
        self,
        exposed: Iterable[Tool],
        withheld: Iterable[ToolStatus],
        components: Iterable[ComponentState],
        origin: str,
        *,
        key: object = None,
        wording: CapabilityWording | None = None,
        schema_tool: bool = True,
    ) -> None:
        if key is not _BUILD_KEY:
            # The capability section mints trusted text from the tools it is given:
            # only the registry, which resolved them from code, may hand them over.
            raise VeridicError(
                "a ToolView cannot be constructed directly: its capability section is trusted "
                "text, so its tools must come from a Registry; build it with registry.view()"
            )
        shown = tuple(exposed)
        left_out = {s.name: s for s in withheld}
        tools: dict[str, Tool] = {}
        if schema_tool:
            tools[SCHEMA_TOOL] = with_handler(_schema_tool(), self._read_schema)
        else:
            # Denied, not unknown: the model may have learnt the name elsewhere, and
            # "never registered" would not tell it where the contracts are instead.
            left_out[SCHEMA_TOOL] = _SCHEMA_TOOL_LEFT_OUT
        tools.update((tool.name, tool) for tool in shown)
        object.__setattr__(self, "_exposed", MappingProxyType(tools))
        object.__setattr__(self, "_names", frozenset(tools))
        object.__setattr__(self, "_withheld", MappingProxyType(left_out))
        object.__setattr__(self, "_components", tuple(c for c in components if c.started is False))
        object.__setattr__(self, "_origin", origin)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_nearest", None)
        object.__setattr__(self, "_tool_set", _ToolSet.of(shown, schema_tool))
        object.__setattr__(self, "_tools", tuple(tools.values()))
        object.__setattr__(self, "_wording", wording or _DEFAULT_WORDING)

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(
            f"cannot assign {name!r}: a ToolView is immutable; build another with registry.view()"
        )

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(
            f"cannot delete {name!r}: a ToolView is immutable; build another with registry.view()"
        )

    def __repr__(self) -> str:
        return (
            f"<ToolView of {self._origin}: {len(self._exposed)} exposed, "
            f"{len(self._withheld)} withheld, {counted(len(self._components), 'component')} down>"
        )

    # --- lookups (never raise) ------------------------------------------------

    def names(self) -> frozenset[str]:
        """The names this view exposes: the same set in the section, the specs and dispatch."""
        return self._names

    def tools(self) -> tuple[Tool, ...]:
        """The exposed tools, built-in schema tool first, then in registration order."""
        return self._tools

    def withheld(self) -> tuple[ToolStatus, ...]:
        """Every registered tool this view does not expose, with why (hidden ones included);
        also the built-in ``get_tool_schema`` (with ``tool=None``) when the view leaves it out."""
        return tuple(self._withheld.values())

    def unavailable_components(self) -> tuple[ComponentState, ...]:
        """The components that did not start, with their reasons and hints: those the
        capability section lists, so not one whose every tool this view's filters (roles,
        allow, deny, predicates) keep out; :meth:`veridic.Registry.components` has all."""
        return self._components

    def status(self, name: str) -> ToolStatus:
        """Classify ``name``: exposed, unknown, unavailable or denied. Never raises.

        An unknown name's ``suggestions`` start from what
        ``difflib.get_close_matches(name, view.names(), n=3, cutoff=0.6)``
        returns, in its order, and never steer the model towards more risk:
        a high-risk tool is suggested only when its name is a one-character
        typo of the unknown one (after ignoring case, ``_`` and ``-``), and
        no tool riskier than the nearest suggestion that is not high risk.
        When none is close, the first ten names in sorted order that are not
        high risk are listed instead. The matches come from an index of the
        exposed names that the view builds on its first unknown name, so a
        model that keeps inventing names does not cost a difflib comparison
        with every name each time. The plan notice shows these suggestions.
        """
        if not isinstance(name, str):
            return self.unknown(name)  # no tool has it (a list or dict is not even hashable)
        tool = self._exposed.get(name)
        if tool is not None:
            return ToolStatus(name, "exposed", tool=tool)
        withheld = self._withheld.get(name)
        if withheld is not None:
            return withheld
        return self.unknown(name)

    def unknown(self, name: str) -> ToolStatus:
        """``name`` as a name nobody registered, whatever the registry holds. Never raises.

        What the model (or an MCP client) is told of a tool this view hides
        (:attr:`ToolStatus.hidden <veridic.tools.status.ToolStatus.hidden>`): the
        same state, reason, hint and suggestions, word for word, as for a name never
        registered, so a planted or guessed name cannot tell a tool kept from the
        model from one that does not exist. The suggestions come from the exposed
        names only, as :meth:`status` gives them. :meth:`status` stays the truth for
        the application and the audit.

        >>> from veridic import Registry
        >>> registry = Registry()
        >>> @registry.tool(kind="query", roles={"admin"})
        ... def export_customers(limit: int) -> str:
        ...     '''Export the customer table.
        ...
        ...     Args:
        ...         limit: How many rows at most.
        ...     '''
        ...     return "rows"
        >>> view = registry.view()
        >>> view.status("export_customers").state, view.unknown("export_customers").state
        ('denied', 'unknown')
        """
        return self._unknown(name, near=True)

    def _unknown(self, name: str, *, near: bool) -> ToolStatus:
        """:meth:`unknown`; with ``near=False`` the listed names only (the first ten in
        sorted order that are not high risk), without looking for the nearest: for a
        caller that has already looked for as many names as it may (a plan's budget)."""
        index, first = self._suggester()
        close = index.close_matches(str(name), _SUGGESTED, _CUTOFF) if near else []
        nearest = _not_riskier(str(name), close, self._exposed) if close else first
        return ToolStatus(
            str(name),
            "unknown",
            reason="never registered",
            hint="call one of the tools this view lists",
            suggestions=tuple(nearest),
        )

    def _suggester(self) -> tuple[NameIndex, tuple[str, ...]]:
        # Built on the first unknown name, once per view: most views never see one,
        # and a model that hallucinates names tends to do it again.
        nearest = self._nearest
        if nearest is None:
            listable = (n for n, t in self._exposed.items() if t.risk < Risk.HIGH)
            first = tuple(heapq.nsmallest(_LISTED, listable))
            nearest = (NameIndex(self._exposed), first)
            object.__setattr__(self, "_nearest", nearest)
        return nearest

    def tool(self, name: str) -> Tool:
        """The exposed tool called ``name``.

        Raises:
            UnknownToolError: never registered (the message lists the nearest valid names).
            ToolUnavailableError: registered, but its component did not start, it
                has no real description, or its pinned description changed.
            ToolDeniedError: filtered out of this view by policy.
        """
        status = self.status(name)
        error = status.error()
        if error is not None:
            raise error
        return cast(Tool, status.tool)

    # --- dispatch ---------------------------------------------------------------

    def validate(
        self, name: str, arguments: Mapping[str, object] | str | None = None
    ) -> PreparedCall:
        """Check a call without running it: the tool is exposed and the arguments valid.

        ``arguments`` is a mapping, the JSON text a provider sends, or ``None``
        for no arguments. An argument named like the handler's context
        parameter is unknown, as any other. The context is bound apart, by
        :meth:`PreparedCall.with_context` (or ``context=`` of :meth:`dispatch`).

        Raises:
            UnknownToolError, ToolUnavailableError, ToolDeniedError: as :meth:`tool`.
            InvalidArgumentsError: the arguments do not match the input schema
                (``.fields`` names the offending fields).
        """
        tool = self.tool(name)
        try:
            checked = tool.validate(_decoded(name, arguments))
        except InvalidArgumentsError as error:
            if SCHEMA_TOOL in self._names:
                raise
            # The tool's message sends the model to the schema tool, which this view left out.
            told = str(error).replace(
                f"(read it with {SCHEMA_TOOL}(name={name!r}))", "(it is in the tool list)"
            )
            told = told.replace(f"(read them with {SCHEMA_TOOL})", "(they are in the tool list)")
            raise InvalidArgumentsError(told, tool=error.tool, fields=error.fields) from None
        return PreparedCall(tool, MappingProxyType(checked))

    def dispatch(
        self,
        name: str,
        arguments: Mapping[str, object] | str | None = None,
        *,
        context: object = None,
        request_id: str | None = None,
    ) -> object:
        """Validate a call and run its handler; returns what the handler returns.

        The handler runs as a dispatch that no one approved (see
        :meth:`PreparedCall.invoke`); :func:`veridic.execute` is the entry
        point that asks for approval and records it. An ``async`` handler is
        refused here: use :meth:`adispatch`.

        ``context`` is the deps of a handler that asks for a
        :class:`~veridic.ToolContext` (ignored by one that does not), and
        ``request_id`` its ``ctx.request_id`` (default: the enclosing
        dispatch's, or a fresh ``"dispatch-<hex>"``); see
        :meth:`PreparedCall.with_context`.

        Raises:
            UnknownToolError, ToolUnavailableError, ToolDeniedError,
            InvalidArgumentsError: as :meth:`validate`; nothing runs then.
            VeridicError: the handler asks for a context and ``context`` is not
                what it declares (``None``: none was given); nothing runs.
        """
        call = self.validate(name, arguments).with_context(context, request_id=request_id)
        return call.invoke()

    async def adispatch(
        self,
        name: str,
        arguments: Mapping[str, object] | str | None = None,
        *,
        context: object = None,
        request_id: str | None = None,
    ) -> object:
        """:meth:`dispatch`, awaiting the handler's result when it is awaitable."""
        call = self.validate(name, arguments).with_context(context, request_id=request_id)
        return await call.ainvoke()

    # --- projections ------------------------------------------------------------

    def capability_section(self) -> TrustedInstruction:
        """The prompt's account of the tools: trusted text of provenance kind ``registry``.

        Each exposed tool with its kind, risk, required arguments and
        description (an unpinned external tool's description is not
        repeated: it came from outside, so it is data in the tool list, not
        an instruction here); then a truthful line for each component that
        did not start (reason and hint), each tombstoned tool, and each
        tool whose pinned description changed. Computed once per view.

        The first line, the heading of what is unavailable and the component
        lines are the view's :class:`~veridic.tools.wording.CapabilityWording`
        (``Registry(wording=...)`` or ``registry.view(wording=...)``); the
        section is still one span of kind ``registry``, so :meth:`describes`
        and the gateway's check hold for any wording. A wording let through
        by report mode (a field that was a plain ``str``) gives a plain
        ``str`` here: report mode never mints.

        Minted once per view, so every call gives the same value: a system
        message built with it on every request is made of the same parts, whose
        record spans :class:`~veridic.ModelGateway` works out once.
        """
        if not self._wording._minted:
            return TrustedInstruction(self._section_text())  # report mode: never minted
        minted = self._cache.get("section:minted")
        if minted is None:
            minted = self._cache["section:minted"] = mint(
                self._section_text(), "registry", self._origin
            )
        return cast(TrustedInstruction, minted)

    def describes(self, text: str) -> bool:
        """Whether ``text`` is this view's capability section: what :class:`ModelGateway
        <veridic.ModelGateway>` asks of every registry span of a system message it sends
        with this view, so a prompt never goes out with another view's tools (the first
        article's drift). Two views with the same section say the same of their tools."""
        return text == self._section_text()

    def _section_text(self) -> str:
        text = self._cache.get("section")
        if text is None:
            text = self._cache["section"] = _render_section(
                self.tools(),
                self._components,
                self.withheld(),
                self._wording,
                SCHEMA_TOOL in self._exposed,
            )
        return text

    @overload
    def tool_specs(self, format: Literal["openai"]) -> list[OpenAIToolSpec]: ...
    @overload
    def tool_specs(self, format: Literal["anthropic"]) -> list[AnthropicToolSpec]: ...
    @overload
    def tool_specs(self, format: Literal["mcp"]) -> list[McpToolSpec]: ...
    def tool_specs(
        self, format: SpecFormat
    ) -> list[OpenAIToolSpec] | list[AnthropicToolSpec] | list[McpToolSpec]:
        """The provider tool list, one spec per exposed tool.

        Built once for each set of exposed tools and shared by every view and
        call that has it: the list and every dict and list in it are read-only
        (changing one raises ``TypeError``), so no caller can change what the
        next request sends. ``copy.deepcopy`` gives a plain copy to change.

        Raises:
            VeridicError: ``format`` is not ``"openai"``, ``"anthropic"`` or ``"mcp"``.
        """
        if format not in _FORMATS:
            raise VeridicError(
                f"tool_specs() got format {format!r}, which is not a provider format: "
                'use "openai", "anthropic" or "mcp"'
            )
        return cast(
            "list[OpenAIToolSpec] | list[AnthropicToolSpec] | list[McpToolSpec]",
            self._tool_set.specs(self._tools, format),
        )

    def tools_sha256(self) -> str:
        """SHA-256 of the tool list (the MCP specs as canonical JSON), once per set of tools.

        The digest audit records carry, so a model call and the tool calls it
        led to name the same tool list whatever the provider.
        """
        return self._tool_set.sha256(self._tools)

    def assert_coupled(self, sent_specs: Iterable[Mapping[str, object]]) -> None:
        """Check the specs actually sent against what the view builds, names and contents.

        Every name sent must be dispatchable, every dispatchable name must
        have been sent, each exactly once; and each spec must be the one the
        view builds for its name, in the format it is in (OpenAI chat,
        Anthropic, MCP, or the Responses API's flat shape that
        :class:`~veridic.OpenAIResponses` sends, ``"strict": false``): the
        registry is the one source of what the model reads of a tool, so a
        description, a parameter or a flag a wrapper edited (or an adapter
        rebuilt otherwise) is refused, compared as JSON (``1`` is not
        ``true``). The view's own specs, sent as they are, pass once they are
        shown to hold what they were built with, and so does the flat list
        :class:`~veridic.OpenAIResponses` sends of them (built once per tool
        set, read-only): a write that went around their refusals
        (``dict.__setitem__(spec, ...)``) is refused, sent as they are or
        copied (see :class:`~veridic.tools.tool_specs.FrozenDict`).

        Raises:
            ToolCouplingError: the two disagree: the names, or a field of a spec
                (named with its path, the sent value quoted clipped); or the view's
                own specs were changed after they were built.
        """
        sent_list = sent_specs if isinstance(sent_specs, list | tuple) else list(sent_specs)
        for format, built in self._tool_set.built():
            if len(built) == len(sent_list) and all(map(operator.is_, built, sent_list)):
                # The view's own read-only specs, all of them, each once, in order (the
                # adapter may have put them in a list of its own): coupled by identity,
                # once they are shown to hold what they were built with.
                self._tool_set.check_intact(format, self._origin)
                return
        checked: set[str] = set()
        for format, _ in self._tool_set.built():
            # What the sent specs are compared with (a list built for the comparison is
            # checked as it is built: see _built_by_name).
            self._tool_set.check_intact(format, self._origin)
            checked.add(format)
        names = [_spec_name(index, spec) for index, spec in enumerate(sent_list)]
        sent = Counter(names)
        extra = sorted(set(sent) - set(self._exposed))
        missing = sorted(set(self._exposed) - set(sent))
        twice = sorted(name for name, count in sent.items() if count > 1)
        if extra or missing or twice:
            problems = [
                f"{label}: {', '.join(names)}"
                for label, names in (
                    ("sent but not dispatchable", extra),
                    ("dispatchable but not sent", missing),
                    ("sent more than once", twice),
                )
                if names
            ]
            raise ToolCouplingError(
                f"the tool specs sent to the provider and the dispatch table of {self._origin} "
                f"disagree ({'; '.join(problems)}): send view.tool_specs(format) unchanged, "
                "from the same view that dispatches the calls"
            )
        self._check_contents(names, sent_list, checked)

    def _check_contents(
        self,
        names: list[str],
        sent_list: list[Mapping[str, object]] | tuple[Mapping[str, object], ...],
        checked: set[str],
    ) -> None:
        """Refuse a sent spec that is not the view's own for its name, field by field.

        Each spec is compared with the one the view builds in the spec's own
        format; a field the wrapper left as it was (the same object, as the
        Responses adapter keeps the view's schema) is not walked. ``checked`` holds
        the formats whose lists were checked intact in this call already.
        """
        built: dict[str, dict[str, Mapping[str, object]]] = {}
        differing = [
            found
            for name, spec in zip(names, sent_list, strict=True)
            if (found := self._spec_difference(name, spec, built, checked))
        ]
        if differing:
            more = "" if len(differing) == 1 else f" ({counted(len(differing), 'spec')} differ)"
            raise ToolCouplingError(
                f"the tool specs sent to the provider are not the ones {self._origin} builds: "
                f"{differing[0]}{more}: send view.tool_specs(format) unchanged, from the same "
                "view that dispatches the calls (change a tool's description or parameters "
                "where it is registered)"
            )

    def _spec_difference(
        self,
        name: str,
        spec: Mapping[str, object],
        built: dict[str, dict[str, Mapping[str, object]]],
        checked: set[str],
    ) -> str:
        """What differs between ``spec`` and the view's own for its ``name``, in its
        format (``""``: nothing)."""
        shape = _shape_of(spec)
        if shape is None:
            return (
                f"tool {clip(name)} was sent in none of the formats the view builds (it has "
                "none of the fields function, input_schema, inputSchema and parameters)"
            )
        format: SpecFormat = "openai" if shape == "responses" else shape
        own = (built.get(format) or self._built_by_name(format, built, checked))[name]
        if spec is own:
            return ""
        if shape == "responses":
            if _flat_of(spec, own):
                return ""
            own = _responses_shape(own)
        path = _first_difference(spec, own)
        return "" if path is None else _described(name, path, spec, own)

    def _built_by_name(
        self,
        format: SpecFormat,
        built: dict[str, dict[str, Mapping[str, object]]],
        checked: set[str],
    ) -> dict[str, Mapping[str, object]]:
        """The view's specs in ``format`` by name (built in the order of its tools), once per
        check."""
        specs = cast("list[Mapping[str, object]]", self._tool_set.specs(self._tools, format))
        if format not in checked:
            # Built now, perhaps, of specs cached per tool that a write through another
            # view changed: compared with what they were built with before the sent ones
            # with them. A list built before the call was checked by assert_coupled (once:
            # the check walks every spec).
            self._tool_set.check_intact(format, self._origin)
        found = built[format] = dict(zip((tool.name for tool in self._tools), specs, strict=True))
        return found

    # --- the built-in schema tool -----------------------------------------------

    def _read_schema(self, name: str) -> ToolSchema:
        # The model asks: of a tool hidden from it, it learns what an unknown name gets.
        status = self.status(name)
        if status.hidden:
            raise _hidden_error(status, self.unknown(name))
        tool = self.tool(name)
        return {
            "name": tool.name,
            "description": tool.description,
            "required": list(tool.required),
            "input_schema": tool.input_schema,
        }


def build_view(
    tools: Iterable[Tool],
    components: Mapping[str, ComponentState],
    origin: str,
    *,
    roles: Iterable[str] = (),
    allow: Iterable[str] | None = None,
    deny: Iterable[str | Deny] = (),
    predicates: Iterable[Predicate] = (),
    wording: CapabilityWording | None = None,
    schema_tool: bool = True,
) -> ToolView:
    """Apply the boot state and the filters to ``tools`` (see :meth:`veridic.Registry.view`).

    Raises:
        UnknownToolError: ``allow`` or ``deny`` names a tool never registered
            (a typo there would silently widen or narrow the view).
        VeridicError: ``wording`` or ``schema_tool`` is not what they take
            (see :func:`check_view_options`).
    """
    wording, schema_tool = check_view_options(wording, schema_tool, origin)
    candidates = tuple(tools)
    registered = {tool.name for tool in candidates} | {SCHEMA_TOOL}
    allowed = (
        None
        if allow is None
        else frozenset(_known(filter_items(allow, "allow", origin), registered, "allow"))
    )
    deny_items = filter_items(deny, "deny", origin)
    for item in deny_items:
        # Not a collection of names: one of the application's own was hashed by identity
        # for the view cache, whose first answer then outlived what it listed.
        if not isinstance(item, str | Deny):
            raise VeridicError(
                f"the view's deny filter got {quoted(item)}, {a_type(item)}, where a tool name "
                'goes: list tool names or Deny filters, e.g. deny=["delete_user", '
                "Deny(when=..., reason=...)]"
            )
    denials = tuple(
        d if isinstance(d, Deny) else Deny(d, reason="named in the view's deny list")
        for d in deny_items
    )
    for denial in denials:
        _known(denial.names, registered, "deny")
        if SCHEMA_TOOL in denial.names:
            raise VeridicError(
                f"a deny filter names {SCHEMA_TOOL}, which every view carries so the model can "
                "read contracts instead of recalling them: remove it from the deny filter, "
                "or build the view with schema_tool=False to leave it out of all three "
                "projections"
            )
    view_roles = _role_set(filter_items(roles, "roles", origin), origin)
    keep = filter_items(predicates, "predicates", origin)
    deny_first = _Denials(denials)
    exposed: list[Tool] = []
    withheld: list[ToolStatus] = []
    owning: set[str] = set()  # the components that have a tool
    reachable: set[str] = set()  # ... a tool this view's filters let through
    for tool in candidates:
        # Denied before unavailable: a tool kept from this view whose component did not
        # start must read to the model as a name nobody registered (ToolStatus.hidden),
        # not as "unavailable", which would confirm it exists.
        denied = _denied(tool, view_roles, allowed, keep, deny_first)
        if tool.component is not None:
            owning.add(tool.component)
            if denied is None:
                reachable.add(tool.component)
        status = denied or _unavailable(tool, components) or _pin_changed(tool) or _withheld(tool)
        if status is None:
            exposed.append(tool)
        else:
            withheld.append(status)
    # A failed component is listed where one of its tools would have been: one whose
    # every tool this view keeps out is none of the model's business here (its line
    # would name what the view hides), and a tombstoned denial still says its reason.
    return ToolView(
        exposed,
        withheld,
        (state for name, state in components.items() if name not in owning or name in reachable),
        origin,
        key=_BUILD_KEY,
        wording=wording,
        schema_tool=schema_tool,
    )


def check_view_options(
    wording: object, schema_tool: object, where: str
) -> tuple[CapabilityWording, bool]:
    """``wording`` (``None`` for veridic's own) and ``schema_tool``, checked for a view.

    A view without the schema tool must not tell the model to call it, so a
    wording that names ``get_tool_schema`` (beyond ``intro``, which is only
    used when the tool is there) is refused with ``schema_tool=False``.

    Raises:
        VeridicError: ``wording`` is not a ``CapabilityWording``,
            ``schema_tool`` is not a ``bool``, or the wording names the
            schema tool that the view leaves out.
    """
    if wording is None:
        wording = _DEFAULT_WORDING
    elif not isinstance(wording, CapabilityWording):
        raise VeridicError(
            f"{where} got wording={wording!r}, which is not a CapabilityWording: pass "
            'CapabilityWording(place=instruction("in Acme Desk"), ...), or leave it out for '
            "veridic's English wording"
        )
    if type(schema_tool) is not bool:
        raise VeridicError(
            f"{where} got schema_tool={schema_tool!r}: pass True (every view carries "
            f"{SCHEMA_TOOL}, the default) or False (leave it out of the section, the tool "
            "specs and dispatch)"
        )
    if not schema_tool:
        naming = wording._mentions(SCHEMA_TOOL)
        if naming:
            raise VeridicError(
                f"{where} leaves {SCHEMA_TOOL} out (schema_tool=False), but the wording's "
                f"{', '.join(naming)} names it: the prompt would tell the model to call a tool "
                f"it does not have; reword {', '.join(naming)} without {SCHEMA_TOOL}, or keep "
                "the schema tool"
            )
    return wording, schema_tool


# --- filtering ------------------------------------------------------------------


_FILTER_EXAMPLES: Final = {
    "roles": 'roles=["admin"]',
    "allow": 'allow=["search_orders"]',
    "deny": 'deny=["delete_user", Deny(when=..., reason=...)]',
    "predicates": "predicates=[licensed], a function of a Tool",
}


def filter_items(given: object, what: str, origin: str) -> tuple[Any, ...]:
    """The items of the view's filter ``what`` (a key of ``_FILTER_EXAMPLES``): a lone
    name, ``Deny`` or predicate is one item, not the characters of a string.

    Its items are checked where they are read; ``Any``, as ``tuple()`` of an iterable is.

    Raises:
        VeridicError: ``given`` holds no items (``roles=3`` was a bare ``TypeError``,
            ``'int' object is not iterable``).
    """
    if callable(given) if what == "predicates" else isinstance(given, str | Deny):
        return (given,)
    try:  # not isinstance(given, Iterable) first: this is every request's view() call
        return tuple(given)  # type: ignore[arg-type]  # refused below when no iterable
    except TypeError:
        if isinstance(given, Iterable):
            raise  # from the iterable's own code: not about the filter
        raise VeridicError(
            f"{origin} got {what}={quoted(given)}, {a_type(given)}: pass a list, or one item "
            f"alone, e.g. {_FILTER_EXAMPLES[what]}"
        ) from None


def _known(names: Iterable[str], registered: set[str], where: str) -> Iterable[str]:
    """``names``, each a registered tool's name; the name quoted clipped when it is not
    (a filter may be read from a request or a configuration file)."""
    listed = [names] if isinstance(names, str) else list(names)
    for name in listed:
        if not isinstance(name, str):
            raise VeridicError(
                f"the view's {where} filter got {quoted(name)}, {a_type(name)}, where a tool "
                'name goes: list the tools by their names, e.g. allow=["search_orders"]'
            )
        if name not in registered:
            suggested = NameIndex(registered).close_matches(name, _SUGGESTED, _CUTOFF)
            nearest = ", ".join(suggested) or "none"
            raise UnknownToolError(
                f"the view's {where} filter names {clip(name)}, which no tool was registered "
                f"under (nearest: {nearest}): fix the name; a typo in a filter silently changes "
                "what the model can do",
                name=name,
                suggestions=tuple(suggested),
            )
    return listed


def _role_set(roles: tuple[object, ...], origin: str) -> frozenset[str]:
    """The roles of a view, refusing one that is not a name: a dict or a list was a bare
    ``unhashable type``, and a number or ``None`` matched no tool without a word."""
    for role in roles:
        if not isinstance(role, str):
            raise VeridicError(
                f"{origin} got the role {quoted(role)}, {a_type(role)}: a role is a name "
                'compared with the roles tools declare, e.g. roles=["admin"]'
            )
    return frozenset(cast("tuple[str, ...]", roles))


def _not_riskier(name: str, matches: list[str], tools: Mapping[str, Tool]) -> tuple[str, ...]:
    """``matches`` (nearest first) without those that would steer the model towards more risk.

    A high-risk tool stays only as a near-identical name (a typo of the one
    the model wrote); any other stays only if it is no riskier than the
    nearest match that is not high risk.
    """
    safe = [tools[m].risk for m in matches if tools[m].risk < Risk.HIGH]
    ceiling = safe[0] if safe else None
    return tuple(
        m
        for m in matches
        if _near_identical(name, m) or (ceiling is not None and tools[m].risk <= ceiling)
    )


def _near_identical(first: str, second: str) -> bool:
    """One character apart (inserted, deleted, replaced or two swapped), ignoring case, _ and -."""
    a, b = (_FOLD.sub("", s).casefold() for s in (first, second))
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    start = 0
    while start < len(a) and a[start] == b[start]:
        start += 1
    if len(a) < len(b):
        return a[start:] == b[start + 1 :]
    return a[start + 1 :] == b[start + 1 :] or (
        a[start : start + 2] == b[start : start + 2][::-1] and a[start + 2 :] == b[start + 2 :]
    )


def _spec_name(index: int, spec: Mapping[str, object]) -> str:
    function = spec.get("function")
    name = function.get("name") if isinstance(function, Mapping) else spec.get("name")
    if not isinstance(name, str):
        raise ToolCouplingError(
            f"sent tool spec #{index} has no name ({sorted(spec)!r}): pass the specs exactly "
            "as sent, in the OpenAI, Anthropic or MCP format"
        )
    return name


def _shape_of(spec: Mapping[str, object]) -> SpecFormat | Literal["responses"] | None:
    """A sent spec's format, told by the field that holds its tool or its schema: OpenAI
    chat nests the tool in ``function``; the Responses API's flat shape holds
    ``parameters`` beside the name."""
    if "function" in spec:
        return "openai"
    if "input_schema" in spec:
        return "anthropic"
    if "inputSchema" in spec:
        return "mcp"
    return "responses" if "parameters" in spec else None


_ABSENT: Final = object()


_FLAT_KEYS: Final = ("type", "name", "description", "parameters", "strict")


def _responses_shape(openai: Mapping[str, object]) -> dict[str, object]:
    """The view's OpenAI chat spec in the Responses API's flat shape, as
    :class:`~veridic.OpenAIResponses` sends it (function tools, not strict)."""
    function = cast("Mapping[str, object]", openai["function"])
    return {
        "type": "function",
        "name": function["name"],
        "description": function["description"],
        "parameters": function["parameters"],
        "strict": False,
    }


def _flat_of(spec: Mapping[str, object], openai: Mapping[str, object]) -> bool:
    """Whether ``spec`` is the flat copy :class:`~veridic.OpenAIResponses` makes of the
    view's OpenAI chat spec, holding its very name, description and schema objects.

    Given the view's own chat list, the adapter sends the view's own flat list, which
    passes by its identity (``_responses_specs``); given another list (a copy, one of
    its own), it flattens it anew, and this keeps that check at a few identity checks a
    tool (the walk of :func:`_first_difference` costs half as much again).
    """
    function = cast("Mapping[str, object]", openai["function"])
    return (
        type(spec) is dict  # a subclass's get() need not say what its items() write
        and len(spec) == len(_FLAT_KEYS)
        and spec.get("parameters") is function["parameters"]
        and spec.get("description") is function["description"]
        and spec.get("name") is function["name"]
        and spec.get("strict") is False
        and spec.get("type") == "function"
    )


def _first_difference(sent: object, own: object) -> tuple[object, ...] | None:
    """The path of the first value in which ``sent`` and ``own`` differ as JSON (``()``:
    the two values themselves), or ``None`` when they do not.

    Python's ``==`` says ``True == 1`` and ``1.0 == 1``; the provider reads JSON, where
    ``true``, ``1`` and ``1.0`` are three texts, so a leaf must be of the same kind too.
    A value is read as the request is written from it: a leaf by its type's own ``==``
    (``json.dumps`` writes a ``str`` subclass's text, whatever its ``__eq__`` says), a
    float by the text ``json.dumps`` writes of it (``-0.0`` is not ``0.0``; ``NaN`` is), a
    mapping by its ``items()``, which ``json.dumps`` and the SDKs' request builders read.
    A value that is the view's own object is not walked, and a path is built only for a
    difference: on the usual path (the Responses adapter's flat specs hold the view's
    names, descriptions and schemas) a spec costs a few identity checks.
    """
    if sent is own:
        return None
    if isinstance(own, str):
        return None if isinstance(sent, str) and str.__eq__(sent, own) is True else ()
    if isinstance(own, dict):
        if not (isinstance(sent, dict) or isinstance(sent, Mapping)):  # noqa: SIM101 - a dict first: no ABC check
            return ()
        given = sent if type(sent) is dict else dict(sent.items())
        if given.keys() != own.keys():
            missing = [key for key in own if key not in given]
            return (missing[0] if missing else next(key for key in given if key not in own),)
        for key, value in own.items():
            item = given[key]
            found = None if item is value else _first_difference(item, value)
            if found is not None:
                return (key, *found)
        return None
    if isinstance(own, list):
        if not isinstance(sent, list | tuple) or len(sent) != len(own):
            return ()
        for at, (item, mine) in enumerate(zip(sent, own, strict=True)):
            found = _first_difference(item, mine)
            if found is not None:
                return (at, *found)
        return None
    kind = type(own)  # a JSON leaf: int, float, bool or None
    same_kind = isinstance(sent, kind) and isinstance(sent, bool) is isinstance(own, bool)
    if same_kind and kind is float:  # by the text JSON writes: -0.0 is not 0.0, NaN is NaN
        return None if float.__repr__(sent) == float.__repr__(own) else ()
    return None if same_kind and kind.__eq__(sent, own) is True else ()


def _at(value: object, path: tuple[object, ...]) -> object:
    """The value at ``path`` in ``value``, or ``_ABSENT``."""
    for step in path:
        if isinstance(value, Mapping):
            if step not in value:
                return _ABSENT
            value = value[step]
        elif isinstance(value, list | tuple) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            return _ABSENT
    return value


def _described(
    name: str, path: tuple[object, ...], sent: Mapping[str, object], own: Mapping[str, object]
) -> str:
    """A sent spec's first difference, in words: the tool, the field's path, the values
    quoted clipped (the sent text may be an injected megabyte)."""
    field = _field(path)
    mine, given = _at(own, path), _at(sent, path)
    tool = f"tool {clip(name)}"
    if given is _ABSENT:
        return f"{tool} was sent without its {field} (the view sends {quoted(mine)})"
    if mine is _ABSENT:
        return f"{tool} was sent with {field} {quoted(given)}, which the view does not send"
    return (
        f"{tool} was sent with its {field} as {quoted(given)}, where the view sends {quoted(mine)}"
    )


def _field(path: tuple[object, ...]) -> str:
    """A path in a spec as a reader writes it (``function.parameters.required[0]``)."""
    return clip(
        "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)[1:], 100
    )


def _decoded(name: str, arguments: Mapping[str, object] | str | None) -> object:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            decoded: object = _json_object.loads(arguments) if arguments.strip() else {}
        except _json_object.RepeatedKeyError as error:
            raise InvalidArgumentsError(
                f"tool {name!r} got arguments in which {error}: which one is meant cannot be "
                "told; send each argument once",
                tool=name,
                fields=(error.key,),
            ) from error
        except ValueError as error:
            raise InvalidArgumentsError(
                f"tool {name!r} got arguments that are not JSON ({error}): send the arguments "
                "as a JSON object",
                tool=name,
                fields=("(arguments)",),
            ) from error
        return decoded
    return arguments


# --- what depends only on the exposed tools ------------------------------------------------


class _ToolSet:
    """The tool lists and their digest, shared by every view that exposes the same tools.

    Views of one registry usually expose one of a few sets (per role, per
    licence), so the lists are built and hashed once per set, not per view.
    The built-in schema tool is left out of the key (each view binds its
    own), but its spec is the same in every view; whether the view carries
    it at all (``schema_tool=``) is in the key.
    """

    __slots__ = ("__weakref__", "_digest", "_plain", "_sorted", "_specs", "_tagged", "_tools")
    _kept: ClassVar[dict[tuple[bool, tuple[Tool, ...]], _ToolSet]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()
    _by_openai_list: ClassVar[WeakValueDictionary[int, _ToolSet]] = WeakValueDictionary()
    """Each live tool set by the ``id`` of its OpenAI chat list, for ``_responses_specs``
    (which checks that the list found is the very one it was given)."""

    def __init__(self) -> None:
        self._specs: dict[str, FrozenList] = {}
        self._plain: dict[str, list[dict[str, object]]] = {}
        self._tagged: dict[str, _TaggedList] = {}
        self._tools: dict[str, tuple[Tool, ...]] = {}
        self._digest: str | None = None
        self._sorted: tuple[str, ...] | None = None

    @classmethod
    def of(cls, tools: tuple[Tool, ...], schema_tool: bool = True) -> _ToolSet:
        key = (schema_tool, tools)
        found = cls._kept.get(key)
        if found is None:
            with cls._lock:
                if len(cls._kept) >= _TOOL_SETS_KEPT:
                    cls._kept.clear()
                found = cls._kept.setdefault(key, cls())
        return found

    def specs(self, tools: tuple[Tool, ...], format: SpecFormat) -> FrozenList:
        made = self._specs.get(format)
        if made is None:
            # The copies first: check_intact reads them for any list built() gives, which
            # another thread may ask for as soon as the list is stored.
            self._plain[format] = [_plain_spec(tool, format) for tool in tools]
            self._tools[format] = tools
            made = self._specs[format] = frozen_list(frozen_spec(tool, format) for tool in tools)
            if format == "openai":
                _ToolSet._by_openai_list[id(made)] = self
        return made

    def responses(self, openai: FrozenList) -> FrozenList:
        """The Responses API's flat list of this set's OpenAI chat list ``openai``, read-only,
        built once: :meth:`built` lists it, so it is coupled by identity."""
        made = self._specs.get(_RESPONSES)
        if made is None:
            # The copies first, as in specs().
            self._plain[_RESPONSES] = [_responses_shape(own) for own in self._plain["openai"]]
            made = self._specs[_RESPONSES] = frozen_list(
                FrozenDict(_responses_shape(cast("Mapping[str, object]", spec))) for spec in openai
            )
        return made

    def built(self) -> tuple[tuple[str, FrozenList], ...]:
        """The lists built so far, with their formats (a :data:`SpecFormat`, or the
        Responses API's flat list)."""
        return tuple(self._specs.items())

    def check_intact(self, format: str, origin: str) -> None:
        """Refuse the list of ``format`` if it no longer holds what it was built with.

        Its dicts and lists refuse every write made through their own methods, but not
        one that goes around them (``dict.__setitem__(spec, ...)``, ``list.append(specs,
        ...)``, C code), which changes what every later request of every view with these
        tools sends. Compared as JSON with a copy made with it (``==`` with the copy on
        the left, in C but for the few numbers, booleans and nulls of a schema: see
        ``_tagged``): a value written in place of an equal one of another JSON kind
        (``True`` for ``1``, ``1.0`` for ``1``, ``0.0`` for ``-0.0``) or a ``str``
        subclass whose ``==`` says yes to anything, in place of a text, is refused as any
        other change. Not seen: an object of another kind than the one it replaced whose
        own ``==`` says yes (such a ``str`` subclass in place of an object, a list or a
        number, or a number in place of a text: the copy's ``==`` leaves another kind to
        it, and reading every value's type costs more than the whole comparison), nor a
        key replaced by one whose hash and ``==`` lie; each takes code written to get
        past this check.

        Raises:
            ToolCouplingError: the list, or a spec in it, was changed.
        """
        specs = self._specs[format]
        tagged: object = self._tagged.get(format)
        if tagged is None:
            tagged = self._tagged_list(format)
        if tagged == specs:  # the copy on the left: see _tagged
            return
        plain = self._plain[format]
        if len(specs) != len(plain):
            changed = f"the list holds {counted(len(specs), 'spec')}, built with {len(plain)}"
        else:
            changed = next(
                (
                    _changed_spec(index, spec, own)
                    for index, (spec, own) in enumerate(zip(specs, plain, strict=True))
                    if _first_difference(spec, own) is not None
                ),
                "a spec holds an object of another type where it was built with JSON",
            )
        given = (
            "the tool list a Responses request carries"
            if format == _RESPONSES
            else "the specs view.tool_specs() gives"
        )
        raise ToolCouplingError(
            f"the {format} tool specs {origin} builds were changed after they were built, "
            f"by a write that went around their refusals (dict.__setitem__, dict.update, "
            f"list.append or C code): {changed}; every view with these tools would send "
            f"them so, and is refused: do not write to {given} (they are shared by every "
            "request), change a copy (copy.deepcopy(specs) gives plain dicts and lists), "
            "or the tool where it is registered"
        )

    def _tagged_list(self, format: str) -> _TaggedList:
        """The copy of the list of ``format`` that :meth:`check_intact` compares it with,
        made at its first check (of the copies made when the tools' specs were built, which
        no caller is given), not with the list: a list never checked costs no copy."""
        if format == _RESPONSES:
            openai = self._tagged.get("openai")
            if openai is None:
                openai = self._tagged_list("openai")
            made = _TaggedList(map(_tagged_flat, openai))
        else:
            spec_format = cast("SpecFormat", format)
            made = _TaggedList(_tagged_spec(tool, spec_format) for tool in self._tools[format])
        return self._tagged.setdefault(format, made)

    def sorted_names(self, names: frozenset[str]) -> tuple[str, ...]:
        """``names`` (the names of the views with this set of tools, the same for each of
        them) in sorted order, sorted once: every model-call record names them."""
        made = self._sorted
        if made is None:
            made = self._sorted = tuple(sorted(names))
        return made

    def sha256(self, tools: tuple[Tool, ...]) -> str:
        if self._digest is None:
            # The canonical JSON of the MCP list (keys sorted, no spaces), as
            # json.dumps(list, sort_keys=True, separators=(",", ":")) writes it.
            canonical = ",".join(_memo(tool, "mcp:canonical", _canonical_mcp) for tool in tools)
            self._digest = hashlib.sha256(
                f"[{canonical}]".encode("utf-8", "surrogatepass")
            ).hexdigest()
        return self._digest


def _changed_spec(index: int, spec: object, own: Mapping[str, object]) -> str:
    """What was changed of the shared ``spec``, built as ``own``, in words."""
    path = _first_difference(spec, own) or ()
    now = _at(spec, path)
    shown = "removed" if now is _ABSENT else f"now {quoted(now)}"
    return f"tool {clip(_spec_name(index, own))} has its {_field(path) or 'spec'} changed ({shown})"


def _tagged_flat(openai: object) -> _TaggedDict:
    """The Responses API's flat shape of a tagged copy of an OpenAI chat spec, its own
    values tagged too."""
    flat = _responses_shape(cast("Mapping[str, object]", openai))
    flat["type"], flat["strict"] = _tagged("function", {}), _tagged(False, {})
    return _TaggedDict(flat)


_RESPONSES: Final = "responses"
"""The key of a tool set's Responses API list among its lists (no :data:`SpecFormat`: the
view hands it out only through ``_responses_specs``)."""


def _responses_specs(specs: object) -> FrozenList | None:
    """The Responses API's flat tool list for ``specs``, when ``specs`` is the very OpenAI
    chat list of a view (``view.tool_specs("openai")``); ``None`` for any other list, which
    the caller flattens itself.

    Why: :class:`~veridic.OpenAIResponses` flattened the view's list into new dicts on every
    request, so :meth:`ToolView.assert_coupled` could not pass it by identity and compared
    every spec with the view's, on every send. This list is built once per tool set, of the
    same flat dicts as the comparison reads (``_responses_shape``), read-only like the
    others, and kept among the tool set's own lists, which pass by identity.
    """
    found = _ToolSet._by_openai_list.get(id(specs))
    if found is None:
        return None
    openai = found._specs.get("openai")
    if openai is None or openai is not specs:
        return None  # another list, made where a dead tool set's list was
    return found.responses(openai)


def _canonical_mcp(tool: Tool) -> str:
    return json.dumps(
        _plain_spec(tool, "mcp"),
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _sorted_names(view: ToolView) -> tuple[str, ...]:
    """``tuple(sorted(view.names()))``, sorted once for every view of the same tools (the
    set of tools a view exposes decides its names)."""
    return view._tool_set.sorted_names(view._names)


def _registry_of(view: ToolView) -> str:
    """Which registry ``view`` came from (``"Registry('name').view()"``), the same for every
    view of one registry: an approval's grant names it."""
    return view._origin


# --- direct dispatch ------------------------------------------------------------------


@contextmanager
def _direct_dispatch(tool: Tool, context: ToolContext[object] | None = None) -> Iterator[None]:
    if current_dispatch() is not None:
        # A handler running another tool: only with the authority that tool needs; once it
        # returned, what it declares doing happened inside the call that delegated.
        if _delegated(tool.name, tool.risk, tool.kind):
            yield
            writes = tool.writes_instruction_fields
            _delegate_done(tool.name, tool.irreversible, writes, tool.instruction_writes)
        else:
            yield
        return
    # A nested call without a request id of its own takes this one's (see ToolContext).
    request_id = "" if context is None else context.request_id
    with dispatching(
        tool.name, tool.risk, ApprovalMode.NOT_REQUIRED, request_id=request_id, kind=tool.kind
    ) as scope:
        _claimed(scope)  # the tool runs now: a dispatch in it is its handler's, and judged
        yield
