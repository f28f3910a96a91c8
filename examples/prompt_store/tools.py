"""The prompt store's agent tools, and the risk each one runs at.

The risks are not typed in here, except where a test of the floor needs one:

- queries default to low, writes to mid;
- ``edit_prompt`` takes its ``content`` as an ``InstructionField``, so it is
  high: its argument is text another feature will read as instruction;
- ``revert_prompt`` declares ``writes=(StoredPrompt,)``: the revision it
  appends is restorable, but it becomes another feature's system prompt,
  so it is high too. Declaring it mid (``build_registry(store,
  revert_risk="mid")``, the article's original mistake) fails when the
  registry boots;
- ``delete_prompt`` is ``irreversible=True``: a hard delete, high;
- ``tidy_prompt`` is a plain mid write that happens to append a revision
  through the store: it declares nothing, so the store's guard refuses its
  write at run time, whatever approval rule the user set for it.

``registry`` at the bottom is what ``veridic check
examples.prompt_store.tools:registry`` and the committed ``manifest.json``
describe.
"""

from __future__ import annotations

from examples.prompt_store.store import PromptStore, StoredPrompt
from veridic import InstructionField, Registry
from veridic.tools.risk import RiskLike

__all__ = ["build_registry", "registry", "store"]


def build_registry(store: PromptStore, *, revert_risk: RiskLike | None = None) -> Registry:
    """The store's tools on a new registry; ``revert_risk`` declares revert's risk (a demo)."""
    registry = Registry("prompt-store")

    @registry.tool(kind="query")
    def list_prompts() -> list[str]:
        """List the prompts in the store, each with its active revision number and label."""
        return [
            f"{name} (revision {store.active(name).revision}, label {store.label(name)!r})"
            for name in store.names()
        ]

    @registry.tool(kind="query")
    def get_prompt(name: str) -> str:
        """Read the active content of a prompt: the system prompt its feature runs with now.

        Args:
            name: The prompt's name, as list_prompts gives it.
        """
        return str(store.active(name).content)

    @registry.tool(kind="write")
    def edit_prompt(name: str, content: InstructionField) -> str:
        """Save new content for a prompt by appending a revision that becomes active immediately.
        The owning AI feature uses this content verbatim as its system prompt on its next run.

        Args:
            name: The prompt's name.
            content: The complete new text of the prompt.
        """
        return f"{name}: revision {store.append(name, content).revision} is active"

    @registry.tool(kind="write", writes=(StoredPrompt,), risk=revert_risk)
    def revert_prompt(name: str, revision: int) -> str:
        """Restore an older revision of a prompt by appending a copy of it as the active one.
        Earlier revisions stay; the owning AI feature uses the restored text verbatim as its
        system prompt on its next run.

        Args:
            name: The prompt's name.
            revision: The revision number to restore.
        """
        restored = store.revert(name, revision)
        return f"{name}: revision {restored.revision} (a copy of {revision}) is active"

    @registry.tool(kind="write", irreversible=True)
    def delete_prompt(name: str) -> str:
        """Permanently delete a prompt and all its revisions.
        This is a hard delete, not an appended revision, and cannot be undone.

        Args:
            name: The prompt's name.
        """
        store.hard_delete(name)
        return f"{name}: deleted"

    @registry.tool(kind="write")
    def label_prompt(name: str, label: str) -> str:
        """Set the label a prompt is listed under; its content and revisions stay as they are.

        Args:
            name: The prompt's name.
            label: A short label, e.g. "stable".
        """
        store.set_label(name, label)
        return f"{name}: labelled {label!r}"

    @registry.tool(kind="write")
    def tidy_prompt(name: str) -> str:
        """Normalise the whitespace of a prompt: trailing spaces and runs of blank lines.

        Args:
            name: The prompt's name.
        """
        text = "\n".join(line.rstrip() for line in str(store.active(name).content).splitlines())
        return f"{name}: revision {store.append(name, text).revision} is active"

    return registry


store = PromptStore.seeded()
"""The deployed store."""

registry = build_registry(store)
"""The deployed store's registry: what ``veridic check`` and ``manifest.json`` describe."""
