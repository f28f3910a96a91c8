"""The docs site's pages: their examples run, and the trust rules stay one table.

The strict build itself (every warning fails it, every reference must resolve) is
``make docs``, which ``make test`` runs.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import re
from pathlib import Path

import pytest

import veridic

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


# What a page's sketch calls its objects (``gateway.resume(...)``): their methods and
# keywords must exist, though the sketch cannot run (it needs an SDK client, a form).
_SKETCH_NAMES = {
    "gateway": veridic.ModelGateway,
    "store": veridic.SQLiteAuditSink,
    "composer": veridic.Composer,
    "view": veridic.ToolView,
    "registry": veridic.Registry,
    "policy": veridic.ApprovalPolicy,
    "prompt": veridic.Prompt,
    "reply": veridic.Reply,
    "paused": veridic.PausedRun,
    "ApprovalPolicy": veridic.ApprovalPolicy,
    "PausedRun": veridic.PausedRun,
}


def _sketches() -> list[tuple[str, str]]:
    """Every ```python block of the README and the docs that is not a doctest."""
    found = []
    for page in [ROOT / "README.md", *PAGES]:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
            if ">>>" not in match.group(1):
                line = text[: match.start()].count("\n") + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


def _stale_names(where: str, source: str) -> list[str]:
    """What ``source`` names of veridic that does not exist: imports, methods, keywords."""
    stale = []
    own_objects = not where.startswith("docs/integrations/")  # a framework's result there
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("veridic"):
            module = importlib.import_module(str(node.module))
            stale += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        kind = _SKETCH_NAMES.get(owner.id) if isinstance(owner, ast.Name) else None
        if kind is None or not own_objects:
            continue
        method = getattr(kind, node.func.attr, None)
        if method is None:
            stale.append(f"{kind.__name__}.{node.func.attr}")
            continue
        accepted = inspect.signature(method).parameters
        stale += [
            f"{kind.__name__}.{node.func.attr}({word.arg}=)"
            for word in node.keywords
            if word.arg is not None and word.arg not in accepted
        ]
    return stale


def test_the_sketches_that_cannot_run_name_only_what_exists() -> None:
    """The blocks doctest cannot run (an SDK client, a user's form) still go stale loudly."""
    sketches = _sketches()
    assert len(sketches) > 10
    stale = {where: names for where, source in sketches if (names := _stale_names(where, source))}
    assert stale == {}


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


def _fenced_after(text: str, marker: str, language: str) -> str:
    """The body of the first ```language block that follows ``marker`` in ``text``."""
    start = text.index(marker)
    match = re.compile(rf"^```{language}\n(.*?)^```", re.MULTILINE | re.DOTALL).search(text, start)
    assert match is not None, f"no {language} block after {marker!r}"
    return match.group(1)


def test_getting_started_shows_what_mypy_prints_for_the_first_mistakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's app.py, checked with the page's configuration, prints the page's errors."""
    import configparser

    from mypy import api as mypy_api
    from test_typecheck import CACHE, POLICIES, write_config

    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    shown_config = configparser.ConfigParser()
    shown_config.read_string(_fenced_after(text, "## When you get it wrong", "ini"))
    assert dict(shown_config["mypy"]) == {"strict": "True", "plugins": "veridic.mypy"}
    source = _fenced_after(text, "## When you get it wrong", "python")
    assert source.startswith("# app.py\n")
    shown_output = _fenced_after(text, "# app.py\n", "text")
    (tmp_path / "app.py").write_text(source)
    config = write_config(tmp_path, POLICIES)  # the page's two settings, and the test cache
    monkeypatch.chdir(tmp_path)
    out, err, status = mypy_api.run(
        ["--config-file", str(config), "--cache-dir", str(CACHE), "--no-pretty", "app.py"]
    )
    assert not err, err
    assert status == 1
    assert out == shown_output
