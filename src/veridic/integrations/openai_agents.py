"""veridic inside the OpenAI Agents SDK: a view's tools as ``FunctionTool`` s, approvals resumed.

:func:`function_tools` turns a :class:`~veridic.ToolView` into the SDK's
``FunctionTool`` s, one per tool the view exposes, named, described and
schema'd by the view's own projection (``view.tool_specs("openai")``), so the
model sees exactly what the capability section says and dispatch validates.
Every call goes through :func:`veridic.aexecute`: checked against the view,
approved by the :class:`~veridic.ApprovalPolicy`, dispatched under the guards,
and recorded in the audit store with its :class:`~veridic.ApprovalMode`.

A call the policy will not decide alone (a write without an ``always`` rule,
any call of a high-risk tool) makes the SDK interrupt the run
(``RunResult.interruptions``). The application asks the user
(:func:`approval_request` says what and why), records the answer with
:func:`answer`, and resumes the run from its state; the resumed call is
checked again, and recorded ``USER_CONFIRMED``, or ``DENIED`` when the user
said no. A call runs once: a copy of the state answered or resumed again (a
session, a queue that delivers twice, a "no" resent as a "yes") finds the call
on record in the audit store and is refused (:class:`~veridic.ApprovalDeniedError`).
:func:`instructions` gives the agent's instructions: the
application's trusted parts, the view's capability section and the preamble
that explains the data blocks tool results come back in.

>>> from veridic import ApprovalPolicy, Registry, SQLiteAuditSink, instruction, is_trusted
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
>>> tools = function_tools(view, policy=ApprovalPolicy(view),
...                        audit=SQLiteAuditSink(":memory:"), request_id="req-1")
>>> [tool.name for tool in tools]
['get_tool_schema', 'get_weather']
>>> tools[1].params_json_schema == view.tool_specs("openai")[1]["function"]["parameters"]
True
>>> is_trusted(instructions(view, instruction("You report the weather.")))
True

The SDK is imported when :func:`function_tools` first runs; without it,
:class:`~veridic.MissingExtraError` says to install ``veridic[openai-agents]``.
The whole flow, and what is guaranteed: docs/integrations/openai_agents.md.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import is_, is_not
from typing import TYPE_CHECKING, Final, NamedTuple, TypeVar

from veridic._extras import require
from veridic._sample import clip, quoted
from veridic.config import settings
from veridic.errors import (
    ApprovalDeniedError,
    InvalidArgumentsError,
    ProvenanceError,
    ToolCouplingError,
    VeridicError,
)
from veridic.integrations._output_docs import code_described
from veridic.integrations._owned_keys import owned_keys
from veridic.run._audit_writes import arecorded, of_call
from veridic.run.approval import ApprovalMode, ApprovalPolicy, ApprovalRequest
from veridic.run.audit import AuditSink
from veridic.run.executor import CallResult, aexecute
from veridic.run.records import AuditRecord, arguments_sha256
from veridic.text.compose import system_parts
from veridic.text.fence import (
    DataMode,
    _is_own_block,
    _Written,
    check_mode,
    fence,
    preamble,
)
from veridic.text.provenance import (
    TrustedInstruction,
    is_trusted,
    join,
    readable,
    report,
    spans_of,
)
from veridic.tools.view import ToolView

if TYPE_CHECKING:
    from typing import Any

    from agents import (
        Agent,
        FunctionTool,
        RunContextWrapper,
        RunState,
        Tool,
        ToolApprovalItem,
    )
    from agents.agent import AgentBase
    from agents.tool_context import ToolContext

__all__ = ["answer", "approval_request", "function_tools", "instructions"]

_C = TypeVar("_C")
_A = TypeVar("_A", bound="Agent[Any]")

_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_PROBE: Final = "veridic:no-tool-call-has-this-id"
"""A call id no model writes: the SDK approves it only under a standing ``always_approve``."""
_log = logging.getLogger("veridic.integrations.openai_agents")
_UNRUN_OUTPUTS: Final = frozenset(
    {
        "apply_patch_call_output",
        "code_interpreter_call",
        "computer_call_output",
        "custom_tool_call_output",
        "file_search_call",
        "local_shell_call_output",
        "mcp_call",
        "mcp_list_tools",
        "program_output",
        "shell_call_output",
        "tool_search_output",
    }
)
"""Input items that carry what a tool other than a ``FunctionTool`` answered (or, for
``mcp_list_tools``, an MCP server's tool descriptions): text from outside, written by a tool
the checked agent cannot hold, which the model reads with no data block around it."""
_PASSED_TYPES: Final = frozenset(
    {
        "apply_patch_call",
        "compaction",
        "compaction_trigger",
        "computer_call",
        "custom_tool_call",
        "function_call",
        "image_generation_call",
        "local_shell_call",
        "mcp_approval_request",
        "mcp_approval_response",
        "message",
        "program",
        "reasoning",
        "shell_call",
        "tool_search_call",
        "web_search_call",
    }
)
"""Input item types sent on as they are: messages (read for their role), the model's own
calls and reasoning, and items whose text only the provider reads. An
``mcp_approval_response`` passes without its ``reason``: the API documents it only as the
reason for the decision, free text that goes to the provider in the model's input, and does
not say the model never reads it, so a non-empty one is refused rather than fenced (the item
is the provider's, its fields not veridic's to rewrite). Every type the Responses API takes
is here, in ``_UNRUN_OUTPUTS`` or read by :meth:`_Binding._check_input_item`; a type it adds
later is refused until it is read here, rather than passed unread."""
_CHECKED_TYPES: Final = frozenset(
    {"additional_tools", "configuration_update", "function_call_output", "item_reference"}
)
_KNOWN_TYPES: Final = _PASSED_TYPES | _UNRUN_OUTPUTS | _CHECKED_TYPES
_MESSAGE_ROLES: Final = ("user", "assistant", "system", "developer")
"""The roles the Responses API reads a message in: any other is refused, as an unknown type is."""
_PROVIDER_KEPT: Final = ("conversation_id", "previous_response_id", "auto_previous_response_id")
"""What ``Runner.run`` was given to make the provider prepend the history it keeps, as a
``RunState`` holds it (``_<key>``) and the SDK resumes with it."""


def function_tools(
    view: ToolView,
    *,
    policy: ApprovalPolicy,
    audit: AuditSink,
    request_id: str,
    prompt_sha256: str | None = None,
    data_mode: DataMode = "datamark",
) -> list[Tool]:
    """The view's tools as the Agents SDK's ``FunctionTool`` s, in the view's order.

    Typed as the SDK's ``list[Tool]``, the type of ``Agent(tools=...)``: pass it
    as it is (a ``list[FunctionTool]`` would not type-check there, lists being
    invariant).

    Names, descriptions and parameter schemas are the view's OpenAI tool specs,
    unchanged: a tool the view does not expose (its component did not start,
    it is denied, it has no description) is in none of the SDK's lists, and
    the built-in ``get_tool_schema`` is in all of them. The schemas are sent
    with ``strict_json_schema=False``: the SDK's strict mode rewrites a schema
    (every property required, ``additionalProperties: false``), so the model
    would read a contract other than the one the capability section states
    and :meth:`ToolView.validate` enforces; veridic validates every call's
    arguments itself.

    ``needs_approval`` is veridic's policy: true exactly when
    :func:`veridic.aexecute` would ask the user about the call (its arguments
    are valid and ``policy.request(name, arguments).pending``), so a query is
    never interrupted, a write under an ``always`` rule neither, and a call of
    a high-risk tool always is, unless a ``deny`` rule refuses it (no rule can
    make it "always"). A call with
    invalid arguments or under a ``deny`` rule is not held for the user: it
    runs into the executor, which refuses it, records it and tells the model.

    Each call is recorded in ``audit`` under ``request_id`` with its approval
    mode, and ``audit`` is asked for the request's records (``records(request_id)``,
    as :class:`~veridic.AuditStore` answers) before a call the user approved runs
    (see :func:`answer`): a store that cannot be asked makes that call a
    :class:`~veridic.VeridicError`. ``prompt_sha256`` is written in each record,
    by default the SHA-256 of the calling agent's name and instructions (canonical JSON; ``null``
    for an agent without instructions): the SDK shows a tool the agent, not the rest
    of the model's input. A tool's output (or the error that stopped it)
    goes back to the model as a data block in ``data_mode``, labelled
    ``tool:<name>``, as :meth:`Composer.tool_result <veridic.Composer.tool_result>`
    writes it; :func:`instructions` carries the preamble that explains it.

    The agent that runs these tools runs only them, under trusted instructions:
    each tool's ``is_enabled`` checks the agent whenever the SDK lists its tools
    for a model call, and fails the run before the model is called when the
    agent holds another tool (an ``@function_tool``, an agent ``as_tool``, a
    hosted tool), leaves one of these out or changed any setting of it (a tool guardrail, a
    timeout, another ``on_invoke_tool``, an output schema too), lists an MCP server
    (``mcp_servers``: its tools and descriptions would reach the model with no
    pin, guard or record; connect it through :mod:`veridic.integrations.mcp`
    into the registry instead) or a handoff (a ``transfer_to_...`` tool the
    capability section does not name, whose ``on_handoff`` runs the model's
    arguments unguarded and unrecorded, to an agent nobody checked), and when
    its instructions are not trusted text of this view: a ``str`` other than
    trusted text, a function (its text is made after the check, so it is never
    read), trusted text (or none) without this view's capability section or the preamble
    of ``data_mode``, trusted text holding another view's capability section, or a prompt
    stored with the provider (``prompt=``); when its ``model_settings`` put
    instructions, tools or history in ``extra_body`` or ``extra_args`` (the
    request would carry them in place of the checked ones); and when the run's
    input holds an item with the role ``system`` or ``developer`` (or any role but those,
    ``user`` and ``assistant``), an ``mcp_approval_response`` with a ``reason``, an
    ``item_reference``
    (an item the provider keeps, which veridic cannot read; an item with neither a ``type``
    nor a ``role`` is one) or ``additional_tools``, or a tool result that is not a data block
    of these tools (a ``function_call_output`` a run without them wrote, or one edited in a
    session's store; the output of a hosted, built-in or MCP tool). The run's input is the
    session's stored items and the new input together, so replayed history is read as it
    is sent; history the provider keeps (``previous_response_id``, ``conversation_id``) is
    never shown to the tools and is not checked (docs/integrations/openai_agents.md,
    "Limits"). The run's ``RunConfig`` is
    not shown to that check: a call made in a run whose ``RunConfig`` has a
    ``call_model_input_filter`` (it rewrites the instructions and input each request is sent),
    ``model_settings`` that set those keys, or a ``tool_not_found_behavior`` other than
    ``"raise_error"`` (the SDK would answer a made-up tool name itself, unrecorded) is
    refused before anything runs (the SDK's
    ``UserError``, caused by a :class:`~veridic.VeridicError`). :func:`instructions` gives
    the instructions; build them per request, when the agent is made. An agent
    without veridic tools may hand off to one that holds them: the agent handed
    to is checked by its own tools.

    Raises:
        MissingExtraError: the ``openai-agents`` package is not installed.
        VeridicError: ``policy`` was built for another view, ``request_id``
            is empty, ``prompt_sha256`` is not a sha256, ``data_mode`` is not
            a data mode, or ``audit`` cannot write records.
    """
    require("agents", "openai-agents", "veridic.integrations.openai_agents.function_tools()")
    from agents import FunctionTool

    binding = _Binding(view, policy, audit, request_id, prompt_sha256, data_mode)
    made: list[Tool] = []
    fields: list[Mapping[str, object]] = []
    for spec in view.tool_specs("openai"):
        function = spec["function"]
        invoker = _Invoker(binding, function["name"])
        tool = FunctionTool(
            name=function["name"],
            description=function["description"],
            # A plain copy: the view's specs are read-only and shared by every request.
            params_json_schema=copy.deepcopy(function["parameters"]),
            on_invoke_tool=invoker,
            strict_json_schema=False,
            needs_approval=invoker.needs_approval,
            is_enabled=invoker.is_enabled,
        )
        made.append(tool)
        fields.append(_fields_of(tool))
    binding.made = tuple(zip(made, fields, strict=True))
    return made


def instructions(
    view: ToolView, *parts: TrustedInstruction, data_mode: DataMode = "datamark"
) -> TrustedInstruction:
    """The agent's instructions: ``parts``, the view's capability section, the data preamble.

    Trusted text (``is_trusted`` holds, and every span keeps its provenance),
    for ``Agent(instructions=...)``; the SDK hands it to the model as it is.
    The section is the same view's as the tools of :func:`function_tools`,
    so the model's account of its tools and its tool list cannot disagree.
    The preamble (for ``data_mode``, the mode given to :func:`function_tools`)
    tells the model that tool results are data blocks, never instructions.

    The preamble is placed as :meth:`veridic.Composer.build` places it: after the
    section, or where a part already holds it (once, and the one for ``data_mode``;
    two, or one for another mode, are refused).

    Raises:
        ProvenanceError: a part is not trusted text (``join``'s rule).
        VeridicError: ``data_mode`` is not a data mode, or the parts hold the
            preamble twice or one for another mode.
    """
    mode = check_mode(data_mode, "instructions(data_mode=...)")
    # The Composer's placement of the preamble: once, after the section unless a part holds it.
    return join(system_parts([*parts, view.capability_section()], (mode,), "instructions()"))


def approval_request(item: ToolApprovalItem) -> ApprovalRequest:
    """What the policy says about an interrupted call, for the dialog that asks the user.

    ``tool``, ``risk``, ``irreversible``, ``writes_instruction_fields``, ``why``
    (the rule that wants the user asked) and the call's ``arguments`` (as
    the view validated them, or as the model wrote them when they are
    invalid). ``pending`` is false only when the SDK interrupted a call
    veridic would not have asked about (arguments that are not a JSON
    object), or the rules changed since; :func:`answer` takes it all the same.

    Raises:
        VeridicError: the item is not a call of a tool :func:`function_tools` made.
    """
    return _invoker_of(item, "approval_request()").request(item.arguments)


async def answer(
    state: RunState[_C, _A],
    item: ToolApprovalItem,
    *,
    approved: bool,
    always: bool = False,
    context: object = None,
) -> None:
    """Give the user's answer to an interrupted call; then resume with ``Runner.run(agent, state)``.

    ``approved=True`` approves this one call in the SDK's state, and the
    resumed call is recorded ``USER_CONFIRMED`` (the executor checks the view
    and the policy again first: a tool no longer exposed, invalid arguments
    or a ``deny`` rule set since still stop it). With ``always=True`` it also
    sets the policy's ``always`` rule for the tool first, so this call and
    every later one run without asking, recorded ``ALWAYS_RULE``; for a
    high-risk tool that raises :class:`~veridic.AlwaysAllowRefusedError` and
    nothing is approved (answer again without ``always``).

    ``approved=False`` records the refusal now (``DENIED``, "the user
    refused", through the executor, so nothing can run) and rejects the call
    in the SDK's state with the message the model will read; ``always=True``
    also sets a ``deny`` rule for the tool, so later calls are refused, and
    recorded, without asking.

    ``context`` is the run's context (``Runner.run(..., context=...)``), which
    a veridic tool that asks for a :class:`~veridic.ToolContext` receives as
    its deps when it runs; the refusal's record needs it too (the executor
    checks it before anything), since the SDK's state keeps it private.

    The SDK resumes with the agent the state holds: to resume under a new
    view, restore the state against the new agent,
    ``await RunState.from_string(new_agent, state.to_string())`` (a coroutine).

    Answer through this function, not ``state.approve``/``state.reject``: a
    rejection made in the SDK alone never reaches veridic, so nothing records
    it, and the SDK's ``always_approve=True`` is not an approval veridic
    accepts (every call it lets through is recorded ``DENIED``, and logged).

    A call is answered once, and runs once: the audit store is asked for the
    request's records first, and a call on record already (a copy of the
    state, kept in a session or a queue, answered or resumed before: it ran,
    or the user said no) is refused, so a second resume cannot run a write
    twice nor turn a "no" into a "yes". The resumed call asks again before it
    runs (an approval given with ``state.approve`` on such a copy is refused
    there).

    The paused run's own items (its tool results, the model's answers) and the
    input staged with ``state.add_input`` are sent with the resumed run's next
    request, beside the input the tools are shown, so they are checked here,
    as the run's input is (a state kept in a store may have been edited there):
    stage input before the last answer, which is the last moment veridic sees it.

    Raises:
        VeridicError: the item is not a call of a tool :func:`function_tools`
            made, it was answered already, ``approved`` is not a bool, the
            audit store cannot be asked for the request's records
            (``records(request_id)``), or the run was started with history the
            provider keeps (``conversation_id``, ``previous_response_id``,
            ``auto_previous_response_id``), which the resumed run would send
            unread.
        ProvenanceError: an item of the paused run, or one staged, is refused
            as an item of the run's input is (a ``system`` or ``developer``
            item, a tool result that is not a data block of these tools, ...);
            nothing is answered.
        ApprovalDeniedError: the call is on record already (the state was
            answered or resumed before); nothing is answered.
        AlwaysAllowRefusedError: ``always=True`` for a high-risk tool.
        AuditRecordError, sqlite3.Error: the refusal's record could not be
            written (the call is left unanswered).
    """
    invoker = _invoker_of(item, "answer()")
    if not isinstance(approved, bool) or not isinstance(always, bool):
        raise VeridicError(
            f"answer() got approved={quoted(approved)}, always={quoted(always)} for the call of "
            f"{invoker.name!r}: pass the user's answer as True or False"
        )
    binding = invoker.binding
    binding.check_paused(state, getattr(item.agent, "name", None))
    call_id = binding.claim(invoker.name, item.call_id)
    try:
        await invoker.check_not_on_record(call_id, item.arguments)
        if approved:
            if always:
                binding.policy.allow_always(invoker.name)
            state.approve(item)
            return
        refused = await invoker.refuse(call_id, item.arguments, item.agent, context)
        state.reject(item, rejection_message=refused)
    except BaseException:
        binding.release(call_id)
        raise
    if always:
        binding.policy.deny(invoker.name)


def _keeps_instructions(given: object) -> bool:
    """Whether a ``call_model_input_filter`` leaves the checked instructions as they were.

    No filter does; nor does the SDK's own ``ToolOutputTrimmer`` (exactly that class, whose
    ``__call__`` is the SDK's, not a subclass's): it passes the instructions through
    unchanged and only shortens older tool outputs, data the model reads as data. Any other
    filter returns instructions veridic never sees.
    """
    if given is None:
        return True
    from agents.extensions import ToolOutputTrimmer

    return type(given) is ToolOutputTrimmer


def _owned_settings(settings: object, where: str) -> list[str]:
    """The keys of ``settings.extra_body`` and ``.extra_args`` that set what veridic owns,
    each written as ``<where>.<field>[<key>]``."""
    return [
        f"{where}.{field}[{key!r}]"
        for field in ("extra_body", "extra_args")
        for key in sorted(owned_keys(getattr(settings, field, None)))
    ]


class _Binding:
    """What the tools of one :func:`function_tools` call share: the request and its answers."""

    __slots__ = (
        "_answered",
        "_lock",
        "_passed",
        "_refused",
        "audit",
        "data_mode",
        "made",
        "policy",
        "prompt_sha256",
        "request_id",
        "view",
        "written",
    )

    def __init__(
        self,
        view: ToolView,
        policy: ApprovalPolicy,
        audit: AuditSink,
        request_id: str,
        prompt_sha256: str | None,
        data_mode: DataMode,
    ) -> None:
        if not isinstance(view, ToolView) or not isinstance(policy, ApprovalPolicy):
            raise VeridicError(
                f"function_tools() needs a ToolView and an ApprovalPolicy, got "
                f"{type(view).__name__} and {type(policy).__name__}: pass the request's view "
                "and ApprovalPolicy(view)"
            )
        if policy.view is not view:
            raise VeridicError(
                f"function_tools() got a policy built for another view ({policy.view!r}, not "
                f"{view!r}): build it for the view the tools come from, "
                "ApprovalPolicy(view, rules=previous.rules)"
            )
        if not callable(getattr(audit, "write", None)):
            raise VeridicError(
                f"function_tools() got audit={type(audit).__name__}, which cannot write "
                "records: pass an AuditSink, e.g. SQLiteAuditSink(path)"
            )
        if not isinstance(request_id, str) or not request_id.strip():
            raise VeridicError(
                f"function_tools() got request_id={quoted(request_id)}: every call is recorded "
                "under the id of the request it belongs to; pass a non-empty string"
            )
        if prompt_sha256 is not None and (
            not isinstance(prompt_sha256, str) or not _SHA256.fullmatch(prompt_sha256)
        ):
            raise VeridicError(
                f"function_tools() got prompt_sha256={quoted(prompt_sha256)}, which is not a "
                "sha256 (64 lowercase hex digits): pass the .sha256 of the Prompt the run's "
                "input was composed from, or leave it out"
            )
        self.view = view
        self.policy = policy
        self.audit = audit
        self.request_id = request_id
        self.prompt_sha256 = prompt_sha256
        self.data_mode = check_mode(data_mode, "function_tools(data_mode=...)")
        self._lock = threading.Lock()
        self._answered: set[str] = set()
        self._refused: set[str] = set()
        self.written = _Written()
        """The tool answers these tools wrote, which each check of a replay knows by digest."""
        self.made: tuple[tuple[Tool, Mapping[str, object]], ...] = ()
        """Each tool :func:`function_tools` made, with every field as it was made."""
        self._passed: _Input | None = None
        """The run's input the last check passed, as it was (:meth:`_check_turn_input`)."""

    def check_agent(self, agent: object, turn_input: Sequence[object]) -> None:
        """Refuse an agent that offers the model more, less or other than the view's tools.

        The SDK sends the model every tool of ``agent.tools`` and of its MCP servers,
        its ``instructions`` as the system prompt, and the run's input items as they
        are, a ``system`` or ``developer`` one as instructions; the capability section,
        the policy, the guards and the audit know only the tools :func:`function_tools`
        made, and only trusted text may instruct.

        Raises:
            ToolCouplingError: the agent's tools are not exactly these, unchanged (no
                setting of them, such as a tool guardrail, a timeout or another
                ``on_invoke_tool``, changed), it has MCP servers or handoffs, its
                instructions describe another view's tools, or the run's input holds an
                ``additional_tools`` item.
            VeridicError: its model settings send instructions, tools or history of their
                own (``extra_body``, ``extra_args``).
            ProvenanceError: its instructions are a ``str`` that is not trusted text or a
                function, it names a stored prompt, its output schema is described by text
                that is not code text, or an item of the run's input has the role
                ``system`` or ``developer`` or a role no message has, is an
                ``item_reference`` or an ``mcp_approval_response`` with a reason, or is a tool
                result that is not a data block of these tools.
        """
        name = getattr(agent, "name", None)
        given = list(getattr(agent, "tools", None) or ())
        problems = _tool_problems(given, self.made, self.view)
        servers = list(getattr(agent, "mcp_servers", None) or ())
        if servers:
            listed = ", ".join(repr(getattr(server, "name", "?")) for server in servers)
            problems.append(
                f"MCP servers whose tools would reach the model unpinned, unguarded and "
                f"unrecorded: {listed} (connect them with veridic.integrations.mcp into "
                "the registry, so their tools are in the view)"
            )
        handoffs = list(getattr(agent, "handoffs", None) or ())
        if handoffs:
            problems.append(_handoff_problem(handoffs))
        if problems:
            raise ToolCouplingError(
                f"agent {quoted(name)} offers the model other tools than the view's "
                f"({'; '.join(problems)}), while the capability section, the approvals and "
                f"the audit of request {clip(self.request_id)} know only the view's: give the "
                "agent exactly the tools function_tools(view, ...) returned, and register "
                "any other tool in the veridic registry"
            )
        self._check_instructions(agent, name)
        self._check_settings(agent, name)
        self._check_output(agent, name)
        self._check_turn_input(turn_input, name)

    def _check_turn_input(self, turn_input: Sequence[object], name: object) -> None:
        """Check the run's input items, unless the last check passed this very input.

        The SDK asks every tool's ``is_enabled`` on every turn with the same input, and the
        call checks it again: reading 200 replayed results took 1.7 ms, thirty times a turn
        for thirty tools. A passed input is remembered as it was (:func:`_input_of`: every
        key, every value and its exact type, a float's sign too, of plain ``dict`` keyed by
        ``str``, ``list``, ``tuple``, ``str``, numbers and ``None`` only), never by the list's
        identity, and with the agent's name and the trust mode, the rest of what the check
        reads (the view, the data mode and the request are the binding's own; the blocks it
        knows by digest only spare a render, they never change an answer). An input edited
        since, in place or not, in any item or part of one, is read again; so is any input
        holding another type (a ``str`` subclass, an SDK model object, a key JSON has not),
        or one container twice, on every check, as before. The input is remembered only
        when it was the same before the check and after it. One input is remembered per
        :func:`function_tools`, whichever run passed it last: two runs of its tools at once
        each read their own input, as before.

        Raises:
            ProvenanceError, ToolCouplingError: as :meth:`_check_input_item` does.
        """
        seen = _input_of(turn_input, name)
        if seen is not None and seen == self._passed:
            return
        calls = _calls_in(turn_input)
        for index, item in enumerate(turn_input):
            self._check_input_item(index, item, name, calls)
        if seen is not None and seen == _input_of(turn_input, name):
            self._passed = seen

    def check_paused(self, state: object, name: object) -> None:
        """Refuse a paused run whose own items, or staged input, the model would read unchecked.

        On resume the SDK sends the run's first input (which the tools are shown), the items
        the run made before it paused, and the input staged with ``state.add_input``; the
        tools never see the last two. Both are read here as the run's input is read. The
        SDK keeps a paused run's items in ``RunState._generated_items`` (its ``to_json``
        refuses some states, so it is no way in): a state without it is refused rather than
        let through unread. A state of a run given ``conversation_id``,
        ``previous_response_id`` or ``auto_previous_response_id`` resumes with them, and the
        provider prepends items it keeps that veridic never reads: here, unlike in
        ``Runner.run``'s arguments, veridic sees them, so it refuses the state, as it refuses
        those keys in ``model_settings``.

        Raises:
            ProvenanceError, ToolCouplingError: an item is refused as
                :meth:`_check_input_item` refuses one.
            VeridicError: the state does not hold its items where this SDK keeps them, or
                it resumes with history the provider keeps.
        """
        kept = [
            f"{key}={_clipped(getattr(state, f'_{key}', None))}"
            for key in _PROVIDER_KEPT
            if getattr(state, f"_{key}", None)
        ]
        if kept:
            raise VeridicError(
                f"answer() got a paused run of agent {quoted(name)} (request "
                f"{clip(self.request_id)}) started with {', '.join(kept)}: on resume the "
                "provider prepends the history it keeps (a developer message, a tool result "
                "nobody fenced), which veridic never reads: keep the history yourself (a "
                "session, or result.to_input_list()) and run without these arguments"
            )
        made = getattr(state, "_generated_items", None)
        if not isinstance(made, list):
            raise VeridicError(
                f"answer() cannot read the items of the paused run of agent {quoted(name)} "
                f"(request {clip(self.request_id)}): this Agents SDK keeps them elsewhere, so "
                "the items the resumed run would send cannot be checked: install the "
                "openai-agents version veridic[openai-agents] names"
            )
        from agents import ToolApprovalItem

        # A pending call's question (a ToolApprovalItem) is never sent.
        sent = [
            (index, run_item.to_input_item())
            for index, run_item in enumerate(made)
            if not isinstance(run_item, ToolApprovalItem)
        ]
        staged = list(getattr(state, "pending_input", None) or ())
        calls = _calls_in([*(item for _, item in sent), *staged])
        for index, item in sent:
            self._check_input_item(index, item, name, calls, place="the paused run's item")
        for index, item in enumerate(staged):
            self._check_input_item(index, item, name, calls, place="the paused run's staged input")

    def _check_input_item(
        self,
        index: int,
        item: object,
        name: object,
        calls: Mapping[str, str],
        place: str = "input",
    ) -> None:
        """Refuse an item of the run's input that instructs, or that veridic cannot read.

        The SDK hands the tools the run's input as dicts (an ``openai`` model object given
        there is turned into a list of its fields, which no API reads as a message). An
        ``item_reference`` names an item the provider keeps and
        fills in (a developer message, a tool result nobody fenced): its text never passes here.
        Its ``type`` is optional in the Responses API, which reads an item with neither a
        ``type`` nor a ``role`` (``{"id": "msg_..."}``) as one. An ``additional_tools`` item
        offers the model tools from the input, and a ``configuration_update`` may set the
        answer's format (a JSON schema whose descriptions the model reads as what to answer).

        A tool result in it (a session's stored item, ``result.to_input_list()`` of an
        earlier run) is read by ``_check_replayed_result`` against its call in ``calls``
        (call id to tool name); the output of a tool the agent cannot hold
        (``_UNRUN_OUTPUTS``) was written elsewhere and is refused, and so is an item of a
        type no list here knows (``_KNOWN_TYPES``), which would reach the model unread, and
        so is a message of a role the API does not document (``_MESSAGE_ROLES``), whose text
        a provider might read as a tool's answer or as instructions.

        Raises:
            ProvenanceError: the item has the role ``system`` or ``developer`` (in report
                mode: logged), or it is an ``item_reference``, a ``configuration_update``
                that sets the answer's text format, a ``function_call_output`` that is not
                a data block of these tools, the output of another kind of tool, an
                ``mcp_approval_response`` with a ``reason``, a message of a role other than
                ``user``, ``assistant``, ``system`` and ``developer``, or an item of a type
                veridic does not know (in report mode too).
            ToolCouplingError: it is an ``additional_tools`` item (in report mode too).
        """

        def where() -> str:  # written only for a refusal: the check reads every item each turn
            return (
                f"{place}[{index}] of the run of agent {quoted(name)} "
                f"(request {clip(self.request_id)}"
            )

        def slot() -> str:
            return f"input[{index}] of agent {quoted(name)}"

        kind = _item_field(item, "type")
        if kind is not None and (not isinstance(kind, str) or kind not in _KNOWN_TYPES):
            raise ProvenanceError(
                f"{where()}) is an item of the type {_clipped(kind)}, which veridic does not "
                "know, so it cannot tell whether the model would read outside text in it as "
                "instructions or as a tool's answer: leave it out of the input, or pass its "
                "text as the role 'user' (a type the Responses API added since: install the "
                "veridic version that reads it)",
                slot=slot(),
            )
        if kind == "additional_tools":
            raise ToolCouplingError(
                f"{where()}) is an additional_tools item, which offers the model tools of its "
                f"own ({_clipped(_item_field(item, 'tools'))}) beside the view's: the "
                "capability section, the approvals and the audit know none of them (a hosted "
                "one runs at the provider): leave it out of the input, and register any other "
                "tool in the veridic registry"
            )
        if kind == "configuration_update" and _item_field(item, "text") is not None:
            raise ProvenanceError(
                f"{where()}) is a configuration_update that sets the answer's text format "
                f"({_clipped(_item_field(item, 'text'))}): a JSON schema's name and "
                "descriptions tell the model what to answer, from the input, beside the "
                "agent's output_type that veridic checks: give the agent an output_type "
                "instead (a configuration_update of the reasoning effort alone is passed on)",
                slot=slot(),
            )
        if kind == "item_reference" or (kind is None and _item_field(item, "role") is None):
            raise ProvenanceError(
                f"{where()}) is an item_reference {_clipped(_item_field(item, 'id'))}: the "
                "provider fills in an item it keeps (it may be a developer message, or a tool "
                "result nobody fenced), whose text veridic cannot read or check: pass the "
                "item itself (result.to_input_list() of the run that made it), with outside "
                "text as the role 'user'",
                slot=slot(),
            )
        if kind == "function_call_output":
            self._check_replayed_result(item, where, calls, name, slot)
        if kind in _UNRUN_OUTPUTS:
            raise ProvenanceError(
                f"{where()}) is a {kind} item ({_clipped(item)}): the output of a tool the agent "
                "does not hold (a hosted or built-in tool, an MCP server of another agent or a "
                "client), whose text the model would read bare, with no data block around it "
                "and no record of the call: leave it out of the input, or make the tool a tool "
                "of the registry, whose results come back as data blocks",
                slot=slot(),
            )
        if kind == "mcp_approval_response" and _item_field(item, "reason") not in (None, ""):
            raise ProvenanceError(
                f"{where()}) is an mcp_approval_response with the reason "
                f"{_clipped(_item_field(item, 'reason'))}: free text an application or a "
                "user wrote, which goes to the provider in the model's input, where the model "
                "may read it (the API does not say it does not) with no data block around it: "
                "leave the reason out (the answer is in 'approve'), or pass its text as data "
                "in a user turn",
                slot=slot(),
            )
        role = _item_field(item, "role")
        if role is not None and (not isinstance(role, str) or role not in _MESSAGE_ROLES):
            raise ProvenanceError(
                f"{where()}) is a message with the role {_clipped(role)}, none of "
                f"{', '.join(map(repr, _MESSAGE_ROLES))}: what the provider makes of its text "
                "(a tool's answer, instructions) is not documented, so veridic cannot tell "
                "whether the model would read outside text in it as instructions: pass "
                "outside text with the role 'user'",
                slot=slot(),
            )
        if role in ("system", "developer"):
            content = _item_field(item, "content")
            report(
                content if isinstance(content, str) else repr(content),
                f"{where()}; an input item with the role {quoted(role)}, which the model reads as "
                "instructions, and only the agent's instructions may give them: pass "
                "outside text with the role 'user')",
            )

    def _check_replayed_result(
        self,
        item: object,
        where: Callable[[], str],
        calls: Mapping[str, str],
        name: object,
        slot: Callable[[], str],
    ) -> None:
        """Refuse a tool result in the run's input that is not a data block of these tools.

        A session's items, ``result.to_input_list()`` and a client's history reach the model
        as they were stored, and the model reads a ``function_call_output`` as the tool's
        answer. One the tools of :func:`function_tools` wrote is one data block in their
        mode, labelled ``tool:<name>``; one a run without them wrote (a plain
        ``@function_tool``), one stored before it was fenced, or one edited in the store,
        is outside text with no fence (in another mode, a block the preamble never
        explained). Its form is checked, never what it says: any text in its block passes.
        The form is the one LangChain's adapter keeps a tool message by
        (:func:`~veridic.text.fence._is_own_block`): exactly the block ``fence`` writes,
        nothing around it. The block's label must name the tool of its call when the call is
        in the input, and one of these tools when it is not (the API refuses an output
        without its call; a label is outside text too, which the model reads). The SDK's
        answer to a handoff to this agent, ``{"assistant": "<its name>"}``,
        holds only the agent's own name, and passes.

        Raises:
            ProvenanceError: the output is not one such block, whole (in report mode too:
                it is data that lost its fence, not text at an instruction position).
        """
        output = _item_field(item, "output")
        call_id = _item_field(item, "call_id")
        called = calls.get(call_id) if isinstance(call_id, str) else None
        labels = {f"tool:{called}"} if called is not None else self._result_labels()
        # Its characters, which the provider is sent, not what a str subclass says of itself.
        text = readable(output) if isinstance(output, str) else None
        if text is not None and (
            _is_own_block(text, labels, self.data_mode, self.written)
            or (isinstance(name, str) and text == json.dumps({"assistant": name}))
        ):
            return
        label = (
            "tool:<name> of one of these tools"
            if called is None
            else f"tool:<name> of its call, {_clipped(called)}"
        )
        raise ProvenanceError(
            f"{where()}) is a function_call_output {_clipped(call_id)} "
            f"whose output is no data block of these tools ({_clipped(output)}; they write "
            f"one block labelled {label} in the data mode {self.data_mode!r}): the model "
            "would read outside text as the tool's answer, with no fence around it. Replay "
            "the items of runs of these tools as they were stored (the session's, "
            "result.to_input_list()); leave out a result another tool made, or one edited "
            "since, or pass its text as data in a user turn",
            slot=slot(),
        )

    def _result_labels(self) -> frozenset[str]:
        """The labels of these tools' results: a replayed result whose call is not in the
        input (which the API refuses anyway) must be one of them."""
        return frozenset(f"tool:{name}" for name in self.view.names())

    def _check_instructions(self, agent: object, name: object) -> None:
        """Refuse instructions the check cannot read, or that describe another view's tools.

        The SDK sends ``agent.instructions`` as the system prompt, and a stored prompt
        (``agent.prompt``) with it. A function's text is made after this check ran (the SDK
        asks for the tools first), and a stored prompt's text is kept by the provider: neither
        is in the code or checked. A capability section of another view would tell the model
        of tools its tool list, the approvals and the audit do not have.

        Raises:
            ProvenanceError: the instructions are a function, or a ``str`` that is not
                trusted text (in report mode, the ``str`` is logged), or the agent names a
                stored prompt.
            ToolCouplingError: the instructions hold another view's capability section.
        """
        where = f"the instructions of agent {quoted(name)} (request {clip(self.request_id)}"
        text = getattr(agent, "instructions", None)
        if callable(text):
            raise ProvenanceError(
                f"{where}) are a function, whose text the SDK makes after veridic checked the "
                "agent and sends as the system prompt unchecked: build the text when the "
                "agent is made, per request, with instructions(view, ...) (a new agent, or "
                "agent.clone(instructions=instructions(view, ...)))",
                slot=f"instructions of agent {quoted(name)}",
            )
        if isinstance(text, str) and not is_trusted(text):
            report(
                text,
                f"{where}; the SDK sends them as the system prompt: build them with "
                "instructions(view, ...))",
            )
        elif isinstance(text, str):
            self._check_section(text, where)
        if text is None or (isinstance(text, str) and is_trusted(text)):
            self._check_told(text, where)
        stored = getattr(agent, "prompt", None)
        if stored is not None:
            raise ProvenanceError(
                f"agent {quoted(name)} (request {clip(self.request_id)}) names a prompt stored "
                f"with the provider (prompt={_clipped(stored)}), whose text and variables reach "
                "the model as instructions that veridic cannot read or check: leave prompt= out, "
                "and give the agent its instructions with instructions(view, ...)",
                slot=f"prompt of agent {quoted(name)}",
            )

    def _check_settings(self, agent: object, name: object) -> None:
        """Refuse model settings that would send other instructions, tools or history.

        The OpenAI SDK merges ``extra_body`` over the request it builds, and the Agents
        SDK passes ``extra_args`` as parameters wherever it sent none (a stored ``prompt``,
        a ``previous_response_id``), so either could replace the trusted instructions or
        the view's tools, or add instructions and history nobody checked. Only the agent's
        own settings can be read here: ``RunConfig(model_settings=...)`` is checked when a
        tool is called (:meth:`check_run_config`).

        Raises:
            VeridicError: a key of ``extra_body`` or ``extra_args`` sets what veridic owns.
        """
        clash = _owned_settings(getattr(agent, "model_settings", None), "model_settings")
        if clash:
            raise VeridicError(
                f"agent {quoted(name)} (request {clip(self.request_id)}) sets {', '.join(clash)}, "
                "which the SDK sends in place of (or beside) the trusted instructions, the "
                "view's tools and the run's input: leave these keys out; the instructions come "
                "from instructions(view, ...), the tools from function_tools(view, ...)"
            )

    def _check_output(self, agent: object, name: object) -> None:
        """Refuse an output schema whose description is not code text.

        The SDK sends the agent's output schema (``json_schema()``) as the response format,
        whose description the model reads as instructions beside the checked ones. For an
        output type (``output_type=Model``, or the SDK's ``AgentOutputSchema(Model)``) that
        is the type's docstring, code text as a tool's docstring is, unless something
        replaced it (a ``json_schema_extra`` description, a docstring branded untrusted); a
        schema class of the application's own (``AgentOutputSchemaBase``) returns a
        ``dict`` whose description is a value, which may have been read from anywhere. So
        the description must be the type's docstring or trusted text (``instruction(...)``),
        the rule of the other adapters (:mod:`._output_docs`). The descriptions of its
        properties are not checked (a limit the docs state).

        Raises:
            ProvenanceError: the description is neither (in report mode: logged).
        """
        from agents import AgentOutputSchema, AgentOutputSchemaBase
        from agents.exceptions import UserError

        given = getattr(agent, "output_type", None)
        if given is None or given is str:
            return  # plain text: no schema is sent
        if isinstance(given, AgentOutputSchemaBase):
            sent = given
        else:
            try:
                sent = AgentOutputSchema(given)  # what the SDK sends for a type
            except UserError:
                return  # a type the SDK cannot describe: it refuses the run itself
        schema = sent.json_schema()
        text = schema.get("description") if isinstance(schema, Mapping) else None
        if not isinstance(text, str) or not text:
            return
        source = sent.output_type if isinstance(sent, AgentOutputSchema) else None
        if code_described(text, source):
            return
        report(
            text,
            f"the description of the output schema {type(sent).__name__} of agent {quoted(name)} "
            f"(request {clip(self.request_id)}; the SDK sends it as the response format, which the "
            "model reads as instructions beside the agent's: describe the output with its "
            "type's docstring, written in code and not replaced in its configuration "
            "(json_schema_extra), or give the description as instruction(...))",
        )

    def check_run_config(self, config: object, tool: str) -> None:
        """Refuse a call made in a run whose ``RunConfig`` rewrites what veridic checked.

        The SDK hands the tools (:meth:`check_agent`) the agent, never the run's
        ``RunConfig``, which it applies after that check, to every model request: its
        ``call_model_input_filter`` returns the instructions and input the model is sent
        (a filter can put any text in the system prompt, or drop the checked one), and its
        ``model_settings`` are merged over the agent's (``extra_body`` and ``extra_args``
        sent instructions, tools or history in place of the checked ones). A tool call is
        the first moment veridic sees the ``RunConfig``; the model's request was sent by
        then, so the call, asked for under instructions nobody checked, must not run.

        The SDK's own ``ToolOutputTrimmer`` is the one filter let through: it keeps the
        instructions and only shortens older tool outputs (:func:`_keeps_instructions`).

        Raises:
            VeridicError: the run has a ``call_model_input_filter``, run model settings
                that set what veridic owns, or a ``tool_not_found_behavior`` other than
                ``"raise_error"``; nothing ran and nothing was recorded.
        """
        if config is None:
            return
        where = (
            f"the call of {quoted(tool)} (request {clip(self.request_id)}) was made in a run whose"
        )
        if not _keeps_instructions(getattr(config, "call_model_input_filter", None)):
            raise VeridicError(
                f"{where} RunConfig has a call_model_input_filter, which rewrites the "
                "instructions and the input the model is sent after veridic checked them "
                "(the system prompt of that request may hold text nobody checked), so the "
                "call did not run: leave call_model_input_filter out of RunConfig; give the "
                "agent its instructions with instructions(view, ...) and trim or redact the "
                "run's input before Runner.run (the SDK's own ToolOutputTrimmer, which keeps "
                "the instructions, may stay)"
            )
        answered = getattr(config, "tool_not_found_behavior", "raise_error")
        if answered != "raise_error":
            raise VeridicError(
                f"{where} RunConfig has tool_not_found_behavior={_clipped(answered)}: the SDK "
                "answers a tool name the model made up itself and goes on, so veridic never "
                "sees, records or reports that call, so the call did not run: leave "
                "tool_not_found_behavior at 'raise_error' (a made-up name then fails the run "
                "with ModelBehaviorError, and nothing runs)"
            )
        settings = getattr(config, "model_settings", None)
        clash = _owned_settings(settings, "RunConfig(model_settings=...)")
        if clash:
            raise VeridicError(
                f"{where} {', '.join(clash)} is sent in place of (or beside) the trusted "
                "instructions, the view's tools and the run's input, so the call did not "
                "run: leave these keys out; the instructions come from instructions(view, "
                "...), the tools from function_tools(view, ...)"
            )

    def _check_told(self, text: str | None, where: str) -> None:
        """Refuse instructions that do not tell the model its tools and what their results are.

        The capability section is the model's account of the tools it is given, and tool
        results come back as data blocks in the tools' data mode, which only the preamble
        of that mode tells the model are data, never instructions: trusted text without
        either (``join([SYSTEM, view.capability_section()])``, ``instructions(view, ...,
        data_mode=...)`` of another mode, no instructions at all) left the model reading
        marked ticket text with no word of what the marks mean.

        Raises:
            ToolCouplingError: the section or the preamble of the tools' mode is missing.
        """
        missing = [
            what
            for what, part in (
                ("the view's capability section", self.view.capability_section()),
                (
                    f"the preamble of the tools' data mode {self.data_mode!r}",
                    preamble(self.data_mode),
                ),
            )
            if text is None or part not in text
        ]
        if missing:
            raise ToolCouplingError(
                f"{where}) lack {' and '.join(missing)}: the model would not be told the tools "
                "it is given, or that their results are data blocks and never instructions; "
                "build the instructions with instructions(view, ...), with the data_mode "
                "given to function_tools()"
            )

    def _check_section(self, text: str, where: str) -> None:
        """Refuse trusted instructions holding a capability section of another view."""
        for span in spans_of(text):
            if span.kind == "registry" and not self.view.describes(text[span.start : span.end]):
                raise ToolCouplingError(
                    f"{where}) hold a capability section from another view ({span.origin}) "
                    f"than the tools' ({self.view!r}): the model would be told of tools its "
                    "tool list, the approvals and the audit do not have; build them with "
                    "instructions(view, ...) of the view given to function_tools()"
                )

    def digest(self, agent: object) -> str:
        """The ``prompt_sha256`` of a call made by ``agent``."""
        if self.prompt_sha256 is not None:
            return self.prompt_sha256
        name = getattr(agent, "name", None)
        text = getattr(agent, "instructions", None)
        shown = {
            "agent": name if isinstance(name, str) else None,
            "instructions": text if isinstance(text, str) else None,
        }
        encoded = json.dumps(shown, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()

    def claim(self, name: str, call_id: str | None) -> str:
        """Take the one answer a call gets (its id), or say it was answered already."""
        if not call_id:
            raise VeridicError(
                f"answer() got an interruption of {quoted(name)} without a call id, so the answer "
                "could not be tied to its call: answer the items of result.interruptions"
            )
        with self._lock:
            if call_id in self._answered:
                raise VeridicError(
                    f"the call {quoted(call_id)} of {quoted(name)} was answered already: each "
                    "call gets one answer; resume the run with Runner.run(agent, state)"
                )
            self._answered.add(call_id)
        return call_id

    def release(self, call_id: str) -> None:
        with self._lock:
            self._answered.discard(call_id)

    def refuse(self, call_id: str) -> None:
        with self._lock:
            self._refused.add(call_id)

    def was_refused(self, call_id: str) -> bool:
        with self._lock:
            return call_id in self._refused


class _Invoker:
    """One tool's ``on_invoke_tool`` and ``needs_approval``: the SDK asks, veridic decides."""

    __slots__ = ("binding", "name")

    def __init__(self, binding: _Binding, name: str) -> None:
        self.binding = binding
        self.name = name

    def __repr__(self) -> str:
        return f"<veridic tool {self.name!r} of {self.binding.view!r}>"

    def is_enabled(self, context: RunContextWrapper[Any], agent: AgentBase) -> bool:
        """Always true, once the agent passed :meth:`_Binding.check_agent` (which raises)."""
        self.binding.check_agent(agent, context.turn_input)
        return True

    async def needs_approval(
        self, context: RunContextWrapper[object], arguments: dict[str, object], call_id: str
    ) -> bool:
        """Whether :func:`veridic.aexecute` would ask the user about this call."""
        try:
            prepared = self.binding.view.validate(self.name, arguments)
        except InvalidArgumentsError:
            return False  # the executor refuses it and tells the model; nobody need approve it
        return self.binding.policy.request(self.name, prepared.arguments).pending

    async def __call__(self, context: ToolContext[object], arguments: str) -> str:
        """Run the call through the executor; what the model reads, as a data block.

        The agent is checked again first (:meth:`_Binding.check_agent`): the check in
        ``is_enabled`` runs only for the tools :func:`function_tools` made, and a copy of
        one (``dataclasses.replace(tool, is_enabled=True)``) runs this invoker without it.

        The user confirmed the call when the SDK's state approves this very
        call id and no standing ``always_approve`` of the SDK could be what
        approved it (a call id no model writes is approved too then).
        """
        binding = self.binding
        # Again at the call: is_enabled ran the check only if the agent holds these very
        # tools (a copy made with is_enabled=True skips it, and runs this same invoker).
        binding.check_agent(context.agent, context.turn_input)
        binding.check_run_config(getattr(context, "run_config", None), self.name)
        call_id = context.tool_call_id
        approved = context.is_tool_approved(self.name, call_id) is True
        standing = context.is_tool_approved(self.name, _PROBE) is True
        confirmed = approved and not standing and not binding.was_refused(call_id)
        if confirmed:
            await self.check_not_on_record(call_id, arguments)
        result = await aexecute(
            binding.view,
            self.name,
            arguments,
            policy=binding.policy,
            audit=binding.audit,
            request_id=binding.request_id,
            prompt_sha256=binding.digest(context.agent),
            confirm=_yes if confirmed else None,
            context=context.context,
            call_id=call_id,
        )
        if approved and not confirmed and result.record.approval is ApprovalMode.DENIED:
            _log.warning(
                "the call %s of %r was approved in the Agents SDK's state, but not as this one "
                "call (a standing always_approve, or a call answer() refused), so it was denied "
                "and recorded: answer each call with veridic.integrations.openai_agents.answer()",
                quoted(call_id),
                self.name,
            )
        return self.told(result)

    async def check_not_on_record(self, call_id: str, arguments: str | None) -> None:
        """Refuse a call the audit store holds a record of: its approval was used already.

        A call the SDK interrupts is never recorded before its answer: a record
        of its id, tool and arguments (as the model wrote them) in this request
        was written by an earlier answer or resume of the same state (a copy
        kept in a session or a queue, a second click). Whatever became of the
        call then (it ran, failed, or the user said no), answering or running it
        again would run it twice, or turn a "no" into a "yes". The record's
        ``prompt_sha256`` is not compared: it is the agent's, and a state is
        restored against a new agent (a new view, instructions built per request).
        The SDK refuses a call id used twice in one run (and :func:`answer` one
        answered twice under one :func:`function_tools`), so such a record is
        this call's.

        Raises:
            VeridicError: the store cannot be asked (no ``records(request_id)``).
            ApprovalDeniedError: a record of the call is in the store.
        """
        binding = self.binding
        records = await arecorded(binding.audit, binding.request_id, "function_tools")
        _check_not_on_record(self.name, call_id, arguments_sha256(arguments), records)

    async def refuse(
        self, call_id: str, arguments: str | None, agent: object, context: object
    ) -> str:
        """Record the user's refusal of a call (nothing runs); what the model reads."""
        binding = self.binding
        result = await aexecute(
            binding.view,
            self.name,
            arguments,
            policy=binding.policy.asking(),
            audit=binding.audit,
            request_id=binding.request_id,
            prompt_sha256=binding.digest(agent),
            confirm=_no,
            context=context,
            call_id=call_id,
        )
        binding.refuse(call_id)
        return self.told(result)

    def request(self, arguments: str | None) -> ApprovalRequest:
        view = self.binding.view
        shown: Mapping[str, object]
        try:
            shown = view.validate(self.name, arguments).arguments
        except InvalidArgumentsError:
            shown = _parsed(arguments)
        return self.binding.policy.request(self.name, shown)

    def told(self, result: CallResult) -> str:
        """The call's result as the gateway tells it, fenced as a tool result block."""
        block = fence(f"tool:{self.name}", result.told, self.binding.data_mode)
        return self.binding.written.add(block)


def _invoker_of(item: ToolApprovalItem, where: str) -> _Invoker:
    """The veridic tool an interruption belongs to, found on the item's agent."""
    agent = item.agent
    name = item.tool_name
    for tool in getattr(agent, "tools", None) or ():
        invoker = getattr(tool, "on_invoke_tool", None)
        if isinstance(invoker, _Invoker) and invoker.name == name:
            return invoker
    raise VeridicError(
        f"{where} got an interruption for tool {quoted(name)} of agent "
        f"{quoted(getattr(agent, 'name', None))}, which is not a tool function_tools() made: "
        "answer it with state.approve(item) or state.reject(item), or give the agent the tools of "
        "function_tools(view, ...)"
    )


def _check_not_on_record(
    name: str, call_id: str, arguments: str, records: Sequence[AuditRecord]
) -> None:
    """Raise when ``records`` hold the call ``call_id`` of ``name`` whose arguments have the
    digest ``arguments`` (see :meth:`_Invoker.check_not_on_record`).

    Raises:
        ApprovalDeniedError: such a record is there.
    """
    done = of_call(records, call_id, tool=name, arguments_sha256=arguments)
    if not done:
        return
    first = done[0]
    raise ApprovalDeniedError(
        f"the call {clip(call_id)} of tool {clip(name)} (request "
        f"{clip(first.request_id)}) is on record already (tool {clip(first.tool)}, approval "
        f"{first.approval.value}, outcome {first.outcome.value}): the run state it waits in "
        "was answered or resumed before (a copy kept in a session or a queue, a second "
        "click), so it was not answered, did not run again and nothing was recorded; an "
        "approval is good for one run. The store's records of the request "
        "(records(request_id)) say what ran: resume the state of the run that answered it, "
        "and let the model call the tool again if the user wants it done anew"
    )


_SPEC_FIELDS: Final = frozenset({"name", "description", "params_json_schema", "strict_json_schema"})
"""The fields of a ``FunctionTool`` that are the view's spec; the others wrap or run the call."""


def _fields_of(tool: FunctionTool) -> Mapping[str, object]:
    """Every field of a ``FunctionTool`` as it is now, to tell later whether one was changed.

    All of them, not a list of the risky ones: the SDK adds fields that reach the model or run
    around the call (tool guardrails, a timeout, an output schema, the callers allowed, deferred
    loading), and a field it adds next is refused until veridic knows what it does.
    """
    return {field.name: getattr(tool, field.name) for field in dataclasses.fields(tool)}


def _tool_problems(
    given: list[object], made: tuple[tuple[Tool, Mapping[str, object]], ...], view: ToolView
) -> list[str]:
    """What differs between the tools an agent holds and those function_tools() made."""
    ours = {id(tool) for tool, _ in made}
    held = {id(tool) for tool in given}
    others = [tool for tool in given if id(tool) not in ours]
    foreign = [_tool_name(tool) for tool in others if _is_function_tool(tool)]
    built_in = [
        f"{_tool_name(tool)} ({type(tool).__name__})"
        for tool in others
        if not _is_function_tool(tool)
    ]
    missing = [tool.name for tool, _ in made if id(tool) not in held]
    specs = {spec["function"]["name"]: spec["function"] for spec in view.tool_specs("openai")}
    changes = {
        tool.name: found
        for tool, fields in made
        if id(tool) in held and (found := _changes(tool, fields, specs.get(tool.name)))
    }
    changed = [f"{name} ({', '.join(found)})" for name, found in changes.items()]
    problems = [
        f"{label}: {', '.join(found)}"
        for label, found in (
            ("not made by function_tools()", foreign),
            ("made by function_tools() but not given", missing),
            ("changed after function_tools() made them", changed),
        )
        if found
    ]
    if any(set(found) - _SPEC_FIELDS for found in changes.values()):
        problems.append(
            "a tool guardrail answers the model in the tool's place, and replaces its "
            "result, with text that is neither fenced nor recorded; a timeout cancels a call "
            "after its effect, before its record; another on_invoke_tool runs outside the "
            "approvals, the guards and the audit; an output schema, allowed callers or "
            "deferred loading change what the model is told of the tool: leave every "
            "setting as function_tools() made it, and check outside text inside the tool "
            "(a tool of the registry) or before the run"
        )
    if built_in:
        problems.append(
            f"{', '.join(built_in)}, which the provider or the SDK runs itself, outside "
            "veridic's dispatch, where no approval, guard or record reaches it: write its work "
            "as a tool of the veridic registry that calls the service"
        )
    if not problems and len(given) != len(held):
        problems.append("a tool is given more than once")
    return problems


def _changes(
    tool: Tool, fields: Mapping[str, object], spec: Mapping[str, object] | None
) -> list[str]:
    """The fields of a tool that differ from the view's spec, or from how function_tools()
    made it (``fields``); the schema is compared with the spec, which a change in place of
    the tool's own dict cannot reach."""
    if spec is None:
        return ["name"]
    schema = getattr(tool, "params_json_schema", None)
    moved = [] if schema == spec["parameters"] else ["params_json_schema"]
    return moved + [
        name
        for name, made in fields.items()
        if name != "params_json_schema" and not _same(getattr(tool, name, None), made)
    ]


def _same(now: object, made: object) -> bool:
    """Whether a field still holds what it was made with (the object, or an equal one)."""
    return now is made or now == made


def _handoff_problem(handoffs: list[object]) -> str:
    """Why an agent that runs the view's tools may not hand off (the agents it names)."""
    names = ", ".join(
        repr(getattr(item, "agent_name", None) or getattr(item, "name", None) or "?")
        for item in handoffs
    )
    return (
        f"handoffs: {names} (each is a transfer_to_... tool the model is offered that the "
        "capability section does not name; its on_handoff runs with the model's arguments "
        "outside the approvals, the guards and the audit, and the agent handed to runs "
        "under instructions and tools veridic never checks: hand off to this agent from "
        "one without veridic tools, or run the other agent as its own request)"
    )


_PLAIN: Final = frozenset({str, int, float, bool, type(None)})
"""Values that cannot change: an input made of these (and of the containers below) is the
same input as long as each one is equal, and of the same type, at the same place."""
_CONTAINERS: Final = frozenset({dict, list, tuple})
_READ_TYPES: Final = _PLAIN | _CONTAINERS
_KEY_TYPES: Final = frozenset({str})
"""The keys JSON has: ``{1: x}``, ``{True: x}`` and ``{1.0: x}`` are one dict to ``==`` and
three to the SDK (``"1"``, ``"true"``, ``"1.0"``), so a dict keyed otherwise is never
remembered."""
_DEEPEST: Final = 64
"""Levels of nesting :func:`_input_of` reads: the Responses API's items nest a few; a deeper
input is read whole by every check instead."""

_Level = tuple[list[type], list[int], list[object], list[type], list[object], list[str]]


class _Input(NamedTuple):
    """An input as one check read it: by level, the containers' types and lengths, the
    dicts' keys in their order, every value's type, the plain values themselves (kept, so
    none is freed and a new one takes its place), and the floats as JSON writes them
    (``-0.0 == 0.0``). Never a container: a list or a dict of the input is the caller's,
    which may change after."""

    name: str | None
    mode: str
    levels: tuple[_Level, ...]


def _input_of(turn_input: object, name: object) -> _Input | None:
    """``turn_input`` and the agent's ``name`` as :class:`_Input`, or ``None`` when the input
    holds anything but plain values in plain containers, a dict keyed by anything but
    ``str``, a container twice (or inside itself), or nests past ``_DEEPEST``.

    Each level is read with the C loops of ``map``, ``chain`` and ``compress``: for the 400
    items of 200 replayed results, about a tenth of reading them. Two of them are equal
    (``==``) exactly when the inputs hold the same keys in the same order and equal values
    of the same types at the same places, floats of the same sign: every value is a ``str``,
    a number, ``None`` or a container of them, whose ``==`` is the built-in one (no value's
    own method is asked). A container met twice is refused, not read again: one list held
    twice by each of twenty nested ones is two million paths to read.
    """
    if (name is not None and type(name) is not str) or type(turn_input) not in _CONTAINERS:
        return None
    shown = name if type(name) is str else None
    levels: list[_Level] = []
    level: list[Any] = [turn_input]  # containers of the types _CONTAINERS holds, no other
    met: set[int] = set()
    while level:
        if len(levels) == _DEEPEST or not _first_met(level, met):
            return None
        kinds = list(map(type, level))
        dicts = list(compress(level, map(is_, kinds, repeat(dict))))
        keys = list(chain.from_iterable(dicts))
        values = list(
            chain(
                chain.from_iterable(map(dict.values, dicts)),
                chain.from_iterable(compress(level, map(is_not, kinds, repeat(dict)))),
            )
        )
        types = list(map(type, values))
        found = set(types)
        if not found <= _READ_TYPES or not set(map(type, keys)) <= _KEY_TYPES:
            return None
        nested = found & _CONTAINERS
        plain = list(compress(values, map(_PLAIN.__contains__, types))) if nested else values
        floats = (
            list(map(float.__repr__, compress(values, map(is_, types, repeat(float)))))
            if float in found
            else []
        )
        levels.append((kinds, list(map(len, level)), keys, types, plain, floats))
        level = list(compress(values, map(_CONTAINERS.__contains__, types))) if nested else []
    return _Input(shown, settings().mode, tuple(levels))


def _first_met(level: list[Any], met: set[int]) -> bool:
    """Whether no container of ``level`` is there twice or was met at a level above (then
    adds them to ``met``): a container held twice is read once per path to it, a doubling
    per level, and one inside itself until ``_DEEPEST``."""
    ids = set(map(id, level))
    if len(ids) != len(level) or not met.isdisjoint(ids):
        return False
    met |= ids
    return True


def _calls_in(items: Sequence[object]) -> dict[str, str]:
    """The tool name of each ``function_call`` among ``items``, by call id."""
    calls: dict[str, str] = {}
    for item in items:
        call_id, name = _item_field(item, "call_id"), _item_field(item, "name")
        if _item_field(item, "type") == "function_call" and isinstance(call_id, str):
            calls[call_id] = name if isinstance(name, str) else ""
    return calls


def _item_field(item: object, key: str) -> object:
    """A field of an input item (a dict, as the SDK hands the run's input to the tools)."""
    return item.get(key) if isinstance(item, Mapping) else None


def _clipped(value: object) -> str:
    """A short, printable account of a value for an error message."""
    shown = repr(value)
    return shown if len(shown) <= 80 else f"{shown[:79]}…"


def _is_function_tool(tool: object) -> bool:
    """Whether the SDK runs ``tool`` by calling a function of the application.

    A hosted tool (``WebSearchTool``, ``FileSearchTool``, ``HostedMCPTool``, ...)
    runs at the provider, and a built-in one (``ComputerTool``, ``ShellTool``, ...)
    through an SDK interface of its own: neither can be a tool of the registry as
    it is, and the refusal must say so rather than "register it".
    """
    return callable(getattr(tool, "on_invoke_tool", None))


def _tool_name(tool: object) -> str:
    name = getattr(tool, "name", None)
    return repr(name) if isinstance(name, str) else type(tool).__name__


def _parsed(arguments: str | None) -> Mapping[str, object]:
    try:
        decoded: object = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _yes(request: ApprovalRequest) -> bool:
    return True


def _no(request: ApprovalRequest) -> bool:
    return False
