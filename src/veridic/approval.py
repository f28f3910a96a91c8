"""The old path of :mod:`veridic.run.approval`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.run.approval import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.run.approval")
