"""The old path of :mod:`veridic.run.gateway`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.run.gateway import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.run.gateway")
