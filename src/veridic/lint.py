"""The old path of :mod:`veridic.checks.lint`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.checks.lint import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.checks.lint")
