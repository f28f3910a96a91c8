"""Request keys a framework may not set beside veridic: they carry instructions, tools or
history of their own.

A framework passes its model settings (the Agents SDK's ``extra_body`` and
``extra_args``, a LangChain middleware's ``model_settings``, pydantic-ai's ``extra_body``)
to the provider with the
request, over the parameters: ``{"instructions": ...}`` replaced the checked system
prompt, ``{"tools": ...}`` the view's tool list, ``{"previous_response_id": ...}``
added history the prompt's hash does not name. One list serves every adapter, since
either framework can drive any provider (LiteLLM, LangChain's integrations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["OWNED", "owned_keys"]

OWNED: Final = frozenset(
    {
        "chat_history",  # Cohere
        "conversation",
        "function_call",
        "functions",
        "input",
        "instructions",
        "mcp_servers",
        "messages",
        "preamble",  # Cohere
        "previous_response_id",
        "prompt",
        "system",  # Anthropic
        "system_instruction",  # Google
        "system_prompt",
        "tool_choice",
        "tools",
    }
)
"""Request keys of the providers' APIs that carry instructions, tools or history."""


def owned_keys(settings: object) -> set[str]:
    """The keys of ``settings`` (a mapping, or anything else: none) that set what veridic
    owns."""
    if not isinstance(settings, Mapping):
        return set()
    return {key for key in settings if isinstance(key, str) and key in OWNED}
