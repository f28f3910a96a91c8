"""``ModelGateway``: the one road from a prompt and a view to a model, and back.

Every model call of an application goes through one gateway, so every call
is made the same way (see "The road data takes" in docs/design.md):

1. the prompt is refused if it still has tool calls waiting for results
   (:attr:`Prompt.pending_tool_calls`: providers reject such a prompt), and
   its system message is checked again, at run time, for text that is not
   trusted (invariant I1, a third time after mypy and the composer);
2. it is rendered for the provider by an adapter
   (:class:`~veridic.OpenAIChat`, :class:`~veridic.OpenAIResponses`,
   :class:`~veridic.AnthropicMessages`), with exactly the tool specs of the
   view it was given, and the tool list actually placed in the request is
   checked against the view's dispatch table
   (:meth:`ToolView.assert_coupled`, invariant I4);
3. a :class:`ModelCallRecord` is written before the request leaves: the
   prompt's sha256, the tool list's sha256, the tool names, and the
   provenance spans of the instruction position (the system message); the
   digest of the request's other options (a structured-output schema, which
   the model reads too) is the reply's ``options_sha256``;
4. the answer comes back as a :class:`Reply`; its tool calls run through
   :meth:`ModelGateway.run_tools`, which is :func:`veridic.execute` for each
   call against the same view: an unknown, unavailable or denied name is
   refused with the reason that tells them apart, approval is asked, the
   handler runs under guard, and an :class:`~veridic.AuditRecord` carrying
   the same two hashes is written whatever happens.

The async methods (:meth:`~ModelGateway.asend`, ``astream``, ``arun``,
``arun_tools``, ``aresume``) await the stores' coroutine writes where they
have them (``awrite_model_call``, ``awrite_model_reply``, and ``awrite``
through :func:`veridic.aexecute`), so the event loop never waits on a store;
a store with only coroutine writes (:class:`~veridic.AsyncPostgresAuditSink`)
serves them alone, and the blocking methods refuse it before anything is
sent or run.

The tool list's hash is :func:`veridic.run.executor.tools_sha256` of the view
(its canonical MCP projection), the same digest the executor records, so a
model call and the tool calls it led to share it whatever the provider.

Parts of the road have modules of their own, whose names import from here
too: :mod:`veridic.run.call_log` (where model calls are recorded),
:mod:`veridic.run.reply` (what a model call gives back) and
:mod:`veridic.run.run_loop` (what a run counts, where it stops, how it ended).

>>> from veridic import ApprovalPolicy, Composer, ModelGateway, Registry, SQLiteAuditSink
>>> from veridic import instruction
>>> from veridic.providers import ScriptedProvider
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
>>> gateway = ModelGateway(
...     ScriptedProvider([{"tool_calls": [("call-1", "get_weather", '{"city": "Oslo"}')]}]),
...     audit=SQLiteAuditSink(":memory:"),  # records model calls and tool calls
... )
>>> prompt = Composer().system(instruction("You report the weather.")).user("Oslo?").build()
>>> reply = gateway.send(prompt, view, request_id="req-1")
>>> [(call.name, call.arguments) for call in reply.tool_calls]
[('get_weather', '{"city": "Oslo"}')]
>>> [outcome.text for outcome in gateway.run_tools(reply, policy=ApprovalPolicy(view))]
['Sunny in Oslo']
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, overload

from veridic._words import a_type
from veridic.errors import ApprovalExpiredError, AuditWriteError, VeridicError
from veridic.providers._base import Adapter
from veridic.providers._raw import araw_events, not_a_stream, raw_events
from veridic.run import telemetry as _telemetry
from veridic.run._audit_writes import (
    amodel_calls_kept,
    arecorded,
    model_calls_kept,
    recorded,
    writes,
)
from veridic.run._run_checks import (
    all_queries,
    also_raised,
    check_context,
    check_defer,
    check_none_async,
    check_output_type,
    check_policy,
    first_waiting,
)
from veridic.run._sending import (
    AsyncIterable,
    Iterable,
    Sent,
    anothing,
    awaited,
    check_request,
    check_system_part,
    checked,
    nothing,
)
from veridic.run.approval import ApprovalPolicy, Confirm
from veridic.run.audit import (
    AsyncAuditSink,
    AuditRecord,
    AuditSink,
    ModelCallRecord,
    ModelReplyRecord,
)
from veridic.run.call_log import (
    AsyncModelCallSink,
    AsyncModelReplySink,
    ModelCallLog,
    ModelCallSink,
    ModelReplySink,
    _CallRecords,
)
from veridic.run.deferred import (
    PausedRun,
    ResumeSteps,
    check_not_resumed,
    check_store_saw,
    clock_moment,
)
from veridic.run.executor import (
    AsyncConfirm,
    CallResult,
    _check_request_id_length,
    _interrupted_result,
    aexecute,
    execute,
)
from veridic.run.reply import AsyncReplyStream, Reply, ReplyStream, ToolOutcome, _check_whole
from veridic.run.run_loop import Limits, OutputT, RunResult, _resumed, _Run
from veridic.text.compose import Composer
from veridic.text.prompt import Prompt, ToolCall
from veridic.tools.view import ToolView

__all__ = [
    "AsyncModelCallSink",
    "AsyncModelReplySink",
    "AsyncReplyStream",
    "Limits",
    "ModelCallLog",
    "ModelCallRecord",
    "ModelCallSink",
    "ModelGateway",
    "ModelReplyRecord",
    "ModelReplySink",
    "Reply",
    "ReplyStream",
    "RunResult",
    "ToolOutcome",
]


class ModelGateway:
    """Sends prompts to one provider API with one view's tools, and records every call.

    ``provider`` is an adapter (:class:`~veridic.OpenAIChat`,
    :class:`~veridic.OpenAIResponses`, :class:`~veridic.AnthropicMessages`)
    holding the SDK client and the model. ``audit`` receives the tool calls'
    records (:func:`veridic.execute`); ``calls`` receives the model-call
    records, and defaults to ``audit`` when that store records model calls
    too (it has ``write_model_call`` or ``awrite_model_call``). A ``calls``
    sink that also has ``write_model_reply`` (:class:`ModelReplySink`) or
    ``awrite_model_reply`` gets a :class:`ModelReplyRecord` of each answer:
    its usage, latency, stop reason and the tools it called.

    Use :meth:`send` and :meth:`stream` with a sync client, :meth:`asend` and
    :meth:`astream` with an async one. One gateway serves any number of
    requests and threads: each call takes its own prompt, view and request id.
    The async methods await the stores' coroutine writes where they have
    them; stores with only those (:class:`~veridic.AsyncPostgresAuditSink`)
    serve the async methods alone, and the blocking ones refuse them.

    Raises:
        VeridicError: ``provider`` is not an adapter, ``audit`` has neither
            ``write`` nor ``awrite``, or there is nowhere to record model calls.
    """

    __slots__ = ("_audit", "_calls", "_clock", "_provider")

    def __init__(
        self,
        provider: Adapter,
        *,
        audit: AuditSink | AsyncAuditSink,
        calls: ModelCallSink | AsyncModelCallSink | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(provider, Adapter):
            raise VeridicError(
                f"ModelGateway() got {a_type(provider)} as provider: pass an adapter, "
                "OpenAIChat(client, model=...), OpenAIResponses(...) or AnthropicMessages(...)"
            )
        writes(audit, "ModelGateway", sync=False)
        records = _CallRecords.of(audit if calls is None else calls)
        if records is None:
            which = "no calls= sink was given" if calls is None else f"nor has calls={calls!r}"
            raise VeridicError(
                f"ModelGateway() has nowhere to record model calls: {audit!r} has neither "
                f"write_model_call() nor an async awrite_model_call(), and {which}; pass calls= "
                "a sink with write_model_call(record) (veridic.gateway.ModelCallLog keeps them "
                "in memory)"
            )
        self._provider = provider
        self._audit = audit
        self._calls = records
        self._clock = clock

    def __repr__(self) -> str:
        return f"ModelGateway({self._provider!r})"

    @property
    def provider(self) -> Adapter:
        """The adapter this gateway sends through."""
        return self._provider

    # --- sending ----------------------------------------------------------------------

    def send(
        self,
        prompt: Prompt,
        view: ToolView,
        *,
        request_id: str,
        options: Mapping[str, object] | None = None,
    ) -> Reply:
        """Send ``prompt`` with the tools of ``view`` and return the model's answer.

        ``options`` are extra request parameters for this call (they add to
        the adapter's own).

        Raises:
            VeridicError: the prompt has unanswered tool calls, the client is
                async (use :meth:`asend`), the ``calls`` store is async-only
                (use :meth:`asend`), an option sets what the gateway sets, or
                the response cannot be read.
            ProvenanceError: the system message holds text that is not trusted.
            ToolCouplingError: the tool list in the request is not the view's,
                the system message holds the capability section of another view,
                or it holds no section while the view has an external tool whose
                text no pin covers (only the section tells the model it is data).
            UnknownToolError, ToolUnavailableError, ToolDeniedError: a
                ``tool_choice`` option names a tool the view does not expose.
            Exception: whatever the SDK raises (network, status, timeout);
                the model-call record is written before the request is sent.
        """
        with _telemetry.chat(self._provider, request_id, streamed=False) as span:
            sent = self._prepare(prompt, view, request_id, options, streamed=False, where="send")
            _traced(span, sent)
            response = self._provider.sender()(**sent.request)
            return span.answered(sent.reply(self._provider.parse(response)))

    async def asend(
        self,
        prompt: Prompt,
        view: ToolView,
        *,
        request_id: str,
        options: Mapping[str, object] | None = None,
    ) -> Reply:
        """:meth:`send` with an async client; the records are awaited where the store can."""
        with _telemetry.chat(self._provider, request_id, streamed=False) as span:
            sent = await self._aprepare(prompt, view, request_id, options, streamed=False)
            _traced(span, sent)
            response = await awaited(self._provider.sender()(**sent.request))
            return span.answered(await sent.areply(self._provider.parse(response)))

    def stream(
        self,
        prompt: Prompt,
        view: ToolView,
        *,
        request_id: str,
        options: Mapping[str, object] | None = None,
    ) -> ReplyStream:
        """Send ``prompt`` as :meth:`send` does, and stream the answer.

        The request is sent (and recorded) now; iterate the result for the
        text as it arrives, then read its ``reply``.

        Raises:
            As :meth:`send`; an incomplete stream raises ``VeridicError``
            when it ends.
        """
        with _telemetry.chat(self._provider, request_id, streamed=True) as span:
            sent = self._prepare(prompt, view, request_id, options, streamed=True, where="stream")
            _traced(span, sent)
            events = self._provider.method()(**sent.request, stream=True)
            if not isinstance(events, Iterable):
                raise not_a_stream(events, repr(self._provider), kind="a stream")
            events = raw_events(events, repr(self._provider))
            close = getattr(events, "close", None)
            span.handed()  # the stream ends the span
            return ReplyStream(
                iter(events),
                close if callable(close) else nothing,
                self._provider.assembler(),
                sent.reply,
                span=span,
            )

    async def astream(
        self,
        prompt: Prompt,
        view: ToolView,
        *,
        request_id: str,
        options: Mapping[str, object] | None = None,
    ) -> AsyncReplyStream:
        """:meth:`stream` with an async client: ``async for`` the text, then ``.reply``."""
        with _telemetry.chat(self._provider, request_id, streamed=True) as span:
            sent = await self._aprepare(prompt, view, request_id, options, streamed=True)
            _traced(span, sent)
            events = await awaited(self._provider.method()(**sent.request, stream=True))
            if not isinstance(events, AsyncIterable):
                raise not_a_stream(events, repr(self._provider), kind="an async stream")
            events = await araw_events(events, repr(self._provider))
            close = getattr(events, "close", None)
            span.handed()  # the stream ends the span
            return AsyncReplyStream(
                aiter(events),
                close if callable(close) else anothing,
                self._provider.assembler(),
                sent.areply,
                span=span,
            )

    # --- tool calls ----------------------------------------------------------------------

    def run_tools(
        self,
        reply: Reply,
        *,
        policy: ApprovalPolicy,
        confirm: Confirm | None = None,
        context: object = None,
    ) -> tuple[ToolOutcome, ...]:
        """Run each tool call of ``reply`` through :func:`veridic.execute`, in order.

        Each call is checked against the view the reply was asked with; an
        unknown, unavailable or denied name, invalid arguments, a denial or
        a guard's refusal is in its outcome's ``result.error`` (and its text
        for the model), never raised. Every call gets an audit record with
        the reply's prompt and tools hashes.

        Raises:
            VeridicError: ``policy`` was built for another view, or a tool the
                reply calls is async (use :meth:`arun_tools`; none of the calls
                runs); or the answer's stop reason does not say the model ended
                it: the provider cut it off (the output limit, the context window
                or a filter ended it: its calls' arguments may be cut short), or
                the reason is one veridic does not know, or empty (docs/providers.md
                lists those it knows); raised before any call runs.
            AuditWriteError: a call ran but its record could not be written;
                besides that call's result, ``.earlier`` holds the outcomes
                of the calls that ran before it (the calls after it did not run).
            AuditRecordError, sqlite3.Error: the record of a call that did not
                run could not be written.
            VeridicError: ``audit`` or ``calls`` is an async-only store (use
                :meth:`arun_tools`); raised before any call runs.
        """
        self._check_blocking("run_tools")
        return self._run_calls(
            "run_tools()", reply, reply.tool_calls, lambda call: (policy, confirm), context
        )

    def _run_calls(
        self,
        where: str,
        reply: Reply,
        calls: Sequence[ToolCall],
        approving: Callable[[ToolCall], tuple[ApprovalPolicy, Confirm | None]],
        context: object,
        done: list[ToolOutcome] | None = None,
    ) -> tuple[ToolOutcome, ...]:
        """``calls`` of ``reply`` in order, each with the policy and confirm ``approving`` gives.

        ``done`` receives each call's outcome as it ends, so that a caller that sees an
        exception knows which calls ran (one whose record could not be written included).
        Every path that runs a reply's calls comes here (or to ``_arun_calls``,
        ``_concurrent_tools``), so none runs the calls of an answer whose stop reason
        does not say the model ended it (``_check_whole``, named by ``where``).
        """
        _check_whole(reply, where)
        check_none_async(reply.view, calls, where.removesuffix("()"))
        outcomes: list[ToolOutcome] = [] if done is None else done
        for call in calls:
            policy, confirm = approving(call)
            try:
                result = execute(
                    reply.view,
                    call.name,
                    call.arguments,
                    policy=policy,
                    audit=self._audit,
                    request_id=reply.request_id,
                    prompt_sha256=reply.prompt_sha256,
                    confirm=confirm,
                    tools_digest=reply.tools_sha256,
                    context=context,
                    call_id=call.id,
                )
            except BaseException as error:
                if isinstance(error, AuditWriteError):
                    error.earlier = tuple(outcomes)
                outcomes.extend(_ran(call, error))
                raise
            outcomes.append(ToolOutcome(call, result))
        return tuple(outcomes)

    async def arun_tools(
        self,
        reply: Reply,
        *,
        policy: ApprovalPolicy,
        confirm: AsyncConfirm | None = None,
        context: object = None,
    ) -> tuple[ToolOutcome, ...]:
        """:meth:`run_tools` for async code (async handlers, an async ``confirm``), in order."""
        return await self._arun_calls(
            "arun_tools()", reply, reply.tool_calls, lambda call: (policy, confirm), context
        )

    async def _arun_calls(
        self,
        where: str,
        reply: Reply,
        calls: Sequence[ToolCall],
        approving: Callable[[ToolCall], tuple[ApprovalPolicy, AsyncConfirm | None]],
        context: object,
        done: list[ToolOutcome] | None = None,
    ) -> tuple[ToolOutcome, ...]:
        """:meth:`_run_calls` for async code."""
        _check_whole(reply, where)
        outcomes: list[ToolOutcome] = [] if done is None else done
        for call in calls:
            policy, confirm = approving(call)
            try:
                outcomes.append(await self._acall(reply, call, policy, confirm, context))
            except BaseException as error:
                if isinstance(error, AuditWriteError):
                    error.earlier = tuple(outcomes)
                outcomes.extend(_ran(call, error))
                raise
        return tuple(outcomes)

    async def _acall(
        self,
        reply: Reply,
        call: ToolCall,
        policy: ApprovalPolicy,
        confirm: AsyncConfirm | None,
        context: object,
    ) -> ToolOutcome:
        """One call of ``reply`` through :func:`veridic.aexecute`, with the reply's hashes."""
        result = await aexecute(
            reply.view,
            call.name,
            call.arguments,
            policy=policy,
            audit=self._audit,
            request_id=reply.request_id,
            prompt_sha256=reply.prompt_sha256,
            confirm=confirm,
            tools_digest=reply.tools_sha256,
            context=context,
            call_id=call.id,
        )
        return ToolOutcome(call, result)

    # --- the loop ------------------------------------------------------------------------

    @overload
    def run(
        self,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        request_id: str,
        confirm: Confirm | None = None,
        defer: bool = False,
        context: object = None,
        limits: Limits = ...,
        output_type: None = None,
    ) -> RunResult[None]: ...
    @overload
    def run(
        self,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        request_id: str,
        confirm: Confirm | None = None,
        defer: bool = False,
        context: object = None,
        limits: Limits = ...,
        output_type: type[OutputT],
    ) -> RunResult[OutputT]: ...
    def run(
        self,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        request_id: str,
        confirm: Confirm | None = None,
        defer: bool = False,
        context: object = None,
        limits: Limits = Limits(),
        output_type: type[OutputT] | None = None,
    ) -> RunResult[OutputT] | RunResult[None]:
        """Send, run the tool calls, record, repeat, until the model answers without calls.

        Each turn builds the prompt from ``composer``, sends it with ``view``'s
        tools (:meth:`send`), runs the reply's calls through
        :func:`veridic.execute` with ``policy`` and ``confirm``
        (:meth:`run_tools`) and appends the answer and the results to
        ``composer`` (:meth:`Reply.record`). With ``output_type`` (a pydantic
        model) the last answer must be its JSON: one that does not validate
        is sent back with what was wrong, at most ``limits.output_retries``
        times.

        ``context`` is the application's per-request object, given to every
        handler that asks for a :class:`~veridic.ToolContext`; it is checked
        against every such tool of ``view`` before the first model call.

        A system message without ``view.capability_section()`` is sent when
        every tool of ``view`` is code or pinned whole: the model is told its
        tools by the tool list, which comes from the same view with every name
        and description, and a prompt without a section promises nothing (one
        holding another view's section is refused, see :meth:`send`). When the
        view has an external tool whose text no pin covers (an unpinned
        description, or a schema a description pin leaves out), the request is
        refused (:class:`~veridic.ToolCouplingError`, before it is sent): the tool
        list carries that text as the outside wrote it, and only the section
        tells the model to read it as data. The section also says what the list
        cannot, such as the tools that are down and why; put it in for that.
        (The Agents SDK adapter refuses instructions without it because it
        writes them itself: ``instructions(view, ...)``.)

        With ``defer=True`` (instead of ``confirm``) a call that needs the
        user's approval does not wait for one: the run stops before it and
        returns with :attr:`RunResult.paused` set; the calls before it have
        run, it and the calls after it wait for :meth:`resume` (see
        :mod:`veridic.run.deferred`). The pause is dated by the gateway's
        ``clock`` (:attr:`PausedRun.paused_at <veridic.PausedRun>`), read before
        any call of that answer runs: a clock that names no time a paused run
        can hold is refused with none of them run.

        Raises:
            RunLimitError: a limit of ``limits`` was reached (turns, tool
                calls, seconds); what ran is recorded, ``composer`` holds it.
            VeridicError: a structured answer still invalid after its retries,
                an async-only store (use :meth:`arun`; raised before the first
                model call), or anything :meth:`send` and :meth:`run_tools` raise.
                Raised between two calls of one answer (``confirm`` raised, an
                audit write failed), it leaves that answer on ``composer`` with
                the results of the calls that ran and the others unanswered
                (a note on the error says so), so the composer is not sent
                again as if none had run.
        """
        check_output_type(output_type)
        check_defer(defer, confirm, "run")
        check_policy(policy, view, "run")
        check_context(view, context, "run")
        self._check_blocking("run")
        _check_request_id_length(request_id, "ModelGateway.run()")
        with _telemetry.agent(self._provider, request_id, resumed=False) as span:
            state = _Run(
                composer,
                limits,
                output_type,
                request_id,
                context=context,
                clock=self._clock,
                road="run",
            )
            return span.ran(self._loop(state, view, policy, confirm, defer))

    def _loop(
        self,
        state: _Run[OutputT],
        view: ToolView,
        policy: ApprovalPolicy,
        confirm: Confirm | None,
        defer: bool,
    ) -> RunResult[OutputT]:
        while True:
            prompt = state.before_turn()
            reply = self.send(prompt, view, request_id=state.request_id)
            # Checked first: a limit the answer passes keeps it on the composer, which
            # must be able to record it whole.
            state.check_calls(reply, prompt)
            state.counted(reply)
            if not reply.tool_calls:
                result = state.answered(reply)
                if result is not None:
                    return result
                continue
            # With defer, confirm is None (check_defer): the calls before the first that
            # needs an answer run, and it and the calls after it wait.
            waiting = first_waiting(reply, policy) if defer else None
            calls = reply.tool_calls[:waiting]
            # None ran: the composer stays as it was.
            check_none_async(reply.view, calls, state.road)
            paused_at = None if waiting is None else state.pause_moment()  # so is this
            done: list[ToolOutcome] = []
            try:
                self._run_calls(
                    f"{state.road}()",
                    reply,
                    calls,
                    lambda call: (policy, confirm),
                    state.context,
                    done,
                )
            except BaseException as error:
                state.broken(reply, done, error)
                raise
            state.after_calls(reply, done)
            if paused_at is not None:
                return state.pause(reply, reply.tool_calls[waiting:], policy, paused_at)

    @overload
    def resume(
        self,
        paused: PausedRun,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        answers: Mapping[str, bool],
        context: object = None,
        limits: Limits | None = ...,
        output_type: None = None,
    ) -> RunResult[None]: ...
    @overload
    def resume(
        self,
        paused: PausedRun,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        answers: Mapping[str, bool],
        context: object = None,
        limits: Limits | None = ...,
        output_type: type[OutputT],
    ) -> RunResult[OutputT]: ...
    def resume(
        self,
        paused: PausedRun,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        answers: Mapping[str, bool],
        context: object = None,
        limits: Limits | None = None,
        output_type: type[OutputT] | None = None,
    ) -> RunResult[OutputT] | RunResult[None]:
        """Go on with a run that paused for approvals, with the user's ``answers``.

        ``composer`` holds the system part, built from code for this request
        as for the first (nothing stored reaches it), and no turns: the
        paused conversation is restored after it. ``view`` and ``policy`` are
        this request's. ``answers`` maps each approval's
        :attr:`~veridic.PendingApproval.digest` (the one the dialog showed; or its
        ``call_id``, which trusts the stored approval) to the user's ``True``
        (approve) or ``False`` (deny). The waiting calls run
        in order, each checked again (see :mod:`veridic.run.deferred`); an
        approval left unanswered, or whose answer no longer holds, pauses the
        run again there (an answer for a call after one left unanswered could
        not be used, and is refused before anything runs). Then the run goes
        on as :meth:`run` with ``defer=True``. ``context`` is this request's (nothing of the first
        request's survives the pause). The result's ``outcomes`` are those of this resume;
        the audit store holds every call of the run under its request id.

        A paused run is resumed once. Before anything runs, the gateway's audit
        store is asked for the request's records (so it must answer
        ``records(request_id)``, as :class:`~veridic.AuditStore` does): when one of
        the waiting calls is on record (by its call id, under the paused prompt),
        an earlier resume of this paused run, or of a copy of it, handled it, and
        this one is refused. That covers a copy resumed again later (a session, a
        queue that delivers twice, a second click), on the store the run wrote
        to: a store that holds no trace of the run (neither the model call that
        paused, where the gateway keeps its model calls in the audit store, the
        default, nor the record of a call the run made before its waiting ones)
        could not tell, and is refused. Two resumes at the same
        moment may both find nothing on record yet: for those, resume only what
        ``store.claim_paused(request_id)`` hands out, which gives the run to one
        caller.

        ``limits`` hold for the whole run, the part before the pause included;
        left out, they are the ones the run ran under, which
        :class:`~veridic.PausedRun` keeps beside what it had spent (``Limits()`` for a
        paused run of format ``veridic-paused-run/2``, which kept none; from format 7 on,
        both are covered by each approval's digest, so that answers by digest hold them
        as the run paused, its measured seconds aside). A paused run
        that had spent more than they allow is refused before anything runs, as a run
        does not run the calls of an answer past its limits. ``seconds`` counts on from
        the seconds the run ran before the pause (:attr:`PausedRun.seconds
        <veridic.PausedRun>`; not the time it waited for the answers) and is checked
        before each model call, as in a run: the approved calls run, and a run past it
        stops before its next model call.

        Answers hold for ``policy.approvals_expire_after`` (24 hours unless the policy
        sets another) from the pause (:attr:`PausedRun.paused_at
        <veridic.PausedRun>`), by this gateway's ``clock``: a resume later than that, or
        of a paused run dated later than the clock says it is now, runs none of the
        waiting calls. They are recorded denied (the record says the approval expired),
        the composer gets the paused conversation with them answered so, and
        :class:`~veridic.ApprovalExpiredError` is raised: ask the user anew, by
        :meth:`run` of that composer (``defer=True``: the model asks again, in a paused
        run dated then) or by sending the request again. A resume that pauses again is
        dated by the clock's reading that measured the answers' age, before any waiting
        call ran. The paused run is then spent,
        as after any resume that reached its calls. A paused run that does not say when
        it paused (format 5 or earlier) is refused the same way, with nothing recorded
        and the composer left as it was given: date it, ``dataclasses.replace(paused,
        paused_at=...)``, if you know when it paused.

        Raises:
            ApprovalExpiredError: the answers came later than
                ``policy.approvals_expire_after`` after the pause, the paused run is
                dated in the future, or it does not say when it paused (nothing runs;
                see above). Checked before the send after the calls is: an expired run
                sends nothing, and a refusal of that send is a note on this error. So is
                a call of an async tool, which this blocking method cannot record denied:
                nothing is recorded then, and ``aresume()`` of the same paused run
                records the calls.
            RunLimitError: the paused run had spent more turns, tool calls or
                tokens than ``limits`` allow (nothing runs; resume it again with
                the limits it was started with: leave ``limits`` out).
            VeridicError: ``paused`` is not a :class:`~veridic.PausedRun`,
                ``composer`` already holds turns, an answer is not a bool,
                names no pending approval or answers a call after one left
                unanswered, the paused conversation does
                not end with the calls its approvals name, a waiting call is
                on record already (the paused run was resumed before), the
                audit store holds no trace of the paused run (it is not the
                store the run wrote to, so it could not tell), or the
                audit store cannot be asked for a request's records, or the send
                after the calls would refuse the composer's system part, the view,
                the client or the adapter's request (:meth:`send`'s checks, made first
                on the prompt the first send will build: the system part with the fence
                preamble, the paused conversation, the waiting calls answered as not run; a
                :class:`~veridic.ToolCouplingError` for another view's section, or a
                request whose tool list is not the view's):
                nothing runs in each case, and ``composer`` is left as it was
                given, to resume with again; and what :meth:`run` raises. Raised after
                the waiting calls ran (the next model call failed), the error has a
                note naming them and saying how to go on: the paused run is spent,
                and ``composer`` holds the conversation with their results, which
                :meth:`run` continues.
        """
        check_output_type(output_type)
        check_policy(policy, view, "resume")
        check_context(view, context, "resume")
        self._check_blocking("resume")
        request_id = getattr(paused, "request_id", None)
        with _telemetry.agent(self._provider, request_id, resumed=True) as span:
            state, reply, bound = _resumed(
                paused, composer, view, limits, output_type, answers, context, self._clock, "resume"
            )
            on_record = recorded(self._audit, paused.request_id, "resume")
            asked = (
                model_calls_kept(self._audit, paused.request_id, "resume")
                if self._calls.sink is self._audit
                else None
            )
            resuming = self._resuming(
                state, reply, paused, bound, view, policy, on_record, asked, sync=True
            )
            steps = resuming.steps
            done: list[ToolOutcome] = []
            try:
                self._run_calls("resume()", reply, steps.runnable, steps.approving, context, done)
            except BaseException as error:
                state.broken(reply, done, error, resumed=True)
                raise
            paused_again = resuming.after(done, policy)
            if paused_again is not None:
                return span.ran(paused_again, since=paused)
            try:
                return span.ran(self._loop(state, view, policy, None, True), since=paused)
            except BaseException as error:
                state.spent(error, done, "run")
                raise

    @overload
    async def arun(
        self,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        request_id: str,
        confirm: AsyncConfirm | None = None,
        defer: bool = False,
        context: object = None,
        limits: Limits = ...,
        output_type: None = None,
    ) -> RunResult[None]: ...
    @overload
    async def arun(
        self,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        request_id: str,
        confirm: AsyncConfirm | None = None,
        defer: bool = False,
        context: object = None,
        limits: Limits = ...,
        output_type: type[OutputT],
    ) -> RunResult[OutputT]: ...
    async def arun(
        self,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        request_id: str,
        confirm: AsyncConfirm | None = None,
        defer: bool = False,
        context: object = None,
        limits: Limits = Limits(),
        output_type: type[OutputT] | None = None,
    ) -> RunResult[OutputT] | RunResult[None]:
        """:meth:`run` for async code; a reply's calls run concurrently when all are queries.

        Queries change nothing, so their order cannot matter; a reply with
        any write runs its calls one after another, in the model's order, as
        :meth:`arun_tools` does. Outcomes keep the model's order either way.
        Of concurrent calls whose records could not be written, the first
        one's ``AuditWriteError`` is raised (``.earlier``: the calls recorded);
        each other's record is logged on ``veridic.executor`` and named in a
        note on that error, never dropped.
        """
        check_output_type(output_type)
        check_defer(defer, confirm, "arun")
        check_policy(policy, view, "arun")
        check_context(view, context, "arun")
        _check_request_id_length(request_id, "ModelGateway.arun()")
        with _telemetry.agent(self._provider, request_id, resumed=False) as span:
            state = _Run(
                composer,
                limits,
                output_type,
                request_id,
                context=context,
                clock=self._clock,
                road="arun",
            )
            return span.ran(await self._aloop(state, view, policy, confirm, defer))

    async def _aloop(
        self,
        state: _Run[OutputT],
        view: ToolView,
        policy: ApprovalPolicy,
        confirm: AsyncConfirm | None,
        defer: bool,
    ) -> RunResult[OutputT]:
        while True:
            prompt = state.before_turn()
            reply = await self.asend(prompt, view, request_id=state.request_id)
            state.check_calls(reply, prompt)  # first, as in _loop
            state.counted(reply)
            if not reply.tool_calls:
                result = state.answered(reply)
                if result is not None:
                    return result
                continue
            waiting = first_waiting(reply, policy) if defer else None
            calls = reply.tool_calls[:waiting]
            paused_at = None if waiting is None else state.pause_moment()  # before any call
            done: list[ToolOutcome] = []
            try:
                if waiting is None and all_queries(reply):
                    await self._concurrent_tools(
                        f"{state.road}()", reply, policy, confirm, state.context, done
                    )
                else:
                    await self._arun_calls(
                        f"{state.road}()",
                        reply,
                        calls,
                        lambda call: (policy, confirm),
                        state.context,
                        done,
                    )
            except BaseException as error:
                state.broken(reply, done, error)
                raise
            state.after_calls(reply, done)
            if paused_at is not None:
                return state.pause(reply, reply.tool_calls[waiting:], policy, paused_at)

    @overload
    async def aresume(
        self,
        paused: PausedRun,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        answers: Mapping[str, bool],
        context: object = None,
        limits: Limits | None = ...,
        output_type: None = None,
    ) -> RunResult[None]: ...
    @overload
    async def aresume(
        self,
        paused: PausedRun,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        answers: Mapping[str, bool],
        context: object = None,
        limits: Limits | None = ...,
        output_type: type[OutputT],
    ) -> RunResult[OutputT]: ...
    async def aresume(
        self,
        paused: PausedRun,
        composer: Composer,
        view: ToolView,
        *,
        policy: ApprovalPolicy,
        answers: Mapping[str, bool],
        context: object = None,
        limits: Limits | None = None,
        output_type: type[OutputT] | None = None,
    ) -> RunResult[OutputT] | RunResult[None]:
        """:meth:`resume` for async code (an async client, async handlers)."""
        check_output_type(output_type)
        check_policy(policy, view, "aresume")
        check_context(view, context, "aresume")
        request_id = getattr(paused, "request_id", None)
        with _telemetry.agent(self._provider, request_id, resumed=True) as span:
            state, reply, bound = _resumed(
                paused,
                composer,
                view,
                limits,
                output_type,
                answers,
                context,
                self._clock,
                "aresume",
            )
            on_record = await arecorded(self._audit, paused.request_id, "aresume")
            asked = (
                await amodel_calls_kept(self._audit, paused.request_id, "aresume")
                if self._calls.sink is self._audit
                else None
            )
            resuming = self._resuming(
                state, reply, paused, bound, view, policy, on_record, asked, sync=False
            )
            steps = resuming.steps
            done: list[ToolOutcome] = []
            try:
                await self._arun_calls(
                    "aresume()", reply, steps.runnable, steps.approving, context, done
                )
            except BaseException as error:
                state.broken(reply, done, error, resumed=True)
                raise
            paused_again = resuming.after(done, policy)
            if paused_again is not None:
                return span.ran(paused_again, since=paused)
            try:
                return span.ran(await self._aloop(state, view, policy, None, True), since=paused)
            except BaseException as error:
                state.spent(error, done, "arun")
                raise

    async def _concurrent_tools(
        self,
        where: str,
        reply: Reply,
        policy: ApprovalPolicy,
        confirm: AsyncConfirm | None,
        context: object,
        done: list[ToolOutcome],
    ) -> tuple[ToolOutcome, ...]:
        """The calls of ``reply`` at once; ``done`` gets, in the model's order, the outcome of
        each that ran (one whose record could not be written, or that was interrupted,
        included), also when the run itself is cancelled while they run."""
        _check_whole(reply, where)
        ended: dict[int, ToolOutcome] = {}

        async def one(index: int, call: ToolCall) -> ToolOutcome:
            try:
                outcome = await self._acall(reply, call, policy, confirm, context)
            except BaseException as error:
                ended.update((index, ran) for ran in _ran(call, error))
                raise
            ended[index] = outcome
            return outcome

        try:
            settled = await asyncio.gather(
                *(one(index, call) for index, call in enumerate(reply.tool_calls)),
                return_exceptions=True,
            )
        except BaseException:
            # Cancelled while they ran: gather cancelled each, and waited for it to record.
            done.extend(ended[index] for index in sorted(ended))
            raise
        outcomes = tuple(item for item in settled if isinstance(item, ToolOutcome))
        failures = [item for item in settled if isinstance(item, BaseException)]
        for call, item in zip(reply.tool_calls, settled, strict=True):
            done.extend((item,) if isinstance(item, ToolOutcome) else _ran(call, item))
        if not failures:
            return outcomes
        first = failures[0]
        if isinstance(first, AuditWriteError):
            first.earlier = outcomes
        for call, item in zip(reply.tool_calls, settled, strict=True):
            if isinstance(item, BaseException) and item is not first:
                also_raised(first, call, item)
        raise first

    # --- approvals that came too late -------------------------------------------------

    def _now(self) -> datetime:
        """This gateway's clock as a UTC time: what a paused run's age is measured to."""
        return clock_moment(self._clock(), "ModelGateway.resume()")

    # --- the checks every call passes ---------------------------------------------------

    def _check_blocking(self, where: str) -> None:
        """Refuse an async-only store before anything is sent or run, not at its first write."""
        writes(self._audit, f"ModelGateway.{where}", sync=True)
        self._calls.blocking(where)

    def _resuming(
        self,
        state: _Run[OutputT],
        reply: Reply,
        paused: PausedRun,
        bound: Mapping[str, bool],
        view: ToolView,
        policy: ApprovalPolicy,
        on_record: Sequence[AuditRecord],
        asked: Sequence[ModelCallRecord] | None,
        *,
        sync: bool,
    ) -> _Resuming[OutputT]:
        """Every check of a resume once its store was read (``on_record``, the request's
        audit records; ``asked``, its model calls where the gateway keeps them there), made
        before any waiting call runs, and the paused conversation put on the composer.

        One account for :meth:`resume` and :meth:`aresume`, which differ only in how they
        read the store and run the calls. The order is what the user must learn first:
        that the paused run was resumed already, or that its store cannot tell; then
        whether the answers came in time (:meth:`ResumeSteps.at
        <veridic.run.deferred.ResumeSteps.at>`, by the clock's one reading, which dates a
        pause of this resume too), since an expired run runs none of its calls whatever
        else is wrong; then whether the send after the calls would be refused
        (:meth:`_check_sendable`). An expired run sends nothing: a refusal of its next
        send is told in a note on the :class:`~veridic.ApprovalExpiredError` (the run of
        the composer that asks the user anew would meet it), and its calls are recorded
        denied through the resume's own path (on the blocking road, unless one is an async
        tool's: :func:`_check_blocking_calls`).
        """
        check_not_resumed(paused, reply.tool_calls, on_record)
        check_store_saw(paused, reply.tool_calls, on_record, asked, self._audit)
        now = self._now()
        calls = reply.tool_calls
        steps, expired = ResumeSteps.at(now, calls, view, policy, paused, bound, state.road)
        try:
            self._check_sendable(state, paused, calls, view, sync=sync)
        except VeridicError as refused:
            if expired is None:
                raise
            expired.add_note(
                "the request a run of this composer sends next would be refused too, as the "
                f"check of it found ({type(refused).__name__}: {refused}): mend that before "
                "the run that asks the user anew"
            )
        if sync:
            _check_blocking_calls(reply, steps, expired)
        state.restore(paused)  # refused before here, the composer is as it was given
        return _Resuming(state, reply, steps, expired, now)

    def _check_sendable(
        self,
        state: _Run[OutputT],
        paused: PausedRun,
        waiting: Sequence[ToolCall],
        view: ToolView,
        *,
        sync: bool,
    ) -> None:
        """Refuse a resume, before any waiting call runs or is recorded, whose next send
        would be refused for the composer's system part, the view, the client or the
        adapter's request.

        A resume runs the approved calls first and sends after them: a system part with
        another view's capability section, a client of the other kind, or an adapter whose
        request edits the tool list, was refused at that send, after a write had run and
        the paused run was spent. These are the send path's own checks
        (:func:`~veridic.run._sending.check_system_part`,
        :func:`~veridic.run._sending.check_request`), made on the prompt the first send
        will build (:meth:`_Run.next_prompt`): the system part with the fence preamble the
        restored blocks need, the paused conversation, and the waiting calls answered with
        stand-ins. A check that turns on what a result says cannot be made before the call
        runs; none of the send path's does.
        """
        prompt = state.next_prompt(paused, waiting)
        check_system_part(self._provider, prompt, view, paused.request_id, sync=sync)
        check_request(self._provider, prompt, view, None)

    def _prepare(
        self,
        prompt: Prompt,
        view: ToolView,
        request_id: str,
        options: Mapping[str, object] | None,
        *,
        streamed: bool,
        where: str,
    ) -> Sent:
        """Check the call, and record it before it leaves, from blocking code."""
        _check_request_id_length(request_id, f"ModelGateway.{where}()")
        write_call, write_reply = self._calls.blocking(where)
        sent, record = checked(
            self._provider, self._clock, prompt, view, request_id, options, streamed, sync=True
        )
        write_call(record)
        # Latency counts from the request leaving, after its record was written.
        return sent.leaving(answered=write_reply)

    async def _aprepare(
        self,
        prompt: Prompt,
        view: ToolView,
        request_id: str,
        options: Mapping[str, object] | None,
        *,
        streamed: bool,
    ) -> Sent:
        """:meth:`_prepare` for async code: the record is awaited where the store can."""
        _check_request_id_length(request_id, f"ModelGateway.a{'stream' if streamed else 'send'}()")
        write_call, write_reply = self._calls.acall, self._calls.areply
        sent, record = checked(
            self._provider, self._clock, prompt, view, request_id, options, streamed, sync=False
        )
        await write_call(record)
        return sent.leaving(aanswered=write_reply)


@dataclass(frozen=True, slots=True)
class _Resuming(Generic[OutputT]):
    """A resume whose checks passed (:meth:`ModelGateway._resuming`), its calls about to run:
    what :meth:`ModelGateway.resume` and ``aresume`` do once they ran, written once."""

    state: _Run[OutputT]
    reply: Reply
    steps: ResumeSteps
    expired: ApprovalExpiredError | None
    now: datetime
    """The clock's reading that measured the answers' age; it dates a pause of this resume."""

    def after(
        self, done: Sequence[ToolOutcome], policy: ApprovalPolicy
    ) -> RunResult[OutputT] | None:
        """Answer the calls that ran on the composer; then raise the expiry (the calls are
        recorded denied, and answered so), or pause again at the first call left waiting.
        ``None``: every waiting call is answered, and the run goes on.

        Raises:
            ApprovalExpiredError: the answers came too late (see :meth:`ModelGateway.resume`).
        """
        self.state.after_resumed(done)
        if self.expired is not None:
            raise self.expired
        if self.steps.waiting:
            return self.state.pause(
                self.reply, self.steps.waiting, policy, self.now, self.steps.again
            )
        return None


def _check_blocking_calls(
    reply: Reply, steps: ResumeSteps, expired: ApprovalExpiredError | None
) -> None:
    """Refuse, before any call runs, a blocking resume of an async tool's call.

    A denied call is refused by ``execute()`` too, so an expired run's calls cannot be
    recorded denied on this road: the expiry is raised, told first as a resume's every
    other refusal is, nothing recorded and nothing run; the note says how to record them.

    Raises:
        ApprovalExpiredError: ``expired``, one of whose calls is of an async tool.
        VeridicError: the answers hold, and one of the calls is of an async tool.
    """
    try:
        check_none_async(reply.view, steps.runnable, "resume")
    except VeridicError as refused:
        if expired is None:
            raise
        expired.add_note(
            f"its waiting calls were not recorded denied ({refused}): a blocking resume "
            "cannot record an async tool's call; await gateway.aresume(...) with the same "
            "paused run records them, and raises this error again"
        )
        raise expired from None


def _traced(span: _telemetry.ChatSpan, sent: Sent) -> None:
    """Tell the chat span what passed the checks and was recorded, for every way of sending."""
    span.sent(
        sent.prompt_sha256,
        sent.tools_sha256,
        sent.tools,
        sent.spans,
        sent.request,
        sent.options_sha256,
    )


def _ran(call: ToolCall, error: BaseException) -> tuple[ToolOutcome, ...]:
    """The outcome of ``call`` when ``error`` says it ran: its record could not be written,
    or an interrupt (a cancelled task, Ctrl-C) cut it short after it started (recorded
    failed, and answered so: the composer can go on)."""
    if isinstance(error, AuditWriteError) and isinstance(error.result, CallResult):
        return (ToolOutcome(call, error.result),)
    result = _interrupted_result(error)
    return () if result is None else (ToolOutcome(call, result),)
