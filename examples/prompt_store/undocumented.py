"""The store's registry with one handler added in a hurry: ``archive_prompt``, no docstring.

The article's visibility half: the handler was registered, worked when called by hand,
and the agent never used it, because nothing told the model it existed. In veridic a
tool without a real description is in no view (not in the capability section, not in
the provider's tool list, not dispatched), start-up logs why, and ``veridic lint
examples.prompt_store.undocumented:registry`` fails until it has one.
"""

from __future__ import annotations

from examples.prompt_store import tools
from examples.prompt_store.store import PromptStore
from veridic import Registry

__all__ = ["build_registry", "registry"]


def build_registry(store: PromptStore) -> Registry:
    """The store's tools and the undocumented one, on a new registry."""
    registry = tools.build_registry(store)

    @registry.tool(kind="write")
    def archive_prompt(name: str) -> str:
        store.set_label(name, "archived")
        return f"{name}: archived"

    return registry


registry = build_registry(PromptStore.seeded())
"""What ``veridic lint examples.prompt_store.undocumented:registry`` reads."""
