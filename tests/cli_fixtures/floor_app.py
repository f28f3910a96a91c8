"""A hard delete quietly declared mid risk: the registry refuses to boot."""

from __future__ import annotations

from veridic import Registry, Risk

registry = Registry("floor")


@registry.tool(kind="write", irreversible=True, risk=Risk.MID)
def purge_user(user_id: int) -> str:
    """Permanently delete a user and everything they own; this cannot be undone.

    Args:
        user_id: The user to delete.
    """
    return f"purged {user_id}"
