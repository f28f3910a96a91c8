"""What a run of the gateway counts, where it stops, and how it ended.

:meth:`ModelGateway.run <veridic.ModelGateway.run>` and its async and resumed
twins send and call tools each in their own way, but must count turns, tool
calls, time and tokens alike, hold the last answer to its ``output_type``
alike, and pause for approvals and go on alike: that shared state is ``_Run``,
here once. :class:`Limits` is what a caller bounds a run with and
:class:`RunResult` what it gets back, whichever method ran it.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final, Generic, NoReturn, TypeVar, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails, PydanticKnownError

from veridic._counted import counted
from veridic._sample import clip
from veridic.errors import AuditWriteError, RunLimitError, VeridicError
from veridic.providers._base import Usage
from veridic.run.approval import ApprovalPolicy, ApprovalRequest
from veridic.run.deferred import (
    PausedRun,
    PendingApproval,
    answered,
    asked_with,
    bound_grant,
    check_waiting,
    clock_moment,
    needs_answer,
    shown_arguments,
    waiting_sha256,
)
from veridic.run.executor import CallResult
from veridic.run.limits import Limits
from veridic.run.reply import Reply, ToolOutcome, _check_whole, _ResumedReply
from veridic.text.compose import Composer
from veridic.text.prompt import Prompt, ToolCall
from veridic.text.provenance import untrusted
from veridic.tools.view import ToolView

_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_NOT_RUN: Final = untrusted(
    "This call has not run yet: veridic checks the request a resume will send before it "
    "runs the calls that wait.",
    source="veridic: the check of a resume's next request",
)
"""The stand-in result of each waiting call in :meth:`_Run.next_prompt`, which is never
sent: it says what it is to whoever logs the requests an adapter makes."""

OutputT = TypeVar("OutputT")
"""The pydantic model a run's last answer is validated as (checked when the run starts)."""

__all__ = [
    "Limits",
    "RunResult",
]


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """How a run ended: the model's last answer, and everything the run did.

    ``output`` is the answer validated as the run's ``output_type`` (``None``
    without one); ``outcomes`` every tool call of the run, in order; ``turns``
    the model calls it made. The composer the run was given holds the whole
    conversation, the last answer included.
    """

    reply: Reply
    output: OutputT | None
    outcomes: tuple[ToolOutcome, ...]
    turns: int
    usage: Usage | None = None
    """The tokens of every model call of the run, summed; ``None`` when an answer of the run
    (before a pause included) did not say how many it used, since a sum of the others would
    be less than the run used, given as if it were all. The audit store's
    ``model_replies(request_id)`` hold each answer's usage, for what the provider said."""
    paused: PausedRun | None = None
    """Set when a run with ``defer=True`` stopped for the user's approvals: keep it
    (:meth:`PausedRun.to_json`), show :attr:`pending`, and
    :meth:`ModelGateway.resume <veridic.ModelGateway.resume>` it with the answers. ``reply``
    is then the answer whose calls wait, ``output`` is ``None``."""

    @property
    def text(self) -> str:
        """The model's last answer, as it wrote it."""
        return self.reply.text

    @property
    def pending(self) -> tuple[PendingApproval, ...]:
        """The approvals the user must answer before the run can go on (``()``: none)."""
        return () if self.paused is None else self.paused.approvals


class _Run(Generic[OutputT]):
    """The counting and the checks of one run, shared by the sync and async loops."""

    __slots__ = (
        "clock",
        "composer",
        "context",
        "earlier_calls",
        "invalid",
        "limits",
        "outcomes",
        "output_type",
        "ran_before_pause",
        "request_id",
        "retries",
        "road",
        "started",
        "turns",
        "unsaid",
        "usage",
    )

    def __init__(
        self,
        composer: Composer,
        limits: Limits,
        output_type: type[OutputT] | None,
        request_id: str,
        paused: PausedRun | None = None,
        waiting: int = 0,
        *,
        context: object = None,
        clock: Callable[[], float] = time.time,
        road: str,
    ) -> None:
        if not isinstance(composer, Composer):
            raise VeridicError(
                f"{road}() needs the Composer of the conversation, got "
                f"{type(composer).__name__}: pass Composer().system(...).user(...); the run "
                "appends every turn to it"
            )
        if not isinstance(limits, Limits):
            raise VeridicError(
                f"{road}(limits={limits!r}): pass Limits(turns=..., tool_calls=..., seconds=...)"
            )
        # The gateway's method the caller used ("run", "arun", "resume", "aresume"): what
        # the run's errors name, the loop after a resume included.
        self.road = road
        self.composer = composer
        self.limits = limits
        self.output_type = output_type
        self.request_id = request_id
        self.context = context
        # The gateway's clock: what dates a pause (PausedRun.paused_at), as it dates records.
        self.clock = clock
        self.outcomes: list[ToolOutcome] = []
        # A resumed run counts the seconds its earlier parts ran (not the pause) from here.
        spent = 0.0 if paused is None or paused.seconds is None else paused.seconds
        self.started = time.monotonic() - spent
        # A resumed run counts on from the paused one; its waiting calls were counted then.
        self.turns = 0 if paused is None else paused.turns
        self.retries = 0 if paused is None else paused.retries
        self.usage: Usage | None = None if paused is None else paused.usage
        # A paused run made at least one model call; usage None then says one of its answers
        # did not count its tokens, and no sum from here on is the run's.
        self.unsaid = paused is not None and paused.usage is None and paused.turns > 0
        self.earlier_calls = 0 if paused is None else paused.tool_calls - waiting
        # Of a resumed run, the calls of the paused answer that ran before the pause.
        self.ran_before_pause = 0
        # The output type the last answer did not validate as, while its retry waits ("").
        self.invalid = ""

    def restore(self, paused: PausedRun) -> None:
        """Put the paused conversation on the composer: every check of the resume passed,
        and its waiting calls are about to run."""
        self.composer.restore(paused.conversation)

    def next_prompt(self, paused: PausedRun, waiting: Sequence[ToolCall]) -> Prompt:
        """The prompt the first send of a resume of ``paused`` builds, but for what the
        waiting calls' results say: what every check of that send is made on before any of
        them runs.

        Built on a copy of the composer, which is left as it was given until every check
        passed: its system part, the paused conversation restored after it, and each
        waiting call answered in order, as :meth:`after_resumed` will. So the system message
        holds the fence preamble the restored blocks need, as the send's does (a system part
        that places one for other data modes is refused here, not after the calls ran), and
        no stand-in result says its call succeeded: none has run (``error=True``, as for a
        call that did not succeed). What a result will say cannot be known before its call
        runs; no check of the send turns on it.
        """
        scratch = _apart(self.composer).restore(paused.conversation)
        for call in waiting:
            scratch.tool_result(call.id, _NOT_RUN, error=True)
        return scratch.build()

    def before_turn(self) -> Prompt:
        limits = self.limits
        if self.turns >= limits.turns:
            self._stop("turns", limits.turns, self.turns, "model call")
        elapsed = time.monotonic() - self.started
        if limits.seconds is not None and elapsed >= limits.seconds:
            self._stop("seconds", limits.seconds, round(elapsed, 3), "second")
        self.turns += 1
        return self.composer.build()

    def counted(self, reply: Reply) -> None:
        """Add the reply's tokens; stop when they pass the limit (the answer is recorded).

        With a token limit, an answer without usage stops the run too: counting it
        as none would let a provider or proxy that leaves usage out lift the limit.
        Without one, the run's usage is ``None`` from then on (a sum that leaves an
        answer out is not the run's).
        """
        if reply.usage is None:
            self.unsaid = True
            self.usage = None
        elif not self.unsaid:
            self.usage = reply.usage if self.usage is None else self.usage + reply.usage
        limit = self.limits.tokens
        if limit is not None and reply.usage is None:
            reply.record(self.composer, ())  # its calls stay unanswered: none of them ran
            raise VeridicError(
                f"the answer to request {clip(self.request_id)} (turn {self.turns}, model "
                f"{clip(reply.model)}) did not say how many tokens it used, so "
                f"Limits(tokens={limit}) cannot hold; the answer is kept on the composer and "
                "none of its calls ran: use a provider (or proxy) that reports usage, or pass "
                "Limits(tokens=None) and bound the run by turns and seconds"
            )
        if limit is not None and self.usage is not None and self.usage.total_tokens > limit:
            reply.record(self.composer, ())
            final = (
                ""
                if reply.tool_calls
                else "the model's answer without tool calls, which is kept on the composer "
                "(its last turn) and was not checked against the run's output_type"
            )
            self._stop("tokens", limit, self.usage.total_tokens, "token", final)

    def check_calls(self, reply: Reply, prompt: Prompt) -> None:
        """Refuse the reply's calls before any runs when the run could not go on after them.

        Over the ``tool_calls`` limit, the answer is recorded and its calls stay
        unanswered. A call the conversation cannot record (:meth:`Reply.record
        <veridic.Reply.record>`): one without a tool name, or with the id of a
        call of an earlier turn of ``prompt`` (the prompt the reply answers),
        would let the reply's other calls act and the run then fail, so a
        request sent again would run them again; none runs. Nor does any call
        of an answer whose stop reason does not say the model ended it (one the
        provider cut off, or a reason veridic does not know: its arguments may
        be cut short).

        The loops call it before :meth:`counted`, which keeps an answer past the
        token limit on the composer: an answer the conversation cannot record is
        refused whole there, not recorded half-way (its first calls kept, the
        rest dropped) with the composer's error in place of the run's.
        """
        self.invalid = ""  # an answer came (the retry asked for, if any): checked first
        _check_whole(reply, f"{self.road}()")
        earlier = _call_ids(prompt)
        problems = [
            f"a call without a tool name (call {clip(call.id)})"
            if not call.name
            else f"the call id {clip(call.id)}, which a call of an earlier turn has"
            for call in reply.tool_calls
            if not call.name or call.id in earlier
        ]
        if problems:
            raise VeridicError(
                f"the model's reply to request {clip(self.request_id)} has {problems[0]}, which "
                "the conversation cannot record, so none of its calls ran (the model call is "
                "recorded): send the request again; a provider that reuses call ids or sends a "
                "call without a name has a bug to report"
            )
        wanted = self.earlier_calls + len(self.outcomes) + len(reply.tool_calls)
        if wanted > self.limits.tool_calls:
            reply.record(self.composer, ())  # the calls stay unanswered: none of them ran
            self._stop("tool_calls", self.limits.tool_calls, wanted, "tool call")

    def after_calls(self, reply: Reply, outcomes: Sequence[ToolOutcome]) -> None:
        self.outcomes.extend(outcomes)
        reply.record(self.composer, outcomes)

    def broken(
        self,
        reply: Reply,
        done: Sequence[ToolOutcome],
        error: BaseException,
        *,
        resumed: bool = False,
    ) -> None:
        """Keep on the composer an answer whose calls stopped part-way, and say so on ``error``.

        The calls that ran (``done``) are answered; the others stay unanswered, so
        the gateway refuses to send the composer again as it is. Left out, the
        answer would vanish with the results of calls that ran: the composer sent
        again would have the model ask for them anew, and run a write twice.
        """
        if resumed:  # the answer's turn is in the restored conversation
            self.after_resumed(done)
        else:
            reply.record(self.composer, done)
        left = len(reply.tool_calls) - len(done)
        # A resumed answer's calls that ran before the pause have their results there too.
        ran = f"{counted(len(done), 'call')} of it that ran"
        if resumed:
            ran = (
                f"{counted(self.ran_before_pause + len(done), 'call')} of it that ran "
                f"({self.ran_before_pause} before the pause, {len(done)} in this resume)"
            )
        error.add_note(
            f"request {clip(self.request_id)}: the composer holds the model's answer with the "
            f"results of the {ran}; " + _left_over(left)
        )
        if isinstance(error, AuditWriteError) and isinstance(error.result, CallResult):
            unwritten = error.result.record.call_id
            error.add_note(
                f"call {clip(unwritten)} ({clip(error.result.record.tool)}) ran, and its "
                "record is not in "
                "the audit store: write it there first (sink.write(error.result.record)), "
                "since until then the store does not know that it ran"
                + (
                    ", and a copy of the paused run resumed again would run it a second time"
                    if resumed
                    else ""
                )
            )

    def spent(self, error: BaseException, resumed: Sequence[ToolOutcome], run: str) -> None:
        """Say on ``error``, raised after a resume ran its calls, what ran and how to go on.

        The paused run cannot be resumed again (its calls are on record, and a
        resume of it is refused so that none runs twice), so the way on is the
        composer, which holds the whole conversation with their results: a run of
        it continues the request where it failed. ``run`` names the method for that
        (``"run"`` after :meth:`resume <veridic.ModelGateway.resume>`, ``"arun"`` after
        ``aresume``).
        """
        ran = "; ".join(
            f"call {clip(outcome.call.id)} ({clip(outcome.call.name)}): "
            f"{outcome.result.outcome.value}"
            for outcome in resumed
        )
        error.add_note(
            f"request {clip(self.request_id)}: this resume ran the paused run's waiting calls "
            f"({ran or 'none ran'}) before it failed, so the paused run is spent: resumed "
            "again, it is refused, and none of them runs twice. The composer holds the "
            "conversation with their results (and with whatever the run did after them): "
            f"go on with gateway.{run}(composer, view, policy=..., "
            "request_id=paused.request_id, defer=True), here or in another process from "
            "composer.conversation() restored after the system part; the run had spent "
            f"{counted(self.turns, 'model call')} and "
            f"{counted(self.earlier_calls + len(self.outcomes), 'tool call')} of its limits, "
            "which a "
            "new run counts from 0"
        )

    def after_resumed(self, outcomes: Sequence[ToolOutcome]) -> None:
        """The results of resumed calls (their turn is in the restored conversation)."""
        self.outcomes.extend(outcomes)
        for outcome in outcomes:
            self.composer.tool_result(outcome.call.id, outcome.text, error=not outcome.result.ok)

    def pause_moment(self) -> datetime:
        """The time a pause of this run is dated with, read before any call of the answer
        that pauses runs.

        Read at the pause itself, a clock that names no time (one past the years a
        ``datetime`` holds) was refused after the calls before the waiting one had run:
        their effects happened, and the run was lost with the error.

        Raises:
            VeridicError: the gateway's clock names no time (nothing of the answer ran,
                and the answer is not on the composer).
        """
        return clock_moment(
            self.clock(),
            f"the pause of request {clip(self.request_id)}, read before any call of the "
            "model's answer (none of its calls ran, and the composer does not hold the answer)",
        )

    def pause(
        self,
        reply: Reply,
        waiting: Sequence[ToolCall],
        policy: ApprovalPolicy,
        paused_at: datetime,
        again: Mapping[str, str] | None = None,
    ) -> RunResult[OutputT]:
        """Stop with ``waiting`` calls unanswered, asking for the approvals they need.

        ``paused_at`` is :meth:`pause_moment`, read before the calls before them ran;
        ``again`` holds, by call id, why an earlier answer no longer holds.
        """
        # Built first without its approvals, whose digests cover what it holds beside them.
        unasked = PausedRun(
            request_id=self.request_id,
            conversation=self.composer.conversation(),
            approvals=(),
            prompt_sha256=reply.prompt_sha256,
            tools_sha256=reply.tools_sha256,
            response_id=reply.response_id,
            model=reply.model,
            turns=self.turns,
            tool_calls=self.earlier_calls + len(self.outcomes) + len(waiting),
            retries=self.retries,
            usage=self.usage,
            limits=self.limits,
            options_sha256=reply.options_sha256,
            seconds=time.monotonic() - self.started,
            paused_at=paused_at,
        )
        waiting_digest = waiting_sha256(self.request_id, waiting, paused_at, asked_with(unasked))
        approvals = []
        for call in waiting:
            request = needs_answer(reply.view, policy, call)
            if request is not None:
                # What the handler will get (defaults filled in), not only what the model wrote.
                arguments = shown_arguments(request.arguments)
                stale = (again or {}).get(call.id)
                if stale:
                    why = f"{request.why}; asked again: {stale}"
                    request = ApprovalRequest(
                        request.tool,
                        request.kind,
                        request.risk,
                        request.irreversible,
                        request.writes_instruction_fields,
                        None,
                        why,
                        request.arguments,
                    )
                grant = bound_grant(reply.view.tool(call.name), reply.view)
                approvals.append(
                    PendingApproval.of(call.id, request, arguments, waiting_digest, grant)
                )
        paused = replace(unasked, approvals=tuple(approvals))
        return RunResult(reply, None, tuple(self.outcomes), self.turns, self.usage, paused=paused)

    def answered(self, reply: Reply) -> RunResult[OutputT] | None:
        """The result, or ``None`` when a structured answer must be asked for again."""
        reply.record(self.composer)
        if self.output_type is None:
            return RunResult(reply, None, tuple(self.outcomes), self.turns, self.usage)
        try:
            output = self.output_type.model_validate_json(reply.text)  # type: ignore[attr-defined]  # a pydantic model, checked in run()
        except ValidationError as error:
            problems = _problems(error, cast(type[BaseModel], self.output_type))
            if self.retries >= self.limits.output_retries:
                raise VeridicError(
                    f"the model's answer is not a valid {self.output_type.__name__} after "
                    f"{self.retries} retr{'y' if self.retries == 1 else 'ies'} "
                    f"({problems}); the answer is kept on the composer: raise "
                    "Limits(output_retries=...) or say more about the format in the "
                    "instructions"
                ) from error
            self.retries += 1
            self.invalid = self.output_type.__name__
            self.composer.user(
                f"Your answer is not a valid {self.output_type.__name__} as JSON: "
                f"{problems}. Answer again with only the JSON object, and nothing else."
            )
            return None
        return RunResult(reply, cast(OutputT, output), tuple(self.outcomes), self.turns, self.usage)

    def _stop(
        self, limit: str, allowed: float, reached: float, what: str, final: str = ""
    ) -> NoReturn:
        """Raise the limit's error; ``final`` names the answer that passed it when that
        answer was the model's last (it has no tool calls), which the run then has.
        ``what`` is the unit counted, singular."""
        if final:
            when = f"with {final}"
        elif self.invalid:
            when = (
                f"after the model's answer without tool calls, which is not a valid "
                f"{self.invalid} (the answer and the request to answer again are on the "
                "composer; the request was not sent)"
            )
        else:
            when = "before the model answered without tool calls"
        made = self.earlier_calls + len(self.outcomes)
        unit = what if allowed == 1 else f"{what}s"
        raise RunLimitError(
            f"the run reached its limit of {allowed:g} {unit} ({reached:g}) {when}; "
            f"{_calls_so_far(made)}, and the composer holds the conversation: "
            f"raise Limits({limit}=...) if the task needs more, or look at what "
            "the model kept asking for",
            limit=limit,
            allowed=allowed,
            reached=reached,
        )


def _calls_so_far(made: int) -> str:
    """What a limit's error says of the calls before it: none is no "0 tool calls ran"."""
    if made == 0:
        return "no tool call was made"
    verb = "is" if made == 1 else "are"
    return f"the {counted(made, 'tool call')} made so far ran and {verb} recorded"


def _left_over(left: int) -> str:
    """What a note on an error raised part-way through an answer's calls says of the calls
    left: those unanswered keep the composer from being sent; with none left (the last call
    was interrupted after it started, or its record could not be written) it goes on, and
    a request started anew would run the calls again."""
    if not left:
        return (
            "every call of it is answered (the audit store's records(request_id) say what "
            "became of each), so a run of the composer goes on with the request; started "
            "anew, the request would run its calls again"
        )
    return (
        f"its {counted(left, 'other call')} "
        f"{'is' if left == 1 else 'are'} unanswered (the audit store's records(request_id) "
        "say what became of each), so the gateway will not send it as it is: answer "
        f"{'it' if left == 1 else 'them'} with Composer.tool_result(call_id, ...) or start "
        "the request anew"
    )


def _call_ids(prompt: Prompt) -> frozenset[str]:
    """The ids of the calls ``prompt``'s turns hold, and of the results that answer them."""
    ids = {call.id for message in prompt.messages for call in message.tool_calls}
    ids.update(m.tool_call_id for m in prompt.messages if m.tool_call_id)
    return frozenset(ids)


_MODEL_KEY: Final = "(a key of the answer)"


def _problems(error: ValidationError, output_type: type[BaseModel]) -> str:
    """Pydantic's errors as a short list of ``place: message``, quoting nothing the model wrote.

    The list goes back to the model in a user turn, the user's own voice, so
    text of the answer must not reach it: a key the schema does not name (an
    extra key, a key of a ``dict`` field) is written as ``(a key of the
    answer)``, and a message that quotes a value of the answer (a
    discriminator's tag, a validator's ``f"{value}"``) gives way to pydantic's
    error type. Otherwise an injected document could have the model answer
    with a key that the next turn then says in the user's name. A message
    quotes a value when it shares :data:`_QUOTED` characters in a row with it,
    case and spaces aside: validators quote a value trimmed, cut short or
    upper-cased, which a search for the whole value missed.
    """
    names = _schema_names(output_type)
    told: list[str] = []
    for item in error.errors(include_url=False)[:10]:
        place = ".".join(
            str(part) if isinstance(part, int) or part in names else _MODEL_KEY
            for part in item["loc"]
        )
        message = item["msg"]
        if _quotes(_answer_may_write(item), _texts(item.get("input"))):
            message = f"the value there is not valid ({item['type']})"
        told.append(f"{place or '(the answer)'}: {message}")
    return "; ".join(told)


_FROM_THE_SCHEMA: Final = frozenset(
    {
        "expected",
        "expected_tags",
        "discriminator",
        "pattern",
        "class_name",
        "max_length",
        "min_length",
        "gt",
        "ge",
        "lt",
        "le",
        "multiple_of",
        "max_digits",
        "decimal_places",
        "whole_digits",
    }
)
"""Context keys of pydantic's own errors whose values come from the output type, not
from the answer (a ``Literal``'s or an enum's values, a bound, a pattern)."""


def _answer_may_write(item: ErrorDetails) -> str:
    """The part of an error's message that text of the answer may have written.

    A message pydantic writes itself, from its own template and the error's
    context, holds the answer's text only in the context values the output type
    does not give: those are checked, while its template's words and the type's
    own values (``Input should be 'approved' or 'rejected'``, ``at most 40
    characters``) are not, so an answer in the wrong case or one that uses the
    template's words keeps the message that says how to answer. Any other message
    (a validator's, a custom error) is checked whole.
    """
    message = item["msg"]
    context = item.get("ctx") or {}
    try:
        kind = item["type"]
        own = PydanticKnownError(kind, context or None).message()  # type: ignore[arg-type]  # any str: pydantic refuses a type it does not know
        if own != message:
            return message
        return " ".join(str(v) for key, v in context.items() if key not in _FROM_THE_SCHEMA)
    except Exception:  # not one of pydantic's types (a PydanticCustomError's): its own words
        return message


_QUOTED: Final = 8
"""Characters in a row (case and spaces aside) that make an error message a quote of the
answer: fewer say no instruction, and pydantic's own messages rarely share as many with a
value."""


def _quotes(message: str, texts: Sequence[str]) -> bool:
    """Whether ``message`` quotes any of ``texts``, whole or in part (see :func:`_problems`)."""
    said = "".join(message.casefold().split())
    windows = {said[start : start + _QUOTED] for start in range(len(said) - _QUOTED + 1)}
    for text in texts:
        written = "".join(text.casefold().split())
        if written and (written in said or any(window in written for window in windows)):
            return True
    return False


def _schema_names(output_type: type[BaseModel]) -> frozenset[str]:
    """Every property name (and alias) the output type's JSON schema declares, nested ones too."""
    names: set[str] = set()
    try:
        schemas = [output_type.model_json_schema(), output_type.model_json_schema(by_alias=False)]
    except Exception:  # a type pydantic cannot describe: the top-level names are what is known
        return frozenset(
            name
            for key, info in output_type.model_fields.items()
            for name in (key, info.alias)
            if name
        )
    stack: list[object] = list(schemas)
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.update(key for key in properties if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(names)


def _apart(composer: Composer) -> Composer:
    """A composer that builds what ``composer`` builds, whose turns can be added to without
    changing ``composer``'s.

    ``composer`` holds only its system part (:func:`_resumed` checked it), so a copy of the
    containers :class:`~veridic.Composer` keeps its turns in is cheap, and their items
    cannot be changed. The attributes of an application's subclass are shared, not copied:
    ``copy.deepcopy`` raised ``TypeError`` out of ``resume()`` for a subclass holding a
    lock or a client, which cannot be copied, and ``build()`` reads them as at the send.
    """
    scratch = copy.copy(composer)
    for name in Composer.__slots__:
        setattr(scratch, name, copy.copy(getattr(composer, name)))
    return scratch


def _texts(value: object) -> list[str]:
    """The strings of two or more characters in a piece of the answer (keys included)."""
    found: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) >= 2:
                found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def _check_spent(paused: PausedRun, limits: Limits, road: str) -> None:
    """Refuse, before anything runs, a resume whose limits the paused run had passed already.

    A run does not run the calls of an answer that takes it past ``tool_calls``
    or ``tokens`` (nor answers more than ``turns`` model calls); the limits of a
    resume hold the same way for the calls that wait, which the paused run
    counted when it stopped. Nothing runs and nothing is restored, so the same
    paused run can be resumed with the limits it was started with (the default).

    Raises:
        RunLimitError: the paused run's turns, tool calls or tokens pass ``limits``.
        VeridicError: ``limits`` bounds tokens, and the paused run's answers did not say
            how many they used (as a run with that limit refuses such an answer).
    """
    if not isinstance(limits, Limits):
        raise VeridicError(
            f"{road}(limits={limits!r}): pass Limits(turns=..., tool_calls=..., seconds=...)"
        )
    tokens = None if paused.usage is None else paused.usage.total_tokens
    spent = [
        ("turns", limits.turns, paused.turns, "model call"),
        ("tool_calls", limits.tool_calls, paused.tool_calls, "tool call"),
    ]
    if limits.tokens is not None and tokens is not None:
        spent.append(("tokens", limits.tokens, tokens, "token"))
    for limit, allowed, reached, what in spent:
        if reached > allowed:
            raise RunLimitError(
                f"the paused run of request {clip(paused.request_id)} had spent "
                f"{counted(reached, what)} when it paused, more than the limit of {allowed} "
                "this resume was given; "
                "nothing of it ran (its waiting calls wait still, and no record was written): "
                "resume it with the limits it was started with (leave limits= out), or a "
                f"higher Limits({limit}=...)",
                limit=limit,
                allowed=allowed,
                reached=reached,
            )
    if limits.tokens is not None and tokens is None:
        raise VeridicError(
            f"the paused run of request {clip(paused.request_id)} holds no count of the tokens "
            f"its answers used (the provider did not say), so Limits(tokens={limits.tokens}) "
            "cannot hold; nothing of it ran: resume it with Limits(tokens=None) and bound "
            "the run by turns and seconds, or use a provider (or proxy) that reports usage"
        )


def _resumed(
    paused: PausedRun,
    composer: Composer,
    view: ToolView,
    given: Limits | None,
    output_type: type[OutputT] | None,
    answers: Mapping[str, bool],
    context: object,
    clock: Callable[[], float],
    road: str,
) -> tuple[_Run[OutputT], Reply, dict[str, bool]]:
    """The run state and the waiting calls of ``paused``, and the answers keyed by call id
    (:func:`~veridic.run.deferred.answered`), each checked.

    ``composer`` is left as it was: the caller restores the paused conversation into it
    (:meth:`_Run.restore`) once its own checks passed too, so that a refused resume can be
    tried again with the same composer. ``given`` is the resume's ``limits``; ``None``,
    those the paused run ran under. ``clock`` is the gateway's, which dates a pause of the
    resumed run; ``road`` the method the caller used (``"resume"``, ``"aresume"``), which
    the errors name.
    """
    if paused is None:
        raise VeridicError(
            f"{road}() got None for the paused run, which is what store.claim_paused("
            "request_id) gives once the run was claimed already (a double click, or another "
            "host, took it and resumed it) or was never saved: nothing is left to resume, and "
            "nothing ran; tell the user the answer was taken, and resume only a PausedRun "
            "that a claim handed out"
        )
    if not isinstance(paused, PausedRun) or not isinstance(composer, Composer):
        raise VeridicError(
            f"{road}() needs a PausedRun and a Composer, got {type(paused).__name__} and "
            f"{type(composer).__name__}: pass PausedRun.from_json(saved) and a Composer holding "
            "the system part built from code"
        )
    held = len(composer.conversation())
    if held:
        raise VeridicError(
            f"{road}() got a composer that already holds {counted(held, 'turn')} (the paused "
            f"run's own, perhaps): the paused run brings its conversation, which {road}() puts "
            "after "
            "the system part; pass a composer holding only that part, built from code for "
            "this request as for the first (Composer().system(...)); nothing ran"
        )
    bound = answered(paused, answers, road)
    asked = {approval.call_id for approval in paused.approvals}
    for digest in (paused.prompt_sha256, paused.tools_sha256):
        if not _SHA256.fullmatch(digest):
            raise VeridicError(
                f"the paused run holds {clip(digest)} as a hash, not a sha256: it was not "
                "written by PausedRun.to_json(); resume only what a run returned"
            )
    limits = given if given is not None else paused.limits or Limits()
    _check_spent(paused, limits, road)
    # Checked on a copy: a resume refused here or by the gateway's checks after this leaves
    # the caller's composer as it was given, to resume with again (_Run.restore).
    scratch = Composer(data_mode=composer.data_mode).restore(paused.conversation)
    restored = scratch.build()
    waiting = restored.pending_tool_calls
    missing = asked - {call.id for call in waiting}
    if not waiting or missing:
        raise VeridicError(
            f"the paused run of request {clip(paused.request_id)} does not end with the calls its "
            f"approvals name (no waiting call for {sorted(missing) or 'any approval'}): it was "
            "changed after PausedRun.to_json(); resume only what a run returned"
        )
    check_waiting(paused, waiting, answers)
    if paused.tool_calls < len(waiting):
        raise VeridicError(
            f"the paused run of request {clip(paused.request_id)} counts {paused.tool_calls} tool "
            f"calls, fewer than the {len(waiting)} that wait (a run counts them when it "
            "pauses): it was changed after PausedRun.to_json(), and would resume with its "
            "tool_calls limit lifted; nothing ran: resume only what a run returned"
        )
    reply = _ResumedReply(
        text="",
        tool_calls=waiting,
        stop_reason="paused",
        response_id=paused.response_id,
        model=paused.model,
        request_id=paused.request_id,
        prompt_sha256=paused.prompt_sha256,
        tools_sha256=paused.tools_sha256,
        view=view,
        options_sha256=paused.options_sha256,
    )
    state = _Run(
        composer,
        limits,
        output_type,
        paused.request_id,
        paused,
        len(waiting),
        context=context,
        clock=clock,
        road=road,
    )
    # The waiting calls are the unanswered ones of the paused answer (the last turn with
    # calls); its others ran before the pause, and are answered in the conversation.
    asked_in = next(m.tool_calls for m in reversed(restored.messages) if m.tool_calls)
    state.ran_before_pause = len(asked_in) - len(waiting)
    return state, reply, bound
