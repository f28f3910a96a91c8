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
   provenance spans of the instruction position (the system message);
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
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, overload, runtime_checkable

from pydantic import BaseModel

from veridic._sample import clip
from veridic.errors import AuditWriteError, ToolCouplingError, VeridicError
from veridic.providers._base import Adapter, Completion
from veridic.run import telemetry as _telemetry
from veridic.run.approval import ApprovalPolicy, Confirm
from veridic.run.audit import AsyncAuditSink, AuditSink, ModelCallRecord, ModelReplyRecord
from veridic.run.call_log import (
    AsyncModelCallSink,
    AsyncModelReplySink,
    ModelCallLog,
    ModelCallSink,
    ModelReplySink,
    _AWriteReply,
    _CallRecords,
    _WriteReply,
)
from veridic.run.deferred import PausedRun, ResumeSteps, needs_answer
from veridic.run.executor import (
    AsyncConfirm,
    _writes,
    aexecute,
    execute,
    tools_sha256,
)
from veridic.run.reply import AsyncReplyStream, Reply, ReplyStream, ToolOutcome, _check_whole
from veridic.run.run_loop import Limits, OutputT, RunResult, _resumed, _Run
from veridic.text.compose import Composer
from veridic.text.prompt import Prompt, PromptSpan, ToolCall
from veridic.text.provenance import is_trusted, report
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

_log = logging.getLogger("veridic.executor")


def _all_queries(reply: Reply) -> bool:
    """Whether every call of ``reply`` is of a query the view exposes (safe to run at once)."""
    view = reply.view
    for call in reply.tool_calls:
        status = view.status(call.name)
        if not status.exposed or status.tool is None or status.tool.kind != "query":
            return False
    return True


@dataclass(frozen=True, slots=True)
class _Sent:
    """The facts of one call that its reply carries."""

    request: dict[str, object]
    request_id: str
    prompt_sha256: str
    tools_sha256: str
    view: ToolView
    answered: _WriteReply | None = None
    clock: Callable[[], float] = time.time
    started: float = field(default_factory=time.monotonic)
    spans: tuple[PromptSpan, ...] = ()
    """The provenance spans of the system message (the record's ``instruction_spans``)."""
    call_id: str = ""
    """The model-call record's own id, which the answer's record carries."""
    aanswered: _AWriteReply | None = None
    """Where async code records the answer (instead of ``answered``)."""

    def reply(self, completion: Completion) -> Reply:
        latency = time.monotonic() - self.started
        if self.answered is not None:
            # Recorded before the ids are checked: an answer that is refused is on record too.
            self.answered(self._answer(completion, latency))
        return self._reply(completion, latency)

    async def areply(self, completion: Completion) -> Reply:
        """:meth:`reply` for async code: the answer's record is awaited."""
        latency = time.monotonic() - self.started
        if self.aanswered is not None:
            await self.aanswered(self._answer(completion, latency))
        return self._reply(completion, latency)

    def _answer(self, completion: Completion, latency: float) -> ModelReplyRecord:
        return ModelReplyRecord(
            time=self.clock(),
            request_id=self.request_id,
            prompt_sha256=self.prompt_sha256,
            response_id=completion.response_id,
            model=completion.model,
            stop_reason=completion.stop_reason,
            tool_calls=tuple(call.name for call in completion.tool_calls),
            usage=completion.usage,
            latency=latency,
            call_id=self.call_id,
        )

    def _reply(self, completion: Completion, latency: float) -> Reply:
        _check_call_ids(completion.tool_calls, self.request_id)
        return Reply(
            text=completion.text,
            tool_calls=completion.tool_calls,
            stop_reason=completion.stop_reason,
            response_id=completion.response_id,
            model=completion.model,
            request_id=self.request_id,
            prompt_sha256=self.prompt_sha256,
            tools_sha256=self.tools_sha256,
            view=self.view,
            reasoning=completion.reasoning,
            usage=completion.usage,
            latency=latency,
        )


def _check_output_type(output_type: object) -> None:
    if output_type is not None and not (
        isinstance(output_type, type) and issubclass(output_type, BaseModel)
    ):
        raise VeridicError(
            f"run(output_type={output_type!r}): pass a pydantic model class, whose JSON the "
            "model's last answer must be, or leave it out for a text answer"
        )


def _check_defer(defer: object, confirm: object, where: str) -> None:
    if not isinstance(defer, bool):
        raise VeridicError(f"{where}(defer={defer!r}): pass True or False")
    if defer and confirm is not None:
        raise VeridicError(
            f"{where}() got both confirm= and defer=True: either the user is asked during the "
            "run (confirm) or the run stops for their answers (defer); pass one"
        )


def _check_context(view: ToolView, context: object, where: str) -> None:
    """Refuse a run whose context some tool of its view cannot take, before any model call.

    One context serves every call of a run; a tool that asks for another
    type (or for one, when none was given) would otherwise fail mid-run,
    after the calls before it ran.
    """
    for tool in view.tools():
        if tool.context is not None:
            tool.context.bind(context, tool=tool.name, origin=tool.origin, request_id=where)


def _check_policy(policy: object, view: ToolView, where: str) -> None:
    if not isinstance(policy, ApprovalPolicy) or policy.view is not view:
        raise VeridicError(
            f"{where}() got a policy built for another view ({policy!r}, not for {view!r}): "
            "pass ApprovalPolicy(view, rules=...) of the view the run sends"
        )


def _first_waiting(reply: Reply, policy: ApprovalPolicy) -> int | None:
    """The index of the first call of ``reply`` that needs the user's answer, if any."""
    for index, call in enumerate(reply.tool_calls):
        if needs_answer(reply.view, policy, call) is not None:
            return index
    return None


def _check_none_async(view: ToolView, calls: Sequence[ToolCall]) -> None:
    """Refuse, before any of ``calls`` runs, a blocking run of calls one of which is async.

    :func:`veridic.execute` refuses an async tool when its turn comes, after
    the calls before it ran (a write among them); the turn was then never
    recorded, so the same request sent again ran them a second time.

    Raises:
        VeridicError: a call names an exposed tool whose handler is async.
    """
    for call in calls:
        status = view.status(call.name)
        if status.exposed and status.tool is not None and status.tool.is_async:
            raise VeridicError(
                f"tool {status.tool.name!r} ({status.tool.origin}) is async, and the reply "
                f"calls it (call {clip(call.id)}) beside {len(calls) - 1} other call(s): none "
                "of them ran; run the reply with await gateway.arun_tools(...) (a whole run "
                "with await gateway.arun(...)), or register a blocking handler"
            )


def _check_call_ids(calls: Sequence[ToolCall], request_id: str) -> None:
    """Refuse a reply whose tool calls cannot each be answered, before any of them runs.

    Every result answers one call by its id: an empty id or one used twice
    would run the handlers and only then fail when the turn is recorded,
    leaving a call nobody can answer and every later request refused.

    Raises:
        VeridicError: an empty or repeated call id (the model call itself is recorded).
    """
    seen: set[str] = set()
    problems: list[str] = []
    for call in calls:
        if not call.id:
            problems.append(f"an empty id (tool {clip(call.name)})")
        elif call.id in seen:
            problems.append(f"the id {clip(call.id)} twice")
        seen.add(call.id)
    if problems:
        raise VeridicError(
            f"the model's reply to request {request_id!r} has tool calls with "
            f"{'; '.join(problems)}: each call is answered by its id, so none of them ran; "
            "send the request again (a provider that reuses ids is a provider bug to report)"
        )


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
                f"ModelGateway() got a {type(provider).__name__} as provider: pass an adapter, "
                "OpenAIChat(client, model=...), OpenAIResponses(...) or AnthropicMessages(...)"
            )
        _writes(audit, "ModelGateway", sync=False)
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
            ToolCouplingError: the tool list in the request is not the view's.
            UnknownToolError, ToolUnavailableError, ToolDeniedError: a
                ``tool_choice`` option names a tool the view does not expose.
            Exception: whatever the SDK raises (network, status, timeout);
                the model-call record is written before the request is sent.
        """
        with _telemetry.chat(self._provider, request_id, streamed=False) as span:
            sent = self._prepare(prompt, view, request_id, options, streamed=False, where="send")
            span.sent(sent.prompt_sha256, sent.tools_sha256, sorted(view.names()), sent.spans)
            response = self._provider.method()(**sent.request)
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
            span.sent(sent.prompt_sha256, sent.tools_sha256, sorted(view.names()), sent.spans)
            response = await _awaited(self._provider.method()(**sent.request))
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
            span.sent(sent.prompt_sha256, sent.tools_sha256, sorted(view.names()), sent.spans)
            events = self._provider.method()(**sent.request, stream=True)
            if not isinstance(events, _Iterable):
                raise VeridicError(
                    f"{self._provider!r}: the SDK answered a streaming request with a "
                    f"{type(events).__name__}, not a stream of events; check that the installed "
                    "SDK version is one the extra allows"
                )
            close = getattr(events, "close", None)
            span.handed()  # the stream ends the span
            return ReplyStream(
                iter(events),
                close if callable(close) else _nothing,
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
            span.sent(sent.prompt_sha256, sent.tools_sha256, sorted(view.names()), sent.spans)
            events = await _awaited(self._provider.method()(**sent.request, stream=True))
            if not isinstance(events, _AsyncIterable):
                raise VeridicError(
                    f"{self._provider!r}: the SDK answered a streaming request with a "
                    f"{type(events).__name__}, not an async stream of events; check that the "
                    "installed SDK version is one the extra allows"
                )
            close = getattr(events, "close", None)
            span.handed()  # the stream ends the span
            return AsyncReplyStream(
                aiter(events),
                close if callable(close) else _anothing,
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
                runs); or the provider cut the answer
                off (its stop reason says the output limit, the context window
                or a filter ended it: its calls' arguments may be cut short),
                raised before any call runs.
            AuditWriteError: a call ran but its record could not be written;
                besides that call's result, ``.earlier`` holds the outcomes
                of the calls that ran before it (the calls after it did not run).
            AuditRecordError, sqlite3.Error: the record of a call that did not
                run could not be written.
            VeridicError: ``audit`` or ``calls`` is an async-only store (use
                :meth:`arun_tools`); raised before any call runs.
        """
        self._check_blocking("run_tools")
        _check_whole(reply, "run_tools()")
        return self._run_calls(reply, reply.tool_calls, lambda call: (policy, confirm), context)

    def _run_calls(
        self,
        reply: Reply,
        calls: Sequence[ToolCall],
        approving: Callable[[ToolCall], tuple[ApprovalPolicy, Confirm | None]],
        context: object,
    ) -> tuple[ToolOutcome, ...]:
        """``calls`` of ``reply`` in order, each with the policy and confirm ``approving`` gives."""
        _check_none_async(reply.view, calls)
        outcomes: list[ToolOutcome] = []
        for call in calls:
            policy, confirm = approving(call)
            try:
                with _telemetry.calling(call.id):  # the call id, for the tool call's span
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
                    )
            except AuditWriteError as error:
                error.earlier = tuple(outcomes)
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
        _check_whole(reply, "arun_tools()")
        return await self._arun_calls(
            reply, reply.tool_calls, lambda call: (policy, confirm), context
        )

    async def _arun_calls(
        self,
        reply: Reply,
        calls: Sequence[ToolCall],
        approving: Callable[[ToolCall], tuple[ApprovalPolicy, AsyncConfirm | None]],
        context: object,
    ) -> tuple[ToolOutcome, ...]:
        outcomes: list[ToolOutcome] = []
        for call in calls:
            policy, confirm = approving(call)
            try:
                outcomes.append(await self._acall(reply, call, policy, confirm, context))
            except AuditWriteError as error:
                error.earlier = tuple(outcomes)
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
        with _telemetry.calling(call.id):  # the call id, for the tool call's span
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

        With ``defer=True`` (instead of ``confirm``) a call that needs the
        user's approval does not wait for one: the run stops before it and
        returns with :attr:`RunResult.paused` set; the calls before it have
        run, it and the calls after it wait for :meth:`resume` (see
        :mod:`veridic.run.deferred`).

        Raises:
            RunLimitError: a limit of ``limits`` was reached (turns, tool
                calls, seconds); what ran is recorded, ``composer`` holds it.
            VeridicError: a structured answer still invalid after its retries,
                an async-only store (use :meth:`arun`; raised before the first
                model call), or anything :meth:`send` and :meth:`run_tools` raise.
        """
        _check_output_type(output_type)
        _check_defer(defer, confirm, "run")
        _check_policy(policy, view, "run")
        _check_context(view, context, "run")
        self._check_blocking("run")
        with _telemetry.agent(self._provider, request_id, resumed=False) as span:
            state = _Run(composer, limits, output_type, request_id, context=context)
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
            state.counted(reply)
            if not reply.tool_calls:
                result = state.answered(reply)
                if result is not None:
                    return result
                continue
            state.check_calls(reply, prompt)
            waiting = _first_waiting(reply, policy) if defer else None
            if waiting is not None:
                calls = reply.tool_calls
                ran = self._run_calls(
                    reply, calls[:waiting], lambda call: (policy, None), state.context
                )
                state.after_calls(reply, ran)
                return state.pause(reply, calls[waiting:], policy)
            outcomes = self.run_tools(reply, policy=policy, confirm=confirm, context=state.context)
            state.after_calls(reply, outcomes)

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
        limits: Limits = ...,
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
        limits: Limits = ...,
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
        limits: Limits = Limits(),
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
        run again there. Then the run goes on as :meth:`run` with
        ``defer=True``. ``context`` is this request's (nothing of the first
        request's survives the pause). The result's ``outcomes`` are those of this resume;
        the audit store holds every call of the run under its request id.

        Raises:
            VeridicError: ``paused`` is not a :class:`~veridic.PausedRun`,
                ``composer`` already holds turns, an answer is not a bool or
                names no pending approval, or the paused conversation does
                not end with the calls its approvals name; and what
                :meth:`run` raises.
        """
        _check_output_type(output_type)
        _check_policy(policy, view, "resume")
        _check_context(view, context, "resume")
        self._check_blocking("resume")
        request_id = getattr(paused, "request_id", None)
        with _telemetry.agent(self._provider, request_id, resumed=True) as span:
            state, reply, bound = _resumed(
                paused, composer, view, limits, output_type, answers, context
            )
            steps = ResumeSteps(reply.tool_calls, view, policy, paused, bound)
            ran = self._run_calls(reply, steps.runnable, steps.approving, context)
            state.after_resumed(ran)
            if steps.waiting:
                return span.ran(state.pause(reply, steps.waiting, policy, steps.again))
            return span.ran(self._loop(state, view, policy, None, True))

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
        _check_output_type(output_type)
        _check_defer(defer, confirm, "arun")
        _check_policy(policy, view, "arun")
        _check_context(view, context, "arun")
        with _telemetry.agent(self._provider, request_id, resumed=False) as span:
            state = _Run(composer, limits, output_type, request_id, context=context)
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
            state.counted(reply)
            if not reply.tool_calls:
                result = state.answered(reply)
                if result is not None:
                    return result
                continue
            state.check_calls(reply, prompt)
            waiting = _first_waiting(reply, policy) if defer else None
            if waiting is not None:
                calls = reply.tool_calls
                ran = await self._arun_calls(
                    reply, calls[:waiting], lambda call: (policy, None), state.context
                )
                state.after_calls(reply, ran)
                return state.pause(reply, calls[waiting:], policy)
            if _all_queries(reply):
                outcomes = await self._concurrent_tools(reply, policy, confirm, state.context)
            else:
                outcomes = await self.arun_tools(
                    reply, policy=policy, confirm=confirm, context=state.context
                )
            state.after_calls(reply, outcomes)

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
        limits: Limits = ...,
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
        limits: Limits = ...,
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
        limits: Limits = Limits(),
        output_type: type[OutputT] | None = None,
    ) -> RunResult[OutputT] | RunResult[None]:
        """:meth:`resume` for async code (an async client, async handlers)."""
        _check_output_type(output_type)
        _check_policy(policy, view, "resume")
        _check_context(view, context, "aresume")
        request_id = getattr(paused, "request_id", None)
        with _telemetry.agent(self._provider, request_id, resumed=True) as span:
            state, reply, bound = _resumed(
                paused, composer, view, limits, output_type, answers, context
            )
            steps = ResumeSteps(reply.tool_calls, view, policy, paused, bound)
            ran = await self._arun_calls(reply, steps.runnable, steps.approving, context)
            state.after_resumed(ran)
            if steps.waiting:
                return span.ran(state.pause(reply, steps.waiting, policy, steps.again))
            return span.ran(await self._aloop(state, view, policy, None, True))

    async def _concurrent_tools(
        self, reply: Reply, policy: ApprovalPolicy, confirm: AsyncConfirm | None, context: object
    ) -> tuple[ToolOutcome, ...]:
        settled = await asyncio.gather(
            *(self._acall(reply, call, policy, confirm, context) for call in reply.tool_calls),
            return_exceptions=True,
        )
        outcomes = tuple(item for item in settled if isinstance(item, ToolOutcome))
        failures = [item for item in settled if isinstance(item, BaseException)]
        if not failures:
            return outcomes
        first = failures[0]
        if isinstance(first, AuditWriteError):
            first.earlier = outcomes
        for other in failures[1:]:
            _also_unwritten(first, other)
        raise first

    # --- the checks every call passes ---------------------------------------------------

    def _check_blocking(self, where: str) -> None:
        """Refuse an async-only store before anything is sent or run, not at its first write."""
        _writes(self._audit, f"ModelGateway.{where}", sync=True)
        self._calls.blocking(where)

    def _prepare(
        self,
        prompt: Prompt,
        view: ToolView,
        request_id: str,
        options: Mapping[str, object] | None,
        *,
        streamed: bool,
        where: str,
    ) -> _Sent:
        """Check the call, and record it before it leaves, from blocking code."""
        write_call, write_reply = self._calls.blocking(where)
        sent, record = self._checked(prompt, view, request_id, options, streamed, sync=True)
        write_call(record)
        # Latency counts from the request leaving, after its record was written.
        return replace(sent, answered=write_reply, started=time.monotonic())

    async def _aprepare(
        self,
        prompt: Prompt,
        view: ToolView,
        request_id: str,
        options: Mapping[str, object] | None,
        *,
        streamed: bool,
    ) -> _Sent:
        """:meth:`_prepare` for async code: the record is awaited where the store can."""
        write_call, write_reply = self._calls.acall, self._calls.areply
        sent, record = self._checked(prompt, view, request_id, options, streamed, sync=False)
        await write_call(record)
        return replace(sent, aanswered=write_reply, started=time.monotonic())

    def _checked(
        self,
        prompt: Prompt,
        view: ToolView,
        request_id: str,
        options: Mapping[str, object] | None,
        streamed: bool,
        *,
        sync: bool,
    ) -> tuple[_Sent, ModelCallRecord]:
        """The request to send and its model-call record, once every check has passed."""
        provider = self._provider
        if not isinstance(prompt, Prompt) or not isinstance(view, ToolView):
            raise VeridicError(
                f"ModelGateway needs a Prompt and a ToolView, got {type(prompt).__name__} and "
                f"{type(view).__name__}: build the prompt with Composer().build() and the view "
                "with registry.view()"
            )
        if not isinstance(request_id, str) or not request_id.strip():
            raise VeridicError(
                f"ModelGateway got request_id={request_id!r}: every call needs the id of the "
                "request it belongs to, so its records can be found together; pass one"
            )
        if provider.is_async == sync:
            have, use = ("an async", "await asend()/astream()") if sync else ("a sync", "send()")
            raise VeridicError(
                f"{provider!r} holds {have} client ({type(provider.client).__name__}): "
                f"use {use}, or build the adapter with the other client"
            )
        pending = prompt.pending_tool_calls
        if pending:
            listed = ", ".join(f"{call.id} ({call.name})" for call in pending)
            raise VeridicError(
                f"prompt {prompt.sha256[:12]} has tool calls without results: {listed}; "
                "providers reject it: answer each with Composer.tool_result(call_id, ...) "
                "(Reply.record(composer, outcomes) does) before sending"
            )
        spans = _instruction_spans(prompt)
        _check_section(prompt, view, spans)
        request = provider.request(prompt, view.tool_specs(provider.spec_format), options or {})
        sent_tools = provider.sent_tools(request)
        view.assert_coupled(sent_tools)
        choice = request.get("tool_choice")
        name = provider.tool_choice_name(choice)
        if name is not None:
            view.tool(name)
        digest = tools_sha256(view)
        record = ModelCallRecord(
            time=self._clock(),
            request_id=request_id,
            api=provider.api,
            model=provider.model,
            prompt_sha256=prompt.sha256,
            tools_sha256=digest,
            tools=tuple(sorted(view.names())),
            instruction_spans=spans,
            streamed=streamed,
        )
        sent = _Sent(
            request,
            request_id,
            prompt.sha256,
            digest,
            view,
            clock=self._clock,
            spans=spans,
            call_id=record.call_id,
        )
        return sent, record


def _also_unwritten(raised: BaseException, other: BaseException) -> None:
    """Keep the unwritten record of a concurrent call whose error is not the one raised.

    Only one error of a reply's concurrent calls can be raised; another call
    that ran and whose record could not be written (its ``AuditWriteError``)
    would vanish with its error. Its record goes to the ``veridic.executor``
    log and a note on the raised error, as a write nobody awaits does.
    """
    if not isinstance(other, AuditWriteError):
        return
    record = other.result.record
    _log.error(
        "the audit record of tool %r (request %r, outcome %s), a call that ran "
        "concurrently with the one whose error is raised, could not be written (%s); "
        "store it elsewhere: %r",
        record.tool,
        record.request_id,
        record.outcome.value,
        other.__cause__,
        record,
    )
    raised.add_note(
        f"another call of the reply (tool {record.tool!r}) ran and its record could not be "
        "written either: it is in the veridic.executor log"
    )


def _instruction_spans(prompt: Prompt) -> tuple[PromptSpan, ...]:
    """The spans of the system message, after refusing any part of it that is not trusted."""
    if not prompt.messages or prompt.messages[0].role != "system":
        return ()
    message = prompt.messages[0]
    where = f"the system message of prompt {prompt.sha256[:12]}, at ModelGateway"
    if "".join(message.parts) != message.content:
        # Built by hand, not by the Composer: the parts do not account for the text.
        report(message.content, where)
    for part in message.parts:
        if not is_trusted(part):
            report(part, where)
    return tuple(
        PromptSpan(0, "system", span.start, span.end, span.kind, span.origin)
        for span in message.spans
    )


def _check_section(prompt: Prompt, view: ToolView, spans: tuple[PromptSpan, ...]) -> None:
    """Refuse a system message whose capability section is not ``view``'s.

    The section is minted as one span of kind ``registry``; each such span of
    the system message must be exactly the section of the view the request is
    sent with, else the prompt would promise tools the request does not carry
    (or hide ones it does). A prompt without a section promises nothing.
    """
    system = prompt.messages[0].content if spans else ""
    for span in spans:
        if span.kind == "registry" and not view.describes(system[span.start : span.end]):
            raise ToolCouplingError(
                f"the system message of prompt {prompt.sha256[:12]} holds a capability section "
                f"from another view ({span.origin}) than the one it is sent with ({view!r}): "
                "the prompt would describe tools the request does not carry; build the system "
                "message with view.capability_section() of the view you send"
            )


@runtime_checkable
class _Iterable(Protocol):
    def __iter__(self) -> Iterator[object]: ...


@runtime_checkable
class _AsyncIterable(Protocol):
    def __aiter__(self) -> AsyncIterator[object]: ...


async def _awaited(value: object) -> object:
    if not isinstance(value, Awaitable):
        raise VeridicError(
            f"the SDK method returned a {type(value).__name__}, not an awaitable, for an async "
            "client; check that the installed SDK version is one the extra allows"
        )
    result: object = await value
    return result


def _nothing() -> None:
    return None


async def _anothing() -> None:
    return None
