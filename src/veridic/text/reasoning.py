"""Reasoning items: the model's own reasoning, going back to the model that wrote it.

A reasoning model's answer holds opaque blocks its provider wants back, byte
for byte, on the turn that produced them. They are neither instruction nor
data the application wrote, and they bind to one provider, so they have a
type of their own, checked where one is made: a composer, a conversation and
a provider adapter all take them, and none of them builds a prompt. What a
prompt does with them (its hash, its provider formats, the cross-provider
rule) is in :mod:`veridic.text.prompt`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from veridic import _json_object
from veridic._sample import clip, quoted
from veridic._words import a_type
from veridic.errors import VeridicError
from veridic.text.wire import ReasoningBlock

__all__ = ["ReasoningItem", "ReasoningKind", "ReasoningProvider"]

ReasoningProvider = Literal["anthropic", "openai"]
"""The provider whose API returned an item: the only API it may go back to."""

ReasoningKind = Literal["thinking", "redacted_thinking", "reasoning"]
"""A reasoning block's ``type``: Anthropic's two, OpenAI's one (:attr:`ReasoningItem.kind`)."""

_REASONING_FIELDS: Final[dict[str, dict[str, tuple[tuple[str, type], ...]]]] = {
    "anthropic": {
        "thinking": (("thinking", str), ("signature", str)),
        "redacted_thinking": (("data", str),),
    },
    "openai": {"reasoning": (("id", str), ("summary", list))},
}
"""provider -> block type -> the keys (and their JSON types) a block of that type must have."""
_OPENAI_PARTS: Final = {"summary": "summary_text", "content": "reasoning_text"}
"""An OpenAI reasoning item's lists of text parts, and the ``type`` of every part in each:
``summary`` always, ``content`` when the API sends it."""


@dataclass(frozen=True, slots=True, repr=False)
class ReasoningItem:
    """One reasoning item of a model's answer, exactly as the provider's API returned it.

    Reasoning models return their reasoning as opaque blocks: Anthropic
    ``thinking`` blocks (the text and a ``signature``) and ``redacted_thinking``
    blocks (encrypted ``data``), OpenAI Responses ``reasoning`` items (``id``,
    ``summary``, and ``encrypted_content`` when the request set
    ``include=["reasoning.encrypted_content"]``). The provider wants them back,
    unchanged, on the assistant turn that produced them: with Anthropic
    extended thinking and tool use, the next request is refused without them;
    an OpenAI reasoning model keeps its reasoning across tool calls only when
    they come back. ``Reply.reasoning`` holds them and
    :meth:`veridic.Reply.record` puts them on the recorded turn.

    ``provider`` is the provider whose API produced the block; the block goes
    back to that provider's API only (its signature or encryption binds it to
    the provider, and to the model, that made it). ``json_text`` is the block
    as canonical JSON (keys sorted, no spaces): every key and value as
    returned, nothing parsed away; :meth:`block` gives a fresh dict of it each
    time, so no caller can change an item. Two items of the same block are
    equal and weigh the same in :attr:`Prompt.sha256 <veridic.Prompt.sha256>`.

    Build one with :meth:`of` from the block (a mapping); ``ReasoningItem(provider,
    json_text)`` restores one the application stored (``item.json_text``).
    Either way it is the model's own output: restore items only from your own
    records of what the model returned.

    >>> item = ReasoningItem.of(
    ...     "anthropic", {"type": "thinking", "thinking": "Check Oslo first.", "signature": "EqQB"}
    ... )
    >>> item
    ReasoningItem('anthropic', thinking, 69 chars)
    >>> item.block()["signature"]
    'EqQB'
    >>> item == ReasoningItem("anthropic", item.json_text)
    True

    Raises:
        VeridicError: the provider is not ``"anthropic"`` or ``"openai"``, the
            block is not JSON (``json_text`` that gives a key twice, holds a
            number JSON cannot write, or nests too deeply to read, is not), is
            not a reasoning block of that provider, lacks a key the provider
            always sends, or (an OpenAI item) holds in ``summary`` or ``content``
            a part other than the ``summary_text`` or ``reasoning_text`` parts
            OpenAI sends, or ``encrypted_content`` that is not text or null.
    """

    provider: ReasoningProvider
    json_text: str

    def __post_init__(self) -> None:
        where = f"ReasoningItem({self.provider!r}, ...)"
        kinds = _REASONING_FIELDS.get(self.provider) if isinstance(self.provider, str) else None
        if kinds is None:
            raise VeridicError(
                f"{where}: {self.provider!r} is not a provider of reasoning items; pass "
                "'anthropic' or 'openai', the provider whose API returned the block"
            )
        if not isinstance(self.json_text, str):
            raise VeridicError(
                f"{where} got {a_type(self.json_text)} as json_text: pass the JSON "
                "text of a stored item (item.json_text), or build one with "
                "ReasoningItem.of(provider, block)"
            )
        try:
            # A key given twice is refused, not read as its last value: a reviewer of the
            # stored row would read one reasoning and the model be sent another.
            block: object = _json_object.loads(self.json_text)
        except ValueError as error:
            raise VeridicError(
                f"{where}: json_text {clip(self.json_text)} is not JSON, or gives a key twice "
                f"({error}): pass the json_text of a stored item unchanged, or build one with "
                "ReasoningItem.of(provider, block)"
            ) from error
        _require_json(block, where, "json_text")
        kind = block.get("type") if isinstance(block, dict) else None
        fields = kinds.get(kind) if isinstance(kind, str) else None
        if not isinstance(block, dict) or fields is None:
            found = "no JSON object"
            if isinstance(block, dict):
                found = f"a block of type {quoted(kind)}"
            raise VeridicError(
                f"{where} got {found} ({clip(self.json_text)}); {self.provider} reasoning "
                f"blocks are of type {' or '.join(map(repr, kinds))}: pass a reasoning block "
                "of the reply (Reply.reasoning), not another content block"
            )
        for name, expected in fields:
            if not isinstance(block.get(name), expected):
                raise _Misshapen(
                    f"{where}: the {kind!r} block {clip(self.json_text)} has no "
                    f"{expected.__name__} at {name!r}, which {self.provider} always sends",
                    "pass the block exactly as the provider returned it",
                )
        if self.provider == "openai":
            _check_openai_parts(block, where, self.json_text)
        object.__setattr__(self, "json_text", _canonical_json(block))

    def __repr__(self) -> str:
        # The block may be long (encrypted content) and is the model's private
        # reasoning: a repr in a log shows what it is, not what it says.
        return f"ReasoningItem({self.provider!r}, {self.kind}, {len(self.json_text)} chars)"

    @classmethod
    def of(cls, provider: ReasoningProvider, block: Mapping[str, object]) -> ReasoningItem:
        """The item of ``block``, a reasoning block as ``provider``'s API returned it.

        Raises:
            VeridicError: as the class says, or a value in ``block`` is not
                JSON (a set, a non-finite number, a key that is not text).
        """
        where = f"ReasoningItem.of({provider!r}, ...)"
        if not isinstance(block, Mapping):
            raise VeridicError(
                f"{where} got {a_type(block)}: pass the block as a mapping, "
                "exactly as the provider returned it"
            )
        _require_json(block, where, "the block")
        return cls(provider, _canonical_json(block))

    @property
    def kind(self) -> ReasoningKind:
        """The block's ``type``: ``"thinking"``, ``"redacted_thinking"`` or ``"reasoning"``."""
        return self.block()["type"]

    def block(self) -> ReasoningBlock:
        """A fresh copy of the block, to send back to the provider that produced it."""
        block: ReasoningBlock = json.loads(self.json_text)
        return block


def _check_openai_parts(block: dict[str, object], where: str, json_text: str) -> None:
    """Refuse an OpenAI item whose ``summary`` or ``content`` holds a part OpenAI never sends.

    The parts go back to the model as its own reasoning: a stored item whose summary holds
    a bare string or an ``input_text`` part would put words in the model's reasoning that
    it never wrote (and the API refuses what it does not know, far from the store).
    ``encrypted_content`` is text or null when the API sends it.
    """
    for key, part_type in _OPENAI_PARTS.items():
        parts = block.get(key)
        if parts is None and key != "summary":
            continue
        if not isinstance(parts, list):
            raise _bad_part(where, json_text, key, f"is {_json_kind(parts)}, not a list")
        for index, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(part, dict) or kind != part_type:
                found = f"of type {quoted(kind)}" if isinstance(part, dict) else _json_kind(part)
                raise _bad_part(
                    where, json_text, f"{key}[{index}]", f"is {found}, not a {part_type!r} part"
                )
            if not isinstance(part.get("text"), str):
                raise _bad_part(where, json_text, f"{key}[{index}]", "has no text at 'text'")
    encrypted = block.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise _bad_part(
            where, json_text, "encrypted_content", f"is {_json_kind(encrypted)}, not text or null"
        )


class _Misshapen(VeridicError):
    """A block of a shape its provider never sends, its fault (:attr:`fault`) kept apart
    from the advice to pass the block as the provider returned it.

    The advice is for code that builds an item; an adapter that read the block from an
    answer had passed it as returned, and frames the fault as the answer's
    (:func:`veridic.providers._base.reasoning_item`).
    """

    def __init__(self, fault: str, advice: str) -> None:
        super().__init__(f"{fault}: {advice}")
        self.fault = fault


def _bad_part(where: str, json_text: str, path: str, problem: str) -> VeridicError:
    return _Misshapen(
        f"{where}: the 'reasoning' item {clip(json_text)}: {path} {problem}, which OpenAI "
        "never sends",
        "pass the item exactly as the provider returned it (restore items only from your own "
        "records of what the model returned)",
    )


def _json_kind(value: object) -> str:
    """A JSON value's kind as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "a list" if isinstance(value, list) else "an object"


def _canonical_json(value: object) -> str:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


def _require_json(value: object, where: str, path: str) -> None:
    """Refuse what JSON would change or reject: it could not go back as the provider sent it."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise VeridicError(
                f"{where}: {path} is {value!r}, which JSON cannot hold: pass the block "
                "exactly as the provider returned it (JSON values only)"
            )
        return
    if isinstance(value, list | tuple):
        for index, element in enumerate(value):
            _require_json(element, where, f"{path}[{index}]")
        return
    if isinstance(value, Mapping):
        for key, element in value.items():
            if not isinstance(key, str):
                raise VeridicError(
                    f"{where}: {path} has the key {quoted(key)}, {a_type(key)}; JSON keys "
                    "are text: pass the block exactly as the provider returned it"
                )
            _require_json(element, where, f"{path}[{quoted(key)}]")
        return
    raise VeridicError(
        f"{where}: {path} is {a_type(value)}, not a JSON value: pass the block "
        "exactly as the provider returned it (JSON values only)"
    )
