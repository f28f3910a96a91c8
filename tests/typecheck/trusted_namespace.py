"""A variable declared trusted is not rewritten through its module's namespace (veridic-forge).

mypy refuses PROMPT = reply, but types a write through globals(), vars(), __dict__ or
setattr() as Any: PROMPT then held the reply, read as trusted, and a component's hint
printed it in the capability section.
"""

import json
import os
import sys

import _checked_persona

from veridic import TrustedInstruction, instruction

PROMPT: TrustedInstruction = instruction("Be brief.")
reply = os.environ["REPLY"]

# E: [veridic-forge] (its variables declared trusted: PROMPT)
globals()["PROMPT"] = reply
globals().update(PROMPT=reply)  # E: [veridic-forge] update() called on the namespace of module
# E: [veridic-forge] setattr() on module "_checked_persona" sets the variable "BANNER"
setattr(_checked_persona, "BANNER", reply)  # noqa: B010
setattr(_checked_persona, reply, reply)  # E: [veridic-forge] named by text not known in the code
# E: [veridic-forge] the namespace of module "_checked_persona"
_checked_persona.__dict__["BANNER"] = reply
exec(f"PROMPT = {reply!r}")  # E: [veridic-forge] exec() without globals runs in
# The module reached through sys.modules by its own name (these were not seen, or seen
# only as a module the plugin cannot name).
# E: [veridic-forge] the namespace of module "trusted_namespace"
sys.modules[__name__].__dict__["PROMPT"] = reply
# E: [veridic-forge] setattr() on module "trusted_namespace" sets the variable "PROMPT"
setattr(sys.modules[__name__], "PROMPT", reply)  # noqa: B010
namespace = vars(sys.modules[__name__])
namespace["PROMPT"] = reply  # E: [veridic-forge] the namespace of module "trusted_namespace"

# Reads, a copy, another attribute, a namespace of its own: clean.
print(json.dumps(globals(), default=str), globals().get("PROMPT"))
copied = dict(globals())
copied["PROMPT"] = reply
setattr(_checked_persona, "counter", 1)  # noqa: B010
setattr(sys.modules[__name__], "counter", 1)  # noqa: B010
exec(reply, {})
PROMPT = instruction("Be thorough.")
