"""The old path of :mod:`veridic.tools.tool`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.tools.tool import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.tools.tool")
