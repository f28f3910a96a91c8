"""Which variables a template reads, following the templates it includes, extends and imports.

The analysis is jinja2's own (``jinja2.meta.find_undeclared_variables`` on the
parsed tree), run on every template the root one reaches: an ``include`` and
an ``import ... with context`` see the includer's variables, minus the names
the includer binds itself (a loop variable, a ``set``, a macro argument); an
``extends`` renders the parent with the child's variables, minus the parent's
blocks that the child overrides without calling ``super()``. A template named
by an expression rather than a string literal cannot be followed, so it is
refused: its variables could not be checked when the template loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from jinja2 import meta, nodes

from veridic.errors import TemplateError

__all__ = [
    "Analysis",
    "Load",
    "analyse",
    "bound_names",
    "dynamic_reference",
    "references",
    "static_names",
]

Load = Callable[[str], "tuple[nodes.Template, str] | None"]
"""Parse a template by name: its fresh tree and the name to show for it, or ``None`` if missing."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """The variables a template reads, where each is first read, and every template it reaches."""

    variables: frozenset[str]
    where: dict[str, tuple[str, int]]
    templates: frozenset[str]


def analyse(tree: nodes.Template, display: str, load: Load) -> Analysis:
    """Analyse ``tree`` (it is modified: pass a tree parsed for this purpose).

    Raises:
        TemplateError: a referenced template is missing or named by an expression.
    """
    walk = _Walk(load)
    variables = walk.free(tree, display, frozenset())
    return Analysis(frozenset(variables), walk.where, frozenset(walk.templates))


def references(tree: nodes.Template) -> Iterator[tuple[nodes.Stmt, nodes.Expr]]:
    """Every include, import and extends in ``tree``, with the expression naming its target."""
    for extends in tree.find_all(nodes.Extends):
        yield extends, extends.template
    for include in tree.find_all(nodes.Include):
        yield include, include.template
    for imported in tree.find_all(nodes.Import):
        yield imported, imported.template
    for names in tree.find_all(nodes.FromImport):
        yield names, names.template


def static_names(template: nodes.Expr) -> list[str] | None:
    """The names in an include/import/extends target, or ``None`` when computed at render."""
    if isinstance(template, nodes.Const) and isinstance(template.value, str):
        return [template.value]
    if isinstance(template, nodes.List | nodes.Tuple):
        names = [item.value for item in template.items if isinstance(item, nodes.Const)]
        if len(names) == len(template.items) and all(isinstance(n, str) for n in names):
            return names
    return None


def dynamic_reference(node: nodes.Node, display: str) -> TemplateError:
    """The error for an include/import/extends whose target is computed at render."""
    kind = type(node).__name__.lower().replace("fromimport", "from-import")
    return TemplateError(
        f"template {display!r} line {node.lineno} has an {kind} of a template named by an "
        "expression; its variables cannot be checked when the template loads: name the "
        'template with a string literal ({% include "row.j2" %}), or a list of them'
    )


class _Walk:
    def __init__(self, load: Load) -> None:
        self.load = load
        self.where: dict[str, tuple[str, int]] = {}
        self.templates: set[str] = set()
        self.active: list[str] = []

    def free(self, tree: nodes.Template, display: str, overridden: frozenset[str]) -> set[str]:
        for block in tree.find_all(nodes.Block):
            if block.name in overridden:
                block.body = []
        variables = set(meta.find_undeclared_variables(tree))
        for read in tree.find_all(nodes.Name):
            if read.ctx == "load" and read.name in variables:
                self.where.setdefault(read.name, (display, read.lineno))
        bound = bound_names(tree)
        for node, target in references(tree):
            names = static_names(target)
            if names is None:
                raise dynamic_reference(node, display)
            extends = isinstance(node, nodes.Extends)
            context = extends or bool(getattr(node, "with_context", False))
            hidden = _parent_overrides(tree, overridden) if extends else frozenset()
            for name in names:
                seen = self.follow(name, node, display, hidden)
                if context:
                    variables |= seen - bound
        return variables

    def follow(
        self, name: str, node: nodes.Node, display: str, overridden: frozenset[str]
    ) -> set[str]:
        if name in self.active:
            return set()  # a recursive include: its variables are being collected already
        loaded = self.load(name)
        if loaded is None:
            if getattr(node, "ignore_missing", False):
                return set()
            raise TemplateError(
                f"template {display!r} line {node.lineno} refers to template {name!r}, which "
                "the loader cannot find: check the name (relative to the template directory, "
                "with / separators) or add the file"
            )
        self.templates.add(name)
        self.active.append(name)
        try:
            return self.free(loaded[0], loaded[1], overridden)
        finally:
            self.active.pop()


def _parent_overrides(tree: nodes.Template, overridden: frozenset[str]) -> frozenset[str]:
    """Blocks of the parent that never render: overridden here or below, without ``super()``."""
    hidden = set(overridden)
    for block in tree.find_all(nodes.Block):
        calls_super = any(
            isinstance(call.node, nodes.Name) and call.node.name == "super"
            for call in block.find_all(nodes.Call)
        )
        if not calls_super:
            hidden.add(block.name)
    return frozenset(hidden)


def bound_names(tree: nodes.Template) -> set[str]:
    """Every name the template binds itself, anywhere (loops, sets, macros, imports)."""
    names = {n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")}
    names.update(node.name for node in tree.find_all(nodes.Macro))
    names.update(node.target for node in tree.find_all(nodes.Import))
    for node in tree.find_all(nodes.FromImport):
        names.update(item if isinstance(item, str) else item[1] for item in node.names)
    return names
