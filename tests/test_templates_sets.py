"""A data template renders each set its parameter type declares sorted.

A set of text iterates in hash-seed order, so the same values rendered different bytes
on two workers: a different block, prompt sha256 and provider prompt cache.
Instruction templates refuse sets; a data template sorts them, as deferred approvals
show a set argument.
"""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any, Final, Optional, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from veridic import Templates, instruction, unfence
from veridic.templates import TemplateParamsError

SOURCE = "{% for t in tags %}{{ t }};{% endfor %}|{{ tags|join(',') }}"


class Tagged(TypedDict):
    tags: set[str]


class Nested(TypedDict):
    tags: list[dict[str, frozenset[str]]]


class Maybe(BaseModel):
    tags: Optional[AbstractSet[int]]  # noqa: UP045 - the spelling a user writes is what is read


class Inner(BaseModel):
    labels: set[int]


class Outer(TypedDict):
    tags: list[Inner]


class Loose(TypedDict):
    tags: object


class Anyhow(TypedDict):
    tags: Any


class AnyModel(BaseModel):
    tags: Any


class Holding(TypedDict):
    tags: list[dict[str, Any]] | tuple[Any, ...] | list[Any]


def _templates(tmp_path: Path, source: str = SOURCE) -> Templates:
    (tmp_path / "tags.j2").write_text(source)
    return Templates(tmp_path)


def _rendered(templates: Templates, params: type, values: object) -> str:
    [(_, text)] = unfence(templates.data("tags.j2", params=params).render(values))  # type: ignore[arg-type]  # each test passes its own parameter type
    return text


RENDER = (
    "import sys\n"
    "from typing import TypedDict\n"
    "from veridic import Templates, unfence\n"
    "class Tagged(TypedDict):\n"
    "    tags: set[str]\n"
    "t = Templates(sys.argv[1]).data('tags.j2', params=Tagged)\n"
    "print(unfence(t.render({'tags': {'alpha', 'beta', 'gamma', 'delta', 'epsilon'}}))[0][1])\n"
)


def test_a_set_of_text_renders_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    # Under three hash seeds the loop and |join gave three orders; now one, sorted.
    _templates(tmp_path)
    renders = {
        subprocess.run(
            [sys.executable, "-c", RENDER, str(tmp_path)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert renders == {"alpha;beta;delta;epsilon;gamma;|alpha,beta,delta,epsilon,gamma\n"}


def test_sets_inside_lists_and_mappings_render_sorted(tmp_path: Path) -> None:
    templates = _templates(
        tmp_path,
        "{% for d in tags %}{% for k, v in d.items() %}{{ k }}={{ v|join('+') }} "
        "{% endfor %}{% endfor %}",
    )
    values = {"tags": [{"b": frozenset({"y", "x"}), "a": frozenset({"z"})}]}
    assert _rendered(templates, Nested, values) == "b=x+y a=z "  # a mapping keeps its order


def test_a_set_behind_optional_renders_sorted_and_none_stays_none(tmp_path: Path) -> None:
    templates = _templates(tmp_path, "{% if tags is none %}none{% else %}" + SOURCE + "{% endif %}")
    assert _rendered(templates, Maybe, Maybe(tags={3, 1, 2})) == "1;2;3;|1,2,3"
    assert _rendered(templates, Maybe, Maybe(tags=None)) == "none"


def test_a_set_whose_items_cannot_be_sorted_is_refused_naming_the_variable(tmp_path: Path) -> None:
    templates = _templates(tmp_path)
    template = templates.data("tags.j2", params=Tagged)
    with pytest.raises(TemplateParamsError, match=r"variable 'tags' of .*cannot be sorted.*a list"):
        template.render({"tags": {"a", 1}})  # type: ignore[arg-type]  # what a careless caller passes


LABELS: Final = "{% for t in tags[0].labels %}{{ t }};{% endfor %}{{ tags[0].labels }}"


@dataclass(frozen=True)
class Labels:
    labels: set[int]
    name: str = "l"


class Declared(TypedDict):
    tags: list[Labels]


@pytest.mark.parametrize(
    ("params", "value"),
    [(Outer, [Inner(labels={8, 1})]), (Declared, [Labels(labels={8, 1})])],
    ids=["model", "dataclass"],
)
@pytest.mark.parametrize("stored", [False, True], ids=["shipped", "stored"])
def test_a_set_field_of_a_nested_model_or_dataclass_renders_sorted(
    tmp_path: Path, params: type, value: list[object], stored: bool
) -> None:
    # A nested model's set field was refused when the template loaded (the render could
    # not sort it), and a dataclass's was not seen: both iterated in hash order.
    templates = _templates(tmp_path, LABELS)
    template: Any = (
        templates.data_from_source(instruction(LABELS), params=params)
        if stored
        else templates.data("tags.j2", params=params)
    )
    [(_, text)] = unfence(template.render({"tags": value}))
    assert text == "1;8;{1, 8}"
    assert list(value[0].labels) == [8, 1]  # type: ignore[attr-defined]  # the caller's own value is left as it was


def test_a_stored_data_template_renders_a_declared_set_sorted(tmp_path: Path) -> None:
    stored = instruction("{{ ', '.join(tags) }} / {% for t in tags %}{{ t }}{% endfor %}")
    template = Templates().data_from_source(stored, params=Tagged)
    [(_, text)] = unfence(template.render({"tags": {"beta", "alpha"}}))
    assert text == "alpha, beta / alphabeta"


RENDER_ANY = RENDER.replace("tags: set[str]", "tags: Any").replace(
    "from typing import TypedDict", "from typing import Any, TypedDict"
)


def test_a_set_in_a_field_typed_any_renders_the_same_bytes_in_every_process(
    tmp_path: Path,
) -> None:
    # A field typed Any (or object) was passed as it is: the set iterated in hash-seed order.
    _templates(tmp_path)
    renders = {
        subprocess.run(
            [sys.executable, "-c", RENDER_ANY, str(tmp_path)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert renders == {"alpha;beta;delta;epsilon;gamma;|alpha,beta,delta,epsilon,gamma\n"}


@pytest.mark.parametrize("params", [Loose, Anyhow, AnyModel, Holding])
def test_a_set_behind_any_or_object_renders_sorted_wherever_it_is(
    tmp_path: Path, params: type
) -> None:
    templates = _templates(tmp_path, "{{ tags }} {{ tags|length }}")
    values = {"tags": [{"k": {"b", "c", "a"}}, ({"z", "y"},)]}
    model = params if isinstance(params, type) and issubclass(params, BaseModel) else None
    given = model(**values) if model is not None else values
    assert _rendered(templates, params, given) == ("[{'k': {'a', 'b', 'c'}}, ({'y', 'z'},)] 2")


def test_a_loosely_typed_value_holding_no_set_is_passed_as_it_is(tmp_path: Path) -> None:
    # Walked for sets, not copied: a Mapping of the application's keeps its own methods.
    class Catalogue(dict[str, int]):
        def total(self) -> int:
            return sum(self.values())

    templates = _templates(tmp_path, "{{ tags.total() }} {{ tags|length }}")
    assert _rendered(templates, Loose, {"tags": Catalogue(a=1, b=2)}) == "3 2"


@dataclass
class Box:
    """A dataclass holding anything: what an application passes behind ``Any``."""

    held: Any
    note: str = "n"
    unset: int = field(init=False, repr=False)  # never set: a field that is not there

    def shown(self) -> str:
        return f"{self.note}:{self.held}"


@dataclass(frozen=True, slots=True)
class FrozenBox:
    held: Any


class ModelBox(BaseModel, frozen=True, extra="allow"):
    held: Any


def _attrs_box(held: object) -> object:
    attrs = pytest.importorskip("attrs")
    return attrs.make_class("AttrsBox", ["held"], frozen=True, slots=True)(held)


@pytest.mark.parametrize(
    "box",
    [
        Box,
        FrozenBox,
        lambda held: ModelBox(held=held),
        lambda held: ModelBox.model_validate({"held": 1, "more": held}),
    ],
    ids=["dataclass", "frozen-slots-dataclass", "model", "model-extra"],
)
def test_a_set_held_by_a_dataclass_or_model_behind_any_renders_sorted(
    tmp_path: Path, box: Any
) -> None:
    # Only lists, tuples and mappings were walked: a set in a dataclass or a model behind
    # Any iterated in hash order (frozenset({1, 8}) iterates 8 first in every process).
    made = box({8, 1})
    inner = "more" if "more" in repr(made) else "held"
    templates = _templates(
        tmp_path, f"{{% for t in tags[0].{inner} %}}{{{{ t }}}};{{% endfor %}}{{{{ tags }}}}"
    )
    text = _rendered(templates, Anyhow, {"tags": [made]})
    assert text.startswith("1;8;["), text
    assert "{1, 8}" in text, text
    assert list(getattr(made, inner)) == [8, 1]  # the caller's own value is left as it was


def test_a_set_held_by_an_attrs_instance_behind_any_renders_sorted(tmp_path: Path) -> None:
    templates = _templates(tmp_path, "{{ tags.held | join(',') }}")
    assert _rendered(templates, Anyhow, {"tags": _attrs_box({8, 1})}) == "1,8"


def test_a_dataclass_behind_any_keeps_its_methods_and_one_holding_no_set_is_passed_as_it_is(
    tmp_path: Path,
) -> None:
    templates = _templates(tmp_path, "{{ tags[0].shown() }} {{ tags[1].shown() }}")
    plain = Box("x")
    text = _rendered(templates, Anyhow, {"tags": [Box(frozenset({8, 1})), plain]})
    assert text == "n:frozenset({1, 8}) n:x"


@dataclass
class Shared:
    """A dataclass whose copy is itself: sorting its set would change the caller's own."""

    held: Any

    def __copy__(self) -> Shared:
        return self


def test_a_set_in_an_instance_whose_copy_is_itself_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    templates = _templates(tmp_path, "{{ tags.held }}")
    shared = Shared({8, 1})
    with pytest.raises(TemplateParamsError, match=r"variable 'tags' .*copy is itself.*a list"):
        _rendered(templates, Anyhow, {"tags": shared})
    assert type(shared.held) is set


class Uncopyable:
    """A base whose instances refuse to be copied (as a class holding a lock or a socket)."""

    def __reduce_ex__(self, protocol: typing.SupportsIndex) -> str | tuple[Any, ...]:
        raise TypeError("cannot pickle 'Uncopyable' object")


@dataclass
class Sealed(Uncopyable):
    held: Any


def test_a_set_in_an_instance_that_cannot_be_copied_is_refused_naming_the_variable(
    tmp_path: Path,
) -> None:
    # copy.copy()'s bare TypeError left the render with no word of the variable or the way out.
    templates = _templates(tmp_path, "{{ tags.held }}")
    sealed = Sealed({8, 1})
    with pytest.raises(
        TemplateParamsError, match=r"'tags' .*Sealed.*cannot be copied.*cannot pickle.*a list"
    ):
        _rendered(templates, Anyhow, {"tags": sealed})
    assert type(sealed.held) is set


@dataclass(frozen=True, order=True)
class Ranked:
    """Ordered by its fields in turn: two with one name are ordered by their sets, which
    ``<`` orders by inclusion, not by what they hold."""

    name: str
    labels: frozenset[str]


@pytest.mark.parametrize(
    "items",
    [
        [Ranked("a", frozenset({"x"})), Ranked("a", frozenset({"y"}))],
        [Ranked("a", frozenset({"x"})), Ranked("b", frozenset()), Ranked("a", frozenset({"y"}))],
    ],
    ids=["two", "three"],
)
def test_a_set_whose_items_order_leaves_two_unordered_is_refused(
    tmp_path: Path, items: list[Ranked]
) -> None:
    # Each worker rendered the two with one name in the order its hash seed gave them.
    templates = _templates(tmp_path, "{{ tags }}")
    with pytest.raises(
        TemplateParamsError, match=r"'tags' .*of Ranked in which two items.*neither less.*a list"
    ):
        _rendered(templates, Anyhow, {"tags": set(items)})


def test_a_set_of_items_in_one_order_renders_sorted(tmp_path: Path) -> None:
    templates = _templates(tmp_path, "{{ tags | join(' ') }}")
    items = {Ranked("b", frozenset({"x"})), Ranked("a", frozenset({"y"}))}
    text = _rendered(templates, Anyhow, {"tags": items})
    assert text.index("name='a'") < text.index("name='b'")


@dataclass
class Node:
    ids: Any
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)


def test_dataclasses_that_hold_each_other_and_a_set_render_its_sets_sorted(
    tmp_path: Path,
) -> None:
    root = Node(frozenset({8, 1}))
    root.children.append(Node({8, 1}, parent=root))
    templates = _templates(
        tmp_path, "{{ tags.ids }} {{ tags.children[0].ids }} {{ tags.children[0].parent.ids }}"
    )
    assert _rendered(templates, Anyhow, {"tags": root}) == (
        "frozenset({1, 8}) {1, 8} frozenset({1, 8})"
    )


def test_a_set_behind_any_whose_items_cannot_be_sorted_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    templates = _templates(tmp_path)
    template = templates.data("tags.j2", params=Anyhow)
    with pytest.raises(
        TemplateParamsError, match=r"variable 'tags' of .*tags.j2.*cannot be sorted.*pass a list"
    ):
        template.render({"tags": [{"a", 1}]})


@given(st.lists(st.text(max_size=6), unique=True, max_size=12), st.randoms())
def test_property_a_set_typed_any_renders_as_its_sorted_items_whatever_its_insertion_order(
    items: list[str], shuffler: Random
) -> None:
    template = Templates().data_from_source(
        instruction("{% for t in tags %}{{ t|length }}:{{ t }}{% endfor %}{{ tags }}"),
        params=Anyhow,
    )
    shuffled = list(items)
    shuffler.shuffle(shuffled)
    [(_, first)] = unfence(template.render({"tags": set(items)}))
    [(_, second)] = unfence(template.render({"tags": set(shuffled)}))
    [(_, listed)] = unfence(
        Templates()
        .data_from_source(
            instruction("{% for t in tags %}{{ t|length }}:{{ t }}{% endfor %}"), params=Anyhow
        )
        .render({"tags": sorted(items)})
    )
    shown = "{" + ", ".join(map(repr, sorted(items))) + "}" if items else "set()"
    assert first == second == listed + shown


@given(st.frozensets(st.text(max_size=8), max_size=12))
def test_property_a_declared_set_renders_as_its_sorted_items(tags: frozenset[str]) -> None:
    template = Templates().data_from_source(
        instruction("{% for t in tags %}{{ t|length }}:{{ t }}{% endfor %}"), params=Tagged
    )
    [(_, text)] = unfence(template.render({"tags": set(tags)}))
    assert text == "".join(f"{len(t)}:{t}" for t in sorted(tags))


def test_a_declared_set_prints_as_a_set_sorted_and_is_still_looked_up(tmp_path: Path) -> None:
    templates = _templates(tmp_path, "{{ tags }} {{ 'b' in tags }} {{ tags|length }}")
    assert _rendered(templates, Tagged, {"tags": {"c", "a", "b"}}) == "{'a', 'b', 'c'} True 3"
    assert _rendered(templates, Tagged, {"tags": set()}) == "set() False 0"


class KeyedBySet(TypedDict):
    tags: dict[frozenset[int], str]


# frozenset({1, 8}) iterates 8 before 1 in every process (an int is its own hash): a set
# printed in hash order, not sorted, shows here without a second process.


@pytest.mark.parametrize(
    ("params", "value", "shown"),
    [
        (KeyedBySet, {frozenset({1, 8}): "x"}, "{frozenset({1, 8}): 'x'}"),
        (Anyhow, {frozenset({1, 8}): "x"}, "{frozenset({1, 8}): 'x'}"),
        (Anyhow, {("a", frozenset({1, 8})): 1}, "{('a', frozenset({1, 8})): 1}"),
        (Anyhow, {frozenset({frozenset({1, 8})})}, "{frozenset({frozenset({1, 8})})}"),
        (Anyhow, [({"k": frozenset({1, 8})},)], "[({'k': frozenset({1, 8})},)]"),
    ],
)
def test_a_set_in_a_mapping_key_or_nested_in_sets_and_tuples_renders_sorted(
    tmp_path: Path, params: type, value: object, shown: str
) -> None:
    templates = _templates(tmp_path, "{{ tags }}")
    assert _rendered(templates, params, {"tags": value}) == shown


def test_a_mapping_keyed_by_a_set_is_still_looked_up_by_that_set(tmp_path: Path) -> None:
    # The key read sorted is equal to the set given (and hashes the same).
    templates = _templates(
        tmp_path, "{{ tags[key] }}|{% for k, v in tags.items() %}{{ k }}{% endfor %}"
    )

    class Keyed(TypedDict):
        tags: Any
        key: frozenset[int]

    values = {"tags": {frozenset({1, 8}): "found"}, "key": frozenset({8, 1})}
    assert _rendered(templates, Keyed, values) == "found|frozenset({1, 8})"


def _cycles() -> list[object]:
    listed: list[object] = ["a"]
    listed.append(listed)
    mapped: dict[str, object] = {"name": "root"}
    mapped["self"] = mapped
    parent: dict[str, object] = {"name": "p", "children": []}
    child = {"name": "c", "parent": parent}
    parent["children"].append(child)  # type: ignore[attr-defined]  # a list, as written above
    return [listed, mapped, parent]


@pytest.mark.parametrize("value", _cycles(), ids=["list", "dict", "tree"])
def test_a_value_typed_any_that_holds_itself_renders_as_jinja2_prints_it(
    tmp_path: Path, value: object
) -> None:
    # A tree of dicts with links to their parents: walked for sets, the walk must end.
    templates = _templates(tmp_path, "{{ tags }}")
    assert _rendered(templates, Anyhow, {"tags": value}) == str(value)


def test_a_value_that_holds_itself_and_a_set_renders_its_sets_sorted_everywhere(
    tmp_path: Path,
) -> None:
    parent: dict[str, object] = {"ids": frozenset({1, 8}), "children": []}
    parent["children"].append({"parent": parent, "ids": {8, 1}})  # type: ignore[attr-defined]  # a list, as written above
    templates = _templates(
        tmp_path, "{{ tags.ids }} {{ tags.children[0].ids }} {{ tags.children[0].parent.ids }}"
    )
    shown = _rendered(templates, Anyhow, {"tags": parent})
    assert shown == "frozenset({1, 8}) {1, 8} frozenset({1, 8})"
    (tmp_path / "whole").mkdir()
    whole = _templates(tmp_path / "whole", "{{ tags }}")
    assert _rendered(whole, Anyhow, {"tags": parent}) == (
        "{'ids': frozenset({1, 8}), 'children': [{'parent': {...}, 'ids': {1, 8}}]}"
    )


_SET_ITEMS = st.integers(min_value=-40, max_value=40)
_OF_INTS = st.frozensets(_SET_ITEMS, max_size=6)
_SETS = (  # a set's items of one kind, so that they sort
    _OF_INTS
    | st.frozensets(_OF_INTS, max_size=3)
    | st.sets(_SET_ITEMS, max_size=6)
    | st.sets(_OF_INTS, max_size=3)
)
_HOLDING_SETS = st.recursive(
    _SETS | _SET_ITEMS | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=2) | _OF_INTS, inner, max_size=3)
        | st.builds(FrozenBox, inner)
        | st.builds(ModelBox.model_validate, st.fixed_dictionaries({"held": inner}))
    ),
    max_leaves=12,
)


def _rebuilt(value: object, shuffler: Random) -> object:
    """``value`` with each set made again from its items in another order (so iterating
    in another order, where items collide in the set's table)."""
    if isinstance(value, set | frozenset):
        items = [_rebuilt(item, shuffler) for item in value]
        shuffler.shuffle(items)
        return type(value)(items)
    if isinstance(value, list | tuple):
        return type(value)(_rebuilt(item, shuffler) for item in value)
    if isinstance(value, dict):
        return {_rebuilt(key, shuffler): _rebuilt(item, shuffler) for key, item in value.items()}
    if isinstance(value, FrozenBox | ModelBox):
        return type(value)(held=_rebuilt(value.held, shuffler))
    return value


@given(_HOLDING_SETS, st.randoms())
def test_property_a_value_typed_any_renders_the_same_whatever_order_its_sets_were_built_in(
    value: object, shuffler: Random
) -> None:
    # Sets in lists, tuples, dict values and keys, sets, dataclasses and models: read sorted.
    template = Templates().data_from_source(instruction("{{ tags }}"), params=Anyhow)
    first = template.render({"tags": value})
    assert template.render({"tags": _rebuilt(value, shuffler)}) == first
