"""A model-written argument keeps its JSON kind: lax coercions that change it are refused.

pydantic's lax mode keeps the coercions that keep what the model wrote (``"5"`` is 5,
``"true"`` is True, ``1.0`` is 1), but it also reads JSON ``true`` as the integer 1, a
number as a boolean, and a number as a time (seconds since 1970). For arguments a
model wrote these are refused as invalid arguments, at any depth, and nothing runs; a
tool that wants the wider kind declares it (``int | bool``). See docs/tools.md, "What
the model's arguments become".
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import inspect
import json
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Annotated, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, RootModel, create_model
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict

from veridic import (
    ApprovalPolicy,
    CallOutcome,
    Composer,
    InvalidArgumentsError,
    Registry,
    SQLiteAuditSink,
    ToolView,
    execute,
    instruction,
)
from veridic.run.approval import ApprovalRequest

PROMPT = Composer().system(instruction("You refund orders.")).build()


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Line(BaseModel):
    sku: str
    quantity: int
    gift: bool = False


def orders(ran: list[object]) -> ToolView:
    registry = Registry("orders")

    @registry.tool(kind="write", irreversible=True)
    def refund(order_id: int, full: bool = False) -> str:
        """Refund an order to the card it was paid with; this cannot be undone.

        Args:
            order_id: The order.
            full: Whether to refund the shipping too.
        """
        ran.append(("refund", order_id, full))
        return "refunded"

    @registry.tool(kind="write")
    def schedule(
        on: dt.date,
        at: dt.datetime | None = None,
        start: dt.time | None = None,
        lasting: dt.timedelta | None = None,
    ) -> str:
        """Schedule a delivery.

        Args:
            on: The day.
            at: The moment the slot opens.
            start: The time of day.
            lasting: How long the slot is.
        """
        ran.append(("schedule", on, at, start, lasting))
        return "scheduled"

    @registry.tool(kind="write")
    def reorder(
        lines: list[Line],
        weights: dict[str, float] | None = None,
        priority: Priority = Priority.LOW,
        copies: Literal[1, 2] = 1,
        confirm: Literal[True] = True,
        pair: tuple[int, bool] = (0, False),
    ) -> str:
        """Order the same lines again.

        Args:
            lines: The lines to order.
            weights: The weight of each line, by sku.
            priority: How urgent.
            copies: How many copies of the invoice.
            confirm: Must be true.
            pair: A count and a flag.
        """
        ran.append(("reorder", lines))
        return "ordered"

    @registry.tool(kind="write")
    def tag(key: int | bool, label: int | str = 0, amount: float | bool = 0.0) -> str:
        """Tag an order with a key that is a number or a flag.

        Args:
            key: The key.
            label: A number or a name.
            amount: An amount or a flag.
        """
        ran.append(("tag", key, label, amount))
        return "tagged"

    return registry.view()


def _asked(asked: list[ApprovalRequest], request: ApprovalRequest) -> bool:
    asked.append(request)
    return True


def test_a_json_boolean_for_an_integer_is_refused_and_nothing_runs() -> None:
    # {"order_id": true} refunded the order 1.
    ran: list[object] = []
    asked: list[ApprovalRequest] = []
    view = orders(ran)
    result = execute(
        view,
        "refund",
        '{"order_id": true}',
        policy=ApprovalPolicy(view),
        audit=SQLiteAuditSink(),
        request_id="req-1",
        prompt=PROMPT,
        confirm=lambda request: _asked(asked, request),
    )
    assert result.outcome is CallOutcome.REFUSED
    assert isinstance(result.error, InvalidArgumentsError)
    assert result.error.fields == ("order_id",)
    assert "order_id: Input should be a valid integer, not the boolean true" in str(result.error)
    assert (ran, asked) == ([], [])


@pytest.mark.parametrize(
    ("arguments", "field", "said"),
    [
        ('{"order_id": false}', "order_id", "a valid integer, not the boolean false"),
        ('{"order_id": 5, "full": 1}', "full", "a valid boolean, not the number 1"),
        ('{"order_id": 5, "full": 0}', "full", "a valid boolean, not the number 0"),
        ('{"order_id": 5, "full": 1.0}', "full", "a valid boolean, not the number 1.0"),
    ],
)
def test_a_number_and_a_boolean_are_not_read_as_each_other(
    arguments: str, field: str, said: str
) -> None:
    ran: list[object] = []
    with pytest.raises(InvalidArgumentsError) as raised:
        orders(ran).validate("refund", arguments)
    assert raised.value.fields == (field,)
    assert f"{field}: Input should be {said}" in str(raised.value)
    assert ran == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ('{"on": 0}', "on"),
        ('{"on": "2026-05-01", "at": 1700000000}', "at"),
        ('{"on": "2026-05-01", "at": 1700000000.5}', "at"),
        ('{"on": "2026-05-01", "start": 3600}', "start"),
        ('{"on": "2026-05-01", "lasting": 90}', "lasting"),
        ('{"on": true}', "on"),
    ],
)
def test_a_number_for_a_date_or_a_time_is_refused(arguments: str, field: str) -> None:
    with pytest.raises(InvalidArgumentsError) as raised:
        orders([]).validate("schedule", arguments)
    assert raised.value.fields == (field,)
    assert "not the " in str(raised.value)
    assert "(a string" in str(raised.value)


def test_what_keeps_the_model_s_words_still_coerces() -> None:
    view = orders([])
    assert dict(view.validate("refund", '{"order_id": "5", "full": "true"}').arguments) == {
        "order_id": 5,
        "full": True,
    }
    assert view.validate("refund", '{"order_id": 5.0}').arguments["order_id"] == 5
    schedule = view.validate(
        "schedule",
        '{"on": "2026-05-01", "at": "2026-05-01T09:00:00Z", "start": "09:30", "lasting": "PT1H"}',
    ).arguments
    assert schedule["on"] == dt.date(2026, 5, 1)
    assert schedule["lasting"] == dt.timedelta(hours=1)
    reorder = view.validate(
        "reorder",
        '{"lines": [{"sku": "a", "quantity": "2", "gift": "yes"}], "weights": {"a": 2},'
        ' "priority": 2, "copies": 2, "confirm": true, "pair": ["3", "false"]}',
    ).arguments
    assert reorder["lines"] == [Line(sku="a", quantity=2, gift=True)]
    assert reorder["weights"] == {"a": 2.0}
    assert (reorder["priority"], reorder["copies"], reorder["pair"]) == (
        Priority.HIGH,
        2,
        (3, False),
    )


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ('{"lines": [{"sku": "a", "quantity": true}]}', "lines.0.quantity"),
        (
            '{"lines": [{"sku": "a", "quantity": 1}, {"sku": "b", "quantity": 1, "gift": 1}]}',
            "lines.1.gift",
        ),
        ('{"lines": [], "weights": {"a": true}}', "weights.a"),
        ('{"lines": [], "priority": true}', "priority"),
        ('{"lines": [], "copies": true}', "copies"),
        ('{"lines": [], "confirm": 1}', "confirm"),
        ('{"lines": [], "pair": [true, false]}', "pair.0"),
        ('{"lines": [], "pair": [1, 0]}', "pair.1"),
    ],
)
def test_a_changed_kind_is_refused_at_any_depth(arguments: str, field: str) -> None:
    ran: list[object] = []
    with pytest.raises(InvalidArgumentsError) as raised:
        orders(ran).validate("reorder", arguments)
    assert raised.value.fields == (field,)
    assert ran == []


def test_a_union_that_names_both_kinds_keeps_each_as_the_model_wrote_it() -> None:
    view = orders([])
    tagged = view.validate("tag", '{"key": true, "label": 7, "amount": false}').arguments
    assert (tagged["key"], tagged["label"], tagged["amount"]) == (True, 7, False)
    assert type(tagged["key"]) is bool
    assert type(tagged["amount"]) is bool
    tagged = view.validate("tag", '{"key": 1, "label": "7", "amount": 1}').arguments
    assert (tagged["key"], tagged["label"], tagged["amount"]) == (1, "7", 1.0)
    assert type(tagged["key"]) is int
    assert type(tagged["amount"]) is float


def test_a_union_that_names_neither_kind_refuses_it_in_readable_words() -> None:
    with pytest.raises(InvalidArgumentsError) as raised:
        orders([]).validate("tag", '{"key": 1, "label": true}')
    message = str(raised.value)
    assert raised.value.fields == ("label.int", "label.str")
    assert "label.int: Input should be a valid integer, not the boolean true" in message
    assert "function-before" not in message


def test_a_strict_field_still_refuses_a_number_written_as_text() -> None:
    registry = Registry("exact")

    @registry.tool(kind="write")
    def refund_exactly(order_id: Annotated[int, Field(strict=True)]) -> str:
        """Refund an order, taking only a JSON integer.

        Args:
            order_id: The order.
        """
        return "refunded"

    view = registry.view()
    assert view.validate("refund_exactly", '{"order_id": 5}').arguments["order_id"] == 5
    for written in ('{"order_id": "5"}', '{"order_id": true}'):
        with pytest.raises(
            InvalidArgumentsError, match="order_id: Input should be a valid integer"
        ):
            view.validate("refund_exactly", written)


def test_an_external_tool_s_json_schema_already_tells_booleans_from_numbers() -> None:
    pytest.importorskip("jsonschema")
    registry = Registry("mcp")
    registry.external(
        name="refund",
        description="Refund an order.",
        input_schema={
            "type": "object",
            "properties": {
                "order_id": {"type": "integer"},
                "amount": {"type": "number"},
                "full": {"type": "boolean"},
            },
        },
        handler=lambda arguments: "refunded",
        kind="write",
    )
    view = registry.view()
    assert dict(view.validate("refund", '{"order_id": 5, "amount": 1.5, "full": true}').arguments)
    for written, field in (
        ('{"order_id": true}', "order_id"),
        ('{"amount": false}', "amount"),
        ('{"full": 1}', "full"),
    ):
        with pytest.raises(InvalidArgumentsError) as raised:
            view.validate("refund", written)
        assert raised.value.fields == (field,)


# The property: for all input models built of int, float, bool, date and str leaves,
# nested in models and lists, a JSON boolean never validates into a number leaf, a JSON
# number never into a boolean or a date, and text the lax mode reads still is.

Shape = object  # a leaf's type, ("list", Shape) or ("model", tuple of Shape)

LEAVES: tuple[type, ...] = (int, float, bool, dt.date, str)

shapes: st.SearchStrategy[Shape] = st.recursive(
    st.sampled_from(LEAVES),
    lambda inner: st.one_of(
        st.tuples(st.just("list"), inner),
        st.tuples(st.just("model"), st.lists(inner, min_size=1, max_size=3).map(tuple)),
    ),
    max_leaves=6,
)


def _annotation(shape: Shape, names: list[int]) -> object:
    if isinstance(shape, type):
        return shape
    assert isinstance(shape, tuple)
    if shape[0] == "list":
        return list[_annotation(shape[1], names)]  # type: ignore[misc]  # a type built at run time
    names.append(len(names))
    fields = {f"f{i}": (_annotation(part, names), ...) for i, part in enumerate(shape[1])}
    return create_model(f"Part{names[-1]}", **fields)  # type: ignore[call-overload]  # fields built at run time


def _tool_view(shape: Shape) -> ToolView:
    registry = Registry("shaped")

    def shaped(payload: object) -> str:
        """Take a payload of a generated shape.

        Args:
            payload: The payload.
        """
        return "taken"

    annotation = _annotation(shape, [])
    shaped.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # a signature built at run time
        [inspect.Parameter("payload", inspect.Parameter.KEYWORD_ONLY, annotation=annotation)]
    )
    registry.tool(kind="query")(shaped)
    return registry.view()


def _value(shape: Shape, leaf: Callable[[type], object]) -> object:
    """A JSON value of ``shape`` with one element per list, each leaf made by ``leaf``."""
    if isinstance(shape, type):
        return leaf(shape)
    assert isinstance(shape, tuple)
    if shape[0] == "list":
        return [_value(shape[1], leaf)]
    return {f"f{i}": _value(part, leaf) for i, part in enumerate(shape[1])}


def _plain(value: object) -> object:
    if isinstance(value, BaseModel):
        return {name: _plain(item) for name, item in value}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


TEXT: dict[type, tuple[str, object]] = {
    int: ("5", 5),
    float: ("2.5", 2.5),
    bool: ("true", True),
    dt.date: ("2026-05-01", dt.date(2026, 5, 1)),
    str: ("x", "x"),
}


def _leaf_kinds(shape: Shape) -> list[type]:
    kinds: list[type] = []
    _value(shape, lambda kind: kinds.append(kind))
    return kinds


def _other_kind(kind: type, data: st.DataObject) -> object:
    """A JSON value of the other kind among boolean and number than the leaf takes."""
    if kind in (int, float):
        return data.draw(st.booleans())
    return data.draw(st.one_of(st.integers(-(10**9), 10**9), st.floats(-1e9, 1e9)))


@settings(max_examples=80, deadline=None)
@given(shape=shapes, data=st.data())
def test_property_a_boolean_is_never_a_number_and_a_number_never_a_boolean_or_a_date(
    shape: Shape, data: st.DataObject
) -> None:
    view = _tool_view(shape)
    written = _value(shape, lambda kind: TEXT[kind][0])
    taken = view.validate("shaped", json.dumps({"payload": written})).arguments["payload"]
    assert _plain(taken) == _value(shape, lambda kind: TEXT[kind][1])  # text still coerces
    kinds = _leaf_kinds(shape)
    wrong_at = data.draw(
        st.sampled_from([i for i, kind in enumerate(kinds) if kind is not str] or [-1])
    )
    if wrong_at < 0:
        return
    leaves = iter(range(len(kinds)))
    wrong = _value(
        shape,
        lambda kind: _other_kind(kind, data) if next(leaves) == wrong_at else TEXT[kind][0],
    )
    with pytest.raises(InvalidArgumentsError) as raised:
        view.validate("shaped", json.dumps({"payload": wrong}))
    assert len(raised.value.fields) == 1
    assert raised.value.fields[0].startswith("payload")
    assert ", not the " in str(raised.value)


# The second read: the build touches none of the application's classes, a model with an
# __init__ of its own is checked too, and the forms pydantic gives a nested value are held.


class _Mark(enum.Enum):
    """An enum whose member, a Literal's value, asks another thread to rebuild ``Probed``
    when it is hashed (pydantic-core hashes a Literal's values when it builds a validator):
    a complete class answers None, so anything else means that the build showed the class
    to other threads as incomplete."""

    PROBE = "probe"

    def __hash__(self) -> int:
        if _PROBING and not _INSIDE:
            _INSIDE.append(True)
            try:
                thread = threading.Thread(target=lambda: _REBUILT.append(Probed.model_rebuild()))
                thread.start()
                thread.join()
            finally:
                _INSIDE.clear()
        return hash(self.value)


_PROBING: list[bool] = []
_INSIDE: list[bool] = []
_REBUILT: list[bool | None] = []


class Probed(BaseModel):
    quantity: int
    mark: Literal[_Mark.PROBE] = _Mark.PROBE


def test_building_the_check_leaves_the_application_s_models_as_they_were_for_other_threads() -> (
    None
):
    # The check was built with __pydantic_complete__ cleared on Probed: model_rebuild() in
    # another thread meanwhile rebuilt the application's class, replacing its validator.
    validator = Probed.__pydantic_validator__
    registry = Registry("probed")

    @registry.tool(kind="write")
    def restock(line: Probed) -> str:
        """Restock a line.

        Args:
            line: The line.
        """
        return "restocked"

    _REBUILT.clear()
    _PROBING.append(True)
    try:
        view = registry.view()  # the tool, and the check of its arguments, are built here
    finally:
        _PROBING.clear()
    assert _REBUILT  # the probe ran while the check was built
    assert set(_REBUILT) == {None}
    assert Probed.__pydantic_validator__ is validator
    assert Probed.__dict__["__pydantic_complete__"] is True
    with pytest.raises(InvalidArgumentsError, match=r"line\.quantity: Input should be a valid"):
        view.validate("restock", '{"line": {"quantity": true}}')


def test_a_model_with_an_init_of_its_own_is_checked_too() -> None:
    # pydantic runs such a model's own __init__, and so its own validator: a boolean for a
    # number passed inside it.
    inits: list[object] = []

    class Counted(BaseModel):
        quantity: int
        gift: bool = False

        def __init__(self, **data: object) -> None:
            inits.append(dict(data))
            data.setdefault("quantity", 1)  # a value its __init__ fills in
            super().__init__(**data)

    registry = Registry("counted")

    @registry.tool(kind="write")
    def restock(lines: list[Counted]) -> str:
        """Restock lines.

        Args:
            lines: The lines.
        """
        return "restocked"

    view = registry.view()
    for written, field in (
        ('{"lines": [{"quantity": true}]}', "lines.0.quantity"),
        ('{"lines": [{"quantity": 1}, {"quantity": 2, "gift": 1}]}', "lines.1.gift"),
    ):
        with pytest.raises(InvalidArgumentsError) as raised:
            view.validate("restock", written)
        assert raised.value.fields == (field,)
        assert "not the " in str(raised.value)
    inits.clear()
    taken = view.validate("restock", '{"lines": [{"quantity": "2"}, {"gift": "yes"}]}')
    lines = taken.arguments["lines"]
    assert isinstance(lines, list)
    assert [(line.quantity, line.gift) for line in lines] == [
        (2, False),
        (1, True),
    ]
    assert inits == [{"quantity": "2"}, {"gift": "yes"}]  # its own __init__ ran, once each


def test_a_boolean_is_not_a_fraction_or_a_complex_number() -> None:
    registry = Registry("numbers")

    @registry.tool(kind="query")
    def share(part: Fraction, point: complex = 0j) -> str:
        """Show a share.

        Args:
            part: The share, as a fraction.
            point: A point on the plane.
        """
        return "shown"

    view = registry.view()
    assert view.validate("share", '{"part": "1/2", "point": 2}').arguments["part"] == Fraction(1, 2)
    for written, field in (('{"part": true}', "part"), ('{"part": 1, "point": false}', "point")):
        with pytest.raises(InvalidArgumentsError) as raised:
            view.validate("share", written)
        assert raised.value.fields == (field,)
        assert "not the boolean" in str(raised.value)


def test_a_huge_number_is_said_by_its_size_in_the_error_the_model_reads() -> None:
    # The refusal quoted the number whole: a 4000-digit number went back to the model, and
    # past 4300 digits the refusal itself failed to write it.
    for huge, digits in ((10**4000, 4001), (-(10**5000), 5001)):
        with pytest.raises(InvalidArgumentsError) as raised:
            orders([]).validate("refund", {"order_id": 5, "full": huge})
        assert raised.value.fields == ("full",)
        assert f"not the number of about {digits} digits" in str(raised.value)
        assert len(str(raised.value)) < 1000


class _Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    number: int = Field(validation_alias=AliasChoices("num", "n"))
    flag: bool = Field(alias="on", default=False)


class _Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class _Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class _Tree(BaseModel):
    value: int
    children: list[_Tree] = []


class _Ids(RootModel[list[int]]):
    pass


class _Typed(TypedDict):
    count: int


@dataclasses.dataclass
class _Plain:
    count: int


@pydantic_dataclass
class _PydanticPlain:
    count: int


class _Forms(BaseModel):
    aliased: _Aliased | None = None
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")] | None = None
    tree: _Tree | None = None
    ids: _Ids | None = None
    typed: _Typed | None = None
    plain: _Plain | None = None
    pydantic_plain: _PydanticPlain | None = None
    by_number: dict[int, int] | None = None
    maybe: int | None = None


def _forms_view() -> ToolView:
    registry = Registry("forms")

    @registry.tool(kind="query")
    def inspect_forms(forms: _Forms) -> str:
        """Take a value in each form pydantic gives a nested argument.

        Args:
            forms: The forms.
        """
        return "taken"

    return registry.view()


@pytest.mark.parametrize(
    ("written", "field"),
    [
        ({"aliased": {"num": True}}, "forms.aliased.num"),
        ({"aliased": {"n": True}}, "forms.aliased.n"),
        ({"aliased": {"number": True}}, "forms.aliased.number"),
        ({"aliased": {"num": 1, "on": 1}}, "forms.aliased.on"),
        ({"aliased": {"num": 1, "flag": 0}}, "forms.aliased.flag"),
        ({"pet": {"kind": "cat", "lives": True}}, "forms.pet.cat.lives"),
        ({"pet": {"kind": "dog", "good": 1}}, "forms.pet.dog.good"),
        (
            {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": True}]}]}},
            "forms.tree.children.0.children.0.value",
        ),
        ({"ids": [1, True]}, "forms.ids.1"),
        ({"typed": {"count": True}}, "forms.typed.count"),
        ({"plain": {"count": True}}, "forms.plain.count"),
        ({"pydantic_plain": {"count": False}}, "forms.pydantic_plain.count"),
        ({"by_number": {"1": True}}, "forms.by_number.1"),
        ({"maybe": True}, "forms.maybe"),
    ],
)
def test_each_form_of_a_nested_value_is_checked(written: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgumentsError) as raised:
        _forms_view().validate("inspect_forms", {"forms": written})
    assert raised.value.fields == (field,)
    assert ", not the " in str(raised.value)


def test_each_form_of_a_nested_value_still_takes_text_and_json_keys() -> None:
    written = {
        "aliased": {"num": "1", "on": "true"},
        "pet": {"kind": "dog", "good": "yes"},
        "tree": {"value": "1", "children": [{"value": 2}]},
        "ids": ["1", 2],
        "typed": {"count": "3"},
        "plain": {"count": "3"},
        "pydantic_plain": {"count": 3},
        "by_number": {"1": "2"},
        "maybe": None,
    }
    forms = _forms_view().validate("inspect_forms", {"forms": written}).arguments["forms"]
    assert isinstance(forms, _Forms)
    assert forms.aliased is not None
    assert forms.tree is not None
    assert forms.ids is not None
    assert (forms.aliased.number, forms.aliased.flag) == (1, True)
    assert forms.pet == _Dog(kind="dog", good=True)
    assert forms.tree.children[0].value == 2
    assert forms.ids.root == [1, 2]
    assert forms.typed == {"count": 3}
    assert forms.plain == _Plain(count=3)
    assert forms.by_number == {1: 2}
    assert forms.maybe is None
