"""The old path of :mod:`veridic.text.wire`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.text.wire import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.text.wire")
