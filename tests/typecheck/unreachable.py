"""A call of instruction() in code mypy did not check (veridic-literal).

mypy types (lambda x=text: x)() as Never and checks nothing after it; no hook of the
plugin ran there, and instruction(reply) minted the reply at run time.
"""

import sys
from typing import Final

from veridic import Composer, instruction

WINDOWS: Final = "Paths use backslashes."


def after_a_never_call(reply: str) -> None:
    (lambda x=reply: x)()
    # E: [veridic-literal] instruction() got arguments mypy did not check # P: [reportArgumentType]
    Composer().system(instruction(reply))
    instruction("Be brief.")


def under_a_platform_check(reply: str) -> None:
    if sys.platform == "win32":
        # E: [veridic-literal] mypy reads this code as unreachable # P: [reportArgumentType]
        instruction(reply)
        instruction(WINDOWS)
    instruction("Be brief.")


def checked(reply: str) -> None:
    Composer().system(instruction("Be brief.")).user(reply)
