"""A module that cannot be imported: the command says why and exits 2, no traceback."""

from __future__ import annotations

import importlib

from veridic import Registry

registry = Registry("broken")
importlib.import_module("a_dependency_that_is_not_installed")
