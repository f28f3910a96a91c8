"""The old path of :mod:`veridic.text.fields`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.text.fields import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.text.fields")
