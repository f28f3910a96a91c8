"""A value of type Any may not reach an instruction position (veridic-any)."""

import json
from typing import Any

from veridic import Composer, TrustedInstruction, TrustPolicy, instruction, join


def mine(part: TrustedInstruction) -> TrustedInstruction:
    return part


def positions(loose: Any, loose_list: list[Any], t: TrustedInstruction) -> None:
    instruction(loose)  # E: [veridic-any] instruction() got a value of type "Any"
    instruction("fixed: " + loose)  # E: [veridic-any] the parameter "loose"
    Composer().system(t, loose)  # E: [veridic-any] Composer.system() got a value of type "Any"
    Composer().system(*loose_list)  # E: [veridic-any] for "parts"
    join([t, loose])  # E: [veridic-any] join() got a value of type "Any" for "parts"
    join(loose_list)  # E: [veridic-any] the parameter "loose_list"
    join(json.loads("[]"))  # E: [veridic-any] the result of "loads()"
    join(part for part in loose_list)  # E: [veridic-any] the variable "part"
    join([t], sep=loose)  # E: [veridic-any] for "sep"
    mine(loose)  # E: [veridic-any] mine() got a value of type "Any" for "part"
    TrustPolicy(loose)  # E: [veridic-any] TrustPolicy() got a value of type "Any"


def typed(parts: list[TrustedInstruction], t: TrustedInstruction) -> None:
    Composer().system(*parts)
    join(parts)
    join(part for part in parts)
    mine(t)
