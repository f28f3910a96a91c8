"""A new user's second day: the deeper docs pages, followed as written, behave as they say.

Each test is a program a newcomer writes while wiring veridic into a service
from docs/integrations/, docs/providers.md, docs/plans-and-approvals.md,
docs/templates.md and docs/cli.md, or its obvious variation; where it fails,
the error says what was wrong, where, and what to do instead.
"""

from __future__ import annotations

import doctest
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypedDict

import pytest
from agents import WebSearchTool
from pydantic import BaseModel
from test_integration_openai_agents import App, ScriptedModel, run, say
from test_integration_openai_agents import _offline as _offline  # the autouse fixture
from test_integration_openai_agents import app as app

from veridic import (
    ApprovalPolicy,
    Composer,
    InstructionField,
    ModelGateway,
    ProvenanceError,
    Registry,
    Risk,
    RunResult,
    ScriptedProvider,
    SQLiteAuditSink,
    Templates,
    ToolCouplingError,
    TrustedInstruction,
    VeridicError,
    instruction,
)
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


def _refund(order_id: str) -> str:
    """Refund an order in full. The money cannot be taken back.

    Args:
        order_id: The order's id.
    """
    return order_id


def _pay(invoice: str) -> str:
    """Pay a supplier's invoice. A sent payment can not be taken back.

    Args:
        invoice: The invoice's number.
    """
    return invoice


def _rotate(key_id: str) -> str:
    """Rotate an API key. The old key is revoked and it can't be reverted.

    Args:
        key_id: The key's id.
    """
    return key_id


@pytest.mark.parametrize("handler", [_refund, _pay, _rotate], ids=lambda f: f.__name__)
def test_a_description_saying_it_cannot_be_taken_back_states_irreversibility(
    handler: Callable[[str], str],
) -> None:
    registry = Registry()
    registry.tool(kind="write", risk=Risk.HIGH, irreversible=True)(handler)
    assert lint(registry) == ()


class _StoredPrompt(BaseModel):
    content: InstructionField


class _Tone(TypedDict):
    persona: TrustedInstruction
    tone: Literal["calm", "brisk"]


def test_a_literal_variable_given_another_word_says_which_words_it_takes() -> None:
    # A stored template reads a Literal variable; the caller passes a word from
    # the request that is not one of them. The error said "only TrustedInstruction
    # values may fill it", though "calm" (a plain str) fills it and a minted
    # TrustedInstruction does not.
    row = _StoredPrompt.model_validate_json('{"content": "You are {{ persona }}. Be {{ tone }}."}')
    template = Templates().instruction_from_source(row.content, params=_Tone)
    assert template.render({"persona": instruction("a helper"), "tone": "calm"}) == (
        "You are a helper. Be calm."
    )
    with pytest.raises(ProvenanceError) as raised:
        template.render({"persona": instruction("a helper"), "tone": "shout"})  # type: ignore[typeddict-item]  # the run-time check under test
    message = str(raised.value)
    assert "variable 'tone'" in message  # where
    assert "'shout'" in message  # what
    assert "Literal['calm', 'brisk']" in message  # what the variable takes
    assert "only TrustedInstruction values may fill it" not in message
    assert "one of the values code wrote ('calm', 'brisk')" in message  # what to do instead
    assert "templates.data" in message


def test_a_trusted_text_variable_given_a_plain_str_still_says_to_mint_it() -> None:
    row = _StoredPrompt.model_validate_json('{"content": "You are {{ persona }}. Be {{ tone }}."}')
    template = Templates().instruction_from_source(row.content, params=_Tone)
    with pytest.raises(ProvenanceError) as raised:
        template.render({"persona": "a pirate", "tone": "calm"})  # type: ignore[typeddict-item]  # the run-time check under test
    message = str(raised.value)
    assert "mint the value with instruction()" in message
    assert "Literal[" not in message


class _Limit(TypedDict):
    limit: int


def test_a_number_variable_given_text_says_it_takes_no_text() -> None:
    row = _StoredPrompt.model_validate_json('{"content": "Refund up to {{ limit }} euros."}')
    template = Templates().instruction_from_source(row.content, params=_Limit)
    with pytest.raises(ProvenanceError) as raised:
        template.render({"limit": "50"})  # type: ignore[typeddict-item]  # the run-time check under test
    message = str(raised.value)
    assert "'limit' as int, which takes no text" in message
    assert "only TrustedInstruction values may fill it" not in message


# --- the OpenAI Agents SDK with a hosted tool beside veridic's ----------------------------


def test_a_hosted_tool_beside_the_views_says_it_cannot_be_registered_as_is(app: App) -> None:
    # docs/integrations/openai_agents.md: a newcomer adds WebSearchTool() to the agent's
    # tools. The refusal told them to "register any other tool in the veridic registry",
    # which a tool the provider runs itself cannot be; it now says so, and what to do.
    model = ScriptedModel([say("Unreachable.")])
    agent = app.agent(model, [*app.tools, WebSearchTool()])
    with pytest.raises(ToolCouplingError) as raised:
        run(agent, "What's new in the docs?")
    message = str(raised.value)
    assert "'web_search' (WebSearchTool)" in message  # what
    assert "outside veridic's dispatch" in message  # why it cannot stay
    assert "a tool of the veridic registry that calls the service" in message  # what instead
    assert model.seen == []


# --- deferred approvals kept in the store, answered twice --------------------------------


def test_resuming_what_a_second_claim_gave_says_the_run_was_claimed_already() -> None:
    # docs/providers.md: the request that brings the answers resumes
    # store.claim_paused(request_id). A double click sends it twice: the second claim
    # gives None, and resume() said only "needs a PausedRun ... got NoneType".
    registry = _page_namespace("plans-and-approvals.md")["registry"]
    assert isinstance(registry, Registry)
    view = registry.view()
    store = SQLiteAuditSink(":memory:")
    gateway = ModelGateway(
        ScriptedProvider(
            [{"tool_calls": [("c1", "refund_order", {"order_id": "A-1"})]}, {"text": "Done."}]
        ),
        audit=store,
    )
    system = instruction("You help with orders.")
    first = gateway.run(
        Composer().system(system, view.capability_section()).user("Refund A-1."),
        view,
        policy=ApprovalPolicy(view),
        request_id="req-1",
        defer=True,
    )
    assert first.paused is not None
    store.save_paused(first.paused)
    answers = {approval.digest: True for approval in first.pending}

    def resume() -> RunResult[None]:
        return gateway.resume(
            store.claim_paused("req-1"),  # type: ignore[arg-type]  # None on the second click, under test
            Composer().system(system, view.capability_section()),
            view,
            policy=ApprovalPolicy(view),
            answers=answers,
        )

    assert resume().text == "Done."
    with pytest.raises(VeridicError) as raised:
        resume()
    message = str(raised.value)
    assert "got None" in message
    assert "claim_paused" in message
    assert "claimed already" in message
    refunds = [r.outcome.value for r in store.records("req-1") if r.tool == "refund_order"]
    assert refunds == ["ok"]
