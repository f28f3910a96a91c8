"""The jinja2 environments veridic renders with, and the rewrite every template gets.

Settings that close the laundering doors: autoescape off (fencing replaces
escaping, and ``Markup`` would otherwise be a way to mark text safe), the
``safe`` filter removed and refused at load, ``StrictUndefined``, no
extensions, ``auto_reload`` off (templates ship with the code, and a ``stat``
per include would be the largest cost of a render).

An environment renders one kind of template, instruction or data (a file used
as both is compiled once per kind). Each template's tree is rewritten before
jinja2 generates code (the documented ``_generate`` hook), see
``_template_runtime`` for why:

- in an instruction template each group of literal text becomes a reference
  to the trusted value minted for it at compile time, and each expression
  output ``{{ x }}`` becomes ``emit(x, "file:line")``;
- in a data template each group of literal text becomes a reference to the
  :class:`~veridic._template_runtime.TemplateText` made for it at compile time, and
  each expression output becomes ``final(x, label)`` in the template's own body
  and ``out(x, label)`` in a block, macro or buffer;
- constant expressions become literal text, as jinja2 would fold them, and a
  ``{% filter %}`` block's result goes through the same function as an output.

Those outputs are compiled by :class:`ProvenanceCodeGenerator` (the
documented ``code_generator_class``), which hands the value over without
jinja2's ``str(...)``. Forbidden constructs (``|safe``, ``{% autoescape %}``, a
template named by an expression) are refused here, for every template the
environment compiles.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from jinja2 import BaseLoader, Environment, StrictUndefined, nodes, pass_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

from veridic._template_analysis import dynamic_reference, references, static_names
from veridic._template_runtime import EMITTED_AS_IS, TemplateText, concat, emit, final, out
from veridic.errors import TemplateError
from veridic.fence import check_label
from veridic.provenance import TrustedInstruction, mint

__all__ = [
    "Kind",
    "ProvenanceCodeGenerator",
    "ProvenanceEnvironment",
    "SandboxedProvenanceEnvironment",
]

Kind = Literal["instruction", "data"]

_NOT_LABEL: Final = re.compile(r"[^\w.:/@#+=,-]")


# The outputs of the rewrite are Filter nodes with names no template can spell
# (jinja2 forbids new node types), compiled by ProvenanceCodeGenerator.
_LITERAL: Final = "<veridic:literal>"  # Const(index): environment.literals[index]
_EMIT: Final = "<veridic:emit>"  # node, Const(origin): environment.emit(node, origin)
_OUT: Final = "<veridic:out>"  # node, Const(label): environment.out(node, label)
_OWN: Final = frozenset({_LITERAL, _EMIT, _OUT})


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
        elif inner is not None and arguments and isinstance(arguments[0], nodes.Const):
            # Output of the template's own body (not a block, macro or buffer) goes
            # straight to the render, so it can be fenced here, once and for all.
            at_top = frame.buffer is None and frame.block is None
            self.write("environment.final(" if at_top else "environment.out(")
            self.visit(inner, frame)
            self.write(f", {arguments[0].value!r})")
        else:  # pragma: no cover - the rewrite builds only the shapes above
            raise TemplateError(f"veridic cannot compile its own node {node!r}: a veridic bug")


def _own(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Filter) and node.name in _OWN


@pass_context
def _compiled_away(context: Context, *arguments: object) -> None:
    """Registered under veridic's own filter names so jinja2 finds them and never folds them."""
    raise TemplateError("veridic's output filters are compiled away; this is a veridic bug")


class ProvenanceEnvironment(Environment):
    """A jinja2 environment whose templates yield chunks that remember their values."""

    code_generator_class = ProvenanceCodeGenerator

    def __init__(
        self,
        loader: BaseLoader | None,
        kind: Kind,
        *,
        trim_blocks: bool,
        lstrip_blocks: bool,
        keep_trailing_newline: bool,
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
        )
        self.kind: Kind = kind
        # Instance attributes: compiled code reads them at every output.
        self.concat = concat  # type: ignore[method-assign]  # jinja2's hook for buffered output
        self.emit = emit
        self.emitted_as_is = EMITTED_AS_IS
        self.out = out
        self.final = final
        del self.filters["safe"]
        self.filters.update(dict.fromkeys(_OWN, _compiled_away))
        self.literals: list[TrustedInstruction | TemplateText] = []
        self._literal_index: dict[tuple[str, str], int] = {}

    def literal(self, text: str, origin: str) -> int:
        """The index of literal ``text`` at ``origin`` (``file:line``) in :attr:`literals`.

        Made once per text and place (minted trusted in an instruction
        environment): a template compiled again reuses them.
        """
        index = self._literal_index.get((text, origin))
        if index is None:
            made = (
                mint(text, "template", origin) if self.kind == "instruction" else TemplateText(text)
            )
            self.literals.append(made)
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
    """The same, in jinja2's sandbox: for templates whose source is stored text."""


class _Rewrite:
    def __init__(self, environment: ProvenanceEnvironment, key: str, origin: str) -> None:
        self.environment = environment
        self.instruction = environment.kind == "instruction"
        self.origin = origin
        self.eval_context = EvalContext(environment, key)

    def template(self, tree: nodes.Template) -> None:
        self.refuse_forbidden(tree)
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
        index = self.environment.literal(text, f"{self.origin}:{lineno}")
        return [_node(nodes.Const(index, lineno=lineno), _LITERAL, None, lineno)]

    def expression(self, node: nodes.Expr) -> nodes.Expr:
        if self.instruction:
            return _node(node, _EMIT, f"{self.origin}:{node.lineno}", node.lineno)
        return _node(node, _OUT, _checked(_label(node)), node.lineno)

    def filter_block(self, chain: nodes.Filter, lineno: int) -> nodes.Filter:
        if self.instruction:
            return _node(chain, _EMIT, f"{self.origin}:{lineno}", lineno)
        return _node(chain, _OUT, _checked(f"filter:{chain.name}"), lineno)


def _node(inner: nodes.Expr, name: str, argument: str | None, lineno: int) -> nodes.Filter:
    arguments: list[nodes.Expr] = [] if argument is None else [nodes.Const(argument, lineno=lineno)]
    return nodes.Filter(inner, name, arguments, [], None, None, lineno=lineno)


def _checked(label: str) -> str:
    check_label(label)
    return label


def _label(expression: nodes.Expr) -> str:
    """The fence label of an expression: the dotted name it starts from (``doc.body``)."""
    name = _dotted(expression)
    if name is None:
        first = next(expression.find_all(nodes.Name), None)
        name = first.name if first is not None else "value"
    return _NOT_LABEL.sub("_", name)[:100]


def _dotted(node: nodes.Node | None) -> str | None:
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        inner = _dotted(node.node)
        return None if inner is None else f"{inner}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        inner = _dotted(node.node)
        return None if inner is None else f"{inner}.{node.arg.value}"
    if isinstance(node, nodes.Filter | nodes.Test | nodes.Call):
        return _dotted(node.node)
    return None
