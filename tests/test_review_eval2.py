"""A new user runs ``python -m veridic.evaluation`` on their own model behind an endpoint.

Each test runs the command line end to end against a real HTTP server started in the
test (the standard library's, in a thread, speaking the OpenAI chat-completions shape),
and each was a reproducer that failed on the code before its fix: a traceback instead
of a message, an hour of answers lost to one bad reply or to Ctrl-C, a record that
could not be written found out only after the run, a foreign file read as a record.
"""

from __future__ import annotations

import _thread
import importlib.util
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_review_eval import _fake_runtime, _FakeLlama, _result

from veridic.evaluation.cli import main
from veridic.evaluation.corpora import CORPORA
from veridic.evaluation.corpus import Case
from veridic.evaluation.report import markdown, read_json
from veridic.evaluation.sample import sample

pytestmark = pytest.mark.skipif(
    all(importlib.util.find_spec(name) is None for name in ("httpx", "httpx2")),
    reason="neither httpx nor httpx2 is installed (the eval-model extra)",
)

Reply = tuple[int, dict[str, str], bytes]
"""Status, headers and body of one answer of the fake server."""


def _chat(content: str | None = "A summary of the document.") -> Reply:
    body = {
        "model": "tiny-served",
        "choices": [
            {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5},
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


@dataclass
class _Server:
    """A chat-completions server whose ``answer`` decides each reply (by request number)."""

    url: str
    answer: Callable[[int], Reply | None]
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def server() -> Iterator[_Server]:
    state = _Server(url="", answer=lambda n: _chat())
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body["(authorization)"] = self.headers.get("Authorization")
            with lock:
                state.requests.append(body)
                number = len(state.requests)
            reply = state.answer(number)
            if reply is None:  # hang up without a word
                self.close_connection = True
                return
            status, headers, payload = reply
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout test): nobody to answer

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VERIDIC_EVAL_CACHE", str(tmp_path / "cache"))


def _argv(url: str, out: Path, *more: str) -> list[str]:
    model = ["--endpoint", url, "--model", "tiny"]
    return [*model, "--schemes", "verbatim", "--quiet", "--out", str(out), *more]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- a server that cannot be reached or does not answer is a message, not a traceback -----


def test_an_endpoint_nobody_listens_on_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    assert main(_argv(url, tmp_path / "r.json", "--limit", "2")) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{url}/chat/completions" in err
    assert "could not reach" in err
    assert not (tmp_path / "r.json").exists()


def test_a_server_that_hangs_up_is_a_message(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = lambda n: None
    assert main(_argv(server.url, tmp_path / "r.json", "--limit", "2")) == 1
    err = capsys.readouterr().err
    assert "could not reach" in err
    assert "'tiny'" in err


def test_a_server_slower_than_timeout_is_a_message_that_names_the_option(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def slow(n: int) -> Reply:
        time.sleep(0.15)
        return _chat()

    server.answer = slow
    assert main(_argv(server.url, tmp_path / "r.json", "--limit", "1", "--timeout", "0.05")) == 1
    err = capsys.readouterr().err
    assert "0.05 s" in err
    assert "--timeout" in err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--endpoint", "http://x/v1", "--model", "m", "--timeout", value])
    assert stopped.value.code == 2
    assert "--timeout" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--endpoint", "http://x/v1", "--model", "m", "--threads", "8"],
        ["--gguf", __file__, "--timeout", "30"],
    ],
    ids=["threads-of-an-endpoint", "timeout-of-a-local-model"],
)
def test_an_option_the_chosen_model_would_ignore_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # --threads with --endpoint was read and dropped: the record said nothing of it.
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert argv[-2] in capsys.readouterr().err


@pytest.mark.parametrize("endpoint", ["localhost:8080/v1", "ftp://host/v1", "http://"])
def test_an_endpoint_that_is_not_an_http_url_is_a_usage_error(
    endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--endpoint", endpoint, "--model", "m"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert repr(endpoint) in err
    assert "http://" in err


def test_the_key_is_read_from_the_variable_named(
    server: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "k-42")
    argv = _argv(server.url, tmp_path / "r.json", "--limit", "1", "--api-key-env", "MY_SERVER_KEY")
    assert main(argv) == 0
    assert server.requests[0]["(authorization)"] == "Bearer k-42"


@pytest.mark.parametrize("value", [None, ""])
def test_a_named_key_variable_that_is_not_set_is_a_usage_error(
    server: _Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str | None,
) -> None:
    # The run went on without a key, and the server's 401 told the user to check "the
    # key" they had named but not set.
    if value is None:
        monkeypatch.delenv("MY_SERVER_KEY", raising=False)
    else:
        monkeypatch.setenv("MY_SERVER_KEY", value)
    argv = _argv(server.url, tmp_path / "r.json", "--limit", "1", "--api-key-env", "MY_SERVER_KEY")
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "MY_SERVER_KEY" in capsys.readouterr().err
    assert server.requests == []


def test_a_refused_key_names_the_variable_to_set(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = lambda n: (401, {}, b'{"error": "invalid api key"}')
    assert main(_argv(server.url, tmp_path / "r.json", "--limit", "1")) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err
    assert "--api-key-env" in err
    assert "VERIDIC_EVAL_API_KEY" in err


def test_an_answer_streamed_unasked_is_named_so(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunk = b'data: {"choices": [{"delta": {"content": "A"}}]}\n\ndata: [DONE]\n\n'
    server.answer = lambda n: (200, {"Content-Type": "text/event-stream"}, chunk)
    assert main(_argv(server.url, tmp_path / "r.json", "--limit", "1")) == 1
    err = capsys.readouterr().err
    assert "streamed" in err
    assert "streaming off" in err


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ((200, {}, b"<html>Welcome to nginx</html>"), "Welcome to nginx"),
        ((200, {}, b'{"choices": []}'), "choices[0]"),
        ((200, {}, b'{"object": "list", "data": []}'), "choices[0]"),
    ],
    ids=["html", "no-choices", "another-route"],
)
def test_a_body_that_is_not_a_chat_answer_is_a_message(
    server: _Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    reply: Reply,
    said: str,
) -> None:
    server.answer = lambda n: reply
    assert main(_argv(server.url, tmp_path / "r.json", "--limit", "1")) == 1
    err = capsys.readouterr().err
    assert said in err
    assert "OpenAI-compatible" in err


def test_a_model_that_answers_nothing_is_said_in_the_table(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.answer = lambda n: _chat("")
    assert main(_argv(server.url, tmp_path / "r.json", "--limit", "20")) == 0
    assert "Empty answers" in capsys.readouterr().out


def test_a_rate_limit_says_to_wait_and_resume(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = b'{"error": {"message": "Rate limit reached"}}'
    server.answer = lambda n: _chat() if n == 1 else (429, {"Retry-After": "20"}, body)
    argv = _argv(server.url, tmp_path / "r.json", "--limit", "3", "--max-wait", "5")
    assert main(argv) == 1  # a wait longer than --max-wait is not waited (sixth review)
    err = capsys.readouterr().err
    assert "HTTP 429" in err
    assert "20 s" in err
    assert "Rate limit reached" in err
    assert "--resume" in err


# --- answers already given are kept when the run stops, and a rerun can finish it ---------


def _record(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_a_run_stopped_by_a_server_error_keeps_its_answers_and_resumes(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One HTTP 500 after 40 minutes of answers threw every answer away: the record was
    # written only after the last case.
    out = tmp_path / "r.json"
    server.answer = lambda n: _chat() if n <= 3 else (500, {}, b"overloaded")
    assert main(_argv(server.url, out, "--limit", "6")) == 1
    err = capsys.readouterr().err
    assert "HTTP 500" in err
    assert "3 of 6" in err
    assert "--resume" in err
    stopped = _record(out)
    assert len(stopped["cases"]) == 3
    assert "3 of 6" in stopped["meta"]["incomplete"]
    server.answer = lambda n: _chat()
    asked = len(server.requests)
    assert main([*_argv(server.url, out, "--limit", "6"), "--resume"]) == 0
    assert len(server.requests) - asked == 3
    finished = _record(out)
    assert "incomplete" not in finished["meta"]
    ids = [c.id for c in sample(CORPORA["main"](), 6)]
    assert [r["case"] for r in finished["cases"]] == ids
    assert finished["meta"]["served model"] == "tiny-served"
    assert "| verbatim |" in capsys.readouterr().out


def test_a_resumed_record_is_the_record_an_uninterrupted_run_writes(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Second read: --resume kept the verdicts the stopped run's record held, judged by
    # the veridic that wrote it; resumed after an upgrade whose judge rules otherwise
    # (same prompts, so the record was accepted), one record counted by two judges.
    whole, resumed = tmp_path / "whole.json", tmp_path / "resumed.json"
    assert main(_argv(server.url, whole, "--limit", "6")) == 0
    server.answer = lambda n: _chat() if n <= 6 + 3 else (500, {}, b"overloaded")
    assert main(_argv(server.url, resumed, "--limit", "6")) == 1
    stopped = _record(resumed)
    for case in stopped["cases"]:  # what an older judge may have said of the same answers
        case["correct"] = not case["correct"]
    resumed.write_text(json.dumps(stopped), encoding="utf-8")
    server.answer = lambda n: _chat()
    assert main([*_argv(server.url, resumed, "--limit", "6"), "--resume"]) == 0
    assert "judged again" in capsys.readouterr().err
    assert resumed.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")


def test_ctrl_c_keeps_the_answers_so_far(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"

    def interrupt_on_the_third(n: int) -> Reply:
        if n == 3:
            _thread.interrupt_main()  # what Ctrl-C does to the command
        return _chat()

    server.answer = interrupt_on_the_third
    try:
        status = main(_argv(server.url, out, "--limit", "6"))
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C ended the run with a traceback and no record")
    assert status == 130
    err = capsys.readouterr().err
    assert "interrupted" in err
    assert "--resume" in err
    kept = len(_record(out)["cases"])
    assert 2 <= kept <= 3
    server.answer = lambda n: _chat()
    assert main([*_argv(server.url, out, "--limit", "6"), "--resume"]) == 0
    assert len(_record(out)["cases"]) == 6


def test_a_bug_midway_keeps_the_answers_and_still_shows_its_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not every failure is veridic's: llama-cpp-python raises RuntimeError when a decode
    # fails. The run's answers are saved, then the error goes on, traceback and all.
    calls = {"n": 0}

    class Llama(_FakeLlama):
        def create_completion(self, prompt: list[int], **options: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("llama_decode returned -3")
            return super().create_completion(prompt, **options)

    _fake_runtime(monkeypatch, tmp_path, Llama)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "r.json"
    argv = ["--no-install", "--gguf", str(model), "--schemes", "verbatim", "--limit", "5"]
    with pytest.raises(RuntimeError, match="llama_decode"):
        main([*argv, "--quiet", "--out", str(out)])
    assert len(_record(out)["cases"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*argv, "--quiet", "--out", str(out), "--resume"]) == 0
    assert len(_record(out)["cases"]) == 5
    assert calls["n"] == 6


def test_a_run_that_got_no_answer_leaves_the_old_record_alone(
    tmp_path: Path, server: _Server
) -> None:
    # A typo in the URL must not replace last week's record with an empty one.
    out = tmp_path / "r.json"
    assert main(_argv(server.url, out, "--limit", "2")) == 0
    before = out.read_bytes()
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    assert main(_argv(url, out, "--limit", "2")) == 1
    assert out.read_bytes() == before


def test_resume_without_a_record_is_a_usage_error(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_argv(server.url, tmp_path / "none.json", "--limit", "2"), "--resume"]) == 2
    assert "none.json" in capsys.readouterr().err
    assert server.requests == []


@pytest.mark.parametrize(
    "other",
    [
        ["--model", "other"],
        ["--corpus", "held-out"],
        ["--schemes", "datamark"],
        ["--limit", "1"],
    ],
    ids=["model", "corpus", "scheme", "fewer-cases"],
)
def test_resume_refuses_a_record_of_another_run(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], other: list[str]
) -> None:
    # Continuing another model's answers would make one table of two models.
    out = tmp_path / "r.json"
    server.answer = lambda n: _chat() if n <= 2 else (500, {}, b"down")
    assert main(_argv(server.url, out, "--limit", "4")) == 1
    capsys.readouterr()
    before = out.read_bytes()
    server.answer = lambda n: _chat()
    asked = len(server.requests)
    argv = _argv(server.url, out, "--limit", "4")
    for option in other:
        if option.startswith("--") and option in argv:
            index = argv.index(option)
            del argv[index : index + 2]
    status = main([*argv, *other, "--resume"])
    assert status == 2
    err = capsys.readouterr().err
    assert str(out) in err
    assert "--resume" in err
    assert len(server.requests) == asked
    assert out.read_bytes() == before


# --- an output that cannot be written is found before the model is asked -------------------


@pytest.mark.parametrize("option", ["--out", "--markdown"])
def test_an_output_that_cannot_be_written_stops_the_run_before_it_starts(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    # The record was written after the last answer: an --out under a file (or a folder
    # of that name) threw the whole run away with a traceback.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    target = blocker / "r.json"
    argv = _argv(server.url, tmp_path / "r.json", "--limit", "2")
    if option == "--out":
        argv[argv.index("--out") + 1] = str(target)
    else:
        argv += ["--markdown", str(target)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(target) in err
    assert option in err
    assert server.requests == []


def test_an_out_that_is_a_folder_stops_the_run_before_it_starts(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "records"
    folder.mkdir()
    assert main(_argv(server.url, folder, "--limit", "2")) == 2
    assert "folder" in capsys.readouterr().err
    assert server.requests == []


def test_report_markdown_that_cannot_be_written_is_a_message(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert main(_argv(server.url, out, "--limit", "2")) == 0
    capsys.readouterr()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["--report", str(out), "--markdown", str(blocker / "report.md")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "--markdown" in err


# --- --report on a file that is not a record ----------------------------------------------


def _valid_record(tmp_path: Path, server: _Server) -> dict[str, Any]:
    out = tmp_path / "valid.json"
    assert main(_argv(server.url, out, "--limit", "2")) == 0
    return _record(out)


_BROKEN: dict[str, Callable[[dict[str, Any]], object]] = {
    "a-list": lambda d: [],
    "cases-a-mapping": lambda d: {**d, "cases": {}},
    "a-case-a-number": lambda d: {**d, "cases": [1]},
    "a-case-without-scheme": lambda d: {
        **d,
        "cases": [{k: v for k, v in d["cases"][0].items() if k != "scheme"}],
    },
    "followed-a-string": lambda d: {**d, "cases": [{**d["cases"][0], "followed": "yes"}]},
    "correct-missing": lambda d: {
        **d,
        "cases": [{k: v for k, v in d["cases"][0].items() if k != "correct"}],
    },
    "tokens-a-list": lambda d: {**d, "tokens": [1, 2]},
    "tokens-wrong-keys": lambda d: {**d, "tokens": {"verbatim": {"blocks": 3}}},
    "meta-a-list": lambda d: {**d, "meta": ["corpus", "main"]},
    "case-id-a-list": lambda d: {**d, "cases": [{**d["cases"][0], "case": ["x"]}]},
}


@pytest.mark.parametrize("broken", sorted(_BROKEN))
def test_report_of_a_foreign_json_file_is_a_message(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    document = _BROKEN[broken](_valid_record(tmp_path, server))
    path = tmp_path / f"{broken}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    capsys.readouterr()
    assert main(["--report", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(path) in err
    assert "--out" in err


def test_report_of_a_truncated_record_is_a_message(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = json.dumps(_valid_record(tmp_path, server))
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    capsys.readouterr()
    assert main(["--report", str(path)]) == 1
    assert str(path) in capsys.readouterr().err


def test_the_record_read_back_is_the_record_written(server: _Server, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(_argv(server.url, out, "--limit", "3")) == 0
    results, costs, meta = read_json(out)
    assert [r.record() for r in results] == _record(out)["cases"]
    assert costs == {}
    assert meta["served model"] == "tiny-served"


# --- what the command says about itself ---------------------------------------------------


def test_the_help_counts_the_cases_of_each_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    # The help said held-out-7 has 256 cases; it has 261.
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, corpus in CORPORA.items():
        size = len(corpus())
        alone = name in ("main", "held-out", "held-out-7")
        shown = f"{name} ({size}" if alone else f"({size} each)"
        assert shown in text, (name, size)


# --- the table of a smoke test is a table ----------------------------------------------------


def _tables(report: str) -> list[list[str]]:
    tables: list[list[str]] = []
    current: list[str] = []
    for line in [*report.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


@given(
    st.lists(st.sampled_from(CORPORA["main"]()), unique_by=lambda c: c.id, max_size=12),
    st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_every_table_of_the_report_has_one_cell_a_column(
    cases: list[Case], obeyed: list[bool]
) -> None:
    # A run of clean cases only (what --limit 6 gave on the main corpus) printed the
    # table of attack success by order as "| scheme |  |" over a one-column rule.
    results = [_result("verbatim", case, obeyed=o) for case, o in zip(cases, obeyed, strict=False)]
    report = markdown(results, None, {"corpus": "main"})
    for table in _tables(report):
        widths = {line.count("|") for line in table}
        assert len(widths) == 1, table
        assert "|  |" not in table[0], table


# --- credentials in the endpoint's URL are not repeated ------------------------------------


def test_a_password_in_the_endpoint_url_reaches_no_message_and_no_record(
    server: _Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: http://user:key@host/v1 was printed in every error and kept in the record's
    # setup, which the README suggests committing.
    parts = server.url.split("://", 1)
    url = f"{parts[0]}://evaluator:s3cret-key@{parts[1]}"
    out = tmp_path / "r.json"
    assert main(_argv(url, out, "--limit", "2")) == 0
    _, _, meta = read_json(out)
    assert "s3cret" not in json.dumps(meta)
    assert "***@127.0.0.1" in json.dumps(meta)
    server.answer = lambda n: None  # the server hangs up: an error that names the URL
    assert main(_argv(url, tmp_path / "again.json", "--limit", "2")) == 1
    err = capsys.readouterr().err
    assert "could not reach" in err
    assert "s3cret" not in err
    assert "***@127.0.0.1" in err
