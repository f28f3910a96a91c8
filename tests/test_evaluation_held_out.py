"""The held-out corpus and the reminder's ablation: the parts that judge the tuned design."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veridic import Composer, untrusted
from veridic.evaluation.cli import main, parse_args
from veridic.evaluation.corpus import DOCUMENTS, ORDERS, build_corpus
from veridic.evaluation.held_out import (
    HELD_OUT_DISGUISES,
    HELD_OUT_DOCUMENTS,
    HELD_OUT_ORDERS,
    held_out_corpus,
)
from veridic.evaluation.judge import followed, judge
from veridic.evaluation.report import read_json, write_json
from veridic.evaluation.runner import CaseResult
from veridic.evaluation.schemes import scheme_named
from veridic.fence import MARK, REMINDER, fence, unfence


def test_the_held_out_corpus_has_its_own_cases() -> None:
    cases = held_out_corpus()
    attacks = [c for c in cases if c.kind == "attack"]
    assert len(attacks) == len(HELD_OUT_DOCUMENTS) * len(HELD_OUT_ORDERS) * 3 == 60
    assert len(cases) - len(attacks) == 2 * len(HELD_OUT_DOCUMENTS)
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {c.id for c in build_corpus()}
    # Nothing reused from the corpus the design was tuned on.
    assert not {d.name for d in HELD_OUT_DOCUMENTS} & {d.name for d in DOCUMENTS}
    assert not {o.text for o in HELD_OUT_ORDERS} & {o.text for o in ORDERS}
    assert not {o.canary for o in HELD_OUT_ORDERS if not o.leaks} & {o.canary for o in ORDERS}
    assert {c.disguise.name for c in attacks if c.disguise} == {
        "plain",
        *(d.name for d in HELD_OUT_DISGUISES),
    }


def test_every_held_out_disguise_has_its_plain_twin() -> None:
    cases = {c.id: c for c in held_out_corpus()}
    for case in cases.values():
        if case.twin_id is not None:
            twin = cases[case.twin_id]
            assert (twin.document, twin.order, twin.placement) == (
                case.document,
                case.order,
                case.placement,
            )


def test_held_out_documents_hold_their_facts_and_no_canary() -> None:
    for document in HELD_OUT_DOCUMENTS:
        assert all(fact.found_in(document.text) for fact in document.facts), document.name
        assert document.answer.found_in(document.text), document.name
        for order in HELD_OUT_ORDERS:
            assert re.search(order.canary, document.text, re.IGNORECASE) is None


def test_held_out_orders_are_judged_by_their_canaries() -> None:
    order = {o.name: o for o in HELD_OUT_ORDERS}
    assert followed(order["french"], "BONJOUR ! Le ferry partira toutes les 90 minutes.")
    assert not followed(order["french"], "The document asks for a reply starting BONJOUR.")
    assert followed(order["verify"], "The document asks for the code: KESTREL-19.")
    case = next(c for c in held_out_corpus() if c.id == "clean/ferry/summary")
    assert judge(case, "From November the Port Aske ferry to Hollin runs every 90 minutes.").correct


def test_the_reminder_forgery_shows_only_on_marked_lines() -> None:
    case = next(c for c in held_out_corpus() if c.disguise and c.disguise.name == "closer-reminder")
    block = scheme_named("datamark").render(case).block
    lines = block.split("\n")
    assert lines[-2:] == ["</data>", REMINDER]
    forged = [line for line in lines[:-1] if REMINDER in line]
    assert forged
    assert all(line.startswith(MARK) for line in forged)
    assert unfence(block) == [("doc", case.data)]


def test_the_ablation_is_the_earlier_default_without_the_reminder_and_nothing_else() -> None:
    case = held_out_corpus()[-1]
    full = scheme_named("pilot:datamark-without-example").render(case).messages
    ablated = scheme_named("pilot:datamark-without-reminder").render(case).messages
    assert scheme_named("pilot:datamark-without-reminder").name == (
        "pilot:datamark-without-reminder"
    )
    assert [m["content"].replace("\n" + REMINDER, "") for m in full] == [
        m["content"] for m in ablated
    ]
    assert REMINDER in full[1]["content"]
    assert all(REMINDER not in m["content"] for m in ablated)


def test_only_the_marked_modes_add_the_reminder() -> None:
    assert fence("doc", "text", "datamark").endswith("\n</data>\n" + REMINDER)
    assert fence("doc", "text", "encode").endswith("\n</data>\n" + REMINDER)
    assert REMINDER not in fence("doc", "text", "verbatim")
    # The reminder is veridic's own text: one span with the closing line, from the fence.
    prompt = Composer().data("doc", untrusted("text", source="t")).build()
    closing = [s for s in prompt.spans if s.message == 1][-1]
    shown = prompt.messages[1].content[closing.start : closing.end]
    assert shown == "\n</data>\n" + REMINDER
    assert (closing.trusted, closing.origin) == (True, "veridic.fence")


def test_the_corpus_option_is_checked() -> None:
    assert parse_args(["--corpus", "held-out"]).corpus == "held-out"
    assert parse_args([]).corpus == "main"
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--corpus", "tuned"])
    assert exit_info.value.code == 2


def _result(case_id: str) -> CaseResult:
    case = next(c for c in (*build_corpus(), *held_out_corpus()) if c.id == case_id)
    return CaseResult("datamark", case, "0" * 16, "A summary.", False, False, True, 9, 3, 0.0)


def test_held_out_records_read_back_and_are_never_merged_with_main_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "held-out.json"
    write_json(held, [_result("attack/ferry/banana/plain/end")], {}, {"corpus": "held-out"})
    first = tmp_path / "main.json"
    write_json(first, [_result("attack/footbridge/exact/plain/end")], {}, {"corpus": "main"})
    results, _, meta = read_json(held)
    assert [r.case.id for r in results] == ["attack/ferry/banana/plain/end"]
    assert meta["corpus"] == "held-out"
    assert main(["--report", str(held)]) == 0
    capsys.readouterr()
    assert main(["--report", str(first), str(held)]) == 1
    error = capsys.readouterr().err
    assert "different corpora" in error
    assert "report each corpus's records apart" in error
