"""``--format markdown``: a report for a pull-request comment or ``$GITHUB_STEP_SUMMARY``.

A finding's message may quote text a model or a user wrote (an MCP server's
tool description, a vouch's reason, a manifest value), so every cell must
stay one cell of one row and render no HTML. Each test writes a small
application into a temporary project and runs ``veridic.cli.main`` in this
process; the tables are read back with GitHub's rules for cells (an
unescaped ``|`` ends a cell, ``\\|`` does not, even inside a code span) and
code spans (a run of N backticks ends at the next run of exactly N).
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from veridic.checks.audit_report import shown
from veridic.checks.markdown import code_cell, render_markdown
from veridic.cli import main

HOSTILE = (
    "TODO | `rm -rf` <script>alert(1)</script>\n| forged | row |\n<img src=x onerror=alert(2)>"
)

APP = f'''
from veridic import Registry

registry = Registry("app")

SEARCH_SCHEMA = {{
    "type": "object",
    "properties": {{"q": {{"type": "string", "description": "What to search for."}}}},
    "required": ["q"],
}}

# An MCP server wrote this description: the model's or a stranger's text.
registry.external(
    name="web_search",
    description={HOSTILE!r},
    input_schema=SEARCH_SCHEMA,
    handler=dict,
    kind="query",
    source="mcp:search",
)


@registry.tool(kind="query")
def find_user(email: str) -> str:
    """Find a user by email address.

    Args:
        email: The address to look up.
    """
    return email
'''

CLEAN = '''
from veridic import Registry

registry = Registry("clean")


@registry.tool(kind="query")
def find_user(email: str) -> str:
    """Find a user by email address.

    Args:
        email: The address to look up.
    """
    return email
'''

WARNED = '''

@registry.tool(kind="write", irreversible=True)
def purge_user(user_id: int) -> None:
    """Remove a user and everything they own.

    Args:
        user_id: The user to remove.
    """
'''

Write = Callable[[str], str]
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_TICKS = re.compile(r"`+")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr("veridic.config._current", None)
    return tmp_path


@pytest.fixture
def app(project: Path) -> Iterator[Write]:
    written: list[str] = []

    def write(source: str) -> str:
        name = f"app_{uuid.uuid4().hex[:12]}"
        (project / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def cells(row: str) -> list[str]:
    """A table row's cells as GitHub splits them."""
    assert row.startswith("| "), row
    assert row.endswith(" |"), row
    return [cell.strip() for cell in _CELL_SPLIT.split(row[1:-1])]


def outside_code(text: str) -> str:
    """``text`` without its code spans: what GitHub would render as Markdown and HTML."""
    out, at = [], 0
    while True:
        opening = _TICKS.search(text, at)
        if opening is None:
            out.append(text[at:])
            return "".join(out)
        fence = opening.group()
        closing = next(
            (m for m in _TICKS.finditer(text, opening.end()) if m.group() == fence), None
        )
        if closing is None:  # an unmatched run is literal backticks
            out.append(text[at : opening.end()])
            at = opening.end()
            continue
        out.append(text[at : opening.start()])
        at = closing.end()


def tables(markdown: str) -> list[list[list[str]]]:
    """Each table (consecutive lines starting with ``|``) as rows of cells, separator dropped."""
    found: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in markdown.split("\n"):
        if line.startswith("|"):
            if current is None:
                current = []
                found.append(current)
            if not set(line) <= set("|-"):
                current.append(cells(line))
        else:
            current = None
    return found


def assert_inert(markdown: str) -> None:
    """No HTML tag, image or link outside a code span."""
    rendered = outside_code(markdown)
    assert "<" not in rendered.replace("&lt;", ""), rendered
    assert "](" not in rendered


def test_a_hostile_description_stays_in_its_cell_and_renders_no_html(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "lint", f"{app(APP)}:registry", "--format", "markdown")
    assert code == 1
    (findings,) = tables(out)
    head, *rows = findings
    assert head == ["severity", "rule", "tool", "file:line", "message", "how to fix"]
    assert all(len(row) == 6 for row in rows)
    placeholder = next(row for row in rows if row[1] == "`placeholder-description`")
    assert placeholder[2] == "`web_search`"
    assert placeholder[3] == "—"  # a built-in handler: no file, no line
    message = placeholder[4]
    assert message.startswith("`` ")
    assert message.endswith(" ``")
    assert "\\|" in message
    assert "\n" not in message
    assert "`rm -rf`" in message
    assert "<script>" in message  # shown, as text, inside the code span
    assert_inert(out)
    assert not any(line.startswith("| forged") for line in out.split("\n"))


def test_the_summary_counts_each_severity_and_gives_the_verdict(
    app: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(APP + WARNED)
    _, out = run(capsys, "lint", f"{name}:registry", "--format", "markdown")
    lines = out.split("\n")
    assert lines[0] == f"### veridic lint `{name}:registry`"
    assert lines[2] == "1 finding, 1 warning: **failed** (exit 1)."
    warned = app(CLEAN + WARNED)
    code, out = run(capsys, "lint", f"{warned}:registry", "--format", "markdown")
    assert (code, out.split("\n")[2]) == (0, "1 warning: **clean** (exit 0).")
    code, out = run(capsys, "lint", f"{warned}:registry", "--format", "markdown", "--strict")
    assert (code, out.split("\n")[2]) == (
        1,
        "1 warning: **failed (--strict: warnings fail)** (exit 1).",
    )


def test_an_empty_result_says_no_findings(app: Write, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "lint", f"{app(CLEAN)}:registry", "--format", "markdown")
    assert code == 0
    assert "no findings: **clean** (exit 0)." in out
    assert tables(out) == []


def test_a_hostile_vouch_reason_in_hatches_stays_in_its_cell(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "ok | `x` <script>alert(1)</script>\\n| forged | row |"
    (project / "legacy.py").write_text(
        "from veridic import TrustPolicy\n\n"
        'legacy = TrustPolicy("legacy-prompts")\n'
        f'vouched = legacy.vouch(text, reason="{reason}")\n'
    )
    code, out = run(capsys, "hatches", "legacy.py", "--format", "markdown")
    assert code == 0  # listed for review, not findings
    (found,) = tables(out)
    rows = found[1:]
    assert all(len(row) == 6 for row in rows)
    vouch = next(row for row in rows if row[1] == "`vouch`")
    assert (vouch[0], vouch[3]) == ("listed", "`legacy.py:4`")
    assert "<script>" in vouch[4]
    assert "2 listed for review: **clean** (exit 0)." in out
    assert_inert(out)


def _committed(project: Path, capsys: pytest.CaptureFixture[str], name: str) -> Path:
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    path = project / "manifest.json"
    data = json.loads(path.read_text())
    tool = data["tools"]["find_user"]
    tool["risk"] = "mid"
    tool["description"] = "Find | `anyone` <script>alert(1)</script>\nby email."
    data["tools"]["old_tool"] = {**tool, "description": "Gone."}
    data["risk_counts"] = {"low": 0, "mid": 2, "high": 0}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def test_manifest_check_prints_drift_as_a_table_of_tool_field_old_new(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(CLEAN)
    _committed(project, capsys, name)
    code, out = run(
        capsys, "manifest", f"{name}:registry", "--check", "manifest.json", "--format", "markdown"
    )
    assert code == 1
    assert "#### Manifest drift (4 changes)" in out
    (drift,) = tables(out)
    head, *rows = drift
    assert head == ["tool", "field", "old", "new"]
    assert all(len(row) == 4 for row in rows)
    by_field = {(row[0], row[1]): (row[2], row[3]) for row in rows}
    assert by_field[("`find_user`", "`risk`")] == ("`mid`", "`low`")
    old, new = by_field[("`find_user`", "`description`")]
    assert "\\|" in old
    assert "<script>" in old
    assert "\\n" in old
    assert new == "`Find a user by email address.`"
    assert by_field[("`old_tool`", "`risk`")] == ("`mid`", "_(absent)_")
    assert by_field[("`old_tool`", "`irreversible`")] == ("`false`", "_(absent)_")
    assert by_field[("risk counts", "`low`")] == ("`0`", "`1`")
    assert by_field[("risk counts", "`mid`")] == ("`2`", "`0`")
    assert_inert(out)


def test_a_drifted_key_of_a_megabyte_is_clipped_in_its_cell(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The keys of a changed table (a committed manifest's risk counts) were shown whole:
    escaped, but a key of a megabyte made a cell, and a comment, of a megabyte (GitHub
    refuses a comment past 65536 characters, so the whole report was lost)."""
    name = app(CLEAN)
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    path = project / "manifest.json"
    data = json.loads(path.read_text())
    huge = "@acme " + "x" * 1_000_000
    data["risk_counts"] = {**data["risk_counts"], huge: 1}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    code, out = run(
        capsys, "manifest", f"{name}:registry", "--check", "manifest.json", "--format", "markdown"
    )
    assert code == 1
    (drift,) = tables(out)
    fields = [row[1] for row in drift[1:] if row[0] == "risk counts"]
    assert fields == [code_cell(huge, 80)]
    assert fields[0].endswith(f"… ({len(huge)} chars)`")
    assert len(out) < 2000
    assert_inert(out)


def test_manifest_check_keeps_its_text_output_by_default(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(CLEAN)
    _committed(project, capsys, name)
    code, out = run(capsys, "manifest", f"{name}:registry", "--check", "manifest.json")
    assert code == 1
    assert 'tool find_user: risk changed from "mid" to "low"' in out
    assert "| tool | field |" not in out
    assert out.rstrip().endswith("result: failed (exit 1)")


def test_check_markdown_has_the_findings_and_the_drift(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(APP)
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    path = project / "manifest.json"
    data = json.loads(path.read_text())
    data["tools"]["find_user"]["kind"] = "write"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    code, out = run(
        capsys, "check", f"{name}:registry", "--manifest", "manifest.json", "--format", "markdown"
    )
    assert code == 1
    findings, drift = tables(out)
    assert any(row[1] == "`placeholder-description`" for row in findings[1:])
    assert drift[1:] == [["`find_user`", "`kind`", "`write`", "`query`"]]
    assert_inert(out)


def test_a_clean_manifest_check_says_so(
    app: Write, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = app(CLEAN)
    assert run(capsys, "manifest", f"{name}:registry", "-o", "manifest.json")[0] == 0
    code, out = run(
        capsys, "manifest", f"{name}:registry", "--check", "manifest.json", "--format", "markdown"
    )
    assert code == 0
    assert "no findings: **clean** (exit 0)." in out
    assert "manifest.json matches the registry" in out
    assert tables(out) == []


class _RenderedText(HTMLParser):
    """The text of an HTML fragment GitHub would still scan for ``@mentions``, issue
    references and bare URLs: everything outside ``code``, ``pre`` and ``a``."""

    _SKIPPED = frozenset({"code", "pre", "a"})

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.text: list[str] = []
        self.code: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.depth += tag in self._SKIPPED

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag in self._SKIPPED

    def handle_data(self, data: str) -> None:
        (self.code if self.depth else self.text).append(data)


def rendered(markdown: str) -> _RenderedText:
    """``markdown`` through a CommonMark parser with tables, as GitHub reads it."""
    parser = _RenderedText()
    parser.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return parser


def test_outside_text_in_a_note_mentions_no_one_and_links_nothing() -> None:
    """A note quotes what a server or a model wrote: ``mcp pin --check`` adds the table of
    a rewritten description, ``probe`` the tool names the model called. As plain text,
    ``@acme/security-team`` in them notified a team from the pull request, ``#123``
    cross-referenced an issue and a bare URL was a link, all in veridic's words."""
    notes = [
        "MCP server 'docs': 1 difference from the pins.",
        "| `search` | description | `Search docs.` "
        "| `@acme/security-team ok #123 https://evil.example` |",
        "  @acme/security-team (3): substitution rate 1.00 (www.evil.example 3)",
        "```\n</pre><img src=https://evil.example/p.png> [!CAUTION]",
    ]
    out = render_markdown([], command="mcp pin", target="servers.toml", exit_code=1, notes=notes)
    seen = rendered(out)
    plain = "".join(seen.text)
    for forged in ("@acme", "#123", "evil.example", "<img", "CAUTION"):
        assert forged not in plain, forged
    code = "".join(seen.code)
    assert "@acme/security-team ok #123 https://evil.example" in code  # shown, not obeyed
    assert "</pre><img src=https://evil.example/p.png>" in code
    assert "\\n" in code  # the note's newline, escaped: it cannot end the block


OUTSIDE = (
    "@acme/security-team #123 GH-9 www.evil.example https://evil.example "
    "<https://x.evil.example> a@evil.example :warning: `x` **b** _i_ | <b>html</b>\n"
)
"""Outside text GitHub would act on as plain text: a team mention, cross-references, an
extended ``www.`` autolink, a bare URL, an autolink, an e-mail link, an emoji, emphasis,
HTML, and the characters that end a span, a cell or a row."""
_ACTED_ON = ("@acme", "#123", "GH-9", "evil.example", "warning", "<b>", "html", "**", "_i_")


class _Item:
    """A report item as the commands make them (the doctest of veridic.checks.markdown)."""

    def __init__(self, **fields: object) -> None:
        self.severity, self.kind, self.file, self.line = "error", OUTSIDE, OUTSIDE, 3
        self.subject, self.text, self.message = OUTSIDE, OUTSIDE, OUTSIDE
        self.data: tuple[tuple[str, object], ...] = ()
        self.__dict__.update(fields)


def test_outside_text_in_any_cell_mentions_no_one_and_links_nothing() -> None:
    """Every cell a finding or a drift fills from outside text (the rule, the tool, the
    file, the message, a drifted field and its old and new values, the target) is a code
    span: GitHub renders no mention, reference, autolink, ``www.`` link or HTML in it."""
    drift: list[tuple[str, str, dict[str, object]]] = [
        ("tool " + OUTSIDE, "changed", {"field": OUTSIDE, "before": OUTSIDE, "after": "x"}),
        ("component " + OUTSIDE, "added", {"after": {OUTSIDE: OUTSIDE}}),
        ("tool " + OUTSIDE, "changed", {"before": {OUTSIDE: OUTSIDE}, "after": {OUTSIDE: 1}}),
        ("tool " + OUTSIDE, "removed", {"before": OUTSIDE}),
    ]
    items = [_Item()] + [
        _Item(kind="drift", data=(("subject", subject), ("change", change), *values.items()))
        for subject, change, values in drift
    ]
    out = render_markdown(items, command="check", target=OUTSIDE, exit_code=1, notes=[OUTSIDE])
    seen = rendered(out)
    plain = "".join(seen.text)
    for acted_on in _ACTED_ON:
        assert acted_on not in plain, acted_on
    assert "@acme/security-team #123 GH-9 www.evil.example" in "".join(seen.code)


class _Blocks(HTMLParser):
    """The text of each ``pre`` block of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.blocks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "pre":
            self.inside = True
            self.blocks.append("")

    def handle_endtag(self, tag: str) -> None:
        self.inside = self.inside and tag != "pre"

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.blocks[-1] += data


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.text(alphabet=st.sampled_from("`~ \t\r\n\u2028\x00-#>a@é\U0001f600"), max_size=20)
        | st.sampled_from(["`" * 12, "~~~", "    code", "", "```text", "- x", "\r"]),
        min_size=1,
        max_size=6,
    )
)
def test_the_notes_are_one_code_block_whatever_they_hold(notes: list[str]) -> None:
    """Runs of backticks longer than any fixed fence, tildes, indented lines, a CR or a
    U+2028 alone, NUL, empty notes: the notes stay one code block, holding each note
    escaped on its own line, and nothing of them renders outside it."""
    out = render_markdown([], command="probe", target="app", exit_code=0, notes=notes)
    parsed = _Blocks()
    parsed.feed(MarkdownIt("commonmark").enable("table").render(out))
    assert parsed.blocks == ["".join(f"- {shown(note)}\n" for note in notes)]
    assert render_markdown([], command="probe", target="app", exit_code=0, notes=notes) == out


def _code_in_a_cell(cell: str) -> str:
    """The text of the code span ``cell`` as GitHub shows it in a table cell."""
    html = MarkdownIt("commonmark").enable("table").render(f"| a |\n|---|\n| {cell} |\n")
    match = re.search(r"<td><code>(.*)</code></td>", html, re.DOTALL)
    assert match is not None, html
    parsed = _RenderedText()
    parsed.feed(match.group(1))
    return "".join(parsed.text)


@given(st.text(alphabet=st.sampled_from(" `|a\\\n"), min_size=1, max_size=12))
def test_a_code_cell_shows_its_text_as_escaped_with_every_space(text: str) -> None:
    """GitHub strips one space from each end of a span that has one at both ends, unless
    it is all spaces: a name of one space padded to three showed three."""
    assert _code_in_a_cell(code_cell(text)) == shown(text)


def _drift_cells(before: str, after: str) -> tuple[str, str]:
    item = _Item(
        kind="drift",
        data=(
            ("subject", "tool t"),
            ("change", "changed"),
            ("field", "f"),
            ("before", before),
            ("after", after),
        ),
    )
    out = render_markdown([item], command="check", target="app", exit_code=1)
    (row,) = [line for line in out.splitlines() if line.startswith("| `t` |")]
    old, new = (cell.strip() for cell in re.split(r"(?<!\\)\|", row)[3:5])
    return old, new


@given(st.text(max_size=240), st.text(max_size=240))
@example("\x00" * 100 + "A", "\x00" * 100 + "B")
def test_a_changed_value_within_the_limit_is_shown_whole(before: str, after: str) -> None:
    """A value is shown whole up to 300 of its characters, and a cell is cut where two
    values first differ only past that. Measured in escaped characters, two texts of 101
    NULs and a letter were cut to a window that left out their first 85 characters."""
    old, new = _drift_cells(before, after)
    for cell, value in ((old, before), (new, after)):
        assert cell == (code_cell(value) if value else "_(empty)_")


@given(st.text(max_size=700), st.text(max_size=700))
@example("\x1b" * 650 + "A", "\x1b" * 650 + "B")
@example("", '""')
def test_two_different_values_never_show_alike(before: str, after: str) -> None:
    old, new = _drift_cells(before, after)
    assert (old == new) == (before == after)


def test_an_empty_value_and_two_quotes_show_differently() -> None:
    """An empty value was shown as the span of two quotes, as a value of two quotes is:
    a description changed from ``""`` to nothing showed no change."""
    assert _drift_cells("", '""') == ("_(empty)_", '`""`')
