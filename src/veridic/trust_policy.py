"""The old path of :mod:`veridic.text.trust_policy`, which it is (see ``veridic._moved``)."""

from veridic._moved import alias
from veridic.text.trust_policy import *  # noqa: F403  # the names, for type checkers

alias(__name__, "veridic.text.trust_policy")
