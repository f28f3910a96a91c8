"""Every Markdown file the code and the docs point to is in the repository.

A reader who follows "see docs/design.md" from a docstring, or a link in the README,
must find the file; a reference to a document kept elsewhere is a dead end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_MENTION = re.compile(r"(?<![\w/.:-])((?:\.\./|[\w-]+/)*[\w.-]+\.md)\b")
_SOURCES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "examples").rglob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
        *(ROOT / "benchmarks").rglob("*.md"),
    ]
)


def _mentions(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    # A path (``docs/ci.md``) or a project document (``README.md``); a lower-case bare
    # name is a file a command writes (``--format markdown > veridic.md``).
    return [
        m
        for m in _MENTION.findall(text)
        if not m.startswith(("http", "www.")) and ("/" in m or m[:-3].isupper())
    ]


@pytest.mark.parametrize("source", _SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_markdown_file_mentioned_exists(source: Path) -> None:
    missing = [
        mention
        for mention in _mentions(source)
        if not (ROOT / mention).is_file() and not (source.parent / mention).is_file()
    ]
    assert missing == [], f"{source.relative_to(ROOT)} points to files that are not here"


def test_the_design_is_in_the_repository() -> None:
    assert "## Public API contract" in (ROOT / "docs" / "design.md").read_text("utf-8")
