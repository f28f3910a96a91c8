"""pydantic-ai's side of :mod:`veridic.integrations.pydantic_ai`: the toolset and the capability.

The classes here subclass pydantic-ai's own, so defining them needs the
library: :func:`veridic.integrations.pydantic_ai.capability` imports this
module only after it checked that pydantic-ai is installed (and says which
extra to install when it is not). Nothing else imports it.
"""

from __future__ import annotations

import contextvars
import copy
import hashlib
import json
import re
import sys
import typing
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Final

from pydantic import BaseModel
from pydantic_ai import (
    AgentRunResult,
    ApprovalRequired,
    CallToolsNode,
    DeferredToolRequests,
    ModelRequestNode,
    ModelRetry,
    NativeOutput,
    PromptedOutput,
    RunContext,
    ToolDefinition,
    ToolFailed,
    ToolOutput,
)
from pydantic_ai.capabilities import (
    AbstractCapability,
    AgentNode,
    CapabilityOrdering,
    NodeResult,
    WrapperCapability,
    WrapRunHandler,
)
from pydantic_ai.messages import (
    InstructionBaselinePart,
    InstructionDeltaPart,
    InstructionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import (
    Model,
    ModelRequestContext,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.batch import BatchRequest, EncodedBatchRequest
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.output import OutputContext
from pydantic_ai.profiles import DEFAULT_PROMPTED_OUTPUT_TEMPLATE
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from veridic._sample import clip, quoted
from veridic.errors import (
    ApprovalDeniedError,
    InvalidArgumentsError,
    ToolCouplingError,
    VeridicError,
)
from veridic.integrations._output_docs import docstrings
from veridic.integrations._owned_keys import owned_keys
from veridic.run._audit_writes import arecorded, of_call
from veridic.run._unlabelled import refuse_unlabelled_outside_text
from veridic.run.approval import ApprovalPolicy, ApprovalRequest
from veridic.run.audit import AuditSink
from veridic.run.executor import CallResult, aexecute
from veridic.run.records import AuditRecord
from veridic.text.fence import DataMode, fence
from veridic.text.provenance import TrustedInstruction, is_trusted, report
from veridic.tools.view import ToolView

__all__ = ["VeridicCapability", "VeridicToolset", "answered_sha256"]

_ANY_ARGUMENTS: Final = SchemaValidator(core_schema.any_schema())
"""pydantic-ai's argument check lets every parsed value through: veridic validates each call
against the view (and records a refusal), where pydantic-ai's own check would answer the model
before veridic saw the call."""


class VeridicToolset(AbstractToolset[object]):
    """A view's tools as a pydantic-ai toolset; every call runs through :func:`veridic.aexecute`.

    Made by :func:`veridic.integrations.pydantic_ai.capability` (its
    ``.toolset``); the capability around it records what pydantic-ai settles
    without calling a toolset (a denial, an unknown name), so use the two
    together: a call in a run the capability did not start is refused
    (:class:`~veridic.VeridicError`) before anything runs.
    """

    def __init__(
        self,
        view: ToolView,
        policy: ApprovalPolicy,
        audit: AuditSink,
        request_id: str,
        max_retries: int,
        data_mode: DataMode = "datamark",
    ) -> None:
        self.view = view
        self.policy = policy
        self.audit = audit
        self.request_id = request_id
        self.max_retries = max_retries
        self.data_mode = data_mode
        self._recorded: dict[str | None, set[str]] = {}
        """The ids of the calls recorded so far (run, refused, denied), by run id: runs at once
        may give their calls the same ids (models that number them from 0); a run's set is
        dropped when the run ends (:meth:`forget`)."""
        self._told: dict[str | None, dict[tuple[str, str], list[str]]] = {}
        """What the model is told of each call this toolset answered, by run id, then by call
        id and tool name, every answer in the order told (a model may give two calls of one
        tool one id, in two turns: :meth:`check_told`); a run's table is made when the run
        starts (:meth:`begin`) and dropped when it ends, however it ends (:meth:`forget`), so
        a capability that serves many runs holds the answers of the runs under way only."""
        self._known: dict[str | None, frozenset[str]] = {}
        """The trusted texts the capability recognised in each run under way, by run id (the
        stripped copies pydantic-ai sends of trusted instructions), for :meth:`check_sent`."""
        self._described: dict[str | None, frozenset[str]] = {}
        """The output descriptions the capability's hook checked in each run under way, by run
        id, for :meth:`check_sent`."""
        self._agents: dict[str | None, object] = {}
        """The agent of each run under way, by run id: what declares its outputs, for
        :meth:`check_sent`'s check of a description its hook did not see."""

    def __repr__(self) -> str:
        return f"<VeridicToolset of {self.view!r}, request {clip(self.request_id)}>"

    @property
    def id(self) -> str | None:
        return None

    async def get_tools(self, ctx: RunContext[object]) -> dict[str, ToolsetTool[object]]:
        """One tool per spec of the view's own projection (``view.tool_specs("mcp")``).

        Each definition holds a plain copy of the spec's schema (the view's
        specs are read-only and shared by every request) and ``strict=False``:
        a provider's strict mode rewrites a schema, and the model would read
        another contract than the one the capability section states.

        Asked before every request, the first included, whether the capability is deferred
        or not (and however it was given, a capability function's included): the one place
        pydantic-ai lets a deferred capability see the run before the model is asked, as it
        runs none of its hooks (``wrap_run`` included) until the model loads it.

        Raises:
            VeridicError: a capability of the run is deferred: the one holding this toolset,
                a group or a wrapper that holds it, or one beside it
                (:func:`_check_not_deferred`).
        """
        _check_not_deferred(self, ctx.root_capability, self.request_id)
        return {
            spec["name"]: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=spec["name"],
                    description=spec["description"],
                    parameters_json_schema=copy.deepcopy(spec["inputSchema"]),
                    strict=False,
                ),
                max_retries=self.max_retries,
                args_validator=_ANY_ARGUMENTS,
            )
            for spec in self.view.tool_specs("mcp")
        }

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[object],
        tool: ToolsetTool[object],
    ) -> object:
        """Run one call through the executor; a call the user must confirm is deferred first.

        An approval holds for the arguments the model wrote, the ones the dialog
        showed (``DeferredToolRequests.approvals``): one that brings other
        arguments (``ToolApproved(override_args=...)``) is refused before
        anything runs, and the call stays pending.

        An approval is good for one run of the call: before an approved call
        runs, the audit store is asked for the request's records, and a call on
        record already (it ran, failed or was denied: the same history and
        answers sent again, by a second click, a queue that delivered twice, a
        "no" resent as a "yes") is refused with :class:`ApprovalDeniedError`;
        a store that cannot be asked (no ``records(request_id)``) refuses with
        :class:`~veridic.VeridicError`. Nothing runs either way.

        Not yet approved and pending under the policy: :class:`ApprovalRequired`,
        whose metadata (the tool, its kind and risk, why it is asked) reaches
        ``DeferredToolRequests.metadata``. Approved (``ctx.tool_call_approved``):
        the executor checks the view and the policy again and records
        ``USER_CONFIRMED`` (or what the rules decide alone now). The handler's
        value goes back to the model as the gateway tells it, fenced as a data
        block labelled ``tool:<name>`` in ``data_mode``; an invalid call is a
        ``ModelRetry`` and any other stop a ``ToolFailed``, each with its text fenced
        the same way (it may quote the model's arguments or the handler's error,
        outside text).
        """
        self._check_in_run(ctx.run_id)
        arguments = _arguments(tool_args)
        approved = ctx.tool_call_approved
        prompt_sha256 = answered_sha256(ctx.messages, ctx.tool_call_id)
        if approved:
            _check_approved_as_shown(name, tool_args, ctx.messages, ctx.tool_call_id)
            records = await arecorded(self.audit, self.request_id, "capability")
            _check_not_on_record(name, ctx.tool_call_id, prompt_sha256, records, "approved")
        else:
            request = self._pending(name, arguments)
            if request is not None:
                raise ApprovalRequired(metadata=_dialog(request, self.request_id))
        if ctx.tool_call_id is not None:
            self._recorded.setdefault(ctx.run_id, set()).add(ctx.tool_call_id)
        result = await aexecute(
            self.view,
            name,
            arguments,
            policy=self.policy,
            audit=self.audit,
            request_id=self.request_id,
            prompt_sha256=prompt_sha256,
            confirm=_yes if approved else None,
            context=ctx.deps,
            call_id=ctx.tool_call_id or "",
        )
        told = fence(f"tool:{name}", result.told, self.data_mode)
        if ctx.tool_call_id is not None:
            self._answered(ctx.run_id, (ctx.tool_call_id, name), told)
        return _answer(result, told)

    def _check_in_run(self, run_id: str | None) -> None:
        """Refuse a call in a run the capability did not start (:meth:`begin`).

        Raises:
            VeridicError: the toolset was given to the agent without its capability
                (``Agent(toolsets=[tools.toolset])``): nothing would record what pydantic-ai
                answers without the toolset, check the tool list the model is sent, or
                drop what the toolset keeps of the run when it ends.
        """
        if run_id not in self._told:
            raise VeridicError(
                f"the veridic toolset of request {clip(self.request_id)} was asked to run a call "
                "in a run without its capability: the capability records what pydantic-ai "
                "answers without the toolset (a denial, an unknown name), checks the tool "
                "list the model is sent and ends the run's records; nothing ran: give the "
                "agent the capability itself, capabilities=[capability(view, ...)], not its "
                ".toolset"
            )

    def _answered(self, run_id: str | None, key: tuple[str, str], told: str) -> None:
        """Note what the model is told of a call of the run (compared by :meth:`check_told`).

        Kept only for a run under way (:meth:`begin`); a run that ended (and was dropped,
        :meth:`forget`) is compared no more, so nothing is kept of it.
        """
        told_in_run = self._told.get(run_id)
        if told_in_run is not None:
            told_in_run.setdefault(key, []).append(told)

    def check_told(
        self,
        messages: Sequence[ModelMessage],
        request_id: str,
        run_id: str | None,
        prompt: object = None,
    ) -> None:
        """Refuse messages in which a call this toolset answered says something else.

        The toolset's answer is a data block; a capability around it (an
        ``after_tool_execute`` or ``on_tool_execute_error`` hook, a history processor)
        could replace it, and the model would read the new text in the tool's place,
        unfenced. Asked before each model request of the run, and of the history the run
        hands back when it ends (a run that ends with calls deferred, or beside its final
        output, asks the model nothing more, and its history is resumed by a later run).
        Only the messages of the run ``run_id`` are compared, those after the last message
        of an earlier run (:func:`_of_run`: a message a history processor made anew has no
        run id, and is this run's): a history brought back from an earlier run was compared
        when that run ended. A model may give
        a later call the id of an earlier one: each result of an id and tool takes one of
        the answers told under them, so no result passes as another's.

        Such a hook could also keep the result and add text beside it
        (``ToolReturn(content=...)``), which pydantic-ai sends as a user part of the same
        request, read by the model as the user's own words: a user part in a request that
        holds this toolset's results is refused, unless it is ``prompt``, the run's own
        prompt (a run resumed with deferred results and a new prompt).

        Raises:
            ToolCouplingError: a tool result of a call of this run is not the toolset's, or
                a request of this run holds a user part beside the toolset's results.
        """
        left = {key: list(told) for key, told in self._told.get(run_id, {}).items()}
        for message in _of_run(messages, run_id):
            holds_results = False
            for part in message.parts:
                if not isinstance(part, ToolReturnPart):
                    continue
                told = left.get((part.tool_call_id, part.tool_name))
                if told is None:
                    continue
                holds_results = True
                if not (isinstance(part.content, str) and part.content in told):
                    raise _rewritten(part, request_id)
                told.remove(part.content)
            if holds_results:
                _check_no_user_part_beside(message, prompt, request_id)

    def _pending(self, name: str, arguments: Mapping[str, object] | str) -> ApprovalRequest | None:
        """The policy's request when the executor would ask the user about this call."""
        if not self.view.status(name).exposed:
            return None  # the executor refuses it, records it and tells the model
        try:
            prepared = self.view.validate(name, arguments)
        except InvalidArgumentsError:
            return None
        request = self.policy.request(name, prepared.arguments)
        return request if request.pending else None

    async def record_settled(
        self,
        messages: Sequence[ModelMessage],
        response: ModelResponse,
        produced: Sequence[object],
        context: object = None,
        *,
        run_id: str | None = None,
    ) -> None:
        """Record the calls of ``response`` that pydantic-ai answered without this toolset.

        A call the user denied (``ToolDenied``, or ``False`` in
        ``DeferredToolResults.approvals``) never reaches :meth:`call_tool`: it
        is recorded ``DENIED`` here, unless it is on record already (the same
        history and answers resumed again: the run stops before the model is
        asked again, :class:`ApprovalDeniedError`), through the executor with a policy that
        asks the user whatever the rules say now, so nothing can run. A name
        pydantic-ai did not list (never registered, or withheld by the view:
        a component that did not start, a tool denied since the call was
        deferred) is recorded as the executor refuses it, as are arguments that are not
        JSON; the model is told veridic's refusal, fenced, which is the answer of the run
        ``run_id`` that :meth:`check_told` compares.

        Raises:
            ToolCouplingError: pydantic-ai called a name the view exposes
                unknown: the tool list the model saw was not the view's.
            ApprovalDeniedError: a denied call is on record already.
            VeridicError: the audit store cannot be asked for the request's records.
        """
        calls = {call.tool_call_id: call for call in response.tool_calls}
        for message in produced:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if not isinstance(part, ToolReturnPart) or part.tool_call_id not in calls:
                    continue
                call = calls[part.tool_call_id]
                cause = None if part.retry is None else part.retry.cause
                if part.outcome == "denied" or cause in ("unknown_tool", "validation_error"):
                    self._recorded.setdefault(run_id, set()).add(call.tool_call_id)
                if part.outcome == "denied":
                    # pydantic-ai's answer (or the application's ToolDenied message), counted
                    # so that an earlier answer under the same id is not compared with it.
                    if isinstance(part.content, str):
                        self._answered(run_id, (call.tool_call_id, call.tool_name), part.content)
                    await self._check_denial_not_on_record(messages, call)
                    await self._record_denial(messages, call, context, confirm=_no)
                elif cause == "unknown_tool":
                    refused = await self._record_unknown(messages, call)
                    # pydantic-ai's retry quotes the model's name: veridic's words, fenced.
                    part.content = fence(_UNKNOWN_LABEL, refused.told, self.data_mode)
                    self._answered(run_id, (call.tool_call_id, call.tool_name), part.content)
                elif cause == "validation_error" and self.view.status(call.tool_name).exposed:
                    # Arguments that are not JSON (pydantic-ai parses them before this
                    # toolset sees the call): recorded refused, and told fenced, not quoted.
                    refused = await self._refused(messages, call)
                    part.content = fence(f"tool:{call.tool_name}", refused.told, self.data_mode)
                    self._answered(run_id, (call.tool_call_id, call.tool_name), part.content)

    async def _check_denial_not_on_record(
        self, messages: Sequence[ModelMessage], call: ToolCallPart
    ) -> None:
        """Refuse a denial the store holds already: the run would go on a second time.

        A "no" sent again with the same history resumes the run again: the model,
        told no, is asked anew and its next calls (a query, a write under an
        ``always`` rule) run a second time. The gateway refuses such a resume too.
        """
        if self.view.status(call.tool_name).state == "unknown":
            return  # an output tool, or a tool of another toolset of the agent: not recorded
        records = await arecorded(self.audit, self.request_id, "capability")
        prompt_sha256 = answered_sha256(messages, call.tool_call_id)
        _check_not_on_record(call.tool_name, call.tool_call_id, prompt_sha256, records, "denied")

    async def record_unrun(
        self,
        messages: Sequence[ModelMessage],
        output: object,
        run_id: str | None,
        context: object = None,
    ) -> None:
        """At the end of a run, record the view's calls of its last response that never ran.

        A run that ends with its final result (not with calls deferred) leaves
        some calls of that response unrun: one this toolset deferred for
        approval, which pydantic-ai then drops without a word, or one its end
        strategy skipped ("Tool not executed"), in ``run`` and in a stream that
        ends on text alike. Each is recorded ``DENIED`` (nobody confirmed it),
        through the executor with a policy that asks the user and no one to
        answer, so nothing runs. A response of an earlier run (the history's)
        was recorded by that run.
        """
        last = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
        ended = not isinstance(output, DeferredToolRequests)
        recorded = self._recorded.get(run_id, set())
        if last is not None and last.run_id == run_id and ended:
            for call in last.tool_calls:
                if call.tool_call_id not in recorded:
                    await self._record_not_run(messages, call, context)

    def asking_model(self, run_id: str | None) -> None:
        """Forget the calls of the run on record: the model is asked for a new response.

        :meth:`record_unrun` looks for the calls of the run's last response that were not
        recorded, by id; a model may give a call the id of one of an earlier response
        (numbering its calls from 0 each turn), which must not pass for it.
        """
        self._recorded.pop(run_id, None)

    def begin(self, run_id: str | None, request_id: str, agent: object) -> None:
        """Start the table of what the toolset answers in the run ``run_id``.

        Raises:
            VeridicError: a run under this id is under way: the two would share one table,
                each run's results compared with the other's answers, and the first to end
                would drop the other's, leaving its results unchecked.
        """
        if run_id in self._told:
            raise VeridicError(
                f"a run of request {clip(request_id)} started under the run id "
                f"{clip(str(run_id))}, and another run of the veridic capability is under way "
                "under that id: the capability tells each run's tool results from another's by "
                "the run id; the run did not start: leave run_id= out (pydantic-ai gives each "
                "run its own) or give each run that may overlap another its own run_id"
            )
        self._told[run_id] = {}
        self._agents[run_id] = agent

    def forget(self, run_id: str | None) -> None:
        """Drop what the toolset answered and recorded in the run ``run_id``, which has ended."""
        self._told.pop(run_id, None)
        self._recorded.pop(run_id, None)
        self._known.pop(run_id, None)
        self._described.pop(run_id, None)
        self._agents.pop(run_id, None)

    def checked(self, run_id: str | None, known: set[str], described: set[str]) -> None:
        """Note the trusted texts the capability recognised, and the output descriptions it
        checked, in the request it has just checked."""
        self._known[run_id] = frozenset(known)
        self._described[run_id] = frozenset(described)

    def _run_here(self) -> tuple[bool, str | None]:
        """Whether this code runs inside a run of this toolset's capability, and its run id.

        :meth:`VeridicCapability.wrap_run` notes the run in a context variable for the time
        the run runs: the model wrapper is given no run context, and a capability serves many
        runs at once.
        """
        current = _RUN.get()
        if current is None or current[0] is not self:
            return False, None
        return True, current[1]

    def check_sent(
        self, messages: Sequence[ModelMessage], parameters: ModelRequestParameters
    ) -> None:
        """Refuse a request, as it leaves for the model, whose instructions are not trusted text.

        The capability checks each request in its ``prepare_model_request`` hook, but a model
        wrapper outside this one can still change it. The model wrapper has no run context;
        it learns its run from :meth:`VeridicCapability.wrap_run` (:meth:`_run_here`). Each
        instruction part and each system part (or instruction change) of the messages must
        be trusted text, or text the capability recognised as trusted in this run: not in
        another run under way (two runs of one capability at once, each with its own agent),
        and in none outside a run. Each output description must be trusted text, one the hook
        checked in this run, or pass the hook's check again with this run's agent
        (:func:`_check_output_descriptions`). What the hook alone checks (whether a tool
        result is the one the toolset answered, a user part beside it) needs the request as
        the hook saw it: pydantic-ai changes the messages between the hook and the model (it
        merges a resumed run's trailing requests), so the request as sent cannot be compared
        with the one checked.

        Raises:
            ProvenanceError: an instruction part or a system part of the messages, or an
                output description, as sent, is not trusted text.
        """
        where = f"request {clip(self.request_id)} as sent to the model"
        in_run, run_id = self._run_here()
        known = set(self._known.get(run_id, ())) if in_run else set()
        parts = parameters.instruction_parts or ()
        blocks = {str(part.id) for part in parts if part.id is not None}
        _check_system_parts(messages, known, blocks, where)
        _check_instruction_parts(parts, known, where)
        described = self._described.get(run_id, frozenset()) if in_run else frozenset()
        if not _output_texts(parameters) <= described:
            _check_output_descriptions(parameters, self._agents.get(run_id), where)

    async def _record_not_run(
        self, messages: Sequence[ModelMessage], call: ToolCallPart, context: object
    ) -> None:
        """Record a call of the view's that the run ended before: asked of nobody, so denied."""
        await self._record_denial(messages, call, context, confirm=None)

    async def _record_denial(
        self,
        messages: Sequence[ModelMessage],
        call: ToolCallPart,
        context: object,
        confirm: Callable[[ApprovalRequest], bool] | None = None,
    ) -> None:
        """Record a call of the view's that did not run, through the executor so nothing runs:
        denied by the user (``confirm`` answers no) or asked of nobody (``None``)."""
        if self.view.status(call.tool_name).state == "unknown":
            return  # an output tool, or a tool of another toolset of the agent
        await aexecute(
            self.view,
            call.tool_name,
            _arguments(call.args),
            policy=self.policy.asking(),
            audit=self.audit,
            request_id=self.request_id,
            prompt_sha256=answered_sha256(messages, call.tool_call_id),
            confirm=confirm,
            context=context,
            call_id=call.tool_call_id,
        )

    async def _refused(self, messages: Sequence[ModelMessage], call: ToolCallPart) -> CallResult:
        """The executor's refusal, recorded, of a call it refuses before anything runs: a
        name the view does not expose, or arguments that are not a JSON object."""
        return await aexecute(
            self.view,
            call.tool_name,
            _arguments(call.args),
            policy=self.policy,
            audit=self.audit,
            request_id=self.request_id,
            prompt_sha256=answered_sha256(messages, call.tool_call_id),
            call_id=call.tool_call_id,
        )

    async def _record_unknown(
        self, messages: Sequence[ModelMessage], call: ToolCallPart
    ) -> CallResult:
        name = call.tool_name
        if self.view.status(name).exposed:
            raise ToolCouplingError(
                f"the model called {name!r}, which the view {self.view!r} exposes, but "
                "pydantic-ai did not list it (it answered 'Unknown tool name'): the tool list "
                "the model saw is not the view's; do not filter, rename or prefix the veridic "
                "capability's toolset (prepare_tools, FilteredToolset, PrefixedToolset): build "
                "the view with the filters instead, registry.view(deny=...)"
            )
        return await self._refused(messages, call)


_RUN: Final = contextvars.ContextVar[tuple[VeridicToolset, str | None] | None](
    "veridic_pydantic_ai_run", default=None
)
"""The toolset and the run id of the veridic run this code runs in (set by
:meth:`VeridicCapability.wrap_run` for the time the run runs), for the model wrapper, which
pydantic-ai gives no run context."""


@dataclass(kw_only=True, repr=False)
class VeridicCapability(AbstractCapability[object]):
    """veridic inside a pydantic-ai agent: the view's toolset, its instructions, its records.

    Made by :func:`veridic.integrations.pydantic_ai.capability`; give it to
    ``Agent(capabilities=[...])`` or to one run's ``capabilities=``.

    It is never loaded late. pydantic-ai runs none of a deferred capability's hooks
    (``wrap_run`` included) until the model calls ``load_capability``, so the requests
    before that would carry none of the view's tools, instructions or checks. Built with
    ``defer_loading=True``, or given it later (``capability.defer_loading = True``), it is
    refused at once (:class:`~veridic.VeridicError`); deferred behind the assignment's back
    (``object.__setattr__``), or held by a deferred group or wrapper, or beside a deferred
    capability, its toolset refuses the run before the first request
    (:meth:`VeridicToolset.get_tools`, the one hook pydantic-ai runs for a capability not
    loaded yet). A subclass of ``CombinedCapability`` around it needs no refusal:
    pydantic-ai merges the group's children into the agent's and calls each child's hooks
    itself, so the group's own hooks never run.

    Raises:
        VeridicError: ``defer_loading=True`` (``replace(capability, defer_loading=True)``, or
            ``capability.defer_loading = True``).
    """

    view: ToolView
    policy: ApprovalPolicy
    audit: AuditSink
    request_id: str
    instructions: TrustedInstruction
    max_retries: int = 1
    data_mode: DataMode = "datamark"
    toolset: VeridicToolset = field(init=False)

    def __post_init__(self) -> None:
        if self.defer_loading is True:
            raise _deferred(self.request_id, "itself (defer_loading=True)")
        self.toolset = VeridicToolset(
            self.view, self.policy, self.audit, self.request_id, self.max_retries, self.data_mode
        )

    def __setattr__(self, name: str, value: object) -> None:
        """Refuse ``defer_loading = True`` where it is assigned, not at the run it would spoil.

        One comparison per attribute set (the capability sets its fields once); while the
        capability is being built, :meth:`__post_init__` refuses it with its request id.
        """
        if name == "defer_loading" and value is True and "toolset" in self.__dict__:
            raise _deferred(self.request_id, "itself (defer_loading=True)")
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        return f"<VeridicCapability of {self.view!r}, request {clip(self.request_id)}>"

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # it holds a view and an audit store: not something a spec file can name

    def get_ordering(self) -> CapabilityOrdering:
        """Innermost, and after every other capability: the last to prepare a request, so it
        checks what is sent.

        pydantic-ai prepares each request through its capabilities in order, outermost
        first (the agent's, then the run's, as listed): a capability after this one could
        add instructions, messages or tools to the request this one had checked. The
        ``innermost`` tier alone keeps the listed order among its members, so a second
        capability asking to be innermost, listed after this one, would run after the
        checks; ``wrapped_by`` every capability puts this one after it too. A capability
        that asks to run after this one (its ``wrapped_by`` names this class or a base of
        it) makes the order a cycle, and pydantic-ai refuses the agent or the run
        (``UserError``, "Circular ordering constraints among capabilities") before any
        request is sent: there is no order in which this one checks the sent request.

        Two veridic capabilities in one agent (or one listed twice, or one inside a
        ``WrapperCapability`` beside another) would each have to follow the other: they are
        refused while pydantic-ai orders them, with a :class:`~veridic.VeridicError` that says
        what to do (:class:`_EveryOtherCapability`).
        """
        # pydantic-ai matches a wrapped_by type with issubclass only: this one answers it for
        # every capability, and is no capability itself.
        every_other: list[type[AbstractCapability[Any]]] = [_EveryOtherCapability]  # type: ignore[list-item]  # a stand-in matched by issubclass, never made
        return CapabilityOrdering(position="innermost", wrapped_by=every_other)

    def get_toolset(self) -> VeridicToolset:
        return self.toolset

    def get_wrapper_model(self, model: Model) -> Model:
        """The model, behind a wrapper that checks the tools and settings of each request as
        it is sent (:class:`_SentAsChecked`).

        :meth:`prepare_model_request` runs before the capabilities' model wrappers, and a
        capability this one cannot follow (one inside a ``WrapperCapability``, which hides
        the ordering of what it holds) prepares the request after it: either could change
        what this one checked. This wrapper is the innermost of the model wrappers when this
        capability is the innermost capability.
        """
        return _SentAsChecked(model, self.view, self.toolset)

    def get_instructions(self) -> TrustedInstruction:
        return self.instructions

    async def prepare_model_request(
        self, ctx: RunContext[object], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Refuse a request that offers the model other tools than the view's, before it is sent.

        pydantic-ai sends the model every function tool of the agent: its
        ``tools=``, its other toolsets (a ``FunctionToolset``, an MCP server),
        each as the last capability's ``prepare_tools`` left it. The capability
        section, the policy, the guards and the audit know only the view's,
        so a tool beside them would run unapproved and unrecorded, and a
        definition reworded or filtered after the toolset made it would make
        the model read another contract than the section states.

        A system part of the messages (pydantic-ai's ``system_prompt``, kept in
        the history) is read as instructions too: one that is not trusted text
        (a stored conversation brought back, or edited, with a system part) is
        refused as any outside text at an instruction position. So is every
        instruction part of the request but this capability's own: the
        agent's or the run's ``instructions=`` (a callable, a template, a
        string formatted from a document) and what ``@agent.instructions``
        functions return reach the model's system slot beside the capability
        section.

        The template of a prompted output (``PromptedOutput(template=...)``) is written
        into the instructions by the model class, after this check: it must be trusted
        text, or the model profile's own template. An output's description (an output
        tool's, the object of a ``NativeOutput`` or ``PromptedOutput``) reaches the model
        as instructions too: it must be code text (:func:`_check_output_descriptions`).

        A native tool (``NativeTool(...)``, the ``WebSearch`` capability and its
        kind) is run by the provider itself: an MCP server it calls, code it
        executes, pages it reads. None of it is the view's, so it is refused like a
        function tool beside the view's. So are model settings that would send
        instructions, tools or history of their own (:func:`_check_settings`).

        A tool result of a call the toolset answered in this run must be the data block it
        answered (:meth:`VeridicToolset.check_told`): a hook that rewrote it after the tool
        ran would have the model read other text, unfenced, in the tool's place.

        Raises:
            ToolCouplingError: a function tool is not one of the view's, one of
                the view's is missing, its definition is not the view's, the
                request holds a native tool, a tool result of the run is not
                the toolset's, or the instructions lost the capability section while
                a tool's text from outside is not pinned.
            ProvenanceError: a system part of the messages, an instruction
                part or the prompted output's template is not trusted text, or an
                output's description is not code text.
            VeridicError: the model settings would send instructions, tools or
                history beside the request's.
        """
        self.toolset.check_told(request_context.messages, self.request_id, ctx.run_id, ctx.prompt)
        self.toolset.asking_model(ctx.run_id)
        known = {self.instructions.strip(), *_trusted_static(ctx.agent)}
        parts = request_context.model_request_parameters.instruction_parts or ()
        blocks = {str(part.id) for part in parts if part.id is not None}
        where = f"request {clip(self.request_id)}"
        _check_system_parts(request_context.messages, known, blocks, where)
        _check_settings(request_context.model_settings, self.request_id)
        _check_instruction_parts(parts, known, where)
        _check_labelled(parts, request_context.messages, self.view, self.request_id)
        parameters = request_context.model_request_parameters
        _check_output_template(
            parameters.prompted_output_template, request_context.model, self.request_id
        )
        _check_output_descriptions(parameters, ctx.agent, where)
        _check_tools(parameters, self.view, self.request_id)
        self.toolset.checked(ctx.run_id, known, _output_texts(parameters))
        return request_context

    async def before_output_process(
        self, ctx: RunContext[object], *, output_context: OutputContext, output: object
    ) -> object:
        """Refuse an output function before it runs: the model would run code outside the view.

        An output function (``output_type=`` a function, ``ToolOutput(function)``,
        ``TextOutput(function)``) is called with what the model wrote to end the run:
        a tool the capability section does not list, that no policy approves, no
        guard judges and the audit never records. A type (a pydantic model, ``str``,
        ``DeferredToolRequests``) is only validated, and ends the run as before.

        Raises:
            ToolCouplingError: the output the model chose would call a function.
        """
        if output_context.has_function:
            name = output_context.function_name or "an output function of the union"
            raise ToolCouplingError(
                f"the model ended the run of request {clip(self.request_id)} through the output "
                f"function {clip(name)} (output_type=), which pydantic-ai would call with the "
                "model's arguments outside the view: unapproved, unguarded and unrecorded; it "
                "did not run: give the agent an output type (a pydantic model, str) and act on "
                "the output after the run, or register the function as a tool of the veridic "
                "registry so that the view offers it, approves it and records its calls"
            )
        return output

    async def after_node_run(
        self,
        ctx: RunContext[object],
        *,
        node: AgentNode[object],
        result: NodeResult[object],
    ) -> NodeResult[object]:
        """After the node that ran a response's tool calls, record what pydantic-ai settled.

        The parts that node produced are the next request's (the run goes on)
        or, when the run ends there (calls deferred), the requests this run
        added to the history after the response.
        """
        if isinstance(node, CallToolsNode):
            response = node.model_response
            produced: list[object]
            if isinstance(result, ModelRequestNode):
                produced = [result.request]
            else:
                produced = _added_after(ctx.messages, response, ctx.run_id)
            await self.toolset.record_settled(
                ctx.messages, response, produced, ctx.deps, run_id=ctx.run_id
            )
        return result

    async def after_run(
        self, ctx: RunContext[object], *, result: AgentRunResult[object]
    ) -> AgentRunResult[object]:
        """Record the view's calls the run ended before (see :meth:`VeridicToolset.record_unrun`),
        then refuse a history whose tool results are not the toolset's answers.

        Here, not after a node: a stream that ends on text runs the response's
        calls without the node that made them, and its history is whole only now.
        A run that ends with calls deferred, or with calls run beside its final output,
        asks the model nothing after them, so no request check read their results; its
        history is what the application resumes or stores.

        Raises:
            ToolCouplingError: a tool result of the run is not what the toolset answered
                (:meth:`VeridicToolset.check_told`).
        """
        messages = result.all_messages()
        await self.toolset.record_unrun(messages, result.output, ctx.run_id, ctx.deps)
        self.toolset.check_told(messages, self.request_id, ctx.run_id, ctx.prompt)
        return result

    async def wrap_run(
        self, ctx: RunContext[object], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Run the run, then drop what the toolset answered in it, however it ended (a
        result, an error, a cancellation): a capability that serves many runs keeps
        nothing of the runs that ended.

        Raises:
            VeridicError: another run of this capability is under way under the same run id
                (:meth:`VeridicToolset.begin`), or the capability is held by one that hides
                its ordering (:func:`_check_ordered`); nothing of this run ran.
        """
        _check_ordered(self, ctx.root_capability, self.request_id)
        self.toolset.begin(ctx.run_id, self.request_id, ctx.agent)
        noted = _RUN.set((self.toolset, ctx.run_id))
        try:
            return await handler()
        finally:
            _RUN.reset(noted)
            self.toolset.forget(ctx.run_id)


def _check_ordered(capability: VeridicCapability, root: object, request_id: str) -> None:
    """Refuse a run in which pydantic-ai does not order the capability after every other.

    pydantic-ai orders the capabilities it can see (what ``apply`` visits). A
    ``WrapperCapability`` (a subclass of it, ``PrefixTools``, or the one pydantic-ai puts around
    what a capability function returns) is visited in place of a single capability it holds and
    has no ordering of its own: the veridic capability inside it is not ``innermost``. Around a
    group (``WrapperCapability(CombinedCapability([veridic]))``) both are visited, but the
    wrapper's own hooks run around veridic's. Either way a capability listed after the wrapper,
    its model wrapper, or the wrapper's hooks would change the request after the veridic
    capability checked it: a tool result rewritten there reaches the model unchecked.

    Raises:
        VeridicError: the run's capabilities do not list this one as a capability of their own,
            or a wrapper among them holds it.
    """
    seen = _visited(root)
    holders = [
        found
        for found in seen
        if isinstance(found, WrapperCapability)
        and any(held is capability for held in _visited(found.wrapped))
    ]
    if any(found is capability for found in seen) and not holders:
        return
    raise VeridicError(
        f"the veridic capability of request {clip(request_id)} is held by another capability "
        "(a WrapperCapability, a subclass of it such as PrefixTools, or the wrapper pydantic-ai "
        "puts around what a capability function returns, capabilities=[lambda ctx: ...]), which "
        "hides it from pydantic-ai's ordering or runs hooks around its own: it would no longer "
        "check the request after every other capability, so the run did not start; give it to "
        "the agent or the run itself, capabilities=[capability(view, ...)] (built per request "
        "and passed to run(), not returned from a function), and shape the view with its "
        "filters, registry.view(...)"
    )


def _check_not_deferred(toolset: VeridicToolset, root: object, request_id: str) -> None:
    """Refuse a run in which a capability is loaded late: veridic's, or one beside it.

    A deferred capability (``defer_loading=True`` on it, or on a group or a wrapper that holds
    it, ``CombinedCapability([...], id=..., defer_loading=True)``) has none of its hooks run
    until the model calls pydantic-ai's ``load_capability``: were it veridic's, the requests
    before that would carry neither the view's tools nor its instructions, and none would be
    checked; a run that loads it midway never began under it
    (:meth:`VeridicCapability.wrap_run`). Any deferred capability of the run, veridic's or not,
    puts pydantic-ai's ``load_capability`` tool and its catalog of deferred capabilities in
    every request, which the capability's checks would refuse at the first request as a tool
    beside the view's and an instruction change of unknown provenance: refused here instead,
    with the capability named.

    What pydantic-ai defers is what it registers (``apply``): a wrapper is registered in place
    of a single capability it holds, so the capabilities beneath a deferred one are looked for
    through wrappers too (:func:`_holds`).

    Raises:
        VeridicError: a capability of the run is deferred.
    """
    deferred = [found for found in _visited(root) if getattr(found, "defer_loading", False) is True]
    if not deferred:
        return
    holder = next((found for found in deferred if _holds(found, toolset)), None)
    if holder is None:
        raise _deferred_beside(request_id, deferred[0])
    name = quoted(getattr(holder, "id", None))
    where = (
        "itself (defer_loading=True)"
        if isinstance(holder, VeridicCapability)
        else f"held by the deferred capability {name} (defer_loading=True)"
    )
    raise _deferred(request_id, where)


def _holds(found: object, toolset: VeridicToolset) -> bool:
    """Whether ``found`` is, or holds (in a group, or in a wrapper, at any depth), the veridic
    capability of ``toolset``."""
    pending = [found]
    seen: set[int] = set()
    while pending:
        capability = pending.pop()
        if id(capability) in seen:
            continue
        seen.add(id(capability))
        if isinstance(capability, VeridicCapability) and capability.toolset is toolset:
            return True
        pending.extend(_visited(capability))
        if isinstance(capability, WrapperCapability):
            pending.append(capability.wrapped)
    return False


def _deferred(request_id: str, where: str) -> VeridicError:
    """The refusal of a deferred veridic capability, saying where the deferral is."""
    return VeridicError(
        f"the veridic capability of request {clip(request_id)} is deferred, {where}: "
        "pydantic-ai runs none of its hooks until the model loads it with load_capability, so "
        "the requests before that would go out without the view's instructions, tools or "
        "checks, and a run that loads it midway would not be checked as a whole; nothing was "
        "sent: give it to the agent or the run undeferred, capabilities=[capability(view, "
        "...)], and defer nothing beside it (pydantic-ai's load_capability tool and its "
        "catalog of deferred capabilities are not the view's, and are refused)"
    )


def _deferred_beside(request_id: str, deferred: object) -> VeridicError:
    """The refusal of a run that defers a capability beside the veridic one, naming it."""
    name = quoted(getattr(deferred, "id", None))
    return VeridicError(
        f"the veridic capability of request {clip(request_id)} is in a run where the "
        f"capability {name} beside it is deferred (defer_loading=True): "
        "pydantic-ai would put its load_capability tool and its catalog of deferred "
        "capabilities in every request, and neither is the view's (a tool the view does not "
        "offer, instructions that are not trusted text); nothing was sent: give that "
        "capability undeferred, or register its tools in the veridic registry and shape the "
        "view with its filters, registry.view(...)"
    )


def _visited(root: object) -> list[object]:
    """The capabilities pydantic-ai registers for ``root`` (what its ``apply`` visits)."""
    seen: list[object] = []
    apply = getattr(root, "apply", None)
    if callable(apply):
        apply(seen.append)
    return seen


class _OrderedAfterEveryOther(type):
    """The metaclass of :class:`_EveryOtherCapability`: pydantic-ai matches a ``wrapped_by``
    type against the other capabilities of the agent with ``issubclass``, and this answers it."""

    def __subclasscheck__(cls, subclass: type) -> bool:
        if issubclass(subclass, VeridicCapability):
            raise VeridicError(
                "an agent or run was given two veridic capabilities (two calls of capability(), "
                "or one listed twice): each must check the request after every other "
                "capability, so neither could, and the agent was not made; give one capability "
                "per agent and run, built for the request's view: to offer the tools of two "
                "views, build one view that holds both (one registry, registry.view(...) with "
                "the filters of both), and give its instructions in capability(..., "
                "instructions=[...])"
            )
        return issubclass(subclass, AbstractCapability)


class _EveryOtherCapability(metaclass=_OrderedAfterEveryOther):
    """What a veridic capability is ordered after (``wrapped_by``): every capability but a veridic
    one, whose presence beside it is refused (pydantic-ai would say only that the order is a
    cycle)."""


class _SentAsChecked(WrapperModel):
    """A model that refuses a request whose tools or settings are not the view's, as sent.

    The check :meth:`VeridicCapability.prepare_model_request` made of the tools and the
    settings, made again where the request leaves for the model: after every capability's
    request hooks and after the model wrappers outside this one.
    """

    def __init__(self, wrapped: Model, view: ToolView, toolset: VeridicToolset) -> None:
        super().__init__(wrapped)
        self._view = view
        self._toolset = toolset

    def _check(
        self,
        messages: Sequence[ModelMessage],
        model_settings: ModelSettings | None,
        parameters: ModelRequestParameters,
    ) -> None:
        request_id = self._toolset.request_id
        _check_settings(model_settings, request_id)
        _check_tools(parameters, self._view, request_id)
        self._toolset.check_sent(messages, parameters)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        self._check(messages, model_settings, model_request_parameters)
        return await super().request(messages, model_settings, model_request_parameters)

    async def batch_encode(self, request: BatchRequest) -> EncodedBatchRequest:
        """The request checked as :meth:`request` checks it: pydantic-ai's batching
        (``BatchModelRequests``) sends a request through here, not through :meth:`request`."""
        self._check(request.messages, request.model_settings, request.model_request_parameters)
        return await super().batch_encode(request)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        self._check(messages, model_settings, model_request_parameters)
        async with super().request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as stream:
            yield stream


def _check_tools(parameters: ModelRequestParameters, view: ToolView, request_id: str) -> None:
    """Refuse a request that offers the model other tools than the view's (see
    :meth:`VeridicCapability.prepare_model_request`).

    Raises:
        ToolCouplingError: a function tool is not one of the view's, one of the view's is
            missing or not as the view defines it, or the request holds a native tool.
    """
    problems = _tool_problems(parameters.function_tools, view)
    problems += [
        f"native tool {clip(tool.kind)} ({type(tool).__name__}), run by the provider"
        for tool in parameters.native_tools
    ]
    if problems:
        raise ToolCouplingError(
            f"the request {clip(request_id)} would offer the model other tools than the "
            f"view's ({'; '.join(problems)}), while the capability section, the approvals "
            "and the audit know only the view's: give the agent no tools or toolsets beside "
            "the veridic capability, and do not filter or reword its tools (prepare_tools, "
            "FilteredToolset, PrefixedToolset, a model wrapper); register any other tool in "
            "the veridic registry and filter with the view, registry.view(deny=...)"
        )


_UNKNOWN_LABEL: Final = "tool_result"
"""The label of veridic's answer to a name no tool has (the model wrote the name: it is
quoted inside the block, not put in its label)."""


def answered_sha256(messages: Sequence[ModelMessage], tool_call_id: str | None) -> str:
    """The ``prompt_sha256`` of a call: what the model had read when it made the call.

    The SHA-256 of pydantic-ai's JSON (``ModelMessagesTypeAdapter``) of the
    messages before the response that holds the call (all of them when no
    response does), so every call of one response shares it, and a call
    resumed in a later run, from the same history, names the same messages.
    """
    end = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelResponse) and any(
            call.tool_call_id == tool_call_id for call in message.tool_calls
        ):
            end = index
            break
    return hashlib.sha256(ModelMessagesTypeAdapter.dump_json(list(messages[:end]))).hexdigest()


def _of_run(messages: Sequence[ModelMessage], run_id: str | None) -> list[ModelRequest]:
    """The requests of the run ``run_id``: those after the last message of another run.

    An earlier run's messages (the history) come first, each with its run id. After them,
    a message without one is this run's: a history processor that builds messages anew
    leaves the run id on the last only (pydantic-ai stamps it there), so the first message
    that has this run's id is no boundary, and a rewritten result before it would pass.
    """
    others = (i for i, message in enumerate(messages) if message.run_id not in (run_id, None))
    start = max(others, default=-1) + 1
    return [message for message in messages[start:] if isinstance(message, ModelRequest)]


def _rewritten(part: ToolReturnPart, request_id: str) -> ToolCouplingError:
    """The error for a tool result of the run that is not what the toolset answered."""
    return ToolCouplingError(
        f"the result of call {clip(part.tool_call_id)} of tool {clip(part.tool_name)} "
        f"(request {clip(request_id)}) is not what the veridic toolset answered (the model would "
        f"read {clip(str(part.content))} in its place, outside the data block the toolset "
        "wrote): a capability or a history processor rewrote it after the tool ran, so the "
        "model was not asked; let the veridic capability's results through unchanged (no "
        "after_tool_execute or on_tool_execute_error hook that returns other text), and "
        "shape a tool's output in its handler, which the registry describes (a message "
        "without a run id after the last of an earlier run is read as this run's: bring a "
        "history back with the run ids pydantic-ai stamped on its messages)"
    )


def _check_no_user_part_beside(message: ModelRequest, prompt: object, request_id: str) -> None:
    """Refuse a user part in a request that holds the toolset's results, but the run's prompt.

    Raises:
        ToolCouplingError: the request holds a user part that is not the run's own prompt.
    """
    for part in message.parts:
        if isinstance(part, UserPromptPart) and part.content != prompt:
            raise ToolCouplingError(
                f"a request of request {clip(request_id)} holds a user part beside the veridic "
                f"toolset's results ({clip(str(part.content))}), which the model would read as "
                "the user's own words, unfenced: a capability's after_tool_execute hook (or a "
                "history processor) added it, e.g. with ToolReturn(content=...), so the model "
                "was not asked; let the veridic capability's results through unchanged, and "
                "shape a tool's output in its handler"
            )


def _added_after(
    messages: Sequence[ModelMessage], response: ModelResponse, run_id: str | None
) -> list[object]:
    """The requests of this run after ``response`` in the history (none when it is not there)."""
    for index, message in enumerate(messages):
        if message is response:
            return [
                later
                for later in messages[index + 1 :]
                if isinstance(later, ModelRequest) and later.run_id == run_id
            ]
    return []


def _check_system_parts(
    messages: Sequence[ModelMessage], known: set[str], blocks: set[str], where: str
) -> None:
    """Refuse a system part or an instruction change of the history that is not trusted text.

    The model reads both as instructions: a ``SystemPromptPart`` as it is, and an
    ``InstructionDeltaPart`` (pydantic-ai's record that an instruction block changed) as a
    system part, ``<pyai:context id="...">`` with the block's id and its new text (or the
    words that withdraw the block), diffed against the text an ``InstructionBaselinePart``
    recorded. A history read back from storage is outside text, and JSON keeps no
    provenance: a change is accepted only when it names a block of this request
    (``blocks``, so the id is the application's) and its text is trusted text of this run
    (``known``: the capability's own instructions and the agent's trusted static ones, as
    pydantic-ai strips them) or a minted value. A withdrawal is refused: it would tell the
    model that a block of the checked instructions no longer holds.
    """
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart) and not is_trusted(part.content):
                report(
                    part.content,
                    f"a system part of message {index} of {where} (pydantic-ai "
                    "sends it as instructions; a history read back from storage is outside "
                    "text: give the agent its instructions with capability(..., "
                    "instructions=...), not system_prompt=, and drop system parts from a "
                    "stored history)",
                )
            shown = _unchecked_change(part, known, blocks)
            if shown is not None:
                report(
                    shown,
                    f"an instruction change ({type(part).__name__}) of message {index} of "
                    f"{where} (pydantic-ai sends it as a system part that "
                    "replaces or withdraws a block of the agent's instructions; a history read "
                    "back from storage is outside text: load it through "
                    "pydantic_ai.messages.sanitize_messages(), which drops instruction changes "
                    "and system parts, and give the agent its instructions with "
                    "capability(..., instructions=...))",
                )


def _unchecked_change(part: object, known: set[str], blocks: set[str]) -> str | None:
    """The text the model would read for an instruction change of the history that is not
    this run's trusted text (``None`` for any other part, and for a change that is)."""

    def trusted(text: str) -> bool:
        return text.strip() in known or is_trusted(text)

    if isinstance(part, InstructionDeltaPart):
        if part.id is None:
            return None  # a change pydantic-ai cannot address: it is not sent
        if part.content is None or str(part.id) not in blocks or not trusted(part.content):
            return part.render()
    if isinstance(part, InstructionBaselinePart):
        for block in part.instructions:
            if isinstance(block, InstructionPart) and not trusted(block.content):
                return block.content
    return None


_OWNED_SETTINGS: Final = frozenset(
    {"openai_conversation_id", "openai_native_tools", "openai_previous_response_id"}
)
"""pydantic-ai's own model settings that add history (a conversation or a response the
provider stored) or tools (the provider's own) to the request."""


def _check_settings(settings: Mapping[str, object] | None, request_id: str) -> None:
    """Refuse model settings that would send other instructions, tools or history.

    The model settings of a request (the model's, the agent's, a capability's, the run's,
    merged) reach the provider's SDK, and ``extra_body`` is merged over the request body
    pydantic-ai built: ``{"messages": [...]}`` replaced the whole conversation, the checked
    instructions with it, and ``{"tools": []}`` the view's tool list.

    Raises:
        VeridicError: a key of the settings (or of their ``extra_body``) sets what veridic
            owns.
    """
    given = settings or {}
    clash = [f"model_settings[{key!r}]" for key in sorted(_OWNED_SETTINGS & set(given))] + [
        f"model_settings['extra_body'][{key!r}]"
        for key in sorted(owned_keys(given.get("extra_body")))
    ]
    if clash:
        raise VeridicError(
            f"a model request of request {clip(request_id)} sets {', '.join(clash)}, which the "
            "provider sends in place of (or beside) the capability's instructions, the view's "
            "tools and the run's messages; it was not sent: leave these keys out of the "
            "model, agent, capability and run model_settings; the instructions come from "
            "capability(..., instructions=...), the tools from the view, the history from "
            "message_history"
        )


def _check_output_template(template: object, model: Model, request_id: str) -> None:
    """Refuse a prompted output's template that is not trusted text.

    pydantic-ai's model class writes the template (with the output type's JSON schema
    for ``{schema}``) into the instructions it sends, after the instruction parts were
    checked. pydantic-ai keeps the value given, so an ``instruction()`` template stays
    trusted; the model profile's own template (``None`` given) is pydantic-ai's text.
    """
    if not isinstance(template, str) or is_trusted(template):
        return
    own = model.profile.get("prompted_output_template", DEFAULT_PROMPTED_OUTPUT_TEMPLATE)
    if template in (own, DEFAULT_PROMPTED_OUTPUT_TEMPLATE):
        return
    report(
        template,
        f"the prompted output template of request {clip(request_id)} (PromptedOutput(template=...) "
        "is written into the instructions the model reads beside the capability section: "
        "give it as instruction(...) text written in code, or leave it out for pydantic-ai's "
        "own)",
    )


_DEFAULT_OUTPUT_DESCRIPTION: Final = "The final response which ends this conversation"
"""pydantic-ai's own description of an output tool whose type has none (its text)."""


def _check_output_descriptions(
    parameters: ModelRequestParameters, agent: object, where_checked: str
) -> None:
    """Refuse an output's description that is not code text: the model reads it as instructions.

    An output tool's description sits in the tool list beside the view's tools, and the
    object of a ``NativeOutput`` or ``PromptedOutput`` is described in the response format
    or in the instructions. pydantic-ai takes it from the output type's docstring (code,
    as a tool's docstring is), from ``ToolOutput``/``NativeOutput``/``PromptedOutput(
    description=...)`` or a ``StructuredDict(description=...)`` (any string, made at run
    time), or says its own words. The rule is the registry's: a docstring is code text; a
    description given as a value must be trusted text (``instruction(...)``), since a
    plain ``str`` here may be formatted from anything and mypy cannot tell.

    pydantic-ai keeps a given description as it was (the minted value), unless the type
    has a docstring too: then it sends ``"<given>. <docstring>"``, a plain ``str``, which
    is recognised when the given part is the trusted description of an output the agent
    declares (``Agent(output_type=...)``; a run's ``output_type=`` is not shown to
    capabilities). A run's output type is found by its name (:func:`_named_docstrings`).

    Raises:
        ProvenanceError: a description is none of these (in report mode: logged).
    """
    # (where, the tool's name, the object's name, its description, its schema)
    described: list[tuple[str, str, str | None, str | None, Mapping[str, object]]] = [
        (
            f"output tool {clip(tool.name)}",
            tool.name,
            None,
            tool.description,
            tool.parameters_json_schema,
        )
        for tool in parameters.output_tools
    ]
    if parameters.output_object is not None:
        found = parameters.output_object
        where = f"output object {clip(str(found.name))}"
        described.append((where, "", found.name, found.description, found.json_schema))
    if all(is_trusted(text) or not text for *_, text, _ in described):
        return
    types, given = _declared_outputs(getattr(agent, "output_type", None))
    declared = _docstrings(types)
    for where, tool, name, text, schema in described:
        if not text or is_trusted(text) or text in given or _is_default(text, tool, schema):
            continue
        if _is_docstring(text, declared, given):
            continue
        names = {found for found in (schema.get("title"), name) if isinstance(found, str)}
        if _is_docstring(text, _named_docstrings(names), given):
            continue
        report(
            text,
            f"the output description of the {where} of {where_checked} (pydantic-ai "
            "sends it as instructions beside the capability section; a description given as "
            "a value, ToolOutput/NativeOutput/PromptedOutput(description=...) or "
            "StructuredDict(description=...), must be code text: give it as "
            "instruction(...), or write it as the output type's docstring; instruction() "
            "text given with a type that has a docstring is sent joined to it, a plain str: "
            "declare that output on the Agent, output_type=..., where veridic reads it)",
        )


def _output_texts(parameters: ModelRequestParameters) -> set[str]:
    """The output descriptions of a request (its output tools', its output object's)."""
    texts = [tool.description for tool in parameters.output_tools]
    if parameters.output_object is not None:
        texts.append(parameters.output_object.description)
    return {text for text in texts if text}


def _is_default(text: str, tool: str, schema: Mapping[str, object]) -> bool:
    """Whether ``text`` is pydantic-ai's own description of an output without a docstring.

    Alone it is the default text; one of several outputs is ``"<its name>: <default>"``,
    where the name is the schema's title or the one the tool is named after
    (``final_result_<name>``): any other text before the default is no name pydantic-ai
    gave, but a description given as a value that only looks like one.
    """
    if text == _DEFAULT_OUTPUT_DESCRIPTION:
        return True
    head, separator, tail = text.partition(": ")
    if not separator or tail != _DEFAULT_OUTPUT_DESCRIPTION:
        return False
    named = _TOOL_NAME_UNSAFE.sub("", head)
    return head == schema.get("title") or (bool(named) and tool.endswith(f"_{named}"))


_TOOL_NAME_UNSAFE: Final = re.compile(r"[^a-zA-Z0-9_-]")
"""What pydantic-ai strips from an output's name to name its tool ``final_result_<name>``."""


def _is_docstring(text: str, docs: set[str], given: set[str]) -> bool:
    """Whether ``text`` is one of ``docs``, a trusted description joined to one, or the head
    of one (an output function's summary)."""
    if text in docs or any(f"{part}. {doc}" == text for part in given for doc in docs):
        return True
    return any(doc.startswith(text.strip()) for doc in docs)


def _declared_outputs(spec: object) -> tuple[list[object], set[str]]:
    """The types and functions of an agent's output spec, and the trusted descriptions given
    with them."""
    types: list[object] = []
    given: set[str] = set()
    pending: list[object] = [spec]
    while pending and len(types) + len(pending) < 1000:
        item = pending.pop()
        description = getattr(item, "description", None)
        if isinstance(item, (ToolOutput, NativeOutput, PromptedOutput)):
            if isinstance(description, str) and is_trusted(description):
                given.add(str.__str__(description))
            inner = item.output if isinstance(item, ToolOutput) else item.outputs
            pending.append(inner)
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
        elif isinstance(item, type) or callable(item):
            types.append(item)
        else:
            pending.extend(typing.get_args(item))
    return types, given


def _docstrings(sources: Sequence[object]) -> set[str]:
    """The docstrings of ``sources``, as written and cleaned as pydantic cleans them for a
    schema; none of one branded untrusted (:func:`._output_docs.docstrings`)."""
    return {text for source in sources for text in docstrings(source)}


def _named_docstrings(names: set[str]) -> set[str]:
    """The docstrings of the classes defined in code that pydantic-ai may have named ``names``.

    A run's ``output_type=`` is not shown to capabilities: its type is found by the name
    pydantic-ai shows (the schema's title, or the name given to a ``NativeOutput``), among
    the pydantic models (by class name or configured title, defined anywhere) and the
    classes defined at the top of a module (a dataclass, a ``TypedDict``). A docstring is
    code wherever it was found; looked up only for a description none of the agent's
    declared outputs explains.
    """
    if not names:
        return set()
    found: list[object] = []
    pending: list[type] = [BaseModel]
    seen: set[type] = set()
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        pending.extend(model.__subclasses__())
        config = getattr(model, "model_config", None)
        title = config.get("title") if isinstance(config, dict) else None
        if model.__name__ in names or title in names:
            found.append(model)
    for module in list(sys.modules.values()):
        if not isinstance(module, ModuleType):
            continue  # a stand-in some library put there: its attributes may run code
        for name in names:
            value = module.__dict__.get(name)
            if isinstance(value, type):
                found.append(value)
    return _docstrings(found)


def _trusted_static(agent: object) -> set[str]:
    """The agent's static ``instructions=`` that are trusted text, as pydantic-ai sends them.

    pydantic-ai keeps each static instruction as it was given (the minted value) and
    sends a stripped copy, a plain ``str``; the copy is recognised by its text. The
    list is pydantic-ai's own attribute: when a version moves it, nothing is
    recognised and such instructions are refused, never let through.
    """
    sourced = getattr(agent, "_instructions", None)
    if not isinstance(sourced, list):
        return set()
    texts = (getattr(item, "instruction", None) for item in sourced)
    return {text.strip() for text in texts if isinstance(text, str) and is_trusted(text)}


def _check_instruction_parts(parts: Sequence[InstructionPart], known: set[str], where: str) -> None:
    """Refuse an instruction part that is neither trusted text nor known trusted text.

    pydantic-ai strips every part it is given, and a stripped string is a plain ``str``:
    the capability's own part and the agent's static ``instructions=`` of
    ``instruction()`` text are recognised by their text (``known``: the stripped
    trusted values they were made from); any other part must still be a minted value,
    as the result of an ``@agent.instructions`` function returning a
    :class:`~veridic.TrustedInstruction` is. A run's ``instructions=`` string arrives
    copied with nothing kept to recognise it, and is refused with outside text.
    """
    for index, part in enumerate(parts):
        if part.content in known or is_trusted(part.content):
            continue
        report(
            part.content,
            f"instruction part {index} of {where} (pydantic-ai sends the "
            "agent's and the run's instructions=, and what @agent.instructions functions "
            "return, as instructions beside the capability section; a run's instructions= "
            "string reaches veridic copied, as a plain str, even when it was instruction() "
            "text: give the application's instructions as capability(..., "
            "instructions=[...]) or Agent(instructions=instruction(...)), or return a "
            "TrustedInstruction from the @agent.instructions function, and put outside text "
            "in the user prompt or a tool result)",
        )


def _check_labelled(
    parts: Sequence[InstructionPart],
    messages: Sequence[ModelMessage],
    view: ToolView,
    request_id: str,
) -> None:
    """Refuse a request whose instructions lost the capability section, as the gateway does.

    The capability writes the section into its own instructions, but a capability before
    it may rewrite ``instruction_parts`` (a compaction, a template): the request would then
    carry an external tool's unpinned text in its tool list with no trusted line telling
    the model it is data (:func:`~veridic.run._unlabelled.refuse_unlabelled_outside_text`).
    """
    section = view.capability_section().strip()
    told = [part.content for part in parts]
    told += [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, SystemPromptPart)
    ]
    if not any(section in text for text in told):
        refuse_unlabelled_outside_text(f"request {clip(request_id)}", view)


def _tool_problems(given: Sequence[ToolDefinition], view: ToolView) -> list[str]:
    """How the function tools of a request differ from the view's specs (none: they agree)."""
    specs = {spec["name"]: spec for spec in view.tool_specs("mcp")}
    names = [tool.name for tool in given]
    problems = [f"not the view's: {clip(name)}" for name in names if name not in specs]
    missing = [name for name in specs if name not in names]
    if missing:
        problems.append(f"missing: {', '.join(map(repr, missing))}")
    for tool in given:
        spec = specs.get(tool.name)
        if spec is None:
            continue
        if (tool.description, tool.parameters_json_schema) != (
            spec["description"],
            spec["inputSchema"],
        ):
            problems.append(f"{tool.name!r} described otherwise than the view describes it")
        elif tool.kind != "function" or tool.strict:
            problems.append(
                f"{tool.name!r} made kind={tool.kind!r}, strict={tool.strict!r} (the view's "
                "toolset makes a plain function tool, strict=False)"
            )
    return problems


def _check_approved_as_shown(
    name: str,
    arguments: Mapping[str, object],
    messages: Sequence[ModelMessage],
    tool_call_id: str | None,
) -> None:
    """Refuse an approved call whose arguments are not the ones the model wrote.

    pydantic-ai lets an approval replace them (``ToolApproved(override_args=...)``):
    the call would run with arguments nobody was shown, recorded ``USER_CONFIRMED``,
    while the history keeps showing the model's. veridic cannot tell who wrote the
    others (a client posting approvals writes them too), so it runs only what was shown.

    Raises:
        ApprovalDeniedError: the arguments differ, or the call is not in the history.
    """
    written: object = None
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            for part in message.tool_calls:
                if part.tool_call_id == tool_call_id and part.tool_name == name:
                    written = _written_arguments(part)
                    break
        if written is not None:
            break
    if _canonical(written) == _canonical(dict(arguments)):
        return
    if isinstance(written, dict):
        keys = sorted(
            clip(str(key))
            for key in set(arguments) | set(written)
            if _canonical(arguments.get(key)) != _canonical(written.get(key))
        )
        differ = f"differing: {', '.join(keys)}"
    else:
        differ = "the history holds no such call of it"
    raise ApprovalDeniedError(
        f"the approval of call {clip(str(tool_call_id))} of tool {clip(name)} came with other "
        f"arguments than the model wrote and the approval dialog showed (override_args; "
        f"{differ}), so it did not run and was not recorded; an approval holds only for the "
        "call shown: answer True or "
        "ToolApproved() without override_args, or deny it (False, ToolDenied) and let the "
        "model call the tool again with the arguments the user wants"
    )


def _check_not_on_record(
    name: str,
    tool_call_id: str | None,
    prompt_sha256: str,
    records: Sequence[AuditRecord],
    answered: str,
) -> None:
    """Refuse an answered call the audit store holds a record of: its answer was used already.

    A deferred call is never recorded before its answer comes (the toolset
    raises ``ApprovalRequired`` first), so a record of it, under the messages
    the model had read when it made the call (a call id a model repeats in a
    later turn comes after other messages, so its prompt hash differs), was
    written by an earlier run that resumed it: the same ``message_history``
    and ``deferred_tool_results`` sent again. Whatever became of the call then
    (it ran, failed, was refused, or the user said no), going on now would
    run it twice, turn a "no" into a "yes", or ask the model again after it
    (``answered`` is ``"approved"`` or ``"denied"``, for the message).

    Raises:
        ApprovalDeniedError: a record of the call is in ``records``.
    """
    done = of_call(records, tool_call_id, prompt_sha256=prompt_sha256)
    if not done or tool_call_id is None:
        return
    first = done[0]
    raise ApprovalDeniedError(
        f"the {answered} call {clip(tool_call_id)} of tool {clip(name)} is on record already "
        f"(tool {clip(first.tool)}, approval {first.approval.value}, outcome "
        f"{first.outcome.value}): an earlier run resumed it from the same message history "
        "(a second click, a queue that delivered twice, an answer sent again), so this run "
        "stopped before running it or asking the model again, and recorded nothing; an "
        "answer is good for one run. The store's "
        "records of the request (records(request_id)) say what ran: resume the history of "
        "the run that answered it (its all_messages()), and let the model call the tool "
        "again if the user wants it done anew"
    )


def _written_arguments(part: ToolCallPart) -> object:
    """The arguments of a call as the model wrote them, or ``None`` if they are not an object."""
    try:
        return part.args_as_dict()
    except ValueError:
        return None


def _canonical(value: object) -> str:
    """One spelling of a JSON value, so that ``1`` and ``True`` or key order never compare equal
    or unequal by accident."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def _arguments(raw: object) -> Mapping[str, object] | str:
    """The call's arguments as the executor takes them: a mapping, or JSON text to decode."""
    if isinstance(raw, Mapping):
        return raw
    if raw is None:
        return {}
    if isinstance(raw, str):
        return raw
    # Any other JSON value (a list, a number): the executor refuses it, as JSON text.
    return json.dumps(raw, ensure_ascii=False, default=str)


def _dialog(request: ApprovalRequest, request_id: str) -> dict[str, Any]:
    """What a confirmation dialog shows, as ``DeferredToolRequests.metadata[call_id]``."""
    return {
        "tool": request.tool,
        "kind": request.kind,
        "risk": request.risk.value,
        "irreversible": request.irreversible,
        "writes_instruction_fields": request.writes_instruction_fields,
        "why": request.why,
        "request_id": request_id,
    }


def _answer(result: CallResult, told: str) -> str:
    """What the model gets: ``told``, the call's result as the gateway tells it in a data
    block, as the tool's value, or as the retry or failure pydantic-ai tells of."""
    error = result.error
    if isinstance(error, InvalidArgumentsError):
        # Fenced too: veridic's words quote the model's argument values and the schema's
        # text (an external tool's enum or pattern), outside text both.
        raise ModelRetry(told) from error
    if error is not None:
        raise ToolFailed(told) from error
    return told


def _yes(request: ApprovalRequest) -> bool:
    return True


def _no(request: ApprovalRequest) -> bool:
    return False
