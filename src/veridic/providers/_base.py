"""What every provider adapter shares: the request it builds, the answer it reads back.

An adapter knows one provider API (OpenAI chat completions, OpenAI responses,
Anthropic messages): how a :class:`~veridic.Prompt` and a tool list become
that API's request, which SDK method sends it, and how the response (or the
stream of events) becomes a :class:`Completion`. It knows nothing of audit,
approval or dispatch: :class:`~veridic.ModelGateway` does that, the same way
for every provider.

Adapters read the SDK's response objects by attribute (they are pydantic
models), never by importing the SDK's type names, so one adapter works across
the SDK versions the extras allow; the SDK itself is imported only when an
adapter has to build a client.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, NamedTuple, Protocol

from veridic._counted import counted
from veridic._sample import clip, cut_short
from veridic._words import a_type
from veridic.errors import ToolCouplingError, UnknownToolError, VeridicError
from veridic.providers._headers import (
    model_headers,
    model_query,
    refuse_betas,
    refuse_client_betas,
    sdk_sentinel,
)
from veridic.text.prompt import Prompt, ReasoningItem, ReasoningProvider, ToolCall
from veridic.tools.tool import JsonObject

__all__ = [
    "PARTS",
    "Adapter",
    "Assembler",
    "Completion",
    "SpecFormat",
    "Usage",
    "arguments_json",
    "attr",
    "found_in",
    "items",
    "listed",
    "plain_block",
    "reasoning_item",
    "refuse_error",
    "refuse_lost_calls",
    "refuse_no_answer",
    "server_said",
    "text_of",
    "usage_of",
]

SpecFormat = Literal["openai", "anthropic"]

_MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class Completion:
    """The model's answer as the provider sent it: text, tool calls, why it stopped.

    ``tool_calls`` carry their arguments as the JSON text the model wrote
    (not parsed: a malformed argument list is the dispatcher's to refuse, with
    a reason the model can read). ``reasoning`` holds the answer's reasoning
    items (thinking blocks, reasoning items) in order, exactly as sent.
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    stop_reason: str
    response_id: str
    model: str
    reasoning: tuple[ReasoningItem, ...] = ()
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one model call as the provider counted them (``None`` where it did not say).

    ``input_tokens`` are all the tokens the model read (Anthropic's cache reads
    and writes included), ``output_tokens`` all it wrote (reasoning included).
    Two usages add up, part by part; the zero ``Usage()`` adds nothing (``__add__``),
    so ``sum(usages, Usage())`` is their sum.

    The other three are parts of those two, as the provider broke them down (0
    where it did not): ``cache_read_input_tokens`` of the tokens read came from
    the provider's prompt cache (OpenAI's ``cached_tokens``, Anthropic's
    ``cache_read_input_tokens``), ``cache_creation_input_tokens`` were written to
    it (Anthropic's), and ``reasoning_output_tokens`` of the tokens written were
    reasoning (OpenAI's ``reasoning_tokens``, Anthropic's ``thinking_tokens``). They add nothing to
    ``total_tokens``, and two usages are equal when their totals are: the
    parts say what the tokens were, not how many.

    A part of 0 may say "none" or "not broken down": ``stated`` tells them apart,
    naming the parts the provider reported (the adapters fill it from the keys
    the answer holds, a store from the columns it kept). ``None`` (a usage built
    by hand) reads as before: every part stated when one of them is not 0, none
    when all are. :meth:`part` gives a part, ``None`` where it was not stated.

    >>> Usage(1200, 300, cache_read_input_tokens=1024).total_tokens
    1500
    >>> usage = Usage(1200, 300, stated=frozenset({"cache_read_input_tokens"}))
    >>> usage.part("cache_read_input_tokens"), usage.part("reasoning_output_tokens")
    (0, None)
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = field(default=0, compare=False, kw_only=True)
    cache_creation_input_tokens: int = field(default=0, compare=False, kw_only=True)
    reasoning_output_tokens: int = field(default=0, compare=False, kw_only=True)
    stated: frozenset[str] | None = field(default=None, compare=False, kw_only=True)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def part(self, name: str) -> int | None:
        """The part ``name`` (``cache_read_input_tokens``, ``cache_creation_input_tokens``
        or ``reasoning_output_tokens``) as the provider stated it; ``None`` where it did
        not (its count reads 0, which would say "none").

        Raises:
            VeridicError: ``name`` is not a part of a usage.
        """
        if name not in PARTS:
            raise VeridicError(
                f"Usage.part() got {clip(str(name))}, which is not a part of a usage: "
                f"ask for one of {', '.join(PARTS)}"
            )
        return getattr(self, name) if name in self._stated() else None

    def _stated(self) -> frozenset[str]:
        """The parts stated: :attr:`stated`, or for a usage built without it, every part
        when one is not 0 (how a usage said it was broken down before ``stated``)."""
        if self.stated is not None:
            return self.stated
        return _ALL_PARTS if any(getattr(self, name) for name in PARTS) else frozenset()

    def __add__(self, other: Usage) -> Usage:
        """Two usages summed, part by part; a part of the sum is stated when it was on
        both sides (a part one answer did not state is unknown in the sum too).

        The zero ``Usage()`` (every count 0, ``stated`` ``None``: no answer's usage) adds
        nothing, not even the parts it does not state: ``Usage() + u`` and ``u + Usage()``
        are ``u`` itself, so ``sum(usages, Usage())`` states what every usage stated. Any
        other two usages state what both state, so a sum states the same parts however
        it is grouped. Two usages built by hand without ``stated`` that read alike (both
        broken down, or neither) keep ``stated`` ``None``; where one is broken down and
        the other not, the sum states no part (it read as broken down before, which
        grouped differently stated none).

        Anything but a usage is refused (a ``TypeError``, as Python says it): the zero
        ``Usage()`` gave it back, so ``sum([None], Usage())`` was ``None`` without a word.
        """
        if not isinstance(other, Usage):
            return NotImplemented
        if _is_zero(self):
            return other
        if _is_zero(other):
            return self
        mine, theirs = self._stated(), other._stated()
        # Two usages built without ``stated`` that read alike sum to one that reads alike.
        legacy = self.stated is None and other.stated is None and mine == theirs
        both = None if legacy else mine & theirs
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            reasoning_output_tokens=self.reasoning_output_tokens + other.reasoning_output_tokens,
            stated=both,
        )


PARTS: Final = ("cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_output_tokens")
"""The fields of :class:`Usage` that break its two totals down."""

_ALL_PARTS: Final = frozenset(PARTS)


def _is_zero(usage: Usage) -> bool:
    """``usage`` is the zero ``Usage()``: no count, and ``stated`` not given.

    A usage an answer gave states its parts (``stated`` a frozenset, the empty one
    included) and is never this one, even when it counts no token: it says the parts
    it left out are unknown, and a sum keeps that.
    """
    return (
        usage.stated is None
        and not usage.input_tokens
        and not usage.output_tokens
        and not any(getattr(usage, name) for name in PARTS)
    )


def _stated_well(stated: object) -> bool:
    """``stated`` is what :attr:`Usage.stated` may be: ``None`` or a frozenset of part names.

    An adapter of one's own builds its :class:`Usage` itself: a list or a set broke the sum
    of two usages (a ``TypeError`` at a run's second answer), and a string read as stated
    every part named within it. The gateway (``veridic.run._sending``) and an answer's
    record (:mod:`veridic.run.records`) both refuse any other value, each in its own words.
    """
    return stated is None or (isinstance(stated, frozenset) and stated <= _ALL_PARTS)


class _PastTotal(NamedTuple):
    """Parts of a :class:`Usage` that add up to more than the total they break down."""

    parts: tuple[tuple[str, int], ...]
    """Each part's field name and count, in the order of :data:`PARTS`."""
    total_name: str
    """The total's field name."""
    total: int
    """The total."""


def _parts_past_totals(usage: Usage) -> tuple[_PastTotal, ...]:
    """Each group of parts of ``usage`` that adds up to more than the total it breaks down.

    The cache's reads and writes against the tokens read,
    the reasoning against the tokens written. No answer can have either, so an audit
    record (:mod:`veridic.run.records`) and the gateway (``veridic.run._sending``) both
    refuse it, each in its own words; ``usage`` must hold counts (ints) already.
    """
    groups = (
        _PastTotal(
            (
                ("cache_read_input_tokens", usage.cache_read_input_tokens),
                ("cache_creation_input_tokens", usage.cache_creation_input_tokens),
            ),
            "input_tokens",
            usage.input_tokens,
        ),
        _PastTotal(
            (("reasoning_output_tokens", usage.reasoning_output_tokens),),
            "output_tokens",
            usage.output_tokens,
        ),
    )
    return tuple(group for group in groups if sum(n for _, n in group.parts) > group.total)


def usage_of(
    response: object,
    read: Sequence[str],
    wrote: Sequence[str],
    *,
    where: str = "the provider",
    parts: Mapping[str, Sequence[str]] = MappingProxyType({}),
    total: str | None = None,
) -> Usage | None:
    """The ``usage`` of an SDK response: the sums of the counts named in ``read`` and ``wrote``.

    ``None`` when the response carries no usage (a stream asked without it), and
    when it leaves out the first count of ``read`` or of ``wrote`` (a proxy's
    ``{"total_tokens": 90000}``): read as 0, those tokens would pass a
    ``Limits(tokens=...)`` uncounted, where ``None`` stops the run saying why. The
    other counts (Anthropic's cache reads and writes) may be left out.

    ``parts`` maps a part of :class:`Usage` (:data:`PARTS`) to the path of its
    count in the usage (``("prompt_tokens_details", "cached_tokens")``); a part
    left out is 0, and not in the usage's :attr:`~Usage.stated` (a part given, 0
    included, is).

    ``total`` names the usage's own total (``"total_tokens"``). Where it is larger
    than the tokens read and written, the difference is added to ``output_tokens``:
    xAI counts a reasoning model's reasoning tokens outside ``completion_tokens``, and
    Gemini's OpenAI-compatible endpoint its thought tokens, saying so in the total
    only; read as sent, ``Limits(tokens=...)`` counted the answer short of what it
    cost. Tokens nobody explains are counted as written, the dearer kind, so a limit
    never counts less than the provider billed. Where the total leaves no room for the
    reasoning tokens, they are read as part of the tokens written, as OpenAI counts
    them (a part larger than its total is refused by the gateway). A total smaller
    than the tokens read and written cannot be true; the gateway refuses it too, once
    the answer is on record.

    Raises:
        VeridicError: a count is given but is not a whole number from 0 to 2**63 - 1
            (a negative one took tokens off the run's total).
    """
    usage = attr(response, "usage")
    if usage is None:
        return None
    counts: list[int] = []
    for keys in (read, wrote):
        given = {key: attr(usage, key) for key in keys}
        if keys and given[keys[0]] is None:
            return None
        counts.append(sum(_count(key, n, where) for key, n in given.items() if n is not None))
    broken_down = {
        part: _count(path[-1], found, where)
        for part, path in parts.items()
        if (found := attr(usage, *path)) is not None
    }
    known = frozenset(broken_down)
    own_total = attr(usage, total) if total is not None else None
    if total is None or own_total is None:
        return Usage(counts[0], counts[1], **broken_down, stated=known)
    totalled = _count(total, own_total, where)
    unexplained = totalled - counts[0] - counts[1]
    if unexplained < 0:
        return _ShortTotal(
            counts[0], counts[1], **broken_down, stated=known, given_total=(total, totalled)
        )
    return Usage(counts[0], counts[1] + unexplained, **broken_down, stated=known)


@dataclass(frozen=True, slots=True)
class _ShortTotal(Usage):
    """A usage whose own total is smaller than the tokens it says were read and written.

    One of the figures is wrong, and :class:`Usage` has no room for a third one: the
    gateway records the answer without its usage and then refuses it, as it does a part
    larger than its total (``veridic.run._sending``).
    """

    given_total: tuple[str, int] = field(default=("total_tokens", 0), kw_only=True, compare=False)
    """The usage's own total: its key and its count."""


_COUNT_MAX: Final = 2**63 - 1


def _count(key: str, value: object, where: str) -> int:
    """A token count as the provider gave it, refused unless it is one (a stream's event
    counts too: a count that is no count in one event is refused, not overwritten by the next).

    Raises:
        VeridicError: naming the key and the value.
    """
    if type(value) is int and 0 <= value <= _COUNT_MAX:
        return value
    raise VeridicError(
        f"{where}: the answer's usage gives {key}={_written(value)}, which is not a count "
        "of tokens (a whole number from 0 to 2**63 - 1); it cannot be added to the run's "
        "tokens, so nothing of the answer was run: check what sits between you and the API"
    )


class Assembler(Protocol):
    """Builds a :class:`Completion` from a provider's stream of events."""

    def feed(self, event: object) -> str:
        """Take one event; return the text it adds to the answer (``""`` if none)."""
        ...

    def finish(self) -> Completion:
        """The whole answer, once the stream has ended.

        Raises:
            VeridicError: the stream ended before the provider said it was done.
        """
        ...


def _coroutine_method(method: Callable[..., object]) -> bool:
    """Whether ``method`` (or what it wraps, or its ``__call__``) is a coroutine function."""
    target = inspect.unwrap(method)
    call = getattr(target, "__call__", None)  # noqa: B004 - an object with async __call__
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(call)


class Adapter:
    """One provider API bound to a client and a model: builds requests, reads answers.

    Subclasses set ``api`` and ``spec_format`` and implement :meth:`render`,
    :meth:`sent_tools`, :meth:`method`, :meth:`parse` and :meth:`assembler`.
    """

    api: str = ""
    """How audit records name the API: ``"openai.chat.completions"``."""
    spec_format: SpecFormat = "openai"
    """Which :meth:`~veridic.ToolView.tool_specs` format the API's tool list starts from."""
    owned: frozenset[str] = frozenset()
    """Request keys only the gateway may set (the prompt and the tool list)."""
    server_edits: Mapping[str, str] = MappingProxyType({})
    """Request keys with which the server changes what the model reads beyond the prompt
    (key -> what it does), refused unless set to ``None`` or to what turns them off."""
    one_answer: Mapping[str, object] = MappingProxyType({})
    """Request keys that change the answer's shape from the one finished answer the
    adapter reads (key -> the one value that keeps it, besides ``None``): refused when
    the options are given, since the answer would be refused only after it was paid for."""

    __slots__ = ("client", "model", "options")

    def __init__(self, client: object, model: str, options: Mapping[str, object] | None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise VeridicError(
                f"{type(self).__name__}() got model={model!r}: name the provider's model, "
                'e.g. model="gpt-4.1" or model="claude-sonnet-4-5"'
            )
        _refuse_online(f"{type(self).__name__}()", "model", [model])
        self.client = client
        self.model = model
        refuse_client_betas(type(self).__name__, client)
        self.options: Mapping[str, object] = self.check_options(
            given_options(type(self).__name__, options, "options"), "options"
        )
        # Refused when the adapter is built, not on its first send; each send refuses the
        # request's choice once more, through tool_choice_names().
        _refuse_unsent_choice(self, self.options.get("tool_choice"), "options")
        # Fail now, not on the first request, when the client is not of this API.
        self.method()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # --- what subclasses provide --------------------------------------------------

    def render(self, prompt: Prompt, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        """The request's prompt and tool parameters (no model, no options)."""
        raise NotImplementedError

    def sent_tools(self, request: Mapping[str, object]) -> list[Mapping[str, object]]:
        """The tool list as it stands in ``request``: what the model will be shown.

        A list that is no list, or an entry that is no mapping (a tool object an adapter
        of your own put there), is refused rather than left out: the SDK would send it,
        and :meth:`~veridic.ToolView.assert_coupled` would never have seen it.

        Raises:
            ToolCouplingError: ``request["tools"]`` is not a list of mappings.
        """
        tools = request.get("tools", [])
        if not isinstance(tools, list):
            raise ToolCouplingError(
                f"{type(self).__name__}: the request's tools are {a_type(tools)}, not a list "
                "of tool specs, so veridic cannot check them against the view: build them "
                "from the view's tool_specs() in render()"
            )
        # A dict is a Mapping: asked alone first (not in one isinstance with Mapping, which
        # costs twice as much), the view's specs (read-only dicts) skip the ABC's check, a
        # tenth of a microsecond for each tool on every send.
        for index, tool in enumerate(tools):
            if not (isinstance(tool, dict) or isinstance(tool, Mapping)):  # noqa: SIM101
                raise ToolCouplingError(
                    f"{type(self).__name__}: tool {index} of the request is {a_type(tool)}, "
                    "not a mapping, so veridic cannot check it against the view: send the "
                    "view's tool_specs() as they are (an SDK's tool objects are mappings "
                    "once dumped: model_dump())"
                )
        return tools

    def method(self) -> Callable[..., object]:
        """The SDK method that sends the request (bound to the client)."""
        raise NotImplementedError

    def sender(self) -> Callable[..., object]:
        """The SDK method that sends a request whose answer comes whole (``send()``,
        ``asend()``): :meth:`~veridic.providers.Adapter.method`, unless the adapter reads
        the answer's own text (:class:`~veridic.AnthropicMessages`,
        :class:`~veridic.OpenAIChat` and :class:`~veridic.OpenAIResponses`, through the
        SDK's ``with_raw_response``). :meth:`~veridic.providers.Adapter.parse` reads what
        it returns."""
        return self.method()

    def parse(self, response: object) -> Completion:
        """Read the SDK's response object (what :meth:`sender` returned)."""
        raise NotImplementedError

    def assembler(self) -> Assembler:
        """A fresh assembler for one streamed response."""
        raise NotImplementedError

    def tool_choice_name(self, choice: object) -> str | None:
        """The tool a ``tool_choice`` option forces, if it names one: ``{"name": ...}``
        (Anthropic, Responses), ``{"function": {"name": ...}}`` (chat completions) or
        ``{"custom": {"name": ...}}`` (a chat completions custom tool, which
        :meth:`tool_choice_names` refuses). It only reads: the gateway checks a choice
        through :meth:`tool_choice_names`."""
        if isinstance(choice, Mapping):
            name = choice.get("name")
            if isinstance(name, str):
                return name
            for key in ("function", "custom"):
                named = choice.get(key)
                if isinstance(named, Mapping) and isinstance(named.get("name"), str):
                    return str(named["name"])
        return None

    def tool_choice_names(self, choice: object) -> tuple[str, ...]:
        """Every tool a ``tool_choice`` option names, for the gateway to check against the
        view: the one it forces (``name`` and ``function.name`` both, when a choice
        carries the two: each API reads its own), or each tool of an
        ``allowed_tools`` list (``{"type": "allowed_tools", "allowed_tools": {"mode": ...,
        "tools": [...]}}`` in chat completions, ``{"type": "allowed_tools", "mode": ...,
        "tools": [...]}`` in Responses).

        The one place that reads a choice, so no caller can skip its refusals: a choice
        that forces a tool the view never sends (a hosted or MCP tool, a custom tool) is
        refused here, whatever name it carries.

        Raises:
            UnknownToolError: the choice forces a custom tool (the view sends function
                tools only, so it has none, whatever its name).
            VeridicError: the choice forces a hosted or MCP tool; an ``allowed_tools`` list
                is missing, or holds an entry that names no function tool (a hosted, MCP
                or custom tool, which the view never sends).
        """
        _refuse_unsent_choice(self, choice, "the request")
        if not (isinstance(choice, Mapping) and choice.get("type") == "allowed_tools"):
            return _every_name(choice)
        nested = choice.get("allowed_tools")
        listed = (nested if isinstance(nested, Mapping) else choice).get("tools")
        if not isinstance(listed, list | tuple):
            raise VeridicError(
                f"{type(self).__name__}: tool_choice is of type allowed_tools but holds no "
                f"list of tools (got {_written(listed)}): list the view's tools the model may "
                'call, e.g. [{"type": "function", "name": "get_weather"}]'
            )
        names: list[str] = []
        for entry in listed:
            named = (
                _every_name(entry)
                if isinstance(entry, Mapping) and entry.get("type", "function") == "function"
                else ()
            )
            if not named:
                raise VeridicError(
                    f"{type(self).__name__}: tool_choice's allowed_tools list holds "
                    f"{_written(entry)}, which names no function tool: the gateway sends only "
                    "the view's function tools, and the model-call record names those: list "
                    "only tools of the view, by name"
                )
            names.extend(named)
        return tuple(names)

    # --- shared ------------------------------------------------------------------------

    @property
    def is_async(self) -> bool:
        """Whether the client is the SDK's async client (its method is a coroutine).

        Read on every send, as the client is now: a client replaced on the adapter, a
        method patched on it, or one redefined in place (a notebook's autoreload gives a
        function new code) is read as it is. Remembering the answer per method object
        spared about 1.7 µs a send (1.1 µs against 2.8 µs for an ``OpenAI`` client's
        ``is_async``, 2026-12-08), and missed a method redefined in place.
        """
        return _coroutine_method(self.method())

    def request(
        self, prompt: Prompt, specs: Sequence[Mapping[str, object]], options: Mapping[str, object]
    ) -> JsonObject:
        """The whole request: model, the adapter's options, the call's options, prompt, tools."""
        extra = self.check_options(options, "the call's options")
        return {"model": self.model, **self.options, **extra, **self.render(prompt, specs)}

    def check_options(self, options: Mapping[str, object], where: str) -> Mapping[str, object]:
        """Refuse options that would replace what the gateway sends.

        The SDKs merge ``extra_body`` into the request body over the parameters, so its
        keys are checked as options too: ``extra_body={"instructions": ...}`` replaced
        the trusted system prompt, and ``{"tools": ...}`` the view's tool list, while the
        model-call record named the view's. A ``tool_choice`` there is refused as well:
        as an option of its own, the gateway checks that it names an exposed tool.

        An option with which the server changes what the model reads beyond the
        prompt (``server_edits``: dropping or summarising turns, reading web
        pages) is refused too: the prompt's hash would name text the model did not
        read. So is a key with which another API, or an OpenAI-compatible server,
        takes instructions or text for the model (``system``, ``instructions``,
        ``prompt``, ``chat_template``, ``documents``): ``extra_body`` sends any key.

        A ``tool_choice`` option is read, and refused if it forces a tool the view never
        sends, by :meth:`tool_choice_names`, once per request (the gateway calls it on
        every request it sends), and when the adapter is built, for its own options.

        Raises:
            VeridicError: an option (or a key of ``extra_body``) sets the prompt, the
                tools, the model or streaming, or is one of ``server_edits``; a header
                turns on a beta with which the server edits what the model reads or runs
                tools outside the view (``anthropic-beta: mcp-client-...``), or is not one
                HTTP can carry, or is given twice (:meth:`headers`);
                ``extra_body`` is not a mapping; OpenRouter's fallback ``models`` name one
                that searches the web (``:online``).
        """
        if type(options) is dict and not options:
            return {}  # the usual call, with no options of its own: nothing to refuse
        options = given_options(type(self).__name__, options, where)
        owned = self.owned | {"model", "stream"}
        clash = sorted(set(options) & owned)
        clash += _extra_body_clash(options.get("extra_body"), owned, type(self).__name__, where)
        if clash:
            choice = any(key.endswith("['tool_choice']") for key in clash)
            raise VeridicError(
                f"{type(self).__name__}: {where} set {', '.join(clash)}, which the gateway "
                "sets itself (the prompt from the Prompt, the tools from the view, the model "
                "from the adapter, streaming from send() or stream()): remove them"
                + (
                    " (pass tool_choice as an option of its own: the gateway checks that it "
                    "names a tool the view exposes)"
                    if choice
                    else ""
                )
            )
        given = _given(options)
        for shown, key, value in given:
            if key == "models" and isinstance(value, list | tuple):
                _refuse_online(f"{type(self).__name__}: {where}", shown, value)
        _refuse_server_edits(self, given, where)
        _refuse_template_kwargs(self, given, where)
        _refuse_other_answers(self, given, where)
        if options.get("extra_headers") is not None:
            # The client's own headers were checked when the adapter was built, and a
            # header of the request's replaces the client's of that name: the request's
            # are the ones left to check (not the client's again, on every send).
            owner = type(self).__name__
            refuse_betas(owner, model_headers(None, options["extra_headers"], owner), where)
        return dict(options)

    def headers(self, request: Mapping[str, object]) -> dict[str, str]:
        """The headers ``request`` is sent with that may change what the server does with it:
        the client's own (``default_headers``, ``anthropic-version`` among them) and the
        request's ``extra_headers``, merged as the SDK merges them; names in lower case,
        beta lists sorted, transport headers (authentication, user agent, idempotency,
        retries, timeouts, tracing) left out. The options digest covers them.

        Raises:
            VeridicError: ``extra_headers`` is not a mapping; a header's name is not an
                HTTP token, or its value is neither text nor an SDK's ``omit``, or holds a
                line break or another control character; a mapping gives one header
                twice, in two spellings (``Anthropic-Beta`` and ``anthropic-beta``).
        """
        return model_headers(self.client, request.get("extra_headers"), type(self).__name__)

    def query(self, request: Mapping[str, object]) -> dict[str, object]:
        """The query parameters ``request`` is sent with: the client's own
        (``default_query``, Azure's ``api-version`` among them) and the request's
        ``extra_query``, merged as the SDK merges them; those whose name marks a secret
        (``key``, ``access_token``, ``sig``, ...) left out. The options digest covers them.

        Raises:
            VeridicError: ``extra_query`` or the client's ``default_query`` is not a
                mapping.
        """
        return model_query(self.client, request.get("extra_query"), type(self).__name__)


_EDITS_OFF: Final[Mapping[str, object]] = {
    "truncation": "disabled",
    "transforms": [],
    "enable_search": False,
    "safe_prompt": False,
}
"""The value that turns a server edit off, where the API has one besides ``None``."""


_Given = tuple[str, str, object]
"""An option as the checks read it: (how an error names it, key, value)."""


def _given(options: Mapping[str, object]) -> list[_Given]:
    """Each option, each text key of its ``extra_body`` (which the SDKs merge into the
    request over the options) and each of an ``extra_body`` inside that one (which
    Gemini's OpenAI-compatible endpoint reads: ``{"extra_body": {"google": {...}}}``):
    (how an error names it, key, value)."""
    given = [(key, key, value) for key, value in options.items()]
    body = options.get("extra_body")
    shown = "extra_body"
    for _ in range(2):
        if not isinstance(body, Mapping):
            break
        given += [
            (f"{shown}[{key!r}]", key, value) for key, value in body.items() if isinstance(key, str)
        ]
        body, shown = body.get("extra_body"), f"{shown}['extra_body']"
    return given


def _written(value: object) -> str:
    """``value`` as an error quotes it: its ``repr``, clipped (a server's or a caller's value
    may be any size)."""
    return cut_short(repr(value), 60)


_PROMPT_ELSEWHERE: Final[Mapping[str, str]] = MappingProxyType(
    dict.fromkeys(
        ("system", "instructions", "system_prompt", "prompt"),
        "the server reads its text as instructions (the system prompt of another "
        "API, or of an OpenAI-compatible server)",
    )
    | {
        "chat_template": "an OpenAI-compatible server (vLLM, SGLang) renders the "
        "conversation with this template in place of the model's, text of its own included",
        "documents": "an OpenAI-compatible server (vLLM) adds these documents to what the "
        "model reads",
    }
)
"""Request keys that put text before the model in an API other than the adapter's own, or
in an OpenAI-compatible server that takes the adapter's API with more: refused like
``server_edits`` by every adapter (its own API's are its ``owned``), since ``extra_body``
sends any key, and a server that reads one reads text the Prompt does not hold."""


_PRESET: Final = "@preset/"
"""How a model name asks OpenRouter for a preset (``@preset/slug``, ``model@preset/slug``)."""

_PRESET_DOES: Final = (
    "whose system prompt and server tools (web search, subagents) the model reads "
    "besides the prompt and the view's tools"
)
"""What an OpenRouter preset does to a request."""


_GATEWAY_EDITS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "truncate_prompt_tokens": "vLLM reads only the last tokens of the prompt, so "
        "its start (the system message first) is cut off",
        "transforms": "OpenRouter drops or truncates turns from the middle of the "
        "conversation when it outgrows the context window ('middle-out'; only [] drops none)",
        "preset": "OpenRouter applies a preset stored on its servers, " + _PRESET_DOES,
        "plugins": "OpenRouter adds web search results to what the model reads ('web'), or "
        "drops turns from the middle of the conversation ('context-compression')",
        "prompt_id": "LiteLLM's proxy loads a prompt kept in a prompt manager (Langfuse, "
        ".prompt files, an API of its own) and puts its messages, a system message among "
        "them, before the request's",
        "search_parameters": "xAI searches the web and X (Live Search) and adds what it "
        "found to what the model reads (only mode 'off' searches nothing)",
        "enable_search": "Alibaba's DashScope searches the web and adds what it found to "
        "what the model reads (only False searches nothing)",
        "google": "Gemini's OpenAI-compatible endpoint puts a context cache stored on "
        "Google's servers (cached_content: turns and a system instruction) before the prompt",
        "prompt_mode": "Mistral puts a system prompt of its own before the request's (its "
        "reasoning prompt; only null, which asks for none, adds nothing)",
        "safe_prompt": "Mistral prepends a safety prompt of its own to the conversation "
        "(only False adds nothing)",
    }
)
"""Request keys with which an OpenAI-compatible server or gateway edits what the model
reads, as ``server_edits`` do: refused by every adapter, since ``extra_body`` sends any
key.

``preset`` is refused whatever the server: OpenRouter reads it as a stored system prompt
and server tools, text-generation-webui as sampling settings only, and the adapter cannot
tell the two apart behind a proxy (LiteLLM, a gateway of one's own) that passes
``extra_body`` on; sampling settings have options of their own, so the refusal costs a
text-generation-webui user a rename, where letting it through could put a system prompt
under no hash."""

_PLUGINS_EDITING: Final = frozenset({"web", "context-compression"})
"""The OpenRouter plugins that edit the prompt (``response-healing`` repairs the answer's
JSON, ``file-parser`` reads files the gateway never sends)."""


_ONLINE: Final = ":online"
"""The model suffix with which OpenRouter searches the web for every request."""


def _refuse_online(where: str, shown: str, models: Sequence[object]) -> None:
    """Refuse a model (or one of OpenRouter's fallback ``models``) named with ``:online``.

    OpenRouter reads the suffix as its ``web`` plugin: it searches the web and adds the
    results to what the model reads, outside the Prompt, in no data block and under no
    hash, as the refused ``plugins=[{"id": "web"}]`` does.

    Raises:
        VeridicError: naming the model and what to do instead.
    """
    for model in models:
        if isinstance(model, str) and model.strip().lower().endswith(_ONLINE):
            raise VeridicError(
                f"{where} set {shown} to {_written(model)}: OpenRouter reads the :online "
                "suffix as its web plugin, and adds web search results to what the model "
                "reads, outside the prompt whose sha256 the model-call record names and "
                "outside any data block: name the model without :online, and fetch pages "
                "with a registry tool, whose results come back fenced"
            )
        if isinstance(model, str) and _PRESET in model.lower():
            raise VeridicError(
                f"{where} set {shown} to {_written(model)}: OpenRouter reads @preset/ as a "
                f"preset stored on its servers, {_PRESET_DOES}, outside the prompt whose "
                "sha256 the model-call record names: name the model itself, "
                "write instructions with Composer.system(), and give tools through the view"
            )


def _edit(adapter: Adapter, key: str, value: object) -> str | None:
    """What the server does to what the model reads with ``key`` set to ``value``, or
    ``None`` when it does nothing to it."""
    what = adapter.server_edits.get(key) or _PROMPT_ELSEWHERE.get(key) or _GATEWAY_EDITS.get(key)
    if what is None or _absent(value) or value == _EDITS_OFF.get(key, None):
        return None
    if key == "search_parameters" and attr(value, "mode") == "off":
        return None
    if key == "multi_agent" and attr(value, "enabled") is False:
        return None
    if key == "google":
        cached = value.get("cached_content") if isinstance(value, Mapping) else None
        return None if _absent(cached) else what
    if key == "plugins" and isinstance(value, list | tuple):
        ids = {found for plugin in value if isinstance(found := attr(plugin, "id"), str)}
        return what if ids & _PLUGINS_EDITING else None
    return what


def _refuse_server_edits(adapter: Adapter, given: Sequence[_Given], where: str) -> None:
    """Refuse an option (or a key of ``extra_body``) with which the server changes what the
    model reads: the prompt's ``sha256``, the model-call record's, must name all of it.

    Raises:
        VeridicError: naming the key, its value and what the server would do.
    """
    for shown, key, value in given:
        what = _edit(adapter, key, value)
        if what is None:
            continue
        raise VeridicError(
            f"{type(adapter).__name__}: {where} set {shown}={_written(value)}: with it "
            f"{what}, so the model would read other text than the prompt whose sha256 the "
            "model-call record and the tool calls' records name: remove it ("
            + (
                "instructions go in Composer.system(), as trusted text, and outside text "
                "in Composer.data()"
                if key in _PROMPT_ELSEWHERE
                else _REMEDIES.get(
                    key,
                    "a prompt too long for the model is the application's to shorten, "
                    "knowingly, and outside text goes in with Composer.data()",
                )
            )
            + ")"
        )


_REMEDIES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "prompt_id": "write instructions with Composer.system(), in code, so the prompt holds them",
        "preset": "name the model itself, write instructions with Composer.system(), and "
        "give tools through the view; text-generation-webui reads preset as sampling "
        "settings only, but a proxy in front of a server may pass the key on to OpenRouter, "
        "so pass those settings as options of their own instead (temperature, top_p, min_p, "
        "...)",
        **dict.fromkeys(
            ("search_parameters", "enable_search"),
            "fetch pages with a registry tool, whose results come back fenced",
        ),
        "thread": "the gateway sends each conversation whole: keep its turns in the "
        "Composer (Reply.record() adds the model's)",
        **dict.fromkeys(
            ("prompt_mode", "safe_prompt"),
            "write the instructions you want the model to follow with Composer.system(), in "
            "code; prompt_mode=None asks a Mistral reasoning model for no prompt of its own",
        ),
        "multi_agent": "run sub-tasks as registry tools, whose calls the gateway checks, "
        "approves and records",
        "container": "the view sends no code-execution tool, so a container holds nothing "
        "the model may use: give it skills as registry tools, their instructions with "
        "Composer.system()",
        "google": "leave cached_content out, and put what the cache holds in the prompt: "
        "instructions with Composer.system(), outside text with Composer.data(); other "
        "google settings, such as thinking_config, go as given",
    }
)
"""What to do instead of a server edit, where the usual advice does not fit."""


def _refuse_template_kwargs(adapter: Adapter, given: Sequence[_Given], where: str) -> None:
    """Refuse a ``chat_template_kwargs`` (an option, or a key of ``extra_body``) that sets
    what the chat template renders as the prompt or the tools.

    vLLM and SGLang render the conversation with a chat template, and merge these keyword
    arguments over their own (``tools``, ``documents``, ``chat_template``): the model read
    another tool list than the view's, or text the Prompt does not hold. Everyday ones
    (``enable_thinking``, ``reasoning_effort``) go as given.

    Raises:
        VeridicError: naming the key and what to do instead.
    """
    for shown, key, kwargs in given:
        if key != "chat_template_kwargs" or not isinstance(kwargs, Mapping):
            continue
        replaced = adapter.owned | {"tools", "messages"} | _PROMPT_ELSEWHERE.keys()
        for name, value in kwargs.items():
            if name not in replaced or _absent(value):
                continue
            raise VeridicError(
                f"{type(adapter).__name__}: {where} set {shown}[{name!r}]={_written(value)}: "
                "an OpenAI-compatible server (vLLM, SGLang) renders the chat template with "
                "it in place of what the gateway sent, so the model would read other tools "
                "or other text than the view and the prompt whose sha256 the model-call "
                "record names: remove it (tools come from the view, instructions go in "
                "Composer.system() and outside text in Composer.data())"
            )


def _refuse_other_answers(adapter: Adapter, given: Sequence[_Given], where: str) -> None:
    """Refuse an option (or a key of ``extra_body``) that asks for other than one finished
    answer (``n=2``, ``background=True``): the adapter reads one, and refuses the rest.

    Raises:
        VeridicError: naming the key, its value and the value that is read.
    """
    for shown, key, value in given:
        if key not in adapter.one_answer or _absent(value):
            continue
        kept = adapter.one_answer[key]
        if value == kept and type(value) is type(kept):
            continue
        raise VeridicError(
            f"{type(adapter).__name__}: {where} set {shown}={_written(value)}: the gateway "
            "reads one finished answer to each request it sends (its calls recorded, checked "
            "and run), and would refuse this one only after it was paid for: remove it, or set "
            f"{key}={kept!r}"
        )


def _every_name(choice: object) -> tuple[str, ...]:
    """Every tool name a choice (or an ``allowed_tools`` entry) carries: ``name`` (Anthropic,
    Responses) and ``function.name`` (chat completions). Each API reads its own, so a
    choice that carries both has both checked, not the first one found."""
    if not isinstance(choice, Mapping):
        return ()
    function = choice.get("function")
    found = (
        choice.get("name"),
        function.get("name") if isinstance(function, Mapping) else None,
    )
    return tuple(dict.fromkeys(name for name in found if isinstance(name, str)))


_CHOICE_TYPES: Final = frozenset(
    {"function", "tool", "allowed_tools", "auto", "any", "none", "required"}
)
"""The ``type`` of a ``tool_choice`` that forces one of the tools sent (OpenAI's ``function``,
Anthropic's ``tool``), lists them (``allowed_tools``) or forces none."""


def _refuse_unsent_choice(adapter: Adapter, choice: object, where: str) -> None:
    """Refuse a ``tool_choice`` that forces a tool the gateway never sends: a hosted one
    (Responses' ``web_search_preview``, ``file_search``, ``code_interpreter``,
    ``image_generation``, ``mcp``, ...) or a custom one (OpenAI's free-form custom
    tools), whatever name it carries.

    The request's tools are the view's function tools only, so only the provider stood
    between such a choice and a tool the model-call record does not name. A custom
    choice named after one of the view's function tools is still no tool the view sent.

    Raises:
        UnknownToolError: a custom tool, naming it.
        VeridicError: a hosted tool, naming the choice's type.
    """
    if not isinstance(choice, Mapping):
        return
    if choice.get("type") == "custom" or "custom" in choice:
        name = adapter.tool_choice_name(choice) or ""
        raise UnknownToolError(
            f"{type(adapter).__name__}: {where} set tool_choice={_written(choice)}, which "
            f"forces a custom tool (free-form input) named {clip(name)}: the gateway sends "
            "only the view's function tools, so the view has no custom tool of any name: "
            'force one of the view\'s tools as a function ({"type": "function", "function": '
            '{"name": ...}} in chat completions, {"type": "function", "name": ...} in '
            'Responses), or leave tool_choice "auto"',
            name=name,
        )
    if "type" not in choice:
        return
    kind = choice["type"]
    if isinstance(kind, str) and kind in _CHOICE_TYPES:
        return
    raise VeridicError(
        f"{type(adapter).__name__}: {where} set tool_choice={_written(choice)}, which forces "
        f"a tool of type {_written(kind)}: the gateway sends only the view's function tools "
        "(the model-call record names those), so the view has no such tool: force one of "
        'the view\'s tools by name ({"type": "function", "name": ...}), or leave '
        'tool_choice "auto"'
    )


def _absent(value: object) -> bool:
    """Whether ``value`` leaves an option unset: ``None``, or an SDK's "not given" sentinel,
    which a wrapper passes through for an option its caller did not give."""
    return value is None or sdk_sentinel(value)


def _extra_body_clash(body: object, owned: frozenset[str], adapter: str, where: str) -> list[str]:
    """The keys of an ``extra_body`` option that would replace what the gateway sends,
    and of an ``extra_body`` inside it: servers that read that one merge it over the
    request too (LiteLLM's proxy hands it to the upstream call, where it replaces the
    request's keys; Gemini reads its ``google``), as :func:`_given` reads it.

    Raises:
        VeridicError: ``extra_body`` is neither absent nor a mapping (the SDK cannot
            merge it into the request body).
    """
    if body is None:
        return []
    if not isinstance(body, Mapping):
        raise VeridicError(
            f"{adapter}: {where} set extra_body to {a_type(body)}, which the SDK "
            "cannot merge into the request; extra_body must be a mapping of extra "
            "request keys: pass e.g. {'seed': 7}"
        )
    replaced = owned | {"tool_choice"}
    clash = [f"extra_body[{key!r}]" for key in sorted(set(body) & replaced)]
    inner = body.get("extra_body")
    if isinstance(inner, Mapping):
        clash += [f"extra_body['extra_body'][{key!r}]" for key in sorted(set(inner) & replaced)]
    return clash


def given_options(owner: str, options: object, where: str) -> Mapping[str, object]:
    """``options`` as the mapping of request parameters they must be, ``None`` read as none.

    Only ``None`` means no options: ``options or {}`` read ``[]``, ``0``, ``""`` and
    ``False`` as none too, so a caller's mistake (a list of pairs, a flag in the wrong
    place) sent the request without the options meant, and nothing said so.

    Raises:
        VeridicError: ``options`` is neither ``None`` nor a mapping, naming what was given
            (:func:`_what_options_are`).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise VeridicError(
            f"{owner}: {where} must be a mapping of request parameters, got "
            f"{_what_options_are(options)}: pass a dict such as {{'temperature': 0}}, or "
            "None for no options"
        )
    return options


def _what_options_are(options: object) -> str:
    """What ``options`` is, as an error names it: its type with its number or its size,
    never its text, which a list of pairs gives a header's key in (and every log of the
    error would keep it)."""
    if type(options) in (bool, int, float):
        return f"{a_type(options)} ({options!r})"
    if isinstance(options, Sized):
        unit = "character" if isinstance(options, str) else "item"
        return f"{a_type(options)} of {counted(len(options), unit)}"
    return a_type(options)


def attr(value: object, *path: str) -> object:
    """Follow attributes (or keys, for a dict) along ``path``; ``None`` when one is missing."""
    for name in path:
        if value is None:
            return None
        value = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
    return value


def items(value: object, *path: str) -> list[object]:
    """The list at ``path`` in ``value`` (empty when there is none)."""
    found = attr(value, *path)
    return list(found) if isinstance(found, list | tuple) else []


def found_in(value: object, *path: str) -> list[object]:
    """What a refusal looks for at ``path`` in ``value``: the list there, the one value
    there when it is not a list (and not empty), else nothing.

    For what must not be there at all (citations, search results): :func:`items` read an
    object where a list belongs as nothing found, so the same citations sent as an object
    passed where sent as a list they were refused.
    """
    found = attr(value, *path)
    if isinstance(found, list | tuple):
        return list(found)
    return [found] if found else []


def listed(value: object, *path: str, where: str) -> list[object]:
    """The list at ``path`` in ``value``: empty when there is none (``null``, or left out).

    :func:`items` reads anything else as empty too, which is right where the adapter only
    looks, and wrong where the list holds the answer: a chat message's ``tool_calls`` sent
    as an object, or a Responses message's ``content`` sent as text, read as no call and
    no text, and the answer lost them without a word.

    Raises:
        VeridicError: there is a value at ``path`` and it is not a list.
    """
    found = attr(value, *path)
    if found is None:
        return []
    if isinstance(found, list | tuple):
        return list(found)
    raise VeridicError(
        f"{where}: the answer's {'.'.join(path)} is {a_type(found)}, not a list, so the "
        "adapter would read none of it; nothing of it was run: check what sits between you "
        "and the API (a proxy, or a compatible server that answers in another shape)"
    )


def text_of(value: object, *path: str, where: str, default: str | None = None) -> str:
    """The string at ``path`` in ``value``.

    The message names the server's answer first: the SDK reads whatever JSON the server
    sent, so a call without an id or a name (a compatible server's, a proxy's) gets here
    far more often than an SDK of another version does, and "check the SDK version"
    alone sent the reader to the wrong place.

    Raises:
        VeridicError: there is none and no ``default`` was given: the response
            is not of the shape this adapter reads.
    """
    found = attr(value, *path)
    if isinstance(found, str):
        return found
    if found is None and default is not None:
        return default
    raise VeridicError(
        f"{where}: the answer has no text at {'.'.join(path)} (got {a_type(found)}), so it "
        "is not of the shape this adapter reads; nothing of it was run: check what sits "
        "between you and the API (a proxy, or a compatible server that answers in another "
        "shape), and that the installed SDK version is one the extra allows"
    )


def server_said(message: object, default: str) -> str:
    """What a server (or whatever sits between it and the application) said, quoted for a
    message: escaped and clipped (:func:`~veridic._sample.clip`), ``default`` when it said
    nothing. Raw, its line breaks forged log lines wherever the error was logged, and its
    escape sequences reached the operator's terminal."""
    if message is None or message == "":
        return default
    return "the server said " + clip(message if isinstance(message, str) else repr(message), 200)


def refuse_error(response: object, where: str) -> None:
    """Refuse a response that carries an error object (``{"error": {"message": ...}}``).

    Proxies and compatible servers answer some failures (an overloaded upstream, a
    rate limit) with status 200 and an error body, which the SDK reads as an answer:
    read on, it was an empty final answer (no text, no calls, no usage), so a run ended
    with ``""`` as its output and the server's reason was lost. An ``error`` that is
    falsy (``null``, ``false``, ``0``, empty), which some servers send beside an answer,
    is none, as the OpenAI SDK reads a stream's.

    Raises:
        VeridicError: quoting what the server said.
    """
    error = attr(response, "error")
    if not error:  # null, false, 0, "" or {} beside an answer, as the OpenAI SDK reads them
        return
    message = attr(error, "message")
    raise VeridicError(
        f"{where}: the response is an error, not an answer "
        f"({server_said(message if message is not None else error, 'no reason given')}); "
        "nothing was answered or run: send the request again, and check what sits between "
        "you and the API"
    )


def refuse_lost_calls(completion: Completion, called: frozenset[str], where: str) -> None:
    """Refuse an answer whose stop reason says the model stopped to call tools, and that
    holds no call.

    ``called`` are the API's words for it (chat completions' ``tool_calls``, Anthropic's
    ``tool_use``). Read on, the answer was a final one: a run ended with its text as the
    output, and the calls the model made (dropped by a proxy, or put by a compatible
    server where the adapter does not read them) vanished without a word. A compatible
    server may also mark so an answer in which it found no call: vLLM does, with
    ``tool_choice="required"``, when its tool parser reads none in the model's text (the
    call the model wrote is then text nobody runs). The message names both, so a reader
    of either is sent to the right place.

    Raises:
        VeridicError: naming the stop reason.
    """
    if completion.tool_calls or completion.stop_reason not in called:
        return
    raise VeridicError(
        f"{where}: the answer stopped to call tools (stop reason "
        f"{clip(completion.stop_reason)}) but holds no tool call: the calls were lost on their "
        "way (a proxy that drops them, a compatible server that puts them where the adapter "
        "does not read them), or the server found none in the model's text (vLLM says so "
        'with tool_choice="required" when its tool parser reads no call); read on, the '
        "answer would end the run as a final one, so nothing of it was run: send the request "
        "again, and if it recurs, check what sits between you and the API and the server's "
        "tool parser"
    )


def refuse_no_answer(response: object, key: str, where: str) -> None:
    """Refuse a response without the list (``key``) that holds an API's answer: an empty
    answer is a list with nothing in it, a response without one is not an answer.

    Raises:
        VeridicError: naming the key.
    """
    if isinstance(attr(response, key), list | tuple):
        return
    raise VeridicError(
        f"{where}: the response holds no answer (no {key} list; got "
        f"{type(attr(response, key)).__name__}): nothing was answered or run: check what "
        "sits between you and the API"
    )


def reasoning_item(provider: ReasoningProvider, block: object, where: str) -> ReasoningItem:
    """A reasoning block of a response as a :class:`~veridic.ReasoningItem`, every key kept.

    The refusal of :class:`~veridic.ReasoningItem` told its caller to pass the block as
    the provider returned it, which the adapter had: its fault is framed here as the
    answer's, without that advice, naming the adapter and that nothing of the answer ran.

    Raises:
        VeridicError: the block cannot be read (:func:`plain_block`), or is
            not a reasoning block of ``provider``.
    """
    plain = plain_block(provider, block, where)
    try:
        return ReasoningItem.of(provider, plain)
    except VeridicError as error:
        # The fault without ReasoningItem's advice to pass the block as returned: it was.
        fault = getattr(error, "fault", str(error))
        raise VeridicError(
            f"{where}: the answer holds a reasoning block that cannot be kept to send back "
            f"({fault}); nothing of it was run: check what sits between you and the API (a "
            "proxy, or a compatible server whose reasoning blocks are not the API's own)"
        ) from error


def plain_block(provider: ReasoningProvider, block: object, where: str) -> JsonObject:
    """A response block as a plain dict, with the keys the API sent and no others.

    An SDK response object is dumped under the API's own key names, without
    the defaults the SDK fills in (``exclude_unset``): a key the API did not
    send was not returned, and the API may refuse it as input.

    Raises:
        VeridicError: the block is neither a mapping nor a pydantic model.
    """
    if isinstance(block, Mapping):
        return dict(block)
    dump = getattr(block, "model_dump", None)
    dumped: object = (
        dump(mode="json", by_alias=True, exclude_unset=True) if callable(dump) else None
    )
    if not isinstance(dumped, Mapping):
        raise VeridicError(
            f"{where}: a {provider} reasoning block arrived as {a_type(block)}, "
            "neither a mapping nor a pydantic model, so it cannot be kept as sent: check that "
            "the installed SDK version is one the extra allows"
        )
    return dict(dumped)


def arguments_json(value: object) -> str:
    """Tool-call arguments as JSON text, whether the provider sent text or an object
    (``"{}"`` for none: a call of a tool without parameters may stream no argument text)."""
    if isinstance(value, str):
        return value or "{}"
    if value is None:
        return "{}"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
