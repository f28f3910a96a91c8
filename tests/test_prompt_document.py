"""``Prompt.to_document()`` and ``PromptDocument``: a prompt saved for review, read for display.

The document gives the map and the terminal view exactly what the prompt gave;
reading it never gives a prompt (trust does not survive storage); a hostile or
damaged document is refused whole, naming the place, and a text that does not
match its ``sha256`` is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_provenance_map import without_recorded_notice

from veridic import (
    Composer,
    Prompt,
    ProvenanceError,
    ReasoningItem,
    VeridicError,
    instruction,
    is_trusted,
    untrusted,
)
from veridic.testing import adversarial_text, data_labels, data_modes, trusted_instructions
from veridic.text.prompt import DOCUMENT_FORMAT, PromptDocument
from veridic.text.provenance_map import render
from veridic.text.terminal_view import render_terminal

SYSTEM = instruction("You summarise tickets for the support team.")


def ticket_prompt() -> Prompt:
    item = ReasoningItem.of(
        "anthropic", {"type": "thinking", "thinking": "Look at the ticket.", "signature": "EqQB"}
    )
    composer = (
        Composer()
        .system(SYSTEM, instruction("Answer in English."))
        .data("ticket:42", untrusted("Reset my password\x1b[2J\u202e", source="ticket:42"))
        .user("Summarise it.")
        .assistant("Looking it up.", reasoning=[item])
        .tool_call("c1", "get_ticket", {"id": 42})
    )
    composer.tool_result("c1", untrusted("no such ticket", source="tool:get_ticket"), error=True)
    return composer.build()


@st.composite
def prompts(draw: st.DrawFn) -> Prompt:
    """Prompts of every turn kind, their texts chosen by an attacker."""
    composer = Composer()
    system = draw(st.lists(trusted_instructions(), max_size=3))
    if system:
        composer.system(*system)
    for step in range(draw(st.integers(0, 4))):
        turn = draw(st.sampled_from(("user", "data", "assistant", "tool")))
        text = draw(adversarial_text())
        if turn == "user":
            composer.user(text if text.strip() else f"({text})")
        elif turn == "data":
            source = draw(adversarial_text().filter(str.strip))
            composer.data(
                draw(data_labels()), untrusted(text, source=source), mode=draw(data_modes())
            )
        elif turn == "assistant":
            composer.assistant(text)
        else:
            call_id = f"call-{step}"
            composer.tool_call(call_id, "get_ticket", {"q": text})
            composer.tool_result(call_id, untrusted(text, source="tool:get_ticket"))
    return composer.build()


@given(prompt=prompts())
def test_a_read_document_renders_the_same_map_and_view_as_its_prompt(prompt: Prompt) -> None:
    text = prompt.to_document()
    document = PromptDocument.from_json(text)
    assert document.sha256 == prompt.sha256
    assert document.spans == prompt.spans
    assert [m.content for m in document.messages] == [m.content for m in prompt.messages]
    # The prompt's page byte for byte, apart from the notice that heads a document's map:
    # its provenance is as recorded in the file, not verified by veridic.
    assert without_recorded_notice(render(document)) == prompt.to_html()
    assert without_recorded_notice(document.to_html()) == prompt.to_html()
    assert without_recorded_notice(document._repr_html_()) == prompt._repr_html_()
    seen, live = render_terminal(document, colour=True), render_terminal(prompt, colour=True)
    assert "not verified by veridic" in seen
    assert "not verified by veridic" not in live
    assert [line for line in seen.split("\n") if "not verified" not in line] == live.split("\n")
    assert document.to_json() == text
    assert text.isascii()  # printed, the JSON cannot drive a terminal


def test_a_document_keeps_tool_calls_results_errors_and_reasoning() -> None:
    prompt = ticket_prompt()
    document = PromptDocument.from_json(prompt.to_document())
    call = document.messages[3].tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("c1", "get_ticket", '{"id": 42}')
    assert document.messages[4].tool_call_id == "c1"
    assert document.messages[4].tool_error is True
    (item,) = document.messages[3].reasoning
    assert (item.provider, item.json_text) == ("anthropic", prompt.reasoning[0].json_text)
    assert without_recorded_notice(document.to_html()) == prompt.to_html()


def test_a_read_document_is_no_prompt_and_its_text_gives_no_instruction() -> None:
    document = PromptDocument.from_json(ticket_prompt().to_document())
    assert not isinstance(document, Prompt)
    system = document.messages[0].content
    assert type(system) is str
    assert not is_trusted(system)
    with pytest.raises(ProvenanceError):
        Composer().system(system)  # type: ignore[arg-type]  # the misuse under test
    assert not isinstance(document.messages[3].reasoning[0], ReasoningItem)


def _base() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(ticket_prompt().to_document())
    return loaded


def _edit(change: Callable[[dict[str, Any]], object]) -> str:
    document = _base()
    change(document)
    return json.dumps(document)


HOSTILE: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "another format": (lambda d: d.update(format="veridic-conversation/1"), "format"),
    "an unknown top-level key": (lambda d: d.update(trusted=True), "unknown ['trusted']"),
    "a missing key": (lambda d: d.pop("spans"), "missing ['spans']"),
    "an unknown message key": (
        lambda d: d["messages"][0].update(parts=["x"]),
        "messages[0] must hold exactly",
    ),
    "a message that is no object": (
        lambda d: d["messages"].append("hi"),
        "messages[5] is a string",
    ),
    "a role that is none": (
        lambda d: d["messages"][0].update(role="developer"),
        "messages[0].role",
    ),
    "a content of the wrong type": (
        lambda d: d["messages"][1].update(content=["x"]),
        "messages[1].content is a list, not a string",
    ),
    "a tool error that is an integer": (
        lambda d: d["messages"][4].update(tool_error=1),
        "messages[4].tool_error is an integer, not a boolean",
    ),
    "a tool call without a name": (
        lambda d: d["messages"][3]["tool_calls"][0].pop("name"),
        "messages[3].tool_calls[0]",
    ),
    "a reasoning item of another provider": (
        lambda d: d["messages"][3]["reasoning"][0].update(provider="mistral"),
        "messages[3].reasoning[0].provider",
    ),
    "a span start that is a boolean": (
        lambda d: d["spans"][0].update(start=False),
        "spans[0].start is a boolean, not an integer",
    ),
    "a span offset that is a number": (
        lambda d: d["spans"][0].update(end=3.0),
        "spans[0].end is a number, not an integer",
    ),
    "a span of an unknown kind": (lambda d: d["spans"][0].update(kind="admin"), "spans[0].kind"),
    "a span past its message's end": (
        lambda d: d["spans"][-1].update(end=10_000),
        "lies outside the message",
    ),
    "a span with a negative start": (
        lambda d: d["spans"][0].update(start=-1),
        "lies outside the message",
    ),
    "overlapping spans": (lambda d: d["spans"][1].update(start=0), "overlaps or precedes"),
    "a span of a message the document lacks": (
        lambda d: d["spans"][-1].update(message=99),
        "names message 99",
    ),
    "a span whose role is not its message's": (
        lambda d: d["spans"][0].update(role="user"),
        "has role 'user', and message 0 is a system message",
    ),
    "a hash that is not hex": (lambda d: d.update(sha256="SHA" * 20), "64 lowercase hex"),
    "a changed text": (
        lambda d: d["messages"][0].update(content=d["messages"][0]["content"].upper()),
        "refused",
    ),
    "a changed tool error flag": (
        lambda d: d["messages"][4].update(tool_error=False),
        "refused",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_or_damaged_document_is_refused_naming_the_place(name: str) -> None:
    change, expected = HOSTILE[name]
    with pytest.raises(VeridicError) as raised:
        PromptDocument.from_json(_edit(change))
    message = str(raised.value)
    assert expected in message
    assert "prompt.to_document()" in message  # what to do instead


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", "null", b"\xff\xfe"])
def test_text_that_is_no_document_object_is_refused(text: str | bytes) -> None:
    with pytest.raises(VeridicError, match=r"PromptDocument.from_json\(\)"):
        PromptDocument.from_json(text)


@given(replacement=adversarial_text())
def test_any_change_to_a_message_text_is_refused(replacement: str) -> None:
    document = _base()
    if replacement == document["messages"][2]["content"]:
        return
    document["messages"][2]["content"] = replacement
    document["spans"] = [s for s in document["spans"] if s["message"] != 2]
    with pytest.raises(VeridicError, match="hash to"):
        PromptDocument.from_json(json.dumps(document))


@given(origin=adversarial_text())
def test_spans_are_shown_as_recorded_whatever_their_origin_says(origin: str) -> None:
    # Provenance is not hashed: a document may relabel a span, and is still read;
    # the docs say so, and the view escapes whatever the origin holds.
    document = _base()
    document["spans"][0]["origin"] = origin
    read = PromptDocument.from_json(json.dumps(document))
    assert read.spans[0].origin == origin


def test_the_document_names_its_format_and_hash() -> None:
    prompt = ticket_prompt()
    document = json.loads(prompt.to_document())
    assert document["format"] == DOCUMENT_FORMAT == "veridic-prompt/1"
    assert document["sha256"] == prompt.sha256
    assert document["spans"][0] == {
        "message": 0,
        "role": "system",
        "start": 0,
        "end": len(SYSTEM),
        "kind": "code",
        "origin": prompt.spans[0].origin,
    }


def test_a_surrogate_pair_of_lone_halves_is_refused_when_writing() -> None:
    prompt = Composer().user("half \ud83d\ude00 halves").build()
    with pytest.raises(VeridicError, match="lone high surrogate"):
        prompt.to_document()
    one = Composer().user("lone \ud800 surrogate").build()
    assert PromptDocument.from_json(one.to_document()).sha256 == one.sha256


def test_a_document_made_in_code_is_checked_as_a_read_one_is() -> None:
    document = PromptDocument.from_json(ticket_prompt().to_document())
    with pytest.raises(VeridicError, match="hash to"):
        PromptDocument(document.messages, document.spans, "0" * 64)
    with pytest.raises(VeridicError, match="overlaps"):
        PromptDocument(document.messages, document.spans[::-1], document.sha256)
