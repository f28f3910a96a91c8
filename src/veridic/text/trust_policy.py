"""``TrustPolicy``: the one audited way to vouch for text as instruction.

Some text that did not come from code must still instruct: a prompt an
administrator wrote in a back office, a migration of legacy prompts. The idea
is the one of the web's Trusted Types policies: a named policy, written in
code, is the only door, and every pass through it is recorded with the
policy's name, the reason, the caller and a clipped sample, so a reviewer can
list every door (``veridic hatches``) and every use of it (:meth:`TrustPolicy.records`).

When ``[tool.veridic] trust-policies`` lists names (or
``veridic.configure(trust_policies=...)`` does), a policy with any other name
is refused when it is created, so a new door shows up in review.

>>> legacy = TrustPolicy("legacy-prompts")
>>> text = legacy.vouch("Summarise the ticket.", reason="migrated from v1 prompt table")
>>> provenance(text).kind, TrustPolicy.records()[-1].policy
('policy', 'legacy-prompts')
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Final, LiteralString

from veridic._sample import clip
from veridic.config import settings
from veridic.errors import ProvenanceError
from veridic.text.provenance import TrustedInstruction, _caller, mint

__all__ = ["TrustPolicy", "VouchRecord"]

_log = logging.getLogger("veridic.trust")
_KEPT: Final = 10_000


@dataclass(frozen=True, slots=True)
class VouchRecord:
    """One use of a trust policy."""

    policy: str
    reason: str
    caller: str
    sample: str
    time: float


_records: deque[VouchRecord] = deque(maxlen=_KEPT)
_lock = threading.Lock()


class TrustPolicy:
    """A named escape hatch that mints trusted text and records why.

    Raises:
        ProvenanceError: the name is empty, or not in the configured
            ``trust-policies`` list.
    """

    __slots__ = ("_name",)

    def __init__(self, name: LiteralString, /) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ProvenanceError(
                f"TrustPolicy needs a non-empty name, got {name!r}: name the door, "
                'e.g. TrustPolicy("admin-authored-prompts")'
            )
        allowed = settings().trust_policies
        if allowed is not None and name not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise ProvenanceError(
                f"trust policy {name!r} (created at {_caller(2)}) is not in "
                f"[tool.veridic] trust-policies (listed: {listed}); add it there so the new "
                "escape hatch is reviewed, or use one of the listed policies"
            )
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"TrustPolicy({self._name!r})"

    def vouch(self, text: str, /, *, reason: str) -> TrustedInstruction:
        """Mint ``text`` as trusted under this policy, recording ``reason``.

        Raises:
            ProvenanceError: ``reason`` is empty: a vouch must say why.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ProvenanceError(
                f"TrustPolicy({self._name!r}).vouch() needs a reason, got {reason!r}: "
                "say why this text may instruct the model, it is recorded for review"
            )
        caller = _caller(2)
        record = VouchRecord(self._name, reason, caller, clip(text), time.time())
        with _lock:
            _records.append(record)
        _log.info(
            "trust policy %r vouched at %s: %s (%s)", self._name, caller, record.sample, reason
        )
        return mint(str(text), "policy", f"policy {self._name} at {caller}")

    @staticmethod
    def records(policy: str | None = None) -> tuple[VouchRecord, ...]:
        """The most recent vouches (up to 10,000; every one is also logged on ``veridic.trust``).

        A method, not a property like ``ApprovalPolicy.rules``: it takes a filter
        (``policy``) and reads the whole process's log, not what this object holds.
        """
        with _lock:
            kept = tuple(_records)
        return kept if policy is None else tuple(r for r in kept if r.policy == policy)
