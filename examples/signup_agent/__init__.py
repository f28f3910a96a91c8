"""The first article's scenario: a plug-in fails to boot, and the prompt says so truthfully.

Run from the repository root: ``python -m examples.signup_agent``.
"""

from examples.signup_agent.scenario import main

__all__ = ["main"]
