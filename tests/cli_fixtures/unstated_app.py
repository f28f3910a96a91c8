"""A high-risk tool whose description does not say what cannot be undone (a warning)."""

from __future__ import annotations

from veridic import Registry

registry = Registry("unstated")


@registry.tool(kind="write", irreversible=True)
def purge_user(user_id: int) -> str:
    """Remove a user together with their files and settings.

    Args:
        user_id: The user to remove.
    """
    return f"purged {user_id}"
