"""The old path of :mod:`veridic.text.compose`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.text.compose import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.text.compose")
