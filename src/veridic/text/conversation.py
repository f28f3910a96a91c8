"""``Conversation``: the turns of a composition, stored between requests without their trust.

An agent that answers over several HTTP requests (a run paused for the
user's approval, a chat that goes on tomorrow) must keep its conversation
somewhere: a JSON column, a file, the audit store. What comes back from
storage is text anyone with write access to that store could have changed,
so **trust never survives storage**, by design:

- a conversation holds only the turns (the end user's, the model's, data
  blocks, tool calls and their results), never the system message: on load
  the system part is built again from code and flagged fields, by the
  application, exactly as the first request built it;
- every text comes back untrusted: a user turn with source
  ``stored:user``, the model's own turn with ``stored:assistant``, a data
  block or a tool result with the source it had when it was saved (an
  untrusted source is a label, not a permission);
- a stored document that names a system turn, a field this format does not
  have, a value of the wrong type, or a key twice in one object (a
  reasoning item's JSON text included) is refused
  whole, with the turn and the key that was wrong: nothing is skipped
  quietly (``json.loads`` keeps the last of two equal keys, so a reviewer of
  the stored row would read one turn and the prompt say another).

Restored into a composer (:meth:`Composer.restore <veridic.Composer.restore>`),
the turns render exactly as they did: each block keeps its label and data
mode, and a text that was neutralised (a line that looked like a block's) is
neutralised again, so a conversation restored into the same system part
builds a prompt with the same :attr:`~veridic.Prompt.sha256`.

The JSON format (``"format": "veridic-conversation/1"``) is one object
holding ``turns``, a list in order; each turn is one of::

    {"user": "text"}
    {"data": "text", "label": "ticket:42", "source": "ticket:42", "mode": "datamark"}
    {"assistant": "text", "reasoning": [{"provider": "anthropic", "json": "{...}"}]}
    {"tool_call": "call-1", "name": "get_weather", "arguments": {"city": "Oslo"}}
    {"tool_result": "call-1", "text": "...", "source": "tool:get_weather",
     "mode": "datamark", "error": false}

>>> from veridic import Composer, instruction, untrusted
>>> composer = Composer().system(instruction("You report the weather."))
>>> _ = composer.user("Oslo?").tool_call("c1", "get_weather", {"city": "Oslo"})
>>> _ = composer.tool_result("c1", untrusted("Sunny", source="tool:get_weather"))
>>> saved = composer.conversation().to_json()
>>> restored = Composer().system(instruction("You report the weather."))
>>> restored.restore(Conversation.from_json(saved)).build().sha256 == composer.build().sha256
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, cast, get_args

from veridic import _json_object
from veridic._sample import clip, quoted
from veridic._words import a_type, article
from veridic.errors import VeridicError
from veridic.text.fence import DATA_MODES, DataMode, check_label
from veridic.text.message import _tuple_of
from veridic.text.prompt import ReasoningItem, ReasoningProvider

__all__ = ["Conversation", "Turn"]

FORMAT: Final = "veridic-conversation/1"
USER_SOURCE: Final = "stored:user"
ASSISTANT_SOURCE: Final = "stored:assistant"

TurnKind = Literal["user", "data", "assistant", "tool_call", "tool_result"]
_KINDS: Final[tuple[TurnKind, ...]] = get_args(TurnKind)


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored turn: what the composer was given, as plain text (no brand, no trust).

    ``kind`` says which composer method made it (``user``, ``data``,
    ``assistant``, ``tool_call``, ``tool_result``); the other fields are
    those of that method, empty where they do not apply: ``text`` (the
    turn's text, a block's content, a result; a call's arguments as JSON),
    ``label`` (a block's label, a call's tool name), ``source`` (where a
    block's or a result's text came from), ``mode`` (a block's data mode),
    ``call_id`` (a call and its result), ``error`` (a result that reports a
    failure), ``reasoning`` (an assistant turn's reasoning items).

    Raises:
        VeridicError: ``kind`` is not one of the five, ``mode`` is not a data
            mode (a turn of another kind would be replayed as a tool result), or a
            call's ``text`` is not one JSON object that gives each key once
            (``json.loads`` would keep the last of two without a word, and the
            replayed call would say other than the history it was built from);
            a field is of the wrong type (``error`` not ``True`` or ``False``,
            ``reasoning`` not of :class:`ReasoningItem`), or is set on a kind that
            does not have it (a reasoning item on a user turn, a call id on a data
            block: neither stored nor restored, it would vanish); a block's or a
            result's ``source`` is empty, a block's ``label`` is not a label, or a
            call's or a result's ``call_id`` is empty.
    """

    kind: TurnKind
    text: str = ""
    label: str = ""
    source: str = ""
    mode: DataMode = "datamark"
    call_id: str = ""
    error: bool = False
    reasoning: tuple[ReasoningItem, ...] = ()

    def __post_init__(self) -> None:
        kind: object = self.kind
        if kind not in _KINDS:
            raise VeridicError(
                f"a stored turn got the kind {clip(str(kind))}, which is not one of "
                f"{', '.join(_KINDS)}: a conversation holds the turns after the system part, "
                "never the system message (build it from code and restore the turns after "
                "it); make turns with Composer.conversation() or Conversation.from_json()"
            )
        if self.mode not in DATA_MODES:
            raise VeridicError(
                f"a stored {kind} turn got the data mode {clip(str(self.mode))}, which is "
                f"not one of {', '.join(DATA_MODES)}"
            )
        _check_fields(self)
        if kind == "tool_call":
            _check_arguments(self.text, self.call_id, self.label)
        elif kind == "data":
            check_label(self.label)

    def to_json_object(self) -> dict[str, object]:
        """The turn as the JSON object the format documents."""
        if self.kind == "user":
            return {"user": self.text}
        if self.kind == "data":
            return {
                "data": self.text,
                "label": self.label,
                "source": self.source,
                "mode": self.mode,
            }
        if self.kind == "assistant":
            turn: dict[str, object] = {"assistant": self.text}
            if self.reasoning:
                turn["reasoning"] = [
                    {"provider": item.provider, "json": item.json_text} for item in self.reasoning
                ]
            return turn
        if self.kind == "tool_call":
            arguments: object = json.loads(self.text)
            return {"tool_call": self.call_id, "name": self.label, "arguments": arguments}
        return {
            "tool_result": self.call_id,
            "text": self.text,
            "source": self.source,
            "mode": self.mode,
            "error": self.error,
        }


_HAS: Final[dict[str, frozenset[str]]] = {
    "user": frozenset({"text"}),
    "data": frozenset({"text", "label", "source", "mode"}),
    "assistant": frozenset({"text", "reasoning"}),
    "tool_call": frozenset({"text", "label", "call_id"}),
    "tool_result": frozenset({"text", "source", "mode", "call_id", "error"}),
}
"""The fields each kind of turn has; the others stay at their defaults."""

_UNSET: Final[dict[str, object]] = {
    "text": "",
    "label": "",
    "source": "",
    "mode": "datamark",
    "call_id": "",
    "error": False,
    "reasoning": (),
}
"""Every field's default, which a kind that does not have the field keeps."""


def _check_fields(turn: Turn) -> None:
    """Refuse a field of the wrong type, one set on a kind that does not have it, and an
    empty source or call id where the kind needs one.

    The stored format and :meth:`Composer.restore <veridic.Composer.restore>` read only
    the fields of a turn's kind: another one set on it (a reasoning item on a user turn)
    was neither stored nor restored, without a word, and ``error="yes"`` was restored as a
    result that reports no failure.
    """
    where = f"a stored {turn.kind} turn"
    for name in ("text", "label", "source", "call_id"):
        value: object = getattr(turn, name)
        if not isinstance(value, str):
            raise VeridicError(f"{where} got {a_type(value)} as its {name}: pass text")
    if type(turn.error) is not bool:
        raise VeridicError(
            f"{where} got error={quoted(turn.error)}, {a_type(turn.error)}: pass True for a "
            "result that reports a failed, refused or denied call, False for one that ran "
            "(bool(flag) for a flag of another type, such as numpy's)"
        )
    reasoning = _tuple_of(turn.reasoning, f"{where}'s reasoning")
    for index, item in enumerate(reasoning):
        if not isinstance(item, ReasoningItem):
            raise VeridicError(
                f"{where} got {a_type(item)} as reasoning item {index}: pass the "
                "ReasoningItem values of the reply, or ReasoningItem.of(provider, block)"
            )
    object.__setattr__(turn, "reasoning", reasoning)
    has = _HAS[turn.kind]
    stray = [
        name for name, unset in _UNSET.items() if name not in has and getattr(turn, name) != unset
    ]
    if stray:
        raise VeridicError(
            f"{where} got {', '.join(stray)}, which {article(turn.kind)} turn does not have "
            f"(it has {', '.join(sorted(has))}): it would be neither stored nor restored; "
            "leave it out, or make the turn of the kind that carries it"
        )
    if "source" in has and not turn.source.strip():
        raise VeridicError(
            f"{where} has an empty source: an untrusted text names where it came from"
        )
    if "call_id" in has and not turn.call_id:
        raise VeridicError(f"{where} has an empty call_id: give the id the model gave the call")


@dataclass(frozen=True, slots=True)
class Conversation:
    """The turns of a composition after its system part, in order, ready to store.

    Get one with :meth:`Composer.conversation <veridic.Composer.conversation>`,
    store :meth:`to_json` (or hand it to
    :meth:`SQLiteAuditSink.save_conversation <veridic.SQLiteAuditSink.save_conversation>`),
    read it back with :meth:`from_json`, and put it after a system part built
    from code with :meth:`Composer.restore <veridic.Composer.restore>`. See
    the module docstring for what storage keeps and what it never keeps
    (trust).
    """

    turns: tuple[Turn, ...]

    def __post_init__(self) -> None:
        # A tuple of its own: a list the caller changes later would change what is stored.
        turns = _tuple_of(self.turns, "Conversation(turns)")
        for index, turn in enumerate(turns):
            if not isinstance(turn, Turn):
                raise VeridicError(
                    f"Conversation(turns): turns[{index}] is {a_type(turn)}, not a Turn: make "
                    "turns with Composer.conversation() or Conversation.from_json()"
                )
            if type(turn) is not Turn:
                _check_subclassed(index, turn)
        object.__setattr__(self, "turns", turns)

    def __len__(self) -> int:
        return len(self.turns)

    def to_json(self) -> str:
        """The conversation as JSON text (UTF-8 safe, deterministic).

        A lone surrogate in a turn (a model's ``"\\ud800"``, a page decoded with
        ``surrogateescape``) is written as its escape, so that every store, file
        and session can keep the document and :meth:`from_json` reads it back equal.
        """
        document = {"format": FORMAT, "turns": [turn.to_json_object() for turn in self.turns]}
        return _json_object.dumps(document)

    @classmethod
    def from_json(cls, text: str | bytes) -> Conversation:
        """Read a conversation :meth:`to_json` wrote.

        Raises:
            VeridicError: the text is not such a document: not JSON, another
                format, a system turn, a turn of an unknown kind, a key the
                kind does not have or lacks, or a value of the wrong type
                (the message names the turn and the key), or an object that gives
                a key twice (``json.loads`` would keep the last without a word).
        """
        try:
            # A key given twice is refused, not read as its last value: a reviewer of the
            # stored row, or a JSON tool that keeps the first, would read another turn.
            document: object = _json_object.loads(text)
        except ValueError as error:
            raise VeridicError(
                f"Conversation.from_json() got {clip(str(text))}, which is not JSON or gives a "
                f"key twice ({error}): pass the text Conversation.to_json() wrote, unchanged"
            ) from error
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            found = document.get("format") if isinstance(document, dict) else None
            raise VeridicError(
                f"Conversation.from_json() got a document of format {quoted(found)}, not "
                f"{FORMAT!r}: pass the text Conversation.to_json() wrote"
            )
        extra = sorted(set(document) - {"format", "turns"})
        turns = document.get("turns")
        if extra or not isinstance(turns, list):
            raise VeridicError(
                f"Conversation.from_json(): the document must hold 'format' and a list "
                f"'turns' and nothing else (found extra keys {extra}, turns of type "
                f"{type(turns).__name__}): pass the text Conversation.to_json() wrote"
            )
        return cls(tuple(_read_turn(index, turn) for index, turn in enumerate(turns)))


def _check_subclassed(index: int, turn: Turn) -> None:
    """Run the checks of :class:`Turn` on a subclass's turn, which its own
    ``__post_init__`` may have skipped: a field its kind does not have would vanish from
    what is stored."""
    try:
        Turn.__post_init__(turn)
    except VeridicError as error:
        raise VeridicError(
            f"Conversation(turns): turns[{index}], {a_type(turn)}, is no valid turn: {error}"
        ) from error


def _check_arguments(text: object, call_id: str, name: str) -> None:
    """Refuse a call's arguments that are not one JSON object giving each key once."""
    where = f"a stored tool_call turn ({clip(str(call_id))}, {clip(str(name))})"
    if not isinstance(text, str):
        raise VeridicError(
            f"{where} got arguments of type {type(text).__name__}: pass them as the JSON text "
            "of an object, as Composer.conversation() stores them"
        )
    try:
        arguments = _json_object.loads(text)
    except ValueError as error:
        raise VeridicError(
            f"{where} has arguments {clip(text)}, which are not JSON or give a key twice "
            f"({error}): pass the call's arguments as the model sent them, as one JSON object"
        ) from error
    if not isinstance(arguments, dict):
        raise VeridicError(
            f"{where} has arguments {clip(text)}, a JSON {type(arguments).__name__}, not an "
            "object: a call's arguments are one JSON object"
        )


_SHAPES: Final[dict[str, dict[str, type | tuple[type, ...]]]] = {
    "user": {"user": str},
    "data": {"data": str, "label": str, "source": str, "mode": str},
    "assistant": {"assistant": str, "reasoning": list},
    "tool_call": {"tool_call": str, "name": str, "arguments": dict},
    "tool_result": {"tool_result": str, "text": str, "source": str, "mode": str, "error": bool},
}
"""Each kind's keys and their JSON types; the kind's own key comes first."""

_OPTIONAL: Final = frozenset({("assistant", "reasoning")})


def _read_turn(index: int, turn: object) -> Turn:
    where = f"Conversation.from_json(): turn {index}"
    if not isinstance(turn, dict):
        raise VeridicError(f"{where} is {a_type(turn)}, not a JSON object")
    if "system" in turn or turn.get("role") == "system":
        raise VeridicError(
            f"{where} is a system turn: a stored conversation never holds the system message, "
            "because trust does not survive storage; build the system part from code (and "
            "InstructionField values) and restore the turns after it"
        )
    kinds = [kind for kind in _KINDS if kind in turn]
    if len(kinds) != 1:
        raise VeridicError(
            f"{where} has keys {sorted(turn)}: a turn has exactly one of "
            f"{', '.join(_KINDS)} (found {len(kinds)})"
        )
    kind = kinds[0]
    shape = _SHAPES[kind]
    for key, expected in shape.items():
        if key not in turn:
            if (kind, key) in _OPTIONAL:
                continue
            raise VeridicError(f"{where} ({kind}) lacks the key {key!r}")
        if type(turn[key]) is not expected:  # bool is not an int here, nor an int a bool
            raise VeridicError(
                f"{where} ({kind}): {key!r} is {a_type(turn[key])}, "
                f"not {article(cast(type, expected).__name__)}"
            )
    unknown = sorted(set(turn) - set(shape))
    if unknown:
        raise VeridicError(
            f"{where} ({kind}) has keys this format does not have: {unknown}; nothing in a "
            "stored turn is ignored, so remove them or store the turn Composer.conversation() "
            "made"
        )
    text = cast(str, turn[kind]) if kind in ("user", "data", "assistant") else ""
    if kind == "user":
        return Turn("user", text)
    if kind == "data":
        label = cast(str, turn["label"])
        check_label(label)
        return Turn(
            "data", text, label, _source(turn, where), _mode(turn["mode"], where), error=False
        )
    if kind == "assistant":
        raw = cast(list[object], turn.get("reasoning", []))
        return Turn("assistant", text, reasoning=tuple(_item(where, item) for item in raw))
    call_id = cast(str, turn[kind])
    if not call_id:
        raise VeridicError(f"{where} ({kind}) has an empty call id")
    if kind == "tool_call":
        arguments = json.dumps(turn["arguments"], sort_keys=True, ensure_ascii=False)
        return Turn("tool_call", arguments, cast(str, turn["name"]), call_id=call_id)
    return Turn(
        "tool_result",
        cast(str, turn["text"]),
        source=_source(turn, where),
        mode=_mode(turn["mode"], where),
        call_id=call_id,
        error=cast(bool, turn["error"]),
    )


def _source(turn: Mapping[str, object], where: str) -> str:
    source = cast(str, turn["source"])
    if not source.strip():
        raise VeridicError(
            f"{where}: 'source' is empty; an untrusted text names where it came from"
        )
    return source


def _mode(mode: object, where: str) -> DataMode:
    if mode not in DATA_MODES:
        raise VeridicError(
            f"{where}: 'mode' is {mode!r}, not a data mode ({', '.join(DATA_MODES)})"
        )
    return mode


def _item(where: str, item: object) -> ReasoningItem:
    if not isinstance(item, dict) or set(item) != {"provider", "json"}:
        raise VeridicError(
            f"{where}: a reasoning item is {clip(repr(item))}, not an object with 'provider' "
            "and 'json'"
        )
    try:
        return ReasoningItem(cast(ReasoningProvider, item["provider"]), cast(str, item["json"]))
    except VeridicError as error:
        raise VeridicError(f"{where}: {error}") from error
