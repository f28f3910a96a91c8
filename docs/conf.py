"""Sphinx configuration of veridic's documentation site: ``make docs``.

The pages are Markdown (myst-parser), the API reference is autodoc reading the
docstrings, whose cross-references are Sphinx roles (:class:`~veridic.Composer`).
The build is strict (``-W --keep-going -n``): every warning fails it, and every
cross-reference must resolve.

**Each object is documented once, at its home.** The home of a class or a function is
the public module it is defined in (its ``__module__``: ``veridic.text.compose`` for
``Composer``); an object defined in a private module (``veridic.providers._base``) is
documented by the public package that re-exports it (``veridic.providers``). Homes win
over the root because autodoc writes every annotation with the object's own module
(``-> veridic.text.prompt.Prompt``), so documenting it there is what makes signatures
link. Every other public path to the object (``veridic.Composer``, the flat 0.1 paths
such as ``veridic.compose.Composer``, ``veridic.tools.ToolContext``) is a reference
to the home: autodoc skips the re-export (``_skip_member``), and a reference written
with that path resolves to the same object's home (``_resolve_alias``), found by the
object's identity, never by a list kept by hand. A path that is not the same object
as a documented one still fails the build.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import ParamSpec, TypeVar

from docutils import nodes
from docutils.nodes import Element, Node
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.ext.napoleon import _process_docstring as napoleon_process_docstring
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

import veridic

ROOT = Path(__file__).resolve().parent.parent

project = "veridic"
author = "The veridic developers"
project_copyright = "The veridic developers"
release = veridic.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the docstrings' Args:, Returns: and Raises: sections
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4  # the pages link to their sections by slug (mypy.md#notes-...)

autodoc_member_order = "bysource"
# Inherited members are shown only when they come from a private base (SQLiteAuditSink's
# write() is veridic.run._sql_store.SQLStore's): see _skip_member.
autodoc_default_options = {"members": True, "inherited-members": True, "show-inheritance": True}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # `= _UNSET` as written, not a repr that does not parse
autodoc_inherit_docstrings = False  # dict.pop's docstring is not FrozenDict.pop's
# The docstrings' Args:, Returns: and Raises: sections are Google style; napoleon reads
# them in functions and classes only (see _google_sections).
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# "Its methods raise:" on a class: the errors of its methods, read as a Raises: section.
napoleon_custom_sections = [("Its methods raise", "raises")]

html_theme = "furo"
html_title = f"veridic {release}"
html_static_path: list[str] = []

nitpicky = True
# The build has no network, so no intersphinx inventory can be read: a reference to the
# standard library or to a library veridic talks to cannot resolve. Those are ignored by
# package prefix, and only those; a veridic name that does not resolve fails the build.
nitpick_ignore_regex = [
    # The standard library (annotations: collections.abc.Sequence, pathlib.Path, ...).
    (r"py:.*", rf"({'|'.join(sorted(sys.stdlib_module_names))})(\..+)?"),
    # The run-time dependencies: pydantic's models and adapters, jinja2's environment.
    (r"py:.*", r"(pydantic|pydantic_core|jinja2|markupsafe)(\..+)?"),
    # The optional libraries the integrations, providers, stores, spans and the plugin
    # use: their own sites document them.
    (
        r"py:.*",
        r"(openai|anthropic|mcp|mcp_types|pydantic_ai|agents|langchain|langchain_core|"
        r"langgraph|opentelemetry|psycopg|psycopg_pool|mypy|httpx|hypothesis|jsonschema|"
        r"llama_cpp|starlette|anyio)(\..+)?",
    ),
]

# -- which modules the reference documents ------------------------------------------


def _public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


@cache
def _documented_modules() -> tuple[str, ...]:
    """The public modules at their own path (a flat 0.1 path is an alias: skipped)."""
    found = []
    for info in pkgutil.walk_packages(veridic.__path__, prefix="veridic."):
        if _public(info.name) and importlib.import_module(info.name).__name__ == info.name:
            found.append(info.name)
    return tuple(sorted(found))


@cache
def _exports() -> dict[int, list[tuple[str, str]]]:
    """id(object) -> (module, name) of each public module whose ``__all__`` lists it."""
    found: dict[int, list[tuple[str, str]]] = {}
    for name in _documented_modules():
        module = importlib.import_module(name)
        for member in getattr(module, "__all__", ()):
            value = getattr(module, member, None)
            if value is not None:
                found.setdefault(id(value), []).append((name, member))
    return found


def _is_alias(value: object) -> bool:
    """A type alias (``Kind = Literal[...]``, ``X = A | B``): it has no module of its own,
    so it is found by identity among the ``__all__`` lists. Plain values are not (two
    modules' ``1`` are the same object)."""
    return type(value).__module__ in {"typing", "types"} and not isinstance(value, type)


def _home(value: object) -> tuple[str, str] | None:
    """(module, qualified name) where ``value`` is documented: its own module, or the
    re-exporting public package when its own is private; ``None`` for what veridic did
    not define."""
    listed = _exports().get(id(value), [])
    if _is_alias(value):
        # Of two modules as deep, the one that assigns the alias, not one that imports it
        # to re-export it: autodoc writes an alias only where it is assigned.
        return (
            min(
                listed,
                key=lambda entry: (
                    entry[0].count("."),
                    entry[1] in _source_imports(entry[0]),
                    entry,
                ),
            )
            if listed
            else None
        )
    own = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not isinstance(own, str) or not own.startswith("veridic") or not isinstance(qualname, str):
        return None
    if own in _documented_modules():
        return own, qualname
    listed = [entry for entry in listed if entry[1] == qualname]
    return min(listed, key=lambda entry: (entry[0].count("."), entry)) if listed else None


def _home_module(value: object) -> str | None:
    home = _home(value)
    return home[0] if home else None


def _skip_member(
    app: Sphinx, what: str, name: str, value: object, skip: bool, options: object
) -> bool | None:
    """Each object once (see the module docstring), and a class's inherited members only
    where their own class is private, so not documented elsewhere."""
    if skip:
        return None
    # autodoc sets the module (and class) whose members it is filtering (Sphinx 9's
    # ``current_document``; Sphinx is pinned in pyproject.toml).
    module = getattr(app.env.current_document, "autodoc_module", "")
    if what == "module":
        home = _home_module(value)
        return True if home is not None and module and home != module else None
    if what in {"class", "exception"}:
        klass = _lookup(f"{module}.{app.env.current_document.autodoc_class}")
        if not isinstance(klass, type):
            return None
        owner = next((c for c in klass.__mro__ if name in vars(c)), klass)
        private_owner = owner.__module__.startswith("veridic") and (
            not _public(owner.__module__) or owner.__name__.startswith("_")
        )
        inherited_from_public = owner is not klass and not private_owner
        return True if inherited_from_public else None
    return None


# -- references through another path to the same object ---------------------------


def _lookup(path: str) -> object | None:
    """The object at a dotted path, importing the longest module prefix."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except (ImportError, ValueError):  # not a module, or no name at all
            continue
        for part in parts[cut:]:
            try:
                value = inspect.getattr_static(value, part)
            except AttributeError:
                try:
                    value = getattr(value, part)
                except AttributeError:
                    return None
        return value
    return None


def _canonical(path: str) -> str | None:
    """The documented name of the object at ``path``: the longest prefix of the path that
    names a veridic class, function or type alias gives its home, and the rest follows
    unchanged."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        value = _lookup(".".join(parts[:cut]))
        if isinstance(value, ModuleType):
            return None
        home = _home(value)
        if home is not None:
            return ".".join([*home, *parts[cut:]])
    return None


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a name below a module that is not a package
        return False


@cache
def _source_imports(module: str) -> dict[str, str]:
    """name -> dotted path of every ``from X import name`` in a module's source, those under
    ``TYPE_CHECKING`` included: an annotation autodoc could not evaluate stays the bare name
    the module imported."""
    spec = importlib.util.find_spec(module) if _is_module(module) else None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return {}
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found = {}
    package = module if spec.origin.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name] = alias.name
    return found


def _qualify(target: str, module: str | None, klass: str | None) -> list[str]:
    """The full paths a bare ``target`` may mean where it was written."""
    if module is None:
        return []
    head, _, rest = target.partition(".")
    found = []
    if klass:
        found.append(f"{module}.{klass}.{target}")
    found.append(f"{module}.{target}")
    imported = _source_imports(module).get(head)
    if imported is not None:
        found.append(".".join([imported, *([rest] if rest else [])]))
    return found


_OUTSIDE = [re.compile(pattern) for _, pattern in nitpick_ignore_regex]


def _resolve_alias(
    app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref, contnode: Element
) -> Node | None:
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    objects = env.domains.python_domain.objects
    candidates = [target] if target.startswith("veridic.") else []
    candidates += _qualify(target, node.get("py:module"), node.get("py:class"))
    # An inherited docstring was written in its own module: its names are that module's.
    written = re.search(r"docstring of (veridic[\w.]*)", node.source or "")
    if written is not None:
        origin = written.group(1)
        while origin and not _is_module(origin):
            origin = origin.rpartition(".")[0]
        candidates += _qualify(target, origin or None, None)
    candidates += [
        name for candidate in candidates for name in _on_public_subclass(candidate, node)
    ]
    for candidate in candidates:
        if candidate in objects:
            name = candidate
        else:
            canonical = _canonical(candidate)
            if canonical is None or canonical not in objects:
                # A bare name the module imported from outside veridic (typing, pydantic):
                # ignored like its full path would be, and only then.
                outside = candidate != target and not candidate.startswith("veridic")
                if outside and any(pattern.fullmatch(candidate) for pattern in _OUTSIDE):
                    return contnode
                continue
            name = canonical
        entry = objects[name]
        return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode)
    signature = _in_signature(node)
    if any(_unlinkable(candidate, signature) for candidate in candidates):
        return contnode
    return None


def _on_public_subclass(path: str, node: Element) -> list[str]:
    """A member of a private base class (``SQLStore.claim_paused``) is documented on the
    public classes that inherit it: the one in the module of the reference
    (``veridic.run.postgres.PostgresAuditSink.claim_paused`` on the Postgres page)."""
    owner_path, _, member = path.rpartition(".")
    owner = _lookup(owner_path)
    if not isinstance(owner, type) or _home(owner) is not None:
        return []
    module = importlib.import_module(node.get("py:module") or "veridic")
    heirs = [
        f"{module.__name__}.{name}.{member}"
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, owner)
        and value.__module__ == module.__name__
        and _public(name)
    ]
    return heirs if len(heirs) == 1 else []


def _in_signature(node: Node) -> bool:
    """Whether autodoc wrote the reference: in a signature (an annotation, a default), a
    class's list of bases or a type alias's value."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, addnodes.desc_signature):
            return True
        if isinstance(parent, nodes.paragraph) and parent.astext().startswith(
            ("Bases: ", "alias of ")
        ):
            return True
        parent = parent.parent
    return False


def _unlinkable(path: str, signature: bool) -> bool:
    """A type variable (``P``, ``OutputT``): a type parameter, never an object with a page.
    In a signature or a base class also a helper the API does not export: a private class
    (``veridic.config._Unset``) or a name outside its module's ``__all__``
    (``veridic.evaluation.backends.HttpClient``). Shown as text there; a docstring that
    names one still fails the build."""
    if not path.startswith("veridic."):
        return False
    value = _lookup(path)
    if isinstance(value, TypeVar | ParamSpec):
        return True
    if value is None or not signature:
        return False
    module, _, name = path.rpartition(".")
    exported = getattr(_lookup(module), "__all__", None)
    own = getattr(value, "__module__", None)
    private = not _public(path) or (isinstance(own, str) and not _public(own))
    return private or (exported is not None and name not in exported)


def _google_sections(
    app: Sphinx, what: str, name: str, value: object, options: object, lines: list[str]
) -> None:
    """Napoleon, for what has Args:/Returns:/Raises: sections. Not for an attribute's
    docstring: napoleon would read its first words before a colon ("How audit records
    name the API: ...") as the attribute's type."""
    if what in {"function", "method", "class", "exception"}:
        napoleon_process_docstring(app, what, name, value, options, lines)  # type: ignore[arg-type]


def _public_bases(
    app: Sphinx, name: str, value: object, options: object, bases: list[object]
) -> None:
    """A private base class (``veridic.run._sql_store.SQLStore``) is not documented: show
    the public classes it derives from instead."""
    public: list[object] = []
    pending = list(bases)
    while pending:
        base = pending.pop(0)
        origin = getattr(base, "__origin__", base)  # Bound[P] is Bound's
        module = getattr(origin, "__module__", "")
        private = module.startswith("veridic") and (
            not _public(module) or getattr(origin, "__name__", "").startswith("_")
        )
        if private and isinstance(origin, type):
            parents = getattr(origin, "__orig_bases__", origin.__bases__)
            pending[:0] = [parent for parent in parents if parent is not object]
        elif base not in public:
            public.append(base)
    bases[:] = public or [object]


def _parsable_signature(
    app: Sphinx,
    what: str,
    name: str,
    value: object,
    options: object,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """A dataclass field with a ``default_factory`` shows its default as ``<factory>``,
    which is not Python: Sphinx could not parse the signature and would split it at every
    comma (``tuple[str``). Written ``...`` instead: the field has a default, made per
    instance."""
    if signature is None or "<factory>" not in signature:
        return None
    return signature.replace("<factory>", "..."), return_annotation


def _list_reexports(
    app: Sphinx, what: str, name: str, value: object, options: object, lines: list[str]
) -> None:
    """End a module's docstring with the names it re-exports, each a reference to its home."""
    if what != "module" or name == "veridic":  # the root has its table (api/index.md)
        return
    names = sorted(
        member
        for member in getattr(value, "__all__", ())
        if (home := _home_module(getattr(value, member, None))) is not None and home != name
    )
    if names:
        refs = ", ".join(
            f":py:obj:`{member} <{_canonical(f'{name}.{member}')}>`" for member in names
        )
        lines.extend(["", f"Also importable from here, documented at their homes: {refs}."])


# -- the root's names, as references to their homes ---------------------------------


_ROLE = re.compile(r":[\w:]+:`~?(?:[^`<]*<)?([^`>]+)>?`")


class Reexports(SphinxDirective):
    """``.. veridic-reexports:: MODULE`` (in an ``{eval-rst}`` block): a table of the names
    ``MODULE.__all__`` re-exports from elsewhere, each a reference to where it is
    documented, with its summary line."""

    required_arguments = 1

    def run(self) -> list[Node]:
        module = importlib.import_module(self.arguments[0])
        rows = []
        for name in sorted(module.__all__, key=str.lower):
            value = getattr(module, name)
            home = _home_module(value)
            if home is None or home == module.__name__:
                continue
            doc = inspect.getdoc(value) or ""
            summary = doc.strip().split("\n\n")[0].replace("\n", " ")
            # Roles in a summary are relative to their own module: here, plain code.
            summary = _ROLE.sub(lambda m: f"``{m.group(1).split('.')[-1]}``", summary)
            rows.append(
                f"   * - :py:obj:`{name} <{_canonical(f'{module.__name__}.{name}')}>`\n"
                f"     - :py:mod:`{home}`\n"
                f"     - {summary}"
            )
        text = (
            ".. list-table::\n   :header-rows: 1\n   :widths: 25 25 50\n\n"
            "   * - name\n     - documented in\n     - summary\n" + "\n".join(rows)
        )
        return self.parse_text_to_nodes(text)


class Modules(SphinxDirective):
    """``.. veridic-modules:: PACKAGE`` (in an ``{eval-rst}`` block): a section per public
    module of the package (the package first, then the modules named in the content in that
    order, then every other one), each its module's autodoc. A module added later is in the
    reference without an edit here."""

    required_arguments = 1
    has_content = True

    def run(self) -> list[Node]:
        package = self.arguments[0]
        inside = [
            name
            for name in _documented_modules()
            if name == package or name.startswith(f"{package}.")
        ]
        named = [f"{package}.{line.strip()}" for line in self.content if line.strip()]
        unknown = sorted(set(named) - set(inside))
        if unknown:
            raise self.error(f"veridic-modules: no public module {', '.join(unknown)}")
        order = [package, *named, *(name for name in inside if name not in {package, *named})]
        text = "\n".join(
            f"``{name}``\n{'-' * (len(name) + 4)}\n\n.. automodule:: {name}\n" for name in order
        )
        return self.parse_text_to_nodes(text, allow_section_headings=True)


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("missing-reference", _resolve_alias)
    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is napoleon_process_docstring:
            app.disconnect(listener.id)  # it runs through _google_sections instead
    app.connect("autodoc-process-docstring", _google_sections)
    app.connect("autodoc-process-docstring", _list_reexports)
    app.connect("autodoc-process-bases", _public_bases)
    app.connect("autodoc-process-signature", _parsable_signature)
    app.add_directive("veridic-reexports", Reexports)
    app.add_directive("veridic-modules", Modules)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
