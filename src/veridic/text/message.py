"""A message of a prompt, and the parts a message is made of.

The role, the tool calls and the spans located by message are not the
prompt's alone: a saved prompt (:class:`~veridic.text.prompt.PromptDocument`)
holds them too, and the audit records and the telemetry name them. Here,
below the prompt, the document reads them without importing the prompt that
writes it. Every name here also imports from :mod:`veridic.text.prompt`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, ItemsView, Iterable, KeysView
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args
from weakref import WeakSet

from veridic._counted import counted
from veridic._sample import clip
from veridic._words import a_type, article
from veridic.errors import VeridicError
from veridic.text.provenance import Kind, Span, concat_spans
from veridic.text.reasoning import ReasoningItem

__all__ = ["Message", "PromptSpan", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from: the four roles of a chat prompt, whatever the provider."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made, with its arguments as canonical JSON text.

    Raises:
        VeridicError: the id, the name or the arguments are not text (the prompt's hash
            and every provider format write them as text).
    """

    id: str
    name: str
    arguments: str

    def __post_init__(self) -> None:
        for field_name in ("id", "name", "arguments"):
            value: object = getattr(self, field_name)
            if not isinstance(value, str):
                raise VeridicError(
                    f"a tool call's {field_name} must be text, got {a_type(value)} "
                    f"({repr(value)[:60]}): pass the id and the name as the model returned "
                    "them, and the arguments as JSON text (Composer.tool_call() writes them)"
                )


@dataclass(frozen=True, slots=True)
class Message:
    """One message: its role, exact text, the branded parts it was made of, tool-call links.

    ``reasoning`` holds the model's reasoning items of an assistant turn
    (:class:`ReasoningItem`), in the order the model produced them; only an
    assistant turn carries any.

    Every field must be one each provider format carries as the prompt's hash
    describes it, so a message built by hand cannot send more, or less, than
    what the hash and the audit record cover: the role is one of the four of
    :data:`Role` (a ``"developer"`` message reached the OpenAI APIs as a second
    instruction message that :class:`~veridic.ModelGateway`, which checks the
    first message, never checked), tool calls sit on an assistant message only,
    and a tool call id and ``tool_error`` on a tool message only (elsewhere the
    Anthropic and Responses formats left them out without a word). A tool message
    carries the non-empty id of the call it answers: the hash writes a missing id
    as an empty one, which Chat Completions would send as another request.

    A subclass may add members, not replace the ones veridic reads (the fields and
    :attr:`spans`): the saved document, the provenance map, the terminal view and the
    adapters read them, and an override of :attr:`spans` made a ticket's text read as
    code everywhere but at :meth:`ModelGateway.send <veridic.ModelGateway.send>`. Nor
    may it replace ``__getattribute__`` or ``__init_subclass__``; the checks below run
    after a subclass's own ``__init__`` or ``__post_init__``, whether or not it calls
    this one's.

    Raises:
        VeridicError: the role is not a :data:`Role`; tool calls on a message
            that is not the assistant's; a tool call id or ``tool_error`` on
            one that is not a tool result; a tool result without the non-empty
            id of the call it answers; ``reasoning`` holds something that
            is not a :class:`ReasoningItem`, or sits on a turn that is not the
            assistant's. When a subclass is defined: it replaces a field,
            :attr:`spans`, ``__getattribute__`` or ``__init_subclass__``.
    """

    role: Role
    content: str
    parts: tuple[str, ...] = field(repr=False, compare=False)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: tuple[ReasoningItem, ...] = ()
    tool_error: bool = False
    """A tool result that reports a failed, refused or denied call (Anthropic's ``is_error``)."""

    def __init_subclass__(cls) -> None:
        # No super() call: the class the slots dataclass makes is not the one the
        # zero-argument form names, and object's takes no keyword to pass on.
        refuse_replaced(cls, "Message", _READ_OF_A_MESSAGE)
        keep_checks(cls, Message.__post_init__)

    def __post_init__(self) -> None:
        _own_tuples(self)
        _check_types(self)
        _check_links(self)
        if not self.reasoning:
            return
        if not isinstance(self.reasoning, tuple) or not all(
            isinstance(item, ReasoningItem) for item in self.reasoning
        ):
            raise VeridicError(
                f"{article(self.role)} message got reasoning={clip(repr(self.reasoning))}: pass a "
                "tuple of ReasoningItem, as Reply.reasoning holds them"
            )
        if self.role != "assistant":
            raise VeridicError(
                f"{article(self.role)} message got "
                f"{counted(len(self.reasoning), 'reasoning item')}: "
                "reasoning is the model's own output and goes on an assistant turn only; pass "
                "it with Composer.assistant(text, reasoning=...)"
            )

    @property
    def spans(self) -> tuple[Span, ...]:
        """Where every character of ``content`` came from (worked out on request)."""
        return spans_of_parts(self)


_ROLES: Final[tuple[Role, ...]] = get_args(Role)

_READ_OF_A_MESSAGE: Final = frozenset(
    {"spans", "role", "content", "parts", "tool_calls", "tool_call_id", "reasoning", "tool_error"}
)
"""What veridic reads of a :class:`Message`, which a subclass may not replace."""

_PARTS: Final = Message.__dict__["parts"]
"""The slot that holds a message's parts, read past any attribute of a subclass's."""


def spans_of_parts(message: Message) -> tuple[Span, ...]:
    """The spans of ``message`` as veridic records them: worked out from the parts it was
    made of, never from an attribute a subclass (or a monkeypatch of one) put in place of
    :attr:`Message.spans`. Every reader of a prompt's provenance goes through here."""
    parts: tuple[str, ...] = _PARTS.__get__(message)
    return concat_spans(parts, "")


def refuse_replaced(cls: type, base: str, read: frozenset[str]) -> None:
    """Refuse a subclass ``cls`` of ``base`` that replaces one of the members in ``read``,
    or what decides how they are read (:data:`_GUARDS`).

    Checked when the subclass is defined, so nothing made of it is ever checked by one
    reading and sent, hashed or shown by another.

    Raises:
        VeridicError: naming the subclass and what it replaces.
    """
    replaced = sorted((read | _GUARDS) & vars(cls).keys())
    if replaced:
        guards = (
            " (__getattribute__ decides every read of them, __init_subclass__ refuses a "
            "subclass of this one that replaces them)"
            if _GUARDS.intersection(replaced)
            else ""
        )
        raise VeridicError(
            f"{cls.__module__}.{cls.__qualname__}, a subclass of {base}, replaces "
            f"{', '.join(replaced)}: veridic reads its members to check, hash, record and "
            f"send {article(base)}{guards}, and a replacement could say one thing to the "
            "checks and another to the model; a subclass may add members, not replace these "
            "(keep what you need in a member of another name)"
        )


_GUARDS: Final = frozenset({"__getattribute__", "__init_subclass__"})
"""What decides how a value's members are read, and that a subclass is refused: a
``__getattribute__`` gave every reader but the slot's a forged ``content``, and an
``__init_subclass__`` that skipped the check let any subclass of it replace the rest."""


def keep_checks(cls: type, check: Callable[[Any], None]) -> None:
    """Run ``check`` (the base's ``__post_init__``) after the ``__init__`` or
    ``__post_init__`` subclass ``cls`` defines, whether or not they call the base's.

    One that did not call it skipped every check of the value: a ``developer`` message
    reached OpenAI as an instruction no check had seen, a later ``system`` message went
    out as a second one. Refusing them would refuse the dataclass subclass that adds a
    field and sets it up; the checks read and settle the value the same way twice, so one
    that does call the base's costs them once more, nothing else.
    """
    for name in ("__init__", "__post_init__"):
        own = vars(cls).get(name)
        if callable(own) and own not in _CHECKING:
            checking = _then(own, check)
            _CHECKING.add(checking)
            setattr(cls, name, checking)


_CHECKING: Final[WeakSet[Callable[..., None]]] = WeakSet()
"""The ``__init__`` and ``__post_init__`` made by :func:`keep_checks`: a slots dataclass
copies them into the class it makes, which is checked again, and needs no second wrap."""


def _then(own: Callable[..., None], check: Callable[[Any], None]) -> Callable[..., None]:
    """``own``, then ``check`` of the value it set up."""

    @functools.wraps(own)
    def checking(self: object, /, *args: object, **kwargs: object) -> None:
        own(self, *args, **kwargs)
        check(self)

    return checking


def _own_tuples(message: Message) -> None:
    """Keep tuples of the parts and calls: a list the caller changes after the prompt hashed
    it would change what is sent, not the hash (or the record) that covers it."""
    for name in ("parts", "tool_calls"):
        value = getattr(message, name)
        if type(value) is not tuple:  # the usual case costs one type check, no message
            kept = _tuple_of(value, f"{article(message.role)} message's {name}")
            object.__setattr__(message, name, kept)
    for index, call in enumerate(message.tool_calls):
        if not isinstance(call, ToolCall):
            raise VeridicError(
                f"tool_calls[{index}] of {article(message.role)} message is {a_type(call)}, "
                "not a ToolCall: record calls with Composer.tool_call()"
            )


def _tuple_of(value: object, where: str) -> tuple[object, ...]:
    """``value`` as the tuple a frozen value keeps of it; a list or another sequence is copied.

    Raises:
        VeridicError: ``value`` is no sequence of items (``None``, a number), is text,
            which ``tuple()`` would split into characters, or is a set, whose order changes
            from one process to the next (``PYTHONHASHSEED``): the same value would hash,
            and be sent, in another order each run. A dict's keys or items are sets too,
            but keep the dict's order, the one it was filled in: they are taken.
    """
    if type(value) is tuple:
        return value
    if isinstance(value, AbstractSet) and not isinstance(value, KeysView | ItemsView):
        raise VeridicError(
            f"{where} is {a_type(value)}, whose order changes from one run to the next, so "
            "the prompt's hash and what is sent would too: pass a tuple or a list of the "
            "items, in the order they came"
        )
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        shown = "" if value is None else f" ({clip(value if type(value) is str else repr(value))})"
        raise VeridicError(
            f"{where} is {a_type(value)}{shown}, not a tuple: pass a tuple "
            "or a list of the items, () for none"
        )
    return tuple(value)


def _check_types(message: Message) -> None:
    """Refuse a content, part or ``tool_error`` of another type than the hash writes.

    The prompt's hash and every provider format write the content and the parts as text
    and ``tool_error`` as a flag: kept as given, a message made by hand failed to hash
    with a bare ``TypeError``, or was sent with ``is_error: 1``.
    """
    problem = None
    if not isinstance(message.content, str):
        problem = f"content must be text, got {a_type(message.content)}"
    elif type(message.tool_error) is not bool:
        problem = f"tool_error must be True or False, got {a_type(message.tool_error)}"
    else:
        for index, part in enumerate(message.parts):
            if not isinstance(part, str):
                problem = f"parts[{index}] must be text, got {a_type(part)}"
                break
    if problem is not None:
        raise VeridicError(
            f"a message's {problem}: build prompts with Composer, whose parts are the "
            "texts it was given"
        )


def _check_links(message: Message) -> None:
    """Refuse a role no prompt has, and calls or a call id on a message that cannot carry them."""
    role: object = message.role
    if role not in _ROLES:
        raise VeridicError(
            f"a message got the role {clip(repr(role))}, which is not one of "
            f"{', '.join(_ROLES)}: the provider formats would send it as it is (a "
            "'developer' message instructs the OpenAI models, unchecked by ModelGateway); "
            "build prompts with Composer, and put instructions in Composer.system()"
        )
    if message.tool_calls and role != "assistant":
        raise VeridicError(
            f"{article(role)} message got {counted(len(message.tool_calls), 'tool call')} (first "
            f"{clip(str(message.tool_calls[0].name))}): only the model's own turn makes tool "
            "calls, and the Anthropic and Responses formats would leave them out; record them "
            "with Composer.tool_call()"
        )
    if role == "tool" and (type(message.tool_call_id) is not str or not message.tool_call_id):
        raise VeridicError(
            f"a tool message {_shown(message.tool_call_id)}, so it "
            "answers no call: a result answers the call whose id it carries, and the prompt's "
            "hash writes no id as empty, so an empty id and none would send two requests under "
            "one sha256; answer a call with Composer.tool_result(), giving the id the model "
            "gave the call"
        )
    if role != "tool" and (message.tool_call_id is not None or message.tool_error):
        raise VeridicError(
            f"{article(role)} message got a tool call id ({clip(repr(message.tool_call_id))}) or "
            f"tool_error={message.tool_error!r}: only a tool result answers a call, and the "
            "Anthropic and Responses formats would leave them out of this message; answer a "
            "call with Composer.tool_result()"
        )


def _shown(call_id: object) -> str:
    """What a tool message got as its call id, as an error says it."""
    if call_id is None:
        return "has no tool call id"
    if isinstance(call_id, str):
        return f"got the tool call id {clip(call_id)}"
    return f"got the tool call id {repr(call_id)[:60]} of type {type(call_id).__name__}, not a str"


@dataclass(frozen=True, slots=True)
class PromptSpan:
    """Characters ``[start, end)`` of message number ``message`` and their provenance."""

    message: int
    role: Role
    start: int
    end: int
    kind: Kind
    origin: str

    @property
    def trusted(self) -> bool:
        return self.kind in ("code", "field", "template", "registry", "policy")
