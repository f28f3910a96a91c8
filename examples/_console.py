"""Printing for the examples: short numbered sections, quoted text wrapped, no walls of JSON."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Final

__all__ = ["clip", "heading", "quote", "say", "section", "table"]

WIDTH: Final = 100
INDENT: Final = "    "


def heading(title: str, subtitle: str) -> None:
    """The example's title, with the article it re-enacts."""
    print(title)
    print(subtitle)
    print("=" * min(WIDTH, max(len(title), len(subtitle))))


def section(number: int, title: str) -> None:
    print(f"\n[{number}] {title}")


def say(text: str, *, indent: int = 1) -> None:
    """A paragraph, wrapped, with hanging lines indented a little further."""
    pad = INDENT * indent
    print(_fill(text, pad, pad + "  "))


def quote(text: str, *, indent: int = 1) -> None:
    """Text the program produced (a prompt section, a notice, an error), each line wrapped."""
    pad = INDENT * indent + "| "
    for line in text.splitlines() or [""]:
        print(_fill(line, pad, pad + "  ") or pad)


def table(rows: Iterable[tuple[str, ...]], *, indent: int = 1) -> None:
    """Rows of cells, each column as wide as its widest cell; the last cell is wrapped."""
    rows = list(rows)
    if not rows:
        return
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    pad = INDENT * indent
    for row in rows:
        head = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        start = f"{pad}{head}  " if widths else pad
        print(_fill(row[-1], start, " " * len(start)))


def clip(text: str, limit: int = 90) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fill(text: str, first: str, rest: str) -> str:
    return textwrap.fill(
        text, WIDTH, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )
