"""A loop variable or LiteralString parameter bound to anything else is not code text.

mypy keeps a name's declared type whatever binds it next (and lets an import rebind a
name silently), so every way of binding a name counts.
"""

import contextlib
from collections.abc import Iterator
from typing import LiteralString

from veridic import TrustedInstruction, instruction

LOOP_RULES: list[TrustedInstruction] = []
for rule in ("Be brief.", "Cite sources."):
    LOOP_RULES.append(instruction(rule))

for stolen in ("Be brief.",):
    LOOP_RULES.append(instruction(stolen))  # E: [veridic-literal] the variable "stolen"


def steal() -> None:
    global stolen
    stolen = input()


@contextlib.contextmanager
def opened() -> Iterator[str]:
    yield input()


def two_generators(names: list[str]) -> list[TrustedInstruction]:
    # P: [reportArgumentType]
    return [instruction(t) for t in ("a", "b") for t in names]  # E: [veridic-literal] "t"


def two_generators_two_names(names: list[str]) -> list[TrustedInstruction]:
    return [instruction(t) for t in ("a", "b") for _ in names]


def nested_comprehensions(names: list[str]) -> list[list[TrustedInstruction]]:
    return [[instruction(t) for t in ("a", "b")] for t in names]


# (to pyright, the import makes "text" a Final name, which the parameter declares again)
# P: [reportGeneralTypeIssues]
def imported(text: LiteralString) -> TrustedInstruction:
    from _constants import NOT_LITERAL as text

    return instruction(text)  # E: [veridic-literal] binds to other text


def with_as(text: LiteralString) -> TrustedInstruction:
    # P: [reportAssignmentType]
    with opened() as text:
        pass
    return instruction(text)  # E: [veridic-literal] binds to other text


def walrus(text: LiteralString, name: str) -> TrustedInstruction:
    # P: [reportAssignmentType]
    if text := name:
        pass
    return instruction(text)  # E: [veridic-literal] binds to other text


def walrus_in_a_comprehension(text: LiteralString, names: list[str]) -> TrustedInstruction:
    # P: [reportAssignmentType]
    [text := n for n in names]
    return instruction(text)  # E: [veridic-literal] binds to other text


def deleted(text: LiteralString, name: str) -> TrustedInstruction:
    del text
    # P: [reportAssignmentType]
    text = name
    return instruction(text)  # E: [veridic-literal] binds to other text


def augmented(text: LiteralString, name: str) -> TrustedInstruction:
    # P: [reportAssignmentType]
    text += name
    return instruction(text)  # E: [veridic-literal] binds to other text


def matched(text: LiteralString, value: object) -> TrustedInstruction:
    match value:
        # P: [reportAssignmentType]
        case str() as text:
            pass
        case _:
            pass
    return instruction(text)  # E: [veridic-literal] binds to other text


def nonlocal_in_a_nested_function(text: LiteralString) -> TrustedInstruction:
    def overwrite() -> None:
        nonlocal text
        # P: [reportAssignmentType]
        text = input()

    overwrite()
    return instruction(text)  # E: [veridic-literal] binds to other text


def loop_variable_imported(name: str) -> list[TrustedInstruction]:
    minted = []
    # P: [reportGeneralTypeIssues]
    for text in ("Be brief.",):
        from _constants import NOT_LITERAL as text

        minted.append(instruction(text))  # E: [veridic-literal] the variable "text"
    return minted


def loop_variable_bound_in_a_nested_function() -> list[TrustedInstruction]:
    minted = []
    for text in ("Be brief.",):

        def overwrite() -> None:
            nonlocal text
            text = input()

        overwrite()
        minted.append(instruction(text))  # E: [veridic-literal] the variable "text"
    return minted


def left_alone(text: LiteralString) -> TrustedInstruction:
    def local() -> None:
        text = input()  # a variable of its own
        print(text)

    local()
    return instruction(text)


def loop_left_alone(*texts: LiteralString) -> list[TrustedInstruction]:
    minted = []
    for text in texts:
        minted.append(instruction(text))
    return minted
