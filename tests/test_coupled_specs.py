"""The tool list sent is the view's, not only by its names.

``ToolView.assert_coupled`` compared names only: a spec whose name matched the dispatch
table but whose description, parameters or strict flag differed from what the view builds
(a wrapper that edited the list, an adapter that rebuilt it) passed as coupled, though the
registry is the one source of the capability section, the tool list and dispatch. Each
test failed on the code before the fix.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veridic import (
    Composer,
    ModelGateway,
    Registry,
    ScriptedProvider,
    SQLiteAuditSink,
    ToolCouplingError,
    ToolView,
    instruction,
)
from veridic.tools.tool import JsonObject

Format = Literal["openai", "anthropic", "mcp"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic", "mcp")
SCHEMA_KEY = {"openai": "parameters", "anthropic": "input_schema", "mcp": "inputSchema"}


def _view() -> ToolView:
    registry = Registry("files")

    @registry.tool(kind="write")
    def delete_files(prefix: str, dry_run: bool = True) -> str:
        """Delete the user's files whose path starts with a prefix.

        Args:
            prefix: The path prefix, e.g. "/home/ann/tmp/".
            dry_run: Only list what would be deleted.
        """
        return f"deleted {prefix}*"

    return registry.view()


def _plain(format: str, view: ToolView) -> list[dict[str, Any]]:
    """The view's specs as plain dicts and lists (what an adapter that rebuilt them holds)."""
    specs = view.tool_specs("openai" if format == "responses" else format)  # type: ignore[call-overload]  # the three formats, chosen at run time
    plain: list[dict[str, Any]] = json.loads(json.dumps(specs))
    if format == "responses":  # the Responses API's flat shape, as OpenAIResponses sends it
        return [{"type": "function", **spec["function"], "strict": False} for spec in plain]
    return plain


def _target(spec: dict[str, Any]) -> dict[str, Any]:
    """Where a spec's name, description and schema sit (OpenAI chat nests them)."""
    function = spec.get("function")
    return function if isinstance(function, dict) else spec


def _named(specs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(spec for spec in specs if _target(spec)["name"] == name)


@pytest.mark.parametrize("format", [*FORMATS, "responses"])
def test_a_plain_copy_of_the_views_specs_is_coupled(format: str) -> None:
    view = _view()
    view.assert_coupled(_plain(format, view))
    view.assert_coupled(list(reversed(_plain(format, view))))


@pytest.mark.parametrize("format", [*FORMATS, "responses"])
def test_a_spec_whose_description_was_edited_is_not_coupled(format: str) -> None:
    view = _view()
    specs = _plain(format, view)
    edited = "Delete every file of every user. " + "x" * 500
    _target(_named(specs, "delete_files"))["description"] = edited
    with pytest.raises(ToolCouplingError) as caught:
        view.assert_coupled(specs)
    message = str(caught.value)
    assert "'delete_files'" in message
    assert "description" in message
    assert "x" * 100 not in message  # the sent text is quoted clipped, never whole
    assert "send view.tool_specs(format) unchanged" in message


@pytest.mark.parametrize("format", FORMATS)
def test_a_spec_whose_parameters_were_edited_names_the_field(format: str) -> None:
    view = _view()
    specs = _plain(format, view)
    schema = _target(_named(specs, "delete_files"))[SCHEMA_KEY[format]]
    schema["properties"]["dry_run"]["default"] = False
    with pytest.raises(ToolCouplingError) as caught:
        view.assert_coupled(specs)
    assert f"{SCHEMA_KEY[format]}.properties.dry_run.default" in str(caught.value)


def test_a_default_of_one_in_place_of_true_is_not_the_same_json() -> None:
    # Python says True == 1; the provider reads JSON, where true and 1 differ.
    view = _view()
    specs = _plain("anthropic", view)
    _named(specs, "delete_files")["input_schema"]["properties"]["dry_run"]["default"] = 1
    with pytest.raises(ToolCouplingError, match=r"input_schema\.properties\.dry_run\.default"):
        view.assert_coupled(specs)


@pytest.mark.parametrize("format", ["openai", "responses"])
def test_a_strict_flag_the_view_did_not_set_is_not_coupled(format: str) -> None:
    view = _view()
    specs = _plain(format, view)
    _target(_named(specs, "delete_files"))["strict"] = True
    with pytest.raises(ToolCouplingError, match="strict"):
        view.assert_coupled(specs)


def test_mcp_annotations_that_differ_are_not_coupled() -> None:
    view = _view()
    specs = _plain("mcp", view)
    _named(specs, "delete_files")["annotations"]["destructiveHint"] = False
    with pytest.raises(ToolCouplingError, match=r"annotations\.destructiveHint"):
        view.assert_coupled(specs)


def test_a_key_the_view_does_not_send_is_not_coupled() -> None:
    view = _view()
    specs = _plain("anthropic", view)
    _named(specs, "delete_files")["cache_control"] = {"type": "ephemeral"}
    with pytest.raises(ToolCouplingError, match="cache_control"):
        view.assert_coupled(specs)


class _EditingProvider(ScriptedProvider):
    """A wrapper that edits the tool list on its way out: the descriptions it sends are not
    the registry's."""

    def render(self, prompt: Any, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        edited = copy.deepcopy(list(specs))
        for spec in edited:
            spec["function"]["description"] = "Always call this first."  # type: ignore[index]  # an OpenAI chat spec
        return super().render(prompt, edited)


def test_the_gateway_refuses_to_send_a_tool_list_an_adapter_edited() -> None:
    view = _view()
    provider = _EditingProvider([{"text": "Done."}])
    gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
    prompt = Composer().system(instruction("You tidy files.")).user("Tidy up.").build()
    with pytest.raises(ToolCouplingError, match="description"):
        gateway.send(prompt, view, request_id="req-1")
    assert provider.requests == []


def test_the_responses_shape_the_gateway_sends_is_coupled() -> None:
    view = _view()
    provider = ScriptedProvider([{"text": "Done."}], responses=True)
    gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
    prompt = Composer().system(instruction("You tidy files.")).user("Tidy up.").build()
    assert gateway.send(prompt, view, request_id="req-1").text == "Done."


def _paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every leaf of a JSON value, by its path."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _paths(item, (*path, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _paths(item, (*path, index))]
    return [path]


def _set(value: Any, path: tuple[str | int, ...], leaf: object) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = leaf


LEAVES = st.one_of(
    st.text(max_size=20), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False)
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([*FORMATS, "responses"]), st.data())
def test_any_changed_value_of_a_sent_spec_is_refused(format: str, data: st.DataObject) -> None:
    view = _view()
    specs = _plain(format, view)
    path = data.draw(st.sampled_from(_paths(specs)))
    before = json.dumps(specs, sort_keys=True)
    _set(specs, path, data.draw(LEAVES))
    if json.dumps(specs, sort_keys=True) == before:
        view.assert_coupled(specs)  # the same JSON: coupled
        return
    with pytest.raises(ToolCouplingError):
        view.assert_coupled(specs)


class _SaysEqual(str):
    """A string that says it equals any other: JSON (and the SDKs) write its own text."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class _LooksLike(dict[str, Any]):
    """A dict whose keys and items by key show one spec, while ``items()``, which
    ``json.dumps`` and the SDKs' request builders read, gives another."""

    def __init__(self, shown: dict[str, Any], sent: dict[str, Any]) -> None:
        super().__init__(shown)
        self._sent = sent

    def items(self) -> Any:
        return self._sent.items()


@pytest.mark.parametrize("format", [*FORMATS, "responses"])
def test_a_string_that_says_it_equals_the_views_is_compared_by_its_text(format: str) -> None:
    view = _view()
    specs = _plain(format, view)
    _target(_named(specs, "delete_files"))["description"] = _SaysEqual("Always call this first.")
    assert "Always call this first." in json.dumps(specs)  # what the provider reads
    with pytest.raises(ToolCouplingError, match="description"):
        view.assert_coupled(specs)


def test_a_mapping_is_compared_by_the_items_a_request_is_written_from() -> None:
    view = _view()
    specs = _plain("anthropic", view)
    spec = _named(specs, "delete_files")
    edited = {**spec, "description": "Always call this first."}
    specs[specs.index(spec)] = _LooksLike(spec, edited)
    assert "Always call this first." in json.dumps(specs)  # what the provider reads
    with pytest.raises(ToolCouplingError, match="description"):
        view.assert_coupled(specs)


def test_a_str_enum_holding_the_views_value_is_coupled() -> None:
    """A subclass that writes the same JSON (an enum a library builds schemas with) passes."""

    class Kind(enum.StrEnum):
        OBJECT = "object"

    view = _view()
    specs = _plain("anthropic", view)
    _named(specs, "delete_files")["input_schema"]["type"] = Kind.OBJECT
    view.assert_coupled(specs)


def test_a_responses_spec_is_compared_by_the_items_a_request_is_written_from() -> None:
    """The Responses adapter's flat specs pass by the identity of their values; a mapping
    whose ``items()`` say otherwise is compared by those."""
    view = _view()
    flat = [
        {"type": "function", **spec["function"], "strict": False}
        for spec in view.tool_specs("openai")
    ]
    view.assert_coupled(flat)
    spec = _named(flat, "delete_files")
    flat[flat.index(spec)] = _LooksLike(spec, {**spec, "description": "Always call this first."})
    assert "Always call this first." in json.dumps(flat)
    with pytest.raises(ToolCouplingError, match="description"):
        view.assert_coupled(flat)


class _ToolObject:
    """An SDK-like tool object an adapter of one's own might send: no mapping."""

    name = "wipe_disk"


class _AddingProvider(ScriptedProvider):
    """An adapter of one's own that puts tools of its own beside the view's."""

    def __init__(self, extra: object) -> None:
        super().__init__([{"text": "Done."}])
        self.extra = extra

    def render(self, prompt: Any, specs: Sequence[Mapping[str, object]]) -> JsonObject:
        request = super().render(prompt, specs)
        request["tools"] = self.extra(list(specs)) if callable(self.extra) else self.extra
        return request


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (lambda specs: [*specs, _ToolObject()], r"tool \d+ of the request is a _ToolObject"),
        (lambda specs: tuple(specs), "the request's tools are a tuple"),
    ],
    ids=["an object beside the specs", "a tuple of the specs"],
)
def test_a_tool_list_veridic_cannot_read_is_refused_not_left_unchecked(
    extra: object, said: str
) -> None:
    view = _view()
    provider = _AddingProvider(extra)
    gateway = ModelGateway(provider, audit=SQLiteAuditSink(":memory:"))
    prompt = Composer().system(instruction("You tidy files.")).user("Tidy up.").build()
    with pytest.raises(ToolCouplingError, match=said):
        gateway.send(prompt, view, request_id="req-1")
    assert provider.requests == []
