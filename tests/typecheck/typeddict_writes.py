"""A TypedDict's trusted item written with other text around mypy's item check (veridic-forge).

mypy checks settings["prompt"] = reply against the item's type, but types the
__setitem__ method called by its name as (str, Any): settings.__setitem__("prompt", reply)
put the reply in an item read as trusted, which a TrustedText position printed in the
capability section. The other ways in (update(), setdefault(), ** unpacking of a mapping)
are mypy's own typeddict-item errors.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

from veridic import TrustedInstruction, instruction

reply = os.environ["REPLY"]
loose: dict[str, Any] = json.loads(reply)
raw: dict[str, str] = {"prompt": reply}


class Settings(TypedDict):
    prompt: TrustedInstruction
    size: int


class Partial(TypedDict, total=False):
    prompt: TrustedInstruction
    extra: list[TrustedInstruction]


# pyright refuses __setitem__ called by its name on a TypedDict (reportAttributeAccessIssue).
def rewrite(settings: Settings, partial: Partial, key: str) -> None:
    # E: [veridic-forge] the item "prompt"
    # P: [reportAttributeAccessIssue]
    settings.__setitem__("prompt", reply)
    # E: [veridic-forge] a key not known in the code
    # P: [reportAttributeAccessIssue]
    settings.__setitem__(key, reply)
    # E: [veridic-forge] the item "extra"
    # P: [reportAttributeAccessIssue]
    partial.__setitem__("extra", [reply])
    # E: [veridic-any] the item "prompt"
    # P: [reportAttributeAccessIssue]
    settings.__setitem__("prompt", loose["prompt"])
    # E: [veridic-forge] kept as a value
    # P: [reportAttributeAccessIssue]
    write = settings.__setitem__
    write("prompt", reply)
    # Unpacked arguments: the plugin cannot tell which item gets which value.
    # E: [veridic-forge] got unpacked arguments
    # P: [reportAttributeAccessIssue]
    settings.__setitem__(*("prompt", reply))
    pair = ("prompt", reply)
    # E: [veridic-forge] got unpacked arguments
    # P: [reportAttributeAccessIssue]
    settings.__setitem__(*pair)
    # E: [typeddict-item] incompatible type "str"
    # P: [reportCallIssue]
    # P: [reportArgumentType]
    partial.setdefault("prompt", reply)
    # E: [typeddict-item] incompatible type "dict[str, str]"
    # P: [reportCallIssue]
    # P: [reportArgumentType]
    partial.update(raw)
    # P: [reportArgumentType]
    partial.update(prompt=reply)  # E: [call-arg] Unexpected keyword argument "prompt"


unpacked: Partial = {**raw}  # E: [typeddict-item] for ** expansion  # P: [reportAssignmentType]
built = Partial(**loose)  # E: [typeddict-item] for ** expansion


# Accepted: the item is written with minted text, or an item that holds no trusted text,
# or a TypedDict with no trusted item at all, however its __setitem__ is called.
class Meta(TypedDict):
    name: str


def accepted(settings: Settings, partial: Partial, meta: Meta, key: str) -> None:
    settings.__setitem__("prompt", instruction("Be brief."))  # P: [reportAttributeAccessIssue]
    settings.__setitem__("size", 3)  # P: [reportAttributeAccessIssue]
    partial.__setitem__("extra", [instruction("Be polite.")])  # P: [reportAttributeAccessIssue]
    meta.__setitem__("name", reply)  # P: [reportAttributeAccessIssue]
    meta.__setitem__(key, reply)  # P: [reportAttributeAccessIssue]
    keep = meta.__setitem__  # P: [reportAttributeAccessIssue]
    keep("name", reply)
    settings["prompt"] = instruction("Be brief.")
    partial.update({"prompt": instruction("Be brief.")})
    partial.setdefault("extra", [])
    filled: Settings = {"prompt": instruction("Be brief."), "size": 1}
    settings.update(filled)
    copied: Settings = {**filled}
    del copied
