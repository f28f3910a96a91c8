"""A Final text constant is not rewritten through its module's namespace (veridic-literal).

The plugin reads TONE as text written in code wherever it is used; mypy refuses
TONE = reply, but not a write through globals(), vars(), __dict__ or setattr().
"""

import argparse
import json
import os
import sys
from typing import Any, Final, Literal

import _constants

from veridic import TrustedInstruction, instruction

TONE: Final = "Be brief."
reply = os.environ["REPLY"]

globals()["TONE"] = reply  # E: [veridic-literal] an item assigned through the namespace
globals().update({"TONE": reply})  # E: [veridic-literal] update() called on the namespace
vars()["TONE"] = reply  # E: [veridic-literal] (its Final constants: TONE)
# E: [veridic-literal] setattr() on module "final_namespace" sets the Final constant "TONE"
setattr(sys.modules[__name__], "TONE", reply)  # noqa: B010
# E: [veridic-literal] setattr() on a module the plugin cannot name
setattr(sys.modules[os.environ["MODULE"]], "TONE", reply)  # noqa: B010
# E: [veridic-literal] setattr() on module "_constants" sets the Final constant
setattr(_constants, "GREETING", reply)  # noqa: B010
setattr(_constants, reply, reply)  # E: [veridic-literal] named by text not known in the code
_constants.__dict__["GREETING"] = reply  # E: [veridic-literal] module "_constants"
# pyright reads vars() of a module as a read-only mapping.
# E: [veridic-literal] instruction() mints it
# P: [reportIndexIssue]
vars(_constants)["GREETING"] = reply


def tone() -> TrustedInstruction:
    return instruction(TONE)


# Reads, other attributes, other objects' namespaces stay clean.
current = globals().get("TONE")
setattr(_constants, "not_a_constant", reply)  # noqa: B010
globals()["counter"] = 1
globals()["banner"] = reply
_constants.__dict__["not_a_constant"] = reply
globals().update(counter=2, banner=reply)
globals().setdefault("counter", 3)
setattr(_constants, reply, 3)
options = argparse.Namespace()
vars(options)["verbose"] = True
setattr(options, "verbose", True)  # noqa: B010


# A name written in the code that reaches text read as written in code is rewritten by
# what takes its place: a class or a module whose constants are read through it, a
# variable typed by a Literal, an object of another class under a name not known in the
# code. Only a value that reaches no text (a flag, a number, None) is clean there.


class Hints:
    HINT: Final = "Answer briefly."


class Impostor:
    HINT = reply


MODE: Literal["brief"] = "brief"
globals()["Hints"] = Impostor  # E: [veridic-literal] an item assigned through the namespace
globals()["_constants"] = sys  # E: [veridic-literal] an item assigned through the namespace
globals().update(MODE=reply)  # E: [veridic-literal] update() called on the namespace
globals()[reply] = Impostor()  # E: [veridic-literal] an item assigned through the namespace
globals()["MODE"] = None
globals()["Hints"] = 3
instruction(Hints.HINT)
instruction(MODE)


# The namespace kept in a variable first, passed where a mutable mapping is taken, or
# given to exec()/eval() (which run in their caller's namespace without globals).
namespace = globals()
namespace["TONE"] = reply  # E: [veridic-literal] an item assigned through the namespace
# E: [veridic-literal] update() called on the namespace of module "_constants"
# P: [reportAttributeAccessIssue]
(held := vars(_constants)).update({"GREETING": reply})


def poke(ns: dict[str, object]) -> None:
    ns["TONE"] = reply


poke(globals())  # E: [veridic-literal] a parameter typed as a mutable mapping


def poke_any(ns: Any) -> None:
    ns["TONE"] = reply


poke_any(globals())  # E: [veridic-literal] a parameter typed as a mutable mapping
exec(f"TONE = {reply!r}")  # E: [veridic-literal] exec() without globals runs in
eval(f"(TONE := {reply!r})")  # E: [veridic-literal] eval() without globals runs in
exec(reply, _constants.__dict__)  # E: [veridic-literal] exec() runs in the namespace of module


# A copy, a namespace of its own, a read: clean.
copied = dict(globals())
copied["TONE"] = reply
exec(reply, {})
exec(reply, copied)
print(sorted(globals()))
print(json.dumps(globals(), default=str))  # Any in the standard library: read, not written


# setattr() on a class (or its instance, which then shadows it) with a Final constant.
class Prompts:
    TONE: Final = "Be brief."
    count = 0


# E: [veridic-literal] setattr() on class "Prompts" sets the Final constant "TONE"
setattr(Prompts, "TONE", reply)  # noqa: B010
# E: [veridic-literal] setattr() on class "Prompts" sets the Final constant "TONE"
setattr(Prompts(), "TONE", reply)  # noqa: B010
setattr(Prompts, reply, reply)  # E: [veridic-literal] named by text not known in the code
setattr(Prompts, "count", 1)  # noqa: B010
