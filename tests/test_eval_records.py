"""The committed `make eval-model` records were made with the prompts the code renders today.

A change to a data mode, the preamble or the corpus changes the prompts; a
record made before it then describes prompts nobody sends any more, and the
README's table with it. Each record keeps a digest of the exact messages of
every case (``prompt_id``), so a stale one is found without running a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from veridic.evaluation.corpora import CORPORA
from veridic.evaluation.judge import judge
from veridic.evaluation.report import read_json
from veridic.evaluation.runner import prompt_id
from veridic.evaluation.schemes import scheme_named

RECORDS = sorted(
    (Path(__file__).resolve().parents[1] / "benchmarks" / "eval_model").rglob("*.json")
)


def test_there_are_records_of_every_corpus() -> None:
    corpora = {read_json(path)[2].get("corpus", "main") for path in RECORDS}
    assert corpora == set(CORPORA)


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.name)
def test_a_record_holds_the_prompts_rendered_today(path: Path) -> None:
    results, _, _ = read_json(path)
    assert results
    stale = [
        result.case.id
        for result in results
        if prompt_id(scheme_named(result.scheme).render(result.case).messages) != result.prompt_id
    ]
    assert not stale, (
        f"{path.name}: {len(stale)} of {len(results)} cases were run with other prompts than "
        f"the code renders now (first: {stale[0]}): run the evaluation again for this record"
    )


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.name)
def test_a_record_holds_the_verdicts_of_today_s_judge(path: Path) -> None:
    # --report reads the verdicts a record holds; a judge changed since would leave the
    # README's table counting by the old rule.
    results, _, _ = read_json(path)
    changed = [
        result.case.id
        for result in results
        if (verdict := judge(result.case, result.output)).followed != result.followed
        or verdict.canary != result.canary
        or verdict.correct != result.correct
    ]
    assert not changed, (
        f"{path.name}: {len(changed)} of {len(results)} verdicts differ from today's judge "
        f"(first: {changed[0]}): run the evaluation again, or judge the outputs again"
    )


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.name)
def test_a_record_is_of_a_finished_run(path: Path) -> None:
    # A run that stopped midway writes its answers so far, marked incomplete in its
    # setup, for --resume to finish: committed as it is, the README's table would count
    # part of a corpus as if it were all of it.
    _, _, meta = read_json(path)
    assert "incomplete" not in meta, (
        f"{path.name}: {meta['incomplete']}: finish the run with --resume before committing it"
    )
