"""The old path of :mod:`veridic.checks.manifest`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.checks.manifest import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.checks.manifest")
