"""instruction() refuses text that was not written in code (veridic-literal)."""

from typing import Final, LiteralString, cast

import _constants

from veridic import TrustedInstruction, UntrustedText, instruction

FROM_CALL: Final = str(len("abc"))
LITERAL: Final = "support"


def refused(name: str, u: UntrustedText, t: TrustedInstruction, text: LiteralString) -> None:
    # P: [reportArgumentType]
    instruction(name)  # E: [veridic-literal] the parameter "name"
    # P: [reportArgumentType]
    instruction(f"Hello {name}")  # E: [veridic-literal] an f-string with values
    # P: [reportArgumentType]
    instruction(str(name))  # E: [veridic-literal] a str() conversion
    # P: [reportArgumentType]
    instruction("Hi %s" % name)  # noqa: UP031  # E: [veridic-literal] a %-formatted string
    # P: [reportArgumentType]
    instruction("Hi {}".format(name))  # noqa: UP032  # E: [veridic-literal] a str.format() result
    # P: [reportArgumentType]
    instruction(name.strip())  # E: [veridic-literal] the result of "strip()"
    # P: [reportArgumentType]
    instruction("Hi " + name)  # E: [veridic-literal] the parameter "name"
    # P: [reportArgumentType]
    instruction("a" if u else name)  # E: [veridic-literal] the parameter "name"
    # P: [reportArgumentType]
    instruction(u)  # E: [veridic-literal] Composer.data()
    # P: [reportArgumentType]
    instruction(t)  # E: [veridic-literal] pass it on as it is
    # P: [reportArgumentType]
    instruction(FROM_CALL)  # E: [veridic-literal] whose value is not a literal
    instruction(f"You do {LITERAL}")  # E: [veridic-literal] an f-string with values
    instruction("Be brief.".upper())  # E: [veridic-literal] the result of "upper()"
    instruction(_constants.NOT_LITERAL)  # E: [veridic-literal] the attribute "NOT_LITERAL"
    instruction(cast(LiteralString, name))  # E: [redundant-cast] # E: [veridic-literal] a cast()
    local = "assigned from a literal, but a variable"
    instruction(local)  # E: [veridic-literal] the variable "local"
    text = text.upper()
    instruction(text)  # E: [veridic-literal] which its function binds to other text
