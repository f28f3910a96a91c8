"""``Registry``: the one place tools are defined, and where every view comes from.

The prompt never lies about its tools when it cannot: the capability section,
the provider tool list and the dispatch table are projections of one
:class:`~veridic.ToolView`, and every view comes from the registry. There is
no second code path that could promise a tool the executor lacks.

Registering and booting are two steps:

- **registering** (the decorators, :meth:`Registry.external`) is cheap and
  happens at import time: it records the declaration, refuses a duplicate
  name and a declaration that cannot mean anything;
- **booting** happens once, explicitly with :meth:`Registry.boot` at start-up
  or implicitly on the first :meth:`Registry.view`: it resolves every tool
  (schema, descriptions, risk), checks the risk floors (raising
  :class:`~veridic.RiskFloorError` for every tool declared below its floor),
  and then runs each component's boot check once. A tool registered after
  boot is resolved and checked on the next ``boot()`` or ``view()``, so a
  floor violation surfaces at start-up, never at a tool's first call.

A component's check can run again (a licence that expires mid-process must
not stay promised): ``registry.component(..., recheck="view")`` runs it for
every view, ``recheck=300`` when a view is made and the last check is more
than 300 seconds old, and :meth:`Registry.recheck` runs it now (a licence
webhook). A component that stops is reported exactly as a boot failure is;
one that starts again is back in the next view. A registry without such
components pays nothing for the feature: its views are cached as before.

What a failed check may show the model (a :class:`~veridic.BootError`'s reason,
a literal message, else the exception's type) is decided in
:mod:`veridic.tools.boot_failure`; ``BootError`` imports from here too.

>>> from veridic import Registry, Risk
>>> registry = Registry("shop")
>>> @registry.tool(kind="write", irreversible=True)
... def delete_order(order_id: int) -> str:
...     '''Permanently delete an order; this cannot be undone.
...
...     Args:
...         order_id: The order to delete.
...     '''
...     return f"deleted {order_id}"
>>> pro = registry.component("Pro extension", boot=lambda: False, provides="Refunds")
>>> @pro.tool(kind="write")
... def refund(order_id: int) -> str:
...     '''Refund an order to the original payment method.
...
...     Args:
...         order_id: The order to refund.
...     '''
...     return "refunded"
>>> view = registry.view()
>>> view.tool("delete_order").risk
<Risk.HIGH: 'high'>
>>> view.status("refund").state, view.status("refund").cause
('unavailable', 'component')
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Final, TypeVar

from pydantic import BaseModel

from veridic._counted import counted
from veridic._sample import quoted
from veridic._words import a_type
from veridic.errors import RiskFloorError, RiskViolation, VeridicError
from veridic.text.provenance import TrustedText, refuse_untrusted
from veridic.tools._decorator_use import kind_required
from veridic.tools.boot_failure import BootError
from veridic.tools.component import Component, Recheck, _logged, _recheck_mode
from veridic.tools.risk import FloorViolation, RiskLike, ToolKind
from veridic.tools.tool import (
    SCHEMA_TOOL,
    FunctionText,
    Tool,
    ToolHints,
    ToolOptions,
    _origin_of,
    _withheld_reason,
    check_tool_name,
    external_tool,
    floor_violations,
    function_tool,
)
from veridic.tools.view import (
    ComponentState,
    Deny,
    Predicate,
    ToolView,
    build_view,
    check_view_options,
    filter_items,
)
from veridic.tools.wording import CapabilityWording

__all__ = ["BootError", "Component", "Recheck", "Registry"]

F = TypeVar("F", bound=Callable[..., object])

_log = logging.getLogger("veridic.registry")
_NOT_BOOTED: Final = "not booted yet"
_VIEWS_KEPT: Final = 256


class _Declaration:
    """A registered tool before boot: the function and what was declared about it."""

    __slots__ = ("built", "component", "function", "localns", "options", "text")

    def __init__(
        self,
        function: Callable[..., object] | None,
        options: ToolOptions,
        component: str | None,
        localns: Mapping[str, object] | None,
        built: Tool | None = None,
        text: FunctionText | None = None,
    ) -> None:
        self.function = function
        self.options = options
        self.component = component
        self.localns = localns
        self.built = built
        self.text = text

    def build(self) -> Tool:
        if self.built is None:
            if self.function is None:  # pragma: no cover - externals are built when declared
                raise VeridicError("an external declaration was not built when it was declared")
            self.built = function_tool(
                self.function, self.options, self.component, self.localns, text=self.text
            )
        return self.built


class Registry:
    """All the tools of an application; the only source of every :class:`~veridic.ToolView`.

    One registry per application, one view per request.

    - ``wording``: the words of every view's capability section (a
      :class:`~veridic.CapabilityWording`: language, the application's own
      noun for "this site"); a view may override it.
    - ``schema_tool``: whether views carry the built-in ``get_tool_schema``
      (the default); ``False`` leaves it out of the section, the tool specs and
      dispatch at once, where the tool list already gives the model every
      schema. A view may override it.

    Its methods raise:
        VeridicError: a duplicate tool or component name, a declaration that
            cannot mean anything, an annotation that cannot be resolved.
        RiskFloorError: at boot, a tool declared below its risk floor.
    """

    __slots__ = (
        "_booted",
        "_components",
        "_declared",
        "_epoch",
        "_every_view",
        "_folded",
        "_lock",
        "_rechecked",
        "_registered",
        "_schema_tool",
        "_snapshot",
        "_states",
        "_views",
        "_wording",
        "name",
    )

    def __init__(
        self,
        name: str = "registry",
        *,
        wording: CapabilityWording | None = None,
        schema_tool: bool = True,
    ) -> None:
        self.name = name
        self._wording, self._schema_tool = check_view_options(
            wording, schema_tool, f"Registry({name!r})"
        )
        self._declared: dict[str, _Declaration] = {}
        # Each name in the form two look-alikes share (see _look_alike), to the name.
        self._folded: dict[str, str] = {}
        self._components: dict[str, Component] = {}
        # Replaced, never changed in place: a view being built reads one whole state.
        self._states: Mapping[str, ComponentState] = {}
        self._booted = False
        # Counts registrations (tools, components, withheld tools): a boot check that
        # registers tools (a plug-in adding its own as it starts) makes boot() build again.
        self._registered = 0
        self._snapshot: tuple[Tool, ...] = ()
        self._lock = threading.RLock()
        self._views: dict[Hashable, ToolView] = {}
        # Bumped by every boot and state change: a view built before one is not cached.
        self._epoch = 0
        # The components whose check runs again; empty, views cost what they always did.
        self._rechecked: tuple[Component, ...] = ()
        self._every_view = False

    def __repr__(self) -> str:
        return f"Registry({self.name!r})"

    # --- registering ------------------------------------------------------------

    # kind_required forwards the call as it is made, and callers call tool() by its
    # name, which the plugin checks: the wrapper is reached only through that name.
    @kind_required  # type: ignore[veridic-literal]  # see the comment above
    def tool(
        self,
        *,
        kind: ToolKind,
        risk: RiskLike | None = None,
        irreversible: bool = False,
        writes: Iterable[type[BaseModel]] = (),
        name: str | None = None,
        description: TrustedText | None = None,
        roles: Iterable[str] = (),
        hints: ToolHints | None = None,
    ) -> Callable[[F], F]:
        """Register a typed function as a tool; the decorator returns the function unchanged.

        - ``kind``: ``"query"`` (reads, changes nothing) or ``"write"``.
        - ``risk``: defaults to low for a query and mid for a write, raised to
          the floors: ``irreversible=True`` and writes of instruction fields
          (arguments holding an ``InstructionField``, or ``writes=`` models
          that have one) are high. Declaring lower fails at boot.
        - ``writes``: the pydantic models the tool writes, so their
          instruction fields count towards its floor.
        - ``name``: defaults to the function's name.
        - ``description``: defaults to the docstring's summary paragraph;
          parameter descriptions come from the docstring (Google, NumPy or
          reST) or ``Annotated[..., Field(description=...)]``. A tool
          without a real description is in no view.
        - ``roles``: when given, only views built with one of these roles expose it.
        - ``hints``: what MCP clients are told beyond kind and risk
          (:class:`~veridic.tools.tool.ToolHints`: additive, idempotent,
          open world, title); hints never lower the risk.

        Raises:
            VeridicError: the name is taken or invalid, or differs from a
                registered one (or ``get_tool_schema``) only in case or in ``-``
                and ``_``, which a reader cannot tell apart; ``kind`` or ``risk``
                is not one of its values, a query declares an effect (or the
                hints of a write); the decorator is written without ``kind=``
                (``@registry.tool`` without its parentheses, ``@registry.tool()``)
                or given an option by position: said where it is applied.
            ProvenanceError: the name or the description is text branded
                untrusted: both reach the capability section.
        """
        return self._decorator(
            None, kind, risk, irreversible, writes, name, description, roles, hints
        )

    def component(
        self,
        name: TrustedText,
        *,
        boot: Callable[[], object] | None = None,
        hint: TrustedText = "",
        provides: TrustedText | None = None,
        recheck: Recheck = None,
    ) -> Component:
        """Declare an optional part of the application whose tools need ``boot`` to succeed.

        ``boot`` runs when the registry boots; raising (or returning
        ``False``, or another false value such as ``0`` or ``""``) means the
        component did not start, and the exception's message is the reason
        (when it is code text: see :class:`BootError`); returning ``None`` (a
        check that returns nothing) or a true value means it started.
        It is a plain function: an ``async def`` check cannot be awaited here,
        so its coroutine is closed unrun and the component does not start.
        ``hint`` tells the user what to do about it, ``provides`` names what
        the component offers, for the truthful line: "Code snippets are not
        available on this site: the Pro extension did not start (requires
        core >= 2.3). <hint>".

        ``recheck`` says when ``boot`` runs again, so that a licence that
        expires, or a feature flag turned off, mid-process is not promised:

        - ``None`` (the default): never; the boot result holds for the process.
        - ``"view"``: for every :meth:`view`, which then is never taken from the
          view cache (as a view with predicates is not). The check is on every
          request's path: keep it cheap (a cached licence read).
        - a positive number of seconds: when a view is made and the last check
          is older than that; that view waits for the check, and the others
          come from the cache as long as no component's state changes.

        A component that goes down is reported exactly as a failed boot (the
        same trusted reason, the same hint); one that comes back is in the
        next view. Both changes are logged on ``veridic.registry``. Checks of
        one component never run at once, so ``boot`` need not be thread-safe;
        :meth:`recheck` runs the checks on demand.

        >>> registry = Registry()
        >>> licensed = [True]
        >>> pro = registry.component("Pro", boot=lambda: licensed[0], recheck="view")
        >>> @pro.tool(kind="query")
        ... def sales(day: str) -> str:
        ...     '''The sales report of one day.
        ...
        ...     Args:
        ...         day: The day, as YYYY-MM-DD.
        ...     '''
        ...     return "..."
        >>> "sales" in registry.view().names()
        True
        >>> licensed[0] = False
        >>> registry.view().status("sales").reason
        "its component 'Pro' did not start (its boot check returned False)"

        Raises:
            VeridicError: a component of that name exists already, ``boot`` is
                not a function (``boot=check()`` written for ``boot=check``),
                ``hint`` or ``provides`` is not text, or ``recheck`` is not one
                of its values (or is given without a ``boot`` check to run again).
        """
        with self._lock:
            if not isinstance(name, str) or not name.strip():
                raise VeridicError(
                    f"component name {name!r} is empty: name the part of the application, "
                    'e.g. registry.component("Pro extension", boot=..., hint=...)'
                )
            for field, value in (("name", name), ("hint", hint), ("provides", provides)):
                refuse_untrusted(
                    value,
                    f"registry.component({field}=...)",
                    f"write the component's {field} in code",
                )
            _check_component_options(name, boot, hint, provides)
            if name in self._components:
                raise VeridicError(
                    f"component {name!r} is declared twice in {self!r}: declare it once and "
                    "register all its tools on that object"
                )
            mode = _recheck_mode(name, recheck, boot)
            component = Component(self, name, boot, hint, provides, mode)
            self._components[name] = component
            if mode is not None:
                self._rechecked = (*self._rechecked, component)
                self._every_view = self._every_view or mode == "view"
            self._booted = False
            self._registered += 1
            return component

    def external(
        self,
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, object],
        handler: Callable[[dict[str, object]], object],
        kind: ToolKind,
        risk: RiskLike | None = None,
        pin: str | None = None,
        irreversible: bool = False,
        source: TrustedText = "an external spec",
        roles: Iterable[str] = (),
        unavailable: TrustedText | None = None,
        hints: ToolHints | None = None,
    ) -> None:
        """Register a tool described by someone else (an MCP server, an OpenAPI document).

        Its arguments are validated against ``input_schema`` with the
        ``jsonschema`` package (``pip install 'veridic[external]'``), and
        ``handler`` is called with them as one ``dict``. Its description came
        from outside, so it is untrusted: unless ``pin`` (``"sha256:"`` + the
        hex digest of the description's UTF-8 bytes, see
        :func:`veridic.tools.tool.description_pin`) vouches for it in code, the
        capability section lists the tool without repeating its description.
        When the description no longer matches its pin, the tool is
        unavailable: "description changed since it was pinned".

        The capability section prints the tool's ``name`` as trusted text, so
        the name must come from code or be covered by a tool pin
        (:func:`veridic.tools.tool.tool_pin` covers name, description and
        input schema): a name branded :class:`~veridic.UntrustedText` is a
        :class:`~veridic.ProvenanceError` unless such a pin vouches for it.

        Why an unpinned tool is still exposed: the tool list is where every
        MCP client shows a server's descriptions, and the application chose
        to register the server; what veridic guarantees is that no text from
        outside reaches an instruction position. The capability section
        names the tool and says its description is unverified data. To keep
        unpinned tools out entirely, build views with
        ``deny=[Deny(when=lambda t: t.description_trust == "unpinned")]``.

        ``source`` says where the spec came from (``"mcp:github"``), for
        messages and the capability section; ``irreversible``, ``roles`` and
        ``hints`` mean what they mean for :meth:`tool`.

        ``unavailable`` keeps a known tool out of every view, with the reason
        the capability section prints and a call is refused with
        (:class:`~veridic.ToolUnavailableError`): for what only the registrant
        can tell, such as an MCP server that now describes a tool differently
        from what was pinned (``veridic.integrations.mcp`` says which part).

        Raises:
            VeridicError: the name is taken or invalid, or differs from a
                registered one only in case or in ``-`` and ``_``; the schema is not a
                JSON schema of an object, the pin is malformed, a tool pin
                vouches for a required name that is not an argument name
                (``[A-Za-z0-9_.-]{1,64}``: the section prints those names), or
                ``jsonschema`` is not installed.
        """
        self._external(
            None,
            name,
            description,
            input_schema,
            handler,
            kind,
            risk,
            pin,
            irreversible,
            source,
            roles,
            unavailable,
            hints,
        )

    # --- booting ----------------------------------------------------------------

    def boot(self) -> None:
        """Resolve every tool, check the risk floors, run each component's boot check once.

        Idempotent; :meth:`view` calls it. Call it at start-up to fail there.
        A component's check runs here once; later only as its ``recheck``
        says, or when :meth:`recheck` is called.

        Raises:
            RiskFloorError: tools declared below their risk floor (all listed;
                no component boot runs then).
            VeridicError: a tool's signature cannot be resolved.
        """
        with self._lock:
            if self._booted:
                return
            states = dict(self._states)
            while True:
                registered = self._registered
                built = [declaration.build() for declaration in self._declared.values()]
                # The check the lint reports finding by finding (veridic.tool.floor_violations).
                violations = [(tool, v) for tool in built for v in floor_violations(tool)]
                if violations:
                    raise RiskFloorError(
                        _floor_message(violations),
                        violations=tuple(
                            RiskViolation(tool.name, v.declared.value, v.rule.floor.value, v.detail)
                            for tool, v in violations
                        ),
                    )
                for name, component in list(self._components.items()):
                    if name not in states:
                        state, component._applied = component._run(time.monotonic)
                        states[name] = state
                        if state.started is False:
                            _log.warning(
                                "component %r did not start: %s", name, _logged(state.detail)
                            )
                # A check that registered tools (or components) as its part started: build
                # those too, or they would be registered and in no view, without a word.
                if self._registered == registered:
                    break
            self._states = states
            for tool in built:
                if tool.description_gap is not None and tool not in self._snapshot:
                    # The seed's failure mode is silence: say it where start-up is read.
                    _log.warning(
                        "tool %r (%s) is in no view: it has no real description (%s); %s",
                        tool.name,
                        tool.origin,
                        tool.description_gap.value,
                        tool._stripped_fix
                        or "write what it does where it is defined, a docstring summary "
                        "or description=",
                    )
            self._snapshot = tuple(built)
            self._views.clear()
            self._epoch += 1
            self._booted = True

    def view(
        self,
        *,
        roles: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        deny: Iterable[str | Deny] = (),
        predicates: Iterable[Predicate] = (),
        wording: CapabilityWording | None = None,
        schema_tool: bool | None = None,
    ) -> ToolView:
        """The tools one request may use: boot state and filters applied.

        - ``roles``: the roles of this request; a tool that declares roles is
          exposed only to a view with one of them (fail closed).
        - ``allow``: when given, only these names (the built-in schema tool
          is always there).
        - ``deny``: names to hide, or :class:`~veridic.Deny` filters that hide
          or tombstone the tools they match, with a reason.
        - ``predicates``: functions of a :class:`~veridic.Tool` (licence,
          feature flag, ...); a tool for which one returns ``False`` is hidden.
        - ``wording``, ``schema_tool``: this view's, instead of the registry's
          (see :class:`Registry`).

        Boots the registry first if it has not booted (or gained tools since),
        and runs the checks of components whose ``recheck`` says they are due.

        A view is immutable, and a view without predicates (or ``Deny(when=...)``
        filters, or filters of a ``Deny`` subclass) depends only on its filters and
        the registry, so the same filters over an unchanged registry give back the
        same view object, without building it again. A view with predicates is built
        each time (a predicate may answer differently, a licence may lapse); its tool
        lists and digest are still shared with every view of the same tools.
        So is every view of a registry with a ``recheck="view"`` component;
        a component's change of state empties the cache.

        Raises:
            RiskFloorError, VeridicError: from :meth:`boot`.
            UnknownToolError: ``allow`` or ``deny`` names a tool never registered.
            VeridicError: ``wording`` or ``schema_tool`` is not what it takes, a filter
                holds what is not a name (a role or a ``deny`` item that is not a string
                or a ``Deny``), or a predicate (or ``Deny(when=...)``) returned an
                awaitable: an ``async def`` filter's answer would never be awaited, and a
                coroutine reads as true.
        """
        if not self._booted:
            self.boot()
        if self._rechecked:
            self._refresh()
            if not self._booted:  # a check that ran again registered tools
                self.boot()
        origin = f"Registry({self.name!r}).view()"
        role_items = filter_items(roles, "roles", origin)
        allowed = None if allow is None else filter_items(allow, "allow", origin)
        denied = filter_items(deny, "deny", origin)
        kept = filter_items(predicates, "predicates", origin)
        words, schema = self._wording, self._schema_tool
        key = None if self._every_view else _view_key(role_items, allowed, denied, kept)
        if wording is not None or schema_tool is not None:
            words, schema = check_view_options(
                words if wording is None else wording,
                schema if schema_tool is None else schema_tool,
                origin,
            )
            key = None if key is None else (key, words, schema)
        if key is not None:
            cached = self._views.get(key)
            if cached is not None:
                return cached
        epoch = self._epoch  # read before the state the view is built from
        view = build_view(
            self._snapshot,
            self._states,
            origin,
            roles=role_items,
            allow=allowed,
            deny=denied,
            predicates=kept,
            wording=words,
            schema_tool=schema,
        )
        if key is not None:
            with self._lock:
                # No registration, boot or change of state since: the view is still current.
                if self._booted and self._epoch == epoch:
                    if len(self._views) >= _VIEWS_KEPT:
                        self._views.clear()
                    self._views[key] = view
        return view

    # --- reading ----------------------------------------------------------------

    def names(self) -> frozenset[str]:
        """Every registered tool name, without resolving any tool (cheap, and it cannot fail)."""
        with self._lock:
            return frozenset(self._declared)

    def tools(self) -> tuple[Tool, ...]:
        """Every registered tool, resolved but without booting components or checking floors.

        For the lint and the manifest: a tool of a component that did not
        start, or without a description, is here too.

        Raises:
            VeridicError: a tool's signature cannot be resolved.
        """
        with self._lock:
            return tuple(declaration.build() for declaration in self._declared.values())

    def components(self) -> tuple[ComponentState, ...]:
        """Each component and how its last check went (``started is None`` before boot).

        The state every new view is built from: after a recheck, the recheck's.
        """
        with self._lock:
            return tuple(
                self._states.get(name)
                or ComponentState(name, None, _NOT_BOOTED, component.hint, component.provides)
                for name, component in self._components.items()
            )

    # --- checking again -----------------------------------------------------------

    def recheck(self, name: str | None = None) -> tuple[ComponentState, ...]:
        """Run the boot check of the component ``name`` (of every component when
        ``None``) now, whatever its ``recheck``, and return what each check found.

        For the moment the application learns that something changed (a licence
        webhook, an admin turning a feature on): the next view has the new state,
        a component that came back is exposed again, one that went down is told
        as a failed boot is, and the view cache is emptied if a state changed.
        Changes are logged on ``veridic.registry``. A check that runs while
        another of the same component runs waits for it.

        >>> registry = Registry()
        >>> flag = {"on": False}
        >>> beta = registry.component("Beta", boot=lambda: flag["on"])
        >>> [state.started for state in registry.recheck()]
        [False]
        >>> flag["on"] = True
        >>> registry.recheck("Beta")[0].started
        True

        Raises:
            VeridicError: no component is called ``name``.
        """
        with self._lock:
            if name is None:
                chosen = tuple(self._components.values())
            else:
                found = self._components.get(name)
                if found is None:
                    known = ", ".join(repr(n) for n in self._components)
                    fix = (
                        f"pass one of {known}, or no name to check every component again"
                        if known
                        else "declare it first with registry.component(name, boot=...)"
                    )
                    raise VeridicError(
                        f"registry.recheck({name!r}): {self!r} has no component of that name: {fix}"
                    )
                chosen = (found,)
        checked = []
        for component in chosen:
            state, number = component._run(
                time.monotonic
            )  # outside the registry's lock: it may be slow
            self._apply(component, state, number)
            checked.append(state)
        return tuple(checked)

    def _closed(self, name: str) -> None:
        """Check component ``name`` again because its owner closed it on purpose.

        For an integration whose connection the application left (``async with
        connect(...)`` of MCP): its tools leave the next view as after
        :meth:`recheck`, but the change is logged at INFO, not as a component
        that went down: an application that connects per request closes one a
        request, and a WARNING each time would bury the real failures.
        """
        with self._lock:
            component = self._components[name]
        state, number = component._run(time.monotonic)
        self._apply(component, state, number, closed=True)

    def _refresh(self) -> None:
        """Run the checks that are due (the components with a ``recheck``), for a view."""
        now = time.monotonic()
        for component in self._rechecked:
            if component._due(now):
                ran = component._run_if_due(now, time.monotonic)
                if ran is not None:
                    self._apply(component, *ran)

    def _apply(
        self, component: Component, state: ComponentState, number: int, *, closed: bool = False
    ) -> None:
        """Make ``state``, found by check ``number``, the component's, unless a later
        check's is in place already; empty the view cache when it changes. ``closed``:
        the owner closed the component on purpose (:meth:`_closed`), logged at INFO."""
        with self._lock:
            if number <= component._applied:
                return
            component._applied = number
            name = component.name
            before = self._states.get(name)
            if before == state:
                return
            self._states = {**self._states, name: state}
            self._views.clear()
            self._epoch += 1
        if state.started is False:
            if closed and (before is None or before.started is not False):
                _log.info(
                    "component %r was closed (%s): its tools are in no new view",
                    name,
                    _logged(state.reason),
                )
            elif before is not None and before.started is False:
                _log.warning("component %r is still down, now: %s", name, _logged(state.detail))
            else:
                _log.warning(
                    "component %r is down: %s; its tools are in no view until a check succeeds",
                    name,
                    _logged(state.detail),
                )
        elif before is not None and before.started is False:
            _log.info("component %r is up again: its tools are back in new views", name)

    # --- internals ----------------------------------------------------------------

    def _decorator(
        self,
        component: str | None,
        kind: ToolKind,
        risk: RiskLike | None,
        irreversible: bool,
        writes: Iterable[type[BaseModel]],
        name: str | None,
        description: str | None,
        roles: Iterable[str],
        hints: ToolHints | None = None,
    ) -> Callable[[F], F]:
        written = tuple(writes)
        role_set = frozenset((roles,) if isinstance(roles, str) else roles)
        # The scope the decorator is applied in: its names resolve annotations
        # of tools defined inside a function (e.g. a model defined in a test). Three
        # frames up: past tool() and the check kind_required puts in front of it.
        caller = sys._getframe(3)
        localns = dict(caller.f_locals) if caller.f_code.co_name != "<module>" else None

        def register(function: F) -> F:
            tool_name = name if name is not None else getattr(function, "__name__", None)
            # file:line, as at boot; the name quoted clipped: a __name__ may be any length.
            where = f"{quoted(tool_name)} ({_origin_of(function)})"
            if not callable(function):
                raise VeridicError(
                    f"@tool was applied to {quoted(function)}, which is not callable: decorate "
                    "the function that implements the tool"
                )
            options = ToolOptions.check(
                where, kind, risk, irreversible, written, name, description, role_set, hints
            )
            refuse_untrusted(
                name,
                f"@tool(name=...) of {where}",
                "write the tool's name in code; a tool named from outside is "
                "registry.external(..., pin=...)",
            )
            if name is None:
                # The capability section prints the name as the application's own words.
                refuse_untrusted(
                    tool_name,
                    f"the tool {where} named by its function's __name__",
                    "name the tool in code with name=...; a tool named from outside is "
                    "registry.external(..., pin=...)",
                )
            checked = check_tool_name(tool_name, where)
            # What the model is shown is read now, once: a docstring changed later is not seen.
            text = FunctionText.read(function, checked, described=description is not None)
            self._add(checked, _Declaration(function, options, component, localns, text=text))
            return function

        return register

    def _external(
        self,
        component: str | None,
        name: str,
        description: str,
        input_schema: Mapping[str, object],
        handler: Callable[[dict[str, object]], object],
        kind: ToolKind,
        risk: RiskLike | None,
        pin: str | None,
        irreversible: bool,
        source: TrustedText,
        roles: Iterable[str],
        unavailable: TrustedText | None = None,
        hints: ToolHints | None = None,
    ) -> None:
        # The name is the spec's (a server's listing): quoted clipped, as check_tool_name does.
        where = f"{quoted(name)} (external, from {source})"
        options = ToolOptions.check(where, kind, risk, irreversible, (), name, None, roles, hints)
        built = external_tool(
            name=name,
            description=description,
            input_schema=input_schema,
            handler=handler,
            options=options,
            pin=pin,
            source=source,
            component=component,
            withheld=unavailable or "",
        )
        self._add(name, _Declaration(None, options, component, None, built))

    def _withhold(self, name: str, reason: TrustedText) -> None:
        """Keep the registered external tool ``name`` out of every view made from now on.

        For ``veridic.integrations.mcp``: a server that changed a tool after it was
        registered has its calls refused, and the views made after that must not offer
        it either (the prompt would promise a tool every call of which fails). The
        tool stays registered, withheld with ``reason`` (trusted text, printed in the
        section's list of what is unavailable); the next view boots again from the
        declarations, and no component check runs again. Private: an application
        withholds a tool with a view's filters.
        """
        with self._lock:
            declaration = self._declared.get(name)
            built = None if declaration is None else declaration.built
            if declaration is None or built is None or built.withheld:
                return
            where = f"{name!r} (external, from {built.origin})"
            declaration.built = dataclasses.replace(
                built, withheld=_withheld_reason(reason, where), _memo={}
            )
            self._booted = False
            self._registered += 1

    def _alone(self) -> threading.RLock:
        """The lock every registration takes, for a batch registered all or nothing.

        ``veridic.integrations.mcp``'s ``connect`` looks for the server's
        names in the registry and then registers them: holding this across
        both, a name found free stays free until the whole batch is in,
        whatever another thread registers meanwhile.
        """
        return self._lock

    def _add(self, name: str, declaration: _Declaration) -> None:
        with self._lock:
            existing = self._declared.get(name)
            if existing is not None:
                first = existing.built.origin if existing.built else _where(existing)
                raise VeridicError(
                    f"tool name {name!r} is registered twice in {self!r} (first at {first}): "
                    "tool names are unique, the second registration does not replace the "
                    "first; rename one of them with name=..."
                )
            alike = self._look_alike(name)
            if alike is not None:
                here = declaration.built.origin if declaration.built else _where(declaration)
                other = self._declared.get(alike)
                first = (
                    "built in, in every view"
                    if other is None
                    else other.built.origin
                    if other.built
                    else _where(other)
                )
                raise VeridicError(
                    f"tool name {name!r} ({here}) differs from {alike!r} ({first}) only in case "
                    f"or in - and _: the capability section, the tool list and an approval "
                    "question would show two names a reader cannot tell apart, and the model "
                    "may call the one it was not meant to; give it a name of its own with "
                    "name=..."
                )
            self._declared[name] = declaration
            self._folded[_folded(name)] = name
            self._booted = False
            self._registered += 1

    def _look_alike(self, name: str) -> str | None:
        """The registered (or built-in) name that ``name`` differs from only in case or in
        ``-`` and ``_``, if any: two such names read as one to a person and to most models,
        while dispatch tells them apart, so the second is refused where it is registered."""
        folded = _folded(name)
        if folded == _folded(SCHEMA_TOOL) and name != SCHEMA_TOOL:
            return SCHEMA_TOOL
        other = self._folded.get(folded)
        return other if other is not None and other != name else None

    def _taken(self, names: Iterable[str]) -> list[tuple[str, str]]:
        """Those of ``names`` that this registry holds already, or that differ from one it
        holds only in case or in ``-`` and ``_`` (registering them would be refused), each
        with the name it holds, sorted.

        For a batch registered all or nothing (``veridic.integrations.mcp``'s
        ``connect``), looked at under :meth:`_alone` before anything is registered.
        """
        held = {_folded(name): name for name in self.names()}
        return sorted((name, held[_folded(name)]) for name in names if _folded(name) in held)


def _check_component_options(name: str, boot: object, hint: object, provides: object) -> None:
    """Refuse, where the component is declared, what its boot or its capability line cannot
    use: a ``boot`` that is not a function failed only at boot (the prompt said its check
    raised ``TypeError``), and a hint or offer that is not text broke every section. An
    async def check's coroutine is closed as it is refused: it will never run."""
    if inspect.iscoroutine(boot):
        boot.close()  # never to run: closed, so no "never awaited" warning comes later
        raise VeridicError(
            f"registry.component({name!r}) got boot={quoted(boot)}, the coroutine of an "
            "async def check, which the registry never awaits (it runs boot checks "
            "synchronously): pass a plain function (read what it needs before, or run the "
            "coroutine in it with asyncio.run)"
        )
    if boot is not None and not callable(boot):
        raise VeridicError(
            f"registry.component({name!r}) got boot={quoted(boot)}, which is not a "
            "function: pass the check itself (boot=licence_ok, not boot=licence_ok()), "
            "which the registry calls at boot and as recheck= says, or leave boot out for "
            "a component that always starts"
        )
    for field, value, fix in (
        ("hint", hint, 'hint="Ask an admin to renew the licence."'),
        ("provides", provides, 'provides="Code snippets", or leave it out'),
    ):
        if not isinstance(value, str) and not (field == "provides" and value is None):
            raise VeridicError(
                f"registry.component({name!r}) got {field}={quoted(value)}, "
                f"{a_type(value)}: the capability section prints it as one line of text, "
                f"so write it in code as a string: {fix}"
            )


def _view_key(
    roles: tuple[str, ...],
    allow: tuple[str, ...] | None,
    deny: tuple[str | Deny, ...],
    predicates: tuple[Predicate, ...],
) -> Hashable | None:
    """What a view depends on besides the registry, or ``None`` when it must be built anew.

    ``None`` for predicates, ``Deny(when=...)`` filters and filters of a ``Deny`` subclass:
    their answers may change, and a subclass's ``matches`` decides more than its fields say
    (two subclasses with the same names and reason deny different tools).
    """
    if predicates:
        return None
    denied: list[Hashable] = []
    for item in deny:
        if isinstance(item, Deny):
            if type(item) is not Deny or item.when is not None:
                return None
            denied.append((item.names, item.reason, item.tombstone))
        elif isinstance(item, str):
            denied.append(item)
        else:  # not a name: build_view says what is wrong with it
            return None
    try:  # denied holds names and hashable fields only: the frozensets hash the rest
        return (frozenset(roles), None if allow is None else frozenset(allow), tuple(denied))
    except TypeError:  # an unhashable role or name: build_view says what is wrong with it
        return None


def _folded(name: str) -> str:
    """What a reader sees of a tool name: ``Refund_Order``, ``refund-order`` and
    ``refund_order`` are one name to a person (and to many models)."""
    return name.casefold().replace("-", "_")


def _where(declaration: _Declaration) -> str:
    function = declaration.function
    code = getattr(function, "__code__", None)
    if code is not None:
        return f"{code.co_filename}:{code.co_firstlineno}"
    return repr(function)


def _floor_message(violations: list[tuple[Tool, FloorViolation]]) -> str:
    parts = [
        f"tool {tool.name!r} ({tool.origin}) declares risk {v.declared.value}, but "
        f"{v.detail} (rule: {v.rule.rule}): {v.rule.fix}"
        for tool, v in violations
    ]
    return f"{counted(len(parts), 'risk floor violation')} at boot: " + "; ".join(parts)
