"""Another module's trusted variable written through a module looked up by name (veridic-forge).

mypy types importlib.import_module("...") and sys.modules["..."] as a ModuleType, whose
namespace is a dict[str, Any]: vars(...)["BANNER"] = reply put the reply in a variable
that the module's readers typed trusted, and a component's hint printed it in the
capability section. A module named by text written in the code is the module the build
holds under that name, checked as if it were imported.
"""

from __future__ import annotations

import importlib
import os
import sys
from importlib import import_module

reply = os.environ["REPLY"]
name = os.environ["MODULE"]

# E: [veridic-forge] the namespace of module "_checked_persona" (its variables declared trusted: BANNER)
vars(importlib.import_module("_checked_persona"))["BANNER"] = reply
# E: [veridic-forge] the namespace of module "_checked_persona"
import_module("_checked_persona").__dict__["BANNER"] = reply
# E: [veridic-forge] the namespace of module "_checked_persona"
sys.modules["_checked_persona"].__dict__["BANNER"] = reply
# E: [veridic-forge] the namespace of module "_checked_persona"
vars(sys.modules["_checked_persona"]).update(BANNER=reply)
# E: [veridic-forge] setattr() on module "_checked_persona" sets the variable "BANNER"
setattr(importlib.import_module("_checked_persona"), "BANNER", reply)  # noqa: B010
# E: [veridic-literal] on module "_constants" sets the Final constant "GREETING"
setattr(sys.modules["_constants"], "GREETING", reply)  # noqa: B010
persona = importlib.import_module("_checked_persona")
persona.__dict__["BANNER"] = reply  # E: [veridic-forge] the namespace of module "_checked_persona"
# A module named by text not known in the code may be any module: as for setattr() on
# one, a write through its namespace is reported as one that may hold a Final constant.
# E: [veridic-literal] the namespace of a module the plugin cannot name
vars(sys.modules[name])["GREETING"] = reply
# E: [veridic-literal] the namespace of a module the plugin cannot name
importlib.import_module(name).__dict__["GREETING"] = reply

# Accepted: a module looked up and read, or an attribute written that holds no trusted
# text, or a module with neither trusted variables nor Final constants.
json = importlib.import_module("json")
print(json.dumps({"banner": vars(sys.modules["_checked_persona"]).get("BANNER")}))
setattr(importlib.import_module("_checked_persona"), "counter", 1)  # noqa: B010
vars(importlib.import_module("json"))["flag"] = True
sys.modules["json"].__dict__["flag"] = True
