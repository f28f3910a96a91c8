"""The terminal view: a prompt's spans, one line each, coloured by kind, safe to print.

:func:`render_terminal` gives what ``make demo`` and ``veridic show`` print: the
prompt's ``sha256``, then per message its spans, one line each (trust, kind,
origin, a clipped sample of the text), its data blocks, tool calls and reasoning
items. It reads what the provenance map reads
(:class:`~veridic.text.provenance_map.PromptLike`): a :class:`~veridic.Prompt`
or a :class:`~veridic.text.prompt.PromptDocument`.

What the view guarantees, whatever the prompt holds:

- no character of the prompt reaches the terminal as a control: samples and
  labels are Python literals (``repr``: ESC is ``\\x1b``, a C1 control ``\\x9b``, an
  RTL override ``\\u202e``), with the printable characters nobody sees (variation
  selectors, blank fillers) escaped the same way; origins, roles and tool names
  show them as ``⟦U+202E⟧``, as the provenance map does. An ``ESC[2J`` in a
  ticket, an OSC 8 hyperlink or a bidi override is shown, never obeyed. The only
  escape sequences in the output are the view's own colour codes;
- colour (ANSI SGR, 256 colours: each kind's background is a colour near the
  map's :data:`~veridic.text.provenance_map.KIND_COLOURS`, with black text, so
  it reads on dark and light terminals alike) only when asked:
  :func:`use_colour` says yes for a terminal (``isatty()``) when ``NO_COLOR``
  is unset or empty (https://no-color.org) and ``TERM`` is not ``dumb``; a
  command-line flag may force it either way;
- the composer's own separators (the ``"\\n\\n"`` between system parts: kind
  ``code``, origin ``veridic.compose``, text only spaces, tabs and line breaks)
  are folded away unless ``separators=True``: they carry nothing a reviewer
  reads, and a forged one cannot hide text (an untrusted span with that origin,
  or one holding anything else, is shown).

Plain ANSI, not ``rich``: the view is one line per span with two colours per
line, which needs a few fixed SGR strings, not a layout engine. ``rich`` would add
a dependency (or an extra to remember) for the demo and the CLI, and its markup
would be one more parser the prompt's text must be kept away from; here the
only text the view writes unescaped is its own.

>>> from veridic import Composer, instruction, untrusted
>>> prompt = (
...     Composer()
...     .system(instruction("Be brief."), instruction("Answer in English."))
...     .user(untrusted("\\x1b[2Jhi", source="chat"))
...     .build()
... )
>>> print(render_terminal(prompt).replace(prompt.sha256, "<sha256>"), end="")  # doctest: +ELLIPSIS
prompt sha256 <sha256>
<BLANKLINE>
[0] system
    trusted   code      <doctest ...>:3 'Be brief.'
    trusted   code      <doctest ...>:3 'Answer in English.'
<BLANKLINE>
[1] user
    UNTRUSTED untrusted chat                     '\\x1b[2Jhi'
<BLANKLINE>

The ``"\\n\\n"`` between the two system parts is not listed: it is a separator.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, Protocol, TextIO

from veridic._counted import counted
from veridic.text.fence import _INVISIBLE_CHAR, unfence
from veridic.text.provenance import TRUSTED_KINDS
from veridic.text.provenance_map import (
    KIND_COLOURS,
    PromptLike,
    _as_recorded,
    _covering,
    _hidden,
)
from veridic.text.provenance_map import _Span as _PromptSpan

__all__ = [
    "KIND_SGR",
    "SEPARATOR_ORIGIN",
    "print_terminal",
    "render_recorded_spans",
    "render_terminal",
    "use_colour",
    "visible",
]

SEPARATOR_ORIGIN: Final = "veridic.compose"
"""The origin of the composer's own separators between system parts."""

_SAMPLE: Final = 40
_ORIGIN: Final = 60
_NAME: Final = 64
"""A tool name is shown whole up to 64 characters, the longest a registry takes, so two
valid names never show alike; a longer one (model-written) is clipped."""
_RECORDED_NOTE: Final = (
    "provenance as recorded in the document, not verified by veridic: the spans are what "
    "the document says, not what veridic composed (its sha256 covers the text, not the "
    "provenance)"
)
"""What the view of a saved document (of anything but a composed prompt) says under its
hash, as its map does."""
_RESET: Final = "\x1b[0m"


_KIND_256: Final[Mapping[str, int]] = {
    "code": 153,  # #afd7ff, for the map's #cfe3ff
    "field": 193,  # #d7ffaf, for #cdeec0
    "template": 189,  # #d7d7ff, for #e2d6ff
    "registry": 223,  # #ffd7af, for #ffe3a3
    "policy": 158,  # #afffd7, for #b9ece6
    "untrusted": 217,  # #ffafaf, for #ffc4c4
    "unknown": 254,  # #e4e4e4, for #e2e2e2
}
"""The xterm-256 background near each kind's map colour, no two kinds alike."""

KIND_SGR: Final[Mapping[str, str]] = {
    kind: f"\x1b[38;5;16;48;5;{_KIND_256[kind]}m" for kind in KIND_COLOURS
}
"""Each kind's SGR sequence: black text on a background near the map's colour of the kind."""

_TRUST_SGR: Final = {"UNTRUSTED": "\x1b[1;31m", "unbranded": "\x1b[1m"}


class _Span(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def origin(self) -> str: ...


def use_colour(stream: object, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour output written to ``stream``: a terminal, and no one said no.

    ``NO_COLOR`` set to anything but the empty string says no
    (https://no-color.org), as does ``TERM=dumb``; a stream that is not a
    terminal (a file, a pipe, a captured test stream) gets no colour. A
    command-line flag that forces colour overrides this, as no-color.org asks.

    >>> import io
    >>> use_colour(io.StringIO(), {})
    False
    """
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", "") != "" or env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False


def visible(text: str, limit: int | None = _ORIGIN) -> str:
    """``text`` with every character nobody sees, or that acts on a terminal, as ``⟦U+XXXX⟧``.

    Controls (C0, C1, ESC, line breaks and tabs), bidi overrides and isolates,
    zero-width and other invisible characters, lone surrogates: the characters
    the provenance map shows as chips. ``limit`` clips the text first (with
    ``…``); ``None`` keeps it whole.

    >>> visible("ticket\\u202e:42\\x1b]8;;https://e.example\\x07")
    'ticket⟦U+202E⟧:42⟦U+001B⟧]8;;https://e.example⟦U+0007⟧'
    """
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return "".join(f"\u27e6U+{ord(c):04X}\u27e7" if _hidden(c, False) else c for c in text)


def _literal(text: str, limit: int = _SAMPLE) -> str:
    """``text`` clipped to ``limit`` as a Python literal, invisible characters escaped too."""
    shown = repr(text if len(text) <= limit else text[:limit] + "\u2026")
    if shown.isprintable() and _INVISIBLE_CHAR.search(shown) is None:
        return shown
    return "".join(
        c
        if c.isprintable() and _INVISIBLE_CHAR.match(c) is None
        else f"\\u{ord(c):04x}"
        if ord(c) <= 0xFFFF
        else f"\\U{ord(c):08x}"
        for c in shown
    )


def _trust(kind: str) -> str:
    if kind in TRUSTED_KINDS:
        return "trusted"
    return "UNTRUSTED" if kind == "untrusted" else "unbranded"


def _paint(text: str, sgr: str | None, width: int = 0) -> str:
    pad = " " * max(0, width - len(text))
    return f"{sgr}{text}{_RESET}{pad}" if sgr else f"{text}{pad}"


def _line(kind: str, origin: str, sample: str, colour: bool) -> str:
    shown_kind = kind if kind in KIND_COLOURS else "unknown"
    trust = _trust(shown_kind)
    sgr = KIND_SGR[shown_kind] if colour else None
    return (
        f"    {_paint(trust, _TRUST_SGR.get(trust) if colour else None, 9)} "
        f"{_paint(shown_kind, sgr, 9)} {visible(origin):24} {_paint(sample, sgr)}"
    )


def _separator(span: _Span, content: str) -> bool:
    text = content[span.start : span.end]
    return (
        span.kind == "code"
        and span.origin == SEPARATOR_ORIGIN
        and text != ""
        and not text.strip(" \t\n")
    )


def render_terminal(prompt: PromptLike, *, colour: bool = False, separators: bool = False) -> str:
    """The terminal view of ``prompt`` (a prompt or a document), ending with a blank line.

    ``colour`` adds the kinds' SGR colours (decide with :func:`use_colour`);
    ``separators`` shows the composer's separators, which are folded away by
    default. Text no span covers (a document may leave some) is shown as
    ``unknown``, ``(no provenance span)``, as the map shows it. A saved document's view
    (or that of anything but a :class:`~veridic.Prompt`) says, under its hash, that its
    provenance is as recorded, not verified by veridic (as its map does). The module
    docstring says what the view escapes.
    """
    lines = [f"prompt sha256 {visible(prompt.sha256, None)}", ""]
    if _as_recorded(prompt):
        lines[1:1] = [_RECORDED_NOTE]
    by_message: list[list[_PromptSpan]] = [[] for _ in prompt.messages]
    for span in prompt.spans:
        if 0 <= span.message < len(by_message):
            by_message[span.message].append(span)
    for index, message in enumerate(prompt.messages):
        content = message.content
        head = f"[{index}] {visible(message.role)}"
        if message.tool_call_id is not None:
            head += f" (result of call {visible(message.tool_call_id)})"
        if message.tool_error:
            head += " (reports an error)"
        lines.append(head)
        for span in _covering(by_message[index], len(content)):
            if not separators and _separator(span, content):
                continue
            sample = _literal(content[span.start : span.end])
            lines.append(_line(span.kind, span.origin, sample, colour))
        if "<data" in content:
            lines.extend(
                f"    data block {_literal(label, _ORIGIN)} unfences to "
                f"{counted(len(text), 'char')}, byte for byte"
                for label, text in unfence(content)
            )
        lines.extend(
            f"    tool call {visible(call.id)}: {visible(call.name, _NAME)} "
            f"{_literal(call.arguments)}"
            for call in message.tool_calls
        )
        if message.reasoning:
            items = ", ".join(
                f"{visible(item.provider)} ({counted(len(item.json_text), 'char')})"
                for item in message.reasoning
            )
            lines.append(f"    reasoning items, not shown: {items}")
        lines.append("")
    return "\n".join(lines) + "\n"


def render_recorded_spans(spans: Sequence[_Span], *, colour: bool = False) -> str:
    """Spans without their text (an audit store's): one line each, with offsets and length.

    An audit store keeps where each character of the system message came
    from, not the characters; this shows what it keeps, escaped and coloured
    as :func:`render_terminal` does. Nothing is folded: without the text,
    a separator cannot be told from a span that only claims its origin.
    """
    return "".join(f"{line}\n" for line in _recorded(spans, colour))


def _recorded(spans: Sequence[_Span], colour: bool) -> Iterator[str]:
    for span in spans:
        length = span.end - span.start
        where = f"chars {span.start}-{span.end} ({counted(length, 'char')})"
        yield _line(span.kind, span.origin, where, colour)


def print_terminal(
    prompt: PromptLike,
    file: TextIO | None = None,
    *,
    colour: bool | None = None,
    separators: bool = False,
) -> None:
    """Write :func:`render_terminal`'s view to ``file`` (standard output by default).

    ``colour=None`` colours when :func:`use_colour` says the stream wants it.
    """
    out = sys.stdout if file is None else file
    wanted = use_colour(out) if colour is None else colour
    out.write(render_terminal(prompt, colour=wanted, separators=separators))
