"""Each code can be disabled like mypy's own: the runner disables veridic-any for this module."""

from typing import Any

from veridic import Composer, instruction


def disabled(loose: Any, name: str) -> None:
    Composer().system(loose)
    instruction(loose)
    # P: [reportArgumentType]
    instruction(name)  # E: [veridic-literal] the parameter "name"
