"""``veridic lint`` and ``veridic check``: each kind of finding, on a fixture application.

The commands run as subprocesses in tests/cli_fixtures; the near-duplicate
join is also checked in-process against the naive all-pairs comparison.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from _source_docstring import written_in_source
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import (
    InstructionField,
    Registry,
    Risk,
    RiskFloorError,
    ToolView,
    TrustedInstruction,
    TrustPolicy,
)
from veridic.lint import check_projections, lint
from veridic.tools._similarity import naive_similar_pairs, similar_pairs

FIXTURES = Path(__file__).parent / "cli_fixtures"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        check=False,
    )


def report(*args: str) -> tuple[int, dict[str, list[dict[str, object]]]]:
    done = run(*args, "--format", "json")
    return done.returncode, json.loads(done.stdout)


def kinds(items: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(i["kind"], i.get("tool"), i["line"]) for i in items]


def test_each_doc_gap_is_a_finding_naming_tool_file_and_line() -> None:
    code, found = report("lint", "gaps_app:registry")
    assert code == 1
    assert sorted(kinds(found["findings"]), key=str) == sorted(
        [
            ("missing-description", "list_users", 10),
            ("undocumented-parameter", "list_users", 10),
            ("placeholder-description", "list_teams", 15),
            ("undocumented-parameter", "find_order", 25),
            ("unknown-parameter", "find_order", 25),
        ],
        key=str,
    )
    assert {f["file"] for f in found["findings"]} == {"gaps_app.py"}


def test_doc_gap_text_output_is_grouped_by_kind() -> None:
    done = run("lint", "gaps_app:registry")
    assert done.returncode == 1
    assert "  placeholder-description (1)\n    gaps_app.py:15  list_teams\n" in done.stdout
    assert "  undocumented-parameter (2)\n" in done.stdout


def test_near_duplicate_descriptions_fail_with_their_score() -> None:
    code, found = report("lint", "duplicates_app:registry")
    assert code == 1
    [finding] = found["findings"]
    assert (finding["kind"], finding["tool"], finding["other"]) == (
        "near-duplicate",
        "archive_ticket",
        "close_ticket",
    )
    assert isinstance(finding["score"], float)
    assert 0.7 <= finding["score"] < 1
    message = str(finding["message"])
    assert "near-identical descriptions" in message  # what
    assert (finding["file"], finding["line"]) == ("duplicates_app.py", 10)  # where
    assert "duplicates_app.py:20" in message  # where the other one is
    assert 'siblings = [["archive_ticket", "close_ticket"]]' in message  # what to do


def test_acknowledged_siblings_are_listed_and_do_not_fail() -> None:
    code, found = report("lint", "duplicates_app:registry", "--config", "siblings.toml")
    assert code == 0
    assert found["findings"] == []
    assert [i["kind"] for i in found["listed"]] == ["near-duplicate-acknowledged"]


def test_raising_the_threshold_above_the_score_clears_the_pair(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.veridic]\nsimilarity-threshold = 0.95\n")
    code, found = report("lint", "duplicates_app:registry", "--config", str(config))
    assert code == 0
    assert found["findings"] == []


def test_sibling_entry_naming_no_tool_is_a_warning(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.veridic]\nsiblings = [["find_ticket", "find_tikcet"]]\n')
    code, found = report("lint", "clean_app:registry", "--config", str(config))
    assert code == 0
    [warning] = found["warnings"]
    assert (warning["kind"], warning["tool"]) == ("unknown-sibling", "find_tikcet")
    assert "remove it or fix the name" in str(warning["message"])


def test_risk_below_its_floor_is_a_finding_with_rule_and_fix() -> None:
    code, found = report("lint", "floor_app:registry")
    assert code == 1
    [finding] = found["findings"]
    assert kinds([finding]) == [("risk-floor", "purge_user", 10)]
    message = str(finding["message"])
    assert "declares risk mid" in message  # what
    assert "an irreversible tool must be high risk" in message  # the rule
    assert "declare risk=Risk.HIGH" in message  # what to do


def test_high_risk_tool_not_saying_what_is_irreversible_is_a_warning() -> None:
    code, found = report("lint", "unstated_app:registry")
    assert code == 0
    [warning] = found["warnings"]
    assert kinds([warning]) == [("irreversibility-unstated", "purge_user", 10)]
    assert "cannot be undone" in str(warning["message"])


def test_check_reports_a_floor_violation_once_per_tool() -> None:
    code, found = report("check", "floor_app:registry")
    assert code == 1
    assert kinds(found["findings"]) == [("risk-floor", "purge_user", 10)]


def test_check_lists_components_that_did_not_start() -> None:
    code, found = report("check", "component_app:registry")
    assert code == 0
    [item] = found["listed"]
    assert item["kind"] == "component-down"
    assert "'Pro extension' did not start here (requires core >= 2.3)" in str(item["message"])


def test_check_runs_the_lint() -> None:
    code, found = report("check", "gaps_app:registry")
    assert code == 1
    assert "placeholder-description" in {f["kind"] for f in found["findings"]}


def test_lint_of_a_view_covers_its_tools_in_process() -> None:
    registry = Registry("in-process")

    @registry.tool(kind="query")
    def list_users(team: str) -> str:
        """List the users of a team with their roles.

        Args:
            team: The team whose users to list.
        """
        return team

    @registry.tool(kind="query")
    def list_members(team: str) -> str:
        """List the users of a team with their roles.

        Args:
            team: The team whose users to list.
        """
        return team

    found = lint(registry.view())
    assert [(f.code, f.tool, f.other) for f in found] == [
        ("near-duplicate", "list_members", "list_users")
    ]
    assert found[0].score is not None
    assert found[0].score > 0.7  # the same words; the names (users, members) differ
    assert "their descriptions say the same: only the names tell them apart" in found[0].message


def test_capability_section_that_omits_a_tool_is_a_coupling_finding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = Registry("coupling")

    @registry.tool(kind="query")
    def find_user(email: str) -> str:
        """Find a user by email address.

        Args:
            email: The address to look up.
        """
        return email

    view = registry.view()
    real = ToolView.capability_section

    def without_find_user(self: ToolView) -> TrustedInstruction:
        text = real(self)
        kept = "\n".join(line for line in text.splitlines() if "find_user" not in line)
        return instruction_like(kept)

    monkeypatch.setattr(ToolView, "capability_section", without_find_user)
    [finding] = check_projections(view)
    assert finding.code == "coupling"
    assert "dispatchable but not listed: find_user" in finding.message
    assert "view.capability_section()" in finding.message


def instruction_like(text: str) -> TrustedInstruction:
    from veridic import TrustPolicy

    return TrustPolicy("test-edited-section").vouch(text, reason="a section edited by the test")


_WORDS = st.sampled_from(
    ["delete", "user", "ticket", "archive", "close", "the", "open", "queue", "read", "a", "x"]
)


@given(
    descriptions=st.dictionaries(
        st.from_regex(r"[a-z]{1,6}", fullmatch=True),
        st.lists(_WORDS, max_size=12).map(" ".join),
        max_size=12,
    ),
    threshold=st.floats(min_value=0.05, max_value=1.0),
)
def test_property_prefix_filtered_join_finds_exactly_the_naive_pairs(
    descriptions: dict[str, str], threshold: float
) -> None:
    assert similar_pairs(descriptions, threshold=threshold) == naive_similar_pairs(
        descriptions, threshold=threshold
    )


# --- lint and boot agree on the risk floors -------------------------------------------------


class SavedPrompt(BaseModel):
    name: str
    content: InstructionField


class SavedNote(BaseModel):
    text: str


@dataclass(frozen=True)
class FloorTool:
    name: str
    kind: Literal["query", "write"]
    risk: Risk | None
    irreversible: bool
    instruction_argument: bool  # an argument holds an instruction field
    writes: tuple[type[BaseModel], ...]
    external: bool

    def floors_broken(self) -> int:
        """The oracle: how many floor rules this declaration breaks, written out rule by rule."""
        if self.risk is None or self.risk is Risk.HIGH:
            return 0
        write = self.kind == "write"
        return sum(
            (
                self.irreversible,
                write and self.instruction_argument,
                write and SavedPrompt in self.writes,
            )
        )


KINDS: tuple[Literal["query", "write"], ...] = ("query", "write")


@st.composite
def floor_tools(draw: st.DrawFn) -> list[FloorTool]:
    """Up to 6 tools, function or external, with every combination of effects and declared risk."""
    names = draw(
        st.lists(st.from_regex(r"[a-z][a-z_]{0,9}", fullmatch=True), max_size=6, unique=True)
    )
    tools = []
    for name in names:
        kind = draw(st.sampled_from(KINDS))
        external = draw(st.booleans())
        write = kind == "write"
        tools.append(
            FloorTool(
                name=name,
                kind=kind,
                risk=draw(st.none() | st.sampled_from(list(Risk))),
                irreversible=write and draw(st.booleans()),
                # A function query taking instruction text is refused at boot (it would
                # mint the model's output); an external one's arguments are never minted.
                instruction_argument=(write or external) and draw(st.booleans()),
                writes=draw(st.sampled_from([(), (SavedNote,), (SavedPrompt,)]))
                if write and not external
                else (),
                external=external,
            )
        )
    return tools


def floor_registry(tools: list[FloorTool]) -> Registry:
    registry = Registry("floors")
    for plan in tools:
        if plan.external:
            content: dict[str, object] = {"type": "string"}
            if plan.instruction_argument:
                content["x-veridic-instruction"] = True
            registry.external(
                name=plan.name,
                description="Store a piece of content for later.",
                input_schema={"type": "object", "properties": {"content": content}},
                handler=lambda arguments: arguments,
                kind=plan.kind,
                risk=plan.risk,
                irreversible=plan.irreversible,
            )
        else:
            registry.tool(
                kind=plan.kind,
                risk=plan.risk,
                irreversible=plan.irreversible,
                writes=plan.writes,
                name=plan.name,
            )(_floor_handler(plan.instruction_argument))
    return registry


def _floor_handler(instruction_argument: bool) -> Callable[..., None]:
    if instruction_argument:

        def save(prompt: SavedPrompt) -> None:
            """Store a piece of content for later.

            Args:
                prompt: What to store.
            """

        return save

    def store(value: int = 0) -> None:
        """Store a piece of content for later.

        Args:
            value: What to store.
        """

    return store


def refused_at_boot(registry: Registry) -> tuple[Counter[str], str]:
    """The tools the registry's boot refuses (once per floor broken), and its message."""
    try:
        registry.boot()
    except RiskFloorError as error:
        message = str(error)
        return Counter(re.findall(r"tool '(\w+)' \(.*?\) declares risk", message)), message
    return Counter(), ""


@given(floor_tools())
def test_property_lint_and_boot_find_the_same_floor_violations(tools: list[FloorTool]) -> None:
    registry = floor_registry(tools)
    linted = Counter(f.tool for f in lint(registry) if f.code == "risk-floor")
    refused, message = refused_at_boot(registry)
    expected = Counter({t.name: t.floors_broken() for t in tools if t.floors_broken()})
    assert linted == refused == expected
    if refused:
        count = sum(refused.values())
        noun = "violation" if count == 1 else "violations"
        assert message.startswith(f"{count} risk floor {noun} at boot")


# -- a write that says it cannot be undone, declared reversible ------------------------------


def _write(description: str, *, irreversible: bool = False, risk: Risk | None = None) -> Registry:
    registry = Registry()

    def delete_customer(customer_id: int) -> None:
        """(docstring written by written_in_source)"""
        return

    written_in_source(delete_customer, f"{description}\n\nArgs:\n    customer_id: The customer.")
    registry.tool(kind="write", irreversible=irreversible, risk=risk)(delete_customer)
    return registry


@pytest.mark.parametrize(
    ("description", "said"),
    [
        ("Permanently delete a customer and all their data.", "Permanently"),
        ("Delete a customer. This can\u2019t be undone.", "can\u2019t be undone"),
        ("Hard-delete a customer's records.", "Hard-delete"),
        ("Erase a customer; the data is unrecoverable afterwards.", "unrecoverable"),
    ],
)
def test_a_write_that_says_it_is_permanent_but_is_declared_reversible_is_a_warning(
    description: str, said: str
) -> None:
    # Before: it linted clean, ran at mid risk, and allow_always() accepted it.
    (finding,) = [f for f in lint(_write(description)) if f.code == "irreversibility-undeclared"]
    assert finding.severity == "warning"
    assert finding.tool == "delete_customer"
    assert f"says {said!r}" in finding.message
    assert "declare it irreversible=True" in finding.message


@pytest.mark.parametrize(
    ("description", "irreversible", "risk"),
    [
        ("Permanently delete a customer and all their data.", True, None),
        ("Permanently delete a customer and all their data.", False, Risk.HIGH),
        ("Archive a customer; nothing is deleted permanently.", False, None),
        ("Archive a customer. It is not permanent: restore it from the archive.", False, None),
        ("Send the customer the final invoice.", False, None),
        ("Keep a customer's note forever in the CRM.", False, None),
    ],
)
def test_a_write_declared_as_it_describes_itself_has_no_such_warning(
    description: str, irreversible: bool, risk: Risk | None
) -> None:
    codes = [f.code for f in lint(_write(description, irreversible=irreversible, risk=risk))]
    assert "irreversibility-undeclared" not in codes


# --- text UTF-8 cannot hold ------------------------------------------------------------------


_LINT_TEST = TrustPolicy("lint-test")


def _weather_registry(description: str) -> Registry:
    registry = Registry("weather")

    @registry.tool(
        kind="query",
        description=_LINT_TEST.vouch(description, reason="a description the test writes"),
    )
    def get_weather(city: str) -> str:
        """Unused summary.

        Args:
            city: The city.
        """
        return city

    return registry


def test_a_description_utf_8_cannot_hold_is_a_finding_naming_the_tool() -> None:
    # A lone surrogate (an escape such as \ud800 typed in a docstring) passed the lint, and
    # then crashed "veridic manifest" and any provider's request that sent the tool.
    found = [
        f for f in lint(_weather_registry("Tell the \ud800 weather.")) if f.severity == "error"
    ]
    assert [(f.code, f.tool) for f in found] == [("unencodable-text", "get_weather")]
    assert "U+D800" in found[0].message
    assert "description" in found[0].message
    assert found[0].file is not None  # where the tool is defined, to fix it there


def test_a_parameter_description_utf_8_cannot_hold_is_a_finding_naming_its_place() -> None:
    registry = Registry("weather")

    @registry.tool(kind="query")
    def get_weather(city: str) -> str:
        """Tell the weather in a city.

        Args:
            city: The \udfff city.
        """
        return city

    found = [f for f in lint(registry) if f.code == "unencodable-text"]
    assert [f.tool for f in found] == ["get_weather"]
    assert "U+DFFF" in found[0].message
    assert "properties.city.description" in found[0].message


@given(
    before=st.text(st.characters(codec="utf-8"), max_size=20),
    surrogate=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    after=st.text(st.characters(codec="utf-8"), max_size=20),
)
def test_property_a_description_is_a_finding_exactly_when_utf_8_cannot_hold_it(
    before: str, surrogate: str, after: str
) -> None:
    def codes(description: str) -> list[str]:
        return [
            f.code for f in lint(_weather_registry(description)) if f.code == "unencodable-text"
        ]

    assert codes(f"Tell the weather. {before}{after}") == []
    assert codes(f"Tell the weather. {before}{surrogate}{after}") == ["unencodable-text"]


def test_lint_command_reports_a_description_utf_8_cannot_hold(tmp_path: Path) -> None:
    (tmp_path / "surrogate_app.py").write_text(
        "from veridic import Registry\n\nregistry = Registry('weather')\n\n\n"
        "@registry.tool(kind='query')\ndef get_weather(city: str) -> str:\n"
        '    """Tell the weather \\ud800 in a city.\n\n    Args:\n        city: The city.\n'
        '    """\n    return city\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "veridic", "lint", "surrogate_app:registry"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "unencodable-text" in done.stdout
    assert "get_weather" in done.stdout
    assert "Traceback" not in done.stderr
