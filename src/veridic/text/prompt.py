"""``Prompt``: the immutable result of composing, and its provider formats.

A prompt is a tuple of messages, each holding its exact text and the spans
that say where every character came from. It renders the same bytes every
time (no nonces, no timestamps), so its ``sha256`` can key a provider's prompt
cache and an audit record alike.

An assistant turn may also carry the model's :class:`ReasoningItem` s (Anthropic
thinking blocks, OpenAI reasoning items): model output going back to the model
that wrote it, byte for byte. They are data, never an instruction; they are
covered by ``sha256`` and have no provenance spans (they are not message
text). Each goes back only to its own provider's API: rendering a prompt for
an API that cannot take one of its items raises, see :func:`check_reasoning`.

Parts of a prompt have modules of their own, whose names import from here
too: :mod:`veridic.text.message` (a message and its parts),
:mod:`veridic.text.reasoning` (the reasoning items) and
:mod:`veridic.text.document` (the saved prompt, read back for display).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import cached_property
from typing import ClassVar, Final, Literal, cast

from typing_extensions import deprecated

from veridic import _json_object
from veridic._counted import counted
from veridic._json_object import RepeatedKeyError
from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.text._prompt_hash import _digest
from veridic.text.document import DOCUMENT_FORMAT as DOCUMENT_FORMAT
from veridic.text.document import (
    DocumentMessage,
    DocumentReasoning,
    PromptDocument,
    _document_json,
    _pieces,
)
from veridic.text.message import (
    Message,
    PromptSpan,
    Role,
    ToolCall,
    _tuple_of,
    keep_checks,
    refuse_replaced,
    spans_of_parts,
)
from veridic.text.provenance import is_trusted, report
from veridic.text.provenance_map import Specs, render
from veridic.text.reasoning import ReasoningItem, ReasoningKind, ReasoningProvider
from veridic.text.wire import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicReasoningBlock,
    AnthropicRequest,
    AnthropicToolResultBlock,
    OpenAIMessage,
    OpenAIToolCall,
)

__all__ = [
    "DocumentMessage",
    "DocumentReasoning",
    "Message",
    "Prompt",
    "PromptDocument",
    "PromptSpan",
    "PromptSpans",
    "ReasoningItem",
    "ReasoningKind",
    "ReasoningProvider",
    "Role",
    "ToolCall",
    "check_reasoning",
    "check_rendered",
    "check_system",
    "checked_system",
]


_REASONING_HOME: Final[dict[str, str]] = {
    "anthropic": "the Anthropic Messages API (AnthropicMessages)",
    "openai": "the OpenAI Responses API (OpenAIResponses)",
}


class PromptSpans(tuple[PromptSpan, ...]):
    """:attr:`Prompt.spans`: a tuple of :class:`PromptSpan`, in message order.

    Callable only so that ``prompt.spans()`` (0.1, when it was a method) keeps
    working, with a ``DeprecationWarning``.
    """

    __slots__ = ()

    @deprecated("Prompt.spans is a property since 0.2: write prompt.spans, without the call")
    def __call__(self) -> PromptSpans:
        return self


@dataclass(frozen=True)
class Prompt:
    """An immutable chat prompt. Build it with :class:`veridic.Composer`.

    Only the first message may have the role ``system``: it is the one
    :class:`~veridic.ModelGateway` checks for trusted text, and the one each
    provider format sends as the system prompt. A later one would reach Chat
    Completions as a second, unchecked system message and be dropped by the
    Messages and Responses APIs, so a prompt built by hand with one is refused.

    The prompt keeps its own tuple of the messages it is given: a list the
    caller changes afterwards changes neither what is sent nor :attr:`sha256`
    (which is worked out once), and a message appended later cannot slip past
    the check below.

    A subclass may add members, not replace the ones veridic reads (``messages``, the
    hash, the spans, the provider formats, the document): a subclass's ``to_anthropic()``
    sent a system prompt that :class:`~veridic.ModelGateway`, which checks the first
    message, never checked, under the hash of the messages it did check. Nor may it
    replace ``__getattribute__`` or ``__init_subclass__``; the check below runs after a
    subclass's own ``__init__`` or ``__post_init__``, whether or not it calls this one's.

    The messages come as a tuple, a list or another sequence, in their order (a dict's
    keys keep the dict's order): a set is refused, as its order changes from one run to
    the next (``PYTHONHASHSEED``), and so would the hash and what is sent.

    Raises:
        VeridicError: ``messages`` is text, no sequence, or a set; an item is not a
            :class:`Message`, or a message other than the first has the role ``system``.
            When a subclass is defined: it replaces a member veridic reads.
    """

    messages: tuple[Message, ...]

    _SPANS_COMPOSED: ClassVar[bool] = True
    """Read by the map and the terminal view: these spans are the ones veridic worked out
    from the composed parts; anything else they show (a saved document) says it is as
    recorded."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        refuse_replaced(cls, "Prompt", _READ_OF_A_PROMPT)
        keep_checks(cls, Prompt.__post_init__)

    def __post_init__(self) -> None:
        if type(self.messages) is not tuple:
            object.__setattr__(self, "messages", _tuple_of(self.messages, "Prompt(messages)"))
        for index, message in enumerate(self.messages):
            if not isinstance(message, Message):
                raise VeridicError(
                    f"messages[{index}] of this prompt is {a_type(message)}, not a "
                    "Message: build prompts with Composer, or pass Message values"
                )
        for index, message in enumerate(self.messages[1:], start=1):
            if message.role == "system":
                raise VeridicError(
                    f"messages[{index}] of this prompt ({len(self.messages)} messages) has the "
                    "role system, and only the first message may: ModelGateway checks that one for "
                    "trusted text, and a later one would reach the model unchecked (Chat "
                    "Completions) or be dropped (Messages, Responses); put all system text in "
                    "the first message, with Composer.system()"
                )

    @property
    def system(self) -> str:
        """The system message's text, or ``""`` when there is none.

        The text is held to the rule :class:`~veridic.ModelGateway` and every provider
        format hold it to (:func:`check_system`): it is what an application hands an SDK
        or an agent framework by hand (LangChain's ``create_agent(system_prompt=...)``),
        so a prompt built by hand whose system text is not trusted is refused here too,
        rather than giving that text out as instructions. The gateway reads the messages,
        not this property, and checks each part once per send.

        >>> from veridic import Composer, instruction
        >>> Composer().system(instruction("Be brief.")).user("Hi").build().system
        'Be brief.'

        Raises:
            ProvenanceError: a part of the system message is not trusted, or its parts do
                not make its text (in report mode: logged, and given out).
        """
        check_rendered(self, "Prompt.system")
        return _system_text(self)

    @cached_property
    def sha256(self) -> str:
        """Hex SHA-256 of a canonical encoding of roles, texts, tool calls and reasoning items.

        Provenance is not hashed: two prompts the model reads identically hash
        identically, whoever wrote them. The encoding (version 2) is fed to
        SHA-256 piece by piece, each text as its length in code points, a
        colon and its UTF-8 bytes (lone surrogates as ``surrogatepass``
        writes them), so hashing costs about what hashing the texts' bytes
        costs, and long texts are encoded in slices rather than copied whole::

            veridic.prompt/2 NUL, then per message: role, content, the number of
            tool calls, each call's id, name and arguments, the tool call id
            (empty without one), the number of reasoning items, each item's
            provider and canonical JSON, and for a tool result that reports a
            failure the piece ``tool-error`` (no role is spelled so: unambiguous,
            and the hash of every other prompt is what it was)

        ``tests/test_reasoning.py`` pins it.
        """
        return _digest(_pieces(self.messages))

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls no later tool result answers; providers reject a prompt with any."""
        answered = {m.tool_call_id for m in self.messages if m.tool_call_id is not None}
        return tuple(
            call for m in self.messages for call in m.tool_calls if call.id not in answered
        )

    @property
    def spans(self) -> PromptSpans:
        """Every character range of every message with where it came from (a tuple).

        A property, as :attr:`Message.spans` and ``provenance(text).spans`` are:
        veridic's attributes are what an object holds or is, worked out on
        request when that is cheap; methods take arguments. ``prompt.spans()``,
        the spelling of 0.1, still works and warns.
        """
        return PromptSpans(
            PromptSpan(index, message.role, span.start, span.end, span.kind, span.origin)
            for index, message in enumerate(self.messages)
            for span in spans_of_parts(message)
        )

    @property
    def reasoning(self) -> tuple[ReasoningItem, ...]:
        """Every reasoning item of every assistant turn, in order."""
        return tuple(item for m in self.messages for item in m.reasoning)

    def without_reasoning(self, provider: ReasoningProvider | None = None) -> Prompt:
        """This prompt with the reasoning items of ``provider`` (of all, when ``None``) left out.

        The way to drop reasoning knowingly: an API refuses another provider's
        items (see :func:`check_reasoning`), so a conversation that moves to
        another provider leaves them out here. The result hashes differently,
        as it should: the model reads less.

        >>> from veridic import Composer
        >>> item = ReasoningItem.of("openai", {"type": "reasoning", "id": "rs_1", "summary": []})
        >>> prompt = Composer().user("Hi").assistant("Hello.", reasoning=[item]).build()
        >>> prompt.without_reasoning("openai").reasoning
        ()
        >>> prompt.without_reasoning("anthropic") == prompt
        True
        """
        return Prompt(
            tuple(
                replace(
                    m,
                    reasoning=tuple(
                        i for i in m.reasoning if provider is not None and i.provider != provider
                    ),
                )
                if m.reasoning
                else m
                for m in self.messages
            )
        )

    def to_html(self, *, tools: Specs | None = None) -> str:
        """This prompt's provenance map: a self-contained HTML page (no script, no network).

        Every message as the model reads it, each span coloured by its kind with its
        origin on hover and in a side list, data blocks with their fence lines,
        label and mode, and the prompt's ``sha256``. ``tools`` (the
        :class:`~veridic.ToolView` the prompt was built with, or the specs it sent)
        links the capability section's tools to their specs; without it the section
        is shown as text. The same prompt gives the same bytes. The page escapes all
        of the prompt's text and forbids scripts with a Content-Security-Policy;
        :mod:`veridic.text.provenance_map` says what it guarantees.

        Raises:
            VeridicError: a spec in ``tools`` has no name.
        """
        return render(self, tools=tools)

    def _repr_html_(self) -> str:
        """The provenance map for a notebook cell: :meth:`to_html`'s body, without specs."""
        return render(self, document=False)

    def to_document(self) -> str:
        """This prompt as a display document: JSON text a reviewer can open later.

        The document (``"format": "veridic-prompt/1"``) holds what the
        provenance map and the terminal view show: every message (role, text,
        tool calls, tool call id, reasoning items, whether a tool result reports
        an error), every span of :attr:`spans` (message, role, start, end, kind,
        origin) and :attr:`sha256`. Save it where the application keeps its
        evidence; ``veridic show FILE.json`` prints it, or writes its map.

        Reading it back (:meth:`PromptDocument.from_json`) never gives a
        :class:`Prompt`: trust does not survive storage, so what comes back is
        a display-only :class:`PromptDocument` whose texts are plain ``str``
        (no brand, no instruction) and whose spans say what the file says.
        The text is checked against the ``sha256``; the spans cannot be
        (provenance is not hashed), so a document shows provenance as it was
        recorded, no more, except that a trusted span over a data block's label
        or data (outside the system message) is refused: veridic never records
        outside text so. The JSON is ASCII (every other character as a
        ``\\u`` escape), so printing the file cannot drive a terminal.

        >>> from veridic import Composer, instruction
        >>> prompt = Composer().system(instruction("Be brief.")).user("Hi").build()
        >>> document = PromptDocument.from_json(prompt.to_document())
        >>> document.sha256 == prompt.sha256
        True

        Its map is the prompt's page headed by a notice that the provenance is as
        recorded, not verified by veridic (the spans are what the file says):

        >>> "not verified by veridic" in document.to_html()
        True
        >>> "not verified by veridic" in prompt.to_html()
        False

        Raises:
            VeridicError: a text holds a lone high surrogate directly before a
                lone low one, which JSON would read back as one character (the
                text could not come back as it is).
        """
        return _document_json(self.sha256, self.messages, self.spans)

    def to_openai(self) -> list[OpenAIMessage]:
        """Chat-completions ``messages``.

        The system message is held to the rule :class:`~veridic.ModelGateway` holds it to
        (:func:`check_system`): a prompt built by hand whose system text is not trusted is
        refused here too, so passing the result straight to an SDK does not go round it.

        Raises:
            ProvenanceError: a part of the system message is not trusted, or its parts do
                not make its text (in report mode: logged, and rendered).
            VeridicError: the prompt holds reasoning items, which Chat
                Completions cannot carry (see :func:`check_reasoning`).
        """
        check_reasoning(self, None, "the OpenAI Chat Completions API (to_openai)")
        check_rendered(self, "Prompt.to_openai()")
        rendered: list[OpenAIMessage] = []
        for message in self.messages:
            item: OpenAIMessage = {"role": message.role, "content": message.content}
            if message.tool_calls:
                item["content"] = message.content or None
                item["tool_calls"] = [_openai_call(call) for call in message.tool_calls]
            if message.tool_call_id is not None:
                item["tool_call_id"] = message.tool_call_id
            rendered.append(item)
        return rendered

    def to_anthropic(self) -> AnthropicRequest:
        """Messages API ``system`` and ``messages``; consecutive same-role turns merged.

        An assistant message's thinking blocks come first in its content,
        before its text and ``tool_use`` blocks, as the API requires, each
        exactly as the model returned it.

        The API rejects a text block that is empty or only whitespace, so an assistant
        message's text of that kind is not sent: its tool calls and thinking blocks go
        alone, and a turn with nothing else is left out (the hash, the document and
        :meth:`to_openai` keep the text as it is). A user turn of that kind
        (:class:`~veridic.Composer` refuses one; built by hand) is refused: left out,
        it would make the assistant turn before it the start of the model's answer.

        A tool call's arguments go as the parsed ``input`` object; they must read
        one way only, so text that gives a key twice (the hash and the document
        carry both values, the API would get the last) is refused.

        The system text is checked as :meth:`to_openai` checks it.

        Raises:
            ProvenanceError: a part of the system message is not trusted, or its parts do
                not make its text (in report mode: logged, and rendered).
            VeridicError: the conversation is empty or does not start with a
                user turn, which the Messages API rejects; the prompt holds
                OpenAI reasoning items (see :func:`check_reasoning`); a user turn has
                no text but whitespace; or a tool call's arguments are not a JSON
                object, or give a key twice.
        """
        check_reasoning(self, "anthropic", "the Anthropic Messages API (to_anthropic)")
        check_rendered(self, "Prompt.to_anthropic()")
        turns: list[tuple[Literal["user", "assistant"], list[AnthropicBlock], list[AnthropicBlock]]]
        turns = []
        for index, message in enumerate(self.messages):
            if message.role == "system":
                continue
            role: Literal["user", "assistant"] = (
                "assistant" if message.role == "assistant" else "user"
            )
            thinking: list[AnthropicBlock] = [_anthropic_block(i) for i in message.reasoning]
            blocks = _anthropic_blocks(message, index, self.sha256)
            if not blocks and not thinking:
                # An empty assistant turn carries nothing, and the Messages API
                # rejects an empty content list: there is nothing to send.
                continue
            if turns and turns[-1][0] == role:
                turns[-1][1].extend(thinking)
                turns[-1][2].extend(blocks)
            else:
                turns.append((role, thinking, blocks))
        messages: list[AnthropicMessage] = [
            {"role": role, "content": [*thinking, *blocks]} for role, thinking, blocks in turns
        ]
        if not messages or messages[0]["role"] != "user":
            raise VeridicError(
                "the Anthropic Messages API needs a conversation that starts with a user turn, "
                f"this prompt has {counted(len(messages), 'turn')} starting with "
                f"{messages[0]['role'] if messages else 'nothing'}: add Composer.user() or "
                "Composer.data() before the first assistant turn"
            )
        return {"system": _system_text(self), "messages": messages}


_READ_OF_A_PROMPT: Final = frozenset(
    {"messages"} | {name for name in vars(Prompt) if not name.startswith("__")}
)
"""What veridic reads of a :class:`Prompt` (its field and every member it defines but the
dunders), which a subclass may not replace."""


def check_reasoning(prompt: Prompt, carries: ReasoningProvider | None, api: str) -> None:
    """Refuse to render ``prompt`` for ``api`` when it holds reasoning items ``api`` cannot take.

    The cross-provider rule: a reasoning item goes back only to the API of
    the provider that produced it (Anthropic items to the Messages API,
    OpenAI items to the Responses API; Chat Completions, ``carries=None``,
    takes none). Another API would reject the block, and leaving it out
    quietly would send less than the prompt's hash describes, so rendering
    raises instead; :meth:`Prompt.without_reasoning` drops items knowingly.

    Raises:
        VeridicError: naming the first item ``api`` cannot take, its message
            and the prompt.
    """
    for index, message in enumerate(prompt.messages):
        for item in message.reasoning:
            if item.provider != carries:
                raise VeridicError(
                    f"prompt {prompt.sha256[:12]} holds {item.provider} reasoning ({item.kind} "
                    f"in message {index}), which {api} cannot take: a reasoning item goes back "
                    f"only to {_REASONING_HOME[item.provider]}, bound to the provider and "
                    "model that produced it; send the prompt there, or leave the items out "
                    f"knowingly with prompt.without_reasoning({item.provider!r})"
                )


_vouched: Final[ContextVar[Prompt | None]] = ContextVar("veridic_vouched_prompt", default=None)
"""The prompt whose system message the caller has just checked, for the send it makes
(:func:`checked_system`)."""


def check_system(prompt: Prompt, at: str) -> bool:
    """Refuse the system message of ``prompt`` unless its parts are all trusted and make its
    text: invariant I1 for a prompt, the one rule that :class:`~veridic.ModelGateway` holds
    every send to and each provider format holds what it renders to.

    The parts are what is checked, each with :func:`~veridic.is_trusted`; a message built
    by hand whose parts do not make its text (or a user message turned into a system one
    with ``dataclasses.replace``, whose parts are a user's) is refused as the text it sends.
    ``at`` names who checks (``"ModelGateway"``, ``"Prompt.to_openai()"``), for the error.

    Returns:
        Whether report mode let a part that is not trusted pass (the caller then keeps
        nothing it worked out from the parts).

    Raises:
        ProvenanceError: in enforce mode, naming the part, the prompt and ``at``.
    """
    if not prompt.messages or prompt.messages[0].role != "system":
        return False
    message = prompt.messages[0]
    where = ""
    if "".join(message.parts) != message.content:
        where = _system_where(prompt, at)
        report(message.content, where)
    let_pass = False
    for part in message.parts:
        if not is_trusted(part):
            where = where or _system_where(prompt, at)
            report(part, where)
            let_pass = True
    return let_pass


def _system_text(prompt: Prompt) -> str:
    """The system message's text, unchecked: for a renderer that has just checked it with
    :func:`check_rendered` (reading :attr:`Prompt.system` would check it again, and report
    mode would log it twice)."""
    if prompt.messages and prompt.messages[0].role == "system":
        return prompt.messages[0].content
    return ""


def _system_where(prompt: Prompt, at: str) -> str:
    """Where a refusal of the system message says it was, named only when one is made."""
    return f"the system message of prompt {prompt.sha256[:12]}, at {at}"


@contextmanager
def checked_system(prompt: Prompt) -> Iterator[None]:
    """Inside the block, rendering ``prompt`` does not check its system message again.

    For :class:`~veridic.ModelGateway`, which checks it (:func:`check_system`) on every send
    and then has its adapter render it: each part is checked once per send, and report
    mode logs it once. Only this prompt object, in this context, and only until the block
    ends: rendered again outside it, the prompt is checked again.
    """
    token = _vouched.set(prompt)
    try:
        yield
    finally:
        _vouched.reset(token)


def check_rendered(prompt: Prompt, at: str) -> None:
    """:func:`check_system` for the provider format ``at`` renders, unless the caller has
    just checked ``prompt`` for this send (:func:`checked_system`)."""
    if _vouched.get() is not prompt:
        check_system(prompt, at)


def _anthropic_block(item: ReasoningItem) -> AnthropicReasoningBlock:
    # check_reasoning() let only Anthropic items through: their blocks are thinking blocks.
    return cast(AnthropicReasoningBlock, item.block())


def _openai_call(call: ToolCall) -> OpenAIToolCall:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _anthropic_blocks(message: Message, index: int, prompt_sha256: str) -> list[AnthropicBlock]:
    if message.role == "tool":
        result: AnthropicToolResultBlock = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.tool_error:
            result["is_error"] = True
        return [result]
    blocks: list[AnthropicBlock] = []
    blank = not message.content or message.content.isspace()
    if blank and message.role == "user":
        raise VeridicError(
            f"message {index} of prompt {prompt_sha256[:12]} is a user turn of no text "
            f"({clip(message.content)}), which the Messages API rejects, and left out it "
            "would make the assistant turn before it the start of the model's answer: "
            "leave the message out of the prompt, or say something in it (Composer.user() "
            "refuses such a turn)"
        )
    # The Messages API rejects a text block of only whitespace (a model's "\n\n" before
    # its tool calls, an assistant turn of spaces): it says nothing, so it goes as no block.
    if not blank:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        arguments = _tool_input(call, index)
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def _tool_input(call: ToolCall, index: int) -> dict[str, object]:
    """A call's arguments as the ``tool_use`` input the Messages API takes: a JSON object.

    The hash, the saved document and Chat Completions carry the arguments as text;
    the Messages API takes them parsed, so the text must read one way only. A key
    given twice would send its last value while a reviewer of the text reads the
    first (``json.loads`` keeps the last without a word), so it is refused, as is
    text that is not a JSON object (the API refuses another input, and a bare
    ``JSONDecodeError`` would name no call). :meth:`Composer.tool_call` writes every
    call's arguments as such an object.

    Raises:
        VeridicError: naming the call, its message and what is wrong.
    """
    try:
        parsed: object = _json_object.loads(call.arguments)
    except ValueError as error:
        if isinstance(error, RepeatedKeyError):
            problem = f"give the key {clip(error.key)} twice"
        else:
            problem = f"are not JSON ({error})"
    else:
        if isinstance(parsed, dict):
            return cast(dict[str, object], parsed)
        problem = f"are a JSON {type(parsed).__name__}, not an object"
    raise VeridicError(
        f"the arguments of tool call {clip(call.id)} ({clip(call.name)}) in message {index} "
        f"{problem}: the Messages API takes them parsed, as one JSON object, and would send "
        "another value than the prompt's text and hash carry; record calls with "
        "Composer.tool_call(), which writes the arguments as such an object"
    )
