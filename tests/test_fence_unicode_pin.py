"""Renders do not depend on the Python that makes them: printable means Unicode 14.0's.

Python's ``isprintable`` follows its own Unicode version; 3.12 (Unicode 15.0) calls
🩷 (U+1FA77) printable, 3.11 does not. The fence writes what Unicode 14.0 left
unassigned as a code on every Python, so one composition hashes alike across a fleet.
This machine runs 3.11: the tests hold the pinned table to 3.11's own, and run the
module under another Unicode version's name to check the table is used there.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import unicodedata

import pytest

from veridic.text import _unicode_14


def _unassigned_points() -> set[int]:
    points: set[int] = set()
    for item in _unicode_14.UNASSIGNED.split():
        first, _, last = item.partition("-")
        points.update(range(int(first, 16), int(last or first, 16) + 1))
    return points


@pytest.mark.skipif(
    unicodedata.unidata_version != _unicode_14.VERSION,
    reason="the table is checked against the Unicode 14.0 tables of Python 3.11",
)
def test_the_pinned_table_is_python_3_11_s() -> None:
    expected = {p for p in range(0x110000) if unicodedata.category(chr(p)) == "Cn"}
    assert _unassigned_points() == expected


def test_the_table_lists_no_character_unicode_14_assigned() -> None:
    points = _unassigned_points()
    for assigned in ("a", "é", "€", "🫠", "\U0001faf0", "\u4e00", "\U0002a6df"):
        assert ord(assigned) not in points
    for later in ("\U0001fa77", "\U0001fa76", "\U0001f6dc", "\u0cf3", "\U00031350"):  # 15.0
        assert ord(later) in points


_UNDER_ANOTHER_VERSION = textwrap.dedent(
    """
    import unicodedata, sys
    class Newer:
        def __getattr__(self, name):
            return getattr(unicodedata, name)
        unidata_version = "15.0.0"
    sys.modules["unicodedata"] = Newer()
    from veridic.text import fence
    assert fence._needs_code("\\U0001FA77"), "a character Unicode 14 did not assign"
    assert not fence._needs_code("é") and not fence._needs_code("\\U0001FAE0")
    assert not fence._is_label("mail:\\U0001FA77")
    assert fence._SPECIAL_PRINTABLE.search("pink \\U0001FA77 heart")
    assert fence._SPECIAL_PRINTABLE.search("plain text, café, 🫠") is None
    print(fence.fence("doc", "a 🫠 and a \\U0001FA77", "datamark"))
    """
)


def test_under_a_newer_unicode_the_characters_it_added_are_codes() -> None:
    shown = subprocess.run(
        [sys.executable, "-c", _UNDER_ANOTHER_VERSION],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "\u27e61FA77\u27e7" in shown
    assert "🫠" in shown
