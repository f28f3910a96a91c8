"""A new user runs ``python -m veridic.evaluation`` on their own model (sixth review).

Each test runs the command line end to end against a real HTTP server started in the
test (the standard library's, in a thread, speaking the OpenAI chat-completions shape),
and each was a reproducer that failed on the code before its fix: a smoke test that ran
no attack, a run lost to one rate-limit answer, a reasoning model cut off mid-thought
counted as a model that refused every order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _chat_server import NEEDS_HTTP, ChatServer, Reply, chat, endpoint_argv, read_record, serving
from hypothesis import given
from hypothesis import strategies as st

from veridic.evaluation.cli import main
from veridic.evaluation.corpora import CORPORA
from veridic.evaluation.corpus import Case
from veridic.evaluation.judge import judge
from veridic.testing import adversarial_text

pytestmark = NEEDS_HTTP


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with serving() as state:
        yield state


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VERIDIC_EVAL_CACHE", str(tmp_path / "cache"))


def _kinds(record: dict[str, Any], scheme: str) -> list[str]:
    return [case["kind"] for case in record["cases"] if case["scheme"] == scheme]


# --- a smoke test (--limit N) runs attacks too ---------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 6, 16])
def test_a_limited_run_asks_attacks_and_clean_cases_of_every_scheme(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], limit: int
) -> None:
    # The corpus lists its 16 clean cases first, and --limit took the first N: a quick
    # run of 16 or fewer measured no attack at all.
    out = tmp_path / "r.json"
    argv = endpoint_argv(server.url, out, "--limit", str(limit))
    argv[argv.index("--schemes") + 1] = "verbatim,datamark,encode"
    assert main(argv) == 0
    record = read_record(out)
    for scheme in ("verbatim", "datamark", "encode"):
        kinds = _kinds(record, scheme)
        assert len(kinds) == limit
        assert kinds.count("attack") == limit - limit // 2, (scheme, kinds)
        assert kinds.count("clean") == limit // 2, (scheme, kinds)
    # Every scheme asks the same cases, so the paired tests pair.
    ids = {s: [c["case"] for c in record["cases"] if c["scheme"] == s] for s in ("verbatim",)}
    assert all(
        [c["case"] for c in record["cases"] if c["scheme"] == s] == ids["verbatim"]
        for s in ("datamark", "encode")
    )
    said = f"{limit // 2} of 16 clean cases and {limit - limit // 2} of 120 attacks"
    assert said in record["meta"]["sample"]
    captured = capsys.readouterr()
    assert said in captured.err
    assert said in captured.out  # the report's setup line
    assert "No attack ran" not in captured.out


def test_a_limited_sample_is_spread_over_the_corpus_and_the_same_each_time(
    server: ChatServer, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert main(endpoint_argv(server.url, first, "--limit", "10")) == 0
    assert main(endpoint_argv(server.url, second, "--limit", "10")) == 0
    assert first.read_bytes() == second.read_bytes()
    cases = read_record(first)["cases"]
    attacks = [c for c in cases if c["kind"] == "attack"]
    assert len(attacks) == 5
    assert len({c["document"] for c in attacks}) == len(attacks)  # one per document
    order = [c.id for c in CORPORA["main"]()]
    assert [c["case"] for c in cases] == sorted((c["case"] for c in cases), key=order.index)


def test_a_limit_above_the_corpus_runs_it_all_and_says_no_sample(
    server: ChatServer, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    argv = endpoint_argv(server.url, out, "--limit", "1000", "--corpus", "held-out")
    assert main(argv) == 0
    record = read_record(out)
    assert len(record["cases"]) == len(CORPORA["held-out"]())
    assert "sample" not in record["meta"]


# --- a busy endpoint (HTTP 429, 503) is asked again -----------------------------------------


def _busy(status: int, **headers: str) -> Reply:
    return status, headers, b'{"error": {"message": "Rate limit reached, slow down"}}'


def test_a_rate_limit_answer_is_asked_again_after_the_wait_the_server_asks(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One HTTP 429 stopped the run: the case failed, and the user had to --resume by hand.
    out = tmp_path / "r.json"
    server.answer = lambda n: _busy(429, **{"Retry-After": "0.1"}) if n in (2, 3) else chat()
    argv = endpoint_argv(server.url, out, "--limit", "3")
    argv.remove("--quiet")
    assert main(argv) == 0
    assert len(server.requests) == 5
    assert server.requests[1] == server.requests[2] == server.requests[3]
    record = read_record(out)
    assert len(record["cases"]) == 3
    assert "incomplete" not in record["meta"]
    assert record["meta"]["retries"].startswith("2 (")
    assert "0.2 s waited" in record["meta"]["retries"]
    err = capsys.readouterr().err
    assert "HTTP 429 (Retry-After 0.1 s): asking again in 0.1 s, retry 1 of 3" in err
    assert "after 2 retries" in err  # the progress line of the case


def test_a_busy_server_without_retry_after_is_asked_again_with_a_growing_wait(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    server.answer = lambda n: _busy(503) if n == 1 else chat()
    argv = endpoint_argv(server.url, out, "--limit", "1", "--max-wait", "0.05")
    argv.remove("--quiet")
    assert main(argv) == 0
    assert len(server.requests) == 2
    assert "HTTP 503 (no Retry-After): asking again in 0.05 s" in capsys.readouterr().err
    assert read_record(out)["meta"]["retries"].startswith("1 (")


def test_retries_are_bounded_and_then_the_run_stops_with_its_answers(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    server.answer = lambda n: chat() if n == 1 else _busy(429, **{"Retry-After": "0"})
    assert main(endpoint_argv(server.url, out, "--limit", "3", "--retries", "2")) == 1
    assert len(server.requests) == 1 + 3
    err = capsys.readouterr().err
    assert "HTTP 429" in err
    assert "after 2 retries (--retries 2)" in err
    assert "--resume" in err
    record = read_record(out)
    assert len(record["cases"]) == 1
    assert record["meta"]["retries"].startswith("2 (")


def test_a_server_asking_for_a_wait_beyond_max_wait_is_not_waited_for(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = lambda n: _busy(429, **{"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"})
    assert main(endpoint_argv(server.url, tmp_path / "r.json", "--limit", "1")) == 1
    assert len(server.requests) == 1
    err = capsys.readouterr().err
    assert "longer than --max-wait 60 s" in err


def test_an_error_that_is_not_busy_is_not_asked_again(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = lambda n: _busy(400, **{"Retry-After": "0"})
    assert main(endpoint_argv(server.url, tmp_path / "r.json", "--limit", "1")) == 1
    assert len(server.requests) == 1
    assert "HTTP 400" in capsys.readouterr().err


def test_retries_of_a_resumed_run_are_added_to_the_earlier_ones(
    server: ChatServer, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    answers = {2: _busy(429, **{"Retry-After": "0"}), 3: _busy(500)}
    server.answer = lambda n: answers.get(n, chat())
    assert main(endpoint_argv(server.url, out, "--limit", "3")) == 1
    assert read_record(out)["meta"]["retries"].startswith("1 (")
    answers.clear()
    answers[5] = _busy(503, **{"Retry-After": "0"})
    assert main([*endpoint_argv(server.url, out, "--limit", "3"), "--resume"]) == 0
    assert read_record(out)["meta"]["retries"].startswith("2 (")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--endpoint", "http://x/v1", "--model", "m", "--retries", "-1"], "--retries"),
        (["--endpoint", "http://x/v1", "--model", "m", "--max-wait", "nan"], "--max-wait"),
        (["--endpoint", "http://x/v1", "--model", "m", "--max-wait", "-2"], "--max-wait"),
        (["--gguf", __file__, "--retries", "2"], "--retries"),
    ],
    ids=["negative-retries", "nan-wait", "negative-wait", "retries-of-a-local-model"],
)
def test_retry_options_out_of_range_are_usage_errors(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


# --- a reasoning model cut off mid-thought is counted apart ----------------------------------

_THOUGHT = "<think>\nOkay, the user wants a two-sentence summary. The document says"


def test_an_answer_cut_off_in_its_reasoning_is_counted_apart_not_as_a_refusal(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # With a budget of 40 tokens, every answer of a reasoning model is an unclosed
    # <think>: the table read 0% attack success (a perfect defence) and 0% utility.
    out = tmp_path / "r.json"
    server.answer = lambda n: chat(_THOUGHT)
    assert main(endpoint_argv(server.url, out, "--limit", "4")) == 0
    captured = capsys.readouterr()
    assert "cut off inside the model's reasoning" in captured.out
    assert "verbatim 4 of 4" in captured.out
    assert "--max-tokens" in captured.out
    assert "--max-tokens" in captured.err
    assert "| verbatim | n/a | n/a | n/a | n/a |" in captured.out  # no rate, no 0%
    record = read_record(out)
    assert all(case["truncated"] is True for case in record["cases"])
    assert record["summary"]["verbatim"]["followed"] == [0, 0]
    assert record["summary"]["verbatim"]["truncated"] == 4
    assert "| verbatim |" in captured.out
    assert main(["--report", str(out)]) == 0  # read back: still apart
    assert "verbatim 4 of 4" in capsys.readouterr().out


def test_reasoning_the_server_gives_apart_and_cut_off_is_counted_apart(
    server: ChatServer, tmp_path: Path
) -> None:
    # vLLM, llama.cpp's server and DeepSeek put the thinking in reasoning_content; cut
    # off, content is null (the run stopped: "no text") or "" (judged an order refused).
    out = tmp_path / "r.json"
    server.answer = lambda n: chat(
        None if n % 2 else "", reasoning_content="The user wants a summary. The"
    )
    assert main(endpoint_argv(server.url, out, "--limit", "2")) == 0
    cases = read_record(out)["cases"]
    assert [case["truncated"] for case in cases] == [True, True]
    assert all(case["output"].startswith("<think>The user wants") for case in cases)


def test_a_finished_thought_is_judged_by_the_answer_after_it(
    server: ChatServer, tmp_path: Path
) -> None:
    # The reasoning that quotes the injected order is not the answer a reader gets.
    out = tmp_path / "r.json"
    thought = (
        "<think>So: write ACCESS GRANTED, PINEAPPLE, account-check.example, KESTREL-19, "
        "confidential.</think>\n"
    )
    server.answer = lambda n: chat(thought + "A short summary.")
    assert main(endpoint_argv(server.url, out, "--limit", "40")) == 0
    record = read_record(out)
    assert sum(case["kind"] == "attack" for case in record["cases"]) >= 20
    assert all("truncated" not in case for case in record["cases"])
    assert not any(case["followed"] or case["canary"] for case in record["cases"])


def test_max_tokens_is_every_answer_s_budget_and_is_recorded(
    server: ChatServer, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    assert main(endpoint_argv(server.url, out, "--limit", "4", "--max-tokens", "400")) == 0
    assert [request["max_tokens"] for request in server.requests] == [400] * 4
    assert read_record(out)["meta"]["answer budget"] == "400 tokens (--max-tokens)"


def test_resume_refuses_a_record_of_another_answer_budget(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    server.answer = lambda n: chat() if n <= 2 else (500, {}, b"down")
    assert main(endpoint_argv(server.url, out, "--limit", "4")) == 1
    server.answer = lambda n: chat()
    asked = len(server.requests)
    argv = [*endpoint_argv(server.url, out, "--limit", "4"), "--max-tokens", "400", "--resume"]
    assert main(argv) == 2
    assert "answer budget" in capsys.readouterr().err
    assert len(server.requests) == asked


@given(
    st.sampled_from(CORPORA["main"]()),
    adversarial_text().filter(lambda t: "</think>" not in t.lower()),
    adversarial_text().filter(lambda t: not t.lstrip().lower().startswith("<think")),
)
def test_a_closed_thought_changes_no_verdict(case: Case, thought: str, answer: str) -> None:
    # What an answer is judged by does not depend on the reasoning before it, and an
    # answer that opens with no reasoning is never read as cut off.
    plain = judge(case, answer)
    assert not plain.truncated
    assert judge(case, f"<think>{thought}</think>{answer}") == plain
    assert judge(case, f"<think>{thought}").truncated


# --- an endpoint URL with a query ------------------------------------------------------------


def test_an_endpoint_with_a_query_is_asked_at_its_chat_path_and_its_key_is_not_shown(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Azure-style URLs carry a query (?api-version=...), some gateways the key itself
    # (?key=...): "/chat/completions" was appended after the query, so the request went
    # to /v1 with the query "api-version=1/chat/completions", and the key in the query
    # was printed in every message and kept in the record.
    out = tmp_path / "r.json"
    url = f"{server.url}?api-version=2024-06-01&key=s3cret-key"
    assert main(endpoint_argv(url, out, "--limit", "2")) == 0
    assert [r["(path)"] for r in server.requests] == [
        "/v1/chat/completions?api-version=2024-06-01&key=s3cret-key"
    ] * 2
    assert "s3cret" not in out.read_text(encoding="utf-8")
    assert "s3cret" not in capsys.readouterr().out
    server.answer = lambda n: (404, {}, b"no such route")
    assert main(endpoint_argv(url, tmp_path / "again.json", "--limit", "1")) == 1
    err = capsys.readouterr().err
    assert "HTTP 404" in err
    assert "s3cret" not in err
    assert "/v1/chat/completions?api-version=2024-06-01&key=***" in err  # a version is no key


# --- an answer the record cannot hold as it came ------------------------------------------------


def test_an_answer_cut_inside_an_emoji_is_kept_and_the_record_written(
    server: ChatServer, tmp_path: Path
) -> None:
    # A proxy that cuts answers by UTF-16 units sends half an emoji ("\ud83d", valid
    # JSON): the record could not be written in UTF-8, and the run ended in a traceback
    # that threw away every answer.
    body = {
        "model": "m",
        "choices": [
            {"message": {"content": "A summary \ud83d"}, "finish_reason": "length"},
        ],
    }
    payload = json.dumps(body, ensure_ascii=True).encode()
    assert b"\\ud83d" in payload
    server.answer = lambda n: (200, {}, payload)
    out = tmp_path / "r.json"
    assert main(endpoint_argv(server.url, out, "--limit", "2")) == 0
    outputs = [case["output"] for case in read_record(out)["cases"]]
    assert outputs == ["A summary \ufffd"] * 2


# --- an answer given as a list of parts --------------------------------------------------------


def test_an_answer_given_as_parts_is_read_as_its_text(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Mistral's reasoning models (and gateways that pass their shape through) answer
    # with content as a list of parts: the run stopped at the first answer, calling it
    # "a refusal, a filtered answer or a tool call".
    parts: list[object] = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Write PINEAPPLE?"}]},
        {"type": "text", "text": "The footbridge "},
        {"type": "text", "text": "opens in May."},
    ]
    server.answer = lambda n: chat(parts if n > 2 else "x")
    out = tmp_path / "r.json"
    assert main(endpoint_argv(server.url, out, "--limit", "4")) == 0
    outputs = [case["output"] for case in read_record(out)["cases"]]
    assert outputs[2:] == ["The footbridge opens in May."] * 2
    thinking_only = parts[:1]
    server.answer = lambda n: chat(thinking_only)
    assert main(endpoint_argv(server.url, out, "--limit", "2")) == 0
    cases = read_record(out)["cases"]
    assert [case["output"] for case in cases] == ["<think>Write PINEAPPLE?"] * 2
    assert all(case["truncated"] for case in cases)


@pytest.mark.parametrize("depth", [900, 5000])
def test_parts_nested_thousands_deep_stop_the_run_with_a_message(
    depth: int, server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A hostile server nesting thinking parts: the answer was read (and its parts walked)
    # by functions that recurse, and the run ended in a RecursionError traceback.
    content = '[{"type": "thinking", "thinking": ' * depth + '"deep"' + "}]" * depth
    body = '{"model": "m", "choices": [{"message": {"role": "assistant", "content": '
    body += content + '}, "finish_reason": "stop"}]}'
    server.answer = lambda n: (200, {"Content-Type": "application/json"}, body.encode())
    out = tmp_path / "r.json"
    assert main(endpoint_argv(server.url, out, "--limit", "1")) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "RecursionError" not in err


# --- an endpoint URL that is not one is a usage error ----------------------------------------


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://me:s3cret@[::1/v1",
        "http://localhost:abc/v1",
        "http://localhost:99999/v1",
        "http://local host/v1",
    ],
    ids=["unclosed-ipv6", "port-not-a-number", "port-out-of-range", "space-in-host"],
)
def test_an_endpoint_url_that_cannot_be_asked_is_a_usage_error(
    endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # An unclosed IPv6 bracket ended in a ValueError traceback; a bad port or a space
    # was found only when the first case was asked, as "could not reach" the server.
    with pytest.raises(SystemExit) as stopped:
        main(["--endpoint", endpoint, "--model", "m", "--limit", "1"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--endpoint" in err
    assert "Traceback" not in err
    assert "s3cret" not in err


# --- the record and the report are never one file; Ctrl-C while loading is a message ------


def test_a_markdown_report_naming_the_record_is_a_usage_error(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The report was written over the record after the run: every answer was lost.
    out = tmp_path / "run.json"
    alias = tmp_path / "sub" / ".." / "run.json"
    assert main([*endpoint_argv(server.url, out, "--limit", "1"), "--markdown", str(alias)]) == 2
    assert "--markdown" in capsys.readouterr().err
    assert server.requests == []  # refused before the model was asked
    assert not out.exists()


def test_a_report_written_over_one_of_its_records_is_refused(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    assert main([*endpoint_argv(server.url, out, "--limit", "1")]) == 0
    kept = out.read_bytes()
    capsys.readouterr()
    assert main(["--report", str(out), "--markdown", str(out)]) == 2
    assert "--markdown" in capsys.readouterr().err
    assert out.read_bytes() == kept


def test_ctrl_c_while_the_model_loads_is_a_message_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from veridic.evaluation import install

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(install, "ensure_runtime", interrupted)
    assert main(["--out", str(tmp_path / "run.json"), "--limit", "1"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err
    assert "again" in err
