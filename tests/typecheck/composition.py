"""Composition keeps the brand exactly where the run time does.

Trusted + trusted is TrustedInstruction; mixing gives str, which mypy's own checks then
refuse in an instruction position. tests/test_static_runtime_agreement.py runs the same
operations at run time.
"""

from typing import assert_type

from veridic import Composer, TrustedInstruction, UntrustedText, instruction, join


def composed(t: TrustedInstruction, other: TrustedInstruction, u: UntrustedText, s: str) -> None:
    # P: [reportAssertTypeFailure]
    assert_type(t + other, TrustedInstruction)
    # P: [reportAssertTypeFailure]
    assert_type(t + other + t, TrustedInstruction)
    # P: [reportAssertTypeFailure]
    assert_type(instruction("a") + instruction("b"), TrustedInstruction)
    assert_type(join([t, other]), TrustedInstruction)
    assert_type(t + s, str)
    assert_type(s + t, str)
    assert_type(t + u, str)
    assert_type(u + t, str)
    assert_type(t + "literal", str)
    assert_type(t * 2, str)
    assert_type(t.upper(), str)
    assert_type(f"{t}", str)
    assert_type("".join([t, other]), str)
    total = t
    total += other
    # P: [reportAssertTypeFailure]
    assert_type(total, TrustedInstruction)
    # P: [reportArgumentType]
    Composer().system(t + other, join([t, other]))


def mixed(t: TrustedInstruction, s: str) -> None:
    # P: [reportArgumentType]
    Composer().system(t + s)  # E: [arg-type] "str"; expected "TrustedInstruction"
    total = t
    total += s  # E: [assignment] expression has type "str"
