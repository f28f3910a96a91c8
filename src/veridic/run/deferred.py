"""Deferred approvals: a run that stops to ask the user, and goes on in another process.

A web application cannot hold a request open while a person decides whether
the agent may refund an order. With ``defer=True``,
:meth:`ModelGateway.run <veridic.ModelGateway.run>` does not call a
``confirm`` callback: when the model asks for calls that need the user's
approval, the run stops there and returns a :class:`PausedRun` (in
:attr:`RunResult.paused <veridic.RunResult.paused>`): the conversation so
far, the calls still waiting, and one :class:`PendingApproval` per call the
user must answer (the tool, its arguments as the handler will get them, its
risk, and why it needs approval). It is plain data: :meth:`PausedRun.to_json` it into a session, a
database row or a queue; show the approvals; and when the answers come,
maybe hours later on another host, :meth:`ModelGateway.resume
<veridic.ModelGateway.resume>` it with them.

What resuming checks, because the world may have changed meanwhile:

- an answer holds for a while only: a paused run records when it paused
  (:attr:`PausedRun.paused_at <veridic.PausedRun>`, UTC, by the gateway's
  ``clock``), and a resume more than the policy's
  :attr:`~veridic.ApprovalPolicy.approvals_expire_after`
  (24 hours unless the application sets another) after it, or one of a paused
  run dated later than the gateway's clock says it is now, runs none of its
  calls: they are recorded denied, the reason saying the approval expired, and
  answered so on the composer, and :class:`~veridic.ApprovalExpiredError` says
  how old the answers were and how to ask anew (``gateway.run`` of that
  composer has the model ask again, in a paused run dated then). The refund
  asked about three weeks ago is not made today on the strength of a "yes" to
  the order, the price and the mind of then. A paused run that does not say
  when it paused (format 5 or earlier) is refused with nothing recorded: a
  caller who knows when it paused (when its store saved it) dates it,
  ``dataclasses.replace(paused, paused_at=...)``, and resumes that, in that
  process: the digests of approvals asked without a time cover none, so such a
  run is never kept dated (``to_json`` refuses it, and ``from_json`` a document
  that dates them), and ``claim_paused`` hands it out undated, its row's save
  time being another clock's, later than the pause, and written by whoever writes
  the table. The time is covered by every approval's digest made with one, so a
  paused run re-dated where it was kept matches no answer the dialog got;
- the calls run against the view of the new request: a tool that became
  unavailable or denied is refused (and recorded) as it would be in any run;
- an answer holds only for what the user saw: a tool that became riskier
  (higher risk, a query turned write, newly irreversible or writing text
  read as instruction), or arguments that are not the ones shown, make the
  approval stale, and the run pauses again asking for it anew;
- what the user saw is the stored approval, unless the answer is keyed by the
  approval's :attr:`~PendingApproval.digest` (the one the dialog showed): then
  a paused run changed in storage between the dialog and the answer (other
  arguments, another tool) matches no answer and the resume is refused, and so
  is one whose other waiting calls changed (a call added beside the approved
  one, which the rules would let run unasked, or another's arguments): the
  digest covers them too (``PendingApproval.waiting_sha256``, which covers the
  rest of the paused run as well but for its measured ``seconds``: the turns
  the model goes on from, the hashes of the model call that asked (a copy
  whose prompt hash was edited would not be known as resumed before, and its
  records would name a prompt never sent), what the run had spent and the
  limits it ran under), and the tool's
  grant (``PendingApproval.grant``), so a grant stripped in storage matches no
  answer either. Key
  answers by ``call_id`` only when nobody else can write where the paused run
  is kept; a client-side session, a shared queue or a table other services
  write need the digest;
- a paused run is resumed once: every call's audit record keeps the model's
  call id (:attr:`AuditRecord.call_id <veridic.AuditRecord.call_id>`), and a
  resume asks the gateway's audit store for the request's records first; when
  one of the waiting calls is on record (it ran, failed, or was denied or
  refused by an earlier resume), the resume is refused before anything runs.
  A copy kept in a session, a queue that delivers twice or a double click on
  "approve" cannot run a write twice, nor turn a "no" into a "yes". The check
  needs the store the run wrote to: a store that holds no trace of the run (not
  the model call that paused, where the gateway keeps its model calls in the
  audit store; not the calls the run made before its waiting ones) could not
  tell, and the resume is refused. Two resumes
  *at the same moment* can both find nothing on record: only the atomic claim
  closes that race, so keep paused runs in the audit store (``save_paused``)
  and resume what ``claim_paused`` hands out, once. The check knows a copy,
  not a forgery: whoever can edit the paused run where it is kept (an
  unsigned client-side session) can give it another request id, and answers
  it too; keep it where only the application writes;
- the rules decide first: a ``deny`` rule set meanwhile denies a call the
  user approved; a "no" from the user denies a call that a rule set
  meanwhile would let run;
- nothing of the stored document is trusted: the conversation comes back
  untrusted (:mod:`veridic.text.conversation`), and the system part is the
  one the application builds from code for the new request.

Calls are run in the model's order: the first call that needs an answer and
every call after it wait together, so a later call never runs before an
earlier one it may depend on, and the user answers all of one reply's
approvals at once. Answers for the first approvals only run those calls, and
the run pauses again at the first left unanswered; an answer for a call after
one left unanswered could not be used, and the resume is refused before
anything runs rather than drop it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Final, cast

from pydantic_core import to_jsonable_python

from veridic import __version__, _json_object
from veridic._counted import counted
from veridic._sample import clip
from veridic.errors import ApprovalExpiredError, InvalidArgumentsError, VeridicError
from veridic.providers._base import PARTS, Usage, _parts_past_totals
from veridic.run.approval import (
    ApprovalPolicy,
    ApprovalRequest,
    Confirm,
    _changed,
    _grant,
    _part_digest,
)
from veridic.run.limits import Limits
from veridic.run.records import AuditRecord, ModelCallRecord, _storable
from veridic.text.conversation import Conversation
from veridic.text.prompt import ToolCall
from veridic.tools.risk import ApprovalMode, Risk, ToolKind
from veridic.tools.tool import Tool
from veridic.tools.view import ToolView

__all__ = ["PausedRun", "PendingApproval"]

FORMAT: Final = "veridic-paused-run/7"
_FORMAT_6: Final = "veridic-paused-run/6"
"""The format before each approval's digest of the calls that wait covered the hashes of the
paused model call (``veridic-waiting/3``): read as it is, keys and digests alike, so its
approvals bind the calls, the request and the time, as they did."""
_FORMAT_5: Final = "veridic-paused-run/5"
"""The format before the paused run kept the time it paused: read, with ``paused_at``
``None`` (which a resume refuses until the caller dates it: ``PausedRun.paused_at``)."""
_FORMAT_4: Final = "veridic-paused-run/4"
"""The format before the paused run kept the digest of the request's options, which parts
of its usage were stated, the seconds the run had run and the release that wrote it: read,
with ``options_sha256`` ``""`` and ``seconds`` ``None`` (not kept), and its usage as it
was written (two counts, or five read as every part stated)."""
_FORMAT_3: Final = "veridic-paused-run/3"
"""The format before each approval kept the grant of the tool it asks about: read, with
every ``grant`` empty (an answer then holds for the tool of that name, as it did)."""
_FORMAT_2: Final = "veridic-paused-run/2"
"""The format before the paused run kept its limits: read, with ``limits`` ``None``."""
_EARLIER: Final = frozenset({"veridic-paused-run/1"})
"""Formats of earlier veridic versions: their approvals lack what today's digests cover."""
_NUMBERED: Final = re.compile(r"veridic-paused-run/([1-9][0-9]{0,8})")
_RELEASE: Final = f"veridic {__version__}"
"""What a paused run of format 5 or later says wrote it (``release``). A reader that meets
a format later than its own refuses it naming that release, so the operator knows which
release the host that resumes needs (from this release on: one that reads format 4 at
most refuses format 5 by its format alone, not knowing to look for ``release``)."""
_DIGEST: Final = re.compile("[0-9a-f]{64}")
_KINDS: Final = ("query", "write")


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """One call waiting for the user's answer: what to show them, and what the answer binds.

    ``arguments`` are the arguments the handler will get, as a JSON object
    (``shown_arguments()``): validated, with the defaults the model left out
    filled in, so the user approves what runs (a call that omits
    ``recursive`` runs with its default, and the dialog says which);
    ``why`` says which rule asks for the approval, for the dialog;
    ``waiting_sha256`` is ``waiting_sha256()`` of the calls that wait with
    this one (this one included), so the answer binds the run it belongs to;
    ``grant`` binds the answer to the tool too: digests of its description,
    schema, kind, risk, what it writes and its registry, as an "always" rule's
    grant has them, so two features' ``revert`` tools of the same shape are not
    one tool, and a yes to one never runs the other (``""`` in an approval read
    from a paused run of an earlier format, whose answer holds for the tool of
    that name, as it did then). Unlike an "always" rule's grant, it names no
    Python module, neither the handler's nor those of the models it writes: a
    paused run goes on in another process, which may run the application's
    module as a script (``__main__``), and two tools alike in every part the
    user and the model can see were one tool to the user who answered.
    """

    call_id: str
    tool: str
    arguments: Mapping[str, object]
    kind: ToolKind
    risk: Risk
    irreversible: bool
    writes_instruction_fields: bool
    why: str
    waiting_sha256: str
    grant: str = ""

    @classmethod
    def of(
        cls,
        call_id: str,
        request: ApprovalRequest,
        arguments: Mapping[str, object],
        waiting_sha256: str,
        grant: str = "",
    ) -> PendingApproval:
        """The approval the user is asked for ``request``, the policy's view of call ``call_id``,
        among the waiting calls whose ``waiting_sha256()`` is ``waiting_sha256``, for the tool
        whose grant is ``grant``."""
        return cls(
            call_id,
            request.tool,
            MappingProxyType(dict(arguments)),
            request.kind,
            request.risk,
            request.irreversible,
            request.writes_instruction_fields,
            request.why,
            waiting_sha256,
            grant,
        )

    def __hash__(self) -> int:
        # Unhashable as it always was (its arguments are a mapping), but saying why and
        # what to key instead: ``{approval: True for approval in result.pending}`` is the
        # natural first try, and Python's own message named ``mappingproxy``.
        raise TypeError(
            f"the PendingApproval of call {clip(repr(self.call_id))} (tool {self.tool!r}) is not "
            "a key: "
            "key the user's answer by the approval's digest, "
            "answers={approval.digest: True for approval in result.pending}"
        )

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of what the user is shown: the call, tool, arguments, risk and why,
        of the calls that wait with it (``waiting_sha256``), and of the tool's ``grant``
        when it has one (an approval of format 4 or later): a grant emptied in storage, or
        a paused run rewritten in the format before grants, changes it too.

        Key the user's answer by it (``answers={approval.digest: True}``) to bind the
        answer to this content: a paused run changed in storage after the dialog showed
        it has other digests, and :meth:`ModelGateway.resume
        <veridic.ModelGateway.resume>` refuses the answer instead of running what the
        user never saw, or a call added beside it that the rules would let run unasked.
        """
        # The grant binds the answer to the tool; without it the answer would hold for any
        # tool of the name, so an approval that has one is digested with it (/3).
        shown: list[object] = [
            "veridic-approval/3" if self.grant else "veridic-approval/2",
            self.call_id,
            self.tool,
            dict(self.arguments),
            self.kind,
            self.risk.value,
            self.irreversible,
            self.writes_instruction_fields,
            self.why,
            self.waiting_sha256,
        ]
        if self.grant:
            shown.append(self.grant)
        return _sha256_of(shown)

    def stale(
        self, request: ApprovalRequest, arguments: Mapping[str, object], grant: str = ""
    ) -> str:
        """Why an answer to this approval does not hold for ``request`` now (``""``: it holds).

        ``arguments`` are the call's as the handler would get them now, in the form
        ``shown_arguments()`` gives: a default changed since the user was asked
        makes the answer stale, as do other arguments. ``grant`` is that of the
        tool that holds the name now: another tool (another registry's, or one
        whose description or schema changed) makes it stale too.
        """
        if request.tool != self.tool:
            return f"the call now names {request.tool!r}, not {self.tool!r}"
        if dict(arguments) != dict(self.arguments):
            return "its arguments are not the ones the user was shown"
        changes = []
        if request.risk > self.risk:
            changes.append(f"{self.risk.value} risk became {request.risk.value}")
        if request.kind == "write" and self.kind == "query":
            changes.append("a query became a write")
        if request.irreversible and not self.irreversible:
            changes.append("it became irreversible")
        if request.writes_instruction_fields and not self.writes_instruction_fields:
            changes.append("it now writes text read as instruction")
        if changes:
            return f"{self.tool!r} changed since the user was asked ({'; '.join(changes)})"
        changed = _changed(self.grant, grant) if self.grant and grant else ""
        if changed:
            return (
                f"the tool named {self.tool!r} now is not the one the user was asked about "
                f"({changed})"
            )
        return ""

    def to_json_object(self) -> dict[str, object]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "kind": self.kind,
            "risk": self.risk.value,
            "irreversible": self.irreversible,
            "writes_instruction_fields": self.writes_instruction_fields,
            "why": self.why,
            "waiting_sha256": self.waiting_sha256,
            "grant": self.grant,
        }


@dataclass(frozen=True, slots=True)
class PausedRun:
    """A run stopped for the user's approvals, as data that survives the process.

    ``conversation`` holds the turns up to the model's answer whose calls
    wait (their results absent); ``approvals`` the calls the user must
    answer, in order; ``prompt_sha256`` and ``tools_sha256`` are those of
    the model call that asked for them (the resumed calls' audit records
    carry them), and ``options_sha256`` is the digest of that call's options
    (:attr:`Reply.options_sha256 <veridic.Reply.options_sha256>`: the resumed run's
    reply carries it, and so does the paused run of a resume that pauses again;
    ``""`` in a paused run of format 4 or earlier, which did not keep it);
    ``turns``, ``tool_calls``, ``usage`` and ``seconds`` are what the run had
    spent, so :class:`~veridic.Limits` count on across the pause. ``usage`` is the
    sum of the run's answers as the run summed it, the parts it states included
    (``None`` when an answer did not say its tokens: the resumed run's
    :attr:`RunResult.usage <veridic.RunResult.usage>` is ``None`` too), so a
    resumed run states the parts a run that did not pause would have. ``seconds``
    is the wall time the run ran before it paused, from its start (a resumed run's
    earlier parts included) to the pause: the ``seconds`` limit of the resume counts
    on from it, and the time the run waited for the user's answer is not counted (a
    pause is not work; a ``confirm`` callback's wait, inside a run, is). ``None`` in
    a paused run of format 4 or earlier, which did not keep it: the ``seconds`` limit
    then counts from the resume, as it did. The limit is checked before each model
    call, as in a run that did not pause: approved calls of a run past its seconds
    still run on resume, and the run stops before its next model call.
    ``limits`` are the ones it ran under, which a resume holds unless it is given
    others (``None`` in a paused run of format ``veridic-paused-run/2``, which did
    not keep them: a resume then holds ``Limits()``).
    ``paused_at`` is when the run paused, a UTC time by the gateway's ``clock``: a
    resume refuses answers that came later than the policy's
    :attr:`~veridic.ApprovalPolicy.approvals_expire_after` after it (see the module's
    docs). ``None`` in a paused run of format 5 or earlier, which did not keep it, and
    which a resume refuses until it is dated (``dataclasses.replace(paused,
    paused_at=...)``): how long its answers waited cannot be told otherwise.
    """

    request_id: str
    conversation: Conversation
    approvals: tuple[PendingApproval, ...]
    prompt_sha256: str
    tools_sha256: str
    response_id: str = ""
    model: str = ""
    turns: int = 0
    tool_calls: int = 0
    retries: int = 0
    usage: Usage | None = field(default=None)
    limits: Limits | None = None
    options_sha256: str = ""
    seconds: float | None = None
    paused_at: datetime | None = None

    def __post_init__(self) -> None:
        """Refuse two approvals of one call: an answer by digest would approve the other.

        A run pauses with one approval per waiting call, and the model's call
        ids are unique (a reply that repeats one is refused before anything
        runs). Two approvals naming one call can only come from a paused run
        changed where it was kept: the resume matches a call's answer to its
        approval by call id, so a yes to the approval the dialog showed (its
        digest) would be checked against the other one, written for other
        arguments, and run what the user never saw.
        """
        seen: set[str] = set()
        for approval in self.approvals:
            if approval.call_id in seen:
                raise VeridicError(
                    f"the paused run of request {clip(str(self.request_id))} holds two "
                    f"approvals for call {clip(str(approval.call_id))}: a run pauses with one "
                    "approval per waiting call, so it was changed after PausedRun.to_json(); "
                    "nothing was run: resume only what a run returned, and ask the user anew"
                )
            seen.add(approval.call_id)
        # And what no run pauses with, which from_json() would refuse once it was kept.
        self._check_kept()

    def _check_kept(self) -> None:
        """Refuse ``seconds`` and ``options_sha256`` that :meth:`from_json` would refuse.

        A paused run is kept as text until the user answers: built with them (by hand, or
        with ``dataclasses.replace``), it was saved and claimed, and only then refused, so
        it could never be resumed; resumed without being kept, ``seconds`` of NaN lifted
        the ``seconds`` limit, a negative one lengthened it, and the reply carried a digest
        no options have.
        """
        if self.seconds is not None and not _seconds_well(self.seconds):
            raise VeridicError(
                f"PausedRun(seconds={clip(repr(self.seconds))}) of request "
                f"{clip(str(self.request_id))}: seconds are the wall time the run ran before "
                "it paused, a finite number 0 or more; pass what the run paused with, or "
                "None when it is not known (the seconds limit then counts from the resume)"
            )
        if not _options_digest_well(self.options_sha256):
            raise VeridicError(
                f"PausedRun(options_sha256={clip(repr(self.options_sha256))}) of request "
                f"{clip(str(self.request_id))}: it is the digest of the paused call's options, "
                '64 lowercase hex digits (Reply.options_sha256), or "" when not known; pass '
                "what the run paused with"
            )
        if self.paused_at is not None and not _moment_well(self.paused_at):
            raise VeridicError(
                f"PausedRun(paused_at={clip(repr(self.paused_at))}) of request "
                f"{clip(str(self.request_id))}: it is when the run paused, a datetime that "
                "says its time zone (datetime.fromtimestamp(seconds, UTC)); a naive one could "
                "be any zone's, and would make the answers older or younger than they are: "
                "pass what the run paused with, or None when it is not known"
            )

    def to_json(self) -> str:
        """The paused run as JSON text, to keep until the user answers.

        Text UTF-8 can encode, whatever the model wrote (see :meth:`Conversation.to_json
        <veridic.Conversation.to_json>`): a run is never paused in a form no store keeps.

        Raises:
            VeridicError: the paused run is dated, and its approvals were asked without a
                time (a paused run of format 5 or earlier, dated since by the caller):
                :meth:`from_json` would refuse the document (it says why).
        """
        _check_dated_as_asked(self, "PausedRun.to_json()")
        document = {
            "format": FORMAT,
            "request_id": self.request_id,
            "approvals": [approval.to_json_object() for approval in self.approvals],
            "prompt_sha256": self.prompt_sha256,
            "tools_sha256": self.tools_sha256,
            "response_id": self.response_id,
            "model": self.model,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "retries": self.retries,
            "usage": None if self.usage is None else _usage_object(self.usage),
            "limits": None if self.limits is None else _limits_object(self.limits),
            "options_sha256": self.options_sha256,
            "seconds": self.seconds,
            "paused_at": None if self.paused_at is None else _utc_text(self.paused_at),
            "release": _RELEASE,
            "conversation": json.loads(self.conversation.to_json()),
        }
        return _json_object.dumps(document)

    @classmethod
    def from_json(cls, text: str | bytes) -> PausedRun:
        """Read what :meth:`to_json` wrote.

        Raises:
            VeridicError: the text is not such a document (the message says
                which key is wrong); its conversation is checked as
                :meth:`Conversation.from_json` checks one.
        """
        try:
            document: object = _json_object.loads(text)  # a key given twice is refused
        except ValueError as error:
            raise VeridicError(
                f"PausedRun.from_json() got {clip(str(text))}, which is not JSON or gives a key "
                f"twice ({error}): "
                "pass the text PausedRun.to_json() wrote, unchanged"
            ) from error
        read = _Reader(document)
        paused = cls(
            request_id=read.text("request_id"),
            conversation=Conversation.from_json(json.dumps(read.value("conversation", dict))),
            approvals=tuple(
                _approval(index, item, granted=read.granted)
                for index, item in enumerate(cast(list[object], read.value("approvals", list)))
            ),
            prompt_sha256=read.text("prompt_sha256"),
            tools_sha256=read.text("tools_sha256"),
            response_id=read.text("response_id", empty=True),
            model=read.text("model", empty=True),
            turns=read.count("turns"),
            tool_calls=read.count("tool_calls"),
            retries=read.count("retries"),
            usage=read.usage(),
            limits=read.limits(),
            options_sha256=read.options_sha256(),
            seconds=read.seconds(),
            paused_at=read.paused_at(),
        )
        _check_dated_as_asked(paused, "PausedRun.from_json()")
        return paused


def _check_dated_as_asked(paused: PausedRun, where: str) -> None:
    """Refuse a dated paused run, as a document, whose approvals were asked without a time.

    Their digests (the answers the dialog got) cover no time: asked by a veridic that kept
    none (format 5 or earlier), they were dated since by the caller. A document cannot bind
    that time to them, so whoever writes where it is kept could rewrite an old run's time
    as now, and answers given weeks ago would pass for fresh ones. The dating of such a run
    is the caller's, in the process that resumes it (``dataclasses.replace``), and is never
    kept; a run veridic paused dates its approvals' digests with its time.

    Raises:
        VeridicError: naming ``where``, the first such approval and what to do instead.
    """
    if paused.paused_at is None:
        return
    undated = waiting_sha256(paused.request_id, _waiting_calls(paused.conversation))
    asked = [a.call_id for a in paused.approvals if a.waiting_sha256 == undated]
    if asked:
        raise VeridicError(
            f"{where}: the paused run of request {clip(str(paused.request_id))} is dated "
            f"(paused_at {_utc_text(paused.paused_at)}), but its approval of call "
            f"{clip(str(asked[0]))} was asked without a time (its digest covers none: an "
            "earlier veridic asked it, format 5 or before, and the run was dated since); a "
            "document cannot bind that time to the answers, so whoever writes where it is "
            "kept could date answers given long ago as given now; nothing was run: keep it "
            "undated (to_json() of dataclasses.replace(paused, paused_at=None); a document "
            'kept already is read with its "paused_at" set to null), date it with '
            "dataclasses.replace(paused, paused_at=...) in the process that resumes it, or "
            "ask the user anew"
        )


def _waiting_calls(conversation: Conversation) -> list[ToolCall]:
    """The calls of ``conversation`` without a result, in order: those a resume finds waiting
    (``Prompt.pending_tool_calls`` of the conversation restored), read from its turns."""
    answered = {turn.call_id for turn in conversation.turns if turn.kind == "tool_result"}
    return [
        ToolCall(turn.call_id, turn.label, turn.text)
        for turn in conversation.turns
        if turn.kind == "tool_call" and turn.call_id not in answered
    ]


_KEYS: Final = frozenset(
    {
        "format",
        "request_id",
        "approvals",
        "prompt_sha256",
        "tools_sha256",
        "response_id",
        "model",
        "turns",
        "tool_calls",
        "retries",
        "usage",
        "limits",
        "options_sha256",
        "seconds",
        "paused_at",
        "release",
        "conversation",
    }
)
_KEYS_5: Final = _KEYS - {"paused_at"}
"""The keys of format ``veridic-paused-run/5``: those of 6, but for the time it paused."""
_KEYS_4: Final = _KEYS_5 - {"options_sha256", "seconds", "release"}
"""The keys of formats ``veridic-paused-run/4`` and ``/3``: those of 5, but for what format 5
added."""
_KEYS_2: Final = _KEYS_4 - {"limits"}
"""The keys of format ``veridic-paused-run/2``: those of 4, but for the limits it ran under."""


def _limits_object(limits: Limits) -> dict[str, object]:
    return {name: getattr(limits, name) for name in _LIMIT_KINDS}


_LIMIT_KINDS: Final = {
    "turns": (int,),
    "tool_calls": (int,),
    "seconds": (int, float, type(None)),
    "tokens": (int, type(None)),
    "output_retries": (int,),
}


def _seconds_well(seconds: object) -> bool:
    """``seconds`` is what :attr:`PausedRun.seconds` may be (``None`` aside): a number of
    seconds, 0 or more, that a float holds.

    Compared, not converted: an int past the largest float (JSON reads ``1`` and 400 zeros
    as one) is refused as NaN and the infinities are, where ``math.isfinite`` raised.
    """
    return (
        not isinstance(seconds, bool)
        and isinstance(seconds, int | float)
        and 0 <= seconds <= sys.float_info.max
    )


def _moment_well(moment: object) -> bool:
    """``moment`` is what :attr:`PausedRun.paused_at` may be (``None`` aside): a datetime
    that says its offset from UTC."""
    return isinstance(moment, datetime) and moment.utcoffset() is not None


def clock_moment(seconds: float, where: str) -> datetime:
    """The gateway's clock reading ``seconds`` as the UTC time a pause is dated with, and a
    paused run's age is measured to.

    A reading that a record keeps (finite, not negative) may still be past the years a
    ``datetime`` holds (``1e12`` is the year 33658), and Python's own error named no clock.

    Raises:
        VeridicError: naming ``where``, the reading and what to pass instead.
    """
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (TypeError, ValueError, OverflowError, OSError) as error:
        raise VeridicError(
            f"{where}: the gateway's clock read {clip(repr(seconds))}, which names no time a "
            f"paused run can be dated with ({error}); pass ModelGateway(clock=...) a function "
            "that returns seconds since the epoch, as time.time does"
        ) from error


def _utc_text(moment: datetime) -> str:
    """``moment`` as a paused run keeps it, and as the digest of its waiting calls covers it:
    UTC, to the microsecond, with its offset."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _utc_moment(text: object) -> datetime | None:
    """The moment ``text`` names when it is spelled as :func:`_utc_text` writes; else ``None``."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if _moment_well(moment) and _utc_text(moment) == text else None


def _options_digest_well(digest: object) -> bool:
    """``digest`` is what :attr:`PausedRun.options_sha256` may be: a sha256, or ``""``."""
    return digest == "" or (isinstance(digest, str) and _DIGEST.fullmatch(digest) is not None)


def _later(found: object) -> bool:
    """``found`` names a format of paused runs later than :data:`FORMAT`."""
    matched = _NUMBERED.fullmatch(found) if isinstance(found, str) else None
    return matched is not None and int(matched[1]) > int(FORMAT.rpartition("/")[2])


def _written_later(found: object, release: object) -> str:
    """Why a paused run of a later format is refused, naming the veridic that wrote it (its
    ``release``, which format 5 and later write; a document that does not say is said to
    be of a release that did not record it)."""
    wrote = (
        clip(release) if isinstance(release, str) and release.strip() else "it did not say which"
    )
    return (
        f"PausedRun.from_json() got a paused run of format {found!r}, written by a later "
        f"veridic ({wrote}); this process runs veridic {__version__}, which reads paused runs "
        f"up to {FORMAT!r} and never writes a later one; nothing was run: resume it where "
        "the release that paused it runs, or upgrade veridic here to that release"
    )


class _Reader:
    """Reads a paused run's keys, each checked, with errors that name the key."""

    def __init__(self, document: object) -> None:
        if isinstance(document, dict) and document.get("format") in _EARLIER:
            raise VeridicError(
                f"PausedRun.from_json() got a paused run of format {document['format']!r}, "
                "written by an earlier veridic: its approvals lack what a digest covers now "
                "(the calls that wait beside them, the request), so no answer could be "
                "matched to what the user was shown; nothing was run: ask the user anew "
                f"(send the request again), and keep the new paused run ({FORMAT!r})"
            )
        found = document.get("format") if isinstance(document, dict) else None
        if isinstance(document, dict) and _later(found):
            raise VeridicError(_written_later(found, document.get("release")))
        if not isinstance(document, dict) or found not in (
            FORMAT,
            _FORMAT_6,
            _FORMAT_5,
            _FORMAT_4,
            _FORMAT_3,
            _FORMAT_2,
        ):
            raise VeridicError(
                f"PausedRun.from_json() got a document of format {clip(str(found))}, not "
                f"{FORMAT!r}: pass the text PausedRun.to_json() wrote"
            )
        expected = {FORMAT: _KEYS, _FORMAT_6: _KEYS, _FORMAT_5: _KEYS_5, _FORMAT_2: _KEYS_2}.get(
            found, _KEYS_4
        )
        self.granted = found in (FORMAT, _FORMAT_6, _FORMAT_5, _FORMAT_4)
        """Whether each approval holds the grant of its tool (``grant``)."""
        self.format = cast(str, found)
        """The document's format."""
        keys = set(document)
        if keys != expected:
            raise VeridicError(
                f"PausedRun.from_json(): the document lacks {sorted(expected - keys)} and has "
                f"unknown keys {sorted(keys - expected)} for its format {found!r}: pass the "
                "text PausedRun.to_json() wrote"
            )
        self._document = cast(dict[str, object], document)

    def limits(self) -> Limits | None:
        """The limits the run ran under; ``None`` where the format did not keep them."""
        value = self._document.get("limits")
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) != set(_LIMIT_KINDS):
            raise VeridicError(
                f"PausedRun.from_json(): 'limits' is {clip(json.dumps(value))}, not an object "
                f"of {sorted(_LIMIT_KINDS)} as PausedRun.to_json() writes"
            )
        for name, kinds in _LIMIT_KINDS.items():
            given = value[name]
            if isinstance(given, bool) or not isinstance(given, kinds):
                raise VeridicError(
                    f"PausedRun.from_json(): 'limits.{name}' is a {type(given).__name__}, not "
                    "what PausedRun.to_json() writes there"
                )
        try:
            return Limits(**value)
        except VeridicError as error:
            raise VeridicError(f"PausedRun.from_json(): 'limits': {error}") from error

    def usage(self) -> Usage | None:
        """The run's usage: in format 5 every count and the parts stated; before it, the
        counts only (:func:`_usage_of_counts`)."""
        if self.format not in (FORMAT, _FORMAT_6, _FORMAT_5):
            counts = self.value("usage", list | None)
            return None if counts is None else _usage_of_counts(counts)
        value = self.value("usage", dict | None)
        return None if value is None else _usage_of_object(cast(dict[str, object], value))

    def options_sha256(self) -> str:
        """The digest of the paused call's options; ``""`` where the format did not keep it."""
        if self.format not in (FORMAT, _FORMAT_6, _FORMAT_5):
            return ""
        value = self.text("options_sha256", empty=True)
        if not _options_digest_well(value):
            raise VeridicError(
                f"PausedRun.from_json(): 'options_sha256' is {clip(value)}, not a sha256 "
                '(64 lowercase hex digits) or "": pass the text PausedRun.to_json() wrote'
            )
        return value

    def seconds(self) -> float | None:
        """The seconds the run ran before the pause; ``None`` where the format did not keep
        them (and where the paused run was built without them)."""
        if self.format not in (FORMAT, _FORMAT_6, _FORMAT_5):
            return None
        value = self._document["seconds"]
        if value is None:
            return None
        if not _seconds_well(value):
            raise VeridicError(
                f"PausedRun.from_json(): 'seconds' is {clip(json.dumps(value))}, not a number "
                "of seconds (0 or more) as PausedRun.to_json() writes: pass the text it wrote"
            )
        return float(cast(float, value))

    def paused_at(self) -> datetime | None:
        """When the run paused; ``None`` where the format did not keep it (and where the
        paused run was built without it).

        Only the text :meth:`PausedRun.to_json` writes is read: UTC, to the microsecond,
        with its offset (``+00:00``). Any other spelling of a time was not written by it,
        and a time without an offset could be any zone's.
        """
        if self.format not in (FORMAT, _FORMAT_6):
            return None
        value = self._document["paused_at"]
        if value is None:
            return None
        moment = _utc_moment(value)
        if moment is None:
            raise VeridicError(
                f"PausedRun.from_json(): 'paused_at' is {clip(json.dumps(value))}, not the time "
                "PausedRun.to_json() writes there (UTC, as 2025-06-15T15:06:40.000000+00:00): "
                "pass the text it wrote"
            )
        return moment

    def value(self, key: str, kind: object) -> object:
        value = self._document[key]
        if not isinstance(value, kind):  # type: ignore[arg-type]  # a type or a union of types
            raise VeridicError(
                f"PausedRun.from_json(): {key!r} is a {type(value).__name__}, not what "
                "PausedRun.to_json() writes there"
            )
        return value

    def text(self, key: str, *, empty: bool = False) -> str:
        value = self.value(key, str)
        if not empty and not cast(str, value).strip():
            raise VeridicError(f"PausedRun.from_json(): {key!r} is empty")
        return cast(str, value)

    def count(self, key: str) -> int:
        value = self.value(key, int)
        if isinstance(value, bool) or cast(int, value) < 0:
            raise VeridicError(f"PausedRun.from_json(): {key!r} is {value!r}, not a count")
        return cast(int, value)


_APPROVAL_KEYS: Final = {
    "call_id": str,
    "tool": str,
    "arguments": dict,
    "kind": str,
    "risk": str,
    "irreversible": bool,
    "writes_instruction_fields": bool,
    "why": str,
    "waiting_sha256": str,
}


def bound_grant(tool: Tool, view: ToolView) -> str:
    """The :attr:`PendingApproval.grant` of ``tool``: its "always" rule grant without the
    Python modules in it (where the handler is defined; what it writes by the models'
    qualified names), which differ between a script and the process that imports it."""
    written = "\n".join(
        [model.__qualname__ for model in tool.writes] + sorted(tool.instruction_writes)
    )
    writes = _part_digest(written)
    parts = []
    for part in _grant(tool, view).split(" "):
        if part.startswith("writes="):
            parts.append(f"writes={writes}")
        elif not part.startswith("defined="):
            parts.append(part)
    return " ".join(parts)


def _approval(index: int, item: object, *, granted: bool) -> PendingApproval:
    where = f"PausedRun.from_json(): approval {index}"
    keys = {**_APPROVAL_KEYS, "grant": str} if granted else _APPROVAL_KEYS
    if not isinstance(item, dict) or set(item) != set(keys):
        raise VeridicError(f"{where} is not an object with exactly the keys {sorted(keys)}")
    for key, expected in keys.items():
        if type(item[key]) is not expected:
            raise VeridicError(f"{where}: {key!r} is a {type(item[key]).__name__}")
    if item["kind"] not in _KINDS or item["risk"] not in {r.value for r in Risk}:
        raise VeridicError(
            f"{where}: kind {item['kind']!r} or risk {item['risk']!r} is not one veridic knows"
        )
    if not _DIGEST.fullmatch(item["waiting_sha256"]):
        raise VeridicError(
            f"{where}: 'waiting_sha256' is {clip(item['waiting_sha256'])}, not a sha256: pass "
            "the text PausedRun.to_json() wrote"
        )
    return PendingApproval(
        item["call_id"],
        item["tool"],
        MappingProxyType(dict(item["arguments"])),
        cast(ToolKind, item["kind"]),
        Risk(item["risk"]),
        item["irreversible"],
        item["writes_instruction_fields"],
        item["why"],
        item["waiting_sha256"],
        # A grant changed in storage names no tool veridic has: its answer is stale, and
        # the user is asked again (``_changed`` reads a grant it did not write so).
        item.get("grant", ""),
    )


_USAGE_COUNTS: Final = ("input_tokens", "output_tokens", *PARTS)
"""The counts of a usage, as format 5 names them."""


def _usage_object(usage: Usage) -> dict[str, object]:
    """``usage`` as format 5 keeps it: every count, and ``stated`` as it is (the parts
    stated, sorted, or ``None`` for a usage built without it).

    Format 4 kept the counts only, and read five of them as every part stated: the
    reasoning one answer stated came back with a cache read it did not, and the resumed
    run's sum stated that cache read from the answers after the pause, which a run that
    did not pause would not have. Kept as it is, ``stated`` ``None`` included, the sum
    goes on as it would have (the zero ``Usage()`` too, which adds nothing).
    """
    counts: dict[str, object] = {name: getattr(usage, name) for name in _USAGE_COUNTS}
    stated = None if usage.stated is None else sorted(usage.stated)
    return {**counts, "stated": stated}


def _usage_of_object(value: dict[str, object]) -> Usage:
    """Read what :func:`_usage_object` wrote.

    Raises:
        VeridicError: a key is missing or unknown, a count is not one (a whole number,
            0 or more), ``stated`` names what is not a part (or one twice), or a part is
            more than its total (the gateway never pauses such a run).

    A count is not bounded by 64 bits: each answer's is, but the run's sum of them need
    not be, and a run that paused with one is resumed (format 4 read it too).
    """
    keys = {*_USAGE_COUNTS, "stated"}
    counts = [value.get(name) for name in _USAGE_COUNTS]
    stated = value.get("stated")
    if (
        set(value) != keys
        or not all(type(n) is int and n >= 0 for n in counts)
        or not (stated is None or _part_names(stated))
    ):
        raise VeridicError(
            f"PausedRun.from_json(): 'usage' is {clip(json.dumps(value))}, not an object of "
            f"{', '.join(_USAGE_COUNTS)} (token counts) and stated (null or a list of the parts "
            "the provider stated) as PausedRun.to_json() writes: pass the text it wrote"
        )
    usage = Usage(
        *cast(list[int], counts[:2]),
        **dict(zip(PARTS, cast(list[int], counts[2:]), strict=True)),
        stated=None if stated is None else frozenset(cast(list[str], stated)),
    )
    if _parts_past_totals(usage):
        raise VeridicError(_PAST_TOTALS.format(clip(json.dumps(value))))
    return usage


def _part_names(stated: object) -> bool:
    """``stated`` is a list of the names of a usage's parts, each once."""
    return (
        isinstance(stated, list)
        and all(isinstance(name, str) and name in PARTS for name in stated)
        and len(set(stated)) == len(stated)
    )


_PAST_TOTALS: Final = (
    "PausedRun.from_json(): 'usage' is {}, whose parts are more than their totals (cache "
    "reads and writes above the tokens read, or reasoning above the tokens written): the "
    "gateway never pauses such a run, so the text was edited"
)


def _usage_of_counts(value: object) -> Usage:
    """A usage as formats 4 and earlier kept it: two counts, or five (the parts too, read
    as every part stated, since which of them were was not kept)."""
    counts = cast(list[object], value)
    if len(counts) not in (2, 5) or not all(type(n) is int and n >= 0 for n in counts):
        raise VeridicError(
            f"PausedRun.from_json(): 'usage' is {clip(repr(value))}, not two token counts "
            "(or two and their three parts: cache reads, cache writes, reasoning)"
        )
    numbers = cast(list[int], counts)
    if len(numbers) == 2:
        return Usage(*numbers)
    if numbers[2] + numbers[3] > numbers[0] or numbers[4] > numbers[1]:
        raise VeridicError(_PAST_TOTALS.format(clip(repr(value))))
    # Five counts say the parts were stated: every part 0 too (which a usage without
    # ``stated`` reads as not broken down). Which of them were is not kept: all are read so.
    return Usage(
        numbers[0],
        numbers[1],
        cache_read_input_tokens=numbers[2],
        cache_creation_input_tokens=numbers[3],
        reasoning_output_tokens=numbers[4],
        stated=None if any(numbers[2:]) else frozenset(PARTS),
    )


# --- deciding, for the gateway --------------------------------------------------------


def call_arguments(call: ToolCall) -> Mapping[str, object]:
    """The arguments the model wrote, as a JSON object (``{"_unparsed": text}`` if not one).

    ``NaN`` and ``Infinity``, which Python's ``json`` reads and the executor passes on,
    are not JSON: the composer refuses them in a call it records, so arguments holding
    one are kept as the model's text. Refused there, they failed a run after the call
    had run, and the answer was lost with its result (sent again, the call ran again).
    """
    try:
        decoded: object = _json_object.loads(call.arguments) if call.arguments.strip() else {}
        json.dumps(decoded, allow_nan=False)  # raises on NaN or Infinity
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        return decoded
    return {"_unparsed": call.arguments}


def waiting_sha256(
    request_id: str,
    calls: Sequence[ToolCall],
    paused_at: datetime | None = None,
    held: Sequence[object] = (),
) -> str:
    """SHA-256 (hex) of the calls that wait together, in order (each id, tool and
    arguments), of the request they wait in, and of when they paused (``paused_at``).

    Every approval of a paused run carries it, and so does its digest: a call added
    among the waiting ones, or one whose arguments changed, where the paused run was
    kept would otherwise run on resume beside the approved call (under a rule that
    asks nobody), recorded as the model's answer to the prompt that paused. The
    request id binds the answer to its run: a yes given in one request does not
    approve a paused run of another whose call has the same id, tool and arguments. The
    time binds it to the moment it was asked: a paused run re-dated where it was kept, to
    pass for one asked recently, has other digests, and the answer the dialog got when it
    was asked matches none. Without a time (``None``: a paused run of format 5 or earlier)
    the digest is of the calls and the request alone, as those formats made it.

    ``held`` is what the paused run holds beside them (:func:`asked_with`): the
    hashes of the model call that asked for the calls, which the records of the resumed
    calls carry and by which a resume knows a copy resumed before, and what the run had
    spent and the limits it ran under. Edited where the paused run was kept, a copy was
    resumed again (its records looked for under another prompt), its records named a
    prompt, tools or options never sent, and its limits were lifted. Left out (``()``: a
    paused run of format 6, or of 5 with no time either) the digest covers none of it, as
    those formats made it.
    """
    calls_shown = [[call.id, call.name, dict(call_arguments(call))] for call in calls]
    if paused_at is None:
        return _sha256_of(["veridic-waiting/2", request_id, calls_shown])
    if not held:
        return _sha256_of(["veridic-waiting/3", request_id, calls_shown, _utc_text(paused_at)])
    shown = ["veridic-waiting/4", request_id, calls_shown, _utc_text(paused_at), list(held)]
    return _sha256_of(shown)


def asked_with(paused: PausedRun) -> list[object]:
    """What ``paused`` holds beside its approvals, as their digests cover it
    (:func:`waiting_sha256`): its conversation (the turns the model reads when the run goes
    on), the model call that asked for the waiting calls (its hashes, response id and
    model), and what the run had spent and the limits it ran under, which count on across
    the pause.

    Each as :meth:`PausedRun.to_json` keeps it, so that a run read back digests alike:
    edited where it was kept, the model went on from a history nobody wrote, a copy's
    records were looked for under another prompt (and it was resumed again), and the
    limits a resume holds unless given others were lifted.
    Not ``seconds``: a measured time, which differs between two runs of the same answers,
    whose approvals would then differ too; edited, it lengthens the ``seconds`` limit
    alone (pass ``limits=`` to a resume where others write where runs are kept).
    """
    history = paused.conversation.to_json().encode("utf-8")  # escapes lone surrogates
    return [
        hashlib.sha256(history).hexdigest(),
        paused.prompt_sha256,
        paused.tools_sha256,
        paused.options_sha256,
        paused.response_id,
        paused.model,
        paused.turns,
        paused.tool_calls,
        paused.retries,
        None if paused.usage is None else _usage_object(paused.usage),
        None if paused.limits is None else _limits_object(paused.limits),
    ]


def _sha256_of(shown: object) -> str:
    """SHA-256 (hex) of ``shown`` as canonical JSON (sorted keys, no spaces, UTF-8 with lone
    surrogates kept): one spelling for both digests an answer is bound by."""
    canonical = json.dumps(shown, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def check_waiting(
    paused: PausedRun, waiting: Sequence[ToolCall], answers: Mapping[str, bool]
) -> None:
    """Refuse a paused run whose waiting calls are not those an answer by digest was made among.

    Only an answer keyed by an approval's digest binds what the user was shown; one
    keyed by ``call_id`` trusts the stored copy (its approval stale if the call's
    arguments changed), as documented. The digest covers when the run paused too, so a
    paused run re-dated where it was kept is refused here, and (format 7) what else the
    paused run holds but its seconds (:func:`asked_with`: its conversation, the model call
    that asked, what it had spent and its limits), so is one where any of it was edited.
    An approval of format 6 covers the time and not the rest, and is checked against
    what it covers, as is one made before paused runs kept their time (format 5 or
    earlier, dated since by the caller), which covers the calls alone. Such a run is
    dated only in the process that resumes it: a document that dates approvals asked
    without a time is refused when it is read (:meth:`PausedRun.from_json`), since
    whoever writes where it is kept could have dated it, so the undated digest passes
    here only for a run its caller dated.

    Raises:
        VeridicError: a waiting call was added, removed or changed since the run
            paused, or the time it paused was, or (format 7) what else the paused run
            holds but its seconds (:func:`asked_with`), and an approval made among them
            as they were is answered by its digest.
    """
    digests = {
        waiting_sha256(paused.request_id, waiting, paused.paused_at, asked_with(paused)),
        waiting_sha256(paused.request_id, waiting, paused.paused_at),
        waiting_sha256(paused.request_id, waiting),
    }
    changed = [
        a.call_id
        for a in paused.approvals
        if a.digest in answers and a.waiting_sha256 not in digests
    ]
    if changed:
        raise VeridicError(
            f"the paused run of request {clip(str(paused.request_id))} is not the one the "
            f"approval of call {clip(str(changed[0]))} was asked in: its waiting calls, or "
            "what it holds beside them, are not the ones that waited when it paused. The "
            "approval's digest covers the calls that wait, when the run paused and (from "
            f"format {FORMAT} on) its conversation, the model call that asked (its hashes, "
            "response id and model), what it had spent and the limits it ran under; one of "
            "them was changed where it was kept, so nothing was run: resume only what a run "
            "returned, and ask the user anew"
        )


def check_not_resumed(
    paused: PausedRun, waiting: Sequence[ToolCall], recorded: Sequence[AuditRecord]
) -> None:
    """Refuse a paused run of which a waiting call is on record: it was resumed already.

    ``recorded`` are the audit store's records of the paused run's request. A
    waiting call never ran before the pause (the run stops before it), so a
    record of one, under the prompt that asked for it (the model's call ids are
    unique in a conversation, and the prompt tells a later turn's call apart
    from an earlier one whose id a provider repeats), was written by an earlier
    resume of this paused run or a copy of it. Whatever became of the call
    then (it ran, failed, was blocked, or was denied or refused: a "no" is an
    answer too), resuming again would run it, or the calls after it, a second
    time. A resume that paused again returns a new paused run whose waiting
    calls are those not on record: that one resumes.

    Raises:
        VeridicError: a waiting call of ``paused`` is on record.
    """
    ids = {_storable(call.id) for call in waiting} - {""}
    done = [
        record
        for record in recorded
        if record.call_id in ids and record.prompt_sha256 == paused.prompt_sha256
    ]
    if done:
        first = done[0]
        raise VeridicError(
            f"the paused run of request {clip(str(paused.request_id))} was resumed already: "
            f"the audit store holds the record of its waiting call {clip(first.call_id)} "
            f"(tool {clip(first.tool)}, outcome {first.outcome.value}), and resuming it again "
            "would run its calls a second time; nothing was run. An earlier resume took it "
            "(of this paused run or a copy: a second click, a queue that delivered twice, a "
            "retry after a resume that failed part-way), and the store's records of the "
            "request (records(request_id)) say which calls ran: tell the user what was done "
            "before asking anew, since a request sent again may do it again. Resume a paused "
            "run once: keep it in the audit store (save_paused) and resume what claim_paused "
            "hands out"
        )


def expiry(paused: PausedRun, policy: ApprovalPolicy, now: datetime) -> ApprovalExpiredError | None:
    """The error that refuses ``paused`` resumed at ``now``, when its answers cannot hold.

    They hold when the run paused at most ``policy.approvals_expire_after`` before
    ``now``, and not after it: a paused run dated in the future was re-dated where it
    was kept, or paused on a host whose clock is ahead, and how long its approvals
    waited cannot be told. Nor can it for a paused run that does not say when it
    paused (format 5 or earlier): the error then has no ``age``, and the gateway
    records nothing, so that a caller who knows when it paused can date it and resume.
    ``None``: the answers came in time.
    """
    bound = policy.approvals_expire_after
    where = f"the paused run of request {clip(str(paused.request_id))}"
    if paused.paused_at is None:
        return ApprovalExpiredError(
            f"{where} does not say when it paused (an earlier veridic wrote it, in format "
            f"{_FORMAT_5!r} or before, or it was built without paused_at), so whether its "
            f"answers came within the {bound} they hold cannot be told; nothing ran and "
            "nothing was recorded. If you know when it paused (when your store saved it), "
            "date it, dataclasses.replace(paused, paused_at=that time), and resume that; "
            "otherwise ask the user anew (send the user's request again)",
            request_id=paused.request_id,
            bound=bound,
        )
    age = now - paused.paused_at
    if timedelta(0) <= age <= bound:
        return None
    if age < timedelta(0):
        why = (
            f"it is dated {_utc_text(paused.paused_at)}, {-age} in the future by the "
            f"gateway's clock ({_utc_text(now)}): it was re-dated where it was kept, or the "
            "host that paused it has a clock ahead of this one's, so whether its answers "
            f"came within the {bound} they hold cannot be told"
        )
        fix = "; keep the hosts' clocks in sync (NTP)"
    else:
        why = (
            f"it paused at {_utc_text(paused.paused_at)} and is resumed {age} later (the "
            f"gateway's clock says {_utc_text(now)}), longer than the {bound} its approvals "
            "hold (ApprovalPolicy(view, approvals_expire_after=...)): the order, the price or "
            "the user's mind may have changed since the user was asked"
        )
        fix = (
            "; where approvals rightly wait longer, build the policy with a longer "
            "approvals_expire_after"
        )
    return ApprovalExpiredError(
        f"{where} came too late to hold: {why}. None of its waiting calls ran; they are "
        "recorded denied (approval expired), so it cannot be resumed again: ask the user "
        "anew. The composer holds the conversation with those calls answered as not run, "
        "and gateway.run(composer, view, policy=..., request_id=paused.request_id, "
        "defer=True) has the model ask again (its new paused run is dated then); or send "
        f"the user's request again{fix}",
        request_id=paused.request_id,
        paused_at=paused.paused_at,
        age=age,
        bound=bound,
    )


def denying_expired(policy: ApprovalPolicy, expired: ApprovalExpiredError) -> ApprovalPolicy:
    """``policy``, except that it denies every call, saying the approval expired: what the
    executor records the waiting calls of an expired paused run with (:func:`expiry`)."""
    age, bound = expired.age, expired.bound
    if age is not None and age < timedelta(0):
        why = f"approval expired: the paused run is dated {-age} in the future"
    else:
        why = f"approval expired: answered {age} after it was asked, past the {bound} it holds"
    return _DenyingExpired(policy, why)


class _DenyingExpired(ApprovalPolicy):
    """:func:`denying_expired`: every call denied, for the reason it gives."""

    __slots__ = ("_why",)

    def __init__(self, policy: ApprovalPolicy, why: str) -> None:
        super().__init__(policy.view, approvals_expire_after=policy.approvals_expire_after)
        self._why = why

    def request(self, name: str, arguments: Mapping[str, object] | None = None) -> ApprovalRequest:
        decided = super().request(name, arguments)
        return replace(decided, mode=ApprovalMode.DENIED, why=self._why)


def check_store_saw(
    paused: PausedRun,
    waiting: Sequence[ToolCall],
    recorded: Sequence[AuditRecord],
    model_calls: Sequence[ModelCallRecord] | None,
    store: object,
) -> None:
    """Refuse a resume whose store shows no trace of the run that paused.

    :func:`check_not_resumed` knows a copy resumed before only from the records of
    the store it is given; a store that is not the one the run wrote to (an
    in-memory ``SQLiteAuditSink()`` made per request, another database) holds
    none, and every copy would run the waiting calls again. Either of two traces
    the run left tells its store: the record of a call the run made before its
    waiting ones (by a call id of the paused conversation: another request under
    the same id is not this run), and the model call that asked for the waiting
    calls (its record was written before the request left), where ``model_calls``
    are the store's model calls of the request (``None``: the gateway keeps them
    elsewhere, or the store cannot be asked). A run that kept its model calls in another sink
    (``calls=``) and resumes where they go to the store is told by its calls' records.

    Raises:
        VeridicError: the store holds neither the paused model call (where it was
            asked for it) nor, when the run made calls before the waiting ones, the
            record of one of them.
    """
    before = paused.tool_calls - len(waiting)
    answered = {_storable(turn.call_id) for turn in paused.conversation.turns} - {""}
    if before > 0 and any(record.call_id in answered for record in recorded):
        return
    if model_calls is None:
        if before == 0:
            return  # nothing the store could hold: it cannot tell (the docs say so)
        missing = f"the {counted(before, 'tool call')} it made before its waiting ones"
        elsewhere = ""
    elif any(call.prompt_sha256 == paused.prompt_sha256 for call in model_calls):
        return
    else:
        missing = "the model call that asked for its waiting calls" + (
            f", nor of the {counted(before, 'tool call')} it made before them" if before else ""
        )
        elsewhere = (
            "; if the run kept its model calls in another sink (calls=), resume with that "
            "calls= too"
        )
    raise VeridicError(
        f"the gateway's audit store {clip(repr(store))} holds no record of {missing} (request "
        f"{clip(str(paused.request_id))}), so it cannot tell whether this paused run was "
        "resumed already: a copy resumed on it would run its calls a second time; nothing "
        "was run. Resume with a gateway on the store "
        "the run wrote to (a database file or server both processes reach, not an "
        f"in-memory SQLiteAuditSink() made per request){elsewhere}; if that store's records "
        "of the request were deleted since, ask the user anew"
    )


def shown_arguments(arguments: Mapping[str, object]) -> dict[str, object]:
    """Validated arguments as the JSON object an approval shows and its digest covers.

    The values the handler gets (nested models, dates, instruction fields) in
    their JSON form, so a paused run keeps them in :meth:`PausedRun.to_json`
    and the same call gives the same object on every host: a set is shown
    sorted, not in the order it iterates, which for text follows a hash that
    differs from process to process (the host that resumes would see other
    arguments than the user approved, and ask again).
    """
    shown = to_jsonable_python(_sets_sorted(dict(arguments)))
    if not isinstance(shown, dict):  # pragma: no cover - a dict stays a dict
        raise VeridicError(f"the arguments {clip(repr(arguments))} have no JSON object form")
    return shown


def _sets_sorted(value: object) -> object:
    """``value`` with every set in its dicts, lists and tuples a list, in the order of its
    items' JSON text (a set inside a pydantic model is left to the model's serializer)."""
    if isinstance(value, set | frozenset):
        items = [_sets_sorted(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(to_jsonable_python(item), sort_keys=True))
    if isinstance(value, dict):
        return {key: _sets_sorted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_sets_sorted(item) for item in value]
    return value


def needs_answer(view: ToolView, policy: ApprovalPolicy, call: ToolCall) -> ApprovalRequest | None:
    """The policy's request for ``call`` when the user must answer it, else ``None``.

    ``None`` also for a call the view refuses (unknown, unavailable, denied,
    invalid arguments): it is refused when it runs, and asks nobody.
    """
    if not view.status(call.name).exposed:
        return None
    try:
        prepared = view.validate(call.name, call.arguments)
    except InvalidArgumentsError:
        return None
    request = policy.request(call.name, prepared.arguments)
    return request if request.pending else None


def _yes(request: ApprovalRequest) -> bool:
    return True


def _no(request: ApprovalRequest) -> bool:
    return False


def answered(paused: PausedRun, answers: object, road: str = "resume") -> dict[str, bool]:
    """``answers`` keyed by call id, each checked: a bool, for an approval of ``paused``.

    A key is an approval's ``call_id`` or its :attr:`~PendingApproval.digest`; a
    digest binds the answer to what the user was shown, so one that no approval
    has (the paused run changed in storage since) is refused, loudly. A key of a
    digest's shape (64 hex digits) is read as a digest only, never as a call id:
    whoever writes where the run is kept could give another call the digest the
    dialog showed as its id, and the user's yes to that approval, read as that call's,
    ran what they never saw (its approval rewritten to match). A provider whose call ids
    have that shape has its calls answered by digest. ``road`` is the gateway's method
    the caller used (``"resume"``, ``"aresume"``), which the errors name.

    Raises:
        VeridicError: ``answers`` is no mapping, an answer is not a bool, a key
            names no approval (or two keys of one approval disagree).
    """
    if not isinstance(answers, Mapping):
        raise VeridicError(
            f"{road}(answers=...) got a {type(answers).__name__}: pass a mapping of each "
            "approval's digest (or call_id) to True (approve) or False (deny)"
        )
    by_digest = {approval.digest: approval.call_id for approval in paused.approvals}
    asked = {approval.call_id for approval in paused.approvals}
    bound: dict[str, bool] = {}
    for key, answer in answers.items():
        call_id = _answered_call(paused, key, by_digest, asked, road)
        if not isinstance(answer, bool):
            raise VeridicError(
                f"{road}() got {answer!r} as the answer for {clip(str(key))}: pass True (the "
                "user approves the call) or False (the user denies it)"
            )
        if bound.setdefault(call_id, answer) is not answer:
            raise VeridicError(
                f"{road}() got two different answers for call {clip(call_id)} (by its call_id "
                "and by its digest): pass one answer per approval"
            )
    return bound


def _answered_call(
    paused: PausedRun, key: object, by_digest: Mapping[str, str], asked: set[str], road: str
) -> str:
    """The call id an answer's ``key`` binds (see :func:`answered`): an approval's digest
    first, a call id only when the key does not have a digest's shape."""
    if isinstance(key, str) and _DIGEST.fullmatch(key):
        call_id = by_digest.get(key)
        if call_id is not None:
            return call_id
        taken = (
            "; it is a call id of the paused run, but a key of a digest's shape is read as a "
            "digest only, so that a call given the digest the dialog showed as its id cannot "
            "take that answer (answer a call whose id has that shape by its approval's digest)"
            if key in asked
            else ""
        )
        raise VeridicError(
            f"{road}() got an answer for the approval digest {key[:12]}..., which no "
            "approval of the paused run has: the paused run is not the one the user "
            "was shown (it changed where it was kept, or the answer is of another "
            f"run), so nothing was run; show paused.approvals again and ask anew{taken}"
        )
    if key in asked:
        return key
    raise VeridicError(
        f"{road}() got an answer for {clip(str(key))}, which no approval of the "
        f"paused run names (it asks for {_asked(paused)}): answer the approvals of "
        "paused.approvals by their digest (or call_id)"
    )


_LISTED: Final = 5
"""How many approvals an error about an unknown answer key lists by name."""


def _asked(paused: PausedRun) -> str:
    """The approvals of ``paused`` as an answer names them: each one's digest, the key the
    error tells the user to answer by, with its call id beside it (a few, then a count)."""
    listed = [
        f"digest {approval.digest} (tool {clip(approval.tool)}, call_id {clip(approval.call_id)})"
        for approval in paused.approvals[:_LISTED]
    ]
    more = len(paused.approvals) - _LISTED
    if more > 0:
        listed.append(f"and {more} more")
    return ", ".join(listed) or "no approval"


class ResumeSteps:
    """What becomes of each waiting call on resume: run (with which approval), or wait again.

    The calls run in the model's order, up to the first that needs an answer it has
    not got (or whose answer no longer holds): that one and the calls after it wait
    again. An answer given for a call behind one left unanswered could not be used,
    and the paused run that follows would ask for it anew, so it is refused instead,
    before anything runs (the caller's mistake, which the user would not see).
    Made by :meth:`planned` from the answers, or by :meth:`expired` (every call denied).
    """

    __slots__ = ("again", "plans", "runnable", "waiting")

    def __init__(
        self,
        plans: Mapping[str, tuple[ApprovalPolicy, Confirm | None]],
        again: Mapping[str, str],
        runnable: tuple[ToolCall, ...],
        waiting: tuple[ToolCall, ...],
    ) -> None:
        self.plans = plans
        """By call id, the policy each call of ``runnable`` runs under and its answer."""
        self.again = again
        """By call id, why an earlier answer to a call of ``waiting`` no longer holds."""
        self.runnable = runnable
        self.waiting = waiting

    @classmethod
    def at(
        cls,
        now: datetime,
        calls: tuple[ToolCall, ...],
        view: ToolView,
        policy: ApprovalPolicy,
        paused: PausedRun,
        answers: Mapping[str, bool],
        road: str = "resume",
    ) -> tuple[ResumeSteps, ApprovalExpiredError | None]:
        """The steps of a resume at ``now``: :meth:`planned` under ``answers`` while they
        hold, :meth:`expired` once they do not (:func:`expiry`), with the error the caller
        raises once the calls are recorded (``None`` while they hold). ``road`` is the
        gateway's method the caller used (``"resume"``, ``"aresume"``), which a refusal
        names."""
        expired = expiry(paused, policy, now)
        if expired is None:
            return cls.planned(calls, view, policy, paused, answers, road), None
        return cls.expired(calls, policy, expired), expired

    @classmethod
    def planned(
        cls,
        calls: tuple[ToolCall, ...],
        view: ToolView,
        policy: ApprovalPolicy,
        paused: PausedRun,
        answers: Mapping[str, bool],
        road: str = "resume",
    ) -> ResumeSteps:
        """The steps of ``paused``'s waiting ``calls`` under ``answers`` (keyed by call id).

        Raises:
            VeridicError: a call behind an approval left unanswered has an answer.
        """
        approvals = {approval.call_id: approval for approval in paused.approvals}
        plans: dict[str, tuple[ApprovalPolicy, Confirm | None]] = {}
        again: dict[str, str] = {}
        stop = len(calls)
        for index, call in enumerate(calls):
            answer = answers.get(call.id)
            request = needs_answer(view, policy, call)
            if request is None:
                # The rules decide alone now (or the view refuses it): a "no" still holds.
                plans[call.id] = (policy.asking(), _no) if answer is False else (policy, None)
                continue
            approval = approvals.get(call.id)
            stale = (
                approval.stale(
                    request,
                    shown_arguments(request.arguments),
                    bound_grant(view.tool(call.name), view),
                )
                if approval is not None
                else "it needs the user's approval now, and none was asked for before"
            )
            if stale:
                again[call.id] = stale
            if stale or answer is None:
                stop = index
                if answer is None:  # changed since or not, it was left unanswered
                    _check_none_behind(paused, calls[index:], answers, road)
                break
            plans[call.id] = (policy, _yes if answer else _no)
        return cls(plans, again, calls[:stop], calls[stop:])

    @classmethod
    def expired(
        cls, calls: tuple[ToolCall, ...], policy: ApprovalPolicy, expired: ApprovalExpiredError
    ) -> ResumeSteps:
        """Every waiting call run denied, its record saying the approval ``expired``
        (:func:`expiry`): none reaches its handler, and none waits again.

        Through the resume's own path, so that an expired resume records and answers its
        calls as any resume does; the caller raises ``expired`` once they are recorded.

        Raises:
            ApprovalExpiredError: ``expired`` itself when the paused run does not say when
                it paused (no ``age``): nothing is recorded, so that a caller who knows the
                time can date it and resume.
        """
        if expired.age is None:
            raise expired
        denied = denying_expired(policy, expired)
        return cls({call.id: (denied, None) for call in calls}, {}, calls, ())

    def approving(self, call: ToolCall) -> tuple[ApprovalPolicy, Confirm | None]:
        return self.plans[call.id]


def _check_none_behind(
    paused: PausedRun, calls: Sequence[ToolCall], answers: Mapping[str, bool], road: str
) -> None:
    """Refuse answers for ``calls`` after the first, which waits unanswered (see ResumeSteps).

    The first is named even when no approval of the paused run asks for it (it needs the
    user's approval now, and none was asked for): the message named none of the calls then.
    """
    given = [index for index, call in enumerate(calls) if call.id in answers]
    if not given:
        return
    asked = {approval.call_id for approval in paused.approvals}
    behind = calls[given[-1]]
    unanswered = [
        call.id for call in calls[: given[-1]] if call.id in asked and call.id not in answers
    ] or [calls[0].id]
    raise VeridicError(
        f"{road}() got an answer for call {clip(behind.id)} ({clip(behind.name)}) of the paused "
        f"run of request {clip(str(paused.request_id))}, and no answer for "
        f"{', '.join(clip(call_id) for call_id in unanswered)}, which the model asked for "
        "before it: "
        "calls run in the model's order, so that answer could not be used; nothing ran, and "
        "the paused run can be resumed again: answer the approvals before it as well (True "
        "or False), or leave its answer out to have the user asked for it again"
    )
