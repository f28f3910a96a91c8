"""A new user's second day: the deeper docs pages, followed as written, behave as they say.

Each test is a program a newcomer writes while wiring veridic into a service
from docs/integrations/, docs/providers.md, docs/plans-and-approvals.md,
docs/templates.md and docs/cli.md, or its obvious variation; where it fails,
the error says what was wrong, where, and what to do instead.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from veridic import Registry, Risk
from veridic.lint import lint

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _page_namespace(page: str) -> dict[str, object]:
    """The globals a docs page's examples leave behind, run as the docs tests run them."""
    text = (DOCS / page).read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {}, page, str(DOCS / page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda _: None, clear_globs=False)
    return test.globs


@pytest.mark.parametrize("page", ["tools.md", "plans-and-approvals.md"])
def test_the_docs_refund_tool_lints_without_an_irreversibility_warning(page: str) -> None:
    # The pages' model of a high-risk tool says "The money cannot be taken back.";
    # a newcomer who copies it got irreversibility-unstated from their first lint.
    registry = _page_namespace(page)["registry"]
    assert isinstance(registry, Registry)
    found = [(f.code, f.tool) for f in lint(registry) if f.tool == "refund_order"]
    assert found == []


@pytest.mark.parametrize(
    "sentence",
    [
        "The money cannot be taken back.",
        "A sent payment can't be taken back.",
        "It cannot be reverted.",
    ],
)
def test_a_description_saying_it_cannot_be_taken_back_states_irreversibility(
    sentence: str,
) -> None:
    registry = Registry()

    def pay(amount: int) -> str:
        return "paid"

    registry.tool(
        kind="write",
        risk=Risk.HIGH,
        irreversible=True,
        description=f"Pay a supplier's invoice. {sentence}",
    )(pay)
    assert [f.code for f in lint(registry)] == ["undocumented-parameter"]
