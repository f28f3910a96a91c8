"""The LangChain side of :mod:`veridic.integrations.langchain`: its tool and middleware classes.

This module imports langchain-core, langchain and langgraph at its top, so only
:mod:`veridic.integrations.langchain` imports it, after ``veridic._extras.require``
found them; applications call the functions there, never this module.

How the user's answer reaches the tool: the middleware is LangChain's own
:class:`~langchain.agents.middleware.HumanInTheLoopMiddleware`, subclassed. It
sees every decision as it is made, and for a call the reviewer approved (or
edited) it hands the tool a one-use :class:`_Grant` for exactly that call (tool
call id, tool, arguments) in a context variable, for the time the tool runs.
The tool turns a grant into the ``confirm`` answer ``True`` for
:func:`~veridic.run.executor.execute`; without one, nobody confirmed the call.
Nothing a model writes can set the variable, and the stock middleware leaves no
trace of its approval a tool could check, so with it a call that needs approval
is denied.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import hashlib
import json
import logging
import re
import threading
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
    Set,
)
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Final, NotRequired, TypeVar

from langchain.agents.middleware import (
    AgentState,
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)

# Private names of LangChain's middleware, on purpose: the state it declares (extended below,
# so its own edit key stays in the graph state) and that key, read in the update its
# after_model returns, so an edit that names another tool is refused before anything runs.
from langchain.agents.middleware.human_in_the_loop import (
    _EDITED_TOOL_CALLS_KEY,
    InterruptMode,
    _HumanInTheLoopState,
)
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain.agents.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy
from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.exceptions import ModelError
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import PrivateAttr

from veridic._sample import clip, first_few, quoted
from veridic.errors import ProvenanceError, ToolCouplingError, VeridicError
from veridic.integrations._output_docs import code_described
from veridic.integrations._owned_keys import owned_keys
from veridic.run._audit_writes import arecorded, of_call, recorded
from veridic.run._unlabelled import refuse_unlabelled_outside_text
from veridic.run.approval import ApprovalMode, ApprovalPolicy, ApprovalRequest
from veridic.run.audit import AuditSink
from veridic.run.deferred import shown_arguments
from veridic.run.executor import CallResult, aexecute, execute
from veridic.run.records import AuditRecord, arguments_sha256
from veridic.text.fence import (
    _is_label,
    _is_own_block,
    _whole_block,
    _Written,
    fence,
)
from veridic.text.prompt import Prompt
from veridic.text.provenance import is_trusted, readable, report
from veridic.text.terminal_view import visible
from veridic.tools.view import ToolView

__all__ = ["ApprovalMiddleware", "Binding", "VeridicTool", "interrupt_config", "make_tools"]

APPROVED_KEY: Final = "veridic_approved_tool_calls"
"""State key: this turn's tool calls a reviewer approved or edited (batched mode), each id
with the :func:`call_digest` of the call the reviewer saw (or wrote, by an edit)."""
DECISIONS: Final = ("approve", "edit", "reject")
"""The decisions a reviewer may give: ``respond`` (answering in the tool's place) is left out."""
_PREFIX: Final = "veridic asks for your approval of this tool call"

_T = TypeVar("_T")
_log = logging.getLogger("veridic.integrations.langchain")


# --- the grant: how a tool learns that the reviewer approved its call -----------------------


def call_digest(name: str, arguments: object) -> str:
    """A digest of one call (tool and arguments), the same for equal JSON values."""
    text = json.dumps(
        [name, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(eq=False)
class _Grant:
    """The reviewer's approval of one call, good for one run of it."""

    tool_call_id: str
    name: str
    digest: str
    used: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, tool_call_id: str | None, name: str, digest: str) -> bool:
        """Use the grant for this call; ``False`` when it is for another call or used."""
        with self.lock:
            if self.used or (tool_call_id, name, digest) != (
                self.tool_call_id,
                self.name,
                self.digest,
            ):
                return False
            self.used = True
            return True


_GRANT: Final = contextvars.ContextVar[_Grant | None]("veridic_langchain_grant", default=None)


@contextmanager
def _granted(grant: _Grant | None) -> Iterator[None]:
    token = _GRANT.set(grant)
    try:
        yield
    finally:
        _GRANT.reset(token)


def _confirmed(request: ApprovalRequest) -> bool:
    return True


def _refused(request: ApprovalRequest) -> bool:
    return False


class _Awaiting:
    """The view's calls of the model's turns that nothing of veridic has answered yet.

    A call leaves when its tool runs it (or refuses it) or the middleware refuses it;
    what is left when the next model call starts, or the run ends, was answered by
    something else (another middleware, such as a call limit) or by nobody (a middleware
    that ended the run), and never reached the view.

    A call is known by its thread (LangGraph's ``thread_id``, read from the run this code
    runs in) and its id: one request's tools may serve two threads, and models that number
    their calls from 0 each turn give two threads' calls one id, so a call run in one
    thread must not take the other's off the list.
    """

    def __init__(self) -> None:
        self._calls: dict[tuple[str | None, str], ToolCall] = {}
        self._lock = threading.Lock()

    def expect(self, calls: Sequence[ToolCall]) -> None:
        thread = _thread()
        with self._lock:
            self._calls.update(((thread, call["id"]), call) for call in calls if call["id"])

    def answered(self, call_id: str | None) -> None:
        thread = _thread()
        with self._lock:
            self._calls.pop((thread, call_id or ""), None)

    def take(self, among: Set[str]) -> list[ToolCall]:
        """Remove and return this thread's calls whose ids are ``among`` (its conversation's)."""
        thread = _thread()
        with self._lock:
            keys = [key for key in self._calls if key[0] == thread and key[1] in among]
            return [self._calls.pop(key) for key in keys]


def _thread() -> str | None:
    """The ``thread_id`` of the LangGraph run this code runs in (``None`` without one).

    LangChain keeps the run's config in a context variable while a node, a middleware
    hook or a tool runs; a thread id LangGraph was given as another type than ``str`` is
    compared by its text, as the checkpointer stores it.
    """
    thread = ensure_config().get("configurable", {}).get("thread_id")
    return None if thread is None else str(thread)


# --- one request's tools, and what they share --------------------------------------------


@dataclass(frozen=True, eq=False)
class Binding:
    """What every tool of one :func:`make_tools` call runs with: one request's view and store."""

    view: ToolView
    policy: ApprovalPolicy
    audit: AuditSink
    request_id: str
    prompt: Prompt
    tools: dict[str, VeridicTool] = field(default_factory=dict)
    awaiting: _Awaiting = field(default_factory=_Awaiting)
    code_answers: set[str] = field(default_factory=set)
    """Texts of a structured output's tool messages that were code's (trusted) when made:
    LangChain keeps them as plain ``str``, so the later model calls know them by their text."""
    warned: set[tuple[str | None, str, str]] = field(default_factory=set)
    """The tool messages (thread, call id, digest) whose fencing was logged already."""
    written: _Written = field(default_factory=_Written)
    """The tool answers these tools wrote, which each model call knows by their digest."""

    def run(self, name: str, arguments: Mapping[str, object] | str, call_id: str | None) -> str:
        """Run one call of ``name`` through :func:`~veridic.run.executor.execute`."""
        self.awaiting.answered(call_id)
        confirm = self._confirm(name, arguments, call_id)
        if confirm is _confirmed and self._confirmed_before(
            name, arguments, call_id, self._records()
        ):
            return _answer(
                name, self.refuse(name, arguments, asked=False, call_id=call_id), self.written
            )
        if self.view.tool(name).is_async:
            result = _run_coroutine(
                self._aexecute(name, arguments, confirm, call_id), f"tool {name!r} is async"
            )
        else:
            result = execute(
                self.view,
                name,
                arguments,
                policy=self.policy,
                audit=self.audit,
                request_id=self.request_id,
                prompt=self.prompt,
                confirm=confirm,
                call_id=call_id or "",
            )
        return _answer(name, result, self.written)

    async def arun(
        self, name: str, arguments: Mapping[str, object] | str, call_id: str | None
    ) -> str:
        """:meth:`run` for async code, through :func:`~veridic.run.executor.aexecute`."""
        self.awaiting.answered(call_id)
        confirm = self._confirm(name, arguments, call_id)
        if confirm is _confirmed and self._confirmed_before(
            name, arguments, call_id, await self._arecords()
        ):
            refused = await self.arefuse(name, arguments, asked=False, call_id=call_id)
            return _answer(name, refused, self.written)
        return _answer(name, await self._aexecute(name, arguments, confirm, call_id), self.written)

    def _confirmed_before(
        self,
        name: str,
        arguments: Mapping[str, object] | str,
        call_id: str | None,
        records: Sequence[AuditRecord],
    ) -> bool:
        """Whether this approved call is on record as approved already: its checkpoint ran again.

        LangGraph runs a thread again from any checkpoint (time travel, a retried request
        that names the checkpoint, a queue that delivers twice), and the one that waited
        for the reviewer carries the reviewer's answer, so the approved call would run a
        second time. A record of this call id, tool and arguments under this prompt,
        approved by the user, was written by an earlier run of the same answer. The
        arguments count: some models and servers (scripted test models, OpenAI-compatible
        local servers) give every turn's first call the same id, so a later turn's call,
        approved by the reviewer in its turn, shares an earlier call's id. The call is
        refused, with a warning; the first run stands.
        """
        done = any(
            record.approval is ApprovalMode.USER_CONFIRMED
            for record in of_call(
                records,
                call_id,
                tool=name,
                arguments_sha256=arguments_sha256(arguments),
                prompt_sha256=self.prompt.sha256,
            )
        )
        if done:
            _log.warning(
                "the call %s of %s was approved and run already in request %s (a checkpoint "
                "that waited for the reviewer ran again), so it is refused: an approval is "
                "good for one run (a call with the id and arguments of one run already is "
                "taken for its replay): to run it again, ask the model for a new call",
                quoted(call_id),
                quoted(name),
                clip(self.request_id),
            )
        return done

    def _records(self) -> tuple[AuditRecord, ...]:
        """The audit store's records of this request, read before an approved call runs."""
        self._check_readable()
        return recorded(self.audit, self.request_id, "a LangChain tool")

    async def _arecords(self) -> tuple[AuditRecord, ...]:
        """:meth:`_records` for async code."""
        self._check_readable()
        return await arecorded(self.audit, self.request_id, "a LangChain tool")

    def _check_readable(self) -> None:
        """Refuse an approved call when the audit store cannot say whether it ran already.

        Raises:
            VeridicError: the store has neither ``records`` nor ``arecords``.
        """
        if not any(callable(getattr(self.audit, m, None)) for m in ("records", "arecords")):
            raise VeridicError(
                f"an approved call of request {clip(self.request_id)} cannot run: the audit store "
                f"{type(self.audit).__name__} cannot be asked for the request's records, and "
                "without them a checkpoint run again would run the approved call twice; "
                "nothing ran. Give structured_tools() an audit store (SQLiteAuditSink, "
                "PostgresAuditSink, AsyncPostgresAuditSink) or add records(request_id) to yours"
            )

    async def _aexecute(
        self,
        name: str,
        arguments: Mapping[str, object] | str,
        confirm: Callable[[ApprovalRequest], bool] | None,
        call_id: str | None,
    ) -> CallResult:
        return await aexecute(
            self.view,
            name,
            arguments,
            policy=self.policy,
            audit=self.audit,
            request_id=self.request_id,
            prompt=self.prompt,
            confirm=confirm,
            call_id=call_id or "",
        )

    def _confirm(
        self, name: str, arguments: Mapping[str, object] | str, call_id: str | None
    ) -> Callable[[ApprovalRequest], bool] | None:
        grant = _GRANT.get()
        if grant is not None and grant.claim(call_id, name, call_digest(name, arguments)):
            return _confirmed
        if self.policy.request(name).pending:
            _log.warning(
                "tool %s needs the user's approval and ran without the approval middleware's "
                "grant for this call (request %s), so it is denied: pass "
                "approval_middleware(tools) to create_agent(middleware=[...]) and answer its "
                "interrupt",
                quoted(name),
                clip(self.request_id),
            )
        return None

    def refuse(
        self, name: str, arguments: object, *, asked: bool = True, call_id: str | None = None
    ) -> CallResult:
        """Record a call that must not run (the reviewer rejected it, or no such tool).

        The record is written by :func:`~veridic.run.executor.execute` itself, with a
        policy under which the call cannot run: the view refuses a name it does not
        expose, and an exposed tool is asked about and refused (``DENIED``), even when
        the request's own rules would now let it run without asking. ``asked=False``
        records that nobody answered (a call the run never brought to its tool), not
        that the user refused. ``call_id`` is the model's id of the call, for the record.
        """
        status = self.view.status(name) if isinstance(name, str) else None
        if status is not None and status.tool is not None and status.tool.is_async:
            refusal = self.arefuse(name, arguments, asked=asked, call_id=call_id)
            return _run_coroutine(refusal, f"tool {name!r} is async")
        return execute(
            self.view,
            name,
            _given(arguments),
            policy=self._no_run_policy(name),
            audit=self.audit,
            request_id=self.request_id,
            prompt=self.prompt,
            confirm=_refused if asked else None,
            call_id=call_id or "",
        )

    async def arefuse(
        self, name: str, arguments: object, *, asked: bool = True, call_id: str | None = None
    ) -> CallResult:
        """:meth:`refuse` for async code."""
        return await aexecute(
            self.view,
            name,
            _given(arguments),
            policy=self._no_run_policy(name),
            audit=self.audit,
            request_id=self.request_id,
            prompt=self.prompt,
            confirm=_refused if asked else None,
            call_id=call_id or "",
        )

    def unanswered(self, state: AgentState[Any]) -> list[ToolCall]:
        """The view's calls of earlier turns that never reached veridic, logged; to record.

        Each is recorded ``DENIED`` by the caller (nobody confirmed it, nothing of it ran):
        another middleware answered it in the tool's place (a call limit's "limit
        exceeded", after the user may even have approved it) or ended the run before it.
        Only the calls of ``state``'s own conversation: one request's tools may serve two
        threads (``agent.batch``, a second conversation), and a call waiting for the
        reviewer in one is not over when the other calls its model.
        """
        messages = state.get("messages") or []
        mine = {
            call["id"]
            for message in messages
            if isinstance(message, AIMessage)
            for call in message.tool_calls
            if call["id"]
        }
        calls = self.awaiting.take(mine)
        if calls:
            _log.warning(
                "the calls %s of request %s never reached their veridic tool (another "
                "middleware answered them, or ended the run before them), so they are "
                "recorded denied: nothing of them ran",
                ", ".join(f"{quoted(call['id'])} of {clip(call['name'])}" for call in calls),
                clip(self.request_id),
            )
        return calls

    def _no_run_policy(self, name: str) -> ApprovalPolicy:
        if not isinstance(name, str) or not self.view.status(name).exposed:
            return self.policy  # the view refuses the name before any policy is asked
        return self.policy.asking()

    def check_model_request(self, request: ModelRequest[Any]) -> None:
        """Refuse a model call whose system message or tool list is not this binding's.

        Raises:
            ProvenanceError: the system message is not the trusted system text of
                the bound prompt, or another message of the call gives instructions
                (a system or developer message among the conversation's); in report
                mode: logged, and the call goes on.
            ToolCouplingError: the tools offered to the model are not exactly this
                view's, as :func:`make_tools` made them; or the system message, let pass
                in report mode, lacks the view's capability section while a tool's text
                from outside is not pinned (in either mode, as the gateway).
            VeridicError: the call's model settings would send instructions, tools or
                history of their own (:meth:`_check_settings`).
            ProvenanceError: a structured output is described by text that is not code
                text (:meth:`_check_response_format`).
        """
        # structured_tools() checked its parts and that it holds only its system message:
        # its text, not Prompt.system, which would check them again on every model call.
        expected = self.prompt.messages[0].content
        message = request.system_message
        content: object = None if message is None else message.content
        if content != expected:
            report(
                content if isinstance(content, str) else repr(content),
                f"the system message of a LangChain model call (request {clip(self.request_id)}; "
                "it must be the system text of the Prompt given to structured_tools(), sent "
                "unchanged)",
            )
            self._check_labelled(content)
        self._check_conversation(request.messages)
        self._check_settings(request.model_settings)
        self._check_response_format(request.response_format)
        offered = list(request.tools)
        ours = list(self.tools.values())
        names = [t.name if isinstance(t, BaseTool) else str(t.get("name")) for t in offered]
        if len(offered) == len(ours) and {id(t) for t in offered} == {id(t) for t in ours}:
            changed = [tool.name for tool in ours if not tool.matches_view(self.view)]
            if not changed:
                return
            problem = f"changed after structured_tools() made them: {', '.join(changed)}"
        else:
            extra = sorted(set(names) - set(self.tools))
            missing = sorted(set(self.tools) - set(names))
            foreign = sorted(
                tool.name
                for tool in offered
                if isinstance(tool, BaseTool)
                and tool.name in self.tools
                and tool is not self.tools[tool.name]
            )
            problems = [
                f"{label}: {', '.join(found)}"
                for label, found in (
                    ("offered but not in the view", extra),
                    ("in the view but not offered", missing),
                    ("not the tool structured_tools() made", foreign),
                )
                if found
            ]
            problem = "; ".join(problems) or "a tool is offered more than once"
        raise ToolCouplingError(
            f"the tools a model call of the LangChain agent (request {clip(self.request_id)}) "
            f"offers are not the view's ({problem}): the model would be shown tools the "
            "capability section and dispatch do not have; give create_agent exactly the "
            "tools structured_tools(view, ...) returned, and register any other tool in the "
            "veridic registry"
        )

    def _check_labelled(self, content: object) -> None:
        """Refuse a system message without the view's capability section, as the gateway does.

        A system message other than the prompt's is a provenance report, which report mode
        logs and lets pass; the gateway refuses the section's absence in either mode when
        the tool list carries outside text no pin covers
        (:func:`~veridic.run._unlabelled.refuse_unlabelled_outside_text`), and so does this.
        """
        section = self.view.capability_section().strip()
        if not (isinstance(content, str) and section and section in content):
            refuse_unlabelled_outside_text(f"request {clip(self.request_id)}", self.view)

    def _check_settings(self, settings: Mapping[str, object]) -> None:
        """Refuse model settings that would send other instructions, tools or history.

        ``create_agent`` passes a model call's ``model_settings`` (set by a middleware)
        to the chat model as keyword arguments, and the provider integrations send them
        with the request: Anthropic's ``system`` replaces the checked system message,
        OpenAI's ``instructions`` or ``previous_response_id`` adds instructions or history
        nobody checked, ``functions`` offers tools beside the view's, and ``extra_body`` is
        merged over the request the integration built.

        Raises:
            VeridicError: a key of ``model_settings`` (or of its ``extra_body``) sets
                what veridic owns.
        """
        extra = settings.get("extra_body")
        clash = [f"model_settings[{key!r}]" for key in sorted(owned_keys(settings))] + [
            f"model_settings['extra_body'][{key!r}]" for key in sorted(owned_keys(extra))
        ]
        if clash:
            raise VeridicError(
                f"a model call of the LangChain agent (request {clip(self.request_id)}) sets "
                f"{', '.join(clash)}, which the provider sends in place of (or beside) the "
                "trusted system prompt, the view's tools and the conversation: leave these "
                "keys out of the middleware that sets them; the system prompt comes from "
                "system_prompt(view, ...), the tools from structured_tools(view, ...)"
            )

    def _check_response_format(self, response_format: object) -> None:
        """Refuse a structured output whose description is not code text.

        ``create_agent(response_format=...)`` adds an output tool per schema to the tools
        the model is offered (``ToolStrategy``), or sends the schema as the provider's
        response format (``ProviderStrategy``; a bare schema is either, as the model
        allows), after this middleware saw the request. The model reads the schema's
        description as instructions beside the capability section: the output tool's, and
        the one in its JSON schema (which a class's ``json_schema_extra`` may set). The rule
        is the registry's, and the other adapters' (:mod:`._output_docs`): a class's
        docstring is code text, unless branded untrusted; a description given as a value
        may have been read from anywhere, so it must be trusted text (``instruction(...)``).
        The descriptions of the schema's properties are not checked (a limit the docs
        state).

        A ``ToolStrategy`` answers the model's call of its output tool with a tool message
        of its own: ``tool_message_content`` when the output is valid, and
        ``handle_errors`` (given as text) when it is not. Each is code's word to the model,
        so each given as text must be trusted text too; every other text of those messages
        (LangChain's defaults, a function's) is fenced (:func:`_fenced_answers`).

        Raises:
            ProvenanceError: a description is neither, or a ``ToolStrategy``'s message is
                not trusted text (in report mode: logged).
        """
        if isinstance(response_format, ToolStrategy):
            self._check_strategy_messages(response_format)
        for name, schema, texts in _output_schemas(response_format):
            for text in texts:
                if not text or code_described(text, schema):
                    continue
                report(
                    text,
                    f"the description of the structured output {clip(name)} of a LangChain model "
                    f"call (request {clip(self.request_id)}; create_agent(response_format=...) "
                    "offers the model an output tool, or sends a response format, described by "
                    "it, and the model reads it as instructions beside the capability section: "
                    "describe the output with a class's docstring (a pydantic model, a "
                    "dataclass, a TypedDict), or give a JSON schema's description as "
                    "instruction(...))",
                )

    def _check_strategy_messages(self, strategy: ToolStrategy[Any]) -> None:
        """Refuse a ``ToolStrategy`` message, given as text, that is not trusted text."""
        given = (
            ("tool_message_content", strategy.tool_message_content),
            ("handle_errors", strategy.handle_errors),
        )
        for field_name, text in given:
            if isinstance(text, str) and not is_trusted(text):
                report(
                    text,
                    f"ToolStrategy({field_name}=...) of the structured output of a LangChain "
                    f"model call (request {clip(self.request_id)}; LangChain answers the model's "
                    "call of the output tool with it, as a tool message, unfenced, and the "
                    "model reads it as code's word: write it in code as instruction(...), or "
                    "leave it out for LangChain's own)",
                )

    def _check_conversation(self, messages: Sequence[BaseMessage]) -> None:
        """Refuse a message after the system prompt that a provider sends as instructions.

        LangChain sends a ``SystemMessage`` anywhere in the conversation as a system
        message (Chat Completions) or merges it into the system prompt (Anthropic), and a
        ``ChatMessage`` with its role as written, ``developer`` included. The conversation
        is what the application passed in (chat history from a client, a stored thread)
        and what the run added, none of it checked, so only user, assistant and tool
        messages may follow the prompt's own system text.
        """
        for index, message in enumerate(messages):
            role = _instruction_role(message)
            if role is None:
                continue
            content: object = message.content
            report(
                content if isinstance(content, str) else repr(content),
                f"messages[{index}] of a LangChain model call (request {clip(self.request_id)}; a "
                f"{type(message).__name__} with the role {role!r}, which the model reads as "
                "instructions, and only the system text of the Prompt given to "
                "structured_tools() may give them: pass outside text in a user message)",
            )


def _output_schemas(
    response_format: object,
) -> list[tuple[str, object, tuple[str | None, ...]]]:
    """Each schema of a model call's ``response_format``: its name, the schema, and the
    descriptions of it the model reads (the output tool's, and its JSON schema's own)."""
    if response_format is None:
        return []
    if isinstance(response_format, ToolStrategy):
        specs = list(response_format.schema_specs)
    elif isinstance(response_format, ProviderStrategy):
        specs = [response_format.schema_spec]
    else:
        # A bare schema or an AutoStrategy: LangChain makes it one of the two, with specs
        # made as these are.
        schema: Any = (  # a schema LangChain took when the agent was made
            response_format.schema if isinstance(response_format, AutoStrategy) else response_format
        )
        specs = list(ToolStrategy(schema).schema_specs)
    return [
        (spec.name, spec.schema, (spec.description, spec.json_schema.get("description")))
        for spec in specs
    ]


def _output_answers(request: ModelRequest[Any]) -> tuple[ModelRequest[Any], set[str]]:
    """The model call, and the texts of its structured output's tool messages that are
    code's: the ``ToolStrategy``'s own, when trusted (checked before), and what its
    ``handle_errors`` function returns that is trusted text, as it returns it.

    :func:`_fenced_answers` fences every other text of those messages.
    """
    kept: set[str] = set()
    strategy = request.response_format
    if not isinstance(strategy, ToolStrategy):
        return request, kept
    for text in (strategy.tool_message_content, strategy.handle_errors):
        if isinstance(text, str) and is_trusted(text):
            kept.add(str(text))
    told = strategy.handle_errors
    if not callable(told) or isinstance(told, type):
        return request, kept  # text, a flag or exception classes: LangChain's own words

    def keeping(error: Exception) -> str:
        text = told(error)
        if is_trusted(text):
            kept.add(str(text))
        return text

    changed = copy.copy(strategy)
    changed.handle_errors = keeping
    return request.override(response_format=changed), kept


def _fenced_answers(
    response: ModelResponse[Any], kept: Set[str], written: _Written
) -> ModelResponse[Any]:
    """The model call's response, each tool message of its structured output fenced unless
    it is one of the ``kept`` texts (code's).

    ``create_agent`` answers the model's call of its output tool itself, in the model call,
    with a tool message of LangChain's words: ``Returning structured response: {output}``
    (``tool_message_content`` not given, and so for a bare schema or an ``AutoStrategy``),
    ``Error: {error}\\n Please fix your mistakes.`` (``handle_errors`` ``True`` or exception
    types), or what a ``handle_errors`` function returned. Each quotes the model's output or
    text only known then, and reached the model, as a tool result, unfenced; each now
    reaches it as a data block labelled ``structured_output:<tool>``, which the prompt's
    preamble explains, whatever LangChain's words are. Each block is remembered in
    ``written``, so each later model call knows it by its digest.
    """
    fenced = [
        _fenced_answer(message, kept, written) if isinstance(message, ToolMessage) else message
        for message in response.result
    ]
    return replace(response, result=fenced)


def _fenced_answer(message: ToolMessage, kept: Set[str], written: _Written) -> ToolMessage:
    content = message.content
    if isinstance(content, str) and content in kept:
        return message
    label = _output_label(message.name)
    block = _fenced_content(label, content, _call_of(message), written)
    return message.model_copy(update={"content": block})


def _output_label(tool: str | None) -> str:
    """The data label of a structured output's tool message: ``structured_output:<tool>``,
    or ``structured_output`` alone when the tool's name cannot stand in a label.

    The name is the output schema's (its class name or title), which no one checked as a
    label: one over 182 characters, or holding a line break or an invisible character,
    made :func:`~veridic.text.fence.fence` raise after the model had answered, and the
    run failed with the answer lost. The message still carries the name as LangChain
    wrote it; only the label leaves it out.
    """
    named = f"structured_output:{tool or 'output'}"
    return named if _is_label(named) else "structured_output"


def _fenced_unparsed(request: ModelRequest[Any]) -> ModelRequest[Any]:
    """The model call, each tool message that answers a call LangChain could not parse
    fenced as a data block labelled ``unparsed_tool_call``.

    ``create_agent`` answers such a call (``invalid_tool_calls``, which no tool runs) in
    every later model call's messages, in its own words that quote the model's name and
    id for it: ``Tool call {name} with id {id} could not be executed``. It is fenced here,
    in each model call's messages on their way to the model (the thread keeps LangChain's
    message as written); the label is fixed, since the name is the model's text.
    """
    messages: list[AnyMessage] = []
    unparsed: set[str | None] = set()  # ids of the latest turn's calls LangChain could not parse
    for message in request.messages:
        if isinstance(message, AIMessage):
            unparsed = {call["id"] for call in message.invalid_tool_calls if call.get("id")}
        elif isinstance(message, ToolMessage) and message.tool_call_id in unparsed:
            # Only the turn's own answers: a later call may reuse the id (ids are the model's).
            message = _fenced_note(message)
        messages.append(message)
    return request.override(messages=messages)


def _fenced_note(message: ToolMessage) -> ToolMessage:
    block = _fenced_content("unparsed_tool_call", message.content, _call_of(message))
    return message.model_copy(update={"content": block})


_Content = str | list[str | dict[Any, Any]]
"""A LangChain message's content: a text, or a list of content parts."""
_IMAGE_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "image_url": frozenset({"type", "id", "image_url"}),
    "image": frozenset(
        {"type", "id", "base64", "url", "file_id", "mime_type", "source_type", "data", "source"}
    ),
}
"""The keys of an image part veridic sends as it is: OpenAI's ``image_url``, LangChain's
standard ``image`` (v1, and v0's ``source_type``), Anthropic's ``image`` with its ``source``.
Each value must be an address, base64 data, an id or an image's media type
(:data:`_IMAGE_VALUES`): nothing a model reads as text."""
_IMAGE_URL_KEYS: Final = frozenset({"url", "detail"})
_IMAGE_SOURCE_KEYS: Final = frozenset({"type", "media_type", "data", "url", "file_id"})
_IMAGE_SOURCE_TYPES: Final = frozenset({"base64", "url", "file"})
_V0_SOURCE_TYPES: Final = frozenset({"url", "base64", "id"})
_IMAGE_DETAILS: Final = frozenset({"auto", "low", "high", "original"})
_RASTER_TYPES: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/heic", "image/heif"}
)
"""The media types an image part may declare. A provider sends inline data under the type it
is given, and one (Gemini) reads ``text/plain`` or ``text/html`` as text; an SVG is XML text.
None of these is a picture, so none is let past the blocks."""
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}", re.ASCII)
_DATA_URL: Final = re.compile(r"data:(image/[a-z]+);base64,([A-Za-z0-9+/]*={0,2})", re.ASCII)
_WEB_URL: Final = re.compile(r"https?://[!-~]+", re.ASCII)
_FILE_ID: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,256}", re.ASCII)


def _is_image_url(value: object) -> bool:
    """An ``http(s)`` address (the provider fetches an image), or a ``data:`` URL of base64
    data of an image type (:data:`_RASTER_TYPES`): a ``data:`` URL of text is that text."""
    if not isinstance(value, str):
        return False
    if _WEB_URL.fullmatch(value):
        return True
    found = _DATA_URL.fullmatch(value)
    return found is not None and found[1] in _RASTER_TYPES


def _is_base64(value: object) -> bool:
    """Base64 characters only: words (spaces, punctuation) where the data belongs are not."""
    return isinstance(value, str) and _BASE64.fullmatch(value) is not None


def _is_file_id(value: object) -> bool:
    return isinstance(value, str) and _FILE_ID.fullmatch(value) is not None


def _is_image_type(value: object) -> bool:
    return value in _RASTER_TYPES


def _is_openai_image(value: object) -> bool:
    """OpenAI's ``image_url``: an address, or ``{"url": ..., "detail": ...}``."""
    if not isinstance(value, Mapping):
        return _is_image_url(value)
    return (
        set(value) <= _IMAGE_URL_KEYS
        and _is_image_url(value.get("url"))
        and value.get("detail", "auto") in _IMAGE_DETAILS
    )


def _is_anthropic_source(value: object) -> bool:
    """Anthropic's ``source``: base64 data, an address or a file, each of an image."""
    if not isinstance(value, Mapping) or not set(value) <= _IMAGE_SOURCE_KEYS:
        return False
    if value.get("type") not in _IMAGE_SOURCE_TYPES:
        return False
    checks = {**_IMAGE_VALUES, "media_type": _is_image_type}
    return all(checks[key](item) for key, item in value.items() if key != "type")


_IMAGE_VALUES: Final[Mapping[str, Callable[[object], bool]]] = {
    "id": _is_file_id,
    "file_id": _is_file_id,
    "url": _is_image_url,
    "base64": _is_base64,
    "data": _is_base64,
    "mime_type": _is_image_type,
    "source_type": lambda value: value in _V0_SOURCE_TYPES,
    "image_url": _is_openai_image,
    "source": _is_anthropic_source,
}
"""What each key of an image part (but its ``type``) may hold (:func:`_plain_image`)."""


def _fenced_content(
    label: str,
    content: _Content,
    where: str,
    written: _Written | None = None,
    *,
    edited_in_place: bool = False,
) -> _Content:
    """``content`` with each of its texts a data block under ``label``; images as they are.

    A text is one block. A list of content parts (a tool message with an image, a middleware's
    or a stored thread's) stays a list: each text part becomes a text part holding the block of
    its text, in its place, and an image part is sent as the provider's own part, outside the
    blocks (:func:`_plain_image`). The list was once sent as its JSON, in one block: the model
    read a part's words quoted in JSON and an image as base64 characters. ``edited_in_place``:
    a text that is a whole block a middleware edited inside (a redaction) is fenced as the text
    it now holds, not twice. ``written`` remembers each block made.

    Raises:
        VeridicError: a part is neither text nor a plain image (audio, a document, an image
            with a caption or other keys): nothing of it could be fenced, and the model is not
            called; ``where`` names the message.
    """

    def block(text: str) -> str:
        found = _whole_block(text) if edited_in_place else None
        fenced = fence(label, text if found is None else found.text)
        return fenced if written is None else written.add(fenced)

    if isinstance(content, str):
        return block(content)
    parts: list[str | dict[Any, Any]] = []
    for index, part in enumerate(content):
        text = _part_text(part)
        if text is not None:
            parts.append({"type": "text", "text": block(text)})
        elif _plain_image(part):
            parts.append(part)
        else:
            raise _unfenceable_part(part, index, where)
    return parts


def _part_text(part: object) -> str | None:
    """The text of a text part (a ``str``, or ``{"type": "text", "text": ...}``), or ``None``."""
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping) and part.get("type") == "text":
        text = part.get("text")
        return text if isinstance(text, str) else None
    return None


def _plain_image(part: object) -> bool:
    """Whether ``part`` is an image part of a known shape holding no text (:data:`_IMAGE_KEYS`,
    each value as :data:`_IMAGE_VALUES` allows)."""
    if not isinstance(part, Mapping):
        return False
    kind = part.get("type")
    keys = _IMAGE_KEYS.get(kind) if isinstance(kind, str) else None
    if keys is None or not set(part) <= keys:
        return False
    return all(_IMAGE_VALUES[key](value) for key, value in part.items() if key != "type")


def _unfenceable_part(part: object, index: int, where: str) -> VeridicError:
    """The refusal of a content part that is neither text nor a plain image."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    shown = (
        f"of type {quoted(kind)} with the keys {first_few(sorted(map(str, part)))}"
        if isinstance(part, Mapping)
        else f"of Python type {type(part).__name__}"
    )
    return VeridicError(
        f"{where} holds a content part (part {index}, {shown}) that veridic can neither fence "
        "as data nor send as an image: a part other than text may carry words the model reads "
        "beside the data blocks; the model was not called: answer with text, or with images "
        "as image parts (image_url, or image) holding only an http(s) address or a data: URL "
        "of an image, base64 data, a file id and an image's media type (image/png, "
        "image/jpeg, image/gif, image/webp, image/heic or image/heif)"
    )


def _call_of(message: ToolMessage | FunctionMessage, tool: str | None = None) -> str:
    """The message as an error names it: the call it answers and its tool."""
    if isinstance(message, FunctionMessage):
        return f"the function message of {quoted(message.name)}"
    named = tool if tool is not None else message.name
    return f"the tool message of the call {quoted(message.tool_call_id)} of {quoted(named)}"


_SUMMARY_LABEL: Final = "conversation_summary"
"""The data label of ``SummarizationMiddleware``'s summary, as the model gets it."""


def _is_summary(message: BaseMessage) -> bool:
    """Whether ``message`` is ``SummarizationMiddleware``'s summary: LangChain marks the user
    message it writes with ``additional_kwargs={"lc_source": "summarization"}``."""
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == "summarization"
    )


_Answer = TypeVar("_Answer", ToolMessage, FunctionMessage)
"""A message the model reads as a tool's (or a legacy function's) answer."""
_WARNED_MOST: Final = 1024
"""How many fenced tool messages :attr:`Binding.warned` remembers before it starts over (one
binding may serve many threads; a message forgotten is warned of again, no more)."""


def _fenced_tool_messages(
    request: ModelRequest[Any], binding: Binding, kept: Set[str]
) -> ModelRequest[Any]:
    """The model call, every tool message in it a data block veridic wrote, as it is sent.

    A tool result leaves a veridic tool as a data block, but the conversation a model call
    carries is what every middleware made of it: one listed before veridic's rewrites a
    tool message in its ``wrap_tool_call`` (unwraps it, summarises it), its ``before_model``
    or ``wrap_model_call`` (a summary, a placeholder), or answers a call in the tool's place
    (``after_model``, a call limit, LangChain's rejection): that text reached the model as
    written, outside text among it. This hook is the innermost ``wrap_model_call``
    (:func:`_check_innermost`), so what it sends is what the model reads: a tool message
    that is not one of veridic's answers to its call (:func:`_is_own_answer`) or code's text
    (``kept``, :attr:`Binding.code_answers`) is fenced here, in both modes, as a data
    block of its call's tool (``tool:<name>``; ``tool_result`` for a call of no tool of the
    view), and a warning names the call once. A block whose text a middleware edited in
    place (a redaction) is written again as the block of the text it now holds, not fenced
    twice. The thread keeps the message as the middleware wrote it; the audit record holds
    what the tool returned.

    ``SummarizationMiddleware`` replaces the old messages, tool results among them, with a
    user message a model wrote from them (:func:`_is_summary`): outside text in a model's
    words, which reached the model as the user's own. It is sent as a data block labelled
    ``conversation_summary``, LangChain's words before the summary with it; the thread keeps
    it as written.

    A ``FunctionMessage`` (the legacy role ``function``, which a provider sends as a
    function's answer) is never veridic's: its tools answer with tool messages. It is fenced
    in the same way, always, under ``tool_result``: its ``name`` is the message's own word,
    not a call the model made that veridic could match it to. Fenced rather than refused: it
    is data that lost its fence, as a rewritten tool message is, and a stored thread of an
    older LangChain program keeps working.
    """
    registered = {*binding.tools, *(status.name for status in binding.view.withheld())}
    outputs = {name for name, _, _ in _output_schemas(request.response_format)}
    code = kept | binding.code_answers
    messages: list[AnyMessage] = []
    called: dict[str, str] = {}  # the latest turn's call ids, with the tools they name
    changed = False
    for message in request.messages:
        if isinstance(message, AIMessage):
            called = {c["id"]: c["name"] for c in message.tool_calls if c["id"]}
        elif isinstance(message, ToolMessage):  # a ToolMessageChunk too, sent as one
            tool = called.get(message.tool_call_id)
            labels = _own_labels(tool, binding.tools.keys(), registered, outputs)
            if not _is_code_answer(message, labels, tool, code, binding.written):
                message = _fenced_foreign(message, tool, binding)
                changed = True
        elif isinstance(message, FunctionMessage):  # a FunctionMessageChunk too
            message = _fenced_foreign(message, None, binding)
            changed = True
        elif _is_summary(message):
            summary = _fenced_content(_SUMMARY_LABEL, message.content, "the conversation summary")
            message = message.model_copy(update={"content": summary})
            changed = True
        messages.append(message)
    return request.override(messages=messages) if changed else request


def _own_labels(
    tool: str | None, exposed: Set[str], registered: Set[str], outputs: Set[str]
) -> frozenset[str]:
    """The labels veridic gives an answer to a call of ``tool`` (``None``: a call of no turn).

    Only these: a label is shown to the model in the block's opening line, outside the
    marked lines, so a block under ``tool:<any words>``, or under a fixed label veridic
    writes for another kind of call, is not veridic's answer to this call. ``tool:<name>``
    for a tool registered with the view's registry (the view's tools: an answer, a refusal,
    a reviewer's rejection; a tool it does not expose is refused under it too),
    ``structured_output:<name>`` (or ``structured_output``, :func:`_output_label`) for a
    call of the structured output's tool, ``tool_result`` for a refusal of a call of a tool
    the view does not run, and ``unparsed_tool_call`` for an answer to a call LangChain could
    not parse (which no turn's ``tool_calls`` holds).
    """
    if tool is None:
        return frozenset({"tool_result", "unparsed_tool_call"})
    labels: set[str] = set()
    if tool in registered:
        labels.add(f"tool:{tool}")
    if tool in outputs:
        labels.add(_output_label(tool))
    elif tool not in exposed:
        labels.add("tool_result")
    return frozenset(labels)


def _is_code_answer(
    message: ToolMessage, labels: Set[str], tool: str | None, kept: Set[str], written: _Written
) -> bool:
    """Whether the tool message is veridic's answer to its call of ``tool`` (under one of
    ``labels``), or a structured output's text that was code's (``kept``)."""
    content = message.content
    if not isinstance(content, str):
        return False
    text = readable(content)  # its characters, which the model is sent, not what its type says
    return text in kept or _is_own_answer(text, labels, tool, written)


def _is_own_answer(content: str, labels: Set[str], tool: str | None, written: _Written) -> bool:
    """Whether ``content`` is a tool message as veridic writes one for a call of ``tool``:
    a whole data block, exactly as :func:`~veridic.text.fence.fence` writes it, under one
    of ``labels`` (:func:`~veridic.text.fence._is_own_block`, the rule the Agents SDK's
    adapter keeps too); or the note of a reviewer's edit of that call (:func:`_noted_edit`):
    the notice naming ``tool``, the block of the arguments that ran, and the tool's block.

    The notice names the tool outside any block, so it is veridic's only with the call's
    own tool there: any other words in its place would reach the model unfenced.
    """
    if _is_own_block(content, labels, "datamark", written):
        return True
    if tool is None or f"tool:{tool}" not in labels:
        return False
    notice = _edit_notice(tool)
    if not content.startswith(notice):
        return False
    if written.holds(content):
        return True  # a note this binding wrote (:func:`_noted_edit`), remembered whole
    ran, _, answer = content[len(notice) :].partition(_EDIT_GAP)
    return _is_own_block(ran, {f"tool_call:{tool}"}, "datamark") and _is_own_block(
        answer, labels, "datamark", written
    )


def _fenced_foreign(message: _Answer, tool: str | None, binding: Binding) -> _Answer:
    """``message`` as a data block of its call's tool, and a warning (once) that says so."""
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    label = f"tool:{tool}" if tool in binding.tools else "tool_result"
    if isinstance(message, ToolMessage):
        said, call = "tool message of the call", message.tool_call_id
    else:
        said, call = "function message of", message.name
    key = (_thread(), f"{said} {call}", hashlib.sha256(text.encode("utf-8", "replace")).hexdigest())
    if key not in binding.warned:
        if len(binding.warned) >= _WARNED_MOST:
            binding.warned.clear()
        binding.warned.add(key)
        _log.warning(
            "the %s %s in a model call of request %s is not a data block "
            "veridic wrote (a middleware listed before veridic's replaced or added it), so the "
            "model gets it as a data block labelled %s; list before approval_middleware only "
            "middleware that keeps a tool result's block whole",
            said,
            quoted(call),
            clip(binding.request_id),
            label,
        )
    # A block edited in place is fenced as the text it holds now, once.
    where = _call_of(message, tool) + f" in a model call of request {clip(binding.request_id)}"
    fenced = _fenced_content(label, content, where, edited_in_place=True)
    return message.model_copy(update={"content": fenced})


_MODEL_CALLS: Final = frozenset({"_execute_model_sync", "_execute_model_async"})
"""The names of ``create_agent``'s own model call, the handler the innermost middleware gets."""


def _check_innermost(handler: object, request_id: str) -> None:
    """Refuse to check a model call that another middleware can still change afterwards.

    ``create_agent`` runs a model call through the ``wrap_model_call`` of each middleware,
    the first listed outermost; the innermost is handed the agent's own model call, and
    any other the next middleware's. A middleware inside veridic's (``dynamic_prompt``,
    one that edits the messages, the tools or the settings) changed the request after
    the check: the system prompt the model read was not the one checked. Recognised by
    the name LangChain gives its model call: when a version renames it, every model call
    is refused, never let through unchecked.

    Raises:
        VeridicError: the middleware is not the innermost of those that wrap model calls.
    """
    if getattr(handler, "__name__", None) in _MODEL_CALLS:
        return
    raise VeridicError(
        f"the approval middleware of request {clip(request_id)} is not the last middleware that "
        "wraps the model call, so another one could change the call (its system prompt, "
        "messages, tools or settings) after veridic checked it; the model was not called: "
        "give create_agent(middleware=[...]) the approval_middleware listed last, nearest "
        "the model"
    )


class _RefusedProvenance(ProvenanceError, ModelError):
    """A model call refused for its provenance, and a model error LangChain does not retry."""


class _RefusedCoupling(ToolCouplingError, ModelError):
    """A model call refused for its tools, and a model error LangChain does not retry."""


class _Refused(VeridicError, ModelError):
    """A model call refused, and a model error LangChain does not retry."""


_NOT_RETRIED: Final[dict[type[VeridicError], type[VeridicError]]] = {
    ProvenanceError: _RefusedProvenance,
    ToolCouplingError: _RefusedCoupling,
    VeridicError: _Refused,
}
"""Each error veridic raises through LangChain, by its class, and its non-retryable twin;
the twins of other classes (an ``AuditWriteError``) are made when first raised."""


def _not_retryable(kind: type[VeridicError]) -> type[VeridicError]:
    """``kind`` and a ``ModelError`` LangChain does not retry, in one class of ``kind``'s name."""
    made = _NOT_RETRIED.get(kind)
    if made is None:
        made = type(
            kind.__name__,
            (kind, ModelError),
            {
                "__module__": kind.__module__,
                "__qualname__": kind.__qualname__,
                "__reduce__": _reduce_twin,
            },
        )
        made = _NOT_RETRIED.setdefault(kind, made)
    return made


def _reduce_twin(self: VeridicError) -> str | tuple[object, ...]:
    """Pickle a twin made by :func:`_not_retryable` as its class and arguments.

    ``pickle`` finds a class by its module and name, which are those of the class the
    twin was made of: without this, an error raised through LangChain could not cross a
    process boundary (``it's not the same object as veridic.errors.AuditWriteError``).
    """
    kind = type(self).__mro__[1]
    reduced = super(type(self), self).__reduce__()
    if isinstance(reduced, str) or reduced[0] is not type(self):
        return reduced
    return (_twin, (kind, reduced[1]), *reduced[2:])


def _twin(kind: type[VeridicError], args: tuple[object, ...]) -> VeridicError:
    """An error of ``kind`` holding ``args``, raised as LangChain does not retry (unpickling:
    its attributes are set after, so its ``__init__``, whose parameters may differ from
    ``args``, is not called)."""
    error = _not_retryable(kind).__new__(_not_retryable(kind))
    error.args = args
    return error


@contextmanager
def _not_retried() -> Iterator[None]:
    """Raise veridic's error as one LangChain's retry middlewares raise at once.

    ``ModelRetryMiddleware`` and ``ToolRetryMiddleware`` retry every exception but a
    ``ModelError`` that says it is not retryable, and then, with their default
    ``on_failure="continue"``, return the error's text as the answer: listed before
    veridic's middleware (as the docs ask), the first turned a refused model call into an
    answer, and the second ran a tool call again whose handler had run but whose record
    could not be written (a write done once per attempt, none of them on record), and
    told the model of the failure instead of failing the run; the application's
    ``except`` never ran. LangChain's own provider errors inherit from the provider SDK's
    error and a ``ModelError``; veridic's do the same: each stays the error it was (same
    class name, message and attributes; ``except ProvenanceError`` or
    ``except AuditWriteError`` holds) and is a ``ModelError`` whose ``is_retryable`` is
    false.
    """
    try:
        yield
    except VeridicError as error:
        if not isinstance(error, ModelError):
            error.__class__ = _not_retryable(type(error))
        raise


def _instruction_role(message: BaseMessage) -> str | None:
    """The role of a message a provider reads as instructions, or ``None`` for any other."""
    if isinstance(message, SystemMessage) or message.type == "system":
        return "system"
    if isinstance(message, ChatMessage) and message.role not in ("user", "assistant"):
        return message.role  # "developer", "System", or a role no provider documents
    return None


def make_tools(binding: Binding) -> list[StructuredTool]:
    """One :class:`VeridicTool` per tool the view exposes, from its own tool specs."""
    for spec in binding.view.tool_specs("anthropic"):
        name = spec["name"]
        tool = VeridicTool(
            name=name,
            description=spec["description"],
            # A plain copy: LangChain and pydantic write into the schema dicts they are
            # given (per-call review builds the edit schema from it), and the view's own
            # are read-only. The model-call check compares it with the view's each time.
            args_schema=copy.deepcopy(spec["input_schema"]),
            handle_tool_error=True,
        )
        tool._veridic = binding
        binding.tools[name] = tool
    return list(binding.tools.values())


@dataclass(frozen=True, slots=True)
class _ModelCall:
    """The arguments of one invocation as LangChain received them, and its tool call id."""

    arguments: Mapping[str, object] | str
    tool_call_id: str | None


class VeridicTool(StructuredTool):
    """A tool of a view, run by veridic's executor.

    Its name, description and JSON schema are the view's tool spec, unchanged.
    LangChain does not validate the arguments (the schema is a JSON-schema dict);
    veridic's executor does, once, when the call runs.
    """

    _veridic: Binding | None = PrivateAttr(default=None)

    def matches_view(self, view: ToolView) -> bool:
        """Whether name, description and schema are still the view's tool spec."""
        status = view.status(self.name)
        tool = status.tool
        return (
            status.exposed
            and tool is not None
            and self.description == tool.description
            and self.args_schema == tool.input_schema
        )

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # One keyword for the whole call: a tool argument named ``config``, ``run_manager``
        # or ``callbacks`` would otherwise be taken by LangChain's own keywords.
        return (), {"veridic_call": _ModelCall(tool_input, tool_call_id)}

    def _run(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> str:
        call = kwargs["veridic_call"]
        if not isinstance(call, _ModelCall):
            raise VeridicError(
                f"tool {self.name!r} was run without its call ({type(call).__name__}): "
                "invoke it with tool.invoke(...) or through an agent"
            )
        return self._binding().run(self.name, call.arguments, call.tool_call_id)

    async def _arun(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> str:
        call = kwargs["veridic_call"]
        if not isinstance(call, _ModelCall):
            raise VeridicError(
                f"tool {self.name!r} was run without its call ({type(call).__name__}): "
                "invoke it with tool.ainvoke(...) or through an agent"
            )
        return await self._binding().arun(self.name, call.arguments, call.tool_call_id)

    async def ainvoke(
        self,
        input: str | dict[str, Any] | ToolCall,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        # StructuredTool runs a tool without a coroutine in a thread; this one has its own.
        return await BaseTool.ainvoke(self, input, config, **kwargs)

    def _binding(self) -> Binding:
        binding = self._veridic
        if binding is None:
            raise VeridicError(
                f"tool {self.name!r} is not bound to a view: make the tools with "
                "veridic.integrations.langchain.structured_tools(view, ...)"
            )
        return binding


def _answer(name: str, result: CallResult, written: _Written) -> str:
    """What the model reads: the value or the error, as a data block (the tool's output is data).

    The block is remembered in ``written``, so each later model call knows it as veridic's
    without rendering it again.

    Raises:
        ToolException: the call did not succeed; LangChain gives the model its text as
            the tool message, with status ``error``.
    """
    told = written.add(fence(f"tool:{name}", result.told))  # the value, or why not
    if result.error is not None:
        raise ToolException(told)
    return told


def _run_coroutine(coroutine: Coroutine[object, object, _T], what: str) -> _T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise VeridicError(
        f"{what} and was called synchronously inside a running event loop, where it cannot "
        "be awaited: run the agent with await agent.ainvoke(...)"
    )


# --- the approval middleware ------------------------------------------------------------


def interrupt_config(policy: ApprovalPolicy) -> dict[str, InterruptOnConfig]:
    """``interrupt_on`` for the tools whose calls ``policy`` will not decide alone."""
    config: dict[str, InterruptOnConfig] = {}
    for name in sorted(policy.view.names()):
        request = policy.request(name)
        if request.pending:
            config[name] = InterruptOnConfig(
                allowed_decisions=list(DECISIONS),
                description=_Description(request, policy.view),
            )
    return config


class _Description:
    """What the reviewer reads: the tool, why veridic asks, and the arguments."""

    def __init__(self, request: ApprovalRequest, view: ToolView) -> None:
        self._tool = request.tool
        self._view = view
        self._head = (
            f"{_PREFIX}: {request.why}.\n\nTool: {request.tool} ({request.kind}, "
            f"risk {request.risk.value}{', irreversible' if request.irreversible else ''})"
        )

    def __call__(self, tool_call: ToolCall, state: AgentState[Any], runtime: Runtime[Any]) -> str:
        """The description, the arguments last on one line with every unseen character shown.

        The arguments are those the handler will get, as the gateway's approvals show
        them (validated, with the defaults the model left out filled in), so the reviewer
        approves what runs; arguments the view refuses are shown as the model wrote them
        (the call is refused and recorded when it runs). JSON escapes control characters,
        and ``visible`` writes the rest a reviewer would not see as written (bidi
        overrides, line and paragraph separators, zero-width characters) as
        ``⟦U+XXXX⟧``, so no argument can reorder, hide or break the line the reviewer
        approves.
        """
        try:
            prepared = self._view.validate(self._tool, tool_call["args"])
        except VeridicError:
            # Shown as written: execute() refuses the call, and records it, when it runs.
            arguments: object = tool_call["args"]
        else:
            arguments = shown_arguments(prepared.arguments)
        shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=repr)
        return f"{self._head}\nArguments: {visible(shown, None)}"


class ApprovalState(_HumanInTheLoopState):
    """The human-in-the-loop state, and the calls of this turn a reviewer approved."""

    veridic_approved_tool_calls: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]


class ApprovalMiddleware(HumanInTheLoopMiddleware):
    """LangChain's human-in-the-loop middleware, configured from and answering to veridic.

    It interrupts for exactly the tools whose calls the policy will not decide alone
    (:func:`interrupt_config`), and turns each decision into veridic's approval:
    approve and edit give the call a grant (``USER_CONFIRMED``), reject and respond
    write a ``DENIED`` record. It also checks each model call (system message, tools)
    and refuses, with a record, a tool call of a name the agent has no tool for. A call
    of the view's tools that never reached its tool (another middleware answered it, or
    ended the run before it) is recorded ``DENIED`` when the next model call starts or
    the run ends.
    """

    state_schema = ApprovalState

    def __init__(self, binding: Binding, *, interrupt_mode: InterruptMode) -> None:
        super().__init__(
            interrupt_on=dict(interrupt_config(binding.policy)),
            description_prefix=_PREFIX,
            # LangChain's notice of an edit prints the arguments that ran, the model's own
            # among them, before the tool's data block and unmarked: veridic writes its own.
            edit_notice=None,
            interrupt_mode=interrupt_mode,
        )
        self._binding = binding

    @property
    def name(self) -> str:
        return "VeridicApprovalMiddleware"

    # --- model calls ---

    def wrap_model_call(
        self,
        request: ModelRequest[None],
        handler: Callable[[ModelRequest[None]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        with _not_retried():
            _check_innermost(handler, self._binding.request_id)
            self._binding.check_model_request(request)
            asked, kept = _output_answers(_fenced_unparsed(request))
            asked = _fenced_tool_messages(asked, self._binding, kept)
        response = handler(asked)
        self._binding.code_answers.update(kept)
        return _fenced_answers(response, kept, self._binding.written)

    async def awrap_model_call(
        self,
        request: ModelRequest[None],
        handler: Callable[[ModelRequest[None]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        with _not_retried():
            _check_innermost(handler, self._binding.request_id)
            self._binding.check_model_request(request)
            asked, kept = _output_answers(_fenced_unparsed(request))
            asked = _fenced_tool_messages(asked, self._binding, kept)
        response = await handler(asked)
        self._binding.code_answers.update(kept)
        return _fenced_answers(response, kept, self._binding.written)

    # --- calls that never reached a tool: recorded when the next model call starts or the run ends

    def before_model(self, state: AgentState[Any], runtime: Runtime[None]) -> None:
        for call in self._binding.unanswered(state):
            self._binding.refuse(call["name"], call["args"], asked=False, call_id=call["id"])

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[None]) -> None:
        for call in self._binding.unanswered(state):
            await self._binding.arefuse(call["name"], call["args"], asked=False, call_id=call["id"])

    def after_agent(self, state: AgentState[Any], runtime: Runtime[None]) -> None:
        self.before_model(state, runtime)

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[None]) -> None:
        await self.abefore_model(state, runtime)

    # --- batched mode: the decisions of one turn ---

    def after_model(self, state: AgentState[Any], runtime: Runtime[None]) -> dict[str, Any] | None:
        self._check_call_ids(state)
        self._expect(state)
        update, rejected = self._decided(state, runtime)  # may interrupt, and run again
        for name, arguments, call_id in _unparsed(state):
            self._binding.refuse(name, arguments, call_id=call_id)
        for legacy, given in _legacy_calls(state, self._binding.request_id):
            self._binding.refuse(legacy, given, asked=False)
        for call in rejected:
            self._binding.awaiting.answered(call["id"])
            self._binding.refuse(call["name"], call["args"], call_id=call["id"])
        return update

    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[None]
    ) -> dict[str, Any] | None:
        self._check_call_ids(state)
        self._expect(state)
        update, rejected = self._decided(state, runtime)  # may interrupt, and run again
        for name, arguments, call_id in _unparsed(state):
            await self._binding.arefuse(name, arguments, call_id=call_id)
        for legacy, given in _legacy_calls(state, self._binding.request_id):
            await self._binding.arefuse(legacy, given, asked=False)
        for call in rejected:
            self._binding.awaiting.answered(call["id"])
            await self._binding.arefuse(call["name"], call["args"], call_id=call["id"])
        return update

    def _expect(self, state: AgentState[Any]) -> None:
        """Note the view's calls of the model's latest turn, so none can pass unrecorded.

        Only calls of the view's tools: a structured-output tool's call is LangChain's
        own, and a name no tool has is refused and recorded when it reaches the tools.
        """
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage):
            tools = self._binding.tools
            self._binding.awaiting.expect([c for c in last.tool_calls if c["name"] in tools])

    def _check_call_ids(self, state: AgentState[Any]) -> None:
        """Refuse a turn whose calls share an id when one of them waits for the reviewer.

        LangChain ties each decision, each edit and each per-call interrupt to a call by
        its id: with two calls under one id, approving the first and editing the second
        ran the edit twice (batched) or ran the second call's own arguments, the ones
        the reviewer replaced (per call). Nothing of the turn has run yet.

        Raises:
            VeridicError: two calls of the model's latest turn have one id, and one of
                them needs the reviewer.
        """
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage):
            return
        calls: dict[str, list[str]] = {}
        for call in last.tool_calls:
            if call["id"]:
                calls.setdefault(call["id"], []).append(call["name"])
        for call_id, names in calls.items():
            if len(names) > 1 and any(name in self.interrupt_on for name in names):
                raise VeridicError(
                    f"the tool call id {clip(call_id)} names {len(names)} calls of the model's "
                    f"turn ({first_few(names)}) in request "
                    f"{clip(self._binding.request_id)}, and a reviewer's answer is tied to a call "
                    "by its id, so it could approve another call than the one shown; nothing "
                    "ran: use a chat model (or model wrapper) that gives each tool call its "
                    "own id"
                )

    def _decided(
        self, state: AgentState[Any], runtime: Runtime[None]
    ) -> tuple[dict[str, Any] | None, list[ToolCall]]:
        """The middleware's update for this turn, with the approved calls; the refused calls.

        A call is approved when the reviewer approved or edited it. An edit that names
        another tool is refused here, before anything runs: its call gets a ``DENIED``
        record and the model a message saying so (an edit may change the arguments,
        not the tool; LangChain's own per-call mode pins the tool the same way).
        The approvals are written on every turn with tool calls, so a tool call id of an
        earlier turn (fake and some real models reuse ids) never carries an approval over,
        each with the digest of the call the reviewer saw (or wrote): a middleware whose
        ``after_model`` runs after this one (listed before it) may change the model's
        calls, and the approval does not cover what the reviewer never saw.
        """
        update = super().after_model(state, runtime)
        if update is None:
            return ({APPROVED_KEY: {}} if state.get(APPROVED_KEY) else None), []
        messages = list(update.get("messages", []))
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        gated = (
            [] if last is None else [c for c in last.tool_calls if c["name"] in self.interrupt_on]
        )
        gated_ids = {c["id"] for c in gated}
        messages = [
            _fenced_rejection(m, self._binding.written)
            if isinstance(m, ToolMessage) and m.tool_call_id in gated_ids
            else m
            for m in messages
        ]
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        edits: dict[str, Any] = dict(update.get(_EDITED_TOOL_CALLS_KEY) or {})
        refused = [c for c in gated if c["id"] in answered]
        for call in gated:
            edit = edits.get(call["id"] or "")
            if edit is not None and edit.get("name") != call["name"] and call["id"]:
                del edits[call["id"]]
                messages.append(_switched_message(call, edit.get("name"), self._binding.written))
                answered.add(call["id"])
                refused.append(call)
        approved = {
            c["id"]: call_digest(c["name"], (edits.get(c["id"]) or c)["args"])
            for c in gated
            if c["id"] and c["id"] not in answered
        }
        changed = {"messages": messages, _EDITED_TOOL_CALLS_KEY: edits, APPROVED_KEY: approved}
        return {**update, **changed}, refused

    # --- tool calls ---

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call under the reviewer's answer; veridic's errors are not retried.

        A ``ToolRetryMiddleware`` listed before this one would run the call again on any
        error, a handler that ran and a record that could not be written included
        (:func:`_not_retried`).
        """
        with _not_retried():
            return self._wrap_tool_call(request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """:meth:`wrap_tool_call` for async code."""
        with _not_retried():
            return await self._awrap_tool_call(request, handler)

    def _wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        self._binding.awaiting.answered(request.tool_call["id"])
        if self._unknown(request):
            refused = self._binding.refuse(*_name_args(request), call_id=request.tool_call["id"])
            return _refusal_message(request, refused, self._binding.written)
        ran: list[bool] = []

        def run(to_run: ToolCallRequest) -> ToolMessage | Command[Any]:
            ran.append(True)
            grant = self._grant(request, to_run)
            if isinstance(grant, CallResult):
                return _refusal_message(request, grant, self._binding.written)
            with _granted(grant):
                return _noted_edit(handler(to_run), request, to_run, self._binding.written)

        result = super().wrap_tool_call(request, run)
        if not ran and self._rejected_per_call(request):
            result = _fenced_rejection(result, self._binding.written)
            self._binding.refuse(*_name_args(request), call_id=request.tool_call["id"])
        return result

    async def _awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        self._binding.awaiting.answered(request.tool_call["id"])
        if self._unknown(request):
            refused = await self._binding.arefuse(
                *_name_args(request), call_id=request.tool_call["id"]
            )
            return _refusal_message(request, refused, self._binding.written)
        ran: list[bool] = []

        async def run(to_run: ToolCallRequest) -> ToolMessage | Command[Any]:
            ran.append(True)
            grant = self._grant(request, to_run)
            if isinstance(grant, CallResult):
                return _refusal_message(request, grant, self._binding.written)
            with _granted(grant):
                edited = await handler(to_run)
                return _noted_edit(edited, request, to_run, self._binding.written)

        result = await super().awrap_tool_call(request, run)
        if not ran and self._rejected_per_call(request):
            result = _fenced_rejection(result, self._binding.written)
            await self._binding.arefuse(*_name_args(request), call_id=request.tool_call["id"])
        return result

    def _unknown(self, request: ToolCallRequest) -> bool:
        """Whether the call names a tool the agent does not have (refused, with a record).

        Raises:
            ToolCouplingError: the agent runs a tool of this name that is not the one
                :func:`make_tools` made, or lacks one the view exposes.
        """
        name = request.tool_call["name"]
        mine = self._binding.tools.get(name) if isinstance(name, str) else None
        if request.tool is not None and request.tool is mine:
            return False
        if request.tool is None and mine is None:
            return True
        raise ToolCouplingError(
            f"the LangChain agent runs a tool named {quoted(name)} that is not the one "
            f"structured_tools() made for request {clip(self._binding.request_id)}: give "
            "create_agent exactly the tools structured_tools(view, ...) returned"
        )

    def _grant(
        self, request: ToolCallRequest, to_run: ToolCallRequest
    ) -> _Grant | CallResult | None:
        """The grant for the call about to run, when a reviewer approved it.

        An edit is a new call the reviewer approved: the grant covers the edited
        arguments (and only those). An edit that names another tool is refused.
        """
        name = request.tool_call["name"]
        if name not in self.interrupt_on:
            return None
        call = to_run.tool_call
        if call["name"] != name:
            _log.warning(
                "a reviewer's edit turned a call of %s into one of %s; an edit may change the "
                "arguments, not the tool, so the call is refused (request %s)",
                quoted(name),
                quoted(call["name"]),
                clip(self._binding.request_id),
            )
            return self._binding.refuse(
                name, request.tool_call["args"], call_id=request.tool_call["id"]
            )
        call_id = call["id"]
        if call_id is None:
            return None
        digest = call_digest(name, call["args"])
        if self.interrupt_mode == "batched" and not self._approved(request, call_id, digest):
            return None
        return _Grant(call_id, name, digest)

    def _approved(self, request: ToolCallRequest, call_id: str, digest: str) -> bool:
        """Whether the reviewer approved this call, with these arguments, in batched mode."""
        approved = request.state.get(APPROVED_KEY)
        seen = approved.get(call_id) if isinstance(approved, Mapping) else None
        if seen is not None and seen != digest:
            _log.warning(
                "the arguments of the call %s of %s changed after the reviewer approved it "
                "(a middleware listed before veridic's changed the model's call in its "
                "after_model); the approval covers only what the reviewer saw, so the call "
                "is denied (request %s)",
                quoted(call_id),
                quoted(request.tool_call["name"]),
                clip(self._binding.request_id),
            )
        return seen == digest

    def _rejected_per_call(self, request: ToolCallRequest) -> bool:
        """In per-call mode, a gated call whose tool was not run was rejected (or answered)."""
        return self.interrupt_mode == "per_call" and request.tool_call["name"] in self.interrupt_on


def _noted_edit(
    result: ToolMessage | Command[Any],
    request: ToolCallRequest,
    ran: ToolCallRequest,
    written: _Written,
) -> ToolMessage | Command[Any]:
    """The tool message of a call the reviewer edited, telling the model what ran instead.

    The model must learn that its call was replaced, or it makes it again; and the
    arguments that ran are the model's own where the reviewer kept them (outside text),
    so they reach the model only as a data block, never beside it as LangChain's notice
    printed them. The note is remembered in ``written`` whole, so each later model call knows
    it as veridic's by its digest (:func:`_is_own_answer`).
    """
    call = ran.tool_call
    if call["args"] == request.tool_call["args"] or not isinstance(result, ToolMessage):
        return result
    shown = json.dumps(call["args"], ensure_ascii=False, sort_keys=True, default=repr)
    block = fence(f"tool_call:{call['name']}", shown)
    content = written.add(f"{_edit_notice(call['name'])}{block}{_EDIT_GAP}{result.content}")
    return result.model_copy(update={"content": content})


_EDIT_GAP: Final = "\n\n"
"""Between the block of the arguments a reviewer's edit ran and the tool's block (a marked
block holds no empty line, so the first one after the notice is this)."""


def _edit_notice(name: str) -> str:
    """veridic's words before the data block of the arguments a reviewer's edit ran."""
    return (
        "Note: a human reviewer replaced this tool call before it ran, so the call in your "
        "message is the one you produced, not the one that ran; do not make your call again. "
        f"The arguments that ran are in the data block labelled tool_call:{name}, "
        "and the tool's response follows it.\n"
    )


def _fenced_rejection(result: _T, written: _Written) -> _T:
    """LangChain's answer to a call the reviewer rejected, as a data block of the tool.

    LangChain writes it (``User rejected the tool call ...``, or the reviewer's message,
    which may quote anything) in the tool's place; it reaches the model as the tool's data
    block, as every tool message of the view's tools does. The block is remembered in
    ``written``, so each later model call knows it by its digest, without rendering it again.
    """
    if not isinstance(result, ToolMessage):
        return result
    label = f"tool:{result.name}" if _is_label(f"tool:{result.name}") else "tool_result"
    content = result.content
    if isinstance(content, str) and _is_own_block(content, {label}, "datamark"):
        return result  # fenced already (the hook ran again from a checkpoint)
    fenced: _T = result.model_copy(
        update={"content": _fenced_content(label, content, _call_of(result), written)}
    )
    return fenced


def _switched_message(call: ToolCall, named: object, written: _Written) -> ToolMessage:
    """What the model reads when the reviewer's edit of ``call`` named another tool (its block
    remembered in ``written``)."""
    _log.warning(
        "a reviewer's edit turned the call %s of %s into one of %s; an edit may change the "
        "arguments, not the tool, so the call is refused",
        quoted(call["id"]),
        quoted(call["name"]),
        quoted(named),
    )
    text = (
        f"error: the reviewer's answer to this call of {quoted(call['name'])} named another tool "
        f"({quoted(named)}); an edit may change only the arguments, so the call did not run: tell "
        "the user, and call a tool again only if they ask"
    )
    return ToolMessage(
        content=written.add(fence(f"tool:{call['name']}", text)),
        name=call["name"],
        tool_call_id=call["id"] or "",
        status="error",
    )


def _unparsed(state: AgentState[Any]) -> list[tuple[str, str, str | None]]:
    """The model's latest calls LangChain could not parse (``invalid_tool_calls``), with ids.

    LangChain runs none of them and, when the model called nothing else, ends the
    turn; each is recorded here as a refused call (its arguments are not JSON), so
    the audit shows what the model tried instead of nothing. They are recorded after
    the turn's interrupt, if any: LangGraph runs the hook again from its start when
    the reviewer answers, and a record written before it was written twice.
    """
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        return []
    return [
        (call.get("name") or "", call.get("args") or "", call.get("id"))
        for call in last.invalid_tool_calls
    ]


def _legacy_calls(state: AgentState[Any], request_id: str) -> list[tuple[str, object]]:
    """The model's latest call in OpenAI's legacy ``function_call`` shape, logged; to record.

    ``langchain-openai`` keeps a ``function_call`` the provider answered with in
    ``additional_kwargs`` and parses only ``tool_calls``, so the agent runs nothing and
    ends the turn: without a record the audit would not show that the model called a
    tool at all. It is recorded as a call nobody confirmed (nothing of it ran).
    """
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        return []
    call = last.additional_kwargs.get("function_call")
    if not isinstance(call, Mapping):
        return []
    name, arguments = call.get("name"), call.get("arguments")
    _log.warning(
        "the model called %s in the legacy function_call shape, which LangChain does not run "
        "(request %s), so it is recorded and not run: use a chat model that answers with "
        "tool_calls (bind_tools)",
        quoted(name),
        clip(request_id),
    )
    return [(name if isinstance(name, str) else "", arguments)]


def _name_args(request: ToolCallRequest) -> tuple[str, object]:
    return request.tool_call["name"], request.tool_call["args"]


def _given(arguments: object) -> Mapping[str, object] | str | None:
    """Arguments as the executor takes them (anything else is checked, and refused, as none)."""
    if isinstance(arguments, Mapping | str):
        return arguments
    return None


def _refusal_message(
    request: ToolCallRequest, result: CallResult, written: _Written
) -> ToolMessage:
    """The tool message for a call veridic refused before any tool ran (its block remembered
    in ``written``)."""
    name = request.tool_call["name"]
    label = f"tool:{name}" if result.record.tool == name and result.record.kind else "tool_result"
    return ToolMessage(
        content=written.add(fence(label, result.told)),
        name=name if isinstance(name, str) else None,
        tool_call_id=request.tool_call["id"] or "",
        status="error",
    )


def validate_tools(tools: Sequence[object]) -> Binding:
    """The one binding every tool of ``tools`` shares.

    Raises:
        VeridicError: a tool was not made by :func:`make_tools`, the tools come from
            two calls of it, or some of one call's tools are missing.
    """
    bindings = {
        id(t._veridic): t._veridic for t in tools if isinstance(t, VeridicTool) and t._veridic
    }
    # A foreign tool's name may be a server's (a tool made from an MCP server): quoted.
    foreign = [
        clip(str(getattr(t, "name", type(t).__name__)), 64)
        for t in tools
        if not isinstance(t, VeridicTool)
    ]
    if foreign or len(bindings) != 1:
        why = (
            f"{', '.join(foreign[:10])}{' and more' if len(foreign) > 10 else ''} "
            f"{'is' if len(foreign) == 1 else 'are'} not "
            "made by structured_tools()"
            if foreign
            else f"they come from {len(bindings)} structured_tools() calls"
        )
        raise VeridicError(
            f"approval_middleware() got tools it cannot vouch for ({why}): pass the list one "
            "structured_tools(view, ...) call returned, the same list you give create_agent"
        )
    (binding,) = bindings.values()
    missing = sorted(set(binding.tools) - {getattr(t, "name", "") for t in tools})
    if missing:
        raise VeridicError(
            f"approval_middleware() got some of the tools of one structured_tools() call, "
            f"without {', '.join(missing)}: pass the whole list, so the model is shown "
            "what the capability section and dispatch say"
        )
    return binding
