"""Call hook: ``dataclasses.replace(obj, field=value)`` checks ``value`` as the constructor would.

Hook: ``get_function_hook`` for ``dataclasses.replace`` (and ``copy.replace``).

What it changes: nothing in the inferred types. It reports ``veridic-literal`` (or
``veridic-any``) for a changed field whose parameter in the class's ``__init__`` is
a checked position (``TrustedText``, ``LiteralString``), exactly as for a call of
the class: ``replace`` calls ``__init__`` again with the changes.

Why: a ``Deny(reason=...)``, an ``McpServer(name=...)`` or a ``ToolHints(title=...)``
is checked where it is made, but ``replace(deny, reason=ticket.subject)`` is a call
of ``replace``, not of the class, and mypy types its keywords from the fields. The
run time cannot tell a plain ``str`` from a literal, so outside text would reach the
capability section. A ``**changes`` mapping is checked against the strictest such
parameter: its keys are not known.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from mypy.checker import TypeChecker
from mypy.nodes import ARG_STAR2
from mypy.plugin import FunctionContext, Plugin
from mypy.types import Instance, Type, get_proper_type

from veridic.mypy import _any_guard, _minting, _signature
from veridic.mypy._signature import Argument, Callee, Role


def check(plugin: Plugin, ctx: FunctionContext) -> Type:
    """Check the changed fields of a ``replace`` call against the class's constructor."""
    checker = ctx.api
    if not isinstance(checker, TypeChecker) or not ctx.arg_types or not ctx.arg_types[0]:
        return ctx.default_return_type
    target = get_proper_type(ctx.arg_types[0][0])
    if not isinstance(target, Instance):
        return ctx.default_return_type
    callee = _signature.find(plugin, target.type.fullname, target.type)
    if callee is None:
        return ctx.default_return_type
    callee = replace(callee, display=f"replace() of {callee.display}")
    changed = list(_changes(ctx, callee))
    _minting.check_arguments(callee, changed, checker)
    _any_guard.check_arguments(callee, changed, checker)
    return ctx.default_return_type


def _changes(ctx: FunctionContext, callee: Callee) -> Iterator[Argument]:
    """The arguments after the object, each matched by name to a checked parameter."""
    roles = {name: role for name, role in zip(callee.names, callee.roles, strict=True) if name}
    strictest = _strictest(callee.roles)
    groups = zip(ctx.arg_names[1:], ctx.args[1:], ctx.arg_types[1:], ctx.arg_kinds[1:], strict=True)
    for names, exprs, types, kinds in groups:
        for name, expr, typ, kind in zip(names, exprs, types, kinds, strict=True):
            if kind == ARG_STAR2:
                role, formal = strictest, "**changes"
            else:
                role, formal = roles.get(name or ""), f'"{name}"'
            if role is not None:
                yield Argument(role, formal, expr, typ, kind)


def _strictest(roles: tuple[Role | None, ...]) -> Role | None:
    """The role a change of unknown name is checked in: text first, trusted text strictest."""
    for role in (Role.TRUSTED_TEXT, Role.CODE_TEXT):
        if role in roles:
            return role
    return None
