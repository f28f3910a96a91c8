"""instruction() accepts every form of text written in code: no mypy error here.

pyright refuses one of them: a constant declared Final[str] is a str to pyright.
"""

from typing import Final, Literal, LiteralString

import _constants
from _constants import DECLARED, GREETING
from _helpers import rule

from veridic import TrustedInstruction, instruction, join

LOCAL: Final = "Be brief."


class Prompts:
    TONE: Final = "Be kind."
    STYLE: Final[str] = "Be concise."


def accepted(
    flag: bool, mode: Literal["short", "long"], text: LiteralString
) -> list[TrustedInstruction]:
    return [
        instruction("a literal"),
        instruction("plus " + "concatenation"),
        instruction("parenthesised " + ("nested " + "parts")),
        instruction("yes" if flag else "no"),
        instruction(f"an f-string without values"),  # noqa: F541
        instruction(LOCAL),
        instruction(GREETING),
        # P: [reportArgumentType]
        instruction(DECLARED),
        instruction(_constants.GREETING),
        instruction(Prompts.TONE),
        # P: [reportArgumentType]
        instruction(Prompts.STYLE),
        instruction(LOCAL + " " + GREETING),
        instruction(mode),
        instruction(text),
        instruction("prefix: " + text),
        rule("through a helper in another module"),
        join([instruction("a"), instruction("b")], sep=" "),
        join([instruction("a")], sep=LOCAL),
    ]
