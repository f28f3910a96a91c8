"""A step whose arguments refer to another step's output: veridic never puts one step's output
into another's arguments, so the tool would get the placeholder itself; the plan is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from veridic import PlanError, Registry, ToolView, normalize_plan
from veridic.tools.plan import _placeholders


def _view() -> ToolView:
    registry = Registry("users")

    @registry.tool(kind="write")
    def create_snippet(code: str) -> str:
        """Store a code snippet that runs before each delivery.

        Args:
            code: The snippet's source.
        """
        return "snippet-1"

    @registry.tool(kind="write")
    def create_user(username: str, password: str, meta: dict[str, list[str]]) -> str:
        """Create a site user.

        Args:
            username: The login name.
            password: The user's password.
            meta: Extra profile fields.
        """
        return "user-1"

    @registry.tool(kind="write")
    def save_schema(schema: dict[str, object]) -> str:
        """Store a JSON Schema the site's forms are checked against.

        Args:
            schema: The schema, with its own $ref pointers.
        """
        return "schema-1"

    return registry.view()


def _plan(
    password: object, meta: object = None, *, first_tool: str = "create_snippet"
) -> list[dict[str, Any]]:
    return [
        {"id": "step_4", "tool": first_tool, "arguments": {"code": "wp_generate_password()"}},
        {
            "id": "step_6",
            "tool": "create_user",
            "arguments": {"username": "ann", "password": password, "meta": meta or {}},
            "depends_on": ["step_4"],
        },
    ]


@pytest.mark.parametrize(
    "password",
    [
        "{{step_4.output}}",
        "{{ step_4.output.password }}",
        "${step_4.result}",
        "${ steps.step_4.output }",
        "pw-{{steps['step_4'].output}}-x",
        "{{STEP_4.output}}",
    ],
)
@pytest.mark.parametrize("first_tool", ["create_snippet", "create_snipet"])
def test_an_argument_that_refers_to_another_steps_output_refuses_the_plan(
    password: str, first_tool: str
) -> None:
    # The seed's build: the user's password comes from the snippet step. Whether that step
    # is kept or dropped, create_user would be called with the placeholder as the password.
    with pytest.raises(PlanError) as raised:
        normalize_plan(_plan(password, first_tool=first_tool), _view())
    message = str(raised.value)
    assert "plan step #1 ('step_6')" in message
    assert "arguments.password" in message
    assert "step 'step_4'" in message
    assert "never puts one step's output into another's arguments" in message


def test_a_reference_nested_in_the_arguments_is_found_with_its_path() -> None:
    meta = {"roles": ["subscriber", "{{ step_4.output }}"]}
    with pytest.raises(PlanError, match=r"arguments\.meta\.roles\[1\]"):
        normalize_plan(_plan("s3cret", meta), _view())


def test_arguments_given_as_json_text_are_read_for_references_too() -> None:
    steps = _plan("x")
    steps[1]["arguments"] = '{"username": "ann", "password": "${step_4.output}", "meta": {}}'
    with pytest.raises(PlanError, match=r"step 'step_4'"):
        normalize_plan(steps, _view())


@pytest.mark.parametrize(
    "password",
    [
        "step_4",  # a value that happens to be a step's id is a value
        "{{ username }}",  # a template of the user's own, naming no step
        "$step_4",  # a bare dollar: SQL and shell write $1 for their own parameters
        "{step_4}",
        "{{step_40.output}}",  # another name
        "{{ my_step_4 }}",
    ],
)
def test_text_that_names_no_step_in_a_placeholder_is_kept_as_written(password: str) -> None:
    plan = normalize_plan(_plan(password), _view())
    assert plan.complete
    assert plan.steps[1].arguments["password"] == password


_IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789-", min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    step_id=_IDS,
    before=st.text(max_size=10),
    after=st.sampled_from(["", ".output", ".result.id", "['value']", " | trim"]),
    form=st.sampled_from(["{{%s}}", "{{ %s }}", "${%s}", "${ %s }"]),
)
def test_every_placeholder_naming_a_step_of_the_plan_is_refused(
    step_id: str, before: str, after: str, form: str
) -> None:
    placeholder = before + form % (step_id + after)
    steps = [
        {"id": step_id, "tool": "create_snippet", "arguments": {"code": "x"}},
        {
            "id": f"{step_id}-user",
            "tool": "create_user",
            "arguments": {"username": "ann", "password": placeholder, "meta": {}},
        },
    ]
    # A number alone is a template's own ({{1}}, the shell's ${1}): see the numbered tests.
    assume(not (step_id.isdecimal() and not after))
    with pytest.raises(PlanError, match="never puts one step's output"):
        normalize_plan(steps, _view())


@settings(max_examples=80, deadline=None)
@given(password=st.text(max_size=40).filter(lambda text: "{{" not in text and "${" not in text))
def test_text_without_a_placeholder_is_never_refused(password: str) -> None:
    plan = normalize_plan(_plan(password), _view())
    assert plan.steps[1].arguments["password"] == password


@pytest.mark.parametrize(
    "password", ["{{ steps['step 4'].output }}", '${steps["Step 4"]}', "${step 4.result}"]
)
def test_an_id_with_a_space_is_found_quoted_or_between_dots(password: str) -> None:
    steps = _plan(password)
    steps[0]["id"] = "step 4"
    steps[1]["depends_on"] = ["step 4"]
    with pytest.raises(PlanError, match=r"step 'step 4'"):
        normalize_plan(steps, _view())


@pytest.mark.parametrize(
    "reference",
    [
        {"$ref": "step_4"},
        {"$ref": "#/steps/step_4/output"},
        {"$ref": "step_4.output.password"},
        {"roles": [{"$ref": "steps['step_4'].output"}]},
    ],
)
def test_a_json_reference_to_another_steps_output_refuses_the_plan(reference: object) -> None:
    # {"$ref": ...} is how JSON writes "the value found there": the tool got the object.
    with pytest.raises(PlanError, match=r"refers to the output of step 'step_4'"):
        normalize_plan(_plan("s3cret", {"roles": [reference]}), _view())


def test_a_json_reference_that_names_no_step_is_kept_as_written() -> None:
    schema = {"properties": {"home": {"$ref": "#/definitions/address"}}}
    steps = _plan("s3cret")
    steps[1] = {"id": "step_6", "tool": "save_schema", "arguments": {"schema": schema}}
    plan = normalize_plan(steps, _view())
    assert plan.complete
    assert plan.steps[1].arguments["schema"] == schema


def test_openers_that_never_close_do_not_hide_a_placeholder_after_them() -> None:
    # Each unclosed "{{" was matched against the whole rest of the text: a model's 80 kB
    # argument of them held normalize_plan() for most of a minute (quadratic), and with
    # 200 kB, for longer than any request waits.
    password = "{{ " * 100_000 + "${step_4.output}"
    with pytest.raises(PlanError, match=r"refers to the output of step 'step_4'"):
        normalize_plan(_plan(password), _view())
    plan = normalize_plan(_plan("${ " * 100_000 + "{{ username }}"), _view())
    assert plan.complete


_BRACES = st.text(alphabet="{}$ x.'", max_size=30)


@settings(max_examples=200, deadline=None)
@given(before=_BRACES, after=_BRACES, form=st.sampled_from(["{{ %s }}", "${ %s }"]))
def test_no_braces_around_a_placeholder_hide_it(before: str, after: str, form: str) -> None:
    # Unclosed openers, stray closers and dollars before or after it: the search that
    # stops at an opener no closer follows must still find the placeholder.
    with pytest.raises(PlanError, match=r"refers to the output of step 'step_4'"):
        normalize_plan(_plan(before + form % "step_4.output" + after), _view())


# --- every form a model writes a placeholder in ---------------------------------------------

_OTHER_FORMS = [
    "$step_4.output",
    "$steps.step_4.output",
    "$step_4['output']",
    "{step_4.output}",
    "{ step_4.output }",
    "{steps[step_4].output}",
    "<step_4.output>",
    "< step_4.output.password >",
    "%(step_4)s",
    "%(step_4.output)s",
    "pw-%(step_4)d-x",
]


@pytest.mark.parametrize("password", _OTHER_FORMS)
def test_a_placeholder_in_another_form_refuses_the_plan(password: str) -> None:
    # Each passed normalize_plan(): the tool got the text, a user created with the password
    # "$step_4.output".
    with pytest.raises(PlanError, match=r"arguments\.password = .* refers to the output of step"):
        normalize_plan(_plan(password), _view())


@pytest.mark.parametrize("placeholder", ["{{ step_4.output }}", "$step_4.output", "%(step_4)s"])
def test_a_placeholder_in_a_mapping_key_refuses_the_plan(placeholder: str) -> None:
    # The tool reads its keys as data too: {"<placeholder>": [...]} reached it as written.
    with pytest.raises(PlanError, match=r"a key .* in arguments\.meta, which refers to the output"):
        normalize_plan(_plan("s3cret", {placeholder: ["x"]}), _view())


@pytest.mark.parametrize(
    "reference",
    [
        {"$ref": ["step_4"]},
        {"$ref": ["#/definitions/x", "#/steps/step_4/output"]},
        {"$ref": [["step_4.output"]]},
        {"$ref": {"step": "step_4"}},
    ],
)
def test_a_json_reference_holding_a_list_that_names_a_step_refuses_the_plan(
    reference: object,
) -> None:
    with pytest.raises(PlanError, match=r"refers to the output of step 'step_4'"):
        normalize_plan(_plan("s3cret", {"roles": [reference]}), _view())


@pytest.mark.parametrize(
    "password",
    [
        "${{ steps.build.outputs.sha }}",  # GitHub Actions, naming no step of this plan
        "run step 4, then step_4 again",  # prose
        "costs $1.50 and $step_4",  # a price, and a bare dollar
        "{step_4}",  # a brace around a bare id: Python's str.format of a word
        '{"step_4": 1}',  # JSON text
        "<step_4>",  # markup
        "<ann@step_4.test>",  # an address
        "%(asctime)s %(message)s",  # a logging format naming no step
        "$HOME/step_4.output",  # a path under a variable naming no step
    ],
)
def test_text_in_those_forms_naming_no_step_is_kept(password: str) -> None:
    plan = normalize_plan(_plan(password), _view())
    assert plan.complete
    assert plan.steps[1].arguments["password"] == password


_SPACE = st.sampled_from(["", " ", "  ", "\t"])
_ACCESSOR = st.sampled_from([".output", ".result.id", "['output']", '["value"]', ".out[0]"])


@settings(max_examples=150, deadline=None)
@given(
    step_id=_IDS.filter(lambda text: text[0].isalpha()),
    accessor=_ACCESSOR,
    inner=_SPACE,
    form=st.sampled_from(["{{%s}}", "${%s}", "{%s}", "<%s>", "%%(%s)s", "$%s"]),
    before=st.sampled_from(["", "pw-", "a $ b { c < d ", "}}>"]),
    as_key=st.booleans(),
)
def test_every_wrapper_and_spacing_naming_a_step_is_refused(
    step_id: str, accessor: str, inner: str, form: str, before: str, as_key: bool
) -> None:
    # "$" takes no space after it (a price, a shell word); the other forms take any.
    spaced = step_id + accessor if form == "$%s" else f"{inner}{step_id}{accessor}{inner}"
    placeholder = before + form % spaced
    steps = [
        {"id": step_id, "tool": "create_snippet", "arguments": {"code": "x"}},
        {
            "id": f"{step_id}-user",
            "tool": "create_user",
            "arguments": {
                "username": "ann",
                "password": "x" if as_key else placeholder,
                "meta": {placeholder: ["x"]} if as_key else {},
            },
        },
    ]
    with pytest.raises(PlanError, match="never puts one step's output"):
        normalize_plan(steps, _view())


class _CountingText(str):
    """An argument that counts how many characters the search for placeholders reads of it:
    each find() from where it starts to where it stops, and each slice taken."""

    read = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:
        found = super().find(sub, start, end)
        begin = 0 if start is None else start
        _CountingText.read += (len(self) if found == -1 else found + len(sub)) - begin
        return found

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:
        found = super().rfind(sub, start, end)
        stop = len(self) if end is None else end
        _CountingText.read += stop - (found if found != -1 else (start or 0))
        return found

    def __getitem__(self, key: Any) -> str:
        taken = super().__getitem__(key)
        _CountingText.read += len(taken)
        return taken


@pytest.mark.parametrize(
    "unit",
    [
        *("{{", "${", "{", "<", "$", "%(", "$a", "$a.", "{a.b", "<a.b", "%(a", "$a[", "{a[b"),
        *("{a.b}", "<a.b>", "$a.b", "%(a)", "{{a}}"),
    ],
)
def test_the_search_for_placeholders_reads_an_argument_a_bounded_number_of_times(
    unit: str,
) -> None:
    # 80 kB of openers that never close, or of paths that never end: the search must read
    # each character a bounded number of times (a quadratic search read it once per opener).
    # Each piece a pattern is matched against is a slice, counted here, and read once. The
    # search is called itself: a plan copies a str subclass to a plain str before it.
    text = unit * (80_000 // len(unit))
    _CountingText.read = 0
    list(_placeholders(_CountingText(text)))  # every inside, read to the end
    assert len(text) <= _CountingText.read <= 40 * len(text)
    assert normalize_plan(_plan(text), _view()).complete


# --- what the search reads is what the tool gets ------------------------------------------


class _HidingText(str):
    """A str whose own methods say it holds no placeholder: the tool reads its characters."""

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:
        return -1

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:
        return -1

    def __str__(self) -> str:
        return "s3cret"


@pytest.mark.parametrize("as_key", [False, True], ids=["value", "key"])
def test_a_str_subclass_cannot_hide_a_placeholder_from_the_search(as_key: bool) -> None:
    # The plan kept the caller's str subclass; its find() said "no placeholder", and the
    # tool, validating a plain str, got "{{ step_4.output }}" as the password.
    hiding = _HidingText("{{ step_4.output }}")
    with pytest.raises(PlanError, match=r"refers to the output of step 'step_4'"):
        normalize_plan(_plan("x", {hiding: ["x"]}) if as_key else _plan(hiding), _view())


def test_a_plan_holds_plain_strings_of_the_characters_it_was_given() -> None:
    # Checked once and run later: the plan's copy is a str of the characters the check read,
    # not the caller's object (whose methods and __str__ may say something else).
    plan = normalize_plan(_plan(_HidingText("pw"), {_HidingText("role"): ["a"]}), _view())
    password, meta = plan.steps[1].arguments["password"], plan.steps[1].arguments["meta"]
    assert type(password) is str
    assert password == "pw"
    assert isinstance(meta, dict)
    assert [(type(key), key) for key in meta] == [(str, "role")]


@pytest.mark.parametrize(
    "arguments",
    [
        {"username": "ann", "password": "x", "meta": {1: ["a"]}},
        {"username": "ann", "password": {2: "x"}, "meta": {}},
        {"username": "ann", "password": ["x", {3: "y"}], "meta": {}},
        {"username": "ann", "password": "x", "meta": {"$ref": {4: "#/definitions/a"}}},
    ],
)
def test_a_key_that_is_not_a_string_deep_in_the_arguments_is_no_crash(
    arguments: dict[str, object],
) -> None:
    # The search for placeholders in keys called int.find(): an AttributeError (or a
    # TypeError under "$ref") escaped normalize_plan() instead of the step being judged.
    steps = _plan("x")
    steps[1]["arguments"] = arguments
    plan = normalize_plan(steps, _view())
    assert [d.reason for d in plan.dropped] in ([], ["invalid_arguments"])


@pytest.mark.parametrize("command", ["cp $1.txt $2.bak", "mv $1.log /tmp/$2.old"])
def test_a_shell_positional_parameter_is_text_when_steps_are_numbered(command: str) -> None:
    # Models number their steps "1", "2": "$1.txt" (the shell's first argument, then
    # ".txt") named step "1", and a plain shell command refused the plan.
    steps = [
        {"id": "1", "tool": "create_snippet", "arguments": {"code": "x"}},
        {"id": "2", "tool": "create_snippet", "arguments": {"code": command}},
    ]
    plan = normalize_plan(steps, _view())
    assert plan.complete
    assert plan.steps[1].arguments["code"] == command


# --- plans whose steps are numbered ----------------------------------------------------------


def _numbered(text: str, first: int = 1) -> list[dict[str, Any]]:
    return [
        {"id": str(first), "tool": "create_snippet", "arguments": {"code": "x"}},
        {"id": str(first + 1), "tool": "create_snippet", "arguments": {"code": text}},
    ]


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize(
    "text",
    [
        "{{ items[1] }}",  # a template's list index
        "{{ loop.index + 1 }}",
        "Hello {{1}}, your order {{2}} ships today",  # WhatsApp's positional variables
        "echo ${1} ${1:-none}",  # the shell's first argument
        "${arr[1]} $args[1]",
        "%(1)s and %(0)s",
        "{x[1]} <row[0]> { x[0] }",
        "costs $price.50 or $total.1",
        "see step 1 and step 0",
        "{{ 1.5 }} {{ 1.0 | round }} {1.25} <0.5>",  # decimals, not step 1's accessor
        "{{ item.results[1].stdout }} {{ out.steps[0].name }}",  # Ansible's loop results
        "{{ step_1a }} {{ step_10 }}",
    ],
)
def test_a_number_that_is_an_index_or_a_template_variable_is_text_when_steps_are_numbered(
    text: str, first: int
) -> None:
    # Steps "1", "2": every number in a placeholder named a step, so a list index, an
    # arithmetic "+ 1" or a template's own {{1}} refused the plan.
    plan = normalize_plan(_numbered(text, first), _view())
    assert plan.complete
    assert plan.steps[1].arguments["code"] == text


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize(
    "text",
    [
        "{{ 1.output }}",
        "{{1['value']}}",
        "${1.result}",
        "{1.output}",
        "<1.output>",
        "{{ steps[1].output }}",
        "{{ steps.1.output }}",
        "${ steps['1'].output }",
        "$steps[1].output",
        "$steps.1.output",
        "{steps.1.output}",
        "<steps.1.id>",
        "{{ 1 | trim }}",
        "<steps[1].id>",
        "{{ outputs[1] }}",
        "{{ results.1 }}",
        "{{ step 1 }}",
        "%(steps[1])s",
        "{{ step_1.output }}",  # a step named by its number after a word, as ids often are
        "{{ step1.output }}",
        "$step_1.output",
        "{step-1.result}",
        "<step_1.id>",
        "%(step_1)s",
        "{{ outputs_1 }}",
    ],
)
def test_a_placeholder_naming_a_numbered_step_is_still_refused(text: str, first: int) -> None:
    steps = _numbered(text, first)
    if first == 0:  # the step named is "1" whether it is the first step or the second
        steps[1]["arguments"]["code"] = "x"
        steps.append({"id": "2", "tool": "create_snippet", "arguments": {"code": text}})
    with pytest.raises(PlanError, match=r"refers to the output of step '1'"):
        normalize_plan(steps, _view())


def test_a_json_reference_to_a_numbered_step_is_refused() -> None:
    for reference in ("#/steps/1/output", "1", "#/1/output"):
        steps = _numbered("x")
        steps[1]["tool"] = "create_user"
        steps[1]["arguments"] = {"username": "a", "password": "b", "meta": {"$ref": reference}}
        with pytest.raises(PlanError, match=r"refers to the output of step '1'"):
            normalize_plan(steps, _view())
