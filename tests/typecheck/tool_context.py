"""A handler's ToolContext[X] gives ``ctx.deps`` the type X, with no Any, to mypy alone.

The deps type is the handler's own annotation, so mypy and pyright check what
the handler does with the deps without the plugin; veridic checks at run time
that the application passed an X. A bare ToolContext is refused by mypy --strict
(and by the registry when it boots).
"""

from dataclasses import dataclass
from typing import assert_type

from veridic import Registry, ToolContext
from veridic.tools import ToolContext as ToolsToolContext


@dataclass
class Shop:
    user: str


registry = Registry()


@registry.tool(kind="query")
def list_orders(ctx: ToolContext[Shop], status: str) -> str:
    """List the orders of the user the request is for.

    Args:
        status: Which orders, e.g. "open".
    """
    assert_type(ctx.deps, Shop)
    assert_type(ctx.request_id, str)
    assert_type(ctx.tool, str)
    count: int = ctx.deps  # E: [assignment] "Shop"  # P: [reportAssignmentType]
    # E: [attr-defined] "Shop" has no attribute "email"
    # P: [reportAttributeAccessIssue]
    _ = ctx.deps.email
    ctx.deps = Shop("bo")  # E: [misc] read-only  # P: [reportAttributeAccessIssue]
    return f"{ctx.deps.user} {status} {count}"


def widened(ctx: ToolContext[Shop]) -> ToolContext[object]:
    return ctx


def same_class(ctx: ToolsToolContext[Shop]) -> ToolContext[Shop]:
    return ctx


def untyped(ctx: ToolContext) -> str:  # E: [type-arg] Missing type arguments
    return ctx.tool
