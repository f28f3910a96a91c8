"""Sibling tools a model may confuse, for ``veridic probe`` (and ``make eval-probe``).

Each pair differs by the words that carry the meaning: the hotels (with prices)
against only their names; delete against archive. ``publish_draft`` needs the
editor role, so ``registry.view()`` hides it: the probe asks for it anyway and
reports what the model calls instead.
"""

from __future__ import annotations

from veridic import Registry

registry = Registry("probe-siblings")


@registry.tool(kind="query")
def search_hotels(city: str) -> str:
    """Search the hotels in a city, with their prices and free rooms.

    Args:
        city: The city to search.
    """
    return f"hotels in {city}"


@registry.tool(kind="query")
def list_hotel_names(city: str) -> str:
    """List the hotel names in a city.

    Args:
        city: The city whose hotels to name.
    """
    return f"hotel names in {city}"


@registry.tool(kind="write", irreversible=True)
def delete_draft(draft_id: str) -> str:
    """Delete a draft post. This cannot be undone.

    Args:
        draft_id: The draft to delete.
    """
    return f"deleted {draft_id}"


@registry.tool(kind="write")
def archive_draft(draft_id: str) -> str:
    """Archive a draft post, so it leaves the list of drafts but can be restored.

    Args:
        draft_id: The draft to archive.
    """
    return f"archived {draft_id}"


@registry.tool(kind="write", roles=("editor",))
def publish_draft(draft_id: str) -> str:
    """Publish a draft post, so readers can see it.

    Args:
        draft_id: The draft to publish.
    """
    return f"published {draft_id}"


@registry.tool(kind="query")
def get_forecast(city: str) -> str:
    """Get the weather forecast for the next three days in a city.

    Args:
        city: The city of the forecast.
    """
    return f"forecast for {city}"


editor_view = registry.view(roles=("editor",), deny=["delete_draft"])
"""An editor's view: ``delete_draft`` denied, so the probe asks what replaces it."""
