"""Old module paths of veridic, kept as aliases of the modules' new homes.

0.2 moved the flat modules into subpackages that follow the road data takes
(the README's layout table). Each old path is a file that makes itself the
new module: ``veridic.fence is veridic.text.fence``, so every name, private
helpers and monkeypatch targets included, behaves exactly as before, and a
type checker sees the names through the file's star import.
"""

from __future__ import annotations

import importlib
import sys


def alias(old: str, new: str) -> None:
    """Make the module being imported as ``old`` be the module ``new``.

    The import system hands back whatever ``sys.modules[old]`` holds once the
    old file has run, so importing the old path gives the new module itself.
    """
    sys.modules[old] = importlib.import_module(new)
