"""The docs site's pages: their examples run, and the trust rules stay one table.

The strict build itself (every warning fails it, every reference must resolve) is
``make docs``, which ``make test`` runs.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def _first_table_after(text: str, heading: str) -> list[str]:
    """The rows of the first Markdown table below ``heading``."""
    lines = text.splitlines()
    start = lines.index(heading)
    table: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table.append(line.rstrip())
        elif table:
            break
    return table


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_page_examples_run(page: Path) -> None:
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"an example in docs/{page.relative_to(DOCS)} printed something else"


def test_the_guide_pages_have_examples() -> None:
    for name in ("getting-started", "trust-model", "templates", "tools", "plans-and-approvals"):
        text = (DOCS / f"{name}.md").read_text(encoding="utf-8")
        assert "\n>>> " in text, f"docs/{name}.md shows no runnable example"


def test_the_trust_table_is_the_readmes() -> None:
    heading = "## What veridic guarantees"
    readme = _first_table_after((ROOT / "README.md").read_text(encoding="utf-8"), heading)
    page = _first_table_after((DOCS / "trust-model.md").read_text(encoding="utf-8"), heading)
    assert len(readme) > 3
    assert page == readme, "docs/trust-model.md and the README must hold the same trust table"


def test_the_trust_model_page_holds_one_table() -> None:
    text = (DOCS / "trust-model.md").read_text(encoding="utf-8")
    separators = [line for line in text.splitlines() if line.startswith("| ---")]
    assert len(separators) == 1


def test_the_eval_record_and_the_changelog_are_included_not_copied() -> None:
    security = (DOCS / "security.md").read_text(encoding="utf-8")
    changelog = (DOCS / "changelog.md").read_text(encoding="utf-8")
    assert "```{include} ../benchmarks/eval_model/README.md" in security
    rows = [line for line in security.splitlines() if line.startswith("|")]
    assert not any("%" in row for row in rows)  # no measured figure copied by hand
    assert "```{include} ../CHANGELOG.md" in changelog
    assert len(changelog.splitlines()) < 10
