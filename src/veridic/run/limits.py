"""Where a run of the gateway stops: the bounds a caller sets, kept across a pause.

Its own module because both the run loop, which holds a run to them, and a
:class:`~veridic.PausedRun`, which carries them to the resume, need them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from veridic.errors import VeridicError

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Where a run of :meth:`veridic.ModelGateway.run` stops if the model has not answered.

    ``turns`` counts model calls (at least 1: a run sends its prompt),
    ``tool_calls`` the calls of tools (run or refused), ``seconds`` the wall
    time since the run began (checked before each model call; ``None``: no
    limit), ``tokens`` the tokens the provider counted over the run's model
    calls (input and output, checked after each answer; ``None``: no limit;
    an answer that does not say how many it used stops the run with a
    ``VeridicError``, as the limit cannot hold). ``output_retries`` is how
    many times a structured answer that does not
    validate is sent back with what was wrong.

    A run that pauses for approvals keeps its limits in the
    :class:`~veridic.PausedRun` (``limits``), and a resume holds them unless it is
    given others: a bound set when the run started is not lost across a pause. What
    the run had spent counts on too, ``seconds`` included: the wall time it ran before
    the pause (:attr:`PausedRun.seconds <veridic.PausedRun>`), not the time it waited
    for the user's answers.
    """

    turns: int = 20
    tool_calls: int = 100
    seconds: float | None = None
    tokens: int | None = None
    output_retries: int = 1

    def __post_init__(self) -> None:
        if self.tokens is not None and (
            isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 1
        ):
            raise VeridicError(f"Limits(tokens={self.tokens!r}): pass a positive count, or None")
        if isinstance(self.turns, int) and not isinstance(self.turns, bool) and self.turns < 1:
            raise VeridicError(
                f"Limits(turns={self.turns!r}): a run of no model call can never send its "
                "prompt, so it would stop before it began: pass 1 or more (tool_calls=0 is how "
                "a run stops at the first tool call the model asks for)"
            )
        for name in ("turns", "tool_calls", "output_retries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise VeridicError(f"Limits({name}={value!r}): pass a count, an int of 0 or more")
        if self.seconds is not None and not (
            isinstance(self.seconds, int | float)
            and not isinstance(self.seconds, bool)
            and 0 < self.seconds < math.inf
        ):
            raise VeridicError(
                f"Limits(seconds={self.seconds!r}): pass a positive, finite number of seconds, "
                "or None for no limit (a paused run keeps its limits as JSON, which holds no "
                "infinity)"
            )
