"""The examples in docstrings and in the README run, and say what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import veridic
from veridic import (
    Composer,
    InstructionField,
    ProvenanceError,
    instruction,
    provenance,
    untrusted,
)

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(info.name for info in pkgutil.walk_packages(veridic.__path__, prefix="veridic."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    public = {name: getattr(veridic, name) for name in veridic.__all__}
    result = doctest.testmod(module, extraglobs=public, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"


def test_readme_examples_run() -> None:
    result = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 0
    assert result.failed == 0, "a README example printed something else"


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:12]
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)


def _table_codes(text: str, heading: str) -> set[str]:
    """The ``veridic-...`` codes in the first column of the first table below ``heading``."""
    lines = text.splitlines()
    codes: set[str] = set()
    for line in lines[lines.index(heading) + 1 :]:
        if line.startswith("|"):
            codes.update(re.findall(r"^\| `(veridic-[a-z]+)`", line))
        elif codes:
            break
    return codes


def test_every_plugin_error_code_is_in_the_readme_and_the_mypy_page() -> None:
    """A new user reads these tables to learn what the plugin rejects: none may be missing."""
    from mypy.errorcodes import ErrorCode

    from veridic.mypy import errorcodes

    defined = {value.code for value in vars(errorcodes).values() if isinstance(value, ErrorCode)}
    assert len(defined) >= 6
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "mypy.md").read_text(encoding="utf-8")
    assert _table_codes(readme, "## The type checker") == defined
    assert _table_codes(page, "## What it checks") == defined


def test_the_readme_counts_the_composition_table_it_cites() -> None:
    """The README says how many operations the static/run-time table pins: that many."""
    from test_static_runtime_agreement import TABLE

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    claimed = re.search(r"all (\d+) composition operations agree statically", readme)
    assert claimed is not None
    assert int(claimed.group(1)) == len(TABLE)


def test_the_readmes_layout_table_names_every_subpackage() -> None:
    """A reader looks for a module in "Where things live": no subpackage may be missing there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = "\n".join(
        line
        for line in readme.split("## Where things live", 1)[1].split("\n## ", 1)[0].splitlines()
        if line.startswith("|")
    )
    subpackages = {
        f"veridic.{info.name}"
        for info in pkgutil.iter_modules(veridic.__path__)
        if info.ispkg and not info.name.startswith("_")
    }
    assert len(subpackages) >= 8
    missing = {name for name in subpackages if f"`{name}`" not in table}
    assert missing == set(), f"README's layout table does not name {sorted(missing)}"


def test_the_readmes_layout_table_names_only_what_is_there() -> None:
    """Every name in the table's first column imports: a table naming a module that moved
    or went away sends the reader nowhere."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    named = {
        name
        for line in section.splitlines()
        if line.startswith("| `veridic")
        for name in re.findall(r"`(veridic[\w.]*)`", line.split("|")[1])
    }
    assert len(named) >= 10
    for name in sorted(named):
        importlib.import_module(name)


@given(st.text())
def test_instruction_at_run_time_refuses_only_branded_untrusted_text(text: str) -> None:
    """What README and getting started say instruction() does at run time: untrusted text
    and what is not a ``str`` are refused, any other ``str`` is minted as code (whatever it
    holds: the type checker alone tells a literal from a variable), trusted text is kept."""
    # Each call below is what the plugin refuses: the run time is under test.
    minted = instruction(text)  # type: ignore[veridic-literal]  # a variable
    assert provenance(minted).kind == "code"
    with pytest.raises(ProvenanceError):
        instruction(untrusted(text, source="ticket:1"))  # type: ignore[veridic-literal]  # branded
    with pytest.raises(ProvenanceError):
        instruction(text.encode())  # type: ignore[arg-type]  # bytes
    tone = _Stored(content=text).content
    kept = instruction(tone)  # type: ignore[veridic-literal]  # trusted already
    assert provenance(kept) == provenance(tone)


class _Stored(BaseModel):
    content: InstructionField


def test_the_readme_names_the_origins_of_veridics_own_text() -> None:
    """The README explains the origins veridic's own spans carry; a prompt with system
    parts, a data block and a user turn shows exactly those."""
    prompt = (
        Composer()
        .system(instruction("Be brief."), instruction("Answer in English."))
        .data("kb:1", untrusted("A page.", source="kb:1"))
        .user("Hi.")
        .build()
    )
    own = {span.origin for span in prompt.spans if span.origin.startswith("veridic.")}
    assert own == {"veridic.compose", "veridic.fence", "veridic.fence.preamble"}
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    explained = readme.split("veridic's own text has origins of its own:", 1)[1][:400]
    for origin in own:
        assert f"`{origin}`" in explained
    labels = {span.origin for span in prompt.spans if span.kind == "unknown"}
    assert labels == {"unbranded str"}  # the label and the user's turn: README says why
    assert "show as `unbranded unknown`" in readme
