"""The old path of :mod:`veridic.tools.view`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.tools.view import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.tools.view")
