"""A new user's first hour: what the docs suggest, and its obvious variations, behave as told.

Each test is a program a newcomer writes while following the README and
docs/getting-started.md; it fails loudly, with a message that says what was
wrong and what to do instead, where the docs say it is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veridic import Composer, Registry, VeridicError, instruction, unfence, untrusted


@pytest.mark.parametrize("value", [None, b"Router reboots.", 4711, ["a", "b"], {"body": "x"}])
def test_untrusted_of_something_that_is_not_text_is_refused(value: object) -> None:
    # request.get("body") that is None, or an HTTP body still in bytes, would
    # otherwise reach the prompt as the text "None" or "b'Router reboots.'".
    with pytest.raises(TypeError) as raised:
        untrusted(value, source="ticket:4711")  # type: ignore[arg-type]  # the mistake under test
    message = str(raised.value)
    assert ("got None," if value is None else type(value).__name__) in message
    assert "ticket:4711" in message
    assert "decode" in message or "json.dumps" in message


@given(st.text())
def test_untrusted_of_any_str_gives_it_back_unchanged(text: str) -> None:
    block = Composer().data("doc", untrusted(text, source="doc")).build().messages[-1].content
    assert unfence(block) == [("doc", text)]


@pytest.mark.parametrize(
    "place",
    [
        lambda c, v: c.user(v),
        lambda c, v: c.data("doc", v),
        lambda c, v: c.tool_call("c1", "find_order", {}).tool_result("c1", v),
    ],
    ids=["user", "data", "tool_result"],
)
def test_a_dict_given_as_a_turn_is_refused_saying_how_to_make_it_text(
    place: Callable[[Composer, object], object],
) -> None:
    # A newcomer passes a tool's dict result straight to tool_result(): the
    # error names the type and says how to write it as text, not just "pass a str".
    composer = Composer().system(instruction("You help with orders."))
    with pytest.raises(VeridicError) as raised:
        place(composer, {"status": "shipped"})
    message = str(raised.value)
    assert "got a dict" in message
    assert "json.dumps" in message
    assert "untrusted(" in message


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"kind": "read"}, "kind='read'"),
        ({"kind": "write", "risk": 3}, "risk=3"),
        ({"kind": "query", "irreversible": True}, "with an effect"),
    ],
)
def test_a_declaration_refused_at_the_decorator_names_the_file_and_line(
    options: dict[str, object], said: str
) -> None:
    # The errors at boot name a tool's file:line; the decorator's named only
    # 'test.<locals>.lookup', which a newcomer must search for.
    registry = Registry()
    with pytest.raises(VeridicError) as raised:

        @registry.tool(**options)  # type: ignore[arg-type]  # the mistakes under test
        def lookup(key: str) -> str:
            """Look a key up.

            Args:
                key: The key.
            """
            return key

    message = str(raised.value)
    assert said in message
    assert "<locals>" not in message
    assert re.search(r"test_review_newuser\.py:\d+", message), message
