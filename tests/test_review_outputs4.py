"""What a reviewer reads, fourth pass: a shipped template's render errors are veridic's,
a parameter type is sorted the same whatever class holds it, and ``veridic show`` says
what a file held.

Each test goes through the public API; each failed on the code before its fix.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple, TypedDict

import pytest

from veridic import (
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    Templates,
    TrustedInstruction,
    instruction,
    unfence,
    untrusted,
)
from veridic.checks.cli import EXIT_CLEAN, EXIT_USAGE, main
from veridic.templates import TemplateError, TemplateParamsError, TemplateSandboxError
from veridic.text.prompt import PromptDocument


class Anything(TypedDict):
    value: Any


def _shipped_data(folder: Path, body: str) -> Any:
    (folder / "t.j2").write_text(body)
    return Templates(folder).data("t.j2", params=Anything)


# -- 1. a shipped template's render error is a TemplateError, not jinja2's bare one ------


_LONG = "a b" + "x" * 5000


@pytest.mark.parametrize(
    ("value", "cause"),
    [
        ({1: "one"}, TypeError),  # a key that is no text
        ({"a b": "x"}, ValueError),  # a key that holds a space
        ({'onclick="alert(1)" x': "v"}, ValueError),  # a key that would break the tag
        ({_LONG: "v"}, ValueError),
    ],
    ids=["int-key", "space", "attribute-breaking", "long"],
)
def test_xmlattr_given_keys_it_cannot_write_raises_a_template_error(
    tmp_path: Path, value: dict[object, str], cause: type[Exception]
) -> None:
    bound = _shipped_data(tmp_path, "Line one.\n<p{{ value | xmlattr }}>\n")
    with pytest.raises(TemplateError) as caught:
        bound.render({"value": value})
    message = str(caught.value)
    assert "t.j2" in message
    assert "line 2" in message
    assert "|xmlattr (value)" in message
    assert isinstance(caught.value.__cause__, cause)
    assert "x" * 200 not in message  # the untrusted key is quoted clipped, never whole


@pytest.mark.parametrize(
    ("expression", "cause"),
    [
        ("1 / value", ZeroDivisionError),
        ('"a" + value', TypeError),
        ('"abc".index(value)', ValueError),
        ("value | round(2)", TypeError),
        ('value.encode("ascii")', UnicodeError),
    ],
)
def test_a_shipped_template_that_fails_to_render_raises_a_template_error(
    tmp_path: Path, expression: str, cause: type[Exception]
) -> None:
    values = {
        "1 / value": 0,
        '"a" + value': 1,
        '"abc".index(value)': "z" * 5000,
        "value | round(2)": "text",
        'value.encode("ascii")': "é" * 5000,
    }
    bound = _shipped_data(tmp_path, "Line one.\n{{ " + expression + " }}\n")
    with pytest.raises(TemplateError, match=r"line 2\) failed to render") as caught:
        bound.render({"value": values[expression]})
    assert isinstance(caught.value.__cause__, cause)
    message = str(caught.value)
    assert "t.j2" in message
    assert "z" * 200 not in message
    assert "é" * 200 not in message


# -- 2. a set of named tuples holding sets is sorted as one of plain tuples is -------------


class Tagged(NamedTuple):
    tags: frozenset[int]


def test_a_set_of_named_tuples_holding_sets_is_read_sorted_as_plain_tuples_are(
    tmp_path: Path,
) -> None:
    # A named tuple orders as a tuple does: a set of them holding sets was refused as
    # "neither less nor more" while the same set of plain tuples was sorted.
    bound = _shipped_data(tmp_path, "{% for item in value %}{{ item.tags | list }};{% endfor %}")
    named = {Tagged(frozenset({2, 9})), Tagged(frozenset({1, 5})), Tagged(frozenset({1}))}
    ((_, text),) = unfence(bound.render({"value": named}))
    assert text == "[1];[1, 5];[2, 9];"
    plain = _shipped_data(tmp_path, "{% for item in value %}{{ item[0] | list }};{% endfor %}")
    ((_, same),) = unfence(plain.render({"value": {tuple(item) for item in named}}))
    assert same == text


class _Ranked(tuple[int, ...]):
    """A tuple with an order of its own: it may leave two items unordered."""

    def __lt__(self, other: object) -> bool:
        return False


def test_a_set_of_tuples_with_an_order_of_their_own_left_unordered_is_still_refused(
    tmp_path: Path,
) -> None:
    bound = _shipped_data(tmp_path, "{{ value }}")
    value = {_Ranked((1,)), _Ranked((2,))}
    with pytest.raises(TemplateParamsError, match="neither less nor more"):
        bound.render({"value": value})


# -- 3. veridic show given a file that holds no document says what it held -----------------


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["show", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("content", [b"", b"\n  \n"], ids=["empty", "blank"])
def test_show_of_an_empty_file_says_it_is_empty_and_that_a_store_may_be_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    # An SQLite file the application opened but never wrote is empty too.
    path = tmp_path / "audit.db"
    path.write_bytes(content)
    code, out, err = _show(capsys, str(path))
    assert (code, out) == (EXIT_USAGE, "")
    assert "is empty" in err
    assert "audit store" in err
    assert "postgresql://" in err
    assert "not JSON" not in err


def test_show_of_a_plain_text_file_says_it_holds_no_json_and_that_a_store_may_be_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello world\n" * 1000, encoding="utf-8")
    code, out, err = _show(capsys, str(path))
    assert (code, out) == (EXIT_USAGE, "")
    assert "not JSON" in err
    assert "if you meant an audit store" in err
    assert "hello world" in err  # what it held, clipped
    assert len(err) < 1000  # quoted clipped, not the whole file


# -- 4. veridic show -o never writes over what it shows ------------------------------------


def _store(path: Path) -> Path:
    """An audit store a real gateway run wrote."""
    registry = Registry("weather")

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Tell the weather in a city.

        Args:
            city: The city.
        """
        return "sunny"

    view = registry.view()
    sink = SQLiteAuditSink(path)
    gateway = ModelGateway(ScriptedProvider([{"text": "Sunny."}]), audit=sink)
    prompt = Composer().system(instruction("You report the weather.")).user("Oslo?").build()
    gateway.send(prompt, view, request_id="req-7")
    sink.close()
    return path


def test_show_refuses_to_write_its_view_over_the_store_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # veridic show audit.db -o audit.db replaced the audit store with a text listing.
    store = _store(tmp_path / "audit.db")
    before = store.read_bytes()
    code, out, err = _show(capsys, str(store), "-o", str(store))
    assert (code, out) == (EXIT_USAGE, "")
    assert "is the file it shows" in err
    assert store.read_bytes() == before


def test_show_refuses_to_write_over_the_document_it_reads_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "prompt.json"
    prompt = Composer().system(instruction("Be brief.")).user("Hi").build()
    document.write_text(prompt.to_document(), encoding="utf-8")
    link = tmp_path / "view.txt"
    link.symlink_to(document)
    code, out, err = _show(capsys, str(document), "-o", str(link))
    assert (code, out) == (EXIT_USAGE, "")
    assert "is the file it shows" in err
    assert document.read_text(encoding="utf-8") == prompt.to_document()


def test_show_says_when_its_output_replaced_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "prompt.json"
    prompt = Composer().system(instruction("Be brief.")).user("Hi").build()
    document.write_text(prompt.to_document(), encoding="utf-8")
    page = tmp_path / "map.html"
    code, out, _ = _show(capsys, str(document), "--format", "html", "-o", str(page))
    assert (code, out) == (EXIT_CLEAN, f"wrote {page}\n")
    code, out, _ = _show(capsys, str(document), "--format", "html", "-o", str(page))
    assert (code, out) == (EXIT_CLEAN, f"wrote {page}, replacing the file that was there\n")


# -- 5. veridic mcp pin -o writes as the other commands' -o do -----------------------------


_SERVER_SCRIPT = Path(__file__).parent / "_mcp_tools_server.py"


@pytest.fixture
def pin_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``outputs4_servers:TOOLS``: a real MCP server (a subprocess) declared in a module."""
    spec = tmp_path / "tools.json"
    schema = {"type": "object"}
    tool = {"name": "search", "description": "Search the issues.", "input_schema": schema}
    spec.write_text(json.dumps([tool]))
    (tmp_path / "outputs4_servers.py").write_text(
        "import sys\n"
        "from veridic.integrations.mcp import stdio\n"
        f"TOOLS = stdio('tools', sys.executable, {str(_SERVER_SCRIPT)!r}, "
        f"env={{'VERIDIC_TEST_MCP_SPEC': {str(spec)!r}}})\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "outputs4_servers:TOOLS"


def test_mcp_pin_writes_into_a_folder_it_makes_as_show_and_manifest_do(
    pin_target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # -o pins/tools.json raised a bare FileNotFoundError (a traceback, exit 1).
    pins = tmp_path / "pins" / "tools.json"
    assert main(["mcp", "pin", pin_target, "-o", str(pins)]) == EXIT_CLEAN
    assert "recorded 1 tool" in capsys.readouterr().out
    assert json.loads(pins.read_text(encoding="utf-8"))["server"] == "tools"


def test_mcp_pin_to_a_path_it_cannot_write_is_a_usage_error(
    pin_target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "taken"
    folder.mkdir()
    assert main(["mcp", "pin", pin_target, "-o", str(folder)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"cannot write {folder}" in err
    assert "Traceback" not in err


# -- 6. veridic show --format html on standard output obeys no workflow command ------------


def test_show_html_on_standard_output_gives_a_ci_log_no_workflow_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The text and JSON views were made inert for a GitHub Actions log; the page printed
    # each line of a user turn or a verbatim block as it was, "::error ..." and all.
    hostile = "hello\n::error file=app.py,line=1::all clear\n  ::add-mask::x\n##[warning]y"
    prompt = (
        Composer()
        .system(instruction("Be brief."))
        .user(hostile)
        .data("ticket:7", untrusted("a\n::stop-commands::t", source="t"), mode="verbatim")
        .build()
    )
    document = tmp_path / "prompt.json"
    document.write_text(prompt.to_document(), encoding="utf-8")
    code, out, _ = _show(capsys, str(document), "--format", "html")
    assert code == EXIT_CLEAN
    assert not [line for line in out.split("\n") if line.lstrip().startswith("::")]
    assert "##[" not in out
    # The same page to a browser: only character references differ.
    its_page = PromptDocument.from_json(prompt.to_document()).to_html()
    assert out.replace("&#58;", ":").replace("&#91;", "[") == its_page
    page = tmp_path / "map.html"
    _show(capsys, str(document), "--format", "html", "-o", str(page))
    assert page.read_text(encoding="utf-8") == its_page  # a file is the page as it is


# -- second read -----------------------------------------------------------------------------


_KEY = "k" * 5000  # an untrusted value a template uses as a key or an attribute name


@pytest.mark.parametrize(
    "body",
    [
        instruction("{{ {}[value] }}"),
        instruction("{{ {}[value] | upper }}"),
        instruction("{{ 'text' | attr(value) }}"),
    ],
    ids=["item", "item-filtered", "attr"],
)
def test_a_render_error_from_jinja2_quotes_the_untrusted_name_clipped(
    tmp_path: Path, body: TrustedInstruction
) -> None:
    # jinja2's UndefinedError quotes the key it missed; a value used as one went whole into
    # the TemplateError (5000 characters here), where every other render error is clipped.
    stored = Templates(tmp_path).data_from_source(body, params=Anything)
    for bound in (_shipped_data(tmp_path, str(body)), stored):
        with pytest.raises(TemplateError, match="failed to render") as caught:
            bound.render({"value": _KEY})
        assert "k" * 200 not in str(caught.value)
        assert "kkkk" in str(caught.value)  # the name is still quoted, clipped
        assert type(caught.value.__cause__).__name__ == "UndefinedError"


def test_a_sandbox_error_quotes_the_untrusted_attribute_name_clipped(tmp_path: Path) -> None:
    # The sandbox's SecurityError quotes the attribute it refused, here named by a value.
    bound = Templates(tmp_path).data_from_source(
        instruction("{{ value | attr('_' ~ value.name) }}"), params=Anything
    )
    value = SimpleNamespace(name=_KEY, **{f"_{_KEY}": 1})
    with pytest.raises(TemplateSandboxError, match="sandbox forbids") as caught:
        bound.render({"value": value})
    assert "k" * 200 not in str(caught.value)


def test_a_template_error_a_filter_raised_in_a_macro_is_not_wrapped_again(
    tmp_path: Path,
) -> None:
    # |xmlattr's TemplateError, raised inside a macro the template calls, reaches the caller
    # as it was raised: one message, not one TemplateError quoting another.
    bound = _shipped_data(
        tmp_path, "{% macro tag(a) %}<p{{ a | xmlattr }}>{% endmacro %}\n{{ tag(value) }}\n"
    )
    with pytest.raises(TemplateError) as caught:
        bound.render({"value": {"a b": "x"}})
    assert str(caught.value).count("failed to render") == 0
    assert str(caught.value).count("|xmlattr") == 1
    assert isinstance(caught.value.__cause__, ValueError)


def test_show_html_on_a_standard_output_not_in_utf_8_is_the_same_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page says it is UTF-8 (<meta charset="utf-8">). On a cp1252 pipe (Windows) "é"
    # went out as the byte 0xE9, which a browser reading UTF-8 shows as U+FFFD, and a chip's
    # "⟦" as the six letters "\u27e6": the page piped to a file was not the page.
    prompt = (
        Composer()
        .system(instruction("Be brief."))
        .user(untrusted("café \u202eevil\u202c \u4e2d", source="ticket:\u00e9"))
        .build()
    )
    document = tmp_path / "prompt.json"
    document.write_text(prompt.to_document(), encoding="utf-8")
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="cp1252", newline="\n")
    monkeypatch.setattr(sys, "stdout", stream)
    assert main(["show", str(document), "--format", "html"]) == EXIT_CLEAN
    stream.flush()
    page = raw.getvalue().decode("utf-8")  # as the browser reads it: the page's charset
    assert "\\u" not in page

    def shown(text: str) -> str:  # what a browser shows for each character reference
        return re.sub(r"&#(\d+);", lambda match: chr(int(match[1])), text)

    assert shown(page) == shown(PromptDocument.from_json(prompt.to_document()).to_html())


def test_show_to_a_device_does_not_say_it_replaced_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "-o /dev/null" said "wrote /dev/null, replacing the file that was there": no file was.
    document = tmp_path / "prompt.json"
    document.write_text(Composer().user("Hi").build().to_document(), encoding="utf-8")
    code, out, _ = _show(capsys, str(document), "--format", "json", "-o", os.devnull)
    assert (code, out) == (EXIT_CLEAN, f"wrote {os.devnull}\n")


def test_show_of_a_folder_with_o_naming_it_says_it_is_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "veridic show out -o out" said "-o out is the file it shows": no file is shown.
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = _show(capsys, str(folder), "-o", str(folder))
    assert (code, out) == (EXIT_USAGE, "")
    assert "is the file it shows" not in err
    assert "is not a file" in err  # what reading it says


def test_show_of_json_nested_too_deeply_is_a_usage_error_without_the_store_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Asking whether the file was JSON at all, for the store hint, let json's bare
    # RecursionError out as a traceback (exit 1) where from_json() had said what was wrong.
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000, encoding="ascii")
    code, out, err = _show(capsys, str(deep))
    assert (code, out) == (EXIT_USAGE, "")
    assert "nested too deeply" in err
    assert "if you meant an audit store" not in err  # JSON, though too deep to read
