"""A class whose constructor trusts a parameter, passed where a Callable is expected.

The plugin checks each call of BootError(...) or ToolHints(...) by name. Given to a
parameter typed Callable (map, functools.partial, a callback), the class is called
later where no hook sees the call, with any str (veridic-literal). Given where a
class is expected (isinstance, except, type[...]), it is not called, and stays clean.
"""

import contextlib
import functools
import os
from collections.abc import Callable
from typing import TypeVar

from veridic import BootError, ToolHints

R = TypeVar("R")
reply = os.environ["REPLY"]


def apply(make: Callable[[str], R], text: str) -> R:
    return make(text)


# E: [veridic-literal] the class BootError passed as a value
# P: [reportArgumentType]
errors = list(map(BootError, [reply]))
# E: [veridic-literal] the class ToolHints passed as a value
# P: [reportArgumentType]
hints = list(map(ToolHints, [False], [None], [None], [reply]))
pending = functools.partial(BootError)  # E: [veridic-literal] the class BootError passed as a value
# E: [veridic-literal] the class BootError passed as a value
# P: [reportArgumentType]
apply(BootError, reply)


def identity(value: R) -> R:
    return value


def kind(cls: type[BootError]) -> str:
    return cls.__name__


def is_boot_error(error: object) -> bool:
    return isinstance(error, BootError)


with contextlib.suppress(BootError):
    pass
identity(BootError)
kind(BootError)
issubclass(BootError, Exception)


class Plain:
    def __init__(self, text: str) -> None:
        self.text = text


list(map(Plain, [reply]))
BootError("requires core >= 2.3")


# Kept as a Callable some other way than as an argument: assigned to a variable declared
# Callable, or returned from a function declared to return one. type[...] stays clean.
# E: [veridic-literal] the class BootError kept as a Callable
# P: [reportAssignmentType]
make: Callable[[str], BootError] = BootError
kept_kind: type[BootError] = BootError


def factory() -> Callable[[str], BootError]:
    # E: [veridic-literal] the class BootError kept as a Callable
    # P: [reportReturnType]
    return BootError


def klass() -> type[BootError]:
    return BootError
