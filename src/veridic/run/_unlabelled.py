"""The refusal of outside tool text that no capability section labels as data.

One function, shared by the gateway (:mod:`veridic.run._sending`) and the framework
adapters (LangChain's ``structured_tools``, pydantic-ai's capability), so that every road
to a model refuses the same case with the same words.
"""

from __future__ import annotations

from typing import Final

from veridic._counted import counted
from veridic.errors import ToolCouplingError
from veridic.tools.tool import Tool
from veridic.tools.view import ToolView

__all__ = ["refuse_unlabelled_outside_text"]


def refuse_unlabelled_outside_text(where: str, view: ToolView) -> None:
    """Refuse a request without a capability section sent with tools described from outside.

    The tool list carries an unpinned external tool's description and schema (and the
    schema of one pinned by its description alone) as the outside wrote them; only the
    capability section tells the model that text is data. Without it, the tool list
    gave a server's "ignore your rules" the voice of the application.

    ``where`` names what lacks the section: ``prompt <sha256[:12]>`` for a prompt, or
    ``request <id>`` where a framework builds the request and no prompt exists.

    Raises:
        ToolCouplingError: a tool of ``view`` has text no pin covers.
    """
    unverified = [tool for tool in view.tools() if not tool.schema_trusted]
    if not unverified:
        return
    named = [f"{tool.name!r} (from {tool.origin}: {_uncovered(tool)})" for tool in unverified]
    shown = ", ".join(named[:_SHOWN])
    if len(named) > _SHOWN:  # a large server's every tool would bury what to do
        shown += f" and {len(named) - _SHOWN} more"
    raise ToolCouplingError(
        f"{where} has no capability section in a system message, and the "
        f"tool list sent with it holds text from outside that no pin covers, of "
        f"{counted(len(unverified), 'tool')}: {shown}; only the section tells the model to "
        "read that text as data: put view.capability_section() in the system message, pin "
        "each tool whole (registry.external(..., pin=veridic.tools.tool.tool_pin(name, "
        "description, input_schema))), or keep them out of the view "
        "(registry.view(deny=[Deny(when=lambda tool: not tool.schema_trusted)]))"
    )


_SHOWN: Final = 5
"""How many of the tools without a pin the refusal names; it counts the rest."""


def _uncovered(tool: Tool) -> str:
    """What of ``tool``'s list entry no pin covers, in the words of the refusal."""
    if tool.description_trust == "unpinned":
        return "its description and input schema"
    return "its input schema, which a description pin leaves out"
