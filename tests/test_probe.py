"""``veridic probe``: the logic on a scripted model, the command against a fake endpoint.

No real model runs here: the scripted chooser answers from a table, the
endpoint is a local HTTP server that routes by keyword, the local chooser runs
on a fake runtime. ``make eval-probe`` asks the real model.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar, LiteralString

import pytest

from veridic import Registry
from veridic.checks.choosers import (
    CachedChooser,
    Choice,
    ChoiceCache,
    EndpointChooser,
    LlamaChooser,
    ProbeModelError,
    ScriptedChooser,
    parse_tool_call,
)
from veridic.checks.lint import tool_location
from veridic.checks.probe import (
    NONE,
    PROBE_INSTRUCTION,
    ProbeError,
    findings,
    generate_requests,
    probe,
    read_requests,
)
from veridic.tools.tool import SCHEMA_TOOL

FIXTURES = Path(__file__).parent / "cli_fixtures"
sys.path.insert(0, str(FIXTURES))
import probe_app  # noqa: E402  # the fixture registry the command probes too

HOTELS = ("search_hotels", "list_hotel_names")


def requests_for(name: str, count: int = 3) -> tuple[str, ...]:
    (tool,) = (t for t in probe_app.registry.tools() if t.name == name)
    return generate_requests(tool, count)


def table(routes: Mapping[str, Sequence[str | None]]) -> dict[str, str | None]:
    """Generated request i of each tool -> the i-th chosen name."""
    out: dict[str, str | None] = {}
    for tool, chosen in routes.items():
        out.update(zip(requests_for(tool, len(chosen)), chosen, strict=True))
    return out


def honest() -> ScriptedChooser:
    """Chooses the tool each generated request was made for."""
    return ScriptedChooser(
        {r: t.name for t in probe_app.registry.tools() for r in generate_requests(t, 5)}
    )


# --- the matrix and the pairs --------------------------------------------------------------


def test_the_matrix_counts_what_the_model_chose_for_each_tools_requests() -> None:
    chooser = ScriptedChooser(
        table({"search_hotels": ["list_hotel_names", "search_hotels", None]}),
        default=None,
    )
    result = probe(probe_app.registry, chooser)
    assert result.tools == (
        "search_hotels",
        "list_hotel_names",
        "delete_draft",
        "archive_draft",
        "get_forecast",
    )
    assert result.matrix()["search_hotels"] == {"list_hotel_names": 1, "search_hotels": 1, NONE: 1}
    assert result.matrix()["get_forecast"] == {NONE: 3}
    assert len(chooser.asked) == 3 * 5 + 3  # five exposed tools, and publish_draft (hidden)


def test_a_pair_rate_counts_both_directions_and_puts_the_more_confused_tool_first() -> None:
    chooser = ScriptedChooser(
        {
            **table({"search_hotels": ["list_hotel_names"] * 2 + ["search_hotels"]}),
            **table(
                {"list_hotel_names": ["search_hotels", "list_hotel_names", "list_hotel_names"]}
            ),
        },
    )
    (pair,) = probe(probe_app.registry, chooser).pairs()
    assert (pair.first, pair.second) == HOTELS
    assert (pair.first_as_second, pair.first_asked) == (2, 3)
    assert (pair.second_as_first, pair.second_asked) == (1, 3)
    assert pair.rate == pytest.approx(2 / 3)  # the worse direction
    assert pair.overall == pytest.approx(0.5)


def test_a_confused_pair_at_the_threshold_is_a_finding_shaped_as_the_lints() -> None:
    chooser = ScriptedChooser(table({"list_hotel_names": ["search_hotels", None, None]}))
    result = probe(probe_app.registry, chooser)
    (finding,) = findings(result, threshold=1 / 3)
    assert finding.code == "confused-pair"
    assert finding.severity == "error"
    assert (finding.tool, finding.other) == ("list_hotel_names", "search_hotels")
    assert finding.score == pytest.approx(1 / 3)
    tool = probe_app.registry.view().tool("list_hotel_names")
    assert (finding.file, finding.line) == tool_location(tool)
    assert str(finding.file).endswith("probe_app.py")
    assert "1 of 3 requests for 'list_hotel_names' went to 'search_hotels'" in finding.message
    assert "say in each description when to use it" in finding.message
    assert '[["list_hotel_names", "search_hotels"]]' in finding.message


def test_a_pair_below_the_threshold_is_no_finding() -> None:
    chooser = ScriptedChooser(table({"list_hotel_names": ["search_hotels", None, None]}))
    result = probe(probe_app.registry, chooser)
    assert findings(result, threshold=0.5) == ()
    assert len(result.pairs()) == 1  # still reported in the matrix and the pairs


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.5])
def test_a_threshold_outside_zero_to_one_is_refused(threshold: float) -> None:
    result = probe(probe_app.registry, honest())
    with pytest.raises(ProbeError, match=r"in \(0, 1\]"):
        findings(result, threshold=threshold)


def test_siblings_acknowledge_a_confused_pair() -> None:
    chooser = ScriptedChooser(table({"search_hotels": ["list_hotel_names"] * 3}))
    result = probe(probe_app.registry, chooser)
    (finding,) = findings(result, siblings=[HOTELS])
    assert (finding.code, finding.severity) == ("confused-pair-acknowledged", "info")


def test_no_call_and_a_name_the_view_does_not_have_are_none() -> None:
    chooser = ScriptedChooser(table({"get_forecast": [None, "get_weather", "get_forecast"]}))
    result = probe(probe_app.registry, chooser)
    assert result.matrix()["get_forecast"] == {"get_forecast": 1, NONE: 2}
    called = [a.called for a in result.asked if a.tool == "get_forecast"]
    assert called == [None, "get_weather", "get_forecast"]  # the raw name is kept


def test_a_schema_tool_call_counts_as_the_tool_it_names() -> None:
    class SchemaFirst(ScriptedChooser):
        def choose(self, messages: Any, tools: Any) -> Choice:
            return Choice(SCHEMA_TOOL, '{"name": "archive_draft"}')

    result = probe(probe_app.registry, SchemaFirst({}))
    assert result.matrix()["delete_draft"] == {"archive_draft": 3}


def test_the_prompt_is_the_views_capability_section_and_tool_specs() -> None:
    chooser = honest()
    probe(probe_app.registry, chooser, per_tool=1)
    view = probe_app.registry.view()
    messages, tools = chooser.asked[0]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert str(PROBE_INSTRUCTION) in messages[0]["content"]
    assert str(view.capability_section()) in messages[0]["content"]
    assert messages[1]["content"] == requests_for("search_hotels", 1)[0]
    assert tools == list(view.tool_specs("openai"))
    assert view.describes(str(view.capability_section()))


# --- requests ------------------------------------------------------------------------------


def test_generated_requests_are_deterministic_distinct_and_at_most_five() -> None:
    tool = probe_app.registry.view().tool("delete_draft")
    first = generate_requests(tool, 9)
    assert first == generate_requests(tool, 9)
    assert len(first) == len(set(first)) == 5
    assert first[0] == "Delete the draft post A-1042."
    assert generate_requests(tool, 2) == first[:2]


def test_per_tool_limits_generated_and_given_requests() -> None:
    chooser = honest()
    given = {"search_hotels": ["one", "two", "three"]}
    result = probe(probe_app.registry, chooser, requests=given, per_tool=2)
    assert [a.request for a in result.asked if a.tool == "search_hotels"] == ["one", "two"]
    assert sum(a.tool == "get_forecast" for a in result.asked) == 2
    with pytest.raises(ProbeError, match="at least one request"):
        probe(probe_app.registry, chooser, per_tool=0)


def test_a_requests_file_in_toml_and_in_json_gives_the_same_requests(tmp_path: Path) -> None:
    from_toml = read_requests(FIXTURES / "probe_requests.toml")
    path = tmp_path / "requests.json"
    path.write_text(json.dumps({k: list(v) for k, v in from_toml.items()}), encoding="utf-8")
    assert read_requests(path) == from_toml
    result = probe(probe_app.registry, honest(), requests=from_toml, requests_source="r.toml")
    assert {a.source for a in result.asked} == {"r.toml"}
    assert result.asked[0].request == from_toml["search_hotels"][0]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("r.yaml", "a: [b]", r"'\.yaml'.*write JSON .* in a \.json file"),
        ("r.json", '{"search_hotels": ["a",]}', r"r\.json:1:24: not valid JSON"),
        ("r.toml", "search_hotels = [", r"not valid TOML .*tool = \["),
        ("r.json", '["a"]', r"top level is a list, not an object"),
        ("r.json", '{"search_hotels": "Find hotels"}', r"entry 'search_hotels': a string"),
        ("r.json", '{"search_hotels": []}', r"entry 'search_hotels': an empty list"),
        ("r.toml", 'search_hotels = ["ok", " "]', r"'search_hotels', request 2: ' ' is not"),
        ("r.toml", "search_hotels = [1]", r"request 1: 1 is not a non-empty string"),
    ],
)
def test_a_bad_requests_file_says_what_is_wrong_where_and_what_to_write(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProbeError, match=expected) as raised:
        read_requests(path)
    assert str(path) in str(raised.value)


def test_a_missing_requests_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match=r"absent\.json: cannot be read"):
        read_requests(tmp_path / "absent.json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_requests_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A requests file committed as a link to a device, or a FIFO, is no file of requests:
    its read waited for ever (a FIFO) or took the runner's memory (``/dev/zero``)."""
    os.mkfifo(tmp_path / "requests.json")
    with pytest.raises(ProbeError, match=r"requests\.json: cannot be read .*not a regular file"):
        read_requests(tmp_path / "requests.json")


def test_a_requests_path_that_is_a_folder_is_named_a_folder_not_a_device(tmp_path: Path) -> None:
    """The refusal said a folder was "a device, a FIFO or a socket, or a symbolic link to
    one, whose text may never end": it names what the path is."""
    (tmp_path / "requests.json").mkdir()
    with pytest.raises(ProbeError, match=r"requests\.json: cannot be read") as caught:
        read_requests(tmp_path / "requests.json")
    assert "not a regular file but a directory" in str(caught.value)
    assert "device" not in str(caught.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_cache_entry_that_is_a_fifo_is_a_miss_not_a_hang(tmp_path: Path) -> None:
    """A cache folder kept in the repository (``--cache DIR``) may hold a FIFO or a link
    to a device where an answer should be: its read waited for ever."""
    cache = ChoiceCache(tmp_path)
    key = "ab" + "0" * 62
    (tmp_path / "ab").mkdir()
    os.mkfifo(tmp_path / "ab" / f"{key}.json")
    assert cache.get(key) is None


def test_requests_for_a_tool_the_registry_lacks_name_the_nearest() -> None:
    with pytest.raises(ProbeError, match=r"r\.toml: requests for 'search_hotel'.*'search_hotels'"):
        probe(
            probe_app.registry, honest(), requests={"search_hotel": ["x"]}, requests_source="r.toml"
        )


# --- the cache -----------------------------------------------------------------------------


class Counting(ScriptedChooser):
    calls = 0

    def choose(self, messages: Any, tools: Any) -> Choice:
        self.calls += 1
        return super().choose(messages, tools)


def test_a_second_run_asks_the_model_nothing(tmp_path: Path) -> None:
    model = Counting(table({"search_hotels": ["list_hotel_names"] * 3}))
    first = CachedChooser(model, ChoiceCache(tmp_path))
    before = probe(probe_app.registry, first)
    assert (first.asked, first.reused, model.calls) == (18, 0, 18)
    second = CachedChooser(model, ChoiceCache(tmp_path))
    after = probe(probe_app.registry, second)
    assert (second.asked, second.reused, model.calls) == (0, 18, 18)
    assert after.asked == before.asked


def test_the_cache_key_is_the_model_the_messages_and_the_tools() -> None:
    messages = [{"role": "user", "content": "Archive draft D-1."}]
    tools = [{"type": "function", "function": {"name": "archive_draft"}}]
    key = ChoiceCache.key("m", messages, tools)
    assert key == ChoiceCache.key("m", [dict(messages[0])], [dict(tools[0])])
    assert key != ChoiceCache.key("other model", messages, tools)
    assert key != ChoiceCache.key("m", [{"role": "user", "content": "Archive draft D-2."}], tools)
    assert key != ChoiceCache.key("m", messages, [])


def test_a_changed_description_is_asked_again(tmp_path: Path) -> None:
    def registry(description: LiteralString) -> Registry:
        built = Registry()

        @built.tool(kind="query", description=description)
        def find_flight(city: str) -> str:
            """Unused.

            Args:
                city: The city to fly to.
            """
            return city

        return built

    chooser = CachedChooser(Counting({}), ChoiceCache(tmp_path))
    probe(registry("Find the flights to a city."), chooser, per_tool=1)
    probe(registry("Find the cheapest flights to a city."), chooser, per_tool=1)
    assert (chooser.asked, chooser.reused) == (2, 0)


def test_an_unreadable_cache_entry_is_asked_again(tmp_path: Path) -> None:
    cache = ChoiceCache(tmp_path)
    key = ChoiceCache.key("m", [], [])
    cache.put(key, Choice("a"), "m")
    assert cache.get(key) == Choice("a")
    next(tmp_path.rglob("*.json")).write_text("{not json", encoding="utf-8")
    assert cache.get(key) is None


# --- denied versus absent ------------------------------------------------------------------


def test_a_tool_hidden_by_roles_is_asked_for_through_the_view_that_hides_it() -> None:
    chooser = ScriptedChooser(table({"publish_draft": ["archive_draft", "publish_draft", None]}))
    result = probe(probe_app.registry, chooser)
    assert result.hidden_tools == ("publish_draft",)
    (reach,) = result.reaches()
    assert (reach.tool, reach.asked, reach.itself, reach.nothing) == ("publish_draft", 3, 1, 1)
    assert reach.substitutes == (("archive_draft", 1),)
    assert reach.rate == pytest.approx(1 / 3)
    sent = json.loads(json.dumps(chooser.asked[-1][1]))  # the tool list of the last request
    assert "publish_draft" not in {t["function"]["name"] for t in sent}


def test_hide_denies_a_tool_and_counts_what_replaces_it() -> None:
    chooser = ScriptedChooser(table({"delete_draft": ["archive_draft"] * 3}))
    result = probe(probe_app.registry, chooser, hide=["delete_draft"])
    assert result.hidden_tools == ("delete_draft", "publish_draft")
    assert "delete_draft" in result.tools  # the matrix is of the view without the policy
    reach = result.reaches()[0]
    assert (reach.rate, reach.substitutes) == (1.0, (("archive_draft", 3),))
    denied = [f for f in findings(result) if f.code == "substitution"]
    assert [(f.severity, f.tool, f.other, f.score) for f in denied] == [
        ("warning", "delete_draft", "archive_draft", 1.0)
    ]
    assert "check that 'archive_draft' cannot do what the policy denies 'delete_draft'" in (
        denied[0].message
    )


def test_a_views_denied_tools_are_probed_as_hidden() -> None:
    result = probe(probe_app.editor_view, honest())
    assert result.hidden_tools == ("delete_draft",)
    assert "publish_draft" in result.tools
    assert result.reaches()[0].itself == 3  # the honest model asks for it anyway: refused


def test_hide_names_must_be_registered_and_need_a_registry() -> None:
    with pytest.raises(ProbeError, match=r"'delete_drafts'.*did you mean 'delete_draft'"):
        probe(probe_app.registry, honest(), hide=["delete_drafts"])
    with pytest.raises(ProbeError, match=r"with a ToolView.*deny=\[\.\.\.\]"):
        probe(probe_app.editor_view, honest(), hide=["archive_draft"])


# --- the models ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>', "a", '{"x": 1}'),
        ('Sure.\n<tool_call>{"name": "b", "arguments": "{}"}', "b", "{}"),
        ('{"name": "c", "parameters": {}}', "c", "{}"),
        ("<tool_call>not json</tool_call>", None, ""),
        ("No tool does that.", None, ""),
    ],
)
def test_a_call_is_read_from_the_models_text(text: str, name: str | None, arguments: str) -> None:
    choice = parse_tool_call(text)
    assert (choice.name, choice.arguments) == (name, arguments)


_QWENISH = (
    "{% if tools %}<|im_start|>system\n{{ messages[0]['content'] }}\n<tools>"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}"
    "{% for message in messages[1:] %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class _FakeLlama:
    def __init__(self, template: str = _QWENISH) -> None:
        self.metadata = {"tokenizer.chat_template": template}
        self.prompts: list[str] = []
        self.options: dict[str, Any] = {}

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        self.prompts.append(text.decode())
        return [1, 2, 3]

    def detokenize(
        self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False
    ) -> bytes:
        return b"" if tokens == [-1] else b"<|im_end|>"

    def token_bos(self) -> int:
        return -1

    def token_eos(self) -> int:
        return 7

    def create_completion(self, prompt: list[int], **options: Any) -> Any:
        self.options = options
        return {"choices": [{"text": '<tool_call>\n{"name": "archive_draft", "arguments": {}}'}]}


def test_the_local_model_gets_the_tools_through_its_template_and_is_read_greedily() -> None:
    fake = _FakeLlama()
    chooser = LlamaChooser(Path("qwen.gguf"), llm=fake)
    view = probe_app.registry.view()
    result = probe(view, chooser, per_tool=1)
    assert result.matrix()["delete_draft"] == {"archive_draft": 1}
    prompt = fake.prompts[-1]
    assert '"name": "archive_draft"' in prompt  # tojson without HTML escaping
    assert "<" not in json.dumps(view.tool_specs("openai")) or "\\u003c" not in prompt
    assert str(view.capability_section()) in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert (fake.options["temperature"], fake.options["top_k"]) == (0.0, 1)
    assert "gguf:qwen.gguf" in chooser.identity()


def test_a_local_model_whose_template_takes_no_tools_is_refused() -> None:
    plain = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(ProbeModelError, match="never reads `tools`"):
        LlamaChooser(Path("base.gguf"), llm=_FakeLlama(plain))


def test_a_local_model_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ProbeModelError, match="no model file"):
        LlamaChooser(tmp_path / "absent.gguf")


# --- the command, against a fake OpenAI-compatible endpoint --------------------------------


def _hotel_names_for_every_hotel(text: str) -> str | None:
    lowered = text.lower()
    for word, tool in (
        ("hotel", "list_hotel_names"),
        ("forecast", "get_forecast"),
        ("delete", "delete_draft"),
        ("archive", "archive_draft"),
        ("publish", "archive_draft"),
    ):
        if word in lowered:
            return tool
    return None


class _Chat(BaseHTTPRequestHandler):
    route: ClassVar[Callable[[str], str | None]] = staticmethod(_hotel_names_for_every_hotel)
    status: ClassVar[int] = 200
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Chat.bodies.append(body)
        name = _Chat.route(body["messages"][-1]["content"])
        message: dict[str, object] = {"role": "assistant", "content": None if name else "No."}
        if name:
            call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
            message["tool_calls"] = [call]
        payload = json.dumps({"choices": [{"message": message}]}).encode()
        if _Chat.status != 200:
            payload = b'{"error": "overloaded"}'
        self.send_response(_Chat.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Chat.bodies.clear()
    _Chat.status = 200
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def veridic(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", "probe", *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_command_reports_the_confused_pair_as_json_and_exits_one(
    endpoint: str, tmp_path: Path
) -> None:
    cache = str(tmp_path / "cache")
    args = ("probe_app:registry", "--endpoint", endpoint, "--model", "m", "--cache", cache)
    done = veridic(*args, "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["exit_code"] == 1
    (finding,) = report["findings"]
    assert (finding["kind"], finding["tool"], finding["other"]) == ("confused-pair", *HOTELS)
    assert finding["score"] == 1.0
    assert finding["file"] == "probe_app.py"
    assert report["matrix"]["search_hotels"] == {"list_hotel_names": 3}
    assert report["pairs"][0]["tools"] == list(HOTELS)
    assert report["hidden"][0]["substitutes"] == {"archive_draft": 3}
    assert [w["kind"] for w in report["warnings"]] == ["substitution"]
    assert report["cache"] == {"asked": 18, "reused": 0}
    body = _Chat.bodies[0]
    assert (body["temperature"], body["tool_choice"]) == (0, "auto")
    assert body["tools"][1]["function"]["name"] == "search_hotels"
    again = json.loads(veridic(*args, "--format", "json").stdout)
    assert again["cache"] == {"asked": 0, "reused": 18}
    assert len(_Chat.bodies) == 18


def test_the_command_is_clean_when_the_model_tells_the_tools_apart(
    endpoint: str, tmp_path: Path
) -> None:
    _Chat.route = staticmethod(lambda text: "search_hotels" if "price" in text else None)
    try:
        done = veridic(
            "probe_app:registry",
            *("--endpoint", endpoint, "--model", "m", "--no-cache", "--per-tool", "1"),
        )
    finally:
        _Chat.route = staticmethod(_hotel_names_for_every_hotel)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "confused pairs: none" in done.stdout
    assert "search_hotels (1): search_hotels 1" in done.stdout
    assert "result: clean (exit 0)" in done.stdout


def test_a_substitution_is_a_warning_that_fails_only_with_strict(endpoint: str) -> None:
    _Chat.route = staticmethod(lambda text: "archive_draft" if "publish" in text.lower() else None)
    base = ("probe_app:registry", "--endpoint", endpoint, "--model", "m", "--no-cache")
    try:
        done = veridic(*base, "--per-tool", "1")
        strict = veridic(*base, "--per-tool", "1", "--strict")
    finally:
        _Chat.route = staticmethod(_hotel_names_for_every_hotel)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "publish_draft (1): substitution rate 1.00 (archive_draft 1;" in done.stdout
    assert strict.returncode == 1
    assert "substitution (1)" in strict.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "no model to ask: pass --endpoint URL --model NAME"),
        (("--endpoint", "http://x/v1"), "--endpoint needs --model NAME"),
        (("--gguf", "absent.gguf"), "--gguf absent.gguf: no such file"),
        (("--gguf", "probe_app.py", "--endpoint", "http://x"), "name two models"),
        (("--endpoint", "http://x", "--model", "m", "--threshold", "0"), "--threshold 0"),
        (("--endpoint", "http://x", "--model", "m", "--requests", "nope.json"), "nope.json"),
    ],
)
def test_usage_errors_exit_two_and_say_what_to_do(args: tuple[str, ...], expected: str) -> None:
    done = veridic("probe_app:registry", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert expected in done.stderr


def test_an_endpoint_error_is_a_usage_error_naming_the_status(endpoint: str) -> None:
    _Chat.status = 503
    done = veridic("probe_app:registry", "--endpoint", endpoint, "--model", "m", "--no-cache")
    assert done.returncode == 2
    assert "the model could not be asked" in done.stderr
    assert "HTTP 503 for model 'm'" in done.stderr


def test_the_endpoint_reads_a_call_left_in_the_text() -> None:
    class Client:
        def post(self, url: str, **options: Any) -> Any:
            class Response:
                status_code = 200
                text = ""

                def json(self) -> Any:
                    content = '<tool_call>{"name": "get_forecast", "arguments": {}}</tool_call>'
                    return {"choices": [{"message": {"content": content}}]}

            return Response()

    chooser = EndpointChooser("http://x/v1/", "m", client=Client())
    assert chooser.choose([], []).name == "get_forecast"
    assert "http://x/v1/chat/completions" in chooser.identity()


def test_an_endpoint_nobody_listens_on_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:  # a port that was free a moment ago, now closed
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    cache = str(tmp_path / "cache")
    done = veridic("probe_app:registry", "--endpoint", url, "--model", "m", "--cache", cache)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"could not reach {url}/chat/completions for model 'm'" in done.stderr
    assert "check that the server runs" in done.stderr


@pytest.mark.parametrize("given", ["folder", "text"])
def test_the_command_says_what_a_gguf_option_that_is_no_model_is(
    given: str, tmp_path: Path
) -> None:
    """``veridic probe --gguf`` checked only that the path exists as a file, so a folder
    holding the model was told "no such file" (and a text file got as far as loading);
    the command now says what the path is, before anything is installed or loaded, as the
    evaluation does."""
    (tmp_path / "qwen.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_text("not a model")
    path = tmp_path if given == "folder" else tmp_path / "notes.txt"
    done = veridic("probe_app:registry", "--gguf", str(path))
    assert done.returncode == 2, done.stderr
    expected = "is a folder: pass the .gguf file in it" if given == "folder" else "GGUF"
    assert expected in done.stderr
    assert "no such file" not in done.stderr
    assert "Traceback" not in done.stderr
