"""The old path of :mod:`veridic.tools.plan`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.tools.plan import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.tools.plan")
