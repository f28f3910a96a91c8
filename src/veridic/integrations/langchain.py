"""veridic inside LangChain and LangGraph: a view's tools, approved and audited by veridic.

Four functions (install the extra: ``pip install 'veridic[langchain]'``):

- :func:`system_prompt` builds the agent's system prompt from trusted parts and the
  view's capability section;
- :func:`structured_tools` makes one ``StructuredTool`` per tool the view exposes,
  named, described and typed by the view's own tool specs, each run by
  :func:`~veridic.run.executor.execute` (check, approve, dispatch under guard, record);
- :func:`interrupt_on` gives LangChain's ``HumanInTheLoopMiddleware`` the tools whose
  calls the :class:`~veridic.ApprovalPolicy` will not decide alone;
- :func:`approval_middleware` is that middleware, subclassed, so that the reviewer's
  answer becomes veridic's approval: approve or edit runs the call as
  ``USER_CONFIRMED``, reject writes a ``DENIED`` record.

The tools and the middleware go together: a call that needs the user's approval
runs only with the grant the middleware gives a call it saw approved, so without
it (or with the stock middleware, which leaves no trace of its approval) such a
call is denied and recorded, never run silently. Each model call is checked too:
its system message must be the prompt's trusted system text, no other message may be
a system or developer message, its tools must be exactly the view's, and its model
settings may send no instructions, tools or history of their own, or the call is
refused before the model sees it. Every tool message of the call reaches the model as a
data block, whatever another middleware wrote in it (:func:`approval_middleware`).

>>> from veridic import ApprovalPolicy, Registry
>>> registry = Registry()
>>> @registry.tool(kind="write")
... def save_note(text: str) -> str:
...     '''Save a note for the user.
...
...     Args:
...         text: The note.
...     '''
...     return "saved"
>>> policy = ApprovalPolicy(registry.view())
>>> sorted(interrupt_on(policy))
['save_note']
>>> interrupt_on(policy)["save_note"]["allowed_decisions"]
['approve', 'edit', 'reject']

LangChain is imported when one of these functions is first called, never when
veridic is; without it they raise :class:`~veridic.MissingExtraError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal

from veridic._extras import require
from veridic._sample import quoted
from veridic.errors import ToolCouplingError, VeridicError
from veridic.run._unlabelled import refuse_unlabelled_outside_text
from veridic.run.approval import ApprovalPolicy
from veridic.run.audit import AuditSink
from veridic.text.compose import Composer
from veridic.text.fence import preamble
from veridic.text.prompt import Prompt
from veridic.text.provenance import TrustedInstruction, is_trusted, report
from veridic.tools.view import ToolView

if TYPE_CHECKING:
    from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
    from langchain_core.tools import BaseTool, StructuredTool

__all__ = ["approval_middleware", "interrupt_on", "structured_tools", "system_prompt"]

_EXTRA: Final = "langchain"
_WHO: Final = "veridic.integrations.langchain"


def system_prompt(view: ToolView, *parts: TrustedInstruction) -> Prompt:
    """The agent's system prompt: ``parts``, the view's capability section, the data preamble.

    Pass ``prompt.system`` to ``create_agent(system_prompt=...)`` and the prompt itself
    to :func:`structured_tools`: the audit records name its ``sha256``, and every model
    call is checked against its text. The preamble is there because every tool result
    reaches the model as a data block (``datamark`` mode), which it explains.
    LangChain keeps only the text (a ``SystemMessage`` holds a plain ``str``), which is
    why the check compares text with this prompt's trusted parts. ``prompt.system``
    itself refuses a prompt built by hand whose system parts are not all trusted (as
    :meth:`Prompt.to_openai` does), so the text handed over is one veridic checked.

    Raises:
        ProvenanceError: a part is not trusted (see :meth:`Composer.system`).
    """
    return Composer().system(*parts, view.capability_section(), preamble("datamark")).build()


def structured_tools(
    view: ToolView,
    *,
    policy: ApprovalPolicy,
    audit: AuditSink,
    request_id: str,
    prompt: Prompt,
) -> list[StructuredTool]:
    """One LangChain tool per tool ``view`` exposes, run by veridic's executor.

    Name, description and JSON schema are the view's own tool spec (a tool that is
    unavailable, denied or undescribed is not in the list, as it is not in the
    capability section or in dispatch). Each call goes through
    :func:`~veridic.run.executor.execute` (or ``aexecute`` from async code) with
    ``policy``, ``audit``, ``request_id`` and ``prompt``: the view is checked again
    when the call runs (also when it resumes after an interrupt), the policy decides
    the approval mode, and one audit record is written whatever happens. A call that
    needs the user's approval runs only with the grant of :func:`approval_middleware`.

    The tool's output, and the error of a call that did not succeed (as a tool message
    with status ``error``), reach the model as a data block labelled ``tool:<name>``.
    An :class:`~veridic.AuditWriteError` (the handler ran, its record could not be
    written) is raised through the agent, never turned into a message.

    Before a call the user approved runs, ``audit`` is asked for the request's records
    (``records(request_id)``, as :class:`~veridic.AuditStore` answers): a call on record as
    approved already (a LangGraph checkpoint that waited for the reviewer, run again) is
    refused and recorded ``DENIED``; a store that cannot be asked makes the approved call a
    :class:`~veridic.VeridicError`, and nothing runs.

    ``prompt`` is the agent's system prompt (:func:`system_prompt` builds one): a
    :class:`~veridic.Prompt` holding only a system message, every part of it trusted,
    its capability section (if any) this view's, with the ``datamark`` preamble. A prompt
    without a section is refused as the gateway refuses one when the view holds an
    external tool with text no pin covers: only the section tells the model that text
    is data.

    Raises:
        MissingExtraError: langchain-core, langchain or langgraph is not installed.
        ProvenanceError: a part of the prompt's system message is not trusted.
        ToolCouplingError: the prompt's capability section is another view's, or it has
            none and a tool's text from outside is not pinned.
        VeridicError: ``policy`` is for another view, ``request_id`` is empty, or the
            prompt is not a system prompt with the data preamble.
    """
    _require("structured_tools()")
    from veridic.integrations import _langchain_bridge as bridge

    if not isinstance(view, ToolView) or not isinstance(policy, ApprovalPolicy):
        raise VeridicError(
            f"structured_tools() needs a ToolView and an ApprovalPolicy, got "
            f"{type(view).__name__} and {type(policy).__name__}: pass registry.view(...) and "
            "ApprovalPolicy(view)"
        )
    if policy.view is not view:
        raise VeridicError(
            f"structured_tools() got a policy built for another view ({policy.view!r}, not "
            f"{view!r}): build it for this request's view, ApprovalPolicy(view, "
            "rules=previous.rules)"
        )
    if not isinstance(request_id, str) or not request_id.strip():
        raise VeridicError(
            f"structured_tools() got request_id={quoted(request_id)}: every call needs the id "
            "of the request (the agent run) it belongs to, so its records are found "
            "together; pass one"
        )
    _check_prompt(prompt, view)
    binding = bridge.Binding(view, policy, audit, request_id, prompt)
    return bridge.make_tools(binding)


def interrupt_on(policy: ApprovalPolicy) -> dict[str, InterruptOnConfig]:
    """``HumanInTheLoopMiddleware(interrupt_on=...)`` from veridic's policy.

    Exactly the tools the policy's view exposes whose calls it will not decide
    alone (``policy.request(name).pending``: high-risk tools, writes without an
    always rule, tools with an ask rule), each allowing ``approve``, ``edit`` and
    ``reject``, with a description for the reviewer that says why veridic asks.
    Queries, always-allowed and denied tools are not listed: the policy decides
    them (``NOT_REQUIRED``, ``ALWAYS_RULE``, ``DENIED``). The rules are read now:
    build the middleware again after changing them.

    :func:`approval_middleware` interrupts with it. Given to the stock middleware, it
    interrupts for the same calls, but an approval there leaves the tool nothing to
    check, so the calls it approved are denied.

    Raises:
        MissingExtraError: langchain is not installed.
        VeridicError: ``policy`` is not an :class:`~veridic.ApprovalPolicy`.
    """
    _require("interrupt_on()")
    from veridic.integrations import _langchain_bridge as bridge

    if not isinstance(policy, ApprovalPolicy):
        raise VeridicError(
            f"interrupt_on() needs the request's ApprovalPolicy, got {type(policy).__name__}: "
            "pass ApprovalPolicy(view), the policy the tools run with"
        )
    return bridge.interrupt_config(policy)


def approval_middleware(
    tools: Sequence[BaseTool],
    *,
    interrupt_mode: Literal["batched", "per_call"] = "batched",
) -> HumanInTheLoopMiddleware:
    """LangChain's human-in-the-loop middleware for ``tools``, answering to veridic.

    ``tools`` is the list :func:`structured_tools` returned (the one you give
    ``create_agent``). The middleware interrupts for :func:`interrupt_on` of their
    policy, in LangChain's ``interrupt_mode``; resume with
    ``Command(resume={"decisions": [...]})`` (batched) or one decision per interrupt
    id (per call). Each decision maps to veridic's approval:

    ========  ====================================================================
    approve   the call runs once, recorded ``USER_CONFIRMED``
    edit      the edited arguments are a new call the user approved: they are
              validated by the view, run once and recorded ``USER_CONFIRMED``;
              the model's own arguments never run; an edit naming another tool
              is refused (``DENIED``); the model is told that a reviewer replaced
              its call, with the arguments that ran as a data block
              (``tool_call:<name>``)
    reject    the call does not run, recorded ``DENIED``; the model is told
    ========  ====================================================================

    ``respond`` (answering in the tool's place) is not offered.

    A model turn that gives one tool call id to two calls, one of them interrupted for,
    is refused (``VeridicError``) before anyone is asked: LangChain ties each answer to a
    call by its id, so the answer could reach the other call.

    The policy and the view are asked again when the call runs: a deny rule added
    while the interrupt waited denies it, and a call the policy now decides alone
    records that mode. A call of a name no tool has is refused and recorded (never
    dropped). Each model call is checked first: the system message must be the
    prompt's trusted system text, and no message of the conversation a system or
    developer message (``ProvenanceError``), the tools exactly these
    (``ToolCouplingError``), and the ``model_settings`` a middleware set may not send
    instructions, tools or history (a ``system``, ``instructions`` or ``functions`` key,
    among others, or one in their ``extra_body``: ``VeridicError``), and a structured
    output's description and a ``ToolStrategy``'s messages given as text must be code
    text (``ProvenanceError``); list this middleware
    last, nearest the model, so no other middleware changes the request after the check.

    A middleware listed before this one may rewrite a tool message (its
    ``wrap_tool_call``, ``before_model`` or ``wrap_model_call``) or answer a call in the
    tool's place (its ``after_model``, a call limit). Each tool message of a model call is
    looked at as it is about to be sent: one that is not veridic's answer to its own call (a
    whole block, nothing around it, under the label veridic gives that call, or its note of
    a reviewer's edit naming the call's tool), nor a structured output's trusted text, is
    sent as a data block labelled ``tool:<name>`` (``tool_result`` for a call of no tool of
    the view), in either mode, and a warning names the call; a block under another label,
    or whose text was edited in place (a redaction), is sent as the block of the text it
    now holds.
    Fenced rather than refused: LangChain's own middleware (context editing, PII
    redaction, call limits) does it on purpose, and the text reaches the model as data
    either way. LangChain's answer to a rejected call is fenced where it is made.

    LangChain answers the model's call of a structured output's tool itself, in the model
    call, and its own words quote the model's output: ``Returning structured response:
    {output}`` (no ``tool_message_content``, so for a bare schema and an ``AutoStrategy``
    too) and ``Error: {error}`` (``handle_errors=True`` or exception types; the error
    quotes the model's arguments). Such a message, and what a ``handle_errors`` function
    returns, reaches the model as a data block labelled ``structured_output:<tool>``
    (``structured_output`` alone for a schema name no label may hold: over 182
    characters, a line break, an invisible character): the middleware fences the tool
    messages of the call's response unless they are the strategy's trusted text, which
    reach the model as written. These configurations are
    fenced, not refused: they are LangChain's defaults, and no LangChain code is patched.
    LangChain's answer to a call it could not parse (``Tool call {name} with id {id}
    could not be executed``, the model's name and id) is fenced in the model call too, as
    a data block labelled ``unparsed_tool_call``.
    A call of these tools that never reached its tool (another middleware, such as a call
    limit, answered it in the tool's place or ended the run before it) is recorded
    ``DENIED`` when the next model call of its conversation starts or its run ends. A call
    in OpenAI's legacy ``function_call`` shape, which LangChain never runs, is recorded
    too. The agent needs a checkpointer (LangGraph's interrupts
    do).

    Raises:
        MissingExtraError: langchain-core, langchain or langgraph is not installed.
        VeridicError: ``tools`` is not the whole list of one :func:`structured_tools`
            call, or ``interrupt_mode`` is not ``"batched"`` or ``"per_call"``.
    """
    _require("approval_middleware()")
    from veridic.integrations import _langchain_bridge as bridge

    if interrupt_mode not in ("batched", "per_call"):
        raise VeridicError(
            f'approval_middleware() got interrupt_mode={interrupt_mode!r}: use "batched" '
            '(one interrupt per model turn) or "per_call" (one per gated tool call)'
        )
    binding = bridge.validate_tools(list(tools))
    return bridge.ApprovalMiddleware(binding, interrupt_mode=interrupt_mode)


def _require(who: str) -> None:
    """Import what the LangChain integration needs, or say which extra installs it."""
    needed_by = f"{_WHO}.{who}"
    for module in ("langchain_core", "langchain", "langgraph"):
        require(module, _EXTRA, needed_by)


def _check_prompt(prompt: Prompt, view: ToolView) -> None:
    """Refuse a prompt the agent cannot run under, as the gateway refuses one it cannot send."""
    if not isinstance(prompt, Prompt):
        raise VeridicError(
            f"structured_tools() got prompt={type(prompt).__name__}: pass the agent's system "
            "prompt as a Prompt, system_prompt(view, instruction(...)), and its .system to "
            "create_agent(system_prompt=...)"
        )
    roles = [message.role for message in prompt.messages]
    if roles != ["system"]:
        raise VeridicError(
            f"structured_tools() got prompt {prompt.sha256[:12]} with the messages {roles}: "
            "the agent is given only a system prompt (LangChain keeps the conversation), so "
            "pass a Prompt that holds only its system message: system_prompt(view, ...)"
        )
    (message,) = prompt.messages
    where = f"the system message of prompt {prompt.sha256[:12]}, at structured_tools()"
    if "".join(message.parts) != message.content:
        report(message.content, where)
    for part in message.parts:
        if not is_trusted(part):
            report(part, where)
    for span in prompt.spans:  # read from the parts, whatever a subclass put in their place
        if span.kind == "registry" and not view.describes(message.content[span.start : span.end]):
            raise ToolCouplingError(
                f"the system message of prompt {prompt.sha256[:12]} holds a capability section "
                f"from another view ({span.origin}) than the tools' ({view!r}): the model would "
                "be told of tools it is not given; build it with system_prompt(view, ...) of "
                "this view"
            )
    if not any(span.kind == "registry" for span in prompt.spans):
        refuse_unlabelled_outside_text(f"prompt {prompt.sha256[:12]}", view)
    if preamble("datamark") not in message.content:
        raise VeridicError(
            f"the system message of prompt {prompt.sha256[:12]} does not explain data blocks, "
            "and every tool result reaches the model as one (datamark mode): build it with "
            'system_prompt(view, ...), or place veridic.text.fence.preamble("datamark") '
            "among its parts"
        )
