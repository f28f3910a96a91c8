"""``TrustPolicy``: the one audited way to vouch for text as instruction.

Some text that did not come from code must still instruct: a prompt an
administrator wrote in a back office, a migration of legacy prompts. The idea
is the one of the web's Trusted Types policies: a named policy, written in
code, is the only door, and every pass through it is recorded with the
policy's name, the reason, the caller and a clipped sample, so a reviewer can
list every door (``veridic hatches``) and every use of it (:meth:`TrustPolicy.records`).

When ``[tool.veridic] trust-policies`` lists names (or
``veridic.configure(trust_policies=...)`` does), a policy with any other name
is refused when it is created and at every vouch, so a new door shows up in
review.

The records are kept in memory (the last 10,000) and logged on
``veridic.trust``. To keep them for good, and in one place for every host,
send them to the audit store: :meth:`TrustPolicy.record_to` takes any object
with a ``write_vouch`` method (:class:`~veridic.SQLiteAuditSink`,
:class:`~veridic.PostgresAuditSink`). A vouch is then written before its
text is returned, and a vouch whose record cannot be written raises instead
of minting: the escape hatch is only open while it is audited.

>>> legacy = TrustPolicy("legacy-prompts")
>>> text = legacy.vouch("Summarise the ticket.", reason="migrated from v1 prompt table")
>>> provenance(text).kind, TrustPolicy.records()[-1].policy
('policy', 'legacy-prompts')
"""

from __future__ import annotations

import difflib
import inspect
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, LiteralString, Protocol, runtime_checkable

from veridic._ids import ID, new_id
from veridic._sample import class_named, clip, error_message, escaped, quoted
from veridic._words import a_type
from veridic.config import is_policy_name, settings
from veridic.errors import AuditRecordError, ProvenanceError, VouchNotRecordedError
from veridic.text.provenance import TrustedInstruction, _caller, characters, mint

__all__ = ["TrustPolicy", "VouchRecord", "VouchSink"]

_log = logging.getLogger("veridic.trust")
_KEPT: Final = 10_000
_REASON_SHOWN: Final = 200


@dataclass(frozen=True, slots=True)
class VouchRecord:
    """One use of a trust policy.

    ``record_id`` is the record's own id (:func:`~veridic.run.records.new_id`), made with
    it, so a store that is sent the record twice keeps it once.

    Checked when it is made, as the audit store's other records are: a record
    built by hand with a time of NaN or ``"yesterday"``, or a policy that is
    not text, was kept in :meth:`TrustPolicy.records` and handed on as it was,
    and refused only by the store that wrote it, far from where it was made.

    Raises:
        AuditRecordError: names every malformed field (``policy`` and ``reason``
            non-empty text, ``caller`` and ``sample`` text, ``time`` a finite
            float or int of seconds, 0 or more).
    """

    policy: str
    reason: str
    caller: str
    sample: str
    time: float
    record_id: str = field(default_factory=new_id, compare=False, init=False)

    def __post_init__(self) -> None:
        _check_vouch(self)

    def _stored(self, record_id: str) -> VouchRecord:
        """This record with the id a store read back (the store's own rows only, whose
        reader checks the id: ``veridic.run._store._vouch``)."""
        object.__setattr__(self, "record_id", record_id)
        return self


def _check_vouch(record: VouchRecord) -> None:
    """Refuse a malformed :class:`VouchRecord`: when it is made, and again by a store.

    A store checks it again before writing it (``object.__setattr__`` alters a
    frozen record): an empty policy, or an id that :func:`new_id` does not make,
    was written as it was, and every read of the store's vouches refused the row.

    Raises:
        AuditRecordError: names every malformed field.
    """
    problems = [
        f"{name} must be non-empty text, got {quoted(getattr(record, name))}"
        for name in ("policy", "reason")
        if not isinstance(getattr(record, name), str) or not getattr(record, name).strip()
    ]
    problems += [
        f"{name} must be text, got {quoted(getattr(record, name))}"
        for name in ("caller", "sample")
        if not isinstance(getattr(record, name), str)
    ]
    seconds = record.time
    if not (type(seconds) in (float, int) and 0 <= seconds <= sys.float_info.max):
        problems.append(f"time must be seconds (a finite float >= 0), got {quoted(seconds)}")
    if not isinstance(record.record_id, str) or not ID.fullmatch(record.record_id):
        problems.append(
            "record_id must be 32 lowercase hex digits (new_id(), made with the record), "
            f"got {quoted(record.record_id)}"
        )
    if problems:
        raise AuditRecordError(
            f"vouch record of policy {quoted(record.policy)} is malformed: "
            f"{'; '.join(problems)}; let TrustPolicy.vouch() make it, or fix the listed fields "
            "(a record's id is made with it: build a new record rather than change one)"
        )


@runtime_checkable
class VouchSink(Protocol):
    """Where vouches are kept for good: ``write_vouch`` stores the record durably or raises."""

    def write_vouch(self, record: VouchRecord, /) -> None: ...


def _refuse_unlisted(name: str, where: str) -> None:
    """Refuse a policy whose name the settings in force do not list.

    Checked when a policy is made and again at every vouch: policies are module
    constants made at import, before an application configures its list, and a
    tenant's :func:`~veridic.configured` block may narrow it.

    Raises:
        ProvenanceError: ``name`` is not listed.
    """
    allowed = settings().trust_policies
    if allowed is not None and name not in allowed:
        listed = ", ".join(sorted(allowed)) or "none"
        raise ProvenanceError(
            f"trust policy {quoted(name)} ({where}) is not in the trust-policies in force "
            "([tool.veridic] trust-policies, or the list given to configure() or configured() "
            f"in code; listed: {listed}){_close_to(name, allowed)}; add it there so the new "
            "escape hatch is reviewed, or use one of the listed policies"
        )


def _close_to(name: str, allowed: frozenset[str]) -> str:
    """A listed name that ``name`` looks like (in case, ``_`` for ``-``, a letter of
    another script), as the end of the refusal: a reader sees the same name twice."""
    close = difflib.get_close_matches(name.casefold(), sorted(allowed), n=1, cutoff=0.8)
    if not close:
        return ""
    return f"; did you mean {quoted(close[0])}? a name must match a listed one exactly"


def _write(sink: VouchSink, record: VouchRecord, where: str) -> None:
    """Have ``sink`` write ``record`` before anything is minted.

    Raises:
        VouchNotRecordedError: the sink raised, or returned an awaitable (an async
            write nobody awaits writes nothing).
    """
    # Typed to return None, and an async store's returns a coroutine all the same.
    write: Callable[[VouchRecord], object] = sink.write_vouch
    try:
        written = write(record)
    except Exception as error:
        raise VouchNotRecordedError(
            f"{where} was not recorded: {a_type(sink)} failed ({class_named(error)}: "
            f"{clip(error_message(error), 200)}); nothing was minted. Vouch again once the "
            "store is back"
        ) from error
    if inspect.isawaitable(written):
        if inspect.iscoroutine(written):
            written.close()
        raise VouchNotRecordedError(
            f"{where} was not recorded: {a_type(sink)}.write_vouch() returned an awaitable "
            f"({a_type(written)}) that nobody awaits, so nothing was written; nothing was "
            "minted. Record to a store that writes before it returns "
            "(SQLiteAuditSink, PostgresAuditSink)"
        )


_records: deque[VouchRecord] = deque(maxlen=_KEPT)
_lock = threading.Lock()
_sink: VouchSink | None = None


class TrustPolicy:
    """A named escape hatch that mints trusted text and records why.

    Raises:
        ProvenanceError: the name is empty, or not in the configured
            ``trust-policies`` list.
    """

    __slots__ = ("_name",)

    def __init__(self, name: LiteralString, /) -> None:
        if not is_policy_name(name):
            raise ProvenanceError(
                "TrustPolicy needs a non-empty name a reviewer can read as it is (printable, "
                "no space around it, no character drawn as nothing, accents composed), got "
                f"{escaped(name)}: a name with an invisible character "
                "looks like another door in every list of them; name the door, "
                'e.g. TrustPolicy("admin-authored-prompts")'
            )
        _refuse_unlisted(name, f"created at {_caller(2)}")
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"TrustPolicy({self._name!r})"

    def vouch(self, text: str, /, *, reason: str) -> TrustedInstruction:
        """Mint ``text`` as trusted under this policy, recording ``reason``.

        The record's sample and the minted text are the characters ``text`` holds,
        read once: ``str()`` of a ``str`` subclass is whatever its ``__str__`` returns,
        and could let the record show other text than the one minted.

        Raises:
            ProvenanceError: ``reason`` is empty: a vouch must say why; ``text``
                is not a ``str`` (``str()`` of it would mint its repr, or what its
                ``__str__`` returns, unseen by the record).
            VouchNotRecordedError: the store set by :meth:`record_to` could not
                write the record; nothing was minted.
        """
        if not isinstance(text, str):
            raise ProvenanceError(
                f"TrustPolicy({self._name!r}).vouch() got {a_type(text)}, not text: "
                f"{clip(repr(text))}; vouch for the text itself (decode bytes, write a "
                "structure as the words the model should read), so the record shows what "
                "was minted"
            )
        if type(text) is not str:
            text = str.__str__(text)
        if not isinstance(reason, str) or not reason.strip():
            raise ProvenanceError(
                f"TrustPolicy({self._name!r}).vouch() needs a reason, got {quoted(reason)}: "
                "say why this text may instruct the model, it is recorded for review"
            )
        reason = characters(reason)
        caller = _caller(2)
        _refuse_unlisted(self._name, f"vouching at {caller}")
        record = VouchRecord(self._name, reason, caller, clip(text), time.time())
        with _lock:
            sink = _sink
        if sink is not None:
            _write(sink, record, f"TrustPolicy({self._name!r}).vouch() at {caller}")
        with _lock:
            _records.append(record)
        _log.info(
            "trust policy %r vouched at %s: %s (reason %s)",
            self._name,
            caller,
            record.sample,
            clip(reason, _REASON_SHOWN),
        )
        return mint(text, "policy", f"policy {self._name} at {caller}")

    @staticmethod
    def record_to(sink: VouchSink | None, /) -> VouchSink | None:
        """Write every vouch of this process to ``sink`` from now on; ``None`` stops it.

        Process-wide, like a logging handler: policies are module constants
        made at import time, long before the store an application opens at
        start. Returns the sink it replaces, so a test can put it back.

        Raises:
            ProvenanceError: ``sink`` has no ``write_vouch`` method.
        """
        global _sink
        if sink is not None and not isinstance(sink, VouchSink):
            raise ProvenanceError(
                f"TrustPolicy.record_to() got {a_type(sink)}, which has no "
                "write_vouch method: pass an audit store (SQLiteAuditSink, PostgresAuditSink)"
            )
        if sink is not None and inspect.iscoroutinefunction(sink.write_vouch):
            raise ProvenanceError(
                f"TrustPolicy.record_to() got {a_type(sink)}, whose write_vouch is async: "
                "vouch() is called where no event loop awaits it, so the record would never "
                "be written while the text was minted; pass a store that writes before it "
                "returns (SQLiteAuditSink, PostgresAuditSink)"
            )
        with _lock:
            previous, _sink = _sink, sink
        return previous

    @staticmethod
    def records(policy: str | None = None) -> tuple[VouchRecord, ...]:
        """The most recent vouches (up to 10,000; every one is also logged on ``veridic.trust``).

        A method, not a property like ``ApprovalPolicy.rules``: it takes a filter
        (``policy``) and reads the whole process's log, not what this object holds.
        """
        with _lock:
            kept = tuple(_records)
        return kept if policy is None else tuple(r for r in kept if r.policy == policy)
