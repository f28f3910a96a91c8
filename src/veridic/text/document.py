"""The saved prompt: what :meth:`veridic.Prompt.to_document` writes, read back for display.

A format with rules of its own (every key required, nothing ignored, the
hash recomputed, ASCII only), and a one-way door: what is read back is a
display-only :class:`PromptDocument`, never a prompt, so nothing here imports
the prompt. The prompt writes its document with ``_document_json``, kept
here beside the reader so the two sides of the format cannot drift apart.
Every name here also imports from :mod:`veridic.text.prompt`.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, cast, get_args

from veridic import _json_object
from veridic._counted import counted
from veridic._sample import clip
from veridic._words import a_type, article
from veridic.errors import VeridicError
from veridic.text._prompt_hash import _digest
from veridic.text.message import PromptSpan, Role, ToolCall, _tuple_of
from veridic.text.provenance import TRUSTED_KINDS, Kind
from veridic.text.provenance_map import Specs, _blocks, render
from veridic.text.reasoning import ReasoningItem, ReasoningProvider

__all__ = ["DocumentMessage", "DocumentReasoning", "PromptDocument"]

DOCUMENT_FORMAT: Final = "veridic-prompt/1"
"""The ``format`` of :meth:`Prompt.to_document`'s JSON (hashes as ``Prompt.sha256`` version 2)."""

_ROLES: Final[tuple[Role, ...]] = get_args(Role)
_KIND_NAMES: Final[tuple[Kind, ...]] = get_args(Kind)
_PROVIDERS: Final[tuple[ReasoningProvider, ...]] = get_args(ReasoningProvider)
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_PAIRED_SURROGATES: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_TO_DOCUMENT: Final = "write the document with prompt.to_document() and pass its text unchanged"


@dataclass(frozen=True, slots=True)
class DocumentReasoning:
    """A reasoning item as a document recorded it: its provider and JSON, for display only.

    Not a :class:`ReasoningItem`: nothing read from a document goes back to a model.
    """

    provider: ReasoningProvider
    json_text: str


@dataclass(frozen=True, slots=True)
class DocumentMessage:
    """One message of a :class:`PromptDocument`: what the model read, as plain text.

    The fields are those of :class:`~veridic.text.message.Message` the map
    and the terminal view show; ``content`` is a plain ``str``, so no
    composer takes it as an instruction.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: tuple[DocumentReasoning, ...] = ()
    tool_error: bool = False

    def __post_init__(self) -> None:
        # Tuples, as a Message keeps: a list changed after the document checked and hashed
        # it would show what the hash does not cover. The rest is checked by the document
        # that holds the message, which can say where it is (messages[2]).
        for name in ("tool_calls", "reasoning"):
            kept = _tuple_of(getattr(self, name), f"a DocumentMessage's {name}")
            object.__setattr__(self, name, kept)


@dataclass(frozen=True, slots=True)
class PromptDocument:
    """A prompt read back from :meth:`veridic.Prompt.to_document`: for display, never for sending.

    Trust never survives storage (see :mod:`veridic.text.conversation`): a
    document is text anyone with write access to the file could have
    changed, so it holds plain text and recorded spans, not branded parts,
    and nothing in veridic takes it as a prompt. It has what
    :func:`veridic.text.provenance_map.render` and
    :func:`veridic.text.terminal_view.render_terminal` read: :meth:`to_html`
    gives the page the prompt gave, headed by a notice that its provenance is as
    recorded in the file, not verified by veridic, and the terminal view says so too.

    Every document is valid: the spans lie inside their message, in order,
    without overlap, with the message's role; and the ``sha256`` is the hash
    of the messages, recomputed. A document whose text does not match its
    ``sha256`` is refused, not flagged: the hash is what ties a document to
    the audit store's records, and a map that shows one text under another
    text's hash would mislead the reviewer who matches them. The spans are
    not covered by the hash (provenance is not hashed, see
    :attr:`veridic.Prompt.sha256`): a document shows the provenance as
    recorded, with one check the text itself allows. Outside the system
    message, the label and the data of every block :func:`veridic.unfence`
    reads are outside text, which veridic never records as trusted: a
    document whose spans say otherwise was edited to show an injection as
    code, and is refused.

    A document made in code (``PromptDocument(...)``, ``dataclasses.replace``) is checked
    as a read one is, and its messages as a :class:`~veridic.text.message.Message` is: a
    role of the four, tool calls on an assistant message only, a tool call id and
    ``tool_error`` on a tool result only (which carries a non-empty id), reasoning on an
    assistant message only, each field of its JSON type; messages and spans are kept as
    tuples.

    Raises:
        VeridicError: a message or span no prompt could hold, the spans or the
            hash do not fit the messages, or a trusted span covers a data block's
            label or data (the message names the message, the span or the hashes).
    """

    messages: tuple[DocumentMessage, ...]
    spans: tuple[PromptSpan, ...]
    sha256: str

    def __post_init__(self) -> None:
        for name in ("messages", "spans"):
            object.__setattr__(self, name, _tuple_of(getattr(self, name), f"PromptDocument {name}"))
        if not isinstance(self.sha256, str):
            raise VeridicError(
                f"PromptDocument got {a_type(self.sha256)} as sha256, not text: {_TO_DOCUMENT}"
            )
        for index, message in enumerate(self.messages):
            _check_message(index, message)
        previous: PromptSpan | None = None
        for index, span in enumerate(self.spans):
            _check_span_fields(index, span)
            where = (
                f"PromptDocument: spans[{index}] (message {span.message}, {span.start}-{span.end})"
            )
            if not 0 <= span.message < len(self.messages):
                raise VeridicError(
                    f"{where} names message {span.message}, and the document has "
                    f"{len(self.messages)}: {_TO_DOCUMENT}"
                )
            message = self.messages[span.message]
            if span.role != message.role:
                raise VeridicError(
                    f"{where} has role {span.role!r}, and message {span.message} is "
                    f"{article(message.role)} message: {_TO_DOCUMENT}"
                )
            if not 0 <= span.start <= span.end <= len(message.content):
                raise VeridicError(
                    f"{where} lies outside the message's {len(message.content)} characters "
                    f"(a span is 0 <= start <= end <= length): {_TO_DOCUMENT}"
                )
            if previous is not None and (
                span.message < previous.message
                or (span.message == previous.message and span.start < previous.end)
            ):
                raise VeridicError(
                    f"{where} overlaps or precedes the span before it (message "
                    f"{previous.message}, {previous.start}-{previous.end}); spans come in "
                    f"message order, each after the last: {_TO_DOCUMENT}"
                )
            previous = span
        found = _digest(_pieces(self.messages))
        if found != self.sha256:
            raise VeridicError(
                f"PromptDocument: the messages hash to {found}, and the document says "
                f"{clip(self.sha256, 64)}: the text was changed after it was written (or the "
                f"document was written by another version); the document is refused, not "
                f"shown, since its hash is what ties it to the audit records: {_TO_DOCUMENT}"
            )
        _check_blocks_untrusted(self.messages, self.spans)

    @classmethod
    def from_json(cls, text: str | bytes) -> PromptDocument:
        """Read a document :meth:`veridic.Prompt.to_document` wrote, strictly.

        Every key is required and nothing else is allowed: an unknown key, a
        missing one, one given twice in an object (``json.loads`` would keep the
        last without a word) or a value of the wrong JSON type is refused whole, named
        by its place (``messages[2].tool_calls[0].name``), and so are spans
        that do not fit their message and a text that does not match the
        ``sha256``. Nothing is skipped quietly.

        Raises:
            VeridicError: the text is not such a document (the message says
                where and what was found).
        """
        try:
            # A key given twice is refused, not read as its last value: a reviewer of the
            # file would read one span or text and the view show another. Nesting too deep
            # for json is refused too, not let out as a bare RecursionError.
            document: object = _json_object.loads(text)
        except ValueError as error:
            shown = clip(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
            raise VeridicError(
                f"PromptDocument.from_json() got {shown}, which is not JSON, gives a key twice "
                f"or nests too deeply ({error}): {_TO_DOCUMENT}"
            ) from error
        where = "PromptDocument.from_json()"
        fields = _fields(document, where, "the document", _DOCUMENT_KEYS)
        if fields["format"] != DOCUMENT_FORMAT:
            raise VeridicError(
                f"{where}: the document's format is {clip(str(fields['format']))}, not "
                f"{DOCUMENT_FORMAT!r}: {_TO_DOCUMENT}"
            )
        sha256 = cast(str, fields["sha256"])
        if not _HEX64.fullmatch(sha256):
            raise VeridicError(
                f"{where}: 'sha256' is {clip(sha256)}, not 64 lowercase hex digits "
                f"(Prompt.sha256): {_TO_DOCUMENT}"
            )
        messages = tuple(
            _read_message(where, index, item)
            for index, item in enumerate(cast(list[object], fields["messages"]))
        )
        spans = tuple(
            _read_span(where, index, item)
            for index, item in enumerate(cast(list[object], fields["spans"]))
        )
        return cls(messages, spans, sha256)

    def to_json(self) -> str:
        """The JSON :meth:`veridic.Prompt.to_document` wrote: the same text for the same prompt."""
        return _document_json(self.sha256, self.messages, self.spans)

    def to_html(self, *, tools: Specs | None = None) -> str:
        """The provenance map of the document: the page :meth:`veridic.Prompt.to_html` gave,
        headed by a notice that the provenance is as recorded, not verified by veridic.

        The page is otherwise the prompt's, byte for byte. The notice is there because
        the spans are only what the file says: the hash covers the text, not the
        provenance, so an edited file could show a user's turn as written in code, and
        a reviewer must not take the colours for veridic's word.

        Raises:
            VeridicError: a spec in ``tools`` has no name.
        """
        return render(self, tools=tools)

    def _repr_html_(self) -> str:
        return render(self, document=False)


def _check_message(index: int, message: object) -> None:
    """Refuse a message no prompt holds: the rules of ``Message``, and JSON's field types."""
    where = f"PromptDocument: messages[{index}]"
    if not isinstance(message, DocumentMessage):
        raise VeridicError(f"{where} is {a_type(message)}, not a DocumentMessage: {_TO_DOCUMENT}")
    role: object = message.role
    if role not in _ROLES:
        raise VeridicError(
            f"{where} has the role {_shown(role)}, not one of {', '.join(_ROLES)}: {_TO_DOCUMENT}"
        )
    wrong = _wrong_field(message)
    if wrong is not None:
        raise VeridicError(f"{where}: {wrong}: {_TO_DOCUMENT}")
    problem = _broken_link(message)
    if problem is not None:
        raise VeridicError(
            f"{where} is {article(message.role)} message that {problem}, which no prompt "
            f"holds (Message and the composer refuse it): {_TO_DOCUMENT}"
        )


def _shown(value: object) -> str:
    """A value as a message quotes it: text clipped, anything else by its clipped repr."""
    return clip(value) if isinstance(value, str) else repr(value)[:60]


def _wrong_field(message: DocumentMessage) -> str | None:
    """What of ``message`` is not of the JSON type a document writes, or ``None``."""
    if not isinstance(message.content, str):
        return f"its content is {a_type(message.content)}, not text"
    if message.tool_call_id is not None and not isinstance(message.tool_call_id, str):
        return f"its tool call id is {a_type(message.tool_call_id)}, not text or None"
    if type(message.tool_error) is not bool:
        return f"its tool_error is {a_type(message.tool_error)}, not a bool"
    for number, call in enumerate(message.tool_calls):
        if not isinstance(call, ToolCall):  # whose fields are text (ToolCall checks them)
            return f"tool_calls[{number}] is {a_type(call)}, not a ToolCall"
    for number, item in enumerate(message.reasoning):
        if not isinstance(item, DocumentReasoning):
            return f"reasoning[{number}] is {a_type(item)}, not a DocumentReasoning"
        if item.provider not in _PROVIDERS:
            return (
                f"reasoning[{number}].provider is {_shown(item.provider)}, not a provider "
                f"of reasoning items ({', '.join(_PROVIDERS)})"
            )
        if not isinstance(item.json_text, str):
            return f"reasoning[{number}].json_text is {a_type(item.json_text)}, not text"
    return None


def _broken_link(message: DocumentMessage) -> str | None:
    """The rule of ``Message`` that ``message`` breaks (its role against what it carries)."""
    role = message.role
    if message.tool_calls and role != "assistant":
        calls = counted(len(message.tool_calls), "tool call")
        return f"holds {calls}: only the model's turn makes calls"
    if message.reasoning and role != "assistant":
        items = counted(len(message.reasoning), "reasoning item")
        return f"holds {items}: only the model's turn has any"
    if role == "tool" and not message.tool_call_id:
        return "answers no call: a tool result carries the non-empty id of the call it answers"
    if role != "tool" and (message.tool_call_id is not None or message.tool_error):
        return "has a tool call id or tool_error: only a tool result answers a call"
    return None


def _check_span_fields(index: int, span: object) -> None:
    """Refuse a span that is not a ``PromptSpan`` of the JSON types a document writes."""
    where = f"PromptDocument: spans[{index}]"
    if not isinstance(span, PromptSpan):
        raise VeridicError(f"{where} is {a_type(span)}, not a PromptSpan: {_TO_DOCUMENT}")
    for name in ("message", "start", "end"):
        if not isinstance(getattr(span, name), int) or isinstance(getattr(span, name), bool):
            raise VeridicError(
                f"{where}: its {name} is {a_type(getattr(span, name))}, not an integer: "
                f"{_TO_DOCUMENT}"
            )
    if span.kind not in _KIND_NAMES:
        raise VeridicError(
            f"{where}: its kind is {_shown(span.kind)}, not a provenance kind "
            f"({', '.join(_KIND_NAMES)}): {_TO_DOCUMENT}"
        )
    if not isinstance(span.origin, str) or not isinstance(span.role, str):
        shown = span.role if isinstance(span.origin, str) else span.origin
        raise VeridicError(
            f"{where}: its origin or role is {a_type(shown)}, not text: {_TO_DOCUMENT}"
        )


def _check_blocks_untrusted(
    messages: Sequence[DocumentMessage], spans: Sequence[PromptSpan]
) -> None:
    """Refuse a trusted span over a data block's label or data, outside the system message.

    The one part of the provenance the hashed text vouches for: the composer brands a
    block's label and data as they came (untrusted, or an unbranded ``str``) and neither
    a user nor an assistant turn can hold a block, so a trusted span there was written
    into the document afterwards. The system message is left alone: a block written in
    code there (a worked example) is trusted text.
    """
    found: dict[int, tuple[list[int], list[tuple[int, int, str, str]]]] = {}
    for index, span in enumerate(spans):
        if span.kind not in TRUSTED_KINDS or span.start == span.end:
            continue
        message = messages[span.message]
        if message.role == "system" or "<data" not in message.content:
            continue
        if span.message not in found:
            stretches = [
                stretch
                for block in _blocks(message.content)
                for stretch in (
                    (block.label_start, block.label_end, "label", block.label),
                    (block.content_start, block.content_end, "data", block.label),
                )
                if stretch[0] < stretch[1]  # an empty block's own lines form one span
            ]
            # In order and apart, so their ends are in order too: the first stretch ending
            # after a span's start is the only one it can overlap first (found by bisection,
            # not by comparing every span with every block of a crafted many-block message).
            found[span.message] = ([stretch[1] for stretch in stretches], stretches)
        ends, stretches = found[span.message]
        at = bisect_right(ends, span.start)
        if at < len(stretches) and stretches[at][0] < span.end:
            _, _, part, label = stretches[at]
            raise VeridicError(
                f"PromptDocument: spans[{index}] (message {span.message}, "
                f"{span.start}-{span.end}) says {span.kind} ({clip(span.origin)}), and it "
                f"covers the {part} of the data block labelled {clip(label)}, which is "
                "outside text veridic never records as trusted: the spans were changed "
                f"after the document was written, to show data as instructions: {_TO_DOCUMENT}"
            )


class _Hashed(Protocol):
    """What :attr:`Prompt.sha256` reads of a message (a :class:`Message` or a document's)."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_calls(self) -> tuple[ToolCall, ...]: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def reasoning(self) -> tuple[ReasoningItem, ...] | tuple[DocumentReasoning, ...]: ...
    @property
    def tool_error(self) -> bool: ...


def _pieces(messages: Sequence[_Hashed]) -> list[str]:
    """The pieces :attr:`Prompt.sha256` hashes, and a read document again (the encoding is in
    that docstring): one list, so the prompt and its document cannot hash differently."""
    pieces: list[str] = []
    for m in messages:
        pieces += (m.role, m.content, str(len(m.tool_calls)))
        for call in m.tool_calls:
            pieces += (call.id, call.name, call.arguments)
        pieces += (m.tool_call_id or "", str(len(m.reasoning)))
        for item in m.reasoning:
            pieces += (item.provider, item.json_text)
        if m.tool_error:
            pieces.append("tool-error")
    return pieces


def _span_json(span: PromptSpan) -> dict[str, object]:
    """A span as a saved document writes it, and as ``veridic show`` prints a call's."""
    return {
        "message": span.message,
        "role": span.role,
        "start": span.start,
        "end": span.end,
        "kind": span.kind,
        "origin": span.origin,
    }


def _document_json(sha256: str, messages: Sequence[_Hashed], spans: Sequence[PromptSpan]) -> str:
    document = {
        "format": DOCUMENT_FORMAT,
        "sha256": sha256,
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
                ],
                "tool_call_id": m.tool_call_id,
                "reasoning": [{"provider": i.provider, "json": i.json_text} for i in m.reasoning],
                "tool_error": m.tool_error,
            }
            for m in messages
        ],
        "spans": [_span_json(s) for s in spans],
    }
    for index, m in enumerate(messages):
        texts = [
            m.content,
            *(c.arguments for c in m.tool_calls),
            *(i.json_text for i in m.reasoning),
        ]
        if any(_PAIRED_SURROGATES.search(t) for t in texts):
            raise VeridicError(
                f"prompt {sha256[:12]}: message {index} holds a lone high surrogate directly "
                "before a lone low one, which JSON reads back as one character, so the "
                "document could not give the text back as it is; such text cannot be sent "
                "as UTF-8 either: find where it came from and decode it properly"
            )
    # ASCII only: printed, the JSON cannot carry a control sequence to a terminal.
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


_DOCUMENT_KEYS: Final[dict[str, type]] = {
    "format": str,
    "sha256": str,
    "messages": list,
    "spans": list,
}
_MESSAGE_KEYS: Final[dict[str, type | tuple[type, ...]]] = {
    "role": str,
    "content": str,
    "tool_calls": list,
    "tool_call_id": (str, type(None)),
    "reasoning": list,
    "tool_error": bool,
}
_CALL_KEYS: Final[dict[str, type]] = {"id": str, "name": str, "arguments": str}
_REASONING_KEYS: Final[dict[str, type]] = {"provider": str, "json": str}
_SPAN_KEYS: Final[dict[str, type]] = {
    "message": int,
    "role": str,
    "start": int,
    "end": int,
    "kind": str,
    "origin": str,
}


def _fields(
    value: object, where: str, place: str, keys: Mapping[str, type | tuple[type, ...]]
) -> dict[str, object]:
    """``value`` as an object with exactly ``keys``, each of its JSON type (bool is no int)."""
    if not isinstance(value, dict):
        raise VeridicError(
            f"{where}: {place} is {_json_type(value)}, not an object: {_TO_DOCUMENT}"
        )
    missing = [key for key in keys if key not in value]
    unknown = sorted(map(str, set(value) - set(keys)))
    if missing or unknown:
        raise VeridicError(
            f"{where}: {place} must hold exactly the keys {', '.join(keys)} (missing "
            f"{missing or 'none'}, unknown {unknown or 'none'}); nothing in a document is "
            f"ignored: {_TO_DOCUMENT}"
        )
    for key, expected in keys.items():
        allowed = expected if isinstance(expected, tuple) else (expected,)
        if type(value[key]) not in allowed:
            wanted = " or ".join(_JSON_NAMES[t] for t in allowed)
            raise VeridicError(
                f"{where}: {place}.{key} is {_json_type(value[key])}, not {wanted}: {_TO_DOCUMENT}"
            )
    return value


_JSON_NAMES: Final[dict[type, str]] = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
    float: "a number",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_NAMES.get(type(value), a_type(value))


def _read_message(where: str, index: int, item: object) -> DocumentMessage:
    place = f"messages[{index}]"
    fields = _fields(item, where, place, _MESSAGE_KEYS)
    role = fields["role"]
    if role not in _ROLES:
        raise VeridicError(
            f"{where}: {place}.role is {clip(str(role))}, not a role ({', '.join(_ROLES)}): "
            f"{_TO_DOCUMENT}"
        )
    calls = []
    for number, call in enumerate(cast(list[object], fields["tool_calls"])):
        read = _fields(call, where, f"{place}.tool_calls[{number}]", _CALL_KEYS)
        calls.append(
            ToolCall(cast(str, read["id"]), cast(str, read["name"]), cast(str, read["arguments"]))
        )
    reasoning = []
    for number, entry in enumerate(cast(list[object], fields["reasoning"])):
        read = _fields(entry, where, f"{place}.reasoning[{number}]", _REASONING_KEYS)
        provider = read["provider"]
        if provider not in _PROVIDERS:
            raise VeridicError(
                f"{where}: {place}.reasoning[{number}].provider is {clip(str(provider))}, "
                f"not a provider of reasoning items ({', '.join(_PROVIDERS)}): {_TO_DOCUMENT}"
            )
        reasoning.append(DocumentReasoning(provider, cast(str, read["json"])))
    return DocumentMessage(
        role,
        cast(str, fields["content"]),
        tuple(calls),
        cast("str | None", fields["tool_call_id"]),
        tuple(reasoning),
        cast(bool, fields["tool_error"]),
    )


def _read_span(where: str, index: int, item: object) -> PromptSpan:
    place = f"spans[{index}]"
    fields = _fields(item, where, place, _SPAN_KEYS)
    role, kind = fields["role"], fields["kind"]
    if role not in _ROLES:
        raise VeridicError(
            f"{where}: {place}.role is {clip(str(role))}, not a role ({', '.join(_ROLES)}): "
            f"{_TO_DOCUMENT}"
        )
    if kind not in _KIND_NAMES:
        raise VeridicError(
            f"{where}: {place}.kind is {clip(str(kind))}, not a provenance kind "
            f"({', '.join(_KIND_NAMES)}): {_TO_DOCUMENT}"
        )
    return PromptSpan(
        cast(int, fields["message"]),
        role,
        cast(int, fields["start"]),
        cast(int, fields["end"]),
        kind,
        cast(str, fields["origin"]),
    )
