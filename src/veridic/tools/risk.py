"""Risk levels of tools and the floors a tool's effects impose on them.

Risk is a contract, not a mood: queries default to low and writes to mid, and
two kinds of effect set a floor that a declaration cannot go under:

- an **irreversible** tool (a hard delete, a "forget", sending money or mail)
  is high risk, because no revision can undo it;
- a **write to text read as instruction** (a write whose arguments hold an
  ``InstructionField``, or that declares it writes a model with one) is high
  risk, because another feature will read what it wrote as its instructions.

A tool that declares no risk gets the highest of its kind's default and its
floors; a tool that declares a risk below a floor fails when the registry
boots (:class:`~veridic.RiskFloorError`), never at its first call.

>>> Risk.LOW < Risk.MID < Risk.HIGH
True
>>> resolve_risk("write", None, ()).risk, resolve_risk("write", None, (IRREVERSIBLE,)).risk
(<Risk.MID: 'mid'>, <Risk.HIGH: 'high'>)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum, unique
from typing import Final, Literal

__all__ = [
    "INSTRUCTION_ARGUMENTS",
    "INSTRUCTION_WRITES",
    "IRREVERSIBLE",
    "ApprovalMode",
    "FloorRule",
    "FloorViolation",
    "ResolvedRisk",
    "Risk",
    "RiskLike",
    "ToolKind",
    "default_risk",
    "resolve_risk",
]

ToolKind = Literal["query", "write"]
"""A query reads and changes nothing; a write changes something."""


class Risk(Enum):
    """How much harm a wrong call of a tool can do. Ordered: ``LOW < MID < HIGH``.

    The values are the lower-case names, so ``Risk("high") is Risk.HIGH``.
    """

    LOW = "low"
    MID = "mid"
    HIGH = "high"

    @property
    def rank(self) -> int:
        """0, 1 or 2: the position of the level in the order."""
        return _RANK[self.value]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Risk):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Risk):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Risk):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Risk):
            return NotImplemented
        return self.rank >= other.rank


_RANK: Final = {"low": 0, "mid": 1, "high": 2}

RiskLike = Risk | Literal["low", "mid", "high"]
"""A risk as an enum member or its value; the registry accepts both."""


@dataclass(frozen=True, slots=True)
class FloorRule:
    """A rule that sets a minimum risk, and how to satisfy it."""

    code: str
    floor: Risk
    rule: str
    fix: str


IRREVERSIBLE: Final = FloorRule(
    "irreversible",
    Risk.HIGH,
    "an irreversible tool must be high risk",
    "declare risk=Risk.HIGH, or drop irreversible=True if a revision can undo the effect",
)
INSTRUCTION_ARGUMENTS: Final = FloorRule(
    "instruction-arguments",
    Risk.HIGH,
    "a write whose arguments hold text read as instruction must be high risk",
    "declare risk=Risk.HIGH (or leave risk unset): another feature will read what it writes "
    "as its instructions",
)
INSTRUCTION_WRITES: Final = FloorRule(
    "instruction-writes",
    Risk.HIGH,
    "a write to a model with instruction fields must be high risk",
    "declare risk=Risk.HIGH (or leave risk unset): another feature will read what it writes "
    "as its instructions",
)


@dataclass(frozen=True, slots=True)
class FloorViolation:
    """A declared risk below the floor one rule sets; ``detail`` says why the rule applies."""

    declared: Risk
    rule: FloorRule
    detail: str


@dataclass(frozen=True, slots=True)
class ResolvedRisk:
    """The risk a tool runs at and the floor rules it broke (empty when none)."""

    risk: Risk
    violations: tuple[FloorViolation, ...]


def default_risk(kind: ToolKind) -> Risk:
    """``LOW`` for a query, ``MID`` for a write."""
    return Risk.LOW if kind == "query" else Risk.MID


def resolve_risk(
    kind: ToolKind,
    declared: Risk | None,
    rules: tuple[FloorRule, ...],
    details: tuple[str, ...] = (),
) -> ResolvedRisk:
    """The risk of a tool of ``kind`` that declared ``declared`` and falls under ``rules``.

    Undeclared: the highest of the kind's default and every floor. Declared:
    the declaration, with a :class:`FloorViolation` for each floor above it
    (``details[i]`` says why ``rules[i]`` applies).
    """
    if declared is None:
        return ResolvedRisk(max((default_risk(kind), *(r.floor for r in rules))), ())
    violations = tuple(
        FloorViolation(declared, rule, details[index] if index < len(details) else "")
        for index, rule in enumerate(rules)
        if declared < rule.floor
    )
    return ResolvedRisk(declared, violations)


@unique
class ApprovalMode(StrEnum):
    """How one call was approved; stored by value (``"always_rule"``) in the audit store.

    ``NOT_ASKED`` is the mode of a call refused before anyone could approve
    it (an unknown or unavailable tool, one the view denies, invalid
    arguments): the model's mistake, not a user's or a rule's denial, so "how
    was each write approved" never counts a typo as a refusal by the user.
    """

    NOT_REQUIRED = "not_required"
    ALWAYS_RULE = "always_rule"
    USER_CONFIRMED = "user_confirmed"
    DENIED = "denied"
    NOT_ASKED = "not_asked"
