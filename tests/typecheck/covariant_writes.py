"""A write through a covariant view of a generic object into its attribute (veridic-forge).

mypy lets a Box[TrustedInstruction] be held as a Box[str] (its type variable is covariant),
and checks box.item = reply against that view's str: the object's attribute, read through
the Box[TrustedInstruction] it is, held the reply typed trusted, and a TrustedText position
(a component's hint) printed it in the capability section.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from veridic import TrustedInstruction, instruction

reply = os.environ["REPLY"]
T_co = TypeVar("T_co", covariant=True)
K_co = TypeVar("K_co", covariant=True)
T = TypeVar("T")


class Box(Generic[T_co]):
    def __init__(self, item: T_co) -> None:
        self.item = item  # its own class writes its own type variable: accepted
        self.spare: T_co | None = None

    def get(self) -> T_co:
        return self.item


@dataclass
class Cell(Generic[T_co]):
    value: T_co


class Labelled(Box[T_co]):
    pass


class Pair(Generic[K_co, T]):
    def __init__(self, key: K_co, value: T) -> None:
        self.key = key
        self.value = value


def fill(box: Box[str]) -> None:
    box.item = reply  # E: [veridic-forge] a Box[TrustedInstruction]
    box.spare = reply  # E: [veridic-forge] the attribute "spare"
    box.item += reply  # E: [veridic-forge] the attribute "item"


def fill_cell(cell: Cell[str], labelled: Labelled[object], loose: Any) -> None:
    cell.value = reply  # E: [veridic-forge] the attribute "value"
    labelled.item = reply  # E: [veridic-forge] the attribute "item"
    cell.value = loose  # E: [veridic-any] the attribute "value"


# The same write as one target of several, by a for loop, or through an object typed by a
# union or by a type variable bound to such a view.
BoxOfText = TypeVar("BoxOfText", bound="Box[str]")


def fill_unpacked(box: Box[str], replies: list[str], either: Box[str] | Labelled[object]) -> None:
    box.item, count = reply, 1  # E: [veridic-forge] the attribute "item"
    (count, box.spare), size = (2, reply), 3  # E: [veridic-forge] the attribute "spare"
    for box.item in replies:  # E: [veridic-forge] the attribute "item"
        print(count, size)
    either.item = reply  # E: [veridic-forge] the attribute "item"
    box.item, count = instruction("Be brief."), 1


def fill_bound(box: BoxOfText) -> BoxOfText:
    box.item = reply  # E: [veridic-forge] the attribute "item"
    return box


# The same write by setattr(), a __setattr__ called by its name or the object's namespace,
# judged against what the object may hold (here a Box[TrustedInstruction]), as is a write
# into an attribute typed by an invariant type variable filled with trusted text.
def fill_by_name(box: Box[str], pair: Pair[str, TrustedInstruction], loose: Any) -> None:
    setattr(box, "item", reply)  # E: [veridic-forge] the attribute "item" of "Box"  # noqa: B010
    box.__setattr__("item", reply)  # E: [veridic-forge] the attribute "item" of "Box"
    object.__setattr__(box, "spare", reply)  # E: [veridic-forge] the attribute "spare"
    vars(box)["item"] = reply  # E: [veridic-forge] the attribute "item" of "Box"
    box.__dict__.update(item=reply)  # E: [veridic-forge] the attribute "item" of "Box"
    setattr(box, "item", loose)  # E: [veridic-any] the attribute "item" of "Box"  # noqa: B010
    setattr(pair, "value", reply)  # E: [veridic-forge] the attribute "value" of "Pair"  # noqa: B010


# A value that holds no text forges none, whatever the object is (a Box[object] may be a
# Box[TrustedInstruction], but a number or None read from it is not text); a container of
# text may fill a container of trusted text (a Box[Sequence[str]] may hold a list of it).
def no_text(
    anything: Box[object], maybe: Box[str | None], texts: Box[Sequence[str]], sizes: Box[int]
) -> None:
    anything.item = 3
    maybe.item = None
    anything.spare = None
    setattr(anything, "item", 3)  # noqa: B010
    setattr(sizes, "item", reply)  # noqa: B010
    texts.item = [reply]  # E: [veridic-forge] the attribute "item" of "Box"


trusted = Box(instruction("Be brief."))
fill(trusted)
hint: TrustedInstruction = trusted.get()


# Accepted: the view holds trusted text already, or its type argument cannot be a
# TrustedInstruction, or what is written is minted, or the attribute is typed by an
# invariant type variable (mypy refuses the wider view), or the write is the class's own.
def accepted(
    box: Box[TrustedInstruction], sizes: Box[int], words: Box[str], pair: Pair[str, str]
) -> None:
    box.item = instruction("Be polite.")
    sizes.item = 3
    words.item = instruction("Be brief.")
    words.spare = None
    pair.value = reply


# An object the function made itself (a variable bound once, by a call of the class, in
# the function, and never bound again) was never held as a Box[TrustedInstruction]: no
# read of it is typed trusted, so writes through it are accepted.
def fresh(count: int) -> Box[str]:
    local = Box(reply)
    local.item = reply
    local.item += reply
    local.spare = reply
    local.item, size = reply, count
    for local.item in [reply]:
        pass
    declared: Box[str] = Box(reply)
    declared.item = reply
    labelled = Labelled(reply)
    labelled.item = reply
    cell = Cell(reply)
    cell.value = reply
    applied = Box[object](reply)
    applied.item = reply
    setattr(local, "item", reply)  # noqa: B010
    vars(local)["item"] = reply
    local.__dict__.update(item=reply)
    local.__setattr__("item", reply)
    namespace = vars(local)
    namespace["spare"] = reply

    def nested() -> None:
        inner = Box(reply)
        inner.item = reply
        local.item = reply  # the enclosing function's object, bound once there

    nested()
    print(size)
    return local


class TrustedBox(Box[TrustedInstruction]):
    pass


def make() -> Box[str]:
    return trusted


widest: Box[str] = Box(reply)


# A view that may be of a Box[TrustedInstruction] stays reported: a parameter (above), a
# function's return value, an attribute, a module's variable (any module may rebind it), a
# variable bound again (or by something else first), one bound in a function that binds it
# again through nonlocal, an object made as trusted (a subclass that fills the variable
# with TrustedInstruction), a parameter bound again by a constructor call.
def views(given: Box[str], held: Cell[Box[str]], flag: bool) -> None:
    returned = make()
    returned.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    held.value.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    widest.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    rebound = Box(reply)
    if flag:
        rebound = given
    rebound.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    setattr(rebound, "item", reply)  # E: [veridic-forge] the attribute "item" of "Box"  # noqa: B010
    vars(rebound)["item"] = reply  # E: [veridic-forge] the attribute "item" of "Box"
    born: Box[str] = TrustedBox(instruction("Be brief."))
    # P: [reportAttributeAccessIssue]
    born.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    setattr(born, "item", reply)  # E: [veridic-forge] the attribute "item" of "Box"  # noqa: B010
    given = Box(reply)
    given.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    swapped = Box(reply)

    def swap() -> None:
        nonlocal swapped
        swapped = make()

    swap()
    swapped.item = reply  # E: [veridic-forge] the attribute "item" of "Box"


def parameter_swapped(shared: Box[str]) -> None:
    def reset() -> None:
        nonlocal shared
        shared = Box(reply)

    shared.item = reply  # E: [veridic-forge] the attribute "item" of "Box"
    reset()
