"""setattr() into an attribute declared to hold a TrustedInstruction (veridic-forge).

mypy checks `page.prompt = reply` but not setattr(page, "prompt", reply) nor
object.__setattr__ (the way into a frozen dataclass), nor a write through vars(page) or
page.__dict__ (a dict[str, Any]): page.prompt stayed typed trusted.
"""

import copy
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from veridic import Composer, TrustedInstruction, instruction

T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    prompt: TrustedInstruction
    title: str


def writes(page: Page, reply: str, name: str) -> None:
    # E: [veridic-forge] setattr() got a value of type "str" for the attribute "prompt"
    setattr(page, "prompt", reply)  # noqa: B010
    # E: [veridic-forge] object.__setattr__() got a value of type "str"
    object.__setattr__(page, "prompt", reply)
    setattr(page, name, reply)  # E: [veridic-forge] named by text not known in the code
    # E: [veridic-forge] the attribute "prompt" of "Page"
    setattr(Page, "prompt", reply)  # noqa: B010
    # As page.prompt = json.loads(reply) is (veridic-any): Any passes is_subtype.
    # E: [veridic-any] setattr() got a value of type "Any" for the attribute "prompt"
    setattr(page, "prompt", json.loads(reply))  # noqa: B010
    Composer().system(page.prompt)


def through_namespace(page: Page, reply: str, name: str) -> None:
    # The instance's namespace is a dict[str, Any]: mypy checks no item against the attribute.
    vars(page)["prompt"] = reply  # E: [veridic-forge] an item assigned through vars()
    page.__dict__["prompt"] = reply  # E: [veridic-forge] the attribute "prompt" of "Page"
    vars(page)[name] = reply  # E: [veridic-forge] named by text not known in the code
    vars(page)["prompt"] = json.loads(reply)  # E: [veridic-any] got a value of type "Any"
    vars(page).update(prompt=reply)  # E: [veridic-forge] update() through vars()
    page.__dict__.update({"prompt": reply})  # E: [veridic-forge] the attribute "prompt"
    vars(page).setdefault("prompt", reply)  # E: [veridic-forge] setdefault() through vars()
    page.__dict__ |= {"prompt": reply}  # E: [veridic-forge] the attribute "prompt" of "Page"
    held = vars(page)
    held["prompt"] = reply  # E: [veridic-forge] the attribute "prompt" of "Page"
    # The item's operator writes its result back: trusted text plus a str is a str.
    vars(page)["prompt"] += reply  # E: [veridic-forge] += through vars()
    # E: [veridic-forge] an item assigned through getattr() got a value of type "str"
    getattr(page, "__dict__")["prompt"] = reply  # noqa: B009 (the spelling is the case)
    Composer().system(page.prompt)


class Draft:
    """A class of the project's whose instances are not frozen."""

    prompt: TrustedInstruction
    title: str

    def __setattr__(self, name: str, value: object) -> None:
        print("set", name)
        super().__setattr__(name, value)

    def reset(self, reply: str) -> None:
        super().__setattr__("prompt", reply)  # E: [veridic-forge] the attribute "prompt"
        self.__setattr__("prompt", reply)  # E: [veridic-forge] the attribute "prompt"
        super().__setattr__("title", reply)


class Guarded:
    """A __setattr__ that passes its own parameters on: its callers are the ones checked."""

    prompt: TrustedInstruction

    def __setattr__(self, name: str, value: object) -> None:
        if name.startswith("_"):
            raise AttributeError(name)
        object.__setattr__(self, name, value)


def through_dunder(draft: Draft, reply: str, name: str) -> None:
    # __setattr__ called by its name is setattr() spelled another way.
    draft.__setattr__("prompt", reply)  # E: [veridic-forge] the attribute "prompt" of "Draft"
    Draft.__setattr__(draft, "prompt", reply)  # E: [veridic-forge] the attribute "prompt"
    draft.__setattr__(name, json.loads(reply))  # E: [veridic-any] named by text not known
    draft.__setattr__("title", reply)
    Draft.__setattr__(draft, "prompt", instruction("Be brief."))


def from_loose_data(page: Page, data: dict[str, Any], loose: Any) -> None:
    # The value of each item is Any: any of them may land in page.prompt.
    for key, value in data.items():
        setattr(page, key, value)  # E: [veridic-any] setattr() got a value of type "Any"
    setattr(page, loose, loose)  # E: [veridic-any] named by text not known in the code
    vars(page).update(data)  # E: [veridic-any] update() through vars()


def accepted(page: Page, reply: str, name: str, tuning: dict[str, float | None]) -> None:
    for key, value in tuning.items():  # no text: it cannot be an instruction
        setattr(page, key, value)
    setattr(page, "title", reply)  # noqa: B010
    setattr(page, "prompt", instruction("Be brief."))  # noqa: B010
    object.__setattr__(page, "title", reply)
    object.__setattr__(page, "title", json.loads(reply))
    setattr(reply, name, reply)
    vars(page)["title"] = reply
    vars(page).update(tuning)
    vars(page)[name] = 0.5
    page.__dict__.update(title=reply)
    vars(page)["title"] += reply
    page.__dict__["prompt"] += instruction(" Be brief.")  # trusted + trusted stays trusted
    getattr(page, "__dict__")["title"] = reply  # noqa: B009 (the spelling is the case)
    print(getattr(page, "__dict__")["prompt"])  # noqa: B009 (the spelling is the case)
    print(vars(page)["prompt"], page.__dict__.get("prompt"), dict(vars(page)))


def fill(namespace: dict[str, Any], reply: str) -> None:
    namespace["prompt"] = reply


def fill_text(namespace: dict[str, str], reply: str) -> None:
    namespace["prompt"] = reply


def show(namespace: dict[str, Any]) -> None:
    print(namespace)


def read(namespace: Mapping[str, object]) -> None:
    print(namespace)


def stash(namespace: Any) -> None:
    """A function of the project's own code taking Any: it may write through it."""
    print(namespace)


def namespace_passed_on(page: Page, reply: str) -> None:
    # A function whose parameter is a mapping it can write writes through it into the
    # attribute, where the plugin cannot see: the call is where the namespace leaves.
    fill(vars(page), reply)  # E: [veridic-any] vars() passed to fill()
    fill_text(namespace=page.__dict__, reply=reply)  # E: [veridic-forge] passed to fill_text()
    held = vars(page)
    # show() only reads, but its parameter could write: declared so, it is judged so.
    show(held)  # E: [veridic-any] vars() passed to show()
    stash(vars(page))  # E: [veridic-any] vars() passed to stash()
    read(vars(page))  # a Mapping: it cannot write
    # object, a library's Any (json.dumps reads it), an overload: read, or not seen
    print(vars(page), json.dumps(vars(page)), dict(vars(page)))


def same(value: T) -> T:
    return value


def passed_along(page: Page, rows: list[dict[str, Any]], queue: deque[dict[str, Any]]) -> None:
    # A parameter typed by a type variable passes the namespace along, whatever mypy infers
    # it to be at the call: it cannot write into it (it knows nothing of its type).
    rows.append(vars(page))
    rows.insert(0, page.__dict__)
    queue.append(vars(page))
    print(copy.deepcopy(vars(page)), same(vars(page)))


def through_a_variable(page: Page, reply: str) -> None:
    # vars kept in a variable, then called: still the namespace of page.
    v = vars
    v(page)["prompt"] = reply  # E: [veridic-forge] an item assigned through vars()
    v(page).update(prompt=reply)  # E: [veridic-forge] update() through vars()
    v(page)["title"] = reply


def through_getattr_kept(page: Page, reply: str) -> None:
    get = getattr
    get(page, "__dict__")["prompt"] = reply  # E: [veridic-forge] through getattr()
