"""The examples in docstrings and in the README run, and say what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import veridic

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
