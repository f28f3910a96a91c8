"""A prompt store: append-only revisions whose ``content`` is another feature's system prompt.

``StoredPrompt.content`` is an :data:`~veridic.InstructionField`: the
application's decision, written in code, that this text instructs a model.
Two consequences, both enforced by veridic:

- reading it gives trusted text (provenance kind ``field``), so the owning
  feature can put the active revision in its system slot;
- writing it is high risk. Tools that write it must say so (their risk floor
  is checked when the registry boots), and the store itself calls
  :func:`~veridic.guard_instruction_write` before every write of it, so a
  tool that reaches the write by delegation is judged as the tool the agent
  dispatched. The hard delete calls :func:`~veridic.guard_irreversible`.

Outside an agent's dispatch (the application's own code, migrations, this
module's :meth:`PromptStore.seeded`) the guards do nothing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from veridic import InstructionField, guard_instruction_write, guard_irreversible

__all__ = ["PromptStore", "StoredPrompt"]


class StoredPrompt(BaseModel):
    """One revision of a prompt. ``content`` is read as instruction by the owning feature."""

    model_config = ConfigDict(frozen=True)

    name: str
    revision: int
    content: InstructionField


class PromptStore:
    """Prompts by name: every revision kept, the latest one active, a label per prompt."""

    def __init__(self) -> None:
        self._revisions: dict[str, list[StoredPrompt]] = {}
        self._labels: dict[str, str] = {}

    @classmethod
    def seeded(cls) -> PromptStore:
        """A store holding the prompts the scenario starts with."""
        store = cls()
        store.append(
            "support-triage",
            "You triage support tickets. Classify each ticket as billing, bug or question, "
            "and answer with the category only.",
        )
        store.append("old-draft", "Draft: summarise tickets in one line.")
        return store

    def names(self) -> list[str]:
        return sorted(self._revisions)

    def active(self, name: str) -> StoredPrompt:
        """The active (latest) revision of ``name``.

        Raises:
            KeyError: no prompt is called ``name``.
        """
        return self._revisions[name][-1]

    def revisions(self, name: str) -> tuple[StoredPrompt, ...]:
        return tuple(self._revisions.get(name, ()))

    def label(self, name: str) -> str:
        return self._labels.get(name, "")

    def append(self, name: str, content: str) -> StoredPrompt:
        """Append a revision of ``name``, active at once: a write of text read as instruction."""
        guard_instruction_write(StoredPrompt)
        revisions = self._revisions.setdefault(name, [])
        stored = StoredPrompt.model_validate(
            {"name": name, "revision": len(revisions) + 1, "content": content}
        )
        revisions.append(stored)
        return stored

    def revert(self, name: str, revision: int) -> StoredPrompt:
        """Make ``revision`` active again by appending a copy: restorable, and read as instruction.

        Raises:
            KeyError: no prompt is called ``name``.
            IndexError: it has no such revision.
        """
        older = self._revisions[name][revision - 1]
        return self.append(name, older.content)

    def set_label(self, name: str, label: str) -> None:
        """Set the label a prompt is listed under (not read as instruction)."""
        if name not in self._revisions:
            raise KeyError(name)
        self._labels[name] = label

    def hard_delete(self, name: str) -> None:
        """Remove a prompt and every revision of it: nothing is appended, nothing can undo it."""
        guard_irreversible("hard delete prompt")
        del self._revisions[name]
        self._labels.pop(name, None)
