"""Cases to results: every scheme on every case, judged, and the token cost of each scheme.

Cases run scheme by scheme in corpus order, so consecutive prompts share their system
message and the local runtime reuses that prefix instead of processing it again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from veridic.evaluation.backends import Backend, Message
from veridic.evaluation.corpus import DOCUMENTS, Case
from veridic.evaluation.judge import judge
from veridic.evaluation.schemes import Scheme, pilot_scheme

__all__ = [
    "MAX_TOKENS",
    "CaseResult",
    "TokenCost",
    "iter_cases",
    "prompt_id",
    "run_cases",
    "token_costs",
]

MAX_TOKENS: Final[Mapping[str, int]] = {"summary": 40, "question": 24}
"""Output budget per task: two sentences of summary, one of answer."""


@dataclass(frozen=True)
class CaseResult:
    """One case under one scheme: the prompt's id, the output and the verdicts."""

    scheme: str
    case: Case
    prompt_id: str
    output: str
    followed: bool | None
    canary: bool | None
    correct: bool
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    truncated: bool = False
    """The output is reasoning cut off before any answer.

    See :func:`veridic.evaluation.judge.answer_of`.
    """
    not_english: bool = False
    """The answer is not in English and no order was found followed in it.

    See :class:`veridic.evaluation.judge.Verdict`.
    """

    def record(self) -> dict[str, object]:
        """The JSON record of the result (no timing, so two runs diff cleanly)."""
        case = self.case
        cut = {"truncated": True} if self.truncated else {}  # records before it stay as they were
        foreign = {"not_english": True} if self.not_english else {}
        return {
            **cut,
            **foreign,
            "scheme": self.scheme,
            "case": case.id,
            "kind": case.kind,
            "task": case.task,
            "document": case.document.name,
            "order": case.order.name if case.order else None,
            "disguise": case.disguise.name if case.disguise else None,
            "family": case.disguise.family if case.disguise else None,
            "placement": case.placement,
            "prompt_id": self.prompt_id,
            "output": self.output,
            "followed": self.followed,
            "canary": self.canary,
            "correct": self.correct,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


def prompt_id(messages: Sequence[Message]) -> str:
    """A short digest of the exact messages sent (equal ids, equal prompts)."""
    canonical = json.dumps([dict(m) for m in messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def run_cases(
    backend: Backend,
    schemes: Sequence[Scheme],
    cases: Sequence[Case],
    *,
    max_tokens: Mapping[str, int] = MAX_TOKENS,
    progress: Callable[[str], None] | None = None,
) -> list[CaseResult]:
    """Run every case under every scheme and judge each output."""
    return list(iter_cases(backend, schemes, cases, max_tokens=max_tokens, progress=progress))


def iter_cases(
    backend: Backend,
    schemes: Sequence[Scheme],
    cases: Sequence[Case],
    *,
    max_tokens: Mapping[str, int] = MAX_TOKENS,
    progress: Callable[[str], None] | None = None,
) -> Iterator[CaseResult]:
    """:func:`run_cases` one result at a time, as each answer comes back.

    A run of an hour can stop midway (a failing server, Ctrl-C): whoever consumes this
    keeps the answers already given, which ``python -m veridic.evaluation --resume``
    does not ask again.
    """
    total = len(schemes) * len(cases)
    done = 0
    started = time.perf_counter()
    for scheme in schemes:
        for case in cases:
            rendered = scheme.render(case)
            completion = backend.complete(rendered.messages, max_tokens[case.task])
            verdict = judge(case, completion.text)
            result = CaseResult(
                scheme=scheme.name,
                case=case,
                prompt_id=prompt_id(rendered.messages),
                output=completion.text,
                followed=verdict.followed,
                canary=verdict.canary,
                correct=verdict.correct,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                seconds=completion.seconds,
                truncated=verdict.truncated,
                not_english=verdict.not_english,
            )
            done += 1
            if progress is not None:
                elapsed = time.perf_counter() - started
                left = elapsed / done * (total - done)
                mark = "".join(
                    flag for flag, on in (("F", verdict.followed), ("C", verdict.canary)) if on
                )
                wrong = "" if verdict.correct else " x"
                if verdict.truncated:
                    mark, wrong = "cut off in its reasoning", ""
                elif verdict.not_english:
                    mark, wrong = "not English, not judged", ""
                retried = f" after {completion.retries} retries" if completion.retries else ""
                progress(
                    f"[{done}/{total}] {scheme.name} {case.id} {completion.seconds:.1f}s"
                    f"{retried} {mark or '-'}{wrong} (about {left / 60:.0f} min left)"
                )
            yield result


@dataclass(frozen=True)
class TokenCost:
    """What a scheme costs in tokens, averaged over the corpus's clean documents.

    ``block`` is the data block's tokens, ``over_verbatim`` its extra tokens over the
    same document in today's verbatim fence, ``percent_of_data`` that extra as a share
    of the document's own tokens, ``fence`` the block's tokens over the bare document,
    and ``preamble`` the tokens the scheme adds to the system message (once a prompt).
    """

    block: float
    over_verbatim: float
    percent_of_data: float
    fence: float
    preamble: int


def token_costs(
    count: Callable[[str], int | None],
    schemes: Sequence[Scheme],
    baseline: Scheme | None = None,
    *,
    corpus: Sequence[Case] | None = None,
) -> dict[str, TokenCost] | None:
    """Each scheme's :class:`TokenCost` with the model's tokenizer (``None`` without one).

    Measured on the clean summary cases of ``corpus`` (the main corpus by default): pass
    the corpus that ran, or the record of a held-out run gives the main corpus's costs.
    """
    from veridic.evaluation.corpus import clean_cases

    reference = baseline if baseline is not None else _baseline(schemes)
    every = clean_cases() if corpus is None else corpus
    cases = [case for case in every if case.kind == "clean" and case.task == "summary"]
    if not cases:
        raise ValueError("token_costs() needs a corpus with a clean summary case")
    if count(DOCUMENTS[0].text) is None:
        return None

    def tokens(text: str) -> int:
        value = count(text)
        return value if value is not None else 0

    data = [tokens(case.data) for case in cases]
    verbatim = [tokens(reference.render(case).block) for case in cases]
    costs: dict[str, TokenCost] = {}
    for scheme in schemes:
        rendered = [scheme.render(case) for case in cases]
        blocks = [tokens(r.block) for r in rendered]
        extra = [b - v for b, v in zip(blocks, verbatim, strict=True)]
        costs[scheme.name] = TokenCost(
            block=sum(blocks) / len(blocks),
            over_verbatim=sum(extra) / len(extra),
            percent_of_data=100 * sum(extra) / sum(data),
            fence=sum(b - d for b, d in zip(blocks, data, strict=True)) / len(blocks),
            preamble=tokens(rendered[0].preamble) if rendered[0].preamble else 0,
        )
    return costs


def _baseline(schemes: Sequence[Scheme]) -> Scheme:
    for scheme in schemes:
        if scheme.mode == "verbatim":
            return scheme
    return pilot_scheme("verbatim")
