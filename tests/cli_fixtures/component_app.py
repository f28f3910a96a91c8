"""An optional component that did not start: listed, and recorded in the manifest."""

from __future__ import annotations

from veridic import Registry

registry = Registry("components")


def _pro_boot() -> None:
    raise RuntimeError("requires core >= 2.3")


pro = registry.component(
    "Pro extension",
    boot=_pro_boot,
    hint="Update the core plugin, then reactivate Pro.",
    provides="Code snippets",
)


@pro.tool(kind="write")
def create_snippet(code: str) -> str:
    """Create a code snippet that runs before each dispatch; it can be deleted later.

    Args:
        code: The PHP source of the snippet.
    """
    return code


@registry.tool(kind="query")
def find_webhook(webhook_id: int) -> str:
    """Read one webhook with its mapping and credential.

    Args:
        webhook_id: The webhook to read.
    """
    return str(webhook_id)
