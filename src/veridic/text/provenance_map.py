"""The provenance map: a prompt as one self-contained HTML page, coloured by provenance.

:meth:`veridic.Prompt.to_html` writes the page, and ``Prompt._repr_html_``
the same map for a notebook cell. Each message is shown
exactly as the model reads it, each provenance span in the colour of its kind
(:data:`KIND_COLOURS`, explained in the page's legend) with its kind and origin in its
``title``, and a link to the page's list of origins. The lines of a data block are
marked as fence lines, with the block's label and data mode; the capability section's
tools link to their specs when the caller passes them (``tools=``, a
:class:`~veridic.ToolView` or the list of specs it sent). The prompt's ``sha256`` heads
the page.

The page is safe to open whatever the prompt holds, because the prompt's text is only
ever *text* in it:

- every piece of the prompt (messages, labels, origins, tool calls, specs) is escaped
  for HTML, in text and in attributes (``html.escape(quote=True)``); none of it is
  ever written into a URL, an ``id``, a ``class``, a style, a script or an event
  attribute: those are veridic's own fixed strings and counters;
- characters a reader cannot see or that act on the page's layout (controls, bidi
  overrides and isolates, zero-width characters, Unicode tags, variation selectors,
  separators other than the space, lone surrogates) are shown as chips such as
  ``⟦U+202E⟧`` instead: an RTL override in a ticket cannot reorder the page, and
  each span is a bidi isolate besides;
- a ``Content-Security-Policy`` forbids everything (``default-src 'none'``) except
  the page's one style sheet, allowed by its hash: no script runs, nothing is
  fetched, no form submits. The page has no script at all; hover, links and the
  side list are plain HTML and CSS.

The map of a saved :class:`~veridic.text.prompt.PromptDocument` (or of anything else
that is not a prompt veridic composed) is the same page headed by a notice: its
provenance is as recorded in the file, not verified by veridic (a document's spans are
not covered by its hash, so an edited file could colour a user's turn as code).

The page is deterministic: the same prompt (and the same specs) give the same bytes,
so a map can be snapshot-tested and diffed.

>>> from veridic import Composer, instruction, untrusted
>>> ticket = untrusted("<script>alert(1)</script>", source="ticket:7")
>>> prompt = (
...     Composer()
...     .system(instruction("Summarise the ticket."))
...     .data("ticket:7", ticket, mode="verbatim")
...     .build()
... )
>>> page = prompt.to_html()
>>> "<script" in page, "&lt;script&gt;" in page, prompt.sha256 in page
(False, True, True)
>>> page == prompt.to_html() and prompt._repr_html_() in page
True
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Final, Literal, Protocol, runtime_checkable

from veridic._counted import counted
from veridic.errors import VeridicError
from veridic.text.fence import _INVISIBLE_CHAR, DataMode, blocks_in
from veridic.text.provenance import TRUSTED_KINDS, Kind

__all__ = [
    "CSP",
    "KIND_COLOURS",
    "KIND_MEANINGS",
    "PromptLike",
    "SpecSource",
    "Specs",
    "render",
]

KIND_COLOURS: Final[Mapping[Kind, str]] = {
    "code": "#cfe3ff",
    "field": "#cdeec0",
    "template": "#e2d6ff",
    "registry": "#ffe3a3",
    "policy": "#b9ece6",
    "untrusted": "#ffc4c4",
    "unknown": "#e2e2e2",
}
"""The background of a span of each kind (one colour per kind; the legend shows them)."""

KIND_MEANINGS: Final[Mapping[Kind, str]] = {
    "code": "written in code: instruction(), or veridic's own text (fences, separators, "
    "the data preamble)",
    "field": "read from a field declared InstructionField",
    "template": "rendered by an instruction template from trusted values",
    "registry": "the capability section, written by the tool view",
    "policy": "vouched for by a TrustPolicy (every vouch is recorded)",
    "untrusted": "text from outside, branded with untrusted(); its origin is its source",
    "unknown": "a plain str with no brand: the user's or the model's turn, a data label",
}
"""What each kind of span means, as the legend says it."""

_KINDS: Final[tuple[Kind, ...]] = tuple(KIND_COLOURS)
_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})


# --- what the map reads ------------------------------------------------------------------


class _Call(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...


class _Reasoning(Protocol):
    @property
    def provider(self) -> str: ...
    @property
    def json_text(self) -> str: ...


class _Message(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_calls(self) -> Sequence[_Call]: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def reasoning(self) -> Sequence[_Reasoning]: ...
    @property
    def tool_error(self) -> bool: ...


class _Span(Protocol):
    @property
    def message(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def origin(self) -> str: ...


class PromptLike(Protocol):
    """What the map reads of a :class:`~veridic.Prompt` (this module sits upstream of it)."""

    @property
    def messages(self) -> Sequence[_Message]: ...
    @property
    def spans(self) -> Sequence[_Span]: ...
    @property
    def sha256(self) -> str: ...


@runtime_checkable
class SpecSource(Protocol):
    """Anything that gives its tool specs in the MCP format: a :class:`~veridic.ToolView`."""

    def tool_specs(self, format: Literal["mcp"]) -> Sequence[Mapping[str, object]]: ...


Specs = SpecSource | Iterable[Mapping[str, object]]
"""What ``tools=`` takes: a tool view, or the specs sent, in the OpenAI, Anthropic or MCP
format (the list ``view.tool_specs(format)`` returned)."""


# --- making text visible -----------------------------------------------------------------

# Characters Python calls printable that nobody sees are those the fence codes too
# (``_INVISIBLE_CHAR``: variation selectors, the combining grapheme joiner, blank fillers).
_CATEGORY_NAMES: Final = {
    "Cc": "control",
    "Cs": "lone surrogate",
    "Co": "private use",
    "Cn": "unassigned",
}


@lru_cache(maxsize=4096)
def _hidden(char: str, in_text: bool) -> bool:
    """Whether ``char`` is shown as a chip: what is not printable, or printable and unseen.

    In text a line break and a tab stay (the page wraps and tabs as the model's text
    does); in an attribute every one of them is a chip.
    """
    if in_text and char in "\n\t":
        return False
    return not char.isprintable() or _INVISIBLE_CHAR.match(char) is not None


@lru_cache(maxsize=4096)
def _chip_name(char: str) -> str:
    point = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "") or _CATEGORY_NAMES.get(unicodedata.category(char), "")
    return f"{point} {name}" if name else point


def _plain(text: str, in_text: bool) -> bool:
    """The fast path: ``text`` holds nothing :func:`_hidden` (checked at C speed)."""
    flat = text.replace("\n", " ").replace("\t", " ") if in_text else text
    return flat.isprintable() and _INVISIBLE_CHAR.search(text) is None


def _text(text: str) -> str:
    """``text`` for HTML text: escaped, and every hidden character as a chip element."""
    if _plain(text, True):
        return html.escape(text, quote=True)
    out: list[str] = []
    run: list[str] = []
    for char in text:
        if not _hidden(char, True):
            run.append(char)
            continue
        if run:
            out.append(html.escape("".join(run), quote=True))
            run = []
        name = _chip_name(char)
        code = name.partition(" ")[0]
        out.append(f'<span class="cp" title="{html.escape(name)}">\u27e6{code}\u27e7</span>')
    if run:
        out.append(html.escape("".join(run), quote=True))
    return "".join(out)


def _attr(text: str) -> str:
    """``text`` for a quoted attribute value: hidden characters as ``⟦U+XXXX⟧``, escaped."""
    if not _plain(text, False):
        text = "".join(
            f"\u27e6U+{ord(char):04X}\u27e7" if _hidden(char, False) else char for char in text
        )
    return html.escape(text, quote=True)


# --- data blocks -------------------------------------------------------------------------

# The blocks are exactly the ones :func:`~veridic.unfence` reads, found in its own pass
# (``blocks_in``), so the map shows what a reader of the prompt would take for a block,
# in the time unfence() takes.


@dataclass(frozen=True, slots=True)
class _Block:
    start: int
    label_start: int
    label_end: int
    content_start: int
    content_end: int
    end: int
    mode: DataMode
    label: str
    text: str


def _blocks(content: str) -> list[_Block]:
    """The data blocks of ``content`` with their places: the ones :func:`unfence` reads."""
    return [
        _Block(
            found.opening.start(),
            found.opening.start(1),
            found.opening.end(1),
            found.opening.end(),
            found.content_end,
            found.end,
            _MODES[found.opening.group(2)],
            found.label,
            found.text,
        )
        for found in blocks_in(content)
    ]


_MODES: Final[dict[str | None, DataMode]] = {
    None: "datamark",
    "encoding": "encode",
    "sha256": "verbatim",
}


# --- the page ------------------------------------------------------------------------------

_CSS: Final = (
    ".vpm{font:14px/1.45 'DejaVu Sans',system-ui,sans-serif;color:#1b1b1b;background:#fff;"
    "margin:0;padding:14px 18px;display:grid;grid-template-columns:minmax(0,1fr) 330px;"
    "gap:0 22px;direction:ltr;text-align:left}"
    ".vpm>header{grid-column:1/-1}"
    ".vpm h1{font-size:18px;margin:0 0 2px}"
    ".vpm h2{font-size:14px;margin:14px 0 4px}"
    ".vpm h3{font-size:13px;margin:10px 0 2px;font-family:'DejaVu Sans Mono',monospace}"
    ".vpm code,.vpm .sha{font:12px 'DejaVu Sans Mono',ui-monospace,monospace}"
    ".vpm .sha{overflow-wrap:anywhere}"
    ".vpm .legend{list-style:none;padding:0;margin:4px 0}"
    ".vpm .legend b{font-weight:600}"
    ".vpm .sw{padding:0 5px;border-radius:3px;font:12px 'DejaVu Sans Mono',monospace}"
    ".vpm .msg{margin:0 0 6px}"
    ".vpm .msg>h2 .meta,.vpm .n{color:#5a5a5a;font-weight:400;font-size:12px}"
    ".vpm .body{font:13px/1.55 'DejaVu Sans Mono',ui-monospace,monospace;white-space:pre-wrap;"
    "overflow-wrap:anywhere;border:1px solid #d4d4d4;border-radius:4px;padding:6px 8px;"
    "margin:0;background:#fff;direction:ltr;unicode-bidi:isolate}"
    ".vpm .sp{unicode-bidi:isolate}"
    ".vpm .sp:hover{outline:1px solid #444}"
    ".vpm a.o{color:inherit;text-decoration:none}"
    ".vpm a.tool{color:#0b4fa8;text-decoration:underline;font-weight:600}"
    ".vpm .fence{font-weight:700;color:#0b3c73}"
    ".vpm .lbl{font-style:italic}"
    ".vpm .m-datamark::before,.vpm .m-encode::before,.vpm .m-verbatim::before{"
    "font:10px 'DejaVu Sans',sans-serif;color:#fff;background:#0b3c73;border-radius:3px;"
    "padding:0 4px;margin-right:4px;vertical-align:1px}"
    ".vpm .m-datamark::before{content:'datamark'}"
    ".vpm .m-encode::before{content:'encode'}"
    ".vpm .m-verbatim::before{content:'verbatim'}"
    ".vpm .cp{background:#3a3a3a;color:#fff;border-radius:3px;padding:0 2px;font-size:11px}"
    ".vpm .blocks,.vpm .calls{font-size:12px;margin:4px 0;padding-left:18px}"
    ".vpm aside{font-size:12px;min-width:0}"
    ".vpm aside ol{padding-left:22px;margin:4px 0}"
    ".vpm aside li{margin:0 0 3px;overflow-wrap:anywhere}"
    ".vpm .spec .body{font-size:11px}"
    ".vpm :target{outline:2px solid #e8a200}"
    ".vpm .rec{margin:6px 0 2px;padding:6px 8px;border:2px solid #b35c00;border-radius:4px;"
    "background:#fff4e5}"
    + "".join(f".vpm .k-{kind}{{background:{colour}}}" for kind, colour in KIND_COLOURS.items())
)
_CSS_HASH: Final = base64.b64encode(hashlib.sha256(_CSS.encode("ascii")).digest()).decode()
CSP: Final = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; base-uri 'none'; form-action 'none'"
)
"""The page's Content-Security-Policy: its own style sheet (by hash), and nothing else."""


_RECORDED_NOTICE: Final = (
    '<div class="rec"><b>Provenance as recorded, not verified by veridic.</b> This map was '
    "made from a record of a prompt (a saved prompt document), not from a prompt veridic "
    "composed: its sha256 covers the text, not the provenance, so each span's kind and "
    "origin are only what the record says, and whoever could edit it could have marked any "
    "text (a user's turn, say) as written in code. "
    "Check the system message's spans against the audit store's record of the call "
    "(veridic show STORE --call CALL_ID), or view the map of the prompt itself "
    "(prompt.to_html()).</div>"
)
"""What heads the map of anything but a composed prompt (:func:`_as_recorded`): a live
prompt's spans are the ones veridic made as it composed, a document's are what a file
says. Fixed text: nothing of the prompt reaches it."""


def _as_recorded(prompt: object) -> bool:
    """Whether ``prompt``'s spans are as recorded, not veridic's own: true of all but a
    :class:`~veridic.Prompt`.

    Read from the class (:class:`~veridic.Prompt` sets ``_SPANS_COMPOSED``; this module
    sits upstream of it), not passed as a flag, and failing safe: a saved
    :class:`~veridic.text.prompt.PromptDocument`, a subclass of it, or a caller's own
    object holding a document's spans is shown as recorded, whoever calls :func:`render`
    or the terminal view with it. A :class:`~veridic.Prompt` subclass cannot replace the
    spans it inherits, which veridic works out from the composed parts.
    """
    return getattr(type(prompt), "_SPANS_COMPOSED", False) is not True


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    description: str
    schema: object


def render(prompt: PromptLike, *, tools: Specs | None = None, document: bool = True) -> str:
    """The provenance map of ``prompt``: a whole HTML page, or (``document=False``) its body.

    ``tools`` gives the tools' specs: each tool the capability section lists then
    links to its spec (name, description, input schema), and each tool call of an
    assistant turn to the spec of the tool it calls. Without it the section is
    shown as the text it is. The body (for a notebook) holds the same map and its
    style sheet, every rule scoped to the map; only the page carries the
    Content-Security-Policy, which a notebook sets for itself.

    The map of a saved :class:`~veridic.text.prompt.PromptDocument`, or of any ``prompt``
    that is not a :class:`~veridic.Prompt` (a caller's own object holding a document's
    spans), is headed by a notice that its provenance is as recorded, not verified by
    veridic (the spans are not hashed); a live prompt's map has none.

    Raises:
        VeridicError: a spec in ``tools`` has no name.
    """
    specs = _specs(tools)
    prefix = f"v{prompt.sha256[:12]}"
    body = _Page(prompt, specs, prefix).render()
    if not document:
        return body
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>veridic provenance map \u00b7 {prompt.sha256[:12]}</title>\n"
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _specs(tools: Specs | None) -> tuple[_Spec, ...]:
    if tools is None:
        return ()
    listed = tools.tool_specs("mcp") if isinstance(tools, SpecSource) else tools
    specs: list[_Spec] = []
    for index, spec in enumerate(listed):
        function = spec.get("function") if isinstance(spec, Mapping) else None
        source = function if isinstance(function, Mapping) else spec
        name = source.get("name") if isinstance(source, Mapping) else None
        if not isinstance(name, str):
            shown = sorted(map(str, source)) if isinstance(source, Mapping) else type(spec)
            raise VeridicError(
                f"to_html(tools=...): spec #{index} has no name ({shown!r}): pass the view "
                "itself, or the specs exactly as view.tool_specs() gave them (OpenAI, "
                "Anthropic or MCP format)"
            )
        description = source.get("description")
        schema = next(
            (source[key] for key in ("inputSchema", "input_schema", "parameters") if key in source),
            None,
        )
        specs.append(_Spec(name, description if isinstance(description, str) else "", schema))
    return tuple(specs)


_TOOL_LINE: Final = re.compile(r"^- ([A-Za-z0-9_.-]{1,128}) \(", re.M)
"""A tool's line of the capability section: ``- name (kind, risk...``."""

_Mark = tuple[int, int, str, str]
"""A stretch of a message drawn apart inside its spans: start, end, its element's class
(``"fence ..."``, or ``"tool"``), and for a tool the target of its link."""


class _Page:
    """One rendering: the origins and tools numbered in order of first appearance."""

    def __init__(self, prompt: PromptLike, specs: tuple[_Spec, ...], prefix: str) -> None:
        self.prompt = prompt
        self.prefix = prefix
        self.specs = specs
        self.tool_ids = {
            spec.name: f"{prefix}-t{n}" for n, spec in reversed(list(enumerate(specs)))
        }
        self.origins: dict[tuple[str, str], int] = {}
        self.origin_use: dict[tuple[str, str], list[int]] = {}
        self.kind_chars: dict[str, int] = dict.fromkeys(_KINDS, 0)

    def render(self) -> str:
        prompt = self.prompt
        by_message: list[list[_Span]] = [[] for _ in prompt.messages]
        for span in prompt.spans:
            if 0 <= span.message < len(by_message):
                by_message[span.message].append(span)
        messages = "\n".join(
            self._message(index, message, by_message[index])
            for index, message in enumerate(prompt.messages)
        )
        total = sum(len(m.content) for m in prompt.messages)
        header = (
            "<header><h1>Provenance map</h1>"
            f'<div>sha256 <span class="sha">{_text(prompt.sha256)}</span></div>'
            f'<div class="n">{counted(len(prompt.messages), "message")} \u00b7 '
            f"{counted(sum(len(spans) for spans in by_message), 'span')} \u00b7 "
            f"{counted(total, 'character')}"
            f"</div>{_RECORDED_NOTICE if _as_recorded(prompt) else ''}</header>"
        )
        legend = "".join(
            f'<li><span class="sw k-{kind}">{kind}</span> '
            f"<b>{'trusted' if kind in TRUSTED_KINDS else 'not trusted'}</b>: "
            f'{html.escape(KIND_MEANINGS[kind])} <span class="n">'
            f"({counted(self.kind_chars[kind], 'char')})</span></li>"
            for kind in _KINDS
        )
        return (
            f'<div class="vpm">\n<style>{_CSS}</style>\n{header}\n<main>\n{messages}\n</main>\n'
            f'<aside>\n<h2>Kinds</h2><ul class="legend">{legend}</ul>\n{self._origins()}\n'
            f"{self._tools()}\n</aside>\n</div>"
        )

    def _origin(self, kind: str, origin: str, message: int) -> str:
        key = (kind, origin)
        number = self.origins.setdefault(key, len(self.origins) + 1)
        uses = self.origin_use.setdefault(key, [])
        if not uses or uses[-1] != message:  # messages come in order: a list of them, once each
            uses.append(message)
        return f"{self.prefix}-o{number}"

    def _message(self, index: int, message: _Message, spans: list[_Span]) -> str:
        content = message.content
        role = message.role if message.role in _ROLES else "other"
        blocks = _blocks(content) if "<data" in content else []
        marks = self._marks(content, spans, blocks)
        starts = [mark[0] for mark in marks]
        # Every place a mark begins or ends, in order: each span takes the ones inside it
        # by bisection, not by comparing itself with every mark of the message (a crafted
        # document of many blocks and spans in one message cost their product).
        bounds = sorted({p for mark in marks for p in mark[:2]})
        body: list[str] = []
        for span in _covering(spans, len(content)):
            kind = span.kind if span.kind in KIND_COLOURS else "unknown"
            target = self._origin(kind, span.origin, index)
            if span.end <= span.start:
                continue
            self.kind_chars[kind] += span.end - span.start
            title = (
                f"{kind} \u00b7 {span.origin} \u00b7 characters {span.start}-{span.end} "
                f"of message {index}"
            )
            body.append(f'<span class="sp k-{kind}" title="{_attr(title)}">')
            inside = bounds[bisect_right(bounds, span.start) : bisect_left(bounds, span.end)]
            cuts = [span.start, *inside, span.end]
            for a, b in pairwise(cuts):
                at = bisect_right(starts, a) - 1
                mark = marks[at] if at >= 0 and marks[at][0] <= a < marks[at][1] else None
                shown = _text(content[a:b])
                if mark is not None and mark[2] == "tool":
                    body.append(f'<a class="tool" href="#{mark[3]}" title="its spec">{shown}</a>')
                elif mark is not None:
                    body.append(f'<a class="o {mark[2]}" href="#{target}">{shown}</a>')
                else:
                    body.append(f'<a class="o" href="#{target}">{shown}</a>')
            body.append("</span>")
        meta = f"{counted(len(content), 'char')} \u00b7 {counted(len(spans), 'span')}"
        if message.tool_call_id is not None:
            meta += f" \u00b7 result of call {_text(message.tool_call_id)}"
        if message.tool_error:
            meta += " \u00b7 reports an error"
        extras = self._blocks_list(blocks) + self._calls(message)
        if message.reasoning:
            items = ", ".join(
                f"{_text(item.provider)} ({counted(len(item.json_text), 'char')})"
                for item in message.reasoning
            )
            extras += f'<ul class="calls"><li>reasoning items, not shown: {items}</li></ul>'
        return (
            f'<section class="msg r-{role}" id="{self.prefix}-m{index}">'
            f'<h2>{index} \u00b7 {_text(message.role)} <span class="meta">{meta}</span></h2>'
            f'<div class="body">{"".join(body)}</div>{extras}</section>'
        )

    def _marks(self, content: str, spans: list[_Span], blocks: list[_Block]) -> list[_Mark]:
        marks: list[_Mark] = []
        for block in blocks:
            marks += (
                (block.start, block.label_start, f"fence m-{block.mode}", ""),
                (block.label_start, block.label_end, "fence lbl", ""),
                (block.label_end, block.content_start, "fence", ""),
                (block.content_end, block.end, "fence", ""),
            )
        if self.tool_ids:
            for span in spans:
                if span.kind != "registry":
                    continue
                for line in _TOOL_LINE.finditer(content, span.start, span.end):
                    target = self.tool_ids.get(line.group(1))
                    inside = any(b.start <= line.start() < b.end for b in blocks)
                    if target is not None and not inside:
                        marks.append((line.start(1), line.end(1), "tool", target))
        return sorted(mark for mark in marks if mark[0] < mark[1])

    def _blocks_list(self, blocks: list[_Block]) -> str:
        if not blocks:
            return ""
        items = []
        for block in blocks:
            item = (
                f'data block <span class="lbl">{_text(block.label)}</span>, mode '
                f"<b>{block.mode}</b>, {counted(len(block.text), 'character')} of data"
            )
            if block.mode == "encode":
                item += (
                    "<details><summary>the data, decoded</summary>"
                    f'<div class="body">{_text(block.text)}</div></details>'
                )
            items.append(f"<li>{item}</li>")
        return f'<ul class="blocks">{"".join(items)}</ul>'

    def _calls(self, message: _Message) -> str:
        if not message.tool_calls:
            return ""
        items = []
        for call in message.tool_calls:
            target = self.tool_ids.get(call.name)
            name = _text(call.name)
            shown = f'<a class="tool" href="#{target}">{name}</a>' if target else f"<b>{name}</b>"
            items.append(
                f"<li>tool call <code>{_text(call.id)}</code>: {shown}"
                f"<code>({_text(call.arguments)})</code></li>"
            )
        return f'<ul class="calls">{"".join(items)}</ul>'

    def _origins(self) -> str:
        items = []
        for (kind, origin), number in self.origins.items():
            uses = self.origin_use[(kind, origin)]
            where = f"message{'s' if len(uses) > 1 else ''} {', '.join(map(str, uses))}"
            items.append(
                f'<li id="{self.prefix}-o{number}"><span class="sw k-{kind}">{kind}</span> '
                f'<code>{_text(origin)}</code> <span class="n">({where})</span></li>'
            )
        return f"<h2>Origins</h2><ol>{''.join(items)}</ol>"

    def _tools(self) -> str:
        if not self.specs:
            return ""
        items = []
        for number, spec in enumerate(self.specs):
            schema = json.dumps(
                spec.schema, indent=2, sort_keys=True, ensure_ascii=False, default=_unjson
            )
            items.append(
                f'<section class="spec" id="{self.prefix}-t{number}"><h3>{_text(spec.name)}</h3>'
                f"<div>{_text(spec.description)}</div><details><summary>input schema</summary>"
                f'<div class="body">{_text(schema)}</div></details></section>'
            )
        return f"<h2>Tools</h2>{''.join(items)}"


def _unjson(value: object) -> str:
    return f"<{type(value).__name__}>"


@dataclass(frozen=True, slots=True)
class _Gap:
    message: int
    start: int
    end: int
    kind: str = "unknown"
    origin: str = "(no provenance span)"


def _covering(spans: list[_Span], length: int) -> list[_Span]:
    """``spans`` in order, with any stretch they leave uncovered as a span of its own."""
    covered: list[_Span] = []
    position = 0
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if span.start > position:
            covered.append(_Gap(span.message, position, span.start))
        if span.start < position:  # overlapping spans: show each character once
            if span.end <= position:
                continue
            span = _Gap(span.message, position, span.end, span.kind, span.origin)
        covered.append(span)
        position = max(position, span.end)
    if position < length:
        covered.append(_Gap(-1, position, length))
    return covered
