"""Support module (not a case): containers of trusted text declared in a project module
whose name starts with "_", which is no library for that (any_declared.py)."""

from typing import Any

from veridic import TrustedInstruction


class Prompts(dict[str, TrustedInstruction]):
    """A project class that is a container of trusted text by its base."""

    loaded: Any
    """Loaded as it came (a case iterates over it with no call)."""
    fallback: Any
    """A default of no type (a case uses it as a parameter's default with no call)."""
