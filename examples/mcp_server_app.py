"""A notes registry served over MCP on stdio, with veridic's approvals and audit underneath.

An MCP host starts it as a subprocess and talks to it over stdin and stdout::

    StdioServerParameters(command="python", args=["examples/mcp_server_app.py"])

or, from the repository root, ``python examples/mcp_server_app.py --audit notes.sqlite3``
(it then waits for a client on stdin). What the client sees:

- ``list_notes`` (a query: runs without asking), ``add_note`` (a write the operator
  always allows: a standing rule in ``policy``), ``delete_note`` (irreversible, so
  high risk: the user confirms each call through the client's elicitation form),
  and the built-in ``get_tool_schema``;
- not ``search_notes``: its component did not start, so it is in no list, and a
  call of it is refused with the reason;
- every call, run or not, is a row of the audit store (``--audit``).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from veridic import ApprovalPolicy, BootError, Registry, SQLiteAuditSink, ToolView
from veridic.integrations.mcp.server import McpRequest, serve
from veridic.tools.tool import ToolHints


class Notes:
    """The application's store: numbered notes, in memory."""

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}
        self._next = 1

    def add(self, text: str) -> int:
        number = self._next
        self.texts[number] = text
        self._next += 1
        return number


def build_registry(notes: Notes) -> Registry:
    """The tools over ``notes``; the search component never starts (its index is not built)."""
    registry = Registry("notes")

    @registry.tool(kind="query", hints=ToolHints(open_world=False, title="List notes"))
    def list_notes() -> dict[str, str]:
        """List every note, by number."""
        return {str(number): text for number, text in notes.texts.items()}

    @registry.tool(
        kind="write", hints=ToolHints(additive=True, open_world=False, title="Add a note")
    )
    def add_note(text: str) -> dict[str, object]:
        """Add a note; the notes already there are kept.

        Args:
            text: What the note says.
        """
        return {"number": notes.add(text), "text": text}

    @registry.tool(
        kind="write",
        irreversible=True,
        hints=ToolHints(idempotent=True, open_world=False, title="Delete a note"),
    )
    def delete_note(number: int) -> str:
        """Delete a note for good; it cannot be restored.

        Args:
            number: The note's number, as list_notes gives it.
        """
        notes.texts.pop(number, None)
        return f"note {number} deleted"

    def search_index() -> None:
        raise BootError("the search index is not built")

    search = registry.component(
        "Search",
        boot=search_index,
        hint="Ask the operator to build the index.",
        provides="Searching notes",
    )

    @search.tool(kind="query")
    def search_notes(query: str) -> list[str]:
        """Find the notes that mention a word.

        Args:
            query: The word to look for.
        """
        return [text for text in notes.texts.values() if query in text]

    return registry


def standing_rules(view: ToolView) -> ApprovalPolicy:
    """The operator's rules: adding a note needs no question (deleting one always does)."""
    return ApprovalPolicy(view, rules={"add_note": "always"})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a notes registry over MCP (stdio).")
    parser.add_argument("--audit", default=":memory:", help="the SQLite file of the audit records")
    args = parser.parse_args(argv)
    registry = build_registry(Notes())
    registry.boot()  # at start-up: a broken declaration fails here, not at a call

    def view_of(request: McpRequest) -> ToolView:
        return registry.view()

    audit = SQLiteAuditSink(args.audit)
    try:
        asyncio.run(serve(view_of, audit=audit, policy=standing_rules, name="notes"))
    finally:
        audit.close()


if __name__ == "__main__":
    main()
