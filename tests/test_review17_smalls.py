"""Small leftovers of earlier reviews, each settled with the test that failed before its fix:
template errors and tuple subclasses, the MCP pins file, header spellings, the ``-OO``
messages of tool descriptions, and the read-only tool specs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest

from veridic import OpenAIChat, Templates, VeridicError, unfence
from veridic.integrations.mcp import Pins
from veridic.templates import TemplateError

openai = pytest.importorskip("openai")


# --- templates ---------------------------------------------------------------------------


class _Given(TypedDict):
    value: Any


class _Unsayable(Exception):
    """An exception whose message cannot be read: its ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


class _Raising:
    @property
    def field(self) -> str:
        raise _Unsayable


def _data(tmp_path: Path, source: str) -> Any:
    (tmp_path / "t.j2").write_text(source)
    return Templates(tmp_path).data("t.j2", params=_Given)


def test_an_expression_raising_an_error_whose_message_raises_is_a_template_error(
    tmp_path: Path,
) -> None:
    """``{{ value.field }}`` raising an exception whose ``__str__`` raises gave that second
    error (a ``RuntimeError`` from inside veridic) in place of the ``TemplateError`` every
    failed expression gives; now the ``TemplateError`` names the exception's type and
    says its message could not be read."""
    template = _data(tmp_path, "{{ value.field }}")
    with pytest.raises(TemplateError, match=r"_Unsayable.*message could not be read") as caught:
        template.render({"value": _Raising()})
    assert isinstance(caught.value.__cause__, _Unsayable)


class _Tagged(tuple[Any, ...]):
    """A tuple subclass a template reads an attribute of."""

    @property
    def kind(self) -> str:
        return "tagged"


def test_a_tuple_subclass_holding_a_set_keeps_its_type_when_the_set_is_sorted(
    tmp_path: Path,
) -> None:
    """A tuple subclass holding a set came to the template as a plain tuple (only a named
    tuple was remade as itself), so what the subclass adds (``value.kind``) was gone."""
    template = _data(tmp_path, "{{ value.kind }}:{{ value[0]|join(',') }}")
    [(_, text)] = unfence(template.render({"value": _Tagged(({"b", "a", "c"},))}))
    assert text == "tagged:a,b,c"


class _Pair(tuple[Any, ...]):
    """A tuple subclass built from its items one by one, not from an iterable."""

    def __new__(cls, first: object, second: object) -> _Pair:
        return super().__new__(cls, (first, second))


def test_a_tuple_subclass_that_cannot_be_remade_from_its_items_is_refused_by_name(
    tmp_path: Path,
) -> None:
    """A subclass whose constructor does not take its items as one iterable cannot be
    remade with the set sorted: refused naming the type, not given to the template as a
    plain tuple (nor failing with the constructor's own ``TypeError``)."""
    template = _data(tmp_path, "{{ value[0]|join(',') }}")
    with pytest.raises(TemplateError, match=r"_Pair.*pass the set as a list"):
        template.render({"value": _Pair({"b", "a"}, 1)})


# --- MCP pins ----------------------------------------------------------------------------


def test_pins_dump_makes_the_folder_it_writes_in(tmp_path: Path) -> None:
    """``Pins.dump`` into a folder not made yet failed with ``FileNotFoundError``, where
    ``veridic mcp pin -o`` makes it: now it makes it too, and the file loads back."""
    pins = Pins.of("orders", [])
    path = tmp_path / "pins" / "mcp" / "orders.json"
    pins.dump(path)
    assert Pins.load(path) == pins


def test_pins_dump_to_a_path_that_cannot_be_written_says_which_and_what_to_do(
    tmp_path: Path,
) -> None:
    """A path under a file cannot be written: a ``VeridicError`` naming the path, not the
    bare ``OSError``."""
    (tmp_path / "taken").write_text("")
    target = tmp_path / "taken" / "orders.json"
    with pytest.raises(VeridicError, match=r"cannot be written.*choose a writable path"):
        Pins.of("orders", []).dump(target)


# --- header spellings --------------------------------------------------------------------


def test_a_header_given_twice_is_told_to_keep_a_spelling_that_is_given() -> None:
    """The refusal of ``{"OpenAI-Beta": ..., "OPENAI-BETA": ...}`` said to spell it
    ``'openai-beta'`` "as the SDKs spell their own"; the SDKs spell many of theirs in
    mixed case (``OpenAI-Beta``, ``OpenAI-Organization``, ``X-Stainless-Lang``). It now
    names both spellings, says names are case-insensitive and to give one spelling,
    the SDK's where the SDK sets the header itself."""
    client = openai.OpenAI(
        api_key="test-key",
        default_headers={"OpenAI-Beta": "assistants=v2", "OPENAI-BETA": "assistants=v2"},
    )
    with pytest.raises(VeridicError) as caught:
        OpenAIChat(client, model="gpt-test")
    message = str(caught.value)
    assert "as the SDKs spell their own" not in message
    assert "case-insensitive" in message
    assert "('OpenAI-Beta' and 'OPENAI-BETA')" in message
    assert "in one spelling" in message
    assert "spell it as the SDK does" in message
