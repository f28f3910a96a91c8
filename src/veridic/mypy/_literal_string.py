"""Type-analyze hook: keep ``LiteralString`` recognisable after mypy reads it as ``str``.

Hook: ``get_type_analyze_hook`` for ``typing.LiteralString`` and
``typing_extensions.LiteralString``.

What it changes: mypy turns ``LiteralString`` into plain ``str`` while it
analyses an annotation (python/mypy#12554), so nothing downstream could tell a
``LiteralString`` parameter from a ``str`` one. The hook returns a reference to
the ``LiteralString`` alias itself (a ``TypeAliasType``) instead. mypy expands
an alias wherever it compares types, so type checking is exactly as before: the
parameter still accepts any ``str`` for mypy. What changes is that the plugin's
call hooks can now see which parameters were annotated ``LiteralString``, also
for functions read back from mypy's cache, because the alias reference is
stored in the cache by name.

Why: so that ``instruction()`` and every function of the user's own that takes a
``LiteralString`` parameter get their arguments checked as text written in code.

Not changed: annotations in typeshed's own stubs. ``str.format``, ``str.join``
and friends use ``LiteralString`` in overloads that refine a return type, not
to demand literal arguments; they keep mypy's plain ``str``.
"""

from __future__ import annotations

from mypy.errors import Errors
from mypy.nodes import TypeAlias
from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.semanal_shared import SemanticAnalyzerInterface
from mypy.typeanal import TypeAnalyser
from mypy.types import ProperType, Type, TypeAliasType, UnionType, get_proper_type

from veridic.mypy import _names


def analyze(plugin: Plugin, fullname: str, ctx: AnalyzeTypeContext) -> Type:
    """Analyse one ``LiteralString`` annotation (``fullname`` is the spelling used)."""
    plain = ctx.api.named_type(_names.STR, [])
    if ctx.type.args or _in_typeshed(ctx):
        return plain
    _watch_errors(ctx)
    symbol = plugin.lookup_fully_qualified(fullname)
    alias = None if symbol is None else symbol.node
    if not isinstance(alias, TypeAlias):
        return plain
    return TypeAliasType(alias, [], line=ctx.type.line, column=ctx.type.column)


def is_literal_string(typ: Type) -> bool:
    """Whether ``typ`` is (still) the ``LiteralString`` alias, before expansion."""
    return (
        isinstance(typ, TypeAliasType)
        and typ.alias is not None
        and typ.alias.fullname in _names.LITERAL_STRING
    )


def mentions_literal_string(typ: Type) -> bool:
    """``LiteralString`` itself or a union with it (``LiteralString | None``, ``TrustedText``)."""
    return any(is_literal_string(item) for item in union_items(typ))


def union_items(typ: Type) -> list[Type]:
    """The members of ``typ`` as a flat list, keeping ``LiteralString`` references unexpanded.

    Aliases are expanded on the way (``TrustedText | None`` gives ``LiteralString``,
    ``TrustedInstruction`` and ``None``); every other member is a proper type.
    """
    if is_literal_string(typ):
        return [typ]
    proper: ProperType = get_proper_type(typ)
    if isinstance(proper, UnionType):
        return [member for item in proper.items for member in union_items(item)]
    return [proper]


def _watch_errors(ctx: AnalyzeTypeContext) -> None:
    """Start ``_notes``' watch early: the first ``LiteralString`` of a build (veridic's own
    ``instruction()``, on a cold run) comes before any module is type-checked."""
    api = ctx.api
    errors = getattr(api.api, "errors", None) if isinstance(api, TypeAnalyser) else None
    if isinstance(errors, Errors):
        from veridic.mypy import _notes

        _notes.watch(errors)


def _in_typeshed(ctx: AnalyzeTypeContext) -> bool:
    api = ctx.api
    if not isinstance(api, TypeAnalyser):
        return False
    semantic = api.api
    return isinstance(semantic, SemanticAnalyzerInterface) and semantic.is_typeshed_stub_file
