"""The second article's scenario: a prompt store whose content another feature reads as instruction.

Run from the repository root: ``python -m examples.prompt_store``.
"""

from examples.prompt_store.scenario import main

__all__ = ["main"]
