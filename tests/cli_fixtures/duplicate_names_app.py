"""Two tools under one name: registration fails at import, a finding (exit 1)."""

from __future__ import annotations

from veridic import Registry

registry = Registry("twice")


@registry.tool(kind="query")
def find_user(email: str) -> str:
    """Find a user by email address.

    Args:
        email: The address to look up.
    """
    return email


@registry.tool(kind="query", name="find_user")
def find_user_again(email: str) -> str:
    """Find a user by their email address, again.

    Args:
        email: The address to look up.
    """
    return email
