"""A call of instruction() in code mypy did not check (veridic-literal).

mypy types (lambda x=text: x)() as Never and checks nothing after it; no hook of the
plugin ran there, and instruction(reply) minted the reply at run time.
"""

import sys
from typing import Final, Literal, TypeVar

from veridic import Composer, Deny, TrustedInstruction, TrustPolicy, instruction, join

WINDOWS: Final = "Paths use backslashes."
AnyText = TypeVar("AnyText", str, bytes)


def after_a_never_call(reply: str) -> None:
    (lambda x=reply: x)()
    # E: [veridic-literal] instruction() got arguments mypy did not check # P: [reportArgumentType]
    Composer().system(instruction(reply))
    instruction("Be brief.")


def a_class_under_a_platform_check(reply: str) -> None:
    if sys.platform == "win32":
        # A class whose constructor trusts a parameter, as a function does.
        # E: [veridic-literal] Deny() got arguments mypy did not check # P: [reportArgumentType]
        print(Deny(names={"delete"}, tombstone=True, reason=reply))
        print(Deny(names={"delete"}, reason="Not on Windows."))
        print(Deny(names={"delete"}, reason=instruction("Not on Windows.")))
        # E: [veridic-literal] TrustPolicy() got arguments mypy # P: [reportArgumentType]
        TrustPolicy(reply)


def under_a_platform_check(reply: str) -> None:
    if sys.platform == "win32":
        # E: [veridic-literal] mypy reads this code as unreachable # P: [reportArgumentType]
        instruction(reply)
        instruction(WINDOWS)
    instruction("Be brief.")


def under_a_version_check(parts: list[TrustedInstruction], reply: str) -> None:
    if sys.version_info >= (3, 12):
        # Only the arguments of the trusting parameter count: join()'s parts are checked
        # at run time, its sep is the LiteralString; literals joined with + are literals.
        join(parts)
        join([instruction("Be brief."), *parts], "\n")
        instruction("Be " + "brief.")
        instruction(WINDOWS + " Always.")
        instruction("Be brief." if reply else "Be thorough.")
        # An f-string with values, even of constants, is refused where mypy checks it; so
        # here too, or the same line fails the check on Python 3.12 (this was accepted).
        instruction(f"{WINDOWS} Always.")  # E: [veridic-literal] instruction() got arguments mypy
        instruction(f"Always.")  # noqa: F541
        instruction(f"Say {reply}.")  # E: [veridic-literal] instruction() got arguments mypy
        join(parts, sep=reply)  # E: [veridic-literal] join() got arguments mypy did not check
        instruction("Be " + reply)  # E: [veridic-literal] instruction() got arguments mypy
        instruction(*[reply])  # E: [veridic-literal] instruction() got arguments mypy


def over_a_constrained_type_variable(
    value: AnyText, brief: bool, mode: Literal["a", "b"], parts: list[TrustedInstruction]
) -> AnyText:
    # mypy checks this body once per constraint, on copies of it: checked all the same.
    print(instruction("Be brief." if brief else "Be thorough."))
    print(join(parts, sep=mode), instruction(mode))
    return value


def checked(reply: str) -> None:
    Composer().system(instruction("Be brief.")).user(reply)


if sys.platform == "win32":

    class WindowsPaths:
        """A class mypy skips on this platform: mypy crashed when the plugin read its members."""

        note = "Paths use backslashes."
