"""A forward reference makes mypy analyse the module top level twice; the checks still hold."""

from typing import LiteralString

from veridic import TrustedInstruction, instruction

current: "Later | None" = None


class Later:
    def rule(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)


def use(name: str) -> None:
    if current is not None:
        current.rule("fine")
        # P: [reportArgumentType]
        current.rule(name)  # E: [veridic-literal] Later.rule()
