"""Another module's trusted variable written through a module looked up by name (veridic-forge).

mypy types importlib.import_module("...") and sys.modules["..."] as a ModuleType, whose
namespace is a dict[str, Any]: vars(...)["BANNER"] = reply put the reply in a variable
that the module's readers typed trusted, and a component's hint printed it in the
capability section. A module named by text written in the code is the module the build
imports (mypy checked it first), checked as if it were imported; another name may be any
module.
"""

from __future__ import annotations

import importlib
import json  # noqa: F401
import os
import sys
from importlib import import_module
from typing import Any

# Imported: the build checked them before this module, so their names are known here.
import _checked_persona  # noqa: F401
import _constants  # noqa: F401

reply = os.environ["REPLY"]
name = os.environ["MODULE"]


class Texts(dict[str, str]):
    """A mapping of the project's own, whose items the plugin reads as any text."""


# E: [veridic-forge] "_checked_persona" (its variables declared trusted: BANNER)
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
# A module named by text not known in the code (or by a name this module does not import)
# may be any module: as for setattr() on one, a write through its namespace is reported as
# one that may hold a Final constant.
# E: [veridic-literal] the namespace of a module the plugin cannot name
vars(sys.modules["_helpers"])["GREETING"] = reply
# E: [veridic-literal] the namespace of a module the plugin cannot name
vars(sys.modules[name])["GREETING"] = reply
# E: [veridic-literal] the namespace of a module the plugin cannot name
importlib.import_module(name).__dict__["GREETING"] = reply

# Accepted: a module looked up and read, an attribute written that holds no trusted text,
# a write into the namespace of an imported module with neither trusted variables nor
# Final constants.
loader = importlib.import_module("json")
print(loader.dumps({"banner": vars(sys.modules["_checked_persona"]).get("BANNER")}))
setattr(importlib.import_module("_checked_persona"), "counter", 1)  # noqa: B010
vars(importlib.import_module("json"))["flag"] = True
sys.modules["json"].__dict__["flag"] = True

# A value that holds no text (a flag, a count, None) forges none, wherever it is written:
# a plugin loader's settings, written into a module it looks up by a name from its
# configuration, or under a name not known in the code.
vars(importlib.import_module(name))["enabled"] = True
importlib.import_module(name).__dict__["retries"] = 3
vars(sys.modules[name]).update(enabled=True, retries=3)
vars(sys.modules[name]).setdefault("timeout", 2.5)
setattr(importlib.import_module(name), "enabled", True)  # noqa: B010
setattr(sys.modules[name], name, None)
plugin = importlib.import_module(name)
plugin.__dict__["enabled"] = False
setattr(plugin, "retries", 3)  # noqa: B010
vars(importlib.import_module("_checked_persona"))[name] = 0
vars(sys.modules[name])["count"] = len(sys.argv)


# Text, a container of it, or Any stays reported there: the name may be a Final constant.
def load(loose: Any, rules: list[str]) -> None:
    # E: [veridic-literal] the namespace of a module the plugin cannot name
    vars(importlib.import_module(name))["GREETING"] = rules
    # E: [veridic-literal] the namespace of a module the plugin cannot name
    vars(importlib.import_module(name))["GREETING"] = reply.strip()
    # E: [veridic-literal] the namespace of a module the plugin cannot name
    vars(sys.modules[name]).update(enabled=True, GREETING=loose)
    # E: [veridic-literal] setattr() on a module the plugin cannot name
    setattr(importlib.import_module(name), "GREETING", reply)  # noqa: B010
    # E: [veridic-literal] update() called on the namespace of a module the plugin cannot name
    vars(sys.modules[name]).update(*[("GREETING", reply)])
    # E: [veridic-literal] update() called on the namespace of a module the plugin cannot name
    vars(sys.modules[name]).update(Texts(GREETING=reply), enabled=True)
    # E: [veridic-literal] setattr() on a module the plugin cannot name
    setattr(plugin, "GREETING", loose)  # noqa: B010
    # E: [veridic-forge] named by text not known in the code
    setattr(importlib.import_module("_checked_persona"), name, reply)
    # A class, a module or an object of a class of the code's own reaches text read as
    # written in code through its attributes (Prompts.HINT): none holds "no text".
    # E: [veridic-literal] setattr() on a module the plugin cannot name
    setattr(importlib.import_module(name), "Prompts", Texts)  # noqa: B010
    # E: [veridic-literal] the namespace of a module the plugin cannot name
    vars(sys.modules[name])[name] = sys
    # E: [veridic-literal] the namespace of a module the plugin cannot name
    vars(sys.modules[name]).update(enabled=True, prompts=Texts())
    # E: [veridic-literal] the namespace of a module the plugin cannot name
    vars(sys.modules[name])["hook"] = load
    # A variable declared trusted, or a Final constant, named in the code: reported
    # whatever the value (mypy would refuse it in _checked_persona.BANNER = True).
    # E: [veridic-forge] the namespace of module "_checked_persona"
    vars(importlib.import_module("_checked_persona"))["BANNER"] = True
    # E: [veridic-literal] setattr() on module "_constants" sets the Final constant "GREETING"
    setattr(sys.modules["_constants"], "GREETING", 3)  # noqa: B010
