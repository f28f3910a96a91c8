"""A function that trusts its LiteralString parameter is called by its name, never passed on.

The plugin checks every call of such a function by its name, and lets the body
trust the parameter. Passed or kept as a value, the function is called where no
hook sees the call (mypy reads it as Callable[[str], ...]), with any str.
"""

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import LiteralString, ParamSpec, TypeVar

import veridic
from veridic import Registry, TrustedInstruction, instruction, join

P = ParamSpec("P")
R = TypeVar("R")
reply = os.environ["REPLY"]


def rule(text: LiteralString) -> TrustedInstruction:
    return instruction(text)


def apply(mint: Callable[[str], R], text: str) -> R:
    return mint(text)


def logged(function: Callable[P, R]) -> Callable[P, R]:
    return function


def with_reply(function: Callable[[str], R]) -> Callable[[], R]:
    return lambda: function(reply)


# mypy checks the arguments partial() binds as a call: a second error names the argument.
# E: [veridic-literal] instruction() passed as a value
# E: [veridic-literal] got the variable "reply"
# P: [reportArgumentType]
functools.partial(instruction, reply)
functools.partial(instruction, "Be brief.")  # E: [veridic-literal] passed as a value
# E: [veridic-literal] instruction() passed as a value
# P: [reportArgumentType]
list(map(instruction, [reply]))
# E: [veridic-literal] instruction() passed as a value
# P: [reportArgumentType]
apply(instruction, reply)
apply(rule, reply)  # E: [veridic-literal] rule() passed as a value  # P: [reportArgumentType]
# E: [veridic-literal] instruction() passed as a value
# P: [reportArgumentType]
apply(veridic.instruction, reply)
# E: [veridic-literal] join() passed as a value
# E: [veridic-literal] got the variable "reply"
# P: [reportArgumentType]
functools.partial(join, sep=reply)
# E: [veridic-literal] as a value
# P: [reportAssignmentType]
mint: Callable[[str], TrustedInstruction] = instruction
handlers = {"rule": rule}  # E: [veridic-literal] rule() passed as a value


def minter() -> Callable[[str], TrustedInstruction]:
    # E: [veridic-literal] instruction() passed as a value
    # P: [reportReturnType]
    return instruction


class Persona:
    def rule(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)


# E: [veridic-literal] Persona.rule() passed as a value
# P: [reportArgumentType]
apply(Persona().rule, reply)
kept = [Persona().rule]
# E: [veridic-literal] Persona.rule() takes text written in code for "text"
# P: [reportArgumentType]
kept[0](reply)
kept[0]("Be brief.")
registry = Registry()
# E: [veridic-literal] passed as a value
# E: [veridic-literal] takes trusted text for "description"
# P: [reportArgumentType]
functools.partial(registry.tool, description=reply)


# A decorator receives the function as a value too: what it returns, or keeps, is
# called where the plugin sees no call (even one that keeps the signature may store
# the function elsewhere).
# E: [veridic-literal] the decorated function replied() passed as a value
# P: [reportArgumentType]
@with_reply
def replied(text: LiteralString) -> TrustedInstruction:
    return instruction(text)


@logged  # E: [veridic-literal] the decorated function traced() passed as a value
def traced(text: LiteralString) -> TrustedInstruction:
    return instruction(text)


@functools.cache  # E: [veridic-literal] the decorated function cached() passed as a value
def cached(text: LiteralString) -> TrustedInstruction:
    return instruction(text)


# The standard library's context managers call it with the arguments of a call of its
# name, which is checked.
@contextlib.contextmanager
def scoped(text: LiteralString) -> Iterator[TrustedInstruction]:
    yield instruction(text)


with scoped("Be brief."):
    pass
with scoped(reply):  # E: [veridic-literal] got the variable "reply"  # P: [reportArgumentType]
    pass


# Called by its name (also inside a lambda or a comprehension, which are checked),
# and read for its metadata, a function stays checked.
rule("Be brief.")
instruction("Be brief.")
# E: [veridic-literal] the parameter "text"
# P: [reportArgumentType]
apply(lambda text: instruction(text), reply)
[instruction(t) for t in ("Be brief.", "Cite sources.")]
doc = instruction.__doc__
name = rule.__name__


def framed(text: TrustedInstruction) -> TrustedInstruction:
    return text


# A function that takes minted text may go anywhere: mypy itself refuses a str for it.
list(map(framed, [instruction("Be brief.")]))
