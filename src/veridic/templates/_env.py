"""The jinja2 environments veridic renders with, and the rewrite every template gets.

Settings that close the laundering doors: autoescape off (data blocks replace
escaping, and ``Markup`` would otherwise be a way to mark text safe), the
``safe`` filter removed and refused at load, ``StrictUndefined``, no
extensions, ``auto_reload`` off (templates ship with the code, and a ``stat``
per include would be the largest cost of a render).

An environment renders one kind of template, instruction or data (a file used
as both is compiled once per kind). Forbidden constructs (``|safe``,
``{% autoescape %}``, a template named by an expression, and jinja2's random
parts, ``|random`` and ``lipsum()``, which would make two renders of the same
values differ) are refused for every template the environment compiles. A
shipped template may not read Python's own attributes (``x.__hash__``): refused when
it compiles, and, for a name given at render, by :meth:`ProvenanceEnvironment.getitem`
and ``|attr`` (the sandbox refuses them for a stored one). The input of every filter
that writes it as text is checked as an output is (``_written``). An
instruction template's tree is also rewritten before jinja2 generates code (the
documented ``_generate`` hook), see ``_runtime`` for why:

- each group of literal text becomes a reference to the trusted value minted
  for it at compile time, and each expression output ``{{ x }}`` becomes
  ``emit(x, "file:line")``;
- constant expressions become literal text, as jinja2 would fold them, and a
  ``{% filter %}`` block's result goes through ``emit`` like an output.

Those outputs are compiled by :class:`ProvenanceCodeGenerator` (the
documented ``code_generator_class``), which hands the value over without
jinja2's ``str(...)``. A data template renders as jinja2 renders it: its whole
output becomes one data block, so nothing in it needs to remember its source.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Final, Literal, TypeGuard

from jinja2 import BaseLoader, Environment, StrictUndefined, nodes, pass_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import EvalContext
from jinja2.runtime import Context, LoopContext, Macro
from jinja2.sandbox import SandboxedEnvironment, modifies_known_mutable

from veridic._sample import clip
from veridic.errors import TemplateError
from veridic.templates._analysis import (
    bound_names,
    dynamic_reference,
    references,
    static_names,
)
from veridic.templates._bounds import (
    INTERCEPTED,
    bounded_filters,
    bounded_format,
    bounded_tests,
    check_binop,
    check_call,
    check_result,
)
from veridic.templates._budget import (
    BoundedNamespace,
    copied,
    current,
    iterate,
    made,
    making,
    read,
    searched,
)
from veridic.templates._custom import NONE, Custom
from veridic.templates._format import (
    FORMATTERS,
    checked_format,
    checked_printf,
    printf_filter,
)
from veridic.templates._runtime import (
    EMITTED_AS_IS,
    SCALARS,
    STORED_LITERALS,
    UNTRUSTED,
    concat,
    emit,
    finalize,
    handed_out,
    stored_literal,
    template_line,
    text_of,
    unwrapped,
)
from veridic.templates._written import (
    EXPRESSION,
    READ_AS_A_VALUE,
    STR_OF_INPUT,
    WRAPPED,
    gives,
    spelled,
    valued,
    written,
    written_filters,
    written_in_instruction,
)
from veridic.text.provenance import TrustedInstruction, mint

__all__ = [
    "Kind",
    "ProvenanceCodeGenerator",
    "ProvenanceEnvironment",
    "SandboxedProvenanceEnvironment",
]

Kind = Literal["instruction", "data"]

# The outputs of the rewrite are Filter nodes with names no template can spell
# (jinja2 forbids new node types), compiled by ProvenanceCodeGenerator.
_LITERAL: Final = "<veridic:literal>"  # Const(index): environment.literals[index]
_EMIT: Final = "<veridic:emit>"  # node, Const(origin): environment.emit(node, origin)
_ITERATE: Final = "<veridic:iterate>"  # node: environment.iterate(node), sandboxed only
_READ: Final = "<veridic:read>"  # node: environment.read(node), sandboxed only
_SEARCHED: Final = "<veridic:searched>"  # node: environment.searched(node), sandboxed only
# Const(text), Const(origin): the stored literal, from environment.stored_literals or minted
_STORED: Final = "<veridic:stored-literal>"
_TEXT_OF: Final = "<veridic:text-of>"  # node: environment.text_of(node), every template
# node, Const(how): the input of a filter that writes it as text, checked inline (_written)
_WRITTEN: Final = "<veridic:written>"
# node, Const(how): the input of a filter that reads it as a value, checked inline (_written)
_VALUED: Final = "<veridic:valued>"
_INPUTS: Final = {_WRITTEN: "written", _VALUED: "valued"}
_PRINTF: Final = "<veridic:printf>"  # node: environment.printf(node), shipped only
_OWN: Final = frozenset(
    {_LITERAL, _EMIT, _ITERATE, _READ, _SEARCHED, _STORED, _TEXT_OF, _WRITTEN, _VALUED, _PRINTF}
)
# Filters compiled to ``environment.METHOD(node)``: the sandbox's charges, the % check.
_CHARGES: Final = {_ITERATE: "iterate", _READ: "read", _SEARCHED: "searched", _PRINTF: "printf"}


class ProvenanceCodeGenerator(CodeGenerator):
    """jinja2's code generator, plus veridic's outputs, handed over without ``str(...)``."""

    def _output_child_pre(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if not _own(node):
            super()._output_child_pre(node, frame, finalize)

    def _output_child_post(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if not _own(node):
            super()._output_child_post(node, frame, finalize)

    def visit_Filter(self, node: nodes.Filter, frame: Frame) -> None:
        if node.name not in _OWN:
            super().visit_Filter(node, frame)
            return
        inner, arguments = node.node, node.args
        if node.name == _LITERAL and isinstance(inner, nodes.Const):
            self.write(f"environment.literals[{inner.value!r}]")
        elif node.name == _EMIT and inner is not None and isinstance(arguments[0], nodes.Const):
            # emit() inlined for what it passes through unchanged (most outputs).
            self.write("(_veridic_output if type(_veridic_output := ")
            self.visit(inner, frame)
            self.write(") in environment.emitted_as_is else environment.emit(_veridic_output, ")
            self.write(f"{arguments[0].value!r}))")
        elif (
            node.name == _STORED
            and isinstance(inner, nodes.Const)
            and isinstance(arguments[0], nodes.Const)
        ):
            key = (inner.value, arguments[0].value)
            self.write("(_veridic_output if (_veridic_output := environment.stored_literals.get(")
            self.write(f"{key!r})) is not None else environment.stored_literal(*{key!r}))")
        elif node.name in _INPUTS and inner is not None and isinstance(arguments[0], nodes.Const):
            # written() or valued() inlined for what passes (text, numbers): no call for them.
            self.write("(_veridic_input if type(_veridic_input := ")
            self.visit(inner, frame)
            self.write(f") in environment.scalars else environment.{_INPUTS[node.name]}(")
            self.write(f"_veridic_input, {arguments[0].value!r}))")
        elif node.name == _TEXT_OF and inner is not None:
            self.write("environment.text_of(")
            self.visit(inner, frame)
            self.write(")")
        elif node.name in _CHARGES and inner is not None:
            self.write(f"environment.{_CHARGES[node.name]}(")
            self.visit(inner, frame)
            self.write(")")
        else:  # pragma: no cover - the rewrite builds only the shapes above
            raise TemplateError(f"veridic cannot compile its own node {node!r}: a veridic bug")

    # In the sandbox, every text and container the template makes is sized (``_budget``).

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self._made(super().visit_Concat, node, frame)

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self._made(super().visit_List, node, frame)

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self._made(super().visit_Dict, node, frame)

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx == "load":
            self._made(super().visit_Tuple, node, frame)
        else:  # a target: {% for a, b in ... %}, {% set a, b = ... %}
            super().visit_Tuple(node, frame)

    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        if isinstance(node.arg, nodes.Slice) and self.environment.sandboxed:
            # A slice copies, and jinja2 compiles it to Python's, not to getitem().
            self.write("environment.copied(")
            super().visit_Getitem(node, frame)
            self.write(")")
        else:
            super().visit_Getitem(node, frame)

    def _made(self, visit: Callable[[Any, Frame], None], node: nodes.Expr, frame: Frame) -> None:
        if not self.environment.sandboxed:
            visit(node, frame)
            return
        self.write("environment.made(")
        visit(node, frame)
        self.write(")")


def _not_json(value: object) -> object:
    """``json.dumps``'s ``default`` for ``|tojson``: what JSON cannot write, named by the
    application's class (an iterable it handed an instruction template is held in
    veridic's ``CheckedIterable``, a class the application never wrote)."""
    raise TypeError(f"Object of type {type(unwrapped(value)).__name__} is not JSON serializable")


def _own(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Filter) and node.name in _OWN


@pass_context
def _compiled_away(context: Context, *arguments: object) -> None:
    """Registered under veridic's own filter names so jinja2 finds them and never folds them."""
    raise TemplateError("veridic's output filters are compiled away; this is a veridic bug")


def _refused(name: str) -> Callable[..., object]:
    """What an instruction environment holds under the name of an unsafe filter."""

    @pass_context
    def refused(context: Context, *arguments: object, **options: object) -> object:
        raise TemplateError(
            f"instruction template {context.name!r} calls filter {name!r} by a name computed "
            "at render (map(...)), and the application registered it with filters=, not "
            "safe_filters=: its output is not trusted because its input was, so it cannot "
            "render into the system slot; if it only transforms its arguments, register it "
            "with safe_filters=, else use it in a data template"
        )

    return refused


class _InstructionContext(Context):
    """An instruction render's context: what a call returns is checked as it comes back.

    Every call of a template goes through :meth:`call` (the sandbox's too): a method of
    an ``Enum`` member that returns untrusted text is refused before anything computes
    with it, as an attribute holding such text is (:meth:`ProvenanceEnvironment.getattr`).
    """

    def call(
        __self,  # jinja2's spelling, so that no keyword argument clashes
        __obj: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if type(__obj) is Macro:  # jinja2's call, without its look for what to pass first
            kwargs.pop("_loop_vars", None)
            kwargs.pop("_block_vars", None)
            return __obj(*args, **kwargs)  # its output: text the macro wrote
        result = Context.call(__self, __obj, *args, **kwargs)
        if type(result) in _PLAIN or _of_a_checked_holder(__obj):
            return result
        name = getattr(__obj, "__name__", None)
        shown = f"{name}()" if isinstance(name, str) else "a call"
        return handed_out(result, template_line, f"calls {clip(shown, 40)}, which returns")


_PLAIN: Final = (
    (SCALARS - {UNTRUSTED})
    | EMITTED_AS_IS
    | {
        Macro,
        types.MethodType,
        types.BuiltinMethodType,
        types.FunctionType,
    }
)
"""What a value hands out that needs no further look: text of its own, a number, a macro
or a method (what a call of it returns is looked at: :class:`_InstructionContext`)."""
_CHECKED: Final = frozenset({dict, list, tuple})
"""Holders whose items were checked already: the render's copy of its values, checked
before it, and what :func:`handed_out` searched (globals hold no containers)."""


def _of_a_checked_holder(called: object) -> bool:
    """Whether ``called`` is a method of a dict, list or tuple (``row.items()``,
    ``names.index(x)``): what it returns holds only what the holder holds, searched
    already (:data:`_CHECKED`). A record's key equal to a declared one is taken whatever
    its brand (``_params._record``), so searching ``row.items()`` again refused a record
    its check had taken."""
    return type(called) is types.BuiltinMethodType and type(called.__self__) in _CHECKED


def _checked(name: str, function: Callable[..., object]) -> Callable[..., object]:
    """An application's filter in an instruction template: untrusted text it returns is
    refused (:func:`handed_out`), where the template uses it, before the next
    filter makes plain text of it."""

    def checked(*arguments: Any, **options: Any) -> object:
        result = function(*arguments, **options)
        if type(result) in _PLAIN:
            return result
        return handed_out(result, template_line, f"gives |{name}, which returns")

    if hasattr(function, "jinja_pass_arg"):  # jinja2's marker of what the filter is passed
        checked.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]  # jinja2's own marker, read by its compiler
    return checked


_NONDETERMINISTIC: Final = {
    "random": (
        "the |random filter, which picks an item at random",
        "pick the item in code and pass it as a parameter, or take a fixed one (|first, items[0])",
    ),
    "lipsum": (
        "lipsum(), which writes random words",
        "write the placeholder text in the template, or pass it as a parameter",
    ),
}
"""jinja2's filter and global whose output is random: refused in every template."""
_RANDOM_FILTERS: Final = frozenset({"random"})
_RANDOM_GLOBALS: Final = frozenset({"lipsum"})


def _nondeterministic_use(name: str, origin: str, line: int | str) -> TemplateError:
    what, fix = _NONDETERMINISTIC[name]
    line = f" line {line}" if isinstance(line, int) else line
    return TemplateError(
        f"template {origin!r}{line} uses {what}: the same values would render different "
        "text each time, and a prompt must render byte for byte the same (provider prompt "
        f"caching and the audit's sha256 rely on it): {fix}"
    )


def _nondeterministic(name: str) -> Callable[..., object]:
    """What an environment holds under the name of a random filter or global: a refusal."""

    def refused(*arguments: object, **options: object) -> object:
        raise _nondeterministic_use(name, *template_line())

    return refused


def _python_own(name: object) -> TypeGuard[str]:
    """Whether ``name`` is shaped as Python's own attributes are, ``__hash__``: not a key
    of the data that starts with two underscores (GraphQL's ``__typename``)."""
    return isinstance(name, str) and len(name) > 4 and name[:2] == name[-2:] == "__"


def _dunder_use(name: str, origin: str, line: int | str) -> TemplateError:
    line = f" line {line}" if isinstance(line, int) else line
    return TemplateError(
        f"template {origin!r}{line} reads {clip(name)}, one of Python's own attributes, which "
        "tell of the object, not of its value (x.__hash__() of text is different in every "
        "process, and a prompt must render byte for byte the same: provider prompt caching "
        "and the audit's sha256 rely on it): compute what the template needs in code and "
        "pass it as a parameter"
    )


def _no_dunder_attr(attr: Callable[..., object]) -> Callable[..., object]:
    """jinja2's ``|attr``, refusing one of Python's own attributes (``attr(name)``)."""

    def no_dunder(environment: Environment, obj: object, name: object) -> object:
        if _python_own(name):
            raise _dunder_use(name, *template_line())
        return attr(environment, obj, name)

    no_dunder.jinja_pass_arg = attr.jinja_pass_arg  # type: ignore[attr-defined]  # jinja2's own marker, read by its compiler
    return no_dunder


def _refuse_dunders(tree: nodes.Template, origin: str) -> None:
    """Refuse, when a shipped template loads, a read of one of Python's own attributes
    written in it (``x.__hash__``, ``x["__class__"]``, ``x | attr("__dict__")``): what
    they give is Python's (a hash differs in every process), not the values'. The
    sandbox refuses them, and every ``_`` name, when a stored template renders."""
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr):
            name: object = node.attr
        elif isinstance(node, nodes.Getitem):
            name = node.arg.value if isinstance(node.arg, nodes.Const) else None
        elif (
            isinstance(node, nodes.Filter)
            and node.name == "attr"
            and node.args
            and isinstance(node.args[0], nodes.Const)
        ):
            name = node.args[0].value
        else:
            continue
        if _python_own(name):
            raise _dunder_use(name, origin, node.lineno)


def _check_written(tree: nodes.Template) -> None:
    """Have the input of each filter that writes it as text checked as an output is
    (``_written``), the refusal naming the filter and the expression: inline for
    ``|lower`` and the like, by the wrapped filter (passed the expression) for ``|join``
    and ``|tojson``. Their arguments too (``|replace('a', x)`` writes ``x``), as ``~``
    checks what it joins (``|join``'s checks the text it joins with). A constant input is
    left as it is (jinja2 still folds it)."""
    for node in list(tree.find_all(nodes.Filter)):
        if node.name in STR_OF_INPUT:
            node.args = [_text_of(argument) for argument in node.args]
            for keyword in node.kwargs:
                keyword.value = _text_of(keyword.value)
        if node.node is None or isinstance(node.node, nodes.Const):
            continue  # a {% filter %} block's input is its text; a constant, its value
        if node.name in STR_OF_INPUT:
            how = gives(node.name, spelled(node.node))
            node.node = _node(node.node, _WRITTEN, how, node.lineno)
        elif node.name in READ_AS_A_VALUE:
            how = gives(node.name, spelled(node.node))
            node.node = _node(node.node, _VALUED, how, node.lineno)
        elif node.name in WRAPPED:
            named = nodes.Keyword(EXPRESSION, nodes.Const(spelled(node.node)))
            node.kwargs.append(named)  # type: ignore[arg-type]  # jinja2 annotates Pair; its parser and compiler use Keyword


class ProvenanceEnvironment(Environment):
    """A jinja2 environment with veridic's settings; its instruction templates yield chunks
    that remember their values."""

    code_generator_class = ProvenanceCodeGenerator

    def __init__(
        self,
        loader: BaseLoader | None,
        kind: Kind,
        *,
        trim_blocks: bool,
        lstrip_blocks: bool,
        keep_trailing_newline: bool,
        custom: Custom = NONE,
    ) -> None:
        super().__init__(
            loader=loader,
            autoescape=False,
            undefined=StrictUndefined,
            auto_reload=False,
            cache_size=-1,
            trim_blocks=trim_blocks,
            lstrip_blocks=lstrip_blocks,
            keep_trailing_newline=keep_trailing_newline,
            # An instruction template's outputs go through emit(), which checks the same.
            finalize=finalize if kind == "data" else None,
        )
        self.kind: Kind = kind
        self.hands_out = kind == "instruction"  # what values hand out is checked (getattr)
        if kind == "instruction":
            # Instance attributes: compiled code reads them at every output.
            self.concat = concat  # type: ignore[method-assign]  # jinja2's hook for buffered output
            self.emit = emit
            self.emitted_as_is = EMITTED_AS_IS
            self.context_class = _InstructionContext
        instruction = kind == "instruction"
        # Compiled code reads them at each ~, % and format, and at each filter that writes
        # its input as text or reads it as a value (inline for what is in ``scalars``).
        self.text_of = text_of if instruction else finalize
        self.scalars = SCALARS
        self.written = written_in_instruction if instruction else written
        self.valued = valued
        self.printf = checked_printf
        dumps = self.policies["json.dumps_kwargs"]
        self.policies["json.dumps_kwargs"] = {**dumps, "default": _not_json}
        if not self.sandboxed:  # the sandbox's % and |format are bounded (_bounds)
            self.filters["format"] = printf_filter
        del self.filters["safe"]
        # Held under their names so that a name computed at render (map(name)) finds a
        # refusal too; a template that names them is refused when it loads.
        self.filters["random"] = _nondeterministic("random")
        self.globals["lipsum"] = _nondeterministic("lipsum")
        self.unsafe_filters = custom.unsafe if kind == "instruction" else frozenset()
        # An instruction environment holds a refusal under each unsafe filter's name:
        # jinja2 also finds a filter by a name given at render (``map(name)``), which no
        # check of the template's Filter nodes sees.
        self.filters.update(
            (name, self._custom_filter(name, function)) for name, function in custom.filters.items()
        )
        self.filters.update(dict.fromkeys(_OWN, _compiled_away))
        if not self.sandboxed:  # the sandbox wraps them after its bounds (see there)
            self.filters = written_filters(self.filters, instruction=instruction)
            self.filters["attr"] = _no_dunder_attr(self.filters["attr"])
        self.globals.update(custom.globals)
        self.literals: list[TrustedInstruction] = []
        self._literal_index: dict[tuple[str, str], int] = {}

    def _custom_filter(self, name: str, function: Callable[..., object]) -> Callable[..., object]:
        """An application's filter as this environment holds it (see ``_custom``)."""
        if self.kind == "data":
            return function
        return _refused(name) if name in self.unsafe_filters else _checked(name, function)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``obj.attribute``, else item ``attribute`` (jinja2's rule), with two of veridic's.

        ``.format`` and ``.format_map`` of text in a template shipped with the code are
        :func:`~veridic.templates._format.checked_format`'s: the format string may be a
        value from outside (the sandbox refuses them). In an instruction template,
        untrusted text a value hands out (an attribute set on an ``Enum`` member at run
        time, a list there holding it) is refused before anything computes with it
        (:func:`handed_out`). jinja2's body, inlined: every ``x.y`` of every shipped
        template comes here, and an attribute found costs what it did, and a type check.
        """
        if attribute in FORMATTERS and isinstance(obj, str):
            return checked_format(obj, attribute, instruction=self.kind == "instruction")
        obj = unwrapped(obj)
        try:
            found = getattr(obj, attribute)
        except AttributeError:
            try:
                found = obj[attribute]
            except (TypeError, LookupError, AttributeError):
                return self.undefined(obj=obj, name=attribute)
        if type(found) in _PLAIN or not self.hands_out or type(obj) in _CHECKED:
            return found
        return handed_out(found, template_line, f"reads .{attribute}, which gives")

    def getitem(self, obj: Any, argument: Any) -> Any:
        """``obj[argument]``, else attribute ``argument`` of ``obj`` (jinja2's rule), with
        the rules of :meth:`getattr`."""
        obj = unwrapped(obj)
        found = self._item(obj, argument)
        if type(found) in _PLAIN or not self.hands_out:
            return found
        if type(obj) in _CHECKED and type(found) is not UNTRUSTED:
            return found
        return handed_out(found, template_line, f"reads [{clip(repr(argument))}], which gives")

    def _item(self, obj: Any, argument: Any) -> Any:
        """``obj[argument]``, else attribute ``argument`` of ``obj`` (jinja2's rule), but not
        one of Python's own (``__hash__``): a name computed at render (``x[name]``,
        ``map(attribute=name)``) is checked here; one written in the template, when it loads.

        jinja2's body, with the check on the way to ``getattr`` only: an item found costs
        what it did. The sandbox keeps its own (it refuses every ``_`` name).
        """
        try:
            return obj[argument]
        except (AttributeError, TypeError, LookupError):
            if isinstance(argument, str):
                if _python_own(argument):
                    raise _dunder_use(argument, *template_line()) from None
                if argument in FORMATTERS and isinstance(obj, str):
                    return checked_format(obj, argument, instruction=self.kind == "instruction")
                try:
                    return getattr(obj, argument)
                except AttributeError:
                    pass
            return self.undefined(obj=obj, name=argument)

    def call_filter(
        self,
        name: str,
        value: Any,
        args: Any = None,
        kwargs: Any = None,
        context: Context | None = None,
        eval_ctx: EvalContext | None = None,
    ) -> Any:
        """A filter called by a name given at render (``map("lower")``): one that writes
        its input as text, or reads it as a value, checks it first, as the rewrite does
        where a template names it."""
        if type(value) not in SCALARS:
            if name in STR_OF_INPUT:
                self.written(value, gives(name, None))
            elif name in READ_AS_A_VALUE:
                valued(value, gives(name, None))
        return super().call_filter(name, value, args, kwargs, context, eval_ctx)

    def literal(self, text: str, origin: str) -> int:
        """The index of literal ``text`` at ``origin`` (``file:line``) in :attr:`literals`.

        Minted once per text and place: a template compiled again reuses them. Only
        templates shipped with the code, a set the application bounds, are kept here;
        a stored source's literals are kept by a bounded memo (see ``_Rewrite.literal``).
        """
        index = self._literal_index.get((text, origin))
        if index is None:
            self.literals.append(mint(text, "template", origin))
            index = self._literal_index[text, origin] = len(self.literals) - 1
        return index

    def _generate(
        self,
        source: nodes.Template,
        name: str | None,
        filename: str | None,
        defer_init: bool = False,
    ) -> str:
        key = name or filename or "<template>"
        _Rewrite(self, key, filename or key).template(source)
        return super()._generate(source, name, filename, defer_init)


class SandboxedProvenanceEnvironment(ProvenanceEnvironment, SandboxedEnvironment):
    """The same, in jinja2's sandbox: for templates whose source is stored text.

    ``str.format`` and ``str.format_map`` are unsafe here too: jinja2's sandbox
    runs them through its own formatter, which rebuilds the result with the
    value's class, and a minted instruction's class cannot be built that way
    (a bare ``TypeError``). A stored template has the ``|format`` filter.

    ``**``, ``*``, ``%``, ``+`` and ``-`` (and the filters and text methods that pad,
    replace or join) refuse results past the bounds of ``_bounds``: jinja2 would
    compute them as Python does, even while compiling. Loops, calls, what the
    template makes and what its filters, tests, comparisons (``in``, ``==``...) and
    methods read are charged to the render's budget (``_budget``): a comparison's
    operands and a slice are rewritten for it, as a loop's iterable is. A list, dict or
    set cannot be changed (jinja2's ``ImmutableSandboxedEnvironment`` rule): a stored
    template could otherwise grow a value after it was measured, or change the
    application's own values it was given.
    """

    intercepted_binops = INTERCEPTED
    _item = SandboxedEnvironment.getitem  # not ProvenanceEnvironment's, first in the MRO

    def getattr(self, obj: Any, attribute: str) -> Any:
        """The sandbox's ``obj.attribute`` (it refuses ``.format``), with the check of
        what a value hands out (:meth:`ProvenanceEnvironment.getattr`)."""
        obj = unwrapped(obj)
        found = SandboxedEnvironment.getattr(self, obj, attribute)
        if type(found) in _PLAIN or not self.hands_out or type(obj) in _CHECKED:
            return found
        return handed_out(found, template_line, f"reads .{attribute}, which gives")

    def __init__(
        self,
        loader: BaseLoader | None,
        kind: Kind,
        *,
        trim_blocks: bool,
        lstrip_blocks: bool,
        keep_trailing_newline: bool,
        custom: Custom = NONE,
    ) -> None:
        super().__init__(
            loader,
            kind,
            trim_blocks=trim_blocks,
            lstrip_blocks=lstrip_blocks,
            keep_trailing_newline=keep_trailing_newline,
            custom=custom,
        )
        self.filters["format"] = bounded_format
        own = {name: self.filters.pop(name) for name in _OWN}
        # Bounds first: they recognise jinja2's own filters by identity.
        self.filters = written_filters(
            {**bounded_filters(self.filters), **own}, instruction=kind == "instruction"
        )
        self.tests = bounded_tests(self.tests)  # type: ignore[assignment]  # jinja2 types them as its own functions; these are called as they are
        self.globals.update(namespace=BoundedNamespace)
        self._safe_attributes: dict[tuple[type, str], bool] = {}
        self.stored_literals = STORED_LITERALS
        self.stored_literal = stored_literal
        self.made = made
        self.iterate = iterate
        self.read = read
        self.searched = searched
        self.copied = copied
        self.concat = _bounded_concat(self.concat)  # type: ignore[method-assign]  # jinja2's hook for buffered output

    def call_binop(self, context: Context, operator: str, left: object, right: object) -> object:
        """An intercepted operator (``**``, ``*``, ``%``, ``+``, ``-``), refused past its bound."""
        check_binop(operator, left, right)
        result = super().call_binop(context, operator, left, right)
        check_result(result)
        return made(result)

    def call(
        __self,  # jinja2's spelling, so that no keyword argument clashes
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """A call from the template: counted, and its result sized (``_budget``).

        Arguments past the eighth (``m(*items)`` passes one an item) are charged as
        iterations. A recursive loop's ``loop(items)`` iterates ``items`` as a
        ``{% for %}`` does;
        what ``loop.changed(...)`` and a method of a text or container (``.count``,
        ``.find``, ``.join``) read is charged as read.
        """
        budget = current()
        budget.call()
        given = len(args) + len(kwargs)
        if given > _CALL_ARGUMENTS:  # only m(*items) or m(**mapping) passes that many
            budget.items(given - _CALL_ARGUMENTS)
        check_call(__obj, args, kwargs)
        if isinstance(__obj, LoopContext) and args:
            args = (iterate(args[0]), *args[1:])
        elif isinstance(getattr(__obj, "__self__", None), LoopContext):
            for argument in args:  # loop.changed(x) compares x with the last one
                budget.reading(argument)
        result = SandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
        if type(result) is not str and any(result is argument for argument in args):
            return result  # given, not made: a value passed through
        budget.make(result)
        return result

    def is_safe_attribute(self, obj: object, attr: str, value: object) -> bool:
        """Whether the template may read ``obj.attr``; remembered per class and name.

        Every rule here and in jinja2's sandbox reads only the class of ``obj`` and the
        name (a private name, a function's or frame's internals, a mutating method of
        a list, dict or set, ``str.format``), never the value: so the answer for a class
        and a name is computed once. A template reads the same few attributes in every
        render (``loop.index``, a macro of an imported file), and the checks, each a
        string of ``isinstance`` calls against abstract classes, were a tenth of a
        stored template's render.
        """
        key = (type(obj), attr)
        known = self._safe_attributes.get(key)
        if known is None:
            if len(self._safe_attributes) >= _SAFE_ATTRIBUTES_KEPT:
                self._safe_attributes.clear()
            known = self._safe_attributes[key] = self._is_safe_attribute(obj, attr, value)
        return known

    def _is_safe_attribute(self, obj: object, attr: str, value: object) -> bool:
        if isinstance(obj, str) and attr in _STR_FORMATTERS:
            return False
        if modifies_known_mutable(obj, attr):
            return False
        return super().is_safe_attribute(obj, attr, value)

    def wrap_str_format(self, value: object) -> None:
        """No sandboxed ``str.format``: :meth:`is_safe_attribute` refuses it instead."""


_STR_FORMATTERS: Final = frozenset({"format", "format_map"})
_SAFE_ATTRIBUTES_KEPT: Final = 4096
"""Answers of ``is_safe_attribute`` kept per environment; all forgotten when full."""
_CALL_ARGUMENTS: Final = 8
"""Arguments a call passes as part of the call; each past them is charged an iteration."""


def _bounded_concat(concat: Callable[[Any], str]) -> Callable[[Any], str]:
    """``environment.concat`` for buffered output, its size checked before it is joined."""

    def bounded(chunks: Any) -> str:
        parts = list(chunks)
        making(sum(map(len, parts)))
        return concat(parts)

    return bounded


class _Rewrite:
    def __init__(self, environment: ProvenanceEnvironment, key: str, origin: str) -> None:
        self.environment = environment
        self.instruction = environment.kind == "instruction"
        self.origin = origin
        self.eval_context = EvalContext(environment, key)

    def template(self, tree: nodes.Template) -> None:
        self.refuse_forbidden(tree)
        if not self.environment.sandboxed:
            _refuse_dunders(tree, self.origin)
        _check_made_text(tree)
        _check_written(tree)
        if not self.environment.sandboxed:
            for mod in tree.find_all(nodes.Mod):  # a format string from a value: "%2000000s"
                if not isinstance(mod.left, nodes.Const):
                    mod.left = _node(mod.left, _PRINTF, None, mod.lineno)
        if self.environment.sandboxed:
            for loop in tree.find_all(nodes.For):
                if isinstance(loop.iter, nodes.Expr):  # always: jinja2's parser makes one
                    loop.iter = _node(loop.iter, _ITERATE, None, loop.lineno)
            # Python's ``in`` and comparisons read their operands whole, with no sandbox hook.
            for compare in list(tree.find_all(nodes.Compare)):
                compare.expr = _node(compare.expr, _READ, None, compare.lineno)
                for operand in compare.ops:
                    charge = _SEARCHED if operand.op in ("in", "notin") else _READ
                    operand.expr = _node(operand.expr, charge, None, compare.lineno)
        if self.instruction:
            self.statement(tree)
            tree.set_environment(self.environment)

    def refuse_forbidden(self, tree: nodes.Template) -> None:
        for node in tree.find_all(nodes.Filter):
            if node.name == "safe":
                raise TemplateError(
                    f"template {self.origin!r} line {node.lineno} uses the |safe filter, which "
                    "veridic templates do not have: nothing is escaped, so there is nothing to "
                    "mark safe; values are refused or fenced by their provenance: remove |safe, "
                    "and pass text that must instruct as a TrustedInstruction"
                )
            for name in _filter_names(node):
                if name in _RANDOM_FILTERS:
                    raise _nondeterministic_use(name, self.origin, node.lineno)
                if name in self.environment.unsafe_filters:
                    raise TemplateError(
                        f"instruction template {self.origin!r} line {node.lineno} uses filter "
                        f"{name!r}, which the application registered with filters=, not "
                        "safe_filters=: its output is not trusted because its input was, so it "
                        "cannot render into the system slot; if it only transforms its "
                        "arguments, register it with safe_filters=, else use it in a data "
                        "template"
                    )
        bound = bound_names(tree)  # {% set lipsum = ... %} is the template's own
        for used in tree.find_all(nodes.Name):
            if used.ctx == "load" and used.name in _RANDOM_GLOBALS and used.name not in bound:
                raise _nondeterministic_use(used.name, self.origin, used.lineno)
        for modifier in tree.find_all(nodes.EvalContextModifier):
            raise TemplateError(
                f"template {self.origin!r} line {modifier.lineno} changes autoescaping, which "
                "veridic templates keep off: data templates fence untrusted values instead of "
                "escaping them: remove the {% autoescape %} block"
            )
        for reference, target in references(tree):
            if static_names(target) is None:
                raise dynamic_reference(reference, self.origin)

    def statement(self, node: nodes.Node) -> None:
        if isinstance(node, nodes.Output):
            node.nodes = self.outputs(node.nodes)
            return
        if isinstance(node, nodes.FilterBlock):
            node.filter = self.filter_block(node.filter, node.lineno)
        for field in ("body", "else_"):
            for child in getattr(node, field, None) or ():
                self.statement(child)
        for branch in getattr(node, "elif_", ()):
            self.statement(branch)

    def outputs(self, children: list[nodes.Expr]) -> list[nodes.Expr]:
        rewritten: list[nodes.Expr] = []
        group: list[nodes.TemplateData] = []
        for child in [*children, None]:
            if child is not None and not isinstance(child, nodes.TemplateData):
                try:
                    # What jinja2 folds at compile time stays literal text.
                    constant = str(child.as_const(self.eval_context))
                    child = nodes.TemplateData(constant, lineno=child.lineno)
                except Exception:
                    pass
            if isinstance(child, nodes.TemplateData):
                group.append(child)
                continue
            if group:
                rewritten.extend(self.literal(group))
                group = []
            if child is not None:
                rewritten.append(self.expression(child))
        return rewritten

    def literal(self, group: list[nodes.TemplateData]) -> list[nodes.Expr]:
        # jinja2 joins consecutive literal children of one output into one
        # constant string: these are exactly the strings a render yields.
        text = "".join(item.data for item in group)
        lineno = group[0].lineno
        origin = f"{self.origin}:{lineno}"
        if self.environment.sandboxed:
            # A stored source is one of unboundedly many (every row a tenant ever saved):
            # its literals are kept by a bounded memo (_runtime.stored_literal), not by the
            # environment for as long as the process runs.
            return [_node(nodes.Const(text, lineno=lineno), _STORED, origin, lineno)]
        index = self.environment.literal(text, origin)
        return [_node(nodes.Const(index, lineno=lineno), _LITERAL, None, lineno)]

    def expression(self, node: nodes.Expr) -> nodes.Expr:
        return _node(node, _EMIT, f"{self.origin}:{node.lineno}", node.lineno)

    def filter_block(self, chain: nodes.Filter, lineno: int) -> nodes.Filter:
        return _node(chain, _EMIT, f"{self.origin}:{lineno}", lineno)


_MADE_TEXT: Final = frozenset({"format"})
"""jinja2's filter that writes its value and its arguments as text (the input of the
others that write their input is checked by :func:`_check_written`)."""


def _check_made_text(tree: nodes.Template) -> None:
    """Have what ``~``, ``|format``, ``"..." %`` and ``.format()`` make text of
    checked as an output is (:func:`~veridic.templates._runtime.finalize`):
    ``"Persona: " ~ persona.upper`` (the parentheses forgotten) wrote the method's memory
    address into the text, which the check of the output, a str by then, never saw."""
    for joined in list(tree.find_all(nodes.Concat)):
        joined.nodes = [_text_of(part) for part in joined.nodes]
    for writer in list(tree.find_all(nodes.Filter)):
        if writer.name not in _MADE_TEXT or writer.node is None:
            continue
        writer.node = _text_of(writer.node)
        if writer.name == "format":
            writer.args = [_text_of(arg) for arg in writer.args]
            for keyword in writer.kwargs:
                keyword.value = _text_of(keyword.value)
    for call in list(tree.find_all(nodes.Call)):  # "{}".format(x), "{p}".format_map(m)
        if isinstance(call.node, nodes.Getattr) and call.node.attr in _FORMATS:
            _check_formatted(call)
    for mod in list(tree.find_all(nodes.Mod)):  # "%s" % x, f % x: the text's own formatting
        if isinstance(mod.right, nodes.Tuple):
            mod.right.items = [_text_of(item) for item in mod.right.items]
        else:  # a number's modulo passes: a number is not looked at
            mod.right = _text_of(mod.right)


_FORMATS: Final = frozenset({"format", "format_map"})
"""``str``'s methods that write their arguments as text (checked whatever calls them: a
non-text object's own ``format`` given an address would write it as well)."""


def _check_formatted(call: nodes.Call) -> None:
    """Have each argument of ``call`` (``"{}".format(...)``, ``.format_map({...})``)
    checked when made text; the values of a mapping written in the template one by one,
    as ``format_map`` writes them with ``str()``, not as a dict's ``repr()``."""
    call.args = [
        _values_text_of(arg) if isinstance(arg, nodes.Dict) else _text_of(arg) for arg in call.args
    ]
    for keyword in call.kwargs:
        keyword.value = _text_of(keyword.value)
    if call.dyn_args is not None:
        call.dyn_args = _text_of(call.dyn_args)
    if call.dyn_kwargs is not None:
        call.dyn_kwargs = _text_of(call.dyn_kwargs)


def _values_text_of(mapping: nodes.Dict) -> nodes.Dict:
    for pair in mapping.items:
        pair.value = _text_of(pair.value)
    return mapping


def _text_of(node: nodes.Expr) -> nodes.Expr:
    """``node``, checked when made text; a constant as it is (jinja2 still folds it)."""
    return node if isinstance(node, nodes.Const) else _node(node, _TEXT_OF, None, node.lineno)


def _filter_names(node: nodes.Filter) -> tuple[str, ...]:
    """The filters ``node`` runs that its source names: its own, and ``map``'s by a literal.

    ``map("name")`` calls the filter ``name`` on each item. A name computed at render
    cannot be read here; under an unsafe filter's name an instruction environment holds
    only a refusal (:func:`_refused`), so such a call fails when it renders.
    """
    if node.name == "map" and node.args:
        first = node.args[0]
        if isinstance(first, nodes.Const) and isinstance(first.value, str):
            return (node.name, first.value)
    return (node.name,)


def _node(inner: nodes.Expr, name: str, argument: str | None, lineno: int) -> nodes.Filter:
    arguments: list[nodes.Expr] = [] if argument is None else [nodes.Const(argument, lineno=lineno)]
    return nodes.Filter(inner, name, arguments, [], None, None, lineno=lineno)
