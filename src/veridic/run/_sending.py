"""What leaves for the model: the checks a prompt passes, and the facts its reply carries.

Every send of :class:`~veridic.ModelGateway` (blocking or async, whole or
streamed) goes through :func:`checked` before anything is recorded or sent,
so the run-time half of invariants I1 (only trusted text in the system
message) and I4 (the tool list is the view's, and so is the capability
section the prompt shows) is one function; :class:`Sent` then turns the
provider's answer into a :class:`~veridic.Reply` bound to the same hashes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, cast, runtime_checkable

from veridic._sample import clip
from veridic.errors import ToolCouplingError, VeridicError
from veridic.providers._base import (
    PARTS,
    Adapter,
    Completion,
    Usage,
    _absent,
    _count,
    _parts_past_totals,
    _ShortTotal,
    _stated_well,
    given_options,
)
from veridic.providers._scripted import ScriptedProvider
from veridic.run._unlabelled import refuse_unlabelled_outside_text
from veridic.run.audit import ModelCallRecord, ModelReplyRecord
from veridic.run.call_log import _AWriteReply, _WriteReply
from veridic.run.executor import _check_request_id, tools_sha256
from veridic.run.reply import Reply
from veridic.text.message import Role
from veridic.text.prompt import Prompt, PromptSpan, ToolCall, check_system, checked_system
from veridic.text.provenance import Kind, Span, spans_of
from veridic.tools.view import ToolView, _sorted_names

__all__ = [
    "AsyncIterable",
    "Iterable",
    "Sent",
    "anothing",
    "awaited",
    "check_call_ids",
    "check_request",
    "check_usage",
    "checked",
    "nothing",
    "options_sha256",
]


@dataclass(frozen=True, slots=True)
class Sent:
    """The facts of one call that its reply carries."""

    request: dict[str, object]
    request_id: str
    prompt_sha256: str
    tools_sha256: str
    view: ToolView
    answered: _WriteReply | None = None
    clock: Callable[[], float] = time.time
    started: float = field(default_factory=time.monotonic)
    spans: tuple[PromptSpan, ...] = ()
    """The provenance spans of the system message (the record's ``instruction_spans``)."""
    call_id: str = ""
    """The model-call record's own id, which the answer's record carries."""
    aanswered: _AWriteReply | None = None
    """Where async code records the answer (instead of ``answered``)."""
    options_sha256: str = ""
    """:func:`options_sha256` of the request."""
    tools: tuple[str, ...] = ()
    """The names in the tool list sent, sorted (the record's ``tools``)."""

    def leaving(
        self, answered: _WriteReply | None = None, aanswered: _AWriteReply | None = None
    ) -> Sent:
        """This call as its request leaves, its record written: the answer's record goes to
        ``answered`` (``aanswered`` from async code), and latency counts from now.

        Made by the constructor: ``dataclasses.replace`` reads the class's fields anew on
        every call, and this is made on every send.
        """
        return Sent(
            self.request,
            self.request_id,
            self.prompt_sha256,
            self.tools_sha256,
            self.view,
            answered=answered,
            clock=self.clock,
            started=time.monotonic(),
            spans=self.spans,
            call_id=self.call_id,
            aanswered=aanswered,
            options_sha256=self.options_sha256,
            tools=self.tools,
        )

    def reply(self, completion: Completion) -> Reply:
        """The answer as a :class:`Reply`, recorded first: one that is refused (for its usage
        or its call ids) is on record too, as the model call it answers happened.

        An answer whose usage is refused is recorded without usage (its counts cannot be
        read as any), and then refused.
        """
        latency = time.monotonic() - self.started
        refused = _usage_refused(completion.usage, self.request_id)
        if self.answered is not None:
            self.answered(self._answer(completion, latency, refused is None))
        if refused is not None:
            raise refused
        return self._reply(completion, latency)

    async def areply(self, completion: Completion) -> Reply:
        """:meth:`reply` for async code: the answer's record is awaited."""
        latency = time.monotonic() - self.started
        refused = _usage_refused(completion.usage, self.request_id)
        if self.aanswered is not None:
            await self.aanswered(self._answer(completion, latency, refused is None))
        if refused is not None:
            raise refused
        return self._reply(completion, latency)

    def _answer(self, completion: Completion, latency: float, counted: bool) -> ModelReplyRecord:
        return ModelReplyRecord(
            time=self.clock(),
            request_id=self.request_id,
            prompt_sha256=self.prompt_sha256,
            response_id=completion.response_id,
            model=completion.model,
            stop_reason=completion.stop_reason,
            tool_calls=tuple(call.name for call in completion.tool_calls),
            usage=completion.usage if counted else None,
            latency=latency,
            call_id=self.call_id,
        )

    def _reply(self, completion: Completion, latency: float) -> Reply:
        check_call_ids(completion.tool_calls, self.request_id)
        _check_one_call(self.request, completion.tool_calls, self.request_id)
        return Reply(
            text=completion.text,
            tool_calls=completion.tool_calls,
            stop_reason=completion.stop_reason,
            response_id=completion.response_id,
            model=completion.model,
            request_id=self.request_id,
            prompt_sha256=self.prompt_sha256,
            tools_sha256=self.tools_sha256,
            view=self.view,
            reasoning=completion.reasoning,
            usage=completion.usage,
            latency=latency,
            options_sha256=self.options_sha256,
        )


def check_usage(usage: object, request_id: str) -> None:
    """Refuse an answer whose usage is not token counts, before anything of it runs.

    The SDK adapters read usage checked; an application's own :class:`Adapter
    <veridic.providers.Adapter>` builds the :class:`Usage <veridic.providers.Usage>`
    itself, and a negative count (a sign read wrong, a proxy's "unknown" as -1)
    took tokens off the run's total, so ``Limits(tokens=...)`` let the run go on
    past it whenever no store checked the answer's record first. Its ``stated``
    must be ``None`` or a frozenset of part names: a list broke the run's sum of
    usages at the second answer, and with a store the answer was not recorded at all.

    Raises:
        VeridicError: naming the count (or ``stated``) and the request.
    """
    if usage is None:
        return
    where = f"the answer to request {clip(request_id)}"
    if not isinstance(usage, Usage):
        raise VeridicError(
            f"{where} gives a {type(usage).__name__} as its usage, not a Usage: an adapter's "
            "parse() must give Usage(input_tokens, output_tokens) or None; nothing of the "
            "answer was run"
        )
    for key in ("input_tokens", "output_tokens", *PARTS):
        _count(key, getattr(usage, key), where)
    if not _stated_well(usage.stated):
        raise VeridicError(
            f"{where} gives a usage whose stated is {clip(repr(usage.stated))}, which names "
            "no set of its parts: an adapter of your own must give None or a frozenset of "
            f"the parts the answer stated ({', '.join(PARTS)}); nothing of the answer was run"
        )
    _check_parts(usage, where)


def _check_parts(usage: Usage, where: str) -> None:
    """Refuse parts of a :class:`Usage` larger than the total they are parts of.

    A proxy's ``cached_tokens`` of 900 out of 100 tokens read cannot be true of one answer:
    one of the two figures is wrong, and the run's count, its records and its spans would
    carry whichever was read. Reasoning a provider counts outside the tokens written, and
    says so in its total (xAI), is added to them when the answer is read; reasoning larger
    than the tokens written with no such total is refused the same way, and so is a
    total smaller than the tokens read and written it totals.

    Raises:
        VeridicError: naming the part, its total and the request.
    """
    past = _parts_past_totals(usage)
    if past:
        first = past[0]  # one is enough to refuse the answer
        # a part of 0 beside one past the total says nothing (a cache read, no writes)
        shown = " and ".join(f"{name}={n}" for i, (name, n) in enumerate(first.parts) if n or not i)
        total = f"{first.total_name}={first.total}"
    elif isinstance(usage, _ShortTotal):
        key, stated = usage.given_total
        raise VeridicError(
            f"{where} gives {key}={stated}, less than the input_tokens={usage.input_tokens} "
            f"and output_tokens={usage.output_tokens} it totals ({usage.total_tokens}): one "
            "of the counts is wrong, so the tokens the answer cost cannot be known, and "
            "nothing of the answer was run: check what sits between you and the API"
        )
    else:
        return
    raise VeridicError(
        f"{where} gives {shown}, more than the {total} they are part of: one of the two "
        "counts is wrong, so the tokens the answer cost cannot be known, and nothing of the "
        "answer was run: check what sits between you and the API (an adapter of your own "
        "must give parts within their totals, reasoning included in output_tokens)"
    )


def _usage_refused(usage: object, request_id: str) -> VeridicError | None:
    """:func:`check_usage`'s refusal of ``usage``, to raise once the answer is on record."""
    try:
        check_usage(usage, request_id)
    except VeridicError as error:
        return error
    return None


CALL_ID_LIMIT: Final = 1024
"""The longest tool call id a reply may give (providers' ids are tens of characters)."""


def check_call_ids(calls: Sequence[ToolCall], request_id: str) -> None:
    """Refuse a reply whose tool calls cannot each be answered, before any of them runs.

    Every result answers one call by its id: an empty id or one used twice
    would run the handlers and only then fail when the turn is recorded,
    leaving a call nobody can answer and every later request refused. An id
    longer than :data:`CALL_ID_LIMIT` is refused too: it is kept whole in the
    conversation, a paused run and every record of the call (a store cannot cut
    it, since a paused run's calls are found by their ids), so a proxy's
    megabyte id went into each of them.

    Raises:
        VeridicError: an empty, repeated or overlong call id (the model call itself
            is recorded).
    """
    seen: set[str] = set()
    problems: list[str] = []
    for call in calls:
        if not call.id:
            problems.append(f"an empty id (tool {clip(call.name)})")
        elif len(call.id) > CALL_ID_LIMIT:
            problems.append(
                f"an id of {len(call.id)} characters ({clip(call.id, 40)}, tool "
                f"{clip(call.name)}; at most {CALL_ID_LIMIT})"
            )
        elif call.id in seen:
            problems.append(f"the id {clip(call.id)} twice")
        seen.add(call.id)
    if problems:
        raise VeridicError(
            f"the model's reply to request {clip(request_id)} has tool calls with "
            f"{'; '.join(problems)}: each call is answered by its id, so none of them ran; "
            "send the request again (a provider that reuses ids, or gives one that long, has a "
            "bug to report)"
        )


def _one_call_asked(request: Mapping[str, object]) -> str | None:
    """How ``request`` asks for one tool call at most, or ``None`` when it does not:
    OpenAI's ``parallel_tool_calls=False`` (an option, or a key of ``extra_body``, which the
    SDK merges over the options), Anthropic's ``tool_choice`` with
    ``disable_parallel_tool_use``."""
    body = request.get("extra_body")
    merged = {**request, **body} if isinstance(body, Mapping) else request
    if merged.get("parallel_tool_calls") is False:
        return "parallel_tool_calls=False"
    choice = merged.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("disable_parallel_tool_use") is True:
        return "tool_choice with disable_parallel_tool_use=True"
    return None


def _check_one_call(
    request: Mapping[str, object], calls: Sequence[ToolCall], request_id: str
) -> None:
    """Refuse an answer of several tool calls to a request that asked for one at most.

    An application asks for one call at a time when a call may depend on the one before
    (its result read first, its effect in place); the answer of a model that does not
    honour it, or of something between the application and the API, ran them all, each
    approved on its own, in an order nobody chose.

    Raises:
        VeridicError: naming the option, the number of calls and the request (the answer
            is recorded first).
    """
    if len(calls) < 2:
        return  # one call or none answers any request: the request need not be read
    asked = _one_call_asked(request)
    if asked is None:
        return
    names = ", ".join(clip(call.name) for call in calls[:5])
    raise VeridicError(
        f"the model's reply to request {clip(request_id)} holds {len(calls)} tool calls "
        f"({names}), but the request set {asked}, asking for one at most; nothing of it was "
        "run: send the request again, or allow parallel calls if the tools may run together"
    )


def check_system_part(
    provider: Adapter, prompt: Prompt, view: ToolView, request_id: str, *, sync: bool
) -> tuple[PromptSpan, ...]:
    """The checks of a send that the system part, the view and the client decide; the
    system message's instruction spans once they pass.

    :meth:`ModelGateway.resume <veridic.ModelGateway.resume>` runs them on the system part
    before any waiting call runs, and :func:`check_request` on the prompt its first send
    will build.
    """
    if not isinstance(prompt, Prompt) or not isinstance(view, ToolView):
        raise VeridicError(
            f"ModelGateway needs a Prompt and a ToolView, got {type(prompt).__name__} and "
            f"{type(view).__name__}: build the prompt with Composer().build() and the view "
            "with registry.view()"
        )
    _check_request_id(request_id, "ModelGateway")
    if provider.is_async == sync:
        raise VeridicError(_wrong_client(provider, sync))
    spans = _instruction_spans(prompt)
    _check_section(prompt, view, spans)
    return spans


def check_request(
    provider: Adapter,
    prompt: Prompt,
    view: ToolView,
    options: Mapping[str, object] | None,
) -> dict[str, object]:
    """The adapter's request for ``prompt`` and ``view``'s tools, once the checks of a send
    that it decides have passed: no call of the prompt waits for its result, the tool list
    the request carries is the view's (:meth:`ToolView.assert_coupled`), and a
    ``tool_choice`` names a tool the view exposes.

    :meth:`ModelGateway.resume <veridic.ModelGateway.resume>` runs them, before any
    waiting call runs, on the prompt its first send will build (the waiting calls
    answered with empty results): an adapter that edits the tool list was refused at
    that send, after the approved calls had run and the paused run was spent.
    """
    pending = prompt.pending_tool_calls
    if pending:
        listed = ", ".join(f"{call.id} ({call.name})" for call in pending)
        raise VeridicError(
            f"prompt {prompt.sha256[:12]} has tool calls without results: {listed}; "
            "providers reject it: answer each with Composer.tool_result(call_id, ...) "
            "(Reply.record(composer, outcomes) does) before sending; calls a run paused on "
            "(defer=True) wait for the user's answers: go on with gateway.resume(paused, "
            "composer, ...) of the PausedRun (RunResult.paused), with a composer holding only "
            "the system part, which runs them and records them"
        )
    given = given_options(type(provider).__name__, options, "the call's options")
    request = provider.request(prompt, view.tool_specs(provider.spec_format), given)
    sent_tools = provider.sent_tools(request)
    view.assert_coupled(sent_tools)
    for name in provider.tool_choice_names(request.get("tool_choice")):
        view.tool(name)
    return request


def checked(
    provider: Adapter,
    clock: Callable[[], float],
    prompt: Prompt,
    view: ToolView,
    request_id: str,
    options: Mapping[str, object] | None,
    streamed: bool,
    *,
    sync: bool,
) -> tuple[Sent, ModelCallRecord]:
    """The request to send and its model-call record, once every check has passed.

    ``sync`` says whether blocking code sends it (an async client is refused
    there, and a sync client in async code).
    """
    spans = check_system_part(provider, prompt, view, request_id, sync=sync)
    with checked_system(prompt):  # checked above: the adapter's rendering need not again
        request = check_request(provider, prompt, view, options)
    digest = tools_sha256(view)
    options_digest = options_sha256(provider, request)
    names = _sorted_names(view)
    record = ModelCallRecord(
        time=clock(),
        request_id=request_id,
        api=provider.api,
        model=provider.model,
        prompt_sha256=prompt.sha256,
        tools_sha256=digest,
        tools=names,
        instruction_spans=spans,
        streamed=streamed,
        options_sha256=options_digest,
    )
    sent = Sent(
        request,
        request_id,
        prompt.sha256,
        digest,
        view,
        clock=clock,
        spans=spans,
        call_id=record.call_id,
        options_sha256=options_digest,
        tools=names,
    )
    return sent, record


_TRANSPORT: Final = frozenset({"extra_headers", "extra_query", "timeout"})
"""The SDKs' keyword arguments that go with the HTTP request, not in its body. Of them, the
headers that change what the server does, and the query parameters, are digested apart
(:data:`_HEADERS`, :data:`_QUERY`)."""

_HEADERS: Final = "extra_headers"
"""The key under which the digest names the headers that change what the server does
(:meth:`~veridic.providers.Adapter.headers`): the client's and the request's, merged."""

_QUERY: Final = "extra_query"
"""The key under which the digest names the query parameters but those holding a secret
(:meth:`~veridic.providers.Adapter.query`): the client's and the request's, merged."""


_NOT_OPTIONS: Final = frozenset({"model", "stream"}) | _TRANSPORT
"""The keys of every request that the options digest leaves out, besides the adapter's
``owned`` ones: the model (named in the record), streaming and the transport arguments."""

_NO_OPTIONS_SHA256: Final = hashlib.sha256(b"{}").hexdigest()
""":func:`options_sha256` of a request without options (``{}`` as canonical JSON), the
usual one: worked out once, not written and hashed again on every send."""


def options_sha256(provider: Adapter, request: Mapping[str, object]) -> str:
    """SHA-256 of the canonical JSON of ``request``'s options: what the model is given
    besides the prompt and the tool list.

    That is every key of the request but the prompt and the tools (the adapter's
    ``owned`` keys, which ``Prompt.sha256`` and ``tools_sha256`` cover), the model (named
    in the record), streaming and the SDK's transport arguments (``timeout``, and of the
    headers and query parameters those that only carry the request or hold a secret),
    and, under ``extra_headers``, the headers that change what the server does
    (``anthropic-beta``, ``anthropic-version``, ``OpenAI-Beta``, ...), under
    ``extra_query`` the query parameters (Azure's ``api-version``), each the client's own
    and the request's merged (:meth:`~veridic.providers.Adapter.headers`,
    :meth:`~veridic.providers.Adapter.query`): a structured-output schema (``response_format``,
    Responses' ``text.format``, Anthropic's ``output_format`` / ``output_config``), whose
    names and descriptions the model reads, OpenAI's ``prediction``, ``extra_body`` as
    the adapter sends it, sampling settings. The JSON is canonical (keys sorted, ASCII,
    no spaces), so the digest does not depend on key order or on whether an option was
    the adapter's or the call's (a float that is not finite is written as Python's
    ``json`` writes it, ``Infinity``, as the SDK sends it); a key is read as the JSON
    sent names it (``{2: 1}`` as ``{"2": 1}``, as ``logit_bias`` is often written), and
    any mapping is a JSON object; an option left unset (``None``, an SDK's "not given")
    counts as absent. ``options_sha256`` of a request without options, through a client
    that sends no such header nor query parameter, is that of ``{}``.

    Raises:
        VeridicError: an option holds a value that is not JSON (nor a pydantic model),
            a mapping whose keys name one JSON key twice (``{1: ..., "1": ...}``), or a
            pydantic model whose aliases (or ``__api_exclude__`` fields) change its JSON,
            which the SDK writes by field name or by alias depending on where it sits:
            the digest could not say what was sent.
    """
    owned = provider.owned
    options = {
        key: value
        for key, value in request.items()
        if key not in owned and key not in _NOT_OPTIONS and not _absent(value)
    }
    headers = provider.headers(request)
    if headers:
        options[_HEADERS] = headers
    query = provider.query(request)
    if query:
        options[_QUERY] = query
    if not options:
        return _NO_OPTIONS_SHA256
    try:
        text = _canonical_json(options)
    except _AmbiguousModel as error:
        key = next(key for key in sorted(options) if not _is_json(options[key]))
        raise VeridicError(
            f"{provider!r}: the request's option {clip(key)} holds a pydantic model whose JSON "
            f"depends on where the SDK finds it: {error}; the digest of the options the model "
            "was given could not say which was sent, so nothing was sent: pass the dict you "
            "mean to send (model.model_dump(mode='json', by_alias=...)) in its place"
        ) from error
    except (TypeError, ValueError, RecursionError) as error:
        key = next((key for key in sorted(options) if not _is_json(options[key])), "?")
        raise VeridicError(
            f"{provider!r}: the request's option {clip(key)} cannot be written as JSON "
            f"({error}), so the digest of the options the model was given could not name it; "
            "nothing was sent: pass JSON values (dicts, lists, strings, numbers, booleans), "
            "or a pydantic model, each key of a mapping naming its own JSON key"
        ) from error
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _canonical_json(value: object) -> str:
    return json.dumps(
        _canonical(value),
        sort_keys=True,
        ensure_ascii=True,
        separators=(",", ":"),
        allow_nan=True,
    )


def _canonical(value: object) -> object:
    """``value`` as the JSON the SDK sends of it: each mapping a ``dict`` keyed by the text
    of its JSON keys, each list or tuple a list, a pydantic model as it is dumped.

    Keys are read first, since ``json`` sorts them before writing them: ints sorted as
    numbers and strings as text gave ``{2: 1, 10: 1}`` and ``{"2": 1, "10": 1}``, which
    are sent alike, two digests, and mixed keys could not be sorted at all.

    Raises:
        TypeError: a value or key that JSON cannot hold (the caller refuses the option).
        ValueError: two keys of a mapping name one JSON key.
    """
    if isinstance(value, Mapping):
        canonical = {_json_key(key): _canonical(child) for key, child in value.items()}
        if len(canonical) < len(value):
            twice = sorted(_json_key(key) for key in value)
            key = next(key for key, after in itertools.pairwise(twice) if key == after)
            raise ValueError(f"the JSON key {clip(repr(key))} is given twice, as keys of two types")
        return canonical
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return _canonical(_model_json(value, dump))
    if value is None or isinstance(value, str | int | float):
        return value
    raise TypeError(f"a {type(value).__name__} is not JSON")


class _AmbiguousModel(ValueError):
    """A pydantic model the SDK writes as two different JSON objects, depending on where it
    sits in the request."""


def _model_json(model: object, dump: Callable[..., object]) -> object:
    """A pydantic model as the JSON the SDK sends of it, whichever way the SDK writes it.

    The SDKs write a model given as an option of its own by its field names, without its
    ``__api_exclude__`` fields (``maybe_transform``), and one inside ``extra_body`` or a
    list by its aliases (their JSON encoder). The digest named the aliases' JSON, so the
    request that sent ``{"kind": ...}`` had the digest of one that sent ``{"type": ...}``.
    A model whose two JSON objects agree is read as that JSON; one whose aliases or
    excluded fields change it is refused (the caller names the option).

    Raises:
        _AmbiguousModel: the two ways of writing the model give two JSON objects.
    """
    excluded = getattr(model, "__api_exclude__", None)
    as_option = dump(mode="json", exclude_unset=True, exclude=excluded)
    as_nested = dump(mode="json", exclude_unset=True, by_alias=True)
    if as_option != as_nested:
        raise _AmbiguousModel(
            f"the {type(model).__name__} model is written {_written_json(as_option)} as an "
            f"option of its own and {_written_json(as_nested)} inside extra_body or a list "
            "(by its aliases)"
        )
    return as_option


def _written_json(value: object) -> str:
    """``value`` as an error quotes it: clipped, since a model may be of any size."""
    return clip(repr(value), 80)


def _json_key(key: object) -> str:
    """``key`` as the text of the JSON key ``json`` writes for it (``1`` as ``"1"``,
    ``True`` as ``"true"``, a ``str`` subclass as its characters).

    Raises:
        TypeError: a key JSON cannot hold (a tuple, say).
    """
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, int | float):
        return json.dumps(key, allow_nan=True)
    raise TypeError(f"a key of type {type(key).__name__} is not JSON")


def _is_json(value: object) -> bool:
    try:
        _canonical_json(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _instruction_spans(prompt: Prompt) -> tuple[PromptSpan, ...]:
    """The spans of the system message, after refusing it unless its parts are all trusted
    and make its text (:func:`~veridic.text.prompt.check_system`, the rule every provider
    format holds a prompt to, here naming ModelGateway)."""
    if not prompt.messages or prompt.messages[0].role != "system":
        return ()
    let_pass = check_system(prompt, "ModelGateway")
    return _system_spans(prompt.messages[0].parts, let_pass)


def _system_spans(parts: Sequence[str], let_pass: bool) -> tuple[PromptSpan, ...]:
    """The spans of a system message made of ``parts``, checked by the caller, as the
    record's :class:`PromptSpan` s of message 0; ``let_pass`` says report mode let a part
    that is not trusted through.

    Read from the parts, which are checked, and not from :attr:`Message.spans`,
    which a subclass of :class:`Message` may override: such a message said it was all
    code, and a capability section of another view in it went unrefused.

    Every part is checked on every send; what the parts' spans come to is worked out once
    for the same part objects (:func:`_span_rows`), since a part is immutable text whose
    spans were fixed when it was made, and an application sends the same instructions
    and the same view's section with every request. The record's spans are made anew on
    every send, so no record shares a span with another. A message with a part report
    mode let through is worked out on every send and not kept: such a part's spans are
    not fixed (an instruction's ``__class__`` set to a lookalike class is no longer
    trusted), and the text may be a user's, which a table of this module would keep.
    """
    rows = _span_rows(parts) if not let_pass else _rows_of(parts)
    return _prompt_spans(rows)


_Row = tuple[int, int, Kind, str]
"""A record span of message 0 as plain values: start, end, kind, origin."""

_ROWS_KEPT: Final = 64
"""System messages whose span rows are kept (by the identity of their parts); past it the
rows are worked out again, as for a message never sent before."""

_kept_rows: dict[tuple[int, ...], tuple[tuple[str, ...], tuple[_Row, ...]]] = {}
""":func:`_span_rows` by the ``id`` of each part, with the parts themselves: kept alive by
the entry, no part's ``id`` is another object's, and a hit is checked part by part."""


def _span_rows(parts: Sequence[str]) -> tuple[_Row, ...]:
    """:func:`_rows_of` ``parts``, worked out once for the same part objects, each of them
    trusted (minted text, whose spans were fixed when it was made)."""
    key = tuple(map(id, parts))
    kept = _kept_rows.get(key)
    if kept is not None and len(kept[0]) == len(parts) and all(map(operator.is_, kept[0], parts)):
        return kept[1]
    rows = _rows_of(parts)
    if len(_kept_rows) >= _ROWS_KEPT:
        _kept_rows.clear()
    _kept_rows[key] = (tuple(parts), rows)
    return rows


def _rows_of(parts: Sequence[str]) -> tuple[_Row, ...]:
    """The rows of the record spans of a system message made of ``parts``.

    The rule is :func:`~veridic.text.provenance.concat_spans`'s with no separator
    (each part's spans shifted into place, empty ones left out, adjacent twins merged,
    and a message of empty parts keeping the first part's origin in one empty span),
    applied in one pass. ``tests/test_gateway.py`` holds the record's spans equal to
    the message's for all system messages, sent once or again.
    """
    made: list[_Row] = []
    offset = 0
    growing = False  # whether start, end, kind and origin hold a span not yet made
    start = end = 0
    kind: Kind = "unknown"
    origin = ""
    first: Span | None = None  # the first span of any part, kept for a message of empty parts
    for part in parts:
        own = spans_of(part)
        if first is None and own:
            first = own[0]
        for span in own:
            span_start, span_end = span.start + offset, span.end + offset
            if span_start == span_end:
                continue
            if growing and end == span_start and kind == span.kind and origin == span.origin:
                end = span_end
                continue
            if growing:
                made.append((start, end, kind, origin))
            growing = True
            start, end, kind, origin = span_start, span_end, span.kind, span.origin
        offset += len(part)
    if growing:
        made.append((start, end, kind, origin))
    elif first is not None:
        made.append((0, 0, first.kind, first.origin))
    return tuple(made)


class _SpanLayout:
    """:class:`PromptSpan`'s layout (its very slots) with a plain ``__init__``.

    A record span is made as one of these, then given :class:`PromptSpan` as its class:
    CPython lets an object's class change to one of the same layout (and refuses any
    other, so a change of :class:`PromptSpan`'s fields fails loudly here, not quietly).
    The frozen dataclass's own ``__init__`` sets each field through
    ``object.__setattr__``, and its descriptors called one by one cost twice as much;
    the record's spans are made on every send, of values read from spans already made.
    """

    __slots__ = PromptSpan.__slots__

    message: int
    role: Role
    start: int
    end: int
    kind: Kind
    origin: str

    def __init__(self, start: int, end: int, kind: Kind, origin: str) -> None:
        self.message = 0
        self.role = "system"
        self.start = start
        self.end = end
        self.kind = kind
        self.origin = origin


def _prompt_spans(rows: tuple[_Row, ...]) -> tuple[PromptSpan, ...]:
    """``PromptSpan(0, "system", start, end, kind, origin)`` of each row, made anew."""
    made = [_SpanLayout(*row) for row in rows]
    for span in made:
        span.__class__ = PromptSpan  # type: ignore[assignment]  # the same layout: see _SpanLayout
    return cast("tuple[PromptSpan, ...]", tuple(made))


def _check_section(prompt: Prompt, view: ToolView, spans: tuple[PromptSpan, ...]) -> None:
    """Refuse a system message whose capability section is not ``view``'s.

    The section is minted as one span of kind ``registry``; each such span of
    the system message must be exactly the section of the view the request is
    sent with, else the prompt would promise tools the request does not carry
    (or hide ones it does). A prompt without a section promises nothing, and is
    refused only with tools whose text no pin covers
    (:func:`~veridic.run._unlabelled.refuse_unlabelled_outside_text`).
    """
    system = prompt.messages[0].content if spans else ""
    for span in spans:
        if span.kind == "registry" and not view.describes(system[span.start : span.end]):
            raise ToolCouplingError(
                f"the system message of prompt {prompt.sha256[:12]} holds a capability section "
                f"from another view ({span.origin}) than the one it is sent with ({view!r}): "
                "the prompt would describe tools the request does not carry; build the system "
                "message with view.capability_section() of the view you send"
            )
    if not any(span.kind == "registry" for span in spans):
        refuse_unlabelled_outside_text(f"prompt {prompt.sha256[:12]}", view)


@runtime_checkable
class Iterable(Protocol):
    def __iter__(self) -> Iterator[object]: ...


@runtime_checkable
class AsyncIterable(Protocol):
    def __aiter__(self) -> AsyncIterator[object]: ...


async def awaited(value: object) -> object:
    if not isinstance(value, Awaitable):
        raise VeridicError(
            f"the SDK method returned a {type(value).__name__}, not an awaitable, for an async "
            "client; check that the installed SDK version is one the extra allows"
        )
    result: object = await value
    return result


def nothing() -> None:
    return None


async def anothing() -> None:
    return None


def _wrong_client(provider: Adapter, sync: bool) -> str:
    """What to do about an async client in blocking code, or a sync one in async code."""
    have, use, other = (
        ("an async", "await asend()/astream() (arun(), aresume() for a run)", "sync")
        if sync
        else ("a sync", "send()/stream() (run(), resume() for a run)", "async")
    )
    if isinstance(provider, ScriptedProvider):
        held = f"asynchronous={sync}, no SDK"
        fix = f"build it with asynchronous={not sync} for {'blocking' if sync else 'async'} code"
    else:
        held = type(provider.client).__name__
        fix = f"build the adapter with the SDK's {other} client"
    return f"{provider!r} holds {have} client ({held}): use {use}, or {fix}"
